#include "tessera/placement/scoring_policy.h"

#include <bit>

#include "tessera/placement/mig.h"

namespace tessera::placement {

size_t ScoringPolicy::ShapeKeyHash::operator()(const ShapeKey& k) const {
  uint64_t h = static_cast<uint64_t>(k.cpu) * 0x9e3779b97f4a7c15ULL;
  h ^= static_cast<uint64_t>(k.gpu_milli) + 0x7f4a7c159e3779b9ULL + (h << 6) + (h >> 2);
  h ^= k.models + 0x94d049bb133111ebULL + (h << 6) + (h >> 2);
  h ^= static_cast<uint64_t>(k.num_gpu) + (h << 6) + (h >> 2);
  h ^= static_cast<uint64_t>(static_cast<int64_t>(k.mig_profile)) * 0xff51afd7ed558ccdULL;
  return static_cast<size_t>(h);
}

ScoringPolicy::CacheEntry* ScoringPolicy::BlockFor(const ClusterSnapshot& cluster, const TaskRequest& task) {
  const size_t nodes = cluster.node_count();
  if (cluster.uid() != cached_snapshot_uid_ || nodes != cached_node_count_) {
    cached_snapshot_uid_ = cluster.uid();
    cached_node_count_ = nodes;
    shape_ids_.clear();
    cache_.clear();
  }
  const ShapeKey key{task.cpu.value(), task.gpu_milli.value(), task.allowed_models, task.num_gpu,
                     task.mig_profile};
  auto it = shape_ids_.find(key);
  if (it != shape_ids_.end()) return &cache_[static_cast<size_t>(it->second) * nodes];
  if (shape_ids_.size() >= kMaxCachedShapes) return nullptr;
  const uint32_t id = static_cast<uint32_t>(shape_ids_.size());
  shape_ids_.emplace(key, id);
  cache_.resize(cache_.size() + nodes);
  return &cache_[static_cast<size_t>(id) * nodes];
}

PlacementDecision ScoringPolicy::Place(const ClusterSnapshot& cluster, const TaskRequest& task,
                                       PlacementContext& ctx) {
  if (cluster.node_count() == 0) return {};
  CacheEntry* block = BlockFor(cluster, task);
  // Separate instantiations, so the loop of non-MIG tasks carries no MIG test per node and the
  // loop without an eligibility no mask test.
  if (ctx.eligibility != nullptr) {
    return task.mig_profile >= 0 ? Scan<true, true>(cluster, task, ctx, block)
                                 : Scan<false, true>(cluster, task, ctx, block);
  }
  return task.mig_profile >= 0 ? Scan<true, false>(cluster, task, ctx, block)
                               : Scan<false, false>(cluster, task, ctx, block);
}

ScoringPolicy::NodeChoice ScoringPolicy::ScoreGroups(const ClusterSnapshot& cluster, NodeIndex n,
                                                     const TaskRequest& task, GpuSet usable) {
  if (!cluster.mixed(n) || task.num_gpu == 0) [[likely]] return ScoreNode(cluster, n, task, usable);
  NodeChoice best;
  bool have = false;
  for (const ModelGroup& g : cluster.model_groups(n)) {
    const GpuSet group = usable & g.gpus;
    if (!task.AllowsModel(g.model_bit) || !cluster.Fits(n, task, group)) continue;
    const NodeChoice c = ScoreNode(cluster, n, task, group);
    if (!have || c.score > best.score) best = c;
    have = true;
  }
  return best;
}

template <bool kMig>
[[gnu::always_inline]] inline ScoringPolicy::NodeChoice ScoringPolicy::Choose(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                                                GpuSet usable, CacheEntry* block) {
  // The memo holds scores computed with every GPU usable; a node with GPUs masked out is scored
  // afresh and its entry left alone (CPU-only tasks take no GPU, so a mask cannot matter).
  if (task.num_gpu > 0 && usable != kAllGpus) {
    const GpuSet all = GpusOfCount(cluster.gpu_count(n));
    if ((usable & all) != all) return ScoreGroups(cluster, n, task, usable & all);
  }
  if (block == nullptr) return ScoreGroups(cluster, n, task, kAllGpus);
  NodeChoice choice;
  CacheEntry& e = block[n.value()];
  const uint32_t v = cluster.version(n) + 1;
  if (e.version_plus_one != v) {
    choice = ScoreGroups(cluster, n, task, kAllGpus);
    e.version_plus_one = v;
    e.score = choice.score;
    e.gpus = choice.gpus;
    if constexpr (kMig) e.gpus |= static_cast<uint32_t>(choice.mig_start + 1) << 24;
  } else {
    choice.score = e.score;
    choice.gpus = e.gpus;
    if constexpr (kMig) {
      choice.gpus = e.gpus & 0xFFFFFFu;
      choice.mig_start = static_cast<int32_t>(e.gpus >> 24) - 1;
    }
  }
  return choice;
}

template <bool kMig, bool kMasked>
PlacementDecision ScoringPolicy::Scan(const ClusterSnapshot& cluster, const TaskRequest& task, PlacementContext& ctx,
                                      CacheEntry* block) {
  const size_t nodes = cluster.node_count();
  PlacementDecision decision;
  bool have_best = false;
  int64_t best_score = 0;
  uint32_t best_rank = 0;
  Placement best;
  for (uint32_t i = 0; i < nodes; ++i) {
    const NodeIndex n{i};
    GpuSet usable = kAllGpus;
    if constexpr (kMasked) {
      if (!ctx.eligibility->node(n)) continue;
      usable = ctx.eligibility->gpus(n);
      if (!cluster.Fits(n, task, usable)) continue;
    } else {
      if (!cluster.Fits(n, task)) continue;
    }
    ++decision.feasible_nodes;
    const NodeChoice choice = Choose<kMig>(cluster, n, task, usable, block);
    const uint32_t rank = NodeRank(ctx, n);
    if (!have_best || choice.score > best_score || (choice.score == best_score && rank < best_rank)) {
      have_best = true;
      best_score = choice.score;
      best_rank = rank;
      if constexpr (kMig) {
        best = Placement{n, choice.gpus, choice.mig_start};
      } else {
        best = Placement{n, choice.gpus};
      }
    }
  }
  if constexpr (kMig) {
    if (have_best && best.mig_start < 0 && best.gpus != 0) {
      best.mig_start = LowestMigStart(cluster, best.node, std::countr_zero(best.gpus), task.mig_profile);
    }
  }
  if (have_best) decision.placement = best;
  return decision;
}

std::vector<std::optional<double>> ScoringPolicy::ScoreNodes(const ClusterSnapshot& cluster, const TaskRequest& task,
                                                             std::span<const NodeIndex> nodes,
                                                             const PlacementContext& ctx) {
  std::vector<std::optional<double>> out(nodes.size());
  if (cluster.node_count() == 0) return out;
  CacheEntry* block = BlockFor(cluster, task);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeIndex n = nodes[i];
    if (!n.valid() || n.value() >= cluster.node_count() || !FitsEligible(cluster, n, task, ctx)) continue;
    const GpuSet usable = UsableGpus(ctx, n);
    const NodeChoice c = task.IsMig() ? Choose<true>(cluster, n, task, usable, block)
                                      : Choose<false>(cluster, n, task, usable, block);
    out[i] = static_cast<double>(c.score);
  }
  return out;
}

}  // namespace tessera::placement
