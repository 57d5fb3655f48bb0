#include "tessera/sim/replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "tessera/placement/policy.h"
#include "tests/testing/builders.h"
#include "tests/testing/sim_builders.h"

namespace tessera::sim {
namespace {

using testing::BundledTrace;
using testing::CpuOnly;
using testing::MakeNodes;
using testing::Pod;
using testing::Pods;
using testing::Share;
using testing::TotalGpuMilli;
using testing::Whole;

std::vector<uint32_t> Sorted(std::vector<uint32_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<uint32_t> Iota(size_t n) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  return v;
}

// A varied little pod list: CPU-only, sharing and whole-GPU pods.
std::vector<PodRecord> MixedPods(int n) {
  std::vector<PodRecord> pods;
  for (int i = 0; i < n; ++i) {
    placement::TaskRequest r;
    switch (i % 4) {
      case 0: r = CpuOnly(1000 + i); break;
      case 1: r = Share(100 + (i * 37) % 900, 2000); break;
      case 2: r = Whole(1, 4000); break;
      default: r = Whole(1 + i % 4, 8000); break;
    }
    pods.push_back(Pod(testing::Numbered("pod-", 1000 + i), r));
  }
  return pods;
}

// ---- BuildArrivalOrder ----------------------------------------------------------------------

TEST(ArrivalOrderTest, WithoutTuningItIsAPermutationOfAllPods) {
  const std::vector<PodRecord> pods = MixedPods(57);
  for (double tune : {0.0, -1.0}) {
    Rng rng(42);
    std::vector<uint32_t> order = BuildArrivalOrder(pods, 1'000'000, tune, rng);
    EXPECT_EQ(Sorted(order), Iota(pods.size()));
    EXPECT_NE(order, Iota(pods.size())) << "not shuffled";
  }
}

TEST(ArrivalOrderTest, DependsOnPodNamesNotOnListOrder) {
  const std::vector<PodRecord> pods = MixedPods(40);
  std::vector<PodRecord> reversed(pods.rbegin(), pods.rend());
  // No tuning; tuning down (capacity 20 GPUs); tuning up (capacity 100 GPUs).
  for (auto [capacity, tune] : {std::pair{20'000, 0.0}, std::pair{20'000, 1.3}, std::pair{100'000, 1.3}}) {
    SCOPED_TRACE(::testing::Message() << capacity << " x " << tune);
    Rng a(7), b(7);
    std::vector<uint32_t> oa = BuildArrivalOrder(pods, capacity, tune, a);
    std::vector<uint32_t> ob = BuildArrivalOrder(reversed, capacity, tune, b);
    // Pods drawn with replacement are drawn by list index, so only the shuffled (and trimmed)
    // list is independent of the list order.
    const size_t n = std::min({oa.size(), ob.size(), pods.size()});
    ASSERT_GT(n, 0u);
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(pods[oa[i]].name, reversed[ob[i]].name) << i;
    if (capacity == 20'000 && tune > 0) {
      EXPECT_LT(oa.size(), pods.size());
      EXPECT_EQ(oa.size(), ob.size());
    }
    if (capacity == 100'000) {
      EXPECT_GT(oa.size(), pods.size());
    }
  }
}

TEST(ArrivalOrderTest, SameSeedSameOrderOtherSeedsDiffer) {
  const std::vector<PodRecord> pods = MixedPods(64);
  auto order = [&](uint64_t seed) {
    Rng rng(seed);
    return BuildArrivalOrder(pods, 40'000, 1.3, rng);
  };
  EXPECT_EQ(order(42), order(42));
  EXPECT_NE(order(42), order(43));
  EXPECT_NE(order(42), order(44));
}

TEST(ArrivalOrderTest, TuneUpStopsAtTheFirstDrawThatWouldPassTheTarget) {
  // One pod type, so every draw is the same pod: 300 milli, capacity 1 GPU, target 1300.
  // 300 -> 600 -> 900 -> 1200; the next draw would make 1500 > 1300: stop.
  std::vector<PodRecord> pods = {Pod("p", Share(300))};
  Rng rng(1);
  std::vector<uint32_t> order = BuildArrivalOrder(pods, 1000, 1.3, rng);
  EXPECT_EQ(order, (std::vector<uint32_t>{0, 0, 0, 0}));
  EXPECT_EQ(TotalGpuMilli(pods, order), 1200);
}

TEST(ArrivalOrderTest, TuneUpKeepsADrawThatLandsExactlyOnTheTarget) {
  // Target 1.25 x 1000 = 1250 exactly: 250, 500, 750, 1000, 1250 (not past the target, kept),
  // then 1500 would pass it.
  std::vector<PodRecord> pods = {Pod("p", Share(250))};
  Rng rng(1);
  std::vector<uint32_t> order = BuildArrivalOrder(pods, 1000, 1.25, rng);
  EXPECT_EQ(order.size(), 5u);
  EXPECT_EQ(TotalGpuMilli(pods, order), 1250);
}

TEST(ArrivalOrderTest, TuneUpTestsThePerGpuMilliLikeTheArtifact) {
  // The artifact's stop test adds the drawn pod's per-GPU milli, not its total, so a multi-GPU
  // pod can carry the total past the target: 3-GPU pods on 8 GPUs, target 10400 milli.
  // 3000 -> 6000 -> 9000 (9000 + 1000 <= 10400: keep) -> 12000; 12000 + 1000 > 10400: stop.
  std::vector<PodRecord> pods = {Pod("p", Whole(3))};
  Rng rng(1);
  std::vector<uint32_t> order = BuildArrivalOrder(pods, 8000, 1.3, rng);
  EXPECT_EQ(order.size(), 4u);
  EXPECT_EQ(TotalGpuMilli(pods, order), 12000);
}

// On the real default list: the shuffled list, then draws with replacement; every kept draw
// passed the stop test and the draw after the last kept one failed it.
TEST(ArrivalOrderTest, TuneUpOnTheDefaultListFollowsTheStopRuleDrawByDraw) {
  const auto& trace = BundledTrace::Get();
  const auto& pods = trace.default_pods;
  ASSERT_EQ(pods.size(), 8152u);
  const int64_t capacity = 6212 * 1000;
  const double target = 1.3 * static_cast<double>(capacity);
  const uint32_t n = static_cast<uint32_t>(pods.size());

  Rng rng(42);
  Rng mirror(42);
  std::vector<uint32_t> order = BuildArrivalOrder(pods, capacity, 1.3, rng);
  ASSERT_GT(order.size(), pods.size());
  std::vector<uint32_t> prefix(order.begin(), order.begin() + n);
  EXPECT_EQ(Sorted(prefix), Iota(n));

  // The same stream: a shuffle of n items, then one Uniform(n) per draw.
  std::vector<uint32_t> scratch(n);
  mirror.Shuffle(scratch);
  int64_t total = TotalGpuMilli(pods, prefix);
  EXPECT_EQ(total, 6'086'800);
  for (size_t k = n; k < order.size(); ++k) {
    const uint32_t drawn = static_cast<uint32_t>(mirror.Uniform(n));
    ASSERT_EQ(order[k], drawn) << "draw " << k - n;
    const auto& r = pods[drawn].request;
    ASSERT_LE(static_cast<double>(total + r.gpu_milli.value()), target) << "draw " << k - n;
    total += r.TotalGpu().value();
  }
  const uint32_t stop = static_cast<uint32_t>(mirror.Uniform(n));
  EXPECT_GT(static_cast<double>(total + pods[stop].request.gpu_milli.value()), target);
  EXPECT_EQ(rng.Next(), mirror.Next()) << "BuildArrivalOrder drew a different number of values";

  // Within one pod of the target.
  int64_t largest = 0;
  for (const auto& p : pods) largest = std::max(largest, p.request.TotalGpu().value());
  EXPECT_GT(static_cast<double>(total), target - 1000);
  EXPECT_LE(static_cast<double>(total), target + static_cast<double>(largest));
}

TEST(ArrivalOrderTest, TuneDownRemovesPodsUntilTheTotalFits) {
  // Four 500-milli pods (2000) on one GPU with target 1000: two are removed.
  std::vector<PodRecord> pods = Pods("p", 4, Share(500));
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    std::vector<uint32_t> order = BuildArrivalOrder(pods, 1000, 1.0, rng);
    ASSERT_EQ(order.size(), 2u) << seed;
    EXPECT_NE(order[0], order[1]);
    EXPECT_EQ(TotalGpuMilli(pods, order), 1000);
  }
}

TEST(ArrivalOrderTest, TuneDownOnTheDefaultListStopsWithinOnePodOfTheTarget) {
  const auto& pods = BundledTrace::Get().default_pods;
  ASSERT_FALSE(pods.empty());
  int64_t largest = 0;
  for (const auto& p : pods) largest = std::max(largest, p.request.TotalGpu().value());
  const int64_t capacity = 2000 * 1000;  // a cluster a third of the real one's size
  const double target = 1.3 * static_cast<double>(capacity);
  Rng rng(42);
  std::vector<uint32_t> order = BuildArrivalOrder(pods, capacity, 1.3, rng);
  EXPECT_LT(order.size(), pods.size());
  EXPECT_EQ(std::set<uint32_t>(order.begin(), order.end()).size(), order.size()) << "a pod kept twice";
  const int64_t total = TotalGpuMilli(pods, order);
  EXPECT_LE(static_cast<double>(total), target);
  EXPECT_GT(static_cast<double>(total), target - static_cast<double>(largest));
}

TEST(ArrivalOrderTest, ExactlyOnTargetAndGpuFreeListsAreLeftAlone) {
  std::vector<PodRecord> exact = Pods("p", 13, Share(100));  // 1300 == 1.3 x 1000
  Rng a(5);
  EXPECT_EQ(Sorted(BuildArrivalOrder(exact, 1000, 1.3, a)), Iota(13));
  std::vector<PodRecord> cpu = Pods("c", 9, CpuOnly(1000));  // nothing to scale
  Rng b(5);
  EXPECT_EQ(Sorted(BuildArrivalOrder(cpu, 1000, 1.3, b)), Iota(9));
  std::vector<PodRecord> none;
  Rng c(5);
  EXPECT_TRUE(BuildArrivalOrder(none, 1000, 1.3, c).empty());
}

// ---- RunReplay on hand-made clusters ------------------------------------------------------------

FakeClock& Clock0() {
  static FakeClock clock;
  return clock;
}

StatusOr<ReplayResult> Replay(const std::vector<placement::NodeSpec>& nodes, const std::vector<PodRecord>& pods,
                              const std::string& policy, double tune = 0.0, uint64_t seed = 42) {
  ReplayInput in{&nodes, &pods, "hand"};
  return RunReplay(in, policy, {.seed = seed, .tune_ratio = tune}, Clock0());
}

TEST(RunReplayTest, OneGpuTwoHalves) {
  const auto nodes = MakeNodes({{64000, 262144, 1, "T4"}});
  const auto pods = Pods("half", 2, Share(500, 1000, 1024));
  for (const std::string& policy : placement::PolicyNames()) {
    SCOPED_TRACE(policy);
    auto r = Replay(nodes, pods, policy);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->policy, policy);
    EXPECT_EQ(r->pods_name, "hand");
    EXPECT_EQ(r->seed, 42u);
    EXPECT_EQ(r->tasks_arrived, 2);
    EXPECT_EQ(r->tasks_placed, 2);
    EXPECT_EQ(r->tasks_failed, 0);
    EXPECT_EQ(r->gpu_capacity_milli, 1000);
    EXPECT_EQ(r->arrived_gpu_milli, 1000);
    EXPECT_EQ(r->allocated_gpu_milli, 1000);
    EXPECT_EQ(r->target_workload_types, 1u);
    // Events at 50 % (allocated 50 %) and 100 % (allocated 100 %); empty buckets next to
    // them borrow their neighbours' events, the rest have none.
    const auto& a = r->buckets.alloc_pct;
    ASSERT_EQ(a.size(), 101u);
    EXPECT_DOUBLE_EQ(a[50], 50.0);
    EXPECT_DOUBLE_EQ(a[49], 50.0);
    EXPECT_DOUBLE_EQ(a[51], 50.0);
    EXPECT_DOUBLE_EQ(a[99], 100.0);
    EXPECT_DOUBLE_EQ(a[100], 100.0);
    EXPECT_TRUE(std::isnan(a[0]));
    EXPECT_TRUE(std::isnan(a[48]));
    EXPECT_TRUE(std::isnan(a[52]));
    EXPECT_TRUE(std::isnan(a[98]));
    EXPECT_DOUBLE_EQ(r->UnallocatedPctAt(100), 0.0);
    EXPECT_DOUBLE_EQ(r->UnallocatedPctAt(50), 50.0);
    EXPECT_TRUE(std::isnan(r->UnallocatedPctAt(130)));
    EXPECT_TRUE(std::isnan(r->UnallocatedPctAt(-1)));
    // Halves fit the target workload exactly: no fragmentation.
    EXPECT_DOUBLE_EQ(r->FragRatePctAt(50), 0.0);
    EXPECT_DOUBLE_EQ(r->FragAmountPctAt(50), 0.0);
    // Full cluster: no free GPU, the rate is defined as 0.
    EXPECT_DOUBLE_EQ(r->FragRatePctAt(100), 0.0);
  }
}

TEST(RunReplayTest, AThirdHalfFailsAndTuningTrimsIt) {
  const auto nodes = MakeNodes({{64000, 262144, 1, "T4"}});
  const auto pods = Pods("half", 3, Share(500, 1000, 1024));
  auto r = Replay(nodes, pods, "bestfit");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tasks_arrived, 3);
  EXPECT_EQ(r->tasks_placed, 2);
  EXPECT_EQ(r->tasks_failed, 1);
  EXPECT_EQ(r->tasks_failed_gpu, 1);
  EXPECT_EQ(r->arrived_gpu_milli, 1500);
  ASSERT_EQ(r->buckets.alloc_pct.size(), 151u);
  EXPECT_DOUBLE_EQ(r->buckets.alloc_pct[150], 100.0);
  EXPECT_TRUE(std::isnan(r->UnallocatedPctAt(130)));  // nothing near 130 %

  // With tuning to 1.3 x capacity = 1300 milli, one of the three (1500) is removed.
  auto tuned = Replay(nodes, pods, "bestfit", 1.3);
  ASSERT_TRUE(tuned.ok()) << tuned.status().ToString();
  EXPECT_EQ(tuned->tasks_arrived, 2);
  EXPECT_EQ(tuned->tasks_failed, 0);
  EXPECT_EQ(tuned->arrived_gpu_milli, 1000);
}

TEST(RunReplayTest, FragmentationOfALeftoverTooSmallForTheWorkload) {
  // Workload: 600-milli tasks only. After the first, the GPU's 400 free milli can host none:
  // fragment 400 = 40 % of capacity and 100 % of the free GPU. The second cannot be placed.
  const auto nodes = MakeNodes({{64000, 262144, 1, "V100M32"}});
  const auto pods = Pods("six", 2, Share(600, 1000, 1024));
  auto r = Replay(nodes, pods, "fgd");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tasks_placed, 1);
  EXPECT_EQ(r->tasks_failed, 1);
  EXPECT_EQ(r->tasks_failed_gpu, 1);
  ASSERT_EQ(r->buckets.alloc_pct.size(), 121u);
  EXPECT_DOUBLE_EQ(r->buckets.alloc_pct[60], 60.0);
  EXPECT_DOUBLE_EQ(r->FragAmountPctAt(60), 40.0);
  EXPECT_DOUBLE_EQ(r->FragRatePctAt(60), 100.0);
  EXPECT_DOUBLE_EQ(r->buckets.alloc_pct[120], 60.0);
  EXPECT_DOUBLE_EQ(r->FragRatePctAt(120), 100.0);
}

TEST(RunReplayTest, FailedCpuOnlyTasksAreNotCountedAsGpuFailures) {
  const auto nodes = MakeNodes({{1000, 4096, 1, "T4"}});
  const std::vector<PodRecord> pods = {Pod("big-cpu", CpuOnly(2000)), Pod("gpu", Whole(1, 500))};
  auto r = Replay(nodes, pods, "bestfit");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tasks_arrived, 2);
  EXPECT_EQ(r->tasks_placed, 1);
  EXPECT_EQ(r->tasks_failed, 1);
  EXPECT_EQ(r->tasks_failed_gpu, 0);
  EXPECT_EQ(r->allocated_gpu_milli, 1000);
}

TEST(RunReplayTest, ModelRestrictionsAreRespected) {
  const auto nodes = MakeNodes({{64000, 262144, 2, "T4"}, {64000, 262144, 2, "P100"}});
  placement::TaskRequest t4_only = Whole(1, 1000);
  t4_only.allowed_models = testing::Models("T4");
  const auto pods = Pods("t4", 3, t4_only);
  for (const std::string& policy : placement::PolicyNames()) {
    auto r = Replay(nodes, pods, policy);
    ASSERT_TRUE(r.ok()) << policy << ": " << r.status().ToString();
    EXPECT_EQ(r->tasks_placed, 2) << policy;
    EXPECT_EQ(r->tasks_failed, 1) << policy;
  }
}

TEST(RunReplayTest, WallSecondsComeFromTheInjectedClock) {
  // A clock that moves one second per reading: RunReplay reads it at start and at end.
  class TickingClock final : public Clock {
   public:
    TimePoint Now() const override { return TimePoint(std::chrono::seconds(++ticks_)); }
    mutable int ticks_ = 0;
  };
  TickingClock clock;
  const auto nodes = MakeNodes({{64000, 262144, 1, "T4"}});
  const auto pods = Pods("half", 2, Share(500));
  ReplayInput in{&nodes, &pods, "hand"};
  auto r = RunReplay(in, "bestfit", {.tune_ratio = 0}, clock);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_DOUBLE_EQ(r->wall_seconds, 1.0);
  auto fake = Replay(nodes, pods, "bestfit");
  ASSERT_TRUE(fake.ok());
  EXPECT_EQ(fake->wall_seconds, 0.0);
}

TEST(RunReplayTest, ProgressIsReportedEvery256TasksAndAtTheEnd) {
  const auto nodes = MakeNodes({{1'000'000, 1'000'000, 8, "A10"}});
  const auto pods = Pods("s", 600, Share(10));
  ReplayInput in{&nodes, &pods, "hand"};
  std::vector<std::pair<int64_t, int64_t>> calls;
  auto r = RunReplay(in, "fgd", {.tune_ratio = 0}, Clock0(),
                     [&](int64_t done, int64_t total) { calls.emplace_back(done, total); });
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(calls, (std::vector<std::pair<int64_t, int64_t>>{{256, 600}, {512, 600}, {600, 600}}));
}

TEST(RunReplayTest, BadInputs) {
  const auto nodes = MakeNodes({{64000, 262144, 1, "T4"}});
  const auto cpu_nodes = MakeNodes({{64000, 262144, 0, ""}});
  const std::vector<placement::NodeSpec> no_nodes;
  const auto pods = Pods("p", 2, Share(500));
  const std::vector<PodRecord> no_pods;
  auto code = [](const StatusOr<ReplayResult>& r) { return r.ok() ? StatusCode::kOk : r.status().code(); };
  EXPECT_EQ(code(Replay(no_nodes, pods, "fgd")), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Replay(nodes, no_pods, "fgd")), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(Replay(cpu_nodes, pods, "fgd")), StatusCode::kInvalidArgument);
  auto unknown = Replay(nodes, pods, "no-such-policy");
  EXPECT_EQ(code(unknown), StatusCode::kInvalidArgument);
  if (!unknown.ok()) {
    EXPECT_THAT(unknown.status().message(), ::testing::HasSubstr("no-such-policy"));
  }
  ReplayInput null_nodes{nullptr, &pods, "x"};
  EXPECT_EQ(code(RunReplay(null_nodes, "fgd", {}, Clock0())), StatusCode::kInvalidArgument);
  ReplayInput null_pods{&nodes, nullptr, "x"};
  EXPECT_EQ(code(RunReplay(null_pods, "fgd", {}, Clock0())), StatusCode::kInvalidArgument);
}

TEST(RunReplayTest, TuningThatNeedsMillionsOfTasksIsRefused) {
  // 1-milli pods up to 1.3 x 8 GPUs would be 10400 tasks: fine. Up to 10 x 800 GPUs: too many.
  const auto big = MakeNodes({{1'000'000, 1'000'000, 8, "A10"}});
  const auto pods = Pods("tiny", 3, Share(1));
  std::vector<placement::NodeSpec> many;
  for (int i = 0; i < 100; ++i) {
    many.push_back(big[0]);
    many.back().name = testing::Numbered("n", i);
  }
  auto r = Replay(many, pods, "bestfit", 10.0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), ::testing::HasSubstr("5,000,000"));
}

// Every policy on a small mixed cluster: bookkeeping adds up, allocation never shrinks.
TEST(RunReplayTest, InvariantsForEveryPolicy) {
  const auto nodes = MakeNodes({{32000, 131072, 2, "T4"},
                                {64000, 262144, 4, "V100M32"},
                                {96000, 393216, 8, "A10"},
                                {16000, 65536, 0, ""},
                                {64000, 262144, 8, "G2"}});
  const auto pods = MixedPods(300);
  for (const std::string& policy : placement::PolicyNames()) {
    SCOPED_TRACE(policy);
    auto r = Replay(nodes, pods, policy, 1.3, 7);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->tasks_placed + r->tasks_failed, r->tasks_arrived);
    EXPECT_LE(r->tasks_failed_gpu, r->tasks_failed);
    EXPECT_EQ(r->gpu_capacity_milli, 22000);
    EXPECT_LE(r->allocated_gpu_milli, r->gpu_capacity_milli);
    EXPECT_LE(r->allocated_gpu_milli, r->arrived_gpu_milli);
    double last = -1;
    for (size_t b = 0; b < r->buckets.alloc_pct.size(); ++b) {
      const double a = r->buckets.alloc_pct[b];
      if (std::isnan(a)) continue;
      EXPECT_GE(a, last - 1e-9) << "bucket " << b;
      EXPECT_LE(a, 100.0 + 1e-9);
      // An empty bucket borrows events from b+1, which arrived up to b+1.5 %.
      EXPECT_LE(a, static_cast<double>(b) + 1.5 + 1e-9) << "allocated more than arrived at bucket " << b;
      last = a;
      const double rate = r->buckets.frag_rate_pct[b];
      EXPECT_GE(rate, -1e-9);
      EXPECT_LE(rate, 100.0 + 1e-9);
    }
  }
}

// ---- determinism on the real trace ---------------------------------------------------------------

TEST(RunReplayTest, SameSeedSameResultOtherSeedDiffers) {
  const auto& trace = BundledTrace::Get();
  ASSERT_EQ(trace.nodes.size(), 1213u);
  for (const char* policy : {"bestfit", "random"}) {
    SCOPED_TRACE(policy);
    auto a = RunReplay(trace.DefaultInput(), policy, {.seed = 42}, Clock0());
    auto b = RunReplay(trace.DefaultInput(), policy, {.seed = 42}, Clock0());
    auto c = RunReplay(trace.DefaultInput(), policy, {.seed = 43}, Clock0());
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    testing::ExpectSameReplay(*a, *b);
    EXPECT_EQ(a->wall_seconds, b->wall_seconds);
    EXPECT_NE(a->tasks_arrived, c->tasks_arrived);
    EXPECT_FALSE(testing::SameDoubles(a->buckets.alloc_pct, c->buckets.alloc_pct));
    EXPECT_EQ(a->gpu_capacity_milli, 6'212'000);
    EXPECT_EQ(a->pods_name, "openb_pod_list_default");
    EXPECT_GT(a->arrived_gpu_milli, 8'075'600 - 1000);
    EXPECT_GE(a->buckets.alloc_pct.size(), 131u);
  }
}

}  // namespace
}  // namespace tessera::sim
