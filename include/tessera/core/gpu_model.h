// The GPU model catalog: which GPU models tessera knows, by the names traces and users use,
// with their facts: memory, SMs, bandwidth, bf16 TFLOPS and, for MIG-capable models, the
// GPU-instance profiles with their slices, max counts, NVML profile indexes and valid
// placements. The MIG data is generated from data/gpu-models/mig-profiles.json (NVIDIA MIG
// User Guide, nvml.h, observed nvidia-smi output) by scripts/gen_gpu_catalog.py.
//
// Placement only needs a model's identity (a task may be restricted to some models, and the
// catalog turns "V100M16|V100M32" into a bit mask). The catalog holds up to 64 models so that a
// set of models is one uint64_t. Models without MIG (T4, V100, P100, A10 and the Alibaba
// trace's G1/G2/G3) are whole/fractional-only: `mig` is empty.
//
//   const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
//   StatusOr<ModelMask> m = cat.ParseModelList("V100M16|V100M32");   // two bits set
//   cat.Find("H100") -> NOT_FOUND error naming the known models
//   const MigProfile* p = cat.info(*cat.Find("H100-80GB")).mig->FindProfile("3g.40gb");
//   p->starts == {0, 4}, p->size == 4 (memory slices), p->max_count == 2
//   const MigComputeProfile* c = p->FindComputeProfile("1c.3g.40gb");
//   c->compute_slices == 1, c->starts == {0, 1, 2}, c->max_count == 3, c->nvml_profile_index == 0
//
// Compute instances (CIs) split a GPU instance's SMs; they share its memory and engines. Which
// CI sizes a GI offers depends only on its compute slices (mig-profiles.json,
// compute_instance_profiles_within_gi): 1g -> 1c; 2g -> 1c x2, 2c; 3g -> 1c x3, 2c, 3c;
// 4g -> 1c x4, 2c x2, 4c (no 3c); 7g -> 1c x7, 2c x3, 3c x2, 4c, 7c. CI placements (compute
// slices inside the GI) follow MigComputeInstanceStarts below.
//
// Thread-safety: immutable after construction; Builtin() is safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/ids.h"
#include "tessera/core/quantity.h"
#include "tessera/core/status.h"

namespace tessera {

// A set of GPU models, bit i = GpuModelId{i}. 0 means "no restriction" where a task's
// allowed models are meant.
using ModelMask = uint64_t;

// One compute-instance profile inside a GPU instance of a given profile.
struct MigComputeProfile {
  std::string name;            // "1c.3g.40gb": <compute slices>c.<GPU-instance profile>
  int compute_slices = 0;      // of the GPU instance's compute slices; also the placement size
  int nvml_profile_index = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_* (1c=0, 2c=1, 3c=2, 4c=3, 7c=4);
                               // nvidia-smi -cci takes the same number
  int max_count = 0;           // CIs of this profile per GPU instance
  std::vector<int> starts;     // valid placement starts, in compute slices inside the GI
  bool fills_gpu_instance = false;  // the default CI (`nvidia-smi mig -cgi ... -C`)
};

// Placement starts of a compute instance of `ci_slices` compute slices inside a GPU instance of
// `gi_slices`: multiples of ci_slices that fit, except that a 3c sits at 0 and, in a 7g, at 4
// (as the 3g GPU instance does). 7g: 1c {0..6}, 2c {0,2,4}, 3c {0,4}, 4c {0}, 7c {0};
// 4g: 1c {0..3}, 2c {0,2}, 4c {0}; 3g: 1c {0,1,2}, 2c {0}, 3c {0}. This is the CI placement
// table of NVIDIA's go-nvml A100 mock; the number of starts equals each CI's max count in
// mig-profiles.json for every GI size (checked by scripts/gen_gpu_catalog.py).
std::vector<int> MigComputeInstanceStarts(int gi_slices, int ci_slices);

// One MIG GPU-instance profile of a model.
struct MigProfile {
  std::string name;             // "1g.10gb", "1g.10gb+me" (with media extensions)
  int compute_slices = 0;       // of the model's compute slices (7, or 4 on A30)
  int memory_slices = 0;        // of the model's memory slices (8, or 4 on A30)
  int max_count = 0;            // instances of this profile per GPU
  int nvml_profile_index = 0;   // NVML_GPU_INSTANCE_PROFILE_* passed to NVML
  int profile_id = -1;          // nvidia-smi's profile ID (-lgip); -1 if unknown
  std::vector<int> starts;      // valid placement starts, in memory slices
  int size = 0;                 // placement size, in memory slices
  MiB memory{0};                // usable memory (observed -lgip value where known)
  bool media_extensions = false;
  int multiprocessors = 0;      // SMs (observed -lgip value); 0 where unknown
  std::vector<MigComputeProfile> compute_profiles;  // ordered by compute slices

  const MigComputeProfile* FindComputeProfile(std::string_view ci_name) const {
    for (const MigComputeProfile& c : compute_profiles) {
      if (c.name == ci_name) return &c;
    }
    return nullptr;
  }
};

struct MigGeometry {
  int compute_slices = 0;
  int memory_slices = 0;
  int max_gpu_instances = 0;
  std::string placement_status;  // "observed", or which facts are inferred
  std::string compute_profile_status;  // where the compute-instance profiles come from
  std::vector<MigProfile> profiles;

  const MigProfile* FindProfile(std::string_view profile_name) const {
    for (const MigProfile& p : profiles) {
      if (p.name == profile_name) return &p;
    }
    return nullptr;
  }
};

// The vGPU scheduler of a GPU running time-sliced vGPUs (NVML_VGPU_SCHEDULER_POLICY_* 1, 2, 3):
// best effort (default; idle cycles go to whoever has work), equal share (1/n of the running
// vGPUs), fixed share (1/max vGPUs of the type, whether or not the others run). Source:
// vgpu-profiles.json "scheduler" (NVIDIA AI Enterprise user guide, ch. 7).
enum class VgpuScheduler { kBestEffort, kEqualShare, kFixedShare };

// "best_effort", "equal_share", "fixed_share" (the names of vgpu-profiles.json).
std::string_view VgpuSchedulerName(VgpuScheduler s);

// An NVIDIA vGPU C-series (compute) type; VMs only. Time-sliced types share the GPU under one of
// the schedulers above (fixed share only in equal-size mode, i.e. when every vGPU on the GPU has
// the same framebuffer). MIG-backed types ("H100-3-40C") each own one GPU instance and run in
// parallel with no time slicing, so no scheduler applies; they need MIG mode, and time-sliced
// and MIG-backed vGPUs cannot share a GPU.
//   H100-20C:   framebuffer 20480 MiB, 4 per GPU, schedulers {best effort, equal, fixed},
//               mixed-size mode {best effort, equal}
//   H100-3-40C: mig_backed, gpu_instance_profile "3g.40gb", 2 per GPU, no schedulers
struct VgpuProfile {
  std::string name;            // "H100-20C", "H100-3-40C"
  MiB framebuffer{0};
  int max_per_gpu = 0;         // equal-size mode (MIG-backed: the GI profile's max count)
  int max_per_gpu_mixed = 0;   // mixed-size mode; 0 for MIG-backed types
  bool mig_backed = false;
  std::string gpu_instance_profile;  // MIG-backed: the backing GI profile, e.g. "3g.40gb"
  std::vector<VgpuScheduler> schedulers;             // equal-size mode; empty if MIG-backed
  std::vector<VgpuScheduler> mixed_size_schedulers;  // mixed-size mode; empty if MIG-backed

  bool Supports(VgpuScheduler s, bool mixed_size_mode) const {
    const auto& v = mixed_size_mode ? mixed_size_schedulers : schedulers;
    for (VgpuScheduler x : v) {
      if (x == s) return true;
    }
    return false;
  }
};

struct GpuModelInfo {
  std::string name;      // as written in traces and flags, e.g. "V100M32", "H100-80GB"
  MiB memory{0};         // device memory; 0 where undisclosed (the trace's G1/G2/G3)
  std::string note;      // where the facts come from / what the code means
  int sm_count = 0;                    // 0 where unknown
  double memory_bandwidth_gbps = 0;    // 0 where unknown
  double bf16_dense_tflops = 0;        // 0 where unknown
  std::optional<MigGeometry> mig;      // empty: no MIG (whole or fractional sharing only)
  std::vector<VgpuProfile> vgpu;       // C-series types, time-sliced then MIG-backed; empty: none known
};

class GpuModelCatalog {
 public:
  static constexpr size_t kMaxModels = 64;

  // The models tessera ships with: the Alibaba trace's models and the common data-centre GPUs.
  static const GpuModelCatalog& Builtin();

  // Fails with ALREADY_EXISTS for a duplicate name, RESOURCE_EXHAUSTED past kMaxModels.
  Status Add(GpuModelInfo info);

  // A catalog name ("H100-80GB") or the name NVML reports for the device ("NVIDIA H100 80GB
  // HBM3", see FindByNvmlName). NOT_FOUND (message lists the known names) for an unknown model.
  StatusOr<GpuModelId> Find(std::string_view name) const;
  // The model nvmlDeviceGetName names: the boards seen in the wild ("NVIDIA A100-SXM4-40GB",
  // "NVIDIA A100-PCIE-40GB" -> A100-40GB; "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe" ->
  // H100-80GB; "NVIDIA H200" -> H200-141GB; "Tesla V100-SXM2-32GB" -> V100M32; ...), or
  // "NVIDIA <catalog name>" / "Tesla <catalog name>". NOT_FOUND for any other name.
  StatusOr<GpuModelId> FindByNvmlName(std::string_view nvml_name) const;
  // Parses a '|'-separated list of model names; the empty string gives 0 (any model).
  StatusOr<ModelMask> ParseModelList(std::string_view list) const;

  const GpuModelInfo& info(GpuModelId id) const { return models_[id.value()]; }
  size_t size() const { return models_.size(); }
  std::string KnownNames() const;  // "A10, G1, ..." for error messages

 private:
  std::vector<GpuModelInfo> models_;
};

inline constexpr ModelMask ModelBit(GpuModelId id) { return ModelMask{1} << id.value(); }

}  // namespace tessera
