// tessera k8s device-plugin: the kubelet device plugin for clusters before Kubernetes 1.34
// (docs/kubernetes.md, "Device plugin"). Parsing, wiring and printing only:
// tessera/integrations/k8s/device_plugin.h and device_plugin_server.h do the work.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "tessera/integrations/k8s/device_plugin.h"
#include "tessera/integrations/k8s/device_plugin_server.h"
#include "tessera/node/node_dir.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/k8s_flags.h"

namespace tessera::cli {
namespace {

constexpr char kCommand[] = "k8s device-plugin";

struct DevicePluginFlags {
  k8s::SharePluginOptions plugin;
  k8s::SharePluginServerOptions server;
  std::string fake_gpus;
  int health_interval_s = 10;
  int watch_interval_ms = 1000;
  int reconcile_s = 30;
  BackstopFlags backstop;
  std::string proc_dir = "/proc";
};

int RunDevicePlugin(DevicePluginFlags flags) {
  if (!flags.fake_gpus.empty()) {
    StatusOr<std::string> library = UseFakeGpus(flags.fake_gpus);
    if (!library.ok()) return Fail(kCommand, std::string(library.status().message()), kExitBadInput);
    flags.plugin.nvml_library = *library;
  }
  flags.server.health_period = std::chrono::seconds(flags.health_interval_s);
  flags.server.watch_period = std::chrono::milliseconds(flags.watch_interval_ms);
  flags.server.reconcile_period = std::chrono::seconds(flags.reconcile_s);
  flags.server.release_grace = std::chrono::seconds(std::max(flags.reconcile_s, 30));
  flags.server.log = [](const std::string& line) {
    std::printf("tessera k8s device-plugin: %s\n", line.c_str());
    std::fflush(stdout);
  };
  // SIGINT/SIGTERM blocked before any thread starts, so that only sigwait below takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  StatusOr<std::unique_ptr<k8s::SharePlugin>> plugin = k8s::SharePlugin::Open(flags.plugin);
  if (!plugin.ok()) return Fail(kCommand, plugin.status(), kExitFailure);
  for (const std::string& line : (*plugin)->NotAdopted()) std::fprintf(stderr, "tessera k8s device-plugin: %s\n", line.c_str());
  // The NVML backstop: a process's slot is the tenant file mounted in its container.
  k8s::SharePlugin* p = plugin->get();
  StatusOr<std::unique_ptr<PluginBackstop>> backstop = PluginBackstop::Start(
      flags.backstop, {.command = kCommand,
                       .nvml_library = flags.plugin.nvml_library,
                       .options = {.proc_dir = flags.proc_dir,
                                   .counters_dir = node::NodePaths(flags.plugin.node_dir).counters,
                                   .slot_mount = k8s::TenantMountPath(flags.plugin.container_dir),
                                   .owner = "slot"},
                       .claims = [p] { return p->BackstopUses(); },
                       .refresh = nullptr});
  if (!backstop.ok()) return Fail(kCommand, backstop.status(), kExitFailure);
  const size_t devices = (*plugin)->Devices().size();
  StatusOr<std::unique_ptr<k8s::SharePluginServer>> server = k8s::SharePluginServer::Start(plugin->get(), flags.server);
  if (!server.ok()) return Fail(kCommand, server.status(), kExitFailure);
  std::printf("tessera k8s device-plugin: %zu devices of %s (%d per GPU) on %s\n", devices,
              flags.plugin.resource_name.c_str(), flags.plugin.shares_per_gpu, (*server)->socket().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  (*server)->Shutdown();
  backstop->reset();
  std::printf("tessera k8s device-plugin: stopped (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  return kExitOk;
}

}  // namespace

void RegisterK8sDevicePlugin(CLI::App& k8s_app, int* exit_code) {
  auto flags = std::make_shared<DevicePluginFlags>();
  flags->plugin.node_dir = node::DefaultNodeDir();
  CLI::App* cmd = k8s_app.add_subcommand(
      "device-plugin",
      "The kubelet device plugin (v1beta1, for clusters before Kubernetes 1.34, which have no DRA): advertises each "
      "GPU as --shares-per-gpu devices of --resource-name, registers with the kubelet on <socket dir>/kubelet.sock "
      "(again whenever the kubelet restarts), prefers packing shares onto the most used GPU, and at Allocate makes "
      "an enforced slot of the node (memory limit = GPU memory / N per share, compute share = 1000 / N milli per "
      "share) and returns the shim's environment, mounts and device nodes; the slots are kept in "
      "<state dir>/checkpoint.json (a restarted plugin adopts them) and released when the kubelet's PodResources "
      "List no longer shows their devices. An NVML backstop (--backstop-ms) kills a slot's GPU processes over its "
      "limit, a process's slot being the tenant file mounted in its container. A pod asks e.g. "
      "`resources.limits: {tessera.io/gpu-share: 3}` for 3/N of a GPU. Runs until SIGINT/SIGTERM.");
  AddContainerFlags(cmd, {.node_dir = &flags->plugin.node_dir,
                          .container_dir = &flags->plugin.container_dir,
                          .dev_dir = &flags->plugin.dev_dir,
                          .shim_path = &flags->plugin.shim_path,
                          .fake_gpus = &flags->fake_gpus});
  cmd->add_option("--socket-dir", flags->server.socket_dir,
                  "The kubelet's device-plugins folder: the plugin's socket goes there, kubelet.sock is there")
      ->default_str(flags->server.socket_dir);
  cmd->add_option("--socket-name", flags->server.socket_name, "File name of the plugin's socket in --socket-dir")
      ->default_str(flags->server.socket_name);
  cmd->add_option("--resource-name", flags->plugin.resource_name,
                  "The extended resource the shares are advertised as (what pods ask for in resources.limits)")
      ->default_str(flags->plugin.resource_name);
  cmd->add_option("--shares-per-gpu", flags->plugin.shares_per_gpu,
                  "N: devices per GPU, named <gpu uuid>::<k>; one device = 1/N of the GPU's memory and 1000/N "
                  "milli-GPU of compute share (1..100)")
      ->default_str(std::to_string(flags->plugin.shares_per_gpu))
      ->check(CLI::Range(1, 100));
  cmd->add_option("--account", flags->plugin.account,
                  "Metering account of a slot until the kubelet's PodResources names its pod; then the pod's namespace")
      ->default_str(flags->plugin.account);
  cmd->add_option("--state-dir", flags->plugin.state_dir,
                  "Host folder of the slots' tenant files (mounted read-only into the containers) and of "
                  "checkpoint.json (the slots, adopted by a restarted plugin); not under "
                  "--socket-dir, which the kubelet empties when it starts")
      ->default_str(flags->plugin.state_dir);
  cmd->add_option("--nvml", flags->plugin.nvml_library, "NVML library: the GPUs, their memory, UUIDs and health")
      ->default_str(flags->plugin.nvml_library);
  cmd->add_option("--health-interval", flags->health_interval_s,
                  "Seconds between two readings of the GPUs' health from NVML; a change is sent to the kubelet")
      ->default_str("10")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--watch-interval", flags->watch_interval_ms,
                  "Milliseconds between two checks for a restarted kubelet (its socket gone, kubelet.sock new)")
      ->default_str("1000")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--pod-resources-socket", flags->server.pod_resources_socket,
                  "The kubelet's PodResources socket (podresources/v1 List): which devices live containers hold")
      ->default_str(flags->server.pod_resources_socket);
  cmd->add_option("--reconcile-s", flags->reconcile_s,
                  "Seconds between two PodResources List calls; a slot none of whose devices a live container holds "
                  "(and older than max(this, 30 s)) is released; a List that fails releases nothing and is "
                  "reported on stderr. 0: never (a slot is then left only when its devices are allocated again)")
      ->default_str("30")
      ->check(CLI::NonNegativeNumber);
  AddBackstopFlags(cmd, &flags->backstop, "slot");
  cmd->add_option("--proc-dir", flags->proc_dir,
                  "Where the backstop reads each GPU process's mounts and cgroup (<dir>/<pid>/mountinfo: the slot's "
                  "tenant file mounted at <container dir>/node/tenant names its slot; <dir>/<pid>/cgroup: its pod); "
                  "tests give a folder of their own")
      ->default_str(flags->proc_dir);
  cmd->callback([flags, exit_code] { *exit_code = RunDevicePlugin(*flags); });
}

}  // namespace tessera::cli
