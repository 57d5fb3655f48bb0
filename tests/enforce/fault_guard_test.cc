// The node side against a tenant that truncates its own counters file (tessera/enforce/
// fault_guard.h): a guarded mapping reads zeros where the file went, an unguarded one still dies
// of SIGBUS (the guard takes only its own faults), NodeSegment and the arbiter's LeaseFile read the
// other tenants on, and CheckCountersFile names the broken file, truncated or grown back.
// Each node-side part runs in a child process: without the guard it dies of SIGBUS, and the test
// fails on the child's status instead of taking the test binary down.
#include "tessera/enforce/fault_guard.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "tessera/enforce/lease_file.h"
#include "tessera/enforce/segment.h"

namespace tessera::enforce {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/tessera-fault-guard-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { (void)std::system(("rm -rf '" + path_ + "'").c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `body` in a child; returns its wait status. The body's failed expectations exit 1.
int InChild(const std::function<bool()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body() ? 0 : 1);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

std::string Describe(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by ") + ::strsignal(WTERMSIG(status));
  return "exit " + std::to_string(WEXITSTATUS(status));
}

// A file of three pages, mapped shared; then truncated to nothing under the mapping.
struct TruncatedMapping {
  std::string path;
  unsigned char* base = nullptr;
  std::size_t size = 3 * 4096;
  std::uint64_t ino = 0;
  explicit TruncatedMapping(std::string file) : path(std::move(file)) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);
    struct stat st {};
    EXPECT_EQ(::fstat(fd, &st), 0);
    ino = static_cast<std::uint64_t>(st.st_ino);
    base = static_cast<unsigned char*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ::close(fd);
    std::memset(base, 7, size);
  }
  void Truncate() const { EXPECT_EQ(::truncate(path.c_str(), 0), 0); }
};

TEST(FaultGuard, AGuardedMappingOfATruncatedFileReadsZerosAndTheProcessLives) {
  TempDir dir;
  const int status = InChild([&] {
    TruncatedMapping m(dir.path() + "/file");
    const int id = FaultGuard::Register(m.base, m.size, m.ino);
    if (id < 0) return false;
    m.Truncate();
    const unsigned char first = m.base[10];     // page 0: faults, a zero page in its place
    m.base[4096 + 1] = 9;                       // page 1: a store faults too, then lands
    const unsigned char stored = m.base[4096 + 1];
    const bool ok = first == 0 && stored == 9 && FaultGuard::Faults(id) == 2 && FaultGuard::InodeFaulted(m.ino);
    FaultGuard::Unregister(id);
    return ok && !FaultGuard::InodeFaulted(m.ino);  // forgotten with its last range
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Describe(status);
}

TEST(FaultGuard, ASigbusOutsideEveryGuardedRangeStillEndsTheProcess) {
  TempDir dir;
  const int status = InChild([&] {
    TruncatedMapping guarded(dir.path() + "/guarded");
    TruncatedMapping other(dir.path() + "/other");  // another file, not registered
    (void)FaultGuard::Register(guarded.base, guarded.size, guarded.ino);
    other.Truncate();
    volatile unsigned char v = other.base[0];  // not ours: the default disposition
    (void)v;
    return true;
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) << Describe(status);
}

struct Node {
  TempDir dir;
  std::string policy = dir.path() + "/policy";
  std::string counters = dir.path() + "/counters";
  std::string leases = dir.path() + "/leases";
  Node() {
    SegmentOptions o;
    o.policy_path = policy;
    o.counters_dir = counters;
    o.num_gpus = 1;
    StatusOr<NodeSegment> seg = NodeSegment::Create(o);
    EXPECT_TRUE(seg.ok()) << seg.status().ToString();
    StatusOr<LeaseFile> file = LeaseFile::Create(leases, 1, counters);
    EXPECT_TRUE(file.ok()) << file.status().ToString();
  }
};

// Tenant 3 holds 64 MiB and tenant 4 32 MiB; tenant 3 truncates its file under the node side's
// mappings (the segment's and the arbiter's lease pages): the node side reads zeros for tenant 3
// and tenant 4's counters as before, and CheckCountersFile names the file. Grown back to its size,
// the file is still named (a page of it vanished under this process's mapping).
TEST(FaultGuard, ANodeSideThatMapsATruncatedCountersFileReadsTheOtherTenantsOn) {
  Node node;
  const int status = InChild([&] {
    StatusOr<NodeSegment> seg = NodeSegment::Open(node.policy, node.counters);
    StatusOr<LeaseFile> arbiter = LeaseFile::Open(node.leases, node.counters, 0);
    if (!seg.ok() || !arbiter.ok()) return false;
    for (int t : {3, 4}) {
      if (!seg->SetLimit(t, 0, kUnlimited).ok()) return false;
      StatusOr<TenantView> view = TenantView::Open(node.policy, CountersFilePath(node.counters, t), t);
      if (!view.ok()) return false;
      StatusOr<int> slot = view->ClaimSlot(::getpid(), ProcessStartTime(::getpid()).value_or(1));
      if (!slot.ok()) return false;
      SlotOp(view->counters(), *slot, 0, OpDirection::kReserve, (t == 3 ? 64u : 32u) << 20, kUnlimited);
    }
    arbiter->board(0).slots[3].gpu.gpu_ns.store(5, std::memory_order_relaxed);
    if (seg->ReservedBytes(3, 0) != 64u << 20 || !CheckCountersFile(node.counters, 3).ok()) return false;

    if (::truncate(CountersFilePath(node.counters, 3).c_str(), 0) != 0) return false;
    const std::uint64_t before = FaultGuard::TotalFaults();
    const bool zeros = seg->ReservedBytes(3, 0) == 0 && seg->HeldByLiveSlots(3, 0) == 0 &&
                       arbiter->board(0).slots[3].gpu.gpu_ns.load() == 0;
    const ReconcileReport report = seg->Reconcile();  // walks every slot of every file
    const bool others = seg->ReservedBytes(4, 0) == 32u << 20 && report.slots_reclaimed == 0;
    const Status truncated = CheckCountersFile(node.counters, 3);
    const bool named = truncated.code() == StatusCode::kFailedPrecondition &&
                       std::string(truncated.message()).find("size 0, not the 151552 bytes") != std::string::npos;
    // A fresh look at the node directory opens (tenant 3's file reads as none) and so does the
    // arbiter's lease file; tenant 4 is still there.
    StatusOr<NodeSegment> again = NodeSegment::Open(node.policy, node.counters);
    StatusOr<LeaseFile> arbiter_again = LeaseFile::Open(node.leases, node.counters, 0);
    const bool reopened = again.ok() && again->counters(3) == nullptr && again->ReservedBytes(4, 0) == 32u << 20 &&
                          arbiter_again.ok();
    // Grown back to its size: the size is right, and still the file is named.
    if (::truncate(CountersFilePath(node.counters, 3).c_str(), sizeof(CounterSegment)) != 0) return false;
    const Status grown = CheckCountersFile(node.counters, 3);
    const bool still = grown.code() == StatusCode::kFailedPrecondition &&
                       std::string(grown.message()).find("vanished") != std::string::npos;
    const bool fine = CheckCountersFile(node.counters, 4).ok() && CheckCountersFile(node.counters, 9).ok();
    std::fprintf(stderr, "zeros %d others %d named %d (%s) reopened %d still %d fine %d faults %llu\n", zeros, others,
                 named, truncated.ToString().c_str(), reopened, still, fine,
                 static_cast<unsigned long long>(FaultGuard::TotalFaults() - before));
    return zeros && others && named && reopened && still && fine && FaultGuard::TotalFaults() > before;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Describe(status);
}

TEST(FaultGuard, AHeaderWrittenOverOrAFileGrownIsNamedToo) {
  Node node;
  const std::string file = CountersFilePath(node.counters, 2);
  ASSERT_TRUE(CheckCountersFile(node.counters, 2).ok());
  ASSERT_EQ(::truncate(file.c_str(), sizeof(CounterSegment) + 4096), 0);
  Status grown = CheckCountersFile(node.counters, 2);
  EXPECT_EQ(grown.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(grown.message()).find("size 155648"), std::string::npos) << grown.ToString();
  ASSERT_EQ(::truncate(file.c_str(), sizeof(CounterSegment)), 0);
  const int fd = ::open(file.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const std::uint64_t garbage = 42;
  ASSERT_EQ(::pwrite(fd, &garbage, sizeof(garbage), 0), static_cast<ssize_t>(sizeof(garbage)));
  ::close(fd);
  Status scribbled = CheckCountersFile(node.counters, 2);
  EXPECT_NE(std::string(scribbled.message()).find("magic"), std::string::npos) << scribbled.ToString();
  EXPECT_EQ(CheckCountersFile(node.counters, 64).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::enforce
