// The shared enforcement segment (see include/tessera/enforce/segment.h for the layout and the
// protocol). Compiled into both the node-side library and libtessera-shim.so, so it uses nothing
// but libc and the standard library, allocates nothing on the SlotOp path, and never blocks.
#include "tessera/enforce/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <new>

#include "tessera/enforce/fault_guard.h"

namespace tessera::enforce {
namespace {

constexpr std::uint64_t kBytesMask = (1ULL << kBytesBits) - 1;
constexpr int kSlotBits = 11;  // slot index + 1: up to 2047 > kMaxSlots
static_assert(kMaxSlots < (1 << kSlotBits));
static_assert(kMaxGpus <= 32, "the intent word has 5 bits for the GPU");

std::string ErrnoText() { return std::strerror(errno); }

void UpdatePeak(TenantCounter& c, std::uint64_t value) {
  std::uint64_t peak = c.peak_bytes.load(std::memory_order_relaxed);
  while (value > peak &&
         !c.peak_bytes.compare_exchange_weak(peak, value, std::memory_order_relaxed)) {
  }
}

// Marks the pending intent of the slot named by `tag` APPLIED before its tag is overwritten, so
// that the evidence that its operation reached the counter survives (see segment.h).
void Help(CounterSegment& seg, Tag tag, int gpu) {
  if (tag.slot_plus_one == 0 || tag.slot_plus_one > static_cast<std::uint32_t>(kMaxSlots)) return;
  ProcessSlot& other = seg.slots[tag.slot_plus_one - 1];
  std::uint64_t iv = other.intent.load(std::memory_order_seq_cst);
  Intent in = UnpackIntent(iv);
  if (in.state != IntentState::kPending || in.seq != tag.seq ||
      in.gpu != static_cast<std::uint32_t>(gpu)) {
    return;
  }
  Intent applied = in;
  applied.state = IntentState::kApplied;
  other.intent.compare_exchange_strong(iv, PackIntent(applied), std::memory_order_seq_cst);
}

// Removes `tag` from the counter word if it is still there (keeps the bytes).
void ClearTag(TenantCounter& c, Tag tag) {
  std::uint64_t w = c.word.load(std::memory_order_seq_cst);
  while (WordTag(w) == tag) {
    if (c.word.compare_exchange_weak(w, PackWord(WordBytes(w), Tag{}), std::memory_order_seq_cst)) {
      return;
    }
  }
}

bool ValidIndex(int value, int limit) { return value >= 0 && value < limit; }

template <typename T>
StatusOr<T*> MapFile(const std::string& path, int open_flags, int prot, const char* what, std::uint64_t* ino = nullptr) {
  int fd = ::open(path.c_str(), open_flags | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string msg = std::string(what) + " file '" + path + "': cannot open: " + std::strerror(err);
    if (err == EACCES || err == EPERM) return Status(StatusCode::kPermissionDenied, msg);
    return NotFoundError(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    std::string err = ErrnoText();
    ::close(fd);
    return InternalError(std::string(what) + " file '" + path + "': fstat: " + err);
  }
  if (static_cast<std::uint64_t>(st.st_size) < sizeof(T)) {
    ::close(fd);
    return InvalidArgumentError(std::string(what) + " file '" + path + "': size " +
                                std::to_string(st.st_size) + " is smaller than the " +
                                std::to_string(sizeof(T)) + " bytes of ABI version " +
                                std::to_string(kSegmentAbiVersion));
  }
  void* p = ::mmap(nullptr, sizeof(T), prot, MAP_SHARED, fd, 0);
  std::string err = ErrnoText();
  ::close(fd);
  if (p == MAP_FAILED) {
    return InternalError(std::string(what) + " file '" + path + "': mmap: " + err);
  }
  if (ino != nullptr) *ino = static_cast<std::uint64_t>(st.st_ino);
  return static_cast<T*>(p);
}

StatusOr<void*> CreateFile(const std::string& path, std::size_t size, mode_t mode, const char* what) {
  if (path.empty()) return InvalidArgumentError(std::string(what) + "_path: empty");
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) {
    return InvalidArgumentError(std::string(what) + "_path '" + path + "': cannot create: " +
                                ErrnoText());
  }
  if (::fchmod(fd, mode) != 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    std::string err = ErrnoText();
    ::close(fd);
    return InternalError(std::string(what) + "_path '" + path + "': " + err);
  }
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  std::string err = ErrnoText();
  ::close(fd);
  if (p == MAP_FAILED) return InternalError(std::string(what) + "_path '" + path + "': mmap: " + err);
  // O_TRUNC then ftruncate: the file reads as zeros without touching its pages.
  return p;
}

Status CheckPolicy(const PolicyPage& p, const std::string& path) {
  const PolicyHeader& h = p.header;
  std::string where = "policy file '" + path + "': ";
  if (h.magic != kPolicyMagic) return InvalidArgumentError(where + "magic: not a tessera policy page");
  if (h.abi_version != kSegmentAbiVersion) {
    return FailedPreconditionError(where + "abi_version: " + std::to_string(h.abi_version) +
                                   ", this build speaks " + std::to_string(kSegmentAbiVersion));
  }
  if (h.header_size != sizeof(PolicyHeader) || h.total_size != sizeof(PolicyPage) ||
      h.max_tenants != kMaxTenants || h.max_gpus != kMaxGpus || h.max_slots != kMaxSlots) {
    return FailedPreconditionError(where + "header_size/total_size/max_*: layout differs from ABI " +
                                   std::to_string(kSegmentAbiVersion));
  }
  if (h.num_gpus == 0 || h.num_gpus > kMaxGpus) {
    return InvalidArgumentError(where + "num_gpus: " + std::to_string(h.num_gpus));
  }
  if (h.granule_bytes < 256 || (h.granule_bytes & (h.granule_bytes - 1)) != 0) {
    return InvalidArgumentError(where + "granule_bytes: " + std::to_string(h.granule_bytes));
  }
  return Status::Ok();
}

Status CheckCounters(const CounterHeader& h, const std::string& path, int tenant) {
  std::string where = "counters file '" + path + "': ";
  if (h.magic != kCounterMagic) return InvalidArgumentError(where + "magic: not a tessera counter segment");
  if (h.abi_version != kSegmentAbiVersion) {
    return FailedPreconditionError(where + "abi_version: " + std::to_string(h.abi_version) +
                                   ", this build speaks " + std::to_string(kSegmentAbiVersion));
  }
  if (h.header_size != sizeof(CounterHeader) || h.total_size != sizeof(CounterSegment) ||
      h.max_tenants != kMaxTenants || h.max_gpus != kMaxGpus || h.max_slots != kMaxSlots) {
    return FailedPreconditionError(where + "header_size/total_size/max_*: layout differs from ABI " +
                                   std::to_string(kSegmentAbiVersion));
  }
  if (h.tenant != static_cast<std::uint32_t>(tenant)) {
    return FailedPreconditionError(where + "tenant: the file is tenant " + std::to_string(h.tenant) + "'s, not " +
                                   std::to_string(tenant) + "'s");
  }
  return Status::Ok();
}

void InitCounterHeader(CounterSegment& c, int tenant) {
  CounterHeader& ch = c.header;
  ch.abi_version = kSegmentAbiVersion;
  ch.header_size = sizeof(CounterHeader);
  ch.total_size = sizeof(CounterSegment);
  ch.max_tenants = kMaxTenants;
  ch.max_gpus = kMaxGpus;
  ch.max_slots = kMaxSlots;
  ch.tenant = static_cast<std::uint32_t>(tenant);
  // The magic last, with a release store: a reader that sees it sees a complete header.
  std::atomic_ref<std::uint64_t>(ch.magic).store(kCounterMagic, std::memory_order_release);
}

// Releases everything slot `i` holds on behalf of its dead owner and frees it. The caller owns
// the slot (it won the CAS to RECLAIMING with its own pid).
void Reclaim(CounterSegment& seg, int i, std::uint64_t reclaiming_word, ReconcileReport& report) {
  ProcessSlot& s = seg.slots[i];
  if (ResolvePendingIntent(seg, i)) ++report.intents_resolved;
  for (int g = 0; g < kMaxGpus; ++g) {
    std::uint64_t held = s.held_bytes[g].load(std::memory_order_seq_cst);
    if (held == 0) continue;
    SlotOp(seg, i, g, OpDirection::kRelease, held, kUnlimited);
    report.bytes_released += held;
  }
  SlotStateWord st = UnpackSlotState(reclaiming_word);
  std::uint64_t expected = reclaiming_word;
  SlotStateWord freed{SlotState::kFree, (st.generation + 1) & ((1u << 30) - 1), 0};
  if (s.state.compare_exchange_strong(expected, PackSlotState(freed), std::memory_order_acq_rel)) {
    ++report.slots_reclaimed;
  }
}

}  // namespace

std::string CountersFilePath(const std::string& counters_dir, int tenant) {
  return counters_dir + "/" + std::to_string(tenant);
}

// --- packing --------------------------------------------------------------------------------------
std::uint64_t PackWord(std::uint64_t bytes, Tag tag) {
  return (bytes & kBytesMask) |
         (static_cast<std::uint64_t>(tag.slot_plus_one & ((1u << kSlotBits) - 1)) << kBytesBits) |
         (static_cast<std::uint64_t>(tag.seq & kSeqMask) << (kBytesBits + kSlotBits));
}
std::uint64_t WordBytes(std::uint64_t word) { return word & kBytesMask; }
Tag WordTag(std::uint64_t word) {
  return Tag{static_cast<std::uint32_t>((word >> kBytesBits) & ((1u << kSlotBits) - 1)),
             static_cast<std::uint32_t>((word >> (kBytesBits + kSlotBits)) & kSeqMask)};
}

std::uint64_t PackSlotState(SlotStateWord s) {
  return static_cast<std::uint64_t>(s.pid) |
         (static_cast<std::uint64_t>(s.generation & ((1u << 30) - 1)) << 32) |
         (static_cast<std::uint64_t>(s.state) << 62);
}
SlotStateWord UnpackSlotState(std::uint64_t w) {
  return SlotStateWord{static_cast<SlotState>(w >> 62),
                       static_cast<std::uint32_t>((w >> 32) & ((1u << 30) - 1)),
                       static_cast<std::uint32_t>(w & 0xffffffffu)};
}

std::uint64_t PackIntent(Intent in) {
  return static_cast<std::uint64_t>(in.state) | (static_cast<std::uint64_t>(in.direction) << 2) |
         (static_cast<std::uint64_t>(in.gpu & 31u) << 3) |
         (static_cast<std::uint64_t>(in.seq & kSeqMask) << 8);
}
Intent UnpackIntent(std::uint64_t w) {
  return Intent{static_cast<IntentState>(w & 3u), static_cast<OpDirection>((w >> 2) & 1u),
                static_cast<std::uint32_t>((w >> 3) & 31u),
                static_cast<std::uint32_t>((w >> 8) & kSeqMask)};
}

std::uint64_t RoundUpToGranule(std::uint64_t bytes, std::uint64_t granule) {
  if (bytes == 0) return 0;
  if (bytes > kMaxCountedBytes) return kMaxCountedBytes + 1;
  return (bytes + granule - 1) / granule * granule;
}

std::optional<std::uint64_t> ProcessStartTime(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[1024];
  ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // The command name (field 2) may contain spaces and parentheses: fields restart after the
  // last ')'. Field 3 is the state, field 22 the start time.
  char* p = std::strrchr(buf, ')');
  if (p == nullptr) return std::nullopt;
  ++p;
  int field = 2;
  char state = '?';
  while (*p != '\0') {
    while (*p == ' ') ++p;
    if (*p == '\0') break;
    ++field;
    if (field == 3) state = *p;
    if (field == 22) {
      if (state == 'Z' || state == 'X' || state == 'x') return std::nullopt;
      return std::strtoull(p, nullptr, 10);
    }
    while (*p != ' ' && *p != '\0') ++p;
  }
  return std::nullopt;
}

// --- SlotOp ---------------------------------------------------------------------------------------
SlotOpResult SlotOp(CounterSegment& seg, int slot_index, int gpu, OpDirection dir, std::uint64_t bytes,
                    std::uint64_t limit_bytes) {
  ProcessSlot& s = seg.slots[slot_index];
  TenantCounter& c = seg.counters[gpu];
  const std::uint64_t held = s.held_bytes[gpu].load(std::memory_order_relaxed);
  if (dir == OpDirection::kRelease) bytes = std::min(bytes, held);
  if (bytes == 0) return SlotOpResult::kApplied;
  if (dir == OpDirection::kReserve && (bytes > limit_bytes || bytes > kMaxCountedBytes)) {
    c.denied_allocations.fetch_add(1, std::memory_order_relaxed);
    c.denied_bytes.fetch_add(bytes, std::memory_order_relaxed);
    return SlotOpResult::kOverLimit;
  }
  const std::uint32_t seq =
      static_cast<std::uint32_t>(s.op_seq.load(std::memory_order_relaxed) + 1) & kSeqMask;
  s.op_seq.store(seq, std::memory_order_relaxed);
  s.intent_bytes.store(bytes, std::memory_order_relaxed);
  s.intent_held_before.store(held, std::memory_order_relaxed);
  s.intent.store(PackIntent({IntentState::kPending, dir, static_cast<std::uint32_t>(gpu), seq}),
                 std::memory_order_seq_cst);
  const Tag mine{static_cast<std::uint32_t>(slot_index + 1), seq};

  std::uint64_t w = c.word.load(std::memory_order_seq_cst);
  std::uint64_t next = 0;
  for (;;) {
    Tag t = WordTag(w);
    if (t.slot_plus_one != 0 && !(t == mine)) Help(seg, t, gpu);
    std::uint64_t cur = WordBytes(w);
    if (dir == OpDirection::kReserve) {
      if (cur + bytes > limit_bytes || cur + bytes > kMaxCountedBytes) {
        s.intent.store(PackIntent({}), std::memory_order_seq_cst);
        c.denied_allocations.fetch_add(1, std::memory_order_relaxed);
        c.denied_bytes.fetch_add(bytes, std::memory_order_relaxed);
        return SlotOpResult::kOverLimit;
      }
      next = cur + bytes;
    } else if (bytes > cur) {
      next = 0;  // a release larger than the counter is a bug somewhere; never wrap around
    } else {
      next = cur - bytes;
    }
    if (c.word.compare_exchange_weak(w, PackWord(next, mine), std::memory_order_seq_cst)) break;
  }
  if (dir == OpDirection::kRelease && bytes > WordBytes(w)) {
    c.underflows_prevented.fetch_add(1, std::memory_order_relaxed);
  }
  s.held_bytes[gpu].store(dir == OpDirection::kReserve ? held + bytes : held - bytes,
                          std::memory_order_seq_cst);
  s.intent.store(PackIntent({}), std::memory_order_seq_cst);
  ClearTag(c, mine);
  if (dir == OpDirection::kReserve) UpdatePeak(c, next);
  return SlotOpResult::kApplied;
}

bool ResolvePendingIntent(CounterSegment& seg, int slot_index) {
  ProcessSlot& s = seg.slots[slot_index];
  Intent in = UnpackIntent(s.intent.load(std::memory_order_seq_cst));
  if (in.state == IntentState::kIdle) return false;
  if (!ValidIndex(static_cast<int>(in.gpu), kMaxGpus)) {
    s.intent.store(PackIntent({}), std::memory_order_seq_cst);
    return true;
  }
  const int gpu = static_cast<int>(in.gpu);
  TenantCounter& c = seg.counters[gpu];
  const std::uint64_t bytes = s.intent_bytes.load(std::memory_order_seq_cst);
  const std::uint64_t held_before = s.intent_held_before.load(std::memory_order_seq_cst);
  const Tag mine{static_cast<std::uint32_t>(slot_index + 1), in.seq};
  if (s.held_bytes[gpu].load(std::memory_order_seq_cst) == held_before) {
    // The held counter was not updated yet: did the counter CAS happen? Read the word first,
    // then the intent again: a writer that overwrote our tag marked the intent APPLIED first.
    bool applied = WordTag(c.word.load(std::memory_order_seq_cst)) == mine;
    if (!applied) {
      applied = UnpackIntent(s.intent.load(std::memory_order_seq_cst)).state == IntentState::kApplied;
    }
    if (applied) {
      s.held_bytes[gpu].store(in.direction == OpDirection::kReserve
                                  ? held_before + bytes
                                  : held_before - std::min(bytes, held_before),
                              std::memory_order_seq_cst);
    }
  }
  ClearTag(c, mine);
  s.intent.store(PackIntent({}), std::memory_order_seq_cst);
  return true;
}

// --- TenantView -----------------------------------------------------------------------------------
StatusOr<TenantView> TenantView::Open(const std::string& policy_path, const std::string& counters_path,
                                      int tenant) {
  if (!ValidIndex(tenant, kMaxTenants)) {
    return InvalidArgumentError("tenant: " + std::to_string(tenant) + " is outside 0.." +
                                std::to_string(kMaxTenants - 1));
  }
  StatusOr<const PolicyPage*> policy =
      MapFile<const PolicyPage>(policy_path, O_RDONLY, PROT_READ, "policy");
  if (!policy.ok()) return policy.status();
  TenantView view;
  view.policy_ = *policy;
  Status st = CheckPolicy(**policy, policy_path);
  if (!st.ok()) return st;
  StatusOr<CounterSegment*> counters =
      MapFile<CounterSegment>(counters_path, O_RDWR, PROT_READ | PROT_WRITE, "counters");
  if (!counters.ok()) return counters.status();
  view.counters_ = *counters;
  view.tenant_ = tenant;
  st = CheckCounters((*counters)->header, counters_path, tenant);
  if (!st.ok()) return st;
  return view;
}

TenantView::TenantView(TenantView&& other) noexcept
    : policy_(other.policy_), counters_(other.counters_), tenant_(other.tenant_) {
  other.policy_ = nullptr;
  other.counters_ = nullptr;
}
TenantView& TenantView::operator=(TenantView&& other) noexcept {
  if (this != &other) {
    this->~TenantView();
    new (this) TenantView(std::move(other));
  }
  return *this;
}
TenantView::~TenantView() {
  if (policy_ != nullptr) ::munmap(const_cast<PolicyPage*>(policy_), sizeof(PolicyPage));
  if (counters_ != nullptr) ::munmap(counters_, sizeof(CounterSegment));
}

StatusOr<int> TenantView::ClaimSlot(pid_t pid, std::uint64_t start_time) const {
  const int tenant = tenant_;
  // Start the scan at a pid-dependent place so that concurrent claimers rarely collide.
  const int first = static_cast<int>(static_cast<std::uint32_t>(pid) % kMaxSlots);
  for (int k = 0; k < kMaxSlots; ++k) {
    int i = (first + k) % kMaxSlots;
    ProcessSlot& s = counters_->slots[i];
    std::uint64_t sw = s.state.load(std::memory_order_acquire);
    SlotStateWord st = UnpackSlotState(sw);
    if (st.state != SlotState::kFree) continue;
    SlotStateWord claiming{SlotState::kClaiming, st.generation, static_cast<std::uint32_t>(pid)};
    if (!s.state.compare_exchange_strong(sw, PackSlotState(claiming), std::memory_order_acq_rel)) {
      continue;
    }
    s.start_time.store(start_time, std::memory_order_relaxed);
    s.tenant.store(static_cast<std::uint32_t>(tenant), std::memory_order_relaxed);
    s.reclaimer.store(0, std::memory_order_relaxed);
    s.intent.store(PackIntent({}), std::memory_order_relaxed);
    for (auto& h : s.held_bytes) h.store(0, std::memory_order_relaxed);
    for (auto& l : s.launches) l.store(0, std::memory_order_relaxed);
    s.allocations.store(0, std::memory_order_relaxed);
    s.frees.store(0, std::memory_order_relaxed);
    s.denied.store(0, std::memory_order_relaxed);
    s.resolver_substitutions.store(0, std::memory_order_relaxed);
    SlotStateWord active{SlotState::kActive, st.generation, static_cast<std::uint32_t>(pid)};
    s.state.store(PackSlotState(active), std::memory_order_release);
    return i;
  }
  return ResourceExhaustedError("counters of tenant " + std::to_string(tenant) + ": all " +
                                std::to_string(kMaxSlots) + " process slots are in use");
}

void TenantView::ReleaseSlot(int slot_index) const {
  if (!ValidIndex(slot_index, kMaxSlots)) return;
  ProcessSlot& s = counters_->slots[slot_index];
  for (int g = 0; g < kMaxGpus; ++g) {
    std::uint64_t held = s.held_bytes[g].load(std::memory_order_relaxed);
    if (held != 0) SlotOp(*counters_, slot_index, g, OpDirection::kRelease, held, kUnlimited);
  }
  std::uint64_t sw = s.state.load(std::memory_order_acquire);
  SlotStateWord st = UnpackSlotState(sw);
  if (st.state != SlotState::kActive) return;  // a reconciler took it (we were presumed dead)
  SlotStateWord freed{SlotState::kFree, (st.generation + 1) & ((1u << 30) - 1), 0};
  s.state.compare_exchange_strong(sw, PackSlotState(freed), std::memory_order_acq_rel);
}

int TenantView::ReleaseSlotsOfEarlierImage(pid_t pid, std::uint64_t start_time) const {
  int released = 0;
  for (int i = 0; i < kMaxSlots; ++i) {
    ProcessSlot& s = counters_->slots[i];
    SlotStateWord st = UnpackSlotState(s.state.load(std::memory_order_acquire));
    if (st.state != SlotState::kActive || st.pid != static_cast<std::uint32_t>(pid) ||
        s.start_time.load(std::memory_order_acquire) != start_time) {
      continue;
    }
    ResolvePendingIntent(*counters_, i);
    ReleaseSlot(i);
    ++released;
  }
  return released;
}

// --- NodeSegment ----------------------------------------------------------------------------------
StatusOr<NodeSegment> NodeSegment::Create(const SegmentOptions& options) {
  if (options.granule_bytes < 256 || (options.granule_bytes & (options.granule_bytes - 1)) != 0) {
    return InvalidArgumentError("granule_bytes: " + std::to_string(options.granule_bytes) +
                                " must be a power of two >= 256");
  }
  if (options.num_gpus < 1 || options.num_gpus > kMaxGpus) {
    return InvalidArgumentError("num_gpus: " + std::to_string(options.num_gpus) + " is outside 1.." +
                                std::to_string(kMaxGpus));
  }
  if (options.counters_dir.empty()) return InvalidArgumentError("counters_dir: empty");
  StatusOr<void*> p = CreateFile(options.policy_path, sizeof(PolicyPage), 0644, "policy");
  if (!p.ok()) return p.status();
  NodeSegment seg;
  seg.policy_ = static_cast<PolicyPage*>(*p);
  seg.policy_path_ = options.policy_path;
  if (struct stat pst {}; ::stat(options.policy_path.c_str(), &pst) == 0) seg.policy_ino_ = static_cast<std::uint64_t>(pst.st_ino);
  seg.counters_dir_ = options.counters_dir;
  // Only the node side may add, replace or remove a tenant's file: the folder is its own, 0755.
  if (::mkdir(options.counters_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return InvalidArgumentError("counters_dir '" + options.counters_dir + "': cannot create: " + ErrnoText());
  }
  if (::chmod(options.counters_dir.c_str(), 0755) != 0) {
    return InternalError("counters_dir '" + options.counters_dir + "': chmod: " + ErrnoText());
  }
  for (int t = 0; t < kMaxTenants; ++t) {
    Status st = seg.RecreateTenantCounters(t, std::nullopt);
    if (!st.ok()) return st;
  }

  PolicyHeader& ph = seg.policy_->header;
  ph.abi_version = kSegmentAbiVersion;
  ph.header_size = sizeof(PolicyHeader);
  ph.total_size = sizeof(PolicyPage);
  ph.granule_bytes = options.granule_bytes;
  ph.num_gpus = static_cast<std::uint32_t>(options.num_gpus);
  ph.max_tenants = kMaxTenants;
  ph.max_gpus = kMaxGpus;
  ph.max_slots = kMaxSlots;
  for (int g = 0; g < kMaxGpus; ++g) seg.policy_->device_total_bytes[g] = options.device_total_bytes[g];
  // Publish the magic last, with a release store: a reader that sees it sees a complete header.
  std::atomic_ref<std::uint64_t>(ph.magic).store(kPolicyMagic, std::memory_order_release);
  return seg;
}

Status NodeSegment::RecreateTenantCounters(int tenant, std::optional<uid_t> owner_uid) {
  if (!ValidIndex(tenant, kMaxTenants)) {
    return InvalidArgumentError("tenant: " + std::to_string(tenant) + " is outside 0.." +
                                std::to_string(kMaxTenants - 1));
  }
  const std::string path = CountersFilePath(counters_dir_, tenant);
  const std::string tmp = counters_dir_ + "/." + std::to_string(tenant) + ".new";
  StatusOr<void*> c = CreateFile(tmp, sizeof(CounterSegment), 0600, "counters");
  if (!c.ok()) return c.status();
  auto* seg = static_cast<CounterSegment*>(*c);
  // Guarded before anyone else can open it (fault_guard.h): once chown'ed, the file is the tenant's.
  struct stat created {};
  const int guard =
      FaultGuard::Register(seg, sizeof(CounterSegment),
                           ::stat(tmp.c_str(), &created) == 0 ? static_cast<std::uint64_t>(created.st_ino) : 0);
  if (guard < 0) {
    ::munmap(seg, sizeof(CounterSegment));
    (void)::unlink(tmp.c_str());
    return ResourceExhaustedError("counters file '" + path + "': no room to guard its mapping against truncation");
  }
  InitCounterHeader(*seg, tenant);
  if (owner_uid.has_value() && ::chown(tmp.c_str(), *owner_uid, static_cast<gid_t>(-1)) != 0) {
    const int err = errno;
    FaultGuard::Unregister(guard);
    ::munmap(seg, sizeof(CounterSegment));
    (void)::unlink(tmp.c_str());
    std::string msg = "counters file '" + path + "': chown to uid " + std::to_string(*owner_uid) + ": " +
                      std::strerror(err) + (err == EPERM ? " (running a tenant under its own uid needs root)" : "");
    if (err == EPERM) return Status(StatusCode::kPermissionDenied, msg);
    return InternalError(msg);
  }
  // rename: readers see the old file or the complete new one, never a half-made one.
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = ErrnoText();
    FaultGuard::Unregister(guard);
    ::munmap(seg, sizeof(CounterSegment));
    (void)::unlink(tmp.c_str());
    return InternalError("counters file '" + path + "': rename: " + err);
  }
  UnmapCounters(tenant);
  counters_[tenant] = seg;
  guard_plus_one_[tenant] = guard + 1;
  counters_ino_[tenant] = static_cast<std::uint64_t>(created.st_ino);
  looked_[tenant / 64] |= 1ULL << (tenant % 64);
  return Status::Ok();
}

Status NodeSegment::MapTenant(int tenant) const {
  looked_[tenant / 64] |= 1ULL << (tenant % 64);
  const std::string path = CountersFilePath(counters_dir_, tenant);
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return Status::Ok();  // no file: nothing counted
  std::uint64_t ino = 0;
  StatusOr<CounterSegment*> c = MapFile<CounterSegment>(path, O_RDWR, PROT_READ | PROT_WRITE, "counters", &ino);
  if (!c.ok()) return c.status();
  // The tenant may truncate its file from now on (fault_guard.h): guarded before the first read.
  const int guard = FaultGuard::Register(*c, sizeof(CounterSegment), ino);
  if (guard < 0) {
    ::munmap(*c, sizeof(CounterSegment));
    return ResourceExhaustedError("counters file '" + path + "': no room to guard its mapping against truncation");
  }
  if (Status st = CheckCounters((*c)->header, path, tenant); !st.ok()) {
    FaultGuard::Unregister(guard);
    ::munmap(*c, sizeof(CounterSegment));
    return st;
  }
  UnmapCounters(tenant);
  counters_[tenant] = *c;
  guard_plus_one_[tenant] = guard + 1;
  counters_ino_[tenant] = ino;
  return Status::Ok();
}

void NodeSegment::MapAll() const {
  if (!on_demand_) return;
  for (int t = 0; t < kMaxTenants; ++t) {
    if ((looked_[t / 64] >> (t % 64) & 1) == 0) (void)MapTenant(t);
  }
}

Status NodeSegment::MapCounters(int tenant) {
  if (!ValidIndex(tenant, kMaxTenants)) {
    return InvalidArgumentError("tenant: " + std::to_string(tenant) + " is outside 0.." +
                                std::to_string(kMaxTenants - 1));
  }
  if (counters_[tenant] != nullptr) return Status::Ok();
  return MapTenant(tenant);
}

StatusOr<int> NodeSegment::RefreshCounters() {
  if (struct stat pst {}; ::stat(policy_path_.c_str(), &pst) != 0 || static_cast<std::uint64_t>(pst.st_ino) != policy_ino_) {
    return FailedPreconditionError("policy file '" + policy_path_ + "': replaced or removed since it was mapped");
  }
  int changed = 0;
  for (int t = 0; t < kMaxTenants; ++t) {
    if (on_demand_ && counters_[t] == nullptr) {
      looked_[t / 64] &= ~(1ULL << (t % 64));  // looked for again when it is needed
      continue;
    }
    struct stat st {};
    const std::string path = CountersFilePath(counters_dir_, t);
    const std::uint64_t ino = ::stat(path.c_str(), &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
    if (ino == counters_ino_[t]) continue;
    ++changed;
    UnmapCounters(t);
    if (ino != 0) {
      Status mapped = MapTenant(t);
      if (!mapped.ok()) return mapped;
    }
  }
  return changed;
}

// Maps the policy page and checks the counters folder; no tenant's counters file yet.
StatusOr<NodeSegment> NodeSegment::OpenPolicy(const std::string& policy_path, const std::string& counters_dir) {
  std::uint64_t policy_ino = 0;
  StatusOr<PolicyPage*> p = MapFile<PolicyPage>(policy_path, O_RDWR, PROT_READ | PROT_WRITE, "policy", &policy_ino);
  if (!p.ok()) return p.status();
  NodeSegment seg;
  seg.policy_ = *p;
  seg.policy_path_ = policy_path;
  seg.policy_ino_ = policy_ino;
  seg.counters_dir_ = counters_dir;
  Status st = CheckPolicy(**p, policy_path);
  if (!st.ok()) return st;
  struct stat dir {};
  if (::stat(counters_dir.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode)) {
    return FailedPreconditionError("counters folder '" + counters_dir +
                                   "': not a folder (a segment of ABI version 1, or none; this build speaks " +
                                   std::to_string(kSegmentAbiVersion) + ")");
  }
  return seg;
}

StatusOr<NodeSegment> NodeSegment::Open(const std::string& policy_path, const std::string& counters_dir) {
  StatusOr<NodeSegment> seg = OpenPolicy(policy_path, counters_dir);
  if (!seg.ok()) return seg.status();
  for (int t = 0; t < kMaxTenants; ++t) {
    Status st = seg->MapTenant(t);
    // A file its tenant broke (truncated, scribbled over) reads as none, as it would on demand:
    // one tenant's file must not stop the node side from opening the others' (CheckCountersFile
    // names it; the agent ends that tenant's work).
    if (!st.ok() && st.code() != StatusCode::kInvalidArgument && st.code() != StatusCode::kFailedPrecondition) {
      return st;
    }
  }
  return seg;
}

StatusOr<NodeSegment> NodeSegment::OpenOnDemand(const std::string& policy_path, const std::string& counters_dir) {
  StatusOr<NodeSegment> seg = OpenPolicy(policy_path, counters_dir);
  if (!seg.ok()) return seg.status();
  seg->on_demand_ = true;
  return seg;
}

NodeSegment::NodeSegment(NodeSegment&& other) noexcept
    : policy_(other.policy_),
      policy_path_(std::move(other.policy_path_)),
      policy_ino_(other.policy_ino_),
      counters_dir_(std::move(other.counters_dir_)),
      on_demand_(other.on_demand_) {
  other.policy_ = nullptr;
  for (int t = 0; t < kMaxTenants; ++t) {
    counters_[t] = other.counters_[t];
    counters_ino_[t] = other.counters_ino_[t];
    guard_plus_one_[t] = other.guard_plus_one_[t];
    other.counters_[t] = nullptr;
    other.counters_ino_[t] = 0;
    other.guard_plus_one_[t] = 0;
  }
  for (size_t i = 0; i < std::size(looked_); ++i) {
    looked_[i] = other.looked_[i];
    other.looked_[i] = 0;
  }
}
NodeSegment& NodeSegment::operator=(NodeSegment&& other) noexcept {
  if (this != &other) {
    this->~NodeSegment();
    new (this) NodeSegment(std::move(other));
  }
  return *this;
}
NodeSegment::~NodeSegment() {
  if (policy_ != nullptr) ::munmap(policy_, sizeof(PolicyPage));
  for (int t = 0; t < kMaxTenants; ++t) UnmapCounters(t);
}

void NodeSegment::UnmapCounters(int tenant) const {
  FaultGuard::Unregister(guard_plus_one_[tenant] - 1);
  guard_plus_one_[tenant] = 0;
  if (counters_[tenant] != nullptr) ::munmap(counters_[tenant], sizeof(CounterSegment));
  counters_[tenant] = nullptr;
  counters_ino_[tenant] = 0;
}

Status CheckCountersFile(const std::string& counters_dir, int tenant) {
  if (!ValidIndex(tenant, kMaxTenants)) {
    return InvalidArgumentError("tenant: " + std::to_string(tenant) + " is outside 0.." +
                                std::to_string(kMaxTenants - 1));
  }
  const std::string path = CountersFilePath(counters_dir, tenant);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::Ok();  // no file: nothing to check
    return InternalError("counters file '" + path + "': cannot open: " + ErrnoText());
  }
  struct stat st {};
  CounterHeader header {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const ssize_t got = stat_ok ? ::pread(fd, &header, sizeof(header), 0) : -1;
  ::close(fd);
  if (!stat_ok) return InternalError("counters file '" + path + "': fstat: " + ErrnoText());
  if (static_cast<std::uint64_t>(st.st_size) != sizeof(CounterSegment)) {
    return FailedPreconditionError("counters file '" + path + "': size " + std::to_string(st.st_size) +
                                   ", not the " + std::to_string(sizeof(CounterSegment)) +
                                   " bytes the node side made it: changed by its tenant");
  }
  if (FaultGuard::InodeFaulted(static_cast<std::uint64_t>(st.st_ino))) {
    return FailedPreconditionError("counters file '" + path +
                                   "': a page of it vanished under the node side (the file was truncated "
                                   "while mapped, and grown back)");
  }
  if (got != static_cast<ssize_t>(sizeof(header))) {
    return FailedPreconditionError("counters file '" + path + "': its header cannot be read");
  }
  return CheckCounters(header, path, tenant);
}

CounterSegment* NodeSegment::counters(int tenant) const {
  if (!ValidIndex(tenant, kMaxTenants)) return nullptr;
  if (on_demand_ && counters_[tenant] == nullptr && (looked_[tenant / 64] >> (tenant % 64) & 1) == 0) {
    (void)MapTenant(tenant);  // an invalid file reads as none (header comment)
  }
  return counters_[tenant];
}

Status NodeSegment::SetLimit(int tenant, int gpu, std::uint64_t limit_bytes) {
  if (!ValidIndex(tenant, kMaxTenants)) {
    return InvalidArgumentError("tenant: " + std::to_string(tenant) + " is outside 0.." +
                                std::to_string(kMaxTenants - 1));
  }
  if (!ValidIndex(gpu, static_cast<int>(policy_->header.num_gpus))) {
    return InvalidArgumentError("gpu: " + std::to_string(gpu) + " is outside 0.." +
                                std::to_string(policy_->header.num_gpus - 1));
  }
  policy_->tenants[tenant].limit_bytes[gpu].store(std::min(limit_bytes, kUnlimited),
                                                  std::memory_order_release);
  policy_->header.generation.fetch_add(1, std::memory_order_acq_rel);
  return Status::Ok();
}

Status NodeSegment::SetTenantFlags(int tenant, std::uint64_t flags) {
  if (!ValidIndex(tenant, kMaxTenants)) {
    return InvalidArgumentError("tenant: " + std::to_string(tenant) + " is outside 0.." +
                                std::to_string(kMaxTenants - 1));
  }
  if ((flags & ~kKnownTenantFlags) != 0) {
    return InvalidArgumentError("tenant flags: unknown bits 0x" +
                                [](std::uint64_t v) {
                                  char buf[20];
                                  std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(v));
                                  return std::string(buf);
                                }(flags & ~kKnownTenantFlags));
  }
  policy_->tenants[tenant].flags.store(flags, std::memory_order_release);
  policy_->header.generation.fetch_add(1, std::memory_order_acq_rel);
  return Status::Ok();
}

std::uint64_t NodeSegment::TenantFlags(int tenant) const {
  if (!ValidIndex(tenant, kMaxTenants)) return 0;
  return policy_->tenants[tenant].flags.load(std::memory_order_acquire);
}

std::uint64_t NodeSegment::ReservedBytes(int tenant, int gpu) const {
  const CounterSegment* c = counters(tenant);
  if (c == nullptr || !ValidIndex(gpu, kMaxGpus)) return 0;
  return WordBytes(c->counters[gpu].word.load(std::memory_order_acquire));
}
std::uint64_t NodeSegment::PeakBytes(int tenant, int gpu) const {
  const CounterSegment* c = counters(tenant);
  if (c == nullptr || !ValidIndex(gpu, kMaxGpus)) return 0;
  return c->counters[gpu].peak_bytes.load(std::memory_order_acquire);
}
std::uint64_t NodeSegment::DeniedAllocations(int tenant, int gpu) const {
  const CounterSegment* c = counters(tenant);
  if (c == nullptr || !ValidIndex(gpu, kMaxGpus)) return 0;
  return c->counters[gpu].denied_allocations.load(std::memory_order_acquire);
}

std::uint64_t NodeSegment::HeldByLiveSlots(int tenant, int gpu) const {
  const CounterSegment* c = counters(tenant);
  if (c == nullptr || !ValidIndex(gpu, kMaxGpus)) return 0;
  std::uint64_t sum = 0;
  for (const ProcessSlot& s : c->slots) {
    SlotStateWord st = UnpackSlotState(s.state.load(std::memory_order_acquire));
    if (st.state != SlotState::kActive) continue;
    sum += s.held_bytes[gpu].load(std::memory_order_acquire);
  }
  return sum;
}

int NodeSegment::ActiveSlots() const {
  MapAll();
  int n = 0;
  for (const CounterSegment* c : counters_) {
    if (c == nullptr) continue;
    for (const ProcessSlot& s : c->slots) {
      if (UnpackSlotState(s.state.load(std::memory_order_acquire)).state == SlotState::kActive) ++n;
    }
  }
  return n;
}

bool NodeSegment::TenantHasLiveSlots(int tenant) const {
  const CounterSegment* c = counters(tenant);
  if (c == nullptr) return false;
  for (const ProcessSlot& s : c->slots) {
    SlotStateWord st = UnpackSlotState(s.state.load(std::memory_order_acquire));
    if (st.state == SlotState::kFree) continue;
    // Being reclaimed: its bytes are still in the counter until the reconciler is done.
    if (st.state == SlotState::kReclaiming) return true;
    std::optional<std::uint64_t> now = ProcessStartTime(static_cast<pid_t>(st.pid));
    if (!now.has_value()) continue;
    // A claim in progress may not have written its start time yet: the live pid is enough.
    if (st.state == SlotState::kClaiming || *now == s.start_time.load(std::memory_order_acquire)) return true;
  }
  return false;
}

Status NodeSegment::ResetTenantStats(int tenant) {
  if (!ValidIndex(tenant, kMaxTenants)) {
    return InvalidArgumentError("tenant: " + std::to_string(tenant) + " is outside 0.." +
                                std::to_string(kMaxTenants - 1));
  }
  CounterSegment* seg = counters(tenant);
  if (seg == nullptr) return Status::Ok();
  for (TenantCounter& c : seg->counters) {
    c.peak_bytes.store(WordBytes(c.word.load(std::memory_order_acquire)), std::memory_order_relaxed);
    c.denied_allocations.store(0, std::memory_order_relaxed);
    c.denied_bytes.store(0, std::memory_order_relaxed);
    c.underflows_prevented.store(0, std::memory_order_relaxed);
  }
  return Status::Ok();
}

ReconcileReport NodeSegment::Reconcile() {
  MapAll();
  ReconcileReport report;
  const std::uint32_t me = static_cast<std::uint32_t>(::getpid());
  for (CounterSegment* c : counters_) {
    if (c != nullptr) ReconcileSegment(*c, me, report);
  }
  return report;
}

ReconcileReport NodeSegment::ReconcileCharged() {
  MapAll();
  ReconcileReport report;
  const std::uint32_t me = static_cast<std::uint32_t>(::getpid());
  for (CounterSegment* c : counters_) {
    if (c == nullptr) continue;
    bool charged = false;
    for (const TenantCounter& counter : c->counters) {
      charged = charged || WordBytes(counter.word.load(std::memory_order_acquire)) != 0;
    }
    if (charged) ReconcileSegment(*c, me, report);
  }
  return report;
}

ReconcileReport NodeSegment::ReconcileTenant(int tenant) {
  ReconcileReport report;
  if (CounterSegment* c = counters(tenant); c != nullptr) {
    ReconcileSegment(*c, static_cast<std::uint32_t>(::getpid()), report);
  }
  return report;
}

void NodeSegment::ReconcileSegment(CounterSegment& seg, std::uint32_t me, ReconcileReport& report) {
  const int reclaimed_before = report.slots_reclaimed;
  for (int i = 0; i < kMaxSlots; ++i) {
    ProcessSlot& s = seg.slots[i];
    std::uint64_t sw = s.state.load(std::memory_order_acquire);
    SlotStateWord st = UnpackSlotState(sw);
    switch (st.state) {
      case SlotState::kFree:
        break;
      case SlotState::kClaiming:
        // Nothing is held before ACTIVE; a claimer that died leaves the slot to be freed.
        if (!ProcessStartTime(static_cast<pid_t>(st.pid)).has_value()) {
          SlotStateWord freed{SlotState::kFree, (st.generation + 1) & ((1u << 30) - 1), 0};
          if (s.state.compare_exchange_strong(sw, PackSlotState(freed), std::memory_order_acq_rel)) {
            ++report.claims_abandoned;
          }
        }
        break;
      case SlotState::kActive: {
        std::optional<std::uint64_t> now = ProcessStartTime(static_cast<pid_t>(st.pid));
        if (now.has_value() && *now == s.start_time.load(std::memory_order_acquire)) break;
        SlotStateWord reclaiming{SlotState::kReclaiming, st.generation, me};
        std::uint64_t rw = PackSlotState(reclaiming);
        if (!s.state.compare_exchange_strong(sw, rw, std::memory_order_acq_rel)) break;
        Reclaim(seg, i, rw, report);
        break;
      }
      case SlotState::kReclaiming: {
        // Another reconciler owns it; take over only if that reconciler died.
        if (st.pid == me || ProcessStartTime(static_cast<pid_t>(st.pid)).has_value()) break;
        SlotStateWord reclaiming{SlotState::kReclaiming, st.generation, me};
        std::uint64_t rw = PackSlotState(reclaiming);
        if (!s.state.compare_exchange_strong(sw, rw, std::memory_order_acq_rel)) break;
        Reclaim(seg, i, rw, report);
        break;
      }
    }
  }
  if (report.slots_reclaimed > reclaimed_before) {
    seg.header.reconciliations.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace tessera::enforce
