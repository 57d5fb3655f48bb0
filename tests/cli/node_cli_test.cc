// Contract tests of `tessera run` and `tessera node status`, running the built binary with the
// in-tree fake libcuda.so.1 (LD_LIBRARY_PATH) and tessera_shim_probe as the command; every test
// has its own node directory (TESSERA_RUN_DIR).
//   - the memory limit is exact through `tessera run` (64 x 1 MiB fit into 64MiB, the 65th not);
//   - the command's exit code is tessera's;
//   - `node status --json` shows a running tenant's limit, usage and share, and forgets it after;
//   - two tenants with shares 30 and 70 get about 30/70 of the kernels (the arbiter runs inside
//     `tessera run`; loose tolerance for a loaded 2-core CI machine, see tests/shim/compute_test.cc);
//   - bad flags: exit 2 with one line naming the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "tests/testing/cli_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::TempDir;

const std::string kBinary = TESSERA_BINARY;
const std::string kProbe = TESSERA_SHIM_PROBE;

std::string Env(const TempDir& dir) {
  return "TESSERA_RUN_DIR='" + dir.path() + "/node' LD_LIBRARY_PATH='" + TESSERA_FAKE_CUDA_DIR + "' ";
}

CommandResult Tessera(const TempDir& dir, const std::string& args) {
  return testing::RunTessera(dir, args, Env(dir));
}
const auto& ExpectBadInput = testing::ExpectOneLineBadInput;

TEST(NodeCli, RunEnforcesTheMemoryLimitExactly) {
  TempDir dir;
  CommandResult r = Tessera(dir, "run --tenant a --gpu 0 --mem 64MiB --share 30 -- '" + kProbe +
                                     "' init fill:mem:1048576 meminfo");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("fill family=mem count=64 rc=2"));  // the 65th MiB: out of memory
  EXPECT_THAT(r.out, HasSubstr("total=67108864"));
}

TEST(NodeCli, ReturnsTheCommandsExitCode) {
  TempDir dir;
  EXPECT_EQ(Tessera(dir, "run --tenant a --gpu 0 --mem 1GiB --share 50 -- sh -c 'exit 7'").exit_code, 7);
  CommandResult missing = Tessera(dir, "run --tenant a --gpu 0 --mem 1GiB --share 50 -- /nonexistent/cmd");
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_THAT(missing.err, HasSubstr("cannot run '/nonexistent/cmd'"));
}

TEST(NodeCli, StatusShowsARunningTenant) {
  TempDir dir;
  const std::string out = dir.path() + "/run.out";
  const std::string cmd = "cd '" + dir.path() + "' && " + Env(dir) + "'" + kBinary +
                          "' run --tenant alice --gpu 0 --mem 8GiB --share 30 --priority 2 -- '" + kProbe +
                          "' init alloc:mem:3145728 wait > '" + out + "'";
  FILE* run = ::popen(cmd.c_str(), "w");  // its stdin is ours: `wait` returns when we close it
  ASSERT_NE(run, nullptr);
  bool ready = false;
  for (int i = 0; i < 500 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ready = testing::ReadTextFile(out).find("wait ready") != std::string::npos;
  }
  ASSERT_TRUE(ready) << testing::ReadTextFile(out);
  CommandResult status = Tessera(dir, "node status --json");
  CommandResult text = Tessera(dir, "node status");
  EXPECT_EQ(::pclose(run), 0);
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const nlohmann::json j = nlohmann::json::parse(status.out);
  ASSERT_EQ(j["gpus"].size(), 1u) << status.out;
  EXPECT_EQ(j["gpus"][0]["gpu"], 0);
  EXPECT_EQ(j["gpus"][0]["arbiter_alive"], true);
  ASSERT_EQ(j["gpus"][0]["tenants"].size(), 1u);
  const nlohmann::json& t = j["gpus"][0]["tenants"][0];
  EXPECT_EQ(t["name"], "alice");
  EXPECT_EQ(t["limit_bytes"], 8ULL << 30);
  EXPECT_EQ(t["used_bytes"], 3ULL << 20);
  EXPECT_EQ(t["share"], 30);
  EXPECT_EQ(t["priority"], 2);
  EXPECT_EQ(t["scrub"], false);
  EXPECT_THAT(text.out, HasSubstr("alice"));
  // After the command: the tenant is gone, its memory released.
  CommandResult after = Tessera(dir, "node status --json");
  EXPECT_EQ(nlohmann::json::parse(after.out)["gpus"].size(), 0u) << after.out;
}

// --scrub: the tenant's policy entry gets the scrub flag (shown by node status), the shim zeroes
// memory before the free (the fake driver's free audit sees no data), and a later run of the same
// tenant without --scrub does not turn it off while the first one runs.
TEST(NodeCli, ScrubIsATenantSettingShownByStatusAndZeroesOnFree) {
  TempDir dir;
  const std::string out = dir.path() + "/run.out";
  const std::string cmd = "cd '" + dir.path() + "' && " + Env(dir) + "'" + kBinary +
                          "' run --tenant bob --gpu 0 --mem 64MiB --share 50 --scrub -- '" + kProbe +
                          "' init audit:1 alloc:mem:3000 poke:0:3000 wait free:0 scrubinfo > '" + out + "'";
  FILE* run = ::popen(cmd.c_str(), "w");
  ASSERT_NE(run, nullptr);
  bool ready = false;
  for (int i = 0; i < 500 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ready = testing::ReadTextFile(out).find("wait ready") != std::string::npos;
  }
  ASSERT_TRUE(ready) << testing::ReadTextFile(out);
  CommandResult joined = Tessera(dir, "run --tenant bob --gpu 0 --mem 64MiB --share 50 -- '" + kProbe + "' init");
  CommandResult status = Tessera(dir, "node status --json");
  CommandResult text = Tessera(dir, "node status");
  EXPECT_EQ(::pclose(run), 0);
  EXPECT_EQ(joined.exit_code, 0) << joined.err;
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const nlohmann::json j = nlohmann::json::parse(status.out);
  ASSERT_EQ(j["gpus"].size(), 1u) << status.out;
  ASSERT_EQ(j["gpus"][0]["tenants"].size(), 1u) << status.out;
  EXPECT_EQ(j["gpus"][0]["tenants"][0]["scrub"], true);
  EXPECT_THAT(text.out, HasSubstr("scrub"));
  const std::string result = testing::ReadTextFile(out);
  EXPECT_THAT(result, HasSubstr("free id=0 rc=0"));
  EXPECT_THAT(result, HasSubstr("scrubinfo dirty=0 memset=cuMemsetD8_v2 id=0 bytes=3000"));
}

TEST(NodeCli, TwoTenantsShareByWeight) {
  TempDir dir;
  const std::string go = dir.path() + "/go";
  auto start = [&](const std::string& name, int share) {
    const std::string cmd = "cd '" + dir.path() + "' && " + Env(dir) + "'" + kBinary + "' run --tenant " + name +
                            " --gpu 0 --mem 1GiB --share " + std::to_string(share) + " -- '" + kProbe +
                            "' init kernels:2000:1000:'" + go + "' > '" + dir.path() + "/" + name + ".out'";
    return ::popen(cmd.c_str(), "w");
  };
  FILE* a = start("a", 30);
  FILE* b = start("b", 70);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // both registered and polling
  ASSERT_EQ(std::system(("touch '" + go + "'").c_str()), 0);
  EXPECT_EQ(::pclose(a), 0);
  EXPECT_EQ(::pclose(b), 0);
  auto count = [&](const std::string& name) {
    const std::string text = testing::ReadTextFile(dir.path() + "/" + name + ".out");
    const size_t at = text.find("kernels count=");
    return at == std::string::npos ? -1L : std::strtol(text.c_str() + at + 14, nullptr, 10);
  };
  const long ca = count("a"), cb = count("b");
  ASSERT_GT(ca, 0);
  ASSERT_GT(cb, 0);
  const double share_b = static_cast<double>(cb) / static_cast<double>(ca + cb);
  std::printf("tessera run: a (30) %ld kernels, b (70) %ld kernels, share of b %.3f\n", ca, cb, share_b);
  EXPECT_NEAR(share_b, 0.7, 0.10);
}

TEST(NodeCli, BadFlagsAreExit2) {
  TempDir dir;
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 0 --mem 8XB --share 30 -- true"), "--mem '8XB': unknown unit 'XB'");
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 0 --mem GiB --share 30 -- true"), "--mem 'GiB'");
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 0 --mem 8GiB --share 0 -- true"), "--share");
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 0 --mem 8GiB --share 101 -- true"), "--share");
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 0 --mem 8GiB --share 30"), "no command given");
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 16 --mem 8GiB --share 30 -- true"), "--gpu");
}

}  // namespace
}  // namespace tessera
