// `hone spend`: what the routed requests cost, from the ledger the server
// writes (the same numbers as GET /hone/spend): month-to-date totals by
// upstream, tenant, route and day, and each budget's state. --json for
// scripts, --csv for every ledger row (accounting exports).
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "route/config.h"
#include "route/spend.h"
#include "api/serve_settings.h"
#include "serve/config.h"

namespace hone::cli {
namespace {

struct SpendArgs {
  std::string config_file;
  std::string state_dir;
  std::string month;
  bool json = false;
  bool csv = false;
};

std::string Csv(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char c : v) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void PrintGroup(const char* title, const nlohmann::json& rows) {
  if (!rows.is_array() || rows.empty()) return;
  std::printf("\n%s\n", title);
  std::printf("  %-28s %9s %12s %12s %12s\n", "", "requests", "tokens in", "tokens out", "cost");
  for (const auto& r : rows) {
    std::string key = r["key"].get<std::string>();
    if (key.empty()) key = "(no key)";
    std::printf("  %-28s %9lld %12lld %12lld %12.4f%s\n", key.c_str(), r["requests"].get<long long>(),
                r["prompt_tokens"].get<long long>(), r["completion_tokens"].get<long long>(),
                r["cost"].get<double>(), r["estimated"].get<long long>() ? "  (some estimated)" : "");
  }
}

int Run(const SpendArgs& a) {
  std::string file = a.config_file;
  if (file.empty())
    if (const char* env = std::getenv("HONE_CONFIG")) file = env;
  api::ServeSettings settings;
  serve::ServeConfig& sc = settings.serve;
  route::RouterConfig rc;
  if (!file.empty()) {
    if (Status s = api::ApplyToml(settings, file); !s) return Fail(s.error().ToString(), 2);
    auto r = route::LoadRouterConfig(file, [](const char* n) { return std::getenv(n); });
    if (!r) return Fail(r.error().ToString(), 2);
    rc = std::move(*r);
  }
  if (Status s = api::ApplyEnv(settings, [](const char* n) { return std::getenv(n); }); !s)
    return Fail(s.error().ToString(), 2);
  const std::string state_dir =
      !a.state_dir.empty() ? a.state_dir : !sc.state_dir.empty() ? sc.state_dir : serve::DefaultStateDir();
  if (Status tz = route::SetLedgerTimeZone(rc.spend.timezone); !tz) return Fail(tz.error().ToString(), 2);
  auto spend = route::Spend::Open(rc.spend, state_dir, /*serving=*/false);
  if (!spend) return Fail(spend.error().ToString(), 1);
  if (a.csv) {
    const std::string month = a.month.empty() ? route::PeriodsAt(static_cast<double>(std::time(nullptr))).month : a.month;
    auto rows = (*spend)->ledger().Entries(month);
    if (!rows) return Fail(rows.error().ToString(), 1);
    std::printf(
        "id,time,day,tenant,route,upstream,model,prompt_tokens,cached_tokens,completion_tokens,cost,estimated,"
        "outcome\n");
    for (const route::LedgerEntry& e : *rows)
      std::printf("%s,%.3f,%s,%s,%s,%s,%s,%lld,%lld,%lld,%.6f,%d,%s\n", Csv(e.id).c_str(), e.time, e.day.c_str(),
                  Csv(e.tenant).c_str(), Csv(e.route).c_str(), Csv(e.upstream).c_str(), Csv(e.model).c_str(),
                  static_cast<long long>(e.prompt_tokens), static_cast<long long>(e.cached_tokens),
                  static_cast<long long>(e.completion_tokens), static_cast<double>(e.cost) / 1e6,
                  e.estimated ? 1 : 0, Csv(e.outcome).c_str());
    return 0;
  }
  const std::string text = (*spend)->Json(a.month);
  if (a.json) {
    std::printf("%s\n", text.c_str());
    return 0;
  }
  const auto j = nlohmann::json::parse(text);
  std::printf("Spend in %s (%s time, %s ledger%s)\n", j["month"].get<std::string>().c_str(),
              j["timezone"].get<std::string>().c_str(), j["ledger"].get<std::string>().c_str(),
              rc.spend.ledger == "sqlite" ? (" at " + state_dir + "/ledger.db").c_str() : "");
  if (j.contains("error")) return Fail(j["error"].get<std::string>(), 1);
  const auto& t = j["total"];
  std::printf("  total %lld requests, %lld tokens in, %lld tokens out, cost %.4f\n", t["requests"].get<long long>(),
              t["prompt_tokens"].get<long long>(), t["completion_tokens"].get<long long>(), t["cost"].get<double>());
  PrintGroup("By upstream", j["by_upstream"]);
  PrintGroup("By tenant (client key)", j["by_tenant"]);
  PrintGroup("By route", j["by_route"]);
  PrintGroup("By day", j["by_day"]);
  if (!j["budgets"].empty()) {
    std::printf("\nBudgets\n");
    for (const auto& b : j["budgets"]) {
      for (const char* w : {"monthly", "daily"}) {
        if (!b.contains(w)) continue;
        const auto& x = b[w];
        std::printf("  %-20s %-22s %-7s %-10s spent %10.4f of %10.4f (%5.1f%%)  reserved %.4f  remaining %.4f%s\n",
                    b["name"].get<std::string>().c_str(), b["scope"].get<std::string>().c_str(), w,
                    x["period"].get<std::string>().c_str(), x["spent"].get<double>(), x["cap"].get<double>(),
                    100 * x["share"].get<double>(), x["reserved"].get<double>(), x["remaining"].get<double>(),
                    x["exhausted"].get<bool>() ? "  SPENT" : "");
      }
    }
  }
  if (j.contains("reservations_in_flight"))
    std::printf("\nReservations held: %lld (%.4f)\n", j["reservations_in_flight"]["count"].get<long long>(),
                j["reservations_in_flight"]["amount"].get<double>());
  return 0;
}

Runner AddSpendCommand(CLI::App& app) {
  auto a = std::make_shared<SpendArgs>();
  CLI::App* cmd = app.add_subcommand("spend", "What routed requests cost: totals by upstream, tenant, day; budgets");
  cmd->add_option("-c,--config", a->config_file, "The hone serve config (budgets, [spend], state_dir)");
  cmd->add_option("--state-dir", a->state_dir, "The ledger's folder (default: the config's, else ~/.local/state/hone)");
  cmd->add_option("--month", a->month, "A month other than this one (YYYY-MM)");
  cmd->add_flag("--json", a->json, "Print JSON (the same as GET /hone/spend)");
  cmd->add_flag("--csv", a->csv, "Print every ledger row of the month as CSV");
  return [a]() -> int {
    const std::string& m = a->month;
    const auto digits = [&](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i)
        if (!std::isdigit(static_cast<unsigned char>(m[i]))) return false;
      return true;
    };
    if (!m.empty() && (m.size() != 7 || m[4] != '-' || !digits(0, 4) || !digits(5, 7) || m.substr(5) < "01" ||
                       m.substr(5) > "12"))
      return Fail("--month must look like 2026-12, not '" + m + "'", 2);
    return Run(*a);
  };
}

const CommandRegistrar kRegistrar(95, &AddSpendCommand);

}  // namespace
}  // namespace hone::cli
