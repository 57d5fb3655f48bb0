// `tessera k8s extender`: the kube-scheduler extender (docs/kubernetes.md, "Scheduler extender").
// Flags, loading the cluster state, the refresh thread and the signal loop only; the decisions are
// tessera::k8s::Extender (include/tessera/integrations/k8s/extender.h), the HTTP transport
// tessera::k8s::ExtenderServer.
//   tessera k8s extender (--cluster NODES.csv [--quotas TENANTS.csv] | --server URL [--token T |
//                         --token-file F] [--ca-file PEM] [--refresh 10])
//                        [--listen 127.0.0.1:8890] [--url-prefix /tessera] [--policy tessera]
//                        [--tenant-label LABEL]
#include <csignal>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "tessera/core/gpu_model.h"
#include "tessera/daemon/api_client.h"
#include "tessera/integrations/k8s/extender.h"
#include "tessera/integrations/k8s/extender_cluster.h"
#include "tessera/integrations/k8s/extender_server.h"
#include "tessera/placement/policy.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

constexpr const char* kCommand = "k8s extender";

struct ExtenderFlags {
  std::string cluster, quotas, server, token, token_file, ca_file;
  std::string listen = "127.0.0.1:8890";
  std::string url_prefix;
  std::string policy = "tessera";
  std::string tenant_label;
  int refresh_s = 10;
};

StatusOr<std::string> ReadFile(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return InvalidArgumentError(std::string(flag) + ": cannot read '" + path + "'");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

StatusOr<k8s::ClusterState> LoadFiles(const ExtenderFlags& f) {
  k8s::ClusterState state;
  TESSERA_ASSIGN_OR_RETURN(const std::string nodes, ReadFile(f.cluster, "--cluster"));
  TESSERA_ASSIGN_OR_RETURN(state.nodes, k8s::ParseNodeCsv(nodes, f.cluster));
  if (!f.quotas.empty()) {
    TESSERA_ASSIGN_OR_RETURN(const std::string quotas, ReadFile(f.quotas, "--quotas"));
    TESSERA_ASSIGN_OR_RETURN(state.tenants, k8s::ParseQuotaCsv(quotas, f.quotas));
  }
  return state;
}

StatusOr<std::shared_ptr<const k8s::ExtenderCluster>> LoadServer(daemon::ApiClient& client) {
  TESSERA_ASSIGN_OR_RETURN(k8s::ClusterState state,
                           k8s::LoadControlPlaneState([&](const std::string& path) -> StatusOr<std::pair<int, std::string>> {
                             TESSERA_ASSIGN_OR_RETURN(daemon::ApiResponse r, client.Call("GET", path));
                             return std::make_pair(r.status, std::move(r.body));
                           }));
  return k8s::ExtenderCluster::Build(std::move(state), GpuModelCatalog::Builtin());
}

int RunExtender(const ExtenderFlags& f) {
  if (f.cluster.empty() == f.server.empty()) {
    return Fail(kCommand, "give one of --cluster FILE (a node CSV) or --server URL (the control plane)", kExitBadInput);
  }
  if (!f.quotas.empty() && f.cluster.empty()) return Fail(kCommand, "--quotas goes with --cluster (the control plane has its own)", kExitBadInput);
  const size_t colon = f.listen.rfind(':');
  int port = -1;
  if (colon != std::string::npos) {
    try {
      port = std::stoi(f.listen.substr(colon + 1));
    } catch (const std::exception&) {
      port = -1;
    }
  }
  if (colon == std::string::npos || colon == 0 || port < 0 || port > 65535) {
    return Fail(kCommand, "--listen: '" + f.listen + "' is not HOST:PORT (port 0..65535)", kExitBadInput);
  }
  if (!f.url_prefix.empty() && (f.url_prefix.front() != '/' || f.url_prefix.back() == '/')) {
    return Fail(kCommand, "--url-prefix: '" + f.url_prefix + "' must start with '/' and not end with one", kExitBadInput);
  }
  StatusOr<std::unique_ptr<k8s::Extender>> extender =
      k8s::Extender::Create({.policy = f.policy, .tenant_label = f.tenant_label});
  if (!extender.ok()) return Fail(kCommand, extender.status().WithPrefix("--policy"), kExitBadInput);

  std::unique_ptr<daemon::ApiClient> client;
  std::string source;
  if (!f.cluster.empty()) {
    StatusOr<k8s::ClusterState> state = LoadFiles(f);
    if (!state.ok()) return Fail(kCommand, state.status(), kExitBadInput);
    StatusOr<std::shared_ptr<const k8s::ExtenderCluster>> c =
        k8s::ExtenderCluster::Build(std::move(*state), GpuModelCatalog::Builtin());
    if (!c.ok()) return Fail(kCommand, c.status(), kExitBadInput);
    (*extender)->SetCluster(std::move(*c));
    source = f.cluster;
  } else {
    StatusOr<std::string> token = ApiToken(f.token, f.token_file);
    if (!token.ok()) return Fail(kCommand, token.status(), kExitBadInput);
    daemon::ApiClientOptions o{.token = *token, .timeout_ms = 10000, .ca_file = f.ca_file, .retry_budget_ms = 5000};
    StatusOr<std::unique_ptr<daemon::ApiClient>> made = daemon::ApiClient::Create(f.server, std::move(o));
    if (!made.ok()) return Fail(kCommand, made.status(), kExitBadInput);
    client = std::move(*made);
    source = f.server;
  }

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  k8s::ExtenderServer server(extender->get(), {.host = f.listen.substr(0, colon), .port = port, .url_prefix = f.url_prefix});
  if (Status st = server.Start(); !st.ok()) return Fail(kCommand, st, kExitFailure);

  // The control plane's state, refreshed every --refresh s; the last good one stays in use when
  // a refresh fails (the failure is printed). /healthz is 503 until the first one arrives.
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::thread refresher;
  if (client) {
    refresher = std::thread([&] {
      std::unique_lock<std::mutex> lock(mu);
      while (!stop) {
        lock.unlock();
        StatusOr<std::shared_ptr<const k8s::ExtenderCluster>> c = LoadServer(*client);
        if (c.ok()) {
          (*extender)->SetCluster(std::move(*c));
        } else {
          std::fprintf(stderr, "tessera k8s extender: refresh from %s: %s\n", f.server.c_str(),
                       std::string(c.status().message()).c_str());
        }
        lock.lock();
        cv.wait_for(lock, std::chrono::seconds(f.refresh_s), [&] { return stop; });
      }
    });
  }
  std::printf("tessera k8s extender: listening on http://%s:%d%s (cluster from %s, policy %s)\n",
              f.listen.substr(0, colon).c_str(), server.port(), f.url_prefix.c_str(), source.c_str(), f.policy.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  std::printf("tessera k8s extender: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
  }
  cv.notify_all();
  if (refresher.joinable()) refresher.join();
  server.Stop();
  return kExitOk;
}

}  // namespace

void RegisterK8sExtender(CLI::App& k8s, int* exit_code) {
  auto f = std::make_shared<ExtenderFlags>();
  CLI::App* cmd = k8s.add_subcommand(
      "extender",
      "Run the kube-scheduler extender: POST <prefix>/filter (tenant GPU quota, GPU fit) and POST\n"
      "<prefix>/prioritize (the placement policy's fragmentation-aware score, 0..10), GET /healthz.\n"
      "A pod states its GPU ask in annotations: gpu.tessera.io/mode (whole|share|mig),\n"
      "gpu.tessera.io/count (whole GPUs), gpu.tessera.io/compute (milli-GPU, 1..1000),\n"
      "gpu.tessera.io/memory (a Kubernetes quantity per GPU, e.g. 10Gi), gpu.tessera.io/mig-profile,\n"
      "gpu.tessera.io/model. Tenant = the pod's namespace (or --tenant-label). Stops on SIGINT/SIGTERM.\n"
      "The KubeSchedulerConfiguration stanza: deploy/k8s/scheduler/scheduler-extender.yaml.");
  cmd->add_option("--cluster", f->cluster,
                  "Node CSV (sn,cpu_milli,memory_mib,gpu,model[,gpu_used_milli,gpu_used_mib]: per-GPU use "
                  "'|'-separated, milli-GPU and MiB), read once; for standalone use and tests");
  cmd->add_option("--quotas", f->quotas,
                  "With --cluster: tenant CSV (tenant,limit_gpu_milli[,used_gpu_milli]; limit -1 or empty: unlimited)");
  cmd->add_option("--server", f->server, "The control plane (http(s)://HOST[:PORT]): nodes, GPU use, tenant quotas");
  cmd->add_option("--token", f->token, "API token for --server (default: --token-file's, else $TESSERA_TOKEN)");
  cmd->add_option("--token-file", f->token_file, "File whose first line is the API token");
  cmd->add_option("--ca-file", f->ca_file, "PEM certificates to trust for an https --server (default: the system's)");
  cmd->add_option("--refresh", f->refresh_s, "Seconds between reads of --server's state")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--listen", f->listen, "HOST:PORT to serve on (port 0: any free port, printed)")->capture_default_str();
  cmd->add_option("--url-prefix", f->url_prefix, "Path before /filter and /prioritize (the stanza's urlPrefix path), e.g. /tessera");
  cmd->add_option("--policy", f->policy, "Placement policy that scores nodes (" + [] {
    std::string names;
    for (const std::string& n : placement::PolicyNames()) names += (names.empty() ? "" : ", ") + n;
    return names;
  }() + ")")->capture_default_str();
  cmd->add_option("--tenant-label", f->tenant_label, "Pod label naming the tenant (default: the pod's namespace)");
  cmd->callback([f, exit_code] { *exit_code = RunExtender(*f); });
}

}  // namespace tessera::cli
