// The workload half of the wire contract (docs/api.md, "Workloads"): the body of POST
// /v1/workloads, the answer to it, the workload view GET returns and a page of views, one typed
// message and one strict codec each. The control plane (src/daemon/workload_request.cc,
// control_plane_workloads.cc), `tessera ctl workloads` and `tessera run --server`
// (src/node/remote_run.cc) all use these, so the format is written once. Decoders refuse what the
// contract does not have: an unknown field, a wrong JSON type (1.5 where an integer is due, "1"
// for a number), a value out of range or not in its set is INVALID_ARGUMENT whose message starts
// with the field's path, which `bad_field` (may be null) also receives:
//
//   DecodeWorkloadRequest(R"({"tenant":"a","gpus":1,"gpu_milli":1500})", &f)
//     -> "gpu_milli: 1500 is out of range 1..1000", f == "gpu_milli"
//   DecodeWorkloadView(R"({"id":7,...,"request":{"tenant":"a","gpus":1,"gpu":2}})", &f)
//     -> "request.gpu: unknown field (known: tenant, ...)", f == "request.gpu"
//
// What the wire alone cannot check stays with the daemon (src/daemon/workload_request.h): whether
// `model` is in the GPU catalog and `mig_profile` / `vgpu_profile` are profiles of a known model.
// Everything else a request may get wrong (a fraction with gpus > 1, mode 'exclusive' with a
// fraction, a fraction without its memory limit) is refused here, naming the field.
//
// Worked example (a fractional request, stored and shown):
//   WorkloadRequest r{.tenant = "ml", .gpu_milli = 500, .gpu_mem_mib = 2048, .qos = "Burstable"}
//   EncodeWorkloadRequest(r)
//     = {"gpu_mem_mib":2048,"gpu_milli":500,"gpus":1,"qos":"Burstable","tenant":"ml"}
//   (defaults left out; keys in order, so Encode(Decode(Encode(r))) is the same bytes), and once
//   placed GET /v1/workloads/7 answers a WorkloadView whose `request` is r and whose `pods` are
//   {{"n1", {1}, -1}}, written {"placement": {"gpus":[1],"node":"n1"}, "pods": [{...}], ...}.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/lifecycle_state.h"
#include "tessera/core/status.h"

namespace tessera::api {

inline constexpr size_t kMaxCommandArgs = 256;
inline constexpr size_t kMaxCommandArgBytes = 4096;

// --- POST /v1/workloads ---------------------------------------------------------------------
// Wire values: names as the client wrote them (the daemon maps qos, mode, isolation and model to
// its types); "" / nullopt / the default means the field is left out.
struct WorkloadRequest {
  std::string tenant;        // required, 1..253
  int32_t gpus = 1;          // required, 1..16 GPUs per pod
  std::string name;          // <= 253
  std::string qos;           // "Guaranteed" | "Burstable" | "BestEffort", any case; "": the tenant's
  int32_t gpu_milli = 1000;  // 1..1000; < 1000 needs gpus = 1 and gpu_mem_mib > 0
  int64_t gpu_mem_mib = 0;   // 0..2^31
  std::string mig_profile;   // <= 32; not with vgpu_profile or a fraction
  std::string vgpu_profile;  // <= 64
  std::string mode;          // "exclusive" | "mig" | "mps" | "timeslice" | "fraction"
  std::string isolation;     // "none" | "process" | "hardware"
  std::optional<double> latency_slo_ms;  // (0, 3600000]
  int32_t priority = 0;      // -1000..1000
  int32_t pods = 1;          // 1..1024
  int64_t cpu_milli = 1000;  // 0..2^31
  int64_t memory_mib = 4096; // 0..2^31
  std::string model;         // <= 128, a catalog or NVML name
  std::string workload_class;  // <= 63
  std::string label;           // <= 63
  std::vector<std::string> command;  // 0 or 1..256 strings of <= 4096 bytes without NUL; [0] not ""
  friend bool operator==(const WorkloadRequest&, const WorkloadRequest&) = default;
};

std::string EncodeWorkloadRequest(const WorkloadRequest& request);
StatusOr<WorkloadRequest> DecodeWorkloadRequest(std::string_view body, std::string* bad_field);

// The answer to a submit (201): {"id": 7, "state": "pending"}.
struct WorkloadCreated {
  int64_t id = 0;  // >= 1
  std::string state;
  friend bool operator==(const WorkloadCreated&, const WorkloadCreated&) = default;
};
std::string EncodeWorkloadCreated(const WorkloadCreated& created);
StatusOr<WorkloadCreated> DecodeWorkloadCreated(std::string_view body, std::string* bad_field);

// --- GET /v1/workloads/{id}, GET /v1/workloads ----------------------------------------------
// A workload's state and its one string mapping (what the store keeps, the API shows and
// `?state=` takes) are core's (tessera/core/lifecycle_state.h), used here under the wire's names.
using ::tessera::IsEnded;
using ::tessera::kWorkloadStates;
using ::tessera::ParseWorkloadState;
using ::tessera::WorkloadState;
using ::tessera::WorkloadStateName;

struct WorkloadPod {
  std::string node;
  std::vector<int> gpus;  // 0..15
  int mig_start = -1;     // -1: none (left out)
  friend bool operator==(const WorkloadPod&, const WorkloadPod&) = default;
};

// One line of a workload's history (GET one only).
struct WorkloadHistoryEntry {
  int64_t time_ms = 0;
  std::string kind;
  std::string detail;
  friend bool operator==(const WorkloadHistoryEntry&, const WorkloadHistoryEntry&) = default;
};

struct WorkloadView {
  int64_t id = 0;  // >= 1
  std::string tenant;
  WorkloadState state = WorkloadState::kPending;
  std::string qos;
  int64_t priority = 0;
  WorkloadRequest request;  // as stored (canonical)
  std::string mode;         // may be ""
  std::string mode_reason;  // may be ""
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t version = 0;
  std::string name;                        // left out when ""
  std::optional<std::string> wait_reason;  // pending and rejected ones (may be "")
  std::string reason;                      // a failed one's, left out when ""
  std::optional<int64_t> exit_code;        // an ended one's, once its node reported it
  std::optional<int64_t> start_ms;
  std::vector<WorkloadPod> pods;  // written as "pods" and "placement" (= pods[0]) when not empty
  std::optional<std::vector<WorkloadHistoryEntry>> events;  // GET one only
  friend bool operator==(const WorkloadView&, const WorkloadView&) = default;
};

std::string EncodeWorkloadView(const WorkloadView& view);
StatusOr<WorkloadView> DecodeWorkloadView(std::string_view body, std::string* bad_field);

// {"continue": "<token>" | null, "workloads": [views]}.
struct WorkloadPage {
  std::string next_continue;  // "" is written null: the last page
  std::vector<WorkloadView> workloads;
  friend bool operator==(const WorkloadPage&, const WorkloadPage&) = default;
};
std::string EncodeWorkloadPage(const WorkloadPage& page);
StatusOr<WorkloadPage> DecodeWorkloadPage(std::string_view body, std::string* bad_field);

}  // namespace tessera::api
