#include <libpq-fe.h>

#include <mutex>

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
    if (!r && !in_transaction_ && Reconnect()) r = ExecLocked(sql, params);
    return r;
  }

  Status Transaction(const std::function<Status()>& body) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    for (int attempt = 0;; ++attempt) {
      Status s = TryTransaction(body);
      // A dropped connection (the server restarted) is reopened once; the
      // transaction never committed, so running it again is safe.
      if (s || attempt > 0 || PQstatus(conn_) == CONNECTION_OK || !Reconnect()) return s;
    }
  }

  const char* kind() const override { return "postgres"; }

 private:
  Status TryTransaction(const std::function<Status()>& body) {
    if (auto b = ExecLocked("BEGIN", {}); !b) return b.error();
    in_transaction_ = true;
    Status s = body();
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
      PQclear(res);
      return MakeError(ErrorCode::kIo, "ledger (postgres): " + why);
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

}  // namespace

Result<std::unique_ptr<SqlConn>> OpenPostgres(const std::string& conninfo) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    std::string why = PgError(c);
    PQfinish(c);
    return MakeError(ErrorCode::kUnavailable, "cannot connect to the PostgreSQL ledger: " + why);
  }
  // Quiet "relation already exists, skipping" notices from CREATE ... IF NOT EXISTS.
  PQsetNoticeProcessor(c, [](void*, const char*) {}, nullptr);
  return std::unique_ptr<SqlConn>(std::make_unique<PgConn>(c, conninfo));
}

}  // namespace hone::route
