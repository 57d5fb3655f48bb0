#include "tessera/enforce/mig_report.h"

#include <nlohmann/json.hpp>

namespace tessera::enforce {
namespace {

using nlohmann::json;

json InstancesJson(const std::vector<MigInstanceState>& state) {
  json arr = json::array();
  for (const MigInstanceState& s : state) {
    json cis = json::array();
    for (const ComputeInstance& c : s.compute_instances) {
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

}  // namespace

StatusOr<std::vector<GpuMigReport>> ReadNodeMig(const NvmlApi& nvml) {
  TESSERA_ASSIGN_OR_RETURN(uint32_t count, nvml.DeviceCount());
  std::vector<GpuMigReport> out;
  for (uint32_t gpu = 0; gpu < count; ++gpu) {
    GpuMigReport r;
    r.index = gpu;
    StatusOr<std::string> name = nvml.DeviceName(gpu);
    r.name_ok = name.ok();
    r.name = name.ok() ? *name : name.status().message();
    StatusOr<MigMode> mode = nvml.GetMigMode(gpu);
    const bool mig = mode.ok() && mode->current_enabled;
    r.mig = !mode.ok() ? "not supported" : mig ? "enabled" : "disabled";
    if (mig) {
      TESSERA_ASSIGN_OR_RETURN(r.instances, ReadMigInstances(nvml, gpu));
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string FormatMigInstances(uint32_t gpu, const std::vector<MigInstanceState>& state, const MigGeometry* g) {
  std::string o = "  GPU " + std::to_string(gpu) + ":";
  if (state.empty()) o += " no GPU instances";
  for (const MigInstanceState& s : state) {
    std::string profile = "profile " + std::to_string(s.gpu_instance.profile_id) + " ";
    for (size_t i = 0; g != nullptr && i < g->profiles.size(); ++i) {
      if (g->profiles[i].profile_id == static_cast<int>(s.gpu_instance.profile_id)) profile = g->profiles[i].name;
    }
    o += " [gi " + std::to_string(s.gpu_instance.id) + " " + profile + "@" +
         std::to_string(s.gpu_instance.placement.start) + ":" + std::to_string(s.gpu_instance.placement.size);
    for (const ComputeInstance& c : s.compute_instances) {
      o += " ci " + std::to_string(c.id) + " @" + std::to_string(c.start) + ":" + std::to_string(c.size);
    }
    o += "]";
  }
  return o;
}

std::string EncodeNodeMigJson(const std::string& library, const std::vector<GpuMigReport>& gpus) {
  json j = {{"library", library}, {"gpus", json::array()}};
  for (const GpuMigReport& g : gpus) {
    j["gpus"].push_back(
        {{"index", g.index}, {"name", g.name}, {"mig", g.mig}, {"gpu_instances", InstancesJson(g.instances)}});
  }
  return j.dump(2) + "\n";
}

std::string EncodeMigApplyJson(const std::string& model, const std::string& library, const std::vector<MigStep>& steps,
                               const std::vector<MigStepResult>& applied,
                               const std::vector<std::pair<uint32_t, std::vector<MigInstanceState>>>& after) {
  json j = {{"model", model}, {"library", library}, {"steps", json::array()}, {"applied", json::array()},
            {"gpus", json::array()}};
  for (const MigStep& s : steps) j["steps"].push_back(s.Describe());
  for (const MigStepResult& r : applied) {
    j["applied"].push_back({{"step", r.step.Describe()},
                            {"gpu_instance_id", r.gpu_instance_id},
                            {"compute_instance_ids", r.compute_instance_ids}});
  }
  for (const auto& [gpu, state] : after) j["gpus"].push_back({{"index", gpu}, {"gpu_instances", InstancesJson(state)}});
  return j.dump(2) + "\n";
}

}  // namespace tessera::enforce
