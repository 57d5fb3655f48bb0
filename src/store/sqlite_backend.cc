// SQLite backend: WAL journal, synchronous=FULL (a commit fsyncs the WAL before it returns),
// foreign keys on, a busy timeout, prepared statements cached by their SQL text. Ownership
// (store.h): an exclusive flock on "<path>.owner" for the Store's lifetime.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <utility>

#include "src/store/sql_backend.h"

namespace tessera::store {
namespace {

constexpr std::string_view kSchemaV1 = R"sql(
CREATE TABLE tenants (
  name TEXT PRIMARY KEY,
  parent TEXT REFERENCES tenants(name),
  spec_json TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL);
CREATE TABLE tokens (
  id TEXT PRIMARY KEY,
  hash_hex TEXT NOT NULL UNIQUE,
  role TEXT NOT NULL,
  tenant TEXT REFERENCES tenants(name),
  expires_ms INTEGER,
  revoked INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL);
CREATE TABLE nodes (
  name TEXT PRIMARY KEY,
  inventory_json TEXT NOT NULL,
  state TEXT NOT NULL,
  last_heartbeat_ms INTEGER NOT NULL);
CREATE TABLE workloads (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  tenant TEXT NOT NULL REFERENCES tenants(name),
  spec_json TEXT NOT NULL,
  state TEXT NOT NULL,
  placement_json TEXT NOT NULL,
  wait_reason TEXT NOT NULL,
  seq INTEGER NOT NULL,
  start_ms INTEGER,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  version INTEGER NOT NULL);
CREATE INDEX workloads_by_tenant ON workloads (tenant, id);
CREATE TABLE idempotency (
  token_id TEXT NOT NULL,
  idem_key TEXT NOT NULL,
  status_code INTEGER NOT NULL,
  body TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  PRIMARY KEY (token_id, idem_key));
CREATE TABLE workload_events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  workload_id INTEGER NOT NULL REFERENCES workloads(id) ON DELETE CASCADE,
  time_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL);
CREATE INDEX workload_events_by_workload ON workload_events (workload_id, time_ms, id);
CREATE TABLE audit (
  seq INTEGER PRIMARY KEY,
  time_ms INTEGER NOT NULL,
  actor TEXT NOT NULL,
  action TEXT NOT NULL,
  target TEXT NOT NULL,
  result TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL);
CREATE TABLE audit_head (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  seq INTEGER NOT NULL,
  hash TEXT NOT NULL);
INSERT INTO audit_head (id, seq, hash)
  VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
)sql";

// $N -> ?N (SQLite's numbered parameters), outside string literals.
std::string ToSqlitePlaceholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size());
  bool in_string = false;
  for (char c : sql) {
    if (c == '\'') in_string = !in_string;
    out += (c == '$' && !in_string) ? '?' : c;
  }
  return out;
}

// Version 2: the usage samples node agents report (store.h, UsageSampleRecord). The key makes
// a resend a no-op; the index serves the time-window queries of GET /v1/usage.
constexpr std::string_view kSchemaV2 = R"sql(
CREATE TABLE usage_samples (
  node TEXT NOT NULL,
  tenant TEXT NOT NULL,
  workload TEXT NOT NULL,
  gpu TEXT NOT NULL,
  model TEXT NOT NULL,
  "partition" TEXT NOT NULL,
  seq INTEGER NOT NULL,
  start_s INTEGER NOT NULL,
  end_s INTEGER NOT NULL,
  gpu_milli_s_allocated INTEGER NOT NULL,
  gpu_milli_s_used INTEGER NOT NULL,
  memory_mib_s INTEGER NOT NULL,
  peak_memory_mib INTEGER NOT NULL,
  kernel_launches INTEGER NOT NULL,
  bytes_transferred INTEGER NOT NULL,
  PRIMARY KEY (node, workload, gpu, seq));
CREATE INDEX usage_samples_by_tenant_end ON usage_samples (tenant, end_s);
)sql";

// Version 3: the node a node-agent token is bound to ("" for any node), and the identity that
// registered each node (the token's id and the agent's instance id; "" for nodes registered
// before, which the next registration claims).
constexpr std::string_view kSchemaV3 = R"sql(
ALTER TABLE tokens ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN agent_token TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';
)sql";

// Version 4: object events (a node, tenant or token changed) share the workload events' table and
// id sequence, so the event feed has one order: workload_id becomes optional, and subject, name
// and scope say what an object event is about (store.h, ObjectEvent). SQLite cannot drop a NOT
// NULL, so the table is copied; its AUTOINCREMENT counter moves with it (an id is never reused,
// even one whose workload was deleted).
constexpr std::string_view kSchemaV4 = R"sql(
CREATE TABLE workload_events_v4 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  workload_id INTEGER REFERENCES workloads(id) ON DELETE CASCADE,
  time_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL,
  subject TEXT NOT NULL DEFAULT 'workload',
  name TEXT NOT NULL DEFAULT '',
  scope TEXT NOT NULL DEFAULT '');
INSERT INTO workload_events_v4 (id, workload_id, time_ms, kind, detail)
  SELECT id, workload_id, time_ms, kind, detail FROM workload_events;
DELETE FROM sqlite_sequence WHERE name = 'workload_events_v4';
INSERT INTO sqlite_sequence (name, seq)
  SELECT 'workload_events_v4', seq FROM sqlite_sequence WHERE name = 'workload_events';
DROP TABLE workload_events;
ALTER TABLE workload_events_v4 RENAME TO workload_events;
CREATE INDEX workload_events_by_workload ON workload_events (workload_id, time_ms, id);
)sql";

// Version 5: the control plane's SLA observations (store.h, SlaObservationRecord), one per tenant,
// metric and hour.
constexpr std::string_view kSchemaV5 = R"sql(
CREATE TABLE sla_observations (
  tenant TEXT NOT NULL,
  metric TEXT NOT NULL,
  hour_s INTEGER NOT NULL,
  value_micro INTEGER NOT NULL,
  PRIMARY KEY (tenant, metric, hour_s));
CREATE INDEX sla_observations_by_hour ON sla_observations (hour_s);
)sql";

// Version 6: the control plane's cluster history (store.h, HistoryPointRecord), one row per
// recorded point (every 5 s, a day kept: the control plane removes older ones).
constexpr std::string_view kSchemaV6 = R"sql(
CREATE TABLE cluster_history (
  t_s INTEGER PRIMARY KEY,
  body TEXT NOT NULL);
)sql";

// Version 7: NVML's figures of a usage sample (store.h, UsageSampleRecord), NULL where the agent
// had none (and for every sample stored before).
constexpr std::string_view kSchemaV7 = R"sql(
ALTER TABLE usage_samples ADD COLUMN nvml_used_milli INTEGER;
ALTER TABLE usage_samples ADD COLUMN nvml_memory_mib INTEGER;
)sql";

// The owner lock file's text: "pid=1234\nhost=h1\nsince_ms=1796449801000\n".
std::string FormatOwner(const OwnerIdentity& o) {
  return "pid=" + std::to_string(o.pid) + "\nhost=" + o.host + "\nsince_ms=" + std::to_string(o.since_ms) + "\n";
}

// What FormatOwner wrote; unknown lines and bad numbers are skipped (the message then says less,
// it never fails).
OwnerIdentity ParseOwner(std::string_view text) {
  OwnerIdentity o;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, eq);
    const std::string_view value = line.substr(eq + 1);
    if (key == "host") {
      o.host = std::string(value);
    } else if (key == "pid" || key == "since_ms") {
      int64_t n = 0;
      auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec == std::errc() && ptr == value.data() + value.size()) (key == "pid" ? o.pid : o.since_ms) = n;
    }
  }
  return o;
}

// Up to 4 KiB of the file from its start (the owner record is a few dozen bytes).
std::string ReadOwnerFile(int fd) {
  char buf[4096];
  const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

class SqliteBackend final : public SqlBackend {
 public:
  SqliteBackend(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteBackend() override {
    for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
    sqlite3_close(db_);
    if (owner_fd_ >= 0) ::close(owner_fd_);  // releases the flock
  }

  std::string_view Kind() const override { return "sqlite"; }

  Status Error(int rc, std::string_view what) const {
    std::string msg = "sqlite: " + std::string(what) + ": " + sqlite3_errmsg(db_);
    int ext = sqlite3_extended_errcode(db_);
    if (ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_UNIQUE) return AlreadyExistsError(msg);
    if (ext == SQLITE_CONSTRAINT_FOREIGNKEY) return FailedPreconditionError(msg);
    int primary = rc & 0xff;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED || primary == SQLITE_CANTOPEN ||
        primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_READONLY) {
      return UnavailableError(msg);
    }
    if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) return DataLossError(msg);
    return InternalError(msg);
  }

  StatusOr<SqlResult> Query(std::string_view sql, const std::vector<SqlParam>& params) override {
    std::string key(sql);
    auto it = statements_.find(key);
    if (it == statements_.end()) {
      std::string text = ToSqlitePlaceholders(sql);
      sqlite3_stmt* stmt = nullptr;
      int rc = sqlite3_prepare_v3(db_, text.c_str(), static_cast<int>(text.size()), SQLITE_PREPARE_PERSISTENT,
                                  &stmt, nullptr);
      if (rc != SQLITE_OK) return Error(rc, "preparing " + text);
      it = statements_.emplace(std::move(key), stmt).first;
    }
    sqlite3_stmt* stmt = it->second;
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    for (size_t i = 0; i < params.size(); ++i) {
      int idx = static_cast<int>(i + 1);
      int rc = SQLITE_OK;
      if (const auto* v = std::get_if<int64_t>(&params[i])) {
        rc = sqlite3_bind_int64(stmt, idx, *v);
      } else if (const auto* s = std::get_if<std::string>(&params[i])) {
        rc = sqlite3_bind_text(stmt, idx, s->data(), static_cast<int>(s->size()), SQLITE_TRANSIENT);
      } else {
        rc = sqlite3_bind_null(stmt, idx);
      }
      if (rc != SQLITE_OK) return Error(rc, "binding parameter " + std::to_string(idx));
    }
    SqlResult result;
    for (;;) {
      int rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        Status s = Error(rc, "running statement");
        sqlite3_reset(stmt);
        return s;
      }
      int n = sqlite3_column_count(stmt);
      SqlRow row(n);
      for (int c = 0; c < n; ++c) {
        if (sqlite3_column_type(stmt, c) == SQLITE_NULL) continue;
        const unsigned char* text = sqlite3_column_text(stmt, c);
        row[c] = std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt, c));
      }
      result.rows.push_back(std::move(row));
    }
    result.affected = sqlite3_changes64(db_);
    sqlite3_reset(stmt);
    return result;
  }

  Status Exec(std::string_view sql) override {
    std::string text(sql);
    char* err = nullptr;
    int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
    sqlite3_free(err);
    if (rc != SQLITE_OK) return Error(rc, "executing");
    return Status::Ok();
  }

  // IMMEDIATE: take the write lock up front, so that two writers never deadlock on an upgrade.
  Status Begin() override { return Step("BEGIN IMMEDIATE"); }
  Status Commit() override { return Step("COMMIT"); }
  Status Rollback() override {
    if (sqlite3_get_autocommit(db_)) return Status::Ok();  // SQLite already rolled back
    return Step("ROLLBACK");
  }

  bool InTransaction() const override { return sqlite3_get_autocommit(db_) == 0; }
  Status Savepoint() override { return Step("SAVEPOINT tessera_callback"); }
  Status ReleaseSavepoint() override { return Step("RELEASE SAVEPOINT tessera_callback"); }
  Status RollbackToSavepoint() override { return Step("ROLLBACK TO SAVEPOINT tessera_callback"); }

  const std::vector<std::string_view>& Migrations() const override {
    static const std::vector<std::string_view> kMigrations = {kSchemaV1, kSchemaV2, kSchemaV3, kSchemaV4, kSchemaV5,
                                                              kSchemaV6, kSchemaV7};
    return kMigrations;
  }
  std::string_view ForUpdate() const override { return ""; }

  // The lock file is never removed: unlinking it would let a newcomer lock a fresh file while
  // someone still holds the old one. A file left by a crashed owner is unlocked (the kernel
  // dropped its lock with the process), so its stale text is simply overwritten.
  StatusOr<OwnershipClaim> TryAcquireOwnership(const OwnerIdentity& me) override {
    if (owner_fd_ >= 0) return OwnershipClaim{.acquired = true, .holder = {}};
    const std::string lock_path = path_ + ".owner";
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      return UnavailableError("sqlite: cannot open the owner lock file " + lock_path + ": " + std::strerror(errno));
    int rc;
    do {
      rc = ::flock(fd, LOCK_EX | LOCK_NB);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int err = errno;
      OwnershipClaim claim;
      if (err == EWOULDBLOCK) claim.holder = ParseOwner(ReadOwnerFile(fd));
      ::close(fd);
      if (err != EWOULDBLOCK) return UnavailableError("sqlite: cannot lock " + lock_path + ": " + std::strerror(err));
      return claim;
    }
    const std::string text = FormatOwner(me);
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
      const int err = errno;
      ::close(fd);
      return UnavailableError("sqlite: cannot write the owner lock file " + lock_path + ": " + std::strerror(err));
    }
    owner_fd_ = fd;
    return OwnershipClaim{.acquired = true, .holder = {}};
  }

  Status CheckOwnership() override {
    if (owner_fd_ < 0) return FailedPreconditionError("sqlite: this store has not acquired ownership of " + path_);
    return Status::Ok();
  }

 private:
  Status Step(std::string_view sql) { return Query(sql, {}).status(); }

  sqlite3* db_;
  const std::string path_;
  int owner_fd_ = -1;  // the open "<path>.owner" that holds the flock; -1 until acquired
  std::map<std::string, sqlite3_stmt*, std::less<>> statements_;
};

}  // namespace

StatusOr<std::unique_ptr<SqlBackend>> OpenSqlite(const std::string& path, const Options& options) {
  sqlite3* db = nullptr;
  const int create = options.create_if_missing ? SQLITE_OPEN_CREATE : 0;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | create | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return UnavailableError("sqlite: cannot open " + path + ": " + msg);
  }
  auto backend = std::make_unique<SqliteBackend>(db, path);
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, options.busy_timeout_ms);
  TESSERA_ASSIGN_OR_RETURN(SqlResult mode, backend->Query("PRAGMA journal_mode=WAL", {}));
  if (mode.rows.empty() || !mode.rows[0][0] || *mode.rows[0][0] != "wal") {
    return UnavailableError("sqlite: " + path + " cannot use WAL journal mode");
  }
  TESSERA_RETURN_IF_ERROR(backend->Exec("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"));
  return std::unique_ptr<SqlBackend>(std::move(backend));
}

}  // namespace tessera::store
