#include "tessera/metering/civil_time.h"

#include <cstdio>

namespace tessera::metering {

int64_t DaysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

namespace {

void CivilFromDays(int64_t z, int64_t* y, int* m, int* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  *d = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  *m = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  *y = yoe + era * 400 + (*m <= 2);
}

bool Digits(std::string_view s, size_t at, size_t n, int* out) {
  if (at + n > s.size()) return false;
  int v = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

int DaysInMonth(int64_t y, int m) {
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[m - 1];
}

}  // namespace

StatusOr<int64_t> ParseUtc(std::string_view s) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
  const bool shape = s.size() == 20 && s[4] == '-' && s[7] == '-' && s[10] == 'T' && s[13] == ':' &&
                     s[16] == ':' && s[19] == 'Z';
  if (!shape || !Digits(s, 0, 4, &y) || !Digits(s, 5, 2, &mo) || !Digits(s, 8, 2, &d) ||
      !Digits(s, 11, 2, &h) || !Digits(s, 14, 2, &mi) || !Digits(s, 17, 2, &se)) {
    return InvalidArgumentError("expected a UTC time like 2026-11-01T00:00:00Z, got '" + std::string(s) + "'");
  }
  if (mo < 1 || mo > 12 || d < 1 || d > DaysInMonth(y, mo) || h > 23 || mi > 59 || se > 59) {
    return InvalidArgumentError("not a valid date and time: '" + std::string(s) + "'");
  }
  return DaysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se;
}

std::string FormatUtc(int64_t seconds) {
  const int64_t days = seconds >= 0 ? seconds / 86400 : -((-seconds + 86399) / 86400);
  const int64_t rest = seconds - days * 86400;
  int64_t y = 0;
  int m = 0, d = 0;
  CivilFromDays(days, &y, &m, &d);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04lld-%02d-%02dT%02d:%02d:%02dZ", static_cast<long long>(y), m, d,
                static_cast<int>(rest / 3600), static_cast<int>(rest % 3600 / 60), static_cast<int>(rest % 60));
  return buf;
}

namespace {
Period MakePeriod(int64_t y, int m) {
  Period p;
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04lld-%02d", static_cast<long long>(y), m);
  p.name = buf;
  p.start = DaysFromCivil(y, m, 1) * 86400;
  p.end = p.start + int64_t{DaysInMonth(y, m)} * 86400;
  return p;
}
}  // namespace

StatusOr<Period> ParsePeriod(std::string_view s) {
  if (const size_t dots = s.find(".."); dots != std::string_view::npos) {
    auto day = [](std::string_view d) -> StatusOr<int64_t> {
      int y = 0, m = 0, dd = 0;
      if (d.size() != 10 || d[4] != '-' || d[7] != '-' || !Digits(d, 0, 4, &y) || !Digits(d, 5, 2, &m) ||
          !Digits(d, 8, 2, &dd) || m < 1 || m > 12 || dd < 1 || dd > DaysInMonth(y, m)) {
        return InvalidArgumentError("expected a day like 2026-11-01, got '" + std::string(d) + "'");
      }
      return DaysFromCivil(y, m, dd) * 86400;
    };
    TESSERA_ASSIGN_OR_RETURN(const int64_t start, day(s.substr(0, dots)));
    TESSERA_ASSIGN_OR_RETURN(const int64_t end, day(s.substr(dots + 2)));
    if (end <= start) return InvalidArgumentError("period '" + std::string(s) + "' ends before it starts");
    if (end - start > 366 * 86400) return InvalidArgumentError("period '" + std::string(s) + "' is longer than 366 days");
    return Period{std::string(s), start, end};
  }
  int y = 0, m = 0;
  if (s.size() != 7 || s[4] != '-' || !Digits(s, 0, 4, &y) || !Digits(s, 5, 2, &m) || m < 1 || m > 12) {
    return InvalidArgumentError("expected a month like 2026-11 or days like 2026-11-01..2026-11-08, got '" +
                                std::string(s) + "'");
  }
  return MakePeriod(y, m);
}

Period MonthOf(int64_t seconds) {
  const int64_t days = seconds >= 0 ? seconds / 86400 : -((-seconds + 86399) / 86400);
  int64_t y = 0;
  int m = 0, d = 0;
  CivilFromDays(days, &y, &m, &d);
  return MakePeriod(y, m);
}

}  // namespace tessera::metering
