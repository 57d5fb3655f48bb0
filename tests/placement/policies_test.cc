// Each built-in policy on small hand-computed clusters, following the worked examples in the
// header comments of src/placement/*_policy.cc and fit_policies.cc.
#include <array>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/placement/fragmentation.h"
#include "tessera/placement/policy.h"
#include "tests/testing/builders.h"

namespace tessera::placement {
namespace {

using ::tessera::testing::CpuOnly;
using ::tessera::testing::MakeCluster;
using ::tessera::testing::Occupy;
using ::tessera::testing::Share;
using ::tessera::testing::Whole;

std::unique_ptr<PlacementPolicy> Make(std::string_view name, const TargetWorkload* workload = nullptr) {
  auto p = MakePolicy(name, {.target_workload = workload});
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? std::move(p).value() : nullptr;
}

// One decision of a fresh `name` policy.
PlacementDecision PlaceOnce(std::string_view name, const ClusterSnapshot& c, const TaskRequest& t,
                            std::span<const uint32_t> rank = {}, const TargetWorkload* workload = nullptr) {
  auto policy = Make(name, workload);
  if (policy == nullptr) return {};
  Rng rng(1);
  PlacementContext ctx{.rng = &rng, .node_rank = rank};
  return policy->Place(c, t, ctx);
}

Placement At(uint32_t node, GpuSet gpus) { return Placement{NodeIndex{node}, gpus}; }

// --- dotproduct ---------------------------------------------------------------------------

TEST(DotProductPolicyTest, WorkedExampleFullerNodeWins) {
  // A: 64000 CPU, 8000 milli free -> 92. B: 16000 CPU, 1000 free -> 98.
  const ClusterSnapshot c = MakeCluster({{64000, 262144, 8, "G2"}, {16000, 65536, 1, "G2"}});
  const PlacementDecision d = PlaceOnce("dotproduct", c, Whole(1, 8000));
  ASSERT_TRUE(d.placement);
  EXPECT_EQ(*d.placement, At(1, GpuBit(0)));
  EXPECT_EQ(d.feasible_nodes, 2u);
  // Independent of node order.
  const ClusterSnapshot swapped = MakeCluster({{16000, 65536, 1, "G2"}, {64000, 262144, 8, "G2"}});
  EXPECT_EQ(PlaceOnce("dotproduct", swapped, Whole(1, 8000)).placement, At(0, GpuBit(0)));
}

TEST(DotProductPolicyTest, BestFitGpuInsideNode) {
  ClusterSnapshot c = MakeCluster({{16000, 65536, 3, "T4"}});
  ASSERT_TRUE(Occupy(c, 0, 0, 200).ok());  // {800, 400, 1000}
  ASSERT_TRUE(Occupy(c, 0, 1, 600).ok());
  EXPECT_EQ(PlaceOnce("dotproduct", c, Share(300)).placement, At(0, GpuBit(1)));
  EXPECT_EQ(PlaceOnce("dotproduct", c, Share(500)).placement, At(0, GpuBit(0)));
}

// --- gpuclustering ------------------------------------------------------------------------

// Puts `tasks_of_500` sharing tasks of 500 milli on node `node`: two per GPU, GPU0 first.
void AddSharing(ClusterSnapshot& c, uint32_t node, int tasks_of_500) {
  for (int i = 0; i < tasks_of_500; ++i) ASSERT_TRUE(Occupy(c, node, i / 2, 500).ok());
}

TEST(GpuClusteringPolicyTest, WorkedExampleLikeWithLike) {
  // Node 0 (B): empty, 8000 free -> 25. Node 1 (A): only sharing tasks, 6000 free -> 81.
  ClusterSnapshot c = MakeCluster({{64000, 262144, 8, "G2"}, {64000, 262144, 8, "G2"}});
  AddSharing(c, 1, 4);
  const PlacementDecision d = PlaceOnce("gpuclustering", c, Share(500));
  ASSERT_TRUE(d.placement);
  EXPECT_EQ(*d.placement, At(1, GpuBit(2)));  // best fit among the free GPUs: lowest index
}

TEST(GpuClusteringPolicyTest, OtherTagsRepel) {
  // Node 1 holds only 1-GPU whole tasks: base 0 + 25*2000/8000 = 6 < 25 of the empty node 0.
  ClusterSnapshot c = MakeCluster({{64000, 262144, 8, "G2"}, {64000, 262144, 8, "G2"}});
  ASSERT_TRUE(Occupy(c, 1, 0, 1000).ok());
  ASSERT_TRUE(Occupy(c, 1, 1, 1000).ok());
  EXPECT_EQ(PlaceOnce("gpuclustering", c, Share(500)).placement->node, NodeIndex{0});
  // ...but attract another 1-GPU whole task: 75 + 6 = 81.
  EXPECT_EQ(PlaceOnce("gpuclustering", c, Whole(1)).placement, At(1, GpuBit(2)));
  // A 2-GPU task is another tag again.
  EXPECT_EQ(PlaceOnce("gpuclustering", c, Whole(2)).placement->node, NodeIndex{0});
}

TEST(GpuClusteringPolicyTest, MixedTagsScoreFifty) {
  // Node 1: a whole task and a sharing task: base 50 + 25*1500/8000 = 54 > 25.
  // Node 2: only whole tasks with more used: 0 + ... < 25.
  ClusterSnapshot c = MakeCluster({{64000, 262144, 8, "G2"}, {64000, 262144, 8, "G2"}, {64000, 262144, 8, "G2"}});
  ASSERT_TRUE(Occupy(c, 1, 0, 1000).ok());
  ASSERT_TRUE(Occupy(c, 1, 1, 500).ok());
  for (int g = 0; g < 6; ++g) ASSERT_TRUE(Occupy(c, 2, g, 1000).ok());
  EXPECT_EQ(PlaceOnce("gpuclustering", c, Share(500)).placement, At(1, GpuBit(1)));
  // A 4-GPU task: node 2 has only 2 free GPUs; node 1 holds other tags only (0 + 4) and loses
  // to the empty node 0 (25).
  EXPECT_EQ(PlaceOnce("gpuclustering", c, Whole(4)).placement->node, NodeIndex{0});
}

TEST(GpuClusteringPolicyTest, UsedTermIsIntegerArithmetic) {
  // Node 0: sharing only, 1920 used -> 75 + 25*1920/8000 (= 6 exactly) = 81. Node 1: sharing
  // only, 2200 used -> 75 + floor(6.875) = 81 as well: a tie, so the rank decides.
  ClusterSnapshot c = MakeCluster({{64000, 262144, 8, "G2"}, {64000, 262144, 8, "G2"}});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Occupy(c, 0, i / 2, 480).ok());
  AddSharing(c, 1, 4);
  ASSERT_TRUE(Occupy(c, 1, 2, 200).ok());
  EXPECT_EQ(PlaceOnce("gpuclustering", c, Share(500)).placement, At(0, GpuBit(2)));
  const std::array<uint32_t, 2> rank{1, 0};
  EXPECT_EQ(PlaceOnce("gpuclustering", c, Share(500), rank).placement, At(1, GpuBit(2)));
  // 2400 used -> 75 + 7 = 82 beats 81 whatever the rank.
  ASSERT_TRUE(Occupy(c, 1, 3, 200).ok());
  EXPECT_EQ(PlaceOnce("gpuclustering", c, Share(500)).placement->node, NodeIndex{1});
}

TEST(GpuClusteringPolicyTest, UsedTermTruncatesTowardZeroOnNodesWithMoreThanEightGpus) {
  // On 16-GPU nodes U_n can exceed 8000 and the used term is negative. Like the artifact's Go
  // integer division it truncates toward zero: node 0 (9000 free) -> -3.125 -> -3 -> 72; node 1
  // (8960 free) -> -3 -> 72. The tie goes to the lower rank: node 0.
  ClusterSnapshot c = MakeCluster({{64000, 262144, 16, "G2"}, {64000, 262144, 16, "G2"}});
  AddSharing(c, 0, 14);
  AddSharing(c, 1, 14);
  ASSERT_TRUE(Occupy(c, 1, 7, 40).ok());
  const PlacementDecision d = PlaceOnce("gpuclustering", c, Share(500));
  ASSERT_TRUE(d.placement);
  EXPECT_EQ(d.placement->node, NodeIndex{0});
}

TEST(GpuClusteringPolicyTest, CpuOnlyTasksFollowRank) {
  ClusterSnapshot c = MakeCluster({{64000, 262144, 8, "G2"}, {64000, 262144, 8, "G2"}, {8000, 8192, 0, ""}});
  AddSharing(c, 1, 4);
  const std::array<uint32_t, 3> rank{2, 1, 0};
  const PlacementDecision d = PlaceOnce("gpuclustering", c, CpuOnly(1000), rank);
  EXPECT_EQ(d.placement, At(2, 0));
  EXPECT_EQ(d.feasible_nodes, 3u);
}

// --- gpupacking ---------------------------------------------------------------------------

TEST(GpuPackingPolicyTest, WorkedExampleCasesABC) {
  // Node 0 (a): {1000, 1000} -> 31. Node 1 (b): {200, 1000}, a 300-milli task must take the
  // fully free GPU -> max(50 - 1, 33) = 49. Node 2 (c): {400, 1000} -> 100 - 40/10 = 96.
  ClusterSnapshot c = MakeCluster({{32000, 65536, 2, "T4"}, {32000, 65536, 2, "T4"}, {32000, 65536, 2, "T4"}});
  ASSERT_TRUE(Occupy(c, 1, 0, 800).ok());
  ASSERT_TRUE(Occupy(c, 2, 0, 600).ok());
  EXPECT_EQ(PlaceOnce("gpupacking", c, Share(300)).placement, At(2, GpuBit(0)));
  // A 500-milli task cannot use node 2's 400: nodes 1 and 2 are both case (b), 49, and beat
  // node 0's (a) 31; the tie goes to the lower rank, node 1.
  EXPECT_EQ(PlaceOnce("gpupacking", c, Share(500)).placement, At(1, GpuBit(1)));
  // Rank cannot overturn (c) > (b) > (a).
  const std::array<uint32_t, 3> rank{0, 1, 2};
  const std::array<uint32_t, 3> reversed{2, 1, 0};
  EXPECT_EQ(PlaceOnce("gpupacking", c, Share(300), rank).placement->node, NodeIndex{2});
  EXPECT_EQ(PlaceOnce("gpupacking", c, Share(300), reversed).placement->node, NodeIndex{2});
}

TEST(GpuPackingPolicyTest, EmptyNodeScoreDependsOnGpuCount) {
  // (a): 2 GPUs -> max(31, 2) = 31; 8 GPUs -> max(25, 8) = 25; 16 GPUs -> max(17, 16) = 17.
  const ClusterSnapshot c = MakeCluster({{32000, 65536, 16, "T4"}, {32000, 65536, 8, "T4"}, {32000, 65536, 2, "T4"}});
  EXPECT_EQ(PlaceOnce("gpupacking", c, Share(300)).placement, At(2, GpuBit(0)));
  EXPECT_EQ(PlaceOnce("gpupacking", c, Whole(4)).placement, At(1, 0b1111));
  EXPECT_EQ(PlaceOnce("gpupacking", c, Whole(10)).placement->node, NodeIndex{0});
}

TEST(GpuPackingPolicyTest, PartlyUsedGpuScoreIsIntegerArithmetic) {
  // (c) with u = 450: floor(450*100/1000) = 45, 45/10 = 4 -> 96; u = 400 -> 96 too: a tie.
  // u = 500 -> 95.
  ClusterSnapshot c = MakeCluster({{32000, 65536, 1, "T4"}, {32000, 65536, 1, "T4"}, {32000, 65536, 1, "T4"}});
  ASSERT_TRUE(Occupy(c, 0, 0, 500).ok());  // 500 free -> 95
  ASSERT_TRUE(Occupy(c, 1, 0, 550).ok());  // 450 free -> 96
  ASSERT_TRUE(Occupy(c, 2, 0, 600).ok());  // 400 free -> 96
  EXPECT_EQ(PlaceOnce("gpupacking", c, Share(300)).placement->node, NodeIndex{1});
  const std::array<uint32_t, 3> rank{0, 2, 1};
  EXPECT_EQ(PlaceOnce("gpupacking", c, Share(300), rank).placement->node, NodeIndex{2});
}

TEST(GpuPackingPolicyTest, WholeTasksPreferUsedNodes) {
  // Node 1 is partly used: a 2-GPU task there scores max(50 - 2, 33) = 48 > 31 of empty node 0.
  ClusterSnapshot c = MakeCluster({{32000, 65536, 2, "T4"}, {32000, 65536, 4, "T4"}});
  ASSERT_TRUE(Occupy(c, 1, 1, 100).ok());
  EXPECT_EQ(PlaceOnce("gpupacking", c, Whole(2)).placement, At(1, GpuBit(0) | GpuBit(2)));
}

TEST(GpuPackingPolicyTest, CpuOnlyTasksFollowRank) {
  ClusterSnapshot c = MakeCluster({{32000, 65536, 2, "T4"}, {32000, 65536, 2, "T4"}});
  ASSERT_TRUE(Occupy(c, 1, 1, 100).ok());
  const std::array<uint32_t, 2> rank{1, 0};
  EXPECT_EQ(PlaceOnce("gpupacking", c, CpuOnly(100)).placement, At(0, 0));
  EXPECT_EQ(PlaceOnce("gpupacking", c, CpuOnly(100), rank).placement, At(1, 0));
}

// --- bestfit ------------------------------------------------------------------------------

TEST(BestFitPolicyTest, WorkedExampleSmallNodeWins) {
  // Node 0 (B): 64000 CPU, 8 GPUs -> 29. Node 1 (A): 8000 CPU, 1 GPU -> 95.
  const ClusterSnapshot c = MakeCluster({{64000, 262144, 8, "G2"}, {8000, 32768, 1, "G2"}});
  const PlacementDecision d = PlaceOnce("bestfit", c, Share(500, 4000));
  EXPECT_EQ(d.placement, At(1, GpuBit(0)));
  EXPECT_EQ(d.feasible_nodes, 2u);
}

TEST(BestFitPolicyTest, ScoreIsTruncatedToInteger) {
  // 8000 CPU -> 95.31 -> 95; 8500 CPU -> 95.12 -> 95: a tie broken by rank, even though the
  // 8000-CPU node is the tighter fit. 9500 CPU -> 94.7 -> 94 loses outright.
  const ClusterSnapshot c = MakeCluster({{8500, 32768, 1, "G2"}, {8000, 32768, 1, "G2"}, {9500, 32768, 1, "G2"}});
  EXPECT_EQ(PlaceOnce("bestfit", c, Share(500, 4000)).placement->node, NodeIndex{0});
  const std::array<uint32_t, 3> rank{2, 1, 0};  // node 2 ranks first but scores less
  EXPECT_EQ(PlaceOnce("bestfit", c, Share(500, 4000), rank).placement->node, NodeIndex{1});
}

TEST(BestFitPolicyTest, BestFitGpu) {
  ClusterSnapshot c = MakeCluster({{8000, 32768, 3, "G2"}});
  ASSERT_TRUE(Occupy(c, 0, 1, 400).ok());  // {1000, 600, 1000}
  EXPECT_EQ(PlaceOnce("bestfit", c, Share(500)).placement, At(0, GpuBit(1)));
  EXPECT_EQ(PlaceOnce("bestfit", c, Whole(2)).placement, At(0, GpuBit(0) | GpuBit(2)));
}

// --- fgd ----------------------------------------------------------------------------------

TaskType Type(int64_t cpu, int32_t num_gpu, int64_t milli, double weight) {
  TaskType t;
  t.cpu = CpuMilli{cpu};
  t.num_gpu = num_gpu;
  t.gpu_milli = GpuMilli{milli};
  t.weight = weight;
  return t;
}

TEST(FgdPolicyTest, WorkedExampleFillsHalfUsedGpu) {
  // M = {700 milli, p = 1}. Node 0 (B): {1000, 1000}; node 1 (A): {1000, 500}. A 500-milli task:
  // A/GPU0 -> 37, A/GPU1 -> 62, B/GPU0 -> 37. FGD picks A, GPU1.
  const TargetWorkload w = TargetWorkload::FromTypes({Type(0, 1, 700, 1.0)});
  ClusterSnapshot c = MakeCluster({{32000, 65536, 2, "G2"}, {32000, 65536, 2, "G2"}});
  ASSERT_TRUE(Occupy(c, 1, 1, 500).ok());
  const PlacementDecision d = PlaceOnce("fgd", c, Share(500), {}, &w);
  EXPECT_EQ(d.placement, At(1, GpuBit(1)));
  EXPECT_EQ(d.feasible_nodes, 2u);
  // The same with A's half-used GPU first.
  ClusterSnapshot c2 = MakeCluster({{32000, 65536, 2, "G2"}, {32000, 65536, 2, "G2"}});
  ASSERT_TRUE(Occupy(c2, 1, 0, 500).ok());
  EXPECT_EQ(PlaceOnce("fgd", c2, Share(500), {}, &w).placement, At(1, GpuBit(0)));
}

TEST(FgdPolicyTest, TiesInsideNodeGoToLowestGpu) {
  // Every GPU choice on an empty node gives the same fragmentation: GPU0.
  const TargetWorkload w = TargetWorkload::FromTypes({Type(0, 1, 700, 1.0)});
  const ClusterSnapshot c = MakeCluster({{32000, 65536, 4, "G2"}});
  EXPECT_EQ(PlaceOnce("fgd", c, Share(500), {}, &w).placement, At(0, GpuBit(0)));
  EXPECT_EQ(PlaceOnce("fgd", c, Whole(2), {}, &w).placement, At(0, GpuBit(0) | GpuBit(1)));
}

TEST(FgdPolicyTest, CpuOnlyTaskAvoidsStarvingGpuTasksOfCpu) {
  // M = {A: 500 milli with 2000 CPU, p=0.5; B: CPU-only, p=0.5}. A 7000-CPU task on node 0
  // (8000 CPU, one free GPU) leaves 1000 CPU: A no longer fits, F 500 -> 1000, score 37.
  // Node 1 (16000 CPU) keeps room for A: F unchanged, score 50.
  const TargetWorkload w = TargetWorkload::FromTypes({Type(2000, 1, 500, 0.5), Type(1000, 0, 0, 0.5)});
  const ClusterSnapshot c = MakeCluster({{8000, 32768, 1, "G2"}, {16000, 32768, 1, "G2"}, {8000, 8192, 0, ""}});
  EXPECT_EQ(PlaceOnce("fgd", c, CpuOnly(7000), {}, &w).placement, At(1, 0));
  // The CPU-only node also scores 50 (no GPU, no fragment): the rank decides between 1 and 2.
  const std::array<uint32_t, 3> rank{0, 2, 1};
  EXPECT_EQ(PlaceOnce("fgd", c, CpuOnly(7000), rank, &w).placement, At(2, 0));
}

// --- random -------------------------------------------------------------------------------

TEST(RandomPolicyTest, WorkedExampleUniformIndexIntoFeasibleNodes) {
  // Feasible nodes {2, 5, 9} for a 2-GPU task; the pick is rng.Uniform(3) into that list.
  std::vector<testing::NodeArgs> args(10, {32000, 65536, 1, "T4"});
  for (int n : {2, 5, 9}) args[n].gpus = 2;
  const ClusterSnapshot c = MakeCluster(args);
  auto policy = Make("random");
  const uint32_t feasible[] = {2, 5, 9};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Rng rng(seed);
    Rng expected_rng(seed);
    PlacementContext ctx{.rng = &rng};
    const PlacementDecision d = policy->Place(c, Whole(2), ctx);
    EXPECT_EQ(d.feasible_nodes, 3u);
    EXPECT_EQ(d.placement, At(feasible[expected_rng.Uniform(3)], 0b11)) << "seed " << seed;
  }
}

TEST(RandomPolicyTest, OnlyFeasibleNodesRoughlyUniformly) {
  ClusterSnapshot c = MakeCluster({{32000, 65536, 2, "T4"}, {32000, 65536, 2, "T4"}, {1000, 65536, 2, "T4"},
                                   {32000, 65536, 2, "T4"}, {32000, 65536, 0, ""}});
  ASSERT_TRUE(Occupy(c, 3, 0, 900).ok());  // node 3: {100, 1000}
  ASSERT_TRUE(Occupy(c, 3, 1, 900).ok());  // node 3: {100, 100} -> cannot take 500
  auto policy = Make("random");
  Rng rng(3);
  PlacementContext ctx{.rng = &rng};
  std::map<uint32_t, int> nodes;
  std::map<GpuSet, int> gpus;
  const int draws = 3000;
  for (int i = 0; i < draws; ++i) {
    const PlacementDecision d = policy->Place(c, Share(500, 2000), ctx);
    ASSERT_TRUE(d.placement);
    EXPECT_EQ(d.feasible_nodes, 2u);
    ++nodes[d.placement->node.value()];
    ++gpus[d.placement->gpus];
  }
  ASSERT_EQ(nodes.size(), 2u);  // only nodes 0 and 1
  EXPECT_NEAR(nodes[0], draws / 2, 200);
  EXPECT_NEAR(nodes[1], draws / 2, 200);
  // The GPU is random among the fitting ones too.
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_NEAR(gpus[GpuBit(0)], draws / 2, 200);
}

TEST(RandomPolicyTest, DeterministicPerSeed) {
  const ClusterSnapshot c = MakeCluster(std::vector<testing::NodeArgs>(8, {32000, 65536, 4, "T4"}));
  auto sequence = [&](uint64_t seed) {
    auto policy = Make("random");
    Rng rng(seed);
    PlacementContext ctx{.rng = &rng};
    std::vector<Placement> out;
    for (int i = 0; i < 50; ++i) out.push_back(*policy->Place(c, Share(300), ctx).placement);
    return out;
  };
  EXPECT_EQ(sequence(11), sequence(11));
  EXPECT_NE(sequence(11), sequence(12));
}

TEST(RandomPolicyTest, NothingFeasible) {
  const ClusterSnapshot c = MakeCluster({{1000, 1024, 1, "T4"}});
  Rng rng(1);
  PlacementContext ctx{.rng = &rng};
  const PlacementDecision d = Make("random")->Place(c, Whole(2), ctx);
  EXPECT_FALSE(d.placement);
  EXPECT_EQ(d.feasible_nodes, 0u);
}

TEST(RandomPolicyTest, WorksWithoutCallerRng) {
  const ClusterSnapshot c = MakeCluster({{1000, 1024, 1, "T4"}, {1000, 1024, 2, "T4"}});
  PlacementContext ctx;
  auto policy = Make("random");
  for (int i = 0; i < 20; ++i) EXPECT_EQ(policy->Place(c, Whole(2), ctx).placement, At(1, 0b11));
}

// --- firstfit / nextfit / worstfit --------------------------------------------------------

TEST(FirstFitPolicyTest, FirstFeasibleNodeInRankOrder) {
  ClusterSnapshot c = MakeCluster(std::vector<testing::NodeArgs>(3, {8000, 8192, 2, "T4"}));
  EXPECT_EQ(PlaceOnce("firstfit", c, Whole(1)).placement, At(0, GpuBit(0)));
  const std::array<uint32_t, 3> rank{2, 0, 1};  // order: node 1, node 2, node 0
  EXPECT_EQ(PlaceOnce("firstfit", c, Whole(1), rank).placement, At(1, GpuBit(0)));
  ASSERT_TRUE(c.Apply(Whole(2), At(1, 0b11)).ok());
  EXPECT_EQ(PlaceOnce("firstfit", c, Whole(1), rank).placement, At(2, GpuBit(0)));
  const PlacementDecision d = PlaceOnce("firstfit", c, Whole(1));
  EXPECT_EQ(d.feasible_nodes, 2u);
}

TEST(FirstFitPolicyTest, LowestIndexGpuThatFits) {
  ClusterSnapshot c = MakeCluster({{8000, 8192, 3, "T4"}});
  ASSERT_TRUE(Occupy(c, 0, 0, 700).ok());  // {300, 1000, 600}
  ASSERT_TRUE(Occupy(c, 0, 2, 400).ok());
  EXPECT_EQ(PlaceOnce("firstfit", c, Share(250)).placement, At(0, GpuBit(0)));
  EXPECT_EQ(PlaceOnce("firstfit", c, Share(500)).placement, At(0, GpuBit(1)));
}

TEST(NextFitPolicyTest, StaysOnNodeThenMovesAndWraps) {
  ClusterSnapshot c = MakeCluster(std::vector<testing::NodeArgs>(3, {8000, 8192, 1, "T4"}));
  auto policy = Make("nextfit");
  PlacementContext ctx;
  auto place = [&](const TaskRequest& t) {
    const PlacementDecision d = policy->Place(c, t, ctx);
    EXPECT_TRUE(d.placement);
    if (!d.placement) return Placement{};
    EXPECT_TRUE(c.Apply(t, *d.placement).ok());
    return *d.placement;
  };
  EXPECT_EQ(place(Share(300)), At(0, GpuBit(0)));
  EXPECT_EQ(ctx.next_fit_cursor, NodeIndex{0});
  EXPECT_EQ(place(Share(300)), At(0, GpuBit(0)));  // still fits on node 0
  EXPECT_EQ(place(Share(300)), At(0, GpuBit(0)));  // 100 left
  EXPECT_EQ(place(Share(300)), At(1, GpuBit(0)));  // moves on
  EXPECT_EQ(ctx.next_fit_cursor, NodeIndex{1});
  EXPECT_EQ(place(Share(800)), At(2, GpuBit(0)));
  // Free node 0 again. The scan for a whole GPU starts at the cursor (node 2, 200 free) and
  // wraps around to node 0.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(c.Undo(Share(300), At(0, GpuBit(0))).ok());
  EXPECT_EQ(place(Whole(1)), At(0, GpuBit(0)));
  EXPECT_EQ(ctx.next_fit_cursor, NodeIndex{0});
  // Cursor on node 0; the next small task goes to node 1 (node 0 is full), not node 2.
  EXPECT_EQ(place(Share(100)), At(1, GpuBit(0)));
}

TEST(NextFitPolicyTest, WorkedExampleStartsAtPreviousNode) {
  // Nodes 0 and 2 feasible, previous decision on node 2: nextfit -> node 2, firstfit -> node 0.
  const ClusterSnapshot c = MakeCluster({{8000, 8192, 1, "T4"}, {8000, 8192, 0, ""}, {8000, 8192, 1, "T4"}});
  auto policy = Make("nextfit");
  PlacementContext ctx{.next_fit_cursor = NodeIndex{2}};
  const PlacementDecision d = policy->Place(c, Whole(1), ctx);
  EXPECT_EQ(d.placement, At(2, GpuBit(0)));
  EXPECT_EQ(d.feasible_nodes, 1u);  // nextfit stops at the first feasible node
  EXPECT_EQ(PlaceOnce("firstfit", c, Whole(1)).placement, At(0, GpuBit(0)));
}

TEST(NextFitPolicyTest, FollowsRankOrderAndIgnoresBadCursor) {
  const ClusterSnapshot c = MakeCluster(std::vector<testing::NodeArgs>(4, {8000, 8192, 1, "T4"}));
  auto policy = Make("nextfit");
  const std::array<uint32_t, 4> rank{3, 1, 0, 2};  // order: 2, 1, 3, 0
  PlacementContext ctx{.node_rank = rank};
  EXPECT_EQ(policy->Place(c, Whole(1), ctx).placement, At(2, GpuBit(0)));
  ctx.next_fit_cursor = NodeIndex{99};  // out of range: start from rank 0 again
  EXPECT_EQ(policy->Place(c, Whole(1), ctx).placement, At(2, GpuBit(0)));
  ctx.next_fit_cursor = NodeIndex{3};
  EXPECT_EQ(policy->Place(c, Whole(1), ctx).placement, At(3, GpuBit(0)));
}

TEST(NextFitPolicyTest, RankOrderWrapsAround) {
  ClusterSnapshot c = MakeCluster(std::vector<testing::NodeArgs>(3, {8000, 8192, 1, "T4"}));
  ASSERT_TRUE(Occupy(c, 0, 0, 1000).ok());
  auto policy = Make("nextfit");
  const std::array<uint32_t, 3> rank{1, 2, 0};  // order: 2, 0, 1
  PlacementContext ctx{.node_rank = rank, .next_fit_cursor = NodeIndex{0}};
  // From node 0 (rank 1): node 0 full, node 1 (rank 2) free.
  EXPECT_EQ(policy->Place(c, Whole(1), ctx).placement, At(1, GpuBit(0)));
  ASSERT_TRUE(Occupy(c, 1, 0, 1000).ok());
  // From node 1 (rank 2, the last): wraps to node 2 (rank 0).
  EXPECT_EQ(policy->Place(c, Whole(1), ctx).placement, At(2, GpuBit(0)));
  ASSERT_TRUE(Occupy(c, 2, 0, 1000).ok());
  const PlacementDecision none = policy->Place(c, Whole(1), ctx);
  EXPECT_FALSE(none.placement);
  EXPECT_EQ(none.feasible_nodes, 0u);
  EXPECT_EQ(ctx.next_fit_cursor, NodeIndex{2});  // unchanged by a failed decision
}

TEST(NextFitPolicyTest, FollowsRankChangedInPlace) {
  // A long-lived policy must follow the ranks the caller passes now, even when the caller
  // reuses its rank buffer (e.g. reshuffles it in place for the next seed).
  const ClusterSnapshot c = MakeCluster(std::vector<testing::NodeArgs>(3, {8000, 8192, 1, "T4"}));
  auto policy = Make("nextfit");
  std::vector<uint32_t> rank{0, 1, 2};
  PlacementContext ctx{.node_rank = rank};
  EXPECT_EQ(policy->Place(c, Whole(1), ctx).placement, At(0, GpuBit(0)));
  rank = {2, 0, 1};  // same buffer (assignment of equal size keeps the allocation)
  ASSERT_EQ(ctx.node_rank.data(), rank.data());
  PlacementContext old_policy_ctx{.node_rank = rank};
  const PlacementDecision d = policy->Place(c, Whole(1), old_policy_ctx);
  PlacementContext fresh_ctx{.node_rank = rank};
  const PlacementDecision expected = Make("nextfit")->Place(c, Whole(1), fresh_ctx);
  EXPECT_EQ(expected.placement, At(1, GpuBit(0)));
  EXPECT_EQ(d.placement, expected.placement);
}

TEST(WorstFitPolicyTest, RelativelyEmptierNodeWins) {
  // Node 0: 64000 CPU, 8 GPUs with 6 used: after a (500, 1000 CPU) task 63/64 CPU and
  // 1500/8000 GPU left -> 0.586. Node 1: 8000 CPU, 1 empty GPU: 7/8 and 500/1000 -> 0.6875.
  ClusterSnapshot c = MakeCluster({{64000, 262144, 8, "G2"}, {8000, 32768, 1, "G2"}});
  for (int g = 0; g < 6; ++g) ASSERT_TRUE(Occupy(c, 0, g, 1000).ok());
  EXPECT_EQ(PlaceOnce("worstfit", c, Share(500, 1000)).placement, At(1, GpuBit(0)));
}

TEST(WorstFitPolicyTest, SpreadsWhereBestFitPacks) {
  // Both empty. Node 0: 8000 CPU, 1 GPU -> (7/8 + 1/2) / 2 = 0.6875. Node 1: 64000 CPU, 8 GPUs
  // -> (63/64 + 7500/8000) / 2 = 0.96. worstfit spreads to node 1, bestfit packs into node 0.
  const ClusterSnapshot c = MakeCluster({{8000, 32768, 1, "G2"}, {64000, 262144, 8, "G2"}});
  EXPECT_EQ(PlaceOnce("worstfit", c, Share(500, 1000)).placement, At(1, GpuBit(0)));
  EXPECT_EQ(PlaceOnce("bestfit", c, Share(500, 1000)).placement, At(0, GpuBit(0)));
}

TEST(WorstFitPolicyTest, CpuOnlyNodesUseCpuTermOnly) {
  // CPU-only task of 2000: node 0 (CPU-only, 8000) -> 0.75; node 1 (8000 CPU, GPU fully used)
  // -> (0.75 + 0) / 2; node 2 (8000 CPU, GPU free) -> (0.75 + 1) / 2 = 0.875.
  ClusterSnapshot c = MakeCluster({{8000, 8192, 0, ""}, {8000, 8192, 1, "T4"}, {8000, 8192, 1, "T4"}});
  ASSERT_TRUE(Occupy(c, 1, 0, 1000).ok());
  EXPECT_EQ(PlaceOnce("worstfit", c, CpuOnly(2000)).placement, At(2, 0));
  ASSERT_TRUE(Occupy(c, 2, 0, 1000).ok());
  EXPECT_EQ(PlaceOnce("worstfit", c, CpuOnly(2000)).placement, At(0, 0));
}

TEST(WorstFitPolicyTest, MostFreeGpu) {
  ClusterSnapshot c = MakeCluster({{8000, 8192, 3, "T4"}});
  ASSERT_TRUE(Occupy(c, 0, 0, 700).ok());  // {300, 1000, 600}
  ASSERT_TRUE(Occupy(c, 0, 2, 400).ok());
  EXPECT_EQ(PlaceOnce("worstfit", c, Share(200)).placement, At(0, GpuBit(1)));
}

// --- shared behaviour of the scoring policies ---------------------------------------------

class ScoringTieBreakTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ScoringTieBreakTest, EqualNodesGoToLowestRank) {
  const TargetWorkload w = TargetWorkload::FromTypes({Type(0, 1, 500, 1.0)});
  const ClusterSnapshot c = MakeCluster(std::vector<testing::NodeArgs>(3, {8000, 8192, 2, "T4"}));
  for (const TaskRequest& t : {Share(300, 1000), Whole(1, 1000), CpuOnly(1000)}) {
    EXPECT_EQ(PlaceOnce(GetParam(), c, t, {}, &w).placement->node, NodeIndex{0});
    const std::array<uint32_t, 3> a{2, 0, 1};
    EXPECT_EQ(PlaceOnce(GetParam(), c, t, a, &w).placement->node, NodeIndex{1});
    const std::array<uint32_t, 3> b{1, 2, 0};
    EXPECT_EQ(PlaceOnce(GetParam(), c, t, b, &w).placement->node, NodeIndex{2});
  }
}

TEST_P(ScoringTieBreakTest, NoFeasibleNode) {
  const TargetWorkload w = TargetWorkload::FromTypes({Type(0, 1, 500, 1.0)});
  const ClusterSnapshot c = MakeCluster({{8000, 8192, 2, "T4"}, {8000, 8192, 0, ""}});
  const PlacementDecision d = PlaceOnce(GetParam(), c, Whole(3), {}, &w);
  EXPECT_FALSE(d.placement);
  EXPECT_EQ(d.feasible_nodes, 0u);
  EXPECT_FALSE(PlaceOnce(GetParam(), c, CpuOnly(8001), {}, &w).placement);
}

TEST_P(ScoringTieBreakTest, MemoryIsFilteredEvenWhenScoresAreCached) {
  // Scores are cached per task shape, which excludes memory; the memory filter must still
  // apply to every decision. Node 1 is tighter (wins for bestfit-like policies) or not; either
  // way a task that needs more memory than node X has must not land on X.
  const TargetWorkload w = TargetWorkload::FromTypes({Type(0, 1, 500, 1.0)});
  const ClusterSnapshot c = MakeCluster({{8000, 1024, 2, "T4"}, {8000, 65536, 2, "T4"}});
  auto policy = Make(GetParam(), &w);
  PlacementContext ctx;
  const PlacementDecision small = policy->Place(c, Share(300, 1000, 512), ctx);
  ASSERT_TRUE(small.placement);
  EXPECT_EQ(small.feasible_nodes, 2u);
  const PlacementDecision big = policy->Place(c, Share(300, 1000, 4096), ctx);
  ASSERT_TRUE(big.placement);
  EXPECT_EQ(big.placement->node, NodeIndex{1});
  EXPECT_EQ(big.feasible_nodes, 1u);
}

TEST_P(ScoringTieBreakTest, ManyDistinctShapesStayCorrect) {
  // More task shapes than the score cache holds (4096): decisions still match a fresh policy.
  const TargetWorkload w = TargetWorkload::FromTypes({Type(0, 1, 500, 1.0)});
  ClusterSnapshot c = MakeCluster({{8000, 8192, 2, "T4"}, {6000, 8192, 1, "G2"}});
  ASSERT_TRUE(Occupy(c, 0, 1, 300).ok());
  auto policy = Make(GetParam(), &w);
  PlacementContext ctx;
  for (int64_t cpu = 0; cpu < 4200; ++cpu) {
    const TaskRequest t = Share(100 + cpu % 900, cpu);
    const PlacementDecision d = policy->Place(c, t, ctx);
    PlacementContext fresh_ctx;
    const PlacementDecision e = Make(GetParam(), &w)->Place(c, t, fresh_ctx);
    ASSERT_EQ(d.placement, e.placement) << "cpu " << cpu;
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, ScoringTieBreakTest,
                         ::testing::Values("dotproduct", "gpuclustering", "gpupacking", "bestfit", "fgd",
                                           "firstfit", "worstfit"),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace tessera::placement
