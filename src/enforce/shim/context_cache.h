// What the shim knows about the current CUDA context, so that a process gated on several GPUs finds
// the lease board of its launch without asking the driver (cuCtxGetDevice) at every launch
// (issue 29 §2; docs/enforcement-compute.md, "Driver calls on the launch path").
//
// The current context is per thread and changes only through entry points the shim hooks
// (hook_list.h, family kContext, reached by direct binding, dlsym/dlvsym and cuGetProcAddress
// alike): cuCtxCreate* and cuCtxPushCurrent* push, cuCtxPopCurrent* pops, cuCtxSetCurrent replaces
// the top of the thread's context stack (NULL pops), cuCtxDestroy* of the current context pops it.
// A context's device never changes. So the shim keeps, per thread, a mirror of the top of the
// thread's context stack (ContextStackMirror: each entry the context handle and its CUDA ordinal,
// either unknown) and, process-wide, the ordinal of every context it saw created or retained
// (ContextTable). The launch path reads one thread-local word (launch_gate.h, ThreadContextBoard)
// and asks the driver only when the mirror does not know the current context's device (a thread
// that has not switched through a hook yet, a context the shim never saw made, a stack deeper than
// the mirror, after a destroy or a failed switch); it remembers the answer.
//
// Fail safe: whatever the mirror does not know is unknown, never guessed. Below the entries a
// thread pushed since the mirror was last reset lie entries marked unknown; the real stack may be
// shorter or longer there, but an unknown entry only ever makes the shim ask the driver.
//
// Worked example (thread T, contexts A on ordinal 0, B on ordinal 1, both made by cuCtxCreate_v2):
//   cuCtxCreate_v2(&A, 0, 0)  table A -> 0; mirror [A:0]             launch: board of GPU 0
//   cuCtxCreate_v2(&B, 0, 1)  table B -> 1; mirror [A:0, B:1]        launch: board of GPU 1
//   cuCtxPopCurrent_v2        mirror [A:0]                           launch: board of GPU 0
//   cuCtxSetCurrent(B)        mirror [B:1] (replaces the top)        launch: board of GPU 1
//   cuCtxSetCurrent(G)        G never seen (a green context): mirror [G:?]; the next launch asks
//                             cuCtxGetDevice once (say 1): mirror [G:1]; later launches ask nothing
//   cuCtxDestroy_v2(B)        elsewhere: every thread's launch cache is stale (generation bumped)
//                             and asks the driver once; on T itself the mirror also forgets
// Thread-safety: ContextStackMirror is used by its own thread only; ContextTable takes its mutex.
#pragma once

#include <cstdint>
#include <mutex>
#include <new>

#include "tessera/enforce/cuda_abi.h"

namespace tessera::enforce::shim {

inline constexpr int kUnknownOrdinal = -1;

// The top of one thread's context stack, as far as the shim saw it change.
class ContextStackMirror {
 public:
  static constexpr int kDepth = 16;
  struct Entry {
    cuabi::CUcontext ctx = nullptr;  // nullptr: unknown
    int ordinal = kUnknownOrdinal;
  };

  // The current context's ordinal, or kUnknownOrdinal.
  int CurrentOrdinal() const { return depth_ > 0 ? entries_[depth_ - 1].ordinal : kUnknownOrdinal; }
  cuabi::CUcontext CurrentContext() const { return depth_ > 0 ? entries_[depth_ - 1].ctx : nullptr; }

  void Push(cuabi::CUcontext ctx, int ordinal) {
    if (depth_ == kDepth) {  // forget the bottom entry: popping that far down reads "unknown"
      for (int i = 1; i < kDepth; ++i) entries_[i - 1] = entries_[i];
      --depth_;
    }
    entries_[depth_++] = Entry{ctx, ordinal};
  }
  void Pop() {
    if (depth_ > 0) --depth_;
  }
  // cuCtxSetCurrent: NULL pops; otherwise the top is replaced (pushed on an empty mirror).
  void Set(cuabi::CUcontext ctx, int ordinal) {
    if (ctx == nullptr) return Pop();
    if (depth_ == 0) return Push(ctx, ordinal);
    entries_[depth_ - 1] = Entry{ctx, ordinal};
  }
  // The driver said the current context is on `ordinal`.
  void Learn(int ordinal) {
    if (depth_ == 0) return Push(nullptr, ordinal);
    entries_[depth_ - 1].ordinal = ordinal;
  }
  // Nothing is known any more (the depth stays: the entries below read "unknown").
  void Forget() {
    for (int i = 0; i < depth_; ++i) entries_[i] = Entry{};
  }
  int depth() const { return depth_; }

 private:
  Entry entries_[kDepth];
  int depth_ = 0;
};

// The ordinal of every context the shim saw created (cuCtxCreate*) or retained
// (cuDevicePrimaryCtxRetain), until it is destroyed (or the primary context released or reset).
// At most kSlots contexts; a context that finds no room is simply not known.
class ContextTable {
 public:
  static constexpr int kSlots = 64;

  void Put(cuabi::CUcontext ctx, int ordinal, bool primary) {
    if (ctx == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    Slot* free_slot = nullptr;
    for (Slot& s : slots_) {
      if (s.ctx == ctx) {
        s = Slot{ctx, ordinal, primary};
        return;
      }
      if (s.ctx == nullptr && free_slot == nullptr) free_slot = &s;
    }
    if (free_slot != nullptr) *free_slot = Slot{ctx, ordinal, primary};
  }
  int Get(cuabi::CUcontext ctx) {
    if (ctx == nullptr) return kUnknownOrdinal;
    std::lock_guard<std::mutex> lock(mu_);
    for (const Slot& s : slots_) {
      if (s.ctx == ctx) return s.ordinal;
    }
    return kUnknownOrdinal;
  }
  void Erase(cuabi::CUcontext ctx) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Slot& s : slots_) {
      if (s.ctx == ctx) s = Slot{};
    }
  }
  // cuDevicePrimaryCtxRelease/Reset: the primary context of `ordinal` may be gone.
  void ErasePrimary(int ordinal) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Slot& s : slots_) {
      if (s.primary && s.ordinal == ordinal) s = Slot{};
    }
  }
  // A fork child: the parent's contexts are not the child's (the mutex may have been held).
  void ResetAfterFork() {
    new (&mu_) std::mutex;
    for (Slot& s : slots_) s = Slot{};
  }

 private:
  struct Slot {
    cuabi::CUcontext ctx = nullptr;
    int ordinal = kUnknownOrdinal;
    bool primary = false;
  };
  std::mutex mu_;
  Slot slots_[kSlots];
};

}  // namespace tessera::enforce::shim
