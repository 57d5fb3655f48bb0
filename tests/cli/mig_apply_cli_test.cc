// `tessera mig apply` and `tessera mig show` against the in-tree fake NVML only (loaded by
// absolute path with --nvml): the steps are printed first, nothing happens without --yes, a
// plan is applied exactly, and bad plans or driver refusals are reported. No test here loads
// the driver's libnvidia-ml.so.1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/sim_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::TempDir;

const std::string kBinary = TESSERA_BINARY;
const std::string kFake = TESSERA_FAKE_NVML_PATH;

// Runs tessera in `dir` with the fake NVML configured as `gpus`, logging MIG changes to
// dir/mutations.log.
CommandResult Tessera(const TempDir& dir, const std::string& gpus, const std::string& args) {
  return testing::RunCommand("cd '" + dir.path() + "' && TESSERA_FAKE_NVML_CONFIG='" + gpus +
                                 "' TESSERA_FAKE_NVML_MUTATION_LOG='" + dir.File("mutations.log") +
                                 "' '" + kBinary + "' " + args,
                             dir);
}

size_t Lines(const std::string& text, const std::string& line) {
  size_t n = 0;
  size_t pos = 0;
  while ((pos = text.find(line + "\n", pos)) != std::string::npos) {
    ++n;
    pos += line.size();
  }
  return n;
}

void WritePlan(const TempDir& dir, const std::string& args) {
  CommandResult r = Tessera(dir, "", "mig plan " + args + " --json -");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ofstream(dir.File("plan.json")) << r.out;
}

TEST(MigApplyCliTest, WithoutYesItPrintsTheStepsAndChangesNothing) {
  TempDir dir;
  WritePlan(dir, "--model H100-80GB --gpus 1 --demand 3g.40gb=2");
  CommandResult r = Tessera(dir, "H100-80GB:mig=1",
                            "mig apply --model H100-80GB --plan plan.json --nvml '" + kFake + "'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.out, HasSubstr("  create 3g.40gb@0 on GPU 0\n  create 3g.40gb@4 on GPU 0\n"));
  EXPECT_EQ(r.err,
            "tessera mig apply: refusing to change MIG instances without --yes (the steps above were not "
            "applied)\n");
  EXPECT_EQ(testing::ReadTextFile(dir.File("mutations.log")), "");
}

TEST(MigApplyCliTest, WithYesThePlanIsAppliedExactly) {
  TempDir dir;
  WritePlan(dir, "--model H100-80GB --gpus 2 --demand 1g.10gb=9,3g.40gb=2");
  CommandResult r = Tessera(dir, "H100-80GB*2:mig=1",
                            "mig apply --model H100-80GB --plan plan.json --nvml '" + kFake + "' --yes");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("applied 10 step(s); now:\n"));
  const std::string layout =
      ": [gi 1 1g.10gb@0:1 ci 0 @0:1] [gi 2 1g.10gb@1:1 ci 0 @0:1] [gi 3 1g.10gb@2:1 ci 0 @0:1] "
      "[gi 4 1g.10gb@3:1 ci 0 @0:1] [gi 5 3g.40gb@4:4 ci 0 @0:3]\n";
  EXPECT_THAT(r.out, HasSubstr("  GPU 0" + layout));
  EXPECT_THAT(r.out, HasSubstr("  GPU 1" + layout));
  const std::string log = testing::ReadTextFile(dir.File("mutations.log"));
  EXPECT_EQ(Lines(log, "nvmlDeviceCreateGpuInstanceWithPlacement"), 10u);
  EXPECT_EQ(Lines(log, "nvmlGpuInstanceCreateComputeInstance"), 10u);
}

TEST(MigApplyCliTest, DriverRefusalsExitWithOneAndChangeNothing) {
  TempDir dir;
  WritePlan(dir, "--model H100-80GB --gpus 2 --demand 3g.40gb=4");
  CommandResult r = Tessera(dir, "H100-80GB:mig=1,H100-80GB:mig=0",
                            "mig apply --model H100-80GB --plan plan.json --nvml '" + kFake + "' --yes");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tessera mig apply: step 3 (create 3g.40gb@0 on GPU 1): MIG mode is disabled on GPU 1\n");
  EXPECT_EQ(testing::ReadTextFile(dir.File("mutations.log")), "");
  // A plan for more GPUs than the node has.
  r = Tessera(dir, "H100-80GB:mig=1",
              "mig apply --model H100-80GB --plan plan.json --nvml '" + kFake + "' --yes");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("step 3 (create 3g.40gb@0 on GPU 1): the node has 1 GPU(s)"));
  // A library that is not there.
  r = Tessera(dir, "", "mig apply --model H100-80GB --plan plan.json --nvml /nonexistent/libnvidia-ml.so.1 --yes");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/libnvidia-ml.so.1 not found"));
}

TEST(MigApplyCliTest, BadPlansAreBadInput) {
  TempDir dir;
  WritePlan(dir, "--model H100-80GB --gpus 1 --demand 3g.40gb=1");
  const std::string apply = "mig apply --nvml '" + kFake + "' --yes ";
  CommandResult r = Tessera(dir, "H100-80GB:mig=1", apply + "--model A100-40GB --plan plan.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tessera mig apply: plan.json: model: the plan is for \"H100-80GB\", not A100-40GB\n");
  r = Tessera(dir, "H100-80GB:mig=1", apply + "--model H100-80GB --plan missing.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tessera mig apply: missing.json: cannot open file\n");
  std::ofstream(dir.File("bad1.json")) << R"({"steps":[{"action":"create","gpu":0,"profile":"5g.50gb","start":0}]})";
  r = Tessera(dir, "H100-80GB:mig=1", apply + "--model H100-80GB --plan bad1.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("bad1.json: steps[0].profile: "));
  EXPECT_THAT(r.err, HasSubstr("5g.50gb"));
  std::ofstream(dir.File("bad2.json")) << R"({"steps":[{"action":"create","gpu":0,"profile":"3g.40gb","start":2}]})";
  r = Tessera(dir, "H100-80GB:mig=1", apply + "--model H100-80GB --plan bad2.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tessera mig apply: bad2.json: steps[0]: MIG profile 3g.40gb cannot start at memory slice 2\n");
  std::ofstream(dir.File("bad3.json")) << R"({"steps":[{"action":"grow","gpu":0,"profile":"3g.40gb","start":0}]})";
  r = Tessera(dir, "H100-80GB:mig=1", apply + "--model H100-80GB --plan bad3.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tessera mig apply: bad3.json: steps[0].action: 'grow' is neither create nor destroy\n");
  std::ofstream(dir.File("bad4.json")) << R"({"steps":[{"action":"create","gpu":-1,"profile":"3g.40gb","start":0}]})";
  r = Tessera(dir, "H100-80GB:mig=1", apply + "--model H100-80GB --plan bad4.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "tessera mig apply: bad4.json: steps[0].gpu: expected an integer 0..100000\n");
  EXPECT_EQ(testing::ReadTextFile(dir.File("mutations.log")), "");
}

// The bug: an H100 plan was "applied" to A100s. The GPUs' NVML names must be of --model.
TEST(MigApplyCliTest, APlanForAnotherModelIsRefusedBeforeAnythingChanges) {
  TempDir dir;
  WritePlan(dir, "--model H100-80GB --gpus 1 --demand 7g.80gb=1");
  CommandResult r = Tessera(dir, "A100-40GB:mig=1",
                            "mig apply --model H100-80GB --plan plan.json --nvml '" + kFake + "' --yes");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(r.err,
            "tessera mig apply: GPU 0 is an NVIDIA A100-SXM4-40GB (A100-40GB), not a H100-80GB: the plan was "
            "made for H100-80GB\n");
  EXPECT_EQ(testing::ReadTextFile(dir.File("mutations.log")), "");
  // The NVML name is accepted as the model name, and the right GPUs take the plan.
  r = Tessera(dir, "H100-80GB:mig=1",
              "mig apply --model 'NVIDIA H100 80GB HBM3' --plan plan.json --nvml '" + kFake + "' --yes");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("applied 1 step(s)"));
}

TEST(MigApplyCliTest, ShowListsGpusReadOnly) {
  TempDir dir;
  CommandResult r = Tessera(dir, "A30-24GB:mig=1,T4", "mig show --json - --nvml '" + kFake + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["gpus"].size(), 2u);
  EXPECT_EQ(j["gpus"][0]["name"], "NVIDIA A30");
  EXPECT_EQ(j["gpus"][0]["mig"], "enabled");
  EXPECT_EQ(j["gpus"][0]["gpu_instances"], nlohmann::json::array());
  EXPECT_EQ(j["gpus"][1]["mig"], "not supported");
  EXPECT_EQ(testing::ReadTextFile(dir.File("mutations.log")), "");
}

}  // namespace
}  // namespace tessera
