// PlacementPolicy: the one interface every placement policy implements. Given the cluster and
// one task, a policy picks a node and the GPUs on it, or says the task fits nowhere.
//
// Callers (the simulator, the scheduler, the Kubernetes extender) own the ClusterSnapshot and
// commit the decision themselves with ClusterSnapshot::Apply. A policy never changes the
// snapshot. It may memoise pure functions of node state (keyed by ClusterSnapshot::uid() and
// version()), which is why Place is not const; anything that must persist between decisions
// lives in the caller's PlacementContext.
//
//   auto policy = MakePolicy("fgd", {.target_workload = &workload});
//   PlacementContext ctx{.rng = &rng, .node_rank = rank};
//   PlacementDecision d = (*policy)->Place(snapshot, task, ctx);
//   if (d.placement) snapshot.Apply(task, *d.placement);   // else: the task fits nowhere
//
// Telling a policy where it may go: PlacementContext::eligibility. An Eligibility says which
// nodes a decision may use and, per node, which of its GPUs (a GpuSet). Every policy honours it
// in its scan, its GPU choice inside the node and its MIG slot choice: an ineligible node is
// never chosen and an ineligible GPU is never part of a placement. It hides nothing: the
// ineligible GPUs keep their real free capacity, so scores that read node state (free CPU and
// GPU, fragmentation after placement) see the node as it is. "Fits" with a GPU mask
// (ClusterSnapshot::Fits(n, task, usable)): a whole-GPU task of k GPUs needs k fully free
// eligible GPUs, a fractional task an eligible GPU with gpu_milli free, a MIG request an
// eligible GPU with a valid start; CPU-only tasks need only an eligible node. No eligibility
// (nullptr, the default) = everything eligible, and decides exactly as before.
//
//   Node 0: GPUs free {1000, 400}; node 1: GPUs free {1000, 1000}; a 300-milli task, bestfit.
//   Eligibility e(2);            // 2 nodes, all eligible
//   e.ExcludeGpus(NodeIndex{0}, GpuBit(1));     // node 0 may use GPU 0 only
//   ctx.eligibility = &e;
//   Place -> node 0, GPU 0 (the 400-milli GPU 1 would be the best fit, but is not eligible)
//   e.ExcludeNode(NodeIndex{0});                // now only node 1 -> node 1, GPU 0
//   e.ExcludeNode(NodeIndex{1});                // nothing eligible -> fits nowhere
// Cost: without an eligibility nothing changes (no allocation, the same memoised scores). With
// one, each node costs one more read; nodes whose GPUs are all eligible use the memoised
// scores, and a node with some GPUs masked out is scored afresh for that decision (a memoised
// score was computed for all its GPUs and may name one that is now ineligible).
//
// Scoring given nodes (a Kubernetes extender's "prioritize" step): ScoreNodes returns, for each
// node of a list, the policy's score there (higher is better, in the policy's own scale) or
// nullopt where the task does not fit (or the node is ineligible). The node Place picks has the
// best score of all nodes; among equal scores Place takes the lowest node rank. What the score
// is per policy:
//   ScoringPolicy-based (bestfit, dotproduct, fgd, gpuclustering, gpupacking, tessera, worstfit):
//     the score ScoreNode computes (e.g. fgd's floor(100 sigmoid(-dF/1000)), 0..100; MIG
//     requests under fgd/tessera: MigFragmentation::Score, a large negative number).
//   firstfit: -rank (the first node in rank order scores highest).
//   nextfit:  -(steps from the previous NextFit node in its wrap-around scan order).
//   random:   0 on every node where the task fits (random is indifferent).
// An extender maps them to Kubernetes' "higher is better" integers with ExtenderScores:
// min-max over the fitting nodes to 0..max_score (max_score = 10, MaxExtenderPriority of the
// extender API, which kube-scheduler multiplies by 10 into its 0..100 node-score range).
//   scores {40, nullopt, 25, 30} -> ExtenderScores(scores, 10) = {10, 0, 0, 3}
// The integer rounding can tie nodes the policy would tell apart (as the FGD artifact's own
// normalisation does); Place is the exact decision.
//
// Thread-safety: one policy object per thread (policies memoise). An Eligibility is a plain
// value; it must outlive the decisions that read it through a context.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/ids.h"
#include "tessera/core/rng.h"
#include "tessera/core/status.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/task.h"

namespace tessera::placement {

class TargetWorkload;

// Which nodes, and which GPUs of each node, a decision may use (see above). Built for a cluster
// of a given node count; nodes at or beyond size() are ineligible. Reset reuses the storage, so
// a caller that rebuilds one per decision allocates only when the cluster grows.
class Eligibility {
 public:
  Eligibility() = default;
  // `nodes` nodes, every node and GPU eligible.
  explicit Eligibility(size_t nodes) { Reset(nodes); }

  // Every node and GPU of `nodes` nodes eligible again.
  void Reset(size_t nodes) {
    gpus_.assign(nodes, kAllGpus);
    node_.assign(nodes, 1);
  }
  void ExcludeNode(NodeIndex n) { node_[n.value()] = 0; }
  void IncludeNode(NodeIndex n) { node_[n.value()] = 1; }
  // GPUs `gpus` of node n may not be used (the node itself stays eligible, e.g. for CPU-only
  // tasks).
  void ExcludeGpus(NodeIndex n, GpuSet gpus) { gpus_[n.value()] &= ~gpus; }
  // Only GPUs `gpus` of node n may be used.
  void SetGpus(NodeIndex n, GpuSet gpus) { gpus_[n.value()] = gpus; }

  size_t size() const { return node_.size(); }
  bool node(NodeIndex n) const { return n.value() < node_.size() && node_[n.value()] != 0; }
  // The eligible GPUs of node n (bits beyond its GPU count mean nothing).
  GpuSet gpus(NodeIndex n) const { return n.value() < gpus_.size() ? gpus_[n.value()] : 0; }

 private:
  std::vector<GpuSet> gpus_;
  std::vector<uint8_t> node_;
};

// Per-caller state shared across a sequence of decisions.
struct PlacementContext {
  // Randomness for randomised policies (random, and random GPU choice). Required by those.
  Rng* rng = nullptr;
  // Tie-break order: among equally good nodes the one with the lowest rank wins. Indexed by
  // node; empty means rank = node index. The FGD artifact draws a random permutation per seed.
  std::span<const uint32_t> node_rank;
  // NextFit's position: the node of the previous NextFit decision.
  NodeIndex next_fit_cursor;
  // Where the decision may go (see above); nullptr = every node and GPU. Not owned.
  const Eligibility* eligibility = nullptr;
};

struct PlacementDecision {
  std::optional<Placement> placement;  // empty: no node can take the task now
  uint32_t feasible_nodes = 0;         // eligible nodes that passed the filter
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string_view name() const = 0;
  // Chooses a node and GPUs for `task`, or none if no node can take it now. Never changes
  // `cluster`; the caller commits with ClusterSnapshot::Apply.
  virtual PlacementDecision Place(const ClusterSnapshot& cluster, const TaskRequest& task,
                                  PlacementContext& ctx) = 0;

  // Each of `nodes`' score for `task` (higher is better, the policy's own scale; see above),
  // nullopt where the task does not fit, the node is ineligible under ctx.eligibility or
  // outside the cluster. Decides nothing: the context (NextFit's cursor, the Rng) is not
  // advanced. The default scores 0 wherever the task fits (a policy indifferent between nodes).
  virtual std::vector<std::optional<double>> ScoreNodes(const ClusterSnapshot& cluster, const TaskRequest& task,
                                                        std::span<const NodeIndex> nodes,
                                                        const PlacementContext& ctx);
};

// Scores of ScoreNodes as a Kubernetes extender returns them: the fitting nodes min-max
// normalised to integers 0..max_score (the best -> max_score, the worst -> 0, rounded to
// nearest; all equal -> max_score), nodes without a score -> 0. See the example above.
std::vector<int64_t> ExtenderScores(std::span<const std::optional<double>> scores, int64_t max_score = 10);

// Weights of the `tessera` policy's two extra terms (src/placement/tessera_policy.cc).
struct TesseraOptions {
  double stranding_weight = 1.0;  // GPU milli left without CPU, per milli
  double scarcity_weight = 1.0;   // use of GPUs that model-restricted demand needs
};

struct PolicyOptions {
  // The expected task mix; required by "fgd" and "tessera" (their fragmentation measure is an
  // expectation over it), ignored by the others. Must outlive the policy.
  const TargetWorkload* target_workload = nullptr;
  TesseraOptions tessera;
};

// The policy every placement path uses unless told otherwise: "tessera".
const std::string& DefaultPolicyName();

// Names accepted by MakePolicy, in the order reports list them (the default policy first).
const std::vector<std::string>& PolicyNames();
// The six policies of the FGD artifact (ATC'23), in the artifact's order.
const std::vector<std::string>& ArtifactPolicyNames();

// INVALID_ARGUMENT naming the known policies for an unknown name, or when a required option is
// missing.
StatusOr<std::unique_ptr<PlacementPolicy>> MakePolicy(std::string_view name,
                                                      const PolicyOptions& options);

// Rank of node n under ctx (lower wins ties).
inline uint32_t NodeRank(const PlacementContext& ctx, NodeIndex n) {
  return ctx.node_rank.empty() ? n.value() : ctx.node_rank[n.value()];
}

// The GPUs of node n a decision under ctx may use (kAllGpus without an eligibility).
inline GpuSet UsableGpus(const PlacementContext& ctx, NodeIndex n) {
  return ctx.eligibility == nullptr ? kAllGpus : ctx.eligibility->gpus(n);
}

// The filter under ctx's eligibility: node n is eligible and `task` fits there using only its
// eligible GPUs (ClusterSnapshot::Fits without an eligibility).
inline bool FitsEligible(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                         const PlacementContext& ctx) {
  if (ctx.eligibility == nullptr) return cluster.Fits(n, task);
  return ctx.eligibility->node(n) && cluster.Fits(n, task, ctx.eligibility->gpus(n));
}

}  // namespace tessera::placement
