// Workloads without HTTP: what callers do with workloads (submit, get, list, cancel, change), each
// taking a typed request and the caller's identity and returning StatusOr of a typed value, and
// the state that is the service's own: the rendered views by version (the list path's cache) and
// the cancels that came before their submit queued the job. The HTTP handlers
// (control_plane_workloads.cc) are decode -> service call -> render;
// tests/daemon/workload_service_test.cc drives it directly against a real store and a stand-in
// scheduler (WorkloadWorld).
//
// The scheduler's side (its jobs, the parked ones, the tenant map, the loop) is the world's: the
// service asks it through WorkloadWorld, under the world lock (the control plane's `mu`).
//
// A submit is three steps, so that no HTTP thread waits for the group commit:
//   1. Submit (the caller's thread): authorise the body's tenant, check the Idempotency-Key, check
//      against the world (Admit, under the world lock). A refusal is the answer at once, unless a
//      key's stored answer could override it. Otherwise Submit returns the write to start (a
//      CommitSubmit); starting it queues it in the store's batch (TransactAsync):
//   2. in the batch: the stored answer of the key, if any, is the answer (whatever step 1 found: a
//      retry gets the first answer); else, unless step 1 refused it, the workload, its key's answer
//      and the audit record are written;
//   3. once that commit is durable, `durable(finish)` is called on the store's leading thread; it
//      must hand `finish` to another thread (the daemon: an HTTP thread), where finish queues the
//      job (under the world lock) and gives the answer.
// E.g. 16 clients submitting at once: their writes share one or two commits (one fsync each) while
// the HTTP threads go on reading requests.
//
// Errors are what the API answers (ErrorResponse): NOT_FOUND "workload 7 not found" (also for
// another subtree's), INVALID_ARGUMENT naming the field in *bad_field ("state", "limit",
// "continue", "Idempotency-Key", a request field), FAILED_PRECONDITION for a conflict (already
// ended, a change of mode, a share its GPU has not free).
//
// Worked example (tenant ml, an empty cluster but for one node with a free GPU):
//   Submit(ml_user, {.request = {tenant ml, 1 GPU}, .idempotency_key = "k1"}) -> commit; durable;
//     finish -> {id 1}; the world's enqueue(1, shape)
//   Submit(ml_user, same, key "k1") ... finish -> replay {201, {"id":1,"state":"pending"}}
//   Get(ml_user, "1")                  -> view: pending, "queued", events []
//   Get(other_user, "1")               -> NOT_FOUND "workload 1 not found"
//   List(ml_user, {.state = "running"}) -> {views: [], next_continue ""}
//   Change(ml_user, "1", {"priority": 5}) -> view with priority 5; the world restored
//   Cancel(ml_user, "1")               -> view: cancelled, version + 1; the world's withdraw(1)
//   Cancel(ml_user, "1")               -> FAILED_PRECONDITION "workload 1 is already cancelled"
//
// Thread-safety: all methods may be called from any thread. Locks: the world lock (held by
// Cancel, Change and the submit's queueing, and by Admit's checks) is taken before views_mu_
// (a leaf: the view cache).
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/daemon/authz.h"
#include "src/daemon/tenant_service.h"
#include "src/daemon/workload_request.h"
#include "src/daemon/workload_shape.h"
#include "tessera/api/workload_wire.h"
#include "tessera/core/gpu_model.h"
#include "tessera/core/clock.h"
#include "tessera/core/status.h"
#include "tessera/sched/live_scheduler.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

struct WorkloadCaller {
  std::string actor;  // for the audit record and idempotency keys: the caller's token id
  Principal principal;
  // OK, NOT_FOUND ("<what> not found") or PERMISSION_DENIED for `action` on `tenant`.
  std::function<Status(Action action, std::string_view tenant, std::string_view what)> check;
};

// What the service needs of the scheduler it feeds. Callbacks marked (locked) are called with
// *mu held; the others without it.
struct WorkloadWorld {
  std::mutex* mu = nullptr;  // the world lock
  // (locked) The stored spec (JSON text) of a tenant, valid while the lock is held; nullptr: no
  // such tenant.
  std::function<const std::string*(const std::string& tenant)> tenant_spec;
  // (locked) Whether the scheduler knows the tenant as a leaf (work is submitted to leaves only).
  std::function<bool(const std::string& tenant)> is_leaf;
  // (locked) The GPU model of a request that names none (nullopt: the cluster has no nodes yet).
  std::function<std::optional<GpuModelId>()> default_model;
  // (locked) The scheduler's admission of a job: OK, FAILED_PRECONDITION when no node of the
  // cluster can hold it now (it waits, parked), anything else a refusal.
  std::function<Status(const sched::LiveJob& job)> check_submit;
  // A refusal by the scheduler's admission was answered (metrics, the anomaly detector);
  // submit_ms: the submit's instant, read once per submit (the hour the refusal counts in).
  std::function<void(std::string_view tenant, int64_t submit_ms)> refused;
  // (locked) A durable submit: the scheduler takes the job (or parks it); the loop is to wake.
  std::function<void(int64_t id, const WorkloadShape& shape, int64_t submit_ms)> enqueue;
  // (locked) A durable cancel: the scheduler lets the job go; the loop is to wake. false: the
  // scheduler did not know it (its submit has not queued it yet). cancel_ms: the instant the
  // cancel wrote (updated_ms, its event), which a running job completes at.
  std::function<bool(int64_t id, int64_t cancel_ms)> withdraw;
  // (locked) The shape the scheduler holds for a pending or running job; nullptr: none (yet).
  std::function<const WorkloadShape*(int64_t id)> known_shape;
  // (locked) OK unless a GPU of the running job has less than `more_milli` free
  // (FAILED_PRECONDITION naming the GPU and its node).
  std::function<Status(int64_t id, int32_t more_milli)> check_share;
  // (locked) A durable change: the scheduler rebuilt from the store (its error is the answer).
  std::function<Status()> restore;
  // Wakes the scheduling loop (after enqueue, withdraw or restore released the lock).
  std::function<void()> wake;
  // (takes the lock) What to add to "no_fitting_node" for a job no node can hold now, e.g. why
  // MIG work waits (ControlPlane's MigWaitNote); null or "": nothing.
  std::function<std::string(const placement::TaskRequest& pod)> wait_note;
};

// POST /v1/workloads, decoded.
struct SubmitWorkloadRequest {
  WorkloadRequest request;
  std::string idempotency_key;  // "" for none; checked by CheckIdempotencyKey
};

struct SubmittedWorkload {
  int64_t id = 0;                        // the new workload (0 for a replay)
  std::optional<ReplayedAnswer> replay;  // set: the key's first answer
};

// GET /v1/workloads: the query's values as given (the service checks them in this order: tenant,
// limit, state, continue).
struct ListWorkloadsRequest {
  std::string tenant;                 // "": the caller's view (an admin's: every tenant)
  std::optional<std::string> limit;   // ?limit= (1..1000; 100 when absent)
  std::optional<std::string> state;   // ?state=: one of the workload states
  std::string continue_from;          // ?continue=: the page's token, "" for the first
};

struct WorkloadList {
  std::string next_continue;       // "" on the last page
  std::vector<std::string> views;  // each workload's view as JSON text (api::EncodeWorkloadView)
};

// PATCH /v1/workloads/{id}: the body's fields, each one of gpu_mem_mib, gpu_milli, priority
// (DecodeWorkloadChange); their values are checked against the workload's request.
struct WorkloadChange {
  nlohmann::json fields = nlohmann::json::object();
};
// INVALID_ARGUMENT for a body that is not a JSON object or names another field (*bad_field).
StatusOr<WorkloadChange> DecodeWorkloadChange(std::string_view body, std::string* bad_field);

// A stored workload as the API shows it (its events not included).
api::WorkloadView WorkloadViewOf(const store::WorkloadRecord& w);

class WorkloadService {
 public:
  using TransactFn = std::function<Status(std::string_view operation, const std::function<Status(store::Transaction&)>& fn)>;
  using TransactAsyncFn = std::function<void(std::string_view operation, std::function<Status(store::Transaction&)> fn,
                                             std::function<void(Status)> done)>;
  // Step 3 of a submit (see the header comment): queues the job, returns the answer.
  using FinishSubmit = std::function<StatusOr<SubmittedWorkload>(std::string* bad_field)>;
  // Steps 2 and 3: starts the write; `durable` is called on the store's leading thread.
  using CommitSubmit = std::function<void(std::function<void(FinishSubmit finish)> durable)>;

  WorkloadService(TransactFn transact, TransactAsyncFn transact_async, const Clock& clock,
                  WorkloadWorld world, const GpuModelCatalog& catalog);

  // Step 1: the refusal when it is final now, else the write to start.
  StatusOr<CommitSubmit> Submit(const WorkloadCaller& caller, SubmitWorkloadRequest request,
                                std::string* bad_field = nullptr);
  // The workload of `id` (as given in the path) with its events.
  StatusOr<api::WorkloadView> Get(const WorkloadCaller& caller, std::string_view id);
  StatusOr<WorkloadList> List(const WorkloadCaller& caller, const ListWorkloadsRequest& request,
                              std::string* bad_field = nullptr);
  // The cancelled workload (version + 1; FAILED_PRECONDITION when it has already ended).
  StatusOr<api::WorkloadView> Cancel(const WorkloadCaller& caller, std::string_view id);
  // The changed workload. A change that would alter the mode, or a larger share than its GPU has
  // free, is FAILED_PRECONDITION (resubmit); a job still being queued too (retry).
  StatusOr<api::WorkloadView> Change(const WorkloadCaller& caller, std::string_view id, const WorkloadChange& change,
                                     std::string* bad_field = nullptr);

 private:
  // The submit's checks against the world, under its lock: the tenant, its leaf-ness, its default
  // QoS, the shape, the scheduler's admission. *park: no node can hold it now; *counted: the
  // refusal is the admission's (counted as a rejection).
  StatusOr<WorkloadShape> Admit(WorkloadRequest& req, int64_t now, bool* park, bool* counted, std::string* bad_field);
  // The workload of path id `raw` when the caller may do `action` to it.
  StatusOr<store::WorkloadRecord> Find(std::string_view raw, const WorkloadCaller& caller, Action action);
  // The first answer stored for an Idempotency-Key (nullopt: none yet).
  StatusOr<std::optional<ReplayedAnswer>> StoredAnswer(const std::string& actor, const std::string& key);
  std::string ViewText(const store::WorkloadRecord& w);
  std::optional<std::string> CachedView(int64_t id, int64_t version);

  const TransactFn transact_;
  const TransactAsyncFn transact_async_;
  const Clock& clock_;  // outlives the service
  const WorkloadWorld world_;
  const GpuModelCatalog& catalog_;
  std::set<int64_t> cancelled_before_queued_;  // world_.mu

  // The JSON text of each workload's view as the read paths answer it (a list page is 100 of
  // them; rendering one parses its stored spec): id -> (version, text). A record's every change
  // bumps its version and ids are never reused, so an entry is right as long as its version is.
  // Bounded: cleared when it grows past kMaxViews.
  static constexpr size_t kMaxViews = 20'000;  // about 14 MiB of views at ~700 bytes each
  std::mutex views_mu_;
  std::unordered_map<int64_t, std::pair<int64_t, std::string>> views_;
};

}  // namespace tessera::daemon
