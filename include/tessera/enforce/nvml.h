// NvmlApi: the node agent's view of the NVIDIA driver's management library (NVML). It lists
// the GPUs of a node (name, UUID, memory, MIG mode), the MIG geometry the driver reports
// (GPU-instance profiles and their possible placements), the GPU and compute instances that
// exist, and the processes using each GPU; and it creates and destroys MIG instances at exact
// placements. DlopenNvml implements it by loading libnvidia-ml.so.1 at run time, so tessera
// has no link-time dependency on the driver and runs (without GPUs) where it is absent.
//
// Every NVML failure becomes a Status naming the call, the GPU and NVML's own error string:
//   "nvmlDeviceCreateGpuInstanceWithPlacement(gpu 0, profile id 9, placement 2:4):
//    Invalid Argument (NVML error 2)"   (INVALID_ARGUMENT)
// The codes map as in NvmlReturnToStatusCode (insufficient resources -> RESOURCE_EXHAUSTED,
// not supported -> UNIMPLEMENTED, in use -> FAILED_PRECONDITION, ...).
//
//   DlopenNvml nvml;                                   // or DlopenNvml({.library_path = ...})
//   TESSERA_RETURN_IF_ERROR(nvml.Init());              // UNAVAILABLE when the library is absent
//   TESSERA_ASSIGN_OR_RETURN(GpuInstanceProfile p,
//                            nvml.GpuInstanceProfileInfo(0, kGpuInstanceProfile3Slice));
//   TESSERA_ASSIGN_OR_RETURN(GpuInstance gi,
//                            nvml.CreateGpuInstance(0, p.id, {.start = 4, .size = 4}));
//
// Compute instances are created by NVML_COMPUTE_INSTANCE_PROFILE_* index (1c=0 ... 7c=4; the
// adapter asks the driver for the profile id behind it, which nvidia-smi shows equal to the
// index), where the driver chooses or exactly at a placement (CreateComputeInstanceAt).
//
// GPUs are named by NVML index (0 .. DeviceCount()-1). MIG profiles are named the two ways
// NVML names them: a profile *index* (NVML_GPU_INSTANCE_PROFILE_*, kGpuInstanceProfile*) is
// what GpuInstanceProfileInfo takes; the profile *id* it returns is what placements and
// creation take. The two differ (index 2 = 3g has id 9 on A100/H100).
//
// Callers: the node agent (inventory, realising MIG layouts, metering samples) and the
// read-only probe in tests/gpu/. Nothing in the test suite points it at a real GPU.
//
// Thread-safety: Init and Shutdown must not run concurrently with any other call. Between
// them every method may be called from any thread (NVML itself is thread-safe; DlopenNvml
// keeps no mutable state after Init). Ownership: DlopenNvml owns the dlopen handle and
// closes it in Shutdown or its destructor.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/quantity.h"
#include "tessera/core/status.h"

namespace tessera::enforce {

// NVML_GPU_INSTANCE_PROFILE_* indexes (nvml.h; shared/gpu-models/mig-profiles.json).
inline constexpr uint32_t kGpuInstanceProfile1Slice = 0x0;
inline constexpr uint32_t kGpuInstanceProfile2Slice = 0x1;
inline constexpr uint32_t kGpuInstanceProfile3Slice = 0x2;
inline constexpr uint32_t kGpuInstanceProfile4Slice = 0x3;
inline constexpr uint32_t kGpuInstanceProfile7Slice = 0x4;
inline constexpr uint32_t kGpuInstanceProfile1SliceRev1 = 0x7;  // 1g with media extensions
inline constexpr uint32_t kGpuInstanceProfile1SliceRev2 = 0x9;  // 1g with 2 memory slices
// One past the highest index NVML API 13 defines. Drivers answer INVALID_ARGUMENT past their
// own count (API 12: 0xA; R580 already at 0x11).
inline constexpr uint32_t kGpuInstanceProfileIndexCount = 0x12;

// NVML_COMPUTE_INSTANCE_PROFILE_* indexes: 1c, 2c, 3c, 4c, 7c = 0, 1, 2, 3, 4.
inline constexpr uint32_t kComputeInstanceProfile1Slice = 0x0;
inline constexpr uint32_t kComputeInstanceProfileIndexCount = 0x9;

// Maps an nvmlReturn_t value to tessera's canonical code (unknown values -> kUnknown).
StatusCode NvmlReturnToStatusCode(int nvml_return);

struct DeviceMemory {
  MiB total{0};  // bytes from NVML, rounded down to MiB
  MiB free{0};
  MiB used{0};   // includes what the driver reserves
};

struct MigMode {
  bool current_enabled = false;
  bool pending_enabled = false;  // takes effect at the next GPU reset
};

// One GPU-instance profile as the driver reports it (nvmlGpuInstanceProfileInfo).
struct GpuInstanceProfile {
  uint32_t profile_index = 0;         // the NVML_GPU_INSTANCE_PROFILE_* asked for
  uint32_t id = 0;                    // profile id: what placements and creation take
  uint32_t slice_count = 0;           // compute slices
  uint32_t instance_count = 0;        // how many GIs of this profile fit on an empty GPU
  uint32_t multiprocessor_count = 0;  // SMs
  MiB memory{0};                      // memorySizeMB
  std::string name;                   // e.g. "MIG 3g.40gb"; empty where the driver lacks _v2
};

// Where a GPU instance sits: memory slices [start, start + size) (NVML's definition).
struct GpuInstancePlacement {
  uint32_t start = 0;
  uint32_t size = 0;
  friend bool operator==(const GpuInstancePlacement&, const GpuInstancePlacement&) = default;
};

// One MIG device (a compute instance as CUDA sees it): what CUDA_VISIBLE_DEVICES names.
struct MigDevice {
  uint32_t gpu_instance_id = 0;
  uint32_t compute_instance_id = 0;
  std::string uuid;  // "MIG-<uuid>"
};

struct GpuInstance {
  uint32_t id = 0;          // chosen by the driver; never derive it from the placement
  uint32_t profile_id = 0;
  GpuInstancePlacement placement;
};

// Where a compute instance sits inside its GPU instance: compute slices [start, start + size).
struct ComputeInstancePlacement {
  uint32_t start = 0;
  uint32_t size = 0;
  friend bool operator==(const ComputeInstancePlacement&, const ComputeInstancePlacement&) = default;
};

// A compute instance inside a GPU instance: compute slices [start, start + size) of the GI.
struct ComputeInstance {
  uint32_t id = 0;          // unique within its GPU instance, chosen by the driver
  uint32_t profile_id = 0;
  uint32_t start = 0;
  uint32_t size = 0;
};

struct GpuProcess {
  uint32_t pid = 0;
  std::optional<MiB> used_memory;               // empty where NVML cannot tell
  std::optional<uint32_t> gpu_instance_id;      // empty when MIG is off
  std::optional<uint32_t> compute_instance_id;  // empty when MIG is off
};

struct Utilization {
  uint32_t gpu_percent = 0;     // share of the last sample period a kernel ran
  uint32_t memory_percent = 0;  // share of it device memory was read or written
};

// One process's share of the GPU over the driver's last sample (nvmlDeviceGetProcessUtilization).
struct ProcessUtilization {
  uint32_t pid = 0;
  uint64_t timestamp_us = 0;  // CPU time of the sample; pass the largest back as last_seen_us
  uint32_t sm_percent = 0;
  uint32_t memory_percent = 0;
  uint32_t encoder_percent = 0;
  uint32_t decoder_percent = 0;
};

class NvmlApi {
 public:
  virtual ~NvmlApi() = default;

  // Loads and initialises NVML. Must succeed before any other call.
  virtual Status Init() = 0;
  // Releases NVML. Calls after it fail with FAILED_PRECONDITION until the next Init.
  virtual Status Shutdown() = 0;

  virtual StatusOr<uint32_t> DeviceCount() const = 0;
  virtual StatusOr<std::string> DeviceName(uint32_t gpu) const = 0;
  virtual StatusOr<std::string> DeviceUuid(uint32_t gpu) const = 0;
  // The minor number of the GPU's device node, /dev/nvidia<minor>: not always its NVML index
  // (NVML orders GPUs by PCI bus id; the kernel module numbers them as it probes them).
  // UNIMPLEMENTED where the library lacks nvmlDeviceGetMinorNumber (and by default).
  virtual StatusOr<uint32_t> MinorNumber(uint32_t gpu) const {
    (void)gpu;
    return UnimplementedError("NVML minor numbers: not available");
  }
  virtual StatusOr<DeviceMemory> Memory(uint32_t gpu) const = 0;
  // UNIMPLEMENTED on GPUs without MIG.
  virtual StatusOr<MigMode> GetMigMode(uint32_t gpu) const = 0;

  // The profile at NVML_GPU_INSTANCE_PROFILE_* `profile_index`. UNIMPLEMENTED when the GPU
  // lacks MIG or the profile; INVALID_ARGUMENT past the driver's profile count. R580 answers
  // with MIG disabled as well (nvml.h documents UNIMPLEMENTED then; older drivers may do so).
  virtual StatusOr<GpuInstanceProfile> GpuInstanceProfileInfo(uint32_t gpu,
                                                              uint32_t profile_index) const = 0;
  // Every placement the profile may take on an empty GPU (independent of existing instances).
  virtual StatusOr<std::vector<GpuInstancePlacement>> GpuInstancePossiblePlacements(
      uint32_t gpu, uint32_t profile_id) const = 0;
  // The GPU instances that exist, of every profile, ordered by placement start. Empty when
  // MIG is off or not supported.
  virtual StatusOr<std::vector<GpuInstance>> GpuInstances(uint32_t gpu) const = 0;
  // Creates a GI of `profile_id` exactly at `placement`. The driver refuses a start the
  // profile does not allow or a wrong size (INVALID_ARGUMENT), an overlap or an exhausted
  // profile count (RESOURCE_EXHAUSTED), and MIG being off (UNIMPLEMENTED).
  virtual StatusOr<GpuInstance> CreateGpuInstance(uint32_t gpu, uint32_t profile_id,
                                                  const GpuInstancePlacement& placement) = 0;
  // FAILED_PRECONDITION while compute instances or processes use it; NOT_FOUND for an
  // unknown id.
  virtual Status DestroyGpuInstance(uint32_t gpu, uint32_t gpu_instance_id) = 0;
  // How many more GIs of `profile_id` fit next to the existing ones.
  virtual StatusOr<uint32_t> GpuInstanceRemainingCapacity(uint32_t gpu,
                                                          uint32_t profile_id) const = 0;

  // The compute instances inside GPU instance `gpu_instance_id`, ordered by start.
  virtual StatusOr<std::vector<ComputeInstance>> ComputeInstances(
      uint32_t gpu, uint32_t gpu_instance_id) const = 0;
  // Creates a compute instance of NVML_COMPUTE_INSTANCE_PROFILE_* `ci_profile_index` (shared
  // engines) where the driver chooses.
  virtual StatusOr<ComputeInstance> CreateComputeInstance(uint32_t gpu, uint32_t gpu_instance_id,
                                                          uint32_t ci_profile_index) = 0;
  // Creates it exactly at `placement` (compute slices inside the GI). The driver refuses a
  // start the CI profile does not allow or a wrong size (INVALID_ARGUMENT), an overlap or an
  // exhausted count (RESOURCE_EXHAUSTED), a CI profile the GI lacks (UNIMPLEMENTED).
  virtual StatusOr<ComputeInstance> CreateComputeInstanceAt(
      uint32_t gpu, uint32_t gpu_instance_id, uint32_t ci_profile_index,
      const ComputeInstancePlacement& placement) = 0;
  // Every placement CI profile `ci_profile_index` may take inside the GI.
  virtual StatusOr<std::vector<ComputeInstancePlacement>> ComputeInstancePossiblePlacements(
      uint32_t gpu, uint32_t gpu_instance_id, uint32_t ci_profile_index) const = 0;
  // FAILED_PRECONDITION while processes use it.
  virtual Status DestroyComputeInstance(uint32_t gpu, uint32_t gpu_instance_id,
                                        uint32_t compute_instance_id) = 0;

  // The GPU's MIG devices (nvmlDeviceGetMigDeviceHandleByIndex), in NVML's order; empty when MIG
  // is off. UNIMPLEMENTED without MIG or where the library lacks the calls.
  virtual StatusOr<std::vector<MigDevice>> MigDevices(uint32_t gpu) const = 0;

  // Compute processes on the GPU with their device memory.
  virtual StatusOr<std::vector<GpuProcess>> RunningProcesses(uint32_t gpu) const = 0;
  // UNIMPLEMENTED on MIG-enabled GPUs (NVML cannot attribute utilisation there).
  virtual StatusOr<Utilization> UtilizationRates(uint32_t gpu) const = 0;
  // Per-process utilisation samples newer than `last_seen_us` (0: all the driver keeps); empty
  // when there is none. UNIMPLEMENTED on MIG-enabled GPUs.
  virtual StatusOr<std::vector<ProcessUtilization>> ProcessUtilizations(
      uint32_t gpu, uint64_t last_seen_us) const = 0;
};

struct NvmlOptions {
  // What dlopen is given. The default lets the dynamic linker find the driver's library;
  // tests pass the absolute path of the fake NVML.
  std::string library_path = "libnvidia-ml.so.1";
};

// The real implementation: dlopen + dlsym of NVML's C functions, no NVML headers needed.
class DlopenNvml final : public NvmlApi {
 public:
  explicit DlopenNvml(NvmlOptions options = {});
  ~DlopenNvml() override;
  DlopenNvml(const DlopenNvml&) = delete;
  DlopenNvml& operator=(const DlopenNvml&) = delete;

  // UNAVAILABLE "<library_path> not found: <dlerror>" when the library cannot be loaded, or
  // naming the missing symbol when it lacks one of the functions every driver since R450 has.
  Status Init() override;
  Status Shutdown() override;

  StatusOr<uint32_t> DeviceCount() const override;
  StatusOr<std::string> DeviceName(uint32_t gpu) const override;
  StatusOr<std::string> DeviceUuid(uint32_t gpu) const override;
  StatusOr<uint32_t> MinorNumber(uint32_t gpu) const override;
  StatusOr<DeviceMemory> Memory(uint32_t gpu) const override;
  StatusOr<MigMode> GetMigMode(uint32_t gpu) const override;
  StatusOr<GpuInstanceProfile> GpuInstanceProfileInfo(uint32_t gpu,
                                                      uint32_t profile_index) const override;
  StatusOr<std::vector<GpuInstancePlacement>> GpuInstancePossiblePlacements(
      uint32_t gpu, uint32_t profile_id) const override;
  StatusOr<std::vector<GpuInstance>> GpuInstances(uint32_t gpu) const override;
  StatusOr<GpuInstance> CreateGpuInstance(uint32_t gpu, uint32_t profile_id,
                                          const GpuInstancePlacement& placement) override;
  Status DestroyGpuInstance(uint32_t gpu, uint32_t gpu_instance_id) override;
  StatusOr<uint32_t> GpuInstanceRemainingCapacity(uint32_t gpu, uint32_t profile_id) const override;
  StatusOr<std::vector<ComputeInstance>> ComputeInstances(uint32_t gpu,
                                                          uint32_t gpu_instance_id) const override;
  StatusOr<ComputeInstance> CreateComputeInstance(uint32_t gpu, uint32_t gpu_instance_id,
                                                  uint32_t ci_profile_index) override;
  StatusOr<ComputeInstance> CreateComputeInstanceAt(
      uint32_t gpu, uint32_t gpu_instance_id, uint32_t ci_profile_index,
      const ComputeInstancePlacement& placement) override;
  StatusOr<std::vector<ComputeInstancePlacement>> ComputeInstancePossiblePlacements(
      uint32_t gpu, uint32_t gpu_instance_id, uint32_t ci_profile_index) const override;
  Status DestroyComputeInstance(uint32_t gpu, uint32_t gpu_instance_id,
                                uint32_t compute_instance_id) override;
  StatusOr<std::vector<MigDevice>> MigDevices(uint32_t gpu) const override;
  StatusOr<std::vector<GpuProcess>> RunningProcesses(uint32_t gpu) const override;
  StatusOr<Utilization> UtilizationRates(uint32_t gpu) const override;
  StatusOr<std::vector<ProcessUtilization>> ProcessUtilizations(
      uint32_t gpu, uint64_t last_seen_us) const override;

 private:
  struct Library;  // the dlopen handle and the resolved function pointers
  NvmlOptions options_;
  std::unique_ptr<Library> lib_;  // null before Init and after Shutdown
};

}  // namespace tessera::enforce
