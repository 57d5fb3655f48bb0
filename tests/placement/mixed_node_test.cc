// Mixed-model nodes (cluster_snapshot.h, "Mixed-model nodes"): a node of H100 and A100 GPUs takes
// a task on GPUs of one model the task allows, under every policy.
#include <bit>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/gpu_model.h"
#include "tessera/core/rng.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/fragmentation.h"
#include "tessera/placement/gpu_choice.h"
#include "tessera/placement/policy.h"
#include "tests/testing/builders.h"

namespace tessera::placement {
namespace {

using ::tessera::testing::Share;
using ::tessera::testing::Type;
using ::tessera::testing::Whole;

constexpr NodeIndex kN0{0};
constexpr GpuSet kH100Gpus = GpuBit(0) | GpuBit(1);
constexpr GpuSet kA100Gpus = GpuBit(2) | GpuBit(3) | GpuBit(4) | GpuBit(5);

GpuModelId Model(const char* name) { return *GpuModelCatalog::Builtin().Find(name); }

// The header's example: GPUs 0-1 H100-80GB, 2-5 A100-40GB.
NodeSpec MixedNode(std::string name = "mix") {
  const GpuModelId h100 = Model("H100-80GB");
  const GpuModelId a100 = Model("A100-40GB");
  NodeSpec n;
  n.name = std::move(name);
  n.cpu = CpuMilli{64000};
  n.memory = MiB{1 << 19};
  n.gpu_count = 6;
  n.model = h100;
  n.gpu_models = {h100, h100, a100, a100, a100, a100};
  return n;
}

TaskRequest Only(TaskRequest t, const char* model) {
  t.allowed_models = ModelBit(Model(model));
  return t;
}

TEST(MixedNodeTest, SnapshotGroupsTheGpusByModel) {
  const ClusterSnapshot c = *ClusterSnapshot::Create({MixedNode()});
  ASSERT_TRUE(c.mixed(kN0));
  ASSERT_EQ(c.model_groups(kN0).size(), 2u);
  EXPECT_EQ(c.model_groups(kN0)[0].gpus, kH100Gpus);
  EXPECT_EQ(c.model_groups(kN0)[1].gpus, kA100Gpus);
  EXPECT_EQ(c.ModelGpus(kN0, ModelBit(Model("A100-40GB"))), kA100Gpus);
  EXPECT_EQ(c.ModelGpus(kN0, 0), kH100Gpus | kA100Gpus);
  EXPECT_EQ(c.ModelGpus(kN0, ModelBit(Model("T4"))), 0u);
  EXPECT_EQ(c.model_bit(kN0), ModelBit(Model("H100-80GB")) | ModelBit(Model("A100-40GB")));
}

TEST(MixedNodeTest, AnA100AskFitsOnlyOnTheA100GpusAndApplyRefusesAnH100) {
  ClusterSnapshot c = *ClusterSnapshot::Create({MixedNode()});
  const TaskRequest a100 = Only(Whole(1), "A100-40GB");
  EXPECT_TRUE(c.Fits(kN0, a100));
  EXPECT_FALSE(c.Fits(kN0, a100, kH100Gpus));
  EXPECT_EQ(ChooseGpus(c, kN0, a100, SharingGpuRule::kFirst, nullptr), GpuBit(2));
  EXPECT_EQ(ChooseGpus(c, kN0, Only(Share(300), "A100-40GB"), SharingGpuRule::kFirst, nullptr), GpuBit(2));
  const Status wrong = c.Apply(a100, {kN0, GpuBit(0)});
  EXPECT_EQ(wrong.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(wrong.message().find("a model the task does not allow"), std::string::npos) << wrong.message();
  EXPECT_TRUE(c.Apply(a100, {kN0, GpuBit(3)}).ok());
  // Five A100s are more than the node has; three H100s too.
  EXPECT_FALSE(c.Fits(kN0, Only(Whole(5), "A100-40GB")));
  EXPECT_FALSE(c.Fits(kN0, Only(Whole(3), "H100-80GB")));
}

TEST(MixedNodeTest, ATwoGpuAskIsNeverSplitAcrossModels) {
  ClusterSnapshot c = *ClusterSnapshot::Create({MixedNode()});
  ASSERT_TRUE(c.Apply(Whole(1), {kN0, GpuBit(0)}).ok());  // one H100 left
  // The header's example: {2,3}, never {1,2}.
  EXPECT_EQ(ChooseGpus(c, kN0, Whole(2), SharingGpuRule::kFirst, nullptr), GpuBit(2) | GpuBit(3));
  const Status split = c.Apply(Whole(2), {kN0, GpuBit(1) | GpuBit(2)});
  EXPECT_EQ(split.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(split.message().find("GPUs of several models"), std::string::npos) << split.message();
  // Three A100s taken: one H100 and one A100 are free, two GPUs in all, but of two models.
  for (int g : {2, 3, 4}) ASSERT_TRUE(c.Apply(Whole(1), {kN0, GpuBit(g)}).ok());
  EXPECT_FALSE(c.Fits(kN0, Whole(2)));
  EXPECT_TRUE(c.Fits(kN0, Whole(1)));
}

TEST(MixedNodeTest, EveryPolicyKeepsEachTaskOnGpusOfOneAllowedModel) {
  // Two mixed nodes and an ordinary A100 node; a random stream asking H100, A100 or any model.
  const GpuModelId a100 = Model("A100-40GB");
  NodeSpec plain{"a100", CpuMilli{64000}, MiB{1 << 19}, 4, a100};
  const TargetWorkload workload = TargetWorkload::FromTypes(
      {Type(1000, 1, 500, 0.5), Type(1000, 2, 1000, 0.3), Type(1000, 1, 1000, 0.2, ModelBit(a100))});
  for (const std::string& name : PolicyNames()) {
    SCOPED_TRACE(name);
    ClusterSnapshot c = *ClusterSnapshot::Create({MixedNode("m0"), plain, MixedNode("m1")});
    auto policy = MakePolicy(name, {.target_workload = &workload});
    ASSERT_TRUE(policy.ok()) << policy.status().ToString();
    Rng rng(7);
    PlacementContext ctx{.rng = &rng};
    int placed = 0;
    int multi = 0;
    for (int i = 0; i < 60; ++i) {
      TaskRequest t = rng.Uniform(3) == 0 ? Share(250 * static_cast<int64_t>(1 + rng.Uniform(3)), 1000)
                                          : Whole(1 + static_cast<int>(rng.Uniform(2)), 1000);
      const uint64_t which = rng.Uniform(3);
      if (which == 1) t = Only(t, "H100-80GB");
      if (which == 2) t = Only(t, "A100-40GB");
      const PlacementDecision d = (*policy)->Place(c, t, ctx);
      if (!d.placement) continue;
      // Each GPU's model from the spec, not from the snapshot's own grouping.
      ModelMask models = 0;
      for (int g = 0; g < kMaxGpusPerNode; ++g)
        if (d.placement->gpus & GpuBit(g)) models |= ModelBit(GpuModelOf(c.spec(d.placement->node), g));
      EXPECT_EQ(std::popcount(models), 1) << "task " << i << " took GPUs of several models";
      EXPECT_TRUE(t.AllowsModel(models)) << "task " << i;
      ASSERT_TRUE(c.Apply(t, *d.placement).ok()) << "task " << i;
      ++placed;
      multi += std::popcount(d.placement->gpus) > 1;
    }
    EXPECT_GT(placed, 10);
    EXPECT_GT(multi, 0);
  }
}

TEST(MixedNodeTest, FragmentationSumsTheModelGroups) {
  // fragmentation.h: GPUs {H100 500, A100 1000, A100 300}, M = {A100-only 1-GPU task of 1000}:
  // F = 500 (no H100 takes it) + 300 = 800.
  const GpuModelId h100 = Model("H100-80GB");
  const GpuModelId a100 = Model("A100-40GB");
  NodeSpec n{"mix", CpuMilli{8000}, MiB{1 << 16}, 3, h100};
  n.gpu_models = {h100, a100, a100};
  ClusterSnapshot c = *ClusterSnapshot::Create({n});
  ASSERT_TRUE(c.Apply(Share(500), {kN0, GpuBit(0)}).ok());
  ASSERT_TRUE(c.Apply(Share(700), {kN0, GpuBit(2)}).ok());
  const TargetWorkload workload = TargetWorkload::FromTypes({Type(0, 1, 1000, 1.0, ModelBit(a100))});
  FragmentationMemo memo(&workload);
  EXPECT_DOUBLE_EQ(memo.OfNode(c, kN0), 800.0);
}

TEST(MixedNodeTest, SnapshotRefusesAMixedNodeInMigModeAndABadModelList) {
  NodeSpec mig = MixedNode();
  mig.mig = std::make_shared<const MigGeometry>(*GpuModelCatalog::Builtin().info(Model("H100-80GB")).mig);
  const StatusOr<ClusterSnapshot> refused = ClusterSnapshot::Create({mig});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cannot be in MIG mode"), std::string::npos);
  NodeSpec short_list = MixedNode();
  short_list.gpu_models.pop_back();
  const StatusOr<ClusterSnapshot> bad = ClusterSnapshot::Create({short_list});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gpu_models has 5 models for 6 GPUs"), std::string::npos);
  // One model listed per GPU, all the same: an ordinary node.
  NodeSpec same = MixedNode();
  same.gpu_models.assign(6, same.model);
  EXPECT_FALSE(ClusterSnapshot::Create({same})->mixed(kN0));
}

}  // namespace
}  // namespace tessera::placement
