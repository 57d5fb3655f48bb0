// The hourly forecaster and M4's measures (include/tessera/metering/forecast.h), the series CSV
// parser (forecast_input.h) and the capacity plan (capacity_plan.h).
#include "tessera/metering/forecast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ctime>
#include <cmath>
#include <random>

#include "tessera/metering/capacity_plan.h"
#include "tessera/metering/forecast_input.h"

namespace tessera::metering {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Daily cycle (amplitude 20), weekend dip (-15), trend 0.05 / h, Gaussian noise (seeded).
double Synthetic(int t, double noise) {
  const int day_of_week = (t / 24) % 7;
  return 100 + 0.05 * t + 20 * std::sin(2 * M_PI * t / 24.0) + (day_of_week >= 5 ? -15 : 0) + noise;
}

std::vector<double> SyntheticSeries(int n, uint32_t seed, double sigma = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0, sigma);
  std::vector<double> y(n);
  for (int t = 0; t < n; ++t) y[t] = Synthetic(t, noise(rng));
  return y;
}

TEST(ForecastMeasures, SmapeByHand) {
  EXPECT_NEAR(Smape(std::vector<double>{1, 3}, std::vector<double>{2, 2}), 100.0 * (1.0 / 3 + 1.0 / 5), 1e-12);
  EXPECT_DOUBLE_EQ(Smape(std::vector<double>{0, 4}, std::vector<double>{0, 4}), 0);  // 0/0 counts 0
  EXPECT_DOUBLE_EQ(Smape(std::vector<double>{5}, std::vector<double>{0}), 200);
  EXPECT_TRUE(std::isnan(Smape(std::vector<double>{}, std::vector<double>{})));
}

TEST(ForecastMeasures, MaseByHand) {
  const std::vector<double> history = {1, 2, 3, 4, 5, 6};
  EXPECT_DOUBLE_EQ(Mase(history, std::vector<double>{7, 8}, std::vector<double>{7, 7}, 2), 0.25);
  EXPECT_DOUBLE_EQ(Mase(history, std::vector<double>{7, 8}, SeasonalNaive(history, 2, 2), 2), 1.0);
  // A perfectly seasonal history has no scale: undefined.
  EXPECT_TRUE(std::isnan(Mase(std::vector<double>{1, 3, 1, 3, 1, 3}, std::vector<double>{1, 3},
                              std::vector<double>{2, 2}, 2)));
}

TEST(ForecastMeasures, OwaAndSeasonalNaive) {
  EXPECT_DOUBLE_EQ(Owa(10, 0.5, 20, 2), 0.375);
  EXPECT_THAT(SeasonalNaive(std::vector<double>{1, 2, 3, 4, 5, 6}, 3, 2), ElementsAre(5, 6, 5));
  EXPECT_THAT(SeasonalNaive(std::vector<double>{1, 2}, 2, 24), ElementsAre(2, 2));  // shorter than m: naive
}

TEST(ForecastMeasures, Naive2ReseasonalisesTheLastValue) {
  std::vector<double> y;
  for (int i = 0; i < 6; ++i) y.insert(y.end(), {1, 2, 3, 2});
  ASSERT_TRUE(M4SeasonalityTest(y, 4));
  // Indices 0.5 1 1.5 1 (the centred MA is 2 everywhere); the last value 2 / 1 = 2, re-seasonalised.
  const std::vector<double> f = Naive2(y, 5, 4);
  ASSERT_EQ(f.size(), 5u);
  const double want[] = {1, 2, 3, 2, 1};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(f[i], want[i], 1e-12) << i;
  // Too short for the test (under 3 m): not seasonal, plain naive.
  EXPECT_FALSE(M4SeasonalityTest(std::vector<double>{1, 2, 3, 2, 1, 2, 3, 2}, 4));
  EXPECT_THAT(Naive2(std::vector<double>{1, 2, 3, 2, 1, 2, 3, 5}, 2, 4), ElementsAre(5, 5));
}

TEST(ForecastMeasures, SeasonalityTestRejectsNoise) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(100, 1);
  std::vector<double> y(24 * 30);
  for (double& v : y) v = noise(rng);
  EXPECT_FALSE(M4SeasonalityTest(y, 24));
  EXPECT_TRUE(M4SeasonalityTest(SyntheticSeries(24 * 30, 1), 24));
}

TEST(Forecaster, RecoversSeasonsAndTrend) {
  const std::vector<double> y = SyntheticSeries(24 * 7 * 6 + 48, 3);
  const std::span<const double> train(y.data(), y.size() - 48), actual(y.data() + y.size() - 48, 48);
  const Forecast f = ForecastHourly(train, 48);
  ASSERT_EQ(f.values.size(), 48u);
  ASSERT_EQ(f.lower.size(), 48u);
  ASSERT_FALSE(f.methods.empty());
  const double smape = Smape(actual, f.values), mase = Mase(train, actual, f.values);
  const double mase_snaive = Mase(train, actual, SeasonalNaive(train, 48, 24));
  EXPECT_LT(smape, 2.0);
  EXPECT_LT(mase, 0.6 * mase_snaive) << "methods " << f.methods[0];
  // The interval holds the truth most of the time and is ordered.
  int inside = 0;
  for (int h = 0; h < 48; ++h) {
    EXPECT_LE(f.lower[h], f.values[h]);
    EXPECT_GE(f.upper[h], f.values[h]);
    inside += actual[h] >= f.lower[h] && actual[h] <= f.upper[h];
  }
  EXPECT_GE(inside, 36);
  // Far ahead the trend is still there (damped, not dropped): two weeks on, the forecast mean is
  // above the last week's mean.
  const Forecast far = ForecastHourly(train, 24 * 21);
  double last_week = 0, third_week = 0;
  for (int i = 0; i < 168; ++i) last_week += train[train.size() - 168 + i], third_week += far.values[336 + i];
  EXPECT_GT(third_week, last_week);
}

TEST(Forecaster, RobustToASpike) {
  std::vector<double> y = SyntheticSeries(24 * 7 * 5 + 24, 5);
  const int spike = static_cast<int>(y.size()) - 24 - 24 + 10;  // hour 10 of the history's last day
  y[spike] *= 10;
  const std::span<const double> train(y.data(), y.size() - 24);
  const Forecast f = ForecastHourly(train, 24);
  const double truth = Synthetic(spike + 24, 0);
  EXPECT_NEAR(f.values[10], truth, 0.1 * truth) << "methods " << f.methods[0];
  // Seasonal naive copies the spike.
  EXPECT_GT(SeasonalNaive(train, 24, 24)[10], 5 * truth);
}

TEST(Forecaster, ShortAndEmptyHistories) {
  EXPECT_THAT(ForecastHourly(std::vector<double>{}, 3).values, ElementsAre(0, 0, 0));
  EXPECT_THAT(ForecastHourly(std::vector<double>{4, 5, 6}, 2).values, ElementsAre(6, 6));
  // Never negative for a series that never was.
  std::vector<double> y(24 * 14);
  for (int t = 0; t < static_cast<int>(y.size()); ++t) y[t] = std::max(0.0, 10 - 0.05 * t + 5 * std::sin(t));
  for (double v : ForecastHourly(y, 24 * 30).lower) EXPECT_GE(v, 0);
}

TEST(Forecaster, HundredsOfSeriesInSeconds) {
  std::vector<std::vector<double>> many;
  for (int i = 0; i < 300; ++i) many.push_back(SyntheticSeries(1000, 100 + i, 3));
  // CPU time, not wall time: the machine running the tests may be busy.
  const std::clock_t t0 = std::clock();
  double sum = 0;
  for (const auto& y : many) sum += ForecastHourly(y, 48).values[0];
  const double seconds = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
  EXPECT_GT(sum, 0);
  EXPECT_LT(seconds, 30.0);  // about 5 s of CPU in Release; generous for sanitizer builds
}

TEST(Forecaster, BacktestBeatsTheBenchmarksOnSeasonalData) {
  const std::vector<double> y = SyntheticSeries(24 * 7 * 6, 11, 2);
  const BacktestScores b = BacktestHourly(y, 48, 336);
  EXPECT_EQ(b.windows, 7);
  EXPECT_LT(Owa(b.smape, b.mase, b.smape_naive2, b.mase_naive2),
            Owa(b.smape_snaive, b.mase_snaive, b.smape_naive2, b.mase_naive2));
  EXPECT_GT(b.coverage, 0.7);
  EXPECT_EQ(BacktestHourly(y, 48, 24).windows, 0);  // holdout shorter than the horizon
}

TEST(ForecastInput, ParsesSeriesInOrder) {
  const auto s = ParseHourlySeriesCsv(
      "\xEF\xBB\xBFseries,timestamp,value\r\ngpus/A100,2026-11-01T00:00:00Z,12.5\r\ngpus/A100,2026-11-01T01:00:00Z,3\n"
      "\ncpus,2026-11-01 05:00:00,70\ncpus,2026-11-01T06:00:00+00:00,-1e1",
      "in.csv");
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].name, "gpus/A100");
  EXPECT_EQ((*s)[0].start, 1793491200);
  EXPECT_THAT((*s)[0].values, ElementsAre(12.5, 3));
  EXPECT_EQ((*s)[1].name, "cpus");
  EXPECT_EQ((*s)[1].start, 1793491200 + 5 * 3600);
  EXPECT_THAT((*s)[1].values, ElementsAre(70, -10));
  EXPECT_EQ((*s)[1].first_line, 5);
}

TEST(ForecastInput, ListsEveryProblemWithFileAndLine) {
  const auto s = ParseHourlySeriesCsv(
      "series,time,value\n"
      "a,2026-11-01T00:00:00Z,1\n"
      "a,2026-11-01T02:00:00Z,2\n"
      "a,2026-11-01T03:30:00Z,3\n"
      "b,2026-11-01T00:00:00Z,x\n"
      "a,2026-11-01T04:00:00Z,4\n"
      "a,2026-13-01T05:00:00Z,5\n"
      ",2026-11-01T00:00:00Z,1\n"
      "only,two\n",
      "in.csv");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  const std::string m(s.status().message());
  EXPECT_THAT(m, HasSubstr("in.csv:1: header is 'series,time,value', expected 'series,timestamp,value'"));
  EXPECT_THAT(m, HasSubstr("in.csv:3: timestamp '2026-11-01T02:00:00Z' is not one hour after the previous row of series 'a'"));
  EXPECT_THAT(m, HasSubstr("in.csv:4: timestamp '2026-11-01T03:30:00Z' is not on the hour"));
  EXPECT_THAT(m, HasSubstr("in.csv:5: value 'x' is not a finite number"));
  EXPECT_THAT(m, HasSubstr("in.csv:6: series 'a' appears again after other series"));
  EXPECT_THAT(m, HasSubstr("in.csv:7: timestamp '2026-13-01T05:00:00Z' is not a valid UTC date and time"));
  EXPECT_THAT(m, HasSubstr("in.csv:8: series name is empty"));
  EXPECT_THAT(m, HasSubstr("in.csv:9: expected 3 fields"));
  EXPECT_THAT(ParseHourlySeriesCsv("", "e.csv").status().message(), HasSubstr("e.csv:1: empty file"));
  EXPECT_THAT(ParseHourlySeriesCsv("series,timestamp,value\n", "e.csv").status().message(), HasSubstr("e.csv:1: no rows"));
}

// A ledger with one whole GPU per `gpus[h]` held through hour h (model A100-80GB).
Ledger LedgerOf(const std::vector<int>& gpus) {
  Ledger ledger;
  const int64_t t0 = 1793491200;
  for (size_t h = 0; h < gpus.size(); ++h) {
    for (int g = 0; g < gpus[h]; ++g) {
      const SourceKey key{"t", "n" + std::to_string(g / 8), std::to_string(g % 8), "A100-80GB", "whole", "w" + std::to_string(g)};
      SampleValues v;
      v.seq = static_cast<int64_t>(h) + 1;
      v.start = t0 + static_cast<int64_t>(h) * 3600;
      v.end = v.start + 3600;
      v.gpu_milli_s_allocated = 1000 * 3600;
      EXPECT_TRUE(ledger.Ingest(key, v).ok());
    }
  }
  return ledger;
}

TEST(CapacityPlan, DemandInGpusPerHour) {
  const std::vector<ModelDemand> d = HourlyDemandByModel(LedgerOf({2, 3, 0, 1}));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].model, "A100-80GB");
  EXPECT_EQ(d[0].start_hour, 1793491200);
  EXPECT_THAT(d[0].gpus, ElementsAre(2, 3, 0, 1));
}

TEST(CapacityPlan, GrowingDemandExceedsCapacity) {
  // Four weeks: a daily cycle between 4 and ~10 GPUs at the start, peaks growing 1 GPU a week.
  std::vector<int> gpus;
  for (int h = 0; h < 24 * 28; ++h) gpus.push_back(static_cast<int>(std::lround(7 + 3 * std::sin(2 * M_PI * h / 24) + h / 168.0)));
  CapacityPlanOptions o;
  o.horizon_days = 90;
  o.capacity_gpus["A100-80GB"] = 15;
  const std::vector<ModelPlan> plans = PlanCapacity(LedgerOf(gpus), o);
  ASSERT_EQ(plans.size(), 1u);
  const ModelPlan& p = plans[0];
  EXPECT_FALSE(p.capacity_from_history);
  EXPECT_EQ(p.peak_demand_gpus, 14);
  ASSERT_EQ(p.daily_peak.size(), 90u);
  EXPECT_GT(p.first_exceed_upper_hour, 1793491200 + 28 * 86400 - 1);
  EXPECT_GT(p.gpus_to_add, 0);
  EXPECT_GT(p.backtest.windows, 0);
  EXPECT_EQ(p.backtest_holdout_hours, 192);  // a third of 672 hours, whole 48-hour windows
  // No capacity given: the peak seen, and with that much capacity the plan still says when.
  const std::vector<ModelPlan> seen = PlanCapacity(LedgerOf(gpus), CapacityPlanOptions{});
  EXPECT_TRUE(seen[0].capacity_from_history);
  EXPECT_EQ(seen[0].capacity_gpus, 14);
  EXPECT_GT(seen[0].first_exceed_upper_hour, 0);
  EXPECT_EQ(seen[0].hours_over_capacity, 0);  // the peak seen is never over itself
}

// Issue 31 item 8: the example ledger's demand peaked at 74.85 GPUs on a cluster of 32 and the
// plan said "add 48" without a word about it. Hours whose demand exceeds the given capacity are
// counted (the CLI warns).
TEST(CapacityPlan, CountsTheHistoryHoursWhoseDemandExceedsTheGivenCapacity) {
  CapacityPlanOptions o;
  o.horizon_days = 2;
  o.capacity_gpus["A100-80GB"] = 2;
  const std::vector<ModelPlan> plans = PlanCapacity(LedgerOf({1, 3, 2, 4, 0}), o);
  ASSERT_EQ(plans.size(), 1u);
  EXPECT_EQ(plans[0].hours_over_capacity, 2);  // 3 and 4; 2 is not over 2
  o.capacity_gpus["A100-80GB"] = 4;
  EXPECT_EQ(PlanCapacity(LedgerOf({1, 3, 2, 4, 0}), o)[0].hours_over_capacity, 0);
}

}  // namespace
}  // namespace tessera::metering
