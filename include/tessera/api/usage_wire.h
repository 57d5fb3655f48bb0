// The usage batch of the wire contract (docs/api.md, "Usage"): what a node agent POSTs to
// /v1/nodes/{name}/usage, one sample per workload, GPU and span. The agent
// (src/node/agent_usage.cc) encodes its samples with EncodeUsageSample and sends them with
// EncodeUsageBatch; the control plane (src/daemon/usage_codec.cc) decodes with DecodeUsageBatch;
// tests/fuzz/http_request_fuzzer.cc feeds it arbitrary bytes.
//
//   {"samples": [{"tenant": "ml", "workload": "17", "gpu": "0", "model": "A100-80GB",
//                 "partition": "share", "seq": 4, "start": 1793491200, "end": 1793491260,
//                 "gpu_milli_s_allocated": 30000, "gpu_milli_s_used": 12000,
//                 "memory_mib_s": 491520, "peak_memory_mib": 8192, "kernel_launches": 911,
//                 "bytes_transferred": -1, "nvml_used_milli": 410, "nvml_memory_mib": 8706}, ...]}
//
// Every field is required but bytes_transferred (default -1, unknown) and the two NVML figures.
// Those are the driver's view of the same workload on the same GPU, next to what the shim counted
// (issue 29: a tenant that under-reports its GPU time is seen): "nvml_used_milli" is the SM
// utilisation NVML sampled for the workload's processes, summed over them and averaged over the
// span, in milli of the GPU (0..1000); "nvml_memory_mib" the most device memory NVML listed for
// them on the GPU during the span (their CUDA contexts included). Each is left out where the
// driver did not give it (no NVML, per-process utilisation NOT_SUPPORTED as under MIG, no sample
// at all on the GPU during the span, a process whose memory NVML could not tell): absent is not
// zero. They are observations, not billed: the ledger never reads them. This is the one message
// of the contract that is not strict about unknown fields, by design and as documented: fields
// of a sample this version does not know are ignored, so that a newer agent's samples (which are
// billed) are not lost; the batch's own fields are strict. A bad sample does not refuse the batch:
// its UsageItem carries the error, which names the field:
//   {"samples": [{"tenant": "ml", ..., "start": 60, "end": 60, ...}]}
//     -> items[0].error INVALID_ARGUMENT "samples[0].end: 60 is not after start 60",
//        items[0].field "samples[0].end"
// The batch itself is refused when the body is not {"samples": [...]} (INVALID_ARGUMENT) or holds
// more than `max_samples` samples (RESOURCE_EXHAUSTED: the handler answers 413).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::api {

inline constexpr size_t kMaxUsageSamplesPerRequest = 2000;

struct UsageSample {
  std::string tenant, workload, gpu, model, partition;  // 1..128 characters each
  int64_t seq = 0;
  int64_t start_s = 0;  // "start": unix seconds, [start, end)
  int64_t end_s = 0;    // "end"
  int64_t gpu_milli_s_allocated = 0;  // at most one GPU for the span
  int64_t gpu_milli_s_used = 0;       // at most one GPU busy for the span
  int64_t memory_mib_s = 0;
  int64_t peak_memory_mib = 0;
  int64_t kernel_launches = 0;
  int64_t bytes_transferred = -1;  // -1: unknown
  std::optional<int64_t> nvml_used_milli;  // "nvml_used_milli", 0..1000; empty: the driver gave none
  std::optional<int64_t> nvml_memory_mib;  // "nvml_memory_mib"; empty: the driver gave none
  friend bool operator==(const UsageSample&, const UsageSample&) = default;
};

// One sample as a JSON object (the agent keeps these in its outbox file as they are).
std::string EncodeUsageSample(const UsageSample& sample);
// {"samples": [...]} of samples already encoded by EncodeUsageSample.
std::string EncodeUsageBatch(const std::vector<std::string>& encoded_samples);

// One sample of a batch: decoded (error OK) or refused (error names `field`, "samples[3].end").
struct UsageItem {
  size_t index = 0;
  UsageSample sample;
  Status error;
  std::string field;
};

StatusOr<std::vector<UsageItem>> DecodeUsageBatch(std::string_view body, std::string* bad_field,
                                                  size_t max_samples = kMaxUsageSamplesPerRequest);

}  // namespace tessera::api
