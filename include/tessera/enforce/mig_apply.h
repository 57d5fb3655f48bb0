// Applying a MIG reconfiguration (the MIG planner's ordered destroy/create steps) to a node's
// GPUs through NvmlApi, and reading back what exists. The planner (partition/mig_planner.h)
// speaks catalog profile indexes; the caller (the CLI, the node agent) turns each of its steps
// into a MigStep in NVML terms, so that enforce needs neither partition nor the scheduler.
//
// ApplyMigSteps first checks every step against the driver, changing nothing if one fails:
// the GPU exists and has MIG enabled; each profile index resolves to a driver profile with the
// expected compute slices; each placement is one the driver lists for it; each GI a destroy
// step names exists at that placement with that profile and runs no process. Then it runs the
// steps in order: a destroy removes the GI's compute instances and then the GI; a create makes
// the GI at its exact placement (nvmlDeviceCreateGpuInstanceWithPlacement) and, when the step
// names a CI profile, the compute instance that fills it (like `nvidia-smi mig -cgi ... -C`).
// It stops at the first failure; the error names the step and what was already done.
//
//   H100-80GB, empty GPU 0, plan "create 3g.40gb@0, create 3g.40gb@4":
//     steps = {{kCreate, gpu 0, "3g.40gb", index 2, start 0, size 4, 3 slices, ci index 2},
//              {kCreate, gpu 0, "3g.40gb", index 2, start 4, size 4, 3 slices, ci index 2}}
//     ApplyMigSteps(nvml, steps) -> 2 GIs (ids from the driver) with one 3c CI each;
//     ReadMigInstances(nvml, 0) -> [{gi 0:4 [ci 0:3]}, {gi 4:4 [ci 0:3]}]
//   Applying the same steps again changes nothing and fails in the preflight:
//     "step 1 (create 3g.40gb@0 on GPU 0): memory slices 0:4 overlap GPU instance 1 at 0:4"
//
// Nothing in the test suite points this at a real GPU: tests use the in-tree fake NVML, and
// the CLI path that does (`tessera mig apply`) refuses to run without --yes.
//
// Thread-safety: none of its own; do not run two applies on one GPU at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/enforce/nvml.h"

namespace tessera::enforce {

struct MigStep {
  enum class Kind { kDestroy, kCreate };
  Kind kind = Kind::kCreate;
  uint32_t gpu = 0;
  std::string profile;             // the catalog's name, e.g. "3g.40gb" (messages only)
  uint32_t profile_index = 0;      // NVML_GPU_INSTANCE_PROFILE_*
  uint32_t compute_slices = 0;     // what the driver's profile must report
  GpuInstancePlacement placement;  // memory slices
  int ci_profile_index = -1;       // create: NVML_COMPUTE_INSTANCE_PROFILE_* of the CI that
                                   // fills the GI; -1 creates no compute instance

  // "create 3g.40gb@4 on GPU 0"
  std::string Describe() const;
};

struct MigStepResult {
  MigStep step;
  uint32_t gpu_instance_id = 0;                // created or destroyed
  std::vector<uint32_t> compute_instance_ids;  // created or destroyed with it
};

// The step for GPU-instance profile `profile` (an index into geometry.profiles, as in the MIG
// planner's steps) at memory slice `start`, in NVML terms from the catalog: the NVML profile
// index, compute slices, placement size and the CI profile that fills the GI.
// INVALID_ARGUMENT for a profile index out of range or a start the profile does not allow.
StatusOr<MigStep> CatalogMigStep(const MigGeometry& geometry, MigStep::Kind kind, uint32_t gpu,
                                 int profile, int start);

// Whether the steps fit the node: every GPU they touch must be of `model` by the name NVML
// reports for it (GpuModelCatalog::FindByNvmlName), so that a plan made for one model is never
// applied to another. Reads names only; call it before ApplyMigSteps. FAILED_PRECONDITION
// naming both models, e.g. "GPU 0 is an NVIDIA A100-SXM4-40GB (A100-40GB), not a H100-80GB: the
// plan was made for H100-80GB"; GPUs past the node's count are left to ApplyMigSteps' preflight.
Status CheckMigStepsModel(const NvmlApi& nvml, const GpuModelCatalog& catalog, GpuModelId model,
                          const std::vector<MigStep>& steps);

// OK with one result per step, or the first error (the preflight's, or the step's with the
// count of steps already applied).
StatusOr<std::vector<MigStepResult>> ApplyMigSteps(NvmlApi& nvml, const std::vector<MigStep>& steps);

struct MigInstanceState {
  GpuInstance gpu_instance;
  std::vector<ComputeInstance> compute_instances;
};

// The GPU instances of `gpu` (ordered by placement) with their compute instances.
StatusOr<std::vector<MigInstanceState>> ReadMigInstances(const NvmlApi& nvml, uint32_t gpu);

}  // namespace tessera::enforce
