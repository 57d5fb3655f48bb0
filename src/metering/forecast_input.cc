#include "tessera/metering/forecast_input.h"

#include <cmath>
#include <cstdlib>
#include <set>
#include <string>

#include "tessera/metering/anomaly_series.h"

namespace tessera::metering {
namespace {

constexpr int kMaxProblems = 50;

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 40) out += "...";
  return out;
}

bool ParseValue(std::string_view field, double* out) {
  if (field.empty() || field.size() > 64) return false;
  for (char c : field) {
    const bool ok = (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
    if (!ok) return false;
  }
  const std::string copy(field);
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

// ISO 8601 UTC -> seconds, or an error message.
bool ParseTime(std::string_view t, int64_t* out, std::string* error) {
  std::string_view core = t;
  if (core.size() > 19 && core.substr(19) == "Z") core = core.substr(0, 19);
  if (core.size() > 19 && core.substr(19) == "+00:00") core = core.substr(0, 19);
  std::string normal(core);
  if (normal.size() == 19 && normal[10] == 'T') normal[10] = ' ';
  if (normal.size() != 19 || normal[10] != ' ') {
    *error = "timestamp '" + Printable(t) + "' is not ISO 8601 UTC (YYYY-MM-DDTHH:MM:SSZ)";
    return false;
  }
  StatusOr<int64_t> s = ParseNabTimestamp(normal);
  if (!s.ok()) {
    *error = "timestamp '" + Printable(t) + "' is not a valid UTC date and time";
    return false;
  }
  *out = *s;
  return true;
}

}  // namespace

StatusOr<std::vector<HourlySeries>> ParseHourlySeriesCsv(std::string_view text, std::string_view file) {
  std::vector<HourlySeries> out;
  std::vector<std::string> problems;
  int extra = 0;
  auto problem = [&](int line, const std::string& what) {
    if (static_cast<int>(problems.size()) < kMaxProblems) {
      problems.push_back(std::string(file) + ":" + std::to_string(line) + ": " + what);
    } else {
      ++extra;
    }
  };
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  std::set<std::string, std::less<>> finished;
  int64_t last_time = 0;
  bool last_ok = false;  // the previous row of the current series had a valid time
  int line_no = 0;
  bool header = true;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (header) {
      header = false;
      if (line != "series,timestamp,value") {
        problem(line_no, "header is '" + Printable(line) + "', expected 'series,timestamp,value'");
      }
      continue;
    }
    if (line.empty()) continue;
    const size_t c1 = line.find(','), c2 = c1 == std::string_view::npos ? c1 : line.find(',', c1 + 1);
    if (c2 == std::string_view::npos || line.find(',', c2 + 1) != std::string_view::npos) {
      problem(line_no, "expected 3 fields (series,timestamp,value), got '" + Printable(line) + "'");
      continue;
    }
    const std::string_view name = line.substr(0, c1), ts = line.substr(c1 + 1, c2 - c1 - 1),
                           val = line.substr(c2 + 1);
    if (name.empty()) {
      problem(line_no, "series name is empty");
      continue;
    }
    double value = 0;
    const bool value_ok = ParseValue(val, &value);
    if (!value_ok) problem(line_no, "value '" + Printable(val) + "' is not a finite number");
    int64_t t = 0;
    std::string error;
    bool time_ok = ParseTime(ts, &t, &error);
    if (!time_ok) problem(line_no, error);
    if (time_ok && t % 3600 != 0) {
      problem(line_no, "timestamp '" + Printable(ts) + "' is not on the hour");
      time_ok = false;
    }
    const bool new_series = out.empty() || out.back().name != name;
    if (new_series) {
      if (!out.empty()) finished.insert(out.back().name);
      if (finished.count(name) != 0) {
        problem(line_no, "series '" + Printable(name) + "' appears again after other series (keep its rows together)");
      }
      out.push_back({std::string(name), t, {}, line_no});
      last_ok = false;
    } else if (time_ok && last_ok && t != last_time + 3600) {
      problem(line_no, "timestamp '" + Printable(ts) + "' is not one hour after the previous row of series '" +
                           Printable(name) + "'");
    }
    if (new_series && !time_ok) out.back().start = 0;
    out.back().values.push_back(value);
    if (time_ok) {
      if (new_series || !last_ok) {
        // Keep `start` consistent with the row count when the first rows had bad times.
        out.back().start = t - 3600 * static_cast<int64_t>(out.back().values.size() - 1);
      }
      last_time = t;
      last_ok = true;
    }
  }
  if (header) problem(1, "empty file (expected the header 'series,timestamp,value')");
  else if (out.empty() && problems.empty()) problem(line_no, "no rows");
  if (!problems.empty()) {
    std::string message;
    for (const std::string& p : problems) message += (message.empty() ? "" : "\n") + p;
    if (extra > 0) message += "\n" + std::string(file) + ": ... and " + std::to_string(extra) + " more problems";
    return InvalidArgumentError(message);
  }
  return out;
}

}  // namespace tessera::metering
