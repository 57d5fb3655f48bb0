// Reading GPU models from a file: the schema of data/gpu-models/mig-profiles.json, so that a
// user can add a model tessera does not ship (a new board, a different driver's profiles).
//
//   {"gpus": [{"model": "X100-96GB", "compute_slices": 7, "memory_slices": 8,
//              "max_gpu_instances": 7,
//              "specs": {"memory_gb": 96, "nvidia_smi_total_mib": 97871, "sm_count": 132},
//              "gpu_instance_profiles": [
//                {"name": "1g.12gb", "nvml_profile_index": "NVML_GPU_INSTANCE_PROFILE_1_SLICE",
//                 "profile_id": 19, "compute_slices": 1, "memory_slices": 1, "max_count": 7,
//                 "memory_gb_nominal": 12, "placements": {"starts": [0,1,2,3,4,5,6], "size": 1}},
//                ...]}]}
// nvml_profile_index may be the NVML constant's name (optionally followed by text, as in the
// shipped file) or its number. Compute-instance profiles come from the top-level
// "compute_instance_profiles_within_gi": {"by_gi_compute_slices": {"3": [{"ci": "1c", "max": 3},
// {"ci": "2c", "max": 1}, {"ci": "3c", "max": 1, "default": true}], ...}} as in the shipped file
// (placements by MigComputeInstanceStarts; "max" may not exceed them; exactly one <n>c fills
// each n-slice GI); without it, the built-in catalog's table. vGPU types are not read from
// files. Every error names the file and the JSON path of the bad field:
//   "my.json: gpus[0].gpu_instance_profiles[2].placements.starts[1]: start 7 + size 2 passes
//    the 8 memory slices",
//   "my.json: compute_instance_profiles_within_gi.by_gi_compute_slices.4[1].max: 3 exceeds the
//    2 placement(s) of a 2c in a 4-slice GPU instance".
//
// Thread-safety: pure function.
#pragma once

#include <string_view>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"

namespace tessera::partition {

// INVALID_ARGUMENT for malformed JSON (with its byte offset) or a field that breaks the schema.
StatusOr<std::vector<GpuModelInfo>> ParseGpuModelsJson(std::string_view text, std::string_view path);

// A copy of the built-in catalog with the file's models added; ALREADY_EXISTS names a model the
// catalog has already.
StatusOr<GpuModelCatalog> CatalogWithModels(const std::vector<GpuModelInfo>& extra);

}  // namespace tessera::partition
