// The shared segment and its accounting protocol, in process (no shim): layout, validation,
// read-only policy mapping, SlotOp exactness, every crash window of SlotOp resolved exactly by
// Reconcile(), concurrent reconcilers, and who may open which file (one counters file per tenant).
#include "tessera/enforce/segment.h"
#include "tessera/enforce/lease_file.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/shim/shim_test_util.h"

namespace tessera::enforce {
namespace {

using testing::kMiB;
using testing::TestSegment;

pid_t DeadPid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

int ClaimFor(const TestSegment& t, pid_t pid, int tenant) {
  StatusOr<TenantView> view = TenantView::Open(t.policy, t.CountersFile(tenant), tenant);
  EXPECT_TRUE(view.ok()) << view.status().ToString();
  StatusOr<int> slot = view->ClaimSlot(pid, ProcessStartTime(pid).value_or(12345));
  EXPECT_TRUE(slot.ok()) << slot.status().ToString();
  return *slot;
}

TEST(SegmentLayout, CacheLineAlignedAndSized) {
  EXPECT_EQ(alignof(TenantCounter), 64u);
  EXPECT_EQ(alignof(ProcessSlot), 64u);
  EXPECT_EQ(sizeof(ProcessSlot) % 64, 0u);
  EXPECT_EQ(offsetof(CounterSegment, slots) % 64, 0u);
  // Two tenants' counters never share a line.
  CounterSegment* none = nullptr;
  (void)none;
  EXPECT_EQ(sizeof(TenantCounter), 64u);
}

TEST(SegmentLayout, PackingRoundTrips) {
  Tag t{1024, kSeqMask};
  std::uint64_t w = PackWord(kMaxCountedBytes, t);
  EXPECT_EQ(WordBytes(w), kMaxCountedBytes);
  EXPECT_EQ(WordTag(w), t);
  SlotStateWord s{SlotState::kReclaiming, (1u << 30) - 1, 0xfffffffeu};
  SlotStateWord back = UnpackSlotState(PackSlotState(s));
  EXPECT_EQ(back.state, s.state);
  EXPECT_EQ(back.generation, s.generation);
  EXPECT_EQ(back.pid, s.pid);
  Intent in{IntentState::kApplied, OpDirection::kRelease, 15, 4097};
  Intent ib = UnpackIntent(PackIntent(in));
  EXPECT_EQ(ib.state, in.state);
  EXPECT_EQ(ib.direction, in.direction);
  EXPECT_EQ(ib.gpu, in.gpu);
  EXPECT_EQ(ib.seq, in.seq);
}

TEST(SegmentLayout, RoundUpToGranule) {
  EXPECT_EQ(RoundUpToGranule(0, 512), 0u);
  EXPECT_EQ(RoundUpToGranule(1, 512), 512u);
  EXPECT_EQ(RoundUpToGranule(512, 512), 512u);
  EXPECT_EQ(RoundUpToGranule(513, 512), 1024u);
  EXPECT_EQ(RoundUpToGranule(~0ULL, 512), kMaxCountedBytes + 1);  // refused, never wrapped
}

TEST(SegmentCreate, RejectsBadOptionsNamingTheField) {
  testing::TempDir dir;
  SegmentOptions o;
  o.policy_path = dir.path() + "/p";
  o.counters_dir = dir.path() + "/c";
  o.granule_bytes = 300;
  StatusOr<NodeSegment> s = NodeSegment::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("granule_bytes"), std::string::npos);
  o.granule_bytes = 512;
  o.num_gpus = 17;
  s = NodeSegment::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("num_gpus"), std::string::npos);
  o.num_gpus = 1;
  o.policy_path = "";
  s = NodeSegment::Create(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("policy_path"), std::string::npos);
}

TEST(SegmentOpen, RejectsWrongMagicVersionAndSize) {
  TestSegment t;
  // Wrong ABI version.
  t.seg().policy().header.abi_version = 99;
  StatusOr<TenantView> v = TenantView::Open(t.policy, t.CountersFile(0), 0);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("abi_version: 99"), std::string::npos) << v.status().ToString();
  t.seg().policy().header.abi_version = kSegmentAbiVersion;
  // Wrong magic in the counters.
  t.seg().counters(0)->header.magic = 42;
  v = TenantView::Open(t.policy, t.CountersFile(0), 0);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("counters file"), std::string::npos);
  EXPECT_NE(v.status().message().find("magic"), std::string::npos);
  t.seg().counters(0)->header.magic = kCounterMagic;
  ASSERT_TRUE(TenantView::Open(t.policy, t.CountersFile(0), 0).ok());
  // Truncated file.
  ASSERT_EQ(::truncate(t.CountersFile(0).c_str(), 100), 0);
  v = TenantView::Open(t.policy, t.CountersFile(0), 0);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("smaller than"), std::string::npos);
  // Missing file.
  v = TenantView::Open(t.policy + ".missing", t.CountersFile(0), 0);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kNotFound);
}

// Each tenant index has a counters file of its own, which names its tenant: a shim that opens
// another index's file, or a file of ABI version 1 (one file of every tenant), is refused with an
// error naming the file, the field and both versions.
TEST(SegmentOpen, ACountersFileIsOneTenantsAndOfThisAbiVersion) {
  TestSegment t;
  StatusOr<TenantView> v = TenantView::Open(t.policy, t.CountersFile(1), 0);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(v.status().message().find("tenant: the file is tenant 1's, not 0's"), std::string::npos)
      << v.status().ToString();
  t.seg().counters(2)->header.abi_version = 1;
  v = TenantView::Open(t.policy, t.CountersFile(2), 2);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("counters file '" + t.CountersFile(2) +
                                     "': abi_version: 1, this build speaks " + std::to_string(kSegmentAbiVersion)),
            std::string::npos)
      << v.status().ToString();
  // A node directory of version 1: `counters` is one file, not a folder.
  testing::TempDir old;
  std::ofstream(old.path() + "/counters") << "v1";
  StatusOr<NodeSegment> n = NodeSegment::Open(t.policy, old.path() + "/counters");
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(n.status().message().find("ABI version 1"), std::string::npos) << n.status().ToString();
}

// What a tenant running under a uid of its own can open: its own counters file read-write, and
// nothing else of the segment for writing (tests run as root: the child drops to uid 65534).
TEST(SegmentOwnership, ATenantsUidWritesItsOwnCountersAndNoOtherFileOfTheSegment) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a tenant under another uid (CI runs as root)";
  constexpr uid_t kTenantUid = 65534;
  TestSegment t;
  ASSERT_EQ(::chmod(t.dir.path().c_str(), 0755), 0);
  ASSERT_TRUE(t.seg().RecreateTenantCounters(1, kTenantUid).ok());
  struct stat st {};
  ASSERT_EQ(::stat(t.counters.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u) << "only the node side adds, replaces or removes a tenant's file";
  ASSERT_EQ(::stat(t.CountersFile(1).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kTenantUid);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::stat(t.CountersFile(0).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(report[0]);
    std::string out;
    auto check = [&](bool ok, const char* what) { out += std::string(ok ? "ok " : "FAILED ") + what + "\n"; };
    const bool dropped = ::setgroups(0, nullptr) == 0 && ::setresgid(kTenantUid, kTenantUid, kTenantUid) == 0 &&
                         ::setresuid(kTenantUid, kTenantUid, kTenantUid) == 0;
    check(dropped, "setresuid");
    auto denied = [](const std::string& path, int flags) {
      const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0600);
      if (fd >= 0) ::close(fd);
      return fd < 0 && errno == EACCES;
    };
    StatusOr<TenantView> own = TenantView::Open(t.policy, t.CountersFile(1), 1);
    check(own.ok(), "its own counters file maps read-write");
    check(own.ok() && own->ClaimSlot(::getpid(), 1).ok(), "it claims a slot in it");
    StatusOr<TenantView> other = TenantView::Open(t.policy, t.CountersFile(0), 0);
    check(!other.ok() && other.status().code() == StatusCode::kPermissionDenied,
          "another tenant's counters file: PERMISSION_DENIED");
    check(denied(t.CountersFile(0), O_RDWR), "another tenant's counters file: EACCES for writing");
    check(denied(t.CountersFile(0), O_RDONLY), "another tenant's counters file: EACCES for reading");
    check(denied(t.policy, O_RDWR), "the policy page: EACCES for writing");
    check(denied(t.counters + "/2", O_RDWR | O_CREAT | O_TRUNC), "no counters file of its making");
    check(::unlink(t.CountersFile(0).c_str()) != 0 && errno == EACCES, "no counters file removed");
    check(::rename(t.CountersFile(1).c_str(), t.CountersFile(0).c_str()) != 0 && errno == EACCES,
          "no counters file replaced");
    ssize_t ignored = ::write(report[1], out.data(), out.size());
    (void)ignored;
    ::_exit(0);
  }
  ::close(report[1]);
  std::string out;
  char buf[512];
  ssize_t n = 0;
  while ((n = ::read(report[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(report[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out.find("FAILED"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 10) << out;
}

// A tenant index's next tenant gets a fresh file (a new inode): a process of the previous tenant
// that still maps the old file writes nothing the node side or the new tenant reads.
TEST(SegmentOwnership, RecreatingATenantsCountersCutsOffTheOldMapping) {
  TestSegment t;
  StatusOr<TenantView> old = TenantView::Open(t.policy, t.CountersFile(3), 3);
  ASSERT_TRUE(old.ok());
  ASSERT_TRUE(t.seg().RecreateTenantCounters(3, std::nullopt).ok());
  old->counters().counters[0].word.store(PackWord(64 * kMiB, Tag{}));
  EXPECT_EQ(t.seg().ReservedBytes(3, 0), 0u);
  StatusOr<NodeSegment> reopened = NodeSegment::Open(t.policy, t.counters);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(reopened->ReservedBytes(3, 0), 0u);
  EXPECT_FALSE(t.seg().RecreateTenantCounters(kMaxTenants, std::nullopt).ok());
}

// A segment opened on demand maps a tenant's counters file only when it is asked about it: an
// invalid file of another tenant is never opened (Open refuses the whole segment for it), one
// tenant is reconciled alone, and RefreshCounters maps again only the files replaced since.
TEST(SegmentOpenOnDemand, MapsOnlyTheTenantsItIsAskedAbout) {
  TestSegment t;
  const pid_t dead_pid = DeadPid();
  const int dead = ClaimFor(t, dead_pid, 2);
  ASSERT_EQ(SlotOp(*t.seg().counters(2), dead, 0, OpDirection::kReserve, 4 * kMiB, kUnlimited), SlotOpResult::kApplied);
  const int dead5 = ClaimFor(t, dead_pid, 5);
  ASSERT_EQ(SlotOp(*t.seg().counters(5), dead5, 0, OpDirection::kReserve, kMiB, kUnlimited), SlotOpResult::kApplied);
  {
    std::fstream f(t.CountersFile(7), std::ios::in | std::ios::out | std::ios::binary);
    f.write("garbage!", 8);  // tenant 7's magic
  }
  {
    // A full open reads a file its tenant broke as none (one tenant's file does not stop the node
    // side from reading the others'); CheckCountersFile names it.
    StatusOr<NodeSegment> full = NodeSegment::Open(t.policy, t.counters);
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    EXPECT_EQ(full->counters(7), nullptr);
    EXPECT_EQ(full->ReservedBytes(5, 0), kMiB);
    EXPECT_EQ(CheckCountersFile(t.counters, 7).code(), StatusCode::kInvalidArgument);
  }
  StatusOr<NodeSegment> lazy = NodeSegment::OpenOnDemand(t.policy, t.counters);
  ASSERT_TRUE(lazy.ok()) << lazy.status().ToString();
  const ReconcileReport r = lazy->ReconcileTenant(2);
  EXPECT_EQ(r.slots_reclaimed, 1);
  EXPECT_EQ(r.bytes_released, 4 * kMiB);
  EXPECT_EQ(t.seg().ReservedBytes(2, 0), 0u);
  EXPECT_EQ(t.seg().ReservedBytes(5, 0), kMiB);  // not looked at
  Status bad = lazy->MapCounters(7);
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find(t.CountersFile(7)), std::string::npos) << bad.ToString();
  EXPECT_EQ(lazy->counters(7), nullptr);
  // A replaced file is mapped again; an unchanged one is not.
  ASSERT_TRUE(t.seg().RecreateTenantCounters(2, std::nullopt).ok());
  StatusOr<int> changed = lazy->RefreshCounters();
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  EXPECT_EQ(*changed, 1);
  EXPECT_EQ(lazy->counters(2)->header.tenant, 2u);
  t.seg().counters(2)->counters[0].word.store(PackWord(kMiB, Tag{}));
  EXPECT_EQ(lazy->ReservedBytes(2, 0), kMiB);  // the new file, not the old mapping
  EXPECT_EQ(*lazy->RefreshCounters(), 0);
}

// The lease board as a tenant maps it (LeaseFile::OpenTenant, what the shim does): the node's part
// and every other tenant's page read-only from an O_RDONLY descriptor, its own page read-write
// from its own counters file. A write to the lease word, a node line or another tenant's line
// kills the writer and changes nothing; its own lines reach the node side; waiting for a lease
// writes nothing outside its page.
TEST(LeaseOwnership, ATenantMapsTheBoardReadOnlyButItsOwnPage) {
  testing::TestLeaseNode n;
  ASSERT_TRUE(n.leases.has_value());
  struct stat st {};
  ASSERT_EQ(::stat(n.leases_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u) << "only the node side writes the lease file";
  StatusOr<LeaseFile> tenant = LeaseFile::OpenTenant(n.leases_path, n.segment.CountersFile(1), 1);
  ASSERT_TRUE(tenant.ok()) << tenant.status().ToString();
  LeaseBoard& b = tenant->board(0);
  // Read-only descriptor: neither the node pages nor tenant 0's page can be made writable.
  EXPECT_NE(::mprotect(&b, kLeaseNodeBytes, PROT_READ | PROT_WRITE), 0);
  EXPECT_EQ(errno, EACCES);
  EXPECT_NE(::mprotect(&b.slots[0], kLeasePage, PROT_READ | PROT_WRITE), 0);
  EXPECT_DEATH({ b.lease.word.store(PackLeaseWord(1, ~0ULL)); }, "");
  EXPECT_DEATH({ b.node[1].kernel_est_ns.store(0); }, "");
  EXPECT_DEATH({ b.slots[0].gpu.gpu_ns.store(1ULL << 40); }, "");
  EXPECT_EQ(n.board().lease.word.load(), 0u);
  EXPECT_EQ(n.board().node[1].kernel_est_ns.load(), 0u);
  EXPECT_EQ(n.board().slots[0].gpu.gpu_ns.load(), 0u);
  // Its own page is its counters file's: what it writes, the node side (the arbiter) reads.
  b.slots[1].gpu.gpu_ns.store(12345);
  EXPECT_EQ(n.board().slots[1].gpu.gpu_ns.load(), 12345u);
  StatusOr<TenantView> own = TenantView::Open(n.segment.policy, n.segment.CountersFile(1), 1);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(own->counters().lease_slots[0].gpu.gpu_ns.load(), 12345u);
  // Waiting rings its own doorbell (wait_epoch), not the node's.
  EXPECT_EQ(GateLaunch(b, 1, {}, 1'000'000), GateResult::kTimedOut);
  EXPECT_EQ(n.board().slots[1].tenant.wait_epoch.load(), 1u);
  EXPECT_EQ(n.board().slots[1].tenant.waits.load(), 1u);
  EXPECT_EQ(n.board().arbiter.doorbell.load(), 0u);
  // A grant by the node side is what it sees.
  n.board().lease.word.store(PackLeaseWord(1, MonotonicNowNs() + 60'000'000'000ULL));
  EXPECT_EQ(GateLaunch(b, 1, {}, 1'000'000), GateResult::kAdmitted);
  EXPECT_EQ(n.board().slots[1].tenant.launches.load(), 1u);
  // A tenant index whose counters file was recreated (a new tenant) is mapped again by the node side.
  ASSERT_TRUE(n.segment.seg().RecreateTenantCounters(1, std::nullopt).ok());
  StatusOr<int> remapped = n.leases->RefreshTenants();
  ASSERT_TRUE(remapped.ok()) << remapped.status().ToString();
  EXPECT_EQ(*remapped, 1);
  EXPECT_EQ(n.board().slots[1].gpu.gpu_ns.load(), 0u);
  b.slots[1].gpu.gpu_ns.store(777);  // the old tenant's mapping: cut off
  EXPECT_EQ(n.board().slots[1].gpu.gpu_ns.load(), 0u);
}

// Under a uid of its own (tessera run --uid, a Slurm task) the tenant cannot open the lease file
// for writing at all, and cannot map another tenant's lease page (tests run as root: the child
// drops to uid 65534).
TEST(LeaseOwnership, ATenantsUidCannotOpenTheLeaseFileForWritingNorAnotherTenantsPage) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a tenant under another uid (CI runs as root)";
  constexpr uid_t kTenantUid = 65534;
  testing::TestLeaseNode n;
  ASSERT_TRUE(n.leases.has_value());
  ASSERT_EQ(::chmod(n.segment.dir.path().c_str(), 0755), 0);
  ASSERT_TRUE(n.segment.seg().RecreateTenantCounters(1, kTenantUid).ok());
  ASSERT_TRUE(n.leases->RefreshTenants().ok());
  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(report[0]);
    std::string out;
    auto check = [&](bool ok, const char* what) { out += std::string(ok ? "ok " : "FAILED ") + what + "\n"; };
    check(::setgroups(0, nullptr) == 0 && ::setresgid(kTenantUid, kTenantUid, kTenantUid) == 0 &&
              ::setresuid(kTenantUid, kTenantUid, kTenantUid) == 0,
          "setresuid");
    const int fd = ::open(n.leases_path.c_str(), O_RDWR | O_CLOEXEC);
    check(fd < 0 && errno == EACCES, "the lease file: EACCES for writing");
    StatusOr<LeaseFile> node_side = LeaseFile::Open(n.leases_path);
    check(!node_side.ok() && node_side.status().code() == StatusCode::kPermissionDenied,
          "the node side's mapping: PERMISSION_DENIED");
    StatusOr<LeaseFile> other = LeaseFile::OpenTenant(n.leases_path, n.segment.CountersFile(0), 0);
    check(!other.ok() && other.status().code() == StatusCode::kPermissionDenied,
          "another tenant's lease page: PERMISSION_DENIED");
    StatusOr<LeaseFile> own = LeaseFile::OpenTenant(n.leases_path, n.segment.CountersFile(1), 1);
    check(own.ok(), "its own board maps");
    if (own.ok()) {
      own->board(0).slots[1].tenant.waiting.store(3);
      check(::mprotect(&own->board(0), kLeaseNodeBytes, PROT_READ | PROT_WRITE) != 0, "the node pages stay read-only");
    }
    ssize_t ignored = ::write(report[1], out.data(), out.size());
    (void)ignored;
    ::_exit(0);
  }
  ::close(report[1]);
  std::string out;
  char buf[512];
  ssize_t r = 0;
  while ((r = ::read(report[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(r));
  ::close(report[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_EQ(status, 0);
  EXPECT_EQ(out.find("FAILED"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 6) << out;
  EXPECT_EQ(n.board().slots[1].tenant.waiting.load(), 3u);  // its own line reached the node side
}

TEST(SegmentOpen, PolicyIsReadOnlyForTenants) {
  TestSegment t;
  ASSERT_TRUE(t.seg().SetLimit(0, 0, 10 * kMiB).ok());
  StatusOr<TenantView> v = TenantView::Open(t.policy, t.CountersFile(0), 0);
  ASSERT_TRUE(v.ok());
  void* page = const_cast<PolicyPage*>(&v->policy());
  // The file was opened read-only, so the mapping cannot be made writable...
  EXPECT_NE(::mprotect(page, sizeof(PolicyPage), PROT_READ | PROT_WRITE), 0);
  // ...and writing to it kills the writer.
  EXPECT_DEATH(
      {
        static_cast<PolicyPage*>(page)->tenants[0].limit_bytes[0].store(kUnlimited);
      },
      "");
  EXPECT_EQ(v->policy().tenants[0].limit_bytes[0].load(), 10 * kMiB);
}

TEST(SegmentSetLimit, ValidatesArguments) {
  TestSegment t(512, 2);
  EXPECT_TRUE(t.seg().SetLimit(63, 1, 5).ok());
  Status s = t.seg().SetLimit(64, 0, 5);
  EXPECT_NE(s.message().find("tenant: 64"), std::string::npos);
  s = t.seg().SetLimit(0, 2, 5);
  EXPECT_NE(s.message().find("gpu: 2"), std::string::npos);
}

TEST(SlotOp, ExactAtTheLimit) {
  TestSegment t;
  const std::uint64_t limit = 10 * kMiB;
  int slot = ClaimFor(t, ::getpid(), 3);
  CounterSegment& c = *t.seg().counters(3);
  EXPECT_EQ(SlotOp(c, slot, 0, OpDirection::kReserve, limit - 512, limit), SlotOpResult::kApplied);
  EXPECT_EQ(SlotOp(c, slot, 0, OpDirection::kReserve, 1024, limit), SlotOpResult::kOverLimit);
  EXPECT_EQ(SlotOp(c, slot, 0, OpDirection::kReserve, 512, limit), SlotOpResult::kApplied);
  EXPECT_EQ(t.seg().ReservedBytes(3, 0), limit);
  EXPECT_EQ(SlotOp(c, slot, 0, OpDirection::kReserve, 512, limit), SlotOpResult::kOverLimit);
  EXPECT_EQ(t.seg().ReservedBytes(3, 0), limit);
  EXPECT_EQ(t.seg().DeniedAllocations(3, 0), 2u);
  EXPECT_EQ(c.slots[slot].held_bytes[0].load(), limit);
  EXPECT_EQ(t.seg().PeakBytes(3, 0), limit);
  // A release larger than what the slot holds is clamped: no underflow.
  EXPECT_EQ(SlotOp(c, slot, 0, OpDirection::kRelease, limit * 5, kUnlimited), SlotOpResult::kApplied);
  EXPECT_EQ(t.seg().ReservedBytes(3, 0), 0u);
  EXPECT_EQ(c.slots[slot].held_bytes[0].load(), 0u);
  // Tags are cleared after each completed operation.
  EXPECT_EQ(WordTag(c.counters[0].word.load()), Tag{});
}

TEST(SlotOp, RequestLargerThanAnyCounterIsRefused) {
  TestSegment t;
  int slot = ClaimFor(t, ::getpid(), 0);
  EXPECT_EQ(SlotOp(*t.seg().counters(0), slot, 0, OpDirection::kReserve, kMaxCountedBytes + 1, kUnlimited),
            SlotOpResult::kOverLimit);
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), 0u);
}

TEST(SlotOp, ConcurrentThreadsNeverExceedTheLimit) {
  TestSegment t;
  const std::uint64_t limit = 64 * kMiB;
  constexpr int kThreads = 8;
  std::vector<int> slots;
  for (int i = 0; i < kThreads; ++i) slots.push_back(ClaimFor(t, ::getpid(), 1));
  CounterSegment& c = *t.seg().counters(1);
  std::atomic<bool> over{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937 rng(i);
      for (int k = 0; k < 3000; ++k) {
        std::uint64_t bytes = (1 + rng() % 16) * 512 * 1024;
        if (rng() % 2) {
          SlotOp(c, slots[i], 0, OpDirection::kReserve, bytes, limit);
        } else {
          SlotOp(c, slots[i], 0, OpDirection::kRelease, bytes, kUnlimited);
        }
        if (WordBytes(c.counters[0].word.load()) > limit) over = true;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(over.load());
  std::uint64_t held = 0;
  for (int s : slots) held += c.slots[s].held_bytes[0].load();
  EXPECT_EQ(t.seg().ReservedBytes(1, 0), held);
  EXPECT_LE(t.seg().PeakBytes(1, 0), limit);
  EXPECT_EQ(c.counters[0].underflows_prevented.load(), 0u);
}

// The crash windows of SlotOp, replayed by hand on a slot whose process is dead.
enum class Window { kIntentOnly, kCounterMoved, kCounterMovedAndTagOverwritten, kHeldUpdated };

void CrashIn(Window w, OpDirection dir) {
  SCOPED_TRACE(static_cast<int>(w));
  SCOPED_TRACE(static_cast<int>(dir));
  TestSegment t;
  CounterSegment& c = *t.seg().counters(2);
  const int tenant = 2;
  const std::uint64_t base = 6 * kMiB, op = 2 * kMiB;
  int live = ClaimFor(t, ::getpid(), tenant);
  ASSERT_EQ(SlotOp(c, live, 0, OpDirection::kReserve, 3 * kMiB, kUnlimited), SlotOpResult::kApplied);
  pid_t dead_pid = DeadPid();
  int dead = ClaimFor(t, dead_pid, tenant);
  ASSERT_EQ(SlotOp(c, dead, 0, OpDirection::kReserve, base, kUnlimited), SlotOpResult::kApplied);
  // The dead process starts one more operation...
  ProcessSlot& s = c.slots[dead];
  std::uint32_t seq = static_cast<std::uint32_t>(s.op_seq.load() + 1) & kSeqMask;
  s.op_seq.store(seq);
  s.intent_bytes.store(op);
  s.intent_held_before.store(base);
  s.intent.store(PackIntent({IntentState::kPending, dir, 0, seq}));
  std::uint64_t held_after = dir == OpDirection::kReserve ? base + op : base - op;
  if (w != Window::kIntentOnly) {
    std::uint64_t cur = WordBytes(c.counters[0].word.load());
    std::uint64_t next = dir == OpDirection::kReserve ? cur + op : cur - op;
    c.counters[0].word.store(PackWord(next, Tag{static_cast<std::uint32_t>(dead + 1), seq}));
  }
  if (w == Window::kCounterMovedAndTagOverwritten) {
    // A live process's operation helps (marks the dead intent APPLIED) and overwrites the tag.
    ASSERT_EQ(SlotOp(c, live, 0, OpDirection::kReserve, kMiB, kUnlimited), SlotOpResult::kApplied);
    EXPECT_EQ(UnpackIntent(s.intent.load()).state, IntentState::kApplied);
  }
  if (w == Window::kHeldUpdated) s.held_bytes[0].store(held_after);
  // ... and is killed there. Reconcile leaves exactly the live process's holdings.
  ReconcileReport r = t.seg().Reconcile();
  EXPECT_EQ(r.slots_reclaimed, 1);
  EXPECT_EQ(r.intents_resolved, 1);
  std::uint64_t live_held = c.slots[live].held_bytes[0].load();
  EXPECT_EQ(t.seg().ReservedBytes(tenant, 0), live_held);
  EXPECT_EQ(t.seg().HeldByLiveSlots(tenant, 0), live_held);
  EXPECT_EQ(UnpackSlotState(s.state.load()).state, SlotState::kFree);
  EXPECT_EQ(c.counters[0].underflows_prevented.load(), 0u);
  // A second run finds nothing to do.
  ReconcileReport again = t.seg().Reconcile();
  EXPECT_EQ(again.slots_reclaimed, 0);
  EXPECT_EQ(t.seg().ReservedBytes(tenant, 0), live_held);
}

TEST(Reconcile, EveryCrashWindowOfAReservationIsExact) {
  for (Window w : {Window::kIntentOnly, Window::kCounterMoved, Window::kCounterMovedAndTagOverwritten,
                   Window::kHeldUpdated}) {
    CrashIn(w, OpDirection::kReserve);
  }
}

TEST(Reconcile, EveryCrashWindowOfAReleaseIsExact) {
  for (Window w : {Window::kIntentOnly, Window::kCounterMoved, Window::kCounterMovedAndTagOverwritten,
                   Window::kHeldUpdated}) {
    CrashIn(w, OpDirection::kRelease);
  }
}

TEST(Reconcile, LiveProcessesAndPidReuseAreRespected) {
  TestSegment t;
  CounterSegment& c = *t.seg().counters(0);
  int me = ClaimFor(t, ::getpid(), 0);
  ASSERT_EQ(SlotOp(c, me, 0, OpDirection::kReserve, kMiB, kUnlimited), SlotOpResult::kApplied);
  // Same pid as a live process but another start time: a previous owner of a reused pid.
  StatusOr<TenantView> v = TenantView::Open(t.policy, t.CountersFile(0), 0);
  ASSERT_TRUE(v.ok());
  StatusOr<int> stale = v->ClaimSlot(::getpid(), ProcessStartTime(::getpid()).value() + 1);
  ASSERT_TRUE(stale.ok());
  ASSERT_EQ(SlotOp(c, *stale, 0, OpDirection::kReserve, 2 * kMiB, kUnlimited), SlotOpResult::kApplied);
  ReconcileReport r = t.seg().Reconcile();
  EXPECT_EQ(r.slots_reclaimed, 1);
  EXPECT_EQ(r.bytes_released, 2 * kMiB);
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), kMiB);
  EXPECT_EQ(t.seg().ActiveSlots(), 1);
}

// What a GPU's arbiter runs every 100 ms (a full Reconcile once a second): the tenants with bytes
// charged are reconciled as by Reconcile(); a dead process's slot of a tenant with nothing charged
// is left to the next Reconcile().
TEST(Reconcile, ReconcileChargedLooksOnlyAtTenantsWithBytesCharged) {
  TestSegment t;
  CounterSegment& charged = *t.seg().counters(3);
  const int held = ClaimFor(t, DeadPid(), 3);
  ASSERT_EQ(SlotOp(charged, held, 1, OpDirection::kReserve, 60 * kMiB, kUnlimited), SlotOpResult::kApplied);
  const int idle = ClaimFor(t, DeadPid(), 5);  // a process of tenant 5 that died holding nothing
  ReconcileReport r = t.seg().ReconcileCharged();
  EXPECT_EQ(r.slots_reclaimed, 1);
  EXPECT_EQ(r.bytes_released, 60 * kMiB);
  EXPECT_EQ(t.seg().ReservedBytes(3, 1), 0u);
  EXPECT_EQ(UnpackSlotState(charged.slots[held].state.load()).state, SlotState::kFree);
  EXPECT_EQ(UnpackSlotState(t.seg().counters(5)->slots[idle].state.load()).state, SlotState::kActive);
  r = t.seg().Reconcile();
  EXPECT_EQ(r.slots_reclaimed, 1);
  EXPECT_EQ(UnpackSlotState(t.seg().counters(5)->slots[idle].state.load()).state, SlotState::kFree);
}

// What `tessera run` asks before it prunes or reuses a tenant index: a live process's ACTIVE slot
// keeps the index taken; a dead process's slot (not reconciled yet) and a freed slot do not.
TEST(TenantHasLiveSlots, OnlyLiveProcessesHoldAnIndex) {
  TestSegment t;
  StatusOr<TenantView> v = TenantView::Open(t.policy, t.CountersFile(5), 5);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(t.seg().TenantHasLiveSlots(3));
  int mine = ClaimFor(t, ::getpid(), 3);
  EXPECT_TRUE(t.seg().TenantHasLiveSlots(3));
  EXPECT_FALSE(t.seg().TenantHasLiveSlots(4));
  ClaimFor(t, DeadPid(), 4);
  EXPECT_FALSE(t.seg().TenantHasLiveSlots(4)) << "a dead process holds nothing (Reconcile frees it)";
  // A reused pid: same pid as a live process, another start time.
  StatusOr<int> stale = v->ClaimSlot(::getpid(), ProcessStartTime(::getpid()).value() + 1);
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(t.seg().TenantHasLiveSlots(5));
  StatusOr<TenantView> v3 = TenantView::Open(t.policy, t.CountersFile(3), 3);
  ASSERT_TRUE(v3.ok());
  v3->ReleaseSlot(mine);
  EXPECT_FALSE(t.seg().TenantHasLiveSlots(3));
  EXPECT_FALSE(t.seg().TenantHasLiveSlots(-1));
  EXPECT_FALSE(t.seg().TenantHasLiveSlots(kMaxTenants));
}

// A new tenant on a reused index starts with its own statistics: the peak (kept at what is
// reserved now) and the denial and underflow counters of every GPU.
TEST(ResetTenantStats, ANewTenantStartsFromZero) {
  TestSegment t(512, 2);
  CounterSegment& c = *t.seg().counters(2);
  int slot = ClaimFor(t, ::getpid(), 2);
  ASSERT_EQ(SlotOp(c, slot, 1, OpDirection::kReserve, 8 * kMiB, 8 * kMiB), SlotOpResult::kApplied);
  ASSERT_EQ(SlotOp(c, slot, 1, OpDirection::kReserve, kMiB, 8 * kMiB), SlotOpResult::kOverLimit);
  ASSERT_EQ(SlotOp(c, slot, 1, OpDirection::kRelease, 8 * kMiB, kUnlimited), SlotOpResult::kApplied);
  c.counters[1].underflows_prevented.store(1);
  ASSERT_EQ(t.seg().PeakBytes(2, 1), 8 * kMiB);
  ASSERT_EQ(t.seg().DeniedAllocations(2, 1), 1u);
  ASSERT_TRUE(t.seg().ResetTenantStats(2).ok());
  EXPECT_EQ(t.seg().PeakBytes(2, 1), 0u);
  EXPECT_EQ(t.seg().DeniedAllocations(2, 1), 0u);
  EXPECT_EQ(c.counters[1].denied_bytes.load(), 0u);
  EXPECT_EQ(c.counters[1].underflows_prevented.load(), 0u);
  // What is reserved now stays the floor of the peak.
  ASSERT_EQ(SlotOp(c, slot, 1, OpDirection::kReserve, kMiB, 8 * kMiB), SlotOpResult::kApplied);
  c.counters[1].peak_bytes.store(5 * kMiB);
  ASSERT_TRUE(t.seg().ResetTenantStats(2).ok());
  EXPECT_EQ(t.seg().PeakBytes(2, 1), kMiB);
  EXPECT_EQ(t.seg().ReservedBytes(2, 1), kMiB) << "the counter itself is never touched";
  EXPECT_FALSE(t.seg().ResetTenantStats(kMaxTenants).ok());
}

TEST(Reconcile, ConcurrentReconcilersReleaseEachDeadSlotOnce) {
  TestSegment t;
  CounterSegment& c = *t.seg().counters(5);
  constexpr int kDead = 200;
  pid_t dead_pid = DeadPid();
  for (int i = 0; i < kDead; ++i) {
    int s = ClaimFor(t, dead_pid, 5);
    ASSERT_EQ(SlotOp(c, s, 0, OpDirection::kReserve, kMiB, kUnlimited), SlotOpResult::kApplied);
  }
  ASSERT_EQ(t.seg().ReservedBytes(5, 0), kDead * kMiB);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  constexpr int kReconcilers = 4;
  for (int k = 0; k < kReconcilers; ++k) {
    if (::fork() == 0) {
      StatusOr<NodeSegment> n = NodeSegment::Open(t.policy, t.counters);
      int reclaimed = n.ok() ? n->Reconcile().slots_reclaimed : -1000;
      ssize_t ignored = ::write(fds[1], &reclaimed, sizeof(reclaimed));
      (void)ignored;
      ::_exit(0);
    }
  }
  ::close(fds[1]);
  int total = 0, one = 0;
  while (::read(fds[0], &one, sizeof(one)) == sizeof(one)) total += one;
  ::close(fds[0]);
  while (::wait(nullptr) > 0) {
  }
  EXPECT_EQ(total, kDead);
  EXPECT_EQ(t.seg().ReservedBytes(5, 0), 0u);
  EXPECT_EQ(c.counters[0].underflows_prevented.load(), 0u);
}

TEST(Reconcile, DeadReconcilerIsTakenOver) {
  TestSegment t;
  CounterSegment& c = *t.seg().counters(1);
  pid_t dead_owner = DeadPid();
  int s = ClaimFor(t, dead_owner, 1);
  ASSERT_EQ(SlotOp(c, s, 0, OpDirection::kReserve, 4 * kMiB, kUnlimited), SlotOpResult::kApplied);
  // A reconciler took the slot and died before releasing anything.
  SlotStateWord st = UnpackSlotState(c.slots[s].state.load());
  pid_t dead_reconciler = DeadPid();
  c.slots[s].state.store(PackSlotState({SlotState::kReclaiming, st.generation,
                                        static_cast<std::uint32_t>(dead_reconciler)}));
  ReconcileReport r = t.seg().Reconcile();
  EXPECT_EQ(r.slots_reclaimed, 1);
  EXPECT_EQ(t.seg().ReservedBytes(1, 0), 0u);
  EXPECT_EQ(UnpackSlotState(c.slots[s].state.load()).generation, st.generation + 1);
}

TEST(ProcessStartTime, LiveDeadAndZombie) {
  EXPECT_TRUE(ProcessStartTime(::getpid()).has_value());
  EXPECT_FALSE(ProcessStartTime(DeadPid()).has_value());
  pid_t zombie = ::fork();
  if (zombie == 0) ::_exit(0);
  // Wait until it has exited but do not reap it (WNOWAIT): it is a zombie now.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT), 0);
  EXPECT_FALSE(ProcessStartTime(zombie).has_value());
  ::waitpid(zombie, nullptr, 0);
}

}  // namespace
}  // namespace tessera::enforce
