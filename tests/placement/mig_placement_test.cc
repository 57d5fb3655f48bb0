// MIG GPUs in the placement engine: snapshot rules and exact Apply/Undo of MIG instances, the
// filter against partition::ValidateLayout, and the MIG-geometry scoring (mig.h's worked
// example).
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/core/gpu_model.h"
#include "tessera/core/rng.h"
#include "tessera/partition/mig_layout.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/fragmentation.h"
#include "tessera/placement/mig.h"
#include "tessera/placement/policy.h"
#include "tests/testing/builders.h"
#include "tests/testing/snapshot_checks.h"

namespace tessera::placement {
namespace {

using ::testing::HasSubstr;
using ::tessera::testing::CheckInvariants;
using ::tessera::testing::FreeState;

const GpuModelCatalog& Catalog() { return GpuModelCatalog::Builtin(); }
GpuModelId Id(const std::string& name) { return *Catalog().Find(name); }
std::shared_ptr<const MigGeometry> Geo(const std::string& name) {
  return std::make_shared<const MigGeometry>(*Catalog().info(Id(name)).mig);
}

NodeSpec MigNode(const std::string& model, int gpus, std::vector<partition::MigLayout> in_use = {},
                 int64_t cpu = 64000) {
  return {"mig-" + model, CpuMilli{cpu}, MiB{1 << 20}, gpus, Id(model), Geo(model), std::move(in_use)};
}

TaskRequest Req(const std::string& model, const std::string& profile, int64_t cpu = 0) {
  return *MigRequest(Id(model), *Geo(model), profile, CpuMilli{cpu});
}

int ProfileIndex(const std::string& model, const std::string& profile) {
  return *partition::FindProfileIndex(*Geo(model), profile);
}

// Per node, per GPU, the formatted layout: with FreeState, the whole observable MIG state.
std::vector<std::string> Layouts(const ClusterSnapshot& c) {
  std::vector<std::string> out;
  for (uint32_t i = 0; i < c.node_count(); ++i) {
    const NodeIndex n{i};
    for (int g = 0; g < c.gpu_count(n); ++g) {
      out.push_back(c.mig_mode(n) ? partition::FormatLayout(*c.mig_geometry(n), c.mig_layout(n, g)) : "-");
    }
  }
  return out;
}

// Every MIG GPU's layout passes the model's rules.
::testing::AssertionResult AllLayoutsValid(const ClusterSnapshot& c) {
  for (uint32_t i = 0; i < c.node_count(); ++i) {
    const NodeIndex n{i};
    if (!c.mig_mode(n)) continue;
    for (int g = 0; g < c.gpu_count(n); ++g) {
      if (Status s = partition::ValidateLayout(*c.mig_geometry(n), c.mig_layout(n, g)); !s.ok()) {
        return ::testing::AssertionFailure() << "node " << i << " GPU " << g << ": " << s.message();
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(MigRequestTest, NamesAProfileOfOneModel) {
  const TaskRequest t = Req("H100-80GB", "3g.40gb", 2000);
  EXPECT_TRUE(t.IsMig());
  EXPECT_FALSE(t.IsSharing());
  EXPECT_FALSE(t.IsWholeGpu());
  EXPECT_EQ(t.mig_profile, ProfileIndex("H100-80GB", "3g.40gb"));
  EXPECT_EQ(t.gpu_milli, GpuMilli{500});  // 4 of 8 memory slices
  EXPECT_EQ(Req("H100-80GB", "7g.80gb").gpu_milli, GpuMilli{1000});
  EXPECT_FALSE(Req("H100-80GB", "7g.80gb").IsWholeGpu());
  EXPECT_EQ(Req("A30-24GB", "1g.6gb").gpu_milli, GpuMilli{250});
  EXPECT_EQ(t.allowed_models, ModelBit(Id("H100-80GB")));
  EXPECT_TRUE(ValidateTask(t).ok());
  EXPECT_EQ(TaskTag(t), kShareTag);

  const auto bad = MigRequest(Id("H100-80GB"), *Geo("H100-80GB"), "5g.50gb");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown MIG profile '5g.50gb'"));
}

TEST(MigRequestTest, ValidateTaskNamesTheField) {
  TaskRequest t = Req("H100-80GB", "1g.10gb");
  t.allowed_models = 0;
  EXPECT_THAT(ValidateTask(t).message(), HasSubstr("allowed_models: a MIG request must name exactly one GPU model"));
  t = Req("H100-80GB", "1g.10gb");
  t.num_gpu = 2;
  EXPECT_THAT(ValidateTask(t).message(), HasSubstr("num_gpu: a MIG request asks for one instance"));
  t = Req("H100-80GB", "1g.10gb");
  t.num_gpu = 0;
  t.gpu_milli = GpuMilli{0};
  EXPECT_THAT(ValidateTask(t).message(), HasSubstr("num_gpu: a MIG request asks for one instance"));
  t = Req("H100-80GB", "1g.10gb");
  t.mig_profile = -3;
  EXPECT_THAT(ValidateTask(t).message(), HasSubstr("mig_profile: -3"));
}

// Issue 32: a node whose agent may not reconfigure MIG takes MIG work only on the free instances
// that exist (the header's example).
TEST(MigSnapshotTest, AFixedLayoutTakesMigRequestsOnlyOnItsFreeInstances) {
  const int three_g = ProfileIndex("H100-80GB", "3g.40gb");
  const int one_g = ProfileIndex("H100-80GB", "1g.10gb");
  const int two_g = ProfileIndex("H100-80GB", "2g.20gb");
  NodeSpec n = MigNode("H100-80GB", 2);
  n.mig_fixed = {{{three_g, 0}, {one_g, 4}}, {}};
  auto snap = ClusterSnapshot::Create({n});
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_EQ(snap->mig_valid_starts(NodeIndex{0}, 0, three_g), 0b1u);
  EXPECT_EQ(snap->mig_valid_starts(NodeIndex{0}, 0, one_g), 0b10000u);
  EXPECT_EQ(snap->mig_valid_starts(NodeIndex{0}, 0, two_g), 0u);
  EXPECT_EQ(snap->mig_valid_starts(NodeIndex{0}, 1, one_g), 0u);  // GPU 1 has no instance at all
  ASSERT_TRUE(snap->Apply(Req("H100-80GB", "3g.40gb"), Placement{NodeIndex{0}, GpuBit(0), 0}).ok());
  EXPECT_EQ(snap->mig_valid_starts(NodeIndex{0}, 0, three_g), 0u);  // taken
  EXPECT_FALSE(snap->Apply(Req("H100-80GB", "1g.10gb"), Placement{NodeIndex{0}, GpuBit(0), 5}).ok());
  EXPECT_TRUE(snap->Apply(Req("H100-80GB", "1g.10gb"), Placement{NodeIndex{0}, GpuBit(0), 4}).ok());
  n.mig_fixed = {{{three_g, 0}}};
  auto count = ClusterSnapshot::Create({n});
  ASSERT_FALSE(count.ok());
  EXPECT_THAT(count.status().message(), HasSubstr("mig_fixed has 1 layouts for 2 GPUs"));
}

TEST(MigSnapshotTest, CreateValidatesMigNodes) {
  // In-use instances are validated against the model's rules; the message names node, GPU, rule.
  const int four_g = ProfileIndex("H100-80GB", "4g.40gb");
  auto bad = ClusterSnapshot::Create({MigNode("H100-80GB", 2, {{}, {{four_g, 4}}})});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("GPU 1: rule 2 (valid placement)"));
  auto count = ClusterSnapshot::Create({MigNode("H100-80GB", 2, {{}})});
  ASSERT_FALSE(count.ok());
  EXPECT_THAT(count.status().message(), HasSubstr("mig_in_use has 1 layouts for 2 GPUs"));
  NodeSpec no_geo = MigNode("H100-80GB", 1, {{}});
  no_geo.mig = nullptr;
  auto missing = ClusterSnapshot::Create({no_geo});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no MIG geometry"));
  auto big = std::make_shared<MigGeometry>(*Geo("H100-80GB"));
  big->memory_slices = 16;
  NodeSpec n16 = MigNode("H100-80GB", 1);
  n16.mig = big;
  auto too_many = ClusterSnapshot::Create({n16});
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.status().message(), HasSubstr("16 memory slices"));

  // Valid in-use instances count as allocated.
  const int three_g = ProfileIndex("H100-80GB", "3g.40gb");
  auto ok = ClusterSnapshot::Create({MigNode("H100-80GB", 2, {{{three_g, 0}}, {}})});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->gpu_free(NodeIndex{0}, 0), 500);
  EXPECT_EQ(ok->allocated_gpu(), GpuMilli{500});
  EXPECT_EQ(ok->mig_used_slices(NodeIndex{0}, 0), 0x0Fu);
  EXPECT_TRUE(CheckInvariants(*ok));
}

TEST(MigSnapshotTest, MigAndNonMigRequestsKeepToTheirGpus) {
  auto c = *ClusterSnapshot::Create(
      {MigNode("H100-80GB", 2), {"plain", CpuMilli{64000}, MiB{1 << 20}, 2, Id("H100-80GB")}});
  const NodeIndex mig{0}, plain{1};
  const TaskRequest m = Req("H100-80GB", "1g.10gb");
  EXPECT_TRUE(c.Fits(mig, m));
  EXPECT_FALSE(c.Fits(plain, m));
  EXPECT_FALSE(c.Fits(mig, ::tessera::testing::Share(125)));
  EXPECT_FALSE(c.Fits(mig, ::tessera::testing::Whole(1)));
  EXPECT_TRUE(c.Fits(plain, ::tessera::testing::Share(125)));
  EXPECT_TRUE(c.Fits(mig, ::tessera::testing::CpuOnly(1000)));
  // A request for another model's profile does not fit.
  EXPECT_FALSE(c.Fits(mig, Req("A100-80GB", "1g.10gb")));
  // Policies agree: a share never lands on the MIG node.
  const TargetWorkload w = TargetWorkload::FromTasks(std::vector<TaskRequest>{m, ::tessera::testing::Share(125)});
  for (const std::string& name : PolicyNames()) {
    auto policy = *MakePolicy(name, {.target_workload = &w});
    Rng rng(1);
    PlacementContext ctx{.rng = &rng};
    const PlacementDecision d1 = policy->Place(c, ::tessera::testing::Share(125), ctx);
    ASSERT_TRUE(d1.placement) << name;
    EXPECT_EQ(d1.placement->node, plain) << name;
    const PlacementDecision d2 = policy->Place(c, m, ctx);
    ASSERT_TRUE(d2.placement) << name;
    EXPECT_EQ(d2.placement->node, mig) << name;
    EXPECT_GE(d2.placement->mig_start, 0) << name;
  }
}

TEST(MigSnapshotTest, ApplyRejectsInvalidStartsAndUndoIsExact) {
  auto c = *ClusterSnapshot::Create({MigNode("H100-80GB", 1)});
  const NodeIndex n{0};
  const TaskRequest one = Req("H100-80GB", "1g.10gb");
  const TaskRequest two = Req("H100-80GB", "2g.20gb");
  const TaskRequest four = Req("H100-80GB", "4g.40gb");
  EXPECT_THAT(c.Apply(four, {n, GpuBit(0), 4}).message(), HasSubstr("4g.40gb@4 is not a valid placement"));
  EXPECT_THAT(c.Apply(one, {n, GpuBit(0), -1}).message(), HasSubstr("1g.10gb@-1 is not a valid placement"));
  TaskRequest wrong = one;
  wrong.gpu_milli = GpuMilli{100};
  EXPECT_THAT(c.Apply(wrong, {n, GpuBit(0), 0}).message(), HasSubstr("must carry gpu_milli 125"));
  ASSERT_TRUE(c.Apply(one, {n, GpuBit(0), 0}).ok());
  ASSERT_TRUE(c.Apply(one, {n, GpuBit(0), 1}).ok());
  EXPECT_THAT(c.Apply(two, {n, GpuBit(0), 0}).message(), HasSubstr("not a valid placement"));
  EXPECT_EQ(c.gpu_free(n, 0), 750);
  EXPECT_EQ(c.mig_valid_starts(n, 0, four.mig_profile), 0u);  // slices 0-1 taken
  // Same slices, other instances: Undo refuses anything but the instance that is there.
  EXPECT_FALSE(c.Undo(two, {n, GpuBit(0), 0}).ok());
  EXPECT_FALSE(c.Undo(one, {n, GpuBit(0), 2}).ok());
  EXPECT_FALSE(c.Undo(::tessera::testing::Share(125), {n, GpuBit(0)}).ok());
  ASSERT_TRUE(c.Undo(one, {n, GpuBit(0), 1}).ok());
  EXPECT_FALSE(c.Undo(one, {n, GpuBit(0), 1}).ok());
  ASSERT_TRUE(c.Undo(one, {n, GpuBit(0), 0}).ok());
  EXPECT_EQ(c.gpu_free(n, 0), 1000);
  EXPECT_EQ(c.allocated_gpu(), GpuMilli{0});
  EXPECT_EQ(c.mig_valid_starts(n, 0, four.mig_profile), 1u);
}

// The filter offers exactly the starts ValidateLayout accepts, in random reachable states of
// every MIG model, for every profile (media extensions included).
TEST(MigSnapshotTest, ValidStartsAgreeWithValidateLayout) {
  int checked = 0, offered = 0;
  for (const char* model : {"A30-24GB", "A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "B200-180GB"}) {
    auto c = *ClusterSnapshot::Create({MigNode(model, 4)});
    const NodeIndex n{0};
    const MigGeometry& g = *c.mig_geometry(n);
    Rng rng(7);
    for (int step = 0; step < 60; ++step) {
      for (int k = 0; k < 4; ++k) {
        const partition::MigLayout layout = c.mig_layout(n, k);
        ASSERT_TRUE(partition::ValidateLayout(g, layout).ok());
        for (int p = 0; p < static_cast<int>(g.profiles.size()); ++p) {
          const uint32_t starts = c.mig_valid_starts(n, k, p);
          for (int s = 0; s < kMaxMigSlices; ++s) {
            partition::MigLayout with = layout;
            with.push_back({p, s});
            const bool valid = partition::ValidateLayout(g, with).ok();
            EXPECT_EQ(((starts >> s) & 1u) != 0, valid) << model << " " << partition::FormatLayout(g, layout)
                                                        << " + " << g.profiles[static_cast<size_t>(p)].name << "@" << s;
            ++checked;
            offered += valid;
          }
        }
      }
      // Move to another state: add a random valid instance, or (1 in 4, or when full) remove one.
      const int k = static_cast<int>(rng.Uniform(4));
      const int p = static_cast<int>(rng.Uniform(g.profiles.size()));
      const uint32_t starts = c.mig_valid_starts(n, k, p);
      const partition::MigLayout layout = c.mig_layout(n, k);
      if ((starts == 0 || rng.Uniform(4) == 0) && !layout.empty()) {
        const partition::MigInstance victim = layout[rng.Uniform(layout.size())];
        TaskRequest t = *MigRequest(Id(model), g, g.profiles[static_cast<size_t>(victim.profile)].name);
        ASSERT_TRUE(c.Undo(t, {n, GpuBit(k), victim.start}).ok());
      } else if (starts != 0) {
        TaskRequest t = *MigRequest(Id(model), g, g.profiles[static_cast<size_t>(p)].name);
        ASSERT_TRUE(c.Apply(t, {n, GpuBit(k), LowestMigStart(c, n, k, p)}).ok());
      }
    }
  }
  EXPECT_GT(checked, 10000);
  EXPECT_GT(offered, 500);
}

// Worked example of mig.h: H100, M = {1g.10gb 0.5, 4g.40gb 0.5}, GPU0 = 3g.40gb@0, GPU1 empty.
TEST(MigFragmentationTest, WorkedExamplePicksTheSlotThatKeepsDemandPlaceable) {
  const int three_g = ProfileIndex("H100-80GB", "3g.40gb");
  const TaskRequest one = Req("H100-80GB", "1g.10gb");
  const TaskRequest four = Req("H100-80GB", "4g.40gb");
  const TargetWorkload w = TargetWorkload::FromTasks(std::vector<TaskRequest>{one, four});
  ASSERT_EQ(w.types().size(), 2u);
  const MigFragmentation frag(&w);

  auto c = *ClusterSnapshot::Create({MigNode("H100-80GB", 2, {{{three_g, 0}}, {}})});
  const NodeIndex n{0};
  EXPECT_DOUBLE_EQ(frag.OfNode(c, n), 250.0);
  const MigFragmentation::Choice best = frag.Best(c, n, one);
  EXPECT_EQ(best.gpu, 0);
  EXPECT_EQ(best.start, 4);
  EXPECT_DOUBLE_EQ(best.delta, -62.5);
  // The alternatives of the example, applied and measured.
  auto delta_at = [&](int gpu, int start) {
    ClusterSnapshot copy = c;
    EXPECT_TRUE(copy.Apply(one, {n, GpuBit(gpu), start}).ok());
    return frag.OfNode(copy, n) - 250.0;
  };
  EXPECT_DOUBLE_EQ(delta_at(1, 0), 437.5);
  EXPECT_DOUBLE_EQ(delta_at(1, 3), 437.5);
  EXPECT_DOUBLE_EQ(delta_at(1, 4), 0.0);
  EXPECT_DOUBLE_EQ(delta_at(0, 6), -62.5);

  // FGD and tessera make that choice through the engine; first fit takes the same slot here.
  for (const char* name : {"fgd", "tessera"}) {
    auto policy = *MakePolicy(name, {.target_workload = &w});
    PlacementContext ctx;
    const PlacementDecision d = policy->Place(c, one, ctx);
    ASSERT_TRUE(d.placement) << name;
    EXPECT_EQ(*d.placement, (Placement{n, GpuBit(0), 4})) << name;
  }

  // One empty GPU: milli-GPU cannot tell start 0 from 4; MIG geometry keeps 4g.40gb@0 open.
  auto empty = *ClusterSnapshot::Create({MigNode("H100-80GB", 1)});
  auto fgd = *MakePolicy("fgd", {.target_workload = &w});
  auto firstfit = *MakePolicy("firstfit", {.target_workload = &w});
  PlacementContext ctx;
  const PlacementDecision by_fgd = fgd->Place(empty, one, ctx);
  const PlacementDecision by_ff = firstfit->Place(empty, one, ctx);
  ASSERT_TRUE(by_fgd.placement && by_ff.placement);
  EXPECT_EQ(by_fgd.placement->mig_start, 4);
  EXPECT_EQ(by_ff.placement->mig_start, 0);
  ASSERT_TRUE(empty.Apply(one, *by_fgd.placement).ok());
  EXPECT_TRUE(empty.Fits(NodeIndex{0}, four));
  ClusterSnapshot other = *ClusterSnapshot::Create({MigNode("H100-80GB", 1)});
  ASSERT_TRUE(other.Apply(one, *by_ff.placement).ok());
  EXPECT_FALSE(other.Fits(NodeIndex{0}, four));
}

TEST(MigFragmentationTest, ScoreOrdersByDeltaThenFullerGpu) {
  EXPECT_GT(MigFragmentation::Score(-62.5, 500), MigFragmentation::Score(0.0, 125));
  EXPECT_GT(MigFragmentation::Score(0.0, 500), MigFragmentation::Score(0.0, 1000));
  EXPECT_EQ(MigFragmentation::Score(0.0, 500), MigFragmentation::Score(1e-9, 500));
}

TEST(MigFragmentationTest, MigTypesNeverFitNonMigGpusInFgdMeasure) {
  const TaskRequest one = Req("H100-80GB", "1g.10gb");
  const TargetWorkload w = TargetWorkload::FromTasks(std::vector<TaskRequest>{one});
  ASSERT_EQ(w.types().size(), 1u);
  EXPECT_EQ(w.types()[0].mig_profile, one.mig_profile);
  const std::vector<int32_t> free = {1000, 1000};
  // A plain H100 node: the MIG type cannot use any of it.
  EXPECT_DOUBLE_EQ(NodeFragmentation(w, ModelBit(Id("H100-80GB")), 8000, free), 2000.0);
}

struct Applied {
  TaskRequest task;
  Placement where;
};

// Apply/Undo property on mixed clusters (MIG nodes of three models, plain nodes) driven by every
// policy: undoing everything in reverse, or in any order, restores the initial state exactly,
// and every layout stays valid on the way.
class MigSnapshotPropertyTest : public ::testing::TestWithParam<uint64_t> {};

std::vector<NodeSpec> MixedNodes(Rng& rng) {
  std::vector<NodeSpec> nodes;
  const char* const models[] = {"H100-80GB", "A30-24GB", "A100-40GB"};
  for (int i = 0; i < 6; ++i) {
    const char* m = models[rng.Uniform(3)];
    const int gpus = 1 + static_cast<int>(rng.Uniform(8));
    nodes.push_back(MigNode(m, gpus, {}, 8000 * static_cast<int64_t>(1 + rng.Uniform(8))));
  }
  nodes.push_back({"plain", CpuMilli{64000}, MiB{1 << 20}, 4, Id("H100-80GB")});
  return nodes;
}

TaskRequest RandomMixedTask(Rng& rng) {
  const char* const models[] = {"H100-80GB", "A30-24GB", "A100-40GB"};
  if (rng.Uniform(5) == 0) return ::tessera::testing::RandomTask(rng);
  const std::string m = models[rng.Uniform(3)];
  const MigGeometry& g = *Catalog().info(Id(m)).mig;
  const MigProfile& p = g.profiles[rng.Uniform(g.profiles.size())];
  return Req(m, p.name, 1000 * static_cast<int64_t>(rng.Uniform(4)));
}

TEST_P(MigSnapshotPropertyTest, ApplyThenUndoRestoresStateExactly) {
  Rng rng(GetParam());
  ClusterSnapshot c = *ClusterSnapshot::Create(MixedNodes(rng));
  const std::vector<int64_t> initial = FreeState(c);
  const std::vector<std::string> initial_layouts = Layouts(c);
  std::vector<TaskRequest> sample;
  for (int i = 0; i < 200; ++i) sample.push_back(RandomMixedTask(rng));
  const TargetWorkload workload = TargetWorkload::FromTasks(sample);
  std::vector<std::unique_ptr<PlacementPolicy>> policies;
  for (const std::string& name : PolicyNames()) policies.push_back(*MakePolicy(name, {.target_workload = &workload}));
  Rng policy_rng = rng.Fork(1);
  PlacementContext ctx{.rng = &policy_rng};

  std::vector<Applied> stack;
  std::vector<std::vector<int64_t>> states{initial};
  std::vector<std::vector<std::string>> layouts{initial_layouts};
  int placed_mig = 0;
  for (int step = 0; step < 400; ++step) {
    if (!stack.empty() && rng.Uniform(4) == 0) {
      const Applied a = stack.back();
      stack.pop_back();
      states.pop_back();
      layouts.pop_back();
      ASSERT_TRUE(c.Undo(a.task, a.where).ok()) << "step " << step;
      // Undo lands exactly on the state before the matching Apply.
      ASSERT_EQ(FreeState(c), states.back()) << "step " << step;
      ASSERT_EQ(Layouts(c), layouts.back()) << "step " << step;
    } else {
      const TaskRequest t = RandomMixedTask(rng);
      PlacementPolicy& policy = *policies[rng.Uniform(policies.size())];
      const PlacementDecision d = policy.Place(c, t, ctx);
      if (!d.placement) continue;
      const Status s = c.Apply(t, *d.placement);
      ASSERT_TRUE(s.ok()) << policy.name() << " step " << step << ": " << s.ToString();
      stack.push_back({t, *d.placement});
      states.push_back(FreeState(c));
      layouts.push_back(Layouts(c));
      placed_mig += t.IsMig();
    }
    ASSERT_TRUE(CheckInvariants(c)) << "step " << step;
    ASSERT_TRUE(AllLayoutsValid(c)) << "step " << step;
  }
  EXPECT_GT(placed_mig, 50);
  while (!stack.empty()) {
    const Applied a = stack.back();
    stack.pop_back();
    ASSERT_TRUE(c.Undo(a.task, a.where).ok());
  }
  EXPECT_EQ(FreeState(c), initial);
  EXPECT_EQ(Layouts(c), initial_layouts);
  EXPECT_EQ(c.allocated_gpu(), GpuMilli{0});
}

TEST_P(MigSnapshotPropertyTest, UndoInAnyOrderRestoresInitialState) {
  Rng rng(GetParam() + 1000);
  ClusterSnapshot c = *ClusterSnapshot::Create(MixedNodes(rng));
  const std::vector<int64_t> initial = FreeState(c);
  const std::vector<std::string> initial_layouts = Layouts(c);
  auto policy = *MakePolicy("random", {});
  PlacementContext ctx{.rng = &rng};
  std::vector<Applied> applied;
  for (int i = 0; i < 200; ++i) {
    const TaskRequest t = RandomMixedTask(rng);
    const PlacementDecision d = policy->Place(c, t, ctx);
    if (!d.placement) continue;
    ASSERT_TRUE(c.Apply(t, *d.placement).ok());
    applied.push_back({t, *d.placement});
  }
  ASSERT_GT(applied.size(), 20u);
  rng.Shuffle(applied);
  for (const Applied& a : applied) {
    ASSERT_TRUE(c.Undo(a.task, a.where).ok());
    ASSERT_TRUE(CheckInvariants(c));
    ASSERT_TRUE(AllLayoutsValid(c));
  }
  EXPECT_EQ(FreeState(c), initial);
  EXPECT_EQ(Layouts(c), initial_layouts);
}

INSTANTIATE_TEST_SUITE_P(Seeds, MigSnapshotPropertyTest, ::testing::Values(1, 2, 3, 42, 2024));

}  // namespace
}  // namespace tessera::placement
