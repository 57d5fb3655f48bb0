// `tessera mig`: MIG layouts and plans for a GPU model, from the catalog's rules.
//   tessera mig layouts --model H100-80GB [--json PATH]
//   tessera mig validate --model H100-80GB --layout 3g.40gb@0,3g.40gb@4 [--json PATH]
//   tessera mig plan --model H100-80GB --gpus 4 --demand 1g.10gb=9,3g.40gb=2 [--in-use FILE] [--json PATH]
//   tessera mig simulate --model H100-80GB --gpus 8 [--pods FILE] [--seeds 42-51] [--json PATH]
//   tessera mig show / apply                                      (the node's GPUs: mig_node.cc)
#include "tools/tessera/commands/mig.h"

#include <charconv>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "tessera/partition/catalog_file.h"
#include "tessera/partition/mig_layout.h"
#include "tessera/partition/mig_plan_json.h"
#include "tessera/partition/mig_planner.h"
#include "tessera/sim/mig_in_use.h"
#include "tessera/sim/mig_replay.h"
#include "tessera/sim/trace.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {

StatusOr<const GpuModelCatalog*> MigCatalog(const std::string& models_file) {
  static std::optional<GpuModelCatalog> with_file;
  if (models_file.empty()) return &GpuModelCatalog::Builtin();
  if (!with_file) {
    std::ifstream in(models_file, std::ios::binary);
    if (!in) return NotFoundError(models_file + ": cannot open file");
    std::stringstream text;
    text << in.rdbuf();
    TESSERA_ASSIGN_OR_RETURN(std::vector<GpuModelInfo> models, partition::ParseGpuModelsJson(text.str(), models_file));
    TESSERA_ASSIGN_OR_RETURN(GpuModelCatalog c, partition::CatalogWithModels(models));
    with_file = std::move(c);
  }
  return &*with_file;
}

StatusOr<GpuModelId> MigModel(const GpuModelCatalog& cat, const std::string& model) {
  if (model.empty()) return InvalidArgumentError("--model is required (e.g. --model H100-80GB)");
  TESSERA_ASSIGN_OR_RETURN(GpuModelId id, cat.Find(model));
  if (!cat.info(id).mig) {
    std::string mig_models;
    for (size_t i = 0; i < cat.size(); ++i) {
      const GpuModelInfo& m = cat.info(GpuModelId(static_cast<uint32_t>(i)));
      if (m.mig) mig_models += (mig_models.empty() ? "" : ", ") + m.name;
    }
    return InvalidArgumentError("model " + model + " has no MIG (MIG models: " + mig_models + ")");
  }
  return id;
}

int MigOutput(const std::string& command, const MigFlags& f, const std::string& text, const std::string& json) {
  if (f.json_out != "-") std::printf("%s", text.c_str());
  if (!f.json_out.empty()) {
    if (Status s = WriteOutput(f.json_out, json); !s.ok()) return Fail(command, s, kExitFailure);
  }
  return kExitOk;
}

namespace {

struct Model {
  const GpuModelCatalog* catalog;
  GpuModelId id;
  const MigGeometry* g;
};

StatusOr<Model> ResolveModel(const MigFlags& f) {
  TESSERA_ASSIGN_OR_RETURN(const GpuModelCatalog* cat, MigCatalog(f.models_file));
  TESSERA_ASSIGN_OR_RETURN(GpuModelId id, MigModel(*cat, f.model));
  return Model{cat, id, &*cat->info(id).mig};
}

StatusOr<std::map<std::string, int>> ParseDemand(const MigGeometry& g, const std::string& text) {
  std::map<std::string, int> demand;
  if (text.empty()) return InvalidArgumentError("--demand is required, e.g. --demand 1g.10gb=9,3g.40gb=2");
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const size_t eq = item.find('=');
    int count = -1;
    if (eq != std::string::npos) {
      const char* b = item.c_str() + eq + 1;
      auto [ptr, ec] = std::from_chars(b, item.c_str() + item.size(), count);
      if (ec != std::errc() || ptr != item.c_str() + item.size()) count = -1;
    }
    if (eq == std::string::npos || count < 0 || count > 1'000'000) {
      return InvalidArgumentError("--demand item '" + item + "': expected PROFILE=COUNT with COUNT 0..1000000");
    }
    const std::string profile = item.substr(0, eq);
    auto p = partition::FindProfileIndex(g, profile);
    if (!p.ok()) return InvalidArgumentError("--demand item '" + item + "': " + p.status().message());
    demand[profile] += count;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return demand;
}

int RunLayouts(const MigFlags& f) {
  auto m = ResolveModel(f);
  if (!m.ok()) return Fail("mig layouts", m.status(), kExitBadInput);
  const MigGeometry& g = *m->g;
  const auto layouts = partition::EnumerateMaximalLayouts(g, f.with_me);
  std::string text = std::to_string(layouts.size()) + " maximal MIG layouts of " + f.model + " (" +
                     std::to_string(g.compute_slices) + " compute / " + std::to_string(g.memory_slices) +
                     " memory slices):\n";
  for (const partition::MigLayout& l : layouts) text += "  " + partition::SlotDiagram(g, l) + "\n";
  return MigOutput("mig layouts", f, text, partition::EncodeMigLayoutsJson(g, f.model, layouts));
}

int RunValidate(const MigFlags& f) {
  auto m = ResolveModel(f);
  if (!m.ok()) return Fail("mig validate", m.status(), kExitBadInput);
  auto layout = partition::ParseLayout(*m->g, f.layout);
  if (!layout.ok()) return Fail("mig validate", layout.status(), kExitBadInput);
  if (Status s = partition::ValidateLayout(*m->g, *layout); !s.ok()) {
    return Fail("mig validate", "invalid layout: " + s.message(), kExitBadInput);
  }
  return MigOutput("mig validate", f, "valid: " + partition::SlotDiagram(*m->g, *layout) + "\n",
                   partition::EncodeMigValidLayoutJson(*m->g, f.model, *layout));
}

int RunPlan(const MigFlags& f) {
  auto m = ResolveModel(f);
  if (!m.ok()) return Fail("mig plan", m.status(), kExitBadInput);
  const MigGeometry& g = *m->g;
  if (f.gpus < 1 || f.gpus > 100000) return Fail("mig plan", "--gpus must be 1..100000", kExitBadInput);
  auto demand = ParseDemand(g, f.demand);
  if (!demand.ok()) return Fail("mig plan", demand.status(), kExitBadInput);
  auto state = sim::ReadMigInUse(g, f.in_use, f.gpus);
  if (!state.ok()) return Fail("mig plan", state.status(), kExitBadInput);
  auto plan = partition::PlanMig(g, *state, *demand);
  if (!plan.ok()) return Fail("mig plan", plan.status(), kExitBadInput);
  std::string text = "MIG plan for " + std::to_string(f.gpus) + " x " + f.model + ", demand " + f.demand + "\n";
  for (size_t k = 0; k < plan->layouts.size(); ++k) {
    text += "  GPU " + std::to_string(k) + ": " + partition::SlotDiagram(g, plan->layouts[k]) + "\n";
  }
  if (plan->unsatisfied.empty()) {
    text += "all demand satisfied\n";
  } else {
    text += "unsatisfied:";
    for (const auto& [p, n] : plan->unsatisfied) text += " " + p + "=" + std::to_string(n);
    text += "\n";
  }
  text += "steps (" + std::to_string(plan->steps.size()) + "):\n";
  for (const auto& s : plan->steps) {
    text += std::string("  ") + (s.kind == partition::MigPlanStep::Kind::kCreate ? "create " : "destroy") + " GPU " +
            std::to_string(s.gpu) + " " + g.profiles[static_cast<size_t>(s.instance.profile)].name + "@" +
            std::to_string(s.instance.start) + "\n";
  }
  return MigOutput("mig plan", f, text, partition::EncodeMigPlanJson(g, f.model, *plan));
}

// The trace's sharing tasks mapped to the smallest covering profile, served by the standalone
// dynamic placer and the static layouts (sim::RunMigComparison without engine policies).
int RunMigSimulate(const MigFlags& f) {
  auto m = ResolveModel(f);
  if (!m.ok()) return Fail("mig simulate", m.status(), kExitBadInput);
  if (f.gpus < 1 || f.gpus > 100000) return Fail("mig simulate", "--gpus must be 1..100000", kExitBadInput);
  const std::string pods_path =
      f.pods.empty() ? DataDir() + "/alibaba-gpu-2023/csv/openb_pod_list_default.csv" : f.pods;
  auto pods = sim::ReadPodList(pods_path, GpuModelCatalog::Builtin());
  if (!pods.ok()) return Fail("mig simulate", pods.status(), kExitBadInput);
  auto seeds = ParseSeeds(f.seeds_text);
  if (!seeds.ok()) return Fail("mig simulate", seeds.status(), kExitBadInput);
  sim::MigComparisonInput in;
  in.geometry = std::make_shared<const MigGeometry>(*m->g);
  in.model = m->id;
  in.gpus = f.gpus;
  in.pods = &*pods;
  in.seeds = *seeds;
  auto runs = sim::RunMigComparison(in);
  if (!runs.ok()) return Fail("mig simulate", pods_path + ": " + runs.status().message(), kExitBadInput);
  const sim::MigComparisonReport r = sim::SummarizeMigComparison(in, *runs, f.model, pods_path, f.seeds_text);
  return MigOutput("mig simulate", f, sim::RenderMigServingText(r), sim::RenderMigServingJson(r));
}

constexpr const char* kModelsHelp = "JSON file of extra GPU models (schema of data/gpu-models/mig-profiles.json)";
constexpr const char* kJsonHelp = "Write JSON to this file ('-': to stdout, instead of the text)";

}  // namespace

void RegisterMig(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<MigFlags>();
  CLI::App* mig = app.add_subcommand("mig", "MIG layouts and reconfiguration plans from the GPU catalog's rules");
  mig->require_subcommand(1);
  const std::string model_help = "GPU model: a catalog name (H100-80GB, A100-40GB, A30-24GB) or its NVML name";

  CLI::App* layouts = mig->add_subcommand("layouts", "List every maximal valid MIG layout of a model");
  layouts->add_option("--models", flags->models_file, kModelsHelp);
  layouts->add_option("--model", flags->model, model_help)->required();
  layouts->add_option("--json", flags->json_out, kJsonHelp);
  layouts->add_flag("--with-media-extensions", flags->with_me, "Include the +me profiles");
  layouts->callback([flags, exit_code] { *exit_code = RunLayouts(*flags); });

  CLI::App* validate = mig->add_subcommand("validate", "Check a layout against the model's MIG rules");
  validate->add_option("--models", flags->models_file, kModelsHelp);
  validate->add_option("--model", flags->model, model_help)->required();
  validate->add_option("--layout", flags->layout, "Instances as PROFILE@START,..., e.g. 3g.40gb@0,3g.40gb@4")->required();
  validate->add_option("--json", flags->json_out, kJsonHelp);
  validate->callback([flags, exit_code] { *exit_code = RunValidate(*flags); });

  CLI::App* plan = mig->add_subcommand("plan", "Plan MIG layouts for N GPUs against a demand, with the steps");
  plan->footer(
      "\nChooses target layouts that satisfy the most demand (weighted by memory slices), never\n"
      "touching in-use instances, and lists the destroy/create steps in order. Exact up to 8 GPUs.");
  plan->add_option("--models", flags->models_file, kModelsHelp);
  plan->add_option("--model", flags->model, model_help)->required();
  plan->add_option("--gpus", flags->gpus, "Number of GPUs (default 1)");
  plan->add_option("--demand", flags->demand, "PROFILE=COUNT,..., e.g. 1g.10gb=9,3g.40gb=2")->required();
  plan->add_option("--in-use", flags->in_use, "CSV gpu,profile,start,in_use of the instances that exist now");
  plan->add_option("--json", flags->json_out,
                   "Write the plan as JSON to this file ('-': to stdout), the input of `tessera mig apply --plan`: "
                   "{model,gpus:[{index,instances:[{profile,start,size}]}],unsatisfied,steps}");
  plan->callback([flags, exit_code] { *exit_code = RunPlan(*flags); });

  RegisterMigNode(mig, flags, exit_code);

  CLI::App* simulate = mig->add_subcommand("simulate", "Dynamic vs static MIG serving of the trace's fractional tasks");
  simulate->footer(
      "\nMaps the trace's fractional GPU tasks to the nearest MIG profile and serves them on N GPUs:\n"
      "dynamic (fragmentation-aware instance placement) vs the best uniform static layout and\n"
      "static layouts planned for the mix; prints the unserved capacity when the requests reach\n"
      "100 % of capacity (median over seeds). `tessera simulate --mig-model` adds the placement engine.");
  simulate->add_option("--models", flags->models_file, kModelsHelp);
  simulate->add_option("--model", flags->model, model_help)->required();
  simulate->add_option("--gpus", flags->gpus, "Number of GPUs (default 1)");
  simulate->add_option("--pods", flags->pods, "Pod list CSV (default: the bundled Alibaba default list)");
  simulate->add_option("--seeds", flags->seeds_text, "Seed range, e.g. 42-51");
  simulate->add_option("--json", flags->json_out, kJsonHelp);
  simulate->callback([flags, exit_code] { *exit_code = RunMigSimulate(*flags); });
}

}  // namespace tessera::cli
