// Spend's reports: GET /hone/spend (and `hone spend --json`) and the
// budget and cost series on /metrics. Read-only views of the ledger and of
// this process's counters.
#include <nlohmann/json.hpp>

#include "route/route_metrics.h"
#include "route/spend.h"
#include "serve/metrics.h"

namespace hone::route {
namespace {

using json = nlohmann::ordered_json;

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A series' label set for one budget window.
std::string BudgetLabels(const std::string& budget, const char* window) {
  return Labels({{"budget", budget}, {"window", window}});
}

}  // namespace

std::map<std::string, BudgetUsage> Spend::UsageNow(const PeriodKeys& keys) {
  std::map<std::string, BudgetUsage> by;
  FlushWriter();
  if (auto usage = ledger_->Usage({"M:" + keys.month, "D:" + keys.day}); usage)
    for (const BudgetUsage& u : *usage) by[u.budget + "|" + u.period] = u;
  if (holds_in_memory_) {  // the holds are this process's, in memory
    std::lock_guard<std::mutex> lock(mem_mu_);
    for (const auto& [key, h] : mem_) {
      BudgetUsage& u = by[key.first + "|" + key.second];
      u.budget = key.first;
      u.period = key.second;
      u.reserved = h.reserved;
    }
  }
  return by;
}

std::string Spend::Json(const std::string& for_month) {
  const double now = Now();
  const PeriodKeys keys = PeriodsAt(now);
  const std::string month = for_month.empty() ? keys.month : for_month;
  json out = {
      {"month", month}, {"day", keys.day}, {"timezone", config_.timezone}, {"ledger", ledger_->kind()}};
  FlushWriter();
  auto totals = ledger_->Totals(month);
  auto group = [](const std::vector<SpendTotal>& v) {
    json a = json::array();
    for (const SpendTotal& t : v)
      a.push_back({{"key", t.key},
                   {"requests", t.requests},
                   {"prompt_tokens", t.prompt_tokens},
                   {"completion_tokens", t.completion_tokens},
                   {"cost", Money(t.cost)},
                   {"estimated", t.estimated}});
    return a;
  };
  if (totals) {
    out["total"] = {{"requests", totals->all.requests},
                    {"prompt_tokens", totals->all.prompt_tokens},
                    {"completion_tokens", totals->all.completion_tokens},
                    {"cost", Money(totals->all.cost)},
                    {"estimated", totals->all.estimated}};
    out["by_upstream"] = group(totals->by_upstream);
    out["by_tenant"] = group(totals->by_tenant);
    out["by_route"] = group(totals->by_route);
    out["by_day"] = group(totals->by_day);
  } else {
    out["error"] = totals.error().message;
  }
  std::map<std::string, BudgetUsage> by = UsageNow(keys);
  json budgets = json::array();
  for (const BudgetConfig& b : config_.budgets) {
    json j = {{"name", b.name},
              {"scope", b.scope == BudgetConfig::Scope::kGlobal     ? std::string("global")
                        : b.scope == BudgetConfig::Scope::kUpstream ? "upstream:" + b.scope_name
                                                                    : "tenant:" + b.scope_name},
              {"thresholds", b.thresholds}};
    auto window = [&](const char* name, int64_t cap, const std::string& period) {
      if (cap <= 0) return;
      const BudgetUsage u = by[b.name + "|" + period];
      j[name] = {{"period", period.substr(2)},
                 {"cap", Money(cap)},
                 {"spent", Money(u.spent)},
                 {"reserved", Money(u.reserved)},
                 {"remaining", Money(std::max<int64_t>(0, cap - u.spent - u.reserved))},
                 {"share", static_cast<double>(u.spent) / static_cast<double>(cap)},
                 {"exhausted", u.spent >= cap}};
    };
    window("monthly", b.monthly, "M:" + keys.month);
    window("daily", b.daily, "D:" + keys.day);
    budgets.push_back(std::move(j));
  }
  out["budgets"] = std::move(budgets);
  json held = json::array();
  if (holds_in_memory_) {
    std::lock_guard<std::mutex> lock(mu_);
    out["reservations_in_flight"] = {{"count", live_.size()}, {"held_in", "memory"}};
    for (const std::string& id : live_) held.push_back({{"id", id}});
  } else if (auto f = ledger_->InFlight(now); f) {
    out["reservations_in_flight"] = {{"count", f->first}, {"amount", Money(f->second)}};
  }
  if (auto h = holds_in_memory_ ? Result<std::vector<Ledger::Held>>(std::vector<Ledger::Held>{})
                                : ledger_->HeldReservations();
      h)
    for (const Ledger::Held& r : *h)
      held.push_back(
          {{"id", r.id}, {"amount", Money(r.amount)}, {"expires_in_s", std::max(0.0, r.expires - now)}});
  out["reservations"] = std::move(held);
  return out.dump();
}

void Spend::RenderMetrics(std::string* out) {
  const PeriodKeys keys = PeriodsAt(Now());
  std::map<std::string, BudgetUsage> by = UsageNow(keys);
  std::string spent, remaining, reserved, cap;
  for (const BudgetConfig& b : config_.budgets) {
    for (auto [window, limit, period] : {std::tuple{"monthly", b.monthly, "M:" + keys.month},
                                         std::tuple{"daily", b.daily, "D:" + keys.day}}) {
      if (limit <= 0) continue;
      const BudgetUsage u = by[b.name + "|" + period];
      std::string l = "{";  // (built in steps: GCC 12 warns falsely on "{" + std::string&&)
      l += BudgetLabels(b.name, window);
      l += "}";
      cap += "hone_budget_cap" + l + " " + std::to_string(Money(limit)) + "\n";
      spent += "hone_budget_spent" + l + " " + std::to_string(Money(u.spent)) + "\n";
      reserved += "hone_budget_reserved" + l + " " + std::to_string(Money(u.reserved)) + "\n";
      remaining += "hone_budget_remaining" + l + " " +
                   std::to_string(Money(std::max<int64_t>(0, limit - u.spent - u.reserved))) + "\n";
    }
  }
  if (!cap.empty()) {
    *out += serve::FamilyHeader("hone_budget_cap", "gauge", "Budget cap, in the price currency") + cap;
    *out += serve::FamilyHeader("hone_budget_spent", "gauge", "Spent in the budget period") + spent;
    *out += serve::FamilyHeader("hone_budget_reserved", "gauge", "Held for requests in flight") + reserved;
    *out += serve::FamilyHeader("hone_budget_remaining", "gauge", "Cap minus spent and reserved") + remaining;
  }
  std::lock_guard<std::mutex> lock(mu_);
  *out += serve::FamilyHeader("hone_spend_cost_total", "counter",
                              "Cost settled per upstream, in the price currency");
  for (const auto& [up, v] : spent_by_upstream_)
    *out += "hone_spend_cost_total{" + Labels({{"upstream", up}}) + "} " + std::to_string(v) + "\n";
  *out += serve::FamilyHeader("hone_spend_reservations_in_flight", "gauge",
                              "Budget holds of requests in flight") +
          "hone_spend_reservations_in_flight " + std::to_string(holds_in_flight_) + "\n";
  *out += serve::FamilyHeader("hone_budget_refusals_total", "counter", "Requests a budget refused");
  for (const auto& [b, n] : refusals_by_budget_)
    *out += "hone_budget_refusals_total{" + Labels({{"budget", b}}) + "} " + std::to_string(n) + "\n";
  alerts_->RenderMetrics(out);
  *out += serve::FamilyHeader("hone_spend_ledger_errors_total", "counter", "Ledger writes that failed") +
          "hone_spend_ledger_errors_total " +
          std::to_string(ledger_errors_ + (writer_ ? writer_->errors() : 0)) + "\n";
}

}  // namespace hone::route
