#include "tessera/metering/anomaly_series.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tessera::metering {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int DaysInMonth(int64_t y, int64_t m) {
  static constexpr int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

// Reads `n` decimal digits at `s[pos]`; false if any is not a digit.
bool Digits(std::string_view s, size_t pos, size_t n, int64_t* out) {
  if (pos + n > s.size()) return false;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

// A finite decimal number, the whole field (no spaces, no hex, no inf/nan).
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

std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 40) out += "...";
  return out;
}

// One data row "timestamp,value" at `line`; errors start with `at` ("file:line: ").
StatusOr<SeriesRow> ParseRow(std::string_view row, int line, const std::string& at) {
  const size_t comma = row.find(',');
  if (comma == std::string_view::npos || row.find(',', comma + 1) != std::string_view::npos) {
    return InvalidArgumentError(at + "expected two fields 'timestamp,value', got '" + Printable(row) + "'");
  }
  StatusOr<int64_t> t = ParseNabTimestamp(row.substr(0, comma));
  if (!t.ok()) return InvalidArgumentError(at + t.status().message());
  SeriesRow r{*t, 0, line};
  if (!ParseValue(row.substr(comma + 1), &r.value)) {
    return InvalidArgumentError(at + "value '" + Printable(row.substr(comma + 1)) + "' is not a finite number");
  }
  return r;
}


// Folds a parsed row into the series: a duplicate of the previous row's timestamp is counted and
// dropped (the first value stays), a step back is counted and kept.
void AddRow(const SeriesRow& r, Series* series) {
  SeriesIrregularities& irr = series->irregularities;
  if (!series->rows.empty()) {
    const int64_t previous = series->rows.back().time_s;
    if (r.time_s == previous) {
      if (irr.duplicates++ == 0) irr.first_duplicate_line = r.line;
      return;
    }
    if (r.time_s < previous) {
      ++irr.steps_back;
      if (previous - r.time_s > irr.largest_step_back_s) {
        irr.largest_step_back_s = previous - r.time_s;
        irr.largest_step_back_line = r.line;
      }
    }
  }
  series->rows.push_back(r);
}

// The usual spacing (the median forward step between kept rows) and the steps longer than twice it.
void CountGaps(Series* series) {
  const std::vector<SeriesRow>& rows = series->rows;
  std::vector<int64_t> steps;
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].time_s > rows[i - 1].time_s) steps.push_back(rows[i].time_s - rows[i - 1].time_s);
  }
  if (steps.empty()) return;
  SeriesIrregularities& irr = series->irregularities;
  std::nth_element(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2), steps.end());
  irr.usual_step_s = steps[steps.size() / 2];
  for (size_t i = 1; i < rows.size(); ++i) {
    const int64_t step = rows[i].time_s - rows[i - 1].time_s;
    if (step <= 2 * irr.usual_step_s) continue;
    ++irr.gaps;
    if (step > irr.largest_gap_s) {
      irr.largest_gap_s = step;
      irr.largest_gap_line = rows[i].line;
    }
  }
}

}  // namespace

StatusOr<int64_t> ParseNabTimestamp(std::string_view t) {
  int64_t y = 0, mo = 0, d = 0, h = 0, mi = 0, s = 0;
  const bool shape = t.size() == 19 && t[4] == '-' && t[7] == '-' && t[10] == ' ' && t[13] == ':' && t[16] == ':';
  if (!shape || !Digits(t, 0, 4, &y) || !Digits(t, 5, 2, &mo) || !Digits(t, 8, 2, &d) || !Digits(t, 11, 2, &h) ||
      !Digits(t, 14, 2, &mi) || !Digits(t, 17, 2, &s)) {
    return InvalidArgumentError("timestamp '" + Printable(t) + "' is not YYYY-MM-DD HH:MM:SS");
  }
  if (mo < 1 || mo > 12 || d < 1 || d > DaysInMonth(y, mo) || h > 23 || mi > 59 || s > 59) {
    return InvalidArgumentError("timestamp '" + std::string(t) + "' is not a valid date and time");
  }
  return DaysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s;
}

std::string FormatNabTimestamp(int64_t time_s) {
  // civil_from_days (Howard Hinnant).
  int64_t days = time_s >= 0 ? time_s / 86400 : (time_s - 86399) / 86400;
  const int64_t secs = time_s - days * 86400;
  days += 719468;
  const int64_t era = (days >= 0 ? days : days - 146096) / 146097;
  const int64_t doe = days - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp + (mp < 10 ? 3 : -9);
  const int64_t y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04lld-%02lld-%02lld %02lld:%02lld:%02lld", static_cast<long long>(y),
                static_cast<long long>(m), static_cast<long long>(d), static_cast<long long>(secs / 3600),
                static_cast<long long>(secs / 60 % 60), static_cast<long long>(secs % 60));
  return buf;
}

StatusOr<Series> ParseNabSeries(std::string_view text, std::string_view file) {
  const std::string where(file);
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  Series series;
  size_t pos = 0;
  int line = 0;
  while (pos < text.size()) {
    ++line;
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view row = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (!row.empty() && row.back() == '\r') row.remove_suffix(1);
    const std::string at = where + ":" + std::to_string(line) + ": ";
    if (line == 1) {
      if (row != "timestamp,value") {
        return InvalidArgumentError(at + "header is '" + Printable(row) + "', expected 'timestamp,value'");
      }
      continue;
    }
    if (row.empty() && pos >= text.size()) break;  // the final newline
    TESSERA_ASSIGN_OR_RETURN(const SeriesRow r, ParseRow(row, line, at));
    AddRow(r, &series);
  }
  if (line == 0) return InvalidArgumentError(where + ":1: empty file, expected the header 'timestamp,value'");
  if (series.rows.empty()) return InvalidArgumentError(where + ":2: no rows after the header");
  CountGaps(&series);
  return series;
}

std::string FormatDuration(int64_t seconds) {
  const int64_t s = seconds < 0 ? -seconds : seconds;
  const int64_t days = s / 86400, hours = s % 86400 / 3600, minutes = s % 3600 / 60, secs = s % 60;
  auto two = [](int64_t big, const char* big_unit, int64_t small, const char* small_unit) {
    std::string out = std::to_string(big) + " " + big_unit;
    if (small != 0) out += " " + std::to_string(small) + " " + small_unit;
    return out;
  };
  if (days > 0) return two(days, "d", hours, "h");
  if (hours > 0) return two(hours, "h", minutes, "min");
  if (minutes > 0) return two(minutes, "min", secs, "s");
  return std::to_string(secs) + " s";
}

std::string DescribeIrregularities(const SeriesIrregularities& irr) {
  auto counted = [](int n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::vector<std::string> parts;
  if (irr.steps_back > 0) {
    parts.push_back(counted(irr.steps_back, "step back in time", "steps back in time") + " (largest " +
                    FormatDuration(irr.largest_step_back_s) + ", at line " + std::to_string(irr.largest_step_back_line) +
                    ")");
  }
  if (irr.duplicates > 0) {
    parts.push_back(counted(irr.duplicates, "duplicate timestamp", "duplicate timestamps") +
                    " (first value kept, not scored twice, first at line " + std::to_string(irr.first_duplicate_line) +
                    ")");
  }
  if (irr.gaps > 0) {
    parts.push_back(counted(irr.gaps, "gap", "gaps") + " longer than twice the usual " +
                    FormatDuration(irr.usual_step_s) + " spacing (largest " + FormatDuration(irr.largest_gap_s) +
                    ", at line " + std::to_string(irr.largest_gap_line) + ")");
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace tessera::metering
