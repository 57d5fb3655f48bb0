// Contract tests of `tessera run` and `tessera node status`, running the built binary with the
// in-tree fake libcuda.so.1 (LD_LIBRARY_PATH) and tessera_shim_probe as the command; every test
// has its own node directory (TESSERA_RUN_DIR).
//   - the memory limit is exact through `tessera run` (64 x 1 MiB fit into 64MiB, the 65th not);
//   - the command's exit code is tessera's;
//   - `node status --json` shows a running tenant's limit, usage and share, and forgets it after;
//   - two tenants with shares 30 and 70 get about 30/70 of the kernels (the arbiter runs inside
//     `tessera run`; loose tolerance for a loaded 2-core CI machine, see tests/shim/compute_test.cc);
//   - bad flags: exit 2 with one line naming the problem;
//   - fail closed: no shim, no arbiter admission, a corrupt registry -> the command does not run;
//   - --gpu N pins the command to GPU N (CUDA_VISIBLE_DEVICES = its UUID from NVML, else N);
//   - a SIGKILLed `tessera run` takes its command with it, and its charge is not inherited.
//   - a standby run (another holds the GPU's arbiter lock) ends with its command, and takes over
//     from a SIGKILLed holder within a second;
//   - a process SIGKILLed inside a run is reconciled by the arbiter's sweep and by every join; a
//     killed run's charge and peak never pass to the next tenant of its index; an index stays
//     reserved, with its limit, while a daemon of its tenant lives on after the tenant's runs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
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
  CommandResult status = Tessera(dir, "node status --json -");
  CommandResult text = Tessera(dir, "node status");
  CommandResult other_gpu =
      Tessera(dir, "run --tenant alice --gpu 1 --mem 8GiB --share 30 --nvml /nonexistent/libnvidia-ml.so.1 -- true");
  EXPECT_EQ(::pclose(run), 0);
  EXPECT_EQ(other_gpu.exit_code, 1);
  EXPECT_EQ(other_gpu.err,
            "tessera run: tenant 'alice' already runs on GPU(s) 0, not 1 (every member asks for the same GPUs)\n");
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
  CommandResult after = Tessera(dir, "node status --json -");
  EXPECT_EQ(nlohmann::json::parse(after.out)["gpus"].size(), 0u) << after.out;
}

// --scrub: the tenant's policy entry gets the scrub flag (shown by node status), the shim zeroes
// memory before the free (the fake driver's free audit sees no data), and a later run of the same
// tenant without --scrub does not turn it off while the first one runs.
// Without an agent, `tessera run` itself checks its tenant's counters file once a second: a
// command that truncates it (its memory no longer accounted) is killed, 137, with a line that
// names the file. Before, the run went on with the tenant unaccounted until the command ended.
TEST(NodeCli, ACommandThatTruncatesItsCountersFileIsKilled) {
  TempDir dir;
  const auto t0 = std::chrono::steady_clock::now();
  CommandResult r = Tessera(dir, "run --tenant a --gpu 0 --mem 64MiB --share 50 -- sh -c "
                                 "': > \"$TESSERA_SHIM_COUNTERS/$TESSERA_SHIM_TENANT\"; sleep 30'");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(r.exit_code, 137) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tessera run: the command was killed: counters file '"));
  EXPECT_THAT(r.err, HasSubstr("size 0"));
  EXPECT_THAT(r.err, HasSubstr("its memory is no longer accounted"));
  // The node goes on: another tenant runs.
  EXPECT_EQ(Tessera(dir, "run --tenant b --gpu 0 --mem 64MiB --share 50 -- sh -c 'sleep 1.5; exit 3'").exit_code, 3);
}

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
  CommandResult status = Tessera(dir, "node status --json -");
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
                            "' init meminfo kernels:2000:1000:'" + go + "' > '" + dir.path() + "/" + name + ".out'";
    return ::popen(cmd.c_str(), "w");
  };
  FILE* a = start("a", 30);
  FILE* b = start("b", 70);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // Ready handshake: a probe prints its meminfo line once admitted, right before it waits for `go`.
  bool ready = false;
  for (int i = 0; i < 2000 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ready = testing::ReadTextFile(dir.path() + "/a.out").find("meminfo") != std::string::npos &&
            testing::ReadTextFile(dir.path() + "/b.out").find("meminfo") != std::string::npos;
  }
  ASSERT_EQ(std::system(("touch '" + go + "'").c_str()), 0);  // also when not ready: they must end
  EXPECT_EQ(::pclose(a), 0);
  EXPECT_EQ(::pclose(b), 0);
  ASSERT_TRUE(ready) << "the probes did not report ready";
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
  CommandResult status = Tessera(dir, "node status --json -");
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
  // The run's command dies with its supervisor (PR_SET_PDEATHSIG): a's entry lives until the
  // last process of its command's group is gone, a moment after the supervisor (10 s allowed).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!Tenants(dir).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(Tenants(dir).empty()) << Tenants(dir).dump();
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

// --uid: the command runs under that uid, its tenant's counters file is its own, and another
// tenant's is not writable to it (docs/security.md). Tests run as root, as CI does.
TEST(NodeCli, UidRunsTheCommandUnderItAndNoOtherTenantsCountersAreWritableToIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a command under another uid (CI runs as root)";
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);  // mkdtemp's 0700 would keep the command out
  CommandResult r = Tessera(dir, "run --tenant a --gpu 0 --mem 64MiB --share 30 --uid 65534 -- sh -c 'id -u && exec \"" +
                                     kProbe + "\" init alloc:mem:1048576 counter:1:0:1'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("65534\n"));
  EXPECT_THAT(r.out, HasSubstr("alloc family=mem rc=0"));
  EXPECT_THAT(r.out, HasSubstr("counter rc=1 errno=" + std::to_string(EACCES)));
  struct stat st {};
  ASSERT_EQ(::stat((dir.path() + "/node/counters/0").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  ExpectBadInput(Tessera(dir, "run --tenant a --uid 65534 --server http://127.0.0.1:1 -- true"), "--uid");
}

// The dynamic loader skips an LD_PRELOAD it cannot read (one warning) and runs the command without
// the shim. Under --uid (and so under the agent's tenant uids) a shim the uid cannot read ends the
// command with 126 before it runs.
TEST(NodeCli, AShimTheUidCannotReadIsNotSkipped) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a command under another uid (CI runs as root)";
  TempDir dir;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir.path() + "/closed").c_str(), 0700), 0);  // only root enters
  const std::string shim = kBinary.substr(0, kBinary.rfind('/')) + "/libtessera-shim.so";
  ASSERT_EQ(std::system(("cp '" + shim + "' '" + dir.path() + "/closed/'").c_str()), 0);
  ASSERT_EQ(::mkdir((dir.path() + "/out").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((dir.path() + "/out").c_str(), 0777), 0);  // the command (uid 65534) may write here
  const std::string ran = dir.path() + "/out/ran";
  CommandResult r = testing::RunTessera(
      dir, "run --tenant a --gpu 0 --mem 64MiB --share 30 --uid 65534 -- sh -c 'echo ran > \"" + ran + "\"'",
      Env(dir) + "TESSERA_SHIM_PATH='" + dir.path() + "/closed/libtessera-shim.so'");
  EXPECT_EQ(r.exit_code, 126) << r.err;
  EXPECT_THAT(r.err, HasSubstr("uid 65534 cannot read the shim '" + dir.path() + "/closed/libtessera-shim.so'"));
  EXPECT_NE(::access(ran.c_str(), F_OK), 0) << "the command ran without the shim";
}

// tessera agent's --tenant-uids and --tenant-uid: every bad setting at once, exit 2, before the
// agent reads its token or calls anyone.
TEST(NodeCli, TheAgentsBadTenantUidFlagsAreAllReportedAtOnce) {
  TempDir dir;
  const std::string agent = "agent --server http://127.0.0.1:1 --token-file '" + dir.path() + "/none' ";
  CommandResult r = Tessera(dir, agent + "--tenant-uids 5-1 --tenant-uid a=0 --tenant-uid b=7 --tenant-uid c=7");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--tenant-uids '5-1': expected FIRST-LAST"));
  EXPECT_THAT(r.err, HasSubstr("--tenant-uid 'a=0': expected TENANT=UID"));
  EXPECT_THAT(r.err, HasSubstr("--tenant-uid 'c=7': uid 7 is given to tenant 'b' too"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("token")));
  r = Tessera(dir, agent + "--tenant-uids off --tenant-uid a=7");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--tenant-uid needs tenant uids on"));
}

TEST(NodeCli, BadFlagsAreExit2) {
  TempDir dir;
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 0 --mem 8XB --share 30 -- true"), "--mem '8XB': unknown unit 'XB'");
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 0 --mem GiB --share 30 -- true"), "--mem 'GiB'");
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 0 --mem 8GiB --share 0 -- true"), "--share");
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 0 --mem 8GiB --share 1001 -- true"), "--share");
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 0 --mem 8GiB --share 30"), "no command given");
  ExpectBadInput(Tessera(dir, "run --tenant a --gpu 16 --mem 8GiB --share 30 -- true"), "--gpu");
  ExpectBadInput(Tessera(dir, "run --tenant a --mem 8GiB -- true"), "--gpu, --mem and --share are required");
  ExpectBadInput(Tessera(dir, "run --server http://127.0.0.1:1 --token t --tenant a --gpu 0 -- true"),
                 "--gpu is chosen by the control plane");
  ExpectBadInput(Tessera(dir, "run --server ftp://x --token t --tenant a -- true"), "--server");
  // A size needs a unit: "4096" is not silently 4096 bytes.
  CommandResult bare = Tessera(dir, "run --tenant a --gpu 0 --mem 4096 --share 30 -- true");
  ExpectBadInput(bare, "tessera run: --mem '4096': no unit");
  EXPECT_THAT(bare.err, HasSubstr("B, KiB, MiB, GiB, TiB, KB, MB, GB or TB"));
}

// The shim cannot be loaded: the command must not run without limits (fail closed).
TEST(NodeCli, RefusesToRunWithoutALoadableShim) {
  TempDir dir;
  const std::string ran = dir.path() + "/ran";
  const std::string run = "run --tenant a --gpu 0 --mem 1GiB --share 50 -- touch '" + ran + "'";
  CommandResult missing =
      testing::RunTessera(dir, run, Env(dir) + "TESSERA_SHIM_PATH=/nonexistent/libtessera-shim.so");
  ExpectBadInput(missing, "tessera run: /nonexistent/libtessera-shim.so");
  EXPECT_THAT(missing.err, ::testing::StartsWith("tessera run: "));
  ASSERT_EQ(std::system(("echo 'not a library' > '" + dir.path() + "/fake.so'").c_str()), 0);
  CommandResult not_elf = testing::RunTessera(dir, run, Env(dir) + "TESSERA_SHIM_PATH='" + dir.path() + "/fake.so'");
  ExpectBadInput(not_elf, dir.path() + "/fake.so");
  CommandResult folder = testing::RunTessera(dir, run, Env(dir) + "TESSERA_SHIM_PATH='" + dir.path() + "'");
  ExpectBadInput(folder, "tessera run: " + dir.path());
  EXPECT_NE(::access(ran.c_str(), F_OK), 0) << "the command ran without the shim";
}

// Nobody drives GPU 0's lease board (its arbiter lock is held by a process that never steps):
// the command would launch ungated, so tessera run refuses after the admission wait.
TEST(NodeCliAdmission, RefusesToRunWhenTheArbiterNeverAdmitsTheTenant) {
  TempDir dir;
  ASSERT_EQ(::mkdir((dir.path() + "/node").c_str(), 0755), 0);
  const int fd = ::open((dir.path() + "/node/arbiter-gpu0.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  const std::string ran = dir.path() + "/ran";
  CommandResult r = Tessera(dir, "run --tenant a --gpu 0 --mem 1GiB --share 50 -- touch '" + ran + "'");
  ::close(fd);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tessera run: GPU 0's lease arbiter did not admit tenant 'a'"));
  EXPECT_NE(::access(ran.c_str(), F_OK), 0) << "the command ran ungated";
  // The failed run left nothing behind.
  CommandResult next = Tessera(dir, "node status --json -");
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(nlohmann::json::parse(next.out)["gpus"].size(), 0u) << next.out;
}

// --gpu N: the command sees only GPU N (its NVML UUID, else the index), the shim maps ordinal 0
// to node GPU N, and a caller's CUDA_VISIBLE_DEVICES can narrow but never widen that.
TEST(NodeCli, GpuFlagPinsTheCommandToThatGpu) {
  TempDir dir;
  const std::string nvml = "TESSERA_FAKE_NVML_CONFIG='H100-80GB*2' ";
  const std::string show = " -- sh -c 'echo \"CVD=$CUDA_VISIBLE_DEVICES SG=$TESSERA_SHIM_GPUS\"'";
  const std::string fake = " --nvml '" + std::string(TESSERA_FAKE_NVML_PATH) + "'";
  CommandResult uuid = testing::RunTessera(dir, "run --tenant a --gpu 1 --mem 1GiB --share 50" + fake + show,
                                           Env(dir) + nvml);
  ASSERT_EQ(uuid.exit_code, 0) << uuid.err;
  EXPECT_THAT(uuid.out, HasSubstr("CVD=GPU-fa4e0000-0000-4000-8000-000000000001 SG=1\n"));
  CommandResult index = testing::RunTessera(
      dir, "run --tenant a --gpu 3 --mem 1GiB --share 50 --nvml /nonexistent/libnvidia-ml.so.1" + show, Env(dir));
  ASSERT_EQ(index.exit_code, 0) << index.err;
  EXPECT_THAT(index.out, HasSubstr("CVD=3 SG=3\n"));
  // The caller already restricted the GPUs: GPU 1 among them -> pinned to it; not -> refused.
  CommandResult narrowed = testing::RunTessera(dir, "run --tenant a --gpu 1 --mem 1GiB --share 50" + fake + show,
                                               Env(dir) + nvml + "CUDA_VISIBLE_DEVICES=1,0");
  ASSERT_EQ(narrowed.exit_code, 0) << narrowed.err;
  EXPECT_THAT(narrowed.out, HasSubstr("CVD=GPU-fa4e0000-0000-4000-8000-000000000001 SG=1\n"));
  CommandResult by_uuid =
      testing::RunTessera(dir, "run --tenant a --gpu 1 --mem 1GiB --share 50" + fake + show,
                          Env(dir) + nvml + "CUDA_VISIBLE_DEVICES=GPU-fa4e0000-0000-4000-8000-000000000001");
  ASSERT_EQ(by_uuid.exit_code, 0) << by_uuid.err;
  EXPECT_THAT(by_uuid.out, HasSubstr("CVD=GPU-fa4e0000-0000-4000-8000-000000000001 SG=1\n"));
  ExpectBadInput(testing::RunTessera(dir, "run --tenant a --gpu 1 --mem 1GiB --share 50" + fake + show,
                                     Env(dir) + nvml + "CUDA_VISIBLE_DEVICES=0"),
                 "tessera run: GPU 1 is not in CUDA_VISIBLE_DEVICES='0'");
  ExpectBadInput(testing::RunTessera(dir, "run --tenant a --gpu 2 --mem 1GiB --share 50" + fake + show,
                                     Env(dir) + nvml),
                 "tessera run: GPU 2: the node has 2 GPU(s)");
}

// --gpu 0,1 (a pod's GPUs): the command sees both, in that order; the limit holds on each GPU
// (64 x 1 MiB fit on ordinal 0 and again on ordinal 1, the 65th not); while it runs, node status
// shows the tenant under both GPUs, and a third ordinal does not exist for it.
TEST(NodeCli, OneCommandOnTwoGpusHasTheLimitOnEachAndSeesBoth) {
  TempDir dir;
  const std::string nvml = "TESSERA_FAKE_NVML_CONFIG='H100-80GB*2' ";
  const std::string fake = " --nvml '" + std::string(TESSERA_FAKE_NVML_PATH) + "'";
  CommandResult env = testing::RunTessera(
      dir, "run --tenant p --gpu 1,0 --mem 1GiB --share 50" + fake +
               " -- sh -c 'echo \"CVD=$CUDA_VISIBLE_DEVICES SG=$TESSERA_SHIM_GPUS\"'",
      Env(dir) + nvml);
  ASSERT_EQ(env.exit_code, 0) << env.err;
  EXPECT_THAT(env.out, HasSubstr("CVD=GPU-fa4e0000-0000-4000-8000-000000000001,GPU-fa4e0000-0000-4000-8000-000000000000 "
                                 "SG=1,0\n"));

  const std::string out = dir.path() + "/run.out";
  const std::string cmd = "cd '" + dir.path() + "' && " + Env(dir) + "TESSERA_FAKE_CUDA_DEVICES=3 '" + kBinary +
                          "' run --tenant p --gpu 0,1 --mem 64MiB --share 30 --nvml /nonexistent -- '" + kProbe +
                          "' init fill:mem:1048576 ctx:1 fill:mem:1048576 ctx:2 alloc:mem:1048576 wait > '" + out + "'";
  FILE* run = ::popen(cmd.c_str(), "w");  // `wait` returns when we close its stdin
  ASSERT_NE(run, nullptr);
  bool ready = false;
  for (int i = 0; i < 500 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ready = testing::ReadTextFile(out).find("wait ready") != std::string::npos;
  }
  CommandResult status = Tessera(dir, "node status --json -");
  EXPECT_EQ(::pclose(run), 0);
  ASSERT_TRUE(ready) << testing::ReadTextFile(out);
  const std::string printed = testing::ReadTextFile(out);
  size_t first = printed.find("fill family=mem count=64 rc=2");
  ASSERT_NE(first, std::string::npos) << printed;
  EXPECT_NE(printed.find("fill family=mem count=64 rc=2", first + 1), std::string::npos) << printed;
  EXPECT_THAT(printed, HasSubstr("alloc family=mem rc=101 ")) << "ordinal 2 (no GPU of the tenant): invalid device";
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const nlohmann::json j = nlohmann::json::parse(status.out);
  ASSERT_EQ(j["gpus"].size(), 2u) << status.out;
  for (int g = 0; g < 2; ++g) {
    EXPECT_EQ(j["gpus"][g]["gpu"], g);
    ASSERT_EQ(j["gpus"][g]["tenants"].size(), 1u) << status.out;
    EXPECT_EQ(j["gpus"][g]["tenants"][0]["name"], "p");
    EXPECT_EQ(j["gpus"][g]["tenants"][0]["used_bytes"], 64 << 20) << status.out;
    EXPECT_EQ(j["gpus"][g]["arbiter_alive"], true);
  }
  ExpectBadInput(Tessera(dir, "run --tenant q --gpu 0,0 --mem 1GiB --share 50 -- true"),
                 "tessera run: GPU 0 is given twice");
}

bool Dead(pid_t pid, std::chrono::seconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < until) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) return true;  // reaped: we are its subreaper
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// SIGKILL of the supervising `tessera run`: its command dies with it (it is not left running
// unlimited and invisible), and the next tenant does not inherit its memory charge.
TEST(NodeCli, KillingTesseraRunKillsItsCommand) {
  TempDir dir;
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);  // the orphaned command becomes our child
  struct Unset {
    ~Unset() { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
  } unset;
  const std::string out = dir.path() + "/run.out", pid_file = dir.path() + "/cmd.pid";
  int in[2];
  ASSERT_EQ(::pipe(in), 0);
  const std::string node = dir.path() + "/node";
  const std::string script = "echo $$ > '" + pid_file + "'; exec '" + kProbe + "' init alloc:mem:3145728 wait";
  const pid_t run = ::fork();
  ASSERT_GE(run, 0);
  if (run == 0) {
    ::dup2(in[0], 0);
    ::close(in[0]);
    ::close(in[1]);
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::setenv("TESSERA_RUN_DIR", node.c_str(), 1);
    ::setenv("LD_LIBRARY_PATH", TESSERA_FAKE_CUDA_DIR, 1);
    ::execl(kBinary.c_str(), "tessera", "run", "--tenant", "a", "--gpu", "0", "--mem", "64MiB", "--share", "50",
            "--", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(in[0]);
  bool ready = false;
  for (int i = 0; i < 1000 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ready = testing::ReadTextFile(out).find("wait ready") != std::string::npos;
  }
  const pid_t command = static_cast<pid_t>(std::strtol(testing::ReadTextFile(pid_file).c_str(), nullptr, 10));
  ASSERT_EQ(::kill(run, SIGKILL), 0);
  ASSERT_EQ(::waitpid(run, nullptr, 0), run);
  const bool died = command > 0 && Dead(command, std::chrono::seconds(20));
  if (!died && command > 0) ::kill(command, SIGKILL);
  ::close(in[1]);
  if (!died && command > 0) Dead(command, std::chrono::seconds(20));
  ASSERT_TRUE(ready) << testing::ReadTextFile(out);
  ASSERT_GT(command, 0);
  EXPECT_TRUE(died) << "the command outlived its tessera run";
  // A new tenant: all 64 MiB of its limit are free (it did not get the dead one's charged index).
  CommandResult b = Tessera(dir, "run --tenant b --gpu 0 --mem 64MiB --share 50 -- '" + kProbe + "' init meminfo");
  ASSERT_EQ(b.exit_code, 0) << b.err;
  EXPECT_THAT(b.out, HasSubstr("meminfo rc=0 free=67108864 total=67108864"));
}

// Runs b and s wait while run a holds GPU 0's arbiter lock (standbys: a thread of each blocked in
// flock, ArbiterDuty). s's command ends: s ends with it, at once (its round wakes on the command's
// pidfd, not at its next counters check a second later). a is SIGKILLed: b takes the lock over
// within a second (the kernel wakes its waiter) and drives the board: a new tenant c is admitted.
TEST(NodeCli, AStandbyRunEndsWithItsCommandAndTakesOverWhenTheHoldingRunIsKilled) {
  TempDir dir;
  // Tenant t's command writes its supervisor's pid (its parent) to t.pid and waits for its stdin.
  const auto wait = [&](const std::string& t) {
    return "--tenant " + t + " --gpu 0 --mem 64MiB --share 30 -- sh -c \"echo \\$PPID > '" + dir.path() + "/" + t +
           ".pid'; exec '" + kProbe + "' init wait\"";
  };
  FILE* a = StartRun(dir, wait("a"), dir.path() + "/a.out");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(WaitForText(dir.path() + "/a.out", "wait ready")) << testing::ReadTextFile(dir.path() + "/a.out");
  FILE* b = StartRun(dir, wait("b"), dir.path() + "/b.out");
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(WaitForText(dir.path() + "/b.out", "wait ready")) << testing::ReadTextFile(dir.path() + "/b.out");
  FILE* s = StartRun(dir, wait("s"), dir.path() + "/s.out");
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(WaitForText(dir.path() + "/s.out", "wait ready")) << testing::ReadTextFile(dir.path() + "/s.out");

  // s's counters check is due about a second after its command started: a standby that slept
  // until then (not woken by its command's exit) would end most of a second after the close.
  const auto closed = std::chrono::steady_clock::now();
  EXPECT_EQ(::pclose(s), 0);  // closes s's stdin: its command's `wait` returns
  const auto ended = std::chrono::steady_clock::now() - closed;
  std::printf("a standby run ended %lld ms after its command's stdin was closed\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(ended).count()));
  EXPECT_LT(ended, std::chrono::milliseconds(500)) << "a standby run outlived its command";

  const pid_t holder = static_cast<pid_t>(std::strtol(testing::ReadTextFile(dir.path() + "/a.pid").c_str(), nullptr, 10));
  ASSERT_GT(holder, 0);
  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  (void)::pclose(a);  // a's shell ends with a (its command dies with it: PR_SET_PDEATHSIG)
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const int fd = ::open((dir.path() + "/node/arbiter-gpu0.lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const int taken = ::flock(fd, LOCK_EX | LOCK_NB);
  ::close(fd);  // drops the lock if it was free (the assertion below has failed then)
  EXPECT_NE(taken, 0) << "nobody took GPU 0's arbiter lock over within a second of the holder's death";
  CommandResult c = Tessera(dir, "run --tenant c --gpu 0 --mem 64MiB --share 30 -- '" + kProbe + "' init meminfo");
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(::pclose(b), 0);
}

// A registry that is not what tessera wrote: an error naming the file, never a crash, and the
// file is left as it was (other tenants' entries are not silently reset).
TEST(NodeCli, CorruptRegistryIsAnErrorNamingTheFile) {
  TempDir dir;
  ASSERT_EQ(Tessera(dir, "run --tenant a --gpu 0 --mem 1GiB --share 50 -- true").exit_code, 0);
  const std::string registry = dir.path() + "/node/tenants.json";
  for (const std::string& text : {std::string("{not json"), std::string("[]"),
                                  std::string(R"({"version": 1, "tenants": [{"name": "x", "index": "zero"}]})"),
                                  std::string(R"({"version": 1, "tenants": [{"name": "x", "gpu": 0}]})"),
                                  std::string(R"({"version": 1, "tenants": {}})")}) {
    SCOPED_TRACE(text);
    { std::ofstream(registry) << text; }
    CommandResult r = Tessera(dir, "run --tenant b --gpu 0 --mem 1GiB --share 50 -- true");
    EXPECT_FALSE(r.Crashed()) << r.err;
    EXPECT_NE(r.exit_code, 0);
    EXPECT_THAT(r.err, ::testing::StartsWith("tessera run: " + registry + ": "));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    CommandResult s = Tessera(dir, "node status");
    EXPECT_FALSE(s.Crashed()) << s.err;
    EXPECT_NE(s.exit_code, 0);
    EXPECT_THAT(s.err, ::testing::StartsWith("tessera node status: " + registry + ": "));
    EXPECT_EQ(testing::ReadTextFile(registry), text);
  }
}

// --json PATH (as everywhere in the CLI): "-" is stdout, else a file; without it, the table.
TEST(NodeCli, StatusJsonTakesAPath) {
  TempDir dir;
  CommandResult file = Tessera(dir, "node status --json status.json");
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_EQ(file.out, "");
  EXPECT_EQ(nlohmann::json::parse(testing::ReadTextFile(dir.path() + "/status.json"))["gpus"].size(), 0u);
  CommandResult out = Tessera(dir, "node status --json -");
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_EQ(nlohmann::json::parse(out.out)["gpus"].size(), 0u);
  CommandResult table = Tessera(dir, "node status");
  EXPECT_THAT(table.out, HasSubstr("no tessera node at"));
  ExpectBadInput(Tessera(dir, "node status --json"), "--json");
}

}  // namespace
}  // namespace tessera
