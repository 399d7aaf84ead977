#include <libpq-fe.h>

#include <condition_variable>
#include <mutex>
#include <vector>

#include "route/sql.h"

namespace hone::route {
namespace {

constexpr unsigned kInt8Oid = 20, kTextOid = 25;

std::string PgError(PGconn* c) {
  std::string why = c ? PQerrorMessage(c) : "out of memory";
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  return "ledger (postgres): " + why;
}

class PgConn final : public SqlConn {
 public:
  PgConn(PGconn* c, std::string conninfo) : conn_(c), conninfo_(std::move(conninfo)) {}
  ~PgConn() override { PQfinish(conn_); }

  Result<std::vector<SqlRow>> Exec(const std::string& sql, const std::vector<SqlValue>& params) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    auto r = ExecLocked(sql, params);
    // Only a lost connection is reopened and the statement sent again; an
    // error the server answered (a constraint, a bad value) is the answer.
    if (!r && !in_transaction_ && PQstatus(conn_) != CONNECTION_OK && Reconnect()) r = ExecLocked(sql, params);
    return r;
  }

  Status Transaction(const std::function<Status()>& body) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    for (int attempt = 0;; ++attempt) {
      Status s = TryTransaction(body);
      if (s) return s;
      // A deadlock (two requests locking the same budget rows in another
      // order) rolled back: run it again.
      if (s.error().code == ErrorCode::kBusy && attempt < 5) continue;
      // A dropped connection (the server restarted) is reopened once; the
      // transaction never committed, so running it again is safe.
      if (attempt > 0 || PQstatus(conn_) == CONNECTION_OK || !Reconnect()) return s;
    }
  }

  const char* kind() const override { return "postgres"; }

 private:
  Status TryTransaction(const std::function<Status()>& body) {
    if (auto b = ExecLocked("BEGIN", {}); !b) return b.error();
    in_transaction_ = true;
    Status s = Status::Ok();
    try {
      s = body();
    } catch (const std::exception& e) {  // a body that throws must not leave the connection in a transaction
      s = MakeError(ErrorCode::kInternal, std::string("ledger: ") + e.what());
    }
    in_transaction_ = false;
    if (!s) {
      (void)ExecLocked("ROLLBACK", {});
      return s;
    }
    if (auto c = ExecLocked("COMMIT", {}); !c) return c.error();
    return Status::Ok();
  }

  bool Reconnect() {
    PQreset(conn_);
    return PQstatus(conn_) == CONNECTION_OK;
  }

  Result<std::vector<SqlRow>> ExecLocked(const std::string& sql, const std::vector<SqlValue>& params) {
    std::vector<std::string> text(params.size());
    std::vector<const char*> values(params.size());
    std::vector<unsigned> types(params.size());
    for (size_t i = 0; i < params.size(); ++i) {
      if (auto* n = std::get_if<int64_t>(&params[i])) {
        text[i] = std::to_string(*n);
        types[i] = kInt8Oid;
      } else {
        text[i] = std::get<std::string>(params[i]);
        types[i] = kTextOid;
      }
      values[i] = text[i].c_str();
    }
    PGresult* res = PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), types.data(),
                                 values.data(), nullptr, nullptr, 0);
    const ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
      std::string why = res ? PQresultErrorMessage(res) : PgError(conn_);
      while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
      const char* state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
      // A deadlock or serialization failure: the transaction may simply run again.
      const bool retry = state && (std::string(state) == "40P01" || std::string(state) == "40001");
      PQclear(res);
      return MakeError(retry ? ErrorCode::kBusy : ErrorCode::kIo, "ledger (postgres): " + why);
    }
    std::vector<SqlRow> rows;
    for (int r = 0; r < PQntuples(res); ++r) {
      SqlRow row;
      for (int c = 0; c < PQnfields(res); ++c) {
        if (PQgetisnull(res, r, c))
          row.emplace_back(std::nullopt);
        else
          row.emplace_back(PQgetvalue(res, r, c));
      }
      rows.push_back(std::move(row));
    }
    PQclear(res);
    return rows;
  }

  std::recursive_mutex mu_;     // one statement or transaction at a time on the connection
  PGconn* conn_;                // GUARDED_BY(mu_)
  bool in_transaction_ = false;  // GUARDED_BY(mu_)
  const std::string conninfo_;
};

// Several connections; a thread in a transaction keeps its own.
class PgPool final : public SqlConn {
 public:
  explicit PgPool(std::vector<std::unique_ptr<PgConn>> conns) : conns_(std::move(conns)) {
    for (auto& c : conns_) free_.push_back(c.get());
  }

  Result<std::vector<SqlRow>> Exec(const std::string& sql, const std::vector<SqlValue>& params) override {
    if (current_) return current_->Exec(sql, params);
    PgConn* c = Acquire();
    auto r = c->Exec(sql, params);
    Release(c);
    return r;
  }

  Status Transaction(const std::function<Status()>& body) override {
    if (current_) return current_->Transaction(body);  // nested: the same connection
    PgConn* c = Acquire();
    current_ = c;
    Status s = c->Transaction(body);  // catches what the body throws
    current_ = nullptr;
    Release(c);
    return s;
  }

  const char* kind() const override { return "postgres"; }

 private:
  PgConn* Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !free_.empty(); });
    PgConn* c = free_.back();
    free_.pop_back();
    return c;
  }
  void Release(PgConn* c) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      free_.push_back(c);
    }
    cv_.notify_one();
  }

  std::vector<std::unique_ptr<PgConn>> conns_;  // fixed after construction
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PgConn*> free_;               // GUARDED_BY(mu_)
  static thread_local PgConn* current_;     // this thread's connection inside a transaction
};

thread_local PgConn* PgPool::current_ = nullptr;

}  // namespace

Result<std::unique_ptr<SqlConn>> OpenPostgres(const std::string& conninfo, int connections) {
  std::vector<std::unique_ptr<PgConn>> conns;
  for (int i = 0; i < std::max(1, connections); ++i) {
    PGconn* c = PQconnectdb(conninfo.c_str());
    if (PQstatus(c) != CONNECTION_OK) {
      std::string why = PgError(c);
      PQfinish(c);
      return MakeError(ErrorCode::kUnavailable, "cannot connect to the PostgreSQL ledger: " + why);
    }
    // Quiet "relation already exists, skipping" notices from CREATE ... IF NOT EXISTS.
    PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr);
    conns.push_back(std::make_unique<PgConn>(c, conninfo));
  }
  return std::unique_ptr<SqlConn>(std::make_unique<PgPool>(std::move(conns)));
}

}  // namespace hone::route
