// `tessera ctl workloads`: list, get, cancel, submit (from flags or a JSON file) and update (PATCH).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/workload_wire.h"

#include "tessera/node/memory_size.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {

namespace {

using json = nlohmann::json;

struct WorkloadFlags : CtlConnection {
  std::string tenant, id, file, idempotency_key, cont, name;
  std::string qos, mode, isolation, mig_profile, model, state, mem;
  std::vector<std::string> command;
  int64_t gpus = 1, gpu_milli = 1000, gpu_mem_mib = 0, priority = 0, pods = 1, limit = 100, share = 0;
};

}  // namespace

void RegisterCtlWorkloads(CLI::App* ctl, std::shared_ptr<const CtlConnection> connection, int* exit_code) {
  auto f = std::make_shared<WorkloadFlags>();
  auto verb = [&](CLI::App* area, const std::string& name, const std::string& help) {
    CLI::App* v = area->add_subcommand(name, help);
    v->fallthrough();
    return v;
  };
  // The connection flags (--server, -o, ...) are parsed into `connection`; each verb copies them.
  auto set = [exit_code, f, connection](CLI::App* v, std::function<int()> run) {
    v->callback([run, exit_code, f, connection] {
      static_cast<CtlConnection&>(*f) = *connection;
      *exit_code = CtlGuard(run);
    });
  };

  CLI::App* workloads = ctl->add_subcommand("workloads", "Workloads")->require_subcommand(1)->fallthrough();
  CLI::App* wlist = verb(workloads, "list", "One tenant's workloads, a page at a time");
  wlist->add_option("--tenant", f->tenant, "Tenant (default: the token's; admins: all)");
  wlist->add_option("--limit", f->limit, "Page size, 1..1000")->capture_default_str();
  std::vector<std::string> states;  // api::WorkloadState's names
  for (api::WorkloadState s : api::kWorkloadStates) states.emplace_back(api::WorkloadStateName(s));
  wlist->add_option("--state", f->state, "Only workloads in this state")->check(CLI::IsMember(states));
  wlist->add_option("--continue", f->cont, "The continue token of the previous page");
  set(wlist, [f] {
    std::string q = "/v1/workloads?limit=" + std::to_string(f->limit);
    if (!f->tenant.empty()) q += "&tenant=" + QueryEscape(f->tenant);
    if (!f->state.empty()) q += "&state=" + QueryEscape(f->state);
    if (!f->cont.empty()) q += "&continue=" + QueryEscape(f->cont);
    return CtlCall(*f, f->idempotency_key, "workloads", "list", "GET", q);
  });
  for (const std::string v : {"get", "cancel"}) {
    CLI::App* w = verb(workloads, v, v == "get" ? "One workload with its placement and events" : "Cancel a workload");
    w->add_option("id", f->id, "Workload id")->required();
    set(w, [f, v] { return CtlCall(*f, f->idempotency_key, "workloads", v, v == "get" ? "GET" : "DELETE", "/v1/workloads/" + QueryEscape(f->id)); });
  }
  CLI::App* sub = verb(workloads, "submit", "Submit a workload (flags, or the whole body with --file)");
  sub->add_option("--file", f->file, "JSON body (docs/api.md); the other request flags are ignored");
  sub->add_option("--tenant", f->tenant, "Leaf tenant (required without --file)");
  sub->add_option("--gpus", f->gpus, "GPUs per pod")->capture_default_str();
  sub->add_option("--qos", f->qos, "Guaranteed, Burstable or BestEffort (default: the tenant's default_qos)");
  sub->add_option("--gpu-milli", f->gpu_milli, "Share of each GPU, 1..1000")->capture_default_str();
  sub->add_option("--gpu-mem-mib", f->gpu_mem_mib, "Device memory per GPU, MiB (needed with a share)");
  sub->add_option("--mode", f->mode, "exclusive, mig, mps, timeslice, fraction (default: chosen)");
  sub->add_option("--isolation", f->isolation, "none, process or hardware");
  sub->add_option("--mig-profile", f->mig_profile, "A MIG profile, e.g. 1g.10gb");
  sub->add_option("--model", f->model, "GPU model");
  sub->add_option("--priority", f->priority, "Priority within the tenant, -1000..1000");
  sub->add_option("--pods", f->pods, "Gang size")->capture_default_str();
  sub->add_option("--name", f->name, "A name");
  sub->add_option("--command,command", f->command,
                  "What the node agent runs under the shim once the workload is placed: --command PROG ARGS..., "
                  "or after -- when an argument starts with '-' (-- python train.py --lr 1e-3); its output goes "
                  "to <run-dir>/agent/w<id>.log on that node. Without a command the workload only holds its "
                  "GPUs (and is billed) for processes attached to it");
  sub->add_option("--idempotency-key", f->idempotency_key, "Retry-safe key: a retry returns the first answer");
  set(sub, [f] {
    if (!f->file.empty()) {
      std::ifstream in(f->file);
      if (!in) return Fail("ctl workloads submit", "cannot read --file " + f->file, kExitBadInput);
      std::stringstream s;
      s << in.rdbuf();
      return CtlCall(*f, f->idempotency_key, "workloads", "submit", "POST", "/v1/workloads", s.str());
    }
    if (f->tenant.empty()) return Fail("ctl workloads submit", "--tenant is required (or --file)", kExitBadInput);
    // Sent as given (the server names a field out of range; a flag beyond 32 bits stays out of
    // range); the codec writes the wire format.
    const auto i32 = [](int64_t v) { return static_cast<int32_t>(std::clamp<int64_t>(v, INT32_MIN, INT32_MAX)); };
    api::WorkloadRequest b{.tenant = f->tenant, .gpus = i32(f->gpus), .name = f->name, .qos = f->qos,
                           .gpu_milli = i32(f->gpu_milli), .gpu_mem_mib = f->gpu_mem_mib,
                           .mig_profile = f->mig_profile, .mode = f->mode, .isolation = f->isolation,
                           .priority = i32(f->priority), .pods = i32(f->pods),
                           .model = f->model, .command = f->command};
    return CtlCall(*f, f->idempotency_key, "workloads", "submit", "POST", "/v1/workloads", api::EncodeWorkloadRequest(b));
  });

  // PATCH /v1/workloads/{id}: what the server accepts (gpu_mem_mib, gpu_milli, priority); it
  // refuses what it cannot change (another mode, more share than the GPU has free, an ended one).
  CLI::App* upd = verb(workloads, "update", "Change a pending or running workload's memory limit, share or priority");
  upd->add_option("id", f->id, "Workload id")->required();
  upd->add_option("--mem", f->mem,
                  std::string("New device memory limit per GPU with a unit: ") + node::kMemoryUnits +
                      ", e.g. 8GiB (sent as gpu_mem_mib, rounded up to whole MiB)");
  upd->add_option("--share", f->share,
                  "New share of each GPU in milli-GPU, 1..999 for a fractional workload (sent as gpu_milli; "
                  "1000 would make it exclusive: refused, as is more than its GPU has free)")
      ->check(CLI::Range(1, 1000));
  upd->add_option("--priority", f->priority, "New priority within the tenant, -1000..1000")
      ->check(CLI::Range(-1000, 1000));
  set(upd, [f, upd] {
    json b = json::object();
    if (upd->count("--mem") > 0) {
      StatusOr<uint64_t> bytes = node::ParseMemorySize(f->mem);
      if (!bytes.ok()) return Fail("ctl workloads update", "--mem " + bytes.status().message(), kExitBadInput);
      b["gpu_mem_mib"] = static_cast<int64_t>((*bytes + (1 << 20) - 1) >> 20);
    }
    if (upd->count("--share") > 0) b["gpu_milli"] = f->share;
    if (upd->count("--priority") > 0) b["priority"] = f->priority;
    if (b.empty()) return Fail("ctl workloads update", "nothing to change: give --mem, --share or --priority", kExitBadInput);
    return CtlCall(*f, f->idempotency_key, "workloads", "update", "PATCH", "/v1/workloads/" + QueryEscape(f->id), b.dump());
  });

}

}  // namespace tessera::cli
