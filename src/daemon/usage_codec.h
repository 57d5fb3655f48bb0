// The JSON of the usage endpoints (docs/api.md, "Usage"): the batch a node agent POSTs to
// /v1/nodes/{name}/usage, the times GET /v1/usage takes, and the hourly records it answers.
// Pure functions; control_plane_usage.cc calls them, tests/fuzz/http_request_fuzzer.cc feeds
// DecodeUsageBatch arbitrary bytes.
//
// Batch (what src/node/agent_usage.cc sends):
//   {"samples": [{"tenant": "ml", "workload": "17", "gpu": "0", "model": "A100-80GB",
//                 "partition": "share", "seq": 4, "start": 1793491200, "end": 1793491260,
//                 "gpu_milli_s_allocated": 30000, "gpu_milli_s_used": 12000,
//                 "memory_mib_s": 491520, "peak_memory_mib": 8192, "kernel_launches": 911,
//                 "bytes_transferred": -1}, ...]}
// Every field is required but bytes_transferred (default -1, unknown); fields this version does
// not know are ignored (a newer agent's samples are not lost). A bad sample does not refuse the
// batch: its UsageItem carries the error, which names the field:
//   {"samples": [{"tenant": "ml", ..., "start": 60, "end": 60, ...}]}
//     -> items[0].error INVALID_ARGUMENT "samples[0].end: 60 is not after start 60",
//        items[0].field "samples[0].end"
// The batch itself is refused when the body is not {"samples": [...]} (INVALID_ARGUMENT) or holds
// more than `max_samples` samples (RESOURCE_EXHAUSTED: the handler answers 413).
//
// Times (GET /v1/usage?from=&to=): unix seconds ("1793491200") or RFC 3339
// ("2026-11-01T00:00:00Z", "2026-11-01T01:00:00+01:00", fractions of a second truncated).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/status.h"
#include "tessera/metering/ledger.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

inline constexpr size_t kMaxUsageSamplesPerRequest = 2000;

// One sample of a batch: decoded (error OK) or refused (error names `field`, "samples[3].end").
struct UsageItem {
  size_t index = 0;
  store::UsageSampleRecord sample;  // node set to the URL's node
  Status error;
  std::string field;
};

StatusOr<std::vector<UsageItem>> DecodeUsageBatch(std::string_view node, std::string_view body,
                                                  std::string* bad_field,
                                                  size_t max_samples = kMaxUsageSamplesPerRequest);

// The ledger's view of a stored sample.
metering::SourceKey UsageSourceKey(const store::UsageSampleRecord& sample);
metering::SampleValues UsageValues(const store::UsageSampleRecord& sample);

// The field of a sample that a ledger refusal is about ("samples[2].seq" for a conflicting resend).
std::string LedgerErrorField(const Status& error, size_t index);

// Seconds since the epoch of a `from`/`to` value; INVALID_ARGUMENT naming `field`.
StatusOr<int64_t> ParseUsageTime(std::string_view text, std::string_view field);

// One hourly record of GET /v1/usage: {"tenant", "hour" (RFC 3339), "hour_s", "node", "gpu",
// "model", "partition", "workload", "seconds", the quantities, "samples"}.
nlohmann::json UsageRecordView(const metering::SourceKey& key, const metering::HourlyRecord& record);

}  // namespace tessera::daemon
