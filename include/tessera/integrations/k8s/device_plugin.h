// SharePlugin: what `tessera k8s device-plugin` (the kubelet device plugin for clusters before
// Kubernetes 1.34, which have no DRA) does on a node, without the transport
// (device_plugin_server.h serves it over the kubelet's v1beta1 gRPC).
//
// Devices. Each GPU NVML lists is cut into N share devices (N = shares_per_gpu), named
// "<gpu uuid>::<k>", k = 0..N-1, all of resource `resource_name` (default tessera.io/gpu-share):
// a pod asking for 3 of them gets 3/N of a GPU. A GPU's devices are "Healthy" while NVML answers
// for it (uuid and memory), "Unhealthy" otherwise; RefreshHealth reads NVML again and says whether
// anything changed (the server then sends the list again).
//
// Preferred allocation: PreferredShares packs, by the placement engine's GPU-share rule
// (placement::ChooseGpus with SharingGpuRule::kBest, FGD's best fit: the GPU with the least free
// that still fits): each share the kubelet still needs goes to the available GPU that already has
// the fewest free shares (lowest index on ties), which keeps whole GPUs free for the pods that
// need them. The must-include devices come first and count; then the lowest free k of the chosen
// GPU. Example, N = 4, available {A::1, A::2, A::3, B::0..3} (A has one share taken), size 2 ->
// {A::1, A::2}; size 5 -> A::1..3, then B::0, B::1.
//
// Allocate(device ids) (one container) turns the devices into a slot of the node's segment
// (node::NodeDir::Join, this process as member) on the devices' GPUs with
//   memory limit = GPU memory / N x (devices on that GPU),   share = 1000 / N x (devices) milli,
// the smallest of them over the GPUs for a container whose devices span several (a tenant has one
// limit per GPU); all N devices of a GPU: the whole GPU (no memory limit, share 1000).
// Tenancy: the device plugin API names no pod in Allocate, so the slot's tenant is the devices
// themselves, "k8s-dp/<first device id>", and its metering account is `account` (one per node,
// `--account`, default "kubernetes"), workload "k8s-device-plugin", until the kubelet's
// PodResources names the pod that holds its devices: NameOwners(owners) then labels the slot
// with the pod's namespace as account and "<namespace>/<pod>/<container>" as workload
// (node::NodeDir::Relabel; the usage meter bills what came before under the old labels), so
// usage and invoices follow Kubernetes' own tenancy. Example: slot k8s-dp/U::0 = {U::0, U::1},
// owners {U::1: team-a/web-0/server} -> account "team-a", workload "team-a/web-0/server";
// returns {"k8s-dp/U::0"} (nothing the next time: already so named). The kubelet hands a device to
// one container at a time, so an Allocate that names a device of an earlier slot means that
// container is gone: the earlier slot is left first (node::NodeDir::LeaveTenant). The answer is
// the shim's environment and mounts (container_edits.h; the tenant file under
// <state dir>/tenants/), CUDA_VISIBLE_DEVICES, TESSERA_SHARE_MEMORY_BYTES and
// TESSERA_SHARE_MILLI (for the workload to read; the shim enforces the slot's), and the device
// nodes /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia<minor> of each GPU. Fail closed: any error
// (an unknown device id, no shim, a full segment, a missing device node) fails the Allocate, so
// the container never starts without its limit. Example: N = 10, GPU 0 of 40 GiB, devices
// {<uuid0>::3, <uuid0>::4} -> Join("k8s-dp/<uuid0>::3", gpu 0, 8 GiB, share 200) = index 0;
// env TESSERA_SHIM_TENANT=0, CUDA_VISIBLE_DEVICES=<uuid0>, TESSERA_SHARE_MILLI=200.
// An unknown id is INVALID_ARGUMENT naming it: "device 'GPU-x::9': not a device of this plugin
// (tessera.io/gpu-share: <uuid>::0..<uuid>::9 of 2 GPUs)".
//
// Release. The v1beta1 API has no deallocation, so the plugin learns that a container ended from
// the kubelet's PodResources API (device_plugin_server.h calls List periodically): Release(live)
// leaves every slot none of whose device ids is in `live` (the ids of this resource that live
// containers hold) and that is at least `grace` old (a slot just allocated may not be in the
// kubelet's answer yet). Example: slots a = {U::0, U::1}, b = {U::2}; Release({U::1}, 0) leaves b
// (its tenant leaves the node registry, its tenant file goes) and returns {"k8s-dp/U::2"}.
//
// Checkpoint. Every change of the slots (Allocate, a slot left, Release) writes
// <state dir>/checkpoint.json atomically (src/integrations/k8s/checkpoint.h):
//   {"version": 1, "resource_name": "tessera.io/gpu-share", "slots": [{"tenant": "k8s-dp/U::0",
//    "devices": ["U::0", "U::1"], "index": 0, "gpus": [0], "mem_bytes": 20268 MiB, "share": 500,
//    "account": "kubernetes", "workload": "k8s-device-plugin"}]}
// Open reads it and joins each slot again (node::NodeDir::Join, this process as member; the
// tenant file is written again, with the index the node gives now), so a restarted plugin keeps
// the limits of running containers, releases them later and treats an Allocate of an adopted
// device as before (the earlier slot is left first). A checkpoint it cannot read fails Open with
// DATA_LOSS naming the file and field: "checkpoint '/s/checkpoint.json': slots[0].index: missing".
// A slot it reads but cannot take up again (its GPU is no longer listed, the node refuses the
// join) is left behind and named in NotAdopted(); the plugin starts without it, and the rewritten
// checkpoint no longer has it.
//
// Thread-safety: every method may be called from several threads (one mutex; the node directory
// has its own file lock against other processes).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/integrations/k8s/container_edits.h"
#include "tessera/integrations/k8s/dra_backstop.h"

namespace tessera::k8s {

struct SharePluginOptions {
  std::string node_dir;                                   // the node directory (NodeDir)
  std::string resource_name = "tessera.io/gpu-share";
  int shares_per_gpu = 10;                                // N, 1..100
  std::string account = "kubernetes";                     // metering account of every slot
  std::string state_dir = "/var/lib/tessera/device-plugin";  // the slots' tenant files
  std::string shim_path;                                  // host path of libtessera-shim.so
  std::string container_dir = "/run/tessera";
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string dev_dir = "/dev";                           // "" = add no device nodes
  long member_pid = 0;                                    // the slots' member; 0 = this process
};

struct ShareDevice {
  std::string id;  // "<gpu uuid>::<k>"
  int gpu = -1;
  bool healthy = true;
};

// One container's answer to Allocate.
struct ShareAllocation {
  std::map<std::string, std::string> env;
  std::vector<ContainerMount> mounts;
  std::vector<ContainerDeviceNode> devices;
  int index = -1;  // the slot
  std::string tenant;
};

class SharePlugin {
 public:
  // Opens NVML (FAILED_PRECONDITION when it cannot: without the GPUs' memory no limit can be set),
  // lists the GPUs, checks the shim, creates the state dir.
  static StatusOr<std::unique_ptr<SharePlugin>> Open(const SharePluginOptions& options);
  ~SharePlugin();
  SharePlugin(const SharePlugin&) = delete;
  SharePlugin& operator=(const SharePlugin&) = delete;

  const SharePluginOptions& options() const;
  std::vector<ShareDevice> Devices() const;
  // Reads every GPU's health again; true when a device's health changed.
  bool RefreshHealth();
  // The packing choice above; INVALID_ARGUMENT for an unknown id, a must-include id that is not
  // available, or a size the available devices cannot meet.
  StatusOr<std::vector<std::string>> PreferredShares(const std::vector<std::string>& available,
                                                     const std::vector<std::string>& must_include, int size) const;
  StatusOr<ShareAllocation> Allocate(const std::vector<std::string>& device_ids);
  struct DeviceOwner {
    std::string pod_namespace, pod, container;
  };
  // Labels each slot with the pod that holds one of its devices (above); returns the tenants
  // whose labels changed. A slot whose relabel fails keeps its labels (the next List retries).
  std::vector<std::string> NameOwners(const std::map<std::string, DeviceOwner>& owners);
  // Whether a slot younger than `younger_than` still waits for its pod's name (the server then
  // asks PodResources again soon, not only every reconcile period).
  bool AwaitsOwner(std::chrono::milliseconds younger_than) const;
  // Slots this process holds now (tenant names).
  std::vector<std::string> Slots() const;
  // The slots as the NVML backstop judges them (dra_backstop.h, options.slot_mount): claim = the
  // tenant, slot_file = its tenant file's name, no pods; shared unless the slot is a whole GPU (no
  // memory limit). Example: slot k8s-dp/U::0 = {U::0, U::1} of N = 10 on GPU 0 of 40 GiB, index 3
  // -> {claim "k8s-dp/U::0", uid "k8s-dp/U::0", gpus {0}, mem_bytes 8 GiB, shared, index 3,
  // slot_file "U__0"}.
  std::vector<ClaimUse> BackstopUses() const;
  // Leaves the slots no live container holds (above); returns their tenants.
  std::vector<std::string> Release(const std::set<std::string>& live, std::chrono::milliseconds grace);
  // <state dir>/checkpoint.json.
  std::string checkpoint_path() const;
  // The checkpoint's slots Open could not take up again, one line each naming the slot and why.
  std::vector<std::string> NotAdopted() const;

  struct State;

 private:
  explicit SharePlugin(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tessera::k8s
