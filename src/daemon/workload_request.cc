#include "src/daemon/workload_request.h"

#include <map>

namespace tessera::daemon {

namespace {

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

Status Refuse(std::string* bad_field, const std::string& field, const std::string& message) {
  if (bad_field) *bad_field = field;
  return InvalidArgumentError(field + ": " + message);
}

}  // namespace

StatusOr<WorkloadRequest> DecodeWorkloadRequest(std::string_view body, const GpuModelCatalog& catalog,
                                                std::string* bad_field) {
  TESSERA_ASSIGN_OR_RETURN(const api::WorkloadRequest wire, api::DecodeWorkloadRequest(body, bad_field));
  return ResolveWorkloadRequest(wire, catalog, bad_field);
}

StatusOr<WorkloadRequest> ResolveWorkloadRequest(const api::WorkloadRequest& w, const GpuModelCatalog& catalog,
                                                 std::string* bad_field) {
  if (bad_field) bad_field->clear();
  WorkloadRequest r;
  r.tenant = w.tenant;
  r.name = w.name;
  r.gpus = w.gpus;
  r.gpu_milli = w.gpu_milli;
  r.gpu_mem_mib = w.gpu_mem_mib;
  r.mig_profile = w.mig_profile;
  r.vgpu_profile = w.vgpu_profile;
  r.latency_slo_ms = w.latency_slo_ms;
  r.priority = w.priority;
  r.pods = w.pods;
  r.cpu_milli = w.cpu_milli;
  r.memory_mib = w.memory_mib;
  r.workload_class = w.workload_class;
  r.label = w.label;
  r.command = w.command;
  if (w.qos.empty()) {
    r.qos_from_tenant = true;
  } else {
    StatusOr<sched::QosClass> q = sched::ParseQos(w.qos);
    if (!q.ok()) return Refuse(bad_field, "qos", "'" + w.qos + "' is not Guaranteed, Burstable or BestEffort");
    r.qos = *q;
  }
  if (!w.mode.empty()) {
    auto it = ModeNames().find(w.mode);
    if (it == ModeNames().end())
      return Refuse(bad_field, "mode", "'" + w.mode + "' is not exclusive, mig, mps, timeslice or fraction");
    r.mode = it->second;
  }
  if (w.isolation == "process") r.isolation = partition::Isolation::kProcess;
  if (w.isolation == "hardware") r.isolation = partition::Isolation::kHardware;
  if (!w.model.empty()) {
    StatusOr<GpuModelId> id = catalog.Find(w.model);
    if (!id.ok()) return Refuse(bad_field, "model", "unknown GPU model '" + w.model + "' (known: " + catalog.KnownNames() + ")");
    r.model = *id;
  }
  const std::string of = r.model ? catalog.info(*r.model).name : std::string("any known model");
  if (!r.mig_profile.empty() && !KnownMigProfile(catalog, r.model, r.mig_profile))
    return Refuse(bad_field, "mig_profile", "'" + r.mig_profile + "' is not a MIG profile of " + of);
  if (!r.vgpu_profile.empty() && !KnownVgpuProfile(catalog, r.model, r.vgpu_profile))
    return Refuse(bad_field, "vgpu_profile", "'" + r.vgpu_profile + "' is not a vGPU type of " + of);
  return r;
}

std::string_view ModeKindName(partition::SharingModeKind kind) {
  for (const auto& [name, k] : ModeNames())
    if (k == kind) return name;
  return kind == partition::SharingModeKind::kVgpu ? "vgpu" : "exclusive";
}

api::WorkloadRequest WorkloadRequestWire(const WorkloadRequest& r, const GpuModelCatalog& catalog) {
  api::WorkloadRequest w;
  w.tenant = r.tenant;
  w.name = r.name;
  w.gpus = r.gpus;
  if (!r.qos_from_tenant) w.qos = std::string(sched::QosName(r.qos));
  w.gpu_milli = r.gpu_milli;
  w.gpu_mem_mib = r.gpu_mem_mib;
  w.mig_profile = r.mig_profile;
  w.vgpu_profile = r.vgpu_profile;
  if (r.mode) w.mode = std::string(ModeKindName(*r.mode));
  if (r.isolation == partition::Isolation::kProcess) w.isolation = "process";
  if (r.isolation == partition::Isolation::kHardware) w.isolation = "hardware";
  w.latency_slo_ms = r.latency_slo_ms;
  w.priority = r.priority;
  w.pods = r.pods;
  w.cpu_milli = r.cpu_milli;
  w.memory_mib = r.memory_mib;
  if (r.model) w.model = catalog.info(*r.model).name;
  w.workload_class = r.workload_class;
  w.label = r.label;
  w.command = r.command;
  return w;
}

std::string EncodeWorkloadRequest(const WorkloadRequest& r, const GpuModelCatalog& catalog) {
  return api::EncodeWorkloadRequest(WorkloadRequestWire(r, catalog));
}

}  // namespace tessera::daemon
