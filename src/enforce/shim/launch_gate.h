// LaunchGate: the single point every launch-family wrapper of libtessera-shim.so passes before it
// calls the driver — kernel launches (cuLaunchKernel[Ex], legacy cuLaunch*), cooperative launches,
// graph launches (cuGraphLaunch) and stream-capture begins — in every ABI and _ptsz variant.
//
// TODAY IT ONLY COUNTS: one relaxed increment of this process's per-kind launch counter in its
// slot of the shared segment (the node side reads them per tenant). It never blocks. Compute
// time-slicing (weighted fair leases granted by the node side; include/tessera/enforce/lease.h,
// built separately) is meant to hook in here: the fast path will read the tenant's lease word and
// the slow path wait on a futex. Stream-capture begins and launches inside a capture are recorded
// by the driver, not executed, so they must never wait: the capture kind stays count-only.
//
// Cost: one thread-shared pointer load and one uncontended atomic add on a cache line only this
// process writes (measured by bench/shim_bench.cc, BM_LaunchThroughShim).
// Thread-safety: callable from any thread, including after fork() in the child.
#pragma once

#include <atomic>

#include "tessera/enforce/segment.h"

namespace tessera::enforce::shim {

// This process's slot, or a process-local dummy when the process is not managed; nullptr until
// the first launch (or allocation) looked it up.
extern std::atomic<ProcessSlot*> g_launch_slot;
ProcessSlot* LaunchSlotSlow() noexcept;

inline void LaunchGate(CountedLaunch kind) noexcept {
  ProcessSlot* slot = g_launch_slot.load(std::memory_order_acquire);
  if (__builtin_expect(slot == nullptr, 0)) slot = LaunchSlotSlow();
  slot->launches[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
}

}  // namespace tessera::enforce::shim
