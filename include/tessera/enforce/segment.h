// The node's shared enforcement segment: the versioned, fixed-layout memory that the node side
// (tessera's node agent, `tessera run`, tests) shares with libtessera-shim.so in tenant processes.
//
// One policy file and one counters file per tenant, so that a tenant cannot raise its own limit
// and, when each tenant runs under a uid of its own, cannot touch another tenant's counters:
//   * the policy page (PolicyPage): limits per (tenant, GPU), written by the node side only, mode
//     0644, and mapped PROT_READ into tenants (opened O_RDONLY, so mprotect cannot make it
//     writable);
//   * the counters folder (`<counters dir>/<tenant index>`, CountersFilePath): one CounterSegment
//     per tenant index, holding that tenant's reservation counters (one per GPU, each on its own
//     cache line) and the slots of that tenant's processes. The node side creates the folder (mode
//     0755, only it can add, replace or remove files) and each file with mode 0600, owned by the
//     node side's uid or, when the tenant runs under a uid of its own, chown'ed to that uid
//     (NodeSegment::RecreateTenantCounters). A tenant's processes map only their own tenant's file
//     (the tenant the node side assigned them, not one their environment names) read-write; the
//     node side maps them all (or, opened on demand, those it needs: NodeSegment::OpenOnDemand).
//
// Layout (ABI version 3, all offsets static_assert'ed below; sizes in bytes):
//
//   policy file                                counters file of one tenant (counters/<index>)
//   0     PolicyHeader              64         0       CounterHeader (names its tenant)    64
//   64    device_total_bytes[16]    128        64      TenantCounter[16 GPUs]              1024
//   192   TenantPolicy[64]          64 x 192   1088    ProcessSlot[256]                    256 x 320
//   12480 end                                  83008   padding to a page boundary
//                                              86016   LeaseTenantSlot[16 GPUs]            16 x 4096
//                                              151552  end
//
// Version 3 added the tenant's lease pages (its lines of each GPU's lease board, enforce/lease.h),
// which version 2 kept in the node's shared, world-writable lease file.
// Version 1 had a single counters file of every tenant's counters and 1024 slots, writable by
// every tenant (mode 0666): a tenant could raise another tenant's counter and deny it memory.
// A shim and a node side of different versions refuse each other's files (FAILED_PRECONDITION
// naming the file, the field and both versions).
//
// Memory accounting protocol (all operations lock-free; nobody ever waits for another process):
//   * A TenantCounter's `word` packs the tenant's reserved bytes on that GPU (low 40 bits, so at
//     most 1 TiB) with a 24-bit tag naming the slot and sequence number of the last operation
//     that changed it (see Tag below).
//   * A process changes the counter only through SlotOp(): it first writes its intent (gpu,
//     direction, bytes, its own held bytes before) into its slot, then moves the counter with a
//     CAS that also stamps its tag, then updates its slot's held counter and clears the intent.
//     A reservation that would exceed the limit is refused inside the CAS loop, so the counter
//     never exceeds the limit, not even transiently.
//   * Whoever overwrites a tag first marks that slot's pending intent APPLIED ("helping"), so the
//     fact that an operation reached the counter is never lost.
//   * Reconcile() (node side) finds slots whose process is dead (/proc/<pid>/stat start time, so
//     PID reuse is detected), takes the slot with a CAS (ACTIVE -> RECLAIMING, with the reconciler's pid in
//     place of the owner's; a dead reconciler's slot is taken over the same way), resolves a pending intent
//     from the tag/APPLIED evidence, and subtracts the slot's held bytes from the tenant counters
//     exactly once, through the same SlotOp protocol on the dead process's behalf. The slot is
//     then FREE with generation + 1. Slots never move; a process's cached slot pointer stays
//     valid for its lifetime.
//
// Worked example (limit 100 MiB, granule 2 MiB): process A (slot 3) holds 60 MiB; process B
// (slot 7) asks for 50 MiB: SlotOp's CAS sees 60 + 50 > 100 and refuses without writing: B gets
// CUDA_ERROR_OUT_OF_MEMORY. B asks for 40 MiB: the CAS moves the word from {60 MiB, tag 0} to
// {100 MiB, tag (7, seq 12)}; B's held becomes 40 MiB. A is killed with SIGKILL. Reconcile():
// slot 3 is ACTIVE, /proc/<pid_A> is gone -> RECLAIMING; no pending intent; SlotOp(subtract 60
// MiB) on A's behalf; the word is {40 MiB, ...}; slot 3 is FREE, generation + 1.
//
// Thread-safety: all shared fields are lock-free std::atomic (address-free, so valid across
// processes). A slot's operations must be serialised by its owner (the shim holds a process-local
// mutex around SlotOp); the node side's Reconcile() may run in several processes at once.
// Ownership: NodeSegment and TenantView own their mappings (munmap on destruction).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "tessera/core/status.h"
#include "tessera/enforce/lease.h"

namespace tessera::enforce {

inline constexpr std::uint64_t kPolicyMagic = 0x314C4F5052535354ULL;   // "TSSRPOL1" little-endian
inline constexpr std::uint64_t kCounterMagic = 0x31544E4352535354ULL;  // "TSSRCNT1"
inline constexpr std::uint32_t kSegmentAbiVersion = 3;
inline constexpr int kMaxTenants = 64;
inline constexpr int kMaxGpus = 16;
inline constexpr int kMaxSlots = 256;  // process slots per tenant (in the tenant's counters file)
inline constexpr std::size_t kCacheLine = 64;

// Bytes are counted in the low 40 bits of a counter word: 1 TiB - 1 per (tenant, GPU).
inline constexpr int kBytesBits = 40;
inline constexpr std::uint64_t kMaxCountedBytes = (1ULL << kBytesBits) - 1;
// A limit of kUnlimited means "no limit" (reservations are still counted).
inline constexpr std::uint64_t kUnlimited = kMaxCountedBytes;

static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "cross-process counters need lock-free 64-bit atomics");

// --- policy file (read-only in tenants) ---------------------------------------------------------
struct alignas(kCacheLine) PolicyHeader {
  std::uint64_t magic;
  std::uint32_t abi_version;
  std::uint32_t header_size;        // sizeof(PolicyHeader)
  std::uint64_t total_size;         // sizeof(PolicyPage)
  std::uint64_t granule_bytes;      // every charge is rounded up to a multiple of this
  std::uint32_t num_gpus;           // GPUs of the node covered (<= kMaxGpus)
  std::uint32_t max_tenants;        // kMaxTenants
  std::uint32_t max_gpus;           // kMaxGpus
  std::uint32_t max_slots;          // kMaxSlots (of each counters file)
  std::atomic<std::uint64_t> generation;  // bumped by the node side on every policy change
};

// TenantPolicy::flags bits. The word was reserved (always 0) before it became the flags word, so
// a shim that predates a bit ignores it and an older segment reads as "no flags": no ABI bump.
inline constexpr std::uint64_t kTenantScrubOnFree = 1ULL << 0;  // zero device memory before free
inline constexpr std::uint64_t kKnownTenantFlags = kTenantScrubOnFree;

struct alignas(kCacheLine) TenantPolicy {
  std::atomic<std::uint64_t> limit_bytes[kMaxGpus];  // kUnlimited = no limit; 0 = no access
  std::atomic<std::uint64_t> flags;                  // kTenantScrubOnFree | ...
  std::uint64_t reserved[7];                         // room for compute policy (weights, class)
};

struct alignas(kCacheLine) PolicyPage {
  PolicyHeader header;
  std::uint64_t device_total_bytes[kMaxGpus];  // physical memory per GPU (0 = ask the driver)
  TenantPolicy tenants[kMaxTenants];
};

static_assert(sizeof(PolicyHeader) == 64);
static_assert(offsetof(PolicyHeader, granule_bytes) == 24);
static_assert(offsetof(PolicyHeader, generation) == 48);
static_assert(sizeof(TenantPolicy) == 192);
static_assert(offsetof(TenantPolicy, flags) == 128);
static_assert(offsetof(PolicyPage, device_total_bytes) == 64);
static_assert(offsetof(PolicyPage, tenants) == 192);
static_assert(sizeof(PolicyPage) == 192 + 64 * 192);

// --- counters file of one tenant (read-write in that tenant only) --------------------------------
struct alignas(kCacheLine) CounterHeader {
  std::uint64_t magic;
  std::uint32_t abi_version;
  std::uint32_t header_size;
  std::uint64_t total_size;
  std::uint32_t max_tenants;
  std::uint32_t max_gpus;
  std::uint32_t max_slots;
  std::uint32_t tenant;                        // the tenant index whose file this is
  std::atomic<std::uint64_t> reconciliations;  // Reconcile() runs that reclaimed something
};

// One (tenant, GPU) reservation counter, alone on its cache line.
struct alignas(kCacheLine) TenantCounter {
  std::atomic<std::uint64_t> word;              // bytes (low 40 bits) | tag (high 24 bits)
  std::atomic<std::uint64_t> peak_bytes;        // highest reserved value seen
  std::atomic<std::uint64_t> denied_allocations;
  std::atomic<std::uint64_t> denied_bytes;
  std::atomic<std::uint64_t> underflows_prevented;  // releases larger than the counter (a bug)
};

enum class SlotState : std::uint32_t { kFree = 0, kClaiming = 1, kActive = 2, kReclaiming = 3 };
enum class IntentState : std::uint32_t { kIdle = 0, kPending = 1, kApplied = 2 };
enum class OpDirection : std::uint32_t { kReserve = 0, kRelease = 1 };
// Index into ProcessSlot::launches (counted by the shim's LaunchGate).
enum class CountedLaunch : int { kKernel = 0, kCooperative = 1, kGraph = 2, kCaptureBegin = 3 };
inline constexpr int kLaunchKinds = 4;

// One process's slot. Claimed with a CAS on `state` (FREE -> CLAIMING -> ACTIVE), never moved.
struct alignas(kCacheLine) ProcessSlot {
  // line 0: identity
  std::atomic<std::uint64_t> state;       // SlotState (2 bits) | generation (30 bits) | pid (32)
  std::atomic<std::uint64_t> start_time;  // /proc/<pid>/stat field 22 (clock ticks after boot)
  std::atomic<std::uint32_t> tenant;
  std::uint32_t reserved0;
  std::atomic<std::uint64_t> reclaimer;   // reserved (the reconciler's pid is in `state`)
  std::uint64_t reserved1[4];
  // line 1: the pending operation (see SlotOp)
  alignas(kCacheLine) std::atomic<std::uint64_t> intent;  // IntentState|direction|gpu|seq
  std::atomic<std::uint64_t> intent_bytes;
  std::atomic<std::uint64_t> intent_held_before;
  std::atomic<std::uint64_t> op_seq;
  std::uint64_t reserved2[4];
  // lines 2-3: bytes this process holds in each GPU's tenant counter
  alignas(kCacheLine) std::atomic<std::uint64_t> held_bytes[kMaxGpus];
  // line 4: statistics written by the owner only (relaxed)
  alignas(kCacheLine) std::atomic<std::uint64_t> launches[kLaunchKinds];
  std::atomic<std::uint64_t> allocations;
  std::atomic<std::uint64_t> frees;
  std::atomic<std::uint64_t> denied;
  std::atomic<std::uint64_t> resolver_substitutions;
};

inline constexpr std::size_t kCounterLeaseOffset = 86016;  // 21 pages: the first page boundary after the slots

struct alignas(kCacheLine) CounterSegment {
  CounterHeader header;
  TenantCounter counters[kMaxGpus];  // the file's tenant, per GPU
  ProcessSlot slots[kMaxSlots];      // the file's tenant's processes
  unsigned char padding[kCounterLeaseOffset - 64 - kMaxGpus * 64 - kMaxSlots * 320];
  // The tenant's page of each GPU's lease board (enforce/lease.h, LeaseTenantSlot): mapped by
  // LeaseFile at slots[tenant] of board g (enforce/lease_file.h), so the only lease memory a tenant
  // writes lives in the file only it (and the node side) may open.
  LeaseTenantSlot lease_slots[kMaxGpus];
};

static_assert(sizeof(CounterHeader) == 64);
static_assert(sizeof(TenantCounter) == 64);
static_assert(sizeof(ProcessSlot) == 320);
static_assert(offsetof(ProcessSlot, intent) == 64);
static_assert(offsetof(ProcessSlot, held_bytes) == 128);
static_assert(offsetof(ProcessSlot, launches) == 256);
static_assert(offsetof(CounterHeader, tenant) == 36);
static_assert(offsetof(CounterSegment, counters) == 64);
static_assert(offsetof(CounterSegment, slots) == 64 + kMaxGpus * 64);
static_assert(offsetof(CounterSegment, lease_slots) == kCounterLeaseOffset && kCounterLeaseOffset % kLeasePage == 0);
static_assert(sizeof(CounterSegment) == kCounterLeaseOffset + kMaxGpus * kLeasePage);  // 151552

// The counters file of `tenant` in the counters folder `counters_dir`: "<counters_dir>/<tenant>".
std::string CountersFilePath(const std::string& counters_dir, int tenant);

// Node side: is `tenant`'s counters file still the one the node side made? FAILED_PRECONDITION
// naming the file and what changed when its size is not the ABI's (its tenant truncated or grew
// it), when a page of it vanished under a mapping of this process (FaultGuard::InodeFaulted: it was
// truncated while mapped, even if grown back since), or when its header is not a valid header of
// `tenant`'s file. OK when it is, or when there is no file. Reads it with pread: never faults.
// Example: a tenant truncates counters/3 to 0 bytes -> CheckCountersFile(dir, 3) is
// FAILED_PRECONDITION "counters file 'dir/3': size 0, not the 151552 bytes the node side made it:
// changed by its tenant"; the agent ends that tenant's work (violated_limit).
Status CheckCountersFile(const std::string& counters_dir, int tenant);

// --- packing helpers (exposed for tests and the shim) -------------------------------------------
struct Tag {
  std::uint32_t slot_plus_one = 0;  // 0 = no tag
  std::uint32_t seq = 0;            // 13 bits
  friend bool operator==(const Tag&, const Tag&) = default;
};
inline constexpr std::uint32_t kSeqMask = (1u << 13) - 1;

std::uint64_t PackWord(std::uint64_t bytes, Tag tag);
std::uint64_t WordBytes(std::uint64_t word);
Tag WordTag(std::uint64_t word);

struct SlotStateWord {
  SlotState state = SlotState::kFree;
  std::uint32_t generation = 0;  // 30 bits
  std::uint32_t pid = 0;
};
std::uint64_t PackSlotState(SlotStateWord s);
SlotStateWord UnpackSlotState(std::uint64_t word);

struct Intent {
  IntentState state = IntentState::kIdle;
  OpDirection direction = OpDirection::kReserve;
  std::uint32_t gpu = 0;
  std::uint32_t seq = 0;  // 13 bits
};
std::uint64_t PackIntent(Intent intent);
Intent UnpackIntent(std::uint64_t word);

// Rounds `bytes` up to a multiple of `granule` (granule > 0); saturates at kMaxCountedBytes + 1 so
// that a huge request is refused rather than wrapped. 0 stays 0.
std::uint64_t RoundUpToGranule(std::uint64_t bytes, std::uint64_t granule);

// Process identity used for liveness: the start time (field 22 of /proc/<pid>/stat). Returns
// nullopt if the process does not exist or is a zombie (it has exited; its memory is released).
std::optional<std::uint64_t> ProcessStartTime(pid_t pid);

// --- the one way to move a tenant counter -------------------------------------------------------
enum class SlotOpResult { kApplied, kOverLimit };

// Reserves (kReserve) or releases (kRelease) `bytes` on `gpu` for slot `slot_index` of the
// tenant whose counters file `seg` is.
// A reservation that would take the tenant's counter above `limit_bytes` is refused
// (kOverLimit, nothing changed, denial counted). A release larger than what the slot holds is
// clamped to the held amount (never underflows). Callers must serialise calls per slot.
SlotOpResult SlotOp(CounterSegment& seg, int slot_index, int gpu, OpDirection dir, std::uint64_t bytes,
                    std::uint64_t limit_bytes);

// Finishes or abandons a pending intent of `slot_index` whose owner is known to be dead, from the
// tag/APPLIED evidence. Returns true if there was one. Exposed for tests of the crash windows.
bool ResolvePendingIntent(CounterSegment& seg, int slot_index);

// --- tenant side: what libtessera-shim.so maps ---------------------------------------------------
class TenantView {
 public:
  // Maps `policy_path` read-only and `counters_path` (the counters file of `tenant`,
  // CountersFilePath) read-write and validates both headers (magic, ABI version, sizes, the
  // file's tenant); errors name the file and the field. A file the caller's uid may not write is
  // PERMISSION_DENIED.
  static StatusOr<TenantView> Open(const std::string& policy_path, const std::string& counters_path, int tenant);

  TenantView(TenantView&& other) noexcept;
  TenantView& operator=(TenantView&& other) noexcept;
  TenantView(const TenantView&) = delete;
  TenantView& operator=(const TenantView&) = delete;
  ~TenantView();

  const PolicyPage& policy() const { return *policy_; }
  CounterSegment& counters() const { return *counters_; }
  int tenant() const { return tenant_; }

  // Claims a free slot of the view's tenant for (pid, start_time): CAS FREE -> CLAIMING, fills
  // the identity, then publishes ACTIVE. Returns the slot index or RESOURCE_EXHAUSTED when all
  // are taken.
  StatusOr<int> ClaimSlot(pid_t pid, std::uint64_t start_time) const;
  // Releases everything the slot holds (normal exit) and frees it (generation + 1).
  void ReleaseSlot(int slot_index) const;
  // Releases and frees the ACTIVE slots of (pid, start_time): what this process held before it
  // called exec (the driver freed that memory). Returns how many. Call before the first ClaimSlot.
  int ReleaseSlotsOfEarlierImage(pid_t pid, std::uint64_t start_time) const;

 private:
  TenantView() = default;
  const PolicyPage* policy_ = nullptr;
  CounterSegment* counters_ = nullptr;
  int tenant_ = -1;
};

// --- node side -----------------------------------------------------------------------------------
struct SegmentOptions {
  std::string policy_path;            // created/truncated; mode 0644 (tenants read it)
  std::string counters_dir;           // created (mode 0755) with one file per tenant index, each
                                      // created/truncated with mode 0600 (RecreateTenantCounters)
  std::uint64_t granule_bytes = 512;  // charge granularity; a power of two >= 256
  int num_gpus = 1;                   // GPUs covered, 1..kMaxGpus
  std::uint64_t device_total_bytes[kMaxGpus] = {};  // physical memory per GPU (0 = ask driver)
};

struct ReconcileReport {
  int slots_reclaimed = 0;           // dead processes whose slots were freed
  int claims_abandoned = 0;          // CLAIMING slots of processes that died mid-claim
  int intents_resolved = 0;          // crash-window operations finished or abandoned
  std::uint64_t bytes_released = 0;  // subtracted from tenant counters
};

class NodeSegment {
 public:
  // Creates the policy file and the counters folder with a counters file for every tenant index
  // (owned by the caller's uid), every limit set to 0 (no access) until SetLimit() is called.
  static StatusOr<NodeSegment> Create(const SegmentOptions& options);
  // Maps existing files read-write (another node-side process, e.g. a second reconciler): the
  // policy file and every tenant's counters file in `counters_dir` (a missing one reads as zero
  // counters and no slots, and so does one that is not valid: its tenant may have truncated or
  // overwritten it, and one tenant's file must not stop the node side from reading the others';
  // CheckCountersFile names what is wrong with it). An invalid policy file is an error naming it.
  //
  // Every counters file is mapped under FaultGuard (fault_guard.h): a tenant that truncates its
  // file while the node side maps it leaves the node side reading zeros there, not dead of SIGBUS.
  static StatusOr<NodeSegment> Open(const std::string& policy_path, const std::string& counters_dir);
  // Maps the policy file only; a tenant's counters file is mapped the first time the segment needs
  // it (MapCounters, or any call about that tenant; Reconcile and ActiveSlots map them all). For a
  // node-side caller that looks at a few tenants, e.g. NodeDir::Join, which would otherwise open,
  // map and touch all 64 files (about 150 KiB each) on every join. Example: OpenOnDemand(p, d) then
  // ReconcileTenant(3) opens `d/3` and no other counters file. A file that cannot be mapped when
  // it is needed implicitly reads as no file (nothing counted, no slot): callers that decide on a
  // tenant call MapCounters first and act on its error.
  static StatusOr<NodeSegment> OpenOnDemand(const std::string& policy_path, const std::string& counters_dir);

  NodeSegment(NodeSegment&& other) noexcept;
  NodeSegment& operator=(NodeSegment&& other) noexcept;
  NodeSegment(const NodeSegment&) = delete;
  NodeSegment& operator=(const NodeSegment&) = delete;
  ~NodeSegment();

  // Replaces the counters file of `tenant` with a fresh one (new inode: a process that still maps
  // the old file changes nothing of the new one), mode 0600, owned by `owner_uid` when given
  // (needs the privilege to chown: PERMISSION_DENIED otherwise), else by the caller's uid. Call
  // it only for an index with nothing charged and no live slot (a new tenant on a free index).
  Status RecreateTenantCounters(int tenant, std::optional<uid_t> owner_uid);

  // Limit of `tenant` on `gpu` in bytes (kUnlimited for none). Errors name the bad argument.
  Status SetLimit(int tenant, int gpu, std::uint64_t limit_bytes);
  // Replaces the tenant's flags word (kTenantScrubOnFree, ...); unknown bits are an error.
  Status SetTenantFlags(int tenant, std::uint64_t flags);
  std::uint64_t TenantFlags(int tenant) const;

  std::uint64_t ReservedBytes(int tenant, int gpu) const;
  std::uint64_t PeakBytes(int tenant, int gpu) const;
  std::uint64_t DeniedAllocations(int tenant, int gpu) const;
  // Sum of held bytes over ACTIVE slots of `tenant` on `gpu`.
  std::uint64_t HeldByLiveSlots(int tenant, int gpu) const;
  int ActiveSlots() const;
  // True while some live process holds a slot of `tenant` (ACTIVE with a matching start time, or
  // CLAIMING by a live pid), or a reconciler is still releasing one (RECLAIMING). The node side
  // never prunes or hands out such an index: a daemon that outlived its launcher keeps its
  // tenant's index and limit. Dead processes' slots do not count (Reconcile frees them).
  bool TenantHasLiveSlots(int tenant) const;
  // Starts the statistics of `tenant` afresh for a new tenant on a reused index: on every GPU the
  // peak becomes what is reserved now, the denial and underflow counters 0. The reservation
  // counter itself is never touched. Call it with no live slot of the tenant (Reconcile first).
  Status ResetTenantStats(int tenant);

  // Releases the reservations of every dead process (see the header comment). Safe to run
  // concurrently from several processes; never waits for anyone.
  ReconcileReport Reconcile();
  // Reconcile for the tenants with bytes charged on some GPU (a counter word above 0) only: what a
  // dead process held is released the same; the slots of dead processes that held nothing, and
  // abandoned claims, wait for the next Reconcile(). What a GPU's arbiter runs every 100 ms (a full
  // Reconcile once a second): 64 tenants with nothing charged cost 1,024 counter words read, not
  // 16,384 slot words. Example: tenant 3 charged 60 MiB and its slot 0's process was SIGKILLed,
  // tenant 5 charged nothing and its slot 2's process died too: slot 0 is freed (60 MiB released),
  // slot 2 stays ACTIVE until Reconcile().
  ReconcileReport ReconcileCharged();
  // The same for one tenant's counters file only (mapped first if it is not).
  ReconcileReport ReconcileTenant(int tenant);
  // Maps the counters file of `tenant` if it is not mapped yet (OpenOnDemand). OK and nothing
  // mapped when the file does not exist; an invalid file is an error naming it.
  Status MapCounters(int tenant);
  // Maps again the counters files replaced since they were mapped (a new inode: a new tenant on
  // that index, RecreateTenantCounters) and drops those that went; the rest stay as they are. What
  // a long-lived holder (a GPU's arbiter) calls when the registry changed, instead of opening the
  // whole segment again (opened on demand: a tenant with nothing mapped is looked for again when it
  // is next needed). Returns how many files changed; FAILED_PRECONDITION when the policy file
  // itself was replaced or removed (a new node directory: open the segment again).
  StatusOr<int> RefreshCounters();

  PolicyPage& policy() const { return *policy_; }
  // The counters file of `tenant`; nullptr for an index out of range or without a file (opened on
  // demand: mapped here on the first call).
  CounterSegment* counters(int tenant) const;

 private:
  NodeSegment() = default;
  // Open and OpenOnDemand: the policy page mapped and checked, the counters folder checked.
  static StatusOr<NodeSegment> OpenPolicy(const std::string& policy_path, const std::string& counters_dir);
  Status MapTenant(int tenant) const;
  void MapAll() const;  // OpenOnDemand: every file not looked at yet
  static void ReconcileSegment(CounterSegment& seg, std::uint32_t me, ReconcileReport& report);  // me: getpid()
  void UnmapCounters(int tenant) const;  // the tenant's mapping and its FaultGuard range, if any
  PolicyPage* policy_ = nullptr;
  std::string policy_path_;
  std::uint64_t policy_ino_ = 0;  // the inode mapped (RefreshCounters)
  std::string counters_dir_;
  // Mutable: a segment opened on demand maps a tenant's file inside a const accessor. A NodeSegment
  // is used by one thread at a time.
  mutable CounterSegment* counters_[kMaxTenants] = {};
  mutable std::uint64_t counters_ino_[kMaxTenants] = {};  // the inode mapped (0: none)
  mutable int guard_plus_one_[kMaxTenants] = {};  // FaultGuard range of each mapping, + 1 (0: none)
  mutable std::uint64_t looked_[(kMaxTenants + 63) / 64] = {};  // bit t: file t was looked for
  bool on_demand_ = false;
};

}  // namespace tessera::enforce
