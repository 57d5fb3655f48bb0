// The compute lease board: the shared-memory ABI through which the node agent (the
// `LeaseArbiter` in tessera::node) grants time-slice leases on one GPU and the shim, inside
// every tenant process, gates kernel launches on them (docs/enforcement-compute.md).
//
// One `LeaseBoard` per GPU, fixed layout, versioned, 64-byte cache lines, no pointers: it lives
// in MAP_SHARED mappings and every process sees the same bytes. Up to kLeaseMaxTenants tenants,
// one slot each; all processes of a tenant use the same slot, so they hold or lose the lease
// together. The board is split by who writes it, at page boundaries, so that the node-written part
// and each tenant's part can come from different files with different owners (enforce/lease_file.h:
// the node's `leases` file, read-only in tenants; each tenant's lines in its own counters file):
//
//   page 0-1      node-written (ABI version 3): line 0 header (magic, ABI version, size, GPU
//                 index), line 1 the current lease (packed word: holder + expiry, generation,
//                 start), line 2 arbiter heartbeat and the node's doorbell, lines 3..66 one node
//                 line per tenant slot (state, the duration model, charged time, the wake futex)
//   page 2+t      tenant t's page (`LeaseTenantSlot`): the line its processes write (waiting
//                 count, wait epoch = the tenant's doorbell, launches, estimated work submitted,
//                 last launch time) and the GPU line (the GPU time its work really took, measured
//                 with events); the rest of the page is padding
//
// Version 2 interleaved the node and tenant lines of every slot in one 0666 file: any tenant could
// store its own slot in the lease word, rewrite another tenant's measured time or ring the
// arbiter's doorbell word. Version 3 moves everything a tenant writes into its own page.
//
// Launch fast path (no syscall, no lock, no allocation): `TryAdmitLaunch` = one load of the
// lease word + a compare with the caller's clock, then relaxed counter updates on the tenant's
// own line. If the lease is not held, `WaitForLease` registers the wait (bumps its own
// `wait_epoch` and FUTEX_WAKEs it: the arbiter sleeps on every tenant's epoch and the node's
// doorbell at once, `WaitForDoorbells`) and sleeps with FUTEX_WAIT (shared, so it works across
// processes, on a read-only mapping too) on the slot's `wake_seq` until the arbiter grants the
// slot or the timeout passes. A launch while the stream is being captured is never blocked, only
// counted; a graph launch is charged the estimated time of its kernels (`LaunchCostNs`, the same
// model the arbiter uses).
//
// Worked example (tenant slot 2, now = 5'000'000 ns):
//   arbiter granted slot 2 until 12'000'000 -> lease word = (12'000'000 & ~0xFF) | 3
//   TryAdmitLaunch(board, 2, {.kind = kKernel}, 5'000'000)  -> kAdmitted
//     (launches += 1, submitted_est_ns += kernel_est_ns, last_launch_ns = 5'000'000)
//   TryAdmitLaunch(board, 2, {...}, 12'000'100)             -> kMustWait (expired)
//   WaitForLease(board, 2, 50'000'000)                       -> kAdmitted when the arbiter
//     grants slot 2 again (or kTimedOut after 50 ms: the caller applies its failure policy)
//
// Thread-safety: every field is a lock-free std::atomic; any number of threads in any number
// of processes may call the tenant-side functions concurrently. Only the arbiter writes the
// node-side fields; a tenant's functions write only its own page. Ownership: the board is plain
// shared memory owned by whoever mapped it; nothing here allocates, throws, or keeps global state.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace tessera::enforce {

inline constexpr uint64_t kLeaseBoardMagic = 0x3142534C52535354ull;  // "TSSRLSB1" little-endian
inline constexpr uint32_t kLeaseAbiVersion = 3;
inline constexpr uint32_t kLeaseMaxTenants = 64;
inline constexpr size_t kLeaseCacheLine = 64;
// The unit in which the board is split between files (enforce/lease_file.h): a 4 KiB page.
inline constexpr size_t kLeasePage = 4096;
// The packed lease word: bits 0..7 = holder slot + 1 (0 = no holder), bits 8..63 = expiry in
// monotonic ns rounded down to 256 ns (good for 584 years of uptime).
inline constexpr uint64_t kLeaseHolderMask = 0xFF;

enum class LeaseSlotState : uint32_t { kFree = 0, kActive = 1 };

struct alignas(kLeaseCacheLine) LeaseBoardHeader {
  std::atomic<uint64_t> magic;      // kLeaseBoardMagic, stored last (release) by InitLeaseBoard
  uint32_t abi_version;             // kLeaseAbiVersion
  uint32_t size_bytes;              // sizeof(LeaseBoard)
  uint32_t max_tenants;             // kLeaseMaxTenants
  uint32_t gpu_index;               // the GPU this board arbitrates (informational)
  uint64_t created_ns;              // monotonic ns at init (informational)
};

struct alignas(kLeaseCacheLine) LeaseState {
  std::atomic<uint64_t> word;       // holder + expiry, the only field the fast path reads
  std::atomic<uint32_t> generation; // +1 on every grant and every end of a lease
  std::atomic<uint32_t> holder;     // slot + 1, 0 = none (same as in `word`; for readers)
  std::atomic<uint64_t> start_ns;   // when the holder's GPU time starts being charged
  std::atomic<uint64_t> expiry_ns;  // exact expiry (the word holds it rounded down)
};

struct alignas(kLeaseCacheLine) LeaseArbiterLine {
  std::atomic<uint64_t> heartbeat_ns;  // monotonic ns of the arbiter's last step
  std::atomic<uint32_t> doorbell;      // futex word the node side bumps + wakes (a join); tenants ring their own wait_epoch
  std::atomic<uint32_t> arbiter_pid;   // informational
  std::atomic<uint64_t> quantum_ns;    // the arbiter's lease length (informational)
};

// Node-side line of a tenant slot (written by the arbiter only).
struct alignas(kLeaseCacheLine) LeaseSlotNodeLine {
  std::atomic<uint32_t> state;          // LeaseSlotState
  std::atomic<uint32_t> tenant_id;      // the tenant's global id
  std::atomic<uint32_t> wake_seq;       // futex word: +1 and FUTEX_WAKE when this slot is granted
  std::atomic<uint32_t> priority;       // informational copy of the arbiter's setting (biased +2^31)
  std::atomic<uint64_t> kernel_est_ns;  // duration model: estimated GPU time of one kernel
  std::atomic<uint64_t> charged_ns;     // GPU time charged to the tenant so far
  std::atomic<uint64_t> grants;         // leases granted
  std::atomic<uint64_t> unused_grants;  // leases that ended without a single launch
  std::atomic<uint64_t> preemptions;    // leases cut short for a higher priority
  // GPU time the node side saw the tenant's processes take beyond what it reported (cumulative;
  // the agent's NVML backstop adds to it: node/lease_arbiter.h, UnderChargedNs); the arbiter
  // charges its growth. The only node-line field not written by the arbiter. It was `reserved`
  // (always zero) before: an older arbiter ignores it, an older agent leaves it at zero.
  std::atomic<uint64_t> observed_extra_ns;
};

// Tenant-side line of a tenant slot (written by the tenant's processes, read by the arbiter).
struct alignas(kLeaseCacheLine) LeaseSlotTenantLine {
  std::atomic<uint32_t> waiting;           // threads currently in WaitForLease
  std::atomic<uint32_t> wait_epoch;        // +1 and FUTEX_WAKE each time a waiter (re)registers demand
  std::atomic<uint64_t> launches;          // admitted launches (kernels, cooperative, graphs)
  std::atomic<uint64_t> graph_launches;    // of which graph launches
  std::atomic<uint64_t> captured_launches; // launches during stream capture (never blocked)
  std::atomic<uint64_t> submitted_est_ns;  // sum of LaunchCostNs over admitted launches
  std::atomic<uint64_t> last_launch_ns;    // monotonic ns of the latest admitted launch
  std::atomic<uint64_t> waits;             // entries into the wait path
  std::atomic<uint64_t> wait_ns;           // total time spent in the wait path
};

// GPU line of a tenant slot (written by the tenant's processes when they meter their GPU time, read
// by the arbiter). The shim records CUDA events around the tenant's work (src/enforce/shim/gpu_meter.h)
// and adds the GPU time of every finished segment to `gpu_ns`; the arbiter charges a metering
// tenant these measured deltas instead of its lease time or the duration estimate.
struct alignas(kLeaseCacheLine) LeaseSlotGpuLine {
  std::atomic<uint32_t> metering;       // 1: the tenant's processes measure; gpu_ns is its charge
  std::atomic<uint32_t> reserved0;
  std::atomic<uint64_t> gpu_ns;         // GPU time of its finished work, measured (cumulative)
  std::atomic<uint64_t> busy_until_ns;  // monotonic ns when its queued work is estimated to finish
  std::atomic<uint64_t> unit_ns;        // measured GPU time per kernel (EWMA); 0 = no sample yet
  std::atomic<uint64_t> segments;       // measured segments (event pairs read back)
  std::atomic<uint64_t> throttles;      // launches held back because its queued work filled the lease
  std::atomic<uint64_t> throttle_ns;    // time those launches waited for queued work to finish
  std::atomic<uint64_t> reserved1;
};

// A tenant's page of the board: the only lease memory its processes write.
struct LeaseTenantSlot {
  LeaseSlotTenantLine tenant;
  LeaseSlotGpuLine gpu;
  unsigned char padding[kLeasePage - 2 * kLeaseCacheLine];
};

inline constexpr size_t kLeaseNodeBytes = 2 * kLeasePage;  // header, lease, arbiter, node lines

struct LeaseBoard {
  LeaseBoardHeader header;
  LeaseState lease;
  LeaseArbiterLine arbiter;
  LeaseSlotNodeLine node[kLeaseMaxTenants];  // slot t's node-written line
  unsigned char padding[kLeaseNodeBytes - 3 * kLeaseCacheLine - kLeaseMaxTenants * kLeaseCacheLine];
  LeaseTenantSlot slots[kLeaseMaxTenants];  // slot t's page, written by tenant t's processes
};

// The ABI, checked at compile time: any change here is a new kLeaseAbiVersion.
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint64_t>) == 8 && sizeof(std::atomic<uint32_t>) == 4);
static_assert(std::is_standard_layout_v<LeaseBoard>);
static_assert(sizeof(LeaseBoardHeader) == 64 && sizeof(LeaseState) == 64 && sizeof(LeaseArbiterLine) == 64);
static_assert(sizeof(LeaseSlotNodeLine) == 64 && sizeof(LeaseSlotTenantLine) == 64 && sizeof(LeaseSlotGpuLine) == 64);
static_assert(sizeof(LeaseTenantSlot) == kLeasePage);
static_assert(alignof(LeaseBoard) == 64);
static_assert(offsetof(LeaseBoard, header) == 0);
static_assert(offsetof(LeaseBoard, lease) == 64);
static_assert(offsetof(LeaseBoard, arbiter) == 128);
static_assert(offsetof(LeaseBoard, node) == 192);
static_assert(offsetof(LeaseBoard, slots) == kLeaseNodeBytes);
static_assert(sizeof(LeaseBoard) == kLeaseNodeBytes + kLeasePage * kLeaseMaxTenants);  // 270336 bytes
static_assert(offsetof(LeaseState, word) == 0 && offsetof(LeaseState, generation) == 8 &&
              offsetof(LeaseState, holder) == 12 && offsetof(LeaseState, start_ns) == 16 &&
              offsetof(LeaseState, expiry_ns) == 24);
static_assert(offsetof(LeaseSlotNodeLine, wake_seq) == 8 && offsetof(LeaseSlotNodeLine, kernel_est_ns) == 16 &&
              offsetof(LeaseSlotNodeLine, charged_ns) == 24 && offsetof(LeaseSlotNodeLine, observed_extra_ns) == 56);
static_assert(offsetof(LeaseSlotTenantLine, waiting) == 0 && offsetof(LeaseSlotTenantLine, launches) == 8 &&
              offsetof(LeaseSlotTenantLine, submitted_est_ns) == 32 &&
              offsetof(LeaseSlotTenantLine, last_launch_ns) == 40 && offsetof(LeaseSlotTenantLine, wait_ns) == 56);
static_assert(offsetof(LeaseSlotGpuLine, gpu_ns) == 8 && offsetof(LeaseSlotGpuLine, busy_until_ns) == 16 &&
              offsetof(LeaseSlotGpuLine, unit_ns) == 24 && offsetof(LeaseTenantSlot, gpu) == 64);

// --- creating and attaching ------------------------------------------------------------------

enum class LeaseBoardCheck : uint32_t {
  kOk = 0,
  kNull,             // no memory given
  kMisaligned,       // not 64-byte aligned
  kTooSmall,         // fewer than sizeof(LeaseBoard) bytes
  kBadMagic,         // not a lease board (or not initialised yet)
  kVersionMismatch,  // a board of another ABI version
  kSizeMismatch,     // header size or tenant count differ from this build's
};
// "ok", "null", "misaligned", ... (a static string; never null).
const char* LeaseBoardCheckName(LeaseBoardCheck check) noexcept;

// Constructs a board in `memory` (zeroed lease, every slot free). The node side calls it once.
// Returns kOk and sets *out, or the reason the memory cannot hold a board.
LeaseBoardCheck InitLeaseBoard(void* memory, size_t bytes, uint32_t gpu_index, uint64_t now_ns,
                               LeaseBoard** out) noexcept;
// Validates a board someone else initialised (magic, version, sizes) and sets *out.
LeaseBoardCheck AttachLeaseBoard(void* memory, size_t bytes, LeaseBoard** out) noexcept;

// --- clock and futex -------------------------------------------------------------------------

// CLOCK_MONOTONIC in ns (vDSO; no syscall on Linux x86-64/arm64). All processes share it.
uint64_t MonotonicNowNs() noexcept;
// FUTEX_WAIT (shared) on `word` while it equals `expected`, at most `timeout_ns`. Returns
// false on timeout, true otherwise (woken, value changed, or interrupted: re-check).
bool FutexWait(std::atomic<uint32_t>& word, uint32_t expected, uint64_t timeout_ns) noexcept;
// FUTEX_WAKE (shared) up to `count` waiters on `word`.
void FutexWake(std::atomic<uint32_t>& word, int count) noexcept;

// --- the tenant side ---------------------------------------------------------------------------

enum class LaunchKind : uint8_t { kKernel, kCooperative, kGraph };

struct LaunchRequest {
  LaunchKind kind = LaunchKind::kKernel;
  uint32_t graph_kernels = 1;  // kGraph: kernel nodes of the graph (learned at instantiate)
  uint64_t est_ns = 0;         // the caller's own estimate of the GPU time; 0 = use the model
  bool capturing = false;      // the stream is capturing: never wait, just count
};

enum class GateResult : uint8_t {
  kAdmitted,  // the tenant holds the lease: launch
  kCaptured,  // stream capture: launch (not charged; the graph is charged at cuGraphLaunch)
  kMustWait,  // TryAdmitLaunch only: the lease is not held
  kTimedOut,  // WaitForLease / GateLaunch: not granted within the timeout
  kBadSlot,   // slot index out of range
};
const char* GateResultName(GateResult result) noexcept;

// The duration model shared by the gate and the arbiter: the caller's estimate if it gave one,
// else the node's per-tenant kernel estimate, times the kernel nodes of a graph.
//   kernel_est_ns = 200'000: kernel -> 200 us; graph of 12 kernels -> 2.4 ms.
inline uint64_t LaunchCostNs(const LeaseSlotNodeLine& node, const LaunchRequest& request) noexcept {
  if (request.est_ns != 0) return request.est_ns;
  const uint64_t per_kernel = node.kernel_est_ns.load(std::memory_order_relaxed);
  if (request.kind == LaunchKind::kGraph) {
    return per_kernel * (request.graph_kernels == 0 ? 1 : request.graph_kernels);
  }
  return per_kernel;
}

inline uint64_t PackLeaseWord(uint32_t slot, uint64_t expiry_ns) noexcept {
  return (expiry_ns & ~kLeaseHolderMask) | (static_cast<uint64_t>(slot) + 1);
}

// True when `slot` holds an unexpired lease at `now_ns`: one atomic load and a compare.
inline bool LeaseHeld(const LeaseBoard& board, uint32_t slot, uint64_t now_ns) noexcept {
  const uint64_t w = board.lease.word.load(std::memory_order_acquire);
  return (w & kLeaseHolderMask) == static_cast<uint64_t>(slot) + 1 && now_ns < (w & ~kLeaseHolderMask);
}

// Counts an admitted launch on the tenant's own line (relaxed; no shared line with others).
inline void RecordLaunch(LeaseBoard& board, uint32_t slot, const LaunchRequest& request, uint64_t now_ns) noexcept {
  LeaseSlotTenantLine& line = board.slots[slot].tenant;
  line.launches.fetch_add(1, std::memory_order_relaxed);
  if (request.kind == LaunchKind::kGraph) line.graph_launches.fetch_add(1, std::memory_order_relaxed);
  const uint64_t cost = LaunchCostNs(board.node[slot], request);
  if (cost != 0) line.submitted_est_ns.fetch_add(cost, std::memory_order_relaxed);
  line.last_launch_ns.store(now_ns, std::memory_order_relaxed);
}

// The launch fast path: kAdmitted (counted), kCaptured (counted), kMustWait (nothing written)
// or kBadSlot. Never blocks, never makes a syscall.
inline GateResult TryAdmitLaunch(LeaseBoard& board, uint32_t slot, const LaunchRequest& request,
                                 uint64_t now_ns) noexcept {
  if (slot >= kLeaseMaxTenants) return GateResult::kBadSlot;
  if (request.capturing) {
    board.slots[slot].tenant.captured_launches.fetch_add(1, std::memory_order_relaxed);
    return GateResult::kCaptured;
  }
  if (!LeaseHeld(board, slot, now_ns)) return GateResult::kMustWait;
  RecordLaunch(board, slot, request, now_ns);
  return GateResult::kAdmitted;
}

// Demand registration, used by WaitForLease (and by the virtual-time tests, which model the
// sleeping part themselves). Begin: the tenant now waits; Renew: still waiting after a wake-up
// that did not grant it (re-arms demand the arbiter may have set aside after an unused lease);
// End: the wait is over after `waited_ns`. Begin and Renew ring the tenant's own doorbell (its
// wait_epoch: +1 and FUTEX_WAKE); nothing outside the tenant's page is written.
void BeginLeaseWait(LeaseBoard& board, uint32_t slot) noexcept;
void RenewLeaseWait(LeaseBoard& board, uint32_t slot) noexcept;
void EndLeaseWait(LeaseBoard& board, uint32_t slot, uint64_t waited_ns) noexcept;

// The wait path: blocks (FUTEX_WAIT on the slot's wake_seq, never a busy loop) until `slot`
// holds the lease (kAdmitted; the launch is NOT yet counted) or `timeout_ns` passes
// (kTimedOut). Spurious wake-ups and EINTR are absorbed.
GateResult WaitForLease(LeaseBoard& board, uint32_t slot, uint64_t timeout_ns) noexcept;

// What a launch hook calls: the fast path, then the wait path if needed, then counts the
// launch. kAdmitted / kCaptured: launch now. kTimedOut: the arbiter did not grant the lease in
// time (dead or overloaded node agent): the caller's failure policy decides. kBadSlot: a bug.
GateResult GateLaunch(LeaseBoard& board, uint32_t slot, const LaunchRequest& request,
                      uint64_t timeout_ns) noexcept;

// --- the arbiter's sleep ---------------------------------------------------------------------

// What the arbiter saw before a step: the node's doorbell, every slot's wait_epoch, and which
// slots were active (bit t: slot t's node line said kActive).
struct DoorbellSnapshot {
  uint32_t doorbell = 0;
  uint32_t epoch[kLeaseMaxTenants] = {};
  uint64_t active = 0;
};
DoorbellSnapshot ReadDoorbells(const LeaseBoard& board) noexcept;
// Sleeps until the node's doorbell or an active slot's wait_epoch differs from `seen` (rung since
// the snapshot: no wake-up is lost between the step and the sleep), or `timeout_ns` passes. One
// futex_waitv(2) over the doorbell and the active slots' words (a free slot has no tenant to
// grant: it becomes active only in an arbiter step, which takes a new snapshot, and a join rings
// the doorbell); each word costs the kernel a page lookup per wait, so 8 tenants wait on 9 words,
// not 65. On a kernel without futex_waitv (before 5.16), sleeps on the doorbell for at most 1 ms
// at a time and compares the epochs between sleeps.
void WaitForDoorbells(LeaseBoard& board, const DoorbellSnapshot& seen, uint64_t timeout_ns) noexcept;
// Rings the node's doorbell (the node side only: a join that wants the arbiter's next round now).
void RingNodeDoorbell(LeaseBoard& board) noexcept;

// True when the arbiter stepped within `stale_ns` of `now_ns` (a liveness hint for callers
// deciding between waiting longer and their failure policy).
inline bool ArbiterAlive(const LeaseBoard& board, uint64_t now_ns, uint64_t stale_ns) noexcept {
  const uint64_t beat = board.arbiter.heartbeat_ns.load(std::memory_order_relaxed);
  return beat != 0 && now_ns < beat + stale_ns;
}

}  // namespace tessera::enforce
