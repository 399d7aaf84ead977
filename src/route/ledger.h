// The spend ledger: settled requests (one row each, keyed by request id),
// budget usage per period (spent and reserved), reservations with an expiry,
// and which alert thresholds have fired. One implementation over SqlConn, so
// SQLite (one process) and PostgreSQL (replicas sharing one budget) run the
// same statements.
//
// Money is int64 micro-units of the configured currency (1e-6), so sums are
// exact and a cap that fits ten requests admits ten, not nine or eleven.
//
// A reservation is all-or-nothing over its budget periods: inside one
// transaction, each period's row is updated with the conditional
//   UPDATE budget_usage SET reserved = reserved + $amount
//   WHERE budget = $b AND period = $p AND spent + reserved + $amount <= $cap
// and the first that matches no row rolls the whole reservation back. Rows
// are locked in a fixed order (budget, period), so two transactions cannot
// deadlock. Under PostgreSQL's READ COMMITTED a concurrent UPDATE waits and
// re-checks the condition on the committed row: the cap holds across
// processes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "route/sql.h"
#include "util/result.h"

namespace hone::route {

// One budget's cap over one period: "M:2026-12" or "D:2026-12-01".
struct BudgetPeriod {
  std::string budget;
  std::string period;
  int64_t cap = 0;  // micro-units
};

struct LedgerEntry {
  std::string id;  // the request (part) id: settling twice is a no-op
  double time = 0;  // unix seconds
  std::string day, month;  // in the ledger's time zone: "2026-12-01", "2026-12"
  std::string tenant;      // the client key's fingerprint, or "" without keys
  std::string route, upstream, model;
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;
  int64_t cost = 0;  // micro-units
  bool estimated = false;  // the upstream reported no usage: counted here
  std::string outcome;     // "ok", "cancelled", "error: ...", "length", ...
};

struct BudgetUsage {
  std::string budget, period;
  int64_t spent = 0, reserved = 0;
};

// A spend total for one key of a grouping (an upstream, a tenant, a day).
struct SpendTotal {
  std::string key;
  int64_t requests = 0, prompt_tokens = 0, completion_tokens = 0, cost = 0, estimated = 0;
};

struct SpendTotals {
  std::vector<SpendTotal> by_upstream, by_tenant, by_day, by_route;
  SpendTotal all;
};

class Ledger {
 public:
  // Creates the tables where missing.
  static Result<std::unique_ptr<Ledger>> Open(std::unique_ptr<SqlConn> conn);

  // Reserves `amount` on every period in `parts`, or on none. A period that
  // cannot take it is returned as the error's budget in `*refused` (when not
  // null), with code kRateLimited. `expires`: unix seconds.
  Status Reserve(const std::string& id, int64_t amount, std::vector<BudgetPeriod> parts, double expires,
                 BudgetPeriod* refused = nullptr);
  // Writes the entry and adds its cost to `parts`' spent, releasing the
  // reservation `entry.id` (if it has not expired). Returns false when that id
  // was already settled: nothing changes. `spent_after`: each part's spent.
  // `held_here`: false when the caller kept the reservation itself (Spend's
  // in-memory holds on a SQLite ledger it owns); nothing is looked up then.
  Result<bool> Settle(const LedgerEntry& entry, const std::vector<BudgetPeriod>& parts,
                      std::vector<int64_t>* spent_after = nullptr, bool held_here = true);
  // Entries whose reservations the caller kept itself (LedgerWriter's), in
  // one transaction: all or none. Returns how many were new (the rest were
  // settled before and change nothing).
  struct Settlement {
    LedgerEntry entry;
    std::vector<BudgetPeriod> parts;
  };
  Result<int> SettleMany(const std::vector<Settlement>& batch);
  // Drops every reservation (an owner that just started: they are a dead
  // process's) and zeroes what they held.
  Status ResetReservations();
  // Gives back a reservation that cost nothing (the request never ran).
  Status Release(const std::string& id);
  // Moves the expiry of reservations still in use (their process is alive).
  Status Renew(const std::vector<std::string>& ids, double expires);
  // Releases reservations past their expiry (left by a process that died).
  // Returns how many periods were freed.
  Result<int> ExpireReservations(double now);
  // True the first time (budget, period, threshold) is marked, over every
  // process that shares the database.
  Result<bool> MarkAlert(const std::string& budget, const std::string& period, int permille, double now);

  Result<std::vector<BudgetUsage>> Usage(const std::vector<std::string>& periods);
  Result<SpendTotals> Totals(const std::string& month);
  // Every entry of the month, oldest first (hone spend --csv).
  Result<std::vector<LedgerEntry>> Entries(const std::string& month);
  // Reservations in flight (not expired) and their sum.
  Result<std::pair<int64_t, int64_t>> InFlight(double now);
  struct Held {
    std::string id;
    int64_t amount = 0;
    double expires = 0;
  };
  // Every reservation still held, expired or not (the oldest first).
  Result<std::vector<Held>> HeldReservations();
  // A route's gray release, kept across restarts (canary.h).
  struct CanaryRow {
    std::string route, target, state, reason;
    int64_t step = 0;
    double step_started = 0;  // unix seconds
  };
  Status SaveCanary(const CanaryRow& row, double now);
  Result<std::optional<CanaryRow>> LoadCanary(const std::string& route);
  const char* kind() const { return conn_->kind(); }
  void Maintain() { conn_->Maintain(); }

 private:
  explicit Ledger(std::unique_ptr<SqlConn> conn) : conn_(std::move(conn)) {}
  std::unique_ptr<SqlConn> conn_;
};

}  // namespace hone::route
