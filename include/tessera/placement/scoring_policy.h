// ScoringPolicy: the filter -> score -> pick framework shared by the Kubernetes-style policies
// (and the one to build a new policy on). A subclass only says how good one feasible node is
// and which GPUs the task would take there; the framework filters nodes with
// ClusterSnapshot::Fits, keeps the highest score, breaks ties by the lowest node rank
// (PlacementContext::node_rank), and memoises scores.
//
// Memoisation: ScoreNode must depend only on the node's state and on the task's cpu, num_gpu,
// gpu_milli, allowed_models and mig_profile (not memory). The framework then caches each (task
// shape, node) score and reuses it until the node's version changes, so a decision costs one
// cache read per node plus a fresh score for the few nodes that changed since the last task of
// that shape.
//
// Eligibility (policy.h): the scan skips ineligible nodes and filters with the node's eligible
// GPUs; ScoreNode gets them as `usable` and must take only GPUs from it. A memoised score is
// served only to a node whose every GPU is eligible (then `usable` is kAllGpus and the score is
// the unmasked one); a node with some GPUs masked out is scored afresh and its cache entry is
// neither read nor written, so no score computed for one GPU mask is ever served for another.
//
// Mixed-model nodes (cluster_snapshot.h): the framework calls ScoreNode once per model group the
// task allows and fits, with `usable` narrowed to that group's GPUs, and keeps the best (the
// lowest group on ties). So a subclass always scores GPUs of one model (ModelOfGpus(n, usable)
// names it) and never has to know about mixed nodes. GPUs 0-1 H100 free, 2-5 A100 free, a 2-GPU
// task of any model: ScoreNode(usable = {0,1}) and ScoreNode(usable = {2..5}), best of the two.
//
// ScoreNodes returns ScoreNode's score for each listed node that is eligible and fits (the
// same memo), so Place's node is always one with the best ScoreNodes score.
//
// Worked example (3 nodes, rank = index, scores from ScoreNode):
//   node 0: infeasible   node 1: score 40   node 2: score 40
//   -> node 1 wins (tie at 40, lower rank); its GPUs are the ones ScoreNode returned for it.
//
// Thread-safety: like every policy, one object per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "tessera/placement/policy.h"

namespace tessera::placement {

class ScoringPolicy : public PlacementPolicy {
 public:
  PlacementDecision Place(const ClusterSnapshot& cluster, const TaskRequest& task,
                          PlacementContext& ctx) final;
  std::vector<std::optional<double>> ScoreNodes(const ClusterSnapshot& cluster, const TaskRequest& task,
                                                std::span<const NodeIndex> nodes,
                                                const PlacementContext& ctx) override;

  // What ScoreNode returns for one feasible node.
  struct NodeChoice {
    int64_t score = 0;  // higher is better
    GpuSet gpus = 0;    // the GPUs the task takes on this node (num_gpu bits)
    // MIG requests: the instance's start on that GPU; -1 lets the framework take the lowest
    // valid start (first fit), so a policy that knows nothing of MIG still places MIG requests.
    int32_t mig_start = -1;
  };


 protected:
  // Scores node n, which passed the filter for `task` with GPUs `usable` (kAllGpus: every GPU
  // of the node; else the node's eligible GPUs). Pure function of node state, task shape and
  // `usable` (see above); the GPUs returned must lie in `usable`.
  virtual NodeChoice ScoreNode(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                               GpuSet usable) = 0;

 private:
  struct ShapeKey {
    int64_t cpu;
    int64_t gpu_milli;
    uint64_t models;
    int32_t num_gpu;
    int32_t mig_profile;
    bool operator==(const ShapeKey&) const = default;
  };
  struct ShapeKeyHash {
    size_t operator()(const ShapeKey& k) const;
  };
  struct CacheEntry {
    uint32_t version_plus_one = 0;  // 0 = empty
    GpuSet gpus = 0;  // bits 0..15 the GPUs; MIG requests: bits 24..31 mig_start + 1
    int64_t score = 0;
  };
  static_assert(kMaxGpusPerNode <= 24, "CacheEntry::gpus packs mig_start above the GPU bits");
  static constexpr uint32_t kMaxCachedShapes = 4096;

  // The cache block of `task`'s shape on `cluster` (nullptr once kMaxCachedShapes are taken).
  CacheEntry* BlockFor(const ClusterSnapshot& cluster, const TaskRequest& task);
  // Node n's choice for `task` (which it fits with `usable`), from the memo where allowed.
  template <bool kMig>
  NodeChoice Choose(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task, GpuSet usable,
                    CacheEntry* block);
  // ScoreNode, or on a mixed node the best of ScoreNode over the model groups (see above).
  NodeChoice ScoreGroups(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task, GpuSet usable);
  // The filter/score/pick loop; kMig = the task is a MIG request (CacheEntry packs mig_start);
  // kMasked = ctx.eligibility is set.
  template <bool kMig, bool kMasked>
  PlacementDecision Scan(const ClusterSnapshot& cluster, const TaskRequest& task, PlacementContext& ctx,
                         CacheEntry* block);

  uint64_t cached_snapshot_uid_ = 0;
  size_t cached_node_count_ = 0;
  std::unordered_map<ShapeKey, uint32_t, ShapeKeyHash> shape_ids_;
  std::vector<CacheEntry> cache_;  // [shape_id * node_count + node]
};

}  // namespace tessera::placement
