// The scheduler as a service core: the multi-tenant Scheduler (scheduler.h) in an open world,
// addressed by the caller's ids. The control plane, the Slurm plugin and the Kubernetes
// extender drive this class; the simulator, a closed world, drives Scheduler directly.
//
//   - Jobs are the caller's JobId (a database row id, a Slurm job id, a pod UID's hash),
//     tenants their names, nodes their NodeSpec::name. Dense indices stay inside.
//   - The world is live: nodes join (AddNode), leave (RemoveNode: the jobs that ran there come
//     back as lost), are cordoned (no new work) or drained (cordoned, and what runs there is
//     requeued); the tenant tree and its quotas are replaced whole (SetTenants). Running work
//     is never touched by a tenant or quota change.
//   - Every decision comes out of Cycle as values (starts, preemptions, moves, wait reasons
//     that changed, pending jobs a world change made impossible) for the caller to persist
//     before acting on them. No I/O, no clock: `now` is the caller's.
//
// How a world change is applied: structural changes (nodes added or removed, a new tenant
// tree) are recorded and applied at the next call that reads or schedules, by rebuilding the
// Scheduler from the running set (Scheduler::Adopt, with each job's placement, start time and
// placement seq) and the pending queue (SubmitRestored, with each job's wait reason). That is
// the restart path, and a rebuild in an unchanged world makes exactly the decisions the old
// scheduler would have made (tested: LiveScheduler.RebuildInAnUnchangedWorldChangesNoDecision),
// as the simulator's restart test shows for the default scenario. Several changes between two
// cycles cost one rebuild (O(running + pending x nodes)). Cordon and uncordon need none.
// A rebuild carries the decayed fair-share usage over (fair_share_half_life_s > 0; by tenant
// name, a tenant whose leaves changed gets the sum of its leaves'). It does not carry the state
// of stateful placement policies (random, nextfit); the default policies keep none.
//
// Worked example (two 1-GPU nodes "n1", "n2"; tenants "a" guaranteed 1 GPU and "b"):
//   live->Submit({.id = 7, .tenant = "b", .qos = kBurstable, 1 x 1 GPU})
//   live->Submit({.id = 8, .tenant = "b", ...});  live->Cycle(10s)
//       -> started {7 on n1 GPU 0, seq 1}, {8 on n2 GPU 0, seq 2}
//   live->Drain("n2")        -> {8}: 8 is pending again (the caller stops it on n2)
//   live->Cycle(20s)         -> nothing starts (n2 is cordoned, n1 busy); waits {8: capacity}
//   live->RemoveNode("n2")   -> {} (nothing ran there any more)
//   live->AddNode({"n3", ...}); live->Cycle(30s) -> started {8 on n3 GPU 0}
//   live->RemoveNode("n1")   -> {7}: lost; the caller decides whether to Submit it again.
//
// Thread-safety: one LiveScheduler per thread (the control plane serialises calls).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/sched/job.h"
#include "tessera/sched/scheduler.h"
#include "tessera/sched/tenant.h"

namespace tessera::sched {

// A job in the caller's vocabulary (see Job for the fields' meaning).
struct LiveJob {
  JobId id = 0;                 // the caller's id, unique among pending and running jobs
  std::string tenant;           // a leaf tenant's name
  QosClass qos = QosClass::kBurstable;
  int32_t priority = 0;
  int32_t pods = 1;
  placement::TaskRequest pod;
  MiB gpu_memory{0};
  std::string workload_class;   // affinity vocabulary; empty: none
  std::string label;            // affinity label value (e.g. "prod"); empty: none
  Seconds submit{0};
};

// Where one pod runs: a node by name, the GPUs it takes there (bit g: GPU g), and for MIG
// requests the instance's first memory slice (else -1).
struct PodPlacement {
  std::string node;
  placement::GpuSet gpus = 0;
  int32_t mig_start = -1;
  friend bool operator==(const PodPlacement&, const PodPlacement&) = default;
};

// Affinity rules by name (AffinityRules with the caller's vocabulary).
struct LiveAffinity {
  std::vector<std::pair<std::string, std::string>> classes_apart;
  std::vector<std::pair<std::string, std::string>> tenants_apart;
  bool labels_apart = false;
};

struct LiveStart {
  JobId job = 0;
  std::vector<PodPlacement> pods;
  uint64_t seq = 0;  // StartEvent::seq: hand it back to Adopt after a restart
};
struct LiveMove {
  JobId job = 0;
  int pod = 0;
  PodPlacement from, to;
  JobId for_job = 0;
  bool restart = false;
  uint64_t seq = 0;
};
struct LiveWait {
  JobId job = 0;
  WaitReason reason = WaitReason::kNone;
};
// A pending job a world change made impossible (its tenant's limit was lowered under its
// request, no node left can hold one pod): taken out of the queue, with the reason.
struct LiveRejection {
  JobId job = 0;
  std::string reason;
};

struct LiveCycleResult {
  std::vector<LiveStart> started;
  std::vector<PreemptEvent> preempted;  // victims are pending again
  std::vector<LiveMove> moves;
  // Pending jobs whose wait reason changed since the last cycle reported it (a new job's
  // first reason included); started and rejected jobs are not listed.
  std::vector<LiveWait> waits;
  std::vector<LiveRejection> rejected;
  int attempts = 0;
  // Not OK once the scheduler found its own bookkeeping inconsistent (CycleResult::error), or a
  // rebuild failed to adopt what ran: rebuild from what was persisted. Sticky.
  Status error = Status::Ok();
};

// How strict the live world is about quotas it cannot yet honour.
struct LiveOptions {
  // true: the roots' guarantees must fit the nodes' capacity (Create and SetTenants refuse
  // otherwise). false: a control plane whose tenants are set up before its nodes register takes
  // them; Guaranteed work beyond what the nodes hold waits (reason capacity) until nodes join.
  bool guarantees_must_fit = true;
};

enum class NodeState : uint8_t { kReady, kCordoned };
std::string_view NodeStateName(NodeState s);  // "ready" / "cordoned"

class LiveScheduler {
 public:
  // `options.affinity` must be empty: affinity rules come by name in `affinity` (a rule
  // naming an unknown tenant is INVALID_ARGUMENT). Node names must be unique and non-empty.
  // The roots' guarantees must fit the nodes' capacity (TenantTree::CheckFits).
  static StatusOr<std::unique_ptr<LiveScheduler>> Create(TenantTree tenants,
                                                         std::vector<placement::NodeSpec> nodes,
                                                         SchedulerOptions options,
                                                         LiveAffinity affinity = {},
                                                         LiveOptions live = {});
  ~LiveScheduler();

  // --- work ---------------------------------------------------------------------------------
  // Scheduler::Submit's admission, by name (NOT_FOUND: unknown tenant; FAILED_PRECONDITION: no
  // node of the cluster can hold one pod now).
  Status Submit(const LiveJob& job);
  // What Submit would answer, queuing nothing (the control plane asks before it persists).
  Status CheckSubmit(const LiveJob& job);
  LiveCycleResult Cycle(Seconds now);
  Status Complete(JobId id, Seconds now);  // NOT_FOUND if not running
  Status Cancel(JobId id);                 // NOT_FOUND if not pending

  // --- the world ----------------------------------------------------------------------------
  // A node joins (ready). INVALID_ARGUMENT: a bad spec or a name already in use.
  Status AddNode(placement::NodeSpec node);
  // A node leaves: returns the jobs that had a pod there (ascending id). They no longer run
  // (their other pods' resources are freed too) and are not requeued: the caller decides
  // (Submit again with the same id to requeue). NOT_FOUND for an unknown node.
  StatusOr<std::vector<JobId>> RemoveNode(std::string_view name);
  // No new pod lands on a cordoned node; what runs there stays.
  Status Cordon(std::string_view name);
  Status Uncordon(std::string_view name);
  // Cordons the node and requeues every job with a pod there (they are pending again, with
  // their original submit time); returns them (ascending id) for the caller to stop.
  StatusOr<std::vector<JobId>> Drain(std::string_view name);
  // Replaces the tenant tree and its quotas, applied at the next cycle. Refused
  // (FAILED_PRECONDITION, naming the tenant) when a tenant with pending or running jobs would
  // be gone or no longer a leaf, and INVALID_ARGUMENT when the roots' guarantees exceed the
  // cluster's capacity. Running jobs stay whatever the new quotas say (a tenant over a lowered
  // guarantee is a borrower from then on); pending jobs the new quotas make impossible come
  // back in the next cycle's `rejected`. Affinity rules naming a tenant that is gone are
  // dropped. The capacity check follows LiveOptions::guarantees_must_fit.
  Status SetTenants(TenantTree tenants);

  // --- rebuilding after a restart -------------------------------------------------------------
  // Scheduler::Adopt and SubmitRestored by name: a fresh LiveScheduler over the same world,
  // given every running job (with its pods, start time and latest seq) and every pending job
  // (with its last wait reason), makes the decisions the one it replaces would have made.
  Status Adopt(const LiveJob& job, const std::vector<PodPlacement>& pods, Seconds start,
               uint64_t seq);
  Status SubmitRestored(const LiveJob& job, WaitReason last_reason);

  // --- queries --------------------------------------------------------------------------------
  bool is_running(JobId id);
  bool is_pending(JobId id);
  WaitReason wait_reason(JobId id);  // kNone if not pending
  // Where a running job's pods are (empty if it is not running).
  std::vector<PodPlacement> placement_of(JobId id);
  std::optional<Seconds> start_time(JobId id);
  uint64_t placed_seq(JobId id);
  std::vector<JobId> running_jobs();  // ascending seq
  std::vector<JobId> pending_jobs();  // ascending id
  // Usage of a tenant's subtree and its weighted dominant share (NOT_FOUND: unknown tenant).
  StatusOr<Resources> usage(std::string_view tenant);
  StatusOr<double> dominant_share(std::string_view tenant);
  const TenantTree& tenants() const;
  struct NodeView {
    std::string name;
    NodeState state = NodeState::kReady;
    int32_t gpu_count = 0;
    // Free GPU milli per GPU, and the running jobs with a pod there (ascending id).
    std::vector<int32_t> gpu_free_milli;
    std::vector<JobId> jobs;
  };
  std::vector<NodeView> nodes();  // in the order they joined
  // One node's entry of nodes(), or nullopt for a node the scheduler does not hold; costs one
  // node and a pass over the running jobs, not the cluster (an agent's every-second desired-state
  // poll calls it: with nodes() 1,000 agents cost the daemon O(nodes^2) per second).
  std::optional<NodeView> node(const std::string& name);
  // The core (for tests and diagnostics; indices are internal and change at a rebuild).
  const Scheduler& core();

  struct State;

 private:
  explicit LiveScheduler(std::unique_ptr<State> state);
  std::unique_ptr<State> s_;
};

}  // namespace tessera::sched
