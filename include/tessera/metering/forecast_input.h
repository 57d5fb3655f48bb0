// The input of `tessera forecast`: hourly series in one CSV, `series,timestamp,value`, each
// series' rows together and in time order, one row per hour, timestamps ISO 8601 UTC.
//
//   series,timestamp,value
//   gpus/A100,2026-11-01T00:00:00Z,12.5     -> {name "gpus/A100", start 1793491200, values 12.5 3}
//   gpus/A100,2026-11-01T01:00:00Z,3
//   cpus,2026-11-01 00:00:00,70             -> {name "cpus", ...}
//
// Rules: the first line is exactly `series,timestamp,value` (a UTF-8 byte-order mark, CR line ends
// and a missing final newline are accepted; blank lines are skipped); three fields per row; the
// series name is not empty; the timestamp is YYYY-MM-DDTHH:MM:SS with an optional `Z` or `+00:00`
// (a space instead of the T is accepted), a valid UTC time on the hour; within a series each row
// is exactly one hour after the one before (no gaps, no repeats); a series' rows are together
// (a name seen again after another series is an error); values are finite decimal numbers; at
// least one row. Every problem is reported (up to 50, then a count), one per line, as
// "<file>:<line>: <what>", in one INVALID_ARGUMENT.
//
// Callers: the CLI, the fuzzer, tests. Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::metering {

struct HourlySeries {
  std::string name;
  int64_t start = 0;           // the first hour, seconds since the epoch (UTC)
  std::vector<double> values;  // one per hour from `start`
  int first_line = 0;          // 1-based line of the first row
};

StatusOr<std::vector<HourlySeries>> ParseHourlySeriesCsv(std::string_view text, std::string_view file);

}  // namespace tessera::metering
