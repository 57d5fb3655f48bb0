// What a container needs to run under a slot of the node's segment, as both Kubernetes programs
// hand it to the kubelet: the DRA driver as a CDI spec (dra_driver.h), the device plugin as an
// AllocateResponse (device_plugin.h). One place for the shim's environment, the node files it
// mounts and the NVIDIA device nodes, so that the two cannot drift apart.
//
// SlotEdits: the environment of node::LaunchEnvironment as seen inside the container (the shim at
// <container dir>/libtessera-shim.so, the node files under <container dir>/node), and the mounts:
//   shim                          -> <container dir>/libtessera-shim.so        read-only
//   <node>/policy                 -> <container dir>/node/policy               read-only
//   <node>/counters/<index>       -> <container dir>/node/counters/<index>     read-write
//   <node>/leases                 -> <container dir>/node/leases               read-only
//   <tenant file>                 -> <container dir>/node/tenant               read-only
// Only the tenant's own counters file (not the folder: no other tenant's file is in the
// container); the tenant file holds the slot's index ("3\n"), from which the shim takes its tenant
// (TESSERA_SHIM_TENANT, which a container may change, is then ignored). The leases file is
// read-only: a container's root could otherwise write the lease word.
//
// Device nodes: NvidiaControlNodes gives /dev/nvidiactl and /dev/nvidia-uvm, GpuDeviceNode
// /dev/nvidia<minor> (NVML's minor number; the index where NVML does not say), each from
// <dev dir>/<name> on the host, which must exist: FAILED_PRECONDITION "device node
// /dev/nvidia-uvm: No such file or directory (is the NVIDIA driver loaded on this node?)". An
// empty dev dir gives none (left to the NVIDIA container toolkit).
// A MIG device also needs its capabilities (NVIDIA's MIG user guide, "Device Nodes and
// Capabilities"): with the driver's /dev interface to them, the access files of its GPU instance
// and of its compute instance, /dev/nvidia-caps/nvidia-cap<m>, whose minor m the driver lists in
// /proc/driver/nvidia-caps/mig-minors ("gpu<GPU minor>/gi<GI id>/access <m>", "gpu<GPU
// minor>/gi<GI id>/ci<CI id>/access <m>"). MigCapNodes reads that file: GPU minor 0, GI 2, CI 0
// with lines "gpu0/gi2/access 21" and "gpu0/gi2/ci0/access 22" -> <dev dir>/nvidia-caps/nvidia-cap21
// and .../nvidia-cap22 (each must exist, as above). No file (a driver loaded with
// nv_cap_enable_devfs=0 exposes the capabilities under /proc only) or an empty dev dir: none.
//
// Worked example: host node dir /n, shim /opt/lib/libtessera-shim.so, container dir /run/tessera,
// index 2 on GPU 0 (pin "GPU-aa..", minor 3), tenant file /p/tenants/U, dev dir /dev ->
// env LD_PRELOAD=/run/tessera/libtessera-shim.so, TESSERA_SHIM_TENANT=2, TESSERA_SHIM_GPUS=0,
// CUDA_VISIBLE_DEVICES=GPU-aa.., ...; mounts /n/counters/2 -> /run/tessera/node/counters/2 (rw),
// the four others read-only; device nodes /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia3.
//
// Thread-safety: pure functions (they read the file system only; WriteFileAtomically writes).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/node/launcher.h"
#include "tessera/node/node_dir.h"

namespace tessera::k8s {

struct ContainerMount {
  std::string host_path, container_path;
  bool read_only = true;
};

struct ContainerDeviceNode {
  std::string host_path, container_path;
};

struct SlotEditsInput {
  node::NodePaths host{""};       // the node directory on the host
  std::string shim;               // host path of libtessera-shim.so (node::ResolveShim)
  std::string container_dir;      // where the shim and node files appear, e.g. /run/tessera
  std::string tenant_file;        // host path of the slot's tenant file ("<index>\n")
  node::GpuPin pin;               // every GPU of the tenant (node::JoinPins)
  std::vector<int> gpus;          // node GPU of each CUDA ordinal
  int index = -1;                 // the slot (tenant index)
};

struct SlotEdits {
  std::vector<std::pair<std::string, std::string>> env;
  std::vector<ContainerMount> mounts;
};

SlotEdits MakeSlotEdits(const SlotEditsInput& in);

// Where a container sees its slot's tenant file: "<container dir>/node/tenant" (read-only; a
// container cannot change its own mounts, so the NVML backstop knows a process's slot by it).
std::string TenantMountPath(const std::string& container_dir);

// <dev dir>/<name> -> /dev/<name>; the errors above.
StatusOr<ContainerDeviceNode> NvidiaDeviceNode(const std::string& dev_dir, const std::string& name);
// nvidiactl and nvidia-uvm; none for an empty dev dir.
StatusOr<std::vector<ContainerDeviceNode>> NvidiaControlNodes(const std::string& dev_dir);
// nvidia<minor> of `gpu` (pin.minor, else the index).
StatusOr<ContainerDeviceNode> GpuDeviceNode(const std::string& dev_dir, const node::GpuPin& pin, int gpu);
// The nvidia-caps nodes of MIG device (GPU minor `gpu_minor`, GPU instance `gi`, compute instance
// `ci`), from `mig_minors_file` (above). FAILED_PRECONDITION naming the file and the line it lacks.
StatusOr<std::vector<ContainerDeviceNode>> MigCapNodes(const std::string& dev_dir, const std::string& mig_minors_file,
                                                       int gpu_minor, uint32_t gi, uint32_t ci);

// Creates `path` and its parents (mode 0755); INTERNAL naming the folder that failed.
Status MakeDirs(const std::string& path);
// Writes `text` to `path` through "<path>.tmp" and a rename (readers see the old or the new).
Status WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace tessera::k8s
