#include "tessera/partition/mig_plan_json.h"

#include "tessera/core/json_error.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tessera::partition {
namespace {

using nlohmann::json;

json InstancesJson(const MigGeometry& g, MigLayout layout) {
  std::sort(layout.begin(), layout.end(), [](auto& a, auto& b) { return a.start < b.start; });
  json arr = json::array();
  for (const auto& i : layout) {
    const MigProfile& p = g.profiles[static_cast<size_t>(i.profile)];
    arr.push_back({{"profile", p.name}, {"start", i.start}, {"size", p.size}});
  }
  return arr;
}

StatusOr<MigPlanStep> DecodeStep(const MigGeometry& g, const json& st, const std::string& at) {
  if (!st.is_object()) return InvalidArgumentError(at + ": expected an object");
  const auto str = [&](const char* key) -> StatusOr<std::string> {
    if (!st.contains(key) || !st[key].is_string()) return InvalidArgumentError(at + "." + key + ": missing or not a string");
    return st[key].get<std::string>();
  };
  const auto num = [&](const char* key, int64_t lo, int64_t hi) -> StatusOr<int> {
    const bool ok = st.contains(key) && (st[key].is_number_integer() || st[key].is_number_unsigned()) &&
                    !(st[key].is_number_unsigned() && st[key].get<uint64_t>() > static_cast<uint64_t>(hi)) &&
                    st[key].get<int64_t>() >= lo && st[key].get<int64_t>() <= hi;
    if (!ok) {
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
  StatusOr<int> p = FindProfileIndex(g, profile);
  if (!p.ok()) return InvalidArgumentError(at + ".profile: " + p.status().message());
  const MigProfile& prof = g.profiles[static_cast<size_t>(*p)];
  if (std::find(prof.starts.begin(), prof.starts.end(), start) == prof.starts.end()) {
    return InvalidArgumentError(at + ": MIG profile " + prof.name + " cannot start at memory slice " +
                                std::to_string(start));
  }
  MigPlanStep step;
  step.kind = action == "create" ? MigPlanStep::Kind::kCreate : MigPlanStep::Kind::kDestroy;
  step.gpu = gpu;
  step.instance = {*p, start};
  return step;
}

}  // namespace

std::string EncodeMigLayoutsJson(const MigGeometry& g, const std::string& model, const std::vector<MigLayout>& layouts) {
  json j = {{"model", model}, {"layouts", json::array()}};
  for (const MigLayout& l : layouts) j["layouts"].push_back(InstancesJson(g, l));
  return j.dump(2) + "\n";
}

std::string EncodeMigValidLayoutJson(const MigGeometry& g, const std::string& model, const MigLayout& layout) {
  const json j = {{"model", model}, {"valid", true}, {"instances", InstancesJson(g, layout)}};
  return j.dump(2) + "\n";
}

std::string EncodeMigPlanJson(const MigGeometry& g, const std::string& model, const MigPlan& plan) {
  json j;
  j["model"] = model;
  j["gpus"] = json::array();
  for (size_t k = 0; k < plan.layouts.size(); ++k) {
    j["gpus"].push_back({{"index", k}, {"instances", InstancesJson(g, plan.layouts[k])}});
  }
  j["unsatisfied"] = json::object();
  for (const auto& [p, n] : plan.unsatisfied) j["unsatisfied"][p] = n;
  j["steps"] = json::array();
  for (const auto& s : plan.steps) {
    const MigProfile& p = g.profiles[static_cast<size_t>(s.instance.profile)];
    j["steps"].push_back({{"action", s.kind == MigPlanStep::Kind::kCreate ? "create" : "destroy"},
                          {"gpu", s.gpu},
                          {"profile", p.name},
                          {"start", s.instance.start},
                          {"size", p.size}});
  }
  j["satisfied_memory_slices"] = plan.satisfied_memory_slices;
  return j.dump(2) + "\n";
}

StatusOr<DecodedMigPlan> DecodeMigPlanJson(const GpuModelCatalog& catalog, GpuModelId model, std::string_view text,
                                           std::string_view source_view) {
  const std::string source(source_view);
  if (model.value() >= catalog.size() || !catalog.info(model).mig) {
    return InvalidArgumentError(source + ": the model has no MIG geometry");
  }
  const GpuModelInfo& info = catalog.info(model);
  const MigGeometry& g = *info.mig;
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgumentError(source + ":" + LineColumnAt(text, JsonErrorOffset(text)) +
                                ": not JSON (write the plan with `tessera mig plan --json FILE`)");
  }
  if (!j.is_object()) return InvalidArgumentError(source + ": not a JSON object");
  DecodedMigPlan out;
  if (j.contains("model")) {
    const json& m = j["model"];
    StatusOr<GpuModelId> id = m.is_string() ? catalog.Find(m.get<std::string>()) : StatusOr<GpuModelId>(NotFoundError(""));
    if (!id.ok() || *id != model) {
      return InvalidArgumentError(source + ": model: the plan is for " + m.dump() + ", not " + info.name);
    }
    out.model = m.get<std::string>();
  }
  if (!j.contains("steps") || !j["steps"].is_array()) {
    return InvalidArgumentError(source + ": steps: missing or not an array (write it with `tessera mig plan --json FILE`)");
  }
  const json& steps = j["steps"];
  for (size_t i = 0; i < steps.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(MigPlanStep step, DecodeStep(g, steps[i], source + ": steps[" + std::to_string(i) + "]"));
    out.steps.push_back(step);
  }
  return out;
}

StatusOr<DecodedMigPlan> ReadMigPlanFile(const GpuModelCatalog& catalog, GpuModelId model, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open file");
  std::stringstream text;
  text << in.rdbuf();
  return DecodeMigPlanJson(catalog, model, text.str(), path);
}

}  // namespace tessera::partition
