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
};

struct MigGeometry {
  int compute_slices = 0;
  int memory_slices = 0;
  int max_gpu_instances = 0;
  std::string placement_status;  // "observed", or which facts are inferred
  std::vector<MigProfile> profiles;

  const MigProfile* FindProfile(std::string_view profile_name) const {
    for (const MigProfile& p : profiles) {
      if (p.name == profile_name) return &p;
    }
    return nullptr;
  }
};

// An NVIDIA vGPU C-series (compute) type, time-sliced; VMs only. The GPU's vGPU scheduler is one
// of best effort (default), equal share, fixed share (NVML_VGPU_SCHEDULER_POLICY_*).
struct VgpuProfile {
  std::string name;            // "H100-20C"
  MiB framebuffer{0};
  int max_per_gpu = 0;         // equal-size mode
  int max_per_gpu_mixed = 0;   // mixed-size mode
};

enum class VgpuScheduler { kBestEffort, kEqualShare, kFixedShare };

struct GpuModelInfo {
  std::string name;      // as written in traces and flags, e.g. "V100M32", "H100-80GB"
  MiB memory{0};         // device memory; 0 where undisclosed (the trace's G1/G2/G3)
  std::string note;      // where the facts come from / what the code means
  int sm_count = 0;                    // 0 where unknown
  double memory_bandwidth_gbps = 0;    // 0 where unknown
  double bf16_dense_tflops = 0;        // 0 where unknown
  std::optional<MigGeometry> mig;      // empty: no MIG (whole or fractional sharing only)
  std::vector<VgpuProfile> vgpu;       // empty: no vGPU C-series types known
};

class GpuModelCatalog {
 public:
  static constexpr size_t kMaxModels = 64;

  // The models tessera ships with: the Alibaba trace's models and the common data-centre GPUs.
  static const GpuModelCatalog& Builtin();

  // Fails with ALREADY_EXISTS for a duplicate name, RESOURCE_EXHAUSTED past kMaxModels.
  Status Add(GpuModelInfo info);

  // NOT_FOUND (message lists the known names) for an unknown model.
  StatusOr<GpuModelId> Find(std::string_view name) const;
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
