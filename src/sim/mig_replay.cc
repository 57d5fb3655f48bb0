#include "tessera/sim/mig_replay.h"

#include <algorithm>
#include <map>

#include "tessera/core/rng.h"
#include "tessera/partition/mig_planner.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/mig.h"
#include "tessera/placement/policy.h"

namespace tessera::sim {

using placement::ClusterSnapshot;
using placement::NodeSpec;
using placement::TaskRequest;

std::vector<int> MigProfilesOfPods(const MigGeometry& geometry, const std::vector<PodRecord>& pods) {
  std::vector<int> base;
  for (const PodRecord& p : pods) {
    if (!p.request.IsSharing()) continue;
    StatusOr<int> prof = partition::ProfileForFraction(geometry, p.request.gpu_milli);
    if (prof.ok()) base.push_back(*prof);
  }
  return base;
}

std::vector<int> MigArrivals(const MigGeometry& geometry, const std::vector<int>& base, int64_t capacity_slices,
                             uint64_t seed) {
  Rng rng(seed);
  std::vector<int> reqs = base;
  if (base.empty()) return reqs;
  rng.Shuffle(reqs);
  int64_t total = 0;
  for (int p : reqs) total += geometry.profiles[static_cast<size_t>(p)].memory_slices;
  while (total < capacity_slices * 13 / 10) {
    const int p = base[rng.Uniform(base.size())];
    reqs.push_back(p);
    total += geometry.profiles[static_cast<size_t>(p)].memory_slices;
  }
  return reqs;
}

StatusOr<MigReplayResult> RunMigReplay(std::shared_ptr<const MigGeometry> geometry, GpuModelId model, int gpus,
                                       int gpus_per_node, const std::vector<int>& base,
                                       const std::vector<int>& arrivals, const std::string& policy_name) {
  if (geometry == nullptr) return InvalidArgumentError("MIG replay: the model has no MIG geometry");
  if (gpus < 1) return InvalidArgumentError("MIG replay: gpus must be >= 1, got " + std::to_string(gpus));
  if (gpus_per_node < 1 || gpus_per_node > placement::kMaxGpusPerNode) {
    return InvalidArgumentError("MIG replay: gpus per node must be 1.." + std::to_string(placement::kMaxGpusPerNode));
  }
  const MigGeometry& g = *geometry;
  std::vector<NodeSpec> nodes;
  for (int left = gpus, i = 0; left > 0; ++i) {
    const int count = std::min(left, gpus_per_node);
    nodes.push_back({"mig" + std::to_string(i), CpuMilli{1'000'000}, MiB{1 << 30}, count, model, geometry, {}});
    left -= count;
  }
  TESSERA_ASSIGN_OR_RETURN(ClusterSnapshot cluster, ClusterSnapshot::Create(std::move(nodes)));

  // One request per profile index; the target workload is the pod list's mix, every type kept.
  std::vector<TaskRequest> by_profile(g.profiles.size());
  for (size_t p = 0; p < g.profiles.size(); ++p) {
    TESSERA_ASSIGN_OR_RETURN(by_profile[p], placement::MigRequest(model, g, g.profiles[p].name));
  }
  std::vector<TaskRequest> sample;
  sample.reserve(base.size());
  for (int p : base) sample.push_back(by_profile[static_cast<size_t>(p)]);
  const placement::TargetWorkload workload = placement::TargetWorkload::FromTasks(sample, 1.0);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<placement::PlacementPolicy> policy,
                           placement::MakePolicy(policy_name, {.target_workload = &workload}));
  Rng policy_rng(0x6d6967);  // only the random policy draws
  placement::PlacementContext ctx{.rng = &policy_rng};

  MigReplayResult r;
  r.policy = policy_name;
  r.gpus = gpus;
  r.capacity_slices = int64_t{gpus} * g.memory_slices;
  for (int p : arrivals) {
    if (r.requested_slices >= r.capacity_slices) break;
    const MigProfile& want = g.profiles[static_cast<size_t>(p)];
    r.requested_slices += want.memory_slices;
    ++r.requests;
    const TaskRequest& task = by_profile[static_cast<size_t>(p)];
    const placement::PlacementDecision d = policy->Place(cluster, task, ctx);
    if (!d.placement) continue;
    if (Status s = cluster.Apply(task, *d.placement); !s.ok()) {
      return InternalError("policy '" + policy_name + "' chose an invalid MIG placement: " + s.message());
    }
    ++r.placed;
    r.served_slices += want.memory_slices;
  }
  const int64_t unserved = r.capacity_slices - r.served_slices;
  r.unserved_pct = r.capacity_slices > 0
                       ? 100.0 * static_cast<double>(unserved) / static_cast<double>(r.capacity_slices)
                       : 0.0;
  r.stranded_gpus = static_cast<double>(unserved) / g.memory_slices;
  const placement::MigFragmentation frag(&workload);
  double f = 0;
  for (uint32_t i = 0; i < cluster.node_count(); ++i) {
    const NodeIndex n{i};
    f += frag.OfNode(cluster, n);
    for (int k = 0; k < cluster.gpu_count(n); ++k) r.gpus_with_instances += cluster.mig_used_slices(n, k) != 0;
  }
  r.mig_frag_pct = 100.0 * f / static_cast<double>(cluster.total_gpu_capacity().value());
  return r;
}

StatusOr<std::vector<MigComparisonRun>> RunMigComparison(const MigComparisonInput& in) {
  if (in.geometry == nullptr) return InvalidArgumentError("MIG comparison: the model has no MIG geometry");
  if (in.pods == nullptr) return InvalidArgumentError("MIG comparison: no pods");
  if (in.gpus < 1) return InvalidArgumentError("MIG comparison: gpus must be >= 1");
  const MigGeometry& g = *in.geometry;
  const std::vector<int> base = MigProfilesOfPods(g, *in.pods);
  if (base.empty()) {
    return InvalidArgumentError("no GPU-sharing tasks (num_gpu 1, gpu_milli < 1000) map to a MIG profile");
  }
  const int64_t capacity = int64_t{in.gpus} * g.memory_slices;
  // The planned static baseline: layouts planned once (PlanMig) for the expected mix, scaled to
  // the cluster's capacity, then never changed.
  std::map<std::string, int> expected;
  {
    std::vector<int64_t> count(g.profiles.size(), 0);
    int64_t slices = 0;
    for (int p : base) {
      ++count[static_cast<size_t>(p)];
      slices += g.profiles[static_cast<size_t>(p)].memory_slices;
    }
    for (size_t p = 0; p < count.size(); ++p) {
      if (count[p] == 0) continue;
      expected[g.profiles[p].name] =
          static_cast<int>((count[p] * capacity + slices - 1) / std::max<int64_t>(1, slices));
    }
  }
  TESSERA_ASSIGN_OR_RETURN(partition::MigPlan planned,
                           partition::PlanMig(g, std::vector<partition::MigGpuState>(static_cast<size_t>(in.gpus)),
                                              expected));
  std::vector<MigComparisonRun> runs;
  for (uint64_t seed : in.seeds) {
    MigComparisonRun run;
    run.seed = seed;
    const std::vector<int> reqs = MigArrivals(g, base, capacity, seed);
    for (const std::string& policy : in.policies) {
      TESSERA_ASSIGN_OR_RETURN(MigReplayResult r,
                               RunMigReplay(in.geometry, in.model, in.gpus, in.gpus_per_node, base, reqs, policy));
      run.engine.push_back(std::move(r));
    }
    run.standalone_dynamic = partition::SimulateDynamicMig(g, in.gpus, reqs);
    run.best_static = partition::BestStaticMig(g, in.gpus, reqs);
    run.planned_static = partition::SimulateStaticLayouts(g, planned.layouts, reqs);
    runs.push_back(std::move(run));
  }
  return runs;
}

}  // namespace tessera::sim
