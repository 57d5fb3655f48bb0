// What the NVML backstop's tests share (dra_backstop_test.cc, device_plugin_backstop_test.cc):
// processes that are real children of the test, a /proc stand-in whose <pid>/cgroup (the pod, by
// the kubelet's cgroup path) and <pid>/mountinfo (the slot's tenant file mount) files place them,
// and the fake NVML (the real adapter over the C ABI) listing them with their memory.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/enforce/nvml.h"

namespace tessera::k8s {

// The systemd cgroup driver's path of a container of `pod` (uid with '-').
inline std::string SystemdCgroup(std::string pod) {
  std::replace(pod.begin(), pod.end(), '-', '_');
  return "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + pod +
         ".slice/cri-containerd-0123abcd.scope\n";
}

class BackstopFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (std::filesystem::temp_directory_path() / "tbackstop-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    root_ = dir;
    std::filesystem::create_directories(root_ / "proc");
  }
  void TearDown() override {
    if (nvml_) (void)nvml_->Shutdown();
    ::unsetenv("TESSERA_FAKE_NVML_CONFIG");
    for (pid_t pid : children_) {
      ::kill(pid, SIGKILL);
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
    std::filesystem::remove_all(root_);
  }

  // A child that waits to be killed, in `pod` ("" = in no pod: a host process), with this
  // mountinfo ("" = none written).
  pid_t Spawn(const std::string& pod, const std::string& mountinfo = "") {
    const pid_t pid = ::fork();
    if (pid == 0) {
      for (;;) ::pause();
    }
    children_.push_back(pid);
    const std::filesystem::path dir = root_ / "proc" / std::to_string(pid);
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "cgroup") << (pod.empty() ? "0::/system.slice/containerd.service\n" : SystemdCgroup(pod));
    if (!mountinfo.empty()) std::ofstream(dir / "mountinfo") << mountinfo;
    return pid;
  }
  // Whether `pid` was ended by SIGKILL (reaps it); false while it runs.
  bool Killed(pid_t pid) {
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      const pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        std::erase(children_, pid);
        return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
      }
      ::usleep(5000);
    }
    return false;
  }
  // The fake NVML with these GPUs, e.g. {"H100-80GB:procs=4242/1300", "H100-80GB"}.
  void Nvml(const std::vector<std::string>& gpus) {
    std::string config;
    for (const std::string& g : gpus) config += (config.empty() ? "" : ",") + g;
    ::setenv("TESSERA_FAKE_NVML_CONFIG", config.c_str(), 1);
    nvml_.emplace(enforce::NvmlOptions{.library_path = TESSERA_FAKE_NVML_PATH});
    ASSERT_TRUE(nvml_->Init().ok());
  }
  // The fake NVML's process list of a GPU: "procs=<pid>/<MiB>;...".
  static std::string Procs(const std::vector<std::pair<pid_t, int>>& procs) {
    std::string out = "procs=";
    for (size_t i = 0; i < procs.size(); ++i)
      out += (i ? ";" : "") + std::to_string(procs[i].first) + "/" + std::to_string(procs[i].second);
    return out;
  }

  std::filesystem::path root_;
  std::vector<pid_t> children_;
  std::optional<enforce::DlopenNvml> nvml_;
};

}  // namespace tessera::k8s
