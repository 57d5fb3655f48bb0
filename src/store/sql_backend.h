// Private to the store: the small connection interface that both databases implement, so that
// the schema logic and every Transaction method (sql_store.cc) are written once.
//
// SQL texts use PostgreSQL's $1..$n placeholders; the SQLite backend rewrites them to ?1..?n.
// Every value comes back as text (NULL as nullopt); integers in decimal.
// Thread-safety: none; SqlStore serialises all use with its database mutex, except the two
// ownership calls, which use their own descriptor or connection and SqlStore's owner mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/store/store.h"

namespace tessera::store {

using SqlParam = std::variant<std::monostate, int64_t, std::string>;
using SqlRow = std::vector<std::optional<std::string>>;

struct SqlResult {
  std::vector<SqlRow> rows;
  int64_t affected = 0;  // rows changed by an INSERT/UPDATE/DELETE
};

class SqlBackend {
 public:
  virtual ~SqlBackend() = default;
  virtual std::string_view Kind() const = 0;  // "sqlite" | "postgresql"
  // One statement with parameters (a prepared statement, cached by its text). Constraint errors
  // map to AlreadyExists (unique) and FailedPrecondition (foreign key).
  virtual StatusOr<SqlResult> Query(std::string_view sql, const std::vector<SqlParam>& params) = 0;
  // Several statements without parameters (DDL, tests).
  virtual Status Exec(std::string_view sql) = 0;
  virtual Status Begin() = 0;
  virtual Status Commit() = 0;
  virtual Status Rollback() = 0;
  // Savepoints inside Begin..Commit: one per group-committed callback (sql_store.cc).
  // RollbackToSavepoint undoes what followed SavePoint (and, on PostgreSQL, clears an aborted
  // transaction's error state); both it and ReleaseSavepoint fail when the transaction itself
  // is gone (SQLite rolls a transaction back by itself after some I/O errors).
  // True between Begin and Commit/Rollback while the database still holds the transaction.
  virtual bool InTransaction() const = 0;
  virtual Status Savepoint() = 0;
  virtual Status ReleaseSavepoint() = 0;
  virtual Status RollbackToSavepoint() = 0;
  // The DDL of each schema version, in this database's dialect; index 0 is version 1.
  virtual const std::vector<std::string_view>& Migrations() const = 0;
  // Appended to a SELECT that reads a row it will update (PostgreSQL: " FOR UPDATE").
  virtual std::string_view ForUpdate() const = 0;
  // Store::TryAcquireOwnership and Store::CheckOwnership (store.h): SQLite's flock on
  // "<path>.owner", PostgreSQL's advisory lock on a connection of its own.
  virtual StatusOr<OwnershipClaim> TryAcquireOwnership(const OwnerIdentity& me) = 0;
  virtual Status CheckOwnership() = 0;
};

StatusOr<std::unique_ptr<SqlBackend>> OpenSqlite(const std::string& path, const Options& options);
StatusOr<std::unique_ptr<SqlBackend>> OpenPostgres(const std::string& url, const Options& options);

// The store over either backend (migrates on creation); options.max_batch bounds group commits.
StatusOr<std::unique_ptr<Store>> MakeSqlStore(std::unique_ptr<SqlBackend> backend, const Options& options);

}  // namespace tessera::store
