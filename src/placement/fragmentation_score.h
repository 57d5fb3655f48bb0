// Private: the scoring shared by the fragmentation-gradient policies (fgd, tessera). For one
// node it tries each way the task can be taken there — no GPU for a CPU-only task, the
// lowest-index fully free GPUs for a whole-GPU task, every GPU with enough free milli for a
// sharing task — among the GPUs in `usable` (the node's eligible GPUs, kAllGpus without a mask;
// the others keep their state in gpus_after) asks `cost(cpu_after, gpus_after)` how much worse the node gets (milli-GPU),
// and scores it like the FGD artifact: floor(100 * sigmoid(-cost / 1000)). The best GPU wins,
// lowest index on ties.
//
// MIG requests are scored in MIG geometry instead (ScoreMigByFragmentation, mig.h): the growth of
// the node's MIG fragmentation at 1/16-milli resolution, ties to the fuller GPU. The artifact's
// 100-step sigmoid is kept only where results must stay comparable with its numbers; on MIG
// GPUs one memory slice is 125 milli, which the sigmoid's integer steps would blur.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <span>

#include "tessera/placement/gpu_choice.h"
#include "tessera/placement/mig.h"
#include "tessera/placement/scoring_policy.h"

namespace tessera::placement {

inline int64_t FragmentationScore(double cost_milli) {
  return static_cast<int64_t>(std::floor(100.0 / (1.0 + std::exp(cost_milli / 1000.0))));
}

// CostFn: double(int64_t cpu_after, std::span<const int32_t> gpus_after). On a node of one GPU
// model the cost must depend on gpus_after only as a multiset (FragmentationMemo sorts it, the
// stranding term sums it): equal free values are then tried once.
template <typename CostFn>
ScoringPolicy::NodeChoice ScoreByFragmentation(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                                               GpuSet usable, CostFn&& cost) {
  const int count = cluster.gpu_count(n);
  std::array<int32_t, kMaxGpusPerNode> gpus = cluster.gpu_free_array(n);
  const int64_t cpu_after = cluster.free_cpu(n).value() - task.cpu.value();
  const std::span<const int32_t> after(gpus.data(), static_cast<size_t>(count));
  if (task.IsCpuOnly()) return {FragmentationScore(cost(cpu_after, after)), 0};
  if (task.IsWholeGpu()) {
    const GpuSet set = LowestFullyFreeGpus(cluster, n, task.num_gpu, usable);
    for (int g = 0; g < count; ++g) {
      if (set & GpuBit(g)) gpus[static_cast<size_t>(g)] = 0;
    }
    return {FragmentationScore(cost(cpu_after, after)), set};
  }
  const int32_t d = static_cast<int32_t>(task.gpu_milli.value());
  ScoringPolicy::NodeChoice best{-1, 0};
  // On a one-model node two GPUs with the same free milli leave the same state (as a multiset),
  // so the later one scores the same and cannot win the tie: each free value is tried once.
  // GPUs free {500, 1000, 500, 1000}, d = 250: two costs asked for, not four.
  const bool symmetric = !cluster.mixed(n);
  std::array<int32_t, kMaxGpusPerNode> tried;
  int tried_count = 0;
  for (int g = 0; g < count; ++g) {
    int32_t& u = gpus[static_cast<size_t>(g)];
    if (u < d || (usable & GpuBit(g)) == 0) continue;
    if (symmetric) {
      if (std::find(tried.begin(), tried.begin() + tried_count, u) != tried.begin() + tried_count) continue;
      tried[static_cast<size_t>(tried_count++)] = u;
    }
    u -= d;
    const int64_t s = FragmentationScore(cost(cpu_after, after));
    u += d;
    if (s > best.score) best = {s, GpuBit(g)};
  }
  return best;
}

inline ScoringPolicy::NodeChoice ScoreMigByFragmentation(const MigFragmentation& mig, const ClusterSnapshot& cluster,
                                                         NodeIndex n, const TaskRequest& task, GpuSet usable) {
  const MigFragmentation::Choice c = mig.Best(cluster, n, task, usable);
  if (c.gpu < 0) return {std::numeric_limits<int64_t>::min(), 0, -1};  // the filter rules this out
  return {c.score, GpuBit(c.gpu), c.start};
}

}  // namespace tessera::placement
