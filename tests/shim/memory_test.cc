// Exact device-memory limits through libtessera-shim.so, end to end: the probe runs under
// LD_PRELOAD with the fake driver; the test reads the node segment and the fake's own usage.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/shim/shim_test_util.h"

namespace tessera::enforce {
namespace {

using testing::FieldInt;
using testing::kMiB;
using testing::Probe;
using testing::ProbeOptions;
using testing::ProbeRun;
using testing::RunProbe;
using testing::TestSegment;

constexpr std::uint64_t kLimit = 64 * kMiB;
constexpr int kCudaOom = 2;

// The whole of a file ("" when there is none): the fake driver's state, a probe's stderr.
std::string ReadWhole(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

struct Family {
  const char* name;
  std::string args;     // after "alloc:<name>:"
  std::uint64_t charge;  // what one object costs, computed here from the documented rules
};

// Arrays: rows padded to 512 bytes, every level, rounded to the 512-byte granule.
std::uint64_t MipmapCharge(std::uint64_t w, std::uint64_t h, int levels) {
  std::uint64_t total = 0;
  for (int l = 0; l < levels; ++l) {
    std::uint64_t row = std::max<std::uint64_t>(w >> l, 1) * 4;
    row = (row + 511) / 512 * 512;
    total += row * std::max<std::uint64_t>(h >> l, 1);
  }
  return (total + 511) / 512 * 512;
}

std::vector<Family> Families() {
  return {
      {"mem", "1000000", 1000448},  // 1,000,000 rounded up to 512
      {"mem32", "1048576", kMiB},
      {"managed", "1048576", kMiB},
      {"async", "3145728", 3 * kMiB},
      {"async_ptsz", "1048576", kMiB},
      {"pool", "1048576", kMiB},
      {"pool_ptsz", "2097152", 2 * kMiB},
      {"vmm", "2097152", 2 * kMiB},
      {"pitch", "1000:1024", 1024 * 1024},  // the driver's pitch (1024) x height
      {"pitch32", "1000:1024", 1024 * 1024},
      {"array", "128:2048", kMiB},
      {"array32", "100:2048", kMiB},  // 400-byte rows padded to 512
      {"array3d", "128:64:32", kMiB},
      {"array3d32", "128:64:32", kMiB},
      {"mipmap", "128:128:8", MipmapCharge(128, 128, 8)},
  };
}

TestSegment& Limited(TestSegment& t, std::uint64_t limit, int tenant = 0) {
  EXPECT_TRUE(t.seg().SetLimit(tenant, 0, limit).ok());
  return t;
}

ProbeOptions Managed(const TestSegment& t, int tenant = 0) {
  ProbeOptions o;
  o.segment = &t;
  o.tenant = tenant;
  return o;
}

// Fills the limit with one family, checks the count to the object, then frees everything.
// The fake driver's per-process record for the fake NVML (TESSERA_FAKE_GPU_STATE): this process's
// bytes on the node GPU that CUDA_VISIBLE_DEVICES names (here by fake NVML UUID: GPU 3), whether or
// not the shim is loaded, updated at every allocation and free.
TEST(FakeDriverState, RecordsEachProcesssBytesOnItsNodeGpu) {
  TestSegment t;  // for its folder
  const std::string state = t.dir.path() + "/gpu-state";
  ASSERT_EQ(::mkdir(state.c_str(), 0755), 0);
  ProbeOptions o;
  o.preload = false;
  o.env = {"TESSERA_FAKE_GPU_STATE=" + state, "CUDA_VISIBLE_DEVICES=GPU-fa4e0000-0000-4000-8000-000000000003"};
  ProbeRun r = RunProbe(o, {"init", "alloc:mem:1048576", "alloc:mem:4096", "free:0", "pid"});
  ASSERT_EQ(r.exit_code, 0);
  const long pid = FieldInt(r.Find("pid"), "value");
  EXPECT_EQ(ReadWhole(state + "/" + std::to_string(pid)), "3 4096\n");
}

// A second copy of the driver loaded from another file name records beside the first
// (<pid>.<file name>): what the fake NVML adds up (tests/enforce/nvml_test.cc) when a tenant gets
// round the shim that way (tests/e2e/platform_test.cc, docs/security.md).
TEST(FakeDriverState, ASecondCopyOfTheDriverRecordsBesideTheFirst) {
  TestSegment t;  // for its folder
  const std::string state = t.dir.path() + "/gpu-state";
  ASSERT_EQ(::mkdir(state.c_str(), 0755), 0);
  const std::string copy = t.dir.path() + "/libcuda-copy.so";
  ASSERT_EQ(std::system(("cp '" + std::string(TESSERA_FAKE_CUDA_DIR) + "/libcuda.so.1' '" + copy + "'").c_str()), 0);
  ProbeOptions o;
  o.preload = false;
  o.env = {"TESSERA_FAKE_GPU_STATE=" + state, "CUDA_VISIBLE_DEVICES=0"};
  ProbeRun r = RunProbe(o, {"init", "alloc:mem:4096", "driver2:" + copy + ":1048576", "pid"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(FieldInt(r.Find("driver2"), "rc"), 0) << r.Find("driver2");
  const std::string pid = std::to_string(FieldInt(r.Find("pid"), "value"));
  auto read = [&](const std::string& name) { return ReadWhole(state + "/" + name); };
  EXPECT_EQ(read(pid), "0 4096\n");
  EXPECT_EQ(read(pid + ".libcuda-copy.so"), "0 1048576\n");
}

// An attack the NVML backstop cannot see (docs/security.md): a process of tenant 1 sets tenant 0's
// counter to tenant 0's limit; tenant 0's next allocation would be refused although it holds
// nothing, and no process would be over a limit. Under segment ABI version 1 (one counters file of
// every tenant, mode 0666) the write went through ("counter rc=0 was=0") and the victim got
// CUDA_ERROR_OUT_OF_MEMORY. Now each tenant's counters are a file of its own, mode 0600, owned by
// the tenant's uid: tenant 1, under uid 65534, cannot open tenant 0's (EACCES), still writes its
// own, and tenant 0 allocates as usual.
TEST(HostileTenant, RaisingAnotherTenantsCounterIsRefusedToATenantUnderItsOwnUid) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run a tenant under another uid (CI runs as root)";
  constexpr long kTenantUid = 65534;  // nobody: owns no file of the test's
  TestSegment t;
  Limited(t, kLimit, 0);
  Limited(t, kLimit, 1);
  ASSERT_EQ(::chmod(t.dir.path().c_str(), 0755), 0);  // mkdtemp's 0700 would keep the tenant out
  ASSERT_TRUE(t.seg().RecreateTenantCounters(1, static_cast<uid_t>(kTenantUid)).ok());
  ProbeOptions attacker_options = Managed(t, 1);
  attacker_options.uid = kTenantUid;
  ProbeRun attacker = RunProbe(attacker_options, {"counter:0:0:" + std::to_string(kLimit), "counter:self:0:0"});
  ASSERT_EQ(attacker.exit_code, 0);
  ASSERT_EQ(attacker.lines.size(), 2u);
  EXPECT_EQ(attacker.lines[0], "counter rc=1 errno=" + std::to_string(EACCES)) << "another tenant's counters";
  EXPECT_EQ(attacker.lines[1], "counter rc=0 was=0") << "its own counters file is its own";
  ProbeRun victim = RunProbe(Managed(t, 0), {"init", "alloc:mem:1048576"});
  EXPECT_EQ(FieldInt(victim.Find("alloc"), "rc"), 0) << victim.Find("alloc");
  EXPECT_EQ(t.seg().PeakBytes(0, 0), kMiB);
  EXPECT_EQ(t.seg().DeniedAllocations(0, 0), 0u);
}

TEST(MemoryLimit, ExactThroughEveryAllocationFamily) {
  for (const Family& f : Families()) {
    SCOPED_TRACE(f.name);
    TestSegment t;
    Limited(t, kLimit);
    const long expected = static_cast<long>(kLimit / f.charge);
    Probe p(Managed(t), {"init", std::string("fill:") + f.name + ":" + f.args, "wait", "freeall"});
    ASSERT_EQ(p.ReadLine(), "init rc=0,0");
    std::string fill = p.ReadLine();
    EXPECT_EQ(FieldInt(fill, "count"), expected) << fill;
    EXPECT_EQ(FieldInt(fill, "rc"), kCudaOom) << fill;
    ASSERT_EQ(p.ReadLine(), "wait ready");
    EXPECT_EQ(t.seg().ReservedBytes(0, 0), static_cast<std::uint64_t>(expected) * f.charge);
    EXPECT_GT(t.seg().ReservedBytes(0, 0) + f.charge, kLimit);
    EXPECT_EQ(t.seg().HeldByLiveSlots(0, 0), t.seg().ReservedBytes(0, 0));
    EXPECT_LE(t.seg().PeakBytes(0, 0), kLimit);
    EXPECT_EQ(p.Finish(), 0);
    EXPECT_EQ(FieldInt(p.lines().back(), "failures"), 0) << p.lines().back();
    EXPECT_EQ(t.seg().ReservedBytes(0, 0), 0u);
  }
}

// limit - 1 granule fits, one more byte does not, the last granule does.
TEST(MemoryLimit, ExactToTheByte) {
  for (const char* fam : {"mem", "managed", "async", "async_ptsz", "pool", "pool_ptsz"}) {
    SCOPED_TRACE(fam);
    TestSegment t;
    Limited(t, kLimit);
    std::string f = fam;
    ProbeRun r = RunProbe(Managed(t), {"init", "alloc:" + f + ":" + std::to_string(kLimit - 512),
                                       "alloc:" + f + ":513", "alloc:" + f + ":512", "alloc:" + f + ":1",
                                       "meminfo"});
    ASSERT_EQ(r.lines.size(), 6u);
    EXPECT_EQ(FieldInt(r.lines[1], "rc"), 0) << r.lines[1];
    EXPECT_EQ(FieldInt(r.lines[2], "rc"), kCudaOom) << r.lines[2];
    EXPECT_EQ(FieldInt(r.lines[3], "rc"), 0) << r.lines[3];
    EXPECT_EQ(FieldInt(r.lines[4], "rc"), kCudaOom) << r.lines[4];
    EXPECT_EQ(FieldInt(r.lines[5], "free"), 0) << r.lines[5];
    EXPECT_EQ(t.seg().PeakBytes(0, 0), kLimit);
    EXPECT_EQ(t.seg().DeniedAllocations(0, 0), 2u);
    EXPECT_EQ(t.seg().ReservedBytes(0, 0), 0u);  // released at exit
  }
}

TEST(MemoryLimit, VmmIsExactAtItsGranularityAndCountsRetains) {
  TestSegment t;
  Limited(t, kLimit);
  ProbeRun r = RunProbe(Managed(t), {"init", "alloc:vmm:" + std::to_string(kLimit - 2 * kMiB),
                                     "alloc:vmm:4194304", "alloc:vmm:2097152", "alloc:vmm:2097152",
                                     "free:0", "retain:2", "free:2", "alloc:vmm:" + std::to_string(kLimit),
                                     "release:2", "alloc:vmm:" + std::to_string(kLimit), "wait"});
  ASSERT_GE(r.lines.size(), 11u);
  EXPECT_EQ(FieldInt(r.lines[1], "rc"), 0);
  EXPECT_EQ(FieldInt(r.lines[2], "rc"), kCudaOom);
  EXPECT_EQ(FieldInt(r.lines[3], "rc"), 0);
  EXPECT_EQ(FieldInt(r.lines[4], "rc"), kCudaOom);
  // After a retain, one release keeps the memory (and its charge); the second frees it.
  EXPECT_EQ(FieldInt(r.lines[8], "rc"), kCudaOom) << "retained handle must stay charged";
  EXPECT_EQ(FieldInt(r.lines[9], "rc"), 0);
  EXPECT_EQ(FieldInt(r.lines[10], "rc"), 0) << "the last release must return the charge";
}

TEST(MemoryLimit, VmmChargesTheDeviceOfTheLocationNotTheCurrentContext) {
  TestSegment t(512, 2);
  ASSERT_TRUE(t.seg().SetLimit(0, 0, kLimit).ok());
  ASSERT_TRUE(t.seg().SetLimit(0, 1, 4 * kMiB).ok());
  ProbeOptions o = Managed(t);
  o.env = {"TESSERA_FAKE_CUDA_DEVICES=2"};
  ProbeRun r = RunProbe(o, {"init", "alloc:vmmdev:1:4194304", "alloc:vmmdev:1:2097152",
                            "alloc:vmmdev:0:2097152", "alloc:vmmdev:7:2097152", "wait"});
  ASSERT_GE(r.lines.size(), 5u);
  EXPECT_EQ(FieldInt(r.lines[1], "rc"), 0);
  EXPECT_EQ(FieldInt(r.lines[2], "rc"), kCudaOom);  // GPU 1 is full although the context is on 0
  EXPECT_EQ(FieldInt(r.lines[3], "rc"), 0);
  EXPECT_EQ(FieldInt(r.lines[4], "rc"), 101);       // not one of this process's GPUs
}

// A pool is charged to the device of its location: one on an ordinal this process was not given
// (a device pool created there, or that device's default/current pool) is refused like any other
// allocation there (CUDA_ERROR_INVALID_DEVICE); host pools stay uncharged; a location the shim
// cannot place is refused (CUDA_ERROR_NOT_SUPPORTED).
TEST(MemoryLimit, PoolsOnOrdinalsNotGivenAreRefused) {
  TestSegment t(512, 2);
  ASSERT_TRUE(t.seg().SetLimit(0, 0, kLimit).ok());
  ProbeOptions o = Managed(t);
  o.env = {"TESSERA_FAKE_CUDA_DEVICES=2", "TESSERA_SHIM_GPUS=0", "TESSERA_FAKE_CUDA_MEM_BYTES=268435456"};
  ProbeRun r = RunProbe(o, {"init", "fill:locpool:1:1:1048576", "alloc:defpool:1:1048576", "alloc:getpool:1:1048576",
                            "alloc:locpool:1:0:1048576", "alloc:defpool:0:1048576", "alloc:getpool:0:1048576",
                            "alloc:locpool:2:0:1048576", "alloc:locpool:3:0:1048576", "alloc:locpool:9:0:1048576",
                            "wait"});
  ASSERT_GE(r.lines.size(), 11u);
  EXPECT_EQ(r.lines[1], "fill family=locpool count=0 rc=101") << "64 MiB on GPU 0 must not buy GPU 1";
  EXPECT_EQ(FieldInt(r.lines[2], "rc"), 101) << r.lines[2];
  EXPECT_EQ(FieldInt(r.lines[3], "rc"), 101) << r.lines[3];
  for (int i = 4; i <= 8; ++i) EXPECT_EQ(FieldInt(r.lines[i], "rc"), 0) << r.lines[i];
  EXPECT_EQ(FieldInt(r.lines[9], "rc"), 801) << r.lines[9];
  EXPECT_EQ(r.lines[10], "wait ready");
  // Three 1 MiB device-pool allocations on GPU 0 were charged there; the host pools' were not.
  EXPECT_EQ(t.seg().PeakBytes(0, 0), 3 * kMiB);
  EXPECT_EQ(t.seg().PeakBytes(0, 1), 0u);
}

// A device pool of an ordinal that maps to another node GPU is charged to that GPU.
TEST(MemoryLimit, PoolsAreChargedToTheirOwnDevice) {
  TestSegment t(512, 2);
  ASSERT_TRUE(t.seg().SetLimit(0, 0, kLimit).ok());
  ASSERT_TRUE(t.seg().SetLimit(0, 1, 2 * kMiB).ok());
  ProbeOptions o = Managed(t);
  o.env = {"TESSERA_FAKE_CUDA_DEVICES=2", "TESSERA_SHIM_GPUS=0,1"};
  ProbeRun r = RunProbe(o, {"init", "fill:defpool:1:1048576", "fill:locpool:1:1:1048576", "wait"});
  ASSERT_GE(r.lines.size(), 4u);
  EXPECT_EQ(r.lines[1], "fill family=defpool count=2 rc=2");
  EXPECT_EQ(r.lines[2], "fill family=locpool count=0 rc=2");
  EXPECT_EQ(t.seg().PeakBytes(0, 0), 0u);
  EXPECT_EQ(t.seg().PeakBytes(0, 1), 2 * kMiB);
}

// clone(2) without fork() runs no pthread_atfork handler: the shim still notices the new pid and
// charges the child to a slot of its own, so the parent's exit releases only the parent's memory.
TEST(MemoryLimit, ACloneChildIsChargedToItsOwnSlotAndOutlivesItsParent) {
  TestSegment t;
  Limited(t, kLimit);
  Probe p(Managed(t), {"init", "alloc:mem:1048576", "clone:4194304"});
  EXPECT_EQ(p.ReadLine(), "init rc=0,0");
  EXPECT_EQ(FieldInt(p.ReadLine(), "rc"), 0);
  EXPECT_EQ(p.ReadLine(), "clone child rc=0");
  EXPECT_GT(FieldInt(p.ReadLine(), "pid"), 0);
  EXPECT_EQ(p.WaitExit(), 0);  // the parent is gone; the child still holds 4 MiB
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), 4 * kMiB);
  EXPECT_EQ(t.seg().HeldByLiveSlots(0, 0), 4 * kMiB);
  EXPECT_EQ(t.seg().ActiveSlots(), 1);
  EXPECT_EQ(t.seg().Reconcile().slots_reclaimed, 0);
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), 4 * kMiB);
  EXPECT_EQ(p.Finish(), 0);  // the child's exit closes the last stdout: its release is done
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), 0u);
  EXPECT_EQ(t.seg().ActiveSlots(), 0);
}

TEST(MemoryLimit, PitchTopUpThatDoesNotFitIsRefusedAndFreed) {
  TestSegment t;
  Limited(t, kLimit);
  // Leave exactly width x height = 1,024,000 bytes; the driver's pitch needs 1,048,576.
  Probe p(Managed(t), {"init", "alloc:mem:" + std::to_string(kLimit - 1024000), "alloc:pitch:1000:1024", "wait"});
  p.ReadLine();
  EXPECT_EQ(FieldInt(p.ReadLine(), "rc"), 0);
  std::string pitch = p.ReadLine();
  EXPECT_EQ(FieldInt(pitch, "rc"), kCudaOom) << pitch;
  ASSERT_EQ(p.ReadLine(), "wait ready");
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), kLimit - 1024000);
  EXPECT_EQ(p.Finish(), 0);
}

TEST(MemoryLimit, HostMemoryIsNeverCharged) {
  TestSegment t;
  Limited(t, kMiB);
  Probe p(Managed(t), {"init", "alloc:hostreg:8388608", "alloc:allochost:8388608", "alloc:hostpool:8388608",
                       "alloc:vmmhost:8388608", "alloc:mem:1048576", "alloc:mem:512", "wait"});
  p.ReadLine();
  for (int i = 0; i < 5; ++i) {
    std::string l = p.ReadLine();
    EXPECT_EQ(FieldInt(l, "rc"), 0) << l;
  }
  EXPECT_EQ(FieldInt(p.ReadLine(), "rc"), kCudaOom);
  ASSERT_EQ(p.ReadLine(), "wait ready");
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), kMiB);
  EXPECT_EQ(p.Finish(), 0);
}

TEST(MemoryLimit, DriverFailuresRollBackAndPassThroughUnchanged) {
  TestSegment t;
  Limited(t, kLimit);
  Probe p(Managed(t), {"init", "inject:cuMemAlloc_v2:2:1", "alloc:mem:1048576", "inject:cuMemCreate:999:1",
                       "alloc:vmm:2097152", "inject:cuArrayCreate_v2:1:1", "alloc:array:128:2048",
                       "inject:cuMemAllocAsync_ptsz:201:1", "alloc:async_ptsz:4096", "wait"});
  p.ReadLine();
  p.ReadLine();
  EXPECT_EQ(FieldInt(p.ReadLine(), "rc"), 2);
  p.ReadLine();
  EXPECT_EQ(FieldInt(p.ReadLine(), "rc"), 999);
  p.ReadLine();
  EXPECT_EQ(FieldInt(p.ReadLine(), "rc"), 1);
  p.ReadLine();
  EXPECT_EQ(FieldInt(p.ReadLine(), "rc"), 201);
  ASSERT_EQ(p.ReadLine(), "wait ready");
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), 0u) << "every failed allocation must be rolled back";
  // The reservations were made before each driver call (the VMM one, 2 MiB, was the largest).
  EXPECT_EQ(t.seg().PeakBytes(0, 0), 2 * kMiB);
  EXPECT_EQ(p.Finish(), 0);
}

TEST(MemoryLimit, FreeFailureKeepsTheCharge) {
  TestSegment t;
  Limited(t, kLimit);
  Probe p(Managed(t), {"init", "alloc:mem:1048576", "inject:cuMemFree_v2:1:1", "free:0", "alloc:mem:512",
                       "wait"});
  for (int i = 0; i < 3; ++i) p.ReadLine();
  EXPECT_EQ(FieldInt(p.ReadLine(), "rc"), 1);
  p.ReadLine();
  ASSERT_EQ(p.ReadLine(), "wait ready");
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), kMiB + 512);
  p.Kill();
  EXPECT_EQ(t.seg().Reconcile().bytes_released, kMiB + 512);
  Probe q(Managed(t), {"init", "alloc:mem:1048576", "inject:cuMemFree_v2:1:1", "free:0", "free:0", "wait"});
  for (int i = 0; i < 5; ++i) q.ReadLine();
  ASSERT_EQ(q.ReadLine(), "wait ready");
  EXPECT_EQ(t.seg().HeldByLiveSlots(0, 0), 0u) << "the retried free releases the charge";
  q.Kill();
}

TEST(MemoryLimit, MemGetInfoShowsTheTenantViewAndNeverUnderflows) {
  TestSegment t;
  Limited(t, kLimit);
  ProbeRun r = RunProbe(Managed(t), {"init", "alloc:mem:16777216", "meminfo", "meminfo32", "totalmem"});
  ASSERT_EQ(r.lines.size(), 5u);
  EXPECT_EQ(FieldInt(r.lines[2], "free"), static_cast<long>(48 * kMiB)) << r.lines[2];
  EXPECT_EQ(FieldInt(r.lines[2], "total"), static_cast<long>(kLimit));
  EXPECT_EQ(FieldInt(r.lines[3], "free"), static_cast<long>(48 * kMiB)) << r.lines[3];
  EXPECT_EQ(FieldInt(r.lines[4], "total"), static_cast<long>(kLimit));
  // Another process of the tenant holds 60 MiB, then the node lowers the limit to 32 MiB.
  StatusOr<TenantView> v = TenantView::Open(t.policy, t.CountersFile(0), 0);
  ASSERT_TRUE(v.ok());
  StatusOr<int> slot = v->ClaimSlot(::getpid(), ProcessStartTime(::getpid()).value());
  ASSERT_TRUE(slot.ok());
  ASSERT_EQ(SlotOp(*t.seg().counters(0), *slot, 0, OpDirection::kReserve, 60 * kMiB, kLimit),
            SlotOpResult::kApplied);
  ASSERT_TRUE(t.seg().SetLimit(0, 0, 32 * kMiB).ok());
  r = RunProbe(Managed(t), {"init", "meminfo", "alloc:mem:512"});
  ASSERT_EQ(r.lines.size(), 3u);
  EXPECT_EQ(r.lines[1], "meminfo rc=0 free=0 total=" + std::to_string(32 * kMiB));
  EXPECT_EQ(FieldInt(r.lines[2], "rc"), kCudaOom);
  v->ReleaseSlot(*slot);
}

TEST(MemoryLimit, UnmanagedProcessesPassThrough) {
  ProbeRun r = RunProbe(ProbeOptions{}, {"init", "alloc:mem:1073741824", "meminfo"});
  ASSERT_EQ(r.lines.size(), 3u);
  EXPECT_EQ(FieldInt(r.lines[1], "rc"), 0);
  EXPECT_EQ(FieldInt(r.lines[2], "total"), 16L << 30);
}

TEST(MemoryLimit, MisconfigurationFailsClosedUnlessOpen) {
  TestSegment t;
  Limited(t, kLimit);
  for (const std::string& bad : {std::string("TESSERA_SHIM_TENANT=64"), std::string("TESSERA_SHIM_TENANT=x"),
                                 "TESSERA_SHIM_POLICY=" + t.policy + ".missing", std::string("TESSERA_SHIM_GPUS=0,5")}) {
    SCOPED_TRACE(bad);
    ProbeOptions o = Managed(t);
    o.env = {bad};
    ProbeRun r = RunProbe(o, {"init", "alloc:mem:4096", "alloc:vmm:2097152"});
    ASSERT_EQ(r.lines.size(), 3u);
    EXPECT_EQ(FieldInt(r.lines[1], "rc"), 800);
    EXPECT_EQ(FieldInt(r.lines[2], "rc"), 800);
    o.env.push_back("TESSERA_SHIM_FAIL=open");
    r = RunProbe(o, {"init", "alloc:mem:4096"});
    ASSERT_EQ(r.lines.size(), 2u);
    EXPECT_EQ(FieldInt(r.lines[1], "rc"), 0);
  }
}

// In a node directory (one with a `members` folder, tessera/node/node_dir.h) the tenant is the one
// the node side assigned to the process's nearest member ancestor, never TESSERA_SHIM_TENANT alone:
// here the test process is the member, of tenant 1; the probe says tenant 0 and is charged as 1
// (with one line on stderr naming the ignored value). A stale record (wrong start time) or none
// assigns nothing: fail closed. Before members existed, the probe was charged as tenant 0, whose
// limit is 0 here, and its allocation was refused.
TEST(ShimIdentity, TheNodeAssignedTenantWinsOverTheEnvironment) {
  TestSegment t;
  Limited(t, kLimit, 1);  // tenant 0 keeps limit 0: no access
  const std::string members = t.dir.path() + "/members";
  ASSERT_EQ(::mkdir(members.c_str(), 0755), 0);
  const std::string record = members + "/" + std::to_string(::getpid());
  const std::string start = std::to_string(ProcessStartTime(::getpid()).value());
  std::ofstream(record) << start << " 1\n";
  ProbeOptions o = Managed(t, 0);
  o.stderr_path = t.dir.path() + "/probe.stderr";
  ProbeRun r = RunProbe(o, {"init", "alloc:mem:1048576"});
  EXPECT_EQ(FieldInt(r.Find("alloc"), "rc"), 0) << r.Find("alloc");
  const std::string err = ReadWhole(o.stderr_path);
  EXPECT_NE(err.find("TESSERA_SHIM_TENANT='0' ignored: the node assigned tenant 1"), std::string::npos) << err;
  EXPECT_EQ(t.seg().PeakBytes(1, 0), kMiB);
  EXPECT_EQ(t.seg().PeakBytes(0, 0), 0u);
  for (const std::string& text : {start + "1 1\n", std::string()}) {  // stale start time; no record
    SCOPED_TRACE(text);
    std::ofstream(record) << text;
    if (text.empty()) std::remove(record.c_str());
    ProbeRun refused = RunProbe(Managed(t, 1), {"init", "alloc:mem:1048576"});
    EXPECT_EQ(FieldInt(refused.Find("alloc"), "rc"), 800) << refused.Find("alloc");
  }
}

// In a Kubernetes claim's container (tessera/integrations/k8s/dra_driver.h) the DRA driver
// mounts a `tenant` file next to the policy, read-only: the tenant is the one it names, never
// TESSERA_SHIM_TENANT. The probe says tenant 0 (limit 0: no access) and is charged as the file's
// tenant 1; a file that holds no index refuses device memory (fail closed), whatever the
// environment says. Before the file was read, the probe was charged as 0 and refused.
TEST(ShimIdentity, AClaimsTenantFileWinsOverTheEnvironment) {
  TestSegment t;
  Limited(t, kLimit, 1);  // tenant 0 keeps limit 0: no access
  const std::string tenant_file = t.dir.path() + "/tenant";
  std::ofstream(tenant_file) << "1\n";
  ProbeOptions o = Managed(t, 0);
  o.stderr_path = t.dir.path() + "/probe.stderr";
  ProbeRun r = RunProbe(o, {"init", "alloc:mem:1048576"});
  EXPECT_EQ(FieldInt(r.Find("alloc"), "rc"), 0) << r.Find("alloc");
  const std::string err = ReadWhole(o.stderr_path);
  EXPECT_NE(err.find("TESSERA_SHIM_TENANT='0' ignored: '" + tenant_file + "' says tenant 1"), std::string::npos) << err;
  EXPECT_EQ(t.seg().PeakBytes(1, 0), kMiB);
  EXPECT_EQ(t.seg().PeakBytes(0, 0), 0u);
  for (const std::string& text : {std::string("x\n"), std::string("64\n"), std::string()}) {
    SCOPED_TRACE(text);
    std::ofstream(tenant_file) << text;
    ProbeRun refused = RunProbe(Managed(t, 1), {"init", "alloc:mem:1048576"});
    EXPECT_EQ(FieldInt(refused.Find("alloc"), "rc"), 800) << refused.Find("alloc");
  }
}

TEST(MemoryLimit, OrdinalsMapToNodeGpus) {
  TestSegment t(512, 2);
  ASSERT_TRUE(t.seg().SetLimit(0, 0, kLimit).ok());
  ASSERT_TRUE(t.seg().SetLimit(0, 1, 2 * kMiB).ok());
  ProbeOptions o = Managed(t);
  o.env = {"TESSERA_FAKE_CUDA_DEVICES=2", "TESSERA_SHIM_GPUS=1"};  // ordinal 0 is node GPU 1
  ProbeRun r = RunProbe(o, {"init", "alloc:mem:2097152", "alloc:mem:512", "ctx:1", "alloc:mem:512", "wait"});
  ASSERT_GE(r.lines.size(), 5u);
  EXPECT_EQ(FieldInt(r.lines[1], "rc"), 0);
  EXPECT_EQ(FieldInt(r.lines[2], "rc"), kCudaOom);
  EXPECT_EQ(FieldInt(r.lines[4], "rc"), 101);  // ordinal 1 is not assigned to this process
}

TEST(MemoryLimit, ExecReleasesWhatTheEarlierImageHeld) {
  TestSegment t;
  Limited(t, kLimit);
  Probe p(Managed(t), {"init", "alloc:mem:8388608", "exec:init,alloc:mem:512,wait"});
  EXPECT_EQ(FieldInt(p.ReadLine(), "rc"), 0);  // init
  EXPECT_EQ(FieldInt(p.ReadLine(), "rc"), 0);  // 8 MiB, then exec
  EXPECT_EQ(p.ReadLine(), "init rc=0,0");
  EXPECT_EQ(FieldInt(p.ReadLine(), "rc"), 0);
  ASSERT_EQ(p.ReadLine(), "wait ready");
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), 512u);
  EXPECT_EQ(t.seg().ActiveSlots(), 1);
  EXPECT_EQ(p.Finish(), 0);
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), 0u);
}

// Eight forked processes allocate at the same moment; together they get exactly what fits.
TEST(MemoryLimit, EightConcurrentProcessesNeverExceedTheLimit) {
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    TestSegment t;
    Limited(t, kLimit);
    Probe p(Managed(t), {"init", "forkfill:8:3145728"});
    p.ReadLine();
    std::string counts = p.ReadLine();
    EXPECT_EQ(FieldInt(counts, "total"), 21) << counts;  // 21 x 3 MiB = 63 MiB <= 64 MiB
    ASSERT_EQ(p.ReadLine(), "wait ready");
    EXPECT_EQ(t.seg().ReservedBytes(0, 0), 63 * kMiB);
    EXPECT_EQ(t.seg().HeldByLiveSlots(0, 0), 63 * kMiB);
    EXPECT_LE(t.seg().PeakBytes(0, 0), kLimit);
    EXPECT_GE(t.seg().ActiveSlots(), 8);
    EXPECT_EQ(p.Finish(), 0);
    EXPECT_EQ(t.seg().ReservedBytes(0, 0), 0u);
    EXPECT_EQ(t.seg().ActiveSlots(), 0);
  }
}

}  // namespace
}  // namespace tessera::enforce
