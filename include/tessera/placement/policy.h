// PlacementPolicy: the one interface every placement policy implements. Given the cluster and
// one task, a policy picks a node and the GPUs on it, or says the task fits nowhere.
//
// Callers (the simulator today; the scheduler and the Kubernetes extender later) own the
// ClusterSnapshot and commit the decision themselves with ClusterSnapshot::Apply. A policy
// never changes the snapshot. It may memoise pure functions of node state (keyed by
// ClusterSnapshot::uid() and version()), which is why Place is not const; anything that must
// persist between decisions lives in the caller's PlacementContext.
//
//   auto policy = MakePolicy("fgd", {.target_workload = &workload});
//   PlacementContext ctx{.rng = &rng, .node_rank = rank};
//   PlacementDecision d = (*policy)->Place(snapshot, task, ctx);
//   if (d.placement) snapshot.Apply(task, *d.placement);   // else: the task fits nowhere
//
// Thread-safety: one policy object per thread (policies memoise).
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

// Per-caller state shared across a sequence of decisions.
struct PlacementContext {
  // Randomness for randomised policies (random, and random GPU choice). Required by those.
  Rng* rng = nullptr;
  // Tie-break order: among equally good nodes the one with the lowest rank wins. Indexed by
  // node; empty means rank = node index. The FGD artifact draws a random permutation per seed.
  std::span<const uint32_t> node_rank;
  // NextFit's position: the node of the previous NextFit decision.
  NodeIndex next_fit_cursor;
};

struct PlacementDecision {
  std::optional<Placement> placement;  // empty: no node can take the task now
  uint32_t feasible_nodes = 0;         // nodes that passed the filter
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string_view name() const = 0;
  // Chooses a node and GPUs for `task`, or none if no node can take it now. Never changes
  // `cluster`; the caller commits with ClusterSnapshot::Apply.
  virtual PlacementDecision Place(const ClusterSnapshot& cluster, const TaskRequest& task,
                                  PlacementContext& ctx) = 0;
};

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

}  // namespace tessera::placement
