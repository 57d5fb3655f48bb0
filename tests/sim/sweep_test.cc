#include "tessera/sim/sweep.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>

#include "tests/testing/sim_builders.h"

namespace tessera::sim {
namespace {

using testing::MakeNodes;
using testing::Pod;
using testing::Share;
using testing::Whole;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- Median ---------------------------------------------------------------------------------

TEST(MedianTest, OddEvenUnsortedAndNaN) {
  EXPECT_DOUBLE_EQ(Median({3.0}), 3.0);
  EXPECT_DOUBLE_EQ(Median({5.0, 1.0, 3.0}), 3.0);
  EXPECT_DOUBLE_EQ(Median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(Median({-1.0, -1.0, 7.0, 7.0}), 3.0);
  EXPECT_DOUBLE_EQ(Median({kNaN, 2.0, kNaN, 4.0, 9.0}), 4.0);  // NaNs are ignored
  EXPECT_TRUE(std::isnan(Median({})));
  EXPECT_TRUE(std::isnan(Median({kNaN, kNaN})));
}

// ---- RunSweep -------------------------------------------------------------------------------

struct SmallWorld {
  std::vector<placement::NodeSpec> nodes = MakeNodes({{32000, 131072, 2, "T4"},
                                                      {64000, 262144, 4, "V100M32"},
                                                      {96000, 393216, 8, "A10"},
                                                      {64000, 262144, 8, "G2"}});
  std::vector<PodRecord> shares;
  std::vector<PodRecord> mixed;
  SmallWorld() {
    for (int i = 0; i < 120; ++i) shares.push_back(Pod(testing::Numbered("s", i), Share(100 + (i * 53) % 900, 1000)));
    for (int i = 0; i < 80; ++i) {
      mixed.push_back(Pod(testing::Numbered("m", i), i % 3 ? Share(250 + 250 * (i % 3), 2000) : Whole(1 + i % 4, 4000)));
    }
  }
  SweepSpec Spec(int jobs) const {
    SweepSpec spec;
    spec.inputs = {{&nodes, &shares, "shares"}, {&nodes, &mixed, "mixed"}};
    spec.policies = {"fgd", "random", "bestfit"};
    spec.seeds = {42, 43, 44};
    spec.jobs = jobs;
    return spec;
  }
};

TEST(RunSweepTest, ResultsComeInInputPolicySeedOrder) {
  SmallWorld w;
  FakeClock clock;
  auto runs = RunSweep(w.Spec(2), clock);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 18u);
  size_t k = 0;
  for (const char* input : {"shares", "mixed"}) {
    for (const char* policy : {"fgd", "random", "bestfit"}) {
      for (uint64_t seed : {42, 43, 44}) {
        const ReplayResult& r = (*runs)[k++];
        EXPECT_EQ(r.pods_name, input);
        EXPECT_EQ(r.policy, policy);
        EXPECT_EQ(r.seed, seed);
      }
    }
  }
}

TEST(RunSweepTest, ResultsDoNotDependOnTheNumberOfThreads) {
  SmallWorld w;
  FakeClock clock;
  auto one = RunSweep(w.Spec(1), clock);
  auto two = RunSweep(w.Spec(2), clock);
  auto many = RunSweep(w.Spec(64), clock);  // more threads than runs
  ASSERT_TRUE(one.ok() && two.ok() && many.ok());
  ASSERT_EQ(one->size(), two->size());
  ASSERT_EQ(one->size(), many->size());
  for (size_t i = 0; i < one->size(); ++i) {
    SCOPED_TRACE(i);
    testing::ExpectSameReplay((*one)[i], (*two)[i]);
    testing::ExpectSameReplay((*one)[i], (*many)[i]);
  }
}

TEST(RunSweepTest, EachRunEqualsASingleReplay) {
  SmallWorld w;
  FakeClock clock;
  SweepSpec spec = w.Spec(2);
  spec.options.tune_ratio = 1.1;
  auto runs = RunSweep(spec, clock);
  ASSERT_TRUE(runs.ok());
  auto single = RunReplay(spec.inputs[1], "random", {.seed = 43, .tune_ratio = 1.1}, clock);
  ASSERT_TRUE(single.ok());
  testing::ExpectSameReplay((*runs)[3 * 3 + 1 * 3 + 1], *single);  // mixed, random, 43
}

TEST(RunSweepTest, ProgressEndsAtOneWithEveryRunFinished) {
  SmallWorld w;
  FakeClock clock;
  std::mutex mu;
  double last_fraction = -1;
  int last_done = -1, last_total = -1, calls = 0;
  bool fraction_in_range = true;
  auto runs = RunSweep(w.Spec(2), clock, [&](double f, int done, int total) {
    std::lock_guard<std::mutex> lock(mu);
    ++calls;
    fraction_in_range &= f >= 0.0 && f <= 1.0 + 1e-9;
    last_fraction = f;
    last_done = done;
    last_total = total;
  });
  ASSERT_TRUE(runs.ok());
  EXPECT_GE(calls, 18);
  EXPECT_TRUE(fraction_in_range);
  EXPECT_NEAR(last_fraction, 1.0, 1e-9);
  EXPECT_EQ(last_done, 18);
  EXPECT_EQ(last_total, 18);
}

TEST(RunSweepTest, Errors) {
  SmallWorld w;
  FakeClock clock;
  SweepSpec empty = w.Spec(2);
  empty.seeds.clear();
  auto e = RunSweep(empty, clock);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);

  SweepSpec bad = w.Spec(2);
  bad.policies = {"fgd", "nope"};
  auto b = RunSweep(bad, clock);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(b.status().message(), ::testing::HasSubstr("nope"));
}

// ---- Summarize ------------------------------------------------------------------------------

ReplayResult Fake(const std::string& pods, const std::string& policy, uint64_t seed, std::vector<double> alloc,
                  double wall = 0.0) {
  ReplayResult r;
  r.pods_name = pods;
  r.policy = policy;
  r.seed = seed;
  r.buckets.alloc_pct = alloc;
  r.buckets.frag_rate_pct.assign(alloc.size(), static_cast<double>(seed));
  r.buckets.frag_amount_pct.assign(alloc.size(), 1.0);
  r.wall_seconds = wall;
  return r;
}

std::vector<double> Curve(size_t n, double at100, double at130 = kNaN) {
  std::vector<double> v(n, 50.0);
  if (n > 100) v[100] = at100;
  if (n > 130) v[130] = at130;
  return v;
}

TEST(SummarizeTest, GroupsInFirstSeenOrderWithMedians) {
  std::vector<ReplayResult> runs = {
      Fake("L1", "fgd", 1, Curve(131, 95.0, 96.0), 0.3),
      Fake("L1", "bestfit", 1, Curve(131, 90.0, 91.0), 0.1),
      Fake("L1", "fgd", 2, Curve(131, 97.0, 98.0), 0.5),
      Fake("L2", "fgd", 1, Curve(101, 80.0)),
      Fake("L1", "fgd", 3, Curve(131, 94.0, 99.0), 0.4),
  };
  std::vector<RunSummary> s = Summarize(runs);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].pods_name, "L1");
  EXPECT_EQ(s[0].policy, "fgd");
  EXPECT_EQ(s[1].policy, "bestfit");
  EXPECT_EQ(s[2].pods_name, "L2");

  const RunSummary& f = s[0];
  EXPECT_EQ(f.runs, 3);
  EXPECT_DOUBLE_EQ(f.unallocated_pct_at_100, 5.0);  // unallocated 5, 3, 6 -> 5
  EXPECT_DOUBLE_EQ(f.unallocated_pct_at_100_min, 3.0);
  EXPECT_DOUBLE_EQ(f.unallocated_pct_at_100_max, 6.0);
  EXPECT_DOUBLE_EQ(f.unallocated_pct_at_130, 2.0);  // 4, 2, 1 -> 2
  EXPECT_DOUBLE_EQ(f.frag_rate_pct_at_100, 2.0);    // seeds 1, 2, 3
  EXPECT_DOUBLE_EQ(f.frag_amount_pct_at_100, 1.0);
  EXPECT_DOUBLE_EQ(f.wall_seconds, 0.4);
  ASSERT_EQ(f.alloc_pct_curve.size(), 131u);
  EXPECT_DOUBLE_EQ(f.alloc_pct_curve[100], 95.0);
  EXPECT_DOUBLE_EQ(f.alloc_pct_curve[0], 50.0);
  EXPECT_DOUBLE_EQ(f.frag_rate_pct_curve[7], 2.0);

  EXPECT_EQ(s[1].runs, 1);
  EXPECT_DOUBLE_EQ(s[1].unallocated_pct_at_100, 10.0);

  // L2 never reached 130 %: NaN, not a number made up.
  EXPECT_DOUBLE_EQ(s[2].unallocated_pct_at_100, 20.0);
  EXPECT_TRUE(std::isnan(s[2].unallocated_pct_at_130));
  EXPECT_EQ(s[2].alloc_pct_curve.size(), 101u);
}

TEST(SummarizeTest, CurvesOfDifferentLengthsAndMissingBuckets) {
  std::vector<ReplayResult> runs = {
      Fake("L", "p", 1, Curve(101, 90.0)),
      Fake("L", "p", 2, Curve(131, 80.0, 85.0)),
      Fake("L", "p", 3, Curve(50, kNaN)),  // never reached 100 %
  };
  std::vector<RunSummary> s = Summarize(runs);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].runs, 3);
  EXPECT_DOUBLE_EQ(s[0].unallocated_pct_at_100, 15.0);  // NaN ignored: median of 10 and 20
  EXPECT_DOUBLE_EQ(s[0].unallocated_pct_at_100_min, 10.0);
  EXPECT_DOUBLE_EQ(s[0].unallocated_pct_at_100_max, 20.0);
  EXPECT_DOUBLE_EQ(s[0].unallocated_pct_at_130, 15.0);
  ASSERT_EQ(s[0].alloc_pct_curve.size(), 131u);
  EXPECT_DOUBLE_EQ(s[0].alloc_pct_curve[120], 50.0);  // only run 2 got there
  EXPECT_DOUBLE_EQ(s[0].alloc_pct_curve[100], 85.0);

  std::vector<RunSummary> none = Summarize({Fake("L", "p", 1, {})});
  ASSERT_EQ(none.size(), 1u);
  EXPECT_TRUE(std::isnan(none[0].unallocated_pct_at_100));
  EXPECT_TRUE(std::isnan(none[0].unallocated_pct_at_100_min));
  EXPECT_TRUE(std::isnan(none[0].unallocated_pct_at_100_max));
  EXPECT_TRUE(none[0].alloc_pct_curve.empty());
  EXPECT_TRUE(Summarize({}).empty());
}

}  // namespace
}  // namespace tessera::sim
