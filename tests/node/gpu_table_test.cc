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
  const std::vector<NodeGpuFacts> gpus = {{.index = 0, .uuid = "GPU-a", .minor = 3, .memory_mib = 40537},
                                          {.index = 2, .uuid = "", .minor = -1, .memory_mib = 0, .mig_enabled = true}};
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
            "gpus.tsv:2: expected 5 tab-separated fields (index, uuid, minor, memory_mib, mig), got 3");
  EXPECT_THAT(error("0\tGPU-a\t0\t1\tyes\n"), HasSubstr("gpus.tsv:1: mig 'yes' is neither 'mig' nor '-'"));
  // A table of version 1 (four fields, written by an earlier node side) reads as MIG off.
  EXPECT_FALSE(ParseGpuTable("0\tGPU-a\t0\t1\n", "t")->front().mig_enabled);
  EXPECT_THAT(error("x\tGPU-a\t0\t1\n"), HasSubstr("gpus.tsv:1: index 'x' is not a GPU index"));
  EXPECT_THAT(error("0\t\t0\t1\n"), HasSubstr("gpus.tsv:1: uuid is empty"));
  EXPECT_THAT(error("0\tGPU-a\t-2\t1\n"), HasSubstr("gpus.tsv:1: minor '-2'"));
  EXPECT_THAT(error("0\tGPU-a\t0\t1.5\n"), HasSubstr("gpus.tsv:1: memory_mib '1.5'"));
  EXPECT_THAT(error("0\tGPU-a\t0\t1\n0\tGPU-b\t1\t1\n"), HasSubstr("gpus.tsv:2: GPU 0 is listed twice"));
  StatusOr<std::vector<NodeGpuFacts>> crlf = ParseGpuTable("1\t-\t1\t80\r\n", "t");
  ASSERT_TRUE(crlf.ok());
  EXPECT_EQ(crlf->front(), (NodeGpuFacts{.index = 1, .uuid = "", .minor = 1, .memory_mib = 80}));
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
  EXPECT_EQ((*read)->front(),
            (NodeGpuFacts{.index = 1, .uuid = "GPU-fa4e0000-0000-4000-8000-000000000001", .minor = 7, .memory_mib = 40537}));
  EXPECT_TRUE((*read)->back().mig_enabled);
  EXPECT_FALSE(PublishGpuTable(dir.path(), "/nonexistent/libnvidia-ml.so.1", {0}).ok());
  EXPECT_EQ(::access(GpuTablePath(dir.path()).c_str(), F_OK), -1);
}

}  // namespace
}  // namespace tessera::node
