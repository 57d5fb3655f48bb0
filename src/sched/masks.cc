// Where a job may go: affinity conflicts and cordoned nodes as placement eligibility masks,
// and the clearable-large-node mask (SchedulerOptions::keep_large_nodes_clearable).

#include "src/sched/scheduler_impl.h"

namespace tessera::sched {

bool Scheduler::Impl::ConflictOnGpu(const Job& a, const Job& b) const {
  for (auto [x, y] : opt.affinity.classes_apart)
    if ((a.workload_class == x && b.workload_class == y) ||
        (a.workload_class == y && b.workload_class == x))
      return true;
  for (auto [x, y] : opt.affinity.tenants_apart)
    if ((a.tenant == x && b.tenant == y) || (a.tenant == y && b.tenant == x)) return true;
  return false;
}

bool Scheduler::Impl::ConflictOnNode(const Job& a, const Job& b) const {
  return opt.affinity.labels_apart && a.label >= 0 && b.label >= 0 && a.label != b.label;
}

bool Scheduler::Impl::HideConflicts(const Job& j, placement::Eligibility& mask) {
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

void Scheduler::Impl::HideClearableLargeNodes(placement::Eligibility& mask) {
  for (size_t n = 0; n < snap.node_count(); ++n) {
    const NodeIndex ni{static_cast<uint32_t>(n)};
    if (immovable_pods[n] > 0 || snap.gpu_count(ni) != max_node_gpus) continue;
    mask.ExcludeNode(ni);
  }
}

placement::PlacementDecision Scheduler::Impl::PlaceWithin(const TaskRequest& pod, const placement::Eligibility* mask) {
  ctx.eligibility = mask;
  placement::PlacementDecision d = policy->Place(snap, pod, ctx);
  ctx.eligibility = nullptr;
  return d;
}

bool Scheduler::Impl::AnyNodeFits(const TaskRequest& p) const {
  for (size_t n = 0; n < snap.node_count(); ++n)
    if (snap.Fits(NodeIndex{static_cast<uint32_t>(n)}, p)) return true;
  return false;
}

}  // namespace tessera::sched
