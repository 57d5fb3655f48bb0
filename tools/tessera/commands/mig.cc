// `tessera mig`: MIG layouts and plans for a GPU model, from the catalog's rules.
//   tessera mig layouts --model H100-80GB [--json]
//   tessera mig validate --model H100-80GB --layout 3g.40gb@0,3g.40gb@4
//   tessera mig plan --model H100-80GB --gpus 4 --demand 1g.10gb=9,3g.40gb=2 [--in-use FILE] [--json]
//   tessera mig show [--nvml LIB] [--json]                       (reads the node's GPUs)
//   tessera mig apply --model H100-80GB --plan PLAN.json [--nvml LIB] --yes   (changes them)
#include <charconv>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/enforce/mig_apply.h"
#include "tessera/enforce/nvml.h"
#include "tessera/partition/mig_layout.h"
#include "tessera/partition/mig_planner.h"
#include "tessera/partition/mig_sim.h"
#include "tessera/partition/catalog_file.h"
#include <fstream>
#include <optional>
#include <sstream>
#include "tessera/core/rng.h"
#include "tessera/sim/sweep.h"
#include "tessera/sim/trace.h"
#include "tools/tessera/commands/common.h"
#include <algorithm>
#include "tessera/sim/csv.h"
#include "tools/tessera/commands/commands.h"

namespace tessera::cli {
namespace {

using partition::MigGpuState;
using partition::MigLayout;

struct MigFlags {
  std::string models_file;
  std::string pods;
  std::string seeds_text = "42-51";
  std::string model;
  std::string layout;
  int gpus = 1;
  std::string demand;
  std::string in_use;
  bool json = false;
  bool with_me = false;
  std::string plan_file;
  std::string nvml = "libnvidia-ml.so.1";
  bool yes = false;
};

int Fail(const std::string& what, int code = kExitBadInput) {
  std::fprintf(stderr, "tessera mig: %s\n", what.c_str());
  return code;
}

// The built-in catalog, or a copy with the models of --models FILE added (read once per run).
StatusOr<const GpuModelCatalog*> Catalog(const std::string& models_file) {
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

StatusOr<const MigGeometry*> Geometry(const std::string& model, const std::string& models_file = "") {
  TESSERA_ASSIGN_OR_RETURN(const GpuModelCatalog* catalog, Catalog(models_file));
  const GpuModelCatalog& cat = *catalog;
  if (model.empty()) return InvalidArgumentError("--model is required (e.g. --model H100-80GB)");
  TESSERA_ASSIGN_OR_RETURN(GpuModelId id, cat.Find(model));
  const GpuModelInfo& info = cat.info(id);
  if (!info.mig) {
    std::string mig_models;
    for (size_t i = 0; i < cat.size(); ++i) {
      const GpuModelInfo& m = cat.info(GpuModelId(static_cast<uint32_t>(i)));
      if (m.mig) mig_models += (mig_models.empty() ? "" : ", ") + m.name;
    }
    return InvalidArgumentError("model " + model + " has no MIG (MIG models: " + mig_models + ")");
  }
  return &*info.mig;
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

// --in-use FILE: CSV "gpu,profile,start,in_use" listing the instances that exist now.
StatusOr<std::vector<MigGpuState>> ReadInUse(const MigGeometry& g, const std::string& path, int gpus) {
  std::vector<MigGpuState> state(static_cast<size_t>(gpus));
  if (path.empty()) return state;
  TESSERA_ASSIGN_OR_RETURN(sim::CsvTable t, sim::ReadCsvFile(path));
  auto gc = t.ColumnIndex("gpu"), pc = t.ColumnIndex("profile"), sc = t.ColumnIndex("start"),
       uc = t.ColumnIndex("in_use");
  if (!gc || !pc || !sc || !uc) return InvalidArgumentError(path + ":1:1: expected columns gpu,profile,start,in_use");
  for (const sim::CsvRow& row : t.rows) {
    auto int_field = [&](size_t col, int lo, int hi) -> StatusOr<int> {
      int v = 0;
      const std::string& f = row.fields[col];
      auto [ptr, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
      if (f.empty() || ec != std::errc() || ptr != f.data() + f.size() || v < lo || v > hi) {
        return InvalidArgumentError(t.Where(row, col) + ": " + t.header[col] + ": expected an integer " +
                                    std::to_string(lo) + ".." + std::to_string(hi) + ", got '" + f + "'");
      }
      return v;
    };
    TESSERA_ASSIGN_OR_RETURN(int gpu, int_field(*gc, 0, gpus - 1));
    TESSERA_ASSIGN_OR_RETURN(int start, int_field(*sc, 0, g.memory_slices - 1));
    TESSERA_ASSIGN_OR_RETURN(int used, int_field(*uc, 0, 1));
    auto p = partition::FindProfileIndex(g, row.fields[*pc]);
    if (!p.ok()) return InvalidArgumentError(t.Where(row, *pc) + ": profile: " + p.status().message());
    state[static_cast<size_t>(gpu)].current.push_back({*p, start});
    state[static_cast<size_t>(gpu)].in_use.push_back(used == 1);
  }
  for (size_t k = 0; k < state.size(); ++k) {
    if (Status s = partition::ValidateLayout(g, state[k].current); !s.ok()) {
      return InvalidArgumentError(path + ": GPU " + std::to_string(k) + ": " + s.message());
    }
  }
  return state;
}

nlohmann::json InstancesJson(const MigGeometry& g, MigLayout layout) {
  std::sort(layout.begin(), layout.end(), [](auto& a, auto& b) { return a.start < b.start; });
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& i : layout) {
    const MigProfile& p = g.profiles[static_cast<size_t>(i.profile)];
    arr.push_back({{"profile", p.name}, {"start", i.start}, {"size", p.size}});
  }
  return arr;
}

int RunLayouts(const MigFlags& f) {
  auto g = Geometry(f.model, f.models_file);
  if (!g.ok()) return Fail(g.status().message());
  const auto layouts = partition::EnumerateMaximalLayouts(**g, f.with_me);
  if (f.json) {
    nlohmann::json j = {{"model", f.model}, {"layouts", nlohmann::json::array()}};
    for (const MigLayout& l : layouts) j["layouts"].push_back(InstancesJson(**g, l));
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%zu maximal MIG layouts of %s (%d compute / %d memory slices):\n", layouts.size(), f.model.c_str(),
              (*g)->compute_slices, (*g)->memory_slices);
  for (const MigLayout& l : layouts) std::printf("  %s\n", partition::SlotDiagram(**g, l).c_str());
  return kExitOk;
}

int RunValidate(const MigFlags& f) {
  auto g = Geometry(f.model, f.models_file);
  if (!g.ok()) return Fail(g.status().message());
  auto layout = partition::ParseLayout(**g, f.layout);
  if (!layout.ok()) return Fail(layout.status().message());
  if (Status s = partition::ValidateLayout(**g, *layout); !s.ok()) return Fail("invalid layout: " + s.message());
  std::printf("valid: %s\n", partition::SlotDiagram(**g, *layout).c_str());
  return kExitOk;
}

int RunPlan(const MigFlags& f) {
  auto g = Geometry(f.model, f.models_file);
  if (!g.ok()) return Fail(g.status().message());
  if (f.gpus < 1 || f.gpus > 100000) return Fail("--gpus must be 1..100000");
  auto demand = ParseDemand(**g, f.demand);
  if (!demand.ok()) return Fail(demand.status().message());
  auto state = ReadInUse(**g, f.in_use, f.gpus);
  if (!state.ok()) return Fail(state.status().message());
  auto plan = partition::PlanMig(**g, *state, *demand);
  if (!plan.ok()) return Fail(plan.status().message());
  if (f.json) {
    nlohmann::json j;
    j["model"] = f.model;
    j["gpus"] = nlohmann::json::array();
    for (size_t k = 0; k < plan->layouts.size(); ++k) {
      j["gpus"].push_back({{"index", k}, {"instances", InstancesJson(**g, plan->layouts[k])}});
    }
    j["unsatisfied"] = nlohmann::json::object();
    for (const auto& [p, n] : plan->unsatisfied) j["unsatisfied"][p] = n;
    j["steps"] = nlohmann::json::array();
    for (const auto& s : plan->steps) {
      const MigProfile& p = (*g)->profiles[static_cast<size_t>(s.instance.profile)];
      j["steps"].push_back({{"action", s.kind == partition::MigPlanStep::Kind::kCreate ? "create" : "destroy"},
                            {"gpu", s.gpu},
                            {"profile", p.name},
                            {"start", s.instance.start},
                            {"size", p.size}});
    }
    j["satisfied_memory_slices"] = plan->satisfied_memory_slices;
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  std::printf("MIG plan for %d x %s, demand %s\n", f.gpus, f.model.c_str(), f.demand.c_str());
  for (size_t k = 0; k < plan->layouts.size(); ++k) {
    std::printf("  GPU %zu: %s\n", k, partition::SlotDiagram(**g, plan->layouts[k]).c_str());
  }
  if (plan->unsatisfied.empty()) {
    std::printf("all demand satisfied\n");
  } else {
    std::printf("unsatisfied:");
    for (const auto& [p, n] : plan->unsatisfied) std::printf(" %s=%d", p.c_str(), n);
    std::printf("\n");
  }
  std::printf("steps (%zu):\n", plan->steps.size());
  for (const auto& s : plan->steps) {
    std::printf("  %s GPU %d %s@%d\n", s.kind == partition::MigPlanStep::Kind::kCreate ? "create " : "destroy",
                s.gpu, (*g)->profiles[static_cast<size_t>(s.instance.profile)].name.c_str(), s.instance.start);
  }
  return kExitOk;
}

// The trace's sharing tasks (one GPU, a fraction) mapped to the smallest covering profile, then
// per seed: shuffled and resampled until the requested slices reach 1.3 x capacity.
int RunMigSimulate(const MigFlags& f) {
  auto g = Geometry(f.model, f.models_file);
  if (!g.ok()) return Fail(g.status().message());
  if (f.gpus < 1 || f.gpus > 100000) return Fail("--gpus must be 1..100000");
  std::string pods_path = f.pods;
  if (pods_path.empty()) pods_path = DataDir() + "/alibaba-gpu-2023/csv/openb_pod_list_default.csv";
  auto pods = sim::ReadPodList(pods_path, GpuModelCatalog::Builtin());
  if (!pods.ok()) return Fail(pods.status().message());
  std::vector<int> base;
  for (const auto& p : *pods) {
    if (!p.request.IsSharing()) continue;
    auto prof = partition::ProfileForFraction(**g, p.request.gpu_milli);
    if (prof.ok()) base.push_back(*prof);
  }
  if (base.empty()) return Fail(pods_path + ": no GPU-sharing tasks (num_gpu 1, gpu_milli < 1000) to map to MIG profiles");
  auto seeds = ParseSeeds(f.seeds_text);
  if (!seeds.ok()) return Fail(seeds.status().message());
  const int64_t capacity = int64_t{f.gpus} * (*g)->memory_slices;
  // A stronger static baseline: layouts planned once (PlanMig) for the expected mix, scaled to
  // the cluster's capacity, then never changed.
  std::map<std::string, int> expected;
  {
    std::vector<int64_t> count((*g)->profiles.size(), 0);
    int64_t slices = 0;
    for (int p : base) {
      ++count[static_cast<size_t>(p)];
      slices += (*g)->profiles[static_cast<size_t>(p)].memory_slices;
    }
    for (size_t p = 0; p < count.size(); ++p) {
      if (count[p] == 0) continue;
      expected[(*g)->profiles[p].name] =
          static_cast<int>((count[p] * capacity + slices - 1) / std::max<int64_t>(1, slices));
    }
  }
  auto planned = partition::PlanMig(**g, std::vector<MigGpuState>(static_cast<size_t>(f.gpus)), expected);
  if (!planned.ok()) return Fail(planned.status().message(), kExitFailure);
  std::vector<double> dyn, stat, plan_static;
  std::map<std::string, int> best_layouts;
  for (uint64_t seed : *seeds) {
    Rng rng(seed);
    std::vector<int> reqs = base;
    rng.Shuffle(reqs);
    int64_t total = 0;
    for (int p : reqs) total += (*g)->profiles[static_cast<size_t>(p)].memory_slices;
    while (total < capacity * 13 / 10) {
      const int p = base[rng.Uniform(base.size())];
      reqs.push_back(p);
      total += (*g)->profiles[static_cast<size_t>(p)].memory_slices;
    }
    const auto d = partition::SimulateDynamicMig(**g, f.gpus, reqs);
    const auto s = partition::BestStaticMig(**g, f.gpus, reqs);
    plan_static.push_back(partition::SimulateStaticLayouts(**g, planned->layouts, reqs).unserved_pct);
    dyn.push_back(d.unserved_pct);
    stat.push_back(s.unserved_pct);
    ++best_layouts[s.strategy];
  }
  const auto& median = sim::Median;
  std::map<std::string, int> mix;
  for (int p : base) ++mix[(*g)->profiles[static_cast<size_t>(p)].name];
  if (f.json) {
    nlohmann::json j = {{"model", f.model}, {"gpus", f.gpus}, {"pods", pods_path}, {"seeds", f.seeds_text},
                        {"demand_mix", mix}, {"dynamic_unserved_pct", dyn}, {"static_unserved_pct", stat},
                        {"median_dynamic_unserved_pct", median(dyn)}, {"median_best_static_unserved_pct", median(stat)},
                        {"planned_static_unserved_pct", plan_static},
                        {"median_planned_static_unserved_pct", median(plan_static)},
                        {"best_static_layouts", best_layouts}};
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  std::printf("MIG serving of the trace's fractional tasks on %d x %s (seeds %s)\n", f.gpus, f.model.c_str(),
              f.seeds_text.c_str());
  std::printf("demand mix:");
  for (const auto& [p, n] : mix) std::printf(" %s=%d", p.c_str(), n);
  std::printf("\nunserved capacity at arrived = 100 %% (median): dynamic %.2f %%, best uniform static layout %.2f %%, "
              "static layouts planned for the mix %.2f %%\n",
              median(dyn), median(stat), median(plan_static));
  for (const auto& [l, n] : best_layouts) std::printf("  best static layout in %d seed(s): %s\n", n, l.c_str());
  return kExitOk;
}

// `mig plan --json` output -> the steps in NVML terms; INVALID_ARGUMENT names the bad step.
StatusOr<std::vector<enforce::MigStep>> ReadPlanSteps(const MigGeometry& g, const std::string& model,
                                                      const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open file");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return InvalidArgumentError(path + ": not a JSON object");
  if (j.contains("model") && (!j["model"].is_string() || j["model"].get<std::string>() != model)) {
    return InvalidArgumentError(path + ": model: the plan is for " + j["model"].dump() + ", not " + model);
  }
  if (!j.contains("steps") || !j["steps"].is_array()) {
    return InvalidArgumentError(path + ": steps: missing or not an array (write it with `tessera mig plan --json`)");
  }
  std::vector<enforce::MigStep> out;
  for (size_t i = 0; i < j["steps"].size(); ++i) {
    const nlohmann::json& st = j["steps"][i];
    const std::string at = path + ": steps[" + std::to_string(i) + "]";
    if (!st.is_object()) return InvalidArgumentError(at + ": expected an object");
    const auto str = [&](const char* key) -> StatusOr<std::string> {
      if (!st.contains(key) || !st[key].is_string()) return InvalidArgumentError(at + "." + key + ": missing or not a string");
      return st[key].get<std::string>();
    };
    const auto num = [&](const char* key, int64_t lo, int64_t hi) -> StatusOr<int> {
      if (!st.contains(key) || !st[key].is_number_integer() || st[key].get<int64_t>() < lo ||
          st[key].get<int64_t>() > hi) {
        return InvalidArgumentError(at + "." + key + ": expected an integer " + std::to_string(lo) + ".." +
                                    std::to_string(hi));
      }
      return static_cast<int>(st[key].get<int64_t>());
    };
    TESSERA_ASSIGN_OR_RETURN(std::string action, str("action"));
    if (action != "create" && action != "destroy") {
      return InvalidArgumentError(at + ".action: '" + action + "' is neither create nor destroy");
    }
    TESSERA_ASSIGN_OR_RETURN(std::string profile, str("profile"));
    TESSERA_ASSIGN_OR_RETURN(int gpu, num("gpu", 0, 100000));
    TESSERA_ASSIGN_OR_RETURN(int start, num("start", 0, g.memory_slices - 1));
    auto p = partition::FindProfileIndex(g, profile);
    if (!p.ok()) return InvalidArgumentError(at + ".profile: " + p.status().message());
    auto step = enforce::CatalogMigStep(
        g, action == "create" ? enforce::MigStep::Kind::kCreate : enforce::MigStep::Kind::kDestroy,
        static_cast<uint32_t>(gpu), *p, start);
    if (!step.ok()) return InvalidArgumentError(at + ": " + step.status().message());
    out.push_back(*step);
  }
  return out;
}

nlohmann::json InstancesOnNode(const std::vector<enforce::MigInstanceState>& state) {
  nlohmann::json arr = nlohmann::json::array();
  for (const enforce::MigInstanceState& s : state) {
    nlohmann::json cis = nlohmann::json::array();
    for (const enforce::ComputeInstance& c : s.compute_instances) {
      cis.push_back({{"id", c.id}, {"profile_id", c.profile_id}, {"start", c.start}, {"size", c.size}});
    }
    arr.push_back({{"id", s.gpu_instance.id},
                   {"profile_id", s.gpu_instance.profile_id},
                   {"start", s.gpu_instance.placement.start},
                   {"size", s.gpu_instance.placement.size},
                   {"compute_instances", cis}});
  }
  return arr;
}

// "  GPU 0: [gi 1 3g.40gb@0:4 ci 0 @0:3] ..." (profile ids where `g` is null or lacks the id).
void PrintInstances(uint32_t gpu, const std::vector<enforce::MigInstanceState>& state,
                    const MigGeometry* g = nullptr) {
  std::printf("  GPU %u:", gpu);
  if (state.empty()) std::printf(" no GPU instances");
  for (const enforce::MigInstanceState& s : state) {
    std::string profile = "profile " + std::to_string(s.gpu_instance.profile_id) + " ";
    for (size_t i = 0; g != nullptr && i < g->profiles.size(); ++i) {
      if (g->profiles[i].profile_id == static_cast<int>(s.gpu_instance.profile_id)) profile = g->profiles[i].name;
    }
    std::printf(" [gi %u %s@%u:%u", s.gpu_instance.id, profile.c_str(),
                s.gpu_instance.placement.start, s.gpu_instance.placement.size);
    for (const enforce::ComputeInstance& c : s.compute_instances) {
      std::printf(" ci %u @%u:%u", c.id, c.start, c.size);
    }
    std::printf("]");
  }
  std::printf("\n");
}

// Read-only: the MIG mode and instances of every GPU of the node.
int RunShow(const MigFlags& f) {
  enforce::DlopenNvml nvml({.library_path = f.nvml});
  if (Status s = nvml.Init(); !s.ok()) return Fail(s.message(), kExitFailure);
  auto count = nvml.DeviceCount();
  if (!count.ok()) return Fail(count.status().message(), kExitFailure);
  nlohmann::json j = {{"library", f.nvml}, {"gpus", nlohmann::json::array()}};
  if (!f.json) std::printf("%u GPU(s) via %s\n", *count, f.nvml.c_str());
  for (uint32_t gpu = 0; gpu < *count; ++gpu) {
    auto name = nvml.DeviceName(gpu);
    auto mode = nvml.GetMigMode(gpu);
    const bool mig = mode.ok() && mode->current_enabled;
    std::vector<enforce::MigInstanceState> state;
    if (mig) {
      auto st = enforce::ReadMigInstances(nvml, gpu);
      if (!st.ok()) return Fail(st.status().message(), kExitFailure);
      state = std::move(*st);
    }
    const std::string mig_text = !mode.ok() ? "not supported" : mig ? "enabled" : "disabled";
    j["gpus"].push_back({{"index", gpu},
                         {"name", name.ok() ? *name : name.status().ToString()},
                         {"mig", mig_text},
                         {"gpu_instances", InstancesOnNode(state)}});
    if (!f.json) {
      std::printf("GPU %u %s, MIG %s\n", gpu, name.ok() ? name->c_str() : "?", mig_text.c_str());
      if (mig) PrintInstances(gpu, state);
    }
  }
  if (f.json) std::printf("%s\n", j.dump(2).c_str());
  return kExitOk;
}

// Changes the node's MIG layout: prints the steps, refuses without --yes, then applies them.
int RunApply(const MigFlags& f) {
  auto g = Geometry(f.model, f.models_file);
  if (!g.ok()) return Fail(g.status().message());
  auto steps = ReadPlanSteps(**g, f.model, f.plan_file);
  if (!steps.ok()) return Fail(steps.status().message());
  std::printf("MIG steps for %s via %s (%zu):\n", f.model.c_str(), f.nvml.c_str(), steps->size());
  for (const enforce::MigStep& s : *steps) std::printf("  %s\n", s.Describe().c_str());
  if (!f.yes) {
    return Fail("refusing to change MIG instances without --yes (the steps above were not applied)");
  }
  if (steps->empty()) {
    std::printf("nothing to do\n");
    return kExitOk;
  }
  enforce::DlopenNvml nvml({.library_path = f.nvml});
  if (Status s = nvml.Init(); !s.ok()) return Fail(s.message(), kExitFailure);
  auto done = enforce::ApplyMigSteps(nvml, *steps);
  if (!done.ok()) return Fail(done.status().message(), kExitFailure);
  std::printf("applied %zu step(s); now:\n", done->size());
  std::vector<uint32_t> gpus;
  for (const enforce::MigStep& s : *steps) {
    if (std::find(gpus.begin(), gpus.end(), s.gpu) == gpus.end()) gpus.push_back(s.gpu);
  }
  std::sort(gpus.begin(), gpus.end());
  for (uint32_t gpu : gpus) {
    auto st = enforce::ReadMigInstances(nvml, gpu);
    if (!st.ok()) return Fail(st.status().message(), kExitFailure);
    PrintInstances(gpu, *st, *g);
  }
  return kExitOk;
}

}  // namespace

void RegisterMig(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<MigFlags>();
  CLI::App* mig = app.add_subcommand("mig", "MIG layouts and reconfiguration plans from the GPU catalog's rules");
  mig->require_subcommand(1);

  CLI::App* layouts = mig->add_subcommand("layouts", "List every maximal valid MIG layout of a model");
  layouts->add_option("--models", flags->models_file, "JSON file of extra GPU models (schema of data/gpu-models/mig-profiles.json)");
  layouts->add_option("--model", flags->model, "GPU model, e.g. H100-80GB, A100-40GB, A30-24GB")->required();
  layouts->add_flag("--json", flags->json, "JSON output");
  layouts->add_flag("--with-media-extensions", flags->with_me, "Include the +me profiles");
  layouts->callback([flags, exit_code] { *exit_code = RunLayouts(*flags); });

  CLI::App* validate = mig->add_subcommand("validate", "Check a layout against the model's MIG rules");
  validate->add_option("--models", flags->models_file, "JSON file of extra GPU models (schema of data/gpu-models/mig-profiles.json)");
  validate->add_option("--model", flags->model, "GPU model")->required();
  validate->add_option("--layout", flags->layout, "Instances as PROFILE@START,..., e.g. 3g.40gb@0,3g.40gb@4")->required();
  validate->callback([flags, exit_code] { *exit_code = RunValidate(*flags); });

  CLI::App* plan = mig->add_subcommand("plan", "Plan MIG layouts for N GPUs against a demand, with the steps");
  plan->footer(
      "\nChooses target layouts that satisfy the most demand (weighted by memory slices), never\n"
      "touching in-use instances, and lists the destroy/create steps in order. Exact up to 8 GPUs.");
  plan->add_option("--models", flags->models_file, "JSON file of extra GPU models (schema of data/gpu-models/mig-profiles.json)");
  plan->add_option("--model", flags->model, "GPU model")->required();
  plan->add_option("--gpus", flags->gpus, "Number of GPUs (default 1)");
  plan->add_option("--demand", flags->demand, "PROFILE=COUNT,..., e.g. 1g.10gb=9,3g.40gb=2")->required();
  plan->add_option("--in-use", flags->in_use, "CSV gpu,profile,start,in_use of the instances that exist now");
  plan->add_flag("--json", flags->json, "JSON output: {gpus:[{index,instances:[{profile,start,size}]}],unsatisfied,steps}");
  plan->callback([flags, exit_code] { *exit_code = RunPlan(*flags); });

  CLI::App* show = mig->add_subcommand("show", "Show the node's GPUs' MIG mode and instances (read-only, via NVML)");
  show->add_option("--nvml", flags->nvml, "NVML library to load (default libnvidia-ml.so.1, the driver's)");
  show->add_flag("--json", flags->json, "JSON output");
  show->callback([flags, exit_code] { *exit_code = RunShow(*flags); });

  CLI::App* apply = mig->add_subcommand("apply", "Apply a MIG plan's steps to the node's GPUs (needs --yes)");
  apply->footer(
      "\nReads the steps of `tessera mig plan --json`, prints them, and with --yes applies them through\n"
      "NVML: each destroy removes the GPU instance's compute instances and then the instance, each\n"
      "create makes the GPU instance at its exact placement and the compute instance that fills it.\n"
      "Every step is checked against the driver first; nothing changes if one is wrong. Without\n"
      "--yes nothing is loaded and the command exits with 2.");
  apply->add_option("--models", flags->models_file, "JSON file of extra GPU models (schema of data/gpu-models/mig-profiles.json)");
  apply->add_option("--model", flags->model, "GPU model the plan was made for")->required();
  apply->add_option("--plan", flags->plan_file, "Plan JSON written by `tessera mig plan --json`")->required();
  apply->add_option("--nvml", flags->nvml, "NVML library to load (default libnvidia-ml.so.1, the driver's)");
  apply->add_flag("--yes", flags->yes, "Really change the GPUs' MIG instances");
  apply->callback([flags, exit_code] { *exit_code = RunApply(*flags); });

  CLI::App* simulate = mig->add_subcommand("simulate", "Dynamic vs static MIG serving of the trace's fractional tasks");
  simulate->footer(
      "\nMaps the trace's fractional GPU tasks to the nearest MIG profile and serves them on N GPUs:\n"
      "dynamic (fragmentation-aware instance placement) vs the best uniform static layout and\n"
      "static layouts planned for the mix; prints the unserved capacity when the requests reach\n"
      "100 % of capacity (median over seeds).");
  simulate->add_option("--models", flags->models_file, "JSON file of extra GPU models (schema of data/gpu-models/mig-profiles.json)");
  simulate->add_option("--model", flags->model, "GPU model")->required();
  simulate->add_option("--gpus", flags->gpus, "Number of GPUs (default 1)");
  simulate->add_option("--pods", flags->pods, "Pod list CSV (default: the bundled Alibaba default list)");
  simulate->add_option("--seeds", flags->seeds_text, "Seed range, e.g. 42-51");
  simulate->add_flag("--json", flags->json, "JSON output");
  simulate->callback([flags, exit_code] { *exit_code = RunMigSimulate(*flags); });
}

}  // namespace tessera::cli
