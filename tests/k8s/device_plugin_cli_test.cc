// `tessera k8s device-plugin` as a program: it opens the (fake) GPUs, listens in --socket-dir,
// says what it advertises, and stops on SIGTERM; a bad --shares-per-gpu is refused naming it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <map>
#include <vector>

#include <yaml-cpp/yaml.h>

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

// The backstop in the program: a slot adopted from the checkpoint (1 GiB on GPU 0), a process whose
// /proc stand-in mountinfo names that slot's tenant file at <container dir>/node/tenant and that
// NVML says holds 3,000 MiB (2,500 beyond its context allowance) is SIGKILLed within a period, with
// one line on stderr naming the slot; a host process on the same GPU is left alone.
TEST(DevicePluginCli, TheBackstopKillsAProcessOfASlotOverItsLimitAndSaysWhich) {
  TempDir dir;
  const std::string d = dir.path();
  const pid_t over = ::fork(), host = over == 0 ? 0 : ::fork();
  if (over == 0 || host == 0) {
    for (;;) ::pause();
  }
  std::filesystem::create_directories(d + "/state");
  std::ofstream(d + "/state/checkpoint.json")
      << R"({"version": 1, "resource_name": "tessera.io/gpu-share", "slots": [{"tenant": "k8s-dp/X::0",
            "devices": ["X::0"], "index": 0, "gpus": [0], "mem_bytes": 1073741824, "share": 250,
            "account": "kubernetes", "workload": "k8s-device-plugin"}]})";
  for (pid_t pid : {over, host}) std::filesystem::create_directories(d + "/proc/" + std::to_string(pid));
  std::ofstream(d + "/proc/" + std::to_string(over) + "/mountinfo")
      << "812 700 259:1 " << d << "/state/tenants/X__0 /run/tessera/node/tenant ro,relatime - ext4 /dev/x rw\n";
  std::ofstream(d + "/proc/" + std::to_string(over) + "/cgroup")
      << "0::/kubepods.slice/kubepods-pod1b2c3d4e_0000_4000_8000_00000000000a.slice/cri-containerd-ab.scope\n";
  std::ofstream(d + "/proc/" + std::to_string(host) + "/cgroup") << "0::/system.slice/containerd.service\n";
  testing::CommandResult r = RunTessera(
      dir,
      "k8s device-plugin --nvml '" + std::string(TESSERA_FAKE_NVML_PATH) + "' --socket-dir '" + d +
          "/dp' --state-dir '" + d + "/state' --node-dir '" + d + "/node' --dev-dir '' --shim '" +
          TESSERA_SHIM_LIBRARY + "' --container-dir /run/tessera --proc-dir '" + d +
          "/proc' --backstop-ms 100 --reconcile-s 0",
      "TESSERA_FAKE_NVML_CONFIG='A100-40GB:procs=" + std::to_string(over) + "/3000;" + std::to_string(host) +
          "/9000' timeout -s TERM 2");
  int status = 0;
  const bool over_ended = ::waitpid(over, &status, WNOHANG) == over;
  EXPECT_TRUE(over_ended && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << r.err;
  EXPECT_EQ(::waitpid(host, &status, WNOHANG), 0);
  for (pid_t pid : over_ended ? std::vector<pid_t>{host} : std::vector<pid_t>{over, host}) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  EXPECT_THAT(r.err, HasSubstr("tessera k8s device-plugin: backstop: slot k8s-dp/X::0: 2500 MiB on GPU 0 over its limit "
                               "of 1024 MiB (beyond 500 MiB of context per process) (pids " +
                               std::to_string(over) + "); killed"));
  EXPECT_THAT(r.out, HasSubstr("stopped (SIGTERM)"));
}

TEST(DevicePluginCli, ASharesPerGpuOutOfRangeIsRefusedNamingTheFlag) {
  TempDir dir;
  testing::CommandResult r = RunTessera(dir, "k8s device-plugin --shares-per-gpu 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.err, HasSubstr("--shares-per-gpu"));
}

// deploy/k8s/device-plugin.yaml says what the program does: every flag it gives is one of
// `tessera k8s device-plugin`'s, the node directory is the agent's, each host path the plugin
// answers in Allocate (socket dir, state dir, shim, node dir) and the PodResources socket it calls
// are mounted at the same path, and the NVML backstop runs in the host's pid namespace.
TEST(K8sDeploy, TheDevicePluginDaemonSetMatchesTheProgram) {
  const std::vector<YAML::Node> docs = YAML::LoadAllFromFile(std::string(TESSERA_SOURCE_DIR) + "/deploy/k8s/device-plugin.yaml");
  ASSERT_FALSE(docs.empty());
  const YAML::Node spec = docs[0]["spec"]["template"]["spec"];
  std::map<std::string, std::vector<std::string>> commands;
  std::map<std::string, std::map<std::string, std::string>> mounts;  // container -> path -> volume
  for (const YAML::Node& c : spec["containers"]) {
    const std::string name = c["name"].as<std::string>();
    commands[name] = c["command"].as<std::vector<std::string>>();
    for (const YAML::Node& m : c["volumeMounts"]) mounts[name][m["mountPath"].as<std::string>()] = m["name"].as<std::string>();
  }
  std::map<std::string, std::string> host;  // volume -> host path
  for (const YAML::Node& v : spec["volumes"]) {
    if (v["hostPath"]) host[v["name"].as<std::string>()] = v["hostPath"]["path"].as<std::string>();
  }
  const std::vector<std::string>& plugin = commands.at("device-plugin");
  ASSERT_GE(plugin.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(plugin.begin(), plugin.begin() + 3),
            (std::vector<std::string>{"tessera", "k8s", "device-plugin"}));
  TempDir dir;
  testing::CommandResult help = RunTessera(dir, "k8s device-plugin --help");
  ASSERT_EQ(help.exit_code, 0) << help.err;
  std::map<std::string, std::string> flags;
  for (size_t i = 3; i + 1 < plugin.size(); ++i) {
    if (!plugin[i].starts_with("--")) continue;
    EXPECT_THAT(help.out, HasSubstr("  " + plugin[i] + " ")) << "not a flag of tessera k8s device-plugin";
    flags[plugin[i]] = plugin[i + 1];
  }
  const std::vector<std::string>& agent = commands.at("agent");
  auto run_dir = std::find(agent.begin(), agent.end(), "--run-dir");
  ASSERT_NE(run_dir, agent.end());
  EXPECT_EQ(flags["--node-dir"], *(run_dir + 1));
  // Mounted at its host path: a path under the mount is the same on the host.
  auto same_on_host = [&](const std::string& path) {
    for (const auto& [at, volume] : mounts["device-plugin"]) {
      if ((path == at || path.starts_with(at + "/")) && host.count(volume) > 0 && host[volume] == at) return true;
    }
    return false;
  };
  for (const char* flag : {"--node-dir", "--socket-dir", "--state-dir", "--shim", "--dev-dir", "--pod-resources-socket"}) {
    EXPECT_TRUE(same_on_host(flags[flag])) << flag << " " << flags[flag];
  }
  EXPECT_EQ(flags["--socket-dir"], "/var/lib/kubelet/device-plugins");
  // The NVML backstop is on, and sees the host's pids (NVML's) in /proc: the host's pid namespace.
  EXPECT_EQ(flags["--backstop-ms"], "1000");
  EXPECT_EQ(flags["--enforce"], "kill");
  ASSERT_TRUE(spec["hostPID"]);
  EXPECT_TRUE(spec["hostPID"].as<bool>());
}

}  // namespace
}  // namespace tessera::k8s
