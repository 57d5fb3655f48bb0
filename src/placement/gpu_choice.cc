#include "tessera/placement/gpu_choice.h"

namespace tessera::placement {

GpuSet LowestFullyFreeGpus(const ClusterSnapshot& cluster, NodeIndex n, int k) {
  GpuSet set = 0;
  int taken = 0;
  for (int g = 0; g < cluster.gpu_count(n) && taken < k; ++g) {
    if (cluster.gpu_free(n, g) == 1000) {
      set |= GpuBit(g);
      ++taken;
    }
  }
  return taken == k ? set : 0;
}

GpuSet ChooseGpus(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                  SharingGpuRule rule, Rng* rng) {
  if (task.IsCpuOnly()) return 0;
  if (task.IsWholeGpu()) return LowestFullyFreeGpus(cluster, n, task.num_gpu);
  const int32_t d = static_cast<int32_t>(task.gpu_milli.value());
  int chosen = -1;
  int fitting = 0;
  for (int g = 0; g < cluster.gpu_count(n); ++g) {
    const int32_t u = cluster.gpu_free(n, g);
    if (u < d) continue;
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

}  // namespace tessera::placement
