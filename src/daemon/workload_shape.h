// From a tenant's request (workload_request.h) to what the scheduler places: the sharing mode
// (given, or chosen by partition::ChooseMode from the isolation need and the latency SLO) and
// the pod shape (sched::LiveJob). The result is stored with the workload, so that a restart
// rebuilds exactly the job that was admitted, whatever the cluster looks like by then.
//
// Which GPU model the choice is made for: the request's `model`, else `default_model` (the
// control plane passes the model most of its ready GPUs have). With neither, a request that
// needs the model to be decided (hardware isolation, a latency SLO, a MIG mode without a
// profile's model) is refused, naming `model`.
//
// Worked examples (H100-80GB the default model):
//   {gpus 2, qos Burstable}                                  -> exclusive, 2 x 1000 milli
//   {gpus 1, gpu_milli 300, gpu_mem_mib 8192}                -> fraction(300,8192MiB), 1 x 300 milli
//   {... isolation "process"}                                -> timeslice(300,8192MiB)
//   {gpus 1, gpu_milli 100, gpu_mem_mib 8192, isolation "hardware"}
//                                                            -> mig:1g.10gb on H100-80GB only
//   {mig_profile "1g.10gb"} without a model                  -> INVALID_ARGUMENT "model: ..."
//                                                               (A100-80GB has 1g.10gb too)
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "src/daemon/workload_request.h"
#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/partition/sharing_mode.h"
#include "tessera/sched/live_scheduler.h"

namespace tessera::daemon {

struct WorkloadShape {
  WorkloadRequest request;
  partition::SharingMode mode;
  std::string mode_reason;
  sched::LiveJob job;  // id and submit are the caller's
};

StatusOr<WorkloadShape> ResolveWorkload(const WorkloadRequest& request, std::optional<GpuModelId> default_model,
                                        const GpuModelCatalog& catalog, std::string* bad_field);

// The stored spec: {"request": {...}, "mode": "fraction(300,8192MiB)", "mode_reason": "...",
// "pod": {"cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "mig_profile", "model"},
// "gpu_memory_mib"}.
std::string WorkloadSpecJson(const WorkloadShape& shape, const GpuModelCatalog& catalog);
// Back from the stored spec (INTERNAL when it is not what WorkloadSpecJson wrote).
StatusOr<WorkloadShape> ParseWorkloadSpec(std::string_view spec_json, const GpuModelCatalog& catalog);

}  // namespace tessera::daemon
