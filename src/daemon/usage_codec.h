// The JSON of the usage endpoints (docs/api.md, "Usage"): the batch a node agent POSTs to
// /v1/nodes/{name}/usage, the times GET /v1/usage takes, and the hourly records it answers.
// Pure functions; control_plane_usage.cc calls them, tests/fuzz/http_request_fuzzer.cc feeds
// DecodeUsageBatch arbitrary bytes.
//
// Batch (what src/node/agent_usage.cc sends): the wire message and its codec are
// api::DecodeUsageBatch (tessera/api/usage_wire.h: the format, which fields are required, the
// rules a sample keeps, errors naming "samples[i].field"); DecodeUsageBatch here gives each
// sample the URL's node as a store record.
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

#include "tessera/api/usage_wire.h"
#include "tessera/core/status.h"
#include "tessera/metering/ledger.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

inline constexpr size_t kMaxUsageSamplesPerRequest = api::kMaxUsageSamplesPerRequest;

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
