// MigInstances (src/integrations/k8s/dra_mig.h): a MIG device's instance, found or created.
#include "src/integrations/k8s/dra_mig.h"

#include <algorithm>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/enforce/mig_apply.h"
#include "tessera/integrations/k8s/names.h"
#include "tessera/node/inventory.h"
#include "tessera/node/launcher.h"

namespace tessera::k8s {
namespace {

constexpr uint64_t kMiBBytes = 1ULL << 20;

std::string LayoutText(const std::vector<api::InventoryMigInstance>& instances) {
  std::string out;
  for (const api::InventoryMigInstance& m : instances)
    out += (out.empty() ? "" : ",") + m.profile + "@" + std::to_string(m.start);
  return out;
}

// The catalog model of GPU `gpu` by NVML's name, with its MIG geometry.
struct GpuMigModel {
  GpuModelId id;
  const MigGeometry* geometry = nullptr;
  std::string name;
};

StatusOr<GpuMigModel> MigModelOf(const enforce::NvmlApi& nvml, int gpu) {
  const std::string at = "GPU " + std::to_string(gpu);
  StatusOr<std::string> nvml_name = nvml.DeviceName(static_cast<uint32_t>(gpu));
  if (!nvml_name.ok()) return FailedPreconditionError(at + ": NVML: " + std::string(nvml_name.status().message()));
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  StatusOr<GpuModelId> id = catalog.FindByNvmlName(*nvml_name);
  if (!id.ok()) return FailedPreconditionError(at + " (" + *nvml_name + "): not a GPU model the catalog knows");
  const GpuModelInfo& info = catalog.info(*id);
  if (!info.mig) return FailedPreconditionError(at + " (" + info.name + "): the model has no MIG");
  StatusOr<enforce::MigMode> mode = nvml.GetMigMode(static_cast<uint32_t>(gpu));
  if (!mode.ok() || !mode->current_enabled) {
    return FailedPreconditionError(at + " (" + info.name + "): not in MIG mode");
  }
  return GpuMigModel{.id = *id, .geometry = &*info.mig, .name = info.name};
}

}  // namespace

MigInstances::MigInstances(std::string nvml_library, bool allow_reconfigure)
    : library_(std::move(nvml_library)), allow_reconfigure_(allow_reconfigure) {}

MigInstances::~MigInstances() {
  if (open_) (void)nvml_->Shutdown();
}

Status MigInstances::Open() {
  if (open_) return Status::Ok();
  nvml_ = std::make_unique<enforce::DlopenNvml>(enforce::NvmlOptions{.library_path = library_});
  if (Status st = nvml_->Init(); !st.ok()) {
    return FailedPreconditionError("NVML: " + std::string(st.message()) +
                                   " (a MIG instance is selected by its UUID, which only NVML gives)");
  }
  open_ = true;
  return Status::Ok();
}

StatusOr<MigInstanceUse> MigInstances::Acquire(const AllocatedDevice& device,
                                               const std::map<std::string, std::string>& held) {
  TESSERA_RETURN_IF_ERROR(Open());
  const int gpu = device.gpu;
  const auto g = static_cast<uint32_t>(gpu);
  TESSERA_ASSIGN_OR_RETURN(GpuMigModel model, MigModelOf(*nvml_, gpu));
  int profile_index = -1;
  for (size_t i = 0; i < model.geometry->profiles.size(); ++i) {
    const MigProfile& p = model.geometry->profiles[i];
    if (ProfileLabel(p.name) == device.mig_profile_label &&
        std::find(p.starts.begin(), p.starts.end(), device.mig_start) != p.starts.end()) {
      profile_index = static_cast<int>(i);
    }
  }
  if (profile_index < 0) {
    return InvalidArgumentError("GPU " + std::to_string(gpu) + " (" + model.name +
                                ") has no MIG profile '" + device.mig_profile_label + "' that starts at memory slice " +
                                std::to_string(device.mig_start));
  }
  const MigProfile& profile = model.geometry->profiles[static_cast<size_t>(profile_index)];
  MigInstanceUse use{.profile = profile.name, .start = device.mig_start};
  const std::string where =
      "MIG instance " + profile.name + "@" + std::to_string(use.start) + " on GPU " + std::to_string(gpu);

  TESSERA_ASSIGN_OR_RETURN(std::vector<api::InventoryMigInstance> instances,
                           node::DiscoverMigInstances(*nvml_, g, *model.geometry));
  auto found = std::find_if(instances.begin(), instances.end(),
                            [&](const api::InventoryMigInstance& m) { return m.start == use.start; });
  if (found != instances.end() && found->profile != profile.name) {
    return FailedPreconditionError(where + ": the GPU has a " + found->profile + " instance at memory slice " +
                                   std::to_string(use.start) + " (never changed for a claim)");
  }
  if (found == instances.end()) {
    if (!allow_reconfigure_) {
      return FailedPreconditionError(where + " does not exist (the GPU has '" + LayoutText(instances) +
                                     "'), and the driver runs without --allow-mig-reconfigure: create it (the "
                                     "agent's MIG layout, nvidia-smi mig -cgi) or let the driver do it");
    }
    StatusOr<enforce::MigStep> step =
        enforce::CatalogMigStep(*model.geometry, enforce::MigStep::Kind::kCreate, g, profile_index, use.start);
    Status made = step.status();
    if (made.ok()) made = enforce::CheckMigStepsModel(*nvml_, GpuModelCatalog::Builtin(), model.id, {*step});
    if (made.ok()) made = enforce::ApplyMigSteps(*nvml_, {*step}).status();
    if (!made.ok()) return FailedPreconditionError(where + " could not be created: " + std::string(made.message()));
    use.created = true;
  } else {
    StatusOr<std::string> uuid = node::MigInstanceUuid(*nvml_, gpu, use.start);
    if (uuid.ok()) {
      if (auto h = held.find(*uuid); h != held.end()) {
        return FailedPreconditionError(where + " (" + *uuid + ") is prepared for claim " + h->second +
                                       ": a MIG instance is never shared");
      }
    }
    if (found->in_use) {
      return FailedPreconditionError(where + ": a process that is not a claim's of this driver runs in it "
                                     "(a MIG instance is never shared)");
    }
  }
  StatusOr<std::string> uuid = node::MigInstanceUuid(*nvml_, gpu, use.start);
  Status got = uuid.status();
  StatusOr<std::vector<enforce::MigDevice>> devices = nvml_->MigDevices(g);
  StatusOr<enforce::GpuInstanceProfile> info =
      nvml_->GpuInstanceProfileInfo(g, static_cast<uint32_t>(profile.nvml_profile_index));
  if (got.ok() && !devices.ok()) got = devices.status();
  if (got.ok() && !info.ok()) got = info.status();
  if (got.ok()) {
    use.uuid = *uuid;
    for (const enforce::MigDevice& d : *devices) {
      if (d.uuid != use.uuid) continue;
      use.gpu_instance_id = d.gpu_instance_id;
      use.compute_instance_id = d.compute_instance_id;
    }
    use.mem_bytes = static_cast<uint64_t>(info->memory.value()) * kMiBBytes;
    StatusOr<uint32_t> minor = nvml_->MinorNumber(g);
    use.parent_minor = minor.ok() ? static_cast<int>(*minor) : -1;
    return use;
  }
  if (use.created) (void)Release(gpu, use);  // not usable: the GPU goes back to what it had
  return FailedPreconditionError(where + ": " + std::string(got.message()));
}

StatusOr<bool> MigInstances::Release(int gpu, const MigInstanceUse& use) {
  if (!use.created) return false;
  TESSERA_RETURN_IF_ERROR(Open());
  TESSERA_ASSIGN_OR_RETURN(GpuMigModel model, MigModelOf(*nvml_, gpu));
  int profile_index = -1;
  for (size_t i = 0; i < model.geometry->profiles.size(); ++i) {
    if (model.geometry->profiles[i].name == use.profile) profile_index = static_cast<int>(i);
  }
  TESSERA_ASSIGN_OR_RETURN(enforce::MigStep step,
                           enforce::CatalogMigStep(*model.geometry, enforce::MigStep::Kind::kDestroy,
                                                   static_cast<uint32_t>(gpu), profile_index, use.start));
  TESSERA_RETURN_IF_ERROR(enforce::ApplyMigSteps(*nvml_, {step}).status());
  return true;
}

}  // namespace tessera::k8s
