#include "tools/tessera/commands/simulate_mig.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tessera/core/gpu_model.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/policy.h"
#include "tessera/sim/mig_replay.h"
#include "tessera/sim/sweep.h"
#include "tessera/sim/trace.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

// "fgd,tessera", "all" or "artifact" -> policy names; INVALID_ARGUMENT names an unknown one.
StatusOr<std::vector<std::string>> ParsePolicyList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part == "all" || part == "artifact") {
      const auto& names = part == "all" ? placement::PolicyNames() : placement::ArtifactPolicyNames();
      out.insert(out.end(), names.begin(), names.end());
      continue;
    }
    bool known = false;
    for (const auto& p : placement::PolicyNames()) known |= p == part;
    if (!known) return InvalidArgumentError("--policies: unknown policy '" + part + "'");
    out.push_back(part);
  }
  if (out.empty()) return InvalidArgumentError("--policies: no policy given");
  return out;
}

}  // namespace

// `--mig-model M`: the trace's fractional tasks as MIG requests on GPUs of model M, placed by the
// engine (per policy) next to mig_sim's standalone dynamic placer and the static layouts.
int RunMigMode(const MigModeFlags& m, const MigModeShared& f) {
  auto fail = [](const std::string& message, int code) {
    std::fprintf(stderr, "tessera simulate: %s\n", message.c_str());
    return code;
  };
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  if (m.model.empty()) {
    return fail(std::string(m.gpus != -1 ? "--gpus" : "--gpus-per-node") + ": only with --mig-model", kExitBadInput);
  }
  auto model = catalog.Find(m.model);
  if (!model.ok()) return fail("--mig-model: " + model.status().message(), kExitBadInput);
  if (!catalog.info(*model).mig) {
    return fail("--mig-model: " + m.model + " has no MIG (whole/fractional GPUs only)", kExitBadInput);
  }
  if (f.all_lists) return fail("--all-lists: not with --mig-model (give one --pods list)", kExitBadInput);
  if (f.pods.size() > 1) return fail("--pods: --mig-model takes one pod list", kExitBadInput);
  if (!f.nodes.empty()) {
    return fail("--nodes: not with --mig-model (the cluster is --gpus GPUs of the model)", kExitBadInput);
  }
  const int gpus = m.gpus == -1 ? 100 : m.gpus;
  if (gpus < 1 || gpus > 100000) return fail("--gpus: must be 1..100000", kExitBadInput);
  const int per_node = m.gpus_per_node == -1 ? 8 : m.gpus_per_node;
  if (per_node < 1 || per_node > placement::kMaxGpusPerNode) {
    return fail("--gpus-per-node: must be 1.." + std::to_string(placement::kMaxGpusPerNode), kExitBadInput);
  }
  auto seeds = ParseSeeds(f.seeds);
  if (!seeds.ok()) return fail(seeds.status().message(), kExitBadInput);
  auto policies = ParsePolicyList(f.policies.empty() ? "tessera,fgd,bestfit,firstfit" : f.policies);
  if (!policies.ok()) return fail(policies.status().message(), kExitBadInput);
  const std::string pods_path =
      f.pods.empty() ? DataDir() + "/alibaba-gpu-2023/csv/openb_pod_list_default.csv" : f.pods[0];
  auto pods = sim::ReadPodList(pods_path, catalog);
  if (!pods.ok()) return fail(pods.status().message(), kExitBadInput);

  sim::MigComparisonInput in;
  in.geometry = std::make_shared<const MigGeometry>(*catalog.info(*model).mig);
  in.model = *model;
  in.gpus = gpus;
  in.gpus_per_node = per_node;
  in.pods = &*pods;
  in.seeds = *seeds;
  in.policies = *policies;
  auto runs = sim::RunMigComparison(in);
  if (!runs.ok()) return fail(pods_path + ": " + runs.status().message(), kExitBadInput);

  const MigGeometry& g = *in.geometry;
  struct Row {
    std::string name;
    std::string kind;
    std::vector<double> unserved, stranded;
  };
  std::vector<Row> rows;
  for (size_t k = 0; k < policies->size(); ++k) rows.push_back({"engine:" + (*policies)[k], "dynamic", {}, {}});
  rows.push_back({"mig_sim dynamic (standalone)", "dynamic", {}, {}});
  rows.push_back({"static, layouts planned for the mix", "static", {}, {}});
  rows.push_back({"static, best uniform layout", "static", {}, {}});
  std::map<std::string, int> best_layouts;
  auto stranded = [&](const partition::MigSimResult& r) {
    return static_cast<double>(r.capacity_slices - r.served_slices) / g.memory_slices;
  };
  for (const sim::MigComparisonRun& run : *runs) {
    size_t i = 0;
    for (const sim::MigReplayResult& e : run.engine) {
      rows[i].unserved.push_back(e.unserved_pct);
      rows[i++].stranded.push_back(e.stranded_gpus);
    }
    for (const partition::MigSimResult* r : {&run.standalone_dynamic, &run.planned_static, &run.best_static}) {
      rows[i].unserved.push_back(r->unserved_pct);
      rows[i++].stranded.push_back(stranded(*r));
    }
    ++best_layouts[run.best_static.strategy];
  }
  std::map<std::string, int> mix;
  for (int p : sim::MigProfilesOfPods(g, *pods)) ++mix[g.profiles[static_cast<size_t>(p)].name];

  std::printf("MIG serving of the trace's fractional tasks on %d x %s, nodes of %d GPUs (seeds %s)\n", gpus,
              m.model.c_str(), per_node, f.seeds.c_str());
  std::printf("pods: %s\ndemand mix (nearest profile):", pods_path.c_str());
  for (const auto& [p, n] : mix) std::printf(" %s=%d", p.c_str(), n);
  std::printf("\nunserved capacity when the requests reach 100 %% of capacity (median over seeds):\n");
  std::printf("  %-38s %-8s %11s %15s\n", "strategy", "kind", "unserved %", "stranded GPUs");
  for (const Row& r : rows) {
    std::printf("  %-38s %-8s %11.2f %15.2f\n", r.name.c_str(), r.kind.c_str(), sim::Median(r.unserved),
                sim::Median(r.stranded));
  }
  for (const auto& [l, n] : best_layouts) std::printf("  best uniform layout in %d seed(s): %s\n", n, l.c_str());

  if (!f.json_out.empty()) {
    nlohmann::json strategies = nlohmann::json::array();
    for (const Row& r : rows) {
      strategies.push_back({{"name", r.name},
                            {"kind", r.kind},
                            {"unserved_pct", r.unserved},
                            {"median_unserved_pct", sim::Median(r.unserved)},
                            {"stranded_gpus", r.stranded},
                            {"median_stranded_gpus", sim::Median(r.stranded)}});
    }
    const nlohmann::json j = {{"mode", "mig"},
                              {"model", m.model},
                              {"gpus", gpus},
                              {"gpus_per_node", per_node},
                              {"pods", pods_path},
                              {"seeds", *seeds},
                              {"demand_mix", mix},
                              {"strategies", strategies},
                              {"best_static_layouts", best_layouts}};
    std::ofstream out(f.json_out, std::ios::binary | std::ios::trunc);
    out << j.dump(2) << "\n";
    out.close();
    if (!out) return fail("cannot write '" + f.json_out + "'", kExitFailure);
    std::printf("JSON: %s\n", f.json_out.c_str());
  }
  return kExitOk;
}

void AddMigModeFlags(CLI::App* cmd, MigModeFlags* flags) {
  cmd->add_option("--mig-model", flags->model,
                  "MIG mode: serve the pod list's fractional tasks as MIG instances (nearest profile) on --gpus "
                  "GPUs of this model; engine placement vs static layouts");
  cmd->add_option("--gpus", flags->gpus, "MIG mode: number of GPUs (default 100)");
  cmd->add_option("--gpus-per-node", flags->gpus_per_node, "MIG mode: GPUs per node (default 8)");
}

}  // namespace tessera::cli
