#include "tessera/enforce/lease.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>

namespace tessera::enforce {
namespace {

// std::atomic<uint32_t> is a plain 4-byte word (static_assert'ed in the header), which is what
// the kernel's futex operates on. No FUTEX_PRIVATE_FLAG: waiters and wakers are in different
// processes that map the same pages.
uint32_t* FutexAddress(std::atomic<uint32_t>& word) noexcept { return reinterpret_cast<uint32_t*>(&word); }

}  // namespace

const char* LeaseBoardCheckName(LeaseBoardCheck check) noexcept {
  switch (check) {
    case LeaseBoardCheck::kOk: return "ok";
    case LeaseBoardCheck::kNull: return "null";
    case LeaseBoardCheck::kMisaligned: return "misaligned (needs 64-byte alignment)";
    case LeaseBoardCheck::kTooSmall: return "too small";
    case LeaseBoardCheck::kBadMagic: return "bad magic (not a lease board)";
    case LeaseBoardCheck::kVersionMismatch: return "ABI version mismatch";
    case LeaseBoardCheck::kSizeMismatch: return "size mismatch";
  }
  return "unknown";
}

const char* GateResultName(GateResult result) noexcept {
  switch (result) {
    case GateResult::kAdmitted: return "admitted";
    case GateResult::kCaptured: return "captured";
    case GateResult::kMustWait: return "must_wait";
    case GateResult::kTimedOut: return "timed_out";
    case GateResult::kBadSlot: return "bad_slot";
  }
  return "unknown";
}

namespace {
LeaseBoardCheck CheckMemory(const void* memory, size_t bytes) noexcept {
  if (memory == nullptr) return LeaseBoardCheck::kNull;
  if (reinterpret_cast<uintptr_t>(memory) % alignof(LeaseBoard) != 0) return LeaseBoardCheck::kMisaligned;
  if (bytes < sizeof(LeaseBoard)) return LeaseBoardCheck::kTooSmall;
  return LeaseBoardCheck::kOk;
}
}  // namespace

LeaseBoardCheck InitLeaseBoard(void* memory, size_t bytes, uint32_t gpu_index, uint64_t now_ns,
                               LeaseBoard** out) noexcept {
  if (const LeaseBoardCheck c = CheckMemory(memory, bytes); c != LeaseBoardCheck::kOk) return c;
  std::memset(memory, 0, sizeof(LeaseBoard));
  // Value-initialisation: every atomic starts at zero (the memset above makes that true of the
  // bytes too, for readers that attach while we construct).
  LeaseBoard* board = new (memory) LeaseBoard();
  board->header.abi_version = kLeaseAbiVersion;
  board->header.size_bytes = static_cast<uint32_t>(sizeof(LeaseBoard));
  board->header.max_tenants = kLeaseMaxTenants;
  board->header.gpu_index = gpu_index;
  board->header.created_ns = now_ns;
  board->header.magic.store(kLeaseBoardMagic, std::memory_order_release);
  if (out != nullptr) *out = board;
  return LeaseBoardCheck::kOk;
}

LeaseBoardCheck AttachLeaseBoard(void* memory, size_t bytes, LeaseBoard** out) noexcept {
  if (const LeaseBoardCheck c = CheckMemory(memory, bytes); c != LeaseBoardCheck::kOk) return c;
  // The memory holds a LeaseBoard constructed by InitLeaseBoard (in this or another process).
  LeaseBoard* board = std::launder(reinterpret_cast<LeaseBoard*>(memory));
  if (board->header.magic.load(std::memory_order_acquire) != kLeaseBoardMagic) return LeaseBoardCheck::kBadMagic;
  if (board->header.abi_version != kLeaseAbiVersion) return LeaseBoardCheck::kVersionMismatch;
  if (board->header.size_bytes != sizeof(LeaseBoard) || board->header.max_tenants != kLeaseMaxTenants) {
    return LeaseBoardCheck::kSizeMismatch;
  }
  if (out != nullptr) *out = board;
  return LeaseBoardCheck::kOk;
}

uint64_t MonotonicNowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

bool FutexWait(std::atomic<uint32_t>& word, uint32_t expected, uint64_t timeout_ns) noexcept {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000ull);
  ts.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000ull);
  // Relative timeout on CLOCK_MONOTONIC (FUTEX_WAIT's definition).
  const long rc = syscall(SYS_futex, FutexAddress(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
  return !(rc == -1 && errno == ETIMEDOUT);
}

void FutexWake(std::atomic<uint32_t>& word, int count) noexcept {
  syscall(SYS_futex, FutexAddress(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
}

namespace {
// The tenant's doorbell is its own wait_epoch (the arbiter sleeps on all of them, WaitForDoorbells):
// a tenant never writes the node's page.
void RingTenantDoorbell(LeaseSlotTenantLine& t) noexcept {
  t.wait_epoch.fetch_add(1, std::memory_order_acq_rel);
  FutexWake(t.wait_epoch, 1);
}

// struct futex_waitv of <linux/futex.h> (5.16+), spelled out so that older headers build.
struct FutexWaitv {
  uint64_t val;
  uint64_t uaddr;
  uint32_t flags;
  uint32_t reserved;
};
constexpr uint32_t kFutex2Size32 = 0x02;  // FUTEX2_SIZE_U32; shared (no FUTEX2_PRIVATE)
#ifdef SYS_futex_waitv
constexpr long kSysFutexWaitv = SYS_futex_waitv;
#else
constexpr long kSysFutexWaitv = 449;  // the same number on every architecture (asm-generic)
#endif

bool EpochsDiffer(const LeaseBoard& board, const DoorbellSnapshot& seen) noexcept {
  if (board.arbiter.doorbell.load(std::memory_order_acquire) != seen.doorbell) return true;
  for (uint32_t i = 0; i < kLeaseMaxTenants; ++i) {
    if ((seen.active >> i & 1) != 0 && board.slots[i].tenant.wait_epoch.load(std::memory_order_acquire) != seen.epoch[i])
      return true;
  }
  return false;
}
}  // namespace

DoorbellSnapshot ReadDoorbells(const LeaseBoard& board) noexcept {
  DoorbellSnapshot s;
  s.doorbell = board.arbiter.doorbell.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < kLeaseMaxTenants; ++i) {
    s.epoch[i] = board.slots[i].tenant.wait_epoch.load(std::memory_order_acquire);
    if (board.node[i].state.load(std::memory_order_acquire) == static_cast<uint32_t>(LeaseSlotState::kActive))
      s.active |= uint64_t{1} << i;
  }
  return s;
}

void WaitForDoorbells(LeaseBoard& board, const DoorbellSnapshot& seen, uint64_t timeout_ns) noexcept {
  static std::atomic<bool> no_waitv{false};
  const uint64_t deadline = MonotonicNowNs() + timeout_ns;
  if (!no_waitv.load(std::memory_order_relaxed)) {
    FutexWaitv w[kLeaseMaxTenants + 1];
    w[0] = {seen.doorbell, reinterpret_cast<uint64_t>(FutexAddress(board.arbiter.doorbell)), kFutex2Size32, 0};
    uint32_t n = 1;
    for (uint32_t i = 0; i < kLeaseMaxTenants; ++i) {
      if ((seen.active >> i & 1) == 0) continue;
      w[n++] = {seen.epoch[i], reinterpret_cast<uint64_t>(FutexAddress(board.slots[i].tenant.wait_epoch)),
                kFutex2Size32, 0};
    }
    timespec until;
    until.tv_sec = static_cast<time_t>(deadline / 1'000'000'000ull);
    until.tv_nsec = static_cast<long>(deadline % 1'000'000'000ull);
    // Returns at once (EAGAIN) when a word already differs: a ring between the snapshot and here
    // is not lost.
    const long rc = syscall(kSysFutexWaitv, w, n, 0, &until, CLOCK_MONOTONIC);
    if (rc != -1 || errno != ENOSYS) return;
    no_waitv.store(true, std::memory_order_relaxed);
  }
  for (;;) {
    if (EpochsDiffer(board, seen)) return;
    const uint64_t now = MonotonicNowNs();
    if (now >= deadline) return;
    FutexWait(board.arbiter.doorbell, seen.doorbell, std::min<uint64_t>(deadline - now, 1'000'000));
  }
}

void RingNodeDoorbell(LeaseBoard& board) noexcept {
  board.arbiter.doorbell.fetch_add(1, std::memory_order_release);
  FutexWake(board.arbiter.doorbell, 1);
}

void BeginLeaseWait(LeaseBoard& board, uint32_t slot) noexcept {
  if (slot >= kLeaseMaxTenants) return;
  LeaseSlotTenantLine& t = board.slots[slot].tenant;
  t.waiting.fetch_add(1, std::memory_order_acq_rel);
  t.waits.fetch_add(1, std::memory_order_relaxed);
  RingTenantDoorbell(t);
}

void RenewLeaseWait(LeaseBoard& board, uint32_t slot) noexcept {
  if (slot >= kLeaseMaxTenants) return;
  RingTenantDoorbell(board.slots[slot].tenant);
}

void EndLeaseWait(LeaseBoard& board, uint32_t slot, uint64_t waited_ns) noexcept {
  if (slot >= kLeaseMaxTenants) return;
  LeaseSlotTenantLine& t = board.slots[slot].tenant;
  t.waiting.fetch_sub(1, std::memory_order_acq_rel);
  t.wait_ns.fetch_add(waited_ns, std::memory_order_relaxed);
}

GateResult WaitForLease(LeaseBoard& board, uint32_t slot, uint64_t timeout_ns) noexcept {
  if (slot >= kLeaseMaxTenants) return GateResult::kBadSlot;
  std::atomic<uint32_t>& wake_seq = board.node[slot].wake_seq;
  const uint64_t start = MonotonicNowNs();
  if (LeaseHeld(board, slot, start)) return GateResult::kAdmitted;
  const uint64_t deadline = start + timeout_ns;
  BeginLeaseWait(board, slot);
  GateResult result = GateResult::kTimedOut;
  bool renew = false;
  for (;;) {
    // Read the sequence before the lease: a grant stores the lease word and then bumps the
    // sequence, so a grant we miss here makes FUTEX_WAIT return at once (value changed).
    const uint32_t seq = wake_seq.load(std::memory_order_acquire);
    const uint64_t now = MonotonicNowNs();
    if (LeaseHeld(board, slot, now)) {
      result = GateResult::kAdmitted;
      break;
    }
    if (now >= deadline) break;
    if (renew) RenewLeaseWait(board, slot);
    FutexWait(wake_seq, seq, deadline - now);
    // Woken (or spurious): if the lease is not ours when we look again, the arbiter may have
    // ended an unused grant before this thread ran; re-arm the demand it set aside.
    renew = wake_seq.load(std::memory_order_acquire) != seq;
  }
  EndLeaseWait(board, slot, MonotonicNowNs() - start);
  return result;
}

GateResult GateLaunch(LeaseBoard& board, uint32_t slot, const LaunchRequest& request, uint64_t timeout_ns) noexcept {
  const GateResult fast = TryAdmitLaunch(board, slot, request, MonotonicNowNs());
  if (fast != GateResult::kMustWait) return fast;
  // The lease can expire again between the grant and our launch (a very late wake-up); loop
  // within the same overall timeout rather than launching without a lease.
  const uint64_t deadline = MonotonicNowNs() + timeout_ns;
  for (;;) {
    const uint64_t now = MonotonicNowNs();
    if (now >= deadline) return GateResult::kTimedOut;
    const GateResult waited = WaitForLease(board, slot, deadline - now);
    if (waited != GateResult::kAdmitted) return waited;
    const GateResult admitted = TryAdmitLaunch(board, slot, request, MonotonicNowNs());
    if (admitted != GateResult::kMustWait) return admitted;
  }
}

}  // namespace tessera::enforce
