// Random (the FGD artifact's 01-Random): a node drawn uniformly from the feasible nodes, and
// for a sharing task a GPU drawn uniformly from those with enough free milli.
//
// With an eligibility (policy.h) the draw is among the eligible feasible nodes and their
// eligible GPUs. ScoreNodes: 0 on every node that fits (the PlacementPolicy default).
//
// Worked example: feasible nodes {2, 5, 9}; rng.Uniform(3) = 1 -> node 5.
#include "src/placement/policies.h"
#include "tessera/placement/gpu_choice.h"

namespace tessera::placement {
namespace {

class RandomPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "random"; }

  PlacementDecision Place(const ClusterSnapshot& cluster, const TaskRequest& task,
                          PlacementContext& ctx) override {
    Rng* rng = ctx.rng != nullptr ? ctx.rng : &fallback_rng_;
    PlacementDecision d;
    const uint32_t nodes = static_cast<uint32_t>(cluster.node_count());
    for (uint32_t i = 0; i < nodes; ++i) d.feasible_nodes += FitsEligible(cluster, NodeIndex{i}, task, ctx);
    if (d.feasible_nodes == 0) return d;
    uint64_t pick = rng->Uniform(d.feasible_nodes);
    for (uint32_t i = 0; i < nodes; ++i) {
      if (!FitsEligible(cluster, NodeIndex{i}, task, ctx)) continue;
      if (pick-- == 0) {
        const NodeIndex n{i};
        d.placement = ChoosePlacement(cluster, n, task, SharingGpuRule::kRandom, rng, UsableGpus(ctx, n));
        break;
      }
    }
    return d;
  }

 private:
  Rng fallback_rng_{0};  // used only when the caller gives no Rng
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeRandomPolicy() { return std::make_unique<RandomPolicy>(); }

}  // namespace tessera::placement
