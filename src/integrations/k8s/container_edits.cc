// The shim's container edits (tessera/integrations/k8s/container_edits.h).
#include "tessera/integrations/k8s/container_edits.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>

#include "tessera/enforce/segment.h"

namespace tessera::k8s {

SlotEdits MakeSlotEdits(const SlotEditsInput& in) {
  const node::NodePaths inside(in.container_dir + "/node");
  const std::string shim_inside = in.container_dir + "/libtessera-shim.so";
  SlotEdits out;
  out.env = node::LaunchEnvironment(
      {.paths = inside, .shim_path = shim_inside, .pin = in.pin, .gpus = in.gpus, .tenant_index = in.index});
  out.mounts = {
      {.host_path = in.shim, .container_path = shim_inside, .read_only = true},
      {.host_path = in.host.policy, .container_path = inside.policy, .read_only = true},
      {.host_path = enforce::CountersFilePath(in.host.counters, in.index),
       .container_path = enforce::CountersFilePath(inside.counters, in.index),
       .read_only = false},
      {.host_path = in.host.leases, .container_path = inside.leases, .read_only = true},
      {.host_path = in.tenant_file, .container_path = TenantMountPath(in.container_dir), .read_only = true},
  };
  return out;
}

std::string TenantMountPath(const std::string& container_dir) { return container_dir + "/node/tenant"; }

StatusOr<ContainerDeviceNode> NvidiaDeviceNode(const std::string& dev_dir, const std::string& name) {
  const std::string host = dev_dir + "/" + name;
  struct stat st {};
  if (::stat(host.c_str(), &st) != 0) {
    return FailedPreconditionError("device node " + host + ": " + std::strerror(errno) +
                                   " (is the NVIDIA driver loaded on this node?)");
  }
  return ContainerDeviceNode{.host_path = host, .container_path = "/dev/" + name};
}

StatusOr<std::vector<ContainerDeviceNode>> NvidiaControlNodes(const std::string& dev_dir) {
  std::vector<ContainerDeviceNode> nodes;
  if (dev_dir.empty()) return nodes;
  for (const char* name : {"nvidiactl", "nvidia-uvm"}) {
    TESSERA_ASSIGN_OR_RETURN(ContainerDeviceNode n, NvidiaDeviceNode(dev_dir, name));
    nodes.push_back(std::move(n));
  }
  return nodes;
}

StatusOr<ContainerDeviceNode> GpuDeviceNode(const std::string& dev_dir, const node::GpuPin& pin, int gpu) {
  // By NVML's minor number, which is not always the index (launcher.h, GpuPin).
  return NvidiaDeviceNode(dev_dir, "nvidia" + std::to_string(pin.minor >= 0 ? pin.minor : gpu));
}

StatusOr<std::vector<ContainerDeviceNode>> MigCapNodes(const std::string& dev_dir, const std::string& mig_minors_file,
                                                       int gpu_minor, uint32_t gi, uint32_t ci) {
  std::vector<ContainerDeviceNode> nodes;
  if (dev_dir.empty()) return nodes;
  std::ifstream in(mig_minors_file);
  if (!in) return nodes;  // the capabilities are under /proc only (see the header)
  const std::string gi_cap = "gpu" + std::to_string(gpu_minor) + "/gi" + std::to_string(gi) + "/access";
  const std::string ci_cap = "gpu" + std::to_string(gpu_minor) + "/gi" + std::to_string(gi) + "/ci" +
                             std::to_string(ci) + "/access";
  std::map<std::string, std::string> minors;
  std::string cap, minor;
  while (in >> cap >> minor) minors[cap] = minor;
  for (const std::string& want : {gi_cap, ci_cap}) {
    auto it = minors.find(want);
    if (it == minors.end() || it->second.empty() ||
        it->second.find_first_not_of("0123456789") != std::string::npos) {
      return FailedPreconditionError(mig_minors_file + ": no line '" + want + " <minor>' (the MIG device's " +
                                     "capability)");
    }
    TESSERA_ASSIGN_OR_RETURN(ContainerDeviceNode n, NvidiaDeviceNode(dev_dir, "nvidia-caps/nvidia-cap" + it->second));
    nodes.push_back(std::move(n));
  }
  return nodes;
}

Status MakeDirs(const std::string& path) {
  std::string so_far = path.starts_with('/') ? "/" : "";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) {
      so_far += path.substr(start, end - start) + "/";
      if (::mkdir(so_far.c_str(), 0755) != 0 && errno != EEXIST) {
        return InternalError("cannot create '" + so_far + "': " + std::strerror(errno));
      }
    }
    start = end + 1;
  }
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "we");
  if (f == nullptr) return InternalError("cannot write '" + tmp + "': " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return InternalError("cannot write '" + path + "': " + why);
  }
  return Status::Ok();
}

}  // namespace tessera::k8s
