// MIG serving through the placement engine: the trace's fractional GPU tasks mapped to the
// nearest MIG profile, placed one by one on a cluster of MIG-mode GPUs by a placement policy
// (ClusterSnapshot + PlacementPolicy, the engine every other replay uses), side by side with
// the static baselines of partition/mig_sim.h and its standalone dynamic placer.
//
// Protocol (the same as `tessera mig simulate`, so all strategies see one request stream):
//   1. Each pod with one GPU and gpu_milli < 1000 becomes the smallest profile covering its
//      share of memory and compute (partition::ProfileForFraction); others are left out.
//   2. Arrivals for a seed: that list shuffled with Rng(seed), then draws with replacement from
//      it until the requested memory slices reach 1.3 x capacity.
//   3. Requests are served in order until the requested slices reach 100 % of capacity; nothing
//      departs. Metric: unserved capacity = (capacity - served slices) / capacity, and the same
//      in GPUs ("stranded GPUs" = capacity - served, in GPUs).
// Engine run: GPUs in nodes of `gpus_per_node` (the last node may be smaller), every request a
// placement::MigRequest without CPU or memory (MIG geometry is what is compared), the target
// workload = the mapped pod list (all its profile types), node rank = index (the standalone
// placer's tie-break). The policy's own choice decides (fgd and tessera: MIG fragmentation).
//
//   auto runs = RunMigComparison({.geometry = h100, .model = id, .gpus = 100, .pods = &pods,
//                                 .seeds = {42}, .policies = {"tessera"}});
//   (*runs)[0].engine[0].unserved_pct   // vs (*runs)[0].best_static.unserved_pct
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/ids.h"
#include "tessera/core/status.h"
#include "tessera/partition/mig_sim.h"
#include "tessera/sim/trace.h"

namespace tessera::sim {

// Step 1: profile indexes of the pods' sharing tasks, in pod-list order.
std::vector<int> MigProfilesOfPods(const MigGeometry& geometry, const std::vector<PodRecord>& pods);

// Step 2: the arrival sequence for one seed.
std::vector<int> MigArrivals(const MigGeometry& geometry, const std::vector<int>& base, int64_t capacity_slices,
                             uint64_t seed);

struct MigReplayResult {
  std::string policy;
  int gpus = 0;
  int64_t capacity_slices = 0;
  int64_t requested_slices = 0;   // arrived up to 100 % of capacity
  int64_t served_slices = 0;
  int64_t requests = 0;           // arrived up to 100 %
  int64_t placed = 0;
  double unserved_pct = 0;        // (capacity - served) / capacity x 100
  double stranded_gpus = 0;       // (capacity - served) / memory slices per GPU
  int gpus_with_instances = 0;    // at the end
  double mig_frag_pct = 0;        // MIG fragmentation of the free capacity at the end (mig.h), % of capacity
};

// Step 3 through the engine. INVALID_ARGUMENT for an unknown policy, gpus < 1 or a bad geometry.
StatusOr<MigReplayResult> RunMigReplay(std::shared_ptr<const MigGeometry> geometry, GpuModelId model, int gpus,
                                       int gpus_per_node, const std::vector<int>& base,
                                       const std::vector<int>& arrivals, const std::string& policy);

struct MigComparisonInput {
  std::shared_ptr<const MigGeometry> geometry;
  GpuModelId model;
  int gpus = 1;
  int gpus_per_node = 8;
  const std::vector<PodRecord>* pods = nullptr;
  std::vector<uint64_t> seeds;
  std::vector<std::string> policies;  // engine runs; may be empty
};

struct MigComparisonRun {
  uint64_t seed = 0;
  std::vector<MigReplayResult> engine;            // one per policy, in input order
  partition::MigSimResult standalone_dynamic;     // mig_sim.h's own dynamic placer
  partition::MigSimResult best_static;            // best uniform layout for this seed
  partition::MigSimResult planned_static;         // layouts planned once for the mix (PlanMig)
};

// Every strategy on every seed. INVALID_ARGUMENT if the pods have no task that maps to a
// profile (names the model), or for bad input to RunMigReplay.
StatusOr<std::vector<MigComparisonRun>> RunMigComparison(const MigComparisonInput& input);

// The runs of RunMigComparison gathered per strategy, for the reports. Rows, in order: one
// "engine:<policy>" per policy, "mig_sim dynamic (standalone)", "static, layouts planned for the
// mix", "static, best uniform layout"; each holds one value per seed.
struct MigComparisonRow {
  std::string name;
  std::string kind;                   // "dynamic" | "static"
  std::vector<double> unserved_pct;   // per seed
  std::vector<double> stranded_gpus;  // per seed
};

struct MigComparisonReport {
  std::string model;        // as the caller named it (shown as given)
  std::string pods_path;
  std::string seeds_text;   // e.g. "42-51" (shown as given)
  std::vector<uint64_t> seeds;
  int gpus = 0;
  int gpus_per_node = 0;
  std::map<std::string, int> demand_mix;           // profile name -> tasks of the pod list
  std::vector<MigComparisonRow> rows;
  std::map<std::string, int> best_static_layouts;  // layout -> seeds it was the best uniform one
};

MigComparisonReport SummarizeMigComparison(const MigComparisonInput& input, const std::vector<MigComparisonRun>& runs,
                                           const std::string& model, const std::string& pods_path,
                                           const std::string& seeds_text);

// `tessera simulate --mig-model`: the table (medians over seeds) and the JSON document
// {"mode": "mig", "model", "gpus", "gpus_per_node", "pods", "seeds", "demand_mix",
//  "strategies": [{"name", "kind", "unserved_pct", "median_unserved_pct", "stranded_gpus",
//  "median_stranded_gpus"}], "best_static_layouts"} (indented by 2, final newline).
std::string RenderMigComparisonTable(const MigComparisonReport& report);
std::string RenderMigComparisonJson(const MigComparisonReport& report);
// `tessera simulate --mig-model ... --html OUT`: a standalone page in the style of the other
// reports (report_charts.h: uPlot, the dashboard's palette): the parameters and the median table
// as tables, a bar per strategy of its median unserved capacity (%) and a dot per strategy and
// seed of its stranded GPUs (the charts' values as tables in a build without npm).
std::string RenderMigComparisonHtml(const MigComparisonReport& report);
// `tessera mig simulate`: the baselines only (no engine rows), in its shorter text and JSON.
std::string RenderMigServingText(const MigComparisonReport& report);
std::string RenderMigServingJson(const MigComparisonReport& report);

}  // namespace tessera::sim
