// libFuzzer target for the hourly series parser (metering::ParseHourlySeriesCsv, the input of
// `tessera forecast`) and the forecaster behind it. None may crash, trip a sanitizer or hang, and:
//   - an error is INVALID_ARGUMENT and every line of it starts with "fuzz.csv:";
//   - parsed series have non-empty names, distinct from the series before them, start on the
//     hour, and hold finite values;
//   - the forecast has the horizon's length, finite values inside its interval, and the same
//     history gives the same forecast.
//
// Build and run: tests/fuzz/run.sh [seconds].
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tessera/metering/forecast.h"
#include "tessera/metering/forecast_input.h"

namespace {

using namespace tessera;

[[noreturn]] void Fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "forecast_input_fuzzer: invariant violated: %s: %s\n", what, detail.c_str());
  std::abort();
}

#define FUZZ_CHECK(cond, detail)                   \
  do {                                             \
    if (!(cond)) Fail(#cond, std::string(detail)); \
  } while (0)

void Check(std::string_view text) {
  auto s = metering::ParseHourlySeriesCsv(text, "fuzz.csv");
  if (!s.ok()) {
    FUZZ_CHECK(s.status().code() == StatusCode::kInvalidArgument, s.status().ToString());
    std::string_view m = s.status().message();
    while (!m.empty()) {
      FUZZ_CHECK(m.substr(0, 9) == "fuzz.csv:", std::string(m));
      const size_t nl = m.find('\n');
      m.remove_prefix(nl == std::string_view::npos ? m.size() : nl + 1);
    }
    return;
  }
  FUZZ_CHECK(!s->empty(), "no series accepted");
  for (size_t i = 0; i < s->size(); ++i) {
    const metering::HourlySeries& series = (*s)[i];
    FUZZ_CHECK(!series.name.empty(), "empty name");
    FUZZ_CHECK(i == 0 || series.name != (*s)[i - 1].name, series.name);
    FUZZ_CHECK(series.start % 3600 == 0, std::to_string(series.start));
    FUZZ_CHECK(!series.values.empty(), series.name);
    for (double v : series.values) FUZZ_CHECK(std::isfinite(v), series.name);
    const metering::Forecast a = metering::ForecastHourly(series.values, 30);
    const metering::Forecast b = metering::ForecastHourly(series.values, 30);
    FUZZ_CHECK(a.values.size() == 30 && a.lower.size() == 30 && a.upper.size() == 30, series.name);
    for (int h = 0; h < 30; ++h) {
      // Values may overflow to inf for absurd inputs (1e308); they must never be NaN.
      FUZZ_CHECK(!std::isnan(a.values[h]) && !std::isnan(a.lower[h]) && !std::isnan(a.upper[h]), series.name);
      FUZZ_CHECK(a.values[h] == b.values[h], "not deterministic");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  Check(text);
  Check("series,timestamp,value\n" + std::string(text));  // the same bytes as rows under a valid header
  return 0;
}
