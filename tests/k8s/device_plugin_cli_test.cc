// `tessera k8s device-plugin` as a program: it opens the (fake) GPUs, listens in --socket-dir,
// says what it advertises, and stops on SIGTERM; a bad --shares-per-gpu is refused naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/cli_test_util.h"

namespace tessera::k8s {
namespace {

using ::testing::HasSubstr;
using testing::RunTessera;
using testing::TempDir;

TEST(DevicePluginCli, AdvertisesNSharesPerGpuAndStopsOnSigterm) {
  TempDir dir;
  const std::string d = dir.path();
  std::filesystem::create_directories(d + "/dev");
  for (const char* node : {"nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"}) std::ofstream(d + "/dev/" + node);
  // `timeout` sends SIGTERM after 3 s: the plugin runs until then, with no kubelet to register with.
  testing::CommandResult r = RunTessera(
      dir,
      "k8s device-plugin --fake-gpus A100-40GB:2 --shares-per-gpu 4 --socket-dir '" + d + "/dp' --state-dir '" + d +
          "/state' --node-dir '" + d + "/node' --dev-dir '" + d + "/dev' --shim '" + TESSERA_SHIM_LIBRARY + "'",
      std::string("TESSERA_FAKE_NVML_LIBRARY='") + TESSERA_FAKE_NVML_PATH + "' timeout -s TERM 3");
  EXPECT_THAT(r.out, HasSubstr("8 devices of tessera.io/gpu-share (4 per GPU) on " + d + "/dp/tessera-gpu-share.sock"));
  EXPECT_THAT(r.out, HasSubstr("Register on " + d + "/dp/kubelet.sock"));
  EXPECT_THAT(r.out, HasSubstr("stopped (SIGTERM)"));
  EXPECT_FALSE(std::filesystem::exists(d + "/dp/tessera-gpu-share.sock"));
}

TEST(DevicePluginCli, ASharesPerGpuOutOfRangeIsRefusedNamingTheFlag) {
  TempDir dir;
  testing::CommandResult r = RunTessera(dir, "k8s device-plugin --shares-per-gpu 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--shares-per-gpu"));
}

}  // namespace
}  // namespace tessera::k8s
