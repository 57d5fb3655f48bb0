#include "tessera/placement/fragmentation.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testing/builders.h"
#include "tests/testing/snapshot_checks.h"

namespace tessera::placement {
namespace {

using ::tessera::testing::CpuOnly;
using ::tessera::testing::MakeCluster;
using ::tessera::testing::Models;
using ::tessera::testing::Occupy;
using ::tessera::testing::RandomNodeArgs;
using ::tessera::testing::RandomTask;
using ::tessera::testing::Share;
using ::tessera::testing::Whole;
using ::tessera::testing::WithModels;

using ::tessera::testing::Type;

// fragmentation.h: M = {A: 1 GPU x 500 milli, 2000 CPU, p=0.5; B: CPU-only, p=0.5}.
TargetWorkload WorkedExampleWorkload(ModelMask a_models = 0) {
  return TargetWorkload::FromTypes({Type(2000, 1, 500, 0.5, a_models), Type(1000, 0, 0, 0.5)});
}

TEST(NodeFragmentationTest, WorkedExample) {
  const std::array<int32_t, 3> gpus{1000, 400, 0};
  EXPECT_DOUBLE_EQ(NodeFragmentation(WorkedExampleWorkload(), Models("T4"), 8000, gpus), 900.0);
}

TEST(NodeFragmentationTest, SingleTypes) {
  const std::array<int32_t, 3> gpus{1000, 400, 0};
  const ModelMask t4 = Models("T4");
  // A sharing type sees the GPUs smaller than its request.
  EXPECT_DOUBLE_EQ(NodeFragmentation(TargetWorkload::FromTypes({Type(0, 1, 500, 1)}), t4, 0, gpus), 400.0);
  EXPECT_DOUBLE_EQ(NodeFragmentation(TargetWorkload::FromTypes({Type(0, 1, 300, 1)}), t4, 0, gpus), 0.0);
  EXPECT_DOUBLE_EQ(NodeFragmentation(TargetWorkload::FromTypes({Type(0, 1, 1000, 1)}), t4, 0, gpus), 400.0);
  // CPU-only sees everything.
  EXPECT_DOUBLE_EQ(NodeFragmentation(TargetWorkload::FromTypes({Type(0, 0, 0, 1)}), t4, 0, gpus), 1400.0);
  // A 2-GPU type does not fit (only one GPU has 1000 free): everything is fragment.
  EXPECT_DOUBLE_EQ(NodeFragmentation(TargetWorkload::FromTypes({Type(0, 2, 1000, 1)}), t4, 0, gpus), 1400.0);
  const std::array<int32_t, 3> two_free{1000, 1000, 400};
  EXPECT_DOUBLE_EQ(NodeFragmentation(TargetWorkload::FromTypes({Type(0, 2, 1000, 1)}), t4, 0, two_free), 400.0);
}

TEST(NodeFragmentationTest, CpuShortNodeIsAllFragment) {
  const std::array<int32_t, 3> gpus{1000, 400, 0};
  // 1999 CPU free < A's 2000: A sees all 1400; B sees 1400.
  EXPECT_DOUBLE_EQ(NodeFragmentation(WorkedExampleWorkload(), Models("T4"), 1999, gpus), 1400.0);
  // Exactly enough CPU is enough.
  EXPECT_DOUBLE_EQ(NodeFragmentation(WorkedExampleWorkload(), Models("T4"), 2000, gpus), 900.0);
}

TEST(NodeFragmentationTest, ModelRestrictedTypes) {
  const std::array<int32_t, 3> gpus{1000, 400, 0};
  const TargetWorkload v100_only = WorkedExampleWorkload(Models("V100M16|V100M32"));
  EXPECT_DOUBLE_EQ(NodeFragmentation(v100_only, Models("T4"), 8000, gpus), 1400.0);
  EXPECT_DOUBLE_EQ(NodeFragmentation(v100_only, Models("V100M32"), 8000, gpus), 900.0);
  EXPECT_DOUBLE_EQ(NodeFragmentation(v100_only, Models("V100M16"), 8000, gpus), 900.0);
}

TEST(NodeFragmentationTest, NoFreeGpuMeansNoFragment) {
  const std::array<int32_t, 2> used{0, 0};
  EXPECT_DOUBLE_EQ(NodeFragmentation(WorkedExampleWorkload(), Models("T4"), 8000, used), 0.0);
  EXPECT_DOUBLE_EQ(NodeFragmentation(WorkedExampleWorkload(), 0, 8000, std::span<const int32_t>()), 0.0);
}

TEST(NodeFragmentationTest, EmptyWorkloadIsZero) {
  const std::array<int32_t, 2> gpus{300, 1000};
  EXPECT_DOUBLE_EQ(NodeFragmentation(TargetWorkload(), Models("T4"), 8000, gpus), 0.0);
}

TEST(TargetWorkloadTest, FromTypesNormalisesAndDropsNonPositive) {
  const TargetWorkload w = TargetWorkload::FromTypes(
      {Type(0, 1, 500, 2.0), Type(0, 0, 0, 0.0), Type(0, 2, 1000, 6.0), Type(0, 1, 100, -1.0)});
  ASSERT_EQ(w.types().size(), 2u);
  EXPECT_EQ(w.types()[0].gpu_milli, GpuMilli{500});
  EXPECT_DOUBLE_EQ(w.types()[0].weight, 0.25);
  EXPECT_EQ(w.types()[1].num_gpu, 2);
  EXPECT_DOUBLE_EQ(w.types()[1].weight, 0.75);
  EXPECT_FALSE(w.empty());
  EXPECT_TRUE(TargetWorkload::FromTypes({Type(0, 1, 500, 0.0)}).empty());
  EXPECT_TRUE(TargetWorkload().empty());
}

// 10 tasks: P x5 (Share 500, 1000 CPU), Q x3 (Whole 1, 2000 CPU), R x1 (CPU-only 4000),
// S x1 (Share 250, 1000 CPU). Sorted: P (5), Q (3), then R and S tie at 1 and the larger
// (cpu, milli, num_gpu, models) tuple goes first: R = (4000, ...) > S = (1000, ...).
std::vector<TaskRequest> TenTasks() {
  std::vector<TaskRequest> tasks;
  // Interleaved so that input order does not decide anything.
  tasks.push_back(Share(250, 1000));       // S
  tasks.push_back(Whole(1, 2000));         // Q
  tasks.push_back(Share(500, 1000));       // P
  tasks.push_back(CpuOnly(4000));          // R
  tasks.push_back(Share(500, 1000));       // P
  tasks.push_back(Whole(1, 2000));         // Q
  tasks.push_back(Share(500, 1000));       // P
  tasks.push_back(Share(500, 1000));       // P
  tasks.push_back(Whole(1, 2000));         // Q
  tasks.push_back(Share(500, 1000));       // P
  return tasks;
}

TEST(TargetWorkloadTest, FromTasksDefaultCoverageKeepsAllFourTypes) {
  // Coverage after P, Q, R is 0.9 < 0.95, so S is kept too.
  const TargetWorkload w = TargetWorkload::FromTasks(TenTasks());
  ASSERT_EQ(w.types().size(), 4u);
  const auto& t = w.types();
  EXPECT_EQ(t[0].gpu_milli, GpuMilli{500});
  EXPECT_EQ(t[0].cpu, CpuMilli{1000});
  EXPECT_EQ(t[0].num_gpu, 1);
  EXPECT_EQ(t[0].count, 5);
  EXPECT_DOUBLE_EQ(t[0].weight, 0.5);
  EXPECT_EQ(t[1].num_gpu, 1);
  EXPECT_EQ(t[1].gpu_milli, GpuMilli{1000});
  EXPECT_EQ(t[1].cpu, CpuMilli{2000});
  EXPECT_EQ(t[1].count, 3);
  EXPECT_DOUBLE_EQ(t[1].weight, 0.3);
  EXPECT_EQ(t[2].num_gpu, 0);  // R before S
  EXPECT_EQ(t[2].cpu, CpuMilli{4000});
  EXPECT_EQ(t[2].count, 1);
  EXPECT_DOUBLE_EQ(t[2].weight, 0.1);
  EXPECT_EQ(t[3].gpu_milli, GpuMilli{250});
  EXPECT_EQ(t[3].count, 1);
  EXPECT_DOUBLE_EQ(t[3].weight, 0.1);
}

TEST(TargetWorkloadTest, FromTasksCoverageCut) {
  // 0.9: P, Q, R cover 9/10 >= 0.9 -> S is cut; weights renormalise over the 9 kept tasks.
  TargetWorkload w = TargetWorkload::FromTasks(TenTasks(), 0.9);
  ASSERT_EQ(w.types().size(), 3u);
  EXPECT_EQ(w.types()[2].num_gpu, 0);
  EXPECT_DOUBLE_EQ(w.types()[0].weight, 5.0 / 9);
  EXPECT_DOUBLE_EQ(w.types()[1].weight, 3.0 / 9);
  EXPECT_DOUBLE_EQ(w.types()[2].weight, 1.0 / 9);
  // 0.8: P and Q cover exactly 0.8.
  w = TargetWorkload::FromTasks(TenTasks(), 0.8);
  ASSERT_EQ(w.types().size(), 2u);
  EXPECT_DOUBLE_EQ(w.types()[0].weight, 5.0 / 8);
  EXPECT_DOUBLE_EQ(w.types()[1].weight, 3.0 / 8);
  // 0.85: needs a third type.
  EXPECT_EQ(TargetWorkload::FromTasks(TenTasks(), 0.85).types().size(), 3u);
  // 0.5: P alone.
  w = TargetWorkload::FromTasks(TenTasks(), 0.5);
  ASSERT_EQ(w.types().size(), 1u);
  EXPECT_DOUBLE_EQ(w.types()[0].weight, 1.0);
  EXPECT_EQ(TargetWorkload::FromTasks(TenTasks(), 1.0).types().size(), 4u);
}

TEST(TargetWorkloadTest, FromTasksDistinguishesAllowedModels) {
  std::vector<TaskRequest> tasks = {Share(500), Share(500), WithModels(Share(500), "T4")};
  const TargetWorkload w = TargetWorkload::FromTasks(tasks, 1.0);
  ASSERT_EQ(w.types().size(), 2u);
  EXPECT_EQ(w.types()[0].allowed_models, 0u);
  EXPECT_EQ(w.types()[0].count, 2);
  EXPECT_EQ(w.types()[1].allowed_models, Models("T4"));
  // Memory is not part of a type.
  std::vector<TaskRequest> mem = {Share(500, 0, 1), Share(500, 0, 2)};
  EXPECT_EQ(TargetWorkload::FromTasks(mem).types().size(), 1u);
}

TEST(TargetWorkloadTest, FromTasksEmpty) {
  EXPECT_TRUE(TargetWorkload::FromTasks(std::vector<TaskRequest>{}).empty());
}

TEST(TargetWorkloadTest, WeightsSumToOne) {
  Rng rng(31);
  for (double coverage : {0.5, 0.9, 0.95, 1.0}) {
    std::vector<TaskRequest> tasks;
    for (int i = 0; i < 500; ++i) tasks.push_back(RandomTask(rng));
    const TargetWorkload w = TargetWorkload::FromTasks(tasks, coverage);
    ASSERT_FALSE(w.empty());
    double sum = 0;
    int64_t kept = 0;
    for (const TaskType& t : w.types()) {
      sum += t.weight;
      kept += t.count;
      EXPECT_GT(t.weight, 0.0);
    }
    EXPECT_NEAR(sum, 1.0, 1e-12) << coverage;
    EXPECT_GE(static_cast<double>(kept) / 500.0, coverage);
    // Most common first.
    for (size_t i = 1; i < w.types().size(); ++i) EXPECT_GE(w.types()[i - 1].count, w.types()[i].count);
  }
}

TEST(FragmentationMemoTest, MatchesNodeFragmentationAndIsOrderInsensitive) {
  Rng rng(77);
  std::vector<TaskRequest> tasks;
  for (int i = 0; i < 300; ++i) tasks.push_back(RandomTask(rng));
  const TargetWorkload w = TargetWorkload::FromTasks(tasks);
  FragmentationMemo memo(&w);
  const int32_t levels[] = {0, 100, 250, 400, 500, 750, 1000};
  for (int i = 0; i < 300; ++i) {
    const int n = 1 + static_cast<int>(rng.Uniform(8));
    std::vector<int32_t> gpus(n);
    for (int32_t& g : gpus) g = levels[rng.Uniform(7)];
    const int64_t cpu = 2000 * static_cast<int64_t>(rng.Uniform(8));
    const ModelMask model = Models(rng.Uniform(2) ? "T4" : "V100M32");
    const double direct = NodeFragmentation(w, model, cpu, gpus);
    EXPECT_DOUBLE_EQ(memo.Get(model, cpu, gpus), direct);
    std::vector<int32_t> permuted = gpus;
    rng.Shuffle(permuted);
    EXPECT_DOUBLE_EQ(memo.Get(model, cpu, permuted), direct);
    EXPECT_DOUBLE_EQ(NodeFragmentation(w, model, cpu, permuted), direct);
  }
}

TEST(FragmentationMemoTest, KeysOnModelCpuAndGpuMultiset) {
  const TargetWorkload w = WorkedExampleWorkload(Models("T4"));
  FragmentationMemo memo(&w);
  const std::array<int32_t, 3> a{1000, 400, 0};
  const std::array<int32_t, 3> a_permuted{0, 1000, 400};
  EXPECT_DOUBLE_EQ(memo.Get(Models("T4"), 8000, a), 900.0);
  EXPECT_EQ(memo.size(), 1u);
  EXPECT_DOUBLE_EQ(memo.Get(Models("T4"), 8000, a_permuted), 900.0);
  EXPECT_EQ(memo.size(), 1u);  // same multiset: cache hit
  EXPECT_DOUBLE_EQ(memo.Get(Models("T4"), 1000, a), 1400.0);  // CPU short for A
  EXPECT_EQ(memo.size(), 2u);
  EXPECT_DOUBLE_EQ(memo.Get(Models("G2"), 8000, a), 1400.0);  // A may not run on G2
  EXPECT_EQ(memo.size(), 3u);
}

TEST(FragmentationMemoTest, OfNodeAndClusterFragmentation) {
  ClusterSnapshot c = MakeCluster({{8000, 32768, 3, "T4"}, {64000, 65536, 2, "G2"}, {4000, 4096, 0, ""}});
  ASSERT_TRUE(Occupy(c, 0, 1, 600).ok());   // node 0: {1000, 400, 0}
  ASSERT_TRUE(Occupy(c, 0, 2, 1000).ok());
  const TargetWorkload w = WorkedExampleWorkload();
  FragmentationMemo memo(&w);
  EXPECT_DOUBLE_EQ(memo.OfNode(c, NodeIndex{0}), 900.0);
  // node 1: {1000, 1000}: A sees 0, B sees 2000 -> 1000.
  EXPECT_DOUBLE_EQ(memo.OfNode(c, NodeIndex{1}), 1000.0);
  EXPECT_DOUBLE_EQ(memo.OfNode(c, NodeIndex{2}), 0.0);
  EXPECT_DOUBLE_EQ(ClusterFragmentation(c, memo), 1900.0);
  // The node's CPU counts: take 7000 of node 0's CPU (1000 left < A's 2000) -> 1400.
  ASSERT_TRUE(c.Apply(CpuOnly(7000), {NodeIndex{0}, 0}).ok());
  EXPECT_DOUBLE_EQ(memo.OfNode(c, NodeIndex{0}), 1400.0);
  EXPECT_DOUBLE_EQ(ClusterFragmentation(c, memo), 2400.0);
}

TEST(FragmentationMemoTest, ClusterFragmentationIsSumOfNodes) {
  Rng rng(8);
  ClusterSnapshot c = MakeCluster(RandomNodeArgs(rng, 10));
  std::vector<TaskRequest> tasks;
  for (int i = 0; i < 100; ++i) tasks.push_back(RandomTask(rng));
  const TargetWorkload w = TargetWorkload::FromTasks(tasks);
  // Some load: sharing tasks on random GPUs.
  for (uint32_t n = 0; n < c.node_count(); ++n) {
    for (int g = 0; g < c.gpu_count(NodeIndex{n}); ++g) {
      if (rng.Uniform(2)) {
        ASSERT_TRUE(Occupy(c, n, g, 100 * static_cast<int64_t>(1 + rng.Uniform(10))).ok());
      }
    }
  }
  FragmentationMemo memo(&w);
  double expected = 0;
  for (uint32_t n = 0; n < c.node_count(); ++n) {
    const NodeIndex idx{n};
    expected += NodeFragmentation(w, c.model_bit(idx), c.free_cpu(idx).value(),
                                  std::span(c.gpu_free_array(idx).data(), c.gpu_count(idx)));
  }
  EXPECT_NEAR(ClusterFragmentation(c, memo), expected, 1e-6);
  EXPECT_GT(expected, 0.0);
}

}  // namespace
}  // namespace tessera::placement
