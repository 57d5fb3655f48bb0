// One job's attempt within a cycle: placement with reclaim (TryStart), the bookkeeping of a
// start (CommitStart), and AttemptJob, which chains placement, consolidation and
// defragmentation as the pass allows.

#include "src/sched/scheduler_impl.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace tessera::sched {

void Scheduler::Impl::RefreshCaps() {
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

bool Scheduler::Impl::NoGpuFree() {
  RefreshCaps();
  return max_gpu_free == 0;
}

bool Scheduler::Impl::MayFitNow(const TaskRequest& p) {
  if (p.num_gpu == 0) return true;
  RefreshCaps();
  if (p.IsWholeGpu()) return max_full_free >= p.num_gpu;
  return max_gpu_free >= p.gpu_milli.value();
}

bool Scheduler::Impl::TryStart(const Job& j, bool may_preempt, Seconds now, CycleResult& out, bool fair,
                               bool skip_place) {
  const TaskRequest pod = EffectivePod(j);
  Attempt at;
  at.fair = fair;
  at.fair_res = ResourcesOf(j, nullptr);
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
      auto v = Reclaim(at, j, pod, now, journal, removed, victims, std::nullopt, within);
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
  CommitStart(at.fair, j, pod, where, victims, now, out);
  return true;
}

void Scheduler::Impl::CommitStart(bool fair, const Job& j, const TaskRequest& pod, const std::vector<Placement>& where,
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
    out.preempted.push_back({id, j.id, fair});
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

}  // namespace tessera::sched
