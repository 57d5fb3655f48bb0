// `tessera run` and `tessera node status`: run a command under libtessera-shim.so on a single node
// without a control plane, and show what the node segment says. Flags and printing only: the
// node side (registry, slots, arbiter election, launcher) is tessera::node
// (include/tessera/node/node_dir.h, arbiter_duty.h, launcher.h), shared with the agent, the
// SPANK plugin and the device plugin.
//   tessera run --tenant T --gpu 0[,1,...] --mem 8GiB --share 30 [--priority P] [--scrub] [--uid UID] -- CMD ARGS...
//   tessera node status [--json PATH|-]
//   tessera node arbiter --gpus 0,1 (commands/node_arbiter.cc)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "tessera/enforce/segment.h"
#include "tessera/node/launcher.h"
#include "tessera/node/memory_size.h"
#include "tessera/node/node_dir.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/run_remote.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

struct RunFlags {
  std::string tenant;
  std::vector<int> gpus;  // --gpu 0 or --gpu 0,1 (a pod's GPUs)
  std::string mem;
  int share = 0;
  int priority = 0;
  int kernel_estimate_us = 1000;
  bool scrub = false;
  long uid = -1;
  std::string mig_instance;  // a first slice ("4") or a MIG device UUID ("MIG-...")
  std::string nvml = "libnvidia-ml.so.1";
  std::string exit_file;
  std::vector<std::string> command;
  RemoteRunFlags remote;  // --server and the request flags that go with it
};

// --exit-file: the code, written atomically, so that an agent that did not start this process
// (it restarted) learns how the command ended.
int Finish(const RunFlags& f, int code) {
  if (f.exit_file.empty()) return code;
  const std::string tmp = f.exit_file + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  out << code << "\n";
  out.close();
  if (!out || std::rename(tmp.c_str(), f.exit_file.c_str()) != 0)
    std::fprintf(stderr, "tessera run: cannot write the exit file '%s'\n", f.exit_file.c_str());
  return code;
}

int RunFail(const std::string& message, int code) {
  std::fprintf(stderr, "tessera run: %s\n", message.c_str());
  return code;
}

int RunCommand(const RunFlags& f);

int Run(RunFlags f) {
  if (!f.remote.server.empty()) {
    if (!f.gpus.empty()) return RunFail("--gpu is chosen by the control plane with --server", kExitBadInput);
    if (f.uid >= 0) return RunFail("--uid is for a node without a control plane (not with --server)", kExitBadInput);
    f.remote.tenant = f.tenant;
    f.remote.mem = f.mem;
    f.remote.share = f.share;
    f.remote.priority = f.priority;
    f.remote.command = f.command;
    return RunRemote(f.remote);
  }
  if (f.gpus.empty() || f.mem.empty() || f.share <= 0)
    return RunFail("--gpu, --mem and --share are required without --server", kExitBadInput);
  return Finish(f, RunCommand(f));
}

int RunCommand(const RunFlags& f) {
  if (f.command.empty()) {
    return RunFail("no command given (usage: tessera run --tenant T --gpu 0 --mem 8GiB --share 30 -- CMD ARGS...)",
                   kExitBadInput);
  }
  if (f.tenant.empty()) return RunFail("--tenant is empty", kExitBadInput);
  StatusOr<uint64_t> mem = node::ParseMemorySize(f.mem);
  if (!mem.ok()) return RunFail("--mem " + mem.status().message(), kExitBadInput);
  node::RunOptions options;
  options.tenant = {.name = f.tenant, .gpus = f.gpus, .mem_bytes = *mem, .share = f.share, .priority = f.priority,
                    .kernel_estimate_us = f.kernel_estimate_us, .scrub = f.scrub, .uid = f.uid};
  options.command = f.command;
  options.nvml_library = f.nvml;
  if (!f.mig_instance.empty()) {
    if (f.mig_instance.starts_with("MIG-")) {
      options.mig_uuid = f.mig_instance;
    } else if (f.mig_instance.size() == 1 && f.mig_instance[0] >= '0' && f.mig_instance[0] <= '7') {
      options.mig_start = f.mig_instance[0] - '0';
    } else {
      return RunFail("--mig-instance '" + f.mig_instance + "': neither a first slice 0..7 nor a MIG device UUID (MIG-...)",
                     kExitBadInput);
    }
  }
  if (const char* s = std::getenv("TESSERA_SHIM_PATH"); s != nullptr) options.shim_path = s;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v != nullptr) options.caller_visible_devices = v;
  if (const char* p = std::getenv("LD_PRELOAD"); p != nullptr) options.caller_ld_preload = p;
  StatusOr<node::RunResult> result = node::RunTenantCommand(node::NodeDir(node::DefaultNodeDir()), options);
  if (!result.ok()) {
    return RunFail(result.status().message(),
                   result.status().code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure);
  }
  if (!result->cleanup.ok()) std::fprintf(stderr, "tessera run: %s\n", result->cleanup.message().c_str());
  if (!result->violation.empty())
    std::fprintf(stderr, "tessera run: the command was killed: %s\n", result->violation.c_str());
  return result->exit_code;
}

json StatusJson(const node::NodeStatus& s) {
  json gpus = json::array();
  for (const node::GpuStatus& g : s.gpus) {
    json tenants = json::array();
    for (const node::TenantStatus& t : g.tenants) {
      tenants.push_back(json{{"name", t.name},
                             {"index", t.index},
                             {"limit_bytes", t.limit_bytes},
                             {"used_bytes", t.used_bytes},
                             {"peak_bytes", t.peak_bytes},
                             {"share", t.share},
                             {"priority", t.priority},
                             {"scrub", t.scrub},
                             {"pids", t.pids},
                             {"launches", t.launches},
                             {"charged_ns", t.charged_ns}});
    }
    gpus.push_back(json{{"gpu", g.gpu}, {"arbiter_alive", g.arbiter_alive}, {"tenants", tenants}});
  }
  return json{{"dir", s.dir}, {"gpus", gpus}};
}

void PrintTable(const node::NodeStatus& s) {
  if (!s.exists) {
    std::printf("no tessera node at %s (no `tessera run` has created it)\n", s.dir.c_str());
    return;
  }
  std::printf("node %s\n", s.dir.c_str());
  for (const node::GpuStatus& g : s.gpus) {
    std::printf("GPU %d (arbiter %s)\n", g.gpu, g.arbiter_alive ? "running" : "not running");
    std::printf("  %-16s %5s %14s %14s %6s %8s %10s %5s\n", "tenant", "index", "limit MiB", "used MiB", "share",
                "priority", "launches", "scrub");
    for (const node::TenantStatus& t : g.tenants) {
      std::printf("  %-16s %5d %14.1f %14.1f %6d %8d %10llu %5s\n", t.name.c_str(), t.index,
                  static_cast<double>(t.limit_bytes) / 1048576.0, static_cast<double>(t.used_bytes) / 1048576.0,
                  t.share, t.priority, static_cast<unsigned long long>(t.launches), t.scrub ? "on" : "off");
    }
  }
}

int NodeStatus(const std::string& json_path) {
  StatusOr<node::NodeStatus> status = node::NodeDir(node::DefaultNodeDir()).ReadStatus();
  if (!status.ok()) {
    std::fprintf(stderr, "tessera node status: %s\n", status.status().message().c_str());
    return kExitFailure;
  }
  if (json_path.empty()) {
    PrintTable(*status);
    return kExitOk;
  }
  const std::string text = StatusJson(*status).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  if (json_path == "-") {
    std::fputs(text.c_str(), stdout);
    return kExitOk;
  }
  std::ofstream out(json_path);
  out << text;
  if (!out) {
    std::fprintf(stderr, "tessera node status: cannot write '%s'\n", json_path.c_str());
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

void RegisterNode(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* run = app.add_subcommand("run", "Run a command under the shim with a memory limit and a compute share");
  run->add_option("--tenant", flags->tenant, "Tenant name (processes with the same name share limit and lease)")
      ->required();
  run->add_option("--gpu", flags->gpus,
                  "Node GPU index, or several comma-separated for one command on several GPUs (0,1: --mem on each; "
                  "CUDA ordinal 0 is GPU 0, 1 is GPU 1) (required without --server); the command sees only these "
                  "GPUs (CUDA_VISIBLE_DEVICES)")
      ->delimiter(',')
      ->check(CLI::Range(0, enforce::kMaxGpus - 1));
  run->add_option("--mem", flags->mem,
                  std::string("Device memory limit (required without --server) with a unit: ") + node::kMemoryUnits + ", e.g. 8GiB, 512MiB");
  run->add_option("--share", flags->share,
                  "Compute share (required without --server): a weight against the GPU's other tenants, 1..1000 (with --server: the "
                  "share of the GPU in milli; absent = a whole GPU)")
      ->check(CLI::Range(1, 1000));
  run->add_option("--server", flags->remote.server,
                  "Ask this control plane (http://HOST:PORT or https://HOST[:PORT]) to place the workload; its "
                  "node agent runs it");
  run->add_option("--ca-file", flags->remote.ca_file,
                  "With an https --server: PEM CA certificates to verify it with (default: the system's)");
  run->add_option("--token", flags->remote.token, "With --server: API token (else --token-file or $TESSERA_TOKEN)");
  run->add_option("--token-file", flags->remote.token_file, "With --server: file whose first line is the token");
  run->add_option("--qos", flags->remote.qos, "With --server: Guaranteed, Burstable or BestEffort (default: the tenant's default_qos, Burstable unless set)");
  run->add_option("--mode", flags->remote.mode, "With --server: exclusive, mig, mps, timeslice, fraction");
  run->add_option("--model", flags->remote.model, "With --server: the GPU model to run on");
  run->add_option("--retry-budget", flags->remote.retry_budget_s,
                  "With --server: seconds each request keeps retrying answers 429 and 503 (Retry-After, else "
                  "backoff), default 60; 0: no retries")
      ->check(CLI::Range(0, 86400));
  run->add_option("--priority", flags->priority, "Priority (used by the priority policy; default 0)");
  run->add_option("--kernel-estimate-us", flags->kernel_estimate_us,
                  "The lease arbiter's duration model: GPU time of one kernel (default 1000)")
      ->check(CLI::Range(1, 10'000'000));
  run->add_flag("--scrub", flags->scrub,
                "Zero the tenant's device memory before every free (sticky while the tenant runs)");
  run->add_option("--uid", flags->uid,
                  "Run the command under this uid (needs root): its tenant's counters file becomes its own and no "
                  "other tenant's is writable to it (docs/security.md); every run of a tenant must give the same uid")
      ->check(CLI::Range(0L, 2147483647L));
  run->add_option("--mig-instance", flags->mig_instance,
                  "Run on one MIG instance of --gpu (one GPU): the one whose GPU instance starts at this memory slice "
                  "(0..7, e.g. 4 for 3g.40gb@4; its UUID is read from NVML), or a MIG device UUID (MIG-...); the "
                  "command sees only that instance (CUDA_VISIBLE_DEVICES)");
  run->add_option("--nvml", flags->nvml,
                  "NVML library for the GPU's UUID (default libnvidia-ml.so.1; without it the GPU is pinned by index)");
  run->add_option("--exit-file", flags->exit_file,
                  "Write the exit code to this file when done (what the node agent reads after a restart)");
  run->add_option("command", flags->command, "The command and its arguments (after --)");
  run->footer(
      "The node directory is $TESSERA_RUN_DIR, else $XDG_RUNTIME_DIR/tessera, else /tmp/tessera-<uid>.\n"
      "The shim is $TESSERA_SHIM_PATH, else libtessera-shim.so next to tessera; without it nothing runs.\n"
      "The GPU's lease arbiter runs inside the `tessera run` processes of that GPU (one at a time, by\n"
      "flock); the command starts once it has admitted the tenant. The command dies with tessera run.\n"
      "With --server the control plane places the workload and the node agent there runs it; the output\n"
      "is followed when that agent shares this node directory, else one line names the node and the log\n"
      "there (<run-dir>/agent/w<id>.log, <run-dir> being that agent's --run-dir); Ctrl-C cancels it.\n"
      "Exit code: the command's (128 + signal if it was killed); 2 for bad flags; 1 when it did not start.");
  run->callback([flags, exit_code] { *exit_code = Run(*flags); });

  auto json_path = std::make_shared<std::string>();
  CLI::App* node = app.add_subcommand("node", "The node's tenants, limits, usage and shares; its lease arbiters");
  node->require_subcommand(1);
  CLI::App* status = node->add_subcommand("status", "Tenants, limits, current usage and shares per GPU");
  status->add_option("--json", *json_path, "Write the status as JSON to PATH ('-' = stdout) instead of the table");
  status->callback([json_path, exit_code] { *exit_code = NodeStatus(*json_path); });
  AddNodeArbiter(node, exit_code);
}

}  // namespace tessera::cli
