// libFuzzer target for the NAB-format series parser (metering::ParseNabSeries, the input of
// `tessera anomalies`) and the detector behind it. None may crash, trip a sanitizer or hang, and:
//   - an error is INVALID_ARGUMENT and starts with "fuzz.csv:<line>: ";
//   - parsed rows have increasing line numbers, non-decreasing times, finite values, and their
//     timestamps print and parse back to the same second;
//   - the detector's scores are finite and in [0, 1), flags only where the score is at least
//     the flag score, and feeding the same rows again gives the same verdicts.
//
// Build and run: tests/fuzz/run.sh [seconds].
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
      FUZZ_CHECK(r.time_s >= s->rows[i - 1].time_s, std::to_string(r.line));
    }
    StatusOr<int64_t> back = metering::ParseNabTimestamp(metering::FormatNabTimestamp(r.time_s));
    FUZZ_CHECK(back.ok() && *back == r.time_s, metering::FormatNabTimestamp(r.time_s));
  }
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
