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
// calendar time; the value is a finite decimal number; at least one row. Every problem is an
// INVALID_ARGUMENT whose message starts "<file>:<line>: " (the first problem found: a bad file
// stops the command).
//
// Real monitoring data has clocks that misbehave; these are accepted and counted, not errors
// (Series::irregularities; the CLI prints DescribeIrregularities once on stderr):
//   * a step back (a timestamp before the previous row's, e.g. a clock set back 55 minutes): the
//     row is kept in file order; the detector scores rows in the order they arrive;
//   * a duplicate (a row whose timestamp equals the previous row's): dropped. The first value at
//     a timestamp is the one kept and scored; a repeat is never scored a second time (an online
//     detector has already given its verdict when the repeat arrives; NAB's files repeat a few
//     timestamps). Only the previous row counts: after a step back, a timestamp seen earlier in
//     the file is a new row;
//   * a gap: a forward step longer than twice the usual spacing (the median forward step).
//
//   timestamp,value
//   2015-02-26 10:00:00,1     -> row 0
//   2015-02-26 10:05:00,2     -> row 1
//   2015-02-26 10:05:00,9     -> dropped: duplicate of line 3 (value 2 kept)
//   2015-02-26 09:10:00,3     -> row 2: a step back of 55 min at line 5
//   2015-02-26 09:15:00,4     -> row 3
//   2015-02-26 10:15:00,5     -> row 4: a gap of 1 h (usual spacing 5 min) at line 7
//   DescribeIrregularities -> "1 step back in time (largest 55 min, at line 5), 1 duplicate
//   timestamp (first value kept, not scored twice, first at line 4), 1 gap longer than twice the
//   usual 5 min spacing (largest 1 h, at line 7)"
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

// What the series' clock did that ParseNabSeries accepted (the rules above); lines are 1-based
// lines of the file, 0 when there is none.
struct SeriesIrregularities {
  int steps_back = 0;
  int64_t largest_step_back_s = 0;
  int largest_step_back_line = 0;
  int duplicates = 0;  // rows dropped
  int first_duplicate_line = 0;
  int64_t usual_step_s = 0;  // median forward step between kept rows; 0 with none
  int gaps = 0;              // forward steps > 2 * usual_step_s
  int64_t largest_gap_s = 0;
  int largest_gap_line = 0;

  bool any() const { return steps_back > 0 || duplicates > 0 || gaps > 0; }
};

struct Series {
  std::vector<SeriesRow> rows;  // in file order, duplicates dropped
  SeriesIrregularities irregularities;
};

// Parses a whole file's text; `file` names it in errors.
StatusOr<Series> ParseNabSeries(std::string_view text, std::string_view file);

// One line (no newline) saying what `irregularities` counted, as in the example above; "" when
// there is nothing to say.
std::string DescribeIrregularities(const SeriesIrregularities& irregularities);

// 3300 -> "55 min", 3600 -> "1 h", 5400 -> "1 h 30 min", 90061 -> "1 d 1 h", 42 -> "42 s".
std::string FormatDuration(int64_t seconds);

// "YYYY-MM-DD HH:MM:SS" -> seconds since the epoch (UTC); nullopt-like error: INVALID_ARGUMENT
// with a message saying what is wrong (no location; callers add it).
StatusOr<int64_t> ParseNabTimestamp(std::string_view text);

// seconds since the epoch -> "YYYY-MM-DD HH:MM:SS".
std::string FormatNabTimestamp(int64_t time_s);

}  // namespace tessera::metering
