// FGD, Fragmentation Gradient Descent (Weng et al., ATC'23; the artifact's 06-FGD): place each
// task where the expected GPU fragmentation F_n(M) (fragmentation.h) grows least.
//   For each feasible node n and each way to take the task there (every GPU with enough free
//   milli for a sharing task; the lowest-index fully free GPUs for a whole-GPU task; no GPU for
//   a CPU-only task) form the node after placement n' and
//     score = floor(100 * sigmoid((F_n(M) - F_n'(M)) / 1000))
//   Inside a node the best-scoring GPU wins (lowest index on ties); across nodes the highest
//   score wins, ties to the lowest node rank. The integer truncation is the artifact's and is
//   kept so results are comparable with its released numbers.
//
// Worked example: M = {700-milli task, p = 1}, plenty of CPU everywhere. A 500-milli task
// arrives. Node A has GPUs free {1000, 500} (F = 500: GPU1 is too small for 700), node B has
// {1000, 1000} (F = 0).
//   A, GPU0 -> {500, 500}:  F 500 -> 1000, score floor(100*sigmoid(-0.5)) = 37
//   A, GPU1 -> {1000, 0}:   F 500 -> 0,    score floor(100*sigmoid(+0.5)) = 62
//   B, GPU0 -> {500, 1000}: F 0 -> 500,    score 37
// FGD fills A's half-used GPU exactly (A, GPU1).
// MIG requests are placed by MIG-geometry fragmentation instead (mig.h, same target workload).
#include "src/placement/fragmentation_score.h"
#include "src/placement/policies.h"

namespace tessera::placement {
namespace {

class FgdPolicy final : public ScoringPolicy {
 public:
  explicit FgdPolicy(const TargetWorkload* workload) : memo_(workload), mig_(workload) {}
  std::string_view name() const override { return "fgd"; }

 protected:
  NodeChoice ScoreNode(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                       GpuSet usable) override {
    if (task.IsMig()) [[unlikely]] return ScoreMigByFragmentation(mig_, cluster, n, task, usable);
    const double before = memo_.OfNode(cluster, n);
    return ScoreByFragmentation(cluster, n, task, usable, [&](int64_t cpu_after, std::span<const int32_t> gpus_after) {
      return memo_.OfNodeState(cluster, n, cpu_after, gpus_after) - before;
    });
  }

 private:
  FragmentationMemo memo_;
  MigFragmentation mig_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeFgdPolicy(const TargetWorkload* workload) {
  return std::make_unique<FgdPolicy>(workload);
}

}  // namespace tessera::placement
