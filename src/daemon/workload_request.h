// The body of POST /v1/workloads, decoded and checked: what a tenant asks for, in the design's
// request vocabulary. The wire message and its strict codec are api::WorkloadRequest
// (tessera/api/workload_wire.h); this adds what the GPU catalog decides (the model, the MIG and
// vGPU profiles) and maps the names to the scheduler's types. Every problem is a 400 that names
// the field; nothing here touches the store or the scheduler.
//
// A body: {"tenant": "vision", "gpus": 1, "gpu_milli": 500, "gpu_mem_mib": 20480,
//          "qos": "Burstable"}
// Fields (units in the names; all but the first two optional):
//   tenant          string, the leaf tenant the work is charged to
//   gpus            integer 1..16, GPUs per pod
//   qos             "Guaranteed" | "Burstable" | "BestEffort" (any case); absent: the tenant's
//                   default_qos (qos_from_tenant, for the control plane to resolve)
//   gpu_milli       integer 1..1000, share of each GPU (default 1000: whole GPUs); a fraction
//                   (< 1000) needs gpus = 1
//   gpu_mem_mib     integer 0..2^31, device memory per GPU (required with a fraction)
//   mig_profile     a MIG profile name ("1g.10gb"): one MIG instance per GPU instead of a share
//   vgpu_profile    a vGPU type ("H100-20C"); not with mig_profile or a fraction
//   mode            "exclusive" | "mig" | "mps" | "timeslice" | "fraction": the sharing mode;
//                   absent: chosen by partition::ChooseMode from isolation and SLO
//   isolation       "none" (default) | "process" | "hardware"
//   latency_slo_ms  number > 0 (<= 3,600,000): a per-request latency target
//   priority        integer -1000..1000 within the tenant (default 0)
//   pods            integer 1..1024, a gang: all pods start together (default 1)
//   cpu_milli       integer >= 0 per pod (default 1000); memory_mib integer >= 0 (default 4096)
//   model           a GPU model, catalog or NVML name ("A100-80GB", "NVIDIA H100 80GB HBM3")
//   workload_class, label   strings (1..63 characters) for the affinity rules
//   name            a free-form name (<= 253 characters)
//   command         array of strings (program and arguments, 1..256 items of <= 4096 bytes):
//                   what the node agent runs under the shim when the workload is placed; absent:
//                   the agent only holds the slot (limits) for processes attached to it
// Unknown fields, wrong JSON types (1.5 where an integer is due, "1" for a number) and values
// out of range are refused; the message says which field and what is allowed.
//
//   std::string field;
//   auto r = DecodeWorkloadRequest(R"({"tenant":"a","gpus":1,"gpu_milli":1500,"qos":"Burstable"})",
//                                  GpuModelCatalog::Builtin(), &field);
//   -> INVALID_ARGUMENT "gpu_milli: 1500 is out of range 1..1000", field == "gpu_milli"
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/api/workload_wire.h"
#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/partition/sharing_mode.h"
#include "tessera/sched/job.h"

namespace tessera::daemon {

using api::kMaxCommandArgBytes;
using api::kMaxCommandArgs;

struct WorkloadRequest {
  std::string tenant;
  std::string name;
  int32_t gpus = 1;
  int32_t gpu_milli = 1000;
  int64_t gpu_mem_mib = 0;
  std::string mig_profile;
  std::string vgpu_profile;
  std::optional<partition::SharingModeKind> mode;
  partition::Isolation isolation = partition::Isolation::kNone;
  std::optional<double> latency_slo_ms;
  sched::QosClass qos = sched::QosClass::kBurstable;
  // The body had no qos: the tenant's default_qos applies. qos is Burstable meanwhile; the control
  // plane sets it from the tenant and clears this before it resolves and stores the request.
  bool qos_from_tenant = false;
  int32_t priority = 0;
  int32_t pods = 1;
  int64_t cpu_milli = 1000;
  int64_t memory_mib = 4096;
  std::optional<GpuModelId> model;
  std::string workload_class;
  std::string label;
  std::vector<std::string> command;
  friend bool operator==(const WorkloadRequest&, const WorkloadRequest&) = default;
};

// `bad_field` (if not null) receives the field a refusal is about ("" for the body as a whole).
StatusOr<WorkloadRequest> DecodeWorkloadRequest(std::string_view body, const GpuModelCatalog& catalog,
                                                std::string* bad_field);
// The same from the decoded wire message (the catalog's checks and the names' mapping).
StatusOr<WorkloadRequest> ResolveWorkloadRequest(const api::WorkloadRequest& wire, const GpuModelCatalog& catalog,
                                                 std::string* bad_field);
// The wire message of a request (names canonical: "Burstable", the catalog's model name).
api::WorkloadRequest WorkloadRequestWire(const WorkloadRequest& request, const GpuModelCatalog& catalog);

// The request as the canonical JSON body DecodeWorkloadRequest reads back to an equal request
// (defaults left out, and qos when it is the tenant's to choose): what the control plane stores as
// the workload's spec.
std::string EncodeWorkloadRequest(const WorkloadRequest& request, const GpuModelCatalog& catalog);
// "exclusive", "mig", "mps", "timeslice", "fraction", "vgpu".
std::string_view ModeKindName(partition::SharingModeKind kind);

}  // namespace tessera::daemon
