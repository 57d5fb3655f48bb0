#include "tessera/enforce/mig_apply.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

namespace tessera::enforce {
namespace {

std::string PlacementText(const GpuInstancePlacement& p) {
  return std::to_string(p.start) + ":" + std::to_string(p.size);
}

Status StepError(size_t i, const MigStep& step, const Status& why, const std::string& tail = "") {
  return Status(why.code(), "step " + std::to_string(i + 1) + " (" + step.Describe() +
                                "): " + why.message() + tail);
}

struct Resolved {
  uint32_t profile_id = 0;
  std::vector<GpuInstancePlacement> placements;
};

// What the preflight keeps per GPU: the GIs that will exist after each step.
struct SimGpu {
  std::vector<GpuInstance> gis;
  std::vector<GpuProcess> processes;
};

bool Overlaps(const GpuInstancePlacement& a, const GpuInstancePlacement& b) {
  return a.start < b.start + b.size && b.start < a.start + a.size;
}

// Checks every step against the driver without changing anything; fills `resolved` with the
// driver's profile id per (gpu, profile index).
Status Preflight(const NvmlApi& nvml, const std::vector<MigStep>& steps,
                 std::map<std::pair<uint32_t, uint32_t>, Resolved>* resolved) {
  TESSERA_ASSIGN_OR_RETURN(uint32_t gpu_count, nvml.DeviceCount());
  std::map<uint32_t, SimGpu> sim;
  for (size_t i = 0; i < steps.size(); ++i) {
    const MigStep& step = steps[i];
    if (step.gpu >= gpu_count) {
      return StepError(i, step, InvalidArgumentError("the node has " + std::to_string(gpu_count) +
                                                     " GPU(s)"));
    }
    if (!sim.count(step.gpu)) {
      StatusOr<MigMode> mode = nvml.GetMigMode(step.gpu);
      if (!mode.ok()) return StepError(i, step, mode.status());
      if (!mode->current_enabled) {
        return StepError(i, step, FailedPreconditionError("MIG mode is disabled on GPU " +
                                                          std::to_string(step.gpu)));
      }
      SimGpu g;
      TESSERA_ASSIGN_OR_RETURN(g.gis, nvml.GpuInstances(step.gpu));
      TESSERA_ASSIGN_OR_RETURN(g.processes, nvml.RunningProcesses(step.gpu));
      sim.emplace(step.gpu, std::move(g));
    }
    SimGpu& g = sim[step.gpu];
    const auto key = std::make_pair(step.gpu, step.profile_index);
    if (!resolved->count(key)) {
      StatusOr<GpuInstanceProfile> p = nvml.GpuInstanceProfileInfo(step.gpu, step.profile_index);
      if (!p.ok()) return StepError(i, step, p.status());
      if (p->slice_count != step.compute_slices) {
        return StepError(i, step, FailedPreconditionError(
                                      "the driver's profile at index " +
                                      std::to_string(step.profile_index) + " (" + p->name +
                                      ") has " + std::to_string(p->slice_count) +
                                      " compute slices, the plan expects " +
                                      std::to_string(step.compute_slices) +
                                      " (wrong --model for this GPU?)"));
      }
      Resolved r{.profile_id = p->id, .placements = {}};
      StatusOr<std::vector<GpuInstancePlacement>> pl =
          nvml.GpuInstancePossiblePlacements(step.gpu, p->id);
      if (!pl.ok()) return StepError(i, step, pl.status());
      r.placements = *pl;
      resolved->emplace(key, std::move(r));
    }
    const Resolved& r = resolved->at(key);
    if (step.kind == MigStep::Kind::kDestroy) {
      auto it = std::find_if(g.gis.begin(), g.gis.end(), [&](const GpuInstance& gi) {
        return gi.placement == step.placement && gi.profile_id == r.profile_id;
      });
      if (it == g.gis.end()) {
        return StepError(i, step, NotFoundError("no GPU instance of this profile at " +
                                                PlacementText(step.placement)));
      }
      for (const GpuProcess& proc : g.processes) {
        if (proc.gpu_instance_id == it->id) {
          return StepError(i, step, FailedPreconditionError(
                                        "process " + std::to_string(proc.pid) +
                                        " runs on GPU instance " + std::to_string(it->id)));
        }
      }
      g.gis.erase(it);
    } else {
      if (std::find(r.placements.begin(), r.placements.end(), step.placement) ==
          r.placements.end()) {
        std::string allowed;
        for (const GpuInstancePlacement& p : r.placements) {
          allowed += (allowed.empty() ? "" : ", ") + PlacementText(p);
        }
        return StepError(i, step, InvalidArgumentError("placement " +
                                                       PlacementText(step.placement) +
                                                       " is not one the driver allows (" +
                                                       allowed + ")"));
      }
      for (const GpuInstance& gi : g.gis) {
        if (Overlaps(gi.placement, step.placement)) {
          return StepError(i, step, FailedPreconditionError(
                                        "memory slices " + PlacementText(step.placement) +
                                        " overlap GPU instance " + std::to_string(gi.id) +
                                        " at " + PlacementText(gi.placement)));
        }
      }
      g.gis.push_back({.id = 0, .profile_id = r.profile_id, .placement = step.placement});
    }
  }
  return Status::Ok();
}

}  // namespace

std::string MigStep::Describe() const {
  return std::string(kind == Kind::kCreate ? "create " : "destroy ") + profile + "@" +
         std::to_string(placement.start) + " on GPU " + std::to_string(gpu);
}

StatusOr<MigStep> CatalogMigStep(const MigGeometry& geometry, MigStep::Kind kind, uint32_t gpu,
                                 int profile, int start) {
  if (profile < 0 || static_cast<size_t>(profile) >= geometry.profiles.size()) {
    return InvalidArgumentError("MIG profile index " + std::to_string(profile) +
                                " is outside the model's " +
                                std::to_string(geometry.profiles.size()) + " profiles");
  }
  const MigProfile& p = geometry.profiles[static_cast<size_t>(profile)];
  if (std::find(p.starts.begin(), p.starts.end(), start) == p.starts.end()) {
    return InvalidArgumentError("MIG profile " + p.name + " cannot start at memory slice " +
                                std::to_string(start));
  }
  MigStep step;
  step.kind = kind;
  step.gpu = gpu;
  step.profile = p.name;
  step.profile_index = static_cast<uint32_t>(p.nvml_profile_index);
  step.compute_slices = static_cast<uint32_t>(p.compute_slices);
  step.placement = {.start = static_cast<uint32_t>(start), .size = static_cast<uint32_t>(p.size)};
  for (const MigComputeProfile& c : p.compute_profiles) {
    if (c.fills_gpu_instance) step.ci_profile_index = c.nvml_profile_index;
  }
  return step;
}

Status CheckMigStepsModel(const NvmlApi& nvml, const GpuModelCatalog& catalog, GpuModelId model,
                          const std::vector<MigStep>& steps) {
  TESSERA_ASSIGN_OR_RETURN(uint32_t gpu_count, nvml.DeviceCount());
  const std::string& want = catalog.info(model).name;
  std::vector<uint32_t> checked;
  for (const MigStep& step : steps) {
    if (step.gpu >= gpu_count) continue;
    if (std::find(checked.begin(), checked.end(), step.gpu) != checked.end()) continue;
    checked.push_back(step.gpu);
    StatusOr<std::string> name = nvml.DeviceName(step.gpu);
    if (!name.ok()) {
      return Status(name.status().code(), "GPU " + std::to_string(step.gpu) + ": cannot read its name: " +
                                              name.status().message());
    }
    StatusOr<GpuModelId> id = catalog.FindByNvmlName(*name);
    if (!id.ok()) {
      return FailedPreconditionError("GPU " + std::to_string(step.gpu) + " is an " + *name +
                                     ", a model the catalog does not know: the plan was made for " + want);
    }
    if (*id != model) {
      return FailedPreconditionError("GPU " + std::to_string(step.gpu) + " is an " + *name + " (" +
                                     catalog.info(*id).name + "), not a " + want + ": the plan was made for " +
                                     want);
    }
  }
  return Status::Ok();
}

StatusOr<std::vector<MigStepResult>> ApplyMigSteps(NvmlApi& nvml, const std::vector<MigStep>& steps) {
  std::map<std::pair<uint32_t, uint32_t>, Resolved> resolved;
  TESSERA_RETURN_IF_ERROR(Preflight(nvml, steps, &resolved));
  std::vector<MigStepResult> out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const MigStep& step = steps[i];
    const uint32_t profile_id = resolved.at({step.gpu, step.profile_index}).profile_id;
    const std::string done = "; " + std::to_string(i) + " earlier step(s) were applied";
    MigStepResult result{.step = step, .gpu_instance_id = 0, .compute_instance_ids = {}};
    if (step.kind == MigStep::Kind::kDestroy) {
      StatusOr<std::vector<GpuInstance>> gis = nvml.GpuInstances(step.gpu);
      if (!gis.ok()) return StepError(i, step, gis.status(), done);
      auto it = std::find_if(gis->begin(), gis->end(), [&](const GpuInstance& gi) {
        return gi.placement == step.placement && gi.profile_id == profile_id;
      });
      if (it == gis->end()) {
        return StepError(i, step, NotFoundError("the GPU instance is gone"), done);
      }
      result.gpu_instance_id = it->id;
      StatusOr<std::vector<ComputeInstance>> cis = nvml.ComputeInstances(step.gpu, it->id);
      if (!cis.ok()) return StepError(i, step, cis.status(), done);
      for (const ComputeInstance& ci : *cis) {
        if (Status s = nvml.DestroyComputeInstance(step.gpu, it->id, ci.id); !s.ok()) {
          return StepError(i, step, s, done);
        }
        result.compute_instance_ids.push_back(ci.id);
      }
      if (Status s = nvml.DestroyGpuInstance(step.gpu, it->id); !s.ok()) {
        return StepError(i, step, s, done);
      }
    } else {
      StatusOr<GpuInstance> gi = nvml.CreateGpuInstance(step.gpu, profile_id, step.placement);
      if (!gi.ok()) return StepError(i, step, gi.status(), done);
      result.gpu_instance_id = gi->id;
      if (step.ci_profile_index >= 0) {
        StatusOr<ComputeInstance> ci = nvml.CreateComputeInstance(
            step.gpu, gi->id, static_cast<uint32_t>(step.ci_profile_index));
        if (!ci.ok()) {
          return StepError(i, step, ci.status(),
                           done + " and GPU instance " + std::to_string(gi->id) +
                               " was created without a compute instance");
        }
        result.compute_instance_ids.push_back(ci->id);
      }
    }
    out.push_back(std::move(result));
  }
  return out;
}

StatusOr<std::vector<MigInstanceState>> ReadMigInstances(const NvmlApi& nvml, uint32_t gpu) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<GpuInstance> gis, nvml.GpuInstances(gpu));
  std::vector<MigInstanceState> out;
  for (const GpuInstance& gi : gis) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<ComputeInstance> cis, nvml.ComputeInstances(gpu, gi.id));
    out.push_back({.gpu_instance = gi, .compute_instances = std::move(cis)});
  }
  return out;
}

}  // namespace tessera::enforce
