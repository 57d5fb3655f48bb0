// LaunchGate: the single point every launch-family wrapper of libtessera-shim.so passes before it
// calls the driver — kernel launches (cuLaunchKernel[Ex], legacy cuLaunch*), cooperative launches,
// graph launches (cuGraphLaunch, charged by the kernel nodes of the graph) and stream-capture
// begins — in every ABI and _ptsz variant.
//
// It does two things:
//   1. counts the launch (one relaxed increment of this process's per-kind counter in its slot of
//      the memory segment; the node side reads them per tenant);
//   2. gates kernel, cooperative and graph launches on the tenant's compute lease
//      (enforce/lease.h) when the process is managed and the launcher gave a lease file
//      (TESSERA_SHIM_LEASES, enforce/lease_file.h): the fast path is TryAdmitLaunch — one load of
//      the board's lease word, a compare with a TSC-based clock (GateNowNs), and the relaxed
//      counter updates on the tenant's own line. Anything else goes to LaunchGateSlow() (in
//      shim.cc): the capture check (cuStreamIsCapturing, asked only once the process has begun a
//      capture: g_capture_begun; a capturing stream never waits), the
//      futex wait (GateLaunch), and the failure policy when the arbiter is dead
//      (docs/decisions/0002-shim-fail-open-or-closed.md). Capture begins are only counted.
//
// Worked example (tenant 2 on node GPU 0, arbiter granted slot 2 until t = 12 ms):
//   t = 5 ms   cuLaunchKernel -> counters[kKernel] += 1; TryAdmitLaunch(board0, 2, kernel, 5 ms)
//              -> kAdmitted: the driver is called at once (no syscall on the way)
//   t = 13 ms  cuLaunchKernel -> kMustWait -> LaunchGateSlow: stream not capturing -> FUTEX_WAIT
//              until the arbiter grants slot 2 again, then the launch is counted and proceeds
//   t = 13 ms  cuLaunchKernel on a capturing stream -> kMustWait -> LaunchGateSlow: capturing ->
//              counted in captured_launches, proceeds without waiting
//
// The clock: CLOCK_MONOTONIC through the vDSO costs 27-70 ns on the development VM (kvm-clock),
// more than the launch budget; CLOCK_MONOTONIC_COARSE ticks every 4 ms, which would make a busy
// holder look idle to the arbiter. GateNowNs reads the TSC (about 14 ns there) and converts it
// with a per-thread calibration against CLOCK_MONOTONIC (2 ms to calibrate, re-anchored every
// 100 ms; until calibrated and on other architectures it returns MonotonicNowNs()).
//
// Cost: measured by bench/shim_bench.cc, BM_LaunchThroughShim - BM_LaunchDirect, and with every
// driver call charged (BM_LaunchThroughShimCharged - BM_LaunchDirectCharged). A held lease on one
// GPU calls the driver only for the launch itself (the meter: two calls per segment of up to 4,096
// launches); tests/shim/launch_path_test.cc counts it. A process on several GPUs finds the board
// of its current context's GPU in a thread-local cache (ThreadContextBoard below, kept by the
// context hooks: context_cache.h) and asks the driver (cuCtxGetDevice) only when that is unknown.
// Thread-safety: callable from any thread, including after fork() in the child.
#pragma once

#include <atomic>
#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "src/enforce/shim/gpu_meter.h"
#include "tessera/enforce/cuda_abi.h"
#include "tessera/enforce/lease.h"
#include "tessera/enforce/segment.h"

namespace tessera::enforce::shim {

// This process's slot, or a process-local dummy when the process is not managed; nullptr until
// the first launch (or allocation) looked it up.
extern std::atomic<ProcessSlot*> g_launch_slot;
ProcessSlot* LaunchSlotSlow() noexcept;

// The compute gate's configuration: written once by the constructor, before any launch.
struct ComputeGate {
  LeaseBoard* single = nullptr;  // the board when every CUDA ordinal is the same node GPU
  LeaseBoard* boards = nullptr;  // boards by node GPU; nullptr = compute is not gated
  int num_boards = 0;
  uint32_t slot = 0;             // lease slot = the tenant index
};
extern ComputeGate g_gate;

// --- the current context's board (a process gated on several GPUs) --------------------------------
// Valid while `generation` equals g_ctx_generation; `board` is then the board of the node GPU of
// the thread's current context, or nullptr when that GPU is not gated (no board, or an ordinal
// outside TESSERA_SHIM_GPUS). Written by the context hooks and by ContextBoardSlow (shim.cc).
struct ThreadContextBoard {
  uint64_t generation = 0;  // 0: never valid (g_ctx_generation starts at 1)
  LeaseBoard* board = nullptr;
};
extern thread_local ThreadContextBoard t_ctx_board __attribute__((tls_model("initial-exec")));
// Bumped when a context may have gone away under another thread (cuCtxDestroy*, primary context
// release/reset, fork): every thread asks the driver once more.
extern std::atomic<uint64_t> g_ctx_generation;
// Asks the driver for the current context's device and remembers it for this thread; nullptr when
// that GPU is not gated, or when the driver cannot say (no current context: not remembered).
LeaseBoard* ContextBoardSlow() noexcept;

// --- the gate's clock ---------------------------------------------------------------------------
struct GateClock {
  uint64_t tsc0 = 0;        // calibration point: TSC ...
  uint64_t ns0 = 0;         // ... and CLOCK_MONOTONIC there
  uint64_t mult = 0;        // ns per TSC tick, 32.32 fixed point
  uint64_t span = 0;        // ticks after tsc0 the calibration is used for (0 = not calibrated)
  uint64_t anchor_tsc = 0;  // start of the current measurement
  uint64_t anchor_ns = 0;
};
extern thread_local GateClock t_gate_clock __attribute__((tls_model("initial-exec")));
uint64_t GateClockSlow() noexcept;

inline uint64_t GateNowNs() noexcept {
#if defined(__x86_64__)
  const GateClock& c = t_gate_clock;
  const uint64_t d = __rdtsc() - c.tsc0;
  if (__builtin_expect(d < c.span, 1)) return c.ns0 + ((d * c.mult) >> 32);
  return GateClockSlow();
#else
  return MonotonicNowNs();
#endif
}

inline LaunchKind LeaseKindOf(CountedLaunch kind) noexcept {
  switch (kind) {
    case CountedLaunch::kCooperative: return LaunchKind::kCooperative;
    case CountedLaunch::kGraph: return LaunchKind::kGraph;
    default: return LaunchKind::kKernel;
  }
}

// Everything but the fast paths: capture check, waiting, failure policy (and the current context's
// board when called with nullptr).
// `graph_kernels`: for kGraph, the kernel nodes of the executable graph (learned at instantiation,
// graph_exec_table.h); the lease is charged that many kernel estimates. A constant 1 for the
// other kinds, so their fast path does not change.
void LaunchGateSlow(LeaseBoard* board, CountedLaunch kind, cuabi::CUstream stream, bool per_thread,
                    uint32_t graph_kernels) noexcept;

inline void LaunchGate(CountedLaunch kind, cuabi::CUstream stream = nullptr, bool per_thread = false,
                       uint32_t graph_kernels = 1) noexcept {
  ProcessSlot* slot = g_launch_slot.load(std::memory_order_acquire);
  if (__builtin_expect(slot == nullptr, 0)) slot = LaunchSlotSlow();
  slot->launches[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
  if (kind == CountedLaunch::kCaptureBegin) {
    g_capture_begun.store(true, std::memory_order_release);  // before the driver begins it
    if (g_meter.on.load(std::memory_order_relaxed)) MeterCaptureBegin();
    return;
  }
  LeaseBoard* board = g_gate.single;
  if (__builtin_expect(board != nullptr, 1)) {
    LaunchRequest request;
    request.kind = LeaseKindOf(kind);
    request.graph_kernels = graph_kernels;
    if (__builtin_expect(TryAdmitLaunch(*board, g_gate.slot, request, GateNowNs()) == GateResult::kAdmitted, 1) &&
        __builtin_expect(MeterLaunch(*board, g_gate.slot, stream, per_thread, graph_kernels) == MeterResult::kAdmitted,
                         1)) {
      return;
    }
  } else if (g_gate.boards == nullptr) {
    return;  // compute not gated
  } else {
    // Several GPUs: the board of the current context's GPU (no meter on this path).
    const ThreadContextBoard& cached = t_ctx_board;
    if (__builtin_expect(cached.generation == g_ctx_generation.load(std::memory_order_acquire), 1)) {
      board = cached.board;
    } else {
      board = ContextBoardSlow();
    }
    if (board == nullptr) return;  // not gated on that GPU, or no current context
    LaunchRequest request;
    request.kind = LeaseKindOf(kind);
    request.graph_kernels = graph_kernels;
    if (__builtin_expect(TryAdmitLaunch(*board, g_gate.slot, request, GateNowNs()) == GateResult::kAdmitted, 1)) {
      return;
    }
  }
  LaunchGateSlow(board, kind, stream, per_thread, graph_kernels);
}

}  // namespace tessera::enforce::shim
