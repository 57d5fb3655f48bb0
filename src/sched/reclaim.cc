// Preemption: which running job may be taken for which preemptor (reclaim for guarantees,
// fair-share preemption by FairShareRule), what it costs, and the victim search (Reclaim).

#include "src/sched/scheduler_impl.h"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <vector>

namespace tessera::sched {

TenantIndex Scheduler::Impl::Lca(TenantIndex a, TenantIndex b) const {
  const auto& pa = tree->path(a);
  const auto& pb = tree->path(b);
  TenantIndex l = kNoTenant;
  for (size_t i = 0; i < pa.size() && i < pb.size() && pa[i] == pb[i]; ++i) l = pa[i];
  return l;
}

bool Scheduler::Impl::FairSwapAllowed(const Attempt& a, TenantIndex side_v, const Resources& v_delta, TenantIndex side_t) const {
  const double v_after = ShareWith(side_v, v_delta, -1);
  if (opt.fair_share_rule == FairShareRule::kLexicographic)
    return v_after > ShareWith(side_t, Resources(), 0) + 1e-12;
  return v_after + 1e-12 >= ShareWith(side_t, a.fair_res, +1);
}

std::pair<TenantIndex, TenantIndex> Scheduler::Impl::Sides(TenantIndex v_tenant, TenantIndex t) const {
  const TenantIndex lca = Lca(v_tenant, t);
  if (lca == v_tenant || lca == t) return {kNoTenant, kNoTenant};
  const size_t k = lca == kNoTenant ? 0 : static_cast<size_t>(tree->depth(lca)) + 1;
  return {tree->path(v_tenant)[k], tree->path(t)[k]};
}

bool Scheduler::Impl::MoreServedSide(const Attempt& a, TenantIndex v_tenant, TenantIndex t) const {
  const auto [side_v, side_t] = Sides(v_tenant, t);
  return side_v != kNoTenant && FairSwapAllowed(a, side_v, Resources(), side_t);
}

bool Scheduler::Impl::Eligible(const Attempt& at, const Running& v, TenantIndex t, QosClass preemptor, Seconds now,
                               const std::unordered_map<TenantIndex, Resources>& removed) const {
  if (v.job.qos == QosClass::kGuaranteed) return false;
  // Started in this cycle: never taken back in the same cycle (no churn, and a job is never
  // both started and preempted in one CycleResult).
  if (v.start >= now) return false;
  if (now - v.start < opt.min_runtime) return false;
  if (v.job.qos == QosClass::kBestEffort) return true;
  if (at.fair && opt.fair_share_max_victim_runtime.count() > 0 && v.job.kind == JobKind::kBatch &&
      now - v.start > opt.fair_share_max_victim_runtime)
    return false;
  // Inside a tenant, Guaranteed work may take back what the tenant's own Burstable work took.
  if (v.job.tenant == t) return !at.fair && preemptor == QosClass::kGuaranteed;
  const TenantIndex lca = Lca(v.job.tenant, t);
  if (at.fair) {
    // Fair-share preemption: only while the victim's side stays served enough against the
    // preemptor's side (opt.fair_share_rule; the two children of the common ancestor).
    const auto [side_v, side_t] = Sides(v.job.tenant, t);
    if (side_v == kNoTenant) return false;
    Resources v_delta = v.res;
    if (auto r = at.removed_all.find(side_v); r != at.removed_all.end()) v_delta += r->second;
    if (!FairSwapAllowed(at, side_v, v_delta, side_t)) return false;
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
      if (before[d] <= g[d] || (at.fair && before[d] - v.res[d] < g[d])) return false;
    }
  }
  return true;
}

// What stopping `v` at `now` throws away, GPU milli x seconds. A service replica is re-created
// and loses its start-up, however long it has served; a batch job loses its run since its last
// checkpoint (its run started at a checkpoint: a stopped job resumes from one, or from zero).
// Example: 1 GPU, run 150 s: batch without checkpoints 150 000; batch checkpointing every
// 60 s 30 000; a service with a 60 s start-up 60 000.
int64_t Scheduler::Impl::LostWork(const Running& v, Seconds now) {
  if (v.job.kind == JobKind::kService) return v.res[kGpuMilliDim] * std::max<int64_t>(0, v.job.startup.count());
  int64_t run = std::max<int64_t>(0, (now - v.start).count());
  if (v.job.checkpoint_interval.count() > 0) run %= v.job.checkpoint_interval.count();
  return v.res[kGpuMilliDim] * run;
}

int64_t Scheduler::Impl::VictimCost(const Running& v, TenantIndex t, Seconds now) {
  return (v.job.tenant == t ? kOwnVictimCost : 0) + 1 + LostWork(v, now);
}

void Scheduler::Impl::EvictInJournal(const Running& v, Journal& journal) {
  for (const Placement& p : v.pods) Expect(journal.Undo(snap, v.pod, p), "evicting a victim");
}

std::vector<JobId> Scheduler::Impl::Reclaim(Attempt& at, const Job& j, const TaskRequest& pod, Seconds now,
                                            Journal& journal,
                                            std::unordered_map<TenantIndex, Resources>& removed,
                                            const std::vector<JobId>& already,
                                            std::optional<NodeIndex> avoid,
                                            const placement::Eligibility* within) {
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
      if (Eligible(at, r, j.tenant, j.qos, now, removed)) cands.push_back(&r);
    }
    if (cands.empty()) continue;
    std::sort(cands.begin(), cands.end(), [&](const Running* a, const Running* b) {
      // The tenant's own work last: displacing it leaves the tenant where it was.
      const bool own_a = a->job.tenant == j.tenant, own_b = b->job.tenant == j.tenant;
      if (own_a != own_b) return own_b;
      if (a->job.qos != b->job.qos) return a->job.qos > b->job.qos;  // BestEffort first
      // The least work lost: a batch job starts over (or from its last checkpoint), a service
      // replica loses its start-up (LostWork).
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
    const auto saved_all = at.removed_all;
    for (const Running* v : cands) {
      if (!Eligible(at, *v, j.tenant, j.qos, now, trial_removed)) continue;
      EvictInJournal(*v, journal);
      for (TenantIndex a : tree->path(v->job.tenant)) at.removed_all[a] += v->res;
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
    at.removed_all = saved_all;
    if (fits && cost < best_cost) {
      best_cost = cost;
      best = victims;
      best_node = ni;
    }
  }
  for (JobId id : best) {
    const Running& v = running.at(id);
    EvictInJournal(v, journal);
    for (TenantIndex a : tree->path(v.job.tenant)) at.removed_all[a] += v.res;
    if (v.job.qos != QosClass::kBestEffort)
      for (TenantIndex a : tree->path(v.job.tenant)) removed[a] += v.res;
  }
  return best;
}

}  // namespace tessera::sched
