// The catalog's compute-instance profiles (per GPU-instance profile) and the vGPU C-series
// types' scheduler kinds and MIG backing, as generated from data/gpu-models/.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tessera/core/gpu_model.h"

namespace tessera {
namespace {

const GpuModelInfo& Model(const std::string& name) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  return cat.info(*cat.Find(name));
}

std::vector<std::string> CiNames(const MigProfile& p) {
  std::vector<std::string> out;
  for (const MigComputeProfile& c : p.compute_profiles) out.push_back(c.name);
  return out;
}

TEST(MigComputeInstanceStartsTest, FollowsTheGoNvmlPlacementTable) {
  EXPECT_EQ(MigComputeInstanceStarts(7, 1), (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(MigComputeInstanceStarts(7, 2), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(MigComputeInstanceStarts(7, 3), (std::vector<int>{0, 4}));
  EXPECT_EQ(MigComputeInstanceStarts(7, 4), (std::vector<int>{0}));
  EXPECT_EQ(MigComputeInstanceStarts(7, 7), (std::vector<int>{0}));
  EXPECT_EQ(MigComputeInstanceStarts(4, 2), (std::vector<int>{0, 2}));
  EXPECT_EQ(MigComputeInstanceStarts(3, 2), (std::vector<int>{0}));
  EXPECT_EQ(MigComputeInstanceStarts(3, 3), (std::vector<int>{0}));
  EXPECT_TRUE(MigComputeInstanceStarts(2, 3).empty());
  EXPECT_TRUE(MigComputeInstanceStarts(4, 0).empty());
}

TEST(MigComputeProfileTest, H100ThreeSliceInstanceSplitsIntoOneTwoOrThreeSlices) {
  const MigProfile* three = Model("H100-80GB").mig->FindProfile("3g.40gb");
  ASSERT_NE(three, nullptr);
  EXPECT_EQ(CiNames(*three), (std::vector<std::string>{"1c.3g.40gb", "2c.3g.40gb", "3c.3g.40gb"}));
  const MigComputeProfile* one = three->FindComputeProfile("1c.3g.40gb");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->compute_slices, 1);
  EXPECT_EQ(one->nvml_profile_index, 0);
  EXPECT_EQ(one->max_count, 3);
  EXPECT_EQ(one->starts, (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(one->fills_gpu_instance);
  const MigComputeProfile* full = three->FindComputeProfile("3c.3g.40gb");
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(full->nvml_profile_index, 2);
  EXPECT_TRUE(full->fills_gpu_instance);
  EXPECT_EQ(three->multiprocessors, 60);  // observed -lgip
  EXPECT_EQ(three->FindComputeProfile("4c.3g.40gb"), nullptr);
}

TEST(MigComputeProfileTest, FourSliceInstanceHasNoThreeSliceComputeInstance) {
  const MigProfile* four = Model("A100-40GB").mig->FindProfile("4g.20gb");
  ASSERT_NE(four, nullptr);
  EXPECT_EQ(CiNames(*four), (std::vector<std::string>{"1c.4g.20gb", "2c.4g.20gb", "4c.4g.20gb"}));
  EXPECT_EQ(four->FindComputeProfile("2c.4g.20gb")->starts, (std::vector<int>{0, 2}));
  EXPECT_EQ(four->FindComputeProfile("4c.4g.20gb")->nvml_profile_index, 3);
}

TEST(MigComputeProfileTest, SevenSliceInstanceOffersFiveSizes) {
  const MigProfile* seven = Model("H200-141GB").mig->FindProfile("7g.141gb");
  ASSERT_NE(seven, nullptr);
  std::vector<int> sizes, indexes, counts;
  for (const MigComputeProfile& c : seven->compute_profiles) {
    sizes.push_back(c.compute_slices);
    indexes.push_back(c.nvml_profile_index);
    counts.push_back(c.max_count);
  }
  EXPECT_EQ(sizes, (std::vector<int>{1, 2, 3, 4, 7}));
  EXPECT_EQ(indexes, (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_EQ(counts, (std::vector<int>{7, 3, 2, 1, 1}));
}

// Invariants over every GI profile of every model: exactly one CI fills the GI; each CI's
// starts are the rule's, as many as its max count, inside the GI; names are "<n>c.<gi>".
TEST(MigComputeProfileTest, EveryGpuInstanceProfileHasConsistentComputeProfiles) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  int checked = 0;
  for (size_t i = 0; i < cat.size(); ++i) {
    const GpuModelInfo& m = cat.info(GpuModelId(static_cast<uint32_t>(i)));
    if (!m.mig) continue;
    EXPECT_FALSE(m.mig->compute_profile_status.empty()) << m.name;
    for (const MigProfile& p : m.mig->profiles) {
      SCOPED_TRACE(m.name + " " + p.name);
      ASSERT_FALSE(p.compute_profiles.empty());
      int fills = 0;
      for (const MigComputeProfile& c : p.compute_profiles) {
        EXPECT_EQ(c.name, std::to_string(c.compute_slices) + "c." + p.name);
        EXPECT_EQ(c.starts, MigComputeInstanceStarts(p.compute_slices, c.compute_slices));
        EXPECT_EQ(static_cast<int>(c.starts.size()), c.max_count);
        EXPECT_LE(c.compute_slices, p.compute_slices);
        if (c.fills_gpu_instance) {
          ++fills;
          EXPECT_EQ(c.compute_slices, p.compute_slices);
        }
        ++checked;
      }
      EXPECT_EQ(fills, 1);
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(VgpuSchedulerTest, TimeSlicedTypesCarryTheSchedulerKinds) {
  const GpuModelInfo& h100 = Model("H100-80GB");
  const VgpuProfile* twenty = nullptr;
  const VgpuProfile* mig_three = nullptr;
  for (const VgpuProfile& v : h100.vgpu) {
    if (v.name == "H100-20C") twenty = &v;
    if (v.name == "H100-3-40C") mig_three = &v;
  }
  ASSERT_NE(twenty, nullptr);
  EXPECT_FALSE(twenty->mig_backed);
  EXPECT_EQ(twenty->schedulers, (std::vector<VgpuScheduler>{VgpuScheduler::kBestEffort,
                                                            VgpuScheduler::kEqualShare,
                                                            VgpuScheduler::kFixedShare}));
  EXPECT_TRUE(twenty->Supports(VgpuScheduler::kFixedShare, /*mixed_size_mode=*/false));
  // Mixed-size mode does not allow fixed share.
  EXPECT_FALSE(twenty->Supports(VgpuScheduler::kFixedShare, /*mixed_size_mode=*/true));
  EXPECT_TRUE(twenty->Supports(VgpuScheduler::kEqualShare, /*mixed_size_mode=*/true));
  EXPECT_EQ(VgpuSchedulerName(VgpuScheduler::kEqualShare), "equal_share");

  ASSERT_NE(mig_three, nullptr);
  EXPECT_TRUE(mig_three->mig_backed);
  EXPECT_EQ(mig_three->gpu_instance_profile, "3g.40gb");
  EXPECT_EQ(mig_three->max_per_gpu, 2);
  EXPECT_EQ(mig_three->framebuffer, MiB{40960});
  EXPECT_TRUE(mig_three->schedulers.empty());  // its own GI: no time slicing
  EXPECT_FALSE(mig_three->Supports(VgpuScheduler::kBestEffort, false));
}

// Every MIG-backed type names a GI profile of its model whose max count it shares.
TEST(VgpuSchedulerTest, MigBackedTypesNameAGpuInstanceProfileOfTheirModel) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  int mig_backed = 0;
  for (size_t i = 0; i < cat.size(); ++i) {
    const GpuModelInfo& m = cat.info(GpuModelId(static_cast<uint32_t>(i)));
    for (const VgpuProfile& v : m.vgpu) {
      SCOPED_TRACE(m.name + " " + v.name);
      if (!v.mig_backed) {
        EXPECT_FALSE(v.schedulers.empty());
        EXPECT_TRUE(v.gpu_instance_profile.empty());
        continue;
      }
      ++mig_backed;
      ASSERT_TRUE(m.mig.has_value());
      const MigProfile* p = m.mig->FindProfile(v.gpu_instance_profile);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(v.max_per_gpu, p->max_count);
      EXPECT_EQ(v.max_per_gpu_mixed, 0);
    }
  }
  EXPECT_GT(mig_backed, 20);
}

}  // namespace
}  // namespace tessera
