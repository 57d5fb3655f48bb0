#include "tessera/sched/scheduler.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <tuple>

#include "tessera/core/rng.h"

namespace tessera::sched {

using placement::ClusterSnapshot;
using placement::NodeSpec;
using placement::Placement;
using placement::TaskRequest;

std::string_view QosName(QosClass q) {
  switch (q) {
    case QosClass::kGuaranteed: return "Guaranteed";
    case QosClass::kBurstable: return "Burstable";
    case QosClass::kBestEffort: return "BestEffort";
  }
  return "?";
}

StatusOr<QosClass> ParseQos(std::string_view name) {
  std::string s;
  for (char c : name)
    if (c != '-' && c != '_') s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (s == "guaranteed") return QosClass::kGuaranteed;
  if (s == "burstable") return QosClass::kBurstable;
  if (s == "besteffort") return QosClass::kBestEffort;
  return InvalidArgumentError("unknown QoS class '" + std::string(name) +
                              "' (expected Guaranteed, Burstable or BestEffort)");
}

std::string_view FairShareRuleName(FairShareRule r) {
  return r == FairShareRule::kLexicographic ? "lexicographic" : "equalize";
}

StatusOr<FairShareRule> ParseFairShareRule(std::string_view name) {
  if (name == "equalize") return FairShareRule::kEqualize;
  if (name == "lexicographic") return FairShareRule::kLexicographic;
  return InvalidArgumentError("unknown fair-share rule '" + std::string(name) +
                              "' (known: equalize, lexicographic)");
}

std::string_view WaitReasonName(WaitReason r) {
  switch (r) {
    case WaitReason::kNone: return "none";
    case WaitReason::kLimit: return "limit";
    case WaitReason::kGuarantee: return "guarantee";
    case WaitReason::kCapacity: return "capacity";
    case WaitReason::kAffinity: return "affinity";
  }
  return "?";
}

namespace {

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

PendingKey KeyOf(const Job& j) {
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

}  // namespace

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

  // Fair-share preemption (pass 2) state: the preemptor's resources, and everything taken from
  // each tenant in this attempt (all classes).
  bool fair_mode = false;
  Resources fair_res;
  int64_t reclaim_calls = 0;
  std::unordered_map<TenantIndex, Resources> removed_all;
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

  Resources ResourcesOf(const Job& j, const std::vector<Placement>* where) const {
    const TaskRequest p = EffectivePod(j);
    Resources r;
    r[kGpuMilliDim] = static_cast<int64_t>(j.pods) * p.TotalGpu().value();
    r[kGpuMemoryDim] = static_cast<int64_t>(j.pods) * p.num_gpu * j.gpu_memory.value();
    if (where && p.IsWholeGpu()) {
      const auto& catalog = GpuModelCatalog::Builtin();
      for (const Placement& pl : *where) {
        const NodeSpec& spec = snap.spec(pl.node);
        if (!spec.model.valid()) continue;
        if (auto dim = tree->space().ModelDim(catalog.info(spec.model).name))
          r[*dim] += p.num_gpu;
      }
    }
    return r;
  }

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
  bool Entitled(TenantIndex t, const Resources& r, QosClass q) const {
    if (r[kGpuMilliDim] <= 0) return false;
    const Resources prot = q == QosClass::kGuaranteed ? g_usage[t] : Protected(t);
    const Resources& g = tree->spec(t).guaranteed;
    for (int d = 0; d < kMaxResourceDims; ++d)
      if ((quota_dims >> d & 1) && r[d] > 0 && prot[d] + r[d] > g[d]) return false;
    return true;
  }

  bool WithinLimits(TenantIndex t, const Resources& r) const {
    for (TenantIndex a : tree->path(t))
      if (!(usage[a] + r).AllLessEqual(tree->spec(a).limit)) return false;
    return true;
  }

  // Weighted dominant share of `a` on current usage, with `delta` added (sign +1) or removed.
  double ShareWith(TenantIndex a, const Resources& delta, int sign) const {
    double s = 0;
    for (int d = 0; d < kMaxResourceDims; ++d) {
      if (!(drf_dims >> d & 1)) continue;
      const double u = static_cast<double>(usage[a][d] + sign * delta[d]);
      s = std::max(s, u / static_cast<double>(capacity[d]));
    }
    return s / tree->spec(a).weight;
  }

  double ShareOf(TenantIndex a) const {
    double s = 0;
    for (int d = 0; d < kMaxResourceDims; ++d) {
      if (!(drf_dims >> d & 1)) continue;
      const double u = opt.fair_share_half_life_s > 0 ? decayed[a][d]
                                                      : static_cast<double>(usage[a][d]);
      s = std::max(s, u / static_cast<double>(capacity[d]));
    }
    return s / tree->spec(a).weight;
  }

  void AddUsage(TenantIndex t, const Resources& r, QosClass q, int sign) {
    for (TenantIndex a : tree->path(t)) {
      if (sign > 0) usage[a] += r;
      else usage[a] -= r;
      if (q == QosClass::kBestEffort) {
        if (sign > 0) be_usage[a] += r;
        else be_usage[a] -= r;
      }
      if (q == QosClass::kGuaranteed) {
        if (sign > 0) g_usage[a] += r;
        else g_usage[a] -= r;
      }
      share[a] = ShareOf(a);
    }
  }

  void Decay(Seconds now) {
    if (opt.fair_share_half_life_s <= 0) return;
    if (!decay_started) {
      decay_started = true;
      last_decay = now;
      return;
    }
    const double dt = static_cast<double>((now - last_decay).count());
    if (dt <= 0) return;
    last_decay = now;
    const double keep = std::exp2(-dt / opt.fair_share_half_life_s);
    for (int a = 0; a < tree->size(); ++a) {
      for (int d = 0; d < kMaxResourceDims; ++d)
        decayed[a][d] = decayed[a][d] * keep + static_cast<double>(usage[a][d]) * (1 - keep);
      share[a] = ShareOf(a);
    }
  }

  void RefreshCaps() {
    if (!caps_dirty) return;
    max_gpu_free = 0;
    max_full_free = 0;
    for (size_t n = 0; n < snap.node_count(); ++n) {
      const NodeIndex ni{static_cast<uint32_t>(n)};
      max_gpu_free = std::max(max_gpu_free, snap.max_gpu_free(ni));
      max_full_free = std::max(max_full_free, snap.fully_free_gpus(ni));
    }
    caps_dirty = false;
  }

  bool NoGpuFree() {
    RefreshCaps();
    return max_gpu_free == 0;
  }

  bool MayFitNow(const TaskRequest& p) {
    if (p.num_gpu == 0) return true;
    RefreshCaps();
    if (p.IsWholeGpu()) return max_full_free >= p.num_gpu;
    return max_gpu_free >= p.gpu_milli.value();
  }

  void Enqueue(const Job& j) {
    queue[j.tenant].insert(KeyOf(j));
    pending_counts[j.tenant][static_cast<int>(j.qos)]++;
    if (j.qos != QosClass::kBestEffort)
      by_size[j.tenant].insert({ResourcesOf(j, nullptr)[kGpuMilliDim], j.id});
    if (j.pod.num_gpu == 0) ++cpu_only_pending;
    pending.emplace(j.id, j);
  }
  void Dequeue(const Job& j) {
    queue[j.tenant].erase(KeyOf(j));
    pending_counts[j.tenant][static_cast<int>(j.qos)]--;
    if (j.qos != QosClass::kBestEffort)
      by_size[j.tenant].erase({ResourcesOf(j, nullptr)[kGpuMilliDim], j.id});
    if (j.pod.num_gpu == 0) --cpu_only_pending;
  }

  // --- affinity -------------------------------------------------------------------------
  bool ConflictOnGpu(const Job& a, const Job& b) const {
    for (auto [x, y] : opt.affinity.classes_apart)
      if ((a.workload_class == x && b.workload_class == y) ||
          (a.workload_class == y && b.workload_class == x))
        return true;
    for (auto [x, y] : opt.affinity.tenants_apart)
      if ((a.tenant == x && b.tenant == y) || (a.tenant == y && b.tenant == x)) return true;
    return false;
  }
  bool ConflictOnNode(const Job& a, const Job& b) const {
    return opt.affinity.labels_apart && a.label >= 0 && b.label >= 0 && a.label != b.label;
  }

  // Marks in `mask` (reset to all eligible) the GPUs, and nodes, `j` may not share. Nothing in
  // the snapshot changes: the placement engine reads the mask (PlacementContext::eligibility).
  // Returns whether anything that had room was masked out.
  // Cordoned nodes are masked out too (they do not count as hidden by affinity).
  bool HideConflicts(const Job& j, placement::Eligibility& mask) {
    mask.Reset(snap.node_count());
    if (cordoned_count > 0)
      for (size_t n = 0; n < snap.node_count(); ++n)
        if (cordoned[n]) mask.ExcludeNode(NodeIndex{static_cast<uint32_t>(n)});
    if (opt.affinity.empty()) return false;
    bool hid = false;
    for (size_t n = 0; n < snap.node_count(); ++n) {
      if (on_node[n].empty()) continue;
      const NodeIndex ni{static_cast<uint32_t>(n)};
      placement::GpuSet blocked = 0;
      bool node_blocked = false;
      for (JobId other : on_node[n]) {
        const Running& r = running.at(other);
        if (ConflictOnNode(j, r.job)) node_blocked = true;
        if (ConflictOnGpu(j, r.job))
          for (const Placement& p : r.pods)
            if (p.node == ni) blocked |= p.gpus;
      }
      if (node_blocked) blocked = placement::GpusOfCount(snap.gpu_count(ni));
      for (int g = 0; g < snap.gpu_count(ni); ++g)
        if ((blocked >> g & 1) && snap.gpu_free(ni, g) > 0) hid = true;
      mask.ExcludeGpus(ni, blocked);
      if (node_blocked) {
        mask.ExcludeNode(ni);
        if (snap.free_cpu(ni).value() > 0 || snap.free_memory(ni).value() > 0) hid = true;
      }
    }
    return hid;
  }

  // Marks in `mask` every largest node that holds no immovable work as ineligible, so that
  // immovable work lands on smaller nodes or next to other immovable work while it can: those
  // nodes stay clearable for the jobs that need a whole large node (see
  // SchedulerOptions::keep_large_nodes_clearable).
  void HideClearableLargeNodes(placement::Eligibility& mask) {
    for (size_t n = 0; n < snap.node_count(); ++n) {
      const NodeIndex ni{static_cast<uint32_t>(n)};
      if (immovable_pods[n] > 0 || snap.gpu_count(ni) != max_node_gpus) continue;
      mask.ExcludeNode(ni);
    }
  }

  // policy->Place restricted to `mask` (nullptr: everywhere).
  placement::PlacementDecision PlaceWithin(const TaskRequest& pod, const placement::Eligibility* mask) {
    ctx.eligibility = mask;
    placement::PlacementDecision d = policy->Place(snap, pod, ctx);
    ctx.eligibility = nullptr;
    return d;
  }

  bool AnyNodeFits(const TaskRequest& p) const {
    for (size_t n = 0; n < snap.node_count(); ++n)
      if (snap.Fits(NodeIndex{static_cast<uint32_t>(n)}, p)) return true;
    return false;
  }

  // --- preemption -----------------------------------------------------------------------
  // Lowest common ancestor of two tenants, or kNoTenant.
  TenantIndex Lca(TenantIndex a, TenantIndex b) const {
    const auto& pa = tree->path(a);
    const auto& pb = tree->path(b);
    TenantIndex l = kNoTenant;
    for (size_t i = 0; i < pa.size() && i < pb.size() && pa[i] == pb[i]; ++i) l = pa[i];
    return l;
  }

  // Fair mode, opt.fair_share_rule: whether side `side_v` with `v_delta` taken away stays
  // served enough against side `side_t`, whose job (`fair_res`) is to start.
  bool FairSwapAllowed(TenantIndex side_v, const Resources& v_delta, TenantIndex side_t) const {
    const double v_after = ShareWith(side_v, v_delta, -1);
    if (opt.fair_share_rule == FairShareRule::kLexicographic)
      return v_after > ShareWith(side_t, Resources(), 0) + 1e-12;
    return v_after + 1e-12 >= ShareWith(side_t, fair_res, +1);
  }

  // The children of the common ancestor of `v_tenant` and `t` on their paths (kNoTenant if one
  // is the other's ancestor).
  std::pair<TenantIndex, TenantIndex> Sides(TenantIndex v_tenant, TenantIndex t) const {
    const TenantIndex lca = Lca(v_tenant, t);
    if (lca == v_tenant || lca == t) return {kNoTenant, kNoTenant};
    const size_t k = lca == kNoTenant ? 0 : static_cast<size_t>(tree->depth(lca)) + 1;
    return {tree->path(v_tenant)[k], tree->path(t)[k]};
  }

  // Fair mode: whether `v_tenant`'s side may have its work restarted (nothing taken away) for
  // a job of `t`.
  bool MoreServedSide(TenantIndex v_tenant, TenantIndex t) const {
    const auto [side_v, side_t] = Sides(v_tenant, t);
    return side_v != kNoTenant && FairSwapAllowed(side_v, Resources(), side_t);
  }

  // Whether `v` may be preempted for a job of tenant `t`, given what is already being taken
  // from each tenant in this attempt (`removed`, protected usage only).
  bool Eligible(const Running& v, TenantIndex t, QosClass preemptor, Seconds now,
                const std::unordered_map<TenantIndex, Resources>& removed) const {
    if (v.job.qos == QosClass::kGuaranteed) return false;
    // Started in this cycle: never taken back in the same cycle (no churn, and a job is never
    // both started and preempted in one CycleResult).
    if (v.start >= now) return false;
    if (now - v.start < opt.min_runtime) return false;
    if (v.job.qos == QosClass::kBestEffort) return true;
    if (fair_mode && opt.fair_share_max_victim_runtime.count() > 0 &&
        now - v.start > opt.fair_share_max_victim_runtime)
      return false;
    // Inside a tenant, Guaranteed work may take back what the tenant's own Burstable work took.
    if (v.job.tenant == t) return !fair_mode && preemptor == QosClass::kGuaranteed;
    const TenantIndex lca = Lca(v.job.tenant, t);
    if (fair_mode) {
      // Fair-share preemption: only while the victim's side stays served enough against the
      // preemptor's side (opt.fair_share_rule; the two children of the common ancestor).
      const auto [side_v, side_t] = Sides(v.job.tenant, t);
      if (side_v == kNoTenant) return false;
      Resources v_delta = v.res;
      if (auto r = removed_all.find(side_v); r != removed_all.end()) v_delta += r->second;
      if (!FairSwapAllowed(side_v, v_delta, side_t)) return false;
    }
    // Borrowed work: a tenant above its guarantee is borrowing, and for an entitled job any of
    // its jobs may be taken back, even when that leaves the tenant below its guarantee: the
    // last job taken from it does not fit in what is left of the guarantee (an earlier, smaller
    // one may; it then reclaims from other borrowers, never from the preemptor, which is within
    // its guarantee). A tenant at or below its guarantee lends nothing, so every reclaim lowers
    // the total by which tenants exceed their guarantees and reclaims cannot cycle. A borrowing
    // job (fair-share preemption) has no claim on anyone's guarantee: its victims' tenants stay
    // at or above theirs. Checked at every level below the common ancestor.
    for (auto it = tree->path(v.job.tenant).rbegin(); it != tree->path(v.job.tenant).rend();
         ++it) {
      const TenantIndex a = *it;
      if (a == lca) break;
      Resources before = Protected(a);
      if (auto r = removed.find(a); r != removed.end()) before -= r->second;
      const Resources& g = tree->spec(a).guaranteed;
      for (int d = 0; d < kMaxResourceDims; ++d) {
        if (!(quota_dims >> d & 1) || v.res[d] == 0) continue;
        if (before[d] <= g[d] || (fair_mode && before[d] - v.res[d] < g[d])) return false;
      }
    }
    return true;
  }

  // What stopping `v` now throws away, in GPU milli-seconds (the time it has run, times its GPU).
  static int64_t LostWork(const Running& v, Seconds now) {
    return v.res[kGpuMilliDim] * std::max<int64_t>(0, (now - v.start).count());
  }
  // Above any sum of lost work (16 GPUs for 10^7 s is 1.6e11) and summable without overflow.
  static constexpr int64_t kOwnVictimCost = int64_t{1} << 50;
  // What taking `v` for a job of tenant `t` costs: the work thrown away; any set of other
  // tenants' victims is cheaper than one of the tenant's own jobs.
  static int64_t VictimCost(const Running& v, TenantIndex t, Seconds now) {
    return (v.job.tenant == t ? kOwnVictimCost : 0) + 1 + LostWork(v, now);
  }

  // Undoes every pod of `v` in the journal.
  void EvictInJournal(const Running& v, Journal& journal) {
    for (const Placement& p : v.pods) Expect(journal.Undo(snap, v.pod, p), "evicting a victim");
  }

  // Finds the cheapest set of victims on one node that lets `pod` fit there and evicts them in
  // the journal. Returns the victims (empty: none found).
  // `avoid`: a node not to use (the one being cleared by PlanClear). `within`: where the pod
  // may go (nullptr: everywhere).
  std::vector<JobId> Reclaim(const Job& j, const TaskRequest& pod, Seconds now, Journal& journal,
                             std::unordered_map<TenantIndex, Resources>& removed,
                             const std::vector<JobId>& already,
                             std::optional<NodeIndex> avoid = std::nullopt,
                             const placement::Eligibility* within = nullptr) {
    const auto fits_here = [&](NodeIndex ni) {
      return within == nullptr ? snap.Fits(ni, pod) : within->node(ni) && snap.Fits(ni, pod, within->gpus(ni));
    };
    std::vector<JobId> best;
    int64_t best_cost = INT64_MAX;
    NodeIndex best_node;
    for (size_t n = 0; n < snap.node_count(); ++n) {
      const NodeIndex ni{static_cast<uint32_t>(n)};
      if (on_node[n].empty() || !empty.Fits(ni, pod) || (avoid && *avoid == ni) || !Open(ni)) continue;
      if (within != nullptr && !within->node(ni)) continue;
      std::vector<const Running*> cands;
      for (JobId id : on_node[n]) {
        if (std::find(already.begin(), already.end(), id) != already.end()) continue;
        const Running& r = running.at(id);
        if (std::find(cands.begin(), cands.end(), &r) != cands.end()) continue;
        if (Eligible(r, j.tenant, j.qos, now, removed)) cands.push_back(&r);
      }
      if (cands.empty()) continue;
      std::sort(cands.begin(), cands.end(), [&](const Running* a, const Running* b) {
        // The tenant's own work last: displacing it leaves the tenant where it was.
        const bool own_a = a->job.tenant == j.tenant, own_b = b->job.tenant == j.tenant;
        if (own_a != own_b) return own_b;
        if (a->job.qos != b->job.qos) return a->job.qos > b->job.qos;  // BestEffort first
        // The least work lost: a preempted job starts over (or from its last checkpoint).
        const int64_t la = LostWork(*a, now), lb = LostWork(*b, now);
        if (la != lb) return la < lb;
        const double sa = share[a->job.tenant], sb = share[b->job.tenant];
        if (sa != sb) return sa > sb;                    // the most over-served tenant first
        if (a->job.priority != b->job.priority) return a->job.priority < b->job.priority;
        if (a->start != b->start) return a->start > b->start;  // the newest first
        return a->job.id > b->job.id;
      });
      const size_t mark = journal.mark();
      auto trial_removed = removed;
      std::vector<JobId> victims;
      int64_t cost = 0;
      bool fits = false;
      const auto saved_all = removed_all;
      for (const Running* v : cands) {
        if (!Eligible(*v, j.tenant, j.qos, now, trial_removed)) continue;
        EvictInJournal(*v, journal);
        for (TenantIndex a : tree->path(v->job.tenant)) removed_all[a] += v->res;
        if (v->job.qos != QosClass::kBestEffort)
          for (TenantIndex a : tree->path(v->job.tenant)) trial_removed[a] += v->res;
        victims.push_back(v->job.id);
        cost += VictimCost(*v, j.tenant, now);
        if (fits_here(ni)) {
          fits = true;
          break;
        }
        if (cost >= best_cost) break;
      }
      if (fits && victims.size() > 1) {
        // Reprieve every victim the pod turns out not to need, the most costly first (a small
        // victim taken early may be made unnecessary by a larger one taken later).
        std::vector<JobId> order = victims;
        std::stable_sort(order.begin(), order.end(), [&](JobId a, JobId b) {
          return VictimCost(running.at(a), j.tenant, now) > VictimCost(running.at(b), j.tenant, now);
        });
        for (JobId id : order) {
          const Running& v = running.at(id);
          const size_t before_put_back = journal.mark();
          bool back = true;
          for (const Placement& p : v.pods) back = back && journal.Apply(snap, v.pod, p).ok();
          if (back && fits_here(ni)) {
            victims.erase(std::find(victims.begin(), victims.end(), id));
            cost -= VictimCost(v, j.tenant, now);
          } else {
            journal.RollbackTo(snap, before_put_back);
          }
        }
      }
      journal.RollbackTo(snap, mark);
      removed_all = saved_all;
      if (fits && cost < best_cost) {
        best_cost = cost;
        best = victims;
        best_node = ni;
      }
    }
    for (JobId id : best) {
      const Running& v = running.at(id);
      EvictInJournal(v, journal);
      for (TenantIndex a : tree->path(v.job.tenant)) removed_all[a] += v.res;
      if (v.job.qos != QosClass::kBestEffort)
        for (TenantIndex a : tree->path(v.job.tenant)) removed[a] += v.res;
    }
    return best;
  }

  // --- one job --------------------------------------------------------------------------
  // Tries to start `j`; on success commits everything and returns true.
  // `may_preempt`: reclaim (pass 1) or, with `fair`, fair-share preemption (pass 2).
  // `skip_place`: the caller knows the job fits nowhere without preemption (go straight to
  // reclaim).
  bool TryStart(const Job& j, bool may_preempt, Seconds now, CycleResult& out, bool fair = false,
                bool skip_place = false) {
    const TaskRequest pod = EffectivePod(j);
    fair_mode = fair;
    fair_res = ResourcesOf(j, nullptr);
    removed_all.clear();
    Journal journal(&internal_error);
    const bool hid = HideConflicts(j, conflict_mask);
    // With affinity rules (or cordoned nodes) the mask holds in every step, reclaim included: a
    // victim evicted next to a conflicting job does not make that GPU (or node) usable.
    const placement::Eligibility* within =
        opt.affinity.empty() && cordoned_count == 0 ? nullptr : &conflict_mask;
    std::vector<Placement> where;
    std::vector<JobId> victims;
    std::unordered_map<TenantIndex, Resources> removed;
    bool ok = true;
    for (int i = 0; i < j.pods && ok; ++i) {
      placement::PlacementDecision d;
      if (!(skip_place && i == 0)) {
        ++out.attempts;
        if (opt.keep_large_nodes_clearable && Immovable(j, pod)) {
          clear_mask = conflict_mask;  // same size: copies without allocating
          HideClearableLargeNodes(clear_mask);
          d = PlaceWithin(pod, &clear_mask);
          if (!d.placement) ++out.attempts;
        }
        if (!d.placement) d = PlaceWithin(pod, within);
      }
      if (!d.placement && may_preempt) {
        ++reclaim_calls;
        auto v = Reclaim(j, pod, now, journal, removed, victims, std::nullopt, within);
        if (!v.empty()) {
          victims.insert(victims.end(), v.begin(), v.end());
          ++out.attempts;
          d = PlaceWithin(pod, within);
        }
      }
      if (!d.placement || !journal.Apply(snap, pod, *d.placement).ok()) {
        ok = false;
        break;
      }
      where.push_back(*d.placement);
    }
    if (ok) {
      // Whole-GPU quotas per model are known only now.
      const Resources r = ResourcesOf(j, &where);
      if (r[kGpuMilliDim] > 0 && !WithinLimits(j.tenant, r)) {
        reasons[j.id] = WaitReason::kLimit;
        journal.RollbackTo(snap, 0);
        return false;
      }
    }
    if (!ok) {
      journal.RollbackTo(snap, 0);
      WaitReason why = WaitReason::kCapacity;
      if (hid && j.pods == 1 && AnyNodeFits(pod)) why = WaitReason::kAffinity;
      reasons[j.id] = why;
      return false;
    }
    // Commit: requeue the victims, start the job.
    CommitStart(j, pod, where, victims, now, out);
    return true;
  }

  // Bookkeeping once the snapshot holds `j` at `where` and no longer holds `victims`.
  void CommitStart(const Job& j, const TaskRequest& pod, const std::vector<Placement>& where,
                   const std::vector<JobId>& victims, Seconds now, CycleResult& out) {
    for (JobId id : victims) {
      auto it = running.find(id);
      Running v = std::move(it->second);
      running.erase(it);
      for (const Placement& p : v.pods) {
        auto& lst = on_node[p.node.value()];
        lst.erase(std::find(lst.begin(), lst.end(), id));
        if (Immovable(v.job, v.pod)) --immovable_pods[p.node.value()];
      }
      AddUsage(v.job.tenant, v.res, v.job.qos, -1);
      Enqueue(v.job);
      reasons[id] = WaitReason::kCapacity;
      out.preempted.push_back({id, j.id, fair_mode});
    }
    Running r;
    r.job = j;
    r.pod = pod;
    r.pods = where;
    r.start = now;
    r.res = ResourcesOf(j, &where);
    r.seq = next_seq++;
    for (const Placement& p : where) {
      on_node[p.node.value()].push_back(j.id);
      if (Immovable(j, pod)) ++immovable_pods[p.node.value()];
    }
    AddUsage(j.tenant, r.res, j.qos, +1);
    running.emplace(j.id, std::move(r));
    reasons.erase(j.id);
    out.started.push_back({j.id, where, running.at(j.id).seq});
    caps_dirty = true;
  }

  // --- defragmentation ------------------------------------------------------------------
  // A destination for a pod being moved off `avoid`: a fractional pod goes to the fullest GPU
  // that takes it, a whole-GPU pod to the node with the fewest fully free GPUs that holds it.
  std::optional<Placement> MoveDestination(const TaskRequest& pod, NodeIndex avoid) const {
    std::optional<Placement> best;
    int64_t best_key = INT64_MAX;
    for (size_t m = 0; m < snap.node_count(); ++m) {
      const NodeIndex mi{static_cast<uint32_t>(m)};
      if (mi == avoid || !Open(mi) || !snap.Fits(mi, pod)) continue;
      if (pod.IsSharing()) {
        for (int g = 0; g < snap.gpu_count(mi); ++g) {
          const int32_t f = snap.gpu_free(mi, g);
          if (f >= pod.gpu_milli.value() && f < best_key) {
            best_key = f;
            best = Placement{mi, placement::GpuBit(g)};
          }
        }
      } else {
        const int full = snap.fully_free_gpus(mi);
        if (full < pod.num_gpu || full >= best_key) continue;
        placement::GpuSet gpus = 0;
        for (int g = 0, k = 0; g < snap.gpu_count(mi) && k < pod.num_gpu; ++g)
          if (snap.gpu_free(mi, g) == kWholeGpu.value()) {
            gpus |= placement::GpuBit(g);
            ++k;
          }
        best_key = full;
        best = Placement{mi, gpus};
      }
    }
    return best;
  }

  static constexpr int64_t kLiveMoveCost = 1000;
  // Swaps per Defragment, in nodes visited by their victim searches.
  static constexpr int64_t kDefragSwaps = 1000;
  int64_t swap_budget = 0;
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
  // `swap_budget` (each is a victim search over the cluster).
  bool PlanClear(const Job& j, const TaskRequest& pod, NodeIndex ni, Seconds now,
                 Journal& journal, ClearPlan& plan, int64_t stop_at = INT64_MAX) {
    std::vector<const Running*> occ;
    for (JobId id : on_node[ni.value()]) {
      const Running* r = &running.at(id);
      if (std::find(occ.begin(), occ.end(), r) == occ.end()) occ.push_back(r);
    }
    std::sort(occ.begin(), occ.end(), [&](const Running* a, const Running* b) {
      if (a->job.qos != b->job.qos) return a->job.qos > b->job.qos;  // BestEffort first
      if (a->pod.gpu_milli != b->pod.gpu_milli) return a->pod.gpu_milli < b->pod.gpu_milli;
      return a->job.id > b->job.id;
    });
    std::unordered_map<TenantIndex, Resources> removed;
    for (const Running* r : occ) {
      if (snap.Fits(ni, pod) || plan.cost >= stop_at) break;
      // A gang with a pod here may already be in the plan: evicted by a swap's reclaim on
      // another node it also runs on.
      if (plan.Has(r->job.id)) continue;
      const bool evictable = Eligible(*r, j.tenant, j.qos, now, removed);
      // Work that may be evicted but can move live elsewhere moves: it loses nothing.
      if (evictable && r->pod.IsSharing() && r->job.pods == 1 && r->start < now) {
        const size_t mark = journal.mark();
        if (journal.Undo(snap, r->pod, r->pods[0]).ok()) {
          auto dest = MoveDestination(r->pod, ni);
          if (dest && journal.Apply(snap, r->pod, *dest).ok()) {
            plan.moves.push_back({r->job.id, 0, r->pods[0], *dest, j.id, false});
            plan.cost += kLiveMoveCost;
            continue;
          }
        }
        journal.RollbackTo(snap, mark);
      }
      if (evictable) {
        EvictInJournal(*r, journal);
        if (r->job.qos != QosClass::kBestEffort)
          for (TenantIndex a : tree->path(r->job.tenant)) removed[a] += r->res;
        plan.evicted.push_back(r->job.id);
        plan.cost += 1 + LostWork(*r, now);
        continue;
      }
      const bool sharing = r->pod.IsSharing();
      if (r->job.pods != 1 || r->start >= now || (!sharing && r->job.qos == QosClass::kGuaranteed))
        continue;
      // For fair share, a restart costs only tenants at least as served as the job's.
      if (!sharing && fair_mode && !MoreServedSide(r->job.tenant, j.tenant)) continue;
      const size_t mark = journal.mark();
      if (!journal.Undo(snap, r->pod, r->pods[0]).ok()) continue;
      auto dest = MoveDestination(r->pod, ni);
      const auto saved_removed = removed;
      const auto saved_all = removed_all;
      const size_t saved_evicted = plan.evicted.size();
      if (!dest && swap_budget >= static_cast<int64_t>(snap.node_count())) {
        swap_budget -= static_cast<int64_t>(snap.node_count());
        // Make room elsewhere by evicting what `j` may preempt (a swap: the moved pod takes
        // the place of borrowed work, `j` takes the moved pod's).
        // Neither what the plan evicts nor what it moves may be taken again.
        std::vector<JobId> in_plan = plan.evicted;
        for (const MoveEvent& mv : plan.moves) in_plan.push_back(mv.job);
        for (JobId v : Reclaim(j, r->pod, now, journal, removed, in_plan, ni)) {
          plan.evicted.push_back(v);
          plan.cost += 1 + LostWork(running.at(v), now);
        }
        if (plan.evicted.size() != saved_evicted) dest = MoveDestination(r->pod, ni);
      }
      if (!dest || !journal.Apply(snap, r->pod, *dest).ok()) {
        journal.RollbackTo(snap, mark);
        removed = saved_removed;
        removed_all = saved_all;
        plan.evicted.resize(saved_evicted);
        continue;
      }
      plan.moves.push_back({r->job.id, 0, r->pods[0], *dest, j.id, !sharing});
      // A live move loses nothing (a small fixed cost keeps needless moves out); a restart
      // loses what the pod has run.
      plan.cost += sharing ? kLiveMoveCost : 1 + LostWork(*r, now);
    }
    return snap.Fits(ni, pod);
  }

  // For a single-pod job that reclaim could not place: clears the node that is cheapest to
  // clear (PlanClear), starts the job there and reports the evictions and moves. An entitled
  // job evicts by the reclaim rules; with `fair`, a borrowing job evicts by the fair-share
  // rules and restarts only work of tenants at least as served.
  bool Defragment(const Job& j, const TaskRequest& pod, Seconds now, CycleResult& out,
                  bool fair) {
    if (j.pods != 1 || !opt.affinity.empty()) return false;
    fair_mode = fair;
    fair_res = ResourcesOf(j, nullptr);
    removed_all.clear();
    // Plan on the kDefragNodes nodes with the least work that can never leave them (whole-GPU
    // Guaranteed pods and gang pods), then the least work in all.
    constexpr size_t kDefragNodes = 8;
    swap_budget = kDefragSwaps;
    std::vector<std::tuple<int64_t, int64_t, uint32_t>> order;
    for (size_t n = 0; n < snap.node_count(); ++n) {
      const NodeIndex ni{static_cast<uint32_t>(n)};
      if (on_node[n].empty() || !Open(ni) || !empty.Fits(ni, pod)) continue;
      int64_t fixed = 0;
      for (JobId id : on_node[n]) {
        const Running& r = running.at(id);
        if (Immovable(r.job, r.pod)) fixed += r.pod.TotalGpu().value();
      }
      order.emplace_back(fixed, snap.node_gpu_free(ni) * -1, static_cast<uint32_t>(n));
    }
    if (order.size() > kDefragNodes) {
      std::partial_sort(order.begin(), order.begin() + kDefragNodes, order.end());
      order.resize(kDefragNodes);
    }
    std::optional<NodeIndex> best;
    int64_t best_cost = INT64_MAX;
    for (const auto& [fixed, neg_free, n] : order) {
      const NodeIndex ni{n};
      Journal journal(&internal_error);
      ClearPlan plan;
      if (PlanClear(j, pod, ni, now, journal, plan, best_cost) && plan.cost < best_cost) {
        best_cost = plan.cost;
        best = ni;
      }
      journal.RollbackTo(snap, 0);
    }
    if (!best) return false;
    Journal journal(&internal_error);
    ClearPlan plan;
    swap_budget = kDefragSwaps;  // the chosen node's plan again, for real
    if (!PlanClear(j, pod, *best, now, journal, plan)) {
      journal.RollbackTo(snap, 0);
      return false;
    }
    HideConflicts(j, conflict_mask);  // no affinity rules here: only the cordoned nodes
    const placement::PlacementDecision d =
        PlaceWithin(pod, cordoned_count == 0 ? nullptr : &conflict_mask);
    ++out.attempts;
    if (!d.placement || !journal.Apply(snap, pod, *d.placement).ok()) {
      journal.RollbackTo(snap, 0);
      return false;
    }
    for (MoveEvent& mv : plan.moves) {
      Running& r = running.at(mv.job);
      auto& src = on_node[mv.from.node.value()];
      src.erase(std::find(src.begin(), src.end(), mv.job));
      on_node[mv.to.node.value()].push_back(mv.job);
      r.pods[0] = mv.to;
      if (mv.restart) r.start = now;
      r.seq = mv.seq = next_seq++;
      out.moves.push_back(mv);
    }
    CommitStart(j, pod, {*d.placement}, plan.evicted, now, out);
    return true;
  }

  // --- consolidation --------------------------------------------------------------------
  // Frees `k` whole GPUs on one node for a queued whole-GPU pod by moving preemptible
  // fractional pods elsewhere. Applies the moves and returns them (empty: not possible).
  std::vector<MoveEvent> Consolidate(const Job& j, const TaskRequest& pod) {
    std::vector<MoveEvent> moves;
    for (size_t n = 0; n < snap.node_count(); ++n) {
      const NodeIndex ni{static_cast<uint32_t>(n)};
      if (!Open(ni) || !empty.Fits(ni, pod) || on_node[n].empty()) continue;
      if (snap.fully_free_gpus(ni) >= pod.num_gpu) continue;  // the engine would have used it
      // GPUs whose occupants are all movable sharing pods, by fewest occupants.
      std::vector<std::pair<int, int>> candidates;  // (occupants, gpu)
      for (int g = 0; g < snap.gpu_count(ni); ++g) {
        if (snap.gpu_free(ni, g) == kWholeGpu.value()) continue;
        int occupants = 0;
        bool movable = true;
        for (JobId id : on_node[n]) {
          const Running& r = running.at(id);
          for (const Placement& p : r.pods) {
            if (p.node != ni || !(p.gpus >> g & 1)) continue;
            ++occupants;
            if (r.job.qos == QosClass::kGuaranteed || !r.pod.IsSharing() || r.job.pods != 1)
              movable = false;
          }
        }
        if (movable) candidates.emplace_back(occupants, g);
      }
      const int need = pod.num_gpu - snap.fully_free_gpus(ni);
      if (static_cast<int>(candidates.size()) < need) continue;
      std::sort(candidates.begin(), candidates.end());
      Journal journal(&internal_error);
      std::vector<MoveEvent> trial;
      bool ok = true;
      placement::GpuSet freeing = 0;
      for (int c = 0; c < need; ++c) freeing |= placement::GpuBit(candidates[c].second);
      for (int c = 0; c < need && ok; ++c) {
        const int g = candidates[c].second;
        for (JobId id : on_node[n]) {
          const Running& r = running.at(id);
          if (r.pods[0].node != ni || !(r.pods[0].gpus >> g & 1)) continue;
          Expect(journal.Undo(snap, r.pod, r.pods[0]), "lifting a pod to consolidate");
          // Best destination: the fullest GPU (elsewhere, not being freed) that takes it.
          std::optional<Placement> dest;
          int32_t dest_free = INT32_MAX;
          for (size_t m = 0; m < snap.node_count(); ++m) {
            const NodeIndex mi{static_cast<uint32_t>(m)};
            if (!Open(mi) || !snap.Fits(mi, r.pod)) continue;
            for (int h = 0; h < snap.gpu_count(mi); ++h) {
              if (mi == ni && (freeing >> h & 1)) continue;
              const int32_t f = snap.gpu_free(mi, h);
              if (f >= r.pod.gpu_milli.value() && f < dest_free) {
                dest_free = f;
                dest = Placement{mi, placement::GpuBit(h)};
              }
            }
          }
          if (!dest || !journal.Apply(snap, r.pod, *dest).ok()) {
            ok = false;
            break;
          }
          trial.push_back({id, 0, r.pods[0], *dest, j.id, false});
        }
      }
      if (ok && snap.Fits(ni, pod)) {
        for (MoveEvent& m : trial) {
          Running& r = running.at(m.job);
          auto& src = on_node[m.from.node.value()];
          src.erase(std::find(src.begin(), src.end(), m.job));
          on_node[m.to.node.value()].push_back(m.job);
          r.pods[0] = m.to;
          r.seq = m.seq = next_seq++;
        }
        caps_dirty = true;
        return trial;
      }
      journal.RollbackTo(snap, 0);
    }
    return moves;
  }
};

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Scheduler::~Scheduler() = default;

StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(const TenantTree* tenants,
                                                       std::vector<NodeSpec> nodes,
                                                       SchedulerOptions options) {
  if (tenants == nullptr || tenants->size() == 0)
    return InvalidArgumentError("scheduler: no tenants");
  TESSERA_ASSIGN_OR_RETURN(ClusterSnapshot snap, ClusterSnapshot::Create(std::move(nodes)));
  auto impl = std::make_unique<Impl>(std::move(snap));
  impl->tree = tenants;
  impl->opt = options;
  placement::PolicyOptions po;
  po.target_workload = options.target_workload;
  if (po.target_workload == nullptr) {
    // A neutral mix: one whole GPU and the common fractions, any model.
    std::vector<placement::TaskType> types;
    for (int milli : {1000, 500, 250}) {
      placement::TaskType t;
      t.num_gpu = 1;
      t.gpu_milli = GpuMilli{milli};
      t.weight = 1;
      types.push_back(t);
    }
    impl->default_workload = placement::TargetWorkload::FromTypes(std::move(types));
    po.target_workload = &impl->default_workload;
  }
  TESSERA_ASSIGN_OR_RETURN(impl->policy, placement::MakePolicy(options.placement_policy, po));
  impl->rng = Rng(options.seed);
  impl->ctx.rng = &impl->rng;
  const int nt = tenants->size();
  impl->usage.assign(nt, Resources());
  impl->be_usage.assign(nt, Resources());
  impl->g_usage.assign(nt, Resources());
  impl->decayed.assign(nt, {});
  impl->share.assign(nt, 0.0);
  impl->queue.assign(nt, {});
  impl->pending_counts.assign(nt, {});
  impl->by_size.assign(nt, {});
  impl->on_node.assign(impl->snap.node_count(), {});
  impl->immovable_pods.assign(impl->snap.node_count(), 0);
  impl->cordoned.assign(impl->snap.node_count(), 0);
  for (size_t n = 0; n < impl->snap.node_count(); ++n)
    impl->max_node_gpus =
        std::max(impl->max_node_gpus, impl->snap.gpu_count(NodeIndex{static_cast<uint32_t>(n)}));

  Resources cap;
  cap[kGpuMilliDim] = impl->snap.total_gpu_capacity().value();
  const auto& catalog = GpuModelCatalog::Builtin();
  for (size_t n = 0; n < impl->snap.node_count(); ++n) {
    const NodeSpec& s = impl->snap.spec(NodeIndex{static_cast<uint32_t>(n)});
    if (!s.model.valid()) continue;
    cap[kGpuMemoryDim] += static_cast<int64_t>(s.gpu_count) * catalog.info(s.model).memory.value();
    if (auto dim = tenants->space().ModelDim(catalog.info(s.model).name)) cap[*dim] += s.gpu_count;
  }
  impl->capacity = cap;
  for (int d = 0; d < tenants->space().dims(); ++d) {
    if (cap[d] > 0) impl->drf_dims |= 1u << d;
    for (int t = 0; t < nt; ++t)
      if (tenants->spec(t).guaranteed[d] > 0) impl->quota_dims |= 1u << d;
  }
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

namespace {
// What Submit and Adopt both check: a leaf tenant, a valid shape, a new id.
Status CheckJobShape(const Scheduler::Impl& m, const Job& job, const std::string& what) {
  if (job.tenant < 0 || job.tenant >= m.tree->size())
    return InvalidArgumentError(what + ": unknown tenant");
  if (!m.tree->is_leaf(job.tenant))
    return InvalidArgumentError(what + ": tenant '" + m.tree->name(job.tenant) +
                                "' has sub-tenants; submit to a leaf (project)");
  if (job.pods < 1) return InvalidArgumentError(what + ": pods must be >= 1");
  TESSERA_RETURN_IF_ERROR(placement::ValidateTask(job.pod).WithPrefix(what + ": "));
  if (m.pending.count(job.id) || m.running.count(job.id))
    return InvalidArgumentError(what + ": duplicate job id");
  return Status::Ok();
}
}  // namespace

Status Scheduler::Submit(const Job& job) {
  Impl& m = *impl_;
  const std::string what = "job " + std::to_string(job.id);
  TESSERA_RETURN_IF_ERROR(CheckJobShape(m, job, what));
  const Resources r = m.ResourcesOf(job, nullptr);
  for (TenantIndex a : m.tree->path(job.tenant)) {
    if (!r.AllLessEqual(m.tree->spec(a).limit))
      return InvalidArgumentError(what + " can never run: it asks " + m.tree->space().Format(r) +
                                  ", over the limit of tenant '" + m.tree->name(a) + "' (" +
                                  m.tree->space().Format(m.tree->spec(a).limit) + ")");
  }
  if (job.qos == QosClass::kGuaranteed) {
    for (TenantIndex a : m.tree->path(job.tenant)) {
      const Resources& g = m.tree->spec(a).guaranteed;
      for (int d = 0; d < kMaxResourceDims; ++d)
        if ((m.quota_dims >> d & 1) && r[d] > g[d])
          return InvalidArgumentError(
              what + " can never run as Guaranteed: it asks " + m.tree->space().DimName(d) + " " +
              std::to_string(r[d]) + ", more than tenant '" + m.tree->name(a) +
              "' is guaranteed (" + std::to_string(g[d]) + ")");
    }
  }
  const TaskRequest pod = m.EffectivePod(job);
  int nodes_that_fit = 0;
  for (size_t n = 0; n < m.empty.node_count(); ++n)
    if (m.empty.Fits(NodeIndex{static_cast<uint32_t>(n)}, pod)) ++nodes_that_fit;
  if (nodes_that_fit == 0)
    return InvalidArgumentError(what + " can never run: no node of the cluster can hold one pod");
  m.Enqueue(job);
  m.reasons[job.id] = WaitReason::kCapacity;
  return Status::Ok();
}

namespace {
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

// Hierarchical weighted DRF: the least-served active root, then its least-served active child,
// ... down to a leaf (kNoTenant when none is active). `active[a]`: active leaves under a.
// Example: roots A (share 0.2) and B (0.1), B's leaves b1 (0.3) and b2 (0.05) -> b2.
TenantIndex PickLeastServed(const TenantTree& tree, const std::vector<double>& share,
                            const std::vector<int>& active) {
  const std::vector<TenantIndex>* level = &tree.roots();
  while (true) {
    TenantIndex best = kNoTenant;
    for (TenantIndex c : *level)
      if (active[c] > 0 && (best == kNoTenant || share[c] < share[best])) best = c;
    if (best == kNoTenant || tree.is_leaf(best)) return best;
    level = &tree.children(best);
  }
}

// One pending job's turn in pass `pass` (0 entitled, 1 borrowing, 2 leftovers): admission
// checks, then placement with reclaim or fair-share preemption, consolidation and
// defragmentation as the pass allows. Records the wait reason when it does not start.
void AttemptJob(Scheduler::Impl& m, const Job& j, int pass, Seconds now, CycleState& cs, CycleResult& out) {
  const Resources r = m.ResourcesOf(j, nullptr);
  // A job asking no GPU claims no guarantee: a Guaranteed one is tried in the first pass
  // without preemption rights, a Burstable one in the second (borrowing) like any other.
  const bool gpu_free_job = r[kGpuMilliDim] == 0;
  if (pass == 0 && !gpu_free_job && !m.Entitled(j.tenant, r, j.qos)) {
    if (j.qos == QosClass::kGuaranteed) m.reasons[j.id] = WaitReason::kGuarantee;
    return;
  }
  if (pass == 0 && gpu_free_job && j.qos != QosClass::kGuaranteed) return;
  if (!m.WithinLimits(j.tenant, r)) {
    m.reasons[j.id] = WaitReason::kLimit;
    return;
  }
  // Pass 1: reclaim for entitled jobs. Pass 2: fair-share preemption of borrowed work of
  // more-served tenants (opt.fair_share_preemption).
  const bool fair = pass == 1 && m.opt.fair_share_preemption && j.qos == QosClass::kBurstable;
  const bool may_preempt = (pass == 0 || fair) && m.opt.preemption && !gpu_free_job;
  const TaskRequest pod = m.EffectivePod(j);
  const Job copy = j;  // TryStart may requeue victims (rehash of `pending`)
  bool started = false;
  // Within a cycle free capacity only shrinks until something is preempted or moved, so a
  // shape that found no place (or no victims, for a tenant) is not tried again until then.
  // Reclaim searches are also bounded per cycle; the rest wait for the next cycle.
  const ShapeKey shape{pod.cpu.value(), pod.memory.value(), pod.gpu_milli.value(),
                       pod.allowed_models, pod.num_gpu, copy.pods};
  const bool cacheable = m.opt.affinity.empty();
  const bool place_fails = !m.MayFitNow(pod) || (cacheable && cs.failed_shapes.count(shape));
  const ReclaimKey rkey{shape, copy.tenant, static_cast<int>(copy.qos) * 2 + (fair ? 1 : 0)};
  const bool try_reclaim = may_preempt && cs.reclaims_left > 0 &&
                           !(cacheable && cs.failed_reclaims.count(rkey));
  if (!place_fails || try_reclaim) {
    const int64_t calls_before = m.reclaim_calls;
    const size_t preempted_before = out.preempted.size();
    started = m.TryStart(copy, try_reclaim, now, out, fair, place_fails);
    cs.reclaims_left -= m.reclaim_calls - calls_before;
    if (out.preempted.size() != preempted_before) {
      cs.failed_shapes.clear();
      cs.failed_reclaims.clear();
    } else if (!started && cacheable && m.reasons[copy.id] == WaitReason::kCapacity) {
      cs.failed_shapes.insert(shape);
      if (try_reclaim) cs.failed_reclaims.insert(rkey);
    }
  } else {
    m.reasons[j.id] = WaitReason::kCapacity;
  }
  // Consolidation for a blocked whole-GPU job: a bounded number of tries per cycle, and a
  // shape that could not be made room for is not tried again this cycle.
  if (!started && m.opt.consolidation && pass < 2 && copy.pods == 1 && pod.IsWholeGpu() &&
      m.reasons[copy.id] == WaitReason::kCapacity && cs.consolidation_budget > 0 &&
      !cs.failed_consolidation.count({pod.num_gpu, pod.allowed_models})) {
    --cs.consolidation_budget;
    auto moves = m.Consolidate(copy, pod);
    if (moves.empty()) {
      cs.failed_consolidation.insert({pod.num_gpu, pod.allowed_models});
    } else {
      out.moves.insert(out.moves.end(), moves.begin(), moves.end());
      cs.failed_shapes.clear();
      cs.failed_reclaims.clear();
      started = m.TryStart(copy, false, now, out);
    }
  }
  // Defragmentation for an entitled job nothing else could place, and with
  // fair_share_defragmentation for a borrowing one (bounded per cycle).
  const bool defrag_pass =
      pass == 0 || (fair && m.opt.fair_share_defragmentation && m.opt.fair_share_preemption);
  if (!started && defrag_pass && m.opt.defragmentation && !gpu_free_job && cs.defrag_budget > 0 &&
      m.reasons[copy.id] == WaitReason::kCapacity && !cs.failed_defrag.count(shape)) {
    --cs.defrag_budget;
    // The memos stay: the cleared node is taken and the moved work went to other nodes,
    // so what failed before gets its next try in the next cycle.
    started = m.Defragment(copy, pod, now, out, fair);
    if (!started) cs.failed_defrag.insert(shape);
  }
  if (started) {
    m.Dequeue(copy);
    m.pending.erase(copy.id);
  }
  for (size_t k = cs.preempted_seen; k < out.preempted.size(); ++k)
    cs.requeued_now.insert(out.preempted[k].victim);
  cs.preempted_seen = out.preempted.size();
}
}  // namespace

CycleResult Scheduler::Cycle(Seconds now) {
  Impl& m = *impl_;
  CycleResult out;
  m.Decay(now);
  const TenantTree& tree = *m.tree;
  const int nt = tree.size();
  std::vector<int> active(nt, 0);  // active leaves in the subtree
  std::vector<std::set<PendingKey>::iterator> cursor(nt), stop(nt);
  CycleState cs;
  cs.reclaims_left = m.opt.max_reclaims_per_cycle;

  for (int pass = 0; pass < 3; ++pass) {
    const uint8_t lo = pass == 2 ? 2 : (pass == 1 ? 1 : 0);
    const uint8_t hi = pass == 2 ? 3 : 2;  // [lo, hi) of QoS ranks
    std::fill(active.begin(), active.end(), 0);
    for (int t = 0; t < nt; ++t) {
      if (m.queue[t].empty()) continue;
      cursor[t] = m.queue[t].lower_bound(PendingKey{lo, INT32_MIN, INT64_MIN, INT64_MIN});
      stop[t] = m.queue[t].lower_bound(PendingKey{hi, INT32_MIN, INT64_MIN, INT64_MIN});
      if (cursor[t] == stop[t]) continue;
      for (TenantIndex a : tree.path(t)) active[a]++;
    }
    while (true) {
      const TenantIndex pick = PickLeastServed(tree, m.share, active);
      if (pick == kNoTenant) break;
      // Nothing more can start in this pass once no GPU is free, no victim search is left and
      // no CPU-only job waits: stop scanning the queue.
      if (m.cpu_only_pending == 0 && (cs.reclaims_left <= 0 || !m.opt.preemption || pass == 2) &&
          m.NoGpuFree())
        break;
      if (cursor[pick] == stop[pick]) {
        for (TenantIndex a : tree.path(pick)) active[a]--;
        continue;
      }
      const PendingKey key = *cursor[pick];
      ++cursor[pick];
      if (cs.requeued_now.count(key.id)) continue;  // preempted in this cycle: waits for the next
      AttemptJob(m, m.pending.at(key.id), pass, now, cs, out);
    }
  }
  out.error = m.internal_error;
  return out;
}

Status Scheduler::Complete(JobId id, Seconds /*now*/) {
  Impl& m = *impl_;
  auto it = m.running.find(id);
  if (it == m.running.end()) return NotFoundError("job " + std::to_string(id) + " is not running");
  Impl::Running r = std::move(it->second);
  m.running.erase(it);
  for (const Placement& p : r.pods) {
    TESSERA_RETURN_IF_ERROR(m.snap.Undo(r.pod, p));
    auto& lst = m.on_node[p.node.value()];
    lst.erase(std::find(lst.begin(), lst.end(), id));
    if (Impl::Immovable(r.job, r.pod)) --m.immovable_pods[p.node.value()];
  }
  m.AddUsage(r.job.tenant, r.res, r.job.qos, -1);
  m.caps_dirty = true;
  return Status::Ok();
}

Status Scheduler::Cancel(JobId id) {
  Impl& m = *impl_;
  auto it = m.pending.find(id);
  if (it == m.pending.end()) return NotFoundError("job " + std::to_string(id) + " is not pending");
  m.Dequeue(it->second);
  m.pending.erase(it);
  m.reasons.erase(id);
  return Status::Ok();
}

Status Scheduler::Adopt(const Job& job, std::vector<Placement> pods, Seconds start, uint64_t seq) {
  Impl& m = *impl_;
  const std::string what = "job " + std::to_string(job.id);
  TESSERA_RETURN_IF_ERROR(CheckJobShape(m, job, what));
  if (pods.size() != static_cast<size_t>(job.pods))
    return InvalidArgumentError(what + ": " + std::to_string(pods.size()) + " placements for " +
                                std::to_string(job.pods) + " pods");
  if (seq == 0) return InvalidArgumentError(what + ": seq must be > 0 (StartEvent::seq)");
  Impl::Running r;
  r.job = job;
  r.pod = m.EffectivePod(job);
  for (size_t k = 0; k < pods.size(); ++k) {
    if (Status st = m.snap.Apply(r.pod, pods[k]); !st.ok()) {
      for (size_t b = k; b-- > 0;) {
        Status undo = m.snap.Undo(r.pod, pods[b]);
        if (!undo.ok()) return InternalError(what + ": cannot take back an adopted pod: " + undo.message());
      }
      return InvalidArgumentError(what + ": pod " + std::to_string(k) + " cannot run where it was: " +
                                  st.message());
    }
  }
  r.pods = std::move(pods);
  r.start = start;
  r.res = m.ResourcesOf(job, &r.pods);
  r.seq = seq;
  for (const Placement& p : r.pods) {
    auto& lst = m.on_node[p.node.value()];
    // Keep arrival order: the pods on a node stay sorted by seq.
    auto at = std::find_if(lst.begin(), lst.end(), [&](JobId other) { return m.running.at(other).seq > seq; });
    lst.insert(at, job.id);
    if (Impl::Immovable(job, r.pod)) ++m.immovable_pods[p.node.value()];
  }
  m.AddUsage(job.tenant, r.res, job.qos, +1);
  m.running.emplace(job.id, std::move(r));
  m.next_seq = std::max(m.next_seq, seq + 1);
  m.caps_dirty = true;
  return Status::Ok();
}

Status Scheduler::SubmitRestored(const Job& job, WaitReason last_reason) {
  TESSERA_RETURN_IF_ERROR(Submit(job));
  impl_->reasons[job.id] = last_reason;
  return Status::Ok();
}

std::vector<JobId> Scheduler::running_jobs() const {
  std::vector<std::pair<uint64_t, JobId>> by_seq;
  by_seq.reserve(impl_->running.size());
  for (const auto& [id, r] : impl_->running) by_seq.push_back({r.seq, id});
  std::sort(by_seq.begin(), by_seq.end());
  std::vector<JobId> out;
  out.reserve(by_seq.size());
  for (const auto& [seq, id] : by_seq) out.push_back(id);
  return out;
}

std::vector<JobId> Scheduler::pending_jobs() const {
  std::vector<JobId> out;
  out.reserve(impl_->pending.size());
  for (const auto& [id, job] : impl_->pending) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

Scheduler::FairShareMemory Scheduler::fair_share_memory() const {
  return {impl_->decay_started, impl_->last_decay, impl_->decayed};
}

Status Scheduler::RestoreFairShareMemory(const FairShareMemory& memory) {
  Impl& m = *impl_;
  if (memory.decayed.size() != static_cast<size_t>(m.tree->size()))
    return InvalidArgumentError("fair-share memory for " + std::to_string(memory.decayed.size()) +
                                " tenants, the tree has " + std::to_string(m.tree->size()));
  m.decay_started = memory.started;
  m.last_decay = memory.last_decay;
  m.decayed = memory.decayed;
  for (int a = 0; a < m.tree->size(); ++a) m.share[a] = m.ShareOf(a);
  return Status::Ok();
}

Status Scheduler::SetCordoned(NodeIndex node, bool cordoned) {
  Impl& m = *impl_;
  if (node.value() >= m.snap.node_count())
    return InvalidArgumentError("node index " + std::to_string(node.value()) + " out of range (" +
                                std::to_string(m.snap.node_count()) + " nodes)");
  uint8_t& c = m.cordoned[node.value()];
  if (c != static_cast<uint8_t>(cordoned)) m.cordoned_count += cordoned ? 1 : -1;
  c = cordoned ? 1 : 0;
  return Status::Ok();
}

bool Scheduler::cordoned(NodeIndex node) const {
  return node.value() < impl_->cordoned.size() && impl_->cordoned[node.value()] != 0;
}

uint64_t Scheduler::placed_seq(JobId id) const {
  auto it = impl_->running.find(id);
  return it == impl_->running.end() ? 0 : it->second.seq;
}

bool Scheduler::HasRunnableWaiting(TenantIndex t, bool include_best_effort) const {
  for (const PendingKey& k : impl_->queue[t]) {
    // The queue is sorted by QoS class: BestEffort comes last.
    if (!include_best_effort && k.qos == static_cast<uint8_t>(QosClass::kBestEffort)) break;
    const WaitReason r = wait_reason(k.id);
    if (r != WaitReason::kLimit && r != WaitReason::kGuarantee) return true;
  }
  return false;
}

std::array<int, kWaitReasonCount> Scheduler::PendingByReason() const {
  std::array<int, kWaitReasonCount> n{};
  for (const auto& [id, job] : impl_->pending) n[static_cast<int>(wait_reason(id))]++;
  return n;
}

bool Scheduler::BelowGuaranteeWithWaiting(TenantIndex t) const {
  const Impl& m = *impl_;
  const Resources prot = m.Protected(t);
  const Resources& g = m.tree->spec(t).guaranteed;
  for (const auto& [gpu, id] : m.by_size[t]) {
    // Sizes ascend: once one does not fit the unused guarantee in GPU milli, none does.
    if (prot[kGpuMilliDim] + gpu > g[kGpuMilliDim]) return false;
    const Resources r = m.ResourcesOf(m.pending.at(id), nullptr);
    bool fits = r[kGpuMilliDim] > 0;
    for (int d = 0; d < kMaxResourceDims && fits; ++d)
      if ((m.quota_dims >> d & 1) && r[d] > 0 && prot[d] + r[d] > g[d]) fits = false;
    if (fits) return true;
  }
  return false;
}

const ClusterSnapshot& Scheduler::cluster() const { return impl_->snap; }
const TenantTree& Scheduler::tenants() const { return *impl_->tree; }
const Resources& Scheduler::usage(TenantIndex t) const { return impl_->usage[t]; }
Resources Scheduler::protected_usage(TenantIndex t) const { return impl_->Protected(t); }
const Resources& Scheduler::capacity() const { return impl_->capacity; }
double Scheduler::dominant_share(TenantIndex t) const { return impl_->share[t]; }
Resources Scheduler::ResourcesOf(const Job& job, const std::vector<Placement>* where) const {
  return impl_->ResourcesOf(job, where);
}
size_t Scheduler::pending_count() const { return impl_->pending.size(); }
size_t Scheduler::running_count() const { return impl_->running.size(); }
int Scheduler::pending_of(TenantIndex t, QosClass q) const {
  return impl_->pending_counts[t][static_cast<int>(q)];
}
bool Scheduler::is_running(JobId id) const { return impl_->running.count(id) > 0; }
bool Scheduler::is_pending(JobId id) const { return impl_->pending.count(id) > 0; }
WaitReason Scheduler::wait_reason(JobId id) const {
  auto it = impl_->reasons.find(id);
  return it == impl_->reasons.end() ? WaitReason::kNone : it->second;
}
const Job* Scheduler::job(JobId id) const {
  if (auto it = impl_->pending.find(id); it != impl_->pending.end()) return &it->second;
  if (auto it = impl_->running.find(id); it != impl_->running.end()) return &it->second.job;
  return nullptr;
}
std::optional<Seconds> Scheduler::start_time(JobId id) const {
  auto it = impl_->running.find(id);
  if (it == impl_->running.end()) return std::nullopt;
  return it->second.start;
}
const std::vector<Placement>* Scheduler::placement_of(JobId id) const {
  auto it = impl_->running.find(id);
  return it == impl_->running.end() ? nullptr : &it->second.pods;
}

}  // namespace tessera::sched
