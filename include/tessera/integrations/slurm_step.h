// Slurm step logic of the SPANK plugin (spank_tessera.so, src/integrations/slurm/): everything the
// plugin decides, as pure functions over strings, so that it is tested without Slurm
// (tests/integrations/slurm_step_test.cc) and the plugin itself only moves values between Slurm
// and these functions (docs/slurm.md).
//
//   ParseGpuMem / ParseGpuShare / ParseIsolation   the job options --gpu-mem=SIZE,
//       --gpu-share=PCT, --gpu-isolation=hardware|process|none; each error names its option, as
//       srun and sbatch print it when they reject the job at submit.
//   ParsePluginArgs   the plugstack.conf arguments (node_dir=, shim=, nvml=, shards_per_gpu=).
//   StepGpus          the node GPUs of the step, from the environment Slurm sets (SPANK has no
//       GRES item): SLURM_STEP_GPUS, else SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES.
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
  std::vector<int> gpus;  // the step's GPUs on this node; the limits hold on each
  TenantLimits limits;
  int tenant_index = -1;
  std::vector<std::pair<std::string, std::string>> env;  // to set in the task (LD_PRELOAD, ...)
};

// Joins the task to the node directory as TenantName(account, job_id) with DeriveLimits' limits
// (the GPU's memory from NVML), on every GPU of the step on this node (SLURM_STEP_GPUS=0,1: one
// tenant on GPUs 0 and 1, the limit on each, the smallest of the GPUs' derived limits; the task
// sees both, CUDA_VISIBLE_DEVICES and TESSERA_SHIM_GPUS in that order) and returns the launcher's environment (node::LaunchEnvironment):
// the same rules as `tessera run`. It returns once the GPU's lease arbiter (`tessera node
// arbiter` or `tessera agent` on the node) has admitted the tenant, so the task's launches are
// gated from the first. Fail closed: UNAVAILABLE "node side unreachable: ..." when the node
// directory does not exist, the shim cannot be loaded or no arbiter drives the GPU within
// `admit_timeout` (the join is then undone); FAILED_PRECONDITION for
// --gpu-isolation=hardware (no MIG instance per job yet: refused rather than silently weaker);
// errors of the options name the option. Isolation none never fails: it returns managed = false.
StatusOr<TaskLaunch> JoinTask(const TaskRequest& request);

// What a job's end calls (slurm_spank_exit in slurmstepd, slurm_spank_job_epilog): drops the
// slots of tasks that are gone, SIGKILLed ones included (node::NodeDir::Prune). OK when the
// node directory does not exist.
Status ReleaseEndedTasks(const std::string& node_dir);

}  // namespace tessera::integrations::slurm
