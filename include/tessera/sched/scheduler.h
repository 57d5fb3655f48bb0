// The multi-tenant scheduler: admission, queues, weighted hierarchical DRF over the surplus,
// reclaim by preemption, gangs and affinity, on top of the placement engine.
//
// A scheduling cycle (Cycle) walks the pending jobs in three passes:
//   1. entitled  Guaranteed and Burstable jobs that fit in their (leaf) tenant's unused
//                guarantee. If one does not fit in the cluster, borrowed work is preempted for it
//                (reclaim), never below a lender's guarantee.
//   2. borrowing Burstable jobs beyond the guarantee, up to the tenant's limit.
//   3. leftovers BestEffort jobs.
// Within a pass the next job comes from the tenant with the lowest weighted dominant share
// (hierarchical: the least-served organisation, then its least-served team, ...; another order
// by SchedulerOptions::fair_order, see fair_order.h); inside a
// tenant by priority, then submit time. A job that cannot start is skipped (backfill) and its
// wait reason is kept (quota, capacity, affinity).
//
// Defragmentation (pass 1): guarantees are aggregate GPU milli, but a job needs its GPUs on one
// node. When an entitled single-pod job fits nowhere even with reclaim, the scheduler plans,
// on the 8 nodes with the least immovable work, how to clear room: evict what the job may
// preempt (the reclaim rules), else move a single-pod job elsewhere: to free room, or by
// evicting borrowed work there (a swap). Fractional pods move live (a reported move, as in
// consolidation); a whole-GPU pod restarts at its destination (MoveEvent::restart); a
// whole-GPU Guaranteed pod and gang pods never move. The plan that throws away the least work
// wins (a live move loses nothing; an eviction or a restart loses the GPU time that job has
// run) and the job starts on the cleared node. Bounded: 2 plans per cycle.
//   Example (two 4-GPU nodes; A and B guaranteed 4 GPUs each): B runs four 1-GPU Burstable
//   jobs, two per node (B is at its guarantee: none is a victim). A submits a 4-GPU job: no
//   node has 4 free GPUs and reclaim finds nothing -> B's two jobs on one node restart on the
//   other, A's job starts on the cleared node; B keeps its four GPUs.
//
// Fair-share preemption (pass 2) never loops either: the victim's side must stay at least as
// served as the preemptor's side after the swap, so both sides end below the victim side's
// share before it: the larger of the two shares drops and the sorted vector of shares
// decreases lexicographically with every preemption.
//
// Reclaim never loops: a preemptor is within its guarantee after it starts; a victim's tenant
// is over its guarantee when the victim is taken (borrowing; checked at every level below the
// two tenants' common ancestor, counting what the attempt already took), so a tenant within
// its guarantee lends nothing and the preemptor's job is never taken back while its tenant
// stays within its guarantee; taking the job that crossed a borrower's guarantee may leave the
// borrower below it, by less than that job. Guaranteed jobs are never victims, and a job is
// not preempted before it has run `min_runtime`. Victims: BestEffort first, then the least
// lost work (GPU milli x time run since its last checkpoint for a batch job, which starts over
// from there; GPU milli x its start-up for a service replica, Job::kind), the tenant's own
// work last;
// victims the job turns out not to need are reprieved.
//
// Worked example (one node of 2 GPUs; A and B each guaranteed 1 GPU, no limits):
//   B submits two 1-GPU Burstable jobs -> pass 2 starts both (B borrows A's idle GPU)
//   A submits a 1-GPU Guaranteed job   -> pass 1: entitled, no room; B is 1 GPU over its
//      guarantee, so the B job that has run least is preempted and requeued; A's job starts
//   next cycle: B's requeued job is not entitled (B is at its guarantee), and A's job is not a
//      victim (A is within its guarantee): nothing moves again.
//
// Thread-safety: one Scheduler per thread.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/fragmentation.h"
#include "tessera/placement/policy.h"
#include "tessera/sched/job.h"
#include "tessera/sched/resources.h"
#include "tessera/sched/tenant.h"

namespace tessera::sched {

// Placement constraints the scheduler enforces (by marking the GPUs or nodes a job may not use
// ineligible for the placement engine, placement::Eligibility, in that decision and in the
// reclaim search for it).
struct AffinityRules {
  // Workload classes that never share a GPU (e.g. latency-sensitive and batch).
  std::vector<std::pair<int32_t, int32_t>> classes_apart;
  // Tenants that never share a GPU (competitors).
  std::vector<std::pair<TenantIndex, TenantIndex>> tenants_apart;
  // Jobs with different label values never share a node (e.g. env=dev and env=prod).
  bool labels_apart = false;
  bool empty() const { return classes_apart.empty() && tenants_apart.empty() && !labels_apart; }
};

// When fair-share preemption may take a victim's place (the victim's side and the preemptor's
// side are the two children of their common ancestor; shares are weighted dominant shares).
enum class FairShareRule : uint8_t {
  // The victim's side after the swap is at least as served as the preemptor's side once its
  // job runs (the DRF preemption test): the preemptor never ends the better served of the two.
  // A job larger than its tenant's fair share (an 8-GPU job of a weight-1 tenant) never
  // preempts. Example: weights 1 and 7 on 8 GPUs, B holds 8: A's 2-GPU job would leave A at
  // 2/8 and B at 6/8/7 = 0.107, so it waits.
  kEqualize,
  // The victim's side after the swap stays strictly more served than the preemptor's side is
  // before it. Each swap lowers no side to or below the preemptor's old share and lifts the
  // preemptor above it, so the sorted vector of shares rises lexicographically: no loops. Lets
  // a large job of an under-served tenant start. Example above: B ends at 0.107 > A's 0, so
  // A's job takes one of B's (B cannot take it back: A would end at 0, below B's 0.107).
  // The default: on the dedicated-vs-shared scenario it lifts Jain's index among waiting
  // tenants from 0.78 to 0.93 (median of 8 seeds), at the price of more preempted work.
  kLexicographic,
};
std::string_view FairShareRuleName(FairShareRule r);
// "equalize" / "lexicographic"; INVALID_ARGUMENT otherwise.
StatusOr<FairShareRule> ParseFairShareRule(std::string_view name);

struct SchedulerOptions {
  std::string placement_policy = "tessera";             // placement::PolicyNames()
  // Which tenant's job a cycle tries next (FairOrderNames(), include/tessera/sched/fair_order.h):
  // "hdrf" hierarchical weighted DRF, "flat-drf" weighted DRF over the leaves alone.
  std::string fair_order = "hdrf";
  const placement::TargetWorkload* target_workload = nullptr;  // needed by fgd / tessera
  Seconds min_runtime{60};       // a job runs at least this long before it may be preempted
  bool preemption = true;        // reclaim borrowed work for entitled jobs
  // Also preempt for fair share: a borrowing Burstable job may take the place of borrowed work
  // (Burstable or BestEffort) of a tenant that stays served enough by fair_share_rule
  // (weighted dominant shares, compared between the two sides under their common ancestor)
  // and at or above its guarantee.
  bool fair_share_preemption = true;
  // > 0: fair-share preemption takes only Burstable batch work that has run at most this long
  // (a preempted batch job starts over, so older work is left alone; BestEffort work and
  // service replicas, which lose only their start-up, are always taken).
  // Reclaim for guarantees is not limited.
  Seconds fair_share_max_victim_runtime{0};
  FairShareRule fair_share_rule = FairShareRule::kLexicographic;
  bool consolidation = true;     // move preemptible fractional pods to free whole GPUs
  // Clear a node for an entitled job reclaim could not place: evict what it may preempt, move
  // other single-pod work elsewhere (see Defragment in src/sched/defrag.cc).
  bool defragmentation = true;
  // Also clear a node for a borrowing Burstable job that fits nowhere, by the fair-share rules
  // (evict borrowed work that fair_share_rule lets it take; restart whole-GPU pods only of
  // tenants it would let it take from). Needs defragmentation and fair_share_preemption.
  bool fair_share_defragmentation = true;
  // Place immovable work (gang pods, whole-GPU Guaranteed pods) on the largest nodes that
  // already hold immovable work, or on smaller nodes, while any of those can take it: the
  // other largest nodes stay clearable for jobs that need a whole one.
  bool keep_large_nodes_clearable = true;
  int max_reclaims_per_cycle = 64;  // victim searches per cycle; later ones wait a cycle
  double fair_share_half_life_s = 0;  // > 0: DRF on usage decayed with this half-life
  bool whole_gpus_only = false;  // dedicated clusters: a fractional pod takes a whole GPU
  AffinityRules affinity;
  uint64_t seed = 42;
};

enum class WaitReason : uint8_t {
  kNone = 0,
  kLimit,        // the tenant (or an ancestor) would exceed its limit
  kGuarantee,    // Guaranteed job beyond the tenant's unused guarantee
  kCapacity,     // no node can take it now (even with reclaim)
  kAffinity,     // it would fit but for an affinity rule
};
inline constexpr int kWaitReasonCount = 5;
std::string_view WaitReasonName(WaitReason r);

// `seq` (starts and moves): the scheduler's placement sequence, increasing over every start and
// move it makes. A caller that persists decisions keeps the latest seq of each running job and
// hands it back to Adopt after a restart: the scheduler breaks some ties by the order in which
// pods arrived on a node, and seq restores that order exactly.
struct StartEvent {
  JobId job;
  std::vector<placement::Placement> pods;
  uint64_t seq = 0;
};
struct PreemptEvent {
  JobId victim;
  JobId by;
  // Taken by fair-share preemption (the preemptor's tenant borrows; SchedulerOptions::
  // fair_share_preemption) rather than by reclaim (the preemptor is entitled to it).
  bool fair_share = false;
};
// A consolidation move: one pod of a running job goes from one GPU to another (reported, so
// the caller can migrate or restart it; nothing moves silently).
struct MoveEvent {
  JobId job;
  int pod = 0;
  placement::Placement from, to;
  JobId for_job;   // the queued job the move makes room for
  bool restart = false;  // a whole-GPU pod restarts at its destination (a fractional one moves live)
  uint64_t seq = 0;      // see StartEvent::seq
};
// A job is never both started and preempted in one cycle: a job started in a cycle is not a
// victim in it, and a victim waits for the next cycle.
struct CycleResult {
  std::vector<StartEvent> started;
  std::vector<PreemptEvent> preempted;
  std::vector<MoveEvent> moves;
  int attempts = 0;  // placement attempts this cycle
  // Not OK if the scheduler found its own bookkeeping inconsistent (an inverse change of its
  // cluster snapshot failed: a bug, never an outcome of input). Sticky: once set, every later
  // cycle reports it; the caller should stop trusting this scheduler and rebuild one from what
  // it persisted (Adopt, SubmitRestored).
  Status error = Status::Ok();
};

class Scheduler {
 public:
  // The tree must outlive the scheduler.
  static StatusOr<std::unique_ptr<Scheduler>> Create(const TenantTree* tenants,
                                                     std::vector<placement::NodeSpec> nodes,
                                                     SchedulerOptions options);
  ~Scheduler();

  // Admission. Rejects (INVALID_ARGUMENT, with the reason) a job that can never run: unknown or
  // non-leaf tenant, a request over the tenant's (or an ancestor's) limit, a Guaranteed job
  // over the tenant's guarantee, a duplicate id; FAILED_PRECONDITION for a pod no node of the
  // empty cluster can hold (a node that joins later may: the control plane keeps such work
  // waiting). Otherwise the job is queued for the next Cycle.
  Status Submit(const Job& job);
  // Submit's checks alone: what Submit would answer, and nothing queued.
  Status CheckSubmit(const Job& job) const;
  CycleResult Cycle(Seconds now);
  // A running job finished; its resources are freed. NOT_FOUND if it is not running.
  Status Complete(JobId id, Seconds now);
  // Takes a pending job out of the queue (NOT_FOUND if it is not pending).
  Status Cancel(JobId id);

  // --- rebuilding after a restart -----------------------------------------------------------
  // A fresh scheduler (same tenants, nodes and options) given every running job with Adopt and
  // every pending job with SubmitRestored, as its caller persisted them from the cycles'
  // results, makes the same decisions from then on as the scheduler it replaces (the property
  // tested by running the default scenario with sim::ScenarioOptions::restart_at), once the
  // caller also hands over the fair-share memory (RestoreFairShareMemory; it matters only with
  // fair_share_half_life_s > 0). Not restored: the state of placement policies that keep state
  // across decisions (random's RNG draws, nextfit's cursor); the default policies (tessera,
  // fgd) keep none.
  //
  // A job that runs: `pods` where its pods run (one per gang member), `start` when it started
  // (or restarted after a move with restart), `seq` its latest StartEvent/MoveEvent::seq.
  // Checked like Submit (tenant, shape, duplicate id) and against the cluster: a placement that
  // does not fit what is already adopted is INVALID_ARGUMENT, naming the job and the node.
  // Limits and guarantees are not checked: what runs, runs (a quota lowered while the
  // scheduler was down makes the tenant a borrower, whose work reclaim may take back).
  // Example: Adopt(job 7 {tenant a, 1 x 0.5 GPU}, {{node 3, GPU 1}}, 120 s, seq 41): node 3's
  // GPU 1 has 500 milli less free, a's usage grows by 0.5 GPU, and job 7 may be preempted
  // once it has run min_runtime (counted from 120 s).
  Status Adopt(const Job& job, std::vector<placement::Placement> pods, Seconds start, uint64_t seq);
  // A job that waits: queued as Submit does, with the wait reason it last had.
  Status SubmitRestored(const Job& job, WaitReason last_reason);
  // The running jobs in placement order (ascending seq) and the pending jobs (ascending id).
  std::vector<JobId> running_jobs() const;
  std::vector<JobId> pending_jobs() const;
  // The running job's latest seq (0 if it is not running).
  uint64_t placed_seq(JobId id) const;
  // Fair share on decayed usage (fair_share_half_life_s > 0) remembers past usage: a caller that
  // rebuilds a scheduler carries it over with RestoreFairShareMemory (after Adopt and
  // SubmitRestored), or the fresh one starts from current usage. Indexed by TenantIndex.
  // Example: half-life 3600 s, tenant a ran 1 GPU for an hour and stopped: its decayed GPU milli
  // is ~500 and restoring it keeps a behind tenants that did not run; without it a starts at 0.
  struct FairShareMemory {
    bool started = false;      // a cycle has decayed since the scheduler was made
    Seconds last_decay{0};
    std::vector<std::array<double, kMaxResourceDims>> decayed;  // per tenant (tree node)
  };
  FairShareMemory fair_share_memory() const;
  // INVALID_ARGUMENT when `memory.decayed` does not have one entry per tenant of the tree.
  Status RestoreFairShareMemory(const FairShareMemory& memory);

  // --- cordon -------------------------------------------------------------------------------
  // A cordoned node takes no new pod: not by placement, nor as the node reclaim,
  // consolidation or defragmentation makes room on, nor as a move's destination. What runs
  // there stays until it completes or the caller takes it off (victims are searched only on
  // nodes the preemptor may use, so none is preempted there). Uncordoning makes the node usable
  // in the next cycle. INVALID_ARGUMENT for a node index out of range.
  // Example: 2 nodes, node 0 cordoned, node 1 full: a 1-GPU job waits (kCapacity) although
  // node 0 has free GPUs; after SetCordoned(0, false) the next cycle starts it on node 0.
  Status SetCordoned(NodeIndex node, bool cordoned);
  bool cordoned(NodeIndex node) const;

  const placement::ClusterSnapshot& cluster() const;
  const TenantTree& tenants() const;
  // Usage of a tenant's subtree (all classes), and the part that counts toward guarantees.
  const Resources& usage(TenantIndex t) const;
  Resources protected_usage(TenantIndex t) const;
  // Cluster capacity per resource dimension.
  const Resources& capacity() const;
  // The tenant's weighted dominant share of the cluster (what DRF equalises).
  double dominant_share(TenantIndex t) const;
  // Resources one job takes (model dimension from where it runs, if it runs).
  Resources ResourcesOf(const Job& job, const std::vector<placement::Placement>* where) const;

  size_t pending_count() const;
  size_t running_count() const;
  // Pending jobs of a tenant (leaf), by class.
  int pending_of(TenantIndex t, QosClass q) const;
  // Whether the tenant is below its guarantee (counting its Guaranteed and Burstable work) with
  // a waiting Guaranteed or Burstable job that fits in the unused part: while this holds, the
  // tenant's guarantee is being violated. (A Guaranteed job of a tenant whose own Burstable
  // work fills its guarantee is entitled to displace that work, but the tenant is not below
  // its guarantee.)
  bool BelowGuaranteeWithWaiting(TenantIndex t) const;
  // Whether the tenant has a pending job held back by something other than its own quota (its
  // limit, or the Guaranteed class's cap at the guarantee). Without `include_best_effort`,
  // only Guaranteed and Burstable jobs count: BestEffort work claims no share.
  bool HasRunnableWaiting(TenantIndex t, bool include_best_effort = true) const;
  // Pending jobs by their last wait reason (index = WaitReason).
  std::array<int, kWaitReasonCount> PendingByReason() const;
  bool is_running(JobId id) const;
  bool is_pending(JobId id) const;
  WaitReason wait_reason(JobId id) const;
  const Job* job(JobId id) const;
  std::optional<Seconds> start_time(JobId id) const;
  const std::vector<placement::Placement>* placement_of(JobId id) const;

  struct Impl;

 private:
  explicit Scheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::sched
