// `tessera agent`: the node agent process. Flags, the HTTP link and the signal loop only; what
// the agent does each round is tessera::node::Agent (include/tessera/node/agent.h).
//   tessera agent --server URL --token-file F [--name NODE] [--run-dir DIR]
//                 [--fake-gpus H100-80GB:2,A100-40GB:4] [--cpu-milli N] [--memory-mib N]
//                 [--interval-ms 1000] [--usage-interval 10] [--retry-budget 5]
//                 [--backstop-ms 1000] [--context-allowance-mib 500] [--enforce kill|report]
//                 [--mps-control nvidia-cuda-mps-control] [--allow-mig-reconfigure]
//                 [--tenant-uids FIRST-LAST|off] [--tenant-uid TENANT=UID ...]
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "tessera/core/gpu_model.h"
#include "tessera/daemon/api_client.h"
#include "tessera/enforce/nvml.h"
#include "tessera/node/agent.h"
#include "tessera/node/inventory.h"
#include "tessera/node/node_dir.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/http_link.h"

namespace tessera::cli {
namespace {

struct AgentFlags {
  std::string server, token_file, ca_file, name, run_dir, fake_gpus, nvml = "libnvidia-ml.so.1";
  int interval_ms = 1000;
  int usage_interval_s = 10;
  int stop_grace_s = 5;
  int retry_budget_s = 5;  // per call: how long 429/503 answers are retried; 0: never
  BackstopFlags backstop;
  std::string mps_control = "nvidia-cuda-mps-control";
  int64_t cpu_milli = 0;   // 0: all online CPUs
  int64_t memory_mib = 0;  // 0: all physical memory
  std::string tenant_uids;               // "": kDefaultTenantUids when root, else off
  std::vector<std::string> tenant_uid;   // TENANT=UID, repeatable
  bool allow_mig_reconfigure = false;
  bool meter_local_slots = false;
};

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "tessera agent: %s\n", message.c_str());
  return code;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void PrintLog(node::Agent& agent) {
  for (const std::string& line : agent.TakeLog()) std::printf("tessera agent: %s\n", line.c_str());
  std::fflush(stdout);
}

int RunAgent(AgentFlags f) {
  StatusOr<node::TenantUidOptions> tenant_uids = node::ParseTenantUidFlags(f.tenant_uids, f.tenant_uid, ::geteuid() == 0);
  if (!tenant_uids.ok()) return Fail(std::string(tenant_uids.status().message()), kExitBadInput);
  StatusOr<std::string> token = ReadTokenFile(f.token_file);
  if (!token.ok()) return Fail(std::string(token.status().message()), kExitBadInput);
  if (f.name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return Fail("no --name and no host name", kExitBadInput);
    f.name = host;
  }
  if (f.run_dir.empty()) f.run_dir = node::DefaultNodeDir();
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  if (!f.fake_gpus.empty()) {
    StatusOr<std::string> library = UseFakeGpus(f.fake_gpus);  // the agent's and its children's fake
    if (!library.ok()) return Fail(library.status().message(), kExitBadInput);
    f.nvml = *library;
  }
  enforce::DlopenNvml nvml({.library_path = f.nvml});
  if (Status st = nvml.Init(); !st.ok()) return Fail("NVML: " + std::string(st.message()), kExitFailure);
  StatusOr<node::Inventory> inventory = node::DiscoverInventory(nvml, catalog);
  if (!inventory.ok()) {
    (void)nvml.Shutdown();
    return Fail("GPU discovery: " + std::string(inventory.status().message()), kExitFailure);
  }
  bool any_mig = false;
  for (const node::InventoryGpu& g : inventory->gpus) any_mig |= g.mig_enabled;
  // Kept open for the backstop and for MIG GPUs (their instances are read, and with the flag changed).
  if (f.backstop.period_ms == 0 && !any_mig) (void)nvml.Shutdown();
  if (f.cpu_milli > 0) inventory->cpu_milli = f.cpu_milli;
  if (f.memory_mib > 0) inventory->memory_mib = f.memory_mib;
  sigset_t signals;  // waited for between rounds; blocked before the arbiter threads start
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // A call retries 429/503 for a few rounds' time, not for the whole node timeout: the round
  // (reaping, usage, the next heartbeat) waits meanwhile. SIGTERM ends a wait at once.
  daemon::ApiClientOptions client_options{.token = *token, .timeout_ms = 10000, .ca_file = f.ca_file};
  client_options.retry_budget_ms = int64_t{f.retry_budget_s} * 1000;
  client_options.sleep = [&signals](std::chrono::milliseconds wait) { return SleepUnlessSignalled(signals, wait); };
  StatusOr<std::unique_ptr<daemon::ApiClient>> client = daemon::ApiClient::Create(f.server, std::move(client_options));
  if (!client.ok()) {
    const std::string m(client.status().message());
    return Fail((m.rfind("CA file", 0) == 0 ? "--ca-file: " : "--server: ") + m, kExitBadInput);
  }
  HttpLink link(std::move(*client));

  node::AgentOptions options;
  options.name = f.name;
  options.run_dir = f.run_dir;
  options.supervisor = ExecutableDir() + "/tessera";
  {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n > 0) options.supervisor.assign(buf, static_cast<size_t>(n));
  }
  options.nvml_library = f.nvml;
  options.usage_interval_s = f.usage_interval_s;
  options.stop_grace_ms = int64_t{f.stop_grace_s} * 1000;
  options.nvml = f.backstop.period_ms > 0 ? &nvml : nullptr;
  options.backstop_period_ms = f.backstop.period_ms;
  options.context_allowance_mib = f.backstop.context_allowance_mib;
  options.backstop_kill = f.backstop.enforce == "kill";
  options.mps_control = f.mps_control;
  options.tenant_uids = *tenant_uids;
  options.mig_nvml = any_mig ? &nvml : nullptr;
  options.allow_mig_reconfigure = f.allow_mig_reconfigure;
  options.meter_local_slots = f.meter_local_slots;
  node::Agent agent(options, *inventory, &link);
  if (Status st = agent.Start(); !st.ok()) return Fail(st.message(), kExitFailure);
  std::printf("tessera agent: node '%s', %zu GPUs, node directory %s, control plane %s\n", f.name.c_str(),
              inventory->gpus.size(), f.run_dir.c_str(), f.server.c_str());
  if (f.backstop.period_ms > 0) {
    std::printf("tessera agent: NVML backstop every %d ms, %lld MiB allowance per process, --enforce %s\n",
                f.backstop.period_ms, static_cast<long long>(f.backstop.context_allowance_mib), f.backstop.enforce.c_str());
  }
  if (tenant_uids->enabled) {
    std::printf("tessera agent: each tenant's workloads run under a uid of its own: %ld-%ld, %zu fixed (--tenant-uids)\n",
                tenant_uids->first, tenant_uids->last, tenant_uids->fixed.size());
  } else {
    std::printf("tessera agent: every workload runs under the agent's uid %u: tenants can write each other's "
                "counters (--tenant-uids off%s; docs/security.md)\n",
                static_cast<unsigned>(::geteuid()), ::geteuid() == 0 ? "" : ", not root");
  }
  PrintLog(agent);
  std::string last_error;
  // The loop wakes every min(interval, backstop period): a round when the interval is up, else
  // the backstop alone.
  const int wake_ms = f.backstop.period_ms > 0 ? std::min(f.interval_ms, f.backstop.period_ms) : f.interval_ms;
  int64_t next_round_ms = 0;
  for (;;) {
    const int64_t now = NowMs();
    if (now < next_round_ms) {
      agent.Backstop(now);
      PrintLog(agent);
    } else {
      next_round_ms = now + f.interval_ms;
      Status st = agent.Round(now);
      PrintLog(agent);
      if (!st.ok()) {
        const StatusCode c = st.code();
        if (c == StatusCode::kUnauthenticated || c == StatusCode::kPermissionDenied ||
            c == StatusCode::kInvalidArgument || c == StatusCode::kDataLoss) {
          agent.StopArbiters();
          return Fail(st.message(), kExitFailure);
        }
        if (st.message() != last_error) std::fprintf(stderr, "tessera agent: %s (retrying)\n", st.message().c_str());
        last_error = st.message();
      } else if (!last_error.empty()) {
        std::printf("tessera agent: the control plane answers again\n");
        last_error.clear();
      }
    }
    timespec wait{wake_ms / 1000, static_cast<long>(wake_ms % 1000) * 1'000'000};
    const int sig = sigtimedwait(&signals, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) {
      std::printf("tessera agent: %s, stopping (the workloads keep running; a restarted agent adopts them)\n",
                  sig == SIGINT ? "SIGINT" : "SIGTERM");
      agent.StopArbiters();
      return kExitOk;
    }
  }
}

}  // namespace

void RegisterAgent(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<AgentFlags>();
  CLI::App* cmd = app.add_subcommand("agent", "Run the node agent: register GPUs, run placed workloads under the shim");
  cmd->add_option("--server", f->server, "The control plane, http://HOST:PORT or https://HOST[:PORT] (443)")->required();
  cmd->add_option("--ca-file", f->ca_file, "https: PEM CA certificates to verify the server with (default: system's)");
  cmd->add_option("--token-file", f->token_file, "File holding a node-agent token (tessera ctl tokens create)")
      ->required();
  cmd->add_option("--name", f->name, "Node name at the control plane (default: the host name)");
  cmd->add_option("--run-dir", f->run_dir,
                  "Node directory shared with the shim and `tessera run` (default: $TESSERA_RUN_DIR, else "
                  "$XDG_RUNTIME_DIR/tessera, else /tmp/tessera-<uid>); agent/agent_id in it is this agent's "
                  "identity at the control plane (another one with the same --name is refused while the node "
                  "is live)");
  cmd->add_option("--fake-gpus", f->fake_gpus,
                  "Use the in-tree fake NVML with these GPUs instead of the driver: MODEL:COUNT[:mig],... "
                  "(e.g. H100-80GB:2,A100-40GB:4: GPUs 0-1 H100, 2-5 A100; a workload gets GPUs of one model); "
                  ":mig only on a node of one model (e.g. H100-80GB:2:mig)");
  cmd->add_option("--cpu-milli", f->cpu_milli,
                  "CPU the node offers to workloads, in milli-CPUs (default: 1000 per online CPU); each "
                  "workload pod asks 1000 unless its cpu_milli says otherwise")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
  cmd->add_option("--memory-mib", f->memory_mib,
                  "Host memory the node offers to workloads, in MiB (default: all physical memory)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  cmd->add_option("--nvml-library", f->nvml, "NVML library to load (default libnvidia-ml.so.1)");
  cmd->add_option("--interval-ms", f->interval_ms,
                  "Milliseconds between rounds (heartbeat, desired state; default 1000)")
      ->check(CLI::Range(50, 60000));
  cmd->add_option("--usage-interval", f->usage_interval_s, "Seconds between usage samples (default 10)")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--retry-budget", f->retry_budget_s,
                  "Seconds each call to the control plane keeps retrying answers 429 and 503 (Retry-After, "
                  "else backoff) before the round fails and the next one tries again (default 5; 0: no retries)")
      ->check(CLI::Range(0, 600));
  cmd->add_option("--stop-grace", f->stop_grace_s,
                  "Seconds a stopped workload gets between SIGTERM and SIGKILL (default 5)")
      ->check(CLI::Range(0, 3600));
  AddBackstopFlags(cmd, &f->backstop, "workload");
  cmd->add_option("--mps-control", f->mps_control,
                  "The MPS control program for workloads in MPS mode: a path, or a name looked up on PATH "
                  "(default nvidia-cuda-mps-control). One daemon per GPU (`-d`, pipe and log directories "
                  "<run-dir>/mps/gpu<N>/), started for the GPU's first MPS workload and stopped after its "
                  "last; without it an MPS workload fails with reason mps_unavailable");
  cmd->add_option("--tenant-uids", f->tenant_uids,
                  "Run each tenant's workloads under a uid of that tenant's own, allotted from FIRST-LAST "
                  "(one per control-plane tenant, kept in <run-dir>/agent/tenant_uids.json across restarts), so "
                  "that no tenant can open another's counters file; or off (every workload under the agent's "
                  "uid). Default: " + std::string(node::kDefaultTenantUids) + " when the agent runs as root, else off; "
                  "needs root. Uids need no account (gid = the uid; HOME = <run-dir>/agent/home/<uid>)");
  cmd->add_option("--tenant-uid", f->tenant_uid,
                  "TENANT=UID: run this tenant's workloads under UID (e.g. its account's) instead of one from "
                  "--tenant-uids; repeatable, one uid per tenant");
  cmd->add_flag("--meter-local-slots", f->meter_local_slots,
                "Meter the node directory's tenants this agent did not start (DRA claims, device-plugin slots) "
                "and send their usage, billed to each one's account (its namespace; the tenant must exist at "
                "the control plane). Off by default: on a Slurm node `tessera node arbiter --usage-ledger` "
                "meters them");
  cmd->add_flag("--allow-mig-reconfigure", f->allow_mig_reconfigure,
                "Apply the MIG layouts the control plane asks for (destroy free instances, create new ones; an "
                "instance in use is never destroyed). Off by default: cutting a GPU is the operator's decision "
                "per node; without it the agent reports \"layout differs, not applied\" (node condition "
                "mig_layout) and the control plane places MIG work only on the instances that exist");
  cmd->footer(
      "Each placed workload runs as `tessera run --tenant w<id> ...` under the shim (and, with tenant\n"
      "uids, `--uid` its tenant's: docs/security.md), its output in\n"
      "<run-dir>/agent/w<id>.log. Stopping the agent leaves the workloads running; a restarted agent\n"
      "re-adopts them from <run-dir>/agent/. The NVML backstop (docs/enforcement.md) catches what the\n"
      "shim cannot see (a process without LD_PRELOAD) within one --backstop-ms period. Exit code: 1\n"
      "when the control plane refuses the token or the inventory, 2 for bad flags; 0 after SIGTERM or\n"
      "SIGINT.");
  cmd->callback([f, exit_code] { *exit_code = RunAgent(*f); });
}

}  // namespace tessera::cli
