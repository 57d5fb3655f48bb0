// The contract every policy in PolicyNames() keeps, checked on random small heterogeneous
// clusters and random task streams with arrivals and departures:
//   - every decision is feasible (ClusterSnapshot::Apply accepts it);
//   - a task is reported as not placed only when no node Fits it;
//   - feasible_nodes counts the nodes that pass the filter (nextfit: 1 when it places);
//   - the same seed gives the same decision sequence;
//   - memoisation is transparent: a fresh policy on a copy of the snapshot decides the same;
//   - capacity is conserved: allocated GPU = sum of the placed tasks' TotalGpu.
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/rng.h"
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

struct Live {
  TaskRequest task;
  Placement where;
};

struct RunResult {
  std::vector<std::optional<Placement>> decisions;
  int placed = 0;
  int rejected = 0;
};

class PolicyContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr int kNodes = 10;
  static constexpr int kTasks = 300;

  // Runs a random stream on a random cluster. With `check_fresh`, every decision is also made
  // by a fresh policy object on a copy of the snapshot (and a copy of the context).
  RunResult Run(uint64_t seed, bool check_fresh) {
    RunResult result;
    Rng rng(seed);
    ClusterSnapshot c = MakeCluster(RandomNodeArgs(rng, kNodes));
    const std::vector<int64_t> initial = FreeState(c);
    std::vector<TaskRequest> tasks;
    for (int i = 0; i < kTasks; ++i) tasks.push_back(RandomTask(rng));
    const TargetWorkload workload = TargetWorkload::FromTasks(tasks);

    std::vector<uint32_t> permutation(c.node_count());
    std::iota(permutation.begin(), permutation.end(), 0u);
    rng.Shuffle(permutation);
    std::vector<uint32_t> rank(c.node_count());
    for (uint32_t pos = 0; pos < permutation.size(); ++pos) rank[permutation[pos]] = pos;

    auto made = MakePolicy(GetParam(), {.target_workload = &workload});
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    if (!made.ok()) return result;
    std::unique_ptr<PlacementPolicy> policy = std::move(made).value();
    Rng policy_rng = rng.Fork(1);
    PlacementContext ctx{.rng = &policy_rng, .node_rank = rank};

    std::vector<Live> live;
    int64_t live_gpu = 0;
    for (int i = 0; i < kTasks; ++i) {
      const TaskRequest& t = tasks[static_cast<size_t>(i)];
      // What a fresh policy decides on a copy, from the same context.
      std::optional<PlacementDecision> fresh;
      Rng fresh_rng = policy_rng;
      PlacementContext fresh_ctx = ctx;
      fresh_ctx.rng = &fresh_rng;
      if (check_fresh) {
        const ClusterSnapshot copy = c;
        auto other = MakePolicy(GetParam(), {.target_workload = &workload});
        EXPECT_TRUE(other.ok());
        if (other.ok()) fresh = (*other)->Place(copy, t, fresh_ctx);
      }

      const PlacementDecision d = policy->Place(c, t, ctx);
      uint32_t feasible = 0;
      for (uint32_t n = 0; n < c.node_count(); ++n) feasible += c.Fits(NodeIndex{n}, t);

      if (fresh) {
        EXPECT_EQ(fresh->placement, d.placement) << GetParam() << " task " << i;
        EXPECT_EQ(fresh->feasible_nodes, d.feasible_nodes) << "task " << i;
        EXPECT_EQ(fresh_ctx.next_fit_cursor, ctx.next_fit_cursor) << "task " << i;
        Rng a = fresh_rng, b = policy_rng;
        EXPECT_EQ(a.Next(), b.Next()) << "same randomness consumed, task " << i;
      }

      result.decisions.push_back(d.placement);
      if (!d.placement) {
        EXPECT_EQ(feasible, 0u) << GetParam() << " rejected task " << i << " that fits somewhere";
        EXPECT_EQ(d.feasible_nodes, 0u);
        ++result.rejected;
      } else {
        EXPECT_TRUE(c.Fits(d.placement->node, t)) << "task " << i;
        if (GetParam() == "nextfit") {
          EXPECT_EQ(d.feasible_nodes, 1u);
        } else {
          EXPECT_EQ(d.feasible_nodes, feasible) << "task " << i;
        }
        const Status s = c.Apply(t, *d.placement);
        EXPECT_TRUE(s.ok()) << GetParam() << " task " << i << ": " << s.ToString();
        if (s.ok()) {
          live.push_back({t, *d.placement});
          live_gpu += t.TotalGpu().value();
          ++result.placed;
        }
      }
      // Departures keep the cluster from only filling up (and move node versions back and forth).
      if (!live.empty() && rng.Uniform(3) == 0) {
        const size_t k = static_cast<size_t>(rng.Uniform(live.size()));
        EXPECT_TRUE(c.Undo(live[k].task, live[k].where).ok());
        live_gpu -= live[k].task.TotalGpu().value();
        live[k] = live.back();
        live.pop_back();
      }
      EXPECT_EQ(c.allocated_gpu().value(), live_gpu) << "task " << i;
      EXPECT_TRUE(CheckInvariants(c)) << "task " << i;
      if (::testing::Test::HasFailure()) break;  // one broken step is enough to report
    }
    for (const Live& l : live) EXPECT_TRUE(c.Undo(l.task, l.where).ok());
    EXPECT_EQ(FreeState(c), initial);
    return result;
  }
};

TEST_P(PolicyContractTest, DecisionsAreFeasibleAndRejectionsAreReal) {
  for (uint64_t seed : {1, 2, 3}) {
    const RunResult r = Run(seed, /*check_fresh=*/false);
    ASSERT_FALSE(HasFailure()) << "seed " << seed;
    EXPECT_EQ(r.decisions.size(), static_cast<size_t>(kTasks));
    EXPECT_GT(r.placed, kTasks / 3) << "seed " << seed;  // the stream exercises placement
  }
}

TEST_P(PolicyContractTest, SomeTasksAreRejected) {
  // The random streams are big enough that both outcomes are exercised.
  int rejected = 0;
  for (uint64_t seed : {1, 2, 3}) rejected += Run(seed, false).rejected;
  EXPECT_GT(rejected, 0);
}

TEST_P(PolicyContractTest, SameSeedSameDecisions) {
  const RunResult a = Run(7, false);
  const RunResult b = Run(7, false);
  EXPECT_EQ(a.decisions, b.decisions);
  const RunResult other = Run(8, false);
  EXPECT_NE(a.decisions, other.decisions);  // different cluster and stream
}

TEST_P(PolicyContractTest, MemoisationIsTransparent) {
  for (uint64_t seed : {11, 12}) {
    Run(seed, /*check_fresh=*/true);
    ASSERT_FALSE(HasFailure()) << "seed " << seed;
  }
}

TEST_P(PolicyContractTest, OnePolicyAcrossTwoDivergingSnapshots) {
  // A long-lived policy alternating between two snapshots (a copy that diverges) decides as a
  // fresh policy would on each: caches keyed by snapshot must not leak between them.
  Rng rng(21);
  ClusterSnapshot a = MakeCluster(RandomNodeArgs(rng, kNodes));
  ClusterSnapshot b = a;
  std::vector<TaskRequest> tasks;
  for (int i = 0; i < 200; ++i) tasks.push_back(RandomTask(rng));
  const TargetWorkload workload = TargetWorkload::FromTasks(tasks);
  auto policy = MakePolicy(GetParam(), {.target_workload = &workload});
  ASSERT_TRUE(policy.ok());
  Rng prng(5);
  PlacementContext ctx{.rng = &prng};
  for (size_t i = 0; i < tasks.size(); ++i) {
    ClusterSnapshot& snap = (i % 2 == 0 || i % 7 == 0) ? a : b;
    Rng fresh_rng = prng;
    PlacementContext fresh_ctx = ctx;
    fresh_ctx.rng = &fresh_rng;
    auto fresh = MakePolicy(GetParam(), {.target_workload = &workload});
    ASSERT_TRUE(fresh.ok());
    const PlacementDecision expected = (*fresh)->Place(snap, tasks[i], fresh_ctx);
    const PlacementDecision d = (*policy)->Place(snap, tasks[i], ctx);
    ASSERT_EQ(d.placement, expected.placement) << GetParam() << " task " << i;
    if (d.placement) {
      ASSERT_TRUE(snap.Apply(tasks[i], *d.placement).ok());
    }
  }
}

TEST_P(PolicyContractTest, EmptyClusterPlacesNothing) {
  StatusOr<ClusterSnapshot> empty = ClusterSnapshot::Create({});
  ASSERT_TRUE(empty.ok());
  const TargetWorkload workload = TargetWorkload::FromTasks(std::vector<TaskRequest>{testing::Share(500)});
  auto policy = MakePolicy(GetParam(), {.target_workload = &workload});
  ASSERT_TRUE(policy.ok());
  Rng rng(1);
  PlacementContext ctx{.rng = &rng};
  for (const TaskRequest& t : {testing::Share(500), testing::Whole(2), testing::CpuOnly(1)}) {
    const PlacementDecision d = (*policy)->Place(*empty, t, ctx);
    EXPECT_FALSE(d.placement);
    EXPECT_EQ(d.feasible_nodes, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, PolicyContractTest, ::testing::ValuesIn(PolicyNames()),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace tessera::placement
