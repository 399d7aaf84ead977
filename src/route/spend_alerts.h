// Budget alerts: the first time a period's spend crosses one of its budget's
// thresholds (or the cap itself), a log line, a metric and, when configured,
// a webhook POST. "First" is agreed by every process sharing the ledger (it
// records each alert once). The webhook is POSTed on its own thread, five
// tries 1 s to 16 s apart; requests never wait on it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "route/config.h"
#include "route/http_client.h"
#include "route/ledger.h"

namespace hone::route {

class SpendAlerts {
 public:
  // `flush` makes settled rows readable before a refusal's spend is read back.
  SpendAlerts(const SpendConfig& config, Ledger& ledger, std::function<void()> flush);
  ~SpendAlerts();  // stops the webhook thread (queued POSTs are dropped)

  // After a settle: `spent[i]` is what `parts[i]` has spent now.
  void Check(const std::vector<BudgetPeriod>& parts, const std::vector<int64_t>& spent);
  // One threshold of one period. `spent` < 0: the cap refused a reservation
  // (the spend is read back from the ledger for the message).
  void Fire(const BudgetPeriod& p, int64_t spent, double threshold);
  // hone_budget_alerts_total.
  void RenderMetrics(std::string* out) const;

 private:
  // Claims the alert for this process and then across the ledger; false
  // when it fired already or the ledger cannot say (tried again next time).
  bool ClaimFirst(const BudgetPeriod& p, int permille);
  void Post(const BudgetPeriod& p, const char* window, int permille, double threshold, int64_t spent);
  void WebhookLoop();

  const SpendConfig& config_;
  Ledger& ledger_;
  const std::function<void()> flush_;

  mutable std::mutex mu_;                         // guards the two below
  std::set<std::string> fired_;                   // GUARDED_BY(mu_): "budget|period|permille" seen here
  std::map<std::string, long> alerts_by_budget_;  // GUARDED_BY(mu_): labels -> count

  HttpClient http_;     // the webhook's
  std::mutex hook_mu_;  // guards the queue and stopping_; hook_cv_ wakes the thread
  std::condition_variable hook_cv_;
  std::deque<std::string> hook_queue_;  // GUARDED_BY(hook_mu_): JSON bodies to POST
  bool stopping_ = false;               // GUARDED_BY(hook_mu_)
  std::thread hook_thread_;
};

}  // namespace hone::route
