// The one seam to the ledger's databases: SQLite (one file in the state
// folder, WAL) and PostgreSQL (libpq, shared by router replicas). The ledger
// (ledger.cc) writes its SQL once, with PostgreSQL's `$1` placeholders; the
// SQLite connection maps them to `?1`. Values are bound with their types, so
// SQLite compares numbers as numbers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "util/result.h"

namespace hone::route {

using SqlValue = std::variant<int64_t, std::string>;  // money is int64 micro-units, never a double
using SqlRow = std::vector<std::optional<std::string>>;

class SqlConn {
 public:
  virtual ~SqlConn() = default;
  // One statement; rows (for SELECT or RETURNING) as text, NULL as nullopt.
  virtual Result<std::vector<SqlRow>> Exec(const std::string& sql, const std::vector<SqlValue>& params = {}) = 0;
  // Runs `body` in one transaction that takes the write lock at once
  // (SQLite BEGIN IMMEDIATE; PostgreSQL row locks under READ COMMITTED).
  // Commits when body returns Ok, rolls back otherwise. A lost PostgreSQL
  // connection is reopened once and the transaction retried.
  virtual Status Transaction(const std::function<Status()>& body) = 0;
  virtual const char* kind() const = 0;  // "sqlite" or "postgres"
  // Background upkeep, called every few seconds off the request path
  // (SQLite: a WAL checkpoint on a connection of its own).
  virtual void Maintain() {}
};

// `path`: the database file (created, WAL mode, synchronous=NORMAL: a
// committed row survives the process being killed).
Result<std::unique_ptr<SqlConn>> OpenSqlite(const std::string& path);
// `conninfo`: a libpq connection string or URI (it may hold a password: it
// is never logged). `connections`: a pool, so concurrent requests do not
// queue on one socket; a transaction keeps its connection to the end.
Result<std::unique_ptr<SqlConn>> OpenPostgres(const std::string& conninfo, int connections = 8);

}  // namespace hone::route
