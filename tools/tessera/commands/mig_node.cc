// `tessera mig show` and `tessera mig apply`: the node's GPUs through NVML.
//   tessera mig show [--nvml LIB] [--json PATH]                                  (read-only)
//   tessera mig apply --model H100-80GB --plan PLAN.json [--nvml LIB] --yes [--json PATH]
#include <algorithm>
#include <cstdio>
#include <memory>

#include "tessera/enforce/mig_apply.h"
#include "tessera/enforce/mig_report.h"
#include "tessera/enforce/nvml.h"
#include "tessera/partition/mig_plan_json.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/mig.h"

namespace tessera::cli {
namespace {

int RunShow(const MigFlags& f) {
  enforce::DlopenNvml nvml({.library_path = f.nvml});
  if (Status s = nvml.Init(); !s.ok()) return Fail("mig show", s, kExitFailure);
  auto gpus = enforce::ReadNodeMig(nvml);
  if (!gpus.ok()) return Fail("mig show", gpus.status(), kExitFailure);
  std::string text = std::to_string(gpus->size()) + " GPU(s) via " + f.nvml + "\n";
  for (const enforce::GpuMigReport& g : *gpus) {
    text += "GPU " + std::to_string(g.index) + " " + (g.name_ok ? g.name : "?") + ", MIG " + g.mig + "\n";
    if (g.mig == "enabled") text += enforce::FormatMigInstances(g.index, g.instances) + "\n";
  }
  return MigOutput("mig show", f, text, enforce::EncodeNodeMigJson(f.nvml, *gpus));
}

// Changes the node's MIG layout: prints the steps, refuses without --yes, checks that the GPUs
// are of the plan's model, then applies them.
int RunApply(const MigFlags& f) {
  auto cat = MigCatalog(f.models_file);
  if (!cat.ok()) return Fail("mig apply", cat.status(), kExitBadInput);
  auto model = MigModel(**cat, f.model);
  if (!model.ok()) return Fail("mig apply", model.status(), kExitBadInput);
  const MigGeometry& g = *(*cat)->info(*model).mig;
  auto plan = partition::ReadMigPlanFile(**cat, *model, f.plan_file);
  if (!plan.ok()) return Fail("mig apply", plan.status(), kExitBadInput);
  std::vector<enforce::MigStep> steps;
  for (const partition::MigPlanStep& s : plan->steps) {
    auto step = enforce::CatalogMigStep(
        g, s.kind == partition::MigPlanStep::Kind::kCreate ? enforce::MigStep::Kind::kCreate
                                                            : enforce::MigStep::Kind::kDestroy,
        static_cast<uint32_t>(s.gpu), s.instance.profile, s.instance.start);
    if (!step.ok()) return Fail("mig apply", f.plan_file + ": " + step.status().message(), kExitBadInput);
    steps.push_back(*step);
  }
  const bool text = f.json_out != "-";
  if (text) std::printf("MIG steps for %s via %s (%zu):\n", f.model.c_str(), f.nvml.c_str(), steps.size());
  for (const enforce::MigStep& s : steps) {
    if (text) std::printf("  %s\n", s.Describe().c_str());
  }
  std::fflush(stdout);
  if (!f.yes) {
    return Fail("mig apply", "refusing to change MIG instances without --yes (the steps above were not applied)",
                kExitBadInput);
  }
  enforce::DlopenNvml nvml({.library_path = f.nvml});
  if (!steps.empty()) {
    if (Status s = nvml.Init(); !s.ok()) return Fail("mig apply", s, kExitFailure);
    if (Status s = enforce::CheckMigStepsModel(nvml, **cat, *model, steps); !s.ok()) {
      return Fail("mig apply", s, s.code() == StatusCode::kFailedPrecondition ? kExitBadInput : kExitFailure);
    }
  }
  std::vector<enforce::MigStepResult> done;
  if (!steps.empty()) {
    auto applied = enforce::ApplyMigSteps(nvml, steps);
    if (!applied.ok()) return Fail("mig apply", applied.status(), kExitFailure);
    done = std::move(*applied);
  }
  std::string out = steps.empty() ? "nothing to do\n" : "applied " + std::to_string(done.size()) + " step(s); now:\n";
  std::vector<uint32_t> gpus;
  for (const enforce::MigStep& s : steps) {
    if (std::find(gpus.begin(), gpus.end(), s.gpu) == gpus.end()) gpus.push_back(s.gpu);
  }
  std::sort(gpus.begin(), gpus.end());
  std::vector<std::pair<uint32_t, std::vector<enforce::MigInstanceState>>> after;
  for (uint32_t gpu : gpus) {
    auto st = enforce::ReadMigInstances(nvml, gpu);
    if (!st.ok()) return Fail("mig apply", st.status(), kExitFailure);
    out += enforce::FormatMigInstances(gpu, *st, &g) + "\n";
    after.emplace_back(gpu, std::move(*st));
  }
  return MigOutput("mig apply", f, out, enforce::EncodeMigApplyJson(f.model, f.nvml, steps, done, after));
}

}  // namespace

void RegisterMigNode(CLI::App* mig, const std::shared_ptr<MigFlags>& flags, int* exit_code) {
  CLI::App* show = mig->add_subcommand("show", "Show the node's GPUs' MIG mode and instances (read-only, via NVML)");
  show->add_option("--nvml", flags->nvml, "NVML library to load (default libnvidia-ml.so.1, the driver's)");
  show->add_option("--json", flags->json_out, "Write JSON to this file ('-': to stdout, instead of the text)");
  show->callback([flags, exit_code] { *exit_code = RunShow(*flags); });

  CLI::App* apply = mig->add_subcommand("apply", "Apply a MIG plan's steps to the node's GPUs (needs --yes)");
  apply->footer(
      "\nReads the steps of `tessera mig plan --json FILE`, prints them, and with --yes applies them\n"
      "through NVML: each destroy removes the GPU instance's compute instances and then the instance,\n"
      "each create makes the GPU instance at its exact placement and the compute instance that fills\n"
      "it. First every GPU the steps touch must be of --model by the name NVML reports (exit 2\n"
      "otherwise), then every step is checked against the driver; nothing changes if one is wrong.\n"
      "Without --yes nothing is loaded and the command exits with 2.");
  apply->add_option("--models", flags->models_file, "JSON file of extra GPU models (schema of data/gpu-models/mig-profiles.json)");
  apply->add_option("--model", flags->model, "GPU model the plan was made for (a catalog or NVML name)")->required();
  apply->add_option("--plan", flags->plan_file, "Plan JSON written by `tessera mig plan --json FILE`")->required();
  apply->add_option("--nvml", flags->nvml, "NVML library to load (default libnvidia-ml.so.1, the driver's)");
  apply->add_option("--json", flags->json_out, "Write what was applied as JSON to this file ('-': to stdout)");
  apply->add_flag("--yes", flags->yes, "Really change the GPUs' MIG instances");
  apply->callback([flags, exit_code] { *exit_code = RunApply(*flags); });
}

}  // namespace tessera::cli
