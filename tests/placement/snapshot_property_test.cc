// Property tests of ClusterSnapshot::Apply / Undo driven by real policy decisions: whatever
// sequence of decisions is applied, undoing it restores the initial free state exactly, and no
// GPU ever leaves [0, 1000] free.
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/rng.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/fragmentation.h"
#include "tessera/placement/policy.h"
#include "tests/testing/builders.h"
#include "tests/testing/snapshot_checks.h"

namespace tessera::placement {
namespace {

using ::tessera::testing::CheckInvariants;
using ::tessera::testing::FreeState;
using ::tessera::testing::MakeCluster;
using ::tessera::testing::RandomNodeArgs;
using ::tessera::testing::RandomTask;

struct Applied {
  TaskRequest task;
  Placement where;
};

class SnapshotPropertyTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SnapshotPropertyTest, ApplyThenUndoInReverseRestoresInitialState) {
  Rng rng(GetParam());
  ClusterSnapshot c = MakeCluster(RandomNodeArgs(rng, 12));
  const std::vector<int64_t> initial = FreeState(c);

  std::vector<TaskRequest> sample;
  for (int i = 0; i < 200; ++i) sample.push_back(RandomTask(rng));
  const TargetWorkload workload = TargetWorkload::FromTasks(sample);
  std::vector<std::unique_ptr<PlacementPolicy>> policies;
  for (const std::string& name : PolicyNames()) {
    auto p = MakePolicy(name, {.target_workload = &workload});
    ASSERT_TRUE(p.ok()) << name;
    policies.push_back(std::move(p).value());
  }
  Rng policy_rng = rng.Fork(1);
  PlacementContext ctx{.rng = &policy_rng};

  std::vector<Applied> stack;
  int placed = 0;
  for (int step = 0; step < 400; ++step) {
    // Mostly place, sometimes pop (LIFO) mid-way so the cluster does not just fill up.
    if (!stack.empty() && rng.Uniform(4) == 0) {
      const Applied a = stack.back();
      stack.pop_back();
      ASSERT_TRUE(c.Undo(a.task, a.where).ok()) << "step " << step;
    } else {
      const TaskRequest t = RandomTask(rng);
      PlacementPolicy& policy = *policies[rng.Uniform(policies.size())];
      const PlacementDecision d = policy.Place(c, t, ctx);
      if (!d.placement) continue;
      const Status s = c.Apply(t, *d.placement);
      ASSERT_TRUE(s.ok()) << policy.name() << " step " << step << ": " << s.ToString();
      stack.push_back({t, *d.placement});
      ++placed;
    }
    ASSERT_TRUE(CheckInvariants(c)) << "step " << step;
  }
  EXPECT_GT(placed, 50);  // the property was exercised
  while (!stack.empty()) {
    const Applied a = stack.back();
    stack.pop_back();
    ASSERT_TRUE(c.Undo(a.task, a.where).ok());
    ASSERT_TRUE(CheckInvariants(c));
  }
  EXPECT_EQ(FreeState(c), initial);
  EXPECT_EQ(c.allocated_gpu(), GpuMilli{0});
}

TEST_P(SnapshotPropertyTest, UndoInAnyOrderRestoresInitialState) {
  Rng rng(GetParam() + 1000);
  ClusterSnapshot c = MakeCluster(RandomNodeArgs(rng, 8));
  const std::vector<int64_t> initial = FreeState(c);
  auto policy = MakePolicy("random", {});
  ASSERT_TRUE(policy.ok());
  PlacementContext ctx{.rng = &rng};
  std::vector<Applied> applied;
  for (int i = 0; i < 150; ++i) {
    const TaskRequest t = RandomTask(rng);
    const PlacementDecision d = (*policy)->Place(c, t, ctx);
    if (!d.placement) continue;
    ASSERT_TRUE(c.Apply(t, *d.placement).ok());
    applied.push_back({t, *d.placement});
  }
  ASSERT_FALSE(applied.empty());
  rng.Shuffle(applied);
  for (const Applied& a : applied) {
    ASSERT_TRUE(c.Undo(a.task, a.where).ok());
    ASSERT_TRUE(CheckInvariants(c));
  }
  EXPECT_EQ(FreeState(c), initial);
}

INSTANTIATE_TEST_SUITE_P(Seeds, SnapshotPropertyTest, ::testing::Values(1, 2, 3, 42, 2024));

}  // namespace
}  // namespace tessera::placement
