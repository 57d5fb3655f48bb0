// The online anomaly detector (include/tessera/metering/anomaly.h) and the NAB series parser
// (anomaly_series.h).
#include "tessera/metering/anomaly.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "tessera/metering/anomaly_series.h"

namespace tessera::metering {
namespace {

using ::testing::HasSubstr;

// `days` days of 5-minute rows: a daily cycle plus noise (seeded), optionally with a spike.
Series Daily(int days, uint32_t seed, int spike_row = -1, double level_shift_from = -1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, 1);
  Series s;
  const int n = days * 288;
  for (int i = 0; i < n; ++i) {
    double v = 50 + 20 * std::sin(2 * M_PI * i / 288.0) + noise(rng);
    if (i == spike_row) v += 60;
    if (level_shift_from >= 0 && i >= level_shift_from) v += 40;
    s.rows.push_back({1400000000 + 300 * static_cast<int64_t>(i), v, i + 2});
  }
  return s;
}

std::vector<int> Flagged(const std::vector<AnomalyVerdict>& v) {
  std::vector<int> out;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].flagged) out.push_back(static_cast<int>(i));
  return out;
}

TEST(AnomalyDetector, APrefixGetsTheSameVerdictsAsTheWholeSeries) {
  // Online: a verdict depends on its row and the earlier ones only, so cutting the series off
  // anywhere leaves the verdicts before the cut unchanged.
  const Series whole = Daily(6, 7, 1000, 1300);
  const std::vector<AnomalyVerdict> all = DetectAnomalies(whole, AnomalyOptions{});
  for (size_t cut : {1u, 151u, 700u, 1001u, 1299u, 1500u}) {
    Series prefix;
    prefix.rows.assign(whole.rows.begin(), whole.rows.begin() + cut);
    const std::vector<AnomalyVerdict> part = DetectAnomalies(prefix, AnomalyOptions{});
    ASSERT_EQ(part.size(), cut);
    for (size_t i = 0; i < cut; ++i) {
      EXPECT_EQ(part[i].flagged, all[i].flagged) << "row " << i << " cut " << cut;
      EXPECT_EQ(part[i].score, all[i].score) << "row " << i << " cut " << cut;
    }
  }
  // And changing a later row changes nothing before it.
  Series changed = whole;
  changed.rows[1200].value += 1000;
  const std::vector<AnomalyVerdict> c = DetectAnomalies(changed, AnomalyOptions{});
  for (size_t i = 0; i < 1200; ++i) ASSERT_EQ(c[i].score, all[i].score) << i;
  EXPECT_GT(c[1200].z, all[1200].z + 100);
}

TEST(AnomalyDetector, QuietOnANoisyDailyCycle) {
  // The daily swing (+-20) is 20 noise sigmas: a detector without the seasonal forecast or with
  // a non-robust scale would flag it.
  const std::vector<AnomalyVerdict> v = DetectAnomalies(Daily(8, 11), AnomalyOptions{});
  EXPECT_THAT(Flagged(v), ::testing::IsEmpty());
}

TEST(AnomalyDetector, FlagsASpikeOnce) {
  const std::vector<AnomalyVerdict> v = DetectAnomalies(Daily(8, 11, 1500), AnomalyOptions{});
  EXPECT_THAT(Flagged(v), ::testing::ElementsAre(1500));
  EXPECT_GT(v[1500].score, AnomalyDetector(AnomalyOptions{}).FlagScore());
  EXPECT_NEAR(v[1500].expected, 50 + 20 * std::sin(2 * M_PI * 1500 / 288.0), 3.0);
}

TEST(AnomalyDetector, ALevelShiftIsOneEventNotManyAlarms) {
  const std::vector<AnomalyVerdict> v = DetectAnomalies(Daily(8, 5, -1, 1400), AnomalyOptions{});
  const std::vector<int> f = Flagged(v);
  ASSERT_FALSE(f.empty());
  EXPECT_GE(f.front(), 1400);
  EXPECT_LE(f.front(), 1403);  // found at once
  EXPECT_EQ(f.size(), 1u) << ::testing::PrintToString(f);  // and the new level is learned
}

TEST(AnomalyDetector, NothingBeforeTheWarmUp) {
  const std::vector<AnomalyVerdict> v = DetectAnomalies(Daily(2, 3, 20), AnomalyOptions{});
  ASSERT_GT(v.size(), static_cast<size_t>(AnomalyOptions{}.warmup_rows));
  for (int i = 0; i < AnomalyOptions{}.warmup_rows; ++i) EXPECT_EQ(v[i].score, 0) << i;
}

TEST(AnomalyOptionsTest, SetByName) {
  AnomalyOptions o;
  ASSERT_TRUE(SetAnomalyOption(&o, "level_window=48").ok());
  EXPECT_EQ(o.level_window, 48);
  ASSERT_TRUE(SetAnomalyOption(&o, "log_values=1").ok());
  EXPECT_TRUE(o.log_values);
  EXPECT_THAT(SetAnomalyOption(&o, "nope=1").message(), HasSubstr("unknown option 'nope'"));
  EXPECT_THAT(SetAnomalyOption(&o, "level_window=1.5").message(), HasSubstr("outside"));
  EXPECT_THAT(SetAnomalyOption(&o, "threshold_z=x").message(), HasSubstr("'x' is not a number"));
}

TEST(NabSeries, ParsesTheNabFormat) {
  auto s = ParseNabSeries("\xEF\xBB\xBFtimestamp,value\r\n2015-02-26 21:42:53,104\r\n2015-02-26 21:47:53,1e2", "in.csv");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->rows.size(), 2u);
  EXPECT_EQ(s->rows[0].time_s, 1424986973);
  EXPECT_EQ(s->rows[1].value, 100);
  EXPECT_EQ(s->rows[1].line, 3);
  EXPECT_EQ(FormatNabTimestamp(s->rows[0].time_s), "2015-02-26 21:42:53");
  EXPECT_EQ(FormatNabTimestamp(951782400), "2000-02-29 00:00:00");
}

TEST(NabSeries, BadInputNamesFileAndLine) {
  auto err = [](const char* text) { return ParseNabSeries(text, "in.csv").status().message(); };
  EXPECT_EQ(err("time,value\n"), "in.csv:1: header is 'time,value', expected 'timestamp,value'");
  EXPECT_EQ(err("timestamp,value\n2015-02-26 21:42:53,1\n2015-02-30 00:00:00,2\n"),
            "in.csv:3: timestamp '2015-02-30 00:00:00' is not a valid date and time");
  EXPECT_EQ(err("timestamp,value\n2015-02-26T21:42:53,1\n"),
            "in.csv:2: timestamp '2015-02-26T21:42:53' is not YYYY-MM-DD HH:MM:SS");
  EXPECT_EQ(err("timestamp,value\n2015-02-26 21:42:53,abc\n"), "in.csv:2: value 'abc' is not a finite number");
  EXPECT_EQ(err("timestamp,value\n2015-02-26 21:42:53,nan\n"), "in.csv:2: value 'nan' is not a finite number");
  EXPECT_EQ(err("timestamp,value\n2015-02-26 21:42:53,1e999\n"), "in.csv:2: value '1e999' is not a finite number");
  EXPECT_EQ(err("timestamp,value\n2015-02-26 21:42:53\n"),
            "in.csv:2: expected two fields 'timestamp,value', got '2015-02-26 21:42:53'");
  EXPECT_THAT(err("timestamp,value\n2015-02-26 21:42:53,1\n2015-02-26 21:42:52,1\n"),
              HasSubstr("in.csv:3: timestamp 2015-02-26 21:42:52 is before the previous row's"));
  EXPECT_EQ(err(""), "in.csv:1: empty file, expected the header 'timestamp,value'");
  EXPECT_EQ(err("timestamp,value\n"), "in.csv:2: no rows after the header");
  EXPECT_THAT(err("timestamp,value\n\n2015-02-26 21:42:53,1\n"), HasSubstr("in.csv:2: expected two fields"));
}

}  // namespace
}  // namespace tessera::metering
