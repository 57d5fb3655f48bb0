// The `tessera` policy on the worked examples of src/placement/tessera_policy.cc.
#include <array>
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
using ::tessera::testing::Models;
using ::tessera::testing::Whole;

PlacementDecision PlaceOnce(std::string_view name, const ClusterSnapshot& c, const TaskRequest& t,
                            std::span<const uint32_t> rank, const TargetWorkload& workload,
                            TesseraOptions options = {}) {
  auto policy = MakePolicy(name, {.target_workload = &workload, .tessera = options});
  EXPECT_TRUE(policy.ok()) << policy.status().ToString();
  if (!policy.ok()) return {};
  Rng rng(1);
  PlacementContext ctx{.rng = &rng, .node_rank = rank};
  return (*policy)->Place(c, t, ctx);
}

using ::tessera::testing::Type;

// rho = 10.5 vCPU per GPU: one GPU type (1 GPU, 10.5 vCPU) and one CPU-only type.
TargetWorkload CpuStrandingWorkload() {
  return TargetWorkload::FromTypes({Type(10500, 1, 1000, 0.5), Type(40000, 0, 0, 0.5)});
}

TEST(TesseraPolicyTest, CpuOnlyTaskGoesToTheCpuRichNode) {
  // Node A (96 vCPU, 8 GPUs) would keep 56 vCPU for 8 GPUs: 2.67 GPUs without CPU. Node B
  // (104 vCPU, 2 GPUs) keeps plenty. A has the better rank, so rank alone would pick A.
  const ClusterSnapshot c = MakeCluster({{96000, 393216, 8, "G2"}, {104000, 524288, 2, "T4"}});
  const TargetWorkload w = CpuStrandingWorkload();
  const std::array<uint32_t, 2> rank{0, 1};
  const PlacementDecision d = PlaceOnce("tessera", c, CpuOnly(40000), rank, w);
  ASSERT_TRUE(d.placement);
  EXPECT_EQ(d.placement->node, NodeIndex{1});
  EXPECT_EQ(d.placement->gpus, 0u);
  // FGD sees no fragmentation change on either node and follows the rank.
  EXPECT_EQ(PlaceOnce("fgd", c, CpuOnly(40000), rank, w).placement->node, NodeIndex{0});
  // With the stranding term switched off tessera behaves like FGD here.
  EXPECT_EQ(PlaceOnce("tessera", c, CpuOnly(40000), rank, w, {.stranding_weight = 0}).placement->node,
            NodeIndex{0});
}

TEST(TesseraPolicyTest, NoStrandingPenaltyWhileCpuSuffices) {
  // A 10-vCPU task leaves both nodes with enough CPU for their GPUs: rank decides as in FGD.
  const ClusterSnapshot c = MakeCluster({{96000, 393216, 8, "G2"}, {104000, 524288, 2, "T4"}});
  const TargetWorkload w = CpuStrandingWorkload();
  const std::array<uint32_t, 2> rank{1, 0};
  EXPECT_EQ(PlaceOnce("tessera", c, CpuOnly(10000), rank, w).placement->node, NodeIndex{1});
  const std::array<uint32_t, 2> rank2{0, 1};
  EXPECT_EQ(PlaceOnce("tessera", c, CpuOnly(10000), rank2, w).placement->node, NodeIndex{0});
}

TEST(TesseraPolicyTest, UnrestrictedTaskLeavesScarceModelToRestrictedDemand) {
  // 2 % of the expected GPU demand may only run on T4, which is 2 of the cluster's 10 GPUs:
  // P(T4) = 0.02 * 10/2 = 0.1 -> an unrestricted GPU on T4 costs 100 milli (score 47); on G2
  // nothing (FGD's own term gives G2 only 20 milli, which truncates to the same score 50 as T4,
  // so without the scarcity term the rank decides).
  const ClusterSnapshot c = MakeCluster({{104000, 524288, 2, "T4"}, {96000, 393216, 8, "G2"}});
  const TargetWorkload w =
      TargetWorkload::FromTypes({Type(4000, 1, 1000, 0.02, Models("T4")), Type(4000, 1, 1000, 0.98)});
  const std::array<uint32_t, 2> rank{0, 1};  // the T4 node is first in rank order
  const PlacementDecision d = PlaceOnce("tessera", c, Whole(1, 4000), rank, w);
  ASSERT_TRUE(d.placement);
  EXPECT_EQ(d.placement->node, NodeIndex{1});
  // Without the scarcity term the rank decides (nothing else tells the two nodes apart).
  EXPECT_EQ(PlaceOnce("tessera", c, Whole(1, 4000), rank, w, {.scarcity_weight = 0}).placement->node,
            NodeIndex{0});
  // A T4-restricted task still goes to the T4 node: it is the only feasible one.
  TaskRequest restricted = Whole(1, 4000);
  restricted.allowed_models = Models("T4");
  EXPECT_EQ(PlaceOnce("tessera", c, restricted, rank, w).placement->node, NodeIndex{0});
}

TEST(TesseraPolicyTest, RestrictedTaskPicksTheLeastContendedAllowedModel) {
  // Most tasks may run on V100M16 or V100M32; 2 % may only run on V100M16. P(M16) = 0.02 * 8/4
  // + 0.98 * 8/8 = 1.02, P(M32) = 0.98: a task allowed on both should take V100M32 (score 27
  // vs 26) and leave V100M16 to the narrower type; without the term both score 50 and the rank
  // picks V100M16.
  const ClusterSnapshot c = MakeCluster({{64000, 262144, 4, "V100M16"}, {64000, 262144, 4, "V100M32"}});
  const TargetWorkload w = TargetWorkload::FromTypes(
      {Type(4000, 1, 1000, 0.02, Models("V100M16")), Type(4000, 1, 1000, 0.98, Models("V100M16|V100M32"))});
  TaskRequest t = Whole(1, 4000);
  t.allowed_models = Models("V100M16|V100M32");
  const std::array<uint32_t, 2> rank{0, 1};
  EXPECT_EQ(PlaceOnce("tessera", c, t, rank, w).placement->node, NodeIndex{1});
  EXPECT_EQ(PlaceOnce("tessera", c, t, rank, w, {.scarcity_weight = 0}).placement->node, NodeIndex{0});
}

TEST(TesseraPolicyTest, IsTheDefaultPolicy) {
  EXPECT_EQ(DefaultPolicyName(), "tessera");
  EXPECT_EQ(PolicyNames().front(), "tessera");
}

TEST(TesseraPolicyTest, NeedsATargetWorkload) {
  EXPECT_EQ(MakePolicy("tessera", {}).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::placement
