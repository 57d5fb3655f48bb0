// The parts of PlacementPolicy every policy shares: the default ScoreNodes (indifferent between
// the nodes that fit) and the extender's 0..max_score mapping.
#include "tessera/placement/policy.h"

#include <algorithm>
#include <cmath>

namespace tessera::placement {

std::vector<std::optional<double>> PlacementPolicy::ScoreNodes(const ClusterSnapshot& cluster,
                                                               const TaskRequest& task,
                                                               std::span<const NodeIndex> nodes,
                                                               const PlacementContext& ctx) {
  std::vector<std::optional<double>> out(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeIndex n = nodes[i];
    if (n.valid() && n.value() < cluster.node_count() && FitsEligible(cluster, n, task, ctx)) out[i] = 0.0;
  }
  return out;
}

std::vector<int64_t> ExtenderScores(std::span<const std::optional<double>> scores, int64_t max_score) {
  std::vector<int64_t> out(scores.size(), 0);
  bool any = false;
  double lo = 0;
  double hi = 0;
  for (const std::optional<double>& s : scores) {
    if (!s) continue;
    lo = any ? std::min(lo, *s) : *s;
    hi = any ? std::max(hi, *s) : *s;
    any = true;
  }
  if (!any) return out;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (!scores[i]) continue;
    out[i] = hi > lo ? std::llround(static_cast<double>(max_score) * (*scores[i] - lo) / (hi - lo)) : max_score;
  }
  return out;
}

}  // namespace tessera::placement
