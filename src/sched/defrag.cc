// Defragmentation: clearing one node for a job reclaim could not place (PlanClear over the
// candidate nodes, then Defragment commits the cheapest plan).

#include "src/sched/scheduler_impl.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tessera::sched {

std::optional<Placement> Scheduler::Impl::MoveDestination(const TaskRequest& pod, NodeIndex avoid) const {
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

bool Scheduler::Impl::PlanClear(Attempt& at, const Job& j, const TaskRequest& pod, NodeIndex ni, Seconds now,
                                Journal& journal, ClearPlan& plan, int64_t stop_at) {
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
    const bool evictable = Eligible(at, *r, j.tenant, j.qos, now, removed);
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
    if (!sharing && at.fair && !MoreServedSide(at, r->job.tenant, j.tenant)) continue;
    const size_t mark = journal.mark();
    if (!journal.Undo(snap, r->pod, r->pods[0]).ok()) continue;
    auto dest = MoveDestination(r->pod, ni);
    const auto saved_removed = removed;
    const auto saved_all = at.removed_all;
    const size_t saved_evicted = plan.evicted.size();
    if (!dest && at.swap_budget >= static_cast<int64_t>(snap.node_count())) {
      at.swap_budget -= static_cast<int64_t>(snap.node_count());
      // Make room elsewhere by evicting what `j` may preempt (a swap: the moved pod takes
      // the place of borrowed work, `j` takes the moved pod's).
      // Neither what the plan evicts nor what it moves may be taken again.
      std::vector<JobId> in_plan = plan.evicted;
      for (const MoveEvent& mv : plan.moves) in_plan.push_back(mv.job);
      for (JobId v : Reclaim(at, j, r->pod, now, journal, removed, in_plan, ni)) {
        plan.evicted.push_back(v);
        plan.cost += 1 + LostWork(running.at(v), now);
      }
      if (plan.evicted.size() != saved_evicted) dest = MoveDestination(r->pod, ni);
    }
    if (!dest || !journal.Apply(snap, r->pod, *dest).ok()) {
      journal.RollbackTo(snap, mark);
      removed = saved_removed;
      at.removed_all = saved_all;
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

bool Scheduler::Impl::Defragment(const Job& j, const TaskRequest& pod, Seconds now, CycleResult& out,
                                 bool fair) {
  if (j.pods != 1 || !opt.affinity.empty()) return false;
  Attempt at;
  at.fair = fair;
  at.fair_res = ResourcesOf(j, nullptr);
  // Plan on the kDefragNodes nodes with the least work that can never leave them (whole-GPU
  // Guaranteed pods and gang pods), then the least work in all.
  constexpr size_t kDefragNodes = 8;
  at.swap_budget = kDefragSwaps;
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
    if (PlanClear(at, j, pod, ni, now, journal, plan, best_cost) && plan.cost < best_cost) {
      best_cost = plan.cost;
      best = ni;
    }
    journal.RollbackTo(snap, 0);
  }
  if (!best) return false;
  Journal journal(&internal_error);
  ClearPlan plan;
  at.swap_budget = kDefragSwaps;  // the chosen node's plan again, for real
  if (!PlanClear(at, j, pod, *best, now, journal, plan)) {
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
  CommitStart(at.fair, j, pod, {*d.placement}, plan.evicted, now, out);
  return true;
}

}  // namespace tessera::sched
