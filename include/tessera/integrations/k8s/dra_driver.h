// DraDriver: what the DRA kubelet plugin of driver gpu.tessera.io does on a node, without the
// transport (dra_plugin.h serves it over the kubelet's gRPC). Called by `tessera k8s dra-driver`
// and by the tests and benchmark.
//
// Prepare(claim refs) reads each claim (ClaimSource), and turns every allocation result of driver
// gpu.tessera.io into a slot of the node's segment (node::NodeDir::Join, the driver's own process
// as the member, as the agent is for its workloads):
//   * a share (consumedCapacity present): memory limit = consumedCapacity.memory, compute share =
//     consumedCapacity.compute (milli-GPU);
//   * a whole GPU (no consumedCapacity): no memory limit, share 1000;
//   * the slot's registry name is "<namespace>/<claim>/<request>/<device>" (plus "#<shareID's first
//     8>" for a share); metering account = the opaque config's tenant, else the claim's namespace
//     (Kubernetes' own tenancy); workload "k8s-claim/<namespace>/<claim>";
//   * a claim of several results (devices of different GPUs) is one tenant, "<namespace>/<claim>#<uid's
//     first 8>", on all of their GPUs, with the smallest memory limit and share of them on each: the
//     container that uses the claim is one process tree, charged once, and every device's CDI edits
//     carry the same TESSERA_SHIM_TENANT and CUDA_VISIBLE_DEVICES (all of its GPUs). Two results on
//     one GPU in one claim are refused. Example: gpu-0 and gpu-1, whole -> one tenant on GPUs 0 and
//     1, CUDA_VISIBLE_DEVICES=<uuid 0>,<uuid 1> in both devices' edits, /dev/nvidia<minor> each.
//   * a MIG device ("gpu-<N>-mig-<profile>-<start>", names.h; it must be the claim's only device
//     of gpu.tessera.io): the MIG instance of that profile whose placement starts there on GPU N,
//     found through NVML; a missing one is created (enforce::ApplyMigSteps, as the agent's
//     --allow-mig-reconfigure does) only with allow_mig_reconfigure and when its slices are free,
//     else the claim fails naming the instance and the flag; one that another prepared claim holds
//     or a process runs in is never shared (the claim fails). The tenant (named as for a share) is
//     on that instance (TenantRequest::mig_instance = its MIG device UUID; one tenant per instance,
//     NodeDir::Join), memory limit = the instance's memory, share 1000; the CDI device pins the
//     instance (CUDA_VISIBLE_DEVICES=MIG-<uuid>, GpuPin::mig: no TESSERA_SHIM_LEASES, the
//     instance is not time-sliced) and carries the parent GPU's /dev/nvidia<minor> and the
//     instance's two nvidia-caps nodes (container_edits.h MigCapNodes). Unprepare destroys an
//     instance the driver created (none other), unless a process still runs in it.
//     Example: gpu-0-mig-3g-40gb-4 on an H100-80GB with 3g.40gb@4 -> tenant on GPU 0, limit = the
//     instance's memory (40448 MiB on the fake NVML), CUDA_VISIBLE_DEVICES=MIG-fa4e0000-...,
//     device nodes /dev/nvidia0, /dev/nvidia-caps/nvidia-cap<gi>, /dev/nvidia-caps/nvidia-cap<ci>.
// It then writes one CDI spec file per claim, <cdi dir>/gpu.tessera.io-claim_<uid>.json
// (cdiVersion 0.6.0, kind gpu.tessera.io/gpu), with one CDI device per slot, "<uid>-<device>",
// whose containerEdits set LD_PRELOAD to the shim, the slot's TESSERA_SHIM_* variables and
// CUDA_VISIBLE_DEVICES, and bind-mount the shim, the node's policy and leases files (read-only)
// and the slot's own counters file (counters/<index>, read-write; not the folder, so that no other
// tenant's file is in the container), and the claim's tenant file (below, read-only) under <container dir> (default /run/tessera), and CDI deviceNodes: the spec's containerEdits
// carry /dev/nvidiactl and /dev/nvidia-uvm, each device /dev/nvidia<minor> (NVML's minor number of
// the GPU, nvmlDeviceGetMinorNumber, which need not be its index; the index only where NVML does
// not answer), each from
// <dev dir> on the host (default /dev; tests give a folder of their own), which must exist: a
// missing node fails the claim ("device node /dev/nvidia-uvm: No such file or directory (is the
// NVIDIA driver loaded on this node?)"); an empty dev dir adds no device nodes (left to the NVIDIA
// container toolkit). The node directory's `members` folder is not
// mounted (in the container's pid namespace no supervisor is an ancestor); instead the claim's
// tenant index is written to <plugin dir>/tenants/<uid> ("3\n") and mounted read-only as
// <container dir>/node/tenant, next to the policy, where the shim takes its tenant from it and
// ignores TESSERA_SHIM_TENANT (shim.cc, FileTenant).
// The answer per claim is its devices with their CDI ids "gpu.tessera.io/gpu=<uid>-<device>",
// or an error (the claim's only: other claims of the call are prepared) that names the claim and
// what is wrong: "ResourceClaim team-a/infer (uid U): metadata.uid: 'V' is not the kubelet's 'U'
// (...)" when the claim read has another uid, "... (uid U): GET /apis/resource.k8s.io/v1/
// namespaces/team-a/resourceclaims/infer: HTTP 404: ..." when there is none.
//
// Unprepare leaves the slots (node::NodeDir::LeaveTenant: the slot goes when no container process
// holds it any longer) and removes the CDI spec.
//
// Idempotent: a claim already prepared is answered from memory (same devices, no second slot);
// unpreparing one that is not prepared is OK. Restart-safe: every change is recorded in
// <plugin dir>/checkpoint.json (written to a temporary file and renamed); Open() reads it and
// re-joins every recorded slot with the new process as member (a slot a container still holds
// keeps its index; a slot that went gets a new index and its CDI spec is rewritten).
//
// Worked example: claim team-a/infer (uid U) allocated gpu-0 with memory 10Gi, compute 300.
// Prepare -> Join("team-a/infer/gpu/gpu-0#2b0f33c1", gpu 0, 10 GiB, share 300) = index 0; writes
// gpu.tessera.io-claim_U.json with device "U-gpu-0" (TESSERA_SHIM_TENANT=0, TESSERA_SHIM_GPUS=0,
// CUDA_VISIBLE_DEVICES=0 without NVML, device node /dev/nvidia0; /dev/nvidiactl and
// /dev/nvidia-uvm for the whole spec); answers {U: [{request gpu, pool node-1, device gpu-0,
// cdi gpu.tessera.io/gpu=U-gpu-0}]}. Prepare again: the same answer, still one slot. A new
// process Open()s the checkpoint: Join again -> index 0. Unprepare: the slot and the file go.
//
// Thread-safety: Prepare and Unprepare may be called from several threads (one mutex; the node
// directory has its own file lock against other processes).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/integrations/k8s/dra_backstop.h"
#include "tessera/integrations/k8s/dra_claim.h"

namespace tessera::k8s {

struct DraDriverOptions {
  std::string node_dir;                                        // the node directory (NodeDir)
  std::string plugin_dir = "/var/lib/kubelet/plugins/gpu.tessera.io";  // checkpoint.json
  std::string cdi_dir = "/var/run/cdi";                        // where the CDI spec files go
  std::string shim_path;                                       // host path of libtessera-shim.so
  std::string container_dir = "/run/tessera";                  // the shim and node files, in the container
  std::string nvml_library = "libnvidia-ml.so.1";              // GPU UUIDs for CUDA_VISIBLE_DEVICES
  std::string dev_dir = "/dev";  // where the NVIDIA device nodes are on the host; "" = add none
  long member_pid = 0;                                         // the slots' member; 0 = this process
  // MIG devices: create a claim's missing instance when its slices are free (`tessera k8s
  // dra-driver --allow-mig-reconfigure`); off, a claim whose instance does not exist fails.
  bool allow_mig_reconfigure = false;
  // The driver's list of nvidia-caps minors (container_edits.h MigCapNodes); none there: no caps nodes.
  std::string mig_minors_file = "/proc/driver/nvidia-caps/mig-minors";
};

// One device of a prepared claim, as the kubelet's Device message carries it.
struct PreparedDevice {
  std::vector<std::string> requests;
  std::string pool, device;
  std::vector<std::string> cdi_ids;
};

struct ClaimResult {
  std::vector<PreparedDevice> devices;
  std::string error;  // non-empty: this claim failed (devices empty)
};

class DraDriver {
 public:
  // Reads and re-adopts the checkpoint (an unreadable one is DATA_LOSS naming the file); checks
  // the shim (node::ResolveShim); creates the plugin and CDI dirs.
  static StatusOr<std::unique_ptr<DraDriver>> Open(const DraDriverOptions& options, ClaimSource* source);
  ~DraDriver();
  DraDriver(const DraDriver&) = delete;
  DraDriver& operator=(const DraDriver&) = delete;

  // By claim uid; every claim of the call has an entry.
  std::map<std::string, ClaimResult> Prepare(const std::vector<ClaimRef>& claims);
  // By claim uid: "" when unprepared (or never prepared), else the error.
  std::map<std::string, std::string> Unprepare(const std::vector<ClaimRef>& claims);

  size_t prepared_claims() const;
  // What re-adopting the checkpoint found wrong (a claim whose slot could not be joined again is
  // dropped; the kubelet prepares it again). Empty when all went back.
  const std::vector<std::string>& recovery_problems() const;

  // The prepared claims as the NVML backstop sees them (dra_backstop.h): one per tenant of the
  // node (a claim of several GPUs is one), with the pods the claim was reserved for when read.
  std::vector<ClaimUse> ClaimUses() const;
  // Reads every prepared claim again for its pods (status.reservedFor): a pod that starts to use
  // a claim already prepared on this node is not announced to the driver by the kubelet. Claims
  // read are updated (and the checkpoint with them) even when others fail; UNAVAILABLE names
  // each claim that could not be read (or that is another object now).
  Status RefreshPods();

  struct State;

 private:
  explicit DraDriver(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tessera::k8s
