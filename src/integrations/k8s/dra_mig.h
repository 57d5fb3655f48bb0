// Private: the MIG instances behind the DRA driver's MIG devices (dra_driver.h). A claim
// allocated "gpu-<N>-mig-<profile>-<start>" (names.h) runs on the GPU instance of that profile
// whose placement starts at that memory slice of GPU N, through its MIG device (the compute
// instance that fills it, "MIG-<uuid>"). Acquire finds it through NVML; Release destroys it again
// when the driver created it.
//
// Acquire(device gpu-0-mig-3g-40gb-4, held):
//   1. NVML's name of GPU 0 -> the catalog model (H100-80GB); its profile whose label is
//      "3g-40gb" (3g.40gb) must allow start 4, else INVALID_ARGUMENT naming the device.
//   2. The GPU's instances (node::DiscoverMigInstances). At slice 4:
//      - a 3g.40gb instance: its MIG device (node::MigInstanceUuid) is the claim's, unless another
//        prepared claim holds it (`held`) or a process runs in it: FAILED_PRECONDITION, never
//        shared;
//      - an instance of another profile: FAILED_PRECONDITION, never changed;
//      - none: without allow_reconfigure FAILED_PRECONDITION "MIG instance 3g.40gb@4 on GPU 0 does
//        not exist (the GPU has '1g.10gb@0'); the driver runs without --allow-mig-reconfigure
//        (...)"; with it, the agent's apply step (enforce::CatalogMigStep create 3g.40gb@4, the
//        model check, enforce::ApplyMigSteps: a GI at exactly that placement and the CI that fills
//        it), which fails naming the instance in the way when the slices are not free.
//   3. -> {profile 3g.40gb, start 4, uuid MIG-..., gi/ci ids, the GPU's minor, memory 40448 MiB
//      on the fake NVML (the driver's memorySizeMB of the profile), created true|false}.
// Release(0, that use): a created instance is destroyed (enforce::ApplyMigSteps destroy step,
// whose preflight refuses an instance a process still runs in: then it stays); one the driver
// found is left as it was.
//
// NVML is opened at the first MIG device and kept open until the object goes (the instances
// and their ids are the driver's, not the handle's, but a long-lived handle is what NVIDIA's own
// DRA driver keeps for dynamic MIG too). Not thread-safe: the driver calls it under its mutex.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "tessera/core/status.h"
#include "tessera/enforce/nvml.h"
#include "tessera/integrations/k8s/dra_claim.h"

namespace tessera::k8s {

// The MIG instance a prepared MIG device holds (kept in the checkpoint).
struct MigInstanceUse {
  std::string profile;               // the catalog's profile name, "3g.40gb"
  int start = -1;                    // the placement's first memory slice
  std::string uuid;                  // the MIG device, "MIG-..." (CUDA_VISIBLE_DEVICES)
  uint32_t gpu_instance_id = 0;      // for the nvidia-caps nodes (container_edits.h MigCapNodes)
  uint32_t compute_instance_id = 0;
  int parent_minor = -1;             // /dev/nvidia<minor> of the GPU; -1 where NVML does not say
  uint64_t mem_bytes = 0;            // the instance's memory: the slot's limit
  bool created = false;              // made by this driver (destroyed again at unprepare)
};

class MigInstances {
 public:
  MigInstances(std::string nvml_library, bool allow_reconfigure);
  ~MigInstances();
  MigInstances(const MigInstances&) = delete;
  MigInstances& operator=(const MigInstances&) = delete;

  // `held`: the MIG device UUIDs of the prepared claims -> "<namespace>/<claim>".
  StatusOr<MigInstanceUse> Acquire(const AllocatedDevice& device, const std::map<std::string, std::string>& held);
  // True when the instance was destroyed; false when it is left (not created by the driver).
  // An error says why a created instance could not be destroyed (it stays).
  StatusOr<bool> Release(int gpu, const MigInstanceUse& use);

 private:
  Status Open();

  std::string library_;
  bool allow_reconfigure_;
  std::unique_ptr<enforce::DlopenNvml> nvml_;
  bool open_ = false;
};

}  // namespace tessera::k8s
