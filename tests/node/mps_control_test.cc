// MpsControl against the in-tree fake nvidia-cuda-mps-control (tests/testing/fake_mps): per-GPU
// daemons with their own directories, commands sent through the control program's stdin, quit,
// a daemon that died, a missing program; and the client's variables from a workload's mode.
#include "tessera/node/mps_control.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <unistd.h>

#include "tests/testing/sim_test_util.h"

namespace tessera::node {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using tessera::testing::TempDir;

// The lines the fake daemon recorded in a log directory's control.log.
std::vector<std::string> Recorded(const MpsPaths& paths) {
  std::ifstream in(paths.log_dir + "/control.log");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line.substr(0, line.find(" pid=")));
  return lines;
}

class MpsControlTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (int gpu = 0; gpu < 2; ++gpu)
      if (const long pid = mps.DaemonPid(gpu); pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
  TempDir dir;
  MpsControl mps{{.run_dir = dir.File("node"), .control_binary = TESSERA_FAKE_MPS_CONTROL}};
};

TEST(MpsModeTest, ThreadPercentageComesFromTheModeElseTheShare) {
  EXPECT_TRUE(IsMpsMode("mps(30,1024MiB)"));
  EXPECT_TRUE(IsMpsMode("mps"));
  EXPECT_FALSE(IsMpsMode("fraction(300,1024MiB)"));
  EXPECT_FALSE(IsMpsMode("mpsx"));
  EXPECT_EQ(MpsThreadPercentage("mps(30,1024MiB)", 300), 30);
  EXPECT_EQ(MpsThreadPercentage("mps", 301), 31);  // rounds up, as the mode choice does
  EXPECT_EQ(MpsThreadPercentage("mps(x,1MiB)", 1000), 100);
  EXPECT_EQ(MpsThreadPercentage("mps(0,1MiB)", 500), 1);
  EXPECT_EQ(MpsThreadPercentage("mps(250,1MiB)", 500), 100);
}

TEST(MpsModeTest, TheClientsPinnedLimitIsTheLimitPlusTheContextAllowanceOnDeviceZero) {
  const MpsPaths paths{"/run/t/mps/gpu1/pipe", "/run/t/mps/gpu1/log"};
  using Env = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(MpsClientEnvironment(paths, 30, uint64_t{1024} << 20, 500),
            (Env{{"CUDA_MPS_PIPE_DIRECTORY", "/run/t/mps/gpu1/pipe"},
                 {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30"},
                 {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=1524M"}}));
  // A limit that is not whole MiB rounds up.
  EXPECT_EQ(MpsClientEnvironment(paths, 100, (uint64_t{1} << 20) + 1, 0)[2].second, "0=2M");
}

TEST_F(MpsControlTest, OneDaemonPerGpuWithItsOwnDirectoriesStartedOnce) {
  EXPECT_EQ(mps.DaemonPid(0), 0);
  StatusOr<bool> started = mps.Ensure(0, "GPU-a");
  ASSERT_TRUE(started.ok()) << started.status().message();
  EXPECT_TRUE(*started);
  const long pid0 = mps.DaemonPid(0);
  EXPECT_GT(pid0, 0);
  StatusOr<bool> again = mps.Ensure(0, "GPU-a");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  EXPECT_EQ(mps.DaemonPid(0), pid0);
  ASSERT_TRUE(mps.Ensure(1, "GPU-b").ok());
  EXPECT_GT(mps.DaemonPid(1), 0);
  EXPECT_NE(mps.DaemonPid(1), pid0);
  EXPECT_EQ(mps.Paths(0).pipe_dir, dir.File("node/mps/gpu0/pipe"));
  EXPECT_EQ(mps.Paths(1).log_dir, dir.File("node/mps/gpu1/log"));
  std::ifstream log0(mps.Paths(0).log_dir + "/control.log");
  std::string first;
  std::getline(log0, first);
  EXPECT_THAT(first, HasSubstr("CUDA_VISIBLE_DEVICES=GPU-a"));
  EXPECT_THAT(Recorded(mps.Paths(0)), ElementsAre("start"));
  EXPECT_THAT(Recorded(mps.Paths(1)), ElementsAre("start"));
}

TEST_F(MpsControlTest, CommandsGoThroughTheControlProgramsStdinAndQuitStopsTheDaemon) {
  ASSERT_TRUE(mps.Ensure(0, "0").ok());
  StatusOr<std::string> out = mps.Command(0, "set_default_active_thread_percentage 30");
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "30\n");
  out = mps.Command(0, "get_default_active_thread_percentage");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "30\n");
  out = mps.Command(0, "get_server_list");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "");
  ASSERT_GT(mps.DaemonPid(0), 0);
  ASSERT_TRUE(mps.Stop(0).ok());
  EXPECT_EQ(mps.DaemonPid(0), 0);
  EXPECT_THAT(Recorded(mps.Paths(0)),
              ElementsAre("start", "command set_default_active_thread_percentage 30",
                          "command get_default_active_thread_percentage", "command get_server_list", "command quit",
                          "quit"));
  // No daemon: a command fails with what the control program said; Stop has nothing to do.
  StatusOr<std::string> none = mps.Command(0, "get_server_list");
  EXPECT_EQ(none.status().code(), StatusCode::kInternal);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("Cannot find MPS control daemon"));
  EXPECT_TRUE(mps.Stop(0).ok());
}

TEST_F(MpsControlTest, ADaemonThatWasKilledIsNotTakenForRunningAndStartsAgain) {
  ASSERT_TRUE(mps.Ensure(0, "0").ok());
  const long pid = mps.DaemonPid(0);
  ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGKILL), 0);
  for (int i = 0; i < 500 && mps.DaemonPid(0) == pid; ++i) ::usleep(2000);  // the kill lands
  EXPECT_EQ(mps.DaemonPid(0), 0);  // its pid file is still there: the process is checked
  StatusOr<bool> started = mps.Ensure(0, "0");
  ASSERT_TRUE(started.ok()) << started.status().message();
  EXPECT_TRUE(*started);
  EXPECT_GT(mps.DaemonPid(0), 0);
  EXPECT_NE(mps.DaemonPid(0), pid);
  EXPECT_THAT(Recorded(mps.Paths(0)), ElementsAre("start", "start"));
}

TEST_F(MpsControlTest, AMissingControlProgramIsFailedPreconditionNamingItAndTheFlag) {
  MpsControl missing({.run_dir = dir.File("node"), .control_binary = dir.File("no/nvidia-cuda-mps-control")});
  StatusOr<bool> st = missing.Ensure(0, "0");
  EXPECT_EQ(st.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.status().message()), HasSubstr("no/nvidia-cuda-mps-control"));
  EXPECT_THAT(std::string(st.status().message()), HasSubstr("--mps-control"));
  MpsControl not_on_path({.run_dir = dir.File("node"), .control_binary = "tessera-no-such-mps-control"});
  EXPECT_THAT(std::string(not_on_path.ResolveBinary().status().message()),
              HasSubstr("'tessera-no-such-mps-control' not found on PATH"));
}

}  // namespace
}  // namespace tessera::node
