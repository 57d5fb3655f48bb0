#include "tessera/placement/cluster_snapshot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/builders.h"
#include "tests/testing/snapshot_checks.h"

namespace tessera::placement {
namespace {

using ::tessera::testing::CheckInvariants;
using ::tessera::testing::CpuOnly;
using ::tessera::testing::FreeState;
using ::tessera::testing::GpuFrees;
using ::tessera::testing::MakeCluster;
using ::tessera::testing::MakeNodes;
using ::tessera::testing::Models;
using ::tessera::testing::Occupy;
using ::tessera::testing::Share;
using ::tessera::testing::Versions;
using ::tessera::testing::Whole;
using ::tessera::testing::WithModels;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr NodeIndex kN0{0};
constexpr NodeIndex kN1{1};
constexpr NodeIndex kN2{2};

// n0: 8 vCPU, 32 GiB, 2 x T4; n1: 64 vCPU, 256 GiB, 8 x G2; n2: 4 vCPU, 1 GiB, no GPU.
ClusterSnapshot ThreeNodes() {
  return MakeCluster({{8000, 32768, 2, "T4"}, {64000, 262144, 8, "G2"}, {4000, 1024, 0, ""}});
}

TEST(ClusterSnapshotTest, CreateSetsCapacityAndFreeValues) {
  const ClusterSnapshot c = ThreeNodes();
  ASSERT_EQ(c.node_count(), 3u);
  EXPECT_EQ(c.total_gpu_capacity(), GpuMilli{10000});
  EXPECT_EQ(c.total_cpu_capacity(), CpuMilli{76000});
  EXPECT_EQ(c.allocated_gpu(), GpuMilli{0});

  EXPECT_EQ(c.spec(kN0).name, "node-0");
  EXPECT_EQ(c.free_cpu(kN0), CpuMilli{8000});
  EXPECT_EQ(c.free_memory(kN0), MiB{32768});
  EXPECT_EQ(c.gpu_count(kN0), 2);
  EXPECT_THAT(GpuFrees(c, 0), ElementsAre(1000, 1000));
  EXPECT_EQ(c.node_gpu_free(kN0), 2000);
  EXPECT_EQ(c.fully_free_gpus(kN0), 2);
  EXPECT_EQ(c.max_gpu_free(kN0), 1000);
  EXPECT_EQ(c.model_bit(kN0), Models("T4"));
  EXPECT_EQ(c.model_bit(kN1), Models("G2"));
  EXPECT_EQ(c.node_gpu_free(kN1), 8000);

  EXPECT_EQ(c.gpu_count(kN2), 0);
  EXPECT_EQ(c.model_bit(kN2), 0u);
  EXPECT_EQ(c.node_gpu_free(kN2), 0);
  EXPECT_EQ(c.fully_free_gpus(kN2), 0);
  EXPECT_EQ(c.max_gpu_free(kN2), 0);
  for (int t = 0; t < kTagCount; ++t) EXPECT_EQ(c.tag_count(kN1, t), 0);
  EXPECT_TRUE(CheckInvariants(c));
}

TEST(ClusterSnapshotTest, CreateAcceptsEmptyClusterAndSixteenGpus) {
  StatusOr<ClusterSnapshot> empty = ClusterSnapshot::Create({});
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->node_count(), 0u);
  EXPECT_EQ(empty->total_gpu_capacity(), GpuMilli{0});

  const ClusterSnapshot big = MakeCluster({{1000, 1000, 16, "H100-80GB"}});
  EXPECT_EQ(big.total_gpu_capacity(), GpuMilli{16000});
  EXPECT_EQ(big.fully_free_gpus(kN0), 16);
}

TEST(ClusterSnapshotTest, CreateRejectsBadNodes) {
  struct Case {
    const char* what;
    void (*mutate)(NodeSpec&);
    const char* message_part;
  };
  const Case cases[] = {
      {"negative cpu", [](NodeSpec& n) { n.cpu = CpuMilli{-1}; }, "cpu_milli is negative"},
      {"negative memory", [](NodeSpec& n) { n.memory = MiB{-1}; }, "memory_mib is negative"},
      {"negative gpus", [](NodeSpec& n) { n.gpu_count = -1; }, "gpu count -1 is outside 0..16"},
      {"17 gpus", [](NodeSpec& n) { n.gpu_count = 17; }, "gpu count 17 is outside 0..16"},
      {"gpus without model", [](NodeSpec& n) { n.model = GpuModelId(); }, "has GPUs but no model"},
  };
  for (const Case& c : cases) {
    std::vector<NodeSpec> nodes = MakeNodes({{8000, 32768, 2, "T4"}, {8000, 32768, 2, "T4"}});
    nodes[1].name = "bad";
    c.mutate(nodes[1]);
    StatusOr<ClusterSnapshot> s = ClusterSnapshot::Create(nodes);
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(s.status().message(), HasSubstr("node 1 ('bad')")) << c.what;
    EXPECT_THAT(s.status().message(), HasSubstr(c.message_part)) << c.what;
  }
}

TEST(ClusterSnapshotTest, CreateRejectsModelOnNodeWithoutGpus) {
  // Create validates "model set iff GPUs".
  std::vector<NodeSpec> nodes = MakeNodes({{8000, 32768, 0, "T4"}});
  StatusOr<ClusterSnapshot> s = ClusterSnapshot::Create(nodes);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("model but no GPUs"), std::string::npos);
  nodes = MakeNodes({{8000, 32768, 1, "T4"}});
  nodes[0].model = GpuModelId{64};
  EXPECT_EQ(ClusterSnapshot::Create(nodes).status().code(), StatusCode::kInvalidArgument);
}

TEST(ClusterSnapshotTest, FitsChecksCpuAndMemory) {
  const ClusterSnapshot c = ThreeNodes();
  EXPECT_TRUE(c.Fits(kN0, CpuOnly(8000, 32768)));  // exactly the capacity
  EXPECT_FALSE(c.Fits(kN0, CpuOnly(8001)));
  EXPECT_FALSE(c.Fits(kN0, CpuOnly(0, 32769)));
  EXPECT_FALSE(c.Fits(kN0, Share(100, 8001)));
  EXPECT_FALSE(c.Fits(kN0, Whole(1, 0, 40000)));
  EXPECT_TRUE(c.Fits(kN2, CpuOnly(4000, 1024)));
}

TEST(ClusterSnapshotTest, FitsChecksGpusAndModels) {
  const ClusterSnapshot c = ThreeNodes();
  EXPECT_FALSE(c.Fits(kN2, Share(100)));  // no GPUs
  EXPECT_FALSE(c.Fits(kN2, Whole(1)));
  EXPECT_TRUE(c.Fits(kN0, Whole(2)));
  EXPECT_FALSE(c.Fits(kN0, Whole(3)));
  EXPECT_TRUE(c.Fits(kN1, Whole(8)));

  EXPECT_TRUE(c.Fits(kN0, WithModels(Share(500), "T4")));
  EXPECT_FALSE(c.Fits(kN0, WithModels(Share(500), "V100M16|G2")));
  EXPECT_TRUE(c.Fits(kN1, WithModels(Share(500), "V100M16|G2")));
  EXPECT_TRUE(c.Fits(kN0, WithModels(Whole(1), "G2|T4")));
  // Model restrictions do not matter for CPU-only tasks.
  TaskRequest cpu_task = CpuOnly(1000);
  cpu_task.allowed_models = Models("V100M32");
  EXPECT_TRUE(c.Fits(kN0, cpu_task));
}

TEST(ClusterSnapshotTest, FitsFollowsPerGpuFreeMilli) {
  ClusterSnapshot c = ThreeNodes();
  ASSERT_TRUE(Occupy(c, 0, 0, 700).ok());  // n0 GPUs free {300, 1000}
  EXPECT_TRUE(c.Fits(kN0, Share(1000 - 1)));
  EXPECT_TRUE(c.Fits(kN0, Whole(1)));
  EXPECT_FALSE(c.Fits(kN0, Whole(2)));
  ASSERT_TRUE(Occupy(c, 0, 1, 800).ok());  // {300, 200}
  EXPECT_TRUE(c.Fits(kN0, Share(300)));
  EXPECT_FALSE(c.Fits(kN0, Share(301)));
  EXPECT_FALSE(c.Fits(kN0, Whole(1)));
  EXPECT_TRUE(c.Fits(kN0, Share(200)));
}

TEST(ClusterSnapshotTest, OneMilliUsedIsNotFullyFree) {
  ClusterSnapshot c = ThreeNodes();
  ASSERT_TRUE(Occupy(c, 0, 0, 1).ok());  // n0 GPUs free {999, 1000}
  EXPECT_EQ(c.fully_free_gpus(kN0), 1);
  EXPECT_EQ(c.max_gpu_free(kN0), 1000);
  EXPECT_EQ(c.node_gpu_free(kN0), 1999);
  EXPECT_TRUE(c.Fits(kN0, Whole(1)));
  EXPECT_FALSE(c.Fits(kN0, Whole(2)));
  ASSERT_TRUE(Occupy(c, 0, 1, 1).ok());  // {999, 999}
  EXPECT_EQ(c.fully_free_gpus(kN0), 0);
  EXPECT_EQ(c.max_gpu_free(kN0), 999);
  EXPECT_FALSE(c.Fits(kN0, Whole(1)));
  EXPECT_TRUE(c.Fits(kN0, Share(999)));
}

TEST(ClusterSnapshotTest, ApplyAndUndoSharingTask) {
  ClusterSnapshot c = ThreeNodes();
  const std::vector<int64_t> initial = FreeState(c);
  const TaskRequest half = Share(500, 1000, 1024);
  const Placement p{kN0, GpuBit(1)};
  ASSERT_TRUE(c.Apply(half, p).ok());
  EXPECT_EQ(c.free_cpu(kN0), CpuMilli{7000});
  EXPECT_EQ(c.free_memory(kN0), MiB{31744});
  EXPECT_THAT(GpuFrees(c, 0), ElementsAre(1000, 500));
  EXPECT_EQ(c.node_gpu_free(kN0), 1500);
  EXPECT_EQ(c.fully_free_gpus(kN0), 1);
  EXPECT_EQ(c.max_gpu_free(kN0), 1000);
  EXPECT_EQ(c.allocated_gpu(), GpuMilli{500});
  EXPECT_EQ(c.tag_count(kN0, kShareTag), 1);
  EXPECT_EQ(c.tag_count(kN0, 1), 0);
  EXPECT_TRUE(CheckInvariants(c));

  ASSERT_TRUE(c.Undo(half, p).ok());
  EXPECT_EQ(FreeState(c), initial);
}

TEST(ClusterSnapshotTest, ApplyAndUndoWholeAndCpuTasks) {
  ClusterSnapshot c = ThreeNodes();
  const std::vector<int64_t> initial = FreeState(c);
  const TaskRequest two = Whole(2, 16000, 65536);
  const Placement p2{kN1, GpuBit(3) | GpuBit(6)};
  ASSERT_TRUE(c.Apply(two, p2).ok());
  EXPECT_EQ(c.free_cpu(kN1), CpuMilli{48000});
  EXPECT_THAT(GpuFrees(c, 1), ElementsAre(1000, 1000, 1000, 0, 1000, 1000, 0, 1000));
  EXPECT_EQ(c.fully_free_gpus(kN1), 6);
  EXPECT_EQ(c.tag_count(kN1, 2), 1);

  const TaskRequest cpu = CpuOnly(4000, 1024);
  ASSERT_TRUE(c.Apply(cpu, {kN2, 0}).ok());
  EXPECT_EQ(c.free_cpu(kN2), CpuMilli{0});
  EXPECT_EQ(c.free_memory(kN2), MiB{0});
  for (int t = 0; t < kTagCount; ++t) EXPECT_EQ(c.tag_count(kN2, t), 0);  // CPU tasks have no tag

  EXPECT_EQ(c.allocated_gpu(), GpuMilli{2000});
  EXPECT_TRUE(CheckInvariants(c));
  ASSERT_TRUE(c.Undo(cpu, {kN2, 0}).ok());
  ASSERT_TRUE(c.Undo(two, p2).ok());
  EXPECT_EQ(FreeState(c), initial);
}

TEST(ClusterSnapshotTest, AllocatedGpuCountsTotalGpu) {
  ClusterSnapshot c = ThreeNodes();
  ASSERT_TRUE(c.Apply(Share(300), {kN0, GpuBit(0)}).ok());
  ASSERT_TRUE(c.Apply(Whole(4), {kN1, 0b1111}).ok());
  ASSERT_TRUE(c.Apply(Share(250), {kN0, GpuBit(0)}).ok());
  EXPECT_EQ(c.allocated_gpu(), GpuMilli{300 + 4000 + 250});
  EXPECT_EQ(c.gpu_free(kN0, 0), 450);
  EXPECT_EQ(c.tag_count(kN0, kShareTag), 2);
  EXPECT_EQ(c.tag_count(kN1, 4), 1);
  ASSERT_TRUE(c.Undo(Share(300), {kN0, GpuBit(0)}).ok());
  EXPECT_EQ(c.allocated_gpu(), GpuMilli{4250});
  EXPECT_EQ(c.gpu_free(kN0, 0), 750);
  EXPECT_EQ(c.tag_count(kN0, kShareTag), 1);
}

TEST(ClusterSnapshotTest, VersionsStrictlyIncreasePerTouchedNode) {
  ClusterSnapshot c = ThreeNodes();
  EXPECT_THAT(Versions(c), ElementsAre(0u, 0u, 0u));
  ASSERT_TRUE(c.Apply(Share(100), {kN0, GpuBit(0)}).ok());
  EXPECT_THAT(Versions(c), ElementsAre(1u, 0u, 0u));
  ASSERT_TRUE(c.Apply(Share(100), {kN0, GpuBit(0)}).ok());
  ASSERT_TRUE(c.Apply(CpuOnly(10), {kN2, 0}).ok());
  EXPECT_THAT(Versions(c), ElementsAre(2u, 0u, 1u));
  // Undo does not go back to an earlier version even though the state does.
  uint32_t last = c.version(kN0);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.Undo(Share(100), {kN0, GpuBit(0)}).ok());
    EXPECT_GT(c.version(kN0), last);
    last = c.version(kN0);
  }
  EXPECT_EQ(c.gpu_free(kN0, 0), 1000);
  EXPECT_EQ(c.version(kN0), 4u);
  EXPECT_EQ(c.version(kN1), 0u);
}

TEST(ClusterSnapshotTest, CopiesAreIndependentWithNewUid) {
  ClusterSnapshot a = ThreeNodes();
  ASSERT_TRUE(a.Apply(Share(400), {kN0, GpuBit(1)}).ok());
  ClusterSnapshot b = a;
  EXPECT_NE(a.uid(), b.uid());
  EXPECT_NE(a.uid(), 0u);
  EXPECT_EQ(FreeState(a), FreeState(b));
  EXPECT_EQ(Versions(a), Versions(b));

  ASSERT_TRUE(b.Apply(Share(400), {kN0, GpuBit(1)}).ok());
  EXPECT_EQ(a.gpu_free(kN0, 1), 600);
  EXPECT_EQ(b.gpu_free(kN0, 1), 200);

  ClusterSnapshot d = ThreeNodes();
  const uint64_t d_uid = d.uid();
  d = a;
  EXPECT_NE(d.uid(), a.uid());
  EXPECT_NE(d.uid(), d_uid);
  EXPECT_EQ(FreeState(d), FreeState(a));

  const ClusterSnapshot e = ThreeNodes();
  const ClusterSnapshot f = ThreeNodes();
  EXPECT_NE(e.uid(), f.uid());
}

TEST(ClusterSnapshotTest, MoveKeepsStateAndUid) {
  ClusterSnapshot a = ThreeNodes();
  ASSERT_TRUE(a.Apply(Share(400), {kN0, GpuBit(1)}).ok());
  const uint64_t uid = a.uid();
  const std::vector<int64_t> state = FreeState(a);
  ClusterSnapshot b = std::move(a);
  EXPECT_EQ(b.uid(), uid);
  EXPECT_EQ(FreeState(b), state);
}

// Every rejected Apply must leave the snapshot exactly as it was (versions included).
class ApplyRejectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Occupy(c_, 0, 0, 800).ok());  // n0 GPUs free {200, 1000}
    state_ = FreeState(c_);
    versions_ = Versions(c_);
  }
  void ExpectRejected(const TaskRequest& t, const Placement& p, const std::string& message_part) {
    const Status s = c_.Apply(t, p);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
    EXPECT_THAT(s.message(), HasSubstr(message_part));
    EXPECT_EQ(FreeState(c_), state_);
    EXPECT_EQ(Versions(c_), versions_);
  }
  ClusterSnapshot c_ = ThreeNodes();
  std::vector<int64_t> state_;
  std::vector<uint32_t> versions_;
};

TEST_F(ApplyRejectionTest, WrongGpuCount) {
  ExpectRejected(Share(100), {kN0, GpuBit(0) | GpuBit(1)}, "must name 1 of its GPUs");
  ExpectRejected(Share(100), {kN0, 0}, "must name 1 of its GPUs");
  ExpectRejected(Whole(2), {kN1, GpuBit(0)}, "must name 2 of its GPUs");
  ExpectRejected(CpuOnly(100), {kN0, GpuBit(1)}, "must name 0 of its GPUs");
}

TEST_F(ApplyRejectionTest, GpuOutsideNode) {
  ExpectRejected(Share(100), {kN0, GpuBit(2)}, "must name 1 of its GPUs");
  ExpectRejected(Whole(2), {kN1, GpuBit(1) | GpuBit(9)}, "must name 2 of its GPUs");
}

TEST_F(ApplyRejectionTest, GpuWithoutEnoughFree) {
  ExpectRejected(Share(300), {kN0, GpuBit(0)}, "GPU 0 of node node-0 has only 200 milli free");
  ExpectRejected(Whole(1), {kN0, GpuBit(0)}, "GPU 0");
}

TEST_F(ApplyRejectionTest, TaskDoesNotFit) {
  ExpectRejected(CpuOnly(8001), {kN0, 0}, "does not fit on node node-0");
  ExpectRejected(Share(100), {kN2, 0}, "does not fit on node node-2");
  ExpectRejected(WithModels(Share(100), "G2"), {kN0, GpuBit(1)}, "does not fit");
}

TEST_F(ApplyRejectionTest, NodeOutOfRange) {
  ExpectRejected(CpuOnly(1), {NodeIndex{3}, 0}, "outside the cluster");
  ExpectRejected(CpuOnly(1), {NodeIndex{}, 0}, "outside the cluster");
}

TEST(ClusterSnapshotTest, UndoRejectsOverFreeing) {
  ClusterSnapshot c = ThreeNodes();
  ASSERT_TRUE(c.Apply(Whole(1, 1000), {kN0, GpuBit(0)}).ok());  // n0: {0, 1000}, cpu 7000
  const std::vector<int64_t> state = FreeState(c);
  const std::vector<uint32_t> versions = Versions(c);
  auto expect_rejected = [&](const TaskRequest& t, const Placement& p) {
    const Status s = c.Undo(t, p);
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(FreeState(c), state);
    EXPECT_EQ(Versions(c), versions);
  };
  expect_rejected(CpuOnly(1), {kN2, 0});                  // n2 is empty
  expect_rejected(CpuOnly(1001), {kN0, 0});               // more CPU than was taken
  expect_rejected(CpuOnly(0, 1), {kN0, 0});               // more memory than was taken
  expect_rejected(Whole(1), {kN0, GpuBit(1)});            // GPU1 is fully free
  expect_rejected(Share(500), {kN0, GpuBit(0)});          // no sharing task on n0
  expect_rejected(Whole(1), {kN0, GpuBit(0) | GpuBit(1)});  // wrong GPU count
  expect_rejected(Whole(1), {kN0, GpuBit(4)});            // GPU outside the node
  expect_rejected(Whole(1), {NodeIndex{7}, GpuBit(0)});   // node outside the cluster
  // The real one still works.
  EXPECT_TRUE(c.Undo(Whole(1, 1000), {kN0, GpuBit(0)}).ok());
  EXPECT_EQ(c.allocated_gpu(), GpuMilli{0});
}

}  // namespace
}  // namespace tessera::placement
