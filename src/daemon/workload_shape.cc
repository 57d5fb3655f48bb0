#include "src/daemon/workload_shape.h"

#include "tessera/placement/cluster_snapshot.h"

#include <chrono>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::daemon {

using json = nlohmann::json;
using partition::SharingModeKind;

namespace {

Status Fail(std::string* bad_field, const std::string& field, const std::string& message) {
  if (bad_field) *bad_field = field;
  return InvalidArgumentError(field + ": " + message);
}

// The models whose MIG geometry has `profile`.
std::vector<GpuModelId> ModelsWithProfile(const GpuModelCatalog& catalog, const std::string& profile) {
  std::vector<GpuModelId> out;
  for (size_t m = 0; m < catalog.size(); ++m) {
    const GpuModelId id{static_cast<uint32_t>(m)};
    if (catalog.info(id).mig && catalog.info(id).mig->FindProfile(profile)) out.push_back(id);
  }
  return out;
}

int32_t ProfileIndex(const MigGeometry& g, const std::string& profile) {
  for (size_t i = 0; i < g.profiles.size(); ++i)
    if (g.profiles[i].name == profile) return static_cast<int32_t>(i);
  return -1;
}

}  // namespace

StatusOr<WorkloadShape> ResolveWorkload(const WorkloadRequest& r, std::optional<GpuModelId> default_model,
                                        const GpuModelCatalog& catalog, std::string* bad_field) {
  WorkloadShape out;
  out.request = r;
  if (!r.vgpu_profile.empty() || (r.mode && *r.mode == SharingModeKind::kVgpu))
    return Fail(bad_field, "vgpu_profile",
                "vGPU types run in virtual machines, which this control plane does not place");
  std::optional<GpuModelId> model = r.model;
  placement::TaskRequest pod;
  pod.cpu = CpuMilli{r.cpu_milli};
  pod.memory = MiB{r.memory_mib};
  pod.num_gpu = r.gpus;
  pod.gpu_milli = GpuMilli{r.gpu_milli};
  partition::SharingMode mode;
  std::string reason;

  std::string mig_profile = r.mig_profile;
  const bool fraction = r.gpu_milli < 1000;
  const bool mig_to_size = mig_profile.empty() && r.mode && *r.mode == SharingModeKind::kMig;
  const bool needs_model = r.isolation == partition::Isolation::kHardware || r.latency_slo_ms.has_value();
  if (!model && (mig_to_size || (!r.mode && fraction && needs_model))) model = default_model;
  if (mig_to_size || (mig_profile.empty() && !r.mode && fraction && (model || needs_model))) {
    // ChooseMode decides (or, for an explicit "mig", sizes the instance) on the model.
    if (!model)
      return Fail(bad_field, "model",
                  "name a GPU model: no node has registered yet to choose a mode for this request");
    partition::ModeRequest mr;
    mr.memory = MiB{r.gpu_mem_mib};
    mr.compute = GpuMilli{r.gpu_milli};
    mr.isolation = mig_to_size ? partition::Isolation::kHardware : r.isolation;
    if (r.latency_slo_ms)
      mr.latency_slo = std::chrono::milliseconds(static_cast<int64_t>(std::max(1.0, *r.latency_slo_ms)));
    StatusOr<partition::ModeChoice> choice = partition::ChooseMode(catalog.info(*model), mr);
    if (!choice.ok()) return Fail(bad_field, "gpu_mem_mib", std::string(choice.status().message()));
    if (mig_to_size && choice->mode.kind != SharingModeKind::kMig)
      return Fail(bad_field, "mode", "no MIG profile of " + catalog.info(*model).name + " covers " +
                                         std::to_string(r.gpu_milli) + " milli and " +
                                         std::to_string(r.gpu_mem_mib) + " MiB");
    mode = choice->mode;
    reason = choice->reason;
    if (mode.kind == SharingModeKind::kMig) mig_profile = mode.profile;
  } else if (!mig_profile.empty()) {
    mode.kind = SharingModeKind::kMig;
    mode.profile = mig_profile;
    reason = "MIG profile given by the request";
  } else if (r.mode) {
    mode.kind = *r.mode;
    reason = "mode given by the request";
  } else {
    // No model to choose on (and no need of one: no hardware isolation, no SLO): the rules of
    // ChooseMode that need none decide (whole GPUs, process isolation, the fractional share).
    partition::ModeRequest mr;
    mr.memory = MiB{r.gpu_mem_mib};
    mr.compute = GpuMilli{std::min(r.gpu_milli, 1000)};
    mr.isolation = r.isolation;
    StatusOr<partition::ModeChoice> choice = partition::ChooseModeWithoutModel(mr);
    if (!choice.ok()) return Fail(bad_field, "model", std::string(choice.status().message()));
    mode = choice->mode;
    reason = choice->reason;
  }

  switch (mode.kind) {
    case SharingModeKind::kExclusive:
      pod.gpu_milli = kWholeGpu;
      break;
    case SharingModeKind::kMig: {
      if (!model) {
        const std::vector<GpuModelId> with = ModelsWithProfile(catalog, mig_profile);
        if (with.size() == 1) model = with[0];
        else {
          std::string names;
          for (GpuModelId m : with) names += (names.empty() ? "" : ", ") + catalog.info(m).name;
          return Fail(bad_field, "model", "name the GPU model for MIG profile '" + mig_profile + "' (it exists on " +
                                              names + ")");
        }
      }
      const auto& geometry = catalog.info(*model).mig;
      const int32_t index = geometry ? ProfileIndex(*geometry, mig_profile) : -1;
      if (index < 0)
        return Fail(bad_field, "mig_profile", "'" + mig_profile + "' is not a MIG profile of " + catalog.info(*model).name);
      mode.profile = mig_profile;
      pod.mig_profile = index;
      // The instance's share of the GPU, as the placement engine counts it (memory slices).
      pod.gpu_milli = GpuMilli{placement::ClusterSnapshot::MigInstanceMilli(*geometry, index)};
      break;
    }
    case SharingModeKind::kMps:
      mode.thread_pct = std::max(1, r.gpu_milli / 10);
      mode.memory_limit = MiB{r.gpu_mem_mib};
      break;
    case SharingModeKind::kTimeslice:
      mode.weight = r.gpu_milli;
      mode.memory_limit = MiB{r.gpu_mem_mib};
      break;
    case SharingModeKind::kFraction:
      mode.milli = GpuMilli{r.gpu_milli};
      mode.memory_limit = MiB{r.gpu_mem_mib};
      break;
    case SharingModeKind::kVgpu:
      break;
  }
  // The pod is tied to a model when the request named one, or its MIG profile belongs to one.
  if (model && (r.model || mode.kind == SharingModeKind::kMig)) pod.allowed_models = ModelBit(*model);
  if (Status st = placement::ValidateTask(pod); !st.ok()) return Fail(bad_field, "gpus", std::string(st.message()));
  out.mode = mode;
  out.mode_reason = reason;
  out.job.tenant = r.tenant;
  out.job.qos = r.qos;
  out.job.priority = r.priority;
  out.job.pods = r.pods;
  out.job.pod = pod;
  out.job.gpu_memory = MiB{r.gpu_mem_mib};
  out.job.workload_class = r.workload_class;
  out.job.label = r.label;
  return out;
}

std::string WorkloadSpecJson(const WorkloadShape& s, const GpuModelCatalog& catalog) {
  const placement::TaskRequest& p = s.job.pod;
  json pod = {{"cpu_milli", p.cpu.value()}, {"memory_mib", p.memory.value()}, {"num_gpu", p.num_gpu},
              {"gpu_milli", p.gpu_milli.value()}, {"mig_profile", p.mig_profile},
              {"mig_profile_name", s.mode.profile}};
  for (size_t m = 0; m < catalog.size(); ++m)
    if (p.allowed_models == ModelBit(GpuModelId{static_cast<uint32_t>(m)}))
      pod["model"] = catalog.info(GpuModelId{static_cast<uint32_t>(m)}).name;
  return json{{"request", json::parse(EncodeWorkloadRequest(s.request, catalog))},
              {"mode", s.mode.ToString()},
              {"mode_kind", std::string(ModeKindName(s.mode.kind))},
              {"mode_reason", s.mode_reason},
              {"pod", pod},
              {"gpu_memory_mib", s.job.gpu_memory.value()}}
      .dump();
}

StatusOr<WorkloadShape> ParseWorkloadSpec(std::string_view spec_json, const GpuModelCatalog& catalog) {
  const json j = json::parse(spec_json.begin(), spec_json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("request") || !j.contains("pod"))
    return InternalError("stored workload spec is not what the control plane writes");
  std::string field;
  StatusOr<WorkloadRequest> r = DecodeWorkloadRequest(j["request"].dump(), catalog, &field);
  if (!r.ok()) return InternalError("stored workload request: " + std::string(r.status().message()));
  WorkloadShape s;
  s.request = *r;
  const json& pod = j["pod"];
  s.job.tenant = r->tenant;
  s.job.qos = r->qos;
  s.job.priority = r->priority;
  s.job.pods = r->pods;
  s.job.workload_class = r->workload_class;
  s.job.label = r->label;
  s.job.pod.cpu = CpuMilli{pod.value("cpu_milli", int64_t{0})};
  s.job.pod.memory = MiB{pod.value("memory_mib", int64_t{0})};
  s.job.pod.num_gpu = pod.value("num_gpu", 0);
  s.job.pod.gpu_milli = GpuMilli{pod.value("gpu_milli", 1000)};
  s.job.pod.mig_profile = pod.value("mig_profile", -1);
  if (pod.contains("model")) {
    StatusOr<GpuModelId> m = catalog.Find(pod["model"].get<std::string>());
    if (!m.ok()) return InternalError("stored workload: unknown model " + pod["model"].dump());
    s.job.pod.allowed_models = ModelBit(*m);
  }
  s.job.gpu_memory = MiB{j.value("gpu_memory_mib", int64_t{0})};
  s.mode_reason = j.value("mode_reason", std::string());
  const std::string kind = j.value("mode_kind", std::string("exclusive"));
  for (SharingModeKind k : {SharingModeKind::kExclusive, SharingModeKind::kMig, SharingModeKind::kMps,
                            SharingModeKind::kTimeslice, SharingModeKind::kFraction})
    if (ModeKindName(k) == kind) s.mode.kind = k;
  if (s.mode.kind == SharingModeKind::kMig) s.mode.profile = pod.value("mig_profile_name", std::string());
  s.mode.memory_limit = MiB{r->gpu_mem_mib};
  s.mode.milli = GpuMilli{r->gpu_milli};
  s.mode.weight = r->gpu_milli;
  s.mode.thread_pct = std::max(1, r->gpu_milli / 10);
  return s;
}

}  // namespace tessera::daemon
