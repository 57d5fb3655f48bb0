// The lease board ABI and the tenant-side gate (tessera/enforce/lease.h): creating and
// attaching boards (each refusal named), the one-load LeaseHeld, launch counting and the
// duration model (kernels, graphs, the caller's estimate), stream capture never blocking, the
// futex wait path timing out cleanly and being woken from another process through a
// MAP_SHARED memfd board.
#include "tessera/enforce/lease.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <memory>
#include <thread>

namespace tessera::enforce {
namespace {

constexpr uint64_t kMs = 1'000'000;

struct alignas(64) Memory {
  unsigned char bytes[sizeof(LeaseBoard) + 64];
};

// The arbiter's half of a grant, by hand: the word, then the sequence and the wake.
void Grant(LeaseBoard& b, uint32_t slot, uint64_t expiry_ns) {
  b.lease.word.store(PackLeaseWord(slot, expiry_ns), std::memory_order_release);
  b.node[slot].wake_seq.fetch_add(1, std::memory_order_acq_rel);
  FutexWake(b.node[slot].wake_seq, INT_MAX);
}

class LeaseBoardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(InitLeaseBoard(mem_.get(), sizeof(Memory), 3, 123, &board_), LeaseBoardCheck::kOk);
  }
  std::unique_ptr<Memory> mem_ = std::make_unique<Memory>();
  LeaseBoard* board_ = nullptr;
};

TEST_F(LeaseBoardTest, InitWritesAVersionedHeaderAndEmptyLease) {
  EXPECT_EQ(sizeof(LeaseBoard), 270336u);  // 2 node pages + one 4 KiB page per tenant slot
  EXPECT_EQ(static_cast<void*>(board_), static_cast<void*>(mem_.get()));
  EXPECT_EQ(board_->header.magic.load(), kLeaseBoardMagic);
  EXPECT_EQ(board_->header.abi_version, kLeaseAbiVersion);
  EXPECT_EQ(board_->header.size_bytes, sizeof(LeaseBoard));
  EXPECT_EQ(board_->header.max_tenants, 64u);
  EXPECT_EQ(board_->header.gpu_index, 3u);
  EXPECT_EQ(board_->header.created_ns, 123u);
  EXPECT_EQ(board_->lease.word.load(), 0u);
  for (uint32_t s = 0; s < kLeaseMaxTenants; ++s) {
    EXPECT_EQ(board_->node[s].state.load(), 0u);
    EXPECT_FALSE(LeaseHeld(*board_, s, 0));
  }
  LeaseBoard* again = nullptr;
  EXPECT_EQ(AttachLeaseBoard(mem_.get(), sizeof(Memory), &again), LeaseBoardCheck::kOk);
  EXPECT_EQ(again, board_);
}

TEST_F(LeaseBoardTest, InitAndAttachRefuseBadMemoryByName) {
  LeaseBoard* out = nullptr;
  EXPECT_EQ(InitLeaseBoard(nullptr, 1 << 20, 0, 0, &out), LeaseBoardCheck::kNull);
  EXPECT_EQ(InitLeaseBoard(mem_->bytes + 8, sizeof(LeaseBoard), 0, 0, &out), LeaseBoardCheck::kMisaligned);
  EXPECT_EQ(InitLeaseBoard(mem_.get(), sizeof(LeaseBoard) - 1, 0, 0, &out), LeaseBoardCheck::kTooSmall);
  EXPECT_EQ(out, nullptr);
  auto zero = std::make_unique<Memory>();
  std::memset(zero.get(), 0, sizeof(Memory));
  EXPECT_EQ(AttachLeaseBoard(zero.get(), sizeof(Memory), &out), LeaseBoardCheck::kBadMagic);
  board_->header.abi_version = kLeaseAbiVersion + 1;
  EXPECT_EQ(AttachLeaseBoard(mem_.get(), sizeof(Memory), &out), LeaseBoardCheck::kVersionMismatch);
  board_->header.abi_version = kLeaseAbiVersion;
  board_->header.max_tenants = 32;
  EXPECT_EQ(AttachLeaseBoard(mem_.get(), sizeof(Memory), &out), LeaseBoardCheck::kSizeMismatch);
  EXPECT_EQ(out, nullptr);
  EXPECT_STREQ(LeaseBoardCheckName(LeaseBoardCheck::kVersionMismatch), "ABI version mismatch");
  EXPECT_STREQ(GateResultName(GateResult::kCaptured), "captured");
}

TEST_F(LeaseBoardTest, LeaseHeldOnlyByTheHolderBeforeExpiry) {
  board_->lease.word.store(PackLeaseWord(5, 20 * kMs));
  EXPECT_TRUE(LeaseHeld(*board_, 5, 0));
  EXPECT_TRUE(LeaseHeld(*board_, 5, 20 * kMs - 1));
  EXPECT_FALSE(LeaseHeld(*board_, 5, 20 * kMs));
  EXPECT_FALSE(LeaseHeld(*board_, 4, 1 * kMs));
  EXPECT_FALSE(LeaseHeld(*board_, 6, 1 * kMs));
  // The word keeps the expiry rounded down to 256 ns: never later than the exact expiry.
  board_->lease.word.store(PackLeaseWord(63, 1000));
  EXPECT_TRUE(LeaseHeld(*board_, 63, 767));
  EXPECT_FALSE(LeaseHeld(*board_, 63, 768));
}

TEST_F(LeaseBoardTest, AdmittedLaunchesAreCountedWithTheDurationModel) {
  LeaseTenantSlot& s = board_->slots[2];
  board_->node[2].kernel_est_ns.store(200'000);
  EXPECT_EQ(TryAdmitLaunch(*board_, 2, {}, 1 * kMs), GateResult::kMustWait);
  EXPECT_EQ(s.tenant.launches.load(), 0u);  // nothing written when refused
  board_->lease.word.store(PackLeaseWord(2, 10 * kMs));
  EXPECT_EQ(TryAdmitLaunch(*board_, 2, {}, 1 * kMs), GateResult::kAdmitted);
  EXPECT_EQ(TryAdmitLaunch(*board_, 2, {.kind = LaunchKind::kGraph, .graph_kernels = 12}, 2 * kMs),
            GateResult::kAdmitted);
  EXPECT_EQ(TryAdmitLaunch(*board_, 2, {.kind = LaunchKind::kCooperative, .est_ns = 3 * kMs}, 3 * kMs),
            GateResult::kAdmitted);
  EXPECT_EQ(s.tenant.launches.load(), 3u);
  EXPECT_EQ(s.tenant.graph_launches.load(), 1u);
  EXPECT_EQ(s.tenant.submitted_est_ns.load(), 200'000u + 12 * 200'000u + 3 * kMs);
  EXPECT_EQ(s.tenant.last_launch_ns.load(), 3 * kMs);
  EXPECT_EQ(TryAdmitLaunch(*board_, 64, {}, 0), GateResult::kBadSlot);
  EXPECT_EQ(LaunchCostNs(board_->node[2], {.kind = LaunchKind::kGraph, .graph_kernels = 0}), 200'000u);
}

TEST_F(LeaseBoardTest, StreamCaptureIsNeverBlockedOnlyCounted) {
  // Another tenant holds the lease for a long time and no arbiter runs.
  board_->lease.word.store(PackLeaseWord(0, UINT64_MAX - 1));
  const uint64_t t0 = MonotonicNowNs();
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(GateLaunch(*board_, 1, {.capturing = true}, 10'000 * kMs), GateResult::kCaptured);
  }
  EXPECT_EQ(GateLaunch(*board_, 1, {.kind = LaunchKind::kGraph, .capturing = true}, 10'000 * kMs),
            GateResult::kCaptured);
  EXPECT_LT(MonotonicNowNs() - t0, 100 * kMs);
  EXPECT_EQ(board_->slots[1].tenant.captured_launches.load(), 101u);
  EXPECT_EQ(board_->slots[1].tenant.launches.load(), 0u);  // charged at cuGraphLaunch instead
  EXPECT_EQ(board_->slots[1].tenant.waits.load(), 0u);
}

TEST_F(LeaseBoardTest, WaitTimesOutAndUnregisters) {
  const uint64_t t0 = MonotonicNowNs();
  EXPECT_EQ(GateLaunch(*board_, 4, {}, 20 * kMs), GateResult::kTimedOut);
  const uint64_t took = MonotonicNowNs() - t0;
  EXPECT_GE(took, 20 * kMs);
  EXPECT_LT(took, 2000 * kMs);
  const LeaseSlotTenantLine& t = board_->slots[4].tenant;
  EXPECT_EQ(t.waiting.load(), 0u);
  EXPECT_EQ(t.waits.load(), 1u);
  EXPECT_EQ(t.wait_epoch.load(), 1u);  // the arbiter was told (its own doorbell: WaitForDoorbells)
  EXPECT_GE(t.wait_ns.load(), 20 * kMs);
  EXPECT_EQ(t.launches.load(), 0u);
  EXPECT_EQ(board_->arbiter.doorbell.load(), 0u);  // the node's page is not written by a tenant
}

// The arbiter's sleep (WaitForDoorbells) ends when any tenant rings its own doorbell (its
// wait_epoch, on its own page) or the node rings the node's; a ring between the snapshot and the
// sleep is not lost; with no ring it lasts the timeout.
TEST_F(LeaseBoardTest, TheArbitersSleepEndsWhenATenantRingsItsOwnDoorbell) {
  for (int slot : {5, 63}) board_->node[slot].state.store(static_cast<uint32_t>(LeaseSlotState::kActive));
  DoorbellSnapshot seen = ReadDoorbells(*board_);
  EXPECT_EQ(seen.active, (uint64_t{1} << 5) | (uint64_t{1} << 63));
  BeginLeaseWait(*board_, 5);  // rung after the snapshot, before the sleep
  uint64_t t0 = MonotonicNowNs();
  WaitForDoorbells(*board_, seen, 10'000 * kMs);
  EXPECT_LT(MonotonicNowNs() - t0, 1000 * kMs);
  seen = ReadDoorbells(*board_);
  std::thread tenant([&] {
    usleep(20'000);
    RenewLeaseWait(*board_, 63);
  });
  t0 = MonotonicNowNs();
  WaitForDoorbells(*board_, seen, 10'000 * kMs);
  EXPECT_LT(MonotonicNowNs() - t0, 5000 * kMs);
  tenant.join();
  EXPECT_EQ(board_->slots[63].tenant.wait_epoch.load(), 1u);
  EXPECT_EQ(board_->arbiter.doorbell.load(), 0u);  // no tenant wrote the node's page
  seen = ReadDoorbells(*board_);
  RingNodeDoorbell(*board_);
  t0 = MonotonicNowNs();
  WaitForDoorbells(*board_, seen, 10'000 * kMs);
  EXPECT_LT(MonotonicNowNs() - t0, 1000 * kMs);
  seen = ReadDoorbells(*board_);
  t0 = MonotonicNowNs();
  WaitForDoorbells(*board_, seen, 20 * kMs);
  EXPECT_GE(MonotonicNowNs() - t0, 20 * kMs);
  // A free slot is not waited on (it has no tenant to grant; the arbiter's step that activates
  // it takes a new snapshot): its ring does not end the sleep.
  seen = ReadDoorbells(*board_);
  RenewLeaseWait(*board_, 7);
  t0 = MonotonicNowNs();
  WaitForDoorbells(*board_, seen, 20 * kMs);
  EXPECT_GE(MonotonicNowNs() - t0, 20 * kMs);
}

TEST_F(LeaseBoardTest, ArbiterAliveReadsTheHeartbeat) {
  EXPECT_FALSE(ArbiterAlive(*board_, 5 * kMs, 100 * kMs));  // never stepped
  board_->arbiter.heartbeat_ns.store(50 * kMs);
  EXPECT_TRUE(ArbiterAlive(*board_, 100 * kMs, 100 * kMs));
  EXPECT_FALSE(ArbiterAlive(*board_, 150 * kMs, 100 * kMs));
}

// A waiter in another process sleeps in FUTEX_WAIT on a MAP_SHARED memfd board and is woken
// by a grant from this process.
TEST(LeaseCrossProcessTest, WaiterInAnotherProcessIsWokenByTheGrant) {
  const int fd = memfd_create("tessera-lease-test", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, sizeof(LeaseBoard)), 0);
  void* mem = mmap(nullptr, sizeof(LeaseBoard), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(mem, MAP_FAILED);
  LeaseBoard* board = nullptr;
  ASSERT_EQ(InitLeaseBoard(mem, sizeof(LeaseBoard), 0, MonotonicNowNs(), &board), LeaseBoardCheck::kOk);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child maps the same memfd again (as a tenant process would) and waits up to 10 s.
    void* m = mmap(nullptr, sizeof(LeaseBoard), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    LeaseBoard* b = nullptr;
    if (m == MAP_FAILED || AttachLeaseBoard(m, sizeof(LeaseBoard), &b) != LeaseBoardCheck::kOk) _exit(3);
    const GateResult r = GateLaunch(*b, 7, {}, 10'000 * kMs);
    _exit(r == GateResult::kAdmitted ? 0 : 2);
  }
  // Wait until the child is parked (its registration is visible), then grant slot 7.
  const uint64_t t0 = MonotonicNowNs();
  while (board->slots[7].tenant.waiting.load() == 0 && MonotonicNowNs() - t0 < 5000 * kMs) usleep(200);
  ASSERT_EQ(board->slots[7].tenant.waiting.load(), 1u);
  usleep(20'000);  // let it reach FUTEX_WAIT
  const uint64_t granted = MonotonicNowNs();
  Grant(*board, 7, granted + 1000 * kMs);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const uint64_t woke = MonotonicNowNs() - granted;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_LT(woke, 1000 * kMs);  // woken by the futex, not by its 10 s timeout
  EXPECT_EQ(board->slots[7].tenant.launches.load(), 1u);
  EXPECT_EQ(board->slots[7].tenant.waiting.load(), 0u);
  munmap(mem, sizeof(LeaseBoard));
  close(fd);
}

}  // namespace
}  // namespace tessera::enforce
