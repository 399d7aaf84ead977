#include "route/spend_alerts.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "route/route_metrics.h"
#include "route/spend_periods.h"
#include "serve/metrics.h"

namespace hone::route {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

SpendAlerts::SpendAlerts(const SpendConfig& config, Ledger& ledger, std::function<void()> flush)
    : config_(config), ledger_(ledger), flush_(std::move(flush)) {
  if (!config_.alert_webhook.empty()) hook_thread_ = std::thread([this] { WebhookLoop(); });
}

SpendAlerts::~SpendAlerts() {
  {
    std::lock_guard<std::mutex> lock(hook_mu_);
    stopping_ = true;
  }
  hook_cv_.notify_all();
  if (hook_thread_.joinable()) hook_thread_.join();
}

void SpendAlerts::Check(const std::vector<BudgetPeriod>& parts, const std::vector<int64_t>& spent) {
  for (size_t i = 0; i < parts.size(); ++i) {
    const BudgetPeriod& p = parts[i];
    const BudgetConfig* b = nullptr;
    for (const BudgetConfig& c : config_.budgets)
      if (c.name == p.budget) b = &c;
    if (!b || p.cap <= 0) continue;
    const double share = static_cast<double>(spent[i]) / static_cast<double>(p.cap);
    std::vector<double> thresholds = b->thresholds;
    thresholds.push_back(1.0);  // the cap itself always alerts
    for (double th : thresholds)
      if (share >= th) Fire(p, spent[i], th);
  }
}

bool SpendAlerts::ClaimFirst(const BudgetPeriod& p, int permille) {
  const std::string key = p.budget + "|" + p.period + "|" + std::to_string(permille);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!fired_.insert(key).second) return false;  // this process saw it already
  }
  auto first = ledger_.MarkAlert(p.budget, p.period, permille, Now());
  if (!first) {  // the ledger is down: try again on the next settle
    std::lock_guard<std::mutex> lock(mu_);
    fired_.erase(key);
    return false;
  }
  return *first;  // false: another replica fired it
}

void SpendAlerts::Fire(const BudgetPeriod& p, int64_t spent, double th) {
  const int permille = static_cast<int>(std::lround(th * 1000));
  if (!ClaimFirst(p, permille)) return;
  if (spent < 0) {
    spent = 0;
    if (flush_) flush_();
    if (auto u = ledger_.Usage({p.period}); u)
      for (const BudgetUsage& x : *u)
        if (x.budget == p.budget) spent = x.spent;
  }
  const bool monthly = p.period.rfind("M:", 0) == 0;
  const char* window = monthly ? "monthly" : "daily";
  if (permille >= 1000)
    std::fprintf(
        stderr,
        "[hone] ALERT budget '%s' %s %s is spent: %s of %s; its requests now go local or are refused\n",
        p.budget.c_str(), window, p.period.substr(2).c_str(), FormatMoney(spent).c_str(),
        FormatMoney(p.cap).c_str());
  else
    std::fprintf(stderr, "[hone] ALERT budget '%s' %s %s reached %d%%: %s of %s spent\n", p.budget.c_str(),
                 window, p.period.substr(2).c_str(), permille / 10, FormatMoney(spent).c_str(),
                 FormatMoney(p.cap).c_str());
  {
    std::lock_guard<std::mutex> lock(mu_);
    char th_label[16];
    std::snprintf(th_label, sizeof th_label, "%g", th);
    ++alerts_by_budget_[Labels({{"budget", p.budget}, {"window", window}, {"threshold", th_label}})];
  }
  if (!config_.alert_webhook.empty()) Post(p, window, permille, th, spent);
}

void SpendAlerts::Post(const BudgetPeriod& p, const char* window, int permille, double th, int64_t spent) {
  nlohmann::ordered_json body = {{"type", permille >= 1000 ? "budget_exhausted" : "budget_threshold"},
                                 {"budget", p.budget},
                                 {"window", window},
                                 {"period", p.period.substr(2)},
                                 {"threshold", th},
                                 {"spent", Money(spent)},
                                 {"cap", Money(p.cap)},
                                 {"share", static_cast<double>(spent) / static_cast<double>(p.cap)},
                                 {"time", Now()}};
  std::lock_guard<std::mutex> lock(hook_mu_);
  if (hook_queue_.size() < 1000) hook_queue_.push_back(body.dump());
  hook_cv_.notify_one();
}

void SpendAlerts::WebhookLoop() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(hook_mu_);
  for (;;) {
    hook_cv_.wait(lock, [&] { return stopping_ || !hook_queue_.empty(); });
    if (stopping_) return;
    std::string body = std::move(hook_queue_.front());
    hook_queue_.pop_front();
    lock.unlock();
    // Five tries, 1 s to 16 s apart; a webhook that stays down is logged and dropped.
    for (int attempt = 0; attempt < 5; ++attempt) {
      HttpSpec spec;
      spec.url = config_.alert_webhook;
      spec.headers = {"Content-Type: application/json"};
      spec.body = body;
      spec.connect_timeout_s = 5;
      spec.first_byte_timeout_s = 10;
      spec.total_timeout_s = 15;
      auto call = http_.Start(spec);
      const int status = call->WaitStatus(Clock::now() + std::chrono::seconds(15));
      if (status >= 200 && status < 300) {
        (void)call->ReadAll(Clock::now() + std::chrono::seconds(5), 1 << 16);
        break;
      }
      std::fprintf(stderr, "[hone] alert webhook: attempt %d failed (%s)\n", attempt + 1,
                   status ? ("HTTP " + std::to_string(status)).c_str() : call->error_text().c_str());
      std::unique_lock<std::mutex> wait(hook_mu_);
      if (hook_cv_.wait_for(wait, std::chrono::seconds(1 << attempt), [&] { return stopping_; })) return;
    }
    lock.lock();
  }
}

void SpendAlerts::RenderMetrics(std::string* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  *out += serve::FamilyHeader("hone_budget_alerts_total", "counter", "Budget threshold alerts fired");
  for (const auto& [l, n] : alerts_by_budget_)
    *out += "hone_budget_alerts_total{" + l + "} " + std::to_string(n) + "\n";
}

}  // namespace hone::route
