// libFuzzer target for the NAB-format series parser (metering::ParseNabSeries, the input of
// `tessera anomalies`) and the detector behind it. None may crash, trip a sanitizer or hang, and:
//   - an error is INVALID_ARGUMENT and starts with "fuzz.csv:<line>: ";
//   - parsed rows have increasing line numbers, finite values, no row with its predecessor's
//     timestamp (a duplicate is dropped, never scored twice), and their timestamps print and
//     parse back to the same second;
//   - the irregularities add up: steps back are the rows before their predecessor (the largest
//     and its line as counted), every line after the header is a kept row or a duplicate, gaps
//     are longer than twice the usual step, and the description is empty exactly when there
//     is nothing to report;
//   - the detector's scores are finite and in [0, 1), flags only where the score is at least
//     the flag score, and feeding the same rows again gives the same verdicts.
//
// Build and run: tests/fuzz/run.sh [seconds].
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tessera/metering/anomaly.h"
#include "tessera/metering/anomaly_series.h"

namespace {

using namespace tessera;

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "anomaly_series_fuzzer: invariant violated: %s: %s\n", what, detail.c_str());
  std::abort();
}

#define FUZZ_CHECK(cond, detail)                   \
  do {                                             \
    if (!(cond)) Fail(#cond, std::string(detail)); \
  } while (0)

bool HasLocation(const std::string& m) {
  const std::string prefix = "fuzz.csv:";
  if (m.compare(0, prefix.size(), prefix) != 0) return false;
  size_t p = prefix.size();
  const size_t start = p;
  while (p < m.size() && m[p] >= '0' && m[p] <= '9') ++p;
  return p > start && m.compare(p, 2, ": ") == 0;
}

void CheckIrregularities(const metering::Series& s) {
  const metering::SeriesIrregularities& irr = s.irregularities;
  int steps_back = 0;
  int64_t largest_back = 0;
  int largest_back_line = 0;
  for (size_t i = 1; i < s.rows.size(); ++i) {
    const int64_t back = s.rows[i - 1].time_s - s.rows[i].time_s;
    if (back <= 0) continue;
    ++steps_back;
    if (back > largest_back) {
      largest_back = back;
      largest_back_line = s.rows[i].line;
    }
  }
  FUZZ_CHECK(irr.steps_back == steps_back, std::to_string(irr.steps_back));
  FUZZ_CHECK(irr.largest_step_back_s == largest_back && irr.largest_step_back_line == largest_back_line,
             std::to_string(irr.largest_step_back_line));
  // Lines 2 .. last are rows: each is kept or a duplicate (blank lines in the middle are errors).
  const int last_line = std::max(s.rows.back().line, irr.first_duplicate_line);
  FUZZ_CHECK(static_cast<int>(s.rows.size()) + irr.duplicates >= last_line - 1, std::to_string(irr.duplicates));
  FUZZ_CHECK((irr.duplicates == 0) == (irr.first_duplicate_line == 0), std::to_string(irr.first_duplicate_line));
  FUZZ_CHECK(irr.gaps == 0 || irr.largest_gap_s > 2 * irr.usual_step_s, std::to_string(irr.largest_gap_s));
  FUZZ_CHECK(irr.usual_step_s >= 0 && irr.gaps <= static_cast<int>(s.rows.size()), std::to_string(irr.gaps));
  FUZZ_CHECK(irr.any() == !metering::DescribeIrregularities(irr).empty(), metering::DescribeIrregularities(irr));
}

void Check(std::string_view text) {
  StatusOr<metering::Series> s = metering::ParseNabSeries(text, "fuzz.csv");
  if (!s.ok()) {
    FUZZ_CHECK(s.status().code() == StatusCode::kInvalidArgument, s.status().ToString());
    FUZZ_CHECK(HasLocation(s.status().message()), s.status().message());
    return;
  }
  FUZZ_CHECK(!s->rows.empty(), "no rows accepted");
  for (size_t i = 0; i < s->rows.size(); ++i) {
    const metering::SeriesRow& r = s->rows[i];
    FUZZ_CHECK(std::isfinite(r.value), std::to_string(r.line));
    if (i > 0) {
      FUZZ_CHECK(r.line > s->rows[i - 1].line, std::to_string(r.line));
      FUZZ_CHECK(r.time_s != s->rows[i - 1].time_s, std::to_string(r.line));
    }
    StatusOr<int64_t> back = metering::ParseNabTimestamp(metering::FormatNabTimestamp(r.time_s));
    FUZZ_CHECK(back.ok() && *back == r.time_s, metering::FormatNabTimestamp(r.time_s));
  }
  CheckIrregularities(*s);
  metering::AnomalyOptions o;
  o.warmup_rows = 4;  // small inputs reach the verdicts
  const auto a = metering::DetectAnomalies(*s, o);
  const auto b = metering::DetectAnomalies(*s, o);
  const double flag = metering::AnomalyDetector(o).FlagScore();
  FUZZ_CHECK(a.size() == s->rows.size(), "one verdict per row");
  for (size_t i = 0; i < a.size(); ++i) {
    FUZZ_CHECK(std::isfinite(a[i].score) && a[i].score >= 0 && a[i].score < 1, std::to_string(a[i].score));
    FUZZ_CHECK(!a[i].flagged || a[i].score >= flag, std::to_string(i));
    FUZZ_CHECK(a[i].score == b[i].score && a[i].flagged == b[i].flagged, "not deterministic");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Check(text);
  Check("timestamp,value\n" + std::string(text));  // the same bytes as rows under a valid header
  return 0;
}
