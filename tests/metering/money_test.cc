#include "tessera/metering/money.h"

#include <gtest/gtest.h>

#include <random>

#include "tessera/metering/civil_time.h"

namespace tessera::metering {
namespace {

TEST(Money, AllocateExamplesOfTheHeader) {
  EXPECT_EQ(Allocate({1, 1, 1}, 3), (std::vector<Micro>{1, 0, 0}));
  EXPECT_EQ(Allocate({5, 5}, 10), (std::vector<Micro>{1, 0}));
  EXPECT_EQ(Allocate({15, 15}, 10), (std::vector<Micro>{2, 1}));
  EXPECT_EQ(Allocate({-15, -15}, 10), (std::vector<Micro>{-2, -1}));
  EXPECT_EQ(Allocate({}, 7), (std::vector<Micro>{}));
}

TEST(Money, AllocateSumsToTheRoundedTotalAndStaysWithinOneMicro) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 2000; ++trial) {
    const Int128 den = 1 + static_cast<Int128>(rng() % 10'000'000);
    std::vector<Int128> nums(1 + rng() % 20);
    Int128 total = 0;
    for (Int128& n : nums) total += n = static_cast<Int128>(rng() % 1'000'000'000'000ULL);
    const std::vector<Micro> got = Allocate(nums, den);
    Int128 sum = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      sum += got[i];
      EXPECT_GE(got[i], static_cast<Micro>(nums[i] / den));
      EXPECT_LE(got[i], static_cast<Micro>(nums[i] / den) + 1);
    }
    EXPECT_TRUE(sum == RoundHalfAway(total, den));
  }
}

TEST(Money, DecimalsParseExactlyAndRejectTheRest) {
  EXPECT_EQ(*ParseDecimalMicro("2.40"), 2'400'000);
  EXPECT_EQ(*ParseDecimalMicro("0.000125"), 125);
  EXPECT_EQ(*ParseDecimalMicro("-3"), -3'000'000);
  EXPECT_EQ(*ParseDecimalMicro(".5"), 500'000);
  for (const char* bad : {"", "-", "1.2345678", "1e3", "abc", "1.2.3", "99999999999999"}) {
    EXPECT_FALSE(ParseDecimalMicro(bad).ok()) << bad;
  }
  EXPECT_EQ(FormatMicro(12'500'000), "12.500000");
  EXPECT_EQ(FormatMicro(-125), "-0.000125");
  EXPECT_EQ(FormatRational(7, 2, 3), "3.500");
  EXPECT_EQ(FormatRational(-1, 3, 2), "-0.33");
}

TEST(CivilTime, RoundTripsAndMonths) {
  EXPECT_EQ(*ParseUtc("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(*ParseUtc("2026-11-01T01:00:00Z"), 1793494800);
  EXPECT_EQ(FormatUtc(1793494800), "2026-11-01T01:00:00Z");
  auto p = ParsePeriod("2026-11");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->start, 1793491200);
  EXPECT_EQ(p->Hours(), 720);
  EXPECT_EQ(ParsePeriod("2028-02")->Hours(), 29 * 24);
  EXPECT_EQ(MonthOf(1793494800).name, "2026-11");
  for (const char* bad : {"2026-13-01T00:00:00Z", "2026-02-30T00:00:00Z", "2026-11-01 00:00:00", "x"}) {
    EXPECT_FALSE(ParseUtc(bad).ok()) << bad;
  }
  EXPECT_FALSE(ParsePeriod("2026-1").ok());
  auto week = ParsePeriod("2026-11-01..2026-11-08");
  ASSERT_TRUE(week.ok());
  EXPECT_EQ(week->start, 1793491200);
  EXPECT_EQ(week->Hours(), 7 * 24);
  EXPECT_FALSE(ParsePeriod("2026-11-08..2026-11-01").ok());
  EXPECT_FALSE(ParsePeriod("2026-11-01..2026-11-31").ok());
  EXPECT_EQ(HourOf(-1), -1);
  EXPECT_EQ(HourOf(3599), 0);
}

}  // namespace
}  // namespace tessera::metering
