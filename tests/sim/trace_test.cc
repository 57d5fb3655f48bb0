#include "tessera/sim/trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tests/testing/builders.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

const GpuModelCatalog& Catalog() { return GpuModelCatalog::Builtin(); }

constexpr const char* kPodHeader = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n";
constexpr const char* kNodeHeader = "sn,cpu_milli,memory_mib,gpu,model\n";

Status PodError(const std::string& rows, const std::string& header = kPodHeader) {
  StatusOr<std::vector<PodRecord>> p = ParsePodList(header + rows, "pods.csv", Catalog());
  EXPECT_FALSE(p.ok()) << "parsed: " << rows;
  if (p.ok()) return Status::Ok();
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << p.status().ToString();
  return p.status();
}

Status NodeError(const std::string& rows, const std::string& header = kNodeHeader) {
  StatusOr<std::vector<placement::NodeSpec>> n = ParseNodeList(header + rows, "nodes.csv", Catalog());
  EXPECT_FALSE(n.ok()) << "parsed: " << rows;
  if (n.ok()) return Status::Ok();
  EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument) << n.status().ToString();
  return n.status();
}

// ---- node lists ------------------------------------------------------------------------------

TEST(TraceNodeListTest, ParsesGpuAndCpuNodes) {
  auto nodes = ParseNodeList(std::string(kNodeHeader) +
                                 "n0,64000,262144,2,P100\n"
                                 "n1,96000,786432,8,G2\n"
                                 "cpu-only,32000,65536,0,\n",
                             "nodes.csv", Catalog());
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 3u);
  const auto& n0 = (*nodes)[0];
  EXPECT_EQ(n0.name, "n0");
  EXPECT_EQ(n0.cpu, CpuMilli{64000});
  EXPECT_EQ(n0.memory, MiB{262144});
  EXPECT_EQ(n0.gpu_count, 2);
  EXPECT_EQ(n0.model, *Catalog().Find("P100"));
  EXPECT_EQ((*nodes)[1].model, *Catalog().Find("G2"));
  EXPECT_EQ((*nodes)[1].gpu_count, 8);
  EXPECT_EQ((*nodes)[2].gpu_count, 0);
  EXPECT_FALSE((*nodes)[2].model.valid());
}

TEST(TraceNodeListTest, ColumnsMayComeInAnyOrderWithExtras) {
  auto nodes = ParseNodeList("model,gpu,extra,sn,memory_mib,cpu_milli\nT4,1,zz,n0,1024,2000\n", "nodes.csv",
                             Catalog());
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ((*nodes)[0].name, "n0");
  EXPECT_EQ((*nodes)[0].cpu, CpuMilli{2000});
  EXPECT_EQ((*nodes)[0].gpu_count, 1);
  EXPECT_EQ((*nodes)[0].model, *Catalog().Find("T4"));
}

TEST(TraceNodeListTest, UnknownModel) {
  Status s = NodeError("n0,64000,262144,2,H999\n");
  EXPECT_THAT(s.message(), StartsWith("nodes.csv:2:19: model: "));
  EXPECT_THAT(s.message(), HasSubstr("H999"));
}

TEST(TraceNodeListTest, GpuNodeWithoutModel) {
  Status s = NodeError("n0,64000,262144,2,P100\nn1,64000,262144,4,\n");
  EXPECT_THAT(s.message(), StartsWith("nodes.csv:3:19: model: "));
  EXPECT_THAT(s.message(), HasSubstr("4 GPUs but no model"));
}

TEST(TraceNodeListTest, BadNumbers) {
  EXPECT_THAT(NodeError("n0,64k,262144,2,P100\n").message(),
              StartsWith("nodes.csv:2:4: cpu_milli: expected an integer, got '64k'"));
  EXPECT_THAT(NodeError("n0,-1,262144,2,P100\n").message(), StartsWith("nodes.csv:2:4: cpu_milli: "));
  EXPECT_THAT(NodeError("n0,-1,262144,2,P100\n").message(), HasSubstr("negative"));
  Status mem = NodeError("n0,64000," + std::to_string(kMaxMemoryMib + 1) + ",2,P100\n");
  EXPECT_THAT(mem.message(), StartsWith("nodes.csv:2:10: memory_mib: "));
  EXPECT_THAT(mem.message(), HasSubstr("absurd"));
  Status gpus = NodeError("n0,64000,262144,17,P100\n");
  EXPECT_THAT(gpus.message(), StartsWith("nodes.csv:2:17: gpu: "));
  EXPECT_THAT(gpus.message(), HasSubstr("absurd"));
  EXPECT_THAT(NodeError("n0,64000,262144,,P100\n").message(), StartsWith("nodes.csv:2:17: gpu: empty value"));
}

TEST(TraceNodeListTest, DuplicateAndEmptyNames) {
  Status dup = NodeError("n0,1,1,0,\nn1,1,1,0,\nn0,1,1,0,\n");
  EXPECT_EQ(dup.message(), "nodes.csv:4:1: sn: duplicate node name 'n0'");
  EXPECT_THAT(NodeError(",1,1,0,\n").message(), StartsWith("nodes.csv:2:1: sn: empty node name"));
}

TEST(TraceNodeListTest, EmptyListAndMissingColumn) {
  EXPECT_THAT(NodeError("").message(), StartsWith("nodes.csv:2:1: node list is empty"));
  Status missing = NodeError("n0,1,1,0\n", "sn,cpu_milli,memory_mib,gpu\n");
  EXPECT_THAT(missing.message(), StartsWith("nodes.csv:1:1: missing column 'model'"));
  EXPECT_THAT(missing.message(), HasSubstr("sn,cpu_milli,memory_mib,gpu"));
}

TEST(TraceNodeListTest, CsvErrorsPassThrough) {
  auto n = ParseNodeList("", "nodes.csv", Catalog());
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(n.status().message(), StartsWith("nodes.csv:1:1: empty file"));
  auto r = ReadNodeList("/nonexistent/dir/nodes.csv", Catalog());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), StartsWith("/nonexistent/dir/nodes.csv:"));
}

// ---- pod lists -------------------------------------------------------------------------------

TEST(TracePodListTest, ParsesPodsWithGpuSpec) {
  auto pods = ParsePodList(std::string(kPodHeader) +
                               "p-cpu,4000,8192,0,0,,BE\n"
                               "p-share,6000,12288,1,460,,LS\n"
                               "p-whole,12000,24576,2,1000,V100M16|V100M32,LS\n"
                               "p-spec,8000,16384,1,1000,T4,LS\n",
                           "pods.csv", Catalog());
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 4u);
  const auto& cpu = (*pods)[0].request;
  EXPECT_EQ((*pods)[0].name, "p-cpu");
  EXPECT_TRUE(cpu.IsCpuOnly());
  EXPECT_EQ(cpu.cpu, CpuMilli{4000});
  EXPECT_EQ(cpu.memory, MiB{8192});
  EXPECT_EQ(cpu.allowed_models, 0u);
  const auto& share = (*pods)[1].request;
  EXPECT_TRUE(share.IsSharing());
  EXPECT_EQ(share.gpu_milli, GpuMilli{460});
  EXPECT_EQ(share.num_gpu, 1);
  const auto& whole = (*pods)[2].request;
  EXPECT_EQ(whole.num_gpu, 2);
  EXPECT_EQ(whole.TotalGpu(), GpuMilli{2000});
  const ModelMask v100s = ModelBit(*Catalog().Find("V100M16")) | ModelBit(*Catalog().Find("V100M32"));
  EXPECT_EQ(whole.allowed_models, v100s);
  EXPECT_EQ(whole.allowed_models, testing::Models("V100M16|V100M32"));
  EXPECT_EQ((*pods)[3].request.allowed_models, ModelBit(*Catalog().Find("T4")));
}

TEST(TracePodListTest, MultigpuStyleFilesHaveNoGpuSpec) {
  auto pods = ParsePodList("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
                           "a,12000,16384,1,1000\n"
                           "b,6000,12288,8,1000\n",
                           "multigpu.csv", Catalog());
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  ASSERT_EQ(pods->size(), 2u);
  EXPECT_EQ((*pods)[1].request.num_gpu, 8);
  EXPECT_EQ((*pods)[1].request.allowed_models, 0u);
}

TEST(TracePodListTest, MalformedInteger) {
  Status s = PodError("p0,12x,1024,1,500,,LS\n");
  EXPECT_EQ(s.message(), "pods.csv:2:4: cpu_milli: expected an integer, got '12x'");
  EXPECT_THAT(PodError("p0, 12,1024,1,500,,LS\n").message(), StartsWith("pods.csv:2:4: cpu_milli: expected"));
  EXPECT_THAT(PodError("p0,1.5,1024,1,500,,LS\n").message(), StartsWith("pods.csv:2:4: cpu_milli: expected"));
  EXPECT_THAT(PodError("p0,,1024,1,500,,LS\n").message(), StartsWith("pods.csv:2:4: cpu_milli: empty value"));
  EXPECT_THAT(PodError("p0,99999999999999999999,1024,1,500,,LS\n").message(),
              StartsWith("pods.csv:2:4: cpu_milli: value '99999999999999999999' is out of range"));
  EXPECT_THAT(PodError("p0,1,1024,one,500,,LS\n").message(), StartsWith("pods.csv:2:11: num_gpu: expected"));
}

TEST(TracePodListTest, NegativeCpu) {
  Status s = PodError("p0,-5,1024,1,500,,LS\n");
  EXPECT_THAT(s.message(), StartsWith("pods.csv:2:4: cpu_milli: "));
  EXPECT_THAT(s.message(), HasSubstr("negative"));
}

TEST(TracePodListTest, AbsurdMemoryAndCpu) {
  Status mem = PodError("p0,1000,2000000000,1,500,,LS\n");
  EXPECT_THAT(mem.message(), StartsWith("pods.csv:2:9: memory_mib: "));
  EXPECT_THAT(mem.message(), HasSubstr("absurd"));
  Status cpu = PodError("p0," + std::to_string(kMaxCpuMilli + 1) + ",1,1,500,,LS\n");
  EXPECT_THAT(cpu.message(), StartsWith("pods.csv:2:4: cpu_milli: "));
  EXPECT_THAT(cpu.message(), HasSubstr("absurd"));
  // The bounds themselves are accepted.
  auto ok = ParsePodList(std::string(kPodHeader) + "p0," + std::to_string(kMaxCpuMilli) + "," +
                             std::to_string(kMaxMemoryMib) + ",0,0,,LS\n",
                         "pods.csv", Catalog());
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
}

TEST(TracePodListTest, MultiGpuTaskMustAskForWholeGpus) {
  // "p0,1000,1024,9,500": gpu_milli starts at column 16.
  Status s = PodError("p0,1000,1024,9,500,,LS\n");
  EXPECT_THAT(s.message(), StartsWith("pods.csv:2:16: gpu_milli: "));
  EXPECT_THAT(s.message(), HasSubstr("9-GPU task must ask for whole GPUs"));
}

TEST(TracePodListTest, GpuMilliOverAWholeGpu) {
  Status s = PodError("p0,1000,1024,1,1200,,LS\n");
  EXPECT_THAT(s.message(), StartsWith("pods.csv:2:16: gpu_milli: "));
  EXPECT_THAT(s.message(), HasSubstr("1200"));
  EXPECT_THAT(s.message(), HasSubstr("absurd"));
}

TEST(TracePodListTest, GpuCountAndShareConsistency) {
  EXPECT_THAT(PodError("p0,1000,1024,17,1000,,LS\n").message(), StartsWith("pods.csv:2:14: num_gpu: "));
  EXPECT_THAT(PodError("p0,1000,1024,0,500,,LS\n").message(),
              StartsWith("pods.csv:2:16: gpu_milli: must be 0 when num_gpu is 0"));
  EXPECT_THAT(PodError("p0,1000,1024,1,0,,LS\n").message(),
              StartsWith("pods.csv:2:16: gpu_milli: must be 1..1000"));
}

TEST(TracePodListTest, UnknownModelInGpuSpec) {
  Status s = PodError("p0,1000,1024,1,500,H999,LS\n");
  EXPECT_THAT(s.message(), StartsWith("pods.csv:2:20: gpu_spec: "));
  EXPECT_THAT(s.message(), HasSubstr("'H999'"));
  Status partial = PodError("p0,1000,1024,1,500,T4|H999,LS\n");
  EXPECT_THAT(partial.message(), StartsWith("pods.csv:2:20: gpu_spec: "));
  EXPECT_THAT(partial.message(), HasSubstr("H999"));
  Status empty_item = PodError("p0,1000,1024,1,500,T4|,LS\n");
  EXPECT_THAT(empty_item.message(), StartsWith("pods.csv:2:20: gpu_spec: "));
}

TEST(TracePodListTest, DuplicateAndEmptyNames) {
  Status dup = PodError("a,1,1,0,0,,LS\nb,1,1,0,0,,LS\na,1,1,0,0,,LS\n");
  EXPECT_EQ(dup.message(), "pods.csv:4:1: name: duplicate pod name 'a'");
  EXPECT_THAT(PodError(",1,1,0,0,,LS\n").message(), StartsWith("pods.csv:2:1: name: empty pod name"));
}

TEST(TracePodListTest, EmptyList) {
  Status s = PodError("");
  EXPECT_EQ(s.message(), "pods.csv:2:1: pod list is empty");
  EXPECT_EQ(PodError("\n\n").message(), "pods.csv:2:1: pod list is empty");
}

TEST(TracePodListTest, MissingColumn) {
  Status s = PodError("p0,1,1,0\n", "name,cpu_milli,memory_mib,num_gpu\n");
  EXPECT_THAT(s.message(), StartsWith("pods.csv:1:1: missing column 'gpu_milli'"));
}

TEST(TracePodListTest, EveryErrorStartsWithFileLineColumn) {
  const std::vector<std::string> bad_rows = {
      "p0,x,1,0,0,,LS\n",       "p0,-1,1,0,0,,LS\n",     "p0,1,-1,0,0,,LS\n",
      "p0,1,1,-1,0,,LS\n",      "p0,1,1,1,-1,,LS\n",     "p0,1,1,1,1001,,LS\n",
      "p0,1,1,2,999,,LS\n",     "p0,1,1,1,1,Z9,LS\n",    "p0,1,1,0,0,,LS\np0,1,1,0,0,,LS\n",
      "p0,1,1,0,0,LS\n",        "p0,1,1,0,\"0\"x,,LS\n", "p0,1,1,0,0,,\"LS\n",
  };
  for (const std::string& rows : bad_rows) {
    Status s = PodError(rows);
    EXPECT_THAT(s.message(), MatchesRegex("pods\\.csv:[0-9]+:[0-9]+: .*")) << rows;
  }
}

// ---- the bundled Alibaba trace -----------------------------------------------------------------

struct Counted {
  size_t rows = 0;
  int64_t gpus = 0;       // node list: sum of gpu
  size_t cpu_only = 0;    // pod list
  size_t sharing = 0;
  int64_t gpu_milli = 0;  // pod list: sum of num_gpu * gpu_milli
};

// Counts a bundled CSV with a naive splitter (the files have no quotes), independently of
// tessera's parser.
Counted CountBundled(const std::string& path, bool nodes) {
  const std::string text = testing::ReadTextFile(path);
  EXPECT_FALSE(text.empty()) << path;
  EXPECT_EQ(text.find('"'), std::string::npos) << path << " has quotes; the naive splitter cannot read it";
  std::vector<std::string> lines = testing::SplitLines(text);
  Counted c;
  if (lines.empty()) return c;
  const std::vector<std::string> header = testing::SplitCommas(lines[0]);
  auto col = [&](const std::string& n) {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == n) return i;
    }
    ADD_FAILURE() << "no column " << n << " in " << path;
    return size_t{0};
  };
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const std::vector<std::string> f = testing::SplitCommas(lines[i]);
    ++c.rows;
    if (nodes) {
      c.gpus += std::stoll(f[col("gpu")]);
    } else {
      const int64_t n = std::stoll(f[col("num_gpu")]);
      const int64_t m = std::stoll(f[col("gpu_milli")]);
      c.cpu_only += n == 0;
      c.sharing += n == 1 && m < 1000;
      c.gpu_milli += n * m;
    }
  }
  return c;
}

TEST(TraceBundledDataTest, NodeList) {
  const std::string path = testing::DataPath("alibaba-gpu-2023/csv/openb_node_list_gpu_node.csv");
  auto nodes = ReadNodeList(path, Catalog());
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  const Counted c = CountBundled(path, true);
  int64_t gpus = 0;
  for (const auto& n : *nodes) gpus += n.gpu_count;
  EXPECT_EQ(nodes->size(), c.rows);
  EXPECT_EQ(gpus, c.gpus);
  // The dataset's documented size.
  EXPECT_EQ(nodes->size(), 1213u);
  EXPECT_EQ(gpus, 6212);
  EXPECT_TRUE(placement::ClusterSnapshot::Create(*nodes).ok());
}

TEST(TraceBundledDataTest, DefaultPodList) {
  const std::string path = testing::DataPath("alibaba-gpu-2023/csv/openb_pod_list_default.csv");
  auto pods = ReadPodList(path, Catalog());
  ASSERT_TRUE(pods.ok()) << pods.status().ToString();
  const Counted c = CountBundled(path, false);
  size_t cpu_only = 0, sharing = 0;
  int64_t milli = 0;
  for (const PodRecord& p : *pods) {
    cpu_only += p.request.IsCpuOnly();
    sharing += p.request.IsSharing();
    milli += p.request.TotalGpu().value();
  }
  EXPECT_EQ(pods->size(), c.rows);
  EXPECT_EQ(cpu_only, c.cpu_only);
  EXPECT_EQ(sharing, c.sharing);
  EXPECT_EQ(milli, c.gpu_milli);
  // The dataset notes: 8152 pods, 1088 CPU-only, 3078 sharing, 6086.8 GPUs requested.
  EXPECT_EQ(pods->size(), 8152u);
  EXPECT_EQ(cpu_only, 1088u);
  EXPECT_EQ(sharing, 3078u);
  EXPECT_EQ(milli, 6'086'800);
  EXPECT_EQ(FileStem(path), "openb_pod_list_default");
}

TEST(TraceBundledDataTest, AllSeventeenPodListsParse) {
  const char* lists[] = {"default",    "cpu050",     "cpu100",     "cpu200",      "cpu250",    "gpushare40",
                         "gpushare60", "gpushare80", "gpushare100", "gpuspec10",  "gpuspec20", "gpuspec25",
                         "gpuspec33",  "multigpu20", "multigpu30",  "multigpu40", "multigpu50"};
  for (const char* l : lists) {
    const std::string path = testing::DataPath(std::string("alibaba-gpu-2023/csv/openb_pod_list_") + l + ".csv");
    auto pods = ReadPodList(path, Catalog());
    ASSERT_TRUE(pods.ok()) << pods.status().ToString();
    const Counted c = CountBundled(path, false);
    int64_t milli = 0;
    for (const PodRecord& p : *pods) milli += p.request.TotalGpu().value();
    EXPECT_EQ(pods->size(), c.rows) << l;
    EXPECT_EQ(milli, c.gpu_milli) << l;
  }
}

TEST(TraceFileStemTest, Stems) {
  EXPECT_EQ(FileStem("data/x/openb_pod_list_default.csv"), "openb_pod_list_default");
  EXPECT_EQ(FileStem("pods.csv"), "pods");
  EXPECT_EQ(FileStem("dir.v2/pods"), "pods");
  EXPECT_EQ(FileStem("a/b.tar.gz"), "b.tar");
  EXPECT_EQ(FileStem(".hidden"), ".hidden");
}

TEST(PodListNamesTest, StemsUnlessTwoListsShareOne) {
  EXPECT_EQ(PodListNames({"a/x.csv", "b/y.csv"}), (std::vector<std::string>{"x", "y"}));
  EXPECT_EQ(PodListNames({"a/x.csv", "b/x.csv", "c/z.csv"}), (std::vector<std::string>{"a/x.csv", "b/x.csv", "z"}));
}

}  // namespace
}  // namespace tessera::sim
