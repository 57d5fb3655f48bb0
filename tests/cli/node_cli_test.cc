// Contract tests of `tessera run` and `tessera node status`, running the built binary with the
// in-tree fake libcuda.so.1 (LD_LIBRARY_PATH) and tessera_shim_probe as the command; every test
// has its own node directory (TESSERA_RUN_DIR).
//   - the memory limit is exact through `tessera run` (64 x 1 MiB fit into 64MiB, the 65th not);
//   - the command's exit code is tessera's;
//   - `node status --json` shows a running tenant's limit, usage and share, and forgets it after;
//   - two tenants with shares 30 and 70 get about 30/70 of the kernels (the arbiter runs inside
//     `tessera run`; loose tolerance for a loaded 2-core CI machine, see tests/shim/compute_test.cc);
//   - bad flags: exit 2 with one line naming the problem;
//   - a process SIGKILLed inside a run is reconciled by the arbiter's sweep and by every join; a
//     killed run's charge and peak never pass to the next tenant of its index; an index stays
//     reserved, with its limit, while a daemon of its tenant lives on after the tenant's runs.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

// `tessera run` under popen(…, "w"): its stdin is ours (a `wait` returns when it is closed).
FILE* StartRun(const TempDir& dir, const std::string& args, const std::string& out) {
  const std::string cmd =
      "cd '" + dir.path() + "' && " + Env(dir) + "'" + kBinary + "' run " + args + " > '" + out + "'";
  return ::popen(cmd.c_str(), "w");
}

bool WaitForText(const std::string& path, const std::string& text) {
  for (int i = 0; i < 1000; ++i) {
    if (testing::ReadTextFile(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The tenant rows of `node status --json` on GPU 0.
nlohmann::json Tenants(const TempDir& dir) {
  CommandResult status = Tessera(dir, "node status --json");
  const nlohmann::json j = nlohmann::json::parse(status.out, nullptr, false);
  if (j.is_discarded() || j["gpus"].empty()) return nlohmann::json::array();
  return j["gpus"][0]["tenants"];
}

// A process of a run is SIGKILLed while the run goes on: the GPU's arbiter (inside `tessera run`)
// reconciles it within its sweep (<= 100 ms; 10 s allowed here), and a second run of the tenant
// gets the full limit again.
TEST(NodeCli, AKilledProcessIsReconciledWhileItsRunLives) {
  TempDir dir;
  const std::string out = dir.path() + "/run.out";
  FILE* run = StartRun(dir, "--tenant a --gpu 0 --mem 64MiB --share 50 -- sh -c \"'" + kProbe +
                                "' init alloc:mem:67108864 selfkill; exec '" + kProbe + "' wait\"",
                       out);
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(WaitForText(out, "wait ready")) << testing::ReadTextFile(out);
  EXPECT_THAT(testing::ReadTextFile(out), HasSubstr("alloc family=mem rc=0"));
  std::uint64_t used = 1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (used != 0 && std::chrono::steady_clock::now() < deadline) {
    const nlohmann::json t = Tenants(dir);
    used = t.size() == 1 ? t[0]["used_bytes"].get<std::uint64_t>() : 1;
    if (used != 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(used, 0u) << "the killed process's 64 MiB must be reconciled while the run lives";
  CommandResult again = Tessera(dir, "run --tenant a --gpu 0 --mem 64MiB --share 50 -- '" + kProbe +
                                         "' init alloc:mem:67108864");
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("alloc family=mem rc=0"));
  EXPECT_EQ(::pclose(run), 0);
}

// A whole run is SIGKILLed (no `tessera run` left to clean up): the next tenant that takes its
// index is reconciled at its join and never inherits the dead process's charge or peak.
TEST(NodeCli, AKilledRunsChargeAndPeakDoNotPassToTheIndexsNextTenant) {
  TempDir dir;
  CommandResult killed = Tessera(dir, "run --tenant a --gpu 0 --mem 64MiB --share 50 -- sh -c \"'" + kProbe +
                                          "' init alloc:mem:67108864 selfkill; kill -9 \\$PPID\"");
  EXPECT_THAT(killed.out, HasSubstr("alloc family=mem rc=0"));
  const std::string out = dir.path() + "/b.out";
  FILE* run = StartRun(dir, "--tenant b --gpu 0 --mem 64MiB --share 50 -- '" + kProbe +
                                "' init alloc:mem:1048576 wait", out);
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(WaitForText(out, "wait ready")) << testing::ReadTextFile(out);
  const nlohmann::json t = Tenants(dir);
  EXPECT_EQ(::pclose(run), 0);
  EXPECT_THAT(testing::ReadTextFile(out), HasSubstr("alloc family=mem rc=0"));
  ASSERT_EQ(t.size(), 1u) << t.dump();
  EXPECT_EQ(t[0]["name"], "b");
  EXPECT_EQ(t[0]["index"], 0);
  EXPECT_EQ(t[0]["used_bytes"], 1ULL << 20);
  EXPECT_EQ(t[0]["peak_bytes"], 1ULL << 20);
}

// A tenant's statistics start at zero for the next tenant of its index (normal exits).
TEST(NodeCli, PeakStartsAtZeroForTheIndexsNextTenant) {
  TempDir dir;
  CommandResult a = Tessera(dir, "run --tenant a --gpu 0 --mem 64MiB --share 50 -- '" + kProbe +
                                     "' init alloc:mem:67108864 alloc:mem:512");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_THAT(a.out, HasSubstr("alloc family=mem rc=2"));  // one denial
  const std::string out = dir.path() + "/b.out";
  FILE* run = StartRun(dir, "--tenant b --gpu 0 --mem 64MiB --share 50 -- '" + kProbe +
                                "' init alloc:mem:1048576 wait", out);
  ASSERT_NE(run, nullptr);
  ASSERT_TRUE(WaitForText(out, "wait ready")) << testing::ReadTextFile(out);
  const nlohmann::json t = Tenants(dir);
  EXPECT_EQ(::pclose(run), 0);
  ASSERT_EQ(t.size(), 1u) << t.dump();
  EXPECT_EQ(t[0]["index"], 0);
  EXPECT_EQ(t[0]["peak_bytes"], 1ULL << 20) << "tenant a's 64 MiB peak must not carry over";
}

// A double-forked daemon of tenant a outlives a's `tessera run`: a's index stays reserved (b gets
// another one) and keeps a's limit, so the daemon stays within 64 MiB; once the daemon is gone,
// the index is free again.
TEST(NodeCli, AnIndexStaysReservedWithItsLimitWhileADaemonOfItsTenantLives) {
  TempDir dir;
  const std::string fifo = dir.path() + "/daemon.in";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int hold = ::open(fifo.c_str(), O_RDWR | O_CLOEXEC);  // the daemon's stdin, until closed
  ASSERT_GE(hold, 0);
  const std::string cmd = "cd '" + dir.path() + "' && " + Env(dir) + "'" + kBinary +
                          "' run --tenant a --gpu 0 --mem 64MiB --share 50 -- '" + kProbe +
                          "' daemonize init alloc:mem:4194304 detach wait fill:mem:1048576 < '" + fifo +
                          "'; echo a-exited=$?";
  FILE* a = ::popen(cmd.c_str(), "r");
  ASSERT_NE(a, nullptr);
  std::string seen;
  char line[512];
  while (seen.find("a-exited=") == std::string::npos && std::fgets(line, sizeof(line), a) != nullptr) seen += line;
  EXPECT_THAT(seen, HasSubstr("alloc family=mem rc=0"));
  EXPECT_THAT(seen, HasSubstr("a-exited=0"));
  // a's run is gone, its daemon holds 4 MiB under index 0.
  CommandResult b = Tessera(dir, "run --tenant b --gpu 0 --mem 1GiB --share 50 -- sh -c 'echo index=$TESSERA_SHIM_TENANT'");
  EXPECT_EQ(b.exit_code, 0) << b.err;
  EXPECT_THAT(b.out, HasSubstr("index=1")) << "index 0 is still held by a's daemon";
  ::close(hold);  // the daemon fills up to a's limit, then exits
  while (std::fgets(line, sizeof(line), a) != nullptr) seen += line;
  ::pclose(a);
  EXPECT_THAT(seen, HasSubstr("fill family=mem count=60 rc=2")) << seen;
  CommandResult c = Tessera(dir, "run --tenant c --gpu 0 --mem 1GiB --share 50 -- sh -c 'echo index=$TESSERA_SHIM_TENANT'");
  EXPECT_THAT(c.out, HasSubstr("index=0")) << "the daemon is gone: its index is free";
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
