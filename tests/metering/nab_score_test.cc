// NAB's scoring rules on hand-computed examples (include/tessera/metering/nab_score.h).
#include "tessera/metering/nab_score.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

namespace tessera::metering {
namespace {

using ::testing::HasSubstr;

// S(x) = 2 / (1 + e^(5x)) - 1, written out again so that the test does not share the code.
double S(double x) { return 2.0 / (1.0 + std::exp(5.0 * x)) - 1.0; }

// 10 rows one minute apart, one window on rows 4..7.
NabFile TenRows(std::vector<double> scores) {
  NabFile f;
  f.name = "t.csv";
  for (int i = 0; i < 10; ++i) f.timestamps.push_back(1000 + 60 * i);
  f.scores = std::move(scores);
  f.windows = {{1000 + 60 * 4, 1000 + 60 * 7}};
  return f;
}

TEST(NabScore, HandExampleAtAGivenThreshold) {
  // The header's worked example: detections at rows 5 (in the window) and 9 (two rows after it).
  const NabFile f = TenRows({0, 0, 0, 0, 0, 0.9, 0, 0, 0, 0.6});
  auto r = ScoreNabCorpus({f}, NabCostProfile{}, 0.5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const double tp = S(-0.75) / S(-1.0);
  const double fp = 0.11 * S(2.0 / 3.0);
  EXPECT_NEAR(tp, 0.96699, 1e-5);
  EXPECT_NEAR(fp, -0.10242, 1e-5);
  EXPECT_NEAR(r->raw, tp + fp, 1e-12);
  EXPECT_DOUBLE_EQ(r->null_score, -1.0);
  EXPECT_DOUBLE_EQ(r->perfect, 1.0);
  EXPECT_NEAR(r->normalized, 93.228, 1e-3);
  ASSERT_EQ(r->files.size(), 1u);
  EXPECT_EQ(r->files[0].windows, 1);
  EXPECT_EQ(r->files[0].detected, 1);
  EXPECT_EQ(r->files[0].false_positives, 1);
}

TEST(NabScore, SweepPicksTheBestThresholdAsNabsOptimizer) {
  // At 0.9 only row 5 is a detection (raw 0.967); at 0.6 row 9 is a false positive too; at 0 every
  // row is. The sweep keeps 0.9.
  const NabFile f = TenRows({0, 0, 0, 0, 0, 0.9, 0, 0, 0, 0.6});
  auto r = ScoreNabCorpus({f}, NabCostProfile{}, std::nullopt);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->threshold, 0.9);
  EXPECT_NEAR(r->raw, S(-0.75) / S(-1.0), 1e-12);
}

TEST(NabScore, OnlyTheFirstDetectionInAWindowCountsAndProbationIsFree) {
  // Row 0 is in the probation (floor(0.15 * 10) = 1 row); rows 4 and 6 are in the window: row 4,
  // the window's first row, is worth the full tp_weight, row 6 adds nothing.
  const NabFile f = TenRows({1, 0, 0, 0, 1, 0, 1, 0, 0, 0});
  auto r = ScoreNabCorpus({f}, NabCostProfile{}, 0.5);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->raw, 1.0, 1e-12);
  EXPECT_EQ(r->files[0].false_positives, 0);
}

TEST(NabScore, FalsePositiveBeforeAnyWindowAndMissedWindow) {
  // Row 2 precedes every window: -fp_weight; the window has no detection: -fn_weight.
  const NabFile f = TenRows({0, 0, 1, 0, 0, 0, 0, 0, 0, 0});
  auto r = ScoreNabCorpus({f}, NabCostProfile{}, 0.5);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->raw, -0.11 - 1.0, 1e-12);
  EXPECT_EQ(r->files[0].detected, 0);
  // Far past a window (more than three widths) an FP costs the full -fp_weight too.
  NabFile g;
  g.name = "g.csv";
  for (int i = 0; i < 40; ++i) g.timestamps.push_back(i);
  g.scores.assign(40, 0);
  g.windows = {{10, 11}};
  g.scores[30] = 1;  // |11 - 30| / (2 - 1) = 19 widths past
  auto rg = ScoreNabCorpus({g}, NabCostProfile{}, 0.5);
  ASSERT_TRUE(rg.ok());
  EXPECT_NEAR(rg->raw, -1.0 - 0.11, 1e-12);
}

TEST(NabScore, WindowsWhollyInTheProbationDoNotCount) {
  NabFile f = TenRows(std::vector<double>(10, 0));
  f.windows = {{1000, 1000}};  // row 0 only, inside the probation
  auto r = ScoreNabCorpus({f}, NabCostProfile{}, 0.5);
  ASSERT_TRUE(r.ok());
  EXPECT_DOUBLE_EQ(r->null_score, 0.0);
  EXPECT_DOUBLE_EQ(r->perfect, 1.0);  // NAB's perfect counts every labelled window
  EXPECT_EQ(r->files[0].windows, 0);
}

TEST(NabScore, BadWindowsAreErrorsNamingTheFile) {
  NabFile f = TenRows(std::vector<double>(10, 0));
  f.windows = {{1000 + 30, 1000 + 120}};
  EXPECT_THAT(ScoreNabCorpus({f}, NabCostProfile{}, 0.5).status().message(),
              HasSubstr("t.csv: window 1 [1970-01-01 00:17:10, 1970-01-01 00:18:40]: a limit is not the timestamp"));
  f.windows = {{1000 + 60 * 5, 1000 + 60 * 6}, {1000 + 60 * 6, 1000 + 60 * 8}};
  EXPECT_THAT(ScoreNabCorpus({f}, NabCostProfile{}, 0.5).status().message(), HasSubstr("starts before the previous"));
  f.windows.clear();
  f.scores.pop_back();
  EXPECT_THAT(ScoreNabCorpus({f}, NabCostProfile{}, 0.5).status().message(), HasSubstr("9 scores for 10 rows"));
}

TEST(NabScore, WindowsAreMatchedInRowOrderAfterAClockStepBack) {
  // Row 2 jumps ahead to 1300, row 3 steps back to 1240, row 4 is 1300 again. The window
  // [1240, 1300] is rows 3..4 (where it opens and then closes in file order), not rows 3..2.
  NabFile f;
  f.name = "step.csv";
  f.timestamps = {1000, 1060, 1300, 1240, 1300, 1360, 1420, 1480, 1540, 1600};
  f.scores = {0, 0, 0.9, 0.9, 0, 0, 0, 0, 0, 0};
  f.windows = {{1240, 1300}};
  auto w = NabRowWeights(f, NabCostProfile{});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ((*w)[2].window, -1);  // the first 1300, before the window opened
  EXPECT_EQ((*w)[3].window, 0);
  EXPECT_EQ((*w)[4].window, 0);
  EXPECT_EQ((*w)[5].window, -1);
  EXPECT_NEAR((*w)[3].weight, 1.0, 1e-12);  // the window's first row: S(-2/2) / S(-1)
  EXPECT_NEAR((*w)[4].weight, S(-0.5) / S(-1.0), 1e-12);
  auto r = ScoreNabCorpus({f}, NabCostProfile{}, 0.5);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NEAR(r->raw, 1.0 - 0.11, 1e-12);  // row 2 is a false positive before any window
  EXPECT_EQ(r->files[0].detected, 1);
  // A window whose end comes only before its start in row order is no window of this file.
  f.windows = {{1360, 1420}, {1480, 1540}};
  f.timestamps = {1000, 1060, 1120, 1540, 1360, 1420, 1480, 1500, 1520, 1530};
  EXPECT_THAT(NabRowWeights(f, NabCostProfile{}).status().message(),
              HasSubstr("step.csv: window 2 [1970-01-01 00:24:40, 1970-01-01 00:25:40]: a limit is not the timestamp"));
}

TEST(NabLabels, ParsesNabsWindowFile) {
  auto l = ParseNabLabels(R"({"a/x.csv": [["2014-04-10 07:15:00.000000", "2014-04-11 16:45:00"]], "b.csv": []})",
                          "labels.json");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  ASSERT_EQ(l->at("a/x.csv").size(), 1u);
  EXPECT_EQ(l->at("a/x.csv")[0].start_s, 1397114100);
  EXPECT_TRUE(l->at("b.csv").empty());
  EXPECT_THAT(ParseNabLabels("{", "labels.json").status().message(), HasSubstr("labels.json: not valid JSON"));
  EXPECT_THAT(ParseNabLabels(R"({"a.csv": [["2014-04-10 07:15:00.5", "2014-04-10 07:16:00"]]})", "labels.json")
                  .status()
                  .message(),
              HasSubstr("labels.json: \"a.csv\" window 1: limit '2014-04-10 07:15:00.5' is not a whole second"));
  EXPECT_THAT(ParseNabLabels(R"({"a.csv": [["2014-13-10 07:15:00", "x"]]})", "labels.json").status().message(),
              HasSubstr("is not a valid date"));
}

}  // namespace
}  // namespace tessera::metering
