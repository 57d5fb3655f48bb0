// Contract tests of `tessera simulate`: they run the built binary (TESSERA_BINARY) in a
// temporary directory and check exit codes, stdout/stderr and the files it writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tessera/sim/report_charts.h"
#include "tests/testing/sim_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::Not;
using ::testing::StartsWith;
using testing::CommandResult;
using testing::TempDir;

const std::string kBinary = TESSERA_BINARY;
const std::string kCsvDir = std::string(TESSERA_SOURCE_DIR) + "/data/alibaba-gpu-2023/csv";
const std::string kNodes = kCsvDir + "/openb_node_list_gpu_node.csv";

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// Runs `tessera <args>` with the working directory set to `dir`.
CommandResult Tessera(const TempDir& dir, const std::string& args) {
  return testing::RunCommand("cd " + Quote(dir.path()) + " && " + Quote(kBinary) + " " + args, dir);
}

// A small pod list in the trace's format: CPU-only, sharing, whole and model-restricted pods.
std::string SmallPodList() {
  std::string text = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n";
  for (int i = 0; i < 120; ++i) {
    std::string row = "small-" + std::to_string(1000 + i) + ",";
    switch (i % 5) {
      case 0: row += "4000,8192,0,0,,BE"; break;
      case 1: row += "6000,12288,1," + std::to_string(100 + (i * 41) % 900) + ",,LS"; break;
      case 2: row += "12000,24576,1,1000,,LS"; break;
      case 3: row += "32000,65536,2,1000,,LS"; break;
      default: row += "8000,16384,1,500,V100M16|V100M32,LS"; break;
    }
    text += row + "\n";
  }
  return text;
}

// Exit 2, no crash, and exactly one line on stderr.
void ExpectBadInput(const CommandResult& r, const std::string& what) {
  EXPECT_FALSE(r.Crashed()) << what << ": signal " << r.signal << ", exit " << r.exit_code;
  EXPECT_EQ(r.exit_code, 2) << what << "\nstderr: " << r.err;
  ASSERT_FALSE(r.err.empty()) << what;
  EXPECT_EQ(r.err.back(), '\n') << what;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what << ": more than one line:\n" << r.err;
}

TEST(SimulateCliTest, HelpMentionsTheOptions) {
  TempDir dir;
  CommandResult r = Tessera(dir, "simulate --help");
  ASSERT_FALSE(r.Crashed());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("--pods"));
  EXPECT_THAT(r.out, HasSubstr("--nodes"));
  EXPECT_THAT(r.out, HasSubstr("--policies"));
  EXPECT_THAT(r.out, HasSubstr("--seeds"));
  EXPECT_THAT(r.out, HasSubstr("--json"));

  CommandResult top = Tessera(dir, "--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.out, HasSubstr("simulate"));
  CommandResult version = Tessera(dir, "--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, HasSubstr("tessera"));
}

TEST(SimulateCliTest, NoCommandOrUnknownFlagIsBadInput) {
  TempDir dir;
  ExpectBadInput(Tessera(dir, ""), "no sub-command");
  ExpectBadInput(Tessera(dir, "simulate --bogus"), "unknown flag");
  ExpectBadInput(Tessera(dir, "simulate --tune abc"), "non-numeric --tune");
}

// The contract command of the foundation issue.
TEST(SimulateCliTest, ContractCommandWritesJson) {
  TempDir dir;
  const std::string pods = dir.File("mypods.csv");
  testing::WriteTextFile(pods, SmallPodList());
  const std::string out = dir.File("out/result.json");  // parent directory is created
  CommandResult r = Tessera(dir, "simulate --nodes " + Quote(kNodes) + " --pods " + Quote(pods) +
                                     " --policies fgd,bestfit --seeds 42-43 --json " + Quote(out) + " --html ''");
  ASSERT_FALSE(r.Crashed()) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("mypods"));
  EXPECT_FALSE(std::filesystem::exists(dir.File("tessera-report.html"))) << "--html '' must skip the report";

  const std::string text = testing::ReadTextFile(out);
  ASSERT_FALSE(text.empty()) << "no JSON at " << out;
  nlohmann::json j = nlohmann::json::parse(text);
  ASSERT_TRUE(j["runs"].is_array());
  ASSERT_EQ(j["runs"].size(), 4u);
  const char* policies[] = {"fgd", "fgd", "bestfit", "bestfit"};
  const int seeds[] = {42, 43, 42, 43};
  for (size_t i = 0; i < 4; ++i) {
    const auto& run = j["runs"][i];
    EXPECT_EQ(run["pods"], "mypods");
    EXPECT_EQ(run["policy"], policies[i]);
    EXPECT_EQ(run["seed"], seeds[i]);
    for (const char* key : {"unallocated_gpu_pct_at_100", "unallocated_gpu_pct_at_130", "frag_rate_pct_at_100"}) {
      ASSERT_TRUE(run.contains(key)) << key;
      ASSERT_TRUE(run[key].is_number()) << key << " = " << run[key];
      EXPECT_GE(run[key].get<double>(), 0.0) << key;
      EXPECT_LE(run[key].get<double>(), 100.0 + 1e-6) << key;  // accumulated rounding
    }
    EXPECT_TRUE(run["wall_seconds"].is_number());
    EXPECT_EQ(run["gpu_capacity_milli"], 6'212'000);
  }
  ASSERT_EQ(j["summary"].size(), 2u);
  EXPECT_EQ(j["summary"][0]["policy"], "fgd");
  EXPECT_EQ(j["summary"][0]["runs"], 2);
}

TEST(SimulateCliTest, DefaultsUseTheBundledTraceAndWriteHtml) {
  TempDir dir;  // not the source tree: the bundled data is found via the source directory
  CommandResult r = Tessera(dir, "simulate --policies bestfit --seeds 42 --html report.html --json r.json -q");
  ASSERT_FALSE(r.Crashed()) << r.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << "-q must keep stderr quiet: " << r.err;
  EXPECT_THAT(r.out, HasSubstr("openb_pod_list_default"));
  EXPECT_THAT(r.out, HasSubstr("artifact@100%"));  // compared with the bundled reference
  const std::string html = testing::ReadTextFile(dir.File("report.html"));
  EXPECT_THAT(html, HasSubstr(sim::ReportChartsUseUplot() ? "id='chart-" : "<svg"));  // uPlot or static SVG
  EXPECT_THAT(html, HasSubstr("bestfit"));
  nlohmann::json j = nlohmann::json::parse(testing::ReadTextFile(dir.File("r.json")));
  ASSERT_EQ(j["runs"].size(), 1u);
  EXPECT_EQ(j["runs"][0]["pods"], "openb_pod_list_default");
  EXPECT_TRUE(j["summary"][0].contains("artifact_median_unallocated_gpu_pct_at_100"));
}

TEST(SimulateCliTest, CheckReproducesTheArtifactForFgd) {
  TempDir dir;
  CommandResult r = Tessera(dir, "simulate --policies fgd --seeds 42-51 --check --html '' -q -j 2");
  ASSERT_FALSE(r.Crashed()) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("reproduction check: 1 of 1"));
}

TEST(SimulateCliTest, CheckWithNothingToCompareFails) {
  TempDir dir;
  const std::string pods = dir.File("mine.csv");
  testing::WriteTextFile(pods, SmallPodList());
  CommandResult r = Tessera(dir, "simulate --pods " + Quote(pods) + " --policies bestfit --seeds 1 --check --html '' -q");
  ASSERT_FALSE(r.Crashed()) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("0 of 0"));
}

// ---- bad input: exit 2 with one line naming the file, line and column ----------------------------

class SimulateBadFileTest : public ::testing::Test {
 protected:
  // Writes `text` to a pod list and runs simulate on it; returns the result.
  CommandResult RunPods(const std::string& name, const std::string& text) {
    const std::string path = dir_.File(name);
    testing::WriteTextFile(path, text);
    return Tessera(dir_, "simulate --pods " + Quote(path) + " --policies fgd --seeds 42 --html ''");
  }
  // stderr must name the file and a line:column.
  void ExpectNamesLocation(const CommandResult& r, const std::string& name, const std::string& line_col) {
    const std::string where = dir_.File(name) + ":" + line_col + ": ";
    EXPECT_THAT(r.err, HasSubstr(where)) << r.err;
  }
  TempDir dir_;
};

TEST_F(SimulateBadFileTest, MissingFile) {
  CommandResult r = Tessera(dir_, "simulate --pods " + Quote(dir_.File("absent.csv")) + " --html ''");
  ExpectBadInput(r, "missing pod list");
  ExpectNamesLocation(r, "absent.csv", "0:0");
  EXPECT_THAT(r.err, HasSubstr("cannot open"));
  CommandResult n = Tessera(dir_, "simulate --nodes " + Quote(dir_.File("nonodes.csv")) + " --html ''");
  ExpectBadInput(n, "missing node list");
  ExpectNamesLocation(n, "nonodes.csv", "0:0");
}

TEST_F(SimulateBadFileTest, MalformedRow) {
  CommandResult r = RunPods("rows.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\np1,1000\n");
  ExpectBadInput(r, "short row");
  ExpectNamesLocation(r, "rows.csv", "3:1");
  EXPECT_THAT(r.err, HasSubstr("expected 5 fields, found 2"));
  CommandResult q = RunPods("quote.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,\"1000,1024,1,500\n");
  ExpectBadInput(q, "unterminated quote");
  ExpectNamesLocation(q, "quote.csv", "2:4");
}

TEST_F(SimulateBadFileTest, UnknownGpuModelInGpuSpec) {
  CommandResult r = RunPods("spec.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np0,1000,1024,1,500,H999\n");
  ExpectBadInput(r, "unknown model");
  ExpectNamesLocation(r, "spec.csv", "2:20");
  EXPECT_THAT(r.err, HasSubstr("gpu_spec"));
  EXPECT_THAT(r.err, HasSubstr("H999"));
}

TEST_F(SimulateBadFileTest, UnknownNodeModel) {
  const std::string nodes = dir_.File("nodes.csv");
  testing::WriteTextFile(nodes, "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,P100\nn1,64000,262144,2,X1\n");
  CommandResult r = Tessera(dir_, "simulate --nodes " + Quote(nodes) + " --html ''");
  ExpectBadInput(r, "unknown node model");
  ExpectNamesLocation(r, "nodes.csv", "3:19");
  EXPECT_THAT(r.err, HasSubstr("model"));
}

TEST_F(SimulateBadFileTest, NegativeNumber) {
  CommandResult r = RunPods("neg.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,-1024,1,500\n");
  ExpectBadInput(r, "negative memory");
  ExpectNamesLocation(r, "neg.csv", "2:9");
  EXPECT_THAT(r.err, HasSubstr("memory_mib"));
  EXPECT_THAT(r.err, HasSubstr("negative"));
}

TEST_F(SimulateBadFileTest, EmptyPodList) {
  CommandResult r = RunPods("empty.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n");
  ExpectBadInput(r, "header only");
  ExpectNamesLocation(r, "empty.csv", "2:1");
  EXPECT_THAT(r.err, HasSubstr("empty"));
  CommandResult z = RunPods("zero.csv", "");
  ExpectBadInput(z, "zero bytes");
  ExpectNamesLocation(z, "zero.csv", "1:1");
}

TEST_F(SimulateBadFileTest, BinaryGarbage) {
  std::string junk = "name,cpu_milli\n";
  junk += std::string("\x01\x02\xff,", 4);
  junk.push_back('\0');
  junk += "\n";
  ExpectBadInput(RunPods("junk.csv", junk), "garbage");
}

TEST_F(SimulateBadFileTest, BadReferenceFile) {
  CommandResult r = Tessera(dir_, "simulate --reference " + Quote(dir_.File("ref.csv")) + " --html ''");
  ExpectBadInput(r, "missing reference");
  ExpectNamesLocation(r, "ref.csv", "0:0");
  const std::string bad = dir_.File("badref.csv");
  testing::WriteTextFile(bad, "workload,sc_policy,100\nw,06-FGD,95\n");
  CommandResult b = Tessera(dir_, "simulate --reference " + Quote(bad) + " --html ''");
  ExpectBadInput(b, "reference without the 130 column");
  ExpectNamesLocation(b, "badref.csv", "1:1");
}

TEST(SimulateCliTest, UnwritableOutputIsAFailureNotACrash) {
  TempDir dir;
  testing::WriteTextFile(dir.File("file"), "x");
  CommandResult r = Tessera(dir, "simulate --policies bestfit --seeds 42 --html '' -q --json " +
                                     Quote(dir.File("file/out.json")));
  ASSERT_FALSE(r.Crashed()) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("file/out.json"));
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
}

TEST(SimulateCliTest, UnknownPolicy) {
  TempDir dir;
  CommandResult r = Tessera(dir, "simulate --policies fgd,nosuch --html ''");
  ExpectBadInput(r, "unknown policy");
  EXPECT_THAT(r.err, HasSubstr("'nosuch'"));
  EXPECT_THAT(r.err, HasSubstr("fgd"));  // lists the known ones
}

TEST(SimulateCliTest, BadSeeds) {
  TempDir dir;
  for (const char* seeds : {"abc", "9-3", "42-", "-5", "''", "42,,43", "1-20000", "4x"}) {
    CommandResult r = Tessera(dir, std::string("simulate --seeds ") + seeds + " --html ''");
    ExpectBadInput(r, std::string("--seeds ") + seeds);
    EXPECT_THAT(r.err, HasSubstr("--seeds")) << seeds;
  }
}

TEST(SimulateCliTest, BadTuneAndJobs) {
  TempDir dir;
  for (const char* flag : {"--tune 0", "--tune -1", "--tune 11", "--jobs -1", "--jobs 1000"}) {
    ExpectBadInput(Tessera(dir, std::string("simulate ") + flag + " --html ''"), flag);
  }
}

// BUG (tools/tessera/commands/simulate.cc, ParseSeeds): a range ending at UINT64_MAX passes the
// length check (hi - lo < 10000) but `for (s = lo; s <= hi; ++s)` never ends (s wraps to 0),
// so the seed vector grows until the process dies of std::bad_alloc (SIGABRT) or the OOM
// killer. Expected: exit 2 with a one-line message. Disabled until fixed; runs under a memory
// limit and a timeout so that enabling it cannot take the machine down.
TEST(SimulateCliTest, SeedRangeEndingAtUint64MaxIsRejected) {
  TempDir dir;
  CommandResult r = testing::RunCommand(
      "ulimit -v 1000000; cd " + Quote(dir.path()) + " && timeout 20 " + Quote(kBinary) +
          " simulate --seeds 18446744073709551615-18446744073709551615 --policies bestfit --html ''",
      dir);
  ExpectBadInput(r, "seed range ending at UINT64_MAX");
}

}  // namespace
}  // namespace tessera
