// tessera::store: the control plane's persistence, behind one interface.
//
// What it is for: `tessera serve` keeps everything it must not lose here: tenants (with their
// quota and QoS spec), API tokens (as SHA-256 hashes), nodes (their inventory), workloads (spec,
// state, placement, wait reason), the answers to idempotent POSTs, the events a tenant can see on
// its workloads (preemptions, ...), the hash-chained audit log and the usage samples node agents
// report (the metering ledger's input). Two implementations pass the
// same contract suite (tests/store/store_contract_test.cc): SQLite (embedded, the default) and
// PostgreSQL (a shared control plane). `Open(url)` picks one.
//
// Who calls it: the daemon only. The store knows no scheduler types: quotas, node inventories,
// workload specs and placements are opaque JSON text that the daemon writes and interprets.
// Workload and node states are typed (tessera/core/lifecycle_state.h): the database keeps their
// names, and a row whose state name this binary does not know is an Internal error naming the
// table, the row and the name ("store: workloads row 7: state 'runing' is not pending, ..."),
// from every read that returns that row. No SQL type appears in this header.
//
// Durability: every write happens inside `Store::Transact`. When Transact returns OK the change
// is durable: SQLite runs in WAL mode with synchronous=FULL (the WAL is fsync'ed at every
// commit), PostgreSQL has returned from COMMIT (with its default synchronous_commit=on). When the
// callback returns a non-OK Status, or any statement inside failed, everything that callback
// wrote is rolled back and nothing of it is visible, and Transact returns that error (other
// callers' callbacks batched into the same commit are not affected; see group commit below).
// The daemon acknowledges a request (2xx) only after its Transact returned OK. One case is
// uncertain: when the connection is lost during the COMMIT itself (Unavailable from a PostgreSQL
// commit), the change may or may not have been committed; the client's retry with its
// Idempotency-Key resolves it.
// A PostgreSQL store whose connection was lost reconnects at the start of the next Transact.
//
// Time: the library never reads a clock. Every time value is passed in by the caller as int64
// milliseconds since the Unix epoch (fields and parameters named *_ms).
//
// Errors (tessera::Status, never exceptions): NotFound (no such record), AlreadyExists (the key is
// taken), FailedPrecondition (optimistic version conflict; a record still referenced by another,
// e.g. deleting a tenant that has workloads; a database schema newer than this binary),
// InvalidArgument (bad URL, bad continue token, limit out of range), Unavailable (the database
// cannot be opened or reached, or stayed locked past the busy timeout), Internal (anything else
// the database reports).
//
// Thread-safety and group commit: a Store may be shared by threads (the daemon's HTTP handler
// threads each call Transact). It holds one database connection, and concurrent Transact calls
// are group-committed: the first caller that finds no batch running becomes the leader; it
// begins one database transaction and runs its own callback and then every callback queued
// meanwhile, in arrival order, each inside its own SAVEPOINT, until the queue is empty or
// Options::max_batch callbacks ran; then it commits once (one fsync for the whole batch) and
// wakes the callers of the batch. The per-call contract above is unchanged:
//   - each callback takes full effect or none: a callback that returns non-OK (or whose
//     statement failed) is rolled back to its savepoint, its caller gets its error, and the
//     other callbacks of the batch are not affected;
//   - Transact returns OK only after the commit that contains its caller's writes is durable;
//     when that commit fails, every caller whose callback succeeded in that batch gets the
//     commit's error (none of the batch's writes is visible); likewise when the database drops
//     the transaction in mid-batch (SQLite after an I/O error, PostgreSQL on a lost connection),
//     and a failed BEGIN (lock timeout, server gone) fails the callers queued at that moment;
//   - a callback's reads see the writes of the callbacks before it in the same batch (they are
//     one transaction), never those of a callback that was rolled back.
// TransactAsync queues a callback the same way without waiting; when no Transact caller leads, the
// Store's writer thread leads the batch (see TransactAsync).
// A caller that finds no batch running does not wait for company (no timer): its callback runs
// at once, alone when nobody else is queued. Callbacks may run on another caller's thread (the
// leader's), while their own caller waits inside Transact; everything they capture by reference
// stays valid. A Transaction is valid only inside the callback it was passed to; do not keep
// it, and do not call Transact of the same Store from inside a callback (it would deadlock).
// Callbacks must not throw (one that does fails with Internal, its writes rolled back).
// Several processes may open the same SQLite file (the busy timeout makes a writer wait for
// another) or the same PostgreSQL database; but only one of them may own it (below).
//
// Ownership: one control plane per store. Two `tessera serve` on one store would each schedule
// onto the same GPUs, so the daemon claims the store once at start with TryAcquireOwnership and
// keeps it until its Store is destroyed (or the process dies). Other openers (`tessera audit
// verify`, tests) never claim it.
//   - SQLite: an exclusive flock(2) on a lock file next to the database, "<path>.owner", held
//     by an open descriptor for the Store's lifetime. The kernel drops the lock when the process
//     exits or is killed, so a lock file left behind by a crashed owner blocks nobody: the next
//     owner takes the lock and overwrites the file's text, which names the owner (pid, host,
//     start time) for the refusal message. (SQLite's own locks on the database file are
//     per-transaction and managed by SQLite; a POSIX lock on that file would be released by
//     SQLite's close() calls, hence a separate file.) flock conflicts between two opens of the
//     file in one process too, so two Stores of one process exclude each other as well.
//   - PostgreSQL: a leader lease, the session-level advisory lock (kOwnerLockClass,
//     hashtext(current_schema())) taken with pg_try_advisory_lock on a connection of its own
//     that the Store keeps open; the owner records itself in the table tessera_owner (one row).
//     The server releases the lock when that session ends (the owner exits or its connection is
//     lost). A standby retries TryAcquireOwnership until it succeeds; a leader checks
//     CheckOwnership (its lease connection still answers) before each scheduling cycle.
// Worked example (SQLite, /var/lib/tessera.db):
//   serve A (pid 1234 on h1): TryAcquireOwnership -> acquired; /var/lib/tessera.db.owner holds
//     "pid=1234\nhost=h1\nsince_ms=1796449801000\n" and A's descriptor holds the flock.
//   serve B: TryAcquireOwnership -> not acquired, holder {1234, "h1", 1796449801000}: B exits 2.
//   A is SIGKILLed: the kernel drops the flock; the file still names 1234.
//   serve C: TryAcquireOwnership -> acquired (the lock was free); the file now names C.
//
// Worked example (group commit): threads A, B and C call Transact at about the same time.
//   A finds no batch running: it leads. BEGIN; SAVEPOINT; fnA inserts workload 1; RELEASE.
//   B and C queued while fnA ran, so A continues with them:
//     SAVEPOINT; fnB inserts a workload, then PutIdempotency says AlreadyExists and fnB returns
//       it; ROLLBACK TO SAVEPOINT: fnB's workload is undone;
//     SAVEPOINT; fnC reads workload 1 (visible: same transaction), inserts a workload; RELEASE.
//   The queue is empty: COMMIT, one fsync. A and C return OK (their workloads are durable), B
//   returns AlreadyExists. Had the COMMIT failed, A and C would both get its error and neither
//   workload would exist. Stats() then shows transactions +3, commits +1.
//
// Ownership: Open returns a std::unique_ptr<Store>; records are plain values.
//
// Worked example (submitting a workload with an idempotency key, atomically):
//
//   TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> db, store::Open("sqlite:/var/lib/tessera.db"));
//   int64_t id = 0;
//   TESSERA_RETURN_IF_ERROR(db->Transact([&](store::Transaction& tx) -> Status {
//     store::WorkloadRecord w;
//     w.tenant = "ml-team"; w.spec_json = R"({"gpus":1})"; w.state = WorkloadState::kPending;
//     w.seq = 7; w.created_ms = w.updated_ms = now_ms;
//     TESSERA_ASSIGN_OR_RETURN(id, tx.InsertWorkload(w));        // id 1, version 1
//     TESSERA_RETURN_IF_ERROR(tx.PutIdempotency({"tok-1", "key-abc", 201, R"({"id":1})", now_ms}));
//     return tx.AppendAudit({now_ms, "tok-1", "workload.create", "workloads/1", "201"}).status();
//   }));
//   // Here the workload, the idempotency answer and the audit record are all on disk, or (on
//   // any error) none of them is. A retried POST with "key-abc" finds the stored answer with
//   // GetIdempotency("tok-1", "key-abc") and returns it instead of inserting again.
//
// Audit chain: record n stores prev_hash = hash of record n-1 (64 '0's for n = 1) and
// hash = SHA-256(canonical(prev_hash, seq, time_ms, actor, action, target, result)) in lowercase
// hex (AuditHash below). The store also keeps the chain's head (last seq and hash) in a separate
// row, so that removing the newest record is detected too. VerifyAuditChain walks the chain and
// names the first seq that is missing, altered, or does not chain:
//   seqs 1 2 3 4, record 3's actor edited      -> first_bad_seq 3 (hash mismatch)
//   record 3 deleted                            -> first_bad_seq 3 (missing)
//   a record inserted at 3, old 3.. renumbered  -> first_bad_seq 3 (or 4 if the forger computed
//                                                  3's hash: 4's prev_hash no longer matches)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/lifecycle_state.h"
#include "tessera/core/status.h"

namespace tessera::store {

// A tenant: its name is the key; parent is empty for a root tenant (and must name an existing
// tenant otherwise). spec_json holds quota, QoS defaults, ... as the daemon writes them.
struct TenantRecord {
  std::string name;
  std::string parent;
  std::string spec_json = "{}";
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  friend bool operator==(const TenantRecord&, const TenantRecord&) = default;
};

// An API token. Only the SHA-256 of the secret is stored (lowercase hex, unique). tenant is empty
// for roles that are not bound to a tenant (admin, node-agent). node: the one node a node-agent
// token may act for ("" for any node, and for every other role).
struct TokenRecord {
  std::string id;
  std::string hash_hex;
  std::string role;
  std::string tenant;
  std::optional<int64_t> expires_ms;
  bool revoked = false;
  int64_t created_ms = 0;
  std::string node;
  friend bool operator==(const TokenRecord&, const TokenRecord&) = default;
};

// agent_token and agent_id: who registered the node, the identity a second agent registering the
// same name is compared with (the token's id, and the agent's instance id when it sent one; ""
// for a node registered before schema version 3).
struct NodeRecord {
  std::string name;
  std::string inventory_json = "{}";
  NodeState state = NodeState::kReady;
  int64_t last_heartbeat_ms = 0;
  std::string agent_token;
  std::string agent_id;
  friend bool operator==(const NodeRecord&, const NodeRecord&) = default;
};

// A workload. id is assigned by the store (InsertWorkload; ids only grow). version starts at 1
// and grows by one with every UpdateWorkload (optimistic concurrency). seq is the caller's
// submission order (the scheduler's tie-break), kept as given.
struct WorkloadRecord {
  int64_t id = 0;
  std::string tenant;
  std::string spec_json = "{}";
  WorkloadState state = WorkloadState::kPending;
  std::string placement_json;  // empty while not placed
  std::string wait_reason;
  int64_t seq = 0;
  std::optional<int64_t> start_ms;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t version = 0;
  friend bool operator==(const WorkloadRecord&, const WorkloadRecord&) = default;
};

// The first answer to a POST with an Idempotency-Key, per token.
struct IdempotencyRecord {
  std::string token_id;
  std::string key;
  int status_code = 0;
  std::string body;
  int64_t created_ms = 0;
  friend bool operator==(const IdempotencyRecord&, const IdempotencyRecord&) = default;
};

// Something a tenant may see on its workload: "preempted", "placed", "requeued", ...
// id is assigned by the store (AppendWorkloadEvent).
struct WorkloadEvent {
  int64_t id = 0;
  int64_t workload_id = 0;
  int64_t time_ms = 0;
  std::string kind;
  std::string detail;
  friend bool operator==(const WorkloadEvent&, const WorkloadEvent&) = default;
};

// Something a client may care about that is not one workload's: a node, tenant or token
// changed ("node.cordoned", "tenant.created", "token.revoked", ...). Its id comes from the
// workload events' sequence (AppendObjectEvent), so the event feed has one order.
struct ObjectEvent {
  std::string subject;  // "node", "tenant" or "token"
  std::string name;     // the node's or tenant's name, the token's id
  std::string scope;    // the tenant whose subtree may see it; "" for none (the daemon decides who)
  int64_t time_ms = 0;
  std::string kind;
  std::string detail;
};

// One row of the control plane's event feed: a workload event with its workload's tenant
// (subject "workload"), or an object event (event.workload_id 0, event.id/time_ms/kind/detail
// set, name its object's, tenant its scope).
struct TenantWorkloadEvent {
  WorkloadEvent event;
  std::string tenant;
  std::string subject = "workload";
  std::string name;  // an object event's object; "" for a workload event
  friend bool operator==(const TenantWorkloadEvent&, const TenantWorkloadEvent&) = default;
};

// What the caller gives for one audit record; the store adds seq, prev_hash and hash.
struct AuditEntry {
  int64_t time_ms = 0;
  std::string actor;   // token id, "bootstrap", "scheduler", ...
  std::string action;  // "workload.create", ...
  std::string target;  // "workloads/17", ...
  std::string result;  // "201", "denied", ...
};

struct AuditRecord {
  int64_t seq = 0;
  int64_t time_ms = 0;
  std::string actor;
  std::string action;
  std::string target;
  std::string result;
  std::string prev_hash;
  std::string hash;
  friend bool operator==(const AuditRecord&, const AuditRecord&) = default;
};

struct AuditVerification {
  bool ok = true;
  int64_t records = 0;        // records checked
  int64_t first_bad_seq = 0;  // 0 when ok
  std::string problem;        // e.g. "seq 3: hash does not match its fields"; empty when ok
};

// One usage sample as a node agent reported it (POST /v1/nodes/{name}/usage): what one workload
// used on one GPU partition over [start_s, end_s) (seconds since the epoch; the metering ledger's
// vocabulary, tessera/metering/ledger.h). The key is (node, workload, gpu, seq): the agent numbers
// each workload's samples from 0, so a resend carries the same key and values and is a no-op.
// tenant is the name the agent gave (no foreign key: usage is history and outlives a deleted
// tenant; the daemon checks the tenant when the sample arrives). The NVML figures (the driver's
// view, api/usage_wire.h) are observations beside the billed values: empty where the agent had
// none, NULL in the table; a resend that differs only in them is a resend (nothing changes).
struct UsageSampleRecord {
  std::string node;
  std::string tenant;
  std::string workload;
  std::string gpu;        // index (or UUID) on its node
  std::string model;      // catalog name
  std::string partition;  // "whole", "share" or a MIG profile
  int64_t seq = 0;
  int64_t start_s = 0;
  int64_t end_s = 0;
  int64_t gpu_milli_s_allocated = 0;
  int64_t gpu_milli_s_used = 0;
  int64_t memory_mib_s = 0;
  int64_t peak_memory_mib = 0;
  int64_t kernel_launches = 0;
  int64_t bytes_transferred = -1;  // -1: unknown
  std::optional<int64_t> nvml_used_milli;  // NVML's SM utilisation of its processes, milli of the GPU
  std::optional<int64_t> nvml_memory_mib;  // the most device memory NVML listed for them
  friend bool operator==(const UsageSampleRecord&, const UsageSampleRecord&) = default;
};

// One SLA observation of the control plane (docs/metering.md): a tenant's `metric` over the hour
// starting at hour_s (seconds since the epoch, a whole hour), in micro-units of the metric's unit
// (guaranteed_wait_p99_s: the p99 of the waits of its Guaranteed workloads that started in the
// hour, 1.5 s -> 1'500'000). The key is (tenant, metric, hour_s); no foreign key (history).
struct SlaObservationRecord {
  std::string tenant;
  std::string metric;
  int64_t hour_s = 0;
  int64_t value_micro = 0;
  friend bool operator==(const SlaObservationRecord&, const SlaObservationRecord&) = default;
};

// One point of the control plane's cluster history (GET /v1/history, src/daemon/cluster_history.h):
// its time t_s (seconds since the epoch; the key) and `body`, the point as the control plane
// encodes it (JSON: what each leaf tenant holds and waits for, idle GPUs). The store keeps the
// body as it is given.
struct HistoryPointRecord {
  int64_t t_s = 0;
  std::string body;
  friend bool operator==(const HistoryPointRecord&, const HistoryPointRecord&) = default;
};

// The key of a usage sample, as ListUsageSamples orders them (node, workload, gpu, seq; strings
// by the database's text order).
struct UsageSampleKey {
  std::string node;
  std::string workload;
  std::string gpu;
  int64_t seq = 0;
  friend bool operator==(const UsageSampleKey&, const UsageSampleKey&) = default;
};

// Which usage samples ListUsageSamples returns: those whose span overlaps [from_s, to_s)
// (start_s < to_s and end_s > from_s), of `tenant` and every tenant below it (by the tenants'
// parent links; "" = every tenant, deleted ones too), with a key after `after` (a page's last
// key; none = from the first).
struct UsageFilter {
  std::string tenant;
  int64_t from_s = INT64_MIN;
  int64_t to_s = INT64_MAX;
  std::optional<UsageSampleKey> after;
};

// Which workloads a list holds: one tenant's ("" every tenant's), in one state (nullopt: any).
struct WorkloadFilter {
  std::string_view tenant;
  std::optional<WorkloadState> state;
};

// One page of a workload list. next_continue is empty on the last page; otherwise pass it back
// as `continue_token` to get the next page. Tokens are opaque to callers.
struct WorkloadPage {
  std::vector<WorkloadRecord> workloads;
  std::string next_continue;
};

// The SHA-256 (lowercase hex) of an audit record's canonical fields: each of prev_hash, seq,
// time_ms, actor, action, target, result in that order as "<byte length>:<bytes>\n" (numbers in
// decimal). Exposed so that tools and tests can check a chain independently.
std::string AuditHash(std::string_view prev_hash, int64_t seq, int64_t time_ms, std::string_view actor,
                      std::string_view action, std::string_view target, std::string_view result);

// The hash that the first record chains to: 64 '0' characters.
inline constexpr std::string_view kAuditGenesisHash =
    "0000000000000000000000000000000000000000000000000000000000000000";

// The operations inside one transaction (see Store::Transact). Reads see the transaction's own
// writes. Every method may also return Unavailable or Internal when the database fails.
class Transaction {
 public:
  virtual ~Transaction() = default;

  // Tenants. CreateTenant: AlreadyExists when the name is taken, FailedPrecondition when the
  // parent does not exist. UpdateTenant replaces parent, spec_json and updated_ms (created_ms is
  // kept). DeleteTenant: FailedPrecondition while children, tokens or workloads refer to it.
  virtual Status CreateTenant(const TenantRecord& tenant) = 0;
  virtual Status UpdateTenant(const TenantRecord& tenant) = 0;
  virtual Status DeleteTenant(std::string_view name) = 0;
  virtual StatusOr<TenantRecord> GetTenant(std::string_view name) = 0;
  virtual StatusOr<std::vector<TenantRecord>> ListTenants() = 0;  // by name

  // Tokens. CreateToken: AlreadyExists when the id or the hash is taken. RevokeToken sets
  // revoked (NotFound for an unknown id); tokens are never deleted, so the audit log's actors
  // stay resolvable.
  virtual Status CreateToken(const TokenRecord& token) = 0;
  virtual StatusOr<TokenRecord> GetToken(std::string_view id) = 0;
  virtual StatusOr<TokenRecord> FindTokenByHash(std::string_view hash_hex) = 0;
  virtual Status RevokeToken(std::string_view id) = 0;
  virtual StatusOr<std::vector<TokenRecord>> ListTokens() = 0;  // by id

  // Nodes. PutNode inserts or replaces the node of that name.
  virtual Status PutNode(const NodeRecord& node) = 0;
  virtual StatusOr<NodeRecord> GetNode(std::string_view name) = 0;
  virtual Status DeleteNode(std::string_view name) = 0;
  virtual StatusOr<std::vector<NodeRecord>> ListNodes() = 0;  // by name

  // Workloads. InsertWorkload ignores workload.id and .version, assigns the id (returned) and
  // version 1; FailedPrecondition for an unknown tenant. UpdateWorkload writes every field but
  // id, tenant and created_ms when the stored version equals workload.version (the version the
  // caller read) and returns the new version (workload.version + 1); FailedPrecondition when it
  // differs (someone else changed it: read again and retry), NotFound for an unknown id.
  // DeleteWorkload also deletes its events.
  virtual StatusOr<int64_t> InsertWorkload(const WorkloadRecord& workload) = 0;
  virtual StatusOr<int64_t> UpdateWorkload(const WorkloadRecord& workload) = 0;
  virtual StatusOr<WorkloadRecord> GetWorkload(int64_t id) = 0;
  virtual Status DeleteWorkload(int64_t id) = 0;
  // The workloads `filter` selects by id, `limit` (1..10000) at a time; an empty filter lists
  // every tenant's (the daemon's restart). InvalidArgument for a bad limit or continue token (a
  // token is good only with the filter that gave it).
  virtual StatusOr<WorkloadPage> ListWorkloads(const WorkloadFilter& filter, int limit,
                                               std::string_view continue_token) = 0;
  // The same page with only id and version set in each record (the rest default): for readers
  // that keep what they rendered of a record by its version and fetch only what changed.
  virtual StatusOr<WorkloadPage> ListWorkloadVersions(const WorkloadFilter& filter, int limit,
                                                      std::string_view continue_token) = 0;

  // Idempotency keys: PutIdempotency stores the first answer (AlreadyExists when the key of
  // this token already has one); GetIdempotency returns it or NotFound.
  virtual Status PutIdempotency(const IdempotencyRecord& record) = 0;
  virtual StatusOr<IdempotencyRecord> GetIdempotency(std::string_view token_id, std::string_view key) = 0;

  // Workload events (FailedPrecondition for an unknown workload); listed by time, then id.
  virtual StatusOr<int64_t> AppendWorkloadEvent(const WorkloadEvent& event) = 0;
  virtual StatusOr<std::vector<WorkloadEvent>> ListWorkloadEvents(int64_t workload_id) = 0;
  // An object event (a node, tenant or token changed); its id, from the same sequence.
  virtual StatusOr<int64_t> AppendObjectEvent(const ObjectEvent& event) = 0;
  // Every workload's events and every object event with id > after_id, by id, at most `limit`
  // (the event feed; ids grow in commit order on SQLite, not always on PostgreSQL: see
  // daemon/event_feed.h). A deleted workload's events are gone with it; object events stay.
  virtual StatusOr<std::vector<TenantWorkloadEvent>> ListEventsAfter(int64_t after_id, int limit) = 0;
  // The largest event id there is, 0 when there is none.
  virtual StatusOr<int64_t> LastWorkloadEventId() = 0;

  // Usage samples. PutUsageSample stores a new sample and returns true; false when the same key
  // is stored with the same values (a resend: nothing changes); ALREADY_EXISTS, naming the first
  // field that differs, when the key is stored with other values. The store does not check the
  // values (the daemon and the metering ledger do). ListUsageSamples returns up to `limit`
  // (1..10000) samples of `filter` by key; the next page starts after the last one's key.
  virtual StatusOr<bool> PutUsageSample(const UsageSampleRecord& sample) = 0;
  virtual StatusOr<std::vector<UsageSampleRecord>> ListUsageSamples(const UsageFilter& filter, int limit) = 0;

  // SLA observations. PutSlaObservation stores one, replacing the value stored under its key;
  // ListSlaObservations returns those with from_s <= hour_s < to_s, by (hour_s, tenant, metric).
  virtual Status PutSlaObservation(const SlaObservationRecord& observation) = 0;
  virtual StatusOr<std::vector<SlaObservationRecord>> ListSlaObservations(int64_t from_s, int64_t to_s) = 0;

  // The cluster history. PutHistoryPoint stores one, replacing the body stored at its t_s;
  // ListHistoryPoints returns those with t_s >= from_s, by t_s; DeleteHistoryPointsBefore removes
  // those with t_s < before_s and returns how many it removed.
  virtual Status PutHistoryPoint(const HistoryPointRecord& point) = 0;
  virtual StatusOr<std::vector<HistoryPointRecord>> ListHistoryPoints(int64_t from_s) = 0;
  virtual StatusOr<int64_t> DeleteHistoryPointsBefore(int64_t before_s) = 0;

  // The audit log: AppendAudit chains the entry to the newest record and returns it;
  // ListAudit returns up to `limit` records with seq > after_seq, by seq.
  virtual StatusOr<AuditRecord> AppendAudit(const AuditEntry& entry) = 0;
  virtual StatusOr<std::vector<AuditRecord>> ListAudit(int64_t after_seq, int limit) = 0;
};

// Who owns a store (see Ownership in the header comment): the process as it records itself.
struct OwnerIdentity {
  int64_t pid = 0;
  std::string host;
  int64_t since_ms = 0;  // when it took ownership (ms since the epoch)
  friend bool operator==(const OwnerIdentity&, const OwnerIdentity&) = default;
};

// What one TryAcquireOwnership found. When not acquired, holder is the owner as it recorded
// itself; pid 0 and an empty host when it has not written that yet (it took the lock a moment
// ago) or the record cannot be read.
struct OwnershipClaim {
  bool acquired = false;
  OwnerIdentity holder;
};

// The first key of the PostgreSQL leader lease's advisory lock ("tess"); the second is
// hashtext(current_schema()), so stores in different schemas of one database do not exclude
// each other.
inline constexpr int32_t kOwnerLockClass = 0x74657373;

// Counters of one Store (see Store::Stats).
struct StoreStats {
  int64_t transactions = 0;  // Transact calls that finished (OK or not)
  int64_t commits = 0;       // database transactions committed (one per batch that had a success)
  int64_t waiting = 0;       // callers queued now, not yet taken into a batch
};

class Store {
 public:
  virtual ~Store() = default;

  // Runs fn inside one transaction (reads too), possibly batched with other callers' (group
  // commit, see the header comment). OK from fn and from the commit: durable. A non-OK Status
  // from fn, or any failed statement inside: fn's writes are rolled back, and that Status is
  // returned.
  virtual Status Transact(const std::function<Status(Transaction&)>& fn) = 0;

  // Transact without waiting (the daemon's submits: no HTTP thread waits for an fsync). fn joins
  // the group commit exactly as a Transact caller's callback would (same queue, same batching,
  // same per-callback contract), and done(status) is called once, with what Transact would have
  // returned, after the commit holding fn's writes is durable (or failed). fn runs and done is
  // called on the thread leading the batch: the Store's writer thread (started by the first
  // TransactAsync), or a Transact caller whose batch took fn in, maybe while that caller holds its
  // own locks. So done must be short, must not throw, block or take a lock a Transact caller may
  // hold: it hands the rest to another thread (the daemon posts it to an HTTP thread). Calls still
  // queued when the Store is destroyed run, and get their done, before the destructor returns.
  // Worked example: HTTP thread H calls TransactAsync(fnA, doneA) and returns at once; the writer
  // wakes and leads: BEGIN, fnA; thread B's Transact(fnB) arrives meanwhile and is taken in; COMMIT
  // (one fsync); B returns OK; the writer calls doneA(OK), which posts A's answer to H.
  virtual void TransactAsync(std::function<Status(Transaction&)> fn, std::function<void(Status)> done) = 0;

  // What this Store has done since Open (counters only grow; cheap, never blocks on the
  // database). Tests use it to see batching; the daemon may export it as metrics.
  virtual StoreStats Stats() const = 0;

  // Walks the whole audit chain (in pages; read-only).
  virtual StatusOr<AuditVerification> VerifyAuditChain() = 0;

  // Tries once, without waiting, to make this Store the store's only owner (see Ownership in the
  // header comment) until it is destroyed. acquired: it is (again OK and acquired when it
  // already was); otherwise someone else owns it and holder says who. Unavailable when the lock
  // file cannot be created or locked (SQLite) or the lease connection fails (PostgreSQL).
  // Thread-safe with Transact (it uses its own descriptor or connection).
  virtual StatusOr<OwnershipClaim> TryAcquireOwnership(const OwnerIdentity& me) = 0;
  // OK while this Store owns the store. FailedPrecondition when it never acquired it;
  // Unavailable when it lost it (PostgreSQL: the lease connection no longer answers, so the
  // server has released, or will release, the lease to a standby). A SQLite owner cannot lose it.
  virtual Status CheckOwnership() = 0;

  // "sqlite" or "postgresql".
  virtual std::string_view Kind() const = 0;
  // The schema version this database is at (the newest this binary knows, after Open).
  virtual int SchemaVersion() const = 0;

  // Test-only: runs raw statements outside any Transact (tests tamper with the audit log and
  // the migrations table through it). Never called by the daemon.
  virtual Status ExecForTesting(std::string_view sql) = 0;
};

// The newest schema version this binary knows. 1: tenants, tokens, nodes, workloads, idempotency,
// workload events, audit. 2: usage samples. 3: a node-agent token's node (tokens.node), the
// identity that registered a node (nodes.agent_token, nodes.agent_id). 4: object events (node,
// tenant, token) in the workload events' table (workload_id NULL; subject, name, scope).
// 5: the control plane's SLA observations (sla_observations). 6: the control plane's cluster
// history (cluster_history). 7: NVML's figures of a usage sample (usage_samples.nvml_used_milli,
// usage_samples.nvml_memory_mib; NULL where absent).
inline constexpr int kSchemaVersion = 7;

struct Options {
  // How long a write waits for another process's lock (SQLite) before Unavailable.
  int busy_timeout_ms = 5000;
  // PostgreSQL: connect timeout in seconds (libpq's connect_timeout) when the URL has none.
  int connect_timeout_s = 10;
  // Group commit: the most callbacks one database commit takes (>= 1; 1 = one commit per Transact).
  int max_batch = 64;
  // SQLite: create the file when it does not exist (false: Open fails with Unavailable, e.g. for
  // `tessera audit verify`, which must not invent an empty database from a mistyped path).
  bool create_if_missing = true;
};

// Opens (creating when needed) and migrates a store:
//   "sqlite:PATH" or a plain file path -> SQLite (the file is created if missing);
//   "postgresql://..." or "postgres://..." -> PostgreSQL (a libpq connection URI).
// InvalidArgument for an empty url; Unavailable when the database cannot be opened or reached;
// FailedPrecondition when the database's schema is newer than kSchemaVersion.
StatusOr<std::unique_ptr<Store>> Open(std::string_view url, const Options& options = {});

}  // namespace tessera::store
