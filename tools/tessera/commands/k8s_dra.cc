// tessera k8s dra-driver: the DRA kubelet plugin of driver gpu.tessera.io (docs/kubernetes.md).
// Parsing and printing only: tessera/integrations/k8s/dra_driver.h and dra_plugin.h do the work.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "tessera/integrations/k8s/dra_claim.h"
#include "tessera/integrations/k8s/dra_driver.h"
#include "tessera/integrations/k8s/dra_plugin.h"
#include "tessera/node/node_dir.h"
#include "tools/tessera/commands/commands.h"

namespace tessera::cli {
namespace {

struct DraFlags {
  k8s::DraDriverOptions driver;
  k8s::DraPluginOptions plugin;
  std::string claims_dir;
  std::string node_name;
};

int RunDraDriver(DraFlags flags) {
  if (flags.claims_dir.empty()) {
    std::fprintf(stderr, "tessera k8s dra-driver: --claims-dir is required in this version (the API server "
                         "client comes with --server)\n");
    return 2;
  }
  flags.driver.plugin_dir = flags.plugin.plugin_dir;
  k8s::FileClaimSource claims(flags.claims_dir);
  // SIGINT/SIGTERM blocked before gRPC starts its threads, so that only sigwait below takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  StatusOr<std::unique_ptr<k8s::DraDriver>> driver = k8s::DraDriver::Open(flags.driver, &claims);
  if (!driver.ok()) {
    std::fprintf(stderr, "tessera k8s dra-driver: %s\n", driver.status().ToString().c_str());
    return 1;
  }
  for (const std::string& problem : (*driver)->recovery_problems()) {
    std::fprintf(stderr, "tessera k8s dra-driver: not re-adopted: %s\n", problem.c_str());
  }
  StatusOr<std::unique_ptr<k8s::DraPluginServer>> server = k8s::DraPluginServer::Start(driver->get(), flags.plugin);
  if (!server.ok()) {
    std::fprintf(stderr, "tessera k8s dra-driver: %s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("tessera k8s dra-driver: node %s, %zu claims re-adopted; registration on %s, DRA on %s\n",
              flags.node_name.c_str(), (*driver)->prepared_claims(), (*server)->registration_socket().c_str(),
              (*server)->dra_socket().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  (*server)->Shutdown();
  std::printf("tessera k8s dra-driver: stopped (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  return 0;
}

}  // namespace

void RegisterK8sDraDriver(CLI::App& k8s_app, int* exit_code) {
  auto flags = std::make_shared<DraFlags>();
  flags->driver.node_dir = node::DefaultNodeDir();
  CLI::App* cmd = k8s_app.add_subcommand(
      "dra-driver", "The DRA kubelet plugin of driver gpu.tessera.io: serves plugin registration and the "
                    "kubelet's DRA v1 gRPC on unix sockets; NodePrepareResources turns a claim's allocation into "
                    "an enforced slot of the node and a CDI device. Runs until SIGINT/SIGTERM.");
  cmd->add_option("--node-dir", flags->driver.node_dir,
                  "The node directory (segment, leases, tenant registry) the slots go into (default: "
                  "TESSERA_RUN_DIR, else $XDG_RUNTIME_DIR/tessera, else /tmp/tessera-<uid>)");
  cmd->add_option("--plugin-dir", flags->plugin.plugin_dir,
                  "Folder of the DRA socket dra.sock and the checkpoint file checkpoint.json")
      ->default_str(flags->plugin.plugin_dir);
  cmd->add_option("--registry-dir", flags->plugin.registry_dir,
                  "The kubelet's plugin registry folder (gpu.tessera.io-reg.sock goes there)")
      ->default_str(flags->plugin.registry_dir);
  cmd->add_option("--cdi-dir", flags->driver.cdi_dir, "Folder of the CDI spec files, one per prepared claim")
      ->default_str(flags->driver.cdi_dir);
  cmd->add_option("--container-dir", flags->driver.container_dir,
                  "Where the shim and the node's policy/counters/leases files appear inside the container")
      ->default_str(flags->driver.container_dir);
  cmd->add_option("--shim", flags->driver.shim_path,
                  "Host path of libtessera-shim.so, bind-mounted into the containers (default: next to the "
                  "tessera executable, ../lib/libtessera-shim.so)");
  cmd->add_option("--nvml", flags->driver.nvml_library,
                  "NVML library for the GPUs' UUIDs in CUDA_VISIBLE_DEVICES (without it: GPU indexes)")
      ->default_str(flags->driver.nvml_library);
  cmd->add_option("--node-name", flags->node_name, "This node's Kubernetes name (for logs; default: none)");
  cmd->add_option("--claims-dir", flags->claims_dir,
                  "Read ResourceClaims from <dir>/<namespace>/<name>.json (the API server's JSON) instead of "
                  "the API server (required in this version)");
  cmd->callback([flags, exit_code] { *exit_code = RunDraDriver(*flags); });
}

}  // namespace tessera::cli
