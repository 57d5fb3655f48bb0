// Compute-instance profiles in user-supplied GPU model files (catalog_file.h).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tessera/partition/catalog_file.h"

namespace tessera::partition {
namespace {

// One 4-slice GPU (A30-like) with a 1g, a 2g and the 4g.
std::string Model(const std::string& ci_table) {
  return R"({)" + ci_table + R"("gpus":[{"model":"X30-24GB","compute_slices":4,"memory_slices":4,
    "max_gpu_instances":4,"specs":{"memory_gb":24},
    "gpu_instance_profiles":[
      {"name":"1g.6gb","nvml_profile_index":0,"profile_id":14,"compute_slices":1,"memory_slices":1,
       "max_count":4,"memory_gb_nominal":6,"placements":{"starts":[0,1,2,3],"size":1},
       "observed_lgip":[{"memory_mib":5952,"sm":14}]},
      {"name":"2g.12gb","nvml_profile_index":1,"profile_id":5,"compute_slices":2,"memory_slices":2,
       "max_count":2,"memory_gb_nominal":12,"placements":{"starts":[0,2],"size":2}},
      {"name":"4g.24gb","nvml_profile_index":3,"profile_id":0,"compute_slices":4,"memory_slices":4,
       "max_count":1,"memory_gb_nominal":24,"placements":{"starts":[0],"size":4}}]}]})";
}

std::string Err(const std::string& text) {
  auto r = ParseGpuModelsJson(text, "x.json");
  return r.ok() ? std::string("OK") : r.status().message();
}

TEST(CatalogFileComputeTest, WithoutATableTheBuiltInComputeProfilesApply) {
  auto models = ParseGpuModelsJson(Model(""), "x.json");
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  const MigGeometry& g = *(*models)[0].mig;
  const MigProfile& four = g.profiles[2];
  ASSERT_EQ(four.compute_profiles.size(), 3u);  // 1c x4, 2c x2, 4c: no 3c in a 4-slice GI
  EXPECT_EQ(four.compute_profiles[1].name, "2c.4g.24gb");
  EXPECT_EQ(four.compute_profiles[1].starts, (std::vector<int>{0, 2}));
  EXPECT_EQ(four.compute_profiles[1].max_count, 2);
  EXPECT_TRUE(four.compute_profiles[2].fills_gpu_instance);
  EXPECT_EQ(four.compute_profiles[2].nvml_profile_index, 3);
  EXPECT_EQ(g.profiles[0].multiprocessors, 14);
  EXPECT_NE(g.compute_profile_status.find("built-in"), std::string::npos);
}

TEST(CatalogFileComputeTest, TheFilesTableIsUsed) {
  auto models = ParseGpuModelsJson(
      Model(R"("compute_instance_profiles_within_gi":{"by_gi_compute_slices":{
        "1":[{"ci":"1c","max":1}],"2":[{"ci":"2c","max":1,"default":true}],
        "4":[{"ci":"4c","max":1},{"ci":"1c","max":4}]}},)"),
      "x.json");
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  const MigGeometry& g = *(*models)[0].mig;
  ASSERT_EQ(g.profiles[1].compute_profiles.size(), 1u);  // the file offers only 2c in a 2g
  ASSERT_EQ(g.profiles[2].compute_profiles.size(), 2u);
  EXPECT_EQ(g.profiles[2].compute_profiles[0].name, "1c.4g.24gb");  // sorted by size
  EXPECT_TRUE(g.profiles[2].compute_profiles[1].fills_gpu_instance);  // 4c, implicitly
  EXPECT_EQ(g.compute_profile_status, "from x.json");
}

TEST(CatalogFileComputeTest, TheShippedTableEqualsTheBuiltInOne) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/data/gpu-models/mig-profiles.json");
  std::stringstream text;
  text << in.rdbuf();
  auto models = ParseGpuModelsJson(text.str(), "mig-profiles.json");
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  for (const GpuModelInfo& m : *models) {
    const std::string name = m.name == "A100-SXM4-40GB" ? "A100-40GB" : m.name;
    const GpuModelInfo& b = cat.info(*cat.Find(name));
    for (size_t i = 0; i < m.mig->profiles.size(); ++i) {
      const auto& x = m.mig->profiles[i].compute_profiles;
      const auto& y = b.mig->profiles[i].compute_profiles;
      ASSERT_EQ(x.size(), y.size()) << name << " " << m.mig->profiles[i].name;
      for (size_t k = 0; k < x.size(); ++k) {
        EXPECT_EQ(x[k].name, y[k].name);
        EXPECT_EQ(x[k].nvml_profile_index, y[k].nvml_profile_index);
        EXPECT_EQ(x[k].max_count, y[k].max_count);
        EXPECT_EQ(x[k].starts, y[k].starts);
        EXPECT_EQ(x[k].fills_gpu_instance, y[k].fills_gpu_instance);
      }
      EXPECT_EQ(m.mig->profiles[i].multiprocessors, b.mig->profiles[i].multiprocessors);
    }
  }
}

TEST(CatalogFileComputeTest, ErrorsNameTheField) {
  const std::string t = "compute_instance_profiles_within_gi";
  auto table = [&](const std::string& rows) {
    return Model("\"" + t + "\":{\"by_gi_compute_slices\":{" + rows + "}},");
  };
  EXPECT_EQ(Err(Model("\"" + t + "\":[],")), "x.json: " + t + ".by_gi_compute_slices: missing or not an object");
  EXPECT_EQ(Err(table(R"("9":[{"ci":"1c","max":1}])")),
            "x.json: " + t + ".by_gi_compute_slices.9: expected a GPU instance's compute slices 1..8 as the key");
  EXPECT_EQ(Err(table(R"("4":[{"ci":"4x","max":1}])")),
            "x.json: " + t + ".by_gi_compute_slices.4[0].ci: '4x' is not <n>c with n = 1..8");
  EXPECT_EQ(Err(table(R"("2":[{"ci":"3c","max":1}])")),
            "x.json: " + t + ".by_gi_compute_slices.2[0].ci: 3c is larger than the 2-slice GPU instance");
  EXPECT_EQ(Err(table(R"("4":[{"ci":"2c","max":3},{"ci":"4c","max":1}])")),
            "x.json: " + t + ".by_gi_compute_slices.4[0].max: 3 exceeds the 2 placement(s) of a 2c in a "
            "4-slice GPU instance");
  EXPECT_EQ(Err(table(R"("4":[{"ci":"2c","max":"two"}])")),
            "x.json: " + t + ".by_gi_compute_slices.4[0].max: expected an integer, got \"two\"");
  EXPECT_EQ(Err(table(R"("4":[{"ci":"2c","max":1,"default":true}])")),
            "x.json: " + t + ".by_gi_compute_slices.4[0].default: only the 4c compute instance fills the GPU instance");
  EXPECT_EQ(Err(table(R"("4":[{"ci":"2c","max":1}])")),
            "x.json: " + t + ".by_gi_compute_slices.4: needs exactly one compute instance of 4c filling the GPU instance");
  EXPECT_EQ(Err(table(R"("4":[{"ci":"4c","max":1},{"ci":"4c","max":1}])")),
            "x.json: " + t + ".by_gi_compute_slices.4[1].ci: duplicate 4c");
  EXPECT_EQ(Err(table(R"("1":[{"ci":"1c","max":1}],"2":[{"ci":"2c","max":1}],"4":[{"ci":"4c","max":1}])")),
            "OK");
}

}  // namespace
}  // namespace tessera::partition
