// The classic bin-packing heuristics, for completeness (not in the FGD artifact):
//   firstfit - the first feasible node in rank order (PlacementContext::node_rank), the
//              lowest-index GPU that fits.
//   nextfit  - like firstfit, but the scan starts at the node of the previous decision and
//              wraps around (PlacementContext::next_fit_cursor keeps the position).
//   worstfit - spread / least-loaded: the node with the largest share of its own CPU and GPU
//              left after placement, score = 1e6 * (0.5 cpu_left/cpu_cap + 0.5 gpu_left/gpu_cap)
//              (the GPU term only on GPU nodes), and the GPU with the most free milli.
// With an eligibility (policy.h) each scan skips ineligible nodes and takes eligible GPUs only.
// ScoreNodes (higher is better): firstfit -rank; nextfit -(steps from the previous NextFit
// node in its scan order), so the node Place picks scores highest among those that fit;
// worstfit its score above.
//
// Worked example (rank = index; a 1-GPU task; nodes 0 and 2 feasible, previous NextFit
// decision on node 2): firstfit -> node 0; nextfit -> node 2; worstfit -> whichever of 0 and 2
// is emptier relative to its size.
#include <algorithm>
#include <numeric>
#include <vector>

#include "src/placement/policies.h"
#include "tessera/placement/gpu_choice.h"
#include "tessera/placement/scoring_policy.h"

namespace tessera::placement {
namespace {

class FirstFitPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "firstfit"; }

 protected:
  NodeChoice ScoreNode(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                       GpuSet usable) override {
    return {0, ChooseGpus(cluster, n, task, SharingGpuRule::kFirst, nullptr, usable)};
  }

 public:
  std::vector<std::optional<double>> ScoreNodes(const ClusterSnapshot& cluster, const TaskRequest& task,
                                                std::span<const NodeIndex> nodes,
                                                const PlacementContext& ctx) override {
    // Every node scores 0 in ScoreNode; the decision is the rank order.
    std::vector<std::optional<double>> out = PlacementPolicy::ScoreNodes(cluster, task, nodes, ctx);
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (out[i]) out[i] = -static_cast<double>(NodeRank(ctx, nodes[i]));
    }
    return out;
  }
};

class WorstFitPolicy final : public ScoringPolicy {
 public:
  std::string_view name() const override { return "worstfit"; }

 protected:
  NodeChoice ScoreNode(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                       GpuSet usable) override {
    const NodeSpec& spec = cluster.spec(n);
    double left = 0.0;
    double parts = 0.0;
    if (spec.cpu.value() > 0) {
      left += static_cast<double>(cluster.free_cpu(n).value() - task.cpu.value()) /
              static_cast<double>(spec.cpu.value());
      parts += 1.0;
    }
    if (spec.gpu_count > 0) {
      left += static_cast<double>(cluster.node_gpu_free(n) - task.TotalGpu().value()) /
              (1000.0 * spec.gpu_count);
      parts += 1.0;
    }
    const double share = parts > 0 ? left / parts : 0.0;
    return {static_cast<int64_t>(1e6 * share),
            ChooseGpus(cluster, n, task, SharingGpuRule::kWorst, nullptr, usable)};
  }
};

class NextFitPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "nextfit"; }

  PlacementDecision Place(const ClusterSnapshot& cluster, const TaskRequest& task,
                          PlacementContext& ctx) override {
    const uint32_t nodes = static_cast<uint32_t>(cluster.node_count());
    RebuildOrderIfNeeded(ctx, nodes);
    PlacementDecision d;
    if (nodes == 0) return d;
    // Start at the previous decision's node (or the first in rank order).
    const uint32_t start = StartRank(ctx, nodes);
    const Eligibility* eligible = ctx.eligibility;
    for (uint32_t step = 0; step < nodes; ++step) {
      const NodeIndex n{order_[(start + step) % nodes]};
      if (eligible == nullptr ? !cluster.Fits(n, task)
                              : !eligible->node(n) || !cluster.Fits(n, task, eligible->gpus(n))) {
        continue;
      }
      d.feasible_nodes = 1;  // NextFit stops at the first feasible node; it does not count them
      d.placement = ChoosePlacement(cluster, n, task, SharingGpuRule::kFirst, nullptr, UsableGpus(ctx, n));
      ctx.next_fit_cursor = n;
      break;
    }
    return d;
  }

  std::vector<std::optional<double>> ScoreNodes(const ClusterSnapshot& cluster, const TaskRequest& task,
                                                std::span<const NodeIndex> nodes,
                                                const PlacementContext& ctx) override {
    std::vector<std::optional<double>> out = PlacementPolicy::ScoreNodes(cluster, task, nodes, ctx);
    const uint32_t count = static_cast<uint32_t>(cluster.node_count());
    const uint32_t start = StartRank(ctx, count);
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (out[i]) out[i] = -static_cast<double>((NodeRank(ctx, nodes[i]) + count - start) % count);
    }
    return out;
  }

 private:
  // Rank where the scan starts: the previous decision's node (or the first in rank order).
  static uint32_t StartRank(const PlacementContext& ctx, uint32_t nodes) {
    if (ctx.next_fit_cursor.valid() && ctx.next_fit_cursor.value() < nodes) return NodeRank(ctx, ctx.next_fit_cursor);
    return 0;
  }

  // order_[rank] = node; ranks must be a permutation of 0..nodes-1.
  void RebuildOrderIfNeeded(const PlacementContext& ctx, uint32_t nodes) {
    // Compare rank values, not the buffer's address: a caller may rewrite ranks in place.
    if (order_.size() == nodes && std::equal(ctx.node_rank.begin(), ctx.node_rank.end(),
                                             ranks_seen_.begin(), ranks_seen_.end())) {
      return;
    }
    ranks_seen_.assign(ctx.node_rank.begin(), ctx.node_rank.end());
    order_.assign(nodes, 0);
    std::iota(order_.begin(), order_.end(), 0u);
    if (!ctx.node_rank.empty()) {
      std::sort(order_.begin(), order_.end(),
                [&](uint32_t a, uint32_t b) { return ctx.node_rank[a] < ctx.node_rank[b]; });
    }
  }

  std::vector<uint32_t> order_;
  std::vector<uint32_t> ranks_seen_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeFirstFitPolicy() { return std::make_unique<FirstFitPolicy>(); }
std::unique_ptr<PlacementPolicy> MakeNextFitPolicy() { return std::make_unique<NextFitPolicy>(); }
std::unique_ptr<PlacementPolicy> MakeWorstFitPolicy() { return std::make_unique<WorstFitPolicy>(); }

}  // namespace tessera::placement
