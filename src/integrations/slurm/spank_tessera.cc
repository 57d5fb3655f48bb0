// spank_tessera.so: the SPANK plugin that confines Slurm GPU jobs with tessera (docs/slurm.md).
// It only moves values between Slurm and tessera/integrations/slurm_step.h, where every decision
// lives (tested without Slurm); tests/integrations/slurm_test.sh runs it in a real Slurm.
//
//   slurm_spank_init        registers --gpu-mem, --gpu-share, --gpu-isolation in every context
//                           (spank_option_register works only here; the static table does not
//                           reach sbatch/salloc) and reads the plugstack.conf arguments;
//   option callback         parses the value; in srun/sbatch/salloc (local, allocator) a bad
//                           value rejects the job at submit with the error naming the option;
//   slurm_spank_task_init_privileged   (in the task process after fork, still root, before exec)
//                           joins the node directory as tenant "<account>.<job id>" and sets
//                           LD_PRELOAD and the shim's variables; fail closed when the node side is
//                           unreachable, unless --gpu-isolation=none. Privileged, so the node's
//                           files (the policy page holding the limits is 0644) stay root's: a
//                           user's task can read its limit, never raise it;
//   slurm_spank_exit        (slurmstepd, after the tasks) and slurm_spank_job_epilog release the
//                           slots of tasks that are gone, SIGKILLed ones included.
//
// Two C++ traps of spank.h (research/control-plane.md §4.1): its hook prototypes sit outside its
// own extern "C" block, so the include is wrapped in one; and SPANK_PLUGIN()'s const arrays would
// have internal linkage in C++, so the four symbols are defined by hand with extern.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "tessera/integrations/slurm_step.h"

extern "C" {
#include <slurm/spank.h>
}

namespace ts = tessera::integrations::slurm;

extern "C" {
extern const char plugin_name[] = "tessera";
extern const char plugin_type[] = "spank";
extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
extern const unsigned int spank_plugin_version = 1;
}

namespace {

// The option values of this job (set by the callbacks, in each process that parses them: srun,
// sbatch, slurmstepd) and the plugstack.conf arguments.
ts::JobOptions g_options;
ts::PluginArgs g_args;

constexpr int kMem = 1, kShare = 2, kIsolation = 3;

int Reject(const tessera::Status& st) {
  slurm_error("tessera: %s", std::string(st.message()).c_str());
  return -1;
}

int OnOption(int val, const char* optarg, int /*remote*/) {
  const std::string text = optarg == nullptr ? "" : optarg;
  if (val == kMem) {
    tessera::StatusOr<uint64_t> v = ts::ParseGpuMem(text);
    if (!v.ok()) return Reject(v.status());
    g_options.mem_bytes = *v;
  } else if (val == kShare) {
    tessera::StatusOr<int> v = ts::ParseGpuShare(text);
    if (!v.ok()) return Reject(v.status());
    g_options.share_percent = *v;
  } else if (val == kIsolation) {
    tessera::StatusOr<ts::Isolation> v = ts::ParseIsolation(text);
    if (!v.ok()) return Reject(v.status());
    g_options.isolation = *v;
  }
  return 0;
}

struct spank_option g_spank_options[] = {
    {const_cast<char*>("gpu-mem"), const_cast<char*>("SIZE"),
     const_cast<char*>("tessera: GPU memory limit of each task (e.g. 8GiB); default: the job's shards or the GPU"), 1,
     kMem, OnOption},
    {const_cast<char*>("gpu-share"), const_cast<char*>("PCT"),
     const_cast<char*>("tessera: compute share of the GPU, percent 1..100"), 1, kShare, OnOption},
    {const_cast<char*>("gpu-isolation"), const_cast<char*>("MODE"),
     const_cast<char*>("tessera: hardware|process|none (default process; none runs unconfined)"), 1, kIsolation,
     OnOption},
};

// libtessera-shim.so next to this plugin.
std::string ShimNextToPlugin() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&OnOption), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string dir = info.dli_fname;
  dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
  return (dir.empty() ? std::string(".") : dir) + "/libtessera-shim.so";
}

// This node's name: slurmd sets SLURMD_NODENAME in the environment of slurmstepd and of the spank
// epilog (the job's own environment gets it only later, for the task).
std::optional<std::string> NodeName() {
  const char* name = std::getenv("SLURMD_NODENAME");
  return name == nullptr ? std::nullopt : std::optional<std::string>(name);
}

std::optional<std::string> JobEnv(spank_t sp, const std::string& name) {
  std::vector<char> buf(4096);
  if (spank_getenv(sp, name.c_str(), buf.data(), static_cast<int>(buf.size())) != ESPANK_SUCCESS) {
    return std::nullopt;
  }
  return std::string(buf.data());
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  for (spank_option& opt : g_spank_options) {
    if (spank_option_register(sp, &opt) != ESPANK_SUCCESS) {
      slurm_error("tessera: cannot register --%s", opt.name);
      return -1;
    }
  }
  tessera::StatusOr<ts::PluginArgs> args = ts::ParsePluginArgs(std::vector<std::string>(av, av + ac));
  if (!args.ok()) return Reject(args.status());
  g_args = *args;
  return 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int /*ac*/, char** /*av*/) {
  uint32_t job_id = 0;
  if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS) {
    slurm_error("tessera: cannot read the job id");
    return -1;
  }
  // The task runs under the job's user: its tenant's counters file must be that user's.
  uid_t job_uid = 0;
  if (spank_get_item(sp, S_JOB_UID, &job_uid) != ESPANK_SUCCESS) {
    slurm_error("tessera: cannot read the job's uid");
    return -1;
  }
  // node_dir=...%n: this node's directory (several slurmd on one host).
  tessera::StatusOr<std::string> node_dir = ts::NodeDirOf(g_args.node_dir, NodeName());
  if (!node_dir.ok()) {
    if (g_options.isolation == ts::Isolation::kNone) return 0;
    return Reject(node_dir.status());
  }
  ts::PluginArgs args = g_args;
  args.node_dir = *node_dir;
  ts::TaskRequest request{.args = args,
                          .options = g_options,
                          .account = JobEnv(sp, "SLURM_JOB_ACCOUNT").value_or(""),
                          .job_id = std::to_string(job_id),
                          .env = [sp](const std::string& name) { return JobEnv(sp, name); },
                          .task_pid = static_cast<long>(::getpid()),
                          .default_shim = ShimNextToPlugin(),
                          .uid = static_cast<long>(job_uid)};
  tessera::StatusOr<ts::TaskLaunch> launch = ts::JoinTask(request);
  if (!launch.ok()) {
    slurm_error("tessera: task refused (--gpu-isolation=%s): %s", ts::IsolationName(g_options.isolation),
                std::string(launch.status().message()).c_str());
    return -1;
  }
  for (const auto& [name, value] : launch->env) {
    if (spank_setenv(sp, name.c_str(), value.c_str(), 1) != ESPANK_SUCCESS) {
      slurm_error("tessera: cannot set %s in the task", name.c_str());
      return -1;
    }
  }
  if (launch->managed) {
    if (spank_setenv(sp, "TESSERA_TENANT", launch->tenant.c_str(), 1) != ESPANK_SUCCESS) return -1;
  }
  return 0;
}

int slurm_spank_exit(spank_t /*sp*/, int /*ac*/, char** /*av*/) {
  if (spank_context() != S_CTX_REMOTE) return 0;
  tessera::StatusOr<std::string> node_dir = ts::NodeDirOf(g_args.node_dir, NodeName());
  if (!node_dir.ok()) {
    slurm_error("tessera: releasing the job's slots: %s", std::string(node_dir.status().message()).c_str());
    return 0;
  }
  tessera::Status st = ts::ReleaseEndedTasks(*node_dir);
  if (!st.ok()) slurm_error("tessera: releasing the job's slots: %s", std::string(st.message()).c_str());
  return 0;  // the job's result stands; the epilog and the next join prune again
}

int slurm_spank_job_epilog(spank_t /*sp*/, int ac, char** av) {
  tessera::StatusOr<ts::PluginArgs> args = ts::ParsePluginArgs(std::vector<std::string>(av, av + ac));
  if (!args.ok()) return Reject(args.status());
  tessera::StatusOr<std::string> node_dir = ts::NodeDirOf(args->node_dir, NodeName());
  if (!node_dir.ok()) return Reject(node_dir.status());
  tessera::Status st = ts::ReleaseEndedTasks(*node_dir);
  if (!st.ok()) return Reject(st);
  return 0;
}

}  // extern "C"
