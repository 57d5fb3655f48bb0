// The Store over a SqlBackend: migrations, group-committed transactions, every record kind and
// the audit chain, written once for SQLite and PostgreSQL (the SQL here is the dialects' common subset; DDL lives
// in each backend).
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <openssl/evp.h>

#include "src/store/sql_backend.h"

namespace tessera::store {
namespace {

constexpr int kMaxListLimit = 10000;

StatusOr<int64_t> ToInt(const std::optional<std::string>& v, std::string_view column) {
  if (!v) return InternalError("store: column " + std::string(column) + " is NULL");
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || ptr != v->data() + v->size()) {
    return InternalError("store: column " + std::string(column) + " is not an integer: " + *v);
  }
  return out;
}

std::string Text(const std::optional<std::string>& v) { return v ? *v : std::string(); }

// The name the database keeps for a state.
std::string Name(WorkloadState s) { return std::string(WorkloadStateName(s)); }
std::string Name(NodeState s) { return std::string(NodeStateName(s)); }

SqlParam OptText(const std::string& s) { return s.empty() ? SqlParam() : SqlParam(s); }
SqlParam OptInt(const std::optional<int64_t>& v) { return v ? SqlParam(*v) : SqlParam(); }

constexpr std::string_view kTenantColumns = "name, parent, spec_json, created_ms, updated_ms";
constexpr std::string_view kTokenColumns = "id, hash_hex, role, tenant, expires_ms, revoked, created_ms, node";
constexpr std::string_view kNodeColumns = "name, inventory_json, state, last_heartbeat_ms, agent_token, agent_id";
constexpr std::string_view kWorkloadColumns =
    "id, tenant, spec_json, state, placement_json, wait_reason, seq, start_ms, created_ms, updated_ms, version";
constexpr std::string_view kAuditColumns = "seq, time_ms, actor, action, target, result, prev_hash, hash";
// "partition" is quoted: a keyword in both dialects.
constexpr std::string_view kUsageColumns =
    "node, tenant, workload, gpu, model, \"partition\", seq, start_s, end_s, gpu_milli_s_allocated, "
    "gpu_milli_s_used, memory_mib_s, peak_memory_mib, kernel_launches, bytes_transferred, nvml_used_milli, "
    "nvml_memory_mib";

std::string Select(std::string_view columns, std::string_view rest) {
  return "SELECT " + std::string(columns) + " " + std::string(rest);
}

StatusOr<TenantRecord> TenantFrom(const SqlRow& r) {
  TenantRecord t{Text(r[0]), Text(r[1]), Text(r[2]), 0, 0};
  TESSERA_ASSIGN_OR_RETURN(t.created_ms, ToInt(r[3], "created_ms"));
  TESSERA_ASSIGN_OR_RETURN(t.updated_ms, ToInt(r[4], "updated_ms"));
  return t;
}

StatusOr<TokenRecord> TokenFrom(const SqlRow& r) {
  TokenRecord t;
  t.id = Text(r[0]);
  t.hash_hex = Text(r[1]);
  t.role = Text(r[2]);
  t.tenant = Text(r[3]);
  if (r[4]) {
    TESSERA_ASSIGN_OR_RETURN(t.expires_ms, ToInt(r[4], "expires_ms"));
  }
  TESSERA_ASSIGN_OR_RETURN(int64_t revoked, ToInt(r[5], "revoked"));
  t.revoked = revoked != 0;
  TESSERA_ASSIGN_OR_RETURN(t.created_ms, ToInt(r[6], "created_ms"));
  t.node = Text(r[7]);
  return t;
}

// A row's state, read by its name: a name this binary does not know (a hand edit, a newer binary)
// is an error naming the table, the row's key and the name, never a guess.
template <typename State>
StatusOr<State> StateFrom(StatusOr<State> (*parse)(std::string_view), const std::optional<std::string>& v,
                          std::string_view table, const std::string& key) {
  StatusOr<State> s = parse(Text(v));
  if (!s.ok()) return InternalError("store: " + std::string(table) + " row " + key + ": state " + s.status().message());
  return s;
}

StatusOr<NodeRecord> NodeFrom(const SqlRow& r) {
  NodeRecord n{.name = Text(r[0]), .inventory_json = Text(r[1]), .agent_token = Text(r[4]), .agent_id = Text(r[5])};
  TESSERA_ASSIGN_OR_RETURN(n.state, StateFrom(ParseNodeState, r[2], "nodes", n.name));
  TESSERA_ASSIGN_OR_RETURN(n.last_heartbeat_ms, ToInt(r[3], "last_heartbeat_ms"));
  return n;
}

StatusOr<WorkloadRecord> WorkloadFrom(const SqlRow& r) {
  WorkloadRecord w;
  TESSERA_ASSIGN_OR_RETURN(w.id, ToInt(r[0], "id"));
  w.tenant = Text(r[1]);
  w.spec_json = Text(r[2]);
  TESSERA_ASSIGN_OR_RETURN(w.state, StateFrom(ParseWorkloadState, r[3], "workloads", std::to_string(w.id)));
  w.placement_json = Text(r[4]);
  w.wait_reason = Text(r[5]);
  TESSERA_ASSIGN_OR_RETURN(w.seq, ToInt(r[6], "seq"));
  if (r[7]) {
    TESSERA_ASSIGN_OR_RETURN(w.start_ms, ToInt(r[7], "start_ms"));
  }
  TESSERA_ASSIGN_OR_RETURN(w.created_ms, ToInt(r[8], "created_ms"));
  TESSERA_ASSIGN_OR_RETURN(w.updated_ms, ToInt(r[9], "updated_ms"));
  TESSERA_ASSIGN_OR_RETURN(w.version, ToInt(r[10], "version"));
  return w;
}

StatusOr<AuditRecord> AuditFrom(const SqlRow& r) {
  AuditRecord a;
  TESSERA_ASSIGN_OR_RETURN(a.seq, ToInt(r[0], "seq"));
  TESSERA_ASSIGN_OR_RETURN(a.time_ms, ToInt(r[1], "time_ms"));
  a.actor = Text(r[2]);
  a.action = Text(r[3]);
  a.target = Text(r[4]);
  a.result = Text(r[5]);
  a.prev_hash = Text(r[6]);
  a.hash = Text(r[7]);
  return a;
}

StatusOr<UsageSampleRecord> UsageFrom(const SqlRow& r) {
  UsageSampleRecord u;
  u.node = Text(r[0]);
  u.tenant = Text(r[1]);
  u.workload = Text(r[2]);
  u.gpu = Text(r[3]);
  u.model = Text(r[4]);
  u.partition = Text(r[5]);
  int64_t* ints[] = {&u.seq, &u.start_s, &u.end_s, &u.gpu_milli_s_allocated, &u.gpu_milli_s_used, &u.memory_mib_s,
                     &u.peak_memory_mib, &u.kernel_launches, &u.bytes_transferred};
  for (size_t i = 0; i < std::size(ints); ++i) {
    TESSERA_ASSIGN_OR_RETURN(*ints[i], ToInt(r[6 + i], "usage_samples column " + std::to_string(6 + i)));
  }
  // NULL: the agent had no NVML figure (and every sample stored before schema version 7).
  std::optional<int64_t>* nvml[] = {&u.nvml_used_milli, &u.nvml_memory_mib};
  for (size_t i = 0; i < std::size(nvml); ++i) {
    const size_t col = 6 + std::size(ints) + i;
    if (!r[col]) continue;
    TESSERA_ASSIGN_OR_RETURN(*nvml[i], ToInt(r[col], "usage_samples column " + std::to_string(col)));
  }
  return u;
}

std::vector<SqlParam> UsageParams(const UsageSampleRecord& u) {
  return {u.node, u.tenant, u.workload, u.gpu, u.model, u.partition, u.seq, u.start_s, u.end_s,
          u.gpu_milli_s_allocated, u.gpu_milli_s_used, u.memory_mib_s, u.peak_memory_mib, u.kernel_launches,
          u.bytes_transferred,
          u.nvml_used_milli ? SqlParam(*u.nvml_used_milli) : SqlParam(std::monostate{}),
          u.nvml_memory_mib ? SqlParam(*u.nvml_memory_mib) : SqlParam(std::monostate{})};
}

// The first billed field where two samples of the same key differ ("" when none does). The NVML
// figures are not compared: they are observations, and a sample stored before the agent had them
// may come again with them.
std::string FirstDifference(const UsageSampleRecord& a, const UsageSampleRecord& b) {
  const std::pair<const char*, bool> fields[] = {
      {"tenant", a.tenant != b.tenant}, {"model", a.model != b.model}, {"partition", a.partition != b.partition},
      {"start", a.start_s != b.start_s}, {"end", a.end_s != b.end_s},
      {"gpu_milli_s_allocated", a.gpu_milli_s_allocated != b.gpu_milli_s_allocated},
      {"gpu_milli_s_used", a.gpu_milli_s_used != b.gpu_milli_s_used}, {"memory_mib_s", a.memory_mib_s != b.memory_mib_s},
      {"peak_memory_mib", a.peak_memory_mib != b.peak_memory_mib},
      {"kernel_launches", a.kernel_launches != b.kernel_launches},
      {"bytes_transferred", a.bytes_transferred != b.bytes_transferred}};
  for (const auto& [name, differs] : fields)
    if (differs) return name;
  return "";
}

template <typename T, typename F>
StatusOr<std::vector<T>> AllFrom(const SqlResult& res, F from) {
  std::vector<T> out;
  out.reserve(res.rows.size());
  for (const SqlRow& r : res.rows) {
    TESSERA_ASSIGN_OR_RETURN(T v, from(r));
    out.push_back(std::move(v));
  }
  return out;
}

// The transaction over one backend. Any failed statement marks it failed: PostgreSQL aborts the
// transaction at the first error, so a callback that swallowed one must not commit (Transact
// rolls back and returns the first error).
class SqlTransaction final : public Transaction {
 public:
  explicit SqlTransaction(SqlBackend& db) : db_(db) {}

  const Status& first_error() const { return first_error_; }

  Status CreateTenant(const TenantRecord& t) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("INSERT INTO tenants (name, parent, spec_json, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5) "
          "ON CONFLICT DO NOTHING",
          {t.name, OptText(t.parent), t.spec_json, t.created_ms, t.updated_ms}));
    if (r.affected == 0) return AlreadyExistsError("tenant " + t.name + " already exists");
    return Status::Ok();
  }
  Status UpdateTenant(const TenantRecord& t) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("UPDATE tenants SET parent = $2, spec_json = $3, updated_ms = $4 WHERE name = $1",
          {t.name, OptText(t.parent), t.spec_json, t.updated_ms}));
    if (r.affected == 0) return NotFoundError("tenant " + t.name + " not found");
    return Status::Ok();
  }
  Status DeleteTenant(std::string_view name) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q("DELETE FROM tenants WHERE name = $1", {std::string(name)}));
    if (r.affected == 0) return NotFoundError("tenant " + std::string(name) + " not found");
    return Status::Ok();
  }
  StatusOr<TenantRecord> GetTenant(std::string_view name) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q(Select(kTenantColumns, "FROM tenants WHERE name = $1"), {std::string(name)}));
    if (r.rows.empty()) return NotFoundError("tenant " + std::string(name) + " not found");
    return TenantFrom(r.rows[0]);
  }
  StatusOr<std::vector<TenantRecord>> ListTenants() override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q(Select(kTenantColumns, "FROM tenants ORDER BY name"), {}));
    return AllFrom<TenantRecord>(r, TenantFrom);
  }

  Status CreateToken(const TokenRecord& t) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("INSERT INTO tokens (" + std::string(kTokenColumns) + ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
          "ON CONFLICT DO NOTHING",
          {t.id, t.hash_hex, t.role, OptText(t.tenant), OptInt(t.expires_ms), int64_t{t.revoked ? 1 : 0},
           t.created_ms, t.node}));
    if (r.affected == 0) return AlreadyExistsError("token " + t.id + " (or its hash) already exists");
    return Status::Ok();
  }
  StatusOr<TokenRecord> GetToken(std::string_view id) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q(Select(kTokenColumns, "FROM tokens WHERE id = $1"), {std::string(id)}));
    if (r.rows.empty()) return NotFoundError("token " + std::string(id) + " not found");
    return TokenFrom(r.rows[0]);
  }
  StatusOr<TokenRecord> FindTokenByHash(std::string_view hash_hex) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q(Select(kTokenColumns, "FROM tokens WHERE hash_hex = $1"), {std::string(hash_hex)}));
    if (r.rows.empty()) return NotFoundError("no token has this hash");
    return TokenFrom(r.rows[0]);
  }
  Status RevokeToken(std::string_view id) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q("UPDATE tokens SET revoked = 1 WHERE id = $1", {std::string(id)}));
    if (r.affected == 0) return NotFoundError("token " + std::string(id) + " not found");
    return Status::Ok();
  }
  StatusOr<std::vector<TokenRecord>> ListTokens() override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q(Select(kTokenColumns, "FROM tokens ORDER BY id"), {}));
    return AllFrom<TokenRecord>(r, TokenFrom);
  }

  Status PutNode(const NodeRecord& n) override {
    return Q("INSERT INTO nodes (" + std::string(kNodeColumns) + ") VALUES ($1, $2, $3, $4, $5, $6) "
             "ON CONFLICT (name) DO UPDATE SET inventory_json = excluded.inventory_json, state = excluded.state, "
             "last_heartbeat_ms = excluded.last_heartbeat_ms, agent_token = excluded.agent_token, "
             "agent_id = excluded.agent_id",
             {n.name, n.inventory_json, Name(n.state), n.last_heartbeat_ms, n.agent_token, n.agent_id})
        .status();
  }
  StatusOr<NodeRecord> GetNode(std::string_view name) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q(Select(kNodeColumns, "FROM nodes WHERE name = $1"), {std::string(name)}));
    if (r.rows.empty()) return NotFoundError("node " + std::string(name) + " not found");
    return NodeFrom(r.rows[0]);
  }
  Status DeleteNode(std::string_view name) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q("DELETE FROM nodes WHERE name = $1", {std::string(name)}));
    if (r.affected == 0) return NotFoundError("node " + std::string(name) + " not found");
    return Status::Ok();
  }
  StatusOr<std::vector<NodeRecord>> ListNodes() override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q(Select(kNodeColumns, "FROM nodes ORDER BY name"), {}));
    return AllFrom<NodeRecord>(r, NodeFrom);
  }

  StatusOr<int64_t> InsertWorkload(const WorkloadRecord& w) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("INSERT INTO workloads (tenant, spec_json, state, placement_json, wait_reason, seq, start_ms, "
          "created_ms, updated_ms, version) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1) RETURNING id",
          {w.tenant, w.spec_json, Name(w.state), w.placement_json, w.wait_reason, w.seq, OptInt(w.start_ms),
           w.created_ms, w.updated_ms}));
    if (r.rows.size() != 1) return InternalError("store: INSERT ... RETURNING id returned no row");
    return ToInt(r.rows[0][0], "id");
  }
  StatusOr<int64_t> UpdateWorkload(const WorkloadRecord& w) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("UPDATE workloads SET spec_json = $3, state = $4, placement_json = $5, wait_reason = $6, seq = $7, "
          "start_ms = $8, updated_ms = $9, version = version + 1 WHERE id = $1 AND version = $2",
          {w.id, w.version, w.spec_json, Name(w.state), w.placement_json, w.wait_reason, w.seq, OptInt(w.start_ms),
           w.updated_ms}));
    if (r.affected == 1) return w.version + 1;
    TESSERA_ASSIGN_OR_RETURN(SqlResult cur, Q("SELECT version FROM workloads WHERE id = $1", {w.id}));
    if (cur.rows.empty()) return NotFoundError("workload " + std::to_string(w.id) + " not found");
    return FailedPreconditionError("workload " + std::to_string(w.id) + " changed concurrently: version is " +
                                   Text(cur.rows[0][0]) + ", the update was based on " + std::to_string(w.version));
  }
  StatusOr<WorkloadRecord> GetWorkload(int64_t id) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q(Select(kWorkloadColumns, "FROM workloads WHERE id = $1"), {id}));
    if (r.rows.empty()) return NotFoundError("workload " + std::to_string(id) + " not found");
    return WorkloadFrom(r.rows[0]);
  }
  Status DeleteWorkload(int64_t id) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q("DELETE FROM workloads WHERE id = $1", {id}));
    if (r.affected == 0) return NotFoundError("workload " + std::to_string(id) + " not found");
    return Status::Ok();
  }
  StatusOr<WorkloadPage> ListWorkloads(const WorkloadFilter& filter, int limit,
                                       std::string_view continue_token) override {
    return Page(filter, limit, continue_token, kWorkloadColumns, WorkloadFrom);
  }
  StatusOr<WorkloadPage> ListWorkloadVersions(const WorkloadFilter& filter, int limit,
                                              std::string_view continue_token) override {
    return Page(filter, limit, continue_token, "id, version", [](const SqlRow& row) -> StatusOr<WorkloadRecord> {
      WorkloadRecord w;
      TESSERA_ASSIGN_OR_RETURN(w.id, ToInt(row[0], "id"));
      TESSERA_ASSIGN_OR_RETURN(w.version, ToInt(row[1], "version"));
      return w;
    });
  }
  template <class RowFn>
  StatusOr<WorkloadPage> Page(const WorkloadFilter& filter, int limit, std::string_view continue_token,
                              std::string_view columns, RowFn from) {
    if (limit < 1 || limit > kMaxListLimit) {
      return InvalidArgumentError("limit " + std::to_string(limit) + " is out of range 1.." +
                                  std::to_string(kMaxListLimit));
    }
    int64_t after = 0;
    if (!continue_token.empty()) {
      // The token is "w" and the last id of the previous page.
      auto [ptr, ec] = continue_token.size() > 1 && continue_token[0] == 'w'
                           ? std::from_chars(continue_token.data() + 1, continue_token.data() + continue_token.size(), after)
                           : std::from_chars_result{continue_token.data(), std::errc::invalid_argument};
      if (ec != std::errc() || ptr != continue_token.data() + continue_token.size() || after < 0) {
        return InvalidArgumentError("continue token '" + std::string(continue_token) + "' is not valid");
      }
    }
    // The conditions the filter asks for, numbered after id's $1.
    std::string where = "id > $1";
    std::vector<SqlParam> args = {after};
    const std::string_view state = filter.state ? WorkloadStateName(*filter.state) : "";
    for (const auto& [column, value] : {std::pair{"tenant", filter.tenant}, {"state", state}}) {
      if (value.empty()) continue;
      args.push_back(std::string(value));
      where += std::string(" AND ") + column + " = $" + std::to_string(args.size());
    }
    args.push_back(int64_t{limit} + 1);
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q(Select(columns, "FROM workloads WHERE " + where + " ORDER BY id LIMIT $" +
                                                              std::to_string(args.size())),
                                            args));
    bool more = r.rows.size() > static_cast<size_t>(limit);
    if (more) r.rows.resize(limit);
    WorkloadPage page;
    TESSERA_ASSIGN_OR_RETURN(page.workloads, AllFrom<WorkloadRecord>(r, from));
    if (more) page.next_continue = "w" + std::to_string(page.workloads.back().id);
    return page;
  }

  Status PutIdempotency(const IdempotencyRecord& rec) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("INSERT INTO idempotency (token_id, idem_key, status_code, body, created_ms) VALUES ($1, $2, $3, $4, $5) "
          "ON CONFLICT DO NOTHING",
          {rec.token_id, rec.key, int64_t{rec.status_code}, rec.body, rec.created_ms}));
    if (r.affected == 0) return AlreadyExistsError("idempotency key " + rec.key + " already has an answer");
    return Status::Ok();
  }
  StatusOr<IdempotencyRecord> GetIdempotency(std::string_view token_id, std::string_view key) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("SELECT token_id, idem_key, status_code, body, created_ms FROM idempotency WHERE token_id = $1 AND idem_key = $2",
          {std::string(token_id), std::string(key)}));
    if (r.rows.empty()) return NotFoundError("idempotency key " + std::string(key) + " not found");
    IdempotencyRecord rec{Text(r.rows[0][0]), Text(r.rows[0][1]), 0, Text(r.rows[0][3]), 0};
    TESSERA_ASSIGN_OR_RETURN(int64_t code, ToInt(r.rows[0][2], "status_code"));
    rec.status_code = static_cast<int>(code);
    TESSERA_ASSIGN_OR_RETURN(rec.created_ms, ToInt(r.rows[0][4], "created_ms"));
    return rec;
  }

  StatusOr<int64_t> AppendWorkloadEvent(const WorkloadEvent& e) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("INSERT INTO workload_events (workload_id, time_ms, kind, detail) VALUES ($1, $2, $3, $4) RETURNING id",
          {e.workload_id, e.time_ms, e.kind, e.detail}));
    if (r.rows.size() != 1) return InternalError("store: INSERT ... RETURNING id returned no row");
    return ToInt(r.rows[0][0], "id");
  }
  StatusOr<std::vector<WorkloadEvent>> ListWorkloadEvents(int64_t workload_id) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("SELECT id, workload_id, time_ms, kind, detail FROM workload_events WHERE workload_id = $1 "
          "ORDER BY time_ms, id",
          {workload_id}));
    return AllFrom<WorkloadEvent>(r, [](const SqlRow& row) -> StatusOr<WorkloadEvent> {
      WorkloadEvent e;
      TESSERA_ASSIGN_OR_RETURN(e.id, ToInt(row[0], "id"));
      TESSERA_ASSIGN_OR_RETURN(e.workload_id, ToInt(row[1], "workload_id"));
      TESSERA_ASSIGN_OR_RETURN(e.time_ms, ToInt(row[2], "time_ms"));
      e.kind = Text(row[3]);
      e.detail = Text(row[4]);
      return e;
    });
  }

  StatusOr<int64_t> AppendObjectEvent(const ObjectEvent& e) override {
    if (e.subject.empty() || e.subject == "workload")
      return InvalidArgumentError("store: an object event's subject is node, tenant or token");
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("INSERT INTO workload_events (workload_id, time_ms, kind, detail, subject, name, scope) "
          "VALUES (NULL, $1, $2, $3, $4, $5, $6) RETURNING id",
          {e.time_ms, e.kind, e.detail, e.subject, e.name, e.scope}));
    if (r.rows.size() != 1) return InternalError("store: INSERT ... RETURNING id returned no row");
    return ToInt(r.rows[0][0], "id");
  }

  StatusOr<std::vector<TenantWorkloadEvent>> ListEventsAfter(int64_t after_id, int limit) override {
    if (limit < 1) return InvalidArgumentError("store: ListEventsAfter limit must be >= 1");
    // A workload event's tenant is its workload's (the join); an object event has no workload
    // (workload_id NULL) and its scope instead. A deleted workload's events are gone (cascade).
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("SELECT e.id, COALESCE(e.workload_id, 0), e.time_ms, e.kind, e.detail, COALESCE(w.tenant, e.scope), "
          "e.subject, e.name FROM workload_events e "
          "LEFT JOIN workloads w ON w.id = e.workload_id WHERE e.id > $1 ORDER BY e.id LIMIT $2",
          {after_id, int64_t{limit}}));
    return AllFrom<TenantWorkloadEvent>(r, [](const SqlRow& row) -> StatusOr<TenantWorkloadEvent> {
      TenantWorkloadEvent t;
      TESSERA_ASSIGN_OR_RETURN(t.event.id, ToInt(row[0], "id"));
      TESSERA_ASSIGN_OR_RETURN(t.event.workload_id, ToInt(row[1], "workload_id"));
      TESSERA_ASSIGN_OR_RETURN(t.event.time_ms, ToInt(row[2], "time_ms"));
      t.event.kind = Text(row[3]);
      t.event.detail = Text(row[4]);
      t.tenant = Text(row[5]);
      t.subject = Text(row[6]);
      t.name = Text(row[7]);
      return t;
    });
  }

  StatusOr<int64_t> LastWorkloadEventId() override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q("SELECT COALESCE(MAX(id), 0) FROM workload_events", {}));
    if (r.rows.size() != 1) return InternalError("store: SELECT MAX(id) returned no row");
    return ToInt(r.rows[0][0], "max(id)");
  }

  StatusOr<bool> PutUsageSample(const UsageSampleRecord& u) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("INSERT INTO usage_samples (" + std::string(kUsageColumns) +
              ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) ON CONFLICT DO NOTHING",
          UsageParams(u)));
    if (r.affected == 1) return true;
    TESSERA_ASSIGN_OR_RETURN(SqlResult cur,
        Q(Select(kUsageColumns, "FROM usage_samples WHERE node = $1 AND workload = $2 AND gpu = $3 AND seq = $4"),
          {u.node, u.workload, u.gpu, u.seq}));
    if (cur.rows.empty()) return InternalError("store: a usage sample neither inserted nor found");
    TESSERA_ASSIGN_OR_RETURN(UsageSampleRecord stored, UsageFrom(cur.rows[0]));
    const std::string differs = FirstDifference(stored, u);
    if (differs.empty()) return false;
    return AlreadyExistsError("usage sample seq " + std::to_string(u.seq) + " of workload " + u.workload + " on " +
                              u.node + " gpu " + u.gpu + " is stored with another " + differs);
  }
  StatusOr<std::vector<UsageSampleRecord>> ListUsageSamples(const UsageFilter& f, int limit) override {
    if (limit < 1 || limit > kMaxListLimit) {
      return InvalidArgumentError("limit " + std::to_string(limit) + " is out of range 1.." +
                                  std::to_string(kMaxListLimit));
    }
    // Placeholders are numbered as they are used (both databases refuse a parameter the
    // statement does not mention).
    std::vector<SqlParam> params;
    auto p = [&](SqlParam v) {
      params.push_back(std::move(v));
      return "$" + std::to_string(params.size());
    };
    std::string sql;
    if (!f.tenant.empty()) {
      // The subtree through the tenants' parent links (a recursive CTE: both dialects have it).
      sql = "WITH RECURSIVE sub(name) AS (SELECT CAST(" + p(f.tenant) +
            " AS TEXT) UNION ALL SELECT t.name FROM tenants t JOIN sub ON t.parent = sub.name) ";
    }
    sql += Select(kUsageColumns, "FROM usage_samples WHERE start_s < " + p(f.to_s) + " AND end_s > " + p(f.from_s));
    if (!f.tenant.empty()) sql += " AND tenant IN (SELECT name FROM sub)";
    if (f.after) {
      sql += " AND (node, workload, gpu, seq) > (" + p(f.after->node) + ", " + p(f.after->workload) + ", " +
             p(f.after->gpu) + ", " + p(f.after->seq) + ")";
    }
    sql += " ORDER BY node, workload, gpu, seq LIMIT " + p(int64_t{limit});
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q(sql, params));
    return AllFrom<UsageSampleRecord>(r, UsageFrom);
  }

  Status PutSlaObservation(const SlaObservationRecord& o) override {
    return Q("INSERT INTO sla_observations (tenant, metric, hour_s, value_micro) VALUES ($1, $2, $3, $4) "
             "ON CONFLICT (tenant, metric, hour_s) DO UPDATE SET value_micro = excluded.value_micro",
             {o.tenant, o.metric, o.hour_s, o.value_micro})
        .status();
  }
  StatusOr<std::vector<SlaObservationRecord>> ListSlaObservations(int64_t from_s, int64_t to_s) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("SELECT tenant, metric, hour_s, value_micro FROM sla_observations WHERE hour_s >= $1 AND hour_s < $2 "
          "ORDER BY hour_s, tenant, metric",
          {from_s, to_s}));
    std::vector<SlaObservationRecord> out;
    for (const auto& row : r.rows) {
      SlaObservationRecord o;
      o.tenant = Text(row[0]);
      o.metric = Text(row[1]);
      TESSERA_ASSIGN_OR_RETURN(o.hour_s, ToInt(row[2], "hour_s"));
      TESSERA_ASSIGN_OR_RETURN(o.value_micro, ToInt(row[3], "value_micro"));
      out.push_back(std::move(o));
    }
    return out;
  }

  Status PutHistoryPoint(const HistoryPointRecord& p) override {
    return Q("INSERT INTO cluster_history (t_s, body) VALUES ($1, $2) "
             "ON CONFLICT (t_s) DO UPDATE SET body = excluded.body",
             {p.t_s, p.body})
        .status();
  }
  StatusOr<std::vector<HistoryPointRecord>> ListHistoryPoints(int64_t from_s) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r,
        Q("SELECT t_s, body FROM cluster_history WHERE t_s >= $1 ORDER BY t_s", {from_s}));
    std::vector<HistoryPointRecord> out;
    for (const auto& row : r.rows) {
      HistoryPointRecord p;
      TESSERA_ASSIGN_OR_RETURN(p.t_s, ToInt(row[0], "t_s"));
      p.body = Text(row[1]);
      out.push_back(std::move(p));
    }
    return out;
  }
  StatusOr<int64_t> DeleteHistoryPointsBefore(int64_t before_s) override {
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q("DELETE FROM cluster_history WHERE t_s < $1", {before_s}));
    return r.affected;
  }

  StatusOr<AuditRecord> AppendAudit(const AuditEntry& e) override {
    // The head row serialises appenders (PostgreSQL: FOR UPDATE; SQLite: the write lock).
    TESSERA_ASSIGN_OR_RETURN(SqlResult head,
        Q("SELECT seq, hash FROM audit_head WHERE id = 1" + std::string(db_.ForUpdate()), {}));
    if (head.rows.size() != 1) return DataLossError("store: the audit head row is missing");
    AuditRecord a;
    TESSERA_ASSIGN_OR_RETURN(int64_t last, ToInt(head.rows[0][0], "audit_head.seq"));
    a.seq = last + 1;
    a.time_ms = e.time_ms;
    a.actor = e.actor;
    a.action = e.action;
    a.target = e.target;
    a.result = e.result;
    a.prev_hash = Text(head.rows[0][1]);
    a.hash = AuditHash(a.prev_hash, a.seq, a.time_ms, a.actor, a.action, a.target, a.result);
    TESSERA_RETURN_IF_ERROR(Q("INSERT INTO audit (" + std::string(kAuditColumns) +
                                  ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                              {a.seq, a.time_ms, a.actor, a.action, a.target, a.result, a.prev_hash, a.hash})
                                .status());
    TESSERA_RETURN_IF_ERROR(Q("UPDATE audit_head SET seq = $1, hash = $2 WHERE id = 1", {a.seq, a.hash}).status());
    return a;
  }
  StatusOr<std::vector<AuditRecord>> ListAudit(int64_t after_seq, int limit) override {
    if (limit < 1 || limit > kMaxListLimit) {
      return InvalidArgumentError("limit " + std::to_string(limit) + " is out of range 1.." +
                                  std::to_string(kMaxListLimit));
    }
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, Q(Select(kAuditColumns, "FROM audit WHERE seq > $1 ORDER BY seq LIMIT $2"),
                                            {after_seq, int64_t{limit}}));
    return AllFrom<AuditRecord>(r, AuditFrom);
  }

  // The audit head: (seq, hash) of the newest record as the store last wrote it.
  StatusOr<std::pair<int64_t, std::string>> AuditHead() {
    TESSERA_ASSIGN_OR_RETURN(SqlResult head, Q("SELECT seq, hash FROM audit_head WHERE id = 1", {}));
    if (head.rows.size() != 1) return DataLossError("the audit head row is missing");
    TESSERA_ASSIGN_OR_RETURN(int64_t seq, ToInt(head.rows[0][0], "audit_head.seq"));
    return std::make_pair(seq, Text(head.rows[0][1]));
  }

 private:
  StatusOr<SqlResult> Q(std::string_view sql, const std::vector<SqlParam>& params) {
    StatusOr<SqlResult> r = db_.Query(sql, params);
    if (!r.ok() && first_error_.ok()) first_error_ = r.status();
    return r;
  }

  SqlBackend& db_;
  Status first_error_;
};

// Checks one page of records against the chain state; returns false at the first bad record.
bool CheckAuditPage(const std::vector<AuditRecord>& page, int64_t& expected_seq, std::string& prev_hash,
                    AuditVerification& v) {
  for (const AuditRecord& a : page) {
    auto bad = [&](int64_t seq, std::string why) {
      v.ok = false;
      v.first_bad_seq = seq;
      v.problem = "seq " + std::to_string(seq) + ": " + why;
      return false;
    };
    if (a.seq != expected_seq) return bad(expected_seq, "record is missing (next record is seq " + std::to_string(a.seq) + ")");
    if (a.prev_hash != prev_hash) return bad(a.seq, "prev_hash does not match the hash of the record before it");
    if (a.hash != AuditHash(a.prev_hash, a.seq, a.time_ms, a.actor, a.action, a.target, a.result)) {
      return bad(a.seq, "hash does not match its fields");
    }
    ++v.records;
    prev_hash = a.hash;
    ++expected_seq;
  }
  return true;
}

class SqlStore final : public Store {
 public:
  SqlStore(std::unique_ptr<SqlBackend> db, int max_batch) : db_(std::move(db)), max_batch_(max_batch) {}

  Status Migrate() {
    std::lock_guard<std::mutex> lock(mu_);
    TESSERA_RETURN_IF_ERROR(db_->Exec("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY)"));
    TESSERA_ASSIGN_OR_RETURN(SqlResult r, db_->Query("SELECT MAX(version) FROM schema_migrations", {}));
    int64_t current = 0;
    if (!r.rows.empty() && r.rows[0][0]) {
      TESSERA_ASSIGN_OR_RETURN(current, ToInt(r.rows[0][0], "schema_migrations.version"));
    }
    if (current > kSchemaVersion) {
      return FailedPreconditionError("the " + std::string(db_->Kind()) + " database has schema version " +
                                     std::to_string(current) + ", newer than this tessera knows (" +
                                     std::to_string(kSchemaVersion) + "): use a newer tessera");
    }
    const std::vector<std::string_view>& migrations = db_->Migrations();
    for (int64_t v = current + 1; v <= kSchemaVersion; ++v) {
      TESSERA_RETURN_IF_ERROR(db_->Begin());
      Status s = db_->Exec(migrations[v - 1]);
      if (s.ok()) s = db_->Query("INSERT INTO schema_migrations (version) VALUES ($1)", {v}).status();
      if (s.ok()) s = db_->Commit();
      if (!s.ok()) {
        Status rb = db_->Rollback();
        (void)rb;  // the migration's own error is the one to report
        return s.WithPrefix("migrating the " + std::string(db_->Kind()) + " schema to version " + std::to_string(v));
      }
    }
    version_ = kSchemaVersion;
    return Status::Ok();
  }

  // Group commit (see store.h): queue, then either lead a batch or wait for a leader to finish
  // the batch that took this call.
  Status Transact(const std::function<Status(Transaction&)>& fn) override {
    Waiter w(fn);
    std::unique_lock<std::mutex> lock(queue_mu_);
    queue_.push_back(&w);
    waiting_ = static_cast<int64_t>(queue_.size());
    while (!w.done && (leading_ || queue_.front() != &w)) w.cv.wait(lock);
    if (!w.done) {
      leading_ = true;  // w is the oldest caller left and no batch runs: lead one
      lock.unlock();
      LeadBatch();
      lock.lock();
    }
    ++transactions_;
    return w.result;
  }

  // Queued like a Transact caller; the writer thread leads when no caller does.
  void TransactAsync(std::function<Status(Transaction&)> fn, std::function<void(Status)> done) override {
    auto w = std::make_unique<Waiter>(std::move(fn), std::move(done));
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (!writer_.joinable()) writer_ = std::thread([this] { WriterMain(); });
    queue_.push_back(w.release());
    waiting_ = static_cast<int64_t>(queue_.size());
    if (!leading_) writer_cv_.notify_one();
  }

  ~SqlStore() override {
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      stopping_ = true;
    }
    writer_cv_.notify_all();
    if (writer_.joinable()) writer_.join();
  }

  StoreStats Stats() const override { return {transactions_.load(), commits_.load(), waiting_.load()}; }

  StatusOr<OwnershipClaim> TryAcquireOwnership(const OwnerIdentity& me) override {
    std::lock_guard<std::mutex> lock(owner_mu_);
    return db_->TryAcquireOwnership(me);
  }
  Status CheckOwnership() override {
    std::lock_guard<std::mutex> lock(owner_mu_);
    return db_->CheckOwnership();
  }

  StatusOr<AuditVerification> VerifyAuditChain() override {
    AuditVerification v;
    int64_t expected = 1;
    std::string prev(kAuditGenesisHash);
    constexpr int kPage = 1000;
    Status s = Transact([&](Transaction& tx) -> Status {
      auto& sql_tx = static_cast<SqlTransaction&>(tx);
      for (;;) {
        TESSERA_ASSIGN_OR_RETURN(std::vector<AuditRecord> page, tx.ListAudit(expected - 1, kPage));
        if (!CheckAuditPage(page, expected, prev, v)) return Status::Ok();
        if (page.size() < static_cast<size_t>(kPage)) break;
      }
      TESSERA_ASSIGN_OR_RETURN(auto head, sql_tx.AuditHead());
      if (head.first != expected - 1 || head.second != prev) {
        v.ok = false;
        v.first_bad_seq = head.first >= expected ? expected : head.first;
        v.problem = "seq " + std::to_string(v.first_bad_seq) + ": the chain ends at seq " + std::to_string(expected - 1) +
                    " but the store's head is seq " + std::to_string(head.first) +
                    (head.first >= expected ? " (newest records removed)" : " (head does not match)");
      }
      return Status::Ok();
    });
    if (!s.ok()) return s;
    return v;
  }

  std::string_view Kind() const override { return db_->Kind(); }
  int SchemaVersion() const override { return version_; }

  Status ExecForTesting(std::string_view sql) override {
    std::lock_guard<std::mutex> lock(mu_);
    return db_->Exec(sql);
  }

 private:
  // One Transact caller, on its own stack while it waits in the queue. done, and the
  // hand-off, are guarded by queue_mu_; result is written by the leader before done.
  struct Waiter {
    explicit Waiter(const std::function<Status(Transaction&)>& f) : fn(f) {}
    // TransactAsync: the callback and done kept here (the Waiter is on the heap, deleted by the
    // leader once done ran).
    Waiter(std::function<Status(Transaction&)> f, std::function<void(Status)> d)
        : owned(std::move(f)), fn(owned), on_done(std::move(d)) {}
    std::function<Status(Transaction&)> owned;
    const std::function<Status(Transaction&)>& fn;
    std::function<void(Status)> on_done;  // set: an asynchronous caller
    Status result;
    bool done = false;
    std::condition_variable cv;
  };

  // The next caller for the running batch, or nullptr when the queue is empty or the batch full.
  Waiter* Take(size_t taken) {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (queue_.empty() || taken >= max_batch_) return nullptr;
    Waiter* w = queue_.front();
    queue_.pop_front();
    waiting_ = static_cast<int64_t>(queue_.size());
    return w;
  }

  // Runs as the leader (leading_ set by the caller): one database transaction for the callers
  // queued now and while it runs, one commit, then wakes them and the next leader.
  void LeadBatch() {
    std::vector<Waiter*> batch;
    {
      std::lock_guard<std::mutex> db_lock(mu_);
      Status begin = db_->Begin();
      if (!begin.ok()) {
        // Nothing ran; the callers queued now share the failure (they would meet the same lock
        // or the same lost server).
        while (Waiter* w = Take(batch.size())) {
          w->result = begin;
          batch.push_back(w);
        }
      } else {
        RunBatch(batch);
      }
    }
    std::vector<Waiter*> async;
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      for (Waiter* w : batch) {
        if (w->on_done) {
          async.push_back(w);
          continue;
        }
        w->done = true;
        w->cv.notify_one();  // under the lock: the waiter cannot leave (and destroy cv) before
      }
      leading_ = false;
      if (!queue_.empty()) {
        queue_.front()->cv.notify_one();  // a Transact caller at the front leads next,
        writer_cv_.notify_one();          // else (a TransactAsync one) the writer
      }
    }
    // After the hand-off: the next batch need not wait for these.
    for (Waiter* w : async) {
      ++transactions_;
      try {
        w->on_done(w->result);
      } catch (...) {
        std::fprintf(stderr, "store: a TransactAsync completion threw; ignored\n");
      }
      delete w;
    }
  }

  // The writer thread: leads a batch whenever callers are queued and nobody leads (the front is
  // a TransactAsync call; a Transact caller at the front may lead first). At the Store's end it
  // leaves once the queue is empty.
  void WriterMain() {
    std::unique_lock<std::mutex> lock(queue_mu_);
    for (;;) {
      writer_cv_.wait(lock, [&] { return (!queue_.empty() && !leading_) || (stopping_ && queue_.empty()); });
      if (queue_.empty()) return;
      leading_ = true;
      lock.unlock();
      LeadBatch();
      lock.lock();
    }
  }

  // Inside Begin: each callback in its own savepoint, then COMMIT (or ROLLBACK when no callback
  // succeeded). A failed COMMIT, or a transaction the database dropped in the middle, fails
  // every caller of the batch whose callback had succeeded.
  void RunBatch(std::vector<Waiter*>& batch) {
    Status lost;  // non-OK once the transaction itself is gone
    int succeeded = 0;
    while (Waiter* w = Take(batch.size())) {
      batch.push_back(w);
      w->result = RunOne(w->fn, lost);
      if (!lost.ok()) break;
      if (w->result.ok()) ++succeeded;
    }
    Status end = lost;
    if (end.ok() && succeeded > 0) {
      end = db_->Commit();
      if (end.ok()) {
        ++commits_;
        return;
      }
    }
    Status rb = db_->Rollback();
    (void)rb;  // the commit's (or the lost transaction's) error is the one to report
    if (end.ok()) return;  // no callback succeeded: each caller has its own error
    for (Waiter* w : batch) {
      if (w->result.ok()) w->result = end;
    }
  }

  // One callback between SAVEPOINT and RELEASE (or ROLLBACK TO on failure). Returns the
  // caller's outcome before the commit; sets `lost` when the batch's transaction is gone.
  Status RunOne(const std::function<Status(Transaction&)>& fn, Status& lost) {
    if (!db_->InTransaction()) {
      lost = UnavailableError("store: the " + std::string(db_->Kind()) + " transaction of this batch was lost");
      return lost;
    }
    if (Status sp = db_->Savepoint(); !sp.ok()) {
      lost = sp.WithPrefix("store: starting a savepoint");
      return lost;
    }
    SqlTransaction tx(*db_);
    Status s = Call(fn, tx);
    if (s.ok() && !tx.first_error().ok()) s = tx.first_error();
    if (s.ok()) {
      Status release = db_->ReleaseSavepoint();
      if (!release.ok()) lost = release.WithPrefix("store: releasing a savepoint");
      return lost.ok() ? s : lost;
    }
    Status undo = db_->RollbackToSavepoint();
    if (undo.ok()) undo = db_->ReleaseSavepoint();
    if (!undo.ok()) {
      // SQLite rolls the whole transaction back after some errors (I/O, full disk); PostgreSQL
      // after a lost connection. The callback's error is the cause for everyone.
      lost = Status(s.code(), "store: the batch's transaction was lost after a failed callback: " + s.message());
    }
    return s;
  }

  static Status Call(const std::function<Status(Transaction&)>& fn, Transaction& tx) {
    try {
      return fn(tx);
    } catch (...) {
      // Library code does not throw, but a callback that did must not leave the batch's
      // other callers waiting forever.
      return InternalError("store: a Transact callback threw an exception");
    }
  }

  std::unique_ptr<SqlBackend> db_;
  const size_t max_batch_;
  std::mutex mu_;  // the database connection: held by a leader for its batch, by Migrate, ExecForTesting
  int version_ = 0;
  std::mutex owner_mu_;  // the backend's ownership calls (their own descriptor or connection)

  std::mutex queue_mu_;
  std::deque<Waiter*> queue_;  // callers not yet taken into a batch, oldest first
  bool leading_ = false;       // a batch is running (guarded by queue_mu_)
  bool stopping_ = false;      // the destructor runs (guarded by queue_mu_)
  std::condition_variable writer_cv_;
  std::thread writer_;  // started by the first TransactAsync
  std::atomic<int64_t> transactions_{0}, commits_{0}, waiting_{0};
};

}  // namespace

std::string AuditHash(std::string_view prev_hash, int64_t seq, int64_t time_ms, std::string_view actor,
                      std::string_view action, std::string_view target, std::string_view result) {
  std::string canonical;
  auto add = [&](std::string_view field) {
    canonical += std::to_string(field.size());
    canonical += ':';
    canonical += field;
    canonical += '\n';
  };
  add(prev_hash);
  add(std::to_string(seq));
  add(std::to_string(time_ms));
  add(actor);
  add(action);
  add(target);
  add(result);
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(canonical.data(), canonical.size(), digest, &len, EVP_sha256(), nullptr) != 1) return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 0xf];
  }
  return hex;
}

StatusOr<std::unique_ptr<Store>> MakeSqlStore(std::unique_ptr<SqlBackend> backend, const Options& options) {
  auto store = std::make_unique<SqlStore>(std::move(backend), options.max_batch);
  TESSERA_RETURN_IF_ERROR(store->Migrate());
  return std::unique_ptr<Store>(std::move(store));
}

StatusOr<std::unique_ptr<Store>> Open(std::string_view url, const Options& options) {
  if (url.empty()) return InvalidArgumentError("store: empty database URL (a path, sqlite:PATH or postgresql://...)");
  if (options.max_batch < 1) {
    return InvalidArgumentError("store: max_batch must be at least 1 (it is " + std::to_string(options.max_batch) + ")");
  }
  std::unique_ptr<SqlBackend> backend;
  if (url.starts_with("postgresql://") || url.starts_with("postgres://")) {
    TESSERA_ASSIGN_OR_RETURN(backend, OpenPostgres(std::string(url), options));
  } else {
    std::string_view path = url.starts_with("sqlite:") ? url.substr(7) : url;
    if (path.empty()) return InvalidArgumentError("store: 'sqlite:' needs a file path");
    TESSERA_ASSIGN_OR_RETURN(backend, OpenSqlite(std::string(path), options));
  }
  return MakeSqlStore(std::move(backend), options);
}

}  // namespace tessera::store
