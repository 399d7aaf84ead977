#include "route/ledger.h"

#include <algorithm>
#include <map>

namespace hone::route {
namespace {

constexpr const char* kSchema[] = {
    "CREATE TABLE IF NOT EXISTS budget_usage (budget TEXT NOT NULL, period TEXT NOT NULL,"
    " spent BIGINT NOT NULL DEFAULT 0, reserved BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (budget, period))",
    "CREATE TABLE IF NOT EXISTS reservations (id TEXT NOT NULL, budget TEXT NOT NULL, period TEXT NOT NULL,"
    " amount BIGINT NOT NULL, expires BIGINT NOT NULL, PRIMARY KEY (id, budget, period))",
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

Status ReleaseLocked(SqlConn& c, const std::string& id) {
  auto freed = c.Exec("DELETE FROM reservations WHERE id = $1 RETURNING budget, period, amount", {id});
  if (!freed) return freed.error();
  for (const SqlRow& row : *freed) {
    auto u = c.Exec("UPDATE budget_usage SET reserved = reserved - $1 WHERE budget = $2 AND period = $3",
                    {Int(row[2]), *row[0], *row[1]});
    if (!u) return u.error();
  }
  return Status::Ok();
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
    for (const BudgetPeriod& p : parts) {
      auto ins = c.Exec(
          "INSERT INTO budget_usage (budget, period, spent, reserved) VALUES ($1, $2, 0, 0)"
          " ON CONFLICT (budget, period) DO NOTHING",
          {p.budget, p.period});
      if (!ins) return ins.error();
      auto up = c.Exec(
          "UPDATE budget_usage SET reserved = reserved + $1 WHERE budget = $2 AND period = $3"
          " AND spent + reserved + $1 <= $4 RETURNING spent",
          {amount, p.budget, p.period, p.cap});
      if (!up) return up.error();
      if (up->empty()) {
        if (refused) *refused = p;
        return MakeError(ErrorCode::kRateLimited, "budget '" + p.budget + "' " + p.period + " is spent");
      }
      auto res = c.Exec("INSERT INTO reservations (id, budget, period, amount, expires) VALUES ($1, $2, $3, $4, $5)",
                        {id, p.budget, p.period, amount, Ms(expires)});
      if (!res) return res.error();
    }
    return Status::Ok();
  });
}

Result<bool> Ledger::Settle(const LedgerEntry& e, const std::vector<BudgetPeriod>& parts,
                            std::vector<int64_t>* spent_after) {
  SqlConn& c = *conn_;
  bool inserted = false;
  std::vector<BudgetPeriod> sorted = parts;
  std::sort(sorted.begin(), sorted.end(), ByKey);
  std::map<std::pair<std::string, std::string>, int64_t> after;
  Status s = c.Transaction([&]() -> Status {
    auto ins = c.Exec(
        "INSERT INTO ledger (id, time_ms, day, month, tenant, route, upstream, model, prompt_tokens,"
        " cached_tokens, completion_tokens, cost, estimated, outcome)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
        " ON CONFLICT (id) DO NOTHING RETURNING id",
        {e.id, Ms(e.time), e.day, e.month, e.tenant, e.route, e.upstream, e.model, e.prompt_tokens,
         e.cached_tokens, e.completion_tokens, e.cost, int64_t{e.estimated}, e.outcome});
    if (!ins) return ins.error();
    inserted = !ins->empty();
    if (!inserted) return Status::Ok();  // settled before: idempotent
    if (Status r = ReleaseLocked(c, e.id); !r) return r;
    for (const BudgetPeriod& p : sorted) {
      auto ins_row = c.Exec(
          "INSERT INTO budget_usage (budget, period, spent, reserved) VALUES ($1, $2, 0, 0)"
          " ON CONFLICT (budget, period) DO NOTHING",
          {p.budget, p.period});
      if (!ins_row) return ins_row.error();
      auto up = c.Exec("UPDATE budget_usage SET spent = spent + $1 WHERE budget = $2 AND period = $3 RETURNING spent",
                       {e.cost, p.budget, p.period});
      if (!up) return up.error();
      after[{p.budget, p.period}] = up->empty() ? 0 : Int((*up)[0][0]);
    }
    return Status::Ok();
  });
  if (!s) return s.error();
  if (spent_after) {
    spent_after->clear();
    for (const BudgetPeriod& p : parts) spent_after->push_back(after[{p.budget, p.period}]);
  }
  return inserted;
}

Status Ledger::Release(const std::string& id) {
  return conn_->Transaction([&] { return ReleaseLocked(*conn_, id); });
}

Result<int> Ledger::ExpireReservations(double now) {
  int freed = 0;
  SqlConn& c = *conn_;
  Status s = c.Transaction([&]() -> Status {
    auto rows = c.Exec("DELETE FROM reservations WHERE expires < $1 RETURNING budget, period, amount", {Ms(now)});
    if (!rows) return rows.error();
    for (const SqlRow& row : *rows) {
      auto u = c.Exec("UPDATE budget_usage SET reserved = reserved - $1 WHERE budget = $2 AND period = $3",
                      {Int(row[2]), *row[0], *row[1]});
      if (!u) return u.error();
      ++freed;
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
  auto rows = conn_->Exec("SELECT id, MAX(amount), MAX(expires) FROM reservations GROUP BY id ORDER BY MAX(expires), id LIMIT 1000");
  if (!rows) return rows.error();
  std::vector<Held> out;
  for (const SqlRow& r : *rows) out.push_back({*r[0], Int(r[1]), Int(r[2]) / 1000.0});
  return out;
}

Result<std::pair<int64_t, int64_t>> Ledger::InFlight(double now) {
  auto rows = conn_->Exec("SELECT COUNT(*), COALESCE(SUM(a), 0) FROM (SELECT id, MAX(amount) AS a FROM reservations"
                          " WHERE expires >= $1 GROUP BY id) AS held",
                          {Ms(now)});
  if (!rows) return rows.error();
  if (rows->empty()) return std::pair<int64_t, int64_t>{0, 0};
  return std::pair<int64_t, int64_t>{Int((*rows)[0][0]), Int((*rows)[0][1])};
}

}  // namespace hone::route
