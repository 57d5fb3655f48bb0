// The slow path of GpuMeter (gpu_meter.h): segments, events, the wait for queued work.
#include "src/enforce/shim/gpu_meter.h"

#include <algorithm>
#include <mutex>

namespace tessera::enforce::shim {

using namespace tessera::cuabi;  // NOLINT: the driver's C names

MeterFast g_meter;
std::atomic<bool> g_capture_begun{false};
thread_local MeterThread t_meter __attribute__((tls_model("initial-exec")));
MeterDriver g_meter_driver;

namespace {

constexpr int kMaxStreams = 16;   // metered streams per process (more: unmetered)
constexpr int kRing = 64;         // closed, unfinished segments per stream
constexpr int kPool = 2 * kRing + 4;
constexpr int64_t kMaxCredit = 4096;
constexpr uint64_t kDefaultUnitNs = 1'000'000;  // no estimate from the node: 1 ms

struct Segment {
  CUevent begin = nullptr;
  CUevent end = nullptr;
  uint32_t kernels = 0;
  bool end_lent = false;  // `end` is also the next segment's `begin`: that segment gives it back
};

struct MeteredStream {
  uintptr_t key = 0;
  CUstream stream = nullptr;
  bool per_thread = false;
  bool unmetered = false;  // events failed on it: launches there are not measured
  Segment open;            // open.begin != nullptr: a segment is open
  CUevent chain = nullptr; // the end event Close() just recorded here, usable as the next begin
  Segment ring[kRing];     // closed, not yet read back; oldest at head
  int head = 0, count = 0;
  CUevent pool[kPool] = {};
  int pooled = 0;
};

struct MeterState {
  std::mutex mu;
  MeteredStream streams[kMaxStreams];
  int num_streams = 0;
  uint64_t pending_kernels = 0;  // launched in open and closed-unfinished segments
  uint64_t unit_ns = 0;          // EWMA of measured GPU ns per kernel; 0 = no sample yet
  int64_t granted = 0;           // the credit the last slow path gave the fast path
  MeteredStream* last_open = nullptr;  // the stream whose segment that credit was granted with
};

MeterState*& StatePtr() {
  static MeterState* s = new MeterState;  // never destroyed: launches may run during exit
  return s;
}
MeterState& State() { return *StatePtr(); }

void Disable(LeaseBoard& board, uint32_t slot) {
  g_meter.on.store(false, std::memory_order_relaxed);
  board.slots[slot].gpu.metering.store(0, std::memory_order_relaxed);
}

CUevent TakeEvent(MeteredStream& s) {
  if (s.pooled > 0) return s.pool[--s.pooled];
  CUevent e = nullptr;
  if (g_meter_driver.create(&e, CU_EVENT_BLOCKING_SYNC) != CUDA_SUCCESS) return nullptr;
  return e;
}

void GiveEvent(MeteredStream& s, CUevent e) {
  if (e == nullptr) return;
  if (s.pooled < kPool) {
    s.pool[s.pooled++] = e;
  } else {
    g_meter_driver.destroy(e);
  }
}

bool Record(const MeteredStream& s, CUevent e) {
  PFN_cuEventRecord_v2000 record =
      s.per_thread && g_meter_driver.record_ptsz != nullptr ? g_meter_driver.record_ptsz : g_meter_driver.record;
  return record(e, s.stream) == CUDA_SUCCESS;
}

uint64_t Unit(const MeterState& st, const LeaseBoard& board, uint32_t slot) {
  if (st.unit_ns != 0) return st.unit_ns;
  const uint64_t hint = board.node[slot].kernel_est_ns.load(std::memory_order_relaxed);
  return hint != 0 ? hint : kDefaultUnitNs;
}

// Closes the stream's open segment (records its end event); false if the driver refused.
bool Close(MeterState& st, MeteredStream& s) {
  if (s.open.begin == nullptr) return true;
  if (s.count == kRing) return true;  // full ring: the segment stays open (the caller waits first)
  CUevent end = TakeEvent(s);
  if (end == nullptr || !Record(s, end)) {
    GiveEvent(s, end);
    return false;
  }
  s.open.end = end;
  s.ring[(s.head + s.count) % kRing] = s.open;
  ++s.count;
  s.open = Segment{};
  s.chain = end;
  (void)st;
  return true;
}

// Forgets every stream's chain: the next segment records its own begin, so that the time until
// then (the host submitted nothing, or waited) is not counted.
void Unchain(MeterState& st) {
  for (int i = 0; i < st.num_streams; ++i) st.streams[i].chain = nullptr;
}

// Reads back every finished segment (oldest first per stream, without blocking) and publishes.
// One driver call per segment: cuEventElapsedTime itself answers CUDA_ERROR_NOT_READY while either
// event has not completed (no cuEventQuery first); any other error ends the segment unmeasured.
void Poll(MeterState& st, LeaseBoard& board, uint32_t slot) {
  LeaseSlotGpuLine& line = board.slots[slot].gpu;
  uint64_t measured = 0, segments = 0;
  for (int i = 0; i < st.num_streams; ++i) {
    MeteredStream& s = st.streams[i];
    while (s.count > 0) {
      Segment& seg = s.ring[s.head];
      float ms = 0;
      const CUresult q = g_meter_driver.elapsed(&ms, seg.begin, seg.end);
      if (q == CUDA_ERROR_NOT_READY) break;
      if (q == CUDA_SUCCESS && ms > 0) {
        const uint64_t ns = static_cast<uint64_t>(static_cast<double>(ms) * 1e6);
        measured += ns;
        ++segments;
        if (seg.kernels > 0) {
          const uint64_t per = ns / seg.kernels;
          st.unit_ns = st.unit_ns == 0 ? per : (st.unit_ns * 7 + per) / 8;
        }
      }
      st.pending_kernels -= std::min<uint64_t>(st.pending_kernels, seg.kernels);
      GiveEvent(s, seg.begin);  // owned: a chained begin is the previous segment's end, lent to it
      if (seg.end == s.chain) s.chain = nullptr;
      if (!seg.end_lent) GiveEvent(s, seg.end);
      seg = Segment{};
      s.head = (s.head + 1) % kRing;
      --s.count;
    }
  }
  if (measured != 0) line.gpu_ns.fetch_add(measured, std::memory_order_release);
  if (segments != 0) line.segments.fetch_add(segments, std::memory_order_relaxed);
  line.unit_ns.store(st.unit_ns, std::memory_order_relaxed);
  line.busy_until_ns.store(MonotonicNowNs() + st.pending_kernels * Unit(st, board, slot), std::memory_order_relaxed);
}

// The oldest closed, unfinished segment's end event, or nullptr.
CUevent Oldest(MeterState& st) {
  for (int i = 0; i < st.num_streams; ++i) {
    if (st.streams[i].count > 0) return st.streams[i].ring[st.streams[i].head].end;
  }
  return nullptr;
}

// Accounts the launches the fast path admitted since the last slow path (the credit they used) to
// the segment the credit was granted with (with several threads on several streams, an
// approximation of which segment they ran in; the measured total is exact either way).
void Settle(MeterState& st) {
  const int64_t left = g_meter.credit.load(std::memory_order_relaxed);
  const uint64_t used = static_cast<uint64_t>(std::max<int64_t>(0, st.granted - std::max<int64_t>(left, 0)));
  st.granted = std::max<int64_t>(left, 0);
  if (used == 0) return;
  st.pending_kernels += used;
  if (st.last_open != nullptr && st.last_open->open.begin != nullptr) {
    st.last_open->open.kernels += static_cast<uint32_t>(used);
  } else {
    for (int i = 0; i < st.num_streams; ++i) {
      if (st.streams[i].open.begin != nullptr) {
        st.streams[i].open.kernels += static_cast<uint32_t>(used);
        return;
      }
    }
  }
}

void SetCredit(MeterState& st, int64_t credit) {
  st.granted = credit;
  g_meter.credit.store(credit, std::memory_order_relaxed);
}

void CloseAll(MeterState& st) {
  for (int i = 0; i < st.num_streams; ++i) {
    Close(st, st.streams[i]);
    st.streams[i].chain = nullptr;  // closed for a wait, a flush or a capture: no chaining across it
  }
  g_meter.generation.fetch_add(1, std::memory_order_relaxed);
}

MeteredStream* Find(MeterState& st, uintptr_t key, CUstream stream, bool per_thread) {
  for (int i = 0; i < st.num_streams; ++i) {
    if (st.streams[i].key == key) return &st.streams[i];
  }
  if (st.num_streams == kMaxStreams) return nullptr;
  MeteredStream& s = st.streams[st.num_streams++];
  s.key = key;
  s.stream = stream;
  s.per_thread = per_thread;
  return &s;
}

bool Capturing(const MeteredStream& s) {
  // No capture has begun in this process (every begin passes LaunchGate): nothing to ask.
  if (!g_capture_begun.load(std::memory_order_acquire)) return false;
  PFN_cuStreamIsCapturing_v10000 q = s.per_thread && g_meter_driver.is_capturing_ptsz != nullptr
                                         ? g_meter_driver.is_capturing_ptsz
                                         : g_meter_driver.is_capturing;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  // An error (e.g. an implicit capture conflict) counts as capturing: record nothing there.
  return q(s.stream, &status) != CUDA_SUCCESS || status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// The lease's remaining time for `slot`, or 0 if it no longer holds it.
uint64_t Remaining(const LeaseBoard& board, uint32_t slot, uint64_t now) {
  if (!LeaseHeld(board, slot, now)) return 0;
  const uint64_t expiry = board.lease.expiry_ns.load(std::memory_order_relaxed);
  return expiry > now ? expiry - now : 0;
}

}  // namespace

MeterResult MeterLaunchSlow(LeaseBoard& board, uint32_t slot, CUstream stream, bool per_thread,
                            uint32_t kernels, bool refund) noexcept {
  MeterState& st = State();
  std::lock_guard<std::mutex> lock(st.mu);
  if (refund) g_meter.credit.fetch_add(kernels, std::memory_order_relaxed);
  if (!g_meter.on.load(std::memory_order_relaxed)) return MeterResult::kAdmitted;
  Settle(st);
  Unchain(st);  // a chain is only used within the call that recorded it
  const uintptr_t key = MeterStreamKey(stream, per_thread);
  MeteredStream* s = Find(st, key, stream, per_thread);
  t_meter.stream_key = key;
  if (s == nullptr || s->unmetered) {
    t_meter.generation = g_meter.generation.load(std::memory_order_relaxed);
    SetCredit(st, kMaxCredit);
    st.last_open = nullptr;
    return MeterResult::kAdmitted;
  }
  LeaseSlotGpuLine& line = board.slots[slot].gpu;
  const uint64_t quantum = std::max<uint64_t>(board.arbiter.quantum_ns.load(std::memory_order_relaxed), 1'000'000);
  // 1. Read back what finished; close this stream's open segment (a new one opens below).
  Poll(st, board, slot);
  if (!Close(st, *s)) {
    Disable(board, slot);
    return MeterResult::kAdmitted;
  }
  // 2. Bound: the queued work plus this launch must fit in what is left of the lease.
  uint64_t now = MonotonicNowNs();
  bool waited = false;
  const uint64_t wait_start = now;
  for (;;) {
    const uint64_t unit = Unit(st, board, slot);
    const uint64_t remaining = Remaining(board, slot, now);
    if (remaining == 0) {
      if (waited) {
        line.throttle_ns.fetch_add(now - wait_start, std::memory_order_relaxed);
        SetCredit(st, 0);
        t_meter.generation = ~0ULL;
        return MeterResult::kLeaseLost;
      }
      break;  // raced the expiry on the way here: admitted by the gate, let it go
    }
    if ((st.pending_kernels + kernels) * unit <= remaining || st.pending_kernels == 0) break;
    CloseAll(st);
    CUevent oldest = Oldest(st);
    if (oldest == nullptr) break;  // everything pending is in segments that could not close
    if (!waited) line.throttles.fetch_add(1, std::memory_order_relaxed);
    waited = true;
    g_meter_driver.synchronize(oldest);
    Poll(st, board, slot);
    now = MonotonicNowNs();
  }
  if (waited) line.throttle_ns.fetch_add(now - wait_start, std::memory_order_relaxed);
  // 3. Open a segment for this launch (unless the stream is capturing: nothing is recorded there).
  if (s->count == kRing) {  // ring full: wait for this stream's oldest segment
    g_meter_driver.synchronize(s->ring[s->head].end);
    Poll(st, board, slot);
  }
  if (Capturing(*s)) {
    t_meter.generation = ~0ULL;  // look again at the next launch
    return MeterResult::kAdmitted;
  }
  CUevent begin = nullptr;
  if (s->chain != nullptr && s->count > 0 && s->ring[(s->head + s->count - 1) % kRing].end == s->chain) {
    // The segment this call just closed ends where the new one begins (nothing was submitted on
    // the stream in between): its end event is the new begin, one cuEventRecord per segment.
    s->ring[(s->head + s->count - 1) % kRing].end_lent = true;
    begin = s->chain;
  } else {
    begin = TakeEvent(*s);
    if (begin == nullptr || !Record(*s, begin)) {
      GiveEvent(*s, begin);
      s->unmetered = true;
      return MeterResult::kAdmitted;
    }
  }
  s->chain = nullptr;
  s->open.begin = begin;
  s->open.kernels = kernels;
  st.pending_kernels += kernels;
  // 4. Credit: the kernels that still fit before the expiry, at most an eighth of a quantum's worth.
  const uint64_t unit = Unit(st, board, slot);
  const uint64_t remaining = Remaining(board, slot, now);
  const uint64_t queued = st.pending_kernels * unit;
  const int64_t fit = remaining > queued ? static_cast<int64_t>((remaining - queued) / unit) : 0;
  const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(quantum / 8 / unit));
  SetCredit(st, std::min({fit, cap, kMaxCredit}));
  st.last_open = s;
  t_meter.generation = g_meter.generation.load(std::memory_order_relaxed);
  line.busy_until_ns.store(now + queued, std::memory_order_relaxed);
  return MeterResult::kAdmitted;
}

void MeterFlush(LeaseBoard& board, uint32_t slot) noexcept {
  if (!g_meter.on.load(std::memory_order_relaxed)) return;
  MeterState& st = State();
  std::lock_guard<std::mutex> lock(st.mu);
  Settle(st);
  CloseAll(st);
  Poll(st, board, slot);
}

void MeterCaptureBegin() noexcept {
  if (!g_meter.on.load(std::memory_order_relaxed)) return;
  MeterState& st = State();
  std::lock_guard<std::mutex> lock(st.mu);
  Settle(st);
  CloseAll(st);
}

void MeterResetAfterFork() noexcept {
  StatePtr() = new MeterState;  // the parent's events are not the child's (the old state is leaked)
  g_meter.credit.store(0, std::memory_order_relaxed);
  g_meter.generation.fetch_add(1, std::memory_order_relaxed);
  t_meter = MeterThread{};
}

}  // namespace tessera::enforce::shim
