#include "tessera/core/gpu_model.h"

#include <bit>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(GpuModelCatalogTest, BuiltinHasNoDuplicates) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  ASSERT_GT(cat.size(), 0u);
  ASSERT_LE(cat.size(), GpuModelCatalog::kMaxModels);
  std::set<std::string> names;
  for (uint32_t i = 0; i < cat.size(); ++i) {
    const std::string& name = cat.info(GpuModelId{i}).name;
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
  }
  EXPECT_EQ(names.size(), cat.size());
}

TEST(GpuModelCatalogTest, BuiltinContainsTraceAndDataCentreModels) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  for (const char* name : {"G1", "G2", "G3", "T4", "P100", "V100M16", "V100M32", "A10", "H100-80GB",
                           "A100-40GB", "A100-80GB"}) {
    StatusOr<GpuModelId> id = cat.Find(name);
    ASSERT_TRUE(id.ok()) << name << ": " << id.status().ToString();
    EXPECT_EQ(cat.info(*id).name, name);
  }
}

TEST(GpuModelCatalogTest, BuiltinMemoryFacts) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  EXPECT_EQ(cat.info(*cat.Find("V100M32")).memory, MiB{32 * 1024});
  EXPECT_EQ(cat.info(*cat.Find("V100M16")).memory, MiB{16 * 1024});
  EXPECT_EQ(cat.info(*cat.Find("H100-80GB")).memory, MiB{81559});  // nvidia-smi total, observed
  EXPECT_EQ(cat.info(*cat.Find("G2")).memory, MiB{0});  // undisclosed
}

TEST(GpuModelCatalogTest, BuiltinIsOneObject) {
  EXPECT_EQ(&GpuModelCatalog::Builtin(), &GpuModelCatalog::Builtin());
}

TEST(GpuModelCatalogTest, FindUnknownIsNotFoundListingKnownNames) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  StatusOr<GpuModelId> id = cat.Find("H100");
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(id.status().message(), HasSubstr("'H100'"));
  EXPECT_THAT(id.status().message(), HasSubstr(cat.KnownNames()));
  EXPECT_THAT(id.status().message(), HasSubstr("V100M32"));
  // Case matters.
  EXPECT_EQ(cat.Find("t4").status().code(), StatusCode::kNotFound);
}

TEST(GpuModelCatalogTest, KnownNamesAreSortedAndCommaSeparated) {
  GpuModelCatalog cat;
  EXPECT_EQ(cat.KnownNames(), "");
  ASSERT_TRUE(cat.Add({"T4", MiB{16384}, ""}).ok());
  ASSERT_TRUE(cat.Add({"A10", MiB{24576}, ""}).ok());
  ASSERT_TRUE(cat.Add({"G1", MiB{0}, ""}).ok());
  EXPECT_EQ(cat.KnownNames(), "A10, G1, T4");
  // Ids follow insertion order, not name order.
  EXPECT_EQ(*cat.Find("T4"), GpuModelId{0});
  EXPECT_EQ(*cat.Find("A10"), GpuModelId{1});
  EXPECT_EQ(*cat.Find("G1"), GpuModelId{2});
}

TEST(GpuModelCatalogTest, ParseModelListTwoModels) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  StatusOr<ModelMask> mask = cat.ParseModelList("V100M16|V100M32");
  ASSERT_TRUE(mask.ok()) << mask.status().ToString();
  EXPECT_EQ(std::popcount(*mask), 2);
  EXPECT_EQ(*mask, ModelBit(*cat.Find("V100M16")) | ModelBit(*cat.Find("V100M32")));
}

TEST(GpuModelCatalogTest, ParseModelListSingleAndRepeated) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  EXPECT_EQ(*cat.ParseModelList("T4"), ModelBit(*cat.Find("T4")));
  EXPECT_EQ(*cat.ParseModelList("T4|T4"), ModelBit(*cat.Find("T4")));
}

TEST(GpuModelCatalogTest, ParseModelListEmptyIsAnyModel) {
  StatusOr<ModelMask> mask = GpuModelCatalog::Builtin().ParseModelList("");
  ASSERT_TRUE(mask.ok());
  EXPECT_EQ(*mask, 0u);
}

TEST(GpuModelCatalogTest, ParseModelListUnknownNameFails) {
  StatusOr<ModelMask> mask = GpuModelCatalog::Builtin().ParseModelList("X");
  ASSERT_FALSE(mask.ok());
  EXPECT_EQ(mask.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(mask.status().message(), HasSubstr("'X'"));
  StatusOr<ModelMask> second = GpuModelCatalog::Builtin().ParseModelList("T4|X");
  EXPECT_EQ(second.status().code(), StatusCode::kNotFound);
}

TEST(GpuModelCatalogTest, ParseModelListEmptyElementFails) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  for (const char* list : {"T4||A10", "|T4", "T4|", "|"}) {
    StatusOr<ModelMask> mask = cat.ParseModelList(list);
    ASSERT_FALSE(mask.ok()) << list;
    EXPECT_EQ(mask.status().code(), StatusCode::kInvalidArgument) << list;
    EXPECT_THAT(mask.status().message(), HasSubstr(list));
  }
  // Unknown names around the empty element still fail.
  EXPECT_FALSE(cat.ParseModelList("A||B").ok());
}

TEST(GpuModelCatalogTest, AddAssignsNextIdAndRejectsDuplicates) {
  GpuModelCatalog cat = GpuModelCatalog::Builtin();
  const size_t before = cat.size();
  ASSERT_TRUE(cat.Add({"MI300X", MiB{192 * 1024}, "AMD"}).ok());
  EXPECT_EQ(cat.size(), before + 1);
  EXPECT_EQ(*cat.Find("MI300X"), GpuModelId{static_cast<uint32_t>(before)});
  EXPECT_EQ(cat.info(*cat.Find("MI300X")).memory, MiB{192 * 1024});

  Status dup = cat.Add({"T4", MiB{1}, "again"});
  EXPECT_EQ(dup.code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(dup.message(), HasSubstr("T4"));
  EXPECT_EQ(cat.size(), before + 1);
  EXPECT_EQ(cat.info(*cat.Find("T4")).memory, MiB{15360});  // unchanged
  // The built-in catalog is untouched by the copy's additions.
  EXPECT_FALSE(GpuModelCatalog::Builtin().Find("MI300X").ok());
}

TEST(GpuModelCatalogTest, AddRejectsEmptyName) {
  GpuModelCatalog cat;
  EXPECT_EQ(cat.Add({"", MiB{0}, ""}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(cat.size(), 0u);
}

TEST(GpuModelCatalogTest, SixtyFourModelsAtMost) {
  GpuModelCatalog cat;
  for (size_t i = 0; i < GpuModelCatalog::kMaxModels; ++i) {
    std::string name = "M";
    name += std::to_string(i);  // (not "M" + ...: GCC 12 warns falsely with -Wrestrict)
    ASSERT_TRUE(cat.Add({name, MiB{0}, ""}).ok()) << i;
  }
  EXPECT_EQ(cat.size(), 64u);
  Status full = cat.Add({"M64", MiB{0}, ""});
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(cat.size(), 64u);
  EXPECT_FALSE(cat.Find("M64").ok());
  // The 64th model takes the top bit of the mask.
  EXPECT_EQ(*cat.ParseModelList("M63"), ModelMask{1} << 63);
  EXPECT_EQ(*cat.ParseModelList("M0|M63"), (ModelMask{1} << 63) | 1u);
}

TEST(GpuModelCatalogTest, ModelBit) {
  EXPECT_EQ(ModelBit(GpuModelId{0}), 1u);
  EXPECT_EQ(ModelBit(GpuModelId{5}), 32u);
  EXPECT_EQ(ModelBit(GpuModelId{63}), ModelMask{1} << 63);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(GpuModelCatalogMigTest, EveryIssueModelHasMigFactsAndNonMigModelsHaveNone) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  for (const char* name : {"A30-24GB", "A100-40GB", "A100-80GB", "H100-80GB", "H100-NVL-94GB", "H200-141GB",
                           "B200-180GB", "GH200-96GB"}) {
    auto id = cat.Find(name);
    ASSERT_TRUE(id.ok()) << name;
    const GpuModelInfo& m = cat.info(*id);
    ASSERT_TRUE(m.mig.has_value()) << name;
    EXPECT_GT(m.sm_count, 0) << name;
    EXPECT_FALSE(m.mig->profiles.empty()) << name;
  }
  for (const char* name : {"T4", "V100", "P100", "A10", "G2", "G3"}) {
    EXPECT_FALSE(cat.info(*cat.Find(name)).mig.has_value()) << name;
  }
}

TEST(GpuModelCatalogMigTest, H100ProfilesMatchTheMigUserGuide) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  const MigGeometry& g = *cat.info(*cat.Find("H100-80GB")).mig;
  EXPECT_EQ(g.compute_slices, 7);
  EXPECT_EQ(g.memory_slices, 8);
  EXPECT_EQ(g.max_gpu_instances, 7);
  const MigProfile* p3 = g.FindProfile("3g.40gb");
  ASSERT_NE(p3, nullptr);
  EXPECT_EQ(p3->starts, (std::vector<int>{0, 4}));
  EXPECT_EQ(p3->size, 4);
  EXPECT_EQ(p3->max_count, 2);
  EXPECT_EQ(p3->nvml_profile_index, 2);  // NVML_GPU_INSTANCE_PROFILE_3_SLICE
  EXPECT_EQ(p3->profile_id, 9);
  const MigProfile* p1 = g.FindProfile("1g.20gb");
  ASSERT_NE(p1, nullptr);
  EXPECT_EQ(p1->starts, (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(p1->nvml_profile_index, 9);  // NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2
  const MigProfile* p7 = g.FindProfile("7g.80gb");
  ASSERT_NE(p7, nullptr);
  EXPECT_EQ(p7->size, 8);
  EXPECT_EQ(p7->compute_slices, 7);
  EXPECT_EQ(g.FindProfile("5g.50gb"), nullptr);
}

TEST(GpuModelCatalogMigTest, A30HasFourSlices) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  const MigGeometry& g = *cat.info(*cat.Find("A30-24GB")).mig;
  EXPECT_EQ(g.compute_slices, 4);
  EXPECT_EQ(g.memory_slices, 4);
  ASSERT_NE(g.FindProfile("2g.12gb"), nullptr);
  EXPECT_EQ(g.FindProfile("2g.12gb")->starts, (std::vector<int>{0, 2}));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

TEST(GpuModelCatalogVgpuTest, CSeriesTypesComeWithFramebufferAndMaxPerGpu) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  const GpuModelInfo& h100 = cat.info(*cat.Find("H100-80GB"));
  const VgpuProfile* twenty = nullptr;
  for (const VgpuProfile& v : h100.vgpu) {
    if (v.name == "H100-20C") twenty = &v;
  }
  ASSERT_NE(twenty, nullptr);
  EXPECT_EQ(twenty->framebuffer, MiB{20480});
  EXPECT_EQ(twenty->max_per_gpu, 4);
  for (const char* name : {"A30-24GB", "A100-40GB", "A100-80GB", "H100-NVL-94GB", "H200-141GB"}) {
    EXPECT_FALSE(cat.info(*cat.Find(name)).vgpu.empty()) << name;
  }
  EXPECT_TRUE(cat.info(*cat.Find("T4")).vgpu.empty());
}

// The names nvmlDeviceGetName reports (and the fake NVML of tests/testing reports) are model
// names wherever a model name is accepted.
TEST(GpuModelCatalogTest, NvmlDeviceNamesFindTheirModel) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  const std::pair<const char*, const char*> cases[] = {
      {"NVIDIA A100-SXM4-40GB", "A100-40GB"}, {"NVIDIA A100-PCIE-40GB", "A100-40GB"},
      {"NVIDIA A100-SXM4-80GB", "A100-80GB"}, {"NVIDIA H100 80GB HBM3", "H100-80GB"},
      {"NVIDIA H100 PCIe", "H100-80GB"},      {"NVIDIA H100 NVL", "H100-NVL-94GB"},
      {"NVIDIA H200", "H200-141GB"},          {"NVIDIA A30", "A30-24GB"},
      {"Tesla V100-SXM2-32GB", "V100M32"},    {"Tesla T4", "T4"},
      {"NVIDIA A10", "A10"},                  {"NVIDIA B200-180GB", "B200-180GB"},
  };
  for (const auto& [nvml, model] : cases) {
    StatusOr<GpuModelId> by_nvml = cat.FindByNvmlName(nvml);
    ASSERT_TRUE(by_nvml.ok()) << nvml << ": " << by_nvml.status().message();
    EXPECT_EQ(cat.info(*by_nvml).name, model) << nvml;
    StatusOr<GpuModelId> found = cat.Find(nvml);
    ASSERT_TRUE(found.ok()) << nvml;
    EXPECT_EQ(*found, *by_nvml) << nvml;
  }
  EXPECT_EQ(cat.FindByNvmlName("NVIDIA X9000").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cat.FindByNvmlName("H100-80GB").status().code(), StatusCode::kNotFound);  // not an NVML name
  EXPECT_EQ(cat.Find("NVIDIA X9000").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera
