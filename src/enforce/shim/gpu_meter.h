// GpuMeter: measures the GPU time a tenant's work really takes, with CUDA events on the tenant's
// own streams, and keeps the work it has queued but the GPU has not finished inside its lease
// (issue 29 §1). LaunchGate() calls it for every admitted kernel, cooperative and graph launch of
// a process gated on one GPU; the arbiter charges the measured time (enforce/lease.h,
// LeaseSlotGpuLine) instead of a per-kernel duration estimate.
//
// How it measures. Launches are grouped into segments per stream. A segment opens with an event
// recorded before its first launch (`begin`) and closes with one recorded after its last (`end`);
// both are created with CU_EVENT_BLOCKING_SYNC on the launch's context. When the slow path closes a
// stream's segment and opens the next one on that stream in the same call (nothing submitted in
// between), the closing `end` is also the new `begin` (it is given back with the later segment).
// A closed segment is read back without blocking: cuEventElapsedTime(begin, end) is the GPU time of
// its work, or CUDA_ERROR_NOT_READY while either event has not completed (so no cuEventQuery). A
// `begin` recorded on its own completes only when the stream's earlier work has run, so a gap while
// the host submitted nothing (or waited) is not counted: segments are chained only within one call. The measured time of every finished segment
// is added to the slot's `gpu_ns`; its time per kernel (graphs count their kernel nodes) feeds an
// EWMA `unit_ns`; until the first sample the node's `kernel_est_ns` (the duration estimate, 1 ms
// when unset) stands in. That is the only use left for the estimate: a hint for the first lease.
//
// How it bounds. Work queued and not finished counts against the lease: `pending` = kernels
// launched in open and unfinished segments x unit_ns. A launch is admitted while
// pending + its own cost fits before the lease's expiry; otherwise the launching thread closes the
// open segments and waits for the oldest to finish (cuEventSynchronize on its `end`), reads the
// finished ones back and checks again. If the lease ended meanwhile it returns kLeaseLost and the
// caller waits for the next lease. So a tenant's tail past its expiry is at most one segment, not
// a push buffer of work (the H200's 30/70 -> 50/50 with 1.65 ms matmuls).
//
// Cost. The fast path is a thread-local compare (same stream and segment generation as this
// thread's previous launch) and one relaxed fetch_sub on a process-wide credit: the number of
// kernels the last slow path allowed before it must look again (what fits in the lease, at most an
// eighth of a quantum of estimated work, at most 4096). Launches admitted on the credit are added
// to the segment the credit was granted with (several threads on several streams: approximate per
// segment, exact in total). The slow path takes a mutex and makes two driver calls per segment in
// the steady state (one cuEventRecord, one cuEventElapsedTime), never one per launch; besides:
// cuEventCreate until the stream's event pool is filled, cuStreamIsCapturing only once the process
// has begun a stream capture (g_capture_begun), and cuEventSynchronize only when its queued work
// would run past the lease's expiry (at a lease boundary). Counted by tests/shim/launch_path_test.cc
// (at most one driver call per 1,000 launches besides the launch itself).
//
// Worked example (quantum 10 ms, estimate 1 ms, kernels really 4 ms, one stream, lease [0, 10) ms):
//   launch 1: slow path; no sample yet, unit = 1 ms (the hint); segment 1 opens (begin event),
//             pending 1 kernel; credit = min((10 - 1) / 1, max(1, 10 / 8 / 1)) = 1 kernel.
//   launch 2: fast path (credit 1 -> 0).
//   launch 3: slow path: segment 1 closes with 2 kernels (end event), segment 2 opens (its begin
//             is segment 1's end event: one cuEventRecord); pending 3.
//   ... launch 10: pending 9 + 1 > 10 ms left -> wait on segment 1's end: done at 8 ms, elapsed
//             8 ms -> gpu_ns += 8 ms, unit = 4 ms; pending 8 x 4 = 32 ms > 2 ms left -> wait on
//             segment 2 (done at 16 ms); the lease ended at 10 -> kLeaseLost: the launch waits for
//             the next lease. The arbiter charges 8, then 16, ... ms as the events report them.
//   Next lease: unit = 4 ms, so it admits 2 kernels (8 ms) and its work ends inside the lease.
//
// Not measured (charged as before, by lease time and estimate): processes gated on several GPUs,
// streams beyond kMaxStreams, launches on a stream while it is being captured (the capture is
// charged when its graph is launched), and a process whose event calls fail (metering is switched
// off for the slot: `metering` = 0). A launch racing another thread's segment close may land
// outside any segment and go unmeasured (the next segment's begin event still waits for it).
//
// Thread-safety: any thread may call MeterLaunch; the slow path is serialised by a mutex.
#pragma once

#include <atomic>
#include <cstdint>

#include "tessera/enforce/cuda_abi.h"
#include "tessera/enforce/lease.h"

namespace tessera::enforce::shim {

// The real driver entry points the meter calls (resolved from libcuda like the other real
// pointers, never a hooked path).
struct MeterDriver {
  cuabi::PFN_cuEventCreate_v2000 create = nullptr;
  cuabi::PFN_cuEventRecord_v2000 record = nullptr;
  cuabi::PFN_cuEventRecord_v2000 record_ptsz = nullptr;
  cuabi::PFN_cuEventQuery_v2000 query = nullptr;
  cuabi::PFN_cuEventSynchronize_v2000 synchronize = nullptr;
  cuabi::PFN_cuEventElapsedTime_v2000 elapsed = nullptr;
  cuabi::PFN_cuEventDestroy_v4000 destroy = nullptr;
  cuabi::PFN_cuStreamIsCapturing_v10000 is_capturing = nullptr;
  cuabi::PFN_cuStreamIsCapturing_v10000 is_capturing_ptsz = nullptr;
  bool complete() const {
    return create && record && query && synchronize && elapsed && destroy && is_capturing;
  }
};

enum class MeterResult : uint8_t { kAdmitted, kLeaseLost };

// Process-wide meter state read by the fast path (the rest lives in shim.cc).
struct MeterFast {
  std::atomic<bool> on{false};           // set once by the constructor (gated on one GPU, events resolved)
  std::atomic<uint64_t> generation{0};   // +1 whenever segments are closed behind other threads' backs
  std::atomic<int64_t> credit{0};        // kernels admitted before the next slow path
};
extern MeterFast g_meter;

// Set (for good) by LaunchGate() when this process begins its first stream capture. Until then no
// stream can be capturing (every capture begin entry point is hooked), so neither the gate's wait
// path nor the meter asks the driver (cuStreamIsCapturing).
extern std::atomic<bool> g_capture_begun;

struct MeterThread {
  uintptr_t stream_key = 0;  // this thread's previous launch: stream (| 1 for a per-thread flavour)
  uint64_t generation = ~0ULL;
};
extern thread_local MeterThread t_meter __attribute__((tls_model("initial-exec")));

inline uintptr_t MeterStreamKey(cuabi::CUstream stream, bool per_thread) noexcept {
  return reinterpret_cast<uintptr_t>(stream) << 1 | (per_thread ? 1u : 0u);
}

// `refund`: the caller took `kernels` from the credit and found it short (the slow path returns them).
MeterResult MeterLaunchSlow(LeaseBoard& board, uint32_t slot, cuabi::CUstream stream, bool per_thread,
                            uint32_t kernels, bool refund) noexcept;
// The real entry points (filled in by the shim when it loads the driver) and the switch: the meter
// runs when the process is gated on one GPU's board, every entry point above resolved, and
// TESSERA_SHIM_GPU_METER is not "0"; it sets the slot's `metering` flag then.
extern MeterDriver g_meter_driver;
// In a fork()ed child: forget the parent's segments and events.
void MeterResetAfterFork() noexcept;
// Before a launch waits for the lease: close the open segments and read back what finished, so
// the arbiter sees the tenant's measured time while it waits.
void MeterFlush(LeaseBoard& board, uint32_t slot) noexcept;
// A capture is about to begin on `stream`: no segment may stay open (its end event would be
// captured into the graph).
void MeterCaptureBegin() noexcept;

// Called after the lease admitted a launch of `kernels` kernels on `stream`.
inline MeterResult MeterLaunch(LeaseBoard& board, uint32_t slot, cuabi::CUstream stream, bool per_thread,
                               uint32_t kernels) noexcept {
  if (!g_meter.on.load(std::memory_order_relaxed)) return MeterResult::kAdmitted;
  MeterThread& t = t_meter;
  if (__builtin_expect(t.stream_key == MeterStreamKey(stream, per_thread) &&
                           t.generation == g_meter.generation.load(std::memory_order_relaxed),
                       1)) {
    if (__builtin_expect(g_meter.credit.fetch_sub(kernels, std::memory_order_relaxed) >= kernels, 1)) {
      return MeterResult::kAdmitted;
    }
    return MeterLaunchSlow(board, slot, stream, per_thread, kernels, /*refund=*/true);
  }
  return MeterLaunchSlow(board, slot, stream, per_thread, kernels, /*refund=*/false);
}

}  // namespace tessera::enforce::shim
