#include "tessera/placement/gpu_choice.h"

#include <map>

#include <gtest/gtest.h>

#include "tests/testing/builders.h"

namespace tessera::placement {
namespace {

using ::tessera::testing::CpuOnly;
using ::tessera::testing::MakeCluster;
using ::tessera::testing::Occupy;
using ::tessera::testing::Share;
using ::tessera::testing::Whole;

constexpr NodeIndex kN0{0};

// The worked example of gpu_choice.h: GPUs free {600, 300, 1000}.
ClusterSnapshot WorkedExample() {
  ClusterSnapshot c = MakeCluster({{32000, 65536, 3, "T4"}});
  EXPECT_TRUE(Occupy(c, 0, 0, 400).ok());
  EXPECT_TRUE(Occupy(c, 0, 1, 700).ok());
  return c;
}

TEST(ChooseGpusTest, WorkedExample) {
  const ClusterSnapshot c = WorkedExample();
  const TaskRequest t = Share(250);
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kBest, nullptr), GpuBit(1));
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kWorst, nullptr), GpuBit(2));
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kFirst, nullptr), GpuBit(0));
}

TEST(ChooseGpusTest, UsableMaskWorkedExample) {
  // gpu_choice.h: free {600, 300, 1000}, d = 250, usable = {0, 2}.
  const ClusterSnapshot c = WorkedExample();
  const TaskRequest t = Share(250);
  const GpuSet usable = GpuBit(0) | GpuBit(2);
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kBest, nullptr, usable), GpuBit(0));
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kWorst, nullptr, usable), GpuBit(2));
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kFirst, nullptr, usable), GpuBit(0));
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kFirst, nullptr, GpuBit(1)), GpuBit(1));
  Rng rng(3);
  for (int i = 0; i < 50; ++i) EXPECT_NE(ChooseGpus(c, kN0, t, SharingGpuRule::kRandom, &rng, usable), GpuBit(1));
  // Fits with a mask: only GPU 1 (300 free) usable -> a 400-milli task no longer fits.
  EXPECT_TRUE(c.Fits(kN0, Share(400)));
  EXPECT_FALSE(c.Fits(kN0, Share(400), GpuBit(1)));
  EXPECT_TRUE(c.Fits(kN0, Share(300), GpuBit(1)));
  EXPECT_TRUE(c.Fits(kN0, CpuOnly(1000), 0));  // CPU-only tasks take no GPU
  EXPECT_FALSE(c.Fits(kN0, Share(100), 0));
}

TEST(ChooseGpusTest, OnlyGpusWithEnoughFreeAreCandidates) {
  const ClusterSnapshot c = WorkedExample();
  const TaskRequest t = Share(500);  // GPU1 (300) is too small
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kBest, nullptr), GpuBit(0));
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kWorst, nullptr), GpuBit(2));
  EXPECT_EQ(ChooseGpus(c, kN0, Share(700), SharingGpuRule::kFirst, nullptr), GpuBit(2));
  EXPECT_EQ(ChooseGpus(c, kN0, Share(700), SharingGpuRule::kBest, nullptr), GpuBit(2));
  // Exact fit counts as fitting.
  EXPECT_EQ(ChooseGpus(c, kN0, Share(300), SharingGpuRule::kBest, nullptr), GpuBit(1));
  EXPECT_EQ(ChooseGpus(c, kN0, Share(600), SharingGpuRule::kBest, nullptr), GpuBit(0));
}

TEST(ChooseGpusTest, TiesGoToLowestIndex) {
  ClusterSnapshot c = MakeCluster({{32000, 65536, 4, "T4"}});
  ASSERT_TRUE(Occupy(c, 0, 0, 900).ok());  // {100, 500, 500, 500}
  for (int g = 1; g < 4; ++g) ASSERT_TRUE(Occupy(c, 0, g, 500).ok());
  const TaskRequest t = Share(200);
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kBest, nullptr), GpuBit(1));
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kWorst, nullptr), GpuBit(1));
  EXPECT_EQ(ChooseGpus(c, kN0, t, SharingGpuRule::kFirst, nullptr), GpuBit(1));
}

TEST(ChooseGpusTest, RandomIsUniformAmongFittingGpus) {
  const ClusterSnapshot c = WorkedExample();  // {600, 300, 1000}
  Rng rng(5);
  std::map<GpuSet, int> counts;
  const int draws = 6000;
  for (int i = 0; i < draws; ++i) ++counts[ChooseGpus(c, kN0, Share(500), SharingGpuRule::kRandom, &rng)];
  ASSERT_EQ(counts.size(), 2u);  // never GPU1, never "none"
  EXPECT_NEAR(counts[GpuBit(0)], draws / 2, 300);
  EXPECT_NEAR(counts[GpuBit(2)], draws / 2, 300);

  counts.clear();
  for (int i = 0; i < draws; ++i) ++counts[ChooseGpus(c, kN0, Share(100), SharingGpuRule::kRandom, &rng)];
  ASSERT_EQ(counts.size(), 3u);
  for (int g = 0; g < 3; ++g) EXPECT_NEAR(counts[GpuBit(g)], draws / 3, 300) << g;
}

TEST(ChooseGpusTest, RandomIsDeterministicPerSeed) {
  const ClusterSnapshot c = WorkedExample();
  Rng a(9), b(9);
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(ChooseGpus(c, kN0, Share(100), SharingGpuRule::kRandom, &a),
              ChooseGpus(c, kN0, Share(100), SharingGpuRule::kRandom, &b));
  }
}

TEST(ChooseGpusTest, CpuOnlyTakesNoGpu) {
  const ClusterSnapshot c = WorkedExample();
  EXPECT_EQ(ChooseGpus(c, kN0, CpuOnly(1000), SharingGpuRule::kBest, nullptr), 0u);
  EXPECT_EQ(ChooseGpus(c, kN0, CpuOnly(1000), SharingGpuRule::kWorst, nullptr), 0u);
}

TEST(ChooseGpusTest, WholeGpuTasksTakeLowestFullyFreeGpus) {
  ClusterSnapshot c = MakeCluster({{32000, 65536, 6, "T4"}});
  ASSERT_TRUE(Occupy(c, 0, 1, 300).ok());  // {1000, 700, 1000, 1000, 700, 1000}
  ASSERT_TRUE(Occupy(c, 0, 4, 300).ok());
  for (SharingGpuRule rule : {SharingGpuRule::kBest, SharingGpuRule::kWorst, SharingGpuRule::kFirst}) {
    EXPECT_EQ(ChooseGpus(c, kN0, Whole(1), rule, nullptr), GpuBit(0));
    EXPECT_EQ(ChooseGpus(c, kN0, Whole(2), rule, nullptr), GpuBit(0) | GpuBit(2));
    EXPECT_EQ(ChooseGpus(c, kN0, Whole(3), rule, nullptr), GpuBit(0) | GpuBit(2) | GpuBit(3));
  }
  Rng rng(1);
  EXPECT_EQ(ChooseGpus(c, kN0, Whole(4), SharingGpuRule::kRandom, &rng), 0b101101u);
}

TEST(ChooseGpusTest, WholeGpuTasksTakeOnlyUsableFullyFreeGpus) {
  // gpu_choice.h: a Whole(2) task on {1000, 1000, 1000} with usable = {1, 2} takes GPUs 1 and 2.
  const ClusterSnapshot c = MakeCluster({{32000, 65536, 3, "T4"}});
  const GpuSet usable = GpuBit(1) | GpuBit(2);
  EXPECT_EQ(ChooseGpus(c, kN0, Whole(2), SharingGpuRule::kBest, nullptr, usable), usable);
  EXPECT_EQ(LowestFullyFreeGpus(c, kN0, 3, usable), 0u);
  EXPECT_TRUE(c.Fits(kN0, Whole(2), usable));
  EXPECT_FALSE(c.Fits(kN0, Whole(3), usable));
  EXPECT_TRUE(c.Fits(kN0, Whole(3), kAllGpus));
}

TEST(LowestFullyFreeGpusTest, PicksLowestIndicesOrNothing) {
  ClusterSnapshot c = MakeCluster({{32000, 65536, 4, "T4"}, {1000, 1000, 0, ""}});
  ASSERT_TRUE(Occupy(c, 0, 1, 1).ok());  // {1000, 999, 1000, 1000}
  EXPECT_EQ(LowestFullyFreeGpus(c, kN0, 1), 0b0001u);
  EXPECT_EQ(LowestFullyFreeGpus(c, kN0, 2), 0b0101u);
  EXPECT_EQ(LowestFullyFreeGpus(c, kN0, 3), 0b1101u);
  EXPECT_EQ(LowestFullyFreeGpus(c, kN0, 4), 0u);  // only three are fully free
  EXPECT_EQ(LowestFullyFreeGpus(c, kN0, 0), 0u);
  EXPECT_EQ(LowestFullyFreeGpus(c, NodeIndex{1}, 1), 0u);  // no GPUs
}

TEST(LowestFullyFreeGpusTest, SixteenGpus) {
  ClusterSnapshot c = MakeCluster({{32000, 65536, 16, "H100-80GB"}});
  EXPECT_EQ(LowestFullyFreeGpus(c, kN0, 16), 0xFFFFu);
  ASSERT_TRUE(Occupy(c, 0, 15, 1000).ok());
  EXPECT_EQ(LowestFullyFreeGpus(c, kN0, 15), 0x7FFFu);
  EXPECT_EQ(LowestFullyFreeGpus(c, kN0, 16), 0u);
}

}  // namespace
}  // namespace tessera::placement
