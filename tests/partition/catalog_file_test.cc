// Adding GPU models from a file with the schema of data/gpu-models/mig-profiles.json.
#include "tessera/partition/catalog_file.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tessera/partition/mig_layout.h"

namespace tessera::partition {
namespace {

std::string ReadShipped() {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/data/gpu-models/mig-profiles.json");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const char* kOneModel = R"({"gpus":[{"model":"X100-96GB","compute_slices":7,"memory_slices":8,
  "max_gpu_instances":7,"specs":{"memory_gb":96,"sm_count":132},
  "gpu_instance_profiles":[
    {"name":"1g.12gb","nvml_profile_index":"NVML_GPU_INSTANCE_PROFILE_1_SLICE","profile_id":19,
     "compute_slices":1,"memory_slices":1,"max_count":7,"memory_gb_nominal":12,
     "placements":{"starts":[0,1,2,3,4,5,6],"size":1}},
    {"name":"7g.96gb","nvml_profile_index":4,"compute_slices":7,"memory_slices":8,"max_count":1,
     "memory_gb_nominal":96,"placements":{"starts":[0],"size":8}}]}]})";

TEST(CatalogFileTest, TheShippedFileParsesToTheBuiltInFacts) {
  auto models = ParseGpuModelsJson(ReadShipped(), "mig-profiles.json");
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  ASSERT_EQ(models->size(), 8u);
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  for (const GpuModelInfo& m : *models) {
    // The shipped file names A100-40GB "A100-SXM4-40GB"; the catalog uses the short name.
    const std::string name = m.name == "A100-SXM4-40GB" ? "A100-40GB" : m.name;
    const GpuModelInfo& b = cat.info(*cat.Find(name));
    ASSERT_TRUE(m.mig && b.mig) << name;
    EXPECT_EQ(m.memory, b.memory) << name;
    ASSERT_EQ(m.mig->profiles.size(), b.mig->profiles.size()) << name;
    for (size_t i = 0; i < m.mig->profiles.size(); ++i) {
      const MigProfile& x = m.mig->profiles[i];
      const MigProfile& y = b.mig->profiles[i];
      EXPECT_EQ(x.name, y.name);
      EXPECT_EQ(x.nvml_profile_index, y.nvml_profile_index) << name << " " << x.name;
      EXPECT_EQ(x.starts, y.starts) << name << " " << x.name;
      EXPECT_EQ(x.memory, y.memory) << name << " " << x.name;
      EXPECT_EQ(x.max_count, y.max_count);
    }
  }
}

TEST(CatalogFileTest, AUserModelCanBeAddedAndPlanned) {
  auto models = ParseGpuModelsJson(kOneModel, "x.json");
  ASSERT_TRUE(models.ok()) << models.status().ToString();
  auto cat = CatalogWithModels(*models);
  ASSERT_TRUE(cat.ok());
  const GpuModelInfo& x = cat->info(*cat->Find("X100-96GB"));
  EXPECT_EQ(x.memory, MiB{96 * 1024});
  EXPECT_EQ(x.mig->profiles[1].nvml_profile_index, 4);
  EXPECT_EQ(x.mig->profiles[0].memory, MiB{12 * 1024});
  EXPECT_EQ(EnumerateMaximalLayouts(*x.mig).size(), 2u);  // 7 x 1g, or 7g
  // A model the catalog already has is refused.
  auto dup = CatalogWithModels(*ParseGpuModelsJson(ReadShipped(), "mig-profiles.json"));
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
}

TEST(CatalogFileTest, ErrorsNameTheFileAndTheField) {
  auto err = [](const std::string& text) {
    auto r = ParseGpuModelsJson(text, "x.json");
    return r.ok() ? std::string("OK") : r.status().message();
  };
  EXPECT_EQ(err("{"), "x.json: (document): not valid JSON");
  EXPECT_EQ(err("[]"), "x.json: (document): expected an object with a \"gpus\" array");
  std::string bad = kOneModel;
  bad.replace(bad.find("[0],\"size\":8"), 12, "[1],\"size\":8");
  EXPECT_EQ(err(bad), "x.json: gpus[0].gpu_instance_profiles[1].placements.starts[0]: start 1 + size 8 passes the 8 "
                      "memory slices");
  bad = kOneModel;
  const std::string seven = "\"compute_slices\":7,\"memory_slices\":8,\"max_count\"";
  bad.replace(bad.find(seven), seven.size(), "\"compute_slices\":9,\"memory_slices\":8,\"max_count\"");
  EXPECT_EQ(err(bad), "x.json: gpus[0].gpu_instance_profiles[1].compute_slices: 9 is outside 1..7");
  bad = kOneModel;
  bad.replace(bad.find("NVML_GPU_INSTANCE_PROFILE_1_SLICE"), 33, "NVML_NOPE");
  EXPECT_EQ(err(bad), "x.json: gpus[0].gpu_instance_profiles[0].nvml_profile_index: unknown NVML profile constant "
                      "'NVML_NOPE'");
  bad = kOneModel;
  bad.replace(bad.find("\"memory_gb\":96"), 14, "\"memory_gb\":-1");
  EXPECT_EQ(err(bad), "x.json: gpus[0].specs: needs memory_gb or nvidia_smi_total_mib > 0");
  EXPECT_EQ(err(R"({"gpus":[]})"), "x.json: gpus: no models");
}

}  // namespace
}  // namespace tessera::partition
