#include "tessera/node/inventory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "tessera/enforce/segment.h"

namespace tessera::node {

StatusOr<Inventory> DiscoverInventory(const enforce::NvmlApi& nvml, const GpuModelCatalog& catalog) {
  Inventory out;
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  out.cpu_milli = cpus > 0 ? int64_t{cpus} * 1000 : 0;
  out.memory_mib = pages > 0 && page > 0 ? int64_t{pages} * page / (1 << 20) : 0;
  TESSERA_ASSIGN_OR_RETURN(const uint32_t count, nvml.DeviceCount());
  if (count > static_cast<uint32_t>(enforce::kMaxGpus)) {
    return FailedPreconditionError("NVML reports " + std::to_string(count) + " GPUs; a node has at most " +
                                   std::to_string(enforce::kMaxGpus));
  }
  for (uint32_t g = 0; g < count; ++g) {
    const std::string at = "GPU " + std::to_string(g) + ": ";
    TESSERA_ASSIGN_OR_RETURN(const std::string name, nvml.DeviceName(g));
    StatusOr<GpuModelId> model = catalog.Find(name);
    if (!model.ok()) return FailedPreconditionError(at + "the GPU model catalog does not know '" + name + "'");
    InventoryGpu gpu;
    gpu.index = static_cast<int>(g);
    TESSERA_ASSIGN_OR_RETURN(gpu.uuid, nvml.DeviceUuid(g));
    TESSERA_ASSIGN_OR_RETURN(const enforce::DeviceMemory memory, nvml.Memory(g));
    gpu.memory_mib = memory.total.value();
    gpu.model = catalog.info(*model).name;
    if (catalog.info(*model).mig) {
      StatusOr<enforce::MigMode> mig = nvml.GetMigMode(g);
      if (mig.ok()) gpu.mig_enabled = mig->current_enabled;
      else if (mig.status().code() != StatusCode::kUnimplemented)
        return Status(mig.status().code(), at + std::string(mig.status().message()));
      if (gpu.mig_enabled) {
        TESSERA_ASSIGN_OR_RETURN(gpu.mig_instances, DiscoverMigInstances(nvml, g, *catalog.info(*model).mig));
      }
    }
    out.gpus.push_back(std::move(gpu));
  }
  return out;
}

StatusOr<std::vector<api::InventoryMigInstance>> DiscoverMigInstances(const enforce::NvmlApi& nvml, uint32_t gpu,
                                                                      const MigGeometry& geometry) {
  const std::string at = "GPU " + std::to_string(gpu) + ": ";
  TESSERA_ASSIGN_OR_RETURN(const std::vector<enforce::GpuInstance> instances, nvml.GpuInstances(gpu));
  std::vector<enforce::GpuProcess> processes;
  if (!instances.empty()) {
    StatusOr<std::vector<enforce::GpuProcess>> p = nvml.RunningProcesses(gpu);
    if (!p.ok()) return Status(p.status().code(), at + std::string(p.status().message()));
    processes = std::move(*p);
  }
  std::vector<api::InventoryMigInstance> out;
  for (const enforce::GpuInstance& gi : instances) {
    const MigProfile* profile = nullptr;
    for (const MigProfile& p : geometry.profiles)
      if (p.profile_id == static_cast<int>(gi.profile_id) && p.size == static_cast<int>(gi.placement.size)) profile = &p;
    if (profile == nullptr)
      return FailedPreconditionError(at + "GPU instance " + std::to_string(gi.id) + " (profile id " +
                                     std::to_string(gi.profile_id) + " at " + std::to_string(gi.placement.start) +
                                     ":" + std::to_string(gi.placement.size) +
                                     ") is of a MIG profile the GPU model catalog does not know");
    bool in_use = false;
    for (const enforce::GpuProcess& p : processes) in_use |= p.gpu_instance_id && *p.gpu_instance_id == gi.id;
    out.push_back({profile->name, static_cast<int>(gi.placement.start), in_use});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  return out;
}

std::string InventoryJson(const Inventory& inventory, std::string_view agent_id, bool mig_reconfigure) {
  api::NodeInventory body{inventory.cpu_milli, inventory.memory_mib, inventory.gpus, std::string(agent_id), ""};
  body.mig_reconfigure = mig_reconfigure;
  return api::EncodeNodeInventory(body);
}

StatusOr<std::string> FakeNvmlConfig(const std::string& fake_gpus, const GpuModelCatalog& catalog) {
  std::string out;
  int total = 0;
  size_t begin = 0;
  while (begin <= fake_gpus.size()) {
    size_t end = fake_gpus.find(',', begin);
    if (end == std::string::npos) end = fake_gpus.size();
    const std::string item = fake_gpus.substr(begin, end - begin);
    begin = end + 1;
    const std::string bad = "--fake-gpus item '" + item + "': ";
    std::vector<std::string> parts;
    for (size_t p = 0; p <= item.size();) {
      size_t q = item.find(':', p);
      if (q == std::string::npos) q = item.size();
      parts.push_back(item.substr(p, q - p));
      p = q + 1;
    }
    if (parts.size() < 2 || parts.size() > 3) return InvalidArgumentError(bad + "expected MODEL:COUNT[:mig]");
    StatusOr<GpuModelId> model = catalog.Find(parts[0]);
    if (!model.ok()) return InvalidArgumentError(bad + "unknown GPU model (known: " + catalog.KnownNames() + ")");
    char* stop = nullptr;
    const long count = std::strtol(parts[1].c_str(), &stop, 10);
    if (parts[1].empty() || *stop != '\0' || count < 1 || count > enforce::kMaxGpus)
      return InvalidArgumentError(bad + "COUNT must be 1.." + std::to_string(enforce::kMaxGpus));
    const bool mig = parts.size() == 3;
    if (mig && parts[2] != "mig") return InvalidArgumentError(bad + "the third part may only be 'mig'");
    if (mig && !catalog.info(*model).mig) return InvalidArgumentError(bad + parts[0] + " has no MIG");
    total += static_cast<int>(count);
    if (total > enforce::kMaxGpus)
      return InvalidArgumentError("--fake-gpus: " + std::to_string(total) + " GPUs; a node has at most " +
                                  std::to_string(enforce::kMaxGpus));
    if (!out.empty()) out += ",";
    out += catalog.info(*model).name + "*" + std::to_string(count) + (mig ? ":mig=1" : "");
    if (end == fake_gpus.size()) break;
  }
  return out;
}

}  // namespace tessera::node
