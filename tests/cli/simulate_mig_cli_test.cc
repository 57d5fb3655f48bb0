// Contract tests of `tessera simulate --mig-model`: the MIG mode of the simulator (engine vs
// standalone dynamic vs static layouts), text, JSON and HTML, and its bad-input errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/sim_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::TempDir;

const std::string kBinary = TESSERA_BINARY;

CommandResult Tessera(const TempDir& dir, const std::string& args) {
  return testing::RunCommand("cd '" + dir.path() + "' && '" + kBinary + "' " + args, dir);
}

void ExpectBadInput(const CommandResult& r, const std::string& what, const std::string& message) {
  EXPECT_FALSE(r.Crashed()) << what;
  EXPECT_EQ(r.exit_code, 2) << what << "\nstderr: " << r.err;
  EXPECT_THAT(r.err, HasSubstr(message)) << what;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what << ": more than one line:\n" << r.err;
}

TEST(SimulateMigCliTest, ReportsEngineNextToStaticLayouts) {
  TempDir dir;
  const CommandResult r =
      Tessera(dir, "simulate --mig-model H100-80GB --gpus 24 --seeds 42-44 --policies fgd,firstfit --json mig.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("24 x H100-80GB, nodes of 8 GPUs (seeds 42-44)"));
  EXPECT_THAT(r.out, HasSubstr("demand mix (nearest profile): 1g.10gb="));
  for (const char* row : {"engine:fgd", "engine:firstfit", "mig_sim dynamic (standalone)",
                          "static, layouts planned for the mix", "static, best uniform layout"}) {
    EXPECT_THAT(r.out, HasSubstr(row));
  }
  const nlohmann::json j = nlohmann::json::parse(testing::ReadTextFile(dir.File("mig.json")));
  EXPECT_EQ(j["mode"], "mig");
  EXPECT_EQ(j["gpus"], 24);
  EXPECT_EQ(j["seeds"].size(), 3u);
  ASSERT_EQ(j["strategies"].size(), 5u);
  EXPECT_EQ(j["strategies"][0]["name"], "engine:fgd");
  EXPECT_EQ(j["strategies"][0]["unserved_pct"].size(), 3u);
  const double engine = j["strategies"][0]["median_unserved_pct"];
  const double best_static = j["strategies"][4]["median_unserved_pct"];
  EXPECT_EQ(j["strategies"][4]["name"], "static, best uniform layout");
  EXPECT_LT(engine, best_static);
  // Stranded GPUs are the unserved capacity in GPUs: 24 GPUs -> 0.24 per percent.
  EXPECT_NEAR(j["strategies"][0]["median_stranded_gpus"].get<double>(), engine * 0.24, 1e-9);
}

// Issue 35: the MIG mode's report, in the style of the other reports (tables, uPlot charts whose
// data is in the page). Failed before: --html was "not with --mig-model".
TEST(SimulateMigCliTest, WritesAnHtmlReportWithTablesAndCharts) {
  TempDir dir;
  const CommandResult r = Tessera(
      dir, "simulate --mig-model H100-80GB --gpus 24 --seeds 42-44 --policies fgd,firstfit -q --html mig.html");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("HTML report: mig.html"));
  const std::string page = testing::ReadTextFile(dir.File("mig.html"));
  EXPECT_THAT(page, HasSubstr("<tr><td class='l'>GPU model</td><td class='l'>H100-80GB</td></tr>"));
  EXPECT_THAT(page, HasSubstr("<tr><td class='l'>seeds</td><td class='l'>42-44 (3)</td></tr>"));
  EXPECT_THAT(page, HasSubstr("<tr><td>static, best uniform layout</td><td>static</td>"));
  const std::string open = "<script type='application/json' id='tessera-report-data'>";
  const size_t at = page.find(open);
  ASSERT_NE(at, std::string::npos);
  const nlohmann::json data =
      nlohmann::json::parse(page.substr(at + open.size(), page.find("</script>", at) - at - open.size()));
  ASSERT_EQ(data["charts"].size(), 2u);
  EXPECT_EQ(data["charts"][0]["id"], "mig-unserved");
  EXPECT_EQ(data["charts"][0]["categories"].size(), 5u);  // 2 engine policies, 3 baselines
  EXPECT_EQ(data["charts"][1]["id"], "mig-stranded");
  EXPECT_EQ(data["charts"][1]["series"].size(), 3u);  // a dot per seed
  EXPECT_EQ(data["charts"][1]["y_unit"], "GPUs");
  // Without --html no page is written (the replay's default file is not the MIG mode's).
  ASSERT_EQ(Tessera(dir, "simulate --mig-model A30-24GB --gpus 8 --seeds 42 -q").exit_code, 0);
  EXPECT_FALSE(std::filesystem::exists(dir.File("tessera-report.html")));
}

TEST(SimulateMigCliTest, SameSeedsSameOutput) {
  TempDir dir;
  const CommandResult a = Tessera(dir, "simulate --mig-model A30-24GB --gpus 8 --seeds 42");
  const CommandResult b = Tessera(dir, "simulate --mig-model A30-24GB --gpus 8 --seeds 42");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
}

TEST(SimulateMigCliTest, BadInputExitsTwoWithTheReason) {
  TempDir dir;
  ExpectBadInput(Tessera(dir, "simulate --mig-model T4"), "no MIG", "T4 has no MIG");
  ExpectBadInput(Tessera(dir, "simulate --mig-model H999"), "unknown model", "--mig-model: ");
  ExpectBadInput(Tessera(dir, "simulate --mig-model H100-80GB --gpus 0"), "gpus", "--gpus: must be 1..100000");
  ExpectBadInput(Tessera(dir, "simulate --mig-model H100-80GB --gpus-per-node 17"), "per node",
                 "--gpus-per-node: must be 1..16");
  ExpectBadInput(Tessera(dir, "simulate --gpus 8 --html ''"), "gpus alone", "--gpus: only with --mig-model");
  ExpectBadInput(Tessera(dir, "simulate --mig-model H100-80GB --all-lists"), "all lists", "--all-lists");
  ExpectBadInput(Tessera(dir, "simulate --mig-model H100-80GB --policies nosuch"), "policy", "unknown policy 'nosuch'");
  testing::WriteTextFile(dir.File("whole.csv"), "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np1,1000,1024,1,1000\n");
  ExpectBadInput(Tessera(dir, "simulate --mig-model H100-80GB --pods whole.csv"), "no sharing tasks",
                 "no GPU-sharing tasks");
}

}  // namespace
}  // namespace tessera
