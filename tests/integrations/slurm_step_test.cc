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

#include "tessera/enforce/nvml.h"
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

// The node of MapSlurmGpus' worked example: GPU 0 and 2 whole A100-40GBs, GPU 1 in MIG mode with
// two 3g.20gb instances; `tessera slurm config` prints Gres=gpu:a100-40gb:2,gpu:3g.20gb:2.
std::vector<node::NodeGpuFacts> MigNode() {
  return {{.index = 0, .uuid = "GPU-aaaa", .minor = 0, .memory_mib = 40960, .model = "A100-40GB"},
          {.index = 1, .uuid = "GPU-bbbb", .minor = 1, .memory_mib = 40960, .mig_enabled = true, .model = "A100-40GB",
           .mig_instances = {{.gpu_instance_id = 1, .compute_instance_id = 0, .uuid = "MIG-1111", .profile = "3g.20gb",
                              .memory_mib = 2048},
                             {.gpu_instance_id = 2, .compute_instance_id = 0, .uuid = "MIG-2222", .profile = "3g.20gb",
                              .memory_mib = 2048}}},
          {.index = 2, .uuid = "GPU-cccc", .minor = 2, .memory_mib = 40960, .model = "A100-40GB"}};
}

TEST(SlurmGpus, SlurmsIndexesAreTheGresRecordsTypeByTypeAsTesseraSlurmConfigPrintsThem) {
  StatusOr<std::vector<SlurmGpu>> all = MapSlurmGpus(MigNode(), {0, 1, 2, 3});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, (std::vector<SlurmGpu>{{.gpu = 0, .type = "a100-40gb"}, {.gpu = 2, .type = "a100-40gb"},
                                         {.gpu = 1, .mig = 0, .type = "3g.20gb"}, {.gpu = 1, .mig = 1, .type = "3g.20gb"}}));
  // A shard step is numbered among the whole GPUs (the shard records).
  StatusOr<std::vector<SlurmGpu>> shard = MapSlurmGpus(MigNode(), {1}, /*shards=*/true);
  ASSERT_TRUE(shard.ok());
  EXPECT_EQ(shard->front().gpu, 2);
  EXPECT_THAT(std::string(MapSlurmGpus(MigNode(), {4}).status().message()),
              HasSubstr("Slurm's GPU 4: this node has 4 GPU(s) and MIG instance(s) as Slurm counts them"));
  // One model without MIG: Slurm's index is the node's, whatever order the table lists them in.
  StatusOr<std::vector<SlurmGpu>> plain = MapSlurmGpus({{.index = 1}, {.index = 0}}, {1});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->front(), (SlurmGpu{.gpu = 1, .type = ""}));
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
  EXPECT_EQ((*live)[0].share, 1000);  // the whole GPU, in the node directory's milli (node_dir.h)
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
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("gpus.tsv:1: expected 6 tab-separated fields"));
}

// A step on a MIG instance (`--gres=gpu:3g.20gb:1`, Slurm's GPU 2 on MigNode()) with
// --gpu-isolation=hardware runs on it: pinned to its MIG UUID, the instance's memory as the limit,
// the tenant on the instance, no lease admission (no arbiter drives GPU 1: none is needed) and no
// TESSERA_SHIM_LEASES.
TEST_F(SlurmTaskTest, HardwareIsolationOnAMigGresRunsTheTaskOnThatInstance) {
  ASSERT_TRUE(node::WriteGpuTable(dir_.File("node"), MigNode()).ok());
  TaskRequest r = Request({{"SLURM_STEP_GPUS", "2"}, {"CUDA_VISIBLE_DEVICES", "2"}});
  r.options = {.isolation = Isolation::kHardware};
  r.admit_timeout = std::chrono::milliseconds(100);
  StatusOr<TaskLaunch> launch = JoinTask(r);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_TRUE(launch->managed);
  EXPECT_EQ(launch->gpus, (std::vector<int>{1}));
  EXPECT_EQ(launch->mig_instance, "MIG-1111");
  EXPECT_EQ(launch->limits.mem_bytes, 2048ULL << 20);
  EXPECT_THAT(launch->env, ::testing::Contains(Pair("CUDA_VISIBLE_DEVICES", "MIG-1111")));
  EXPECT_THAT(launch->env, ::testing::Contains(Pair("TESSERA_SHIM_GPUS", "1")));
  for (const auto& [name, value] : launch->env) EXPECT_NE(name, "TESSERA_SHIM_LEASES");
  StatusOr<std::vector<node::TenantEntry>> live = node::NodeDir(dir_.File("node")).LiveTenants();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].mig_instance, "MIG-1111");
  EXPECT_EQ((*live)[0].gpus, (std::vector<int>{1}));
  EXPECT_EQ((*live)[0].mem_bytes, 2048ULL << 20);
}

// --gpu-mem below the instance's memory is the limit; above it is refused, naming the option;
// --gpu-isolation=process on a MIG gres gets the instance too (stronger than the shim alone).
TEST_F(SlurmTaskTest, OnAMigInstanceGpuMemMayOnlyNarrowAndProcessIsolationGetsTheInstance) {
  ASSERT_TRUE(node::WriteGpuTable(dir_.File("node"), MigNode()).ok());
  TaskRequest big = Request({{"SLURM_STEP_GPUS", "3"}});
  big.options = {.mem_bytes = 4ULL << 30, .isolation = Isolation::kHardware};
  StatusOr<TaskLaunch> refused = JoinTask(big);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "--gpu-mem: 4294967296 bytes is more than the 2147483648 of Slurm's GPU 3 (GPU 1's MIG instance gi2/ci0, "
            "3g.20gb); ask for a larger MIG type or less memory");
  TaskRequest small = Request({{"SLURM_STEP_GPUS", "3"}});  // process isolation, --gpu-mem=1GiB
  StatusOr<TaskLaunch> launch = JoinTask(small);
  ASSERT_TRUE(launch.ok()) << launch.status().ToString();
  EXPECT_EQ(launch->mig_instance, "MIG-2222");
  EXPECT_EQ(launch->limits.mem_bytes, 1ULL << 30);
  EXPECT_THAT(launch->env, ::testing::Contains(Pair("CUDA_VISIBLE_DEVICES", "MIG-2222")));
}

// One tenant per MIG instance: a job's second task joins its tenant on the same instance; another
// job on that instance (a gres.conf that does not match the node) is refused, naming the instance
// and its holder, while the node's other instance takes it.
TEST_F(SlurmTaskTest, AJobsTasksShareItsMigInstanceAndAnotherJobCannotJoinIt) {
  ASSERT_TRUE(node::WriteGpuTable(dir_.File("node"), MigNode()).ok());
  TaskRequest first = Request({{"SLURM_STEP_GPUS", "2"}});
  first.options.isolation = Isolation::kHardware;
  StatusOr<TaskLaunch> a = JoinTask(first);
  StatusOr<TaskLaunch> b = JoinTask(first);  // the job's second task
  ASSERT_TRUE(a.ok() && b.ok()) << a.status().ToString() << " " << b.status().ToString();
  EXPECT_EQ(a->tenant_index, b->tenant_index);
  TaskRequest other = first;
  other.job_id = "43";
  StatusOr<TaskLaunch> taken = JoinTask(other);
  EXPECT_EQ(taken.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(taken.status().message(),
            "MIG instance MIG-1111 is held by tenant 'physics.42' (one tenant per MIG instance)");
  other.env = Env({{"SLURM_STEP_GPUS", "3"}});
  StatusOr<TaskLaunch> free = JoinTask(other);
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  EXPECT_EQ(free->mig_instance, "MIG-2222");
  EXPECT_NE(free->tenant_index, a->tenant_index);
}

// Hardware isolation on a whole GPU is refused, naming the option and a MIG gres to ask for; a
// step on two MIG instances is refused naming both; whole GPUs after a MIG GPU are Slurm's
// numbering mapped back (Slurm's GPU 1 is GPU 2), and a task there is admitted as before.
TEST_F(SlurmTaskTest, OnAMigNodeWholeGpusAreMappedAndHardwareIsolationNeedsAMigGres) {
  ASSERT_TRUE(node::WriteGpuTable(dir_.File("node"), MigNode()).ok());
  TaskRequest hardware = Request({{"SLURM_STEP_GPUS", "0"}});
  hardware.options.isolation = Isolation::kHardware;
  StatusOr<TaskLaunch> whole = JoinTask(hardware);
  EXPECT_EQ(whole.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(whole.status().message(),
            "--gpu-isolation=hardware: Slurm's GPU 0 (GPU 0) is a whole GPU, not a MIG instance, and only a MIG "
            "instance isolates a job by the hardware; ask for a MIG gres (e.g. --gres=gpu:3g.20gb:1; this node has "
            "MIG types 3g.20gb) or use --gpu-isolation=process (the shim)");
  StatusOr<TaskLaunch> two = JoinTask(Request({{"SLURM_STEP_GPUS", "2,3"}}));
  EXPECT_EQ(two.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(two.status().message()),
              HasSubstr("Slurm's GPU 2 (GPU 1's MIG instance gi1/ci0, 3g.20gb), Slurm's GPU 3 (GPU 1's MIG instance "
                        "gi2/ci0, 3g.20gb): a step runs on one MIG instance or on whole GPUs only"));
  std::atomic<bool> stop{false};
  std::thread third([&] {
    node::ArbiterDuty duty(node::NodeDir(dir_.File("node")), 2);
    while (!stop.load()) duty.Round();
  });
  StatusOr<TaskLaunch> after_mig = JoinTask(Request({{"SLURM_STEP_GPUS", "1"}, {"CUDA_VISIBLE_DEVICES", "1"}}));
  stop = true;
  third.join();
  ASSERT_TRUE(after_mig.ok()) << after_mig.status().ToString();
  EXPECT_EQ(after_mig->gpus, (std::vector<int>{2}));
  EXPECT_TRUE(after_mig->mig_instance.empty());
  EXPECT_THAT(after_mig->env, ::testing::Contains(Pair("CUDA_VISIBLE_DEVICES", "GPU-cccc")));
  EXPECT_THAT(after_mig->env, ::testing::Contains(Pair("TESSERA_SHIM_GPUS", "2")));
  // An instance the table has no UUID for cannot be selected: refused.
  std::vector<node::NodeGpuFacts> no_uuid = MigNode();
  no_uuid[1].mig_instances[0].uuid.clear();
  ASSERT_TRUE(node::WriteGpuTable(dir_.File("node"), no_uuid).ok());
  EXPECT_THAT(std::string(JoinTask(Request({{"SLURM_STEP_GPUS", "2"}})).status().message()),
              HasSubstr("Slurm's GPU 2 (GPU 1's MIG instance gi1/ci0, 3g.20gb) has no MIG device UUID"));
}

// Without the node side's table the task asks NVML (once) and maps the same way: the fake NVML's
// GPU 0 in MIG mode with one 3g.20gb instance, GPU 1 whole -> `tessera slurm config` prints
// Gres=gpu:3g.20gb:1,gpu:a100-40gb:1, so Slurm's GPU 0 is the instance and Slurm's GPU 1 is GPU 1.
TEST_F(SlurmTaskTest, WithoutTheTableNvmlGivesTheSameMapping) {
  ::setenv("TESSERA_FAKE_NVML_CONFIG", "A100-40GB:mig=1,A100-40GB", 1);
  enforce::DlopenNvml nvml({.library_path = TESSERA_FAKE_NVML_PATH});
  ASSERT_TRUE(nvml.Init().ok());  // held, so that the instance lives on through the task's own Init
  StatusOr<enforce::GpuInstance> gi = nvml.CreateGpuInstance(0, 9, {.start = 0, .size = 4});
  ASSERT_TRUE(gi.ok()) << gi.status().ToString();
  ASSERT_TRUE(nvml.CreateComputeInstance(0, gi->id, 2).ok());
  StatusOr<std::vector<enforce::MigDevice>> devices = nvml.MigDevices(0);
  TaskRequest r = Request({{"SLURM_STEP_GPUS", "0"}});
  r.args.nvml = TESSERA_FAKE_NVML_PATH;
  StatusOr<TaskLaunch> on_mig = JoinTask(r);
  r.env = Env({{"SLURM_STEP_GPUS", "1"}});
  r.job_id = "43";
  r.admit_timeout = std::chrono::milliseconds(300);
  StatusOr<TaskLaunch> whole = JoinTask(r);  // GPU 1: no arbiter drives it in this test
  (void)nvml.Shutdown();
  ::unsetenv("TESSERA_FAKE_NVML_CONFIG");
  ASSERT_TRUE(devices.ok() && devices->size() == 1u);
  ASSERT_TRUE(on_mig.ok()) << on_mig.status().ToString();
  EXPECT_EQ(on_mig->mig_instance, devices->front().uuid);
  EXPECT_EQ(on_mig->gpus, (std::vector<int>{0}));
  EXPECT_THAT(std::string(whole.status().message()), HasSubstr("no tessera arbiter drives GPU 1"));
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

TEST_F(SlurmTaskTest, AStepWithoutGpusIsLeftAloneAndHardwareIsolationOnAWholeGpuIsRefused) {
  StatusOr<TaskLaunch> none = JoinTask(Request({}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->managed);
  TaskRequest hardware = Request({{"SLURM_STEP_GPUS", "0"}});
  hardware.options.isolation = Isolation::kHardware;
  EXPECT_THAT(std::string(JoinTask(hardware).status().message()),
              HasSubstr("--gpu-isolation=hardware: Slurm's GPU 0 (GPU 0) is a whole GPU, not a MIG instance"));
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
