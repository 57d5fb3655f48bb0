// Slurm step logic of the SPANK plugin (spank_tessera.so, src/integrations/slurm/): everything the
// plugin decides, as pure functions over strings, so that it is tested without Slurm
// (tests/integrations/slurm_step_test.cc) and the plugin itself only moves values between Slurm
// and these functions (docs/slurm.md).
//
//   ParseGpuMem / ParseGpuShare / ParseIsolation   the job options --gpu-mem=SIZE,
//       --gpu-share=PCT, --gpu-isolation=hardware|process|none; each error names its option, as
//       srun and sbatch print it when they reject the job at submit.
//   ParsePluginArgs   the plugstack.conf arguments (node_dir=, shim=, nvml=, shards_per_gpu=).
//   StepGpus          the GPUs of the step as Slurm numbers them, from the environment Slurm sets
//       (SPANK has no GRES item): SLURM_STEP_GPUS, else SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES.
//   MapSlurmGpus      Slurm's GPU indexes -> the node's GPUs and MIG instances (the GPU table).
//   DeriveLimits      memory limit and compute share of the step's tenant: the options when
//       given, else the job's shards (SLURM_SHARDS_ON_NODE) out of shards_per_gpu of the GPU,
//       else the whole GPU. On shards the options may ask for less than the shards' part, never
//       more: Slurm chooses the GPU of a shard job by counting shards, so the tenants it puts on
//       one GPU fit it only if each stays inside its shards (docs/slurm.md "Which GPU").
//   TenantName        the node tenant of a job: "<account>.<job id>" (a sub-tenant per job of
//       the Slurm account; all tasks and steps of one job on a node share its slot and limit).
//
// Worked example: a job of account "physics" (job 42) runs `srun --gres=shard:2 ./train` on a
// node with shards_per_gpu=4 and an 80 GiB GPU; Slurm sets SLURM_STEP_GPUS=1 and
// SLURM_SHARDS_ON_NODE=2. StepGpus -> [1]; DeriveLimits({}, 1, 2, 4, 80 GiB) -> {gpu 1, 40 GiB,
// share 50}; TenantName("physics", "42") -> "physics.42". With --gpu-mem=10GiB --gpu-share=25
// instead: {gpu 1, 10 GiB, share 25}. With --gpu-mem=50GiB: INVALID_ARGUMENT "... more than the
// 2 of GPU 1's 4 shards give (42949672960 bytes); ask for --gres=shard:3 or less memory".
//
// Thread-safety: pure functions. Ownership: results are values.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/integrations/slurm_config.h"
#include "tessera/node/gpu_table.h"

namespace tessera::integrations::slurm {

enum class Isolation { kHardware, kProcess, kNone };
const char* IsolationName(Isolation isolation);

// The values of the job's options; unset = not given.
struct JobOptions {
  std::optional<uint64_t> mem_bytes;     // --gpu-mem
  std::optional<int> share_percent;      // --gpu-share, 1..100
  Isolation isolation = Isolation::kProcess;  // --gpu-isolation (default: process, the shim)
};

// "--gpu-mem: '4096': no unit (use B, KiB, ...)". Zero is an error (it would deny the GPU).
StatusOr<uint64_t> ParseGpuMem(const std::string& text);
// An integer 1..100: "--gpu-share: '150' is not a percentage 1..100".
StatusOr<int> ParseGpuShare(const std::string& text);
// "--gpu-isolation: 'strong' is not one of hardware, process, none".
StatusOr<Isolation> ParseIsolation(const std::string& text);

// plugstack.conf: `required /usr/lib/tessera/spank_tessera.so node_dir=/run/tessera shim=PATH
// nvml=LIB shards_per_gpu=4`. Every argument is optional.
struct PluginArgs {
  std::string node_dir = "/run/tessera";  // the node directory (tessera/node/node_dir.h)
  std::string shim;                       // "" = libtessera-shim.so next to the plugin
  std::string nvml = "libnvidia-ml.so.1"; // for GPU memory and UUIDs
  int shards_per_gpu = 0;                 // gres.conf's shards per GPU; 0 = no shards configured
};
// INVALID_ARGUMENT naming the argument: "plugstack.conf argument 'colour=red': unknown (use
// node_dir=, shim=, nvml=, shards_per_gpu=)".
StatusOr<PluginArgs> ParsePluginArgs(const std::vector<std::string>& args);

// The node directory of the node named `node_name` (SLURMD_NODENAME): node_dir= with each "%n"
// replaced by the name, as slurm.conf's SlurmdSpoolDir does, for hosts that run several slurmd
// (a test cluster: node_dir=/run/tessera-%n gives n1 /run/tessera-n1). Without "%n" the name is
// not needed. INVALID_ARGUMENT when "%n" is asked for and the name is unknown or is no plain name
// (empty, or holding '/', or "." or "..").
StatusOr<std::string> NodeDirOf(const std::string& node_dir, const std::optional<std::string>& node_name);

// Looks a variable of the job's environment up; nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// The node GPU indexes of the step (ascending as Slurm lists them); empty when the step has no
// GPU. INVALID_ARGUMENT naming the variable for an entry that is not an index ("GPU-..." UUIDs
// in CUDA_VISIBLE_DEVICES are not node indexes: Slurm's own variables are preferred).
StatusOr<std::vector<int>> StepGpus(const EnvLookup& env);

// What Slurm's GPU indexes `slurm_indexes` (StepGpus) are on a node whose GPUs are `node_gpus`
// (the node's GPU table, or NVML's facts; any order): Slurm numbers the records of `tessera slurm
// config`'s gres lines, i.e. InSlurmOrder (slurm_config.h) of the GPUs by index with each MIG GPU
// replaced by its instances (a MIG GPU without instances counts none). A shard step
// (`shards`: SLURM_SHARDS_ON_NODE > 0) is numbered among the shard records, the whole GPUs only,
// in the same order. Worked example (the one checked against slurmd 22.05): GPU 0 an A100-40GB,
// GPU 1 an A100-40GB in MIG mode with two 3g.20gb instances, GPU 2 an A100-40GB; `tessera slurm
// config` prints Gres=gpu:a100-40gb:2,gpu:3g.20gb:2 and the gpu lines GPU 0, GPU 2, GPU 1's first
// instance, its second; so MapSlurmGpus(table, {0, 1, 2, 3}) -> [GPU 0, GPU 2, GPU 1 mig 0, GPU 1
// mig 1], and `srun --gres=gpu:3g.20gb:1` (SLURM_STEP_GPUS=2) runs on GPU 1's first instance.
// On a node of one model without MIG, Slurm's index is the node's. INVALID_ARGUMENT naming the
// index when Slurm counts more GPUs than `node_gpus` give.
StatusOr<std::vector<SlurmGpu>> MapSlurmGpus(const std::vector<node::NodeGpuFacts>& node_gpus,
                                             const std::vector<int>& slurm_indexes, bool shards = false);

// The job's shards on this node (SLURM_SHARDS_ON_NODE), 0 when not set.
StatusOr<int> ShardsOnNode(const EnvLookup& env);

struct TenantLimits {
  int gpu = 0;  // the GPU the limits were derived for (a step of several: the first)
  uint64_t mem_bytes = 0;
  int share = 100;  // compute weight, percent of the GPU
};
// See the worked example. INVALID_ARGUMENT when the option asks for more memory than the GPU
// has (gpu_memory_bytes > 0), more memory or share than the job's shards give, or shards are
// given without shards_per_gpu; FAILED_PRECONDITION when the memory to check against is unknown.
StatusOr<TenantLimits> DeriveLimits(const JobOptions& options, int gpu, int shards_on_node, int shards_per_gpu,
                                    uint64_t gpu_memory_bytes);

// "<account>.<job id>"; "default" stands for an empty account.
std::string TenantName(const std::string& account, const std::string& job_id);

}  // namespace tessera::integrations::slurm

// --- the node side of a task (task_init_privileged) and of a job's end (exit, epilog) ---------

namespace tessera::integrations::slurm {

struct TaskRequest {
  PluginArgs args;
  JobOptions options;
  std::string account;      // SLURM_JOB_ACCOUNT ("" = default)
  std::string job_id;       // S_JOB_ID
  EnvLookup env;            // the job's environment (spank_getenv)
  long task_pid = 0;        // the task (it becomes the user's program at exec): the slot's member
  std::string default_shim; // libtessera-shim.so next to the plugin (args.shim overrides)
  // The job's user (S_JOB_UID): the task runs under it, so its tenant's counters file is
  // chown'ed to it (NodeDir::Join, TenantRequest::uid); -1: the plugin's own uid.
  long uid = -1;
  // How long the GPU's lease arbiter may take to put the tenant on its board.
  std::chrono::milliseconds admit_timeout = std::chrono::seconds(2);
};

struct TaskLaunch {
  bool managed = false;  // false: the step has no GPU, or --gpu-isolation=none (nothing joined)
  std::string tenant;
  std::vector<int> gpus;  // the step's GPUs on this node (NVML's indexes); the limits hold on each
  std::string mig_instance;  // the MIG device UUID the step runs on; empty: whole GPU(s)
  TenantLimits limits;
  int tenant_index = -1;
  std::vector<std::pair<std::string, std::string>> env;  // to set in the task (LD_PRELOAD, ...)
};

// Joins the task to the node directory as TenantName(account, job_id) on what Slurm gave the step
// on this node, Slurm's GPU indexes mapped to the node's by MapSlurmGpus with the node's GPU table
// (gpu_table.h; NVML, loaded once, only where there is no complete table), and returns the
// launcher's environment (node::LaunchEnvironment): the same rules as `tessera run`.
//  * Whole GPUs (SLURM_STEP_GPUS=0,1: one tenant on GPUs 0 and 1): DeriveLimits' limits, the
//    limit on each GPU, the smallest of the GPUs' derived limits; the task sees them all,
//    CUDA_VISIBLE_DEVICES and TESSERA_SHIM_GPUS in that order. It returns once each GPU's lease
//    arbiter (`tessera node arbiter` or `tessera agent`) has admitted the tenant, so the task's
//    launches are gated from the first. --gpu-isolation=hardware is refused (FAILED_PRECONDITION
//    naming the option and the node's MIG types: ask for a MIG gres), never run weaker.
//  * One MIG instance (`--gres=gpu:3g.20gb:1`), with --gpu-isolation=hardware or process (the
//    instance is stronger than the shim alone, and all Slurm gave): the tenant's mig_instance is
//    the instance's MIG UUID, which is the task's CUDA_VISIBLE_DEVICES; its limit is the
//    instance's memory, or --gpu-mem when smaller (larger: INVALID_ARGUMENT naming --gpu-mem);
//    no lease board, so no admission wait and no TESSERA_SHIM_LEASES; --gpu-share has no effect
//    there (the instance's SMs are its own). Example: Slurm's GPU 2 on the node of MapSlurmGpus'
//    example -> CUDA_VISIBLE_DEVICES=MIG-<GPU 1's first instance>, limit 3g.20gb's memory.
//  * Several GPUs of which one is a MIG instance: FAILED_PRECONDITION naming each (a tenant holds
//    one instance).
// Fail closed: UNAVAILABLE "node side unreachable: ..." when the node directory does not exist,
// the shim cannot be loaded or no arbiter drives a whole GPU within `admit_timeout` (the join is
// then undone); FAILED_PRECONDITION for a MIG instance without a UUID in the table; errors of the
// options name the option. Isolation none never fails: it returns managed = false.
StatusOr<TaskLaunch> JoinTask(const TaskRequest& request);

// What a job's end calls (slurm_spank_exit in slurmstepd, slurm_spank_job_epilog): drops the
// slots of tasks that are gone, SIGKILLed ones included (node::NodeDir::Prune). OK when the
// node directory does not exist.
Status ReleaseEndedTasks(const std::string& node_dir);

}  // namespace tessera::integrations::slurm
