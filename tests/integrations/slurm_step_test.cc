// The Slurm plugin's decisions without Slurm: options, plugstack arguments, the step's GPUs from
// the environment, limits from options or shards, and the task's join of a node directory.
#include "tessera/integrations/slurm_step.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/node/arbiter_duty.h"
#include "tessera/node/gpu_table.h"
#include "tessera/node/node_dir.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::integrations::slurm {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;
using tessera::testing::TempDir;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(SlurmOptions, ParsesEachOptionAndNamesItInErrors) {
  EXPECT_EQ(*ParseGpuMem("1GiB"), 1ULL << 30);
  EXPECT_EQ(*ParseGpuMem("512MiB"), 512ULL << 20);
  EXPECT_EQ(ParseGpuMem("abc").status().message(), "--gpu-mem: 'abc': not a positive size like 8GiB or 512MiB");
  EXPECT_THAT(std::string(ParseGpuMem("4096").status().message()), HasSubstr("--gpu-mem: '4096': no unit"));
  EXPECT_EQ(*ParseGpuShare("25"), 25);
  EXPECT_EQ(ParseGpuShare("0").status().message(), "--gpu-share: '0' is not a percentage 1..100");
  EXPECT_EQ(ParseGpuShare("150").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseGpuShare("3x").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseIsolation("none"), Isolation::kNone);
  EXPECT_EQ(*ParseIsolation("hardware"), Isolation::kHardware);
  EXPECT_EQ(ParseIsolation("strong").status().message(),
            "--gpu-isolation: 'strong' is not one of hardware, process, none");
}

TEST(SlurmOptions, PluginArguments) {
  StatusOr<PluginArgs> args = ParsePluginArgs({"node_dir=/n", "shim=/s.so", "nvml=/l.so", "shards_per_gpu=4"});
  ASSERT_TRUE(args.ok()) << args.status().ToString();
  EXPECT_EQ(args->node_dir, "/n");
  EXPECT_EQ(args->shim, "/s.so");
  EXPECT_EQ(args->nvml, "/l.so");
  EXPECT_EQ(args->shards_per_gpu, 4);
  EXPECT_EQ(ParsePluginArgs({}).value().node_dir, "/run/tessera");
  EXPECT_THAT(std::string(ParsePluginArgs({"colour=red"}).status().message()),
              HasSubstr("plugstack.conf argument 'colour=red': unknown"));
  EXPECT_THAT(std::string(ParsePluginArgs({"shards_per_gpu=0"}).status().message()),
              HasSubstr("'shards_per_gpu=0': not a count"));
  EXPECT_EQ(ParsePluginArgs({"node_dir"}).status().code(), StatusCode::kInvalidArgument);
}

// node_dir=...%n: each slurmd of a host its own node directory (SLURMD_NODENAME).
TEST(SlurmNodeDir, PercentNIsTheNodesNameAndMustBeAPlainOne) {
  EXPECT_EQ(*NodeDirOf("/run/tessera", std::nullopt), "/run/tessera");
  EXPECT_EQ(*NodeDirOf("/run/tessera-%n/%n", std::string("n1")), "/run/tessera-n1/n1");
  EXPECT_THAT(std::string(NodeDirOf("/run/t-%n", std::nullopt).status().message()),
              HasSubstr("node_dir=/run/t-%n: %n needs the node's name, and SLURMD_NODENAME is not set"));
  for (const char* bad : {"", "..", "a/b"}) {
    EXPECT_EQ(NodeDirOf("/run/t-%n", std::string(bad)).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SlurmStepGpus, PrefersSlurmsOwnVariables) {
  EXPECT_EQ(*StepGpus(Env({{"SLURM_STEP_GPUS", "1"}, {"SLURM_JOB_GPUS", "0,1"}, {"CUDA_VISIBLE_DEVICES", "0"}})),
            std::vector<int>{1});
  EXPECT_EQ(*StepGpus(Env({{"SLURM_JOB_GPUS", "2,3"}})), (std::vector<int>{2, 3}));
  EXPECT_EQ(*StepGpus(Env({{"CUDA_VISIBLE_DEVICES", "0"}})), std::vector<int>{0});
  EXPECT_TRUE(StepGpus(Env({}))->empty());
  EXPECT_TRUE(StepGpus(Env({{"CUDA_VISIBLE_DEVICES", "NoDevFiles"}}))->empty());
  EXPECT_EQ(StepGpus(Env({{"CUDA_VISIBLE_DEVICES", "GPU-fa4e"}})).status().message(),
            "CUDA_VISIBLE_DEVICES='GPU-fa4e': 'GPU-fa4e' is not a GPU index");
  EXPECT_EQ(*ShardsOnNode(Env({{"SLURM_SHARDS_ON_NODE", "3"}})), 3);
  EXPECT_EQ(*ShardsOnNode(Env({})), 0);
  EXPECT_EQ(ShardsOnNode(Env({{"SLURM_SHARDS_ON_NODE", "x"}})).status().code(), StatusCode::kInvalidArgument);
}

TEST(SlurmLimits, TheWorkedExample) {
  constexpr uint64_t k80G = 80ULL << 30;
  StatusOr<TenantLimits> shards = DeriveLimits({}, 1, 2, 4, k80G);
  ASSERT_TRUE(shards.ok()) << shards.status().ToString();
  EXPECT_EQ(shards->gpu, 1);
  EXPECT_EQ(shards->mem_bytes, 40ULL << 30);
  EXPECT_EQ(shards->share, 50);
  StatusOr<TenantLimits> opts = DeriveLimits({.mem_bytes = 10ULL << 30, .share_percent = 25}, 1, 2, 4, k80G);
  EXPECT_EQ(opts->mem_bytes, 10ULL << 30);
  EXPECT_EQ(opts->share, 25);
  StatusOr<TenantLimits> whole = DeriveLimits({}, 0, 0, 4, k80G);
  EXPECT_EQ(whole->mem_bytes, k80G);
  EXPECT_EQ(whole->share, 100);
  EXPECT_EQ(DeriveLimits({}, 0, 1, 8, k80G)->share, 12);  // 1 of 8 shards: 12 %, never 0
  EXPECT_EQ(TenantName("physics", "42"), "physics.42");
  EXPECT_EQ(TenantName("", "42"), "default.42");
}

TEST(SlurmLimits, RefusesWhatCannotBeSized) {
  EXPECT_THAT(std::string(DeriveLimits({.mem_bytes = 90ULL << 30}, 0, 0, 0, 80ULL << 30).status().message()),
              HasSubstr("--gpu-mem: 96636764160 bytes is more than GPU 0's"));
  EXPECT_THAT(std::string(DeriveLimits({}, 0, 0, 0, 0).status().message()), HasSubstr("give --gpu-mem=SIZE"));
  EXPECT_THAT(std::string(DeriveLimits({}, 0, 2, 0, 80ULL << 30).status().message()),
              HasSubstr("no shards_per_gpu="));
  EXPECT_EQ(DeriveLimits({.mem_bytes = 1ULL << 30}, 0, 0, 0, 0)->mem_bytes, 1ULL << 30);  // no NVML needed
}

// Slurm counts shards when it picks a shard job's GPU; a limit above the shards' part would let
// the tenants Slurm puts on one GPU ask for more than it has.
TEST(SlurmLimits, OnShardsTheOptionsMayAskForLessThanTheShardsGiveNeverMore) {
  constexpr uint64_t k80G = 80ULL << 30;
  StatusOr<TenantLimits> inside = DeriveLimits({.mem_bytes = 40ULL << 30, .share_percent = 50}, 1, 2, 4, k80G);
  ASSERT_TRUE(inside.ok()) << inside.status().ToString();
  EXPECT_EQ(inside->mem_bytes, 40ULL << 30);
  StatusOr<TenantLimits> mem = DeriveLimits({.mem_bytes = 50ULL << 30}, 1, 2, 4, k80G);
  EXPECT_EQ(mem.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mem.status().message()),
              HasSubstr("--gpu-mem: 53687091200 bytes is more than the 2 of GPU 1's 4 shards give (42949672960 "
                        "bytes); ask for --gres=shard:3 or less memory"));
  StatusOr<TenantLimits> share = DeriveLimits({.share_percent = 13}, 0, 1, 8, k80G);
  EXPECT_THAT(std::string(share.status().message()),
              HasSubstr("--gpu-share: 13 % is more than the 1 of GPU 0's 8 shards give (12 %); ask for "
                        "--gres=shard:2"));
  EXPECT_EQ(DeriveLimits({.share_percent = 12}, 0, 1, 8, k80G)->share, 12);
  EXPECT_EQ(DeriveLimits({.mem_bytes = 1ULL << 30}, 0, 1, 4, 0).status().code(), StatusCode::kFailedPrecondition);
  // A whole GPU (no shards) may be limited to anything the GPU has.
  EXPECT_EQ(DeriveLimits({.mem_bytes = 70ULL << 30, .share_percent = 90}, 0, 0, 4, k80G)->share, 90);
}

// The node side: GPU 0's lease arbiter on a thread, as `tessera node arbiter` runs it.
class SlurmTaskTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::mkdir(dir_.File("node").c_str(), 0755);
    shim_ = dir_.File("libtessera-shim.so");
    tessera::testing::WriteTextFile(shim_, std::string("\x7f" "ELF", 4) + "not really");
    arbiter_ = std::thread([this] {
      node::ArbiterDuty duty(node::NodeDir(dir_.File("node")), 0);
      while (!stop_.load()) duty.Round();
    });
  }
  void TearDown() override { StopArbiter(); }
  void StopArbiter() {
    stop_ = true;
    if (arbiter_.joinable()) arbiter_.join();
  }
  TaskRequest Request(std::map<std::string, std::string> env) {
    return {.args = {.node_dir = dir_.File("node"), .nvml = "/nonexistent/libnvidia-ml.so.1"},
            .options = {.mem_bytes = 1ULL << 30},
            .account = "physics",
            .job_id = "42",
            .env = Env(std::move(env)),
            .task_pid = static_cast<long>(::getpid()),
            .default_shim = shim_};
  }
  TempDir dir_;
  std::string shim_;
  std::atomic<bool> stop_{false};
  std::thread arbiter_;
};

// The task runs under the job's user, so its tenant's counters file is that user's (mode 0600): the
// task can write its own counters and no other job's.
TEST_F(SlurmTaskTest, TheTenantsCountersFileIsTheJobUsers) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown to another uid (slurmstepd and CI run as root)";
  TaskRequest r = Request({{"SLURM_STEP_GPUS", "0"}, {"CUDA_VISIBLE_DEVICES", "0"}});
  r.uid = 65534;
  StatusOr<TaskLaunch> launch = JoinTask(r);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  struct stat st {};
  const node::NodeDir dir(dir_.File("node"));
  ASSERT_EQ(::stat((dir.paths().counters + "/" + std::to_string(launch->tenant_index)).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

TEST_F(SlurmTaskTest, JoinsTheNodeAsTheAccountsJobWithTheShimPreloaded) {
  StatusOr<TaskLaunch> launch = JoinTask(Request({{"SLURM_STEP_GPUS", "0"}, {"CUDA_VISIBLE_DEVICES", "0"}}));
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_TRUE(launch->managed);
  EXPECT_EQ(launch->tenant, "physics.42");
  EXPECT_THAT(launch->env, ::testing::Contains(Pair("LD_PRELOAD", shim_)));
  EXPECT_THAT(launch->env, ::testing::Contains(Pair("TESSERA_SHIM_TENANT", std::to_string(launch->tenant_index))));
  EXPECT_THAT(launch->env, ::testing::Contains(Pair("CUDA_VISIBLE_DEVICES", "0")));
  StatusOr<std::vector<node::TenantEntry>> live = node::NodeDir(dir_.File("node")).LiveTenants();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].name, "physics.42");
  EXPECT_EQ((*live)[0].mem_bytes, 1ULL << 30);
  EXPECT_EQ((*live)[0].share, 100);
}

// The node side's GPU table (gpu_table.h) gives the task the GPU's UUID and memory: the task
// pins CUDA_VISIBLE_DEVICES to the UUID and sizes a job without --gpu-mem by the table, with no
// NVML to load (the request's library does not exist).
TEST_F(SlurmTaskTest, TheNodeSidesGpuTableGivesTheUuidAndMemoryWithoutNvml) {
  ASSERT_TRUE(node::WriteGpuTable(dir_.File("node"), {{.index = 0, .uuid = "GPU-aaaa", .minor = 3, .memory_mib = 2048}}).ok());
  TaskRequest r = Request({{"SLURM_STEP_GPUS", "0"}, {"CUDA_VISIBLE_DEVICES", "0"}});
  r.options.mem_bytes = std::nullopt;  // the whole GPU
  StatusOr<TaskLaunch> launch = JoinTask(r);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_THAT(launch->env, ::testing::Contains(Pair("CUDA_VISIBLE_DEVICES", "GPU-aaaa")));
  EXPECT_EQ(launch->limits.mem_bytes, 2048ULL << 20);
  // A table that cannot be read is an error naming it, not a guess.
  tessera::testing::WriteTextFile(node::GpuTablePath(dir_.File("node")), "0\tGPU-aaaa\t3\n");
  StatusOr<TaskLaunch> bad = JoinTask(Request({{"SLURM_STEP_GPUS", "0"}}));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("gpus.tsv:1: expected 5 tab-separated fields"));
}

// Slurm numbers a MIG GPU's instances as GPUs of their own: from the first MIG GPU on, its GPU
// indexes are not the node's, and the task is refused rather than pinned to another GPU; a GPU
// below the first MIG GPU is the node's own.
TEST_F(SlurmTaskTest, OnANodeWithAMigGpuOnlyTheGpusBelowItAreMapped) {
  ASSERT_TRUE(node::WriteGpuTable(dir_.File("node"), {{.index = 0, .uuid = "GPU-aaaa", .minor = 3, .memory_mib = 2048},
                                                      {.index = 1, .uuid = "GPU-bbbb", .minor = 4, .memory_mib = 2048,
                                                       .mig_enabled = true}})
                  .ok());
  StatusOr<TaskLaunch> below = JoinTask(Request({{"SLURM_STEP_GPUS", "0"}}));
  ASSERT_TRUE(below.ok()) << below.status().ToString();
  EXPECT_THAT(below->env, ::testing::Contains(Pair("CUDA_VISIBLE_DEVICES", "GPU-aaaa")));
  for (const char* step : {"1", "2"}) {
    StatusOr<TaskLaunch> on_mig = JoinTask(Request({{"SLURM_STEP_GPUS", step}}));
    EXPECT_EQ(on_mig.status().code(), StatusCode::kFailedPrecondition) << step;
    EXPECT_THAT(std::string(on_mig.status().message()), HasSubstr("GPU 1 of this node is in MIG mode")) << step;
  }
  // Without the table the task asks NVML (once) about its GPU and those below it.
  ASSERT_TRUE(node::RemoveGpuTable(dir_.File("node")).ok());
  ::setenv("TESSERA_FAKE_NVML_CONFIG", "A100-40GB:mig=1,A100-40GB", 1);
  TaskRequest r = Request({{"SLURM_STEP_GPUS", "1"}});
  r.args.nvml = TESSERA_FAKE_NVML_PATH;
  StatusOr<TaskLaunch> below_mig = JoinTask(r);
  ::unsetenv("TESSERA_FAKE_NVML_CONFIG");
  EXPECT_THAT(std::string(below_mig.status().message()), HasSubstr("GPU 0 of this node is in MIG mode"));
}

TEST_F(SlurmTaskTest, FailsClosedWhenTheNodeSideIsMissing) {
  TaskRequest r = Request({{"SLURM_STEP_GPUS", "0"}});
  r.args.node_dir = dir_.File("absent");
  EXPECT_THAT(std::string(JoinTask(r).status().message()), HasSubstr("node side unreachable: the node directory"));
  r = Request({{"SLURM_STEP_GPUS", "0"}});
  r.default_shim = dir_.File("no-shim.so");
  StatusOr<TaskLaunch> no_shim = JoinTask(r);
  EXPECT_EQ(no_shim.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(no_shim.status().message()), HasSubstr("node side unreachable"));
  // --gpu-isolation=none runs unconfined and touches nothing.
  r.args.node_dir = dir_.File("absent");
  r.options.isolation = Isolation::kNone;
  StatusOr<TaskLaunch> none = JoinTask(r);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->managed);
  EXPECT_TRUE(none->env.empty());
}

TEST_F(SlurmTaskTest, FailsClosedWhenNoArbiterDrivesTheGpuAndUndoesTheJoin) {
  StopArbiter();
  TaskRequest r = Request({{"SLURM_STEP_GPUS", "0"}});
  r.admit_timeout = std::chrono::milliseconds(300);
  StatusOr<TaskLaunch> launch = JoinTask(r);
  EXPECT_EQ(launch.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(launch.status().message()), HasSubstr("node side unreachable: no tessera arbiter drives GPU 0"));
  EXPECT_THAT(tessera::testing::ReadTextFile(node::NodePaths(dir_.File("node")).registry),
              ::testing::Not(HasSubstr("physics.42")));
}

// A step of two GPUs on the node: one tenant on both, the limit on each GPU, both visible in
// that order, admitted by both GPUs' arbiters (GPU 1's runs on a thread of the test too).
TEST_F(SlurmTaskTest, AStepOfTwoGpusIsOneTenantOnBothWithTheLimitOnEach) {
  std::atomic<bool> stop{false};
  std::thread second([&] {
    node::ArbiterDuty duty(node::NodeDir(dir_.File("node")), 1);
    while (!stop.load()) duty.Round();
  });
  StatusOr<TaskLaunch> launch = JoinTask(Request({{"SLURM_STEP_GPUS", "0,1"}, {"CUDA_VISIBLE_DEVICES", "0,1"}}));
  stop = true;
  second.join();
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_TRUE(launch->managed);
  EXPECT_EQ(launch->gpus, (std::vector<int>{0, 1}));
  EXPECT_THAT(launch->env, ::testing::Contains(Pair("CUDA_VISIBLE_DEVICES", "0,1")));
  EXPECT_THAT(launch->env, ::testing::Contains(Pair("TESSERA_SHIM_GPUS", "0,1")));
  StatusOr<node::NodeStatus> status = node::NodeDir(dir_.File("node")).ReadStatus();
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->gpus.size(), 2u);
  for (const node::GpuStatus& g : status->gpus) {
    ASSERT_EQ(g.tenants.size(), 1u);
    EXPECT_EQ(g.tenants[0].name, "physics.42");
    EXPECT_EQ(g.tenants[0].limit_bytes, 1ULL << 30);
  }
}

TEST_F(SlurmTaskTest, AStepWithoutGpusIsLeftAloneAndHardwareIsolationIsRefused) {
  StatusOr<TaskLaunch> none = JoinTask(Request({}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->managed);
  TaskRequest hardware = Request({{"SLURM_STEP_GPUS", "0"}});
  hardware.options.isolation = Isolation::kHardware;
  EXPECT_THAT(std::string(JoinTask(hardware).status().message()),
              HasSubstr("--gpu-isolation=hardware: a MIG instance per job is not supported yet"));
}

TEST_F(SlurmTaskTest, ReleaseDropsTheSlotOfAKilledTask) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  TaskRequest r = Request({{"SLURM_STEP_GPUS", "0"}});
  r.task_pid = child;
  ASSERT_TRUE(JoinTask(r).ok());
  const node::NodeDir node(dir_.File("node"));
  EXPECT_EQ(node.LiveTenants()->size(), 1u);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  // The registry still holds the killed task's entry (LiveTenants hides dead members, writes
  // nothing) until the job's end releases it.
  const std::string registry = node.paths().registry;
  EXPECT_THAT(tessera::testing::ReadTextFile(registry), HasSubstr("physics.42"));
  ASSERT_TRUE(ReleaseEndedTasks(dir_.File("node")).ok());
  EXPECT_THAT(tessera::testing::ReadTextFile(registry), ::testing::Not(HasSubstr("physics.42")));
  EXPECT_TRUE(ReleaseEndedTasks(dir_.File("absent")).ok());
}

}  // namespace
}  // namespace tessera::integrations::slurm
