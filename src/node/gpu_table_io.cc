// The GPU table's file: read, write, remove, and publish from NVML (gpu_table.h).
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "agent_impl.h"
#include "tessera/enforce/mig_apply.h"
#include "tessera/node/gpu_table.h"

namespace tessera::node {

StatusOr<std::optional<std::vector<NodeGpuFacts>>> ReadGpuTable(const std::string& node_dir) {
  const std::string path = GpuTablePath(node_dir);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<std::vector<NodeGpuFacts>>();
    return UnavailableError(path + ": " + std::strerror(errno));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return UnavailableError(path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  TESSERA_ASSIGN_OR_RETURN(std::vector<NodeGpuFacts> gpus, ParseGpuTable(text.str(), path));
  return std::optional<std::vector<NodeGpuFacts>>(std::move(gpus));
}

StatusOr<std::vector<MigInstanceFacts>> ReadMigInstanceFacts(const enforce::NvmlApi& nvml, int gpu,
                                                             const MigGeometry* geometry) {
  const auto g = static_cast<uint32_t>(gpu);
  TESSERA_ASSIGN_OR_RETURN(std::vector<enforce::MigInstanceState> state, enforce::ReadMigInstances(nvml, g));
  // (a library without the MIG device calls: no UUIDs, the instances still counted)
  StatusOr<std::vector<enforce::MigDevice>> devices = nvml.MigDevices(g);
  std::vector<MigInstanceFacts> out;
  for (const enforce::MigInstanceState& s : state) {
    const uint32_t profile_id = s.gpu_instance.profile_id;
    std::string profile = "profile" + std::to_string(profile_id);
    uint64_t memory_mib = 0;
    const MigProfile* known = nullptr;
    for (size_t i = 0; geometry != nullptr && i < geometry->profiles.size(); ++i) {
      if (geometry->profiles[i].profile_id == static_cast<int>(profile_id)) known = &geometry->profiles[i];
    }
    if (known != nullptr) {
      profile = known->name;
      memory_mib = static_cast<uint64_t>(known->memory.value());
    }
    for (uint32_t index = 0; memory_mib == 0 && index < enforce::kGpuInstanceProfileIndexCount; ++index) {
      StatusOr<enforce::GpuInstanceProfile> info = nvml.GpuInstanceProfileInfo(g, index);
      if (info.ok() && info->id == profile_id) memory_mib = static_cast<uint64_t>(info->memory.value());
      if (!info.ok() && info.status().code() == StatusCode::kInvalidArgument) break;  // past the driver's count
    }
    for (const enforce::ComputeInstance& c : s.compute_instances) {
      MigInstanceFacts m{.gpu_instance_id = static_cast<int>(s.gpu_instance.id),
                         .compute_instance_id = static_cast<int>(c.id), .profile = profile, .memory_mib = memory_mib};
      for (size_t i = 0; devices.ok() && i < devices->size(); ++i) {
        const enforce::MigDevice& d = (*devices)[i];
        if (d.gpu_instance_id == s.gpu_instance.id && d.compute_instance_id == c.id) m.uuid = d.uuid;
      }
      out.push_back(std::move(m));
    }
  }
  return out;
}

StatusOr<std::vector<NodeGpuFacts>> DiscoverGpuFacts(const enforce::NvmlApi& nvml, const std::vector<int>& gpus) {
  TESSERA_ASSIGN_OR_RETURN(uint32_t count, nvml.DeviceCount());
  std::vector<NodeGpuFacts> out;
  for (int gpu : gpus) {
    if (gpu < 0 || static_cast<uint32_t>(gpu) >= count) {
      return NotFoundError("GPU " + std::to_string(gpu) + ": the node has " + std::to_string(count) + " GPU(s) (NVML)");
    }
    const auto g = static_cast<uint32_t>(gpu);
    NodeGpuFacts facts{.index = gpu};
    if (StatusOr<std::string> uuid = nvml.DeviceUuid(g); uuid.ok()) facts.uuid = *uuid;
    if (StatusOr<uint32_t> minor = nvml.MinorNumber(g); minor.ok()) facts.minor = static_cast<int>(*minor);
    if (StatusOr<enforce::DeviceMemory> memory = nvml.Memory(g); memory.ok()) {
      facts.memory_mib = static_cast<uint64_t>(memory->total.value());
    }
    // (a GPU without MIG support answers NOT_SUPPORTED: MIG off)
    if (StatusOr<enforce::MigMode> mig = nvml.GetMigMode(g); mig.ok()) facts.mig_enabled = mig->current_enabled;
    const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
    const MigGeometry* geometry = nullptr;
    if (StatusOr<std::string> name = nvml.DeviceName(g); name.ok()) {
      if (StatusOr<GpuModelId> id = catalog.Find(*name); id.ok()) {
        facts.model = catalog.info(*id).name;
        if (catalog.info(*id).mig) geometry = &*catalog.info(*id).mig;
      }
    }
    if (facts.mig_enabled) {
      TESSERA_ASSIGN_OR_RETURN(facts.mig_instances, ReadMigInstanceFacts(nvml, gpu, geometry));
    }
    out.push_back(std::move(facts));
  }
  return out;
}

Status WriteGpuTable(const std::string& node_dir, const std::vector<NodeGpuFacts>& gpus) {
  return internal::WriteFileAtomically(GpuTablePath(node_dir), FormatGpuTable(gpus));
}

Status RemoveGpuTable(const std::string& node_dir) {
  const std::string path = GpuTablePath(node_dir);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return UnavailableError("cannot remove " + path + ": " + std::strerror(errno));
  }
  return Status::Ok();
}

Status PublishGpuTable(const std::string& node_dir, const enforce::NvmlApi& nvml, std::vector<int> gpus) {
  StatusOr<std::vector<NodeGpuFacts>> facts = [&]() -> StatusOr<std::vector<NodeGpuFacts>> {
    if (gpus.empty()) {
      TESSERA_ASSIGN_OR_RETURN(uint32_t count, nvml.DeviceCount());
      for (uint32_t i = 0; i < count; ++i) gpus.push_back(static_cast<int>(i));
    }
    return DiscoverGpuFacts(nvml, gpus);
  }();
  Status written = facts.ok() ? WriteGpuTable(node_dir, *facts) : facts.status();
  if (!written.ok()) (void)RemoveGpuTable(node_dir);
  return written;
}

Status PublishGpuTable(const std::string& node_dir, const std::string& nvml_library, std::vector<int> gpus) {
  enforce::DlopenNvml nvml({.library_path = nvml_library});
  if (Status st = nvml.Init(); !st.ok()) {
    (void)RemoveGpuTable(node_dir);
    return st;
  }
  Status published = PublishGpuTable(node_dir, nvml, std::move(gpus));
  (void)nvml.Shutdown();  // read-only use
  return published;
}

}  // namespace tessera::node
