// What a task asks of one node: CPU, memory and GPUs (count x per-GPU share), restricted to
// some GPU models. This is the placement engine's vocabulary (the Alibaba trace's, too).
// A task may instead ask for one named MIG instance (a GPU-instance profile of one MIG-capable
// model): mig_profile is then the profile's index in that model's MigGeometry, allowed_models
// names exactly that model, and gpu_milli is the share of the GPU the instance blocks (its
// memory slices x 1000 / the model's memory slices). placement::MigRequest (mig.h) builds one
// from the profile's name.
//
//   TaskRequest t{.cpu = CpuMilli{4000}, .memory = MiB{8192}, .num_gpu = 1,
//                 .gpu_milli = GpuMilli{500}};            // half a GPU, any model
//   t.IsSharing() == true; t.TotalGpu() == GpuMilli{500};
//   MigRequest(h100_id, h100_geometry, "3g.40gb", ...)   // mig_profile 4, gpu_milli 500
//
// Thread-safety: plain value.
#pragma once

#include <cstdint>

#include "tessera/core/gpu_model.h"
#include "tessera/core/quantity.h"
#include "tessera/core/status.h"

namespace tessera::placement {

struct TaskRequest {
  CpuMilli cpu{0};
  MiB memory{0};
  int32_t num_gpu = 0;         // 0 (CPU-only), 1 .. kMaxGpusPerNode
  GpuMilli gpu_milli{0};       // per requested GPU: 1..1000; below 1000 only when num_gpu == 1
  ModelMask allowed_models = 0;  // 0 = any model
  int32_t mig_profile = -1;      // -1: not a MIG request; else a profile index (see above)

  bool IsCpuOnly() const { return num_gpu == 0; }
  bool IsMig() const { return mig_profile >= 0; }
  // One GPU, a fraction of it (milli-GPU, not a MIG instance).
  bool IsSharing() const { return num_gpu == 1 && gpu_milli < kWholeGpu && mig_profile < 0; }
  bool IsWholeGpu() const { return num_gpu > 0 && gpu_milli == kWholeGpu && mig_profile < 0; }
  GpuMilli TotalGpu() const { return gpu_milli * num_gpu; }
  bool AllowsModel(ModelMask model_bit) const {
    return allowed_models == 0 || (allowed_models & model_bit) != 0;
  }

  friend bool operator==(const TaskRequest&, const TaskRequest&) = default;
};

// Checks the invariants above; the message names the offending field.
Status ValidateTask(const TaskRequest& task);

}  // namespace tessera::placement
