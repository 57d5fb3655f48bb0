// Private to the sched module: the state of a Scheduler (Scheduler::Impl) and what the files
// of src/sched/ that implement its passes share. One file per pass:
//   scheduler.cc    Create, Complete, Cancel, Adopt, SubmitRestored, SetCordoned, accessors
//   admission.cc    CheckJobShape, Submit, Entitled, WithinLimits, the queues
//   drf_order.cc    weighted dominant shares and their usage decay
//   fair_order.cc   the fair orders (FairOrder: which tenant a cycle tries next)
//   masks.cc        affinity and cordon eligibility masks, PlaceWithin
//   reclaim.cc      victim eligibility (reclaim and fair-share rules), victim costs, Reclaim
//   attempt.cc      TryStart, CommitStart, AttemptJob (one job's turn in a pass)
//   defrag.cc       MoveDestination, PlanClear, Defragment
//   consolidate.cc  Consolidate
//   cycle.cc        Cycle (the three passes)
// The algorithms are described in include/tessera/sched/scheduler.h.
// Thread-safety: none (a Scheduler is used by one thread).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/core/rng.h"
#include "tessera/sched/fair_order.h"
#include "tessera/sched/scheduler.h"

namespace tessera::sched {

using placement::ClusterSnapshot;
using placement::NodeSpec;
using placement::Placement;
using placement::TaskRequest;

// A pod shape for the per-cycle "found no place" memo.
using ShapeKey = std::tuple<int64_t, int64_t, int64_t, ModelMask, int32_t, int32_t>;
// (shape, tenant, class x mode) for the per-cycle "found no victims" memo.
using ReclaimKey = std::tuple<ShapeKey, TenantIndex, int>;

struct PendingKey {
  uint8_t qos;
  int32_t neg_priority;
  int64_t submit;
  JobId id;
  auto operator<=>(const PendingKey&) const = default;
};

inline PendingKey KeyOf(const Job& j) {
  return {static_cast<uint8_t>(j.qos), -j.priority, j.submit.count(), j.id};
}

// Snapshot changes made during one attempt, so it can be taken back. A rollback applies exact
// inverses of successful operations; should one fail all the same, the failure goes to `sink`
// (the scheduler's sticky internal error, reported by every later CycleResult).
struct Journal {
  explicit Journal(Status* failure_sink) : sink(failure_sink) {}
  Status* sink;
  struct Op {
    bool applied;  // true: Apply was done (undo with Undo); false: Undo was done
    TaskRequest task;
    Placement where;
  };
  std::vector<Op> ops;
  Status Apply(ClusterSnapshot& s, const TaskRequest& t, const Placement& p) {
    Status st = s.Apply(t, p);
    if (st.ok()) ops.push_back({true, t, p});
    return st;
  }
  Status Undo(ClusterSnapshot& s, const TaskRequest& t, const Placement& p) {
    Status st = s.Undo(t, p);
    if (st.ok()) ops.push_back({false, t, p});
    return st;
  }
  size_t mark() const { return ops.size(); }
  void RollbackTo(ClusterSnapshot& s, size_t mark) {
    while (ops.size() > mark) {
      const Op& op = ops.back();
      Status st = op.applied ? s.Undo(op.task, op.where) : s.Apply(op.task, op.where);
      if (!st.ok() && sink->ok()) *sink = st.WithPrefix("scheduler: rollback: ");
      ops.pop_back();
    }
  }
};

// What one attempt to start a job (TryStart, Defragment) carries through the searches it runs
// (Eligible, Reclaim, PlanClear): made fresh for the attempt, passed by reference, gone after it.
struct Attempt {
  // Fair-share preemption (pass 2): victims are judged by SchedulerOptions::fair_share_rule
  // rather than by the reclaim rules.
  bool fair = false;
  Resources fair_res;  // what the job to start takes (ResourcesOf without placement)
  // Everything taken from each tenant (its subtree, all classes) in this attempt so far.
  std::unordered_map<TenantIndex, Resources> removed_all;
  // Defragment: swaps left, in nodes visited by their victim searches (PlanClear).
  int64_t swap_budget = 0;
};

struct Scheduler::Impl {
  explicit Impl(ClusterSnapshot s) : snap(s), empty(std::move(s)) {}
  const TenantTree* tree = nullptr;
  SchedulerOptions opt;
  // The first bookkeeping inconsistency (an inverse snapshot change that failed): the state can
  // no longer be trusted. Sticky; every later CycleResult::error carries it.
  Status internal_error = Status::Ok();
  void Expect(const Status& st, const char* what) {
    if (!st.ok() && internal_error.ok()) internal_error = st.WithPrefix(std::string("scheduler: ") + what + ": ");
  }
  ClusterSnapshot snap;
  ClusterSnapshot empty;
  std::unique_ptr<placement::PlacementPolicy> policy;
  std::unique_ptr<FairOrder> fair_order;  // SchedulerOptions::fair_order
  placement::TargetWorkload default_workload;
  Rng rng{42};
  std::vector<uint32_t> rank;
  placement::PlacementContext ctx;
  // Scratch for TryStart (reused so an attempt does not allocate): where affinity lets the job
  // go, and that without the clearable largest nodes.
  placement::Eligibility conflict_mask;
  placement::Eligibility clear_mask;

  Resources capacity;
  uint32_t drf_dims = 0;        // bit d: capacity_d > 0
  // Dimensions guarantees are checked in: GPU milli, and any other some tenant guarantees.
  uint32_t quota_dims = 1u << kGpuMilliDim;
  std::vector<Resources> usage, be_usage, g_usage;  // all / BestEffort / Guaranteed classes
  std::vector<std::array<double, kMaxResourceDims>> decayed;
  bool decay_started = false;
  Seconds last_decay{0};
  std::vector<double> share;  // cached weighted dominant share per tree node

  std::vector<std::set<PendingKey>> queue;  // per tenant
  std::vector<std::array<int, kQosClassCount>> pending_counts;
  // Pending Guaranteed/Burstable jobs of each tenant by GPU size (for BelowGuaranteeWithWaiting).
  std::vector<std::set<std::pair<int64_t, JobId>>> by_size;
  std::unordered_map<JobId, Job> pending;
  std::unordered_map<JobId, WaitReason> reasons;
  struct Running {
    Job job;
    TaskRequest pod;  // effective request (whole_gpus_only applied)
    std::vector<Placement> pods;
    Seconds start{0};
    Resources res;
    uint64_t seq = 0;  // when its pods last arrived where they are (StartEvent / MoveEvent::seq)
  };
  std::unordered_map<JobId, Running> running;
  // One entry per pod on the node, in the order the pods arrived (ascending Running::seq).
  std::vector<std::vector<JobId>> on_node;
  uint64_t next_seq = 1;
  // Work that never moves once started: gang pods and whole-GPU Guaranteed pods (a fractional
  // Guaranteed pod moves live). Pods of such work per node, and the largest node size.
  static bool Immovable(const Job& j, const TaskRequest& pod) {
    return j.pods != 1 || (j.qos == QosClass::kGuaranteed && !pod.IsSharing());
  }
  std::vector<int32_t> immovable_pods;
  int max_node_gpus = 0;
  // Cordoned nodes take no new pod (placement, reclaim, defragmentation, consolidation); what
  // runs there stays until it completes or is preempted.
  std::vector<uint8_t> cordoned;
  int cordoned_count = 0;
  bool Open(NodeIndex n) const { return cordoned[n.value()] == 0; }

  int64_t reclaim_calls = 0;
  int64_t cpu_only_pending = 0;
  int32_t max_gpu_free = 0;  // over all nodes
  int max_full_free = 0;
  bool caps_dirty = true;

  // --- helpers --------------------------------------------------------------------------
  TaskRequest EffectivePod(const Job& j) const {
    TaskRequest p = j.pod;
    if (opt.whole_gpus_only && p.num_gpu > 0) p.gpu_milli = kWholeGpu;
    return p;
  }

  Resources ResourcesOf(const Job& j, const std::vector<Placement>* where) const;

  Resources Protected(TenantIndex a) const { return usage[a] - be_usage[a]; }

  // Within the unused guarantee at every level. GPU milli is always a guarantee dimension, so
  // a tenant without a GPU guarantee is never entitled, and a job asking no GPU claims no
  // guarantee (it cannot preempt).
  // Within the leaf tenant's unused guarantee. Guarantees are carved top-down (children's
  // guarantees add up to at most the parent's), so a job within its leaf's guarantee is within
  // every ancestor's share of it too, even while a sibling borrows beyond its own (which is
  // what reclaim takes back). A Guaranteed job counts only the tenant's Guaranteed work (the
  // tenant's own borrowed Burstable work gives way to it); a Burstable job counts everything
  // but BestEffort. GPU milli is always a guarantee dimension, so a tenant without a GPU
  // guarantee is never entitled, and a job asking no GPU claims no guarantee.
  bool Entitled(TenantIndex t, const Resources& r, QosClass q) const;

  bool WithinLimits(TenantIndex t, const Resources& r) const;

  // Weighted dominant share of `a` on current usage, with `delta` added (sign +1) or removed.
  double ShareWith(TenantIndex a, const Resources& delta, int sign) const;

  double ShareOf(TenantIndex a) const;

  void AddUsage(TenantIndex t, const Resources& r, QosClass q, int sign);

  void Decay(Seconds now);

  void RefreshCaps();

  bool NoGpuFree();

  bool MayFitNow(const TaskRequest& p);

  void Enqueue(const Job& j);
  void Dequeue(const Job& j);

  // --- affinity -------------------------------------------------------------------------
  bool ConflictOnGpu(const Job& a, const Job& b) const;
  bool ConflictOnNode(const Job& a, const Job& b) const;

  // Marks in `mask` (reset to all eligible) the GPUs, and nodes, `j` may not share. Nothing in
  // the snapshot changes: the placement engine reads the mask (PlacementContext::eligibility).
  // Returns whether anything that had room was masked out.
  // Cordoned nodes are masked out too (they do not count as hidden by affinity).
  bool HideConflicts(const Job& j, placement::Eligibility& mask);

  // Marks in `mask` every largest node that holds no immovable work as ineligible, so that
  // immovable work lands on smaller nodes or next to other immovable work while it can: those
  // nodes stay clearable for the jobs that need a whole large node (see
  // SchedulerOptions::keep_large_nodes_clearable).
  void HideClearableLargeNodes(placement::Eligibility& mask);

  // policy->Place restricted to `mask` (nullptr: everywhere).
  placement::PlacementDecision PlaceWithin(const TaskRequest& pod, const placement::Eligibility* mask);

  bool AnyNodeFits(const TaskRequest& p) const;

  // --- preemption -----------------------------------------------------------------------
  // Lowest common ancestor of two tenants, or kNoTenant.
  TenantIndex Lca(TenantIndex a, TenantIndex b) const;

  // Fair mode, opt.fair_share_rule: whether side `side_v` with `v_delta` taken away stays
  // served enough against side `side_t`, whose job (`a.fair_res`) is to start.
  bool FairSwapAllowed(const Attempt& a, TenantIndex side_v, const Resources& v_delta, TenantIndex side_t) const;

  // The children of the common ancestor of `v_tenant` and `t` on their paths (kNoTenant if one
  // is the other's ancestor).
  std::pair<TenantIndex, TenantIndex> Sides(TenantIndex v_tenant, TenantIndex t) const;

  // Fair mode: whether `v_tenant`'s side may have its work restarted (nothing taken away) for
  // a job of `t`.
  bool MoreServedSide(const Attempt& a, TenantIndex v_tenant, TenantIndex t) const;

  // Whether `v` may be preempted for a job of tenant `t`, given what is already being taken
  // from each tenant in this attempt (`removed`, protected usage only; `a.removed_all`, all).
  bool Eligible(const Attempt& a, const Running& v, TenantIndex t, QosClass preemptor, Seconds now,
                const std::unordered_map<TenantIndex, Resources>& removed) const;

  // What stopping `v` now throws away, in GPU milli-seconds, times its GPU: a batch job's run
  // since its last checkpoint, a service replica's start-up (Job::kind).
  static int64_t LostWork(const Running& v, Seconds now);
  // Above any sum of lost work (16 GPUs for 10^7 s is 1.6e11) and summable without overflow.
  static constexpr int64_t kOwnVictimCost = int64_t{1} << 50;
  // What taking `v` for a job of tenant `t` costs: the work thrown away; any set of other
  // tenants' victims is cheaper than one of the tenant's own jobs.
  static int64_t VictimCost(const Running& v, TenantIndex t, Seconds now);

  // Undoes every pod of `v` in the journal.
  void EvictInJournal(const Running& v, Journal& journal);

  // Finds the cheapest set of victims on one node that lets `pod` fit there and evicts them in
  // the journal, adding them to `a.removed_all`. Returns the victims (empty: none found).
  // `avoid`: a node not to use (the one being cleared by PlanClear). `within`: where the pod
  // may go (nullptr: everywhere).
  std::vector<JobId> Reclaim(Attempt& a, const Job& j, const TaskRequest& pod, Seconds now,
                             Journal& journal,
                             std::unordered_map<TenantIndex, Resources>& removed,
                             const std::vector<JobId>& already,
                             std::optional<NodeIndex> avoid = std::nullopt,
                             const placement::Eligibility* within = nullptr);

  // --- one job --------------------------------------------------------------------------
  // Tries to start `j`; on success commits everything and returns true.
  // `may_preempt`: reclaim (pass 1) or, with `fair`, fair-share preemption (pass 2).
  // `skip_place`: the caller knows the job fits nowhere without preemption (go straight to
  // reclaim).
  bool TryStart(const Job& j, bool may_preempt, Seconds now, CycleResult& out, bool fair = false,
                bool skip_place = false);

  // Bookkeeping once the snapshot holds `j` at `where` and no longer holds `victims` (taken by
  // fair-share preemption if `fair`).
  void CommitStart(bool fair, const Job& j, const TaskRequest& pod, const std::vector<Placement>& where,
                   const std::vector<JobId>& victims, Seconds now, CycleResult& out);

  // --- defragmentation ------------------------------------------------------------------
  // A destination for a pod being moved off `avoid`: a fractional pod goes to the fullest GPU
  // that takes it, a whole-GPU pod to the node with the fewest fully free GPUs that holds it.
  std::optional<Placement> MoveDestination(const TaskRequest& pod, NodeIndex avoid) const;

  static constexpr int64_t kLiveMoveCost = 1000;
  // Swaps per Defragment, in nodes visited by their victim searches.
  static constexpr int64_t kDefragSwaps = 1000;
  struct ClearPlan {
    std::vector<JobId> evicted;
    std::vector<MoveEvent> moves;
    int64_t cost = 0;
    bool Has(JobId id) const {
      return std::find(evicted.begin(), evicted.end(), id) != evicted.end() ||
             std::any_of(moves.begin(), moves.end(), [&](const MoveEvent& m) { return m.job == id; });
    }
  };
  // Clears room for `pod` on node `ni` in `journal`: evicts what `j` may preempt, then moves
  // other single-pod work elsewhere (never a whole-GPU Guaranteed pod; nothing started this
  // cycle). A plan costs the work it throws away: an eviction or a restart of a whole-GPU
  // pod loses what that job has run; a live move of a fractional pod loses nothing (a small
  // fixed cost). Returns whether the pod fits there afterwards.
  // `stop_at`: give up once the plan costs this much (a cheaper one is known). Swaps draw on
  // `a.swap_budget` (each is a victim search over the cluster).
  bool PlanClear(Attempt& a, const Job& j, const TaskRequest& pod, NodeIndex ni, Seconds now,
                 Journal& journal, ClearPlan& plan, int64_t stop_at = INT64_MAX);

  // For a single-pod job that reclaim could not place: clears the node that is cheapest to
  // clear (PlanClear), starts the job there and reports the evictions and moves. An entitled
  // job evicts by the reclaim rules; with `fair`, a borrowing job evicts by the fair-share
  // rules and restarts only work of tenants at least as served.
  bool Defragment(const Job& j, const TaskRequest& pod, Seconds now, CycleResult& out,
                  bool fair);

  // --- consolidation --------------------------------------------------------------------
  // Frees `k` whole GPUs on one node for a queued whole-GPU pod by moving preemptible
  // fractional pods elsewhere. Applies the moves and returns them (empty: not possible).
  std::vector<MoveEvent> Consolidate(const Job& j, const TaskRequest& pod);
};

// What Submit and Adopt both check: a leaf tenant, a valid shape, a new id.
Status CheckJobShape(const Scheduler::Impl& m, const Job& job, const std::string& what);

// What one cycle remembers between its attempts: budgets and the memos of what failed (see
// AttemptJob). Passed explicitly; nothing of it outlives the cycle.
struct CycleState {
  int consolidation_budget = 8;
  int defrag_budget = 2;
  int64_t reclaims_left = 0;
  std::set<ShapeKey> failed_defrag;
  std::set<ShapeKey> failed_shapes;
  std::set<ReclaimKey> failed_reclaims;
  std::set<std::pair<int, ModelMask>> failed_consolidation;
  std::set<JobId> requeued_now;  // preempted in this cycle: they wait for the next
  size_t preempted_seen = 0;
};

// One pending job's turn in pass `pass` (0 entitled, 1 borrowing, 2 leftovers): admission
// checks, then placement with reclaim or fair-share preemption, consolidation and
// defragmentation as the pass allows. Records the wait reason when it does not start.
void AttemptJob(Scheduler::Impl& m, const Job& j, int pass, Seconds now, CycleState& cs, CycleResult& out);

}  // namespace tessera::sched
