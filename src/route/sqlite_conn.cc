#include <sqlite3.h>

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "route/sql.h"

namespace hone::route {
namespace {

// "$1" -> "?1": SQLite numbers "$name" parameters by first appearance, which
// would reorder them; "?NNN" is positional, like PostgreSQL's "$NNN".
std::string Positional(const std::string& sql) {
  std::string out = sql;
  for (size_t i = 0; i + 1 < out.size(); ++i)
    if (out[i] == '$' && out[i + 1] >= '0' && out[i + 1] <= '9') out[i] = '?';
  return out;
}

// A first-come first-served lock that the holder may take again (a
// transaction's statements). Under 64 waiting threads a plain mutex lets a
// few win over and over: a request could wait 300 ms at p99 behind 0.3 ms
// transactions; in arrival order it waits for those ahead only.
class FifoLock {
 public:
  void lock() {
    std::unique_lock<std::mutex> l(mu_);
    const auto me = std::this_thread::get_id();
    if (owner_ == me) {
      ++depth_;
      return;
    }
    if (owner_ != std::thread::id() || !waiters_.empty()) {
      std::condition_variable mine;  // woken alone, when it is this thread's turn
      waiters_.push_back({&mine, me});
      mine.wait(l, [&] { return owner_ == me; });
    }
    owner_ = me;
    depth_ = 1;
  }
  void unlock() {
    std::lock_guard<std::mutex> l(mu_);
    if (--depth_ > 0) return;
    owner_ = {};
    if (waiters_.empty()) return;
    // Hand the lock to the first waiter directly: nobody can cut in.
    const Waiter next = waiters_.front();
    waiters_.pop_front();
    owner_ = next.id;
    next.cv->notify_one();
  }

 private:
  std::mutex mu_;  // guards the wait list, the owner and its depth below
  struct Waiter {
    std::condition_variable* cv;
    std::thread::id id;
  };
  std::deque<Waiter> waiters_;  // GUARDED_BY(mu_): in arrival order
  std::thread::id owner_;       // GUARDED_BY(mu_)
  int depth_ = 0;               // GUARDED_BY(mu_)
};

class SqliteConn final : public SqlConn {
 public:
  SqliteConn(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteConn() override {
    for (auto& [sql, st] : statements_) sqlite3_finalize(st);
    sqlite3_close(db_);
    if (checkpoint_db_) sqlite3_close(checkpoint_db_);
  }

  // Commits on the request path never fsync (synchronous=NORMAL and no
  // automatic checkpoint); the WAL is copied into the database here, on a
  // connection of its own, so a request never waits behind a checkpoint.
  void Maintain() override {
    std::lock_guard<std::mutex> lock(checkpoint_mu_);
    if (!checkpoint_db_ &&
        sqlite3_open_v2(path_.c_str(), &checkpoint_db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
            SQLITE_OK) {
      sqlite3_close(checkpoint_db_);
      checkpoint_db_ = nullptr;
      return;
    }
    sqlite3_busy_timeout(checkpoint_db_, 1000);
    sqlite3_wal_checkpoint_v2(checkpoint_db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  }

  Result<std::vector<SqlRow>> Exec(const std::string& sql, const std::vector<SqlValue>& params) override {
    std::lock_guard<FifoLock> lock(mu_);
    return ExecLocked(sql, params);
  }

  Status Transaction(const std::function<Status()>& body) override {
    std::lock_guard<FifoLock> lock(mu_);
    if (auto b = ExecLocked("BEGIN IMMEDIATE", {}); !b) return b.error();
    Status s = Status::Ok();
    try {
      s = body();
    } catch (const std::exception& e) {  // a body that throws must not leave the connection in a transaction
      s = MakeError(ErrorCode::kInternal, std::string("ledger: ") + e.what());
    }
    if (!s) {
      (void)ExecLocked("ROLLBACK", {});
      return s;
    }
    if (auto c = ExecLocked("COMMIT", {}); !c) {
      (void)ExecLocked("ROLLBACK", {});
      return c.error();
    }
    return Status::Ok();
  }

  const char* kind() const override { return "sqlite"; }

 private:
  Result<std::vector<SqlRow>> ExecLocked(const std::string& sql, const std::vector<SqlValue>& params) {
    sqlite3_stmt*& st = statements_[sql];
    if (!st) {
      if (sqlite3_prepare_v2(db_, Positional(sql).c_str(), -1, &st, nullptr) != SQLITE_OK) {
        std::string why = sqlite3_errmsg(db_);
        statements_.erase(sql);
        return MakeError(ErrorCode::kInternal, "ledger (sqlite): " + why);
      }
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    for (size_t i = 0; i < params.size(); ++i) {
      const int at = static_cast<int>(i) + 1;
      if (auto* n = std::get_if<int64_t>(&params[i]))
        sqlite3_bind_int64(st, at, *n);
      else
        sqlite3_bind_text(st, at, std::get<std::string>(params[i]).c_str(), -1, SQLITE_TRANSIENT);
    }
    std::vector<SqlRow> rows;
    for (;;) {
      const int rc = sqlite3_step(st);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        std::string why = sqlite3_errmsg(db_);
        sqlite3_reset(st);
        return MakeError(rc == SQLITE_BUSY ? ErrorCode::kBusy : ErrorCode::kIo, "ledger (sqlite): " + why);
      }
      SqlRow row;
      for (int c = 0; c < sqlite3_column_count(st); ++c) {
        if (sqlite3_column_type(st, c) == SQLITE_NULL)
          row.emplace_back(std::nullopt);
        else
          row.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, c)));
      }
      rows.push_back(std::move(row));
    }
    sqlite3_reset(st);
    return rows;
  }

  FifoLock mu_;  // one statement or transaction at a time on the connection, in arrival order
  sqlite3* db_;              // GUARDED_BY(mu_)
  std::map<std::string, sqlite3_stmt*> statements_;  // GUARDED_BY(mu_): prepared once per SQL text
  const std::string path_;
  std::mutex checkpoint_mu_;
  sqlite3* checkpoint_db_ = nullptr;  // GUARDED_BY(checkpoint_mu_)
};

}  // namespace

Result<std::unique_ptr<SqlConn>> OpenSqlite(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return MakeError(ErrorCode::kIo, "cannot open the ledger " + path + ": " + why);
  }
  sqlite3_busy_timeout(db, 5000);  // another process on the same file (hone spend) waits, not fails
  auto conn = std::make_unique<SqliteConn>(db, path);
  // WAL: readers (hone spend) never block the server. synchronous=NORMAL: a
  // commit is in the WAL file before it returns, so SIGKILL loses nothing
  // committed (only a power cut may lose the last transactions).
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", "PRAGMA wal_autocheckpoint=0"})
    if (auto r = conn->Exec(pragma, {}); !r)
      return MakeError(r.error().code, "cannot open the ledger " + path + ": " + r.error().message);
  return std::unique_ptr<SqlConn>(std::move(conn));
}

}  // namespace hone::route
