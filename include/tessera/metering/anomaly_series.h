// One time series in the NAB data format (`timestamp,value`, timestamps `YYYY-MM-DD HH:MM:SS`),
// parsed from text; the input of `tessera anomalies` and of the NAB scorer.
//
// Called by the CLI (which reads the file and passes its text and name) and by the NAB scorer's
// callers. Pure: no I/O. Thread-safety: free functions over values.
//
//   timestamp,value
//   2015-02-26 21:42:53,104        -> {time_s = 1424986973, value = 104, line = 2}
//   2015-02-26 21:47:53,1e2        -> {time_s = 1424987273, value = 100, line = 3}
//
// Rules: the first line is exactly `timestamp,value` (a UTF-8 byte-order mark, CR line ends and a
// missing final newline are accepted); each row has two fields; the timestamp is a valid UTC
// calendar time; the value is a finite decimal number; timestamps never go back (equal ones are
// kept: NAB's files repeat a few); at least one row. Every problem is an INVALID_ARGUMENT whose
// message starts "<file>:<line>: " (the first problem found: a bad file stops the command).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::metering {

struct SeriesRow {
  int64_t time_s = 0;  // seconds since 1970-01-01 00:00:00 UTC
  double value = 0;
  int line = 0;        // 1-based line in the file
};

struct Series {
  std::vector<SeriesRow> rows;
};

// Parses a whole file's text; `file` names it in errors.
StatusOr<Series> ParseNabSeries(std::string_view text, std::string_view file);

// "YYYY-MM-DD HH:MM:SS" -> seconds since the epoch (UTC); nullopt-like error: INVALID_ARGUMENT
// with a message saying what is wrong (no location; callers add it).
StatusOr<int64_t> ParseNabTimestamp(std::string_view text);

// seconds since the epoch -> "YYYY-MM-DD HH:MM:SS".
std::string FormatNabTimestamp(int64_t time_s);

}  // namespace tessera::metering
