// The online anomaly detector (include/tessera/metering/anomaly.h) and the NAB series parser
// (anomaly_series.h).
#include "tessera/metering/anomaly.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

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

// The defaults with a warm-up of a full day of the Daily() rows: the novelty's grid then sees the
// whole daily range (with the default 150 rows, half a day, the first row below that range is
// novel and flagged once: DefaultsFlagTheFirstExitFromTheWarmUpsRange).
AnomalyOptions DayWarmup() {
  AnomalyOptions o;
  o.warmup_rows = 288;
  return o;
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
  const std::vector<AnomalyVerdict> v = DetectAnomalies(Daily(8, 11), DayWarmup());
  EXPECT_THAT(Flagged(v), ::testing::IsEmpty());
}

TEST(AnomalyDetector, DefaultsFlagTheFirstExitFromTheWarmUpsRange) {
  // The default warm-up (150 rows) sees half of the first day: the first row below its range
  // (row 150, on the way down) is in a bucket never seen, novelty 1, and is flagged, once; the
  // residual z alone finds nothing there.
  const std::vector<AnomalyVerdict> v = DetectAnomalies(Daily(8, 11), AnomalyOptions{});
  EXPECT_THAT(Flagged(v), ::testing::ElementsAre(150));
  EXPECT_EQ(v[150].novelty, 1);
  EXPECT_LT(v[150].z, AnomalyOptions{}.threshold_z);
  // With context_min_z 3 the novelty flags only rows the forecast also finds off: row 150 is an
  // ordinary value of the cycle (z under 3), so nothing is flagged.
  AnomalyOptions min_z;
  min_z.context_min_z = 3;
  EXPECT_LT(v[150].z, 3);
  EXPECT_THAT(Flagged(DetectAnomalies(Daily(8, 11), min_z)), ::testing::IsEmpty());
}

TEST(AnomalyDetector, FlagsASpikeOnce) {
  const std::vector<AnomalyVerdict> v = DetectAnomalies(Daily(8, 11, 1500), DayWarmup());
  EXPECT_THAT(Flagged(v), ::testing::ElementsAre(1500));
  EXPECT_GT(v[1500].score, AnomalyDetector(AnomalyOptions{}).FlagScore());
  EXPECT_NEAR(v[1500].expected, 50 + 20 * std::sin(2 * M_PI * 1500 / 288.0), 3.0);
}

TEST(AnomalyDetector, ALevelShiftIsOneEventNotManyAlarms) {
  const std::vector<AnomalyVerdict> v = DetectAnomalies(Daily(8, 5, -1, 1400), DayWarmup());
  const std::vector<int> f = Flagged(v);
  ASSERT_FALSE(f.empty());
  EXPECT_GE(f.front(), 1400);
  EXPECT_LE(f.front(), 1403);  // found at once
  // Without the novelty: one alarm, two rows later (z 20 is reached by the likelihood of three
  // large errors), and the new level is learned. The novelty (on by default) is still learning
  // the new range's patterns (+40 puts the cycle's top in buckets never seen) after the 250
  // suppressed rows: a second alarm, 396 rows later.
  EXPECT_THAT(f, ::testing::ElementsAre(1400, 1796));
  AnomalyOptions residual = DayWarmup();
  residual.context_threshold = 0;
  EXPECT_THAT(Flagged(DetectAnomalies(Daily(8, 5, -1, 1400), residual)), ::testing::ElementsAre(1402));
}

TEST(AnomalyDetector, TheWindowedLikelihoodFlagsANoisyRunNoSingleRowExplains) {
  // Rows 1500..1519 swing +-9 around the cycle: each row's residual z is 3.5 to 5.5, below
  // threshold_z 20, so the residual alone (method 0) stays quiet; the likelihood's short mean of
  // the per-row scores stands far above its long window, so method 2 (the default) flags it, once.
  // (The novelty is off here: this is the likelihood's test.)
  Series s = Daily(8, 11);
  for (int i = 1500; i < 1520; ++i) s.rows[i].value += (i % 2 ? 9 : -9);
  AnomalyOptions likelihood = DayWarmup();
  likelihood.context_threshold = 0;
  AnomalyOptions residual_only = likelihood;
  residual_only.method = 0;
  EXPECT_THAT(Flagged(DetectAnomalies(s, residual_only)), ::testing::IsEmpty());
  const std::vector<AnomalyVerdict> v = DetectAnomalies(s, likelihood);
  const std::vector<int> f = Flagged(v);
  ASSERT_EQ(f.size(), 1u) << ::testing::PrintToString(f);
  EXPECT_GE(f[0], 1500);
  EXPECT_LT(f[0], 1520);
  EXPECT_LT(v[f[0]].z, AnomalyOptions{}.threshold_z);
  EXPECT_GE(v[f[0]].lz, AnomalyOptions{}.likelihood_z);
}

TEST(AnomalyDetector, TheSpectralResidualIsOffByDefaultAndOnline) {
  // spectral_tau 0 (the default: the cross-validation never chose it, docs/anomaly.md) computes
  // nothing; with it on, each verdict still depends on its row and the earlier ones only.
  const Series whole = Daily(6, 7, 1000, 1300);
  for (const AnomalyVerdict& v : DetectAnomalies(whole, AnomalyOptions{})) ASSERT_EQ(v.sr, 0);
  AnomalyOptions o;
  o.spectral_tau = 3;
  const std::vector<AnomalyVerdict> all = DetectAnomalies(whole, o);
  double top = 0;
  for (const AnomalyVerdict& v : all) top = std::max(top, v.sr);
  EXPECT_GT(top, 0);
  Series prefix;
  prefix.rows.assign(whole.rows.begin(), whole.rows.begin() + 1100);
  const std::vector<AnomalyVerdict> part = DetectAnomalies(prefix, o);
  for (size_t i = 0; i < part.size(); ++i) {
    ASSERT_EQ(part[i].sr, all[i].sr) << i;
    ASSERT_EQ(part[i].flagged, all[i].flagged) << i;
  }
}

TEST(AnomalyDetector, NothingBeforeTheWarmUp) {
  const std::vector<AnomalyVerdict> v = DetectAnomalies(Daily(2, 3, 20), AnomalyOptions{});
  ASSERT_GT(v.size(), static_cast<size_t>(AnomalyOptions{}.warmup_rows));
  for (int i = 0; i < AnomalyOptions{}.warmup_rows; ++i) EXPECT_EQ(v[i].score, 0) << i;
}

// Rows 0.. of `values`, one a minute (no daily period: the seasonal forecast stays off).
Series Rows(const std::vector<double>& values) {
  Series s;
  for (size_t i = 0; i < values.size(); ++i)
    s.rows.push_back({1400000000 + 60 * static_cast<int64_t>(i), values[i], static_cast<int>(i) + 2});
  return s;
}

AnomalyOptions NoveltyOnly(int warmup, int buckets, int len) {
  AnomalyOptions o;
  o.method = 3;
  o.context_threshold = 1;
  o.context_buckets = buckets;
  o.context_len = len;
  o.warmup_rows = warmup;
  o.suppress_rows = 0;
  return o;
}

TEST(AnomalyDetector, ContextualNoveltyWorkedExample) {
  // anomaly_context.cc's example: a warm-up alternating 0 and 4 (4 buckets: step 1) teaches the
  // lag pairs (1,0,4) (1,4,0) (2,0,0) (2,4,4). The next 0 completes known pairs only (novelty
  // 0); the 2 after it completes (1,0,2) and (2,4,2), both new (novelty 1: flagged); the 0 after
  // that completes (1,2,0) new and (2,0,0) known (novelty 0.5, under the threshold 1).
  std::vector<double> values;
  for (int i = 0; i < 20; ++i) values.push_back(i % 2 ? 4 : 0);
  values.insert(values.end(), {0, 2, 0});
  const std::vector<AnomalyVerdict> v = DetectAnomalies(Rows(values), NoveltyOnly(20, 4, 2));
  ASSERT_EQ(v.size(), 23u);
  EXPECT_EQ(v[20].novelty, 0);
  EXPECT_FALSE(v[20].flagged);
  EXPECT_EQ(v[21].novelty, 1);
  EXPECT_TRUE(v[21].flagged);
  EXPECT_EQ(v[21].score, 0.5);  // effective z = threshold_z * novelty / context_threshold = 10
  EXPECT_EQ(v[22].novelty, 0.5);
  EXPECT_FALSE(v[22].flagged);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(v[i].score, 0) << i;  // the warm-up gives no verdict
}

TEST(AnomalyDetector, ANovelPatternIsFlaggedOnceThenLearned) {
  // A square wave 10/20 with period 8; from row 400 on, each period's rise jumps to 30 instead
  // (rows 404, 412, ...): the first is novel, the repeats are known patterns.
  std::vector<double> values;
  for (int i = 0; i < 600; ++i) values.push_back(i % 8 < 4 ? 10 : (i >= 400 && i % 8 == 4 ? 30 : 20));
  const std::vector<AnomalyVerdict> v = DetectAnomalies(Rows(values), NoveltyOnly(150, 8, 7));
  EXPECT_THAT(Flagged(v), ::testing::ElementsAre(404));
  EXPECT_EQ(v[404].novelty, 1);
  for (int i = 412; i < 600; ++i) EXPECT_EQ(v[i].novelty, 0) << i;
}

TEST(AnomalyDetector, TheNoveltyIsOnByDefaultOffAtThresholdZeroAndOnline) {
  const Series whole = Daily(6, 7, 1000, 1300);
  AnomalyOptions off;
  off.context_threshold = 0;
  for (const AnomalyVerdict& v : DetectAnomalies(whole, off)) ASSERT_EQ(v.novelty, 0);
  const AnomalyOptions o;  // the defaults: context_threshold 1
  const std::vector<AnomalyVerdict> all = DetectAnomalies(whole, o);
  EXPECT_EQ(all[1000].novelty, 1);  // the spike's bucket was never seen
  for (size_t cut : {299u, 301u, 1000u, 1301u}) {
    Series prefix;
    prefix.rows.assign(whole.rows.begin(), whole.rows.begin() + cut);
    const std::vector<AnomalyVerdict> part = DetectAnomalies(prefix, o);
    for (size_t i = 0; i < part.size(); ++i) {
      ASSERT_EQ(part[i].novelty, all[i].novelty) << i << " cut " << cut;
      ASSERT_EQ(part[i].flagged, all[i].flagged) << i << " cut " << cut;
    }
  }
}

TEST(AnomalyOptionsTest, SetByName) {
  AnomalyOptions o;
  ASSERT_TRUE(SetAnomalyOption(&o, "level_window=48").ok());
  EXPECT_EQ(o.level_window, 48);
  ASSERT_TRUE(SetAnomalyOption(&o, "log_values=1").ok());
  EXPECT_TRUE(o.log_values);
  ASSERT_TRUE(SetAnomalyOption(&o, "method=0").ok());
  EXPECT_EQ(o.method, 0);
  ASSERT_TRUE(SetAnomalyOption(&o, "method=3").ok());
  EXPECT_EQ(o.method, 3);
  EXPECT_THAT(SetAnomalyOption(&o, "method=4").message(), HasSubstr("--set method: "));
  ASSERT_TRUE(SetAnomalyOption(&o, "context_threshold=0.75").ok());
  EXPECT_EQ(o.context_threshold, 0.75);
  ASSERT_TRUE(SetAnomalyOption(&o, "context_buckets=16").ok());
  EXPECT_EQ(o.context_buckets, 16);
  ASSERT_TRUE(SetAnomalyOption(&o, "context_len=3").ok());
  EXPECT_EQ(o.context_len, 3);
  EXPECT_THAT(SetAnomalyOption(&o, "context_threshold=1.5").message(), HasSubstr("--set context_threshold: "));
  EXPECT_THAT(SetAnomalyOption(&o, "context_len=0").message(), HasSubstr("outside"));
  ASSERT_TRUE(SetAnomalyOption(&o, "context_min_z=3").ok());
  EXPECT_EQ(o.context_min_z, 3);
  ASSERT_TRUE(SetAnomalyOption(&o, "context_daily=1").ok());
  EXPECT_TRUE(o.context_daily);
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
  EXPECT_EQ(err(""), "in.csv:1: empty file, expected the header 'timestamp,value'");
  EXPECT_EQ(err("timestamp,value\n"), "in.csv:2: no rows after the header");
  EXPECT_THAT(err("timestamp,value\n\n2015-02-26 21:42:53,1\n"), HasSubstr("in.csv:2: expected two fields"));
}

// The header's example: a duplicate, a 55-minute step back and a one-hour gap in 5-minute rows.
constexpr const char* kIrregular =
    "timestamp,value\n"
    "2015-02-26 10:00:00,1\n"
    "2015-02-26 10:05:00,2\n"
    "2015-02-26 10:05:00,9\n"   // line 4: duplicate of line 3, dropped
    "2015-02-26 09:10:00,3\n"   // line 5: 55 min back
    "2015-02-26 09:15:00,4\n"
    "2015-02-26 10:15:00,5\n";  // line 7: a 1 h step, twelve times the usual 5 min

TEST(NabSeries, AcceptsStepsBackDuplicatesAndGapsAndCountsThem) {
  auto s = ParseNabSeries(kIrregular, "in.csv");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->rows.size(), 5u);
  EXPECT_EQ(s->rows[1].value, 2);  // the first value at 10:05 is kept
  EXPECT_EQ(s->rows[2].line, 5);   // the step back is kept, in file order
  EXPECT_EQ(FormatNabTimestamp(s->rows[2].time_s), "2015-02-26 09:10:00");
  const SeriesIrregularities& irr = s->irregularities;
  EXPECT_EQ(irr.steps_back, 1);
  EXPECT_EQ(irr.largest_step_back_s, 55 * 60);
  EXPECT_EQ(irr.largest_step_back_line, 5);
  EXPECT_EQ(irr.duplicates, 1);
  EXPECT_EQ(irr.first_duplicate_line, 4);
  EXPECT_EQ(irr.usual_step_s, 300);
  EXPECT_EQ(irr.gaps, 1);
  EXPECT_EQ(irr.largest_gap_s, 3600);
  EXPECT_EQ(irr.largest_gap_line, 7);
  EXPECT_EQ(DescribeIrregularities(irr),
            "1 step back in time (largest 55 min, at line 5), 1 duplicate timestamp (first value kept, not scored "
            "twice, first at line 4), 1 gap longer than twice the usual 5 min spacing (largest 1 h, at line 7)");
}

TEST(NabSeries, RegularRowsReportNothingAndEveryRepeatIsOneDuplicate) {
  auto regular = ParseNabSeries("timestamp,value\n2015-02-26 10:00:00,1\n2015-02-26 10:05:00,2\n", "r.csv");
  ASSERT_TRUE(regular.ok());
  EXPECT_FALSE(regular->irregularities.any());
  EXPECT_EQ(DescribeIrregularities(regular->irregularities), "");
  // Three rows at one time: two duplicates. After a step back, a time seen earlier is a new row.
  auto s = ParseNabSeries("timestamp,value\n2015-02-26 10:00:00,1\n2015-02-26 10:00:00,2\n2015-02-26 10:00:00,3\n"
                          "2015-02-26 10:05:00,4\n2015-02-26 10:00:00,5\n2015-02-26 10:05:00,6\n",
                          "d.csv");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->rows.size(), 4u);
  EXPECT_EQ(s->irregularities.duplicates, 2);
  EXPECT_EQ(s->irregularities.steps_back, 1);
  EXPECT_EQ(s->rows[2].value, 5);
  EXPECT_THAT(DescribeIrregularities(s->irregularities), HasSubstr("2 duplicate timestamps (first value kept"));
}

TEST(NabSeries, OtherValidationStillNamesFileAndLineAfterAStepBack) {
  const std::string text = std::string(kIrregular) + "2015-02-26 10:20:00,x\n";
  EXPECT_EQ(ParseNabSeries(text, "in.csv").status().message(), "in.csv:8: value 'x' is not a finite number");
}

TEST(NabSeries, DurationsReadAsWords) {
  EXPECT_EQ(FormatDuration(42), "42 s");
  EXPECT_EQ(FormatDuration(3300), "55 min");
  EXPECT_EQ(FormatDuration(3330), "55 min 30 s");
  EXPECT_EQ(FormatDuration(3600), "1 h");
  EXPECT_EQ(FormatDuration(5400), "1 h 30 min");
  EXPECT_EQ(FormatDuration(90061), "1 d 1 h");
  EXPECT_EQ(FormatDuration(0), "0 s");
}

TEST(AnomalyDetector, AStepBackIsScoredInRowOrderAndADuplicateOnce) {
  // Four days of 5-minute rows with the clock set back 55 minutes on day 3 (the next 11 rows
  // repeat times already seen, as a clock change does) and every 100th row sent twice with
  // another value: every row is scored once, in file order, and no repeat's value is scored.
  std::string text = "timestamp,value\n";
  int64_t t = 1400000000 - 1400000000 % 86400;
  int rows = 0, sent_twice = 0;
  for (int i = 0; i < 4 * 288; ++i, t += 300) {
    if (i == 2 * 288) t -= 55 * 60 + 300;
    const std::string row = FormatNabTimestamp(t) + "," + std::to_string(50 + 20 * std::sin(2 * M_PI * i / 288.0)) + "\n";
    text += row;
    ++rows;
    if (i % 100 == 50) {  // a repeat, with another value
      text += FormatNabTimestamp(t) + ",999\n";
      ++sent_twice;
    }
  }
  auto s = ParseNabSeries(text, "clock.csv");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(static_cast<int>(s->rows.size()), rows);
  EXPECT_EQ(s->irregularities.duplicates, sent_twice);
  EXPECT_EQ(s->irregularities.steps_back, 1);
  EXPECT_EQ(s->irregularities.largest_step_back_s, 55 * 60);
  EXPECT_EQ(s->irregularities.gaps, 0);
  for (const SeriesRow& r : s->rows) EXPECT_LT(r.value, 100) << r.line;  // no repeat's 999 was kept
  const std::vector<AnomalyVerdict> v = DetectAnomalies(*s, AnomalyOptions{});
  ASSERT_EQ(v.size(), s->rows.size());  // one verdict per kept row: a duplicate is not scored twice
  for (const AnomalyVerdict& verdict : v) EXPECT_TRUE(std::isfinite(verdict.score) && verdict.score < 1);
}

}  // namespace
}  // namespace tessera::metering
