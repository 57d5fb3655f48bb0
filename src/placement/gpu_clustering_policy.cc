// GpuClustering (the FGD artifact's 03-GpuClustering): keep like with like. Each GPU task has a
// tag: "share" (one GPU, a fraction) or "k-gpu" (k whole GPUs). A node's tags are those of the
// GPU tasks on it.
//   base  = 75 if the node holds only this task's tag, 50 if this tag and others,
//           25 if no GPU task, 0 if only other tags
//   score = base + 25 * (8000 - U_n) / 8000   (integer division truncating toward zero, as the
//                                              artifact's Go code; U_n = free GPU milli)
// CPU-only tasks score 0 everywhere (the random node rank decides). Best-fit GPU.
//
// Worked example: a 500-milli task. Node A holds only sharing tasks and has 6000 milli free:
// 75 + 25*2000/8000 = 81. Node B is empty with 8000 free: 25 + 0 = 25. A wins.
#include "src/placement/policies.h"
#include "tessera/placement/gpu_choice.h"
#include "tessera/placement/scoring_policy.h"

namespace tessera::placement {
namespace {

class GpuClusteringPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "gpuclustering"; }

 protected:
  NodeChoice ScoreNode(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                       GpuSet usable) override {
    if (task.IsCpuOnly()) return {0, 0};
    const int tag = TaskTag(task);
    bool has_this = false;
    bool has_other = false;
    for (int t = 0; t < kTagCount; ++t) {
      if (cluster.tag_count(n, t) == 0) continue;
      (t == tag ? has_this : has_other) = true;
    }
    int64_t base;
    if (has_this && !has_other) {
      base = 75;
    } else if (has_this) {
      base = 50;
    } else if (!has_other) {
      base = 25;
    } else {
      base = 0;
    }
    const int64_t used = static_cast<int64_t>(kMaxGpuMilli) - cluster.node_gpu_free(n);
    return {base + 25 * used / static_cast<int64_t>(kMaxGpuMilli),
            ChooseGpus(cluster, n, task, SharingGpuRule::kBest, nullptr, usable)};
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeGpuClusteringPolicy() {
  return std::make_unique<GpuClusteringPolicy>();
}

}  // namespace tessera::placement
