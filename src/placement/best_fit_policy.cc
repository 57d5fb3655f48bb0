// BestFit (the FGD artifact's 05-BestFit): the node with the least weighted CPU + GPU left
// after placement, normalised by the biggest node (128 vCPU, 8 GPUs):
//   score = trunc(100 * (1 - [0.5 (c_n - r)/128000 + 0.5 (U_n - D)/8000]))
// (truncated toward zero like the artifact's int64 conversion; only differs from floor on nodes
// bigger than 128 vCPU / 8 GPUs, where the score can go negative)
// Best-fit GPU inside the node. (The artifact then min-max normalises scores across feasible
// nodes with integer arithmetic; that maps exactly the top raw score to 100 and keeps the set
// of winners unchanged, so it is not needed for the decision.)
//
// Worked example: task r = 4000, D = 500. Node A: 8000 CPU, 1000 GPU free ->
// 1 - (0.5*4000/128000 + 0.5*500/8000) = 0.953 -> 95. Node B: 64000 CPU, 8000 free ->
// 1 - (0.234 + 0.469) = 0.297 -> 29. A wins.
#include "src/placement/policies.h"
#include "tessera/placement/gpu_choice.h"
#include "tessera/placement/scoring_policy.h"

namespace tessera::placement {
namespace {

class BestFitPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "bestfit"; }

 protected:
  NodeChoice ScoreNode(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                       GpuSet usable) override {
    const double cpu_left =
        static_cast<double>(cluster.free_cpu(n).value() - task.cpu.value()) / kMaxCpuMilli;
    const double gpu_left =
        static_cast<double>(cluster.node_gpu_free(n) - task.TotalGpu().value()) / kMaxGpuMilli;
    const double score = 1.0 - (0.5 * cpu_left + 0.5 * gpu_left);
    return {static_cast<int64_t>(100.0 * score),
            ChooseGpus(cluster, n, task, SharingGpuRule::kBest, nullptr, usable)};
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeBestFitPolicy() { return std::make_unique<BestFitPolicy>(); }

}  // namespace tessera::placement
