#include "tessera/placement/gpu_choice.h"

#include <bit>

namespace tessera::placement {

GpuSet LowestFullyFreeGpus(const ClusterSnapshot& cluster, NodeIndex n, int k, GpuSet usable) {
  GpuSet set = 0;
  int taken = 0;
  for (int g = 0; g < cluster.gpu_count(n) && taken < k; ++g) {
    if (cluster.gpu_free(n, g) == 1000 && (usable & GpuBit(g)) != 0) {
      set |= GpuBit(g);
      ++taken;
    }
  }
  return taken == k ? set : 0;
}

GpuSet ChooseGpus(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                  SharingGpuRule rule, Rng* rng, GpuSet usable) {
  if (task.IsCpuOnly()) return 0;
  if (cluster.mixed(n)) [[unlikely]] {
    // One GPU: any GPU of an allowed model. Several: the first model group (by lowest GPU) that
    // holds them all, so a task's GPUs are of one model.
    if (task.num_gpu == 1) {
      usable &= cluster.ModelGpus(n, task.allowed_models);
    } else {
      GpuSet group_usable = 0;
      for (const ModelGroup& g : cluster.model_groups(n)) {
        if (task.AllowsModel(g.model_bit) && cluster.Fits(n, task, usable & g.gpus)) {
          group_usable = usable & g.gpus;
          break;
        }
      }
      if (group_usable == 0) return 0;
      usable = group_usable;
    }
  }
  if (task.IsWholeGpu()) return LowestFullyFreeGpus(cluster, n, task.num_gpu, usable);
  const int32_t d = static_cast<int32_t>(task.gpu_milli.value());
  const bool mig = task.IsMig();
  int chosen = -1;
  int fitting = 0;
  for (int g = 0; g < cluster.gpu_count(n); ++g) {
    const int32_t u = cluster.gpu_free(n, g);
    if ((usable & GpuBit(g)) == 0) continue;
    // A MIG instance needs a valid start, not just free milli.
    if (mig ? cluster.mig_valid_starts(n, g, task.mig_profile) == 0 : u < d) continue;
    ++fitting;
    switch (rule) {
      case SharingGpuRule::kBest:
        if (chosen < 0 || u < cluster.gpu_free(n, chosen)) chosen = g;
        break;
      case SharingGpuRule::kWorst:
        if (chosen < 0 || u > cluster.gpu_free(n, chosen)) chosen = g;
        break;
      case SharingGpuRule::kFirst:
        if (chosen < 0) chosen = g;
        break;
      case SharingGpuRule::kRandom:
        // Reservoir sampling: uniform among the fitting GPUs in one pass.
        if (rng == nullptr || rng->Uniform(static_cast<uint64_t>(fitting)) == 0) chosen = g;
        break;
    }
  }
  return chosen < 0 ? 0 : GpuBit(chosen);
}

Placement ChoosePlacement(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                          SharingGpuRule rule, Rng* rng, GpuSet usable) {
  Placement p{n, ChooseGpus(cluster, n, task, rule, rng, usable)};
  if (task.IsMig() && p.gpus != 0) {
    const uint32_t starts = cluster.mig_valid_starts(n, std::countr_zero(p.gpus), task.mig_profile);
    p.mig_start = starts == 0 ? -1 : std::countr_zero(starts);
  }
  return p;
}

}  // namespace tessera::placement
