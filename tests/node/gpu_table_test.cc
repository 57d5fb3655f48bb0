// The node's GPU table (tessera/node/gpu_table.h): what the node side writes, what a task reads.
#include "tessera/node/gpu_table.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/sim_test_util.h"

namespace tessera::node {
namespace {

using ::testing::HasSubstr;
using tessera::testing::TempDir;

TEST(GpuTable, RoundTripsWhatItWrites) {
  TempDir dir;
  const std::vector<NodeGpuFacts> gpus = {
      {.index = 0, .uuid = "GPU-a", .minor = 3, .memory_mib = 40537, .model = "A100-40GB"},
      {.index = 2, .uuid = "", .minor = -1, .memory_mib = 0, .mig_enabled = true},
      {.index = 3, .uuid = "GPU-c", .minor = 4, .memory_mib = 81559, .mig_enabled = true, .model = "H100-80GB",
       .mig_instances = {{.gpu_instance_id = 2, .compute_instance_id = 0, .uuid = "MIG-b", .profile = "3g.40gb",
                          .memory_mib = 40192},
                         {.gpu_instance_id = 1, .compute_instance_id = 0, .uuid = "", .profile = "profile99"}}}};
  ASSERT_TRUE(WriteGpuTable(dir.path(), gpus).ok());
  StatusOr<std::optional<std::vector<NodeGpuFacts>>> read = ReadGpuTable(dir.path());
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_TRUE(read->has_value());
  EXPECT_EQ(**read, gpus);
  EXPECT_EQ(GpuFactsOf(**read, 2)->minor, -1);
  EXPECT_FALSE(GpuFactsOf(**read, 1).has_value());
  struct stat st {};
  ASSERT_EQ(::stat(GpuTablePath(dir.path()).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0022, 0u);  // only the node side writes it
}

TEST(GpuTable, NoTableIsNoneAndNotAnError) {
  TempDir dir;
  StatusOr<std::optional<std::vector<NodeGpuFacts>>> read = ReadGpuTable(dir.path());
  ASSERT_TRUE(read.ok());
  EXPECT_FALSE(read->has_value());
  EXPECT_TRUE(RemoveGpuTable(dir.path()).ok());
}

TEST(GpuTable, ParseErrorsNameTheLineAndTheField) {
  const auto error = [](std::string_view text) {
    return std::string(ParseGpuTable(text, "gpus.tsv").status().message());
  };
  EXPECT_EQ(error("# c\n0\tGPU-a\t0\n"),
            "gpus.tsv:2: expected 6 tab-separated fields (index, uuid, minor, memory_mib, mig, model), got 3");
  EXPECT_THAT(error("0\tGPU-a\t0\t1\tyes\n"), HasSubstr("gpus.tsv:1: mig 'yes' is neither 'mig' nor '-'"));
  // A table of version 1 (four fields, written by an earlier node side) reads as MIG off.
  EXPECT_FALSE(ParseGpuTable("0\tGPU-a\t0\t1\n", "t")->front().mig_enabled);
  // One of version 2 (five fields) reads with the model unknown.
  StatusOr<std::vector<NodeGpuFacts>> v2 = ParseGpuTable("# tessera gpu table 2\n0\tGPU-a\t0\t1\tmig\n", "t");
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->front(), (NodeGpuFacts{.index = 0, .uuid = "GPU-a", .minor = 0, .memory_mib = 1, .mig_enabled = true}));
  EXPECT_THAT(error("0\tGPU-a\t0\t1\t-\t\n"), HasSubstr("gpus.tsv:1: model is empty"));
  EXPECT_THAT(error("x\tGPU-a\t0\t1\n"), HasSubstr("gpus.tsv:1: index 'x' is not a GPU index"));
  EXPECT_THAT(error("0\t\t0\t1\n"), HasSubstr("gpus.tsv:1: uuid is empty"));
  EXPECT_THAT(error("0\tGPU-a\t-2\t1\n"), HasSubstr("gpus.tsv:1: minor '-2'"));
  EXPECT_THAT(error("0\tGPU-a\t0\t1.5\n"), HasSubstr("gpus.tsv:1: memory_mib '1.5'"));
  EXPECT_THAT(error("0\tGPU-a\t0\t1\n0\tGPU-b\t1\t1\n"), HasSubstr("gpus.tsv:2: GPU 0 is listed twice"));
  // MIG instance lines (version 3).
  const std::string mig_gpu = "1\tGPU-b\t1\t80\tmig\tH100-80GB\n";
  EXPECT_EQ(error(mig_gpu + "mig\t1\t1\t0\tMIG-a\t3g.40gb\n"),
            "gpus.tsv:2: expected 7 tab-separated fields for a MIG instance (mig, gpu, gpu_instance, "
            "compute_instance, uuid, profile, memory_mib), got 6");
  EXPECT_THAT(error(mig_gpu + "mig\t2\t1\t0\tMIG-a\t3g.40gb\t40\n"),
              HasSubstr("gpus.tsv:2: gpu 2 is not listed above its MIG instance"));
  EXPECT_THAT(error("1\tGPU-b\t1\t80\t-\tH100-80GB\nmig\t1\t1\t0\tMIG-a\t3g.40gb\t40\n"),
              HasSubstr("gpus.tsv:2: gpu 1 is not in MIG mode"));
  EXPECT_THAT(error(mig_gpu + "mig\t1\tx\t0\tMIG-a\t3g.40gb\t40\n"), HasSubstr("gpus.tsv:2: gpu_instance 'x'"));
  EXPECT_THAT(error(mig_gpu + "mig\t1\t1\t-1\tMIG-a\t3g.40gb\t40\n"), HasSubstr("gpus.tsv:2: compute_instance '-1'"));
  EXPECT_THAT(error(mig_gpu + "mig\t1\t1\t0\t\t3g.40gb\t40\n"), HasSubstr("gpus.tsv:2: uuid is empty"));
  EXPECT_THAT(error(mig_gpu + "mig\t1\t1\t0\tMIG-a\t\t40\n"), HasSubstr("gpus.tsv:2: profile is empty"));
  EXPECT_THAT(error(mig_gpu + "mig\t1\t1\t0\tMIG-a\t3g.40gb\t4e1\n"), HasSubstr("gpus.tsv:2: memory_mib '4e1'"));
  StatusOr<std::vector<NodeGpuFacts>> crlf = ParseGpuTable("1\t-\t1\t80\r\n", "t");
  ASSERT_TRUE(crlf.ok());
  EXPECT_EQ(crlf->front(), (NodeGpuFacts{.index = 1, .uuid = "", .minor = 1, .memory_mib = 80}));
  // A control byte in a name would not read back as itself (found by gpu_table_fuzzer: a model
  // ending in two '\r', one of which the CRLF rule strips on the second read).
  EXPECT_THAT(error("0\tGPU-a\t0\t1\t-\tA100\r\r\n"), HasSubstr("gpus.tsv:1: model has a control character (byte 13)"));
  EXPECT_THAT(error(std::string("0\tGPU-\0\t0\t1\n", 13)), HasSubstr("gpus.tsv:1: uuid has a control character (byte 0)"));
  EXPECT_THAT(error(mig_gpu + "mig\t1\t1\t0\tMIG-a\t3g\x01\t40\n"),
              HasSubstr("gpus.tsv:2: profile has a control character (byte 1)"));
}

// The node side publishes NVML's facts (fake NVML: UUIDs by index, GPU 1 at minor 7); when NVML
// cannot be loaded the table of an earlier run is removed, not left stale.
TEST(GpuTable, PublishWritesNvmlsFactsAndRemovesAStaleTableWhenNvmlFails) {
  TempDir dir;
  ::setenv("TESSERA_FAKE_NVML_CONFIG", "A100-40GB,A100-40GB:minor=7,A100-40GB:mig=1", 1);
  ASSERT_TRUE(PublishGpuTable(dir.path(), TESSERA_FAKE_NVML_PATH, {1, 2}).ok());
  ::unsetenv("TESSERA_FAKE_NVML_CONFIG");
  StatusOr<std::optional<std::vector<NodeGpuFacts>>> read = ReadGpuTable(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value());
  ASSERT_EQ((*read)->size(), 2u);
  EXPECT_EQ((*read)->front(), (NodeGpuFacts{.index = 1, .uuid = "GPU-fa4e0000-0000-4000-8000-000000000001", .minor = 7,
                                            .memory_mib = 40537, .model = "A100-40GB"}));
  EXPECT_TRUE((*read)->back().mig_enabled);
  EXPECT_FALSE(PublishGpuTable(dir.path(), "/nonexistent/libnvidia-ml.so.1", {0}).ok());
  EXPECT_EQ(::access(GpuTablePath(dir.path()).c_str(), F_OK), -1);
}

// A MIG GPU's instances go into the table in the order Slurm numbers them (by GPU instance
// placement, then compute instance), each with its MIG device UUID, profile and memory, whatever
// order they were created in.
TEST(GpuTable, PublishListsEachMigGpusInstancesInPlacementOrderWithTheirUuids) {
  TempDir dir;
  ::setenv("TESSERA_FAKE_NVML_CONFIG", "A100-40GB,A100-40GB:mig=1", 1);
  enforce::DlopenNvml nvml({.library_path = TESSERA_FAKE_NVML_PATH});
  ASSERT_TRUE(nvml.Init().ok());
  StatusOr<enforce::GpuInstance> high = nvml.CreateGpuInstance(1, 9, {.start = 4, .size = 4});  // 3g.20gb@4
  StatusOr<enforce::GpuInstance> low = nvml.CreateGpuInstance(1, 9, {.start = 0, .size = 4});   // 3g.20gb@0
  ASSERT_TRUE(high.ok() && low.ok());
  ASSERT_TRUE(nvml.CreateComputeInstance(1, high->id, 2).ok());
  ASSERT_TRUE(nvml.CreateComputeInstance(1, low->id, 2).ok());
  StatusOr<std::vector<enforce::MigDevice>> devices = nvml.MigDevices(1);
  ASSERT_TRUE(PublishGpuTable(dir.path(), nvml, {}).ok());
  (void)nvml.Shutdown();
  ::unsetenv("TESSERA_FAKE_NVML_CONFIG");
  ASSERT_TRUE(devices.ok() && devices->size() == 2u);
  StatusOr<std::optional<std::vector<NodeGpuFacts>>> read = ReadGpuTable(dir.path());
  ASSERT_TRUE(read.ok() && read->has_value()) << read.status().ToString();
  ASSERT_EQ((*read)->size(), 2u);
  EXPECT_TRUE((*read)->front().mig_instances.empty());
  const NodeGpuFacts& mig = (*read)->back();
  EXPECT_EQ(mig.model, "A100-40GB");
  ASSERT_EQ(mig.mig_instances.size(), 2u);
  EXPECT_EQ(mig.mig_instances[0].gpu_instance_id, static_cast<int>(low->id));
  EXPECT_EQ(mig.mig_instances[1].gpu_instance_id, static_cast<int>(high->id));
  for (const MigInstanceFacts& m : mig.mig_instances) {
    EXPECT_EQ(m.profile, "3g.20gb");
    EXPECT_GT(m.memory_mib, 19000u);
    EXPECT_LT(m.memory_mib, 20480u);
    bool listed = false;
    for (const enforce::MigDevice& d : *devices) {
      listed |= d.uuid == m.uuid && static_cast<int>(d.gpu_instance_id) == m.gpu_instance_id;
    }
    EXPECT_TRUE(listed) << m.uuid;
  }
  EXPECT_EQ(mig.mig_instances[0].uuid.rfind("MIG-", 0), 0u);
}

}  // namespace
}  // namespace tessera::node
