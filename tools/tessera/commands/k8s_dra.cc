// tessera k8s dra-driver: the DRA kubelet plugin of driver gpu.tessera.io (docs/kubernetes.md).
// Parsing, wiring and printing only: tessera/integrations/k8s/dra_driver.h, dra_plugin.h and
// slice_sync.h do the work.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include "tessera/core/gpu_model.h"
#include "tessera/enforce/nvml.h"
#include "tessera/integrations/k8s/dra_claim.h"
#include "tessera/integrations/k8s/dra_driver.h"
#include "tessera/integrations/k8s/dra_plugin.h"
#include "tessera/integrations/k8s/kube_client.h"
#include "tessera/integrations/k8s/slice_publisher.h"
#include "tessera/integrations/k8s/slice_sync.h"
#include "tessera/node/inventory.h"
#include "tessera/node/node_dir.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/k8s_flags.h"
#include "tools/tessera/commands/k8s_connect.h"

namespace tessera::cli {
namespace {

constexpr char kCommand[] = "k8s dra-driver";

struct DraFlags {
  k8s::DraDriverOptions driver;
  k8s::DraPluginOptions plugin;
  KubeConnectFlags kube;
  std::string claims_dir, node_name, fake_gpus;
  int inventory_interval_s = 30, repair_interval_s = 600;
  BackstopFlags backstop;
  std::string proc_dir = "/proc";
};

// The node's GPUs from NVML, opened at the first call that succeeds and kept open.
class NvmlInventory {
 public:
  NvmlInventory(std::string library, const GpuModelCatalog& catalog) : nvml_({.library_path = std::move(library)}),
                                                                        catalog_(catalog) {}
  ~NvmlInventory() {
    if (open_) (void)nvml_.Shutdown();
  }
  StatusOr<std::vector<api::InventoryGpu>> Read() {
    if (!open_) {
      if (Status st = nvml_.Init(); !st.ok()) return UnavailableError("NVML: " + std::string(st.message()));
      open_ = true;
    }
    TESSERA_ASSIGN_OR_RETURN(node::Inventory inventory, node::DiscoverInventory(nvml_, catalog_));
    return inventory.gpus;
  }

 private:
  enforce::DlopenNvml nvml_;
  const GpuModelCatalog& catalog_;
  bool open_ = false;
};

void PrintPass(const std::string& node, const k8s::SliceSync::Outcome& outcome, bool always) {
  if (!outcome.ok()) {
    std::fprintf(stderr, "tessera k8s dra-driver: publishing the slices of node %s: %s\n", node.c_str(),
                 outcome.status().ToString().c_str());
  } else if (outcome->has_value()) {
    const k8s::PublishResult& r = **outcome;
    if (always || r.created + r.updated + r.deleted > 0) {
      std::printf("tessera k8s dra-driver: slices of node %s: generation %lld, %d created, %d updated, %d deleted, "
                  "%d unchanged\n",
                  node.c_str(), static_cast<long long>(r.generation), r.created, r.updated, r.deleted, r.unchanged);
    }
  }
  std::fflush(stdout);
}

int RunDraDriver(DraFlags flags) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  if (flags.node_name.empty()) {
    if (const char* env = std::getenv("NODE_NAME"); env != nullptr) flags.node_name = env;
  }
  if (flags.node_name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) flags.node_name = host;
  }
  if (!flags.fake_gpus.empty()) {
    StatusOr<std::string> library = UseFakeGpus(flags.fake_gpus);
    if (!library.ok()) return Fail(kCommand, std::string(library.status().message()), kExitBadInput);
    flags.driver.nvml_library = *library;
  }
  flags.driver.plugin_dir = flags.plugin.plugin_dir;

  // The API server: for the claims (unless --claims-dir) and for the slices (whenever there is
  // one). Two connections: the claims are read on the gRPC threads, the slices on their own.
  const bool api = flags.claims_dir.empty() || !flags.kube.server.empty();
  std::unique_ptr<k8s::KubeTransport> claims_transport, slices_transport;
  if (api) {
    StatusOr<std::unique_ptr<k8s::KubeTransport>> a = ConnectKube(flags.kube);
    if (!a.ok()) return Fail(kCommand, std::string(a.status().message()) + " (or --claims-dir)", kExitBadInput);
    StatusOr<std::unique_ptr<k8s::KubeTransport>> b = ConnectKube(flags.kube);
    if (!b.ok()) return Fail(kCommand, std::string(b.status().message()), kExitBadInput);
    claims_transport = std::move(*a);
    slices_transport = std::move(*b);
  }
  std::optional<k8s::KubeClient> claims_client, slices_client;
  std::unique_ptr<k8s::ClaimSource> claims;
  if (!flags.claims_dir.empty()) {
    claims = std::make_unique<k8s::FileClaimSource>(flags.claims_dir);
  } else {
    claims_client.emplace(*claims_transport);
    claims = std::make_unique<k8s::KubeClaimSource>(*claims_client);
  }

  // SIGINT/SIGTERM blocked before any thread starts, so that only sigwait below takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // The slices first: the scheduler can allocate this node's GPUs only once they are published.
  NvmlInventory inventory(flags.driver.nvml_library, catalog);
  std::optional<k8s::SlicePublisher> publisher;
  std::optional<k8s::SliceSync> sync;
  if (api) {
    slices_client.emplace(*slices_transport);
    k8s::SliceOptions slice_options{.node_name = flags.node_name};
    if (StatusOr<std::string> uid = slices_client->GetNodeUid(flags.node_name); uid.ok()) {
      slice_options.node_uid = *uid;
    } else {
      std::fprintf(stderr, "tessera k8s dra-driver: the slices get no owner (the Node): %s\n",
                   uid.status().ToString().c_str());
    }
    publisher.emplace(*slices_client, catalog, k8s::PublisherOptions{.slices = slice_options});
    sync.emplace(*publisher, [&inventory] { return inventory.Read(); },
                 k8s::SliceSyncOptions{.inventory_interval = std::chrono::seconds(flags.inventory_interval_s),
                                       .repair_interval = std::chrono::seconds(flags.repair_interval_s)});
    PrintPass(flags.node_name, sync->Step(k8s::SliceSync::Clock::now()), /*always=*/true);
    const std::string node = flags.node_name;
    sync->Start([node](const k8s::SliceSync::Outcome& o) { PrintPass(node, o, /*always=*/false); });
  }

  StatusOr<std::unique_ptr<k8s::DraDriver>> driver = k8s::DraDriver::Open(flags.driver, claims.get());
  if (!driver.ok()) return Fail(kCommand, driver.status(), kExitFailure);
  for (const std::string& problem : (*driver)->recovery_problems()) {
    std::fprintf(stderr, "tessera k8s dra-driver: not re-adopted: %s\n", problem.c_str());
  }
  // The NVML backstop, on an NVML handle of its own (the slices' reader opens its own when due).
  k8s::DraDriver* d = driver->get();
  StatusOr<std::unique_ptr<PluginBackstop>> backstop = PluginBackstop::Start(
      flags.backstop, {.command = kCommand,
                       .nvml_library = flags.driver.nvml_library,
                       .options = {.proc_dir = flags.proc_dir,
                                   .counters_dir = node::NodePaths(flags.driver.node_dir).counters},
                       .claims = [d] { return d->ClaimUses(); },
                       .refresh = [d] { return d->RefreshPods(); }});
  if (!backstop.ok()) return Fail(kCommand, backstop.status(), kExitFailure);
  StatusOr<std::unique_ptr<k8s::DraPluginServer>> server = k8s::DraPluginServer::Start(driver->get(), flags.plugin);
  if (!server.ok()) return Fail(kCommand, server.status(), kExitFailure);
  std::printf("tessera k8s dra-driver: node %s, claims from %s, %zu claims re-adopted; registration on %s, DRA on %s\n",
              flags.node_name.c_str(), flags.claims_dir.empty() ? "the API server" : flags.claims_dir.c_str(),
              (*driver)->prepared_claims(), (*server)->registration_socket().c_str(), (*server)->dra_socket().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  (*server)->Shutdown();
  backstop->reset();
  if (sync) sync->Stop();
  std::printf("tessera k8s dra-driver: stopped (%s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  return kExitOk;
}

}  // namespace

void RegisterK8sDraDriver(CLI::App& k8s_app, int* exit_code) {
  auto flags = std::make_shared<DraFlags>();
  flags->driver.node_dir = node::DefaultNodeDir();
  CLI::App* cmd = k8s_app.add_subcommand(
      "dra-driver",
      "The DRA kubelet plugin of driver gpu.tessera.io: publishes this node's GPUs as ResourceSlices (at start, "
      "when the GPUs change, and every --repair-interval), serves plugin registration and the kubelet's DRA v1 gRPC "
      "on unix sockets; NodePrepareResources reads the ResourceClaim from the API server and turns its allocation "
      "into an enforced slot of the node and a CDI device. Runs until SIGINT/SIGTERM.\n"
      "  In a pod the API server is found from the service account; --server for a test server.");
  AddContainerFlags(cmd, {.node_dir = &flags->driver.node_dir,
                          .container_dir = &flags->driver.container_dir,
                          .dev_dir = &flags->driver.dev_dir,
                          .shim_path = &flags->driver.shim_path,
                          .fake_gpus = &flags->fake_gpus});
  cmd->add_option("--plugin-dir", flags->plugin.plugin_dir,
                  "Folder of the DRA socket dra.sock and the checkpoint file checkpoint.json")
      ->default_str(flags->plugin.plugin_dir);
  cmd->add_option("--registry-dir", flags->plugin.registry_dir,
                  "The kubelet's plugin registry folder (gpu.tessera.io-reg.sock goes there)")
      ->default_str(flags->plugin.registry_dir);
  cmd->add_option("--cdi-dir", flags->driver.cdi_dir, "Folder of the CDI spec files, one per prepared claim")
      ->default_str(flags->driver.cdi_dir);
  cmd->add_option("--nvml", flags->driver.nvml_library,
                  "NVML library: the GPUs published, and their UUIDs in CUDA_VISIBLE_DEVICES")
      ->default_str(flags->driver.nvml_library);
  cmd->add_flag("--allow-mig-reconfigure", flags->driver.allow_mig_reconfigure,
                "Create the MIG instance a claim's MIG device names (gpu-<N>-mig-<profile>-<start>) when it does not "
                "exist and its memory slices are free, and destroy it again when the claim is unprepared (off: such "
                "a claim fails, naming the instance and this flag). Off by default: cutting a GPU is the operator's decision "
                "per node, as for `tessera agent --allow-mig-reconfigure`. An instance in use, or another claim's, is "
                "never touched");
  cmd->add_option("--mig-minors", flags->driver.mig_minors_file,
                  "The driver's nvidia-caps minors of the MIG instances, for the /dev/nvidia-caps nodes a MIG "
                  "claim's container gets (absent: none, the driver exposes them under /proc only)")
      ->default_str(flags->driver.mig_minors_file);
  cmd->add_option("--node-name", flags->node_name,
                  "This node's Kubernetes name: the slices' spec.nodeName and pool (default: $NODE_NAME, else the "
                  "host name)");
  cmd->add_option("--server", flags->kube.server,
                  "API server URL, http(s)://HOST[:PORT] (default: in-cluster, from KUBERNETES_SERVICE_HOST/PORT "
                  "and the pod's service account)");
  cmd->add_option("--token-file", flags->kube.token_file,
                  "Bearer token file, read at every request (default: the service account's in a pod)");
  cmd->add_option("--ca-file", flags->kube.ca_file, "CA bundle (PEM) for an https --server (default: the service "
                                                     "account's in a pod)");
  cmd->add_option("--claims-dir", flags->claims_dir,
                  "Tests: read ResourceClaims from <dir>/<namespace>/<name>.json (the API server's JSON) instead of "
                  "the API server; without --server no slices are published");
  cmd->add_option("--inventory-interval", flags->inventory_interval_s,
                  "Seconds between two readings of the GPUs; the slices are published again when they changed "
                  "(0: only at start)")
      ->default_str("30")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--repair-interval", flags->repair_interval_s,
                  "Seconds between two full passes over the API server's slices (restores what someone else changed "
                  "or deleted); due at the first reading of the GPUs after it")
      ->default_str("600")
      ->check(CLI::PositiveNumber);
  AddBackstopFlags(cmd, &flags->backstop, "claim");
  cmd->add_option("--proc-dir", flags->proc_dir,
                  "Where the backstop reads each process's cgroup (<dir>/<pid>/cgroup); tests give a folder of "
                  "their own")
      ->default_str(flags->proc_dir);
  cmd->callback([flags, exit_code] { *exit_code = RunDraDriver(*flags); });
}

}  // namespace tessera::cli
