#include "tools/tessera/commands/simulate_mig.h"

#include <cstdio>
#include <memory>
#include <sstream>

#include "tessera/core/gpu_model.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/policy.h"
#include "tessera/sim/mig_replay.h"
#include "tessera/sim/trace.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {

StatusOr<std::vector<std::string>> ParsePolicies(const std::string& text) {
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
    if (!known) {
      std::string names;
      for (const auto& p : placement::PolicyNames()) names += (names.empty() ? "" : ", ") + p;
      return InvalidArgumentError("--policies: unknown policy '" + part + "' (known: " + names + ", or all, artifact)");
    }
    out.push_back(part);
  }
  if (out.empty()) return InvalidArgumentError("--policies: no policy given");
  return out;
}

int RunMigMode(const MigModeFlags& m, const MigModeShared& f) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  auto model = catalog.Find(m.model);
  if (!model.ok()) return Fail("simulate", "--mig-model: " + model.status().message(), kExitBadInput);
  if (!catalog.info(*model).mig) {
    return Fail("simulate", "--mig-model: " + m.model + " has no MIG (whole/fractional GPUs only)", kExitBadInput);
  }
  if (f.pods.size() > 1) return Fail("simulate", "--pods: --mig-model takes one pod list", kExitBadInput);
  if (m.gpus < 1 || m.gpus > 100000) return Fail("simulate", "--gpus: must be 1..100000", kExitBadInput);
  if (m.gpus_per_node < 1 || m.gpus_per_node > placement::kMaxGpusPerNode) {
    return Fail("simulate", "--gpus-per-node: must be 1.." + std::to_string(placement::kMaxGpusPerNode),
                kExitBadInput);
  }
  auto seeds = ParseSeeds(f.seeds);
  if (!seeds.ok()) return Fail("simulate", seeds.status(), kExitBadInput);
  auto policies = ParsePolicies(f.policies.empty() ? "tessera,fgd,bestfit,firstfit" : f.policies);
  if (!policies.ok()) return Fail("simulate", policies.status(), kExitBadInput);
  const std::string pods_path =
      f.pods.empty() ? DataDir() + "/alibaba-gpu-2023/csv/openb_pod_list_default.csv" : f.pods[0];
  auto pods = sim::ReadPodList(pods_path, catalog);
  if (!pods.ok()) return Fail("simulate", pods.status(), kExitBadInput);

  sim::MigComparisonInput in;
  in.geometry = std::make_shared<const MigGeometry>(*catalog.info(*model).mig);
  in.model = *model;
  in.gpus = m.gpus;
  in.gpus_per_node = m.gpus_per_node;
  in.pods = &*pods;
  in.seeds = *seeds;
  in.policies = *policies;
  auto runs = sim::RunMigComparison(in);
  if (!runs.ok()) return Fail("simulate", pods_path + ": " + runs.status().message(), kExitBadInput);
  const sim::MigComparisonReport report = sim::SummarizeMigComparison(in, *runs, m.model, pods_path, f.seeds);
  if (f.json_out != "-") std::printf("%s", sim::RenderMigComparisonTable(report).c_str());
  if (!f.json_out.empty()) {
    if (Status s = WriteOutput(f.json_out, sim::RenderMigComparisonJson(report)); !s.ok()) {
      return Fail("simulate", s, kExitFailure);
    }
    if (f.json_out != "-") std::printf("JSON: %s\n", f.json_out.c_str());
  }
  if (!f.html_out.empty()) {
    if (Status s = WriteOutput(f.html_out, sim::RenderMigComparisonHtml(report)); !s.ok()) {
      return Fail("simulate", s, kExitFailure);
    }
    if (f.json_out != "-") std::printf("HTML report: %s\n", f.html_out.c_str());
  }
  return kExitOk;
}

void AddMigModeFlags(CLI::App* cmd, MigModeFlags* flags) {
  cmd->add_option("--mig-model", flags->model,
                  "MIG mode: serve the pod list's fractional tasks as MIG instances (nearest profile) on --gpus "
                  "GPUs of this model (a catalog or NVML name); engine placement vs static layouts");
  cmd->add_option("--gpus", flags->gpus, "MIG mode: number of GPUs (default 100)");
  cmd->add_option("--gpus-per-node", flags->gpus_per_node, "MIG mode: GPUs per node (default 8)");
}

}  // namespace tessera::cli
