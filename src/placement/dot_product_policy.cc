// DotProduct (the FGD artifact's 02-DotProd, Tetris-style with the artifact's sign): the node
// whose free (CPU, GPU) vector has the smallest dot product with the request, both normalised by
// the biggest node (128 vCPU, 8 GPUs) and GPU capacity merged per node:
//   dot   = (c_n/128000)(r/128000) + (U_n/8000)(D/8000)
//   score = trunc(100 * (1 - dot/2)),  best-fit GPU inside the node (truncated toward zero like
//   the artifact's int64 conversion).
//
// Worked example: task r = 8000 CPU, D = 1000. Node A: 64000 CPU and 8000 milli free ->
// dot = 0.5*0.0625 + 1*0.125 = 0.15625 -> score 92. Node B: 16000 CPU and 1000 free ->
// dot = 0.125*0.0625 + 0.125*0.125 = 0.0234 -> score 98: B (the fuller node) wins.
#include "src/placement/policies.h"
#include "tessera/placement/gpu_choice.h"
#include "tessera/placement/scoring_policy.h"

namespace tessera::placement {
namespace {

class DotProductPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "dotproduct"; }

 protected:
  NodeChoice ScoreNode(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                       GpuSet usable) override {
    const double node_cpu = static_cast<double>(cluster.free_cpu(n).value()) / kMaxCpuMilli;
    const double node_gpu = static_cast<double>(cluster.node_gpu_free(n)) / kMaxGpuMilli;
    const double task_cpu = static_cast<double>(task.cpu.value()) / kMaxCpuMilli;
    const double task_gpu = static_cast<double>(task.TotalGpu().value()) / kMaxGpuMilli;
    const double dot = node_cpu * task_cpu + node_gpu * task_gpu;
    const double score = 1.0 - dot / 2.0;
    return {static_cast<int64_t>(100.0 * score),
            ChooseGpus(cluster, n, task, SharingGpuRule::kBest, nullptr, usable)};
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeDotProductPolicy() {
  return std::make_unique<DotProductPolicy>();
}

}  // namespace tessera::placement
