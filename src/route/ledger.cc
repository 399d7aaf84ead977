#include "route/ledger.h"

#include <algorithm>
#include <map>

namespace hone::route {
namespace {

constexpr const char* kSchema[] = {
    "CREATE TABLE IF NOT EXISTS budget_usage (budget TEXT NOT NULL, period TEXT NOT NULL,"
    " spent BIGINT NOT NULL DEFAULT 0, reserved BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (budget, period))",
    // One row per reservation; `parts` lists its periods as "budget\x1fperiod\x1e...".
    "CREATE TABLE IF NOT EXISTS reservations (id TEXT PRIMARY KEY, parts TEXT NOT NULL,"
    " amount BIGINT NOT NULL, expires BIGINT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS reservations_expires ON reservations (expires)",
    "CREATE TABLE IF NOT EXISTS ledger (id TEXT PRIMARY KEY, time_ms BIGINT NOT NULL, day TEXT NOT NULL,"
    " month TEXT NOT NULL, tenant TEXT NOT NULL, route TEXT NOT NULL, upstream TEXT NOT NULL,"
    " model TEXT NOT NULL, prompt_tokens BIGINT NOT NULL, cached_tokens BIGINT NOT NULL,"
    " completion_tokens BIGINT NOT NULL, cost BIGINT NOT NULL, estimated BIGINT NOT NULL,"
    " outcome TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS ledger_month ON ledger (month)",
    "CREATE TABLE IF NOT EXISTS canaries (route TEXT PRIMARY KEY, target TEXT NOT NULL, state TEXT NOT NULL,"
    " step BIGINT NOT NULL, step_started_ms BIGINT NOT NULL, reason TEXT NOT NULL, updated_ms BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS alerts (budget TEXT NOT NULL, period TEXT NOT NULL, permille BIGINT NOT NULL,"
    " time_ms BIGINT NOT NULL, PRIMARY KEY (budget, period, permille))",
};

int64_t Int(const std::optional<std::string>& v) { return v ? std::stoll(*v) : 0; }
int64_t Ms(double unix_s) { return static_cast<int64_t>(unix_s * 1000); }

bool ByKey(const BudgetPeriod& a, const BudgetPeriod& b) {
  return std::tie(a.budget, a.period) < std::tie(b.budget, b.period);
}

std::string EncodeParts(const std::vector<BudgetPeriod>& parts) {
  std::string out;
  for (const BudgetPeriod& p : parts) out += p.budget + '\x1f' + p.period + '\x1e';
  return out;
}

std::vector<std::pair<std::string, std::string>> DecodeParts(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t unit = text.find('\x1f', at), rec = text.find('\x1e', at);
    if (unit == std::string::npos || rec == std::string::npos || unit > rec) break;
    out.emplace_back(text.substr(at, unit - at), text.substr(unit + 1, rec - unit - 1));
    at = rec + 1;
  }
  return out;
}

// Takes the reservation `id` out; returns the amount it held (0: none left,
// it expired or never was). Its periods are given back by the caller.
Result<int64_t> TakeReservation(SqlConn& c, const std::string& id, std::string* parts) {
  auto rows = c.Exec("DELETE FROM reservations WHERE id = $1 RETURNING parts, amount", {id});
  if (!rows) return rows.error();
  if (rows->empty()) return int64_t{0};
  if (parts) *parts = *(*rows)[0][0];
  return Int((*rows)[0][1]);
}

Status UnreserveParts(SqlConn& c, const std::string& parts, int64_t amount) {
  for (const auto& [budget, period] : DecodeParts(parts)) {
    auto u = c.Exec("UPDATE budget_usage SET reserved = reserved - $1 WHERE budget = $2 AND period = $3",
                    {amount, budget, period});
    if (!u) return u.error();
  }
  return Status::Ok();
}

Status ReleaseLocked(SqlConn& c, const std::string& id) {
  std::string parts;
  auto amount = TakeReservation(c, id, &parts);
  if (!amount) return amount.error();
  return *amount ? UnreserveParts(c, parts, *amount) : Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Ledger>> Ledger::Open(std::unique_ptr<SqlConn> conn) {
  for (const char* sql : kSchema)
    if (auto r = conn->Exec(sql, {}); !r) return r.error();
  return std::unique_ptr<Ledger>(new Ledger(std::move(conn)));
}

Status Ledger::Reserve(const std::string& id, int64_t amount, std::vector<BudgetPeriod> parts, double expires,
                       BudgetPeriod* refused) {
  std::sort(parts.begin(), parts.end(), ByKey);
  SqlConn& c = *conn_;
  return c.Transaction([&]() -> Status {
    // One conditional UPDATE over every period (one round trip); a period it
    // missed is either new (created here, then reserved on its own) or full
    // (the whole transaction rolls back).
    std::string sql = "UPDATE budget_usage SET reserved = reserved + $1 WHERE ";
    std::string lock = "SELECT budget FROM budget_usage WHERE ";
    std::vector<SqlValue> args = {amount}, lock_args;
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string k = std::to_string(2 + 3 * i);
      sql += (i ? " OR " : "") + std::string("(budget = $") + k + " AND period = $" + std::to_string(3 + 3 * i) +
             " AND spent + reserved + $1 <= $" + std::to_string(4 + 3 * i) + ")";
      lock += (i ? " OR " : "") + std::string("(budget = $") + std::to_string(1 + 2 * i) + " AND period = $" +
              std::to_string(2 + 2 * i) + ")";
      args.insert(args.end(), {parts[i].budget, parts[i].period, parts[i].cap});
      lock_args.insert(lock_args.end(), {parts[i].budget, parts[i].period});
    }
    // PostgreSQL locks rows in the order an UPDATE scans them; taking them in
    // (budget, period) order first, as Settle and the sweep do, rules out a
    // deadlock between two transactions. (SQLite has one write lock.)
    if (std::string(c.kind()) == "postgres") {
      // COLLATE "C": byte order, the order Settle's VALUES and the sweep use.
      auto locked = c.Exec(lock + " ORDER BY budget COLLATE \"C\", period COLLATE \"C\" FOR UPDATE", lock_args);
      if (!locked) return locked.error();
    }
    auto up = c.Exec(sql + " RETURNING budget, period", args);
    if (!up) return up.error();
    for (const BudgetPeriod& p : parts) {
      const bool got = std::any_of(up->begin(), up->end(), [&](const SqlRow& r) { return *r[0] == p.budget && *r[1] == p.period; });
      if (got) continue;
      auto ins = c.Exec(
          "INSERT INTO budget_usage (budget, period, spent, reserved) VALUES ($1, $2, 0, 0)"
          " ON CONFLICT (budget, period) DO NOTHING",
          {p.budget, p.period});
      if (!ins) return ins.error();
      auto one = c.Exec(
          "UPDATE budget_usage SET reserved = reserved + $1 WHERE budget = $2 AND period = $3"
          " AND spent + reserved + $1 <= $4 RETURNING spent",
          {amount, p.budget, p.period, p.cap});
      if (!one) return one.error();
      if (one->empty()) {
        if (refused) *refused = p;
        return MakeError(ErrorCode::kRateLimited, "budget '" + p.budget + "' " + p.period + " is spent");
      }
    }
    auto res = c.Exec("INSERT INTO reservations (id, parts, amount, expires) VALUES ($1, $2, $3, $4)",
                      {id, EncodeParts(parts), amount, Ms(expires)});
    return res ? Status::Ok() : Status(res.error());
  });
}

Status Ledger::ResetReservations() {
  SqlConn& c = *conn_;
  return c.Transaction([&]() -> Status {
    if (auto r = c.Exec("DELETE FROM reservations", {}); !r) return r.error();
    if (auto r = c.Exec("UPDATE budget_usage SET reserved = 0 WHERE reserved <> 0", {}); !r) return r.error();
    return Status::Ok();
  });
}

namespace {

// One entry inside the caller's transaction: the row, the cost added to each
// period and (held_here) the reservation given back. False: settled before.
Result<bool> SettleLocked(SqlConn& c, const LedgerEntry& e, const std::vector<BudgetPeriod>& parts,
                          bool held_here, std::map<std::pair<std::string, std::string>, int64_t>* after) {
  std::vector<BudgetPeriod> sorted = parts;
  std::sort(sorted.begin(), sorted.end(), ByKey);
  auto ins = c.Exec(
      "INSERT INTO ledger (id, time_ms, day, month, tenant, route, upstream, model, prompt_tokens,"
      " cached_tokens, completion_tokens, cost, estimated, outcome)"
      " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
      " ON CONFLICT (id) DO NOTHING RETURNING id",
      {e.id, Ms(e.time), e.day, e.month, e.tenant, e.route, e.upstream, e.model, e.prompt_tokens,
       e.cached_tokens, e.completion_tokens, e.cost, int64_t{e.estimated}, e.outcome});
  if (!ins) return ins.error();
  if (ins->empty()) return false;  // settled before: idempotent
  std::string held_parts;
  Result<int64_t> held = int64_t{0};
  if (held_here) held = TakeReservation(c, e.id, &held_parts);
  if (!held) return held.error();
  // One upsert over every period: the cost added, this request's hold
  // given back (0 when it expired meanwhile: the sweep gave it back).
  if (sorted.empty()) return true;
  std::string sql = "INSERT INTO budget_usage (budget, period, spent, reserved) VALUES ";
  std::vector<SqlValue> args = {e.cost};
  for (size_t i = 0; i < sorted.size(); ++i) {
    const BudgetPeriod& p = sorted[i];
    const bool was_held = *held > 0 && held_parts.find(p.budget + '\x1f' + p.period + '\x1e') != std::string::npos;
    sql += (i ? ", ($" : "($") + std::to_string(2 + 3 * i) + ", $" + std::to_string(3 + 3 * i) + ", $1, $" +
           std::to_string(4 + 3 * i) + ")";
    args.insert(args.end(), {p.budget, p.period, was_held ? -*held : int64_t{0}});
  }
  auto up = c.Exec(sql +
                       " ON CONFLICT (budget, period) DO UPDATE SET spent = budget_usage.spent + excluded.spent,"
                       " reserved = budget_usage.reserved + excluded.reserved RETURNING budget, period, spent",
                   args);
  if (!up) return up.error();
  if (after)
    for (const SqlRow& r : *up) (*after)[{*r[0], *r[1]}] = Int(r[2]);
  return true;
}

}  // namespace

Result<bool> Ledger::Settle(const LedgerEntry& e, const std::vector<BudgetPeriod>& parts,
                            std::vector<int64_t>* spent_after, bool held_here) {
  SqlConn& c = *conn_;
  bool inserted = false;
  std::map<std::pair<std::string, std::string>, int64_t> after;
  Status s = c.Transaction([&]() -> Status {
    auto r = SettleLocked(c, e, parts, held_here, &after);
    if (!r) return r.error();
    inserted = *r;
    return Status::Ok();
  });
  if (!s) return s.error();
  if (spent_after) {
    spent_after->clear();
    for (const BudgetPeriod& p : parts) spent_after->push_back(after[{p.budget, p.period}]);
  }
  return inserted;
}

Result<int> Ledger::SettleMany(const std::vector<Settlement>& batch) {
  SqlConn& c = *conn_;
  int inserted = 0;
  Status s = c.Transaction([&]() -> Status {
    inserted = 0;
    for (const Settlement& one : batch) {
      auto r = SettleLocked(c, one.entry, one.parts, /*held_here=*/false, nullptr);
      if (!r) return r.error();
      inserted += *r ? 1 : 0;
    }
    return Status::Ok();
  });
  if (!s) return s.error();
  return inserted;
}

Status Ledger::Release(const std::string& id) {
  return conn_->Transaction([&] { return ReleaseLocked(*conn_, id); });
}

Status Ledger::Renew(const std::vector<std::string>& ids, double expires) {
  SqlConn& c = *conn_;
  return c.Transaction([&]() -> Status {
    for (const std::string& id : ids)
      if (auto r = c.Exec("UPDATE reservations SET expires = $1 WHERE id = $2", {Ms(expires), id}); !r)
        return r.error();
    return Status::Ok();
  });
}

Result<int> Ledger::ExpireReservations(double now) {
  int freed = 0;
  SqlConn& c = *conn_;
  Status s = c.Transaction([&]() -> Status {
    auto rows = c.Exec("DELETE FROM reservations WHERE expires < $1 RETURNING parts, amount", {Ms(now)});
    if (!rows) return rows.error();
    // Summed per period and applied in (budget, period) order, the order
    // every other transaction locks in.
    std::map<std::pair<std::string, std::string>, int64_t> back;
    for (const SqlRow& row : *rows) {
      for (const auto& part : DecodeParts(*row[0])) back[part] += Int(row[1]);
      ++freed;
    }
    for (const auto& [part, amount] : back) {
      auto u = c.Exec("UPDATE budget_usage SET reserved = reserved - $1 WHERE budget = $2 AND period = $3",
                      {amount, part.first, part.second});
      if (!u) return u.error();
    }
    return Status::Ok();
  });
  if (!s) return s.error();
  return freed;
}

Result<bool> Ledger::MarkAlert(const std::string& budget, const std::string& period, int permille, double now) {
  auto r = conn_->Exec(
      "INSERT INTO alerts (budget, period, permille, time_ms) VALUES ($1, $2, $3, $4)"
      " ON CONFLICT (budget, period, permille) DO NOTHING RETURNING budget",
      {budget, period, int64_t{permille}, Ms(now)});
  if (!r) return r.error();
  return !r->empty();
}

Result<std::vector<BudgetUsage>> Ledger::Usage(const std::vector<std::string>& periods) {
  std::vector<BudgetUsage> out;
  for (const std::string& p : periods) {
    auto rows = conn_->Exec("SELECT budget, period, spent, reserved FROM budget_usage WHERE period = $1", {p});
    if (!rows) return rows.error();
    for (const SqlRow& r : *rows) out.push_back({*r[0], *r[1], Int(r[2]), Int(r[3])});
  }
  return out;
}

Result<SpendTotals> Ledger::Totals(const std::string& month) {
  auto rows = conn_->Exec(
      "SELECT upstream, tenant, day, route, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost),"
      " SUM(estimated) FROM ledger WHERE month = $1 GROUP BY upstream, tenant, day, route",
      {month});
  if (!rows) return rows.error();
  SpendTotals t;
  std::map<std::string, SpendTotal> up, ten, day, route;
  auto add = [](SpendTotal& s, const SqlRow& r) {
    s.requests += Int(r[4]);
    s.prompt_tokens += Int(r[5]);
    s.completion_tokens += Int(r[6]);
    s.cost += Int(r[7]);
    s.estimated += Int(r[8]);
  };
  for (const SqlRow& r : *rows) {
    add(up[*r[0]], r);
    add(ten[*r[1]], r);
    add(day[*r[2]], r);
    add(route[*r[3]], r);
    add(t.all, r);
  }
  auto flatten = [](std::map<std::string, SpendTotal>& m, std::vector<SpendTotal>* out) {
    for (auto& [k, v] : m) {
      v.key = k;
      out->push_back(v);
    }
  };
  flatten(up, &t.by_upstream);
  flatten(ten, &t.by_tenant);
  flatten(day, &t.by_day);
  flatten(route, &t.by_route);
  return t;
}

Result<std::vector<LedgerEntry>> Ledger::Entries(const std::string& month) {
  auto rows = conn_->Exec(
      "SELECT id, time_ms, day, month, tenant, route, upstream, model, prompt_tokens, cached_tokens,"
      " completion_tokens, cost, estimated, outcome FROM ledger WHERE month = $1 ORDER BY time_ms, id",
      {month});
  if (!rows) return rows.error();
  std::vector<LedgerEntry> out;
  for (const SqlRow& r : *rows) {
    LedgerEntry e;
    e.id = *r[0];
    e.time = Int(r[1]) / 1000.0;
    e.day = *r[2];
    e.month = *r[3];
    e.tenant = *r[4];
    e.route = *r[5];
    e.upstream = *r[6];
    e.model = *r[7];
    e.prompt_tokens = Int(r[8]);
    e.cached_tokens = Int(r[9]);
    e.completion_tokens = Int(r[10]);
    e.cost = Int(r[11]);
    e.estimated = Int(r[12]) != 0;
    e.outcome = *r[13];
    out.push_back(std::move(e));
  }
  return out;
}

Status Ledger::SaveCanary(const CanaryRow& c, double now) {
  auto r = conn_->Exec(
      "INSERT INTO canaries (route, target, state, step, step_started_ms, reason, updated_ms)"
      " VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (route) DO UPDATE SET target = excluded.target,"
      " state = excluded.state, step = excluded.step, step_started_ms = excluded.step_started_ms,"
      " reason = excluded.reason, updated_ms = excluded.updated_ms",
      {c.route, c.target, c.state, c.step, Ms(c.step_started), c.reason, Ms(now)});
  if (!r) return r.error();
  return Status::Ok();
}

Result<std::optional<Ledger::CanaryRow>> Ledger::LoadCanary(const std::string& route) {
  auto rows = conn_->Exec("SELECT route, target, state, step, step_started_ms, reason FROM canaries WHERE route = $1",
                          {route});
  if (!rows) return rows.error();
  if (rows->empty()) return std::optional<CanaryRow>();
  const SqlRow& r = (*rows)[0];
  CanaryRow c{*r[0], *r[1], *r[2], *r[5], Int(r[3]), Int(r[4]) / 1000.0};
  return std::optional<CanaryRow>(c);
}

Result<std::vector<Ledger::Held>> Ledger::HeldReservations() {
  auto rows = conn_->Exec("SELECT id, amount, expires FROM reservations ORDER BY expires, id LIMIT 1000");
  if (!rows) return rows.error();
  std::vector<Held> out;
  for (const SqlRow& r : *rows) out.push_back({*r[0], Int(r[1]), Int(r[2]) / 1000.0});
  return out;
}

Result<std::pair<int64_t, int64_t>> Ledger::InFlight(double now) {
  auto rows = conn_->Exec("SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM reservations WHERE expires >= $1", {Ms(now)});
  if (!rows) return rows.error();
  if (rows->empty()) return std::pair<int64_t, int64_t>{0, 0};
  return std::pair<int64_t, int64_t>{Int((*rows)[0][0]), Int((*rows)[0][1])};
}

}  // namespace hone::route
