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

// The node's GPUs as far as the task can know them: the node side's table when it lists GPUs
// 0..n-1 (the node side drives every GPU of a Slurm node: no NVML is loaded here, the common case);
// else NVML's facts of every GPU, loaded here once; else (no NVML) the table's GPUs and GPUs
// 0..`highest` by index alone (no MIG known: Slurm's index taken as the node's, as a node of one
// model without MIG has it).
std::vector<node::NodeGpuFacts> NodeGpus(const std::optional<std::vector<node::NodeGpuFacts>>& table,
                                         const std::string& library, int highest) {
  bool complete = table.has_value() && !table->empty();
  for (size_t i = 0; complete && i < table->size(); ++i) complete = node::GpuFactsOf(*table, static_cast<int>(i)).has_value();
  if (complete) return *table;
  enforce::DlopenNvml nvml({.library_path = library});
  if (nvml.Init().ok()) {
    StatusOr<uint32_t> count = nvml.DeviceCount();
    std::vector<int> all;
    for (uint32_t i = 0; count.ok() && i < *count; ++i) all.push_back(static_cast<int>(i));
    StatusOr<std::vector<node::NodeGpuFacts>> found = node::DiscoverGpuFacts(nvml, all);
    (void)nvml.Shutdown();  // read-only use
    if (found.ok()) return *found;
  }
  std::vector<node::NodeGpuFacts> out = table.value_or(std::vector<node::NodeGpuFacts>{});
  for (int g = 0; g <= highest; ++g) {
    if (!node::GpuFactsOf(out, g)) out.push_back({.index = g});
  }
  return out;
}

// "3g.20gb, 1g.5gb": the MIG types of the node, for a refusal's advice.
std::string MigTypes(const std::vector<node::NodeGpuFacts>& gpus) {
  std::vector<std::string> types;
  for (const node::NodeGpuFacts& g : gpus) {
    for (const node::MigInstanceFacts& m : g.mig_instances) {
      if (std::find(types.begin(), types.end(), m.profile) == types.end()) types.push_back(m.profile);
    }
  }
  std::string out;
  for (const std::string& t : types) out += (out.empty() ? "" : ", ") + t;
  return out;
}

// "Slurm's GPU 2 (GPU 1's MIG instance gi1/ci0, 3g.20gb)".
std::string Describe(int slurm_index, const SlurmGpu& g, const node::NodeGpuFacts& facts) {
  std::string out = "Slurm's GPU " + std::to_string(slurm_index) + " (";
  if (g.mig < 0) return out + "GPU " + std::to_string(g.gpu) + ")";
  const node::MigInstanceFacts& m = facts.mig_instances[static_cast<size_t>(g.mig)];
  return out + "GPU " + std::to_string(g.gpu) + "'s MIG instance gi" + std::to_string(m.gpu_instance_id) + "/ci" +
         std::to_string(m.compute_instance_id) + ", " + m.profile + ")";
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

namespace {

// A step on one MIG instance: the tenant runs on the instance (its MIG UUID is the task's only
// device), which the hardware isolates: no lease board, no admission to wait for, no
// TESSERA_SHIM_LEASES (node_dir.h, TenantRequest::mig_instance); the shim's memory limit is the
// instance's memory or --gpu-mem when smaller.
StatusOr<TaskLaunch> JoinMigInstance(const TaskRequest& r, const std::string& shim, const SlurmGpu& slot,
                                     const node::NodeGpuFacts& facts, const std::string& described) {
  const node::MigInstanceFacts& m = facts.mig_instances[static_cast<size_t>(slot.mig)];
  if (m.uuid.empty()) {
    return FailedPreconditionError(described + " has no MIG device UUID in the node's GPU table (NVML gave none), "
                                   "and a MIG instance is selected by its UUID only (--gpu-isolation=none runs the "
                                   "task unconfined)");
  }
  const uint64_t instance_bytes = m.memory_mib << 20;
  if (r.options.mem_bytes && instance_bytes > 0 && *r.options.mem_bytes > instance_bytes) {
    return InvalidArgumentError("--gpu-mem: " + std::to_string(*r.options.mem_bytes) + " bytes is more than the " +
                                std::to_string(instance_bytes) + " of " + described +
                                "; ask for a larger MIG type or less memory");
  }
  TESSERA_ASSIGN_OR_RETURN(TenantLimits limits, DeriveLimits(r.options, slot.gpu, 0, r.args.shards_per_gpu, instance_bytes));
  const node::GpuPin pin{.visible_devices = m.uuid, .uuid = m.uuid, .minor = facts.minor, .mig = true};
  const node::NodeDir dir(r.args.node_dir);
  TaskLaunch out;
  out.tenant = TenantName(r.account, r.job_id);
  TESSERA_ASSIGN_OR_RETURN(out.tenant_index,
                           dir.Join({.name = out.tenant,
                                     .gpus = {slot.gpu},
                                     .mem_bytes = limits.mem_bytes,
                                     .share = limits.share * 10,  // milli of the GPU (node_dir.h)
                                     .account = r.account.empty() ? std::string("default") : r.account,
                                     .workload = "slurm-job-" + r.job_id,
                                     .uid = r.uid,
                                     .mig_instance = m.uuid},
                                    r.task_pid));
  out.managed = true;
  out.gpus = {slot.gpu};
  out.limits = limits;
  out.mig_instance = m.uuid;
  out.env = node::LaunchEnvironment({.paths = dir.paths(), .shim_path = shim, .pin = pin, .gpus = out.gpus,
                                     .tenant_index = out.tenant_index,
                                     .caller_ld_preload = r.env("LD_PRELOAD").value_or("")});
  return out;
}

}  // namespace

StatusOr<TaskLaunch> JoinTask(const TaskRequest& r) {
  TaskLaunch out;
  if (r.options.isolation == Isolation::kNone) return out;
  TESSERA_ASSIGN_OR_RETURN(std::vector<int> slurm_gpus, StepGpus(r.env));
  if (slurm_gpus.empty()) return out;
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
  // Slurm's GPU indexes are not the node's where MIG instances (or GPUs of several models) are
  // gres records of their own: map them back (MapSlurmGpus, the order of `tessera slurm config`).
  const std::vector<node::NodeGpuFacts> node_gpus =
      NodeGpus(table, r.args.nvml, *std::max_element(slurm_gpus.begin(), slurm_gpus.end()));
  TESSERA_ASSIGN_OR_RETURN(const std::vector<SlurmGpu> mapped, MapSlurmGpus(node_gpus, slurm_gpus, shards > 0));
  std::vector<std::string> described;
  bool on_mig = false, identity = true;
  for (size_t i = 0; i < mapped.size(); ++i) {
    described.push_back(Describe(slurm_gpus[i], mapped[i], *node::GpuFactsOf(node_gpus, mapped[i].gpu)));
    on_mig = on_mig || mapped[i].mig >= 0;
    identity = identity && mapped[i].mig < 0 && mapped[i].gpu == slurm_gpus[i];
  }
  if (on_mig && mapped.size() > 1) {
    std::string all;
    for (const std::string& d : described) all += (all.empty() ? "" : ", ") + d;
    return FailedPreconditionError("the step has " + all + ": a step runs on one MIG instance or on whole GPUs only "
                                   "(one tenant, one instance); ask for one, e.g. --gres=gpu:" + mapped[0].type +
                                   ":1 per step");
  }
  if (on_mig) {
    // --gpu-isolation=process on a MIG instance gets the instance too: the hardware fence is
    // stronger than the shim's, and the instance is all Slurm gave the step.
    return JoinMigInstance(r, *shim, mapped[0], *node::GpuFactsOf(node_gpus, mapped[0].gpu), described[0]);
  }
  std::vector<int> gpus;
  for (const SlurmGpu& g : mapped) gpus.push_back(g.gpu);
  if (r.options.isolation == Isolation::kHardware) {
    const std::string types = MigTypes(node_gpus);
    return FailedPreconditionError(
        "--gpu-isolation=hardware: " + described[0] + " is a whole GPU, not a MIG instance, and only a MIG "
        "instance isolates a job by the hardware; ask for a MIG gres (e.g. --gres=gpu:" +
        (types.empty() ? std::string("1g.10gb") : types.substr(0, types.find(','))) + ":1; this node has " +
        (types.empty() ? std::string("no MIG instances") : "MIG types " + types) +
        ") or use --gpu-isolation=process (the shim)");
  }
  // Whole GPUs: their facts from the table or NVML, already read.
  std::map<int, node::NodeGpuFacts> known;
  for (int g : gpus) known[g] = *node::GpuFactsOf(node_gpus, g);
  // Slurm's CUDA_VISIBLE_DEVICES holds Slurm's indexes: a list to narrow by only where they are
  // the node's.
  const std::optional<std::string> caller_visible = identity ? r.env("CUDA_VISIBLE_DEVICES") : std::nullopt;
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
    TESSERA_ASSIGN_OR_RETURN(node::GpuPin one_pin, node::PinGpuFromFacts(facts, caller_visible));
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
                .share = limits.share * 10,  // Slurm's options are percent, the node directory's milli
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
