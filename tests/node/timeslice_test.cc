// Contract suite of the device-level time-slice policies: each delivers its promise on a
// virtual clock (weighted shares, EDF deadlines, strict priority, no credit for idling, a paused
// client's kept place).
#include "tessera/node/timeslice.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <optional>

namespace tessera::node {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<TimeslicePolicy> Make(std::string_view name, uint64_t seed = 1) {
  auto p = MakeTimeslicePolicy(name, seed);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(p).value();
}

// Runs `slices` slices of 1 ms with every client always runnable; returns slices per client.
std::map<uint32_t, int> RunSlices(TimeslicePolicy& p, const std::vector<uint32_t>& ids, int slices) {
  std::vector<RunnableClient> runnable;
  for (uint32_t id : ids) runnable.push_back({id, Nanos(0)});
  std::map<uint32_t, int> got;
  for (int s = 0; s < slices; ++s) {
    auto pick = p.Pick(runnable);
    EXPECT_TRUE(pick.has_value());
    if (!pick) break;
    ++got[*pick];
    p.Charge(*pick, milliseconds(1));
  }
  return got;
}

TEST(TimesliceTest, WeightedFairGivesWeightedSharesExactly) {
  auto p = Make("weighted_fair");
  const std::vector<uint32_t> weights = {1, 2, 3, 4};
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(p->AddClient({.id = i, .weight = weights[i]}).ok());
  const auto got = RunSlices(*p, {0, 1, 2, 3}, 10000);
  for (uint32_t i = 0; i < 4; ++i) {
    const double share = got.at(i) / 10000.0;
    EXPECT_NEAR(share, weights[i] / 10.0, 0.02 * weights[i] / 10.0) << "client " << i;  // within 2 %
  }
}

TEST(TimesliceTest, HeaderWorkedExample) {
  auto p = Make("weighted_fair");
  ASSERT_TRUE(p->AddClient({.id = 0, .weight = 1}).ok());
  ASSERT_TRUE(p->AddClient({.id = 1, .weight = 3}).ok());
  std::vector<RunnableClient> r = {{0, {}}, {1, {}}};
  std::vector<uint32_t> order;
  for (int s = 0; s < 4; ++s) {
    order.push_back(*p->Pick(r));
    p->Charge(order.back(), milliseconds(1));
  }
  EXPECT_EQ(order, (std::vector<uint32_t>{0, 1, 1, 1}));
}

// B (weight 2) pauses -- synchronises with its own GPU work -- while A (weight 1) runs three
// 1 ms slices, then both are runnable again. How many slices B runs before A depends on where
// it re-enters the queue: kept, at its own virtual time (0.5 ms: 7 slices to reach A's 4 ms);
// not kept, at the queue's (3 ms: 2 slices, the credit it was owed is lost); kept with a 1 ms
// lag bound, at 2 ms (4 slices).
int SlicesBRunsAfterPausing(std::string_view policy, std::optional<Nanos> keep_lag) {
  auto p = Make(policy);
  EXPECT_TRUE(p->AddClient({.id = 0, .tenant = 0, .weight = 1, .tenant_weight = 1}).ok());
  EXPECT_TRUE(p->AddClient({.id = 1, .tenant = 1, .weight = 2, .tenant_weight = 2}).ok());
  const std::vector<RunnableClient> both = {{0, {}}, {1, {}}};
  const std::vector<RunnableClient> only_a = {{0, {}}};
  EXPECT_EQ(*p->Pick(both), 0u);  // tie, lower id: A = 1 ms
  p->Charge(0, milliseconds(1));
  EXPECT_EQ(*p->Pick(both), 1u);  // B = 0.5 ms
  p->Charge(1, milliseconds(1));
  const uint32_t paused[] = {1};
  for (int s = 0; s < 3; ++s) {  // A = 4 ms; the queue's virtual time reaches 3 ms
    if (keep_lag) p->KeepPlace(paused, *keep_lag);
    EXPECT_EQ(*p->Pick(only_a), 0u);
    p->Charge(0, milliseconds(1));
  }
  if (keep_lag) {
    EXPECT_TRUE(p->Prefers(1, 0));
  }
  int run = 0;
  while (run < 100 && *p->Pick(both) == 1u) {
    p->Charge(1, milliseconds(1));
    ++run;
  }
  return run;
}

TEST(TimesliceTest, APausedClientKeepsItsPlaceWithABoundedLag) {
  for (const char* policy : {"weighted_fair", "hierarchical"}) {
    SCOPED_TRACE(policy);
    EXPECT_EQ(SlicesBRunsAfterPausing(policy, milliseconds(10)), 7);
    EXPECT_EQ(SlicesBRunsAfterPausing(policy, std::nullopt), 2);
    EXPECT_EQ(SlicesBRunsAfterPausing(policy, milliseconds(1)), 4);
  }
}

TEST(TimesliceTest, KeepingAClientThatNeverRanEarnsItNoCredit) {
  auto p = Make("weighted_fair");
  ASSERT_TRUE(p->AddClient({.id = 0, .weight = 1}).ok());
  ASSERT_TRUE(p->AddClient({.id = 1, .weight = 1}).ok());
  const std::vector<RunnableClient> only_a = {{0, {}}};
  const uint32_t never_ran[] = {1};
  for (int s = 0; s < 5; ++s) {
    p->KeepPlace(never_ran, milliseconds(100));
    ASSERT_EQ(*p->Pick(only_a), 0u);
    p->Charge(0, milliseconds(1));
  }
  // B arrives at the queue's virtual time (4 ms), not at 0: one slice, then A (5 ms) and B alternate.
  const std::vector<RunnableClient> both = {{0, {}}, {1, {}}};
  EXPECT_FALSE(p->Prefers(0, 1));
  EXPECT_EQ(*p->Pick(both), 1u);
  p->Charge(1, milliseconds(1));
  EXPECT_EQ(*p->Pick(both), 0u);
}

TEST(TimesliceTest, PoliciesWithoutAVirtualClockPreferNobody) {
  for (const char* policy : {"round_robin", "edf", "lottery", "priority"}) {
    auto p = Make(policy);
    ASSERT_TRUE(p->AddClient({.id = 0}).ok());
    ASSERT_TRUE(p->AddClient({.id = 1}).ok());
    EXPECT_FALSE(p->Prefers(0, 1)) << policy;
    EXPECT_FALSE(p->Prefers(1, 0)) << policy;
  }
}

TEST(TimesliceTest, LotteryApproachesWeightedSharesAndIsSeeded) {
  auto p = Make("lottery", 7);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(p->AddClient({.id = i, .weight = i + 1}).ok());
  const auto got = RunSlices(*p, {0, 1, 2, 3}, 10000);
  for (uint32_t i = 0; i < 4; ++i) {
    // A random draw: within 2 percentage points over 10k slices (sd is ~0.4 points).
    EXPECT_NEAR(got.at(i) / 10000.0, (i + 1) / 10.0, 0.02) << "client " << i;
  }
  auto again = Make("lottery", 7);
  for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(again->AddClient({.id = i, .weight = i + 1}).ok());
  EXPECT_EQ(RunSlices(*again, {0, 1, 2, 3}, 10000), got);
}

TEST(TimesliceTest, RoundRobinIsEqualAndInTurn) {
  auto p = Make("round_robin");
  for (uint32_t i = 0; i < 3; ++i) ASSERT_TRUE(p->AddClient({.id = i, .weight = 5 * (i + 1)}).ok());
  std::vector<RunnableClient> r = {{0, {}}, {1, {}}, {2, {}}};
  std::vector<uint32_t> order;
  for (int s = 0; s < 6; ++s) order.push_back(*p->Pick(r));
  EXPECT_EQ(order, (std::vector<uint32_t>{0, 1, 2, 0, 1, 2}));  // weights ignored
  // A client that is not runnable is skipped.
  std::vector<RunnableClient> two = {{0, {}}, {2, {}}};
  EXPECT_EQ(*p->Pick(two), 0u);
  EXPECT_EQ(*p->Pick(two), 2u);
}

TEST(TimesliceTest, StrictPriorityAlwaysRunsTheHighestAndRotatesWithinIt) {
  auto p = Make("priority");
  ASSERT_TRUE(p->AddClient({.id = 1, .priority = 0}).ok());
  ASSERT_TRUE(p->AddClient({.id = 2, .priority = 5}).ok());
  ASSERT_TRUE(p->AddClient({.id = 3, .priority = 5}).ok());
  std::vector<RunnableClient> all = {{1, {}}, {2, {}}, {3, {}}};
  std::map<uint32_t, int> got;
  for (int s = 0; s < 1000; ++s) ++got[*p->Pick(all)];
  EXPECT_EQ(got.count(1), 0u);  // never while a higher priority is runnable
  EXPECT_EQ(got[2], 500);
  EXPECT_EQ(got[3], 500);
  std::vector<RunnableClient> low = {{1, {}}};
  EXPECT_EQ(*p->Pick(low), 1u);
}

TEST(TimesliceTest, HierarchicalSharesByTenantThenByClient) {
  auto p = Make("hierarchical");
  // Tenant 0 (weight 1) has one client; tenant 1 (weight 3) has two clients weighted 1:2.
  ASSERT_TRUE(p->AddClient({.id = 0, .tenant = 0, .weight = 1, .tenant_weight = 1}).ok());
  ASSERT_TRUE(p->AddClient({.id = 1, .tenant = 1, .weight = 1, .tenant_weight = 3}).ok());
  ASSERT_TRUE(p->AddClient({.id = 2, .tenant = 1, .weight = 2, .tenant_weight = 3}).ok());
  const auto got = RunSlices(*p, {0, 1, 2}, 12000);
  EXPECT_NEAR(got.at(0) / 12000.0, 0.25, 0.005);
  EXPECT_NEAR(got.at(1) / 12000.0, 0.25, 0.005);
  EXPECT_NEAR(got.at(2) / 12000.0, 0.50, 0.01);
  // More processes do not buy a tenant more: a third client of tenant 1 leaves tenant 0 at 1/4.
  ASSERT_TRUE(p->AddClient({.id = 3, .tenant = 1, .weight = 5, .tenant_weight = 3}).ok());
  const auto more = RunSlices(*p, {0, 1, 2, 3}, 12000);
  EXPECT_NEAR(more.at(0) / 12000.0, 0.25, 0.005);
}

TEST(TimesliceTest, IdlingEarnsNoCredit) {
  for (const char* name : {"weighted_fair", "hierarchical"}) {
    auto p = Make(name);
    ASSERT_TRUE(p->AddClient({.id = 0, .tenant = 0}).ok());
    ASSERT_TRUE(p->AddClient({.id = 1, .tenant = 1}).ok());
    // Client 1 alone for 1000 slices, then both: client 1 must not be starved by 0's "credit".
    RunSlices(*p, {1}, 1000);
    const auto after = RunSlices(*p, {0, 1}, 100);
    EXPECT_NEAR(after.at(1), 50, 1) << name;
  }
}

TEST(TimesliceTest, EdfMeetsEveryDeadlineOfAFeasibleSet) {
  // Periodic tasks (period, work) in 1 ms slices; utilisation 1/4 + 2/6 + 3/12 + 1/8 < 1.
  struct Task {
    int period, work;
  };
  const std::vector<Task> tasks = {{4, 1}, {6, 2}, {12, 3}, {8, 1}};
  auto simulate = [&](const std::vector<Task>& set) {
    auto p = Make("edf");
    for (uint32_t i = 0; i < set.size(); ++i) EXPECT_TRUE(p->AddClient({.id = i}).ok());
    std::vector<int> left(set.size(), 0), deadline(set.size(), 0);
    int misses = 0;
    for (int t = 0; t < 24 * 100; ++t) {
      for (size_t i = 0; i < set.size(); ++i) {
        if (t % set[i].period == 0) {
          if (left[i] > 0) ++misses;  // the previous job did not finish by its deadline
          left[i] = set[i].work;
          deadline[i] = t + set[i].period;
        }
      }
      std::vector<RunnableClient> r;
      for (uint32_t i = 0; i < set.size(); ++i) {
        if (left[i] > 0) r.push_back({i, milliseconds(deadline[i])});
      }
      if (auto pick = p->Pick(r)) {
        --left[*pick];
        p->Charge(*pick, milliseconds(1));
      }
    }
    return misses;
  };
  EXPECT_EQ(simulate(tasks), 0);
  // The check can fail: an infeasible set (utilisation > 1) misses deadlines.
  EXPECT_GT(simulate({{4, 2}, {6, 3}, {12, 3}}), 0);
}

TEST(TimesliceTest, BadInput) {
  auto p = Make("weighted_fair");
  ASSERT_TRUE(p->AddClient({.id = 1}).ok());
  EXPECT_EQ(p->AddClient({.id = 1}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p->AddClient({.id = 2, .weight = 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(p->RemoveClient(9).code(), StatusCode::kNotFound);
  EXPECT_TRUE(p->RemoveClient(1).ok());
  std::vector<RunnableClient> r = {{1, {}}};
  EXPECT_FALSE(p->Pick(r).has_value());  // removed clients are ignored
  EXPECT_EQ(MakeTimeslicePolicy("fifo").status().code(), StatusCode::kInvalidArgument);
  for (const auto& name : TimeslicePolicyNames()) EXPECT_TRUE(MakeTimeslicePolicy(name).ok()) << name;
}

}  // namespace
}  // namespace tessera::node
