// Graph charging in libtessera-shim.so: how many kernels one cuGraphLaunch of an executable graph
// runs, learned when the graph is instantiated, so that the lease gate charges a graph launch
// `kernels x the tenant's kernel estimate` (enforce/lease.h, LaunchCostNs) instead of one kernel.
//
//   CountGraphKernels   walks a CUgraph through the driver's own cuGraphGetNodes /
//                       cuGraphNodeGetType / cuGraphChildGraphNodeGetGraph: a KERNEL node counts
//                       1, a child GRAPH node counts the kernels of its graph (recursively, at most
//                       kMaxGraphDepth levels), a CONDITIONAL node counts 1 (an estimate: the
//                       driver API has no call that returns a conditional node's body graphs, and
//                       how often a body runs is decided on the GPU), every other node 0.
//   GraphExecTable      exec handle -> kernel count; a fixed open-addressing table (kSlots slots,
//                       linear probing of at most kMaxProbe slots, tombstones on erase). Lookups
//                       (the cuGraphLaunch path) are lock-free: a few relaxed/acquire loads.
//                       Inserts and erases (instantiate, cuGraphExecDestroy) take a spin lock.
//                       Bounded: when the probe window is full the exec is not recorded, and an
//                       unknown exec is charged as 1 kernel (what the shim charged before).
//
// Worked example: graph G = 5 kernel nodes + a child graph node (child: 2 kernels + a grandchild
// graph of 1 kernel) + an empty node.
//   CountGraphKernels(G) = 5 + (2 + 1) + 0 = 8
//   cuGraphInstantiateWithFlags(&exec, G, 0) succeeds -> table.Put(exec, 8)
//   cuGraphLaunch(exec, s) -> table.Get(exec) = 8 -> the lease is charged 8 x kernel_est_ns
//   cuGraphExecDestroy(exec) -> table.Erase(exec) (before the driver frees the handle, which it
//   may hand out again at once); a later launch of the stale handle is charged 1.
//
// cuGraphExecUpdate needs no hook: it only succeeds when the new graph has the topology of the
// exec's graph (same nodes, same node types, child graphs included), so the count is unchanged.
// cuGraphUpload launches nothing.
//
// Thread-safety: Get may run concurrently with Put/Erase on any thread. A Get racing with the
// Erase of the same exec (a launch racing with its own destroy: an application bug) may return
// the count of a newer exec that reused the slot; that only changes the estimate of that launch.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "tessera/enforce/cuda_abi.h"

namespace tessera::enforce::shim {

inline constexpr int kMaxGraphDepth = 16;

struct GraphDriverFns {
  cuabi::PFN_cuGraphGetNodes_v10000 get_nodes = nullptr;
  cuabi::PFN_cuGraphNodeGetType_v10000 node_type = nullptr;
  cuabi::PFN_cuGraphChildGraphNodeGetGraph_v10000 child_graph = nullptr;
};

// Kernel nodes one launch of `graph` runs (see above), saturated at UINT32_MAX; nullopt when the
// driver cannot tell (a helper missing, any query failing, nesting deeper than kMaxGraphDepth).
inline std::optional<uint64_t> CountGraphKernels(const GraphDriverFns& fns, cuabi::CUgraph graph, int depth = 0) {
  using namespace tessera::cuabi;  // NOLINT
  if (graph == nullptr || depth > kMaxGraphDepth || fns.get_nodes == nullptr || fns.node_type == nullptr) {
    return std::nullopt;
  }
  size_t n = 0;
  if (fns.get_nodes(graph, nullptr, &n) != CUDA_SUCCESS) return std::nullopt;
  std::vector<CUgraphNode> nodes(n);
  if (n > 0 && fns.get_nodes(graph, nodes.data(), &n) != CUDA_SUCCESS) return std::nullopt;
  if (n < nodes.size()) nodes.resize(n);  // nodes removed in between
  uint64_t kernels = 0;
  for (CUgraphNode node : nodes) {
    if (node == nullptr) continue;
    CUgraphNodeType type = 0;
    if (fns.node_type(node, &type) != CUDA_SUCCESS) return std::nullopt;
    if (type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
      ++kernels;
    } else if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
      CUgraph child = nullptr;
      if (fns.child_graph == nullptr || fns.child_graph(node, &child) != CUDA_SUCCESS) return std::nullopt;
      std::optional<uint64_t> sub = CountGraphKernels(fns, child, depth + 1);
      if (!sub.has_value()) return std::nullopt;
      kernels += *sub;
    }
    if (kernels > UINT32_MAX) return UINT32_MAX;
  }
  return kernels;
}

class GraphExecTable {
 public:
  static constexpr int kSlots = 4096;  // a power of two
  static constexpr int kMaxProbe = 64;

  // Records (or updates) `exec`. False when its probe window is full (not recorded).
  bool Put(const void* exec, uint32_t kernels) noexcept {
    const uintptr_t key = Key(exec);
    if (key <= kTombstone) return false;
    Lock();
    used_.store(true, std::memory_order_relaxed);
    Slot* free_slot = nullptr;
    Slot* found = nullptr;
    for (int i = 0; i < kMaxProbe; ++i) {
      Slot& s = slots_[(Home(key) + i) & (kSlots - 1)];
      const uintptr_t k = s.key.load(std::memory_order_relaxed);
      if (k == key) {
        found = &s;
        break;
      }
      if (k == kTombstone && free_slot == nullptr) free_slot = &s;
      if (k == kEmpty) {
        if (free_slot == nullptr) free_slot = &s;
        break;  // nothing of this key lies beyond an empty slot
      }
    }
    Slot* target = found != nullptr ? found : free_slot;
    if (target != nullptr) {
      target->kernels.store(kernels, std::memory_order_relaxed);
      target->key.store(key, std::memory_order_release);  // publishes the count
    }
    Unlock();
    return target != nullptr;
  }

  // The recorded kernel count of `exec`, or nullopt.
  std::optional<uint32_t> Get(const void* exec) const noexcept {
    const uintptr_t key = Key(exec);
    if (key <= kTombstone) return std::nullopt;
    for (int i = 0; i < kMaxProbe; ++i) {
      const Slot& s = slots_[(Home(key) + i) & (kSlots - 1)];
      const uintptr_t k = s.key.load(std::memory_order_acquire);
      if (k == key) return s.kernels.load(std::memory_order_relaxed);
      if (k == kEmpty) return std::nullopt;
    }
    return std::nullopt;
  }

  void Erase(const void* exec) noexcept {
    const uintptr_t key = Key(exec);
    if (key <= kTombstone || !used_.load(std::memory_order_relaxed)) return;
    Lock();
    for (int i = 0; i < kMaxProbe; ++i) {
      Slot& s = slots_[(Home(key) + i) & (kSlots - 1)];
      const uintptr_t k = s.key.load(std::memory_order_relaxed);
      if (k == key) {
        s.key.store(kTombstone, std::memory_order_release);
        break;
      }
      if (k == kEmpty) break;
    }
    Unlock();
  }

  // A fork child: no executable graph survives fork, and another thread of the parent may have
  // held the lock. Touches the table only if it was ever used.
  void ResetAfterFork() noexcept {
    lock_.store(false, std::memory_order_relaxed);
    if (!used_.load(std::memory_order_relaxed)) return;
    for (Slot& s : slots_) s.key.store(kEmpty, std::memory_order_relaxed);
  }

 private:
  static constexpr uintptr_t kEmpty = 0;
  static constexpr uintptr_t kTombstone = 1;
  struct Slot {
    std::atomic<uintptr_t> key{kEmpty};
    std::atomic<uint32_t> kernels{0};
  };
  static uintptr_t Key(const void* p) noexcept { return reinterpret_cast<uintptr_t>(p); }
  static uint32_t Home(uintptr_t key) noexcept {
    return static_cast<uint32_t>((static_cast<uint64_t>(key >> 4) * 0x9E3779B97F4A7C15ull) >> 52);  // 12 bits
  }
  static_assert(kSlots == 1 << 12, "Home() yields 12 bits");
  // Writers hold it for at most kMaxProbe slot visits; a waiter yields (the holder may have been
  // preempted on a busy machine).
  void Lock() noexcept {
    while (lock_.exchange(true, std::memory_order_acquire)) {
      while (lock_.load(std::memory_order_relaxed)) ::sched_yield();
    }
  }
  void Unlock() noexcept { lock_.store(false, std::memory_order_release); }

  Slot slots_[kSlots];
  std::atomic<bool> lock_{false};
  std::atomic<bool> used_{false};
};

}  // namespace tessera::enforce::shim
