// UTC civil time for metering: "2026-11-01T00:00:00Z" <-> seconds since the Unix epoch, and
// billing periods ("2026-11": the month of November 2026, [start, end) in seconds; or a range of
// whole days). Pure integer
// arithmetic (Howard Hinnant's days-from-civil), no time zone database, no clock.
//
//   ParseUtc("2026-11-01T01:00:00Z") -> 1793494800
//   ParsePeriod("2026-11") -> {start 1793491200, end 1796083200} (720 hours)
//
// Callers: the ledger file parser, the invoice run, the simulator's ledger export.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/core/status.h"

namespace tessera::metering {

inline constexpr int64_t kSecondsPerHour = 3600;

// Days since 1970-01-01 of a proleptic Gregorian date.
int64_t DaysFromCivil(int64_t year, int month, int day);

// "YYYY-MM-DDTHH:MM:SSZ" only (INVALID_ARGUMENT naming what is wrong otherwise).
StatusOr<int64_t> ParseUtc(std::string_view text);
std::string FormatUtc(int64_t seconds);

struct Period {
  std::string name;   // "2026-11" or "2026-11-01..2026-11-08"
  int64_t start = 0;  // seconds, inclusive
  int64_t end = 0;    // seconds, exclusive
  int64_t Hours() const { return (end - start) / kSecondsPerHour; }
};

// "YYYY-MM" (a calendar month) or "YYYY-MM-DD..YYYY-MM-DD" (whole days, the second exclusive:
// "2026-11-01..2026-11-08" is the first week of November).
StatusOr<Period> ParsePeriod(std::string_view text);
// The month that contains `seconds`.
Period MonthOf(int64_t seconds);

// floor(seconds / 3600), also for negative seconds.
inline int64_t HourOf(int64_t seconds) {
  return seconds >= 0 ? seconds / kSecondsPerHour : -((-seconds + kSecondsPerHour - 1) / kSecondsPerHour);
}

}  // namespace tessera::metering
