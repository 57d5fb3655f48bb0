// GpuPacking (the FGD artifact's 04-GpuPacking): prefer partly used GPUs, then fresh GPUs on a
// used node, then an empty node. For a GPU task, in this order:
//   (a) every GPU of the node is fully free:      score = max(33 - G_free, G_free)
//   (b) take the num_gpu fitting GPUs with the least free milli first; if any of them is fully
//       free:                                      score = max(50 - fully_free_taken, 33)
//   (c) otherwise (only partly used GPUs taken):  score = max(100 - sum(floor(u*100/1000))/10, 50)
// CPU-only tasks score 0 everywhere. Best-fit GPU. With an eligibility mask (policy.h) (a)
// still reads the whole node, (b) and (c) take only eligible GPUs.
//
// Worked example: a 300-milli task. Node A has GPUs free {400, 1000}: (c) takes GPU0 (u=400):
// 100 - 40/10 = 96. Node B has {1000, 1000}: (a) max(33-2, 2) = 31. A wins.
#include "src/placement/policies.h"
#include "tessera/placement/gpu_choice.h"
#include "tessera/placement/scoring_policy.h"

#include <algorithm>
#include <array>
#include <numeric>

namespace tessera::placement {
namespace {

class GpuPackingPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "gpupacking"; }

 protected:
  NodeChoice ScoreNode(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                       GpuSet usable) override {
    if (task.IsCpuOnly()) return {0, 0};
    const GpuSet gpus = ChooseGpus(cluster, n, task, SharingGpuRule::kBest, nullptr, usable);
    const int count = cluster.gpu_count(n);
    const int full = cluster.fully_free_gpus(n);
    if (full == count) return {std::max<int64_t>(33 - full, full), gpus};
    // The GPUs in ascending free order (stable: lower index first on ties).
    std::array<int, kMaxGpusPerNode> order;
    std::iota(order.begin(), order.begin() + count, 0);
    std::stable_sort(order.begin(), order.begin() + count,
                     [&](int a, int b) { return cluster.gpu_free(n, a) < cluster.gpu_free(n, b); });
    const int32_t d = static_cast<int32_t>(task.gpu_milli.value());
    int need = task.num_gpu;
    int full_taken = 0;
    int64_t free_pct_sum = 0;
    for (int i = 0; i < count && need > 0; ++i) {
      const int32_t u = cluster.gpu_free(n, order[i]);
      if (u < d || (usable & GpuBit(order[i])) == 0) continue;
      --need;
      full_taken += u == 1000;
      free_pct_sum += int64_t{u} * 100 / 1000;
    }
    if (full_taken > 0) return {std::max<int64_t>(50 - full_taken, 33), gpus};
    return {std::max<int64_t>(100 - free_pct_sum / 10, 50), gpus};
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeGpuPackingPolicy() {
  return std::make_unique<GpuPackingPolicy>();
}

}  // namespace tessera::placement
