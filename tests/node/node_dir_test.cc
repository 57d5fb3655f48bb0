// NodeDir: tenant admission into slots, sticky scrub, pruning of dead members, a command group
// that outlives its supervisor keeping the slot, and a corrupt registry being an error naming the
// file that leaves the file as it was.
#include "tessera/node/node_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tessera/enforce/segment.h"
#include "tessera/node/memory_size.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::node {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using tessera::testing::ReadTextFile;
using tessera::testing::TempDir;
using tessera::testing::WriteTextFile;

// A pid that is certainly dead: a child that exited and was reaped.
long DeadPid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TenantRequest Request(const std::string& name, uint64_t mem = 64 << 20) {
  return TenantRequest{.name = name, .gpus = {0}, .mem_bytes = mem, .share = 30};
}

TEST(NodeDir, TenantsGetTheLowestFreeIndexAndJoinByName) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  const long self = ::getpid();
  EXPECT_EQ(node.Join(Request("a"), self).value(), 0);
  EXPECT_EQ(node.Join(Request("b"), self).value(), 1);
  EXPECT_EQ(node.Join(Request("a", 128 << 20), self).value(), 0);  // joins a; the latest limit wins
  StatusOr<std::vector<TenantEntry>> live = node.LiveTenants();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[0].mem_bytes, 128u << 20);
  EXPECT_EQ((*live)[0].pids, (std::vector<long>{self, self}));
  StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::Open(node.paths().policy, node.paths().counters);
  ASSERT_TRUE(seg.ok());
  EXPECT_EQ(seg->policy().tenants[0].limit_bytes[0].load(), 128u << 20);
  StatusOr<int> other_gpu = node.Join(TenantRequest{.name = "a", .gpus = {1}, .mem_bytes = 1, .share = 1}, self);
  EXPECT_EQ(other_gpu.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(other_gpu.status().message(),
            "tenant 'a' already runs on GPU(s) 0, not 1 (every member asks for the same GPUs)");
}

// One tenant per MIG instance; every member of a tenant gives the same instance; the registry
// keeps the instance (the arbiter and the meter read it from there).
TEST(NodeDir, AMigInstanceHoldsOneTenant) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  const long self = ::getpid();
  TenantRequest a = Request("a");
  a.mig_instance = "MIG-aaaa";
  EXPECT_EQ(node.Join(a, self).value(), 0);
  TenantRequest b = Request("b");
  b.mig_instance = "MIG-aaaa";
  StatusOr<int> taken = node.Join(b, self);
  EXPECT_EQ(taken.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(taken.status().message(), "MIG instance MIG-aaaa is held by tenant 'a' (one tenant per MIG instance)");
  b.mig_instance = "MIG-bbbb";
  EXPECT_EQ(node.Join(b, self).value(), 1);  // another instance of the same GPU
  StatusOr<int> whole = node.Join(Request("a"), self);
  EXPECT_EQ(whole.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(whole.status().message(),
            "tenant 'a' already runs on MIG instance MIG-aaaa, not the whole GPU (every member asks for the same "
            "instance)");
  EXPECT_EQ(node.Join(a, self).value(), 0);  // a second member of a
  StatusOr<std::vector<TenantEntry>> live = node.LiveTenants();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[0].mig_instance, "MIG-aaaa");
  EXPECT_EQ((*live)[1].mig_instance, "MIG-bbbb");
  StatusOr<NodeStatus> status = node.ReadStatus();
  ASSERT_TRUE(status.ok()) << status.status().ToString();
  ASSERT_EQ(status->gpus.size(), 1u);
  ASSERT_EQ(status->gpus[0].tenants.size(), 2u);
  EXPECT_TRUE(status->gpus[0].tenants[0].mig);
  ASSERT_TRUE(node.Leave(self).ok());  // every member gone: the instance is free again
  b.name = "c";
  b.mig_instance = "MIG-aaaa";
  EXPECT_TRUE(node.Join(b, self).ok());
}

// A node side that learns a slot's owner after making it names it then; index and limit stay.
TEST(NodeDir, RelabelSetsATenantsMeteringLabelsAndNothingElse) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  const long self = ::getpid();
  EXPECT_EQ(node.Relabel("a", "team-a", "pod").code(), StatusCode::kNotFound);  // no node yet
  TenantRequest r = Request("a");
  r.account = "kubernetes";
  ASSERT_EQ(node.Join(r, self).value(), 0);
  ASSERT_EQ(node.Join(Request("b"), self).value(), 1);
  ASSERT_TRUE(node.Relabel("b", "team-b", "team-b/web-0/server").ok());
  StatusOr<std::vector<TenantEntry>> live = node.LiveTenants();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[0].account, "kubernetes");
  EXPECT_EQ((*live)[1].account, "team-b");
  EXPECT_EQ((*live)[1].workload, "team-b/web-0/server");
  EXPECT_EQ((*live)[1].index, 1);
  EXPECT_EQ((*live)[1].mem_bytes, 64u << 20);
  StatusOr<NodeStatus> status = node.ReadStatus();
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->gpus.size(), 1u);
  ASSERT_EQ(status->gpus[0].tenants.size(), 2u);
  EXPECT_EQ(status->gpus[0].tenants[1].account, "team-b");
  Status missing = node.Relabel("c", "x", "y");
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(std::string(missing.message()).find("tenant 'c'"), std::string::npos);
}

// A pod's tenant on GPUs 3 and 1: its limit on each of them and no other GPU, under both GPUs in
// the status, both in the registry (which earlier versions' single "gpu" still reads); when it
// goes, both limits return to 0. Bad GPU lists are refused before anything is written.
TEST(NodeDir, ATenantOfSeveralGpusHasItsLimitOnEachOfThemOnly) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  const long self = ::getpid();
  ASSERT_EQ(node.Join({.name = "pod", .gpus = {3, 1}, .mem_bytes = 8 << 20, .share = 40}, self).value(), 0);
  StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::Open(node.paths().policy, node.paths().counters);
  ASSERT_TRUE(seg.ok());
  for (int gpu = 0; gpu < 5; ++gpu)
    EXPECT_EQ(seg->policy().tenants[0].limit_bytes[gpu].load(), gpu == 1 || gpu == 3 ? 8u << 20 : 0u) << "GPU " << gpu;
  StatusOr<std::vector<TenantEntry>> live = node.LiveTenants();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].gpus, (std::vector<int>{1, 3}));
  StatusOr<NodeStatus> status = node.ReadStatus();
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->gpus.size(), 2u);
  EXPECT_EQ(status->gpus[0].gpu, 1);
  EXPECT_EQ(status->gpus[1].gpu, 3);
  for (const GpuStatus& g : status->gpus) {
    ASSERT_EQ(g.tenants.size(), 1u);
    EXPECT_EQ(g.tenants[0].name, "pod");
    EXPECT_EQ(g.tenants[0].limit_bytes, 8u << 20);
    EXPECT_EQ(g.tenants[0].share, 40);
  }
  // The same GPUs in another order join it; other GPUs do not.
  EXPECT_EQ(node.Join({.name = "pod", .gpus = {1, 3}, .mem_bytes = 8 << 20, .share = 40}, self).value(), 0);
  EXPECT_EQ(node.Join({.name = "pod", .gpus = {1}, .mem_bytes = 8 << 20, .share = 40}, self).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(node.Join({.name = "x", .gpus = {}, .mem_bytes = 1, .share = 1}, self).status().message(),
            "tenant 'x': no GPU");
  EXPECT_EQ(node.Join({.name = "x", .gpus = {2, 2}, .mem_bytes = 1, .share = 1}, self).status().message(),
            "GPU 2 is given twice");
  EXPECT_EQ(node.Join({.name = "x", .gpus = {0, 99}, .mem_bytes = 1, .share = 1}, self).status().code(),
            StatusCode::kInvalidArgument);
  ASSERT_EQ(node.LiveTenants()->size(), 1u);
  ASSERT_TRUE(node.Leave(self).ok());
  for (int gpu : {1, 3}) EXPECT_EQ(seg->policy().tenants[0].limit_bytes[gpu].load(), 0u) << "GPU " << gpu;
}

// A registry an earlier version wrote (one "gpu", no "gpus") reads as that one GPU; a "gpus" that
// does not start with "gpu", or is not ascending, is refused naming the field.
TEST(NodeDir, ARegistryOfEarlierVersionsReadsAsOneGpu) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  ASSERT_EQ(node.Join(Request("a"), ::getpid()).value(), 0);  // creates the files
  auto write = [&](const std::string& gpus) {
    std::ofstream(node.paths().registry)
        << R"({"version": 1, "tenants": [{"name": "old", "index": 0, "gpu": 2,)" + gpus +
               R"( "mem_bytes": 1, "share": 1, "priority": 0, "pids": [)" + std::to_string(::getpid()) + "]}]}";
  };
  write("");
  StatusOr<std::vector<TenantEntry>> live = node.LiveTenants();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  EXPECT_EQ((*live)[0].gpus, (std::vector<int>{2}));
  write(R"( "gpus": [2, 5],)");
  ASSERT_TRUE(node.LiveTenants().ok());
  EXPECT_EQ(node.LiveTenants()->at(0).gpus, (std::vector<int>{2, 5}));
  write(R"( "gpus": [1, 2],)");
  EXPECT_THAT(std::string(node.LiveTenants().status().message()), ::testing::HasSubstr("tenants[0].gpu"));
  write(R"( "gpus": [2, 2],)");
  EXPECT_THAT(std::string(node.LiveTenants().status().message()), ::testing::HasSubstr("tenants[0].gpus"));
}

// A tenant with a uid (TenantRequest::uid, `tessera run --uid`) gets a counters file of its own
// (counters/<index>, mode 0600) chown'ed to that uid; one without keeps the node side's. Every
// member of a tenant must ask for the same uid, and the registry keeps it.
TEST(NodeDir, ATenantWithAUidGetsACountersFileOwnedByIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown to another uid (CI runs as root)";
  TempDir dir;
  NodeDir node(dir.File("node"));
  const long self = ::getpid();
  TenantRequest a = Request("a");
  a.uid = 65534;
  EXPECT_EQ(node.Join(a, self).value(), 0);
  EXPECT_EQ(node.Join(Request("b"), self).value(), 1);
  struct stat st {};
  ASSERT_EQ(::stat(enforce::CountersFilePath(node.paths().counters, 0).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat(enforce::CountersFilePath(node.paths().counters, 1).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  StatusOr<int> other_uid = node.Join(Request("a"), self);
  EXPECT_EQ(other_uid.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(other_uid.status().message(), HasSubstr("tenant 'a' already runs under uid 65534, not -1"));
  StatusOr<std::vector<TenantEntry>> live = node.LiveTenants();
  ASSERT_TRUE(live.ok()) << live.status().ToString();
  ASSERT_EQ(live->size(), 2u);
  EXPECT_EQ((*live)[0].uid, 65534);
  EXPECT_EQ((*live)[1].uid, -1);
}

// The lock files are the node side's alone (mode 0600, an older 0666 one narrowed): a tenant under
// a uid of its own cannot open them, so it cannot hold node.lock (every join would wait) or a GPU's
// arbiter lock (the GPU would run without an arbiter). Before, both were 0666.
TEST(NodeDir, ATenantUnderItsOwnUidCannotOpenTheLockFiles) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the tenant's side under another uid (CI runs as root)";
  TempDir dir;
  NodeDir node(dir.File("node"));
  ASSERT_EQ(node.Join(Request("a"), ::getpid()).value(), 0);
  const std::string arbiter = node.paths().ArbiterLock(0);
  const int old = ::open(arbiter.c_str(), O_RDWR | O_CREAT, 0666);  // as an earlier version made it
  ASSERT_GE(old, 0);
  ASSERT_EQ(::fchmod(old, 0666), 0);
  ::close(old);
  const int fd = OpenNodeLockFile(arbiter);
  ASSERT_GE(fd, 0);
  ::close(fd);
  for (const std::string& path : {node.paths().lock, arbiter}) {
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 07777, 0600u) << path;
    const pid_t child = ::fork();
    if (child == 0) {
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(2);
      const int tenant = ::open(path.c_str(), O_RDONLY);
      ::_exit(tenant < 0 && errno == EACCES ? 0 : 1);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << path << ": the tenant's uid opened it";
  }
}

// The members folder, what the shim takes its tenant from (node_dir.h, "Identity"): one file per
// live member with "<start time> <index>" per tenant, written by the node side only (no write bit
// for group or others), gone when the member leaves.
TEST(NodeDir, TheMembersFolderNamesEachMembersTenantsForTheShim) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  int gate[2];
  ASSERT_EQ(::pipe(gate), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    char c;
    ::close(gate[1]);
    while (::read(gate[0], &c, 1) > 0) {
    }
    ::_exit(0);
  }
  ::close(gate[0]);
  const long self = ::getpid();
  EXPECT_EQ(node.Join(Request("a"), self).value(), 0);
  EXPECT_EQ(node.Join(Request("b"), child).value(), 1);
  EXPECT_EQ(node.Join(Request("c"), self).value(), 2);
  const std::string self_start = std::to_string(enforce::ProcessStartTime(::getpid()).value());
  const std::string child_start = std::to_string(enforce::ProcessStartTime(child).value());
  const std::string members = node.paths().members;
  EXPECT_EQ(ReadTextFile(members + "/" + std::to_string(self)), self_start + " 0\n" + self_start + " 2\n");
  EXPECT_EQ(ReadTextFile(members + "/" + std::to_string(child)), child_start + " 1\n");
  struct stat st {};
  ASSERT_EQ(::stat(members.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 022, 0u);
  ASSERT_EQ(::stat((members + "/" + std::to_string(child)).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 022, 0u);
  ASSERT_TRUE(node.Leave(child).ok());
  EXPECT_NE(::access((members + "/" + std::to_string(child)).c_str(), F_OK), 0);
  EXPECT_EQ(::access((members + "/" + std::to_string(self)).c_str(), F_OK), 0);
  ::close(gate[1]);
  ::waitpid(child, nullptr, 0);
}

TEST(NodeDir, DeadMembersArePrunedAndTheirLimitGoesToZero) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  ASSERT_EQ(node.Join(Request("gone"), DeadPid()).value(), 0);
  EXPECT_EQ(node.Join(Request("b"), ::getpid()).value(), 0);  // index 0 is free again
  StatusOr<std::vector<TenantEntry>> live = node.LiveTenants();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].name, "b");
  ASSERT_TRUE(node.Leave(::getpid()).ok());
  StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::Open(node.paths().policy, node.paths().counters);
  ASSERT_TRUE(seg.ok());
  EXPECT_EQ(seg->policy().tenants[0].limit_bytes[0].load(), 0u);
  StatusOr<NodeStatus> status = node.ReadStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_TRUE(status->exists);
  EXPECT_TRUE(status->gpus.empty());
}

// A member that has exited but was never reaped (a zombie: its parent, a SIGKILLed slurmstepd,
// is gone and the init of a container does not reap) holds nothing: Prune drops its entry.
TEST(NodeDir, AMemberThatIsAZombieIsDead) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  const pid_t zombie = ::fork();
  if (zombie == 0) ::_exit(0);
  ASSERT_GT(zombie, 0);
  ASSERT_EQ(node.Join(Request("z"), zombie).value(), 0);
  for (int i = 0; i < 200 && ::kill(zombie, 0) == 0; ++i) {  // exited: /proc says Z, not yet reaped
    const std::string stat = tessera::testing::ReadTextFile("/proc/" + std::to_string(zombie) + "/stat");
    if (stat.find(") Z ") != std::string::npos) break;
    ::usleep(5000);
  }
  ASSERT_TRUE(node.Prune().ok());
  StatusOr<std::vector<TenantEntry>> live = node.LiveTenants();
  ASSERT_TRUE(live.ok());
  EXPECT_TRUE(live->empty()) << "the zombie's entry is kept";
  ::waitpid(zombie, nullptr, 0);
}

// `tessera node arbiter`'s guard: a tenant whose process truncated its own counters file is
// killed (its memory is no longer accounted); another tenant with an intact file runs on.
TEST(NodeDir, ATenantWhoseCountersFileBrokeIsKilledAndTheOthersRunOn) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  const auto sleeper = [] {
    const pid_t p = ::fork();
    if (p == 0) {
      ::pause();
      ::_exit(0);
    }
    return p;
  };
  const pid_t bad = sleeper(), good = sleeper();
  const int bad_index = node.Join(Request("bad"), bad).value();
  ASSERT_TRUE(node.Join(Request("good"), good).ok());
  ASSERT_EQ(::truncate(enforce::CountersFilePath(node.paths().counters, bad_index).c_str(), 0), 0);
  StatusOr<std::vector<EndedTenant>> ended = EndTenantsWithBrokenCounters(node);
  ASSERT_TRUE(ended.ok()) << ended.status().ToString();
  ASSERT_EQ(ended->size(), 1u);
  EXPECT_EQ((*ended)[0].name, "bad");
  EXPECT_THAT((*ended)[0].reason, ::testing::HasSubstr("size 0"));
  int status = 0;
  ASSERT_EQ(::waitpid(bad, &status, 0), bad);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(::waitpid(good, &status, WNOHANG), 0) << "the tenant with an intact file was killed";
  ::kill(good, SIGKILL);
  ::waitpid(good, nullptr, 0);
}

// A charge of `bytes` on GPU 0 in tenant `index`'s counters file, held by a process that is dead
// (SIGKILLed: it never released it).
void ChargeByADeadProcess(const NodeDir& node, int index, uint64_t bytes) {
  StatusOr<enforce::TenantView> view = enforce::TenantView::Open(
      node.paths().policy, enforce::CountersFilePath(node.paths().counters, index), index);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  StatusOr<int> slot = view->ClaimSlot(static_cast<pid_t>(DeadPid()), 12345);
  ASSERT_TRUE(slot.ok()) << slot.status().ToString();
  ASSERT_EQ(enforce::SlotOp(view->counters(), *slot, 0, enforce::OpDirection::kReserve, bytes, enforce::kUnlimited),
            enforce::SlotOpResult::kApplied);
}

// A join opens the counters files it decides on, not every tenant's: with tenant a's file made
// invalid, tenants with live members still join (a full open of the segment would refuse them all),
// and only a's own join reports its file.
TEST(NodeDir, AJoinDoesNotOpenTheCountersFilesOfOtherLiveTenants) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  ASSERT_EQ(node.Join(Request("a"), ::getpid()).value(), 0);
  ASSERT_EQ(node.Join(Request("b"), ::getpid()).value(), 1);
  const std::string a_file = enforce::CountersFilePath(node.paths().counters, 0);
  {
    std::fstream f(a_file, std::ios::in | std::ios::out | std::ios::binary);
    f.write("garbage!", 8);  // a's magic
  }
  EXPECT_EQ(node.Join(Request("c"), ::getpid()).value(), 2);
  EXPECT_EQ(node.Join(Request("b"), ::getpid()).value(), 1);
  StatusOr<int> a = node.Join(Request("a"), ::getpid());
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), HasSubstr(a_file));
  EXPECT_TRUE(node.Prune().ok());  // every entry has a live member: no file is looked at
}

// A tenant whose members are all gone and which truncated its counters file on the way (it may: the
// file is its uid's) does not stop the node: the next joins prune it and hand its index on with a
// fresh file of the right size. Before, every join failed on its file, and the entry (kept because
// the file could not be read: fail closed) never went.
TEST(NodeDir, ADeadTenantsTruncatedCountersFileDoesNotStopTheNextJoins) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  ASSERT_EQ(node.Join(Request("a"), ::getpid()).value(), 0);
  ASSERT_EQ(node.Join(Request("gone"), DeadPid()).value(), 1);
  const std::string file = enforce::CountersFilePath(node.paths().counters, 1);
  ASSERT_EQ(::truncate(file.c_str(), 100), 0);
  EXPECT_FALSE(enforce::CheckCountersFile(node.paths().counters, 1).ok());
  StatusOr<int> b = node.Join(Request("b"), ::getpid());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*b, 1);  // gone was pruned; its index is b's, with a new file
  EXPECT_TRUE(enforce::CheckCountersFile(node.paths().counters, 1).ok());
  StatusOr<std::vector<TenantEntry>> live = node.LiveTenants();
  ASSERT_TRUE(live.ok());
  ASSERT_EQ(live->size(), 2u);
  // A free index whose file was truncated is taken as well.
  ASSERT_EQ(::truncate(enforce::CountersFilePath(node.paths().counters, 2).c_str(), 0), 0);
  EXPECT_EQ(node.Join(Request("c"), ::getpid()).value(), 2);
  EXPECT_TRUE(node.Prune().ok());
  EXPECT_TRUE(node.ReadStatus().ok());
}

// What SIGKILLed processes held is released before a join decides: the joining tenant's own charge,
// and that of an entry whose members all died (its index is free again and goes to the next tenant).
TEST(NodeDir, AJoinReconcilesTheChargesOfDeadProcessesItDecidesOn) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  ASSERT_EQ(node.Join(Request("a"), ::getpid()).value(), 0);
  ChargeByADeadProcess(node, 0, 8 << 20);
  ASSERT_EQ(node.Join(Request("a"), ::getpid()).value(), 0);
  StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::Open(node.paths().policy, node.paths().counters);
  ASSERT_TRUE(seg.ok());
  EXPECT_EQ(seg->ReservedBytes(0, 0), 0u);

  const long gone = DeadPid();
  ASSERT_EQ(node.Join(Request("gone"), gone).value(), 1);
  ChargeByADeadProcess(node, 1, 4 << 20);
  ASSERT_EQ(node.Join(Request("b"), ::getpid()).value(), 1);  // reconciled, pruned and reused
  seg = enforce::NodeSegment::Open(node.paths().policy, node.paths().counters);
  ASSERT_TRUE(seg.ok());
  EXPECT_EQ(seg->ReservedBytes(1, 0), 0u);
}

// A command whose supervisor died keeps its tenant's slot while a process of its group lives.
TEST(NodeDir, ALiveCommandGroupKeepsTheSlotAfterItsSupervisorDied) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  const long dead_supervisor = DeadPid();
  ASSERT_EQ(node.Join(Request("a"), dead_supervisor).value(), 0);
  ASSERT_TRUE(node.AddCommandGroup(dead_supervisor, ::getpgrp()).ok());  // our group: alive
  EXPECT_EQ(node.Join(Request("b"), ::getpid()).value(), 1);
  StatusOr<NodeStatus> status = node.ReadStatus();
  ASSERT_TRUE(status.ok());
  ASSERT_EQ(status->gpus.size(), 1u);
  EXPECT_EQ(status->gpus[0].tenants.size(), 2u);
}

// What a GPU's arbiter syncs its board with each second: the live entries, judged as KeepLive judges
// them (a live command group is enough), with their members as the file holds them: no member is
// asked about once the entry is known to live.
TEST(NodeDir, LiveEntriesDropsDeadEntriesAndLeavesTheMembersAsTheFileHoldsThem) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  const long dead = DeadPid();
  std::vector<TenantEntry> entries(3);
  entries[0].name = "group";
  entries[0].index = 0;
  entries[0].pids = {dead};
  entries[0].pgids = {::getpgrp()};  // our group: alive
  entries[1].name = "gone";
  entries[1].index = 1;
  entries[1].pids = {dead};
  entries[2].name = "member";
  entries[2].index = 2;
  entries[2].pids = {dead, ::getpid()};
  const std::vector<TenantEntry> live = node.LiveEntries(entries, nullptr);
  ASSERT_EQ(live.size(), 2u);
  EXPECT_EQ(live[0].name, "group");
  EXPECT_EQ(live[0].pids, std::vector<long>{dead});
  EXPECT_EQ(live[1].name, "member");
  EXPECT_EQ(live[1].pids, (std::vector<long>{dead, ::getpid()}));
  // KeepLive (what `tessera node status` shows) prunes the dead members too.
  const std::vector<TenantEntry> kept = node.KeepLive(entries, nullptr);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_TRUE(kept[0].pids.empty());
  EXPECT_EQ(kept[1].pids, std::vector<long>{::getpid()});
}

TEST(NodeDir, ScrubIsSticky) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  TenantRequest scrub = Request("a");
  scrub.scrub = true;
  ASSERT_EQ(node.Join(scrub, ::getpid()).value(), 0);
  ASSERT_EQ(node.Join(Request("a"), ::getpid()).value(), 0);
  StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::Open(node.paths().policy, node.paths().counters);
  ASSERT_TRUE(seg.ok());
  EXPECT_EQ(seg->TenantFlags(0) & enforce::kTenantScrubOnFree, enforce::kTenantScrubOnFree);
}

TEST(NodeDir, CorruptRegistryIsAnErrorNamingTheFileAndIsNotReset) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  ASSERT_TRUE(node.Join(Request("a"), DeadPid()).ok());
  const std::string& path = node.paths().registry;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{not json", "not valid JSON"},
      {"[]", "not a JSON object"},
      {R"({"version": 1})", "missing \"tenants\""},
      {R"({"version": 1, "tenants": {}})", "\"tenants\" is not an array"},
      {R"({"tenants": [{"name": "x", "index": "zero"}]})", "tenants[0].index: not an integer"},
      {R"({"tenants": [{"name": "x", "gpu": 0}]})", "tenants[0]: missing \"index\""},
      {R"({"tenants": [{"name": "x", "index": 64, "gpu": 0}]})", "tenants[0].index: out of range 0..63"},
      {R"({"tenants": [{"name": "x", "index": 0, "gpu": 0, "mem_bytes": 1, "share": 1, "priority": 0,
          "pids": ["1"]}]})", "tenants[0].pids[0]: not a process id"},
      {R"({"tenants": [{"name": "x", "index": 0, "gpu": 0, "mem_bytes": 1, "share": 1, "priority": 0,
          "pids": [1], "scrub": 1}]})", "tenants[0].scrub: not true or false"},
      {R"({"tenants": [7]})", "tenants[0]: not an object"},
  };
  for (const auto& [text, what] : cases) {
    SCOPED_TRACE(text);
    WriteTextFile(path, text);
    StatusOr<int> joined = node.Join(Request("b"), ::getpid());
    EXPECT_EQ(joined.status().code(), StatusCode::kDataLoss);
    EXPECT_THAT(joined.status().message(), StartsWith(path + ": "));
    EXPECT_THAT(joined.status().message(), HasSubstr(what));
    EXPECT_EQ(node.ReadStatus().status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(node.Leave(::getpid()).code(), StatusCode::kDataLoss);
    EXPECT_EQ(node.LiveTenants().status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(ReadTextFile(path), text);  // never silently reset
  }
}

// A usage meter keeps departures: an entry that goes is recorded once with its labels and its
// slot's last counters; without KeepDepartures nothing is written.
TEST(NodeDir, DeparturesAreRecordedOnceWhenAMeterKeepsThem) {
  TempDir dir;
  NodeDir node(dir.File("node"));
  const long me = ::getpid();
  TenantRequest r = Request("physics.42");
  r.account = "physics";
  r.workload = "slurm-job-42";
  ASSERT_TRUE(node.Join(r, me).ok());
  ASSERT_TRUE(node.Leave(me).ok());
  EXPECT_TRUE(node.TakeDepartures()->empty()) << "recorded without a meter";
  ASSERT_TRUE(node.KeepDepartures().ok());
  const int64_t before = static_cast<int64_t>(::time(nullptr));
  ASSERT_TRUE(node.Join(r, me).ok());
  ASSERT_TRUE(node.Join(Request("chem.7"), DeadPid()).ok());
  ASSERT_TRUE(node.Leave(me).ok());  // physics.42 leaves; chem.7's member is dead: pruned too
  StatusOr<std::vector<Departure>> gone = node.TakeDepartures();
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  ASSERT_EQ(gone->size(), 2u);
  const Departure& d = (*gone)[0].name == "physics.42" ? (*gone)[0] : (*gone)[1];
  EXPECT_EQ(d.account, "physics");
  EXPECT_EQ(d.workload, "slurm-job-42");
  EXPECT_EQ(d.share, 30);
  EXPECT_GE(d.joined_s, before);
  EXPECT_GE(d.left_s, d.joined_s);
  EXPECT_TRUE(node.TakeDepartures()->empty()) << "a departure was given twice";
}

TEST(MemorySize, RequiresAUnit) {
  EXPECT_EQ(ParseMemorySize("64MiB").value(), 64u << 20);
  EXPECT_EQ(ParseMemorySize("1.5GiB").value(), 3u << 29);
  EXPECT_EQ(ParseMemorySize("2KB").value(), 2000u);
  EXPECT_EQ(ParseMemorySize("10B").value(), 10u);
  StatusOr<uint64_t> bare = ParseMemorySize("4096");
  EXPECT_EQ(bare.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bare.status().message(), "'4096': no unit (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
  EXPECT_THAT(ParseMemorySize("8XB").status().message(), HasSubstr("unknown unit 'XB'"));
  EXPECT_THAT(ParseMemorySize("GiB").status().message(), HasSubstr("not a positive size"));
  EXPECT_THAT(ParseMemorySize("2TiB").status().message(), HasSubstr("above the segment's 1 TiB"));
}

}  // namespace
}  // namespace tessera::node
