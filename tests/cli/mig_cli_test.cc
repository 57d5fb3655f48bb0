// Contract tests of `tessera mig`: the JSON shape of `mig plan`, the layouts listing, and
// bad input (unknown model or profile, a model without MIG, a layout that breaks a rule, a bad
// --in-use file) -> a one-line error naming the problem and exit code 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/cli_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::TempDir;

CommandResult Tessera(const TempDir& dir, const std::string& args) { return testing::RunTessera(dir, args); }
const auto& ExpectBadInput = testing::ExpectOneLineBadInput;

TEST(MigCliTest, PlanJsonHasTheContractShape) {
  TempDir dir;
  CommandResult r = Tessera(dir, "mig plan --model H100-80GB --gpus 1 --demand 1g.10gb=2,3g.40gb=2 --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["gpus"].size(), 1u);
  EXPECT_EQ(j["gpus"][0]["index"], 0);
  ASSERT_EQ(j["gpus"][0]["instances"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["instances"][0]["profile"], "3g.40gb");
  EXPECT_EQ(j["gpus"][0]["instances"][0]["start"], 0);
  EXPECT_EQ(j["gpus"][0]["instances"][0]["size"], 4);
  EXPECT_EQ(j["gpus"][0]["instances"][1]["start"], 4);
  EXPECT_EQ(j["unsatisfied"]["1g.10gb"], 2);
  ASSERT_EQ(j["steps"].size(), 2u);
  EXPECT_EQ(j["steps"][0]["action"], "create");
}

TEST(MigCliTest, PlanRespectsInUseInstances) {
  TempDir dir;
  testing::WriteTextFile(dir.File("in_use.csv"), "gpu,profile,start,in_use\n0,4g.40gb,0,1\n0,1g.10gb,4,0\n");
  CommandResult r = Tessera(dir, "mig plan --model H100-80GB --gpus 1 --demand 3g.40gb=1 --in-use in_use.csv --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // 4g.40gb@0 stays; the free 1g.10gb@4 is destroyed to make room for 3g.40gb@4.
  ASSERT_EQ(j["gpus"][0]["instances"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["instances"][0]["profile"], "4g.40gb");
  EXPECT_EQ(j["gpus"][0]["instances"][1]["profile"], "3g.40gb");
  ASSERT_EQ(j["steps"].size(), 2u);
  EXPECT_EQ(j["steps"][0]["action"], "destroy");
  EXPECT_EQ(j["steps"][0]["profile"], "1g.10gb");
  EXPECT_EQ(j["steps"][1]["action"], "create");
  EXPECT_TRUE(j["unsatisfied"].empty());
}

TEST(MigCliTest, LayoutsListsEveryMaximalLayout) {
  TempDir dir;
  CommandResult r = Tessera(dir, "mig layouts --model A30-24GB");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("5 maximal MIG layouts of A30-24GB"));
  EXPECT_THAT(r.out, HasSubstr("[0-3 4g.24gb]"));
  r = Tessera(dir, "mig layouts --model H100-80GB --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(nlohmann::json::parse(r.out)["layouts"].size(), 10u);
}

TEST(MigCliTest, BadInputExitsWithTwoAndNamesTheProblem) {
  TempDir dir;
  ExpectBadInput(Tessera(dir, "mig plan --model H999 --demand 1g.10gb=1"), "unknown GPU model 'H999'");
  ExpectBadInput(Tessera(dir, "mig plan --model T4 --demand 1g.10gb=1"), "model T4 has no MIG");
  ExpectBadInput(Tessera(dir, "mig plan --model H100-80GB --demand 5g.50gb=1"), "unknown MIG profile '5g.50gb'");
  ExpectBadInput(Tessera(dir, "mig plan --model H100-80GB --demand 1g.10gb=-1"), "expected PROFILE=COUNT");
  ExpectBadInput(Tessera(dir, "mig validate --model H100-80GB --layout 3g.40gb@0,4g.40gb@4"), "rule 2");
  ExpectBadInput(Tessera(dir, "mig validate --model H100-80GB --layout 1g.10gb@0,1g.20gb@0"), "rule 3");
  testing::WriteTextFile(dir.File("bad.csv"), "gpu,profile,start,in_use\n0,3g.40gb,x,1\n");
  ExpectBadInput(Tessera(dir, "mig plan --model H100-80GB --demand 1g.10gb=1 --in-use bad.csv"), "bad.csv:2:");
  testing::WriteTextFile(dir.File("overlap.csv"), "gpu,profile,start,in_use\n0,4g.40gb,0,1\n0,3g.40gb,0,0\n");
  ExpectBadInput(Tessera(dir, "mig plan --model H100-80GB --demand 1g.10gb=1 --in-use overlap.csv"), "GPU 0");
}

}  // namespace
}  // namespace tessera
