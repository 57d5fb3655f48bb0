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

PlacementDecision ScoringPolicy::Place(const ClusterSnapshot& cluster, const TaskRequest& task,
                                       PlacementContext& ctx) {
  const size_t nodes = cluster.node_count();
  if (nodes == 0) return {};
  if (cluster.uid() != cached_snapshot_uid_ || nodes != cached_node_count_) {
    cached_snapshot_uid_ = cluster.uid();
    cached_node_count_ = nodes;
    shape_ids_.clear();
    cache_.clear();
  }
  // Find (or create) the cache block of this task shape.
  CacheEntry* block = nullptr;
  const ShapeKey key{task.cpu.value(), task.gpu_milli.value(), task.allowed_models, task.num_gpu,
                     task.mig_profile};
  auto it = shape_ids_.find(key);
  if (it != shape_ids_.end()) {
    block = &cache_[static_cast<size_t>(it->second) * nodes];
  } else if (shape_ids_.size() < kMaxCachedShapes) {
    const uint32_t id = static_cast<uint32_t>(shape_ids_.size());
    shape_ids_.emplace(key, id);
    cache_.resize(cache_.size() + nodes);
    block = &cache_[static_cast<size_t>(id) * nodes];
  }

  // Two instantiations, so the loop of non-MIG tasks carries no MIG test per node.
  return task.mig_profile >= 0 ? Scan<true>(cluster, task, ctx, block) : Scan<false>(cluster, task, ctx, block);
}

template <bool kMig>
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
    if (!cluster.Fits(n, task)) continue;
    ++decision.feasible_nodes;
    NodeChoice choice;
    if (block != nullptr) {
      CacheEntry& e = block[i];
      const uint32_t v = cluster.version(n) + 1;
      if (e.version_plus_one != v) {
        choice = ScoreNode(cluster, n, task);
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
    } else {
      choice = ScoreNode(cluster, n, task);
    }
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

}  // namespace tessera::placement
