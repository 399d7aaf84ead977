// The budget path's own cost: one Spend::Reserve (the worst case held on a
// global monthly budget and an upstream's monthly and daily caps, in one
// transaction) plus one Spend::Settle (the ledger row, the spend, the hold
// released), as the router pays it before and after every priced request.
//
//   ledger_path --ledger sqlite --state-dir DIR --clients 64 --ops 200 --reps 5
//   ledger_path --ledger postgres --conninfo-env HONE_PG_URL ...
//
// Prints one JSON object: per repetition the p50 and p99 of reserve+settle in
// milliseconds, and their mean with a 95% confidence interval over the
// repetitions. bench/budget_path.py runs it on both databases and writes
// bench/results.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "route/spend.h"

using namespace hone;

namespace {

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

nlohmann::json MeanCi(const std::vector<double>& x) {
  double m = 0;
  for (double v : x) m += v;
  m /= static_cast<double>(x.size());
  double s2 = 0;
  for (double v : x) s2 += (v - m) * (v - m);
  const double sd = x.size() > 1 ? std::sqrt(s2 / static_cast<double>(x.size() - 1)) : 0;
  // t(0.975) for n-1 degrees of freedom, n <= 10; 1.96 beyond.
  static const double kT[] = {0, 12.71, 4.30, 3.18, 2.78, 2.57, 2.45, 2.36, 2.31, 2.26};
  const double t = x.size() < 10 ? kT[x.size() - 1] : 1.96;
  return {{"mean", m}, {"ci95", t * sd / std::sqrt(static_cast<double>(x.size()))}, {"runs", x}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string ledger = "sqlite", state_dir = "/tmp/hone-ledger-bench", conninfo_env;
  int clients = 1, ops = 500, reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--ledger") ledger = v;
    else if (k == "--state-dir") state_dir = v;
    else if (k == "--conninfo-env") conninfo_env = v;
    else if (k == "--clients") clients = std::atoi(v.c_str());
    else if (k == "--ops") ops = std::atoi(v.c_str());
    else if (k == "--reps") reps = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  route::SpendConfig config;
  config.ledger = ledger;
  if (ledger == "postgres") {
    const char* url = conninfo_env.empty() ? nullptr : std::getenv(conninfo_env.c_str());
    if (!url) {
      std::fprintf(stderr, "--conninfo-env names no set variable\n");
      return 2;
    }
    config.postgres_url = url;
  }
  const std::string tag = std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  config.budgets.push_back({"bench-global-" + tag, route::BudgetConfig::Scope::kGlobal, "", 1'000'000'000'000, 0, {}});
  config.budgets.push_back(
      {"bench-cloud-" + tag, route::BudgetConfig::Scope::kUpstream, "cloud", 1'000'000'000'000, 100'000'000'000, {}});
  auto spend = route::Spend::Open(config, state_dir);
  if (!spend) {
    std::fprintf(stderr, "%s\n", spend.error().ToString().c_str());
    return 1;
  }
  route::Price price{0.15, 0.075, 0.60};
  backend::Usage usage;
  usage.prompt_tokens = 300;
  usage.completion_tokens = 120;
  nlohmann::json out = {{"ledger", ledger}, {"clients", clients}, {"ops_per_client", ops}};
  std::vector<double> p50s, p99s, rates;
  // As in the server: upkeep (expiry sweep, WAL checkpoint) once a second, off the request path.
  std::atomic<bool> stop{false};
  std::thread upkeep([&] {
    while (!stop) {
      (*spend)->Tick();
      for (int i = 0; i < 10 && !stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  for (int rep = 0; rep < reps; ++rep) {
    std::vector<std::vector<double>> lat(static_cast<size_t>(clients));
    std::vector<std::thread> threads;
    const auto t0 = std::chrono::steady_clock::now();
    for (int c = 0; c < clients; ++c)
      threads.emplace_back([&, c] {
        for (int i = 0; i < ops; ++i) {
          const auto a = std::chrono::steady_clock::now();
          auto hold = (*spend)->Reserve("support", "cloud", "m", "", price, 400, 512);
          if (!hold) {
            std::fprintf(stderr, "reserve: %s\n", hold.error().ToString().c_str());
            std::exit(1);
          }
          (*spend)->Settle(**hold, usage, false, "ok");
          lat[static_cast<size_t>(c)].push_back(
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
        }
      });
    for (auto& t : threads) t.join();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::vector<double> all;
    for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    p50s.push_back(Quantile(all, 0.5));
    p99s.push_back(Quantile(all, 0.99));
    rates.push_back(static_cast<double>(all.size()) / secs);
  }
  stop = true;
  upkeep.join();
  out["p50_ms"] = MeanCi(p50s);
  out["p99_ms"] = MeanCi(p99s);
  out["requests_per_s"] = MeanCi(rates);
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
