#include "src/daemon/workload_request.h"

#include "tessera/api/json_fields.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

namespace tessera::daemon {

using json = nlohmann::json;

namespace {

using Decoder = api::JsonFields;

const std::map<std::string, partition::SharingModeKind>& ModeNames() {
  static const std::map<std::string, partition::SharingModeKind> names = {
      {"exclusive", partition::SharingModeKind::kExclusive},
      {"mig", partition::SharingModeKind::kMig},
      {"mps", partition::SharingModeKind::kMps},
      {"timeslice", partition::SharingModeKind::kTimeslice},
      {"fraction", partition::SharingModeKind::kFraction}};
  return names;
}

bool KnownMigProfile(const GpuModelCatalog& catalog, std::optional<GpuModelId> model, const std::string& name) {
  for (size_t m = 0; m < catalog.size(); ++m) {
    const GpuModelId id{static_cast<uint32_t>(m)};
    if (model && *model != id) continue;
    const auto& geometry = catalog.info(id).mig;
    if (geometry && geometry->FindProfile(name)) return true;
  }
  return false;
}

bool KnownVgpuProfile(const GpuModelCatalog& catalog, std::optional<GpuModelId> model, const std::string& name) {
  for (size_t m = 0; m < catalog.size(); ++m) {
    const GpuModelId id{static_cast<uint32_t>(m)};
    if (model && *model != id) continue;
    for (const VgpuProfile& p : catalog.info(id).vgpu)
      if (p.name == name) return true;
  }
  return false;
}

constexpr const char* kFields[] = {"tenant", "name", "gpus", "gpu_milli", "gpu_mem_mib", "mig_profile",
                                   "vgpu_profile", "mode", "isolation", "latency_slo_ms", "qos", "priority",
                                   "pods", "cpu_milli", "memory_mib", "model", "workload_class", "label",
                                   "command"};

// The fields that say what kind of GPU share it is, checked together.
Status CheckShape(const Decoder& d, const GpuModelCatalog& catalog, WorkloadRequest& r) {
  if (!r.mig_profile.empty() && !r.vgpu_profile.empty())
    return d.Fail("vgpu_profile", "give mig_profile or vgpu_profile, not both");
  if (r.gpu_milli < 1000 && r.gpus != 1)
    return d.Fail("gpu_milli", "a fraction of a GPU (" + std::to_string(r.gpu_milli) + " milli) needs gpus = 1");
  if (r.gpu_milli < 1000 && (!r.mig_profile.empty() || !r.vgpu_profile.empty()))
    return d.Fail("gpu_milli", "a MIG or vGPU profile sets the share: leave gpu_milli out");
  if (!r.mig_profile.empty() && !KnownMigProfile(catalog, r.model, r.mig_profile))
    return d.Fail("mig_profile", "'" + r.mig_profile + "' is not a MIG profile of " +
                                     (r.model ? catalog.info(*r.model).name : std::string("any known model")));
  if (!r.vgpu_profile.empty() && !KnownVgpuProfile(catalog, r.model, r.vgpu_profile))
    return d.Fail("vgpu_profile", "'" + r.vgpu_profile + "' is not a vGPU type of " +
                                      (r.model ? catalog.info(*r.model).name : std::string("any known model")));
  if (r.mode) {
    using K = partition::SharingModeKind;
    const bool fraction = r.gpu_milli < 1000;
    if (*r.mode == K::kMig && r.mig_profile.empty() && !fraction)
      return d.Fail("mode", "mode 'mig' needs mig_profile or a fraction (gpu_milli) to size the instance");
    if (*r.mode == K::kExclusive && fraction)
      return d.Fail("mode", "mode 'exclusive' takes whole GPUs: leave gpu_milli out");
    if ((*r.mode == K::kMps || *r.mode == K::kTimeslice || *r.mode == K::kFraction) && !r.mig_profile.empty())
      return d.Fail("mode", "a MIG profile runs in mode 'mig'");
  }
  if (r.gpu_milli < 1000 && r.gpu_mem_mib == 0)
    return d.Fail("gpu_mem_mib", "a fraction of a GPU needs its memory limit (MiB, > 0)");
  return Status::Ok();
}

}  // namespace

StatusOr<WorkloadRequest> DecodeWorkloadRequest(std::string_view body, const GpuModelCatalog& catalog,
                                                std::string* bad_field) {
  if (bad_field) bad_field->clear();
  TESSERA_ASSIGN_OR_RETURN(const json j, api::ParseJsonObject(body));
  Decoder d(j, "", bad_field);
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kFields), std::end(kFields), key) == std::end(kFields))
      return d.Fail(key, "unknown field (known: tenant, gpus, qos, gpu_milli, gpu_mem_mib, mig_profile, "
                         "vgpu_profile, mode, isolation, latency_slo_ms, priority, pods, cpu_milli, "
                         "memory_mib, model, workload_class, label, name, command)");
  }
  WorkloadRequest r;
  for (const char* required : {"tenant", "gpus"})
    if (!j.contains(required)) return d.Fail(required, "missing");
  TESSERA_ASSIGN_OR_RETURN(r.tenant, d.Str("tenant", 253));
  TESSERA_ASSIGN_OR_RETURN(r.name, d.Str("name", 253));
  if (j.contains("qos")) {
    TESSERA_ASSIGN_OR_RETURN(const std::string qos, d.Str("qos", 32));
    StatusOr<sched::QosClass> q = sched::ParseQos(qos);
    if (!q.ok()) return d.Fail("qos", "'" + qos + "' is not Guaranteed, Burstable or BestEffort");
    r.qos = *q;
  } else {
    r.qos_from_tenant = true;
  }
  TESSERA_ASSIGN_OR_RETURN(const int64_t gpus, d.Int("gpus", 1, 16, 1));
  r.gpus = static_cast<int32_t>(gpus);
  TESSERA_ASSIGN_OR_RETURN(const int64_t milli, d.Int("gpu_milli", 1, 1000, 1000));
  r.gpu_milli = static_cast<int32_t>(milli);
  TESSERA_ASSIGN_OR_RETURN(r.gpu_mem_mib, d.Int("gpu_mem_mib", 0, int64_t{1} << 31, 0));
  TESSERA_ASSIGN_OR_RETURN(const int64_t priority, d.Int("priority", -1000, 1000, 0));
  r.priority = static_cast<int32_t>(priority);
  TESSERA_ASSIGN_OR_RETURN(const int64_t pods, d.Int("pods", 1, 1024, 1));
  r.pods = static_cast<int32_t>(pods);
  TESSERA_ASSIGN_OR_RETURN(r.cpu_milli, d.Int("cpu_milli", 0, int64_t{1} << 31, 1000));
  TESSERA_ASSIGN_OR_RETURN(r.memory_mib, d.Int("memory_mib", 0, int64_t{1} << 31, 4096));
  TESSERA_ASSIGN_OR_RETURN(const std::string model, d.Str("model", 128));
  if (!model.empty()) {
    StatusOr<GpuModelId> id = catalog.Find(model);
    if (!id.ok()) return d.Fail("model", "unknown GPU model '" + model + "' (known: " + catalog.KnownNames() + ")");
    r.model = *id;
  }
  TESSERA_ASSIGN_OR_RETURN(r.mig_profile, d.Str("mig_profile", 32));
  TESSERA_ASSIGN_OR_RETURN(r.vgpu_profile, d.Str("vgpu_profile", 64));
  TESSERA_ASSIGN_OR_RETURN(const std::string mode, d.Str("mode", 32));
  if (!mode.empty()) {
    auto it = ModeNames().find(mode);
    if (it == ModeNames().end())
      return d.Fail("mode", "'" + mode + "' is not exclusive, mig, mps, timeslice or fraction");
    r.mode = it->second;
  }
  TESSERA_ASSIGN_OR_RETURN(const std::string isolation, d.Str("isolation", 32));
  if (isolation == "process") r.isolation = partition::Isolation::kProcess;
  else if (isolation == "hardware") r.isolation = partition::Isolation::kHardware;
  else if (!isolation.empty() && isolation != "none")
    return d.Fail("isolation", "'" + isolation + "' is not none, process or hardware");
  TESSERA_ASSIGN_OR_RETURN(const double slo, d.Number("latency_slo_ms"));
  if (!std::isnan(slo)) {
    if (!(slo > 0) || slo > 3600000) return d.Fail("latency_slo_ms", "must be > 0 and <= 3600000 (one hour)");
    r.latency_slo_ms = slo;
  }
  TESSERA_ASSIGN_OR_RETURN(r.workload_class, d.Str("workload_class", 63));
  TESSERA_ASSIGN_OR_RETURN(r.label, d.Str("label", 63));
  if (j.contains("command")) {
    const json& c = j["command"];
    if (!c.is_array() || c.empty() || c.size() > kMaxCommandArgs)
      return d.Fail("command", "expected an array of 1.." + std::to_string(kMaxCommandArgs) + " strings");
    for (size_t i = 0; i < c.size(); ++i) {
      const std::string at = "command[" + std::to_string(i) + "]";
      if (!c[i].is_string()) return d.Fail(at, "expected a string");
      const std::string& arg = c[i].get_ref<const std::string&>();
      if (arg.size() > kMaxCommandArgBytes || arg.find('\0') != std::string::npos || (i == 0 && arg.empty()))
        return d.Fail(at, i == 0 ? "the program must be a non-empty string without NUL of at most 4096 bytes"
                                 : "at most 4096 bytes, without NUL");
      r.command.push_back(arg);
    }
  }
  TESSERA_RETURN_IF_ERROR(CheckShape(d, catalog, r));
  return r;
}

std::string_view ModeKindName(partition::SharingModeKind kind) {
  for (const auto& [name, k] : ModeNames())
    if (k == kind) return name;
  return kind == partition::SharingModeKind::kVgpu ? "vgpu" : "exclusive";
}

std::string EncodeWorkloadRequest(const WorkloadRequest& r, const GpuModelCatalog& catalog) {
  json j = {{"tenant", r.tenant}, {"gpus", r.gpus}};
  if (!r.qos_from_tenant) j["qos"] = std::string(sched::QosName(r.qos));
  if (!r.name.empty()) j["name"] = r.name;
  if (r.gpu_milli != 1000) j["gpu_milli"] = r.gpu_milli;
  if (r.gpu_mem_mib != 0) j["gpu_mem_mib"] = r.gpu_mem_mib;
  if (!r.mig_profile.empty()) j["mig_profile"] = r.mig_profile;
  if (!r.vgpu_profile.empty()) j["vgpu_profile"] = r.vgpu_profile;
  if (r.mode) j["mode"] = std::string(ModeKindName(*r.mode));
  if (r.isolation == partition::Isolation::kProcess) j["isolation"] = "process";
  if (r.isolation == partition::Isolation::kHardware) j["isolation"] = "hardware";
  if (r.latency_slo_ms) j["latency_slo_ms"] = *r.latency_slo_ms;
  if (r.priority != 0) j["priority"] = r.priority;
  if (r.pods != 1) j["pods"] = r.pods;
  if (r.cpu_milli != 1000) j["cpu_milli"] = r.cpu_milli;
  if (r.memory_mib != 4096) j["memory_mib"] = r.memory_mib;
  if (r.model) j["model"] = catalog.info(*r.model).name;
  if (!r.workload_class.empty()) j["workload_class"] = r.workload_class;
  if (!r.label.empty()) j["label"] = r.label;
  if (!r.command.empty()) j["command"] = r.command;
  return j.dump();
}

}  // namespace tessera::daemon
