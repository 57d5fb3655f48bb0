// The ledger file: usage samples (and SLA observations) as JSON lines, the format `tessera bill
// --usage` reads and `tessera simulate --scenario ... --ledger` writes (docs/metering.md).
//
//   {"tenant":"vision","node":"n07","gpu":"0","model":"A100-80GB","partition":"share",
//    "workload":"job-17","seq":3,"start":"2026-11-01T00:00:00Z","end":"2026-11-01T00:05:00Z",
//    "gpu_milli_s_allocated":150000,"gpu_milli_s_used":90000,"memory_mib_s":3072000,
//    "peak_memory_mib":10240,"kernel_launches":5000,"bytes_transferred":123456}
//   {"type":"sla","tenant":"vision","period":"2026-11","metric":"guaranteed_wait_p99_s","value":420}
//   {"type":"sla","tenant":"vision","hour":"2026-11-03T14:00:00Z","metric":"guaranteed_wait_p99_s","value":420}
//
// An "sla" line names a billing month ("period") or one clock hour ("hour", what the control plane
// records each hour and `tessera simulate --scenario ... --ledger` writes); an invoice run tests its
// rules against the lines of its period and, for hourly ones, the worst hour inside the period
// (metering/invoice.h).
//
// One object per line ("type" defaults to "usage"; blank lines are skipped). bytes_transferred
// may be omitted or null (unknown). The model must be a catalog name and the partition "whole",
// "share" or a MIG profile of that model. Each sample goes through Ledger::Ingest, so resends are
// counted once and overlaps are problems. Every problem is reported at once, one per line, as
// "<file>:<line>: <field>: <what>". A file that is not a ledger at all fails at its first line;
// when that line looks like something else the one problem says what, and the rest is not read:
//   ledger.csv:1: not a JSON object; it looks like CSV (commas, no '{'), so the rest was not read
// (also gzip- or otherwise compressed data, binary data, a JSON array: core/input_bytes.h's
// DescribeBytes). The parser reads text: callers decompress first (DecompressIfGzip, same header).
//
// Callers: the CLI, the simulator's ledger export (the renderers), tests, the fuzzer.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/metering/ledger.h"
#include "tessera/metering/money.h"

namespace tessera::metering {

// The metric of the Guaranteed-wait SLA observation: a tenant's p99 wait (submit -> start) of the
// Guaranteed workloads that started in an hour, in seconds (micro-units in SlaObservation.value
// where it is stored); written by the control plane (src/daemon/anomaly_service.h) and by the
// simulator's --ledger, read by the price plan's SLA credit rules.
inline constexpr std::string_view kSlaGuaranteedWaitP99 = "guaranteed_wait_p99_s";

struct SlaObservation {
  std::string tenant;
  std::string period;  // "2026-11" ("" for an hourly observation)
  std::string metric;
  Micro value = 0;     // micro-units of the metric's unit
  int64_t hour = -1;   // >= 0: an hourly observation, the hour's start (UTC seconds)
};

struct UsageSample {
  SourceKey key;
  SampleValues values;
};

struct LedgerFile {
  Ledger ledger;
  std::vector<SlaObservation> sla;
  int64_t lines = 0;  // non-blank lines read
};

StatusOr<LedgerFile> ParseLedgerJsonl(std::string_view text, std::string_view source,
                                      const GpuModelCatalog& catalog);

// One line each, ending in '\n'; zero memory_mib_s, peak_memory_mib and kernel_launches are left out.
std::string RenderUsageLine(const UsageSample& sample);
std::string RenderSlaLine(const SlaObservation& observation);

}  // namespace tessera::metering
