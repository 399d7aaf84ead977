// Spend and budgets: what each routed request costs, and the caps that hold
// under any concurrency.
//
//   Reserve (before a request goes to a priced upstream)
//     worst case = prompt bound x input price + max_tokens x output price,
//     held on every budget period that covers the request (global, the
//     upstream's, the tenant's; monthly and daily) in one transaction, or on
//     none: then the request does not go (ledger.h has the SQL).
//   Settle (after it, streams cut short included)
//     the real cost from the upstream's usage (or counted here, marked
//     estimated), one ledger row keyed by the request id, the hold released.
//   Release (it failed before costing anything)
//
// Alerts (thresholds, webhook) are SpendAlerts (spend_alerts.h); the reports
// (/hone/spend, metrics) are in spend_report.cc; the calendar and money
// helpers in spend_periods.h.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "route/config.h"
#include "route/ledger.h"
#include "route/ledger_writer.h"
#include "route/spend_alerts.h"
#include "route/spend_periods.h"
#include "backend/backend.h"

namespace hone::route {

struct Price {
  double input_per_m = 0, cached_per_m = 0, output_per_m = 0;
  bool free() const { return input_per_m == 0 && cached_per_m == 0 && output_per_m == 0; }
};

// One request's part at one target: reserved before, settled once after.
struct SpendHold {
  std::string id;  // unique per part; the ledger's key
  std::string route, upstream, model, tenant;
  Price price;
  std::vector<BudgetPeriod> parts;  // the periods it counts against
  int64_t reserved = 0;             // micro-units held on each part
  std::string day, month;
  bool done = false;  // settled or released
};

class Spend {
 public:
  // Opens the ledger: SQLite at state_dir/ledger.db, or PostgreSQL.
  // `serving`: for hone serve. A SQLite ledger is then owned by this process
  // (an exclusive lock on state_dir/ledger.lock; a second server on the same
  // folder is refused) and its reservations are kept in memory: they cost no
  // write, and they end with the process. hone spend opens it without.
  static Result<std::unique_ptr<Spend>> Open(const SpendConfig& config, const std::string& state_dir,
                                             bool serving = true);
  ~Spend();

  // Holds the worst case of a request to a priced target. Free targets get
  // a hold with no reservation (their row still goes to the ledger). When a
  // budget cannot take it: kRateLimited naming the budget and period, with
  // retry_after_s until the period ends. While the hold lives, Tick renews
  // its expiry, so only a dead process's reservations expire.
  Result<std::shared_ptr<SpendHold>> Reserve(const std::string& route, const std::string& upstream,
                                             const std::string& model, const std::string& tenant,
                                             const Price& price, int64_t prompt_token_bound, int max_tokens);
  // `usage` from the target; `estimated` when the target reported none and
  // the counts are hone's. Safe to call twice (the second is a no-op).
  void Settle(SpendHold& hold, const backend::Usage& usage, bool estimated, const std::string& outcome);
  void Release(SpendHold& hold);

  int reserve_max_tokens() const { return config_.reserve_max_tokens; }
  const SpendConfig& config() const { return config_; }
  Ledger& ledger() { return *ledger_; }

  // Frees expired reservations; called about once a second.
  void Tick();
  // GET /hone/spend and `hone spend --json`: a month's totals (default: this
  // month's, to date), the budgets now, and the reservations held.
  std::string Json(const std::string& month = "");
  void RenderMetrics(std::string* out);

 private:
  Spend(SpendConfig config, std::unique_ptr<Ledger> ledger, bool holds_in_memory, int lock_fd,
        std::unique_ptr<LedgerWriter> writer);
  // Every settled row in the ledger before it is read back (a bounded wait).
  void FlushWriter() {
    if (writer_) writer_->Flush();
  }
  // In-memory reservations (holds_in_memory_): all parts or none.
  Status ReserveInMemory(const std::vector<BudgetPeriod>& parts, int64_t amount, BudgetPeriod* refused);
  void UnreserveInMemory(const std::vector<BudgetPeriod>& parts, int64_t amount);
  std::vector<BudgetPeriod> PartsFor(const std::string& upstream, const std::string& tenant,
                                     const PeriodKeys& keys) const;
  bool SettleThroughJournal(const SpendHold& hold, const LedgerEntry& e);
  // This period's usage of every budget, "budget|period" -> usage (holds from memory where kept there).
  std::map<std::string, BudgetUsage> UsageNow(const PeriodKeys& keys);

  const SpendConfig config_;
  std::unique_ptr<Ledger> ledger_;
  // A SQLite ledger this process owns: settled rows go through its journal
  // (ledger_writer.h), off the request path. Destroyed before ledger_.
  std::unique_ptr<LedgerWriter> writer_;
  const bool holds_in_memory_;
  const int lock_fd_;  // the SQLite ledger's owner lock (-1: none); closed with the process
  struct Held {
    bool loaded = false;  // spent read from the ledger
    int64_t spent = 0, reserved = 0;
  };
  std::mutex mem_mu_;
  std::map<std::pair<std::string, std::string>, Held> mem_;  // GUARDED_BY(mem_mu_): (budget, period)
  std::atomic<uint64_t> seq_{0};
  uint64_t ticks_ = 0;      // Tick's own (one thread)
  double last_renew_ = 0;   // Tick's own
  const std::string id_prefix_;  // random per process: ids from replicas never collide

  std::mutex mu_;  // guards this process's counters and live holds below
  std::map<std::string, double> spent_by_upstream_;    // GUARDED_BY(mu_): this process's settled cost
  std::map<std::string, long> refusals_by_budget_;     // GUARDED_BY(mu_)
  long holds_in_flight_ = 0;                           // GUARDED_BY(mu_)
  std::set<std::string> live_;                         // GUARDED_BY(mu_): ids of reservations in flight
  long ledger_errors_ = 0;                             // GUARDED_BY(mu_)

  std::unique_ptr<SpendAlerts> alerts_;  // after ledger_ and writer_, which it uses
};

}  // namespace hone::route
