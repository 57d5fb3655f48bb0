// The node side of a Slurm task: JoinTask and ReleaseEndedTasks (tessera/integrations/slurm_step.h).
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tessera/enforce/nvml.h"
#include "tessera/integrations/slurm_step.h"
#include "tessera/node/gpu_table.h"
#include "tessera/node/launcher.h"
#include "tessera/node/node_dir.h"

namespace tessera::integrations::slurm {
namespace {

// What the task needs to know of each GPU of `wanted` (UUID, device minor, memory, MIG mode): from
// the node's GPU table (gpu_table.h, written by the node side) for the GPUs it lists, else from
// NVML, loaded here once for all the others. The table spares every task of every step loading
// and initialising NVML. Memory 0: unknown (the caller then needs --gpu-mem).
// INVALID_ARGUMENT when NVML counts fewer GPUs.
StatusOr<std::map<int, node::NodeGpuFacts>> GpuFacts(const std::optional<std::vector<node::NodeGpuFacts>>& table,
                                                     const std::string& library, const std::vector<int>& wanted) {
  std::map<int, node::NodeGpuFacts> out;
  std::vector<int> missing;
  for (int gpu : wanted) {
    std::optional<node::NodeGpuFacts> known = table ? node::GpuFactsOf(*table, gpu) : std::nullopt;
    if (known) {
      out[gpu] = *known;
    } else {
      out[gpu] = node::NodeGpuFacts{.index = gpu};
      missing.push_back(gpu);
    }
  }
  if (missing.empty()) return out;
  enforce::DlopenNvml nvml({.library_path = library});
  if (!nvml.Init().ok()) return out;
  StatusOr<std::vector<node::NodeGpuFacts>> found = node::DiscoverGpuFacts(nvml, missing);
  (void)nvml.Shutdown();  // read-only use
  if (!found.ok() && found.status().code() == StatusCode::kNotFound) {
    return InvalidArgumentError(std::string(found.status().message()));
  }
  if (found.ok()) {
    for (const node::NodeGpuFacts& f : *found) out[f.index] = f;
  }
  return out;
}

// Waits until the GPU's lease arbiter (`tessera node arbiter` or the agent) has the tenant's slot
// active on its board: a task that started before would launch ungated. The arbiter may have to
// take over first (the lease file appears with the node's first join); woken by the doorbell, it
// syncs the changed registry at once (arbiter_duty.h), so an admission takes about a millisecond.
// The wait polls the slot's state (the arbiter wakes no one when it admits): finely at first.
Status AwaitAdmission(const node::NodeDir& dir, int gpu, int index, std::chrono::milliseconds timeout) {
  TESSERA_ASSIGN_OR_RETURN(enforce::LeaseFile leases, enforce::LeaseFile::Open(dir.paths().leases));
  enforce::LeaseBoard& board = leases.board(gpu);
  // Wake the arbiter: its next round sees the registry changed and syncs (arbiter_duty.h).
  enforce::RingNodeDoorbell(board);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout;
  while (board.node[index].state.load() != static_cast<uint32_t>(enforce::LeaseSlotState::kActive)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      if (!enforce::ArbiterAlive(board, enforce::MonotonicNowNs(), 1'000'000'000)) {
        return UnavailableError("node side unreachable: no tessera arbiter drives GPU " + std::to_string(gpu) +
                                " of " + dir.paths().dir + " (run `tessera node arbiter` or `tessera agent` there)");
      }
      return UnavailableError("GPU " + std::to_string(gpu) + "'s arbiter did not admit the task within " +
                              std::to_string(timeout.count()) + " ms");
    }
    // The arbiter admits within about a millisecond of the ring: look every 0.2 ms at first, so
    // the task does not sleep past it, then every 5 ms for one that has to take over first.
    const bool early = std::chrono::steady_clock::now() < start + std::chrono::milliseconds(20);
    std::this_thread::sleep_for(early ? std::chrono::microseconds(200) : std::chrono::microseconds(5000));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<TaskLaunch> JoinTask(const TaskRequest& r) {
  TaskLaunch out;
  if (r.options.isolation == Isolation::kNone) return out;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int> gpus, StepGpus(r.env));
  if (gpus.empty()) return out;
  if (r.options.isolation == Isolation::kHardware) {
    return FailedPreconditionError("--gpu-isolation=hardware: a MIG instance per job is not supported yet "
                                   "(use process, the shim, or none)");
  }
  struct stat st {};
  if (::stat(r.args.node_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return UnavailableError("node side unreachable: the node directory " + r.args.node_dir +
                            " does not exist (plugstack.conf node_dir=; the node's tessera install creates it)");
  }
  StatusOr<std::string> shim = node::ResolveShim(r.args.shim.empty() ? r.default_shim : r.args.shim);
  if (!shim.ok()) return UnavailableError("node side unreachable: " + std::string(shim.status().message()));
  TESSERA_ASSIGN_OR_RETURN(int shards, ShardsOnNode(r.env));
  TESSERA_ASSIGN_OR_RETURN(std::optional<std::vector<node::NodeGpuFacts>> table,
                           node::ReadGpuTable(r.args.node_dir));
  // Slurm numbers each MIG instance of a MIG GPU as a GPU of its own (`tessera slurm config`), so
  // from the node's first MIG GPU on, the indexes Slurm gives are not NVML's: fail closed there
  // rather than pin the task to another GPU than Slurm gave it. The GPUs looked at: the step's
  // and those below them (where the node side's table exists, the ones it lists: it drives every
  // GPU of a Slurm node).
  std::vector<int> looked_at;
  const int highest = *std::max_element(gpus.begin(), gpus.end());
  for (int g = 0; g <= highest; ++g) {
    const bool in_step = std::find(gpus.begin(), gpus.end(), g) != gpus.end();
    if (in_step || !table || node::GpuFactsOf(*table, g)) looked_at.push_back(g);
  }
  TESSERA_ASSIGN_OR_RETURN(const auto known, GpuFacts(table, r.args.nvml, looked_at));
  for (const auto& [g, facts] : known) {
    if (facts.mig_enabled) {
      return FailedPreconditionError("GPU " + std::to_string(g) +
                                     " of this node is in MIG mode: Slurm numbers its MIG instances as GPUs of their "
                                     "own, so the step's GPU(s) " + node::GpuList(gpus) +
                                     " cannot be told apart from them; tessera does not run Slurm tasks on MIG "
                                     "nodes yet (--gpu-isolation=none runs it unconfined)");
    }
  }
  // A step of several GPUs is one tenant on all of them (node_dir.h): the limit holds on each GPU,
  // so it is the smallest any of them gives (the same for GPUs of one model).
  TenantLimits limits;
  std::vector<node::GpuPin> pins;
  for (size_t i = 0; i < gpus.size(); ++i) {
    const node::NodeGpuFacts& facts = known.at(gpus[i]);
    TESSERA_ASSIGN_OR_RETURN(TenantLimits one, DeriveLimits(r.options, gpus[i], shards, r.args.shards_per_gpu,
                                                            facts.memory_mib << 20));
    if (i == 0) limits = one;
    else limits.mem_bytes = std::min(limits.mem_bytes, one.mem_bytes);
    TESSERA_ASSIGN_OR_RETURN(node::GpuPin one_pin, node::PinGpuFromFacts(facts, r.env("CUDA_VISIBLE_DEVICES")));
    pins.push_back(std::move(one_pin));
  }
  const node::GpuPin pin = node::JoinPins(pins);
  const node::NodeDir dir(r.args.node_dir);
  out.tenant = TenantName(r.account, r.job_id);
  TESSERA_ASSIGN_OR_RETURN(
      out.tenant_index,
      dir.Join({.name = out.tenant,
                .gpus = gpus,
                .mem_bytes = limits.mem_bytes,
                .share = limits.share,
                // What `tessera node arbiter --usage-ledger` bills: the account, per job.
                .account = r.account.empty() ? std::string("default") : r.account,
                .workload = "slurm-job-" + r.job_id,
                // The task runs under the job's user: its counters file is that user's.
                .uid = r.uid},
               r.task_pid));
  for (int gpu : gpus) {
    if (Status admitted = AwaitAdmission(dir, gpu, out.tenant_index, r.admit_timeout); !admitted.ok()) {
      (void)dir.Leave(r.task_pid);  // the admission error is the one to report
      return admitted;
    }
  }
  out.managed = true;
  out.gpus = gpus;
  out.limits = limits;
  out.env = node::LaunchEnvironment({.paths = dir.paths(), .shim_path = *shim, .pin = pin, .gpus = gpus,
                                     .tenant_index = out.tenant_index,
                                     .caller_ld_preload = r.env("LD_PRELOAD").value_or("")});
  return out;
}

Status ReleaseEndedTasks(const std::string& node_dir) {
  struct stat st {};
  if (::stat(node_dir.c_str(), &st) != 0) return Status::Ok();
  Status pruned = node::NodeDir(node_dir).Prune();
  // Removed or replaced while it was read (an operator's move, a node side restarting): nothing
  // of this job is held in a directory that is gone, and an epilog error would drain the node.
  if (!pruned.ok() && ::stat((node_dir + "/members").c_str(), &st) != 0) return Status::Ok();
  return pruned;
}

}  // namespace tessera::integrations::slurm
