// libtessera-shim.so: the LD_PRELOAD interposer that enforces a tenant's device-memory limit
// inside its processes and passes every launch through LaunchGate(). Design and the list of what
// is and is not covered: docs/enforcement.md. The hooked entry points: hook_list.h.
//
// Configuration: environment variables set by the launcher, read ONCE by the constructor (never
// per call):
//   TESSERA_SHIM_POLICY    policy file of the node segment (mapped read-only)
//   TESSERA_SHIM_COUNTERS  counters folder of the node segment: the process maps only its own
//                          tenant's file in it, `<folder>/<tenant index>`, read-write (segment.h)
//   TESSERA_SHIM_TENANT    this process's tenant index (0..63), used only for a segment whose
//                          directory has neither a `members` folder nor a `tenant` file (a test's
//                          or a benchmark's); in a node directory the tenant is the one the node
//                          side assigned to the process's nearest member ancestor or its session
//                          leader (AssignedTenant below, tessera/node/node_dir.h); in a container
//                          of a Kubernetes claim, the index in the `tenant` file next to the policy
//                          (written by the DRA driver, mounted read-only: FileTenant below); a
//                          different value here is ignored
//   TESSERA_SHIM_GPUS      node GPU index of each CUDA ordinal, comma-separated ("3,5": ordinal 0
//                          is node GPU 3); default: ordinal i is node GPU i
//   TESSERA_SHIM_LIBCUDA   the driver library (default libcuda.so.1)
//   TESSERA_SHIM_FAIL      closed (default) | open: what a misconfigured process does: refuse
//                          device allocations (CUDA_ERROR_NOT_PERMITTED) or run unaccounted
//   TESSERA_SHIM_LOG       1: diagnostics on stderr
//   TESSERA_SHIM_LEASES    the node's lease file (enforce/lease_file.h): gate kernel, cooperative
//                          and graph launches on the tenant's compute lease; unset: not gated
//   TESSERA_SHIM_COMPUTE_FAIL  open (default) | closed: what a launch does when the lease
//                          arbiter is dead (no heartbeat for 1 s): run ungated with an alarm, or
//                          wait until an arbiter is back (docs/decisions/0002-...); any other
//                          value is reported on stderr and means closed
// Without TESSERA_SHIM_POLICY the process is unmanaged: every call passes straight through
// (launches are still counted, process-locally).
//
// Error policy: the wrappers are noexcept and never throw; driver errors are returned unchanged;
// the shim's own refusals are CUDA_ERROR_OUT_OF_MEMORY (over the limit),
// CUDA_ERROR_INVALID_DEVICE (an ordinal outside TESSERA_SHIM_GPUS, including a memory pool
// located there or such a device's own pool), CUDA_ERROR_NOT_SUPPORTED (a memory pool whose
// location is neither a device nor the host) and CUDA_ERROR_NOT_PERMITTED (misconfigured,
// fail-closed). With the tenant's scrub-on-free flag (policy page), a free whose
// scrub fails returns the memset's error (CUDA_ERROR_NOT_SUPPORTED without a memset) and frees
// nothing (see HandleMemFree).
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

#include "src/enforce/shim/context_cache.h"
#include "src/enforce/shim/gpu_meter.h"
#include "src/enforce/shim/graph_exec_table.h"
#include "src/enforce/shim/hook_list.h"
#include "src/enforce/shim/launch_gate.h"
#include "src/enforce/shim/real_dl.h"
#include "tessera/enforce/cuda_abi.h"
#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tessera/enforce/segment.h"

#define TESSERA_SHIM_EXPORT __attribute__((visibility("default")))
#define TESSERA_UNPAREN(...) __VA_ARGS__

using namespace tessera::cuabi;  // NOLINT: the driver's C names

namespace tessera::enforce::shim {

std::atomic<ProcessSlot*> g_launch_slot{nullptr};
ComputeGate g_gate;
thread_local GateClock t_gate_clock __attribute__((tls_model("initial-exec")));
thread_local ThreadContextBoard t_ctx_board __attribute__((tls_model("initial-exec")));
std::atomic<uint64_t> g_ctx_generation{1};

uint64_t GateClockSlow() noexcept {
#if defined(__x86_64__)
  GateClock& c = t_gate_clock;
  const uint64_t now = MonotonicNowNs();
  const uint64_t tsc = __rdtsc();
  constexpr uint64_t kCalibrateNs = 2'000'000;     // measure at least 2 ms ...
  constexpr uint64_t kMaxMeasureNs = 1'000'000'000;  // ... and at most 1 s (else start over)
  constexpr uint64_t kUseForNs = 100'000'000;      // then use it for 100 ms
  if (c.anchor_ns == 0 || tsc <= c.anchor_tsc || now <= c.anchor_ns ||
      now - c.anchor_ns > kMaxMeasureNs) {
    c = GateClock{};
    c.anchor_tsc = tsc;
    c.anchor_ns = now;
    return now;
  }
  const uint64_t dns = now - c.anchor_ns;
  if (dns < kCalibrateNs) return now;
  __extension__ typedef unsigned __int128 U128;
  const uint64_t mult = static_cast<uint64_t>((static_cast<U128>(dns) << 32) / (tsc - c.anchor_tsc));
  if (mult == 0 || mult > (1ULL << 36)) {  // a TSC below 62.5 MHz: not worth it
    c = GateClock{};
    return now;
  }
  c.mult = mult;
  c.tsc0 = tsc;
  c.ns0 = now;
  c.span = (kUseForNs << 32) / mult;
  c.anchor_tsc = tsc;
  c.anchor_ns = now;
  return now;
#else
  return MonotonicNowNs();
#endif
}

namespace {

// --- configuration (written once by the constructor) ---------------------------------------------
struct Config {
  bool managed = false;      // a valid segment is mapped
  bool fail_closed = false;  // configured but unusable, and TESSERA_SHIM_FAIL is not "open"
  bool log = false;
  bool compute_fail_closed = false;  // TESSERA_SHIM_COMPUTE_FAIL=closed
  bool gpu_meter = false;            // TESSERA_SHIM_GPU_METER is not "0" (gpu_meter.h)
  int tenant = -1;
  int num_ordinals = 0;
  int node_gpu[kMaxGpus] = {};
  std::uint64_t granule = 512;
  const PolicyPage* policy = nullptr;
  CounterSegment* counters = nullptr;
  TenantView* view = nullptr;  // leaked on purpose: used until the very end of the process
  char libcuda[256] = "libcuda.so.1";
};
Config g_cfg;

thread_local bool t_in_dl __attribute__((tls_model("initial-exec"))) = false;

// Every managed memory hook calls it first: if this is not the process the process-local state
// (records, slot, mutexes) belongs to, a child made without fork() (raw clone(2): no
// pthread_atfork handler ran) starts afresh, as AtForkChild does for fork children. The check is
// one load of a MADV_WIPEONFORK page (the kernel zero-fills it in every child that gets a copy
// of the address space, fork or clone alike); where that is unavailable, one getpid() (a system
// call since glibc 2.25). Allocation, free and pool paths only; never the launch path.
void EnsureOwnProcess();

void Log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void Log(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  if (n <= 0) return;
  ssize_t ignored = ::write(2, buf, std::min<std::size_t>(static_cast<std::size_t>(n), sizeof(buf) - 1));
  (void)ignored;
}

// --- the driver: real entry points, filled once libcuda is loaded --------------------------------
void* g_real[kHookCount] = {};
void* g_wrappers[kHookCount] = {};  // filled in Init() from the X-macro below
PFN_cuCtxGetDevice_v2000 g_ctx_get_device = nullptr;
PFN_cuStreamIsCapturing_v10000 g_is_capturing = nullptr;
PFN_cuStreamIsCapturing_v10000 g_is_capturing_ptsz = nullptr;
GraphDriverFns g_graph_fns;  // cuGraphGetNodes & co.: counting kernel nodes at instantiation
// Scrub-on-free (kTenantScrubOnFree): the driver's own memsets, never a hooked path.
PFN_cuMemsetD8_v3020 g_memset = nullptr;                    // cuMemsetD8_v2 (legacy stream)
PFN_cuMemsetD8Async_v3020 g_memset_async = nullptr;         // cuMemsetD8Async
PFN_cuMemsetD8Async_v3020 g_memset_async_ptsz = nullptr;    // cuMemsetD8Async_ptsz
std::atomic<bool> g_driver_ready{false};
std::atomic<void*> g_driver_handle{nullptr};

// Guards loading the driver. A pointer, so that a fork child whose parent had another thread
// inside EnsureDriver() (e.g. in dlopen of libcuda) starts with a free one (AtForkChild).
std::mutex*& DriverMuPtr() {
  static auto* mu = new std::mutex;
  return mu;
}
std::mutex& DriverMu() { return *DriverMuPtr(); }

// Returns libcuda's handle if it is loaded (cached; the reference is kept for the process).
void* DriverHandle() {
  void* h = g_driver_handle.load(std::memory_order_acquire);
  if (h != nullptr) return h;
  h = ::dlopen(g_cfg.libcuda, RTLD_NOLOAD | RTLD_LAZY);
  if (h != nullptr) {
    void* expected = nullptr;
    if (!g_driver_handle.compare_exchange_strong(expected, h)) {
      ::dlclose(h);
      h = expected;
    }
  }
  return h;
}

// Turns the GPU meter on once both the gate (one board) and the driver's event entry points are
// there; marks the slot as metering so that the arbiter charges the measured time.
void EnableMeter() {
  if (!g_cfg.gpu_meter || g_gate.single == nullptr || !g_driver_ready.load(std::memory_order_acquire) ||
      !g_meter_driver.complete() || g_gate.slot >= kLeaseMaxTenants) {
    return;
  }
  g_gate.single->slots[g_gate.slot].gpu.metering.store(1, std::memory_order_relaxed);
  g_meter.on.store(true, std::memory_order_release);
}

// Fills the real-pointer table. Uses only glibc's dlsym (never the override). `load`: dlopen the
// driver if nobody has yet (a wrapper was called); otherwise only a loaded driver is used.
bool EnsureDriver(bool load) {
  if (g_driver_ready.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> lock(DriverMu());
  if (g_driver_ready.load(std::memory_order_relaxed)) return true;
  void* h = DriverHandle();
  if (h == nullptr && load) {
    h = ::dlopen(g_cfg.libcuda, RTLD_LAZY);
    if (h != nullptr) g_driver_handle.store(h, std::memory_order_release);
  }
  if (h == nullptr) {
    if (load && g_cfg.log) Log("tessera-shim: cannot load %s\n", g_cfg.libcuda);
    return false;
  }
  const RealDl& dl = GetRealDl();
  bool saved = t_in_dl;
  t_in_dl = true;
  for (int i = 0; i < kHookCount; ++i) g_real[i] = dl.dlsym(h, kHooks[i].symbol);
  g_ctx_get_device = reinterpret_cast<PFN_cuCtxGetDevice_v2000>(dl.dlsym(h, "cuCtxGetDevice"));
  g_is_capturing = reinterpret_cast<PFN_cuStreamIsCapturing_v10000>(dl.dlsym(h, "cuStreamIsCapturing"));
  g_is_capturing_ptsz =
      reinterpret_cast<PFN_cuStreamIsCapturing_v10000>(dl.dlsym(h, "cuStreamIsCapturing_ptsz"));
  g_graph_fns.get_nodes = reinterpret_cast<PFN_cuGraphGetNodes_v10000>(dl.dlsym(h, "cuGraphGetNodes"));
  g_graph_fns.node_type = reinterpret_cast<PFN_cuGraphNodeGetType_v10000>(dl.dlsym(h, "cuGraphNodeGetType"));
  g_graph_fns.child_graph =
      reinterpret_cast<PFN_cuGraphChildGraphNodeGetGraph_v10000>(dl.dlsym(h, "cuGraphChildGraphNodeGetGraph"));
  g_memset = reinterpret_cast<PFN_cuMemsetD8_v3020>(dl.dlsym(h, "cuMemsetD8_v2"));
  g_memset_async = reinterpret_cast<PFN_cuMemsetD8Async_v3020>(dl.dlsym(h, "cuMemsetD8Async"));
  g_memset_async_ptsz = reinterpret_cast<PFN_cuMemsetD8Async_v3020>(dl.dlsym(h, "cuMemsetD8Async_ptsz"));
  g_meter_driver.create = reinterpret_cast<PFN_cuEventCreate_v2000>(dl.dlsym(h, "cuEventCreate"));
  g_meter_driver.record = reinterpret_cast<PFN_cuEventRecord_v2000>(dl.dlsym(h, "cuEventRecord"));
  g_meter_driver.record_ptsz = reinterpret_cast<PFN_cuEventRecord_v2000>(dl.dlsym(h, "cuEventRecord_ptsz"));
  g_meter_driver.query = reinterpret_cast<PFN_cuEventQuery_v2000>(dl.dlsym(h, "cuEventQuery"));
  g_meter_driver.synchronize = reinterpret_cast<PFN_cuEventSynchronize_v2000>(dl.dlsym(h, "cuEventSynchronize"));
  g_meter_driver.elapsed = reinterpret_cast<PFN_cuEventElapsedTime_v2000>(dl.dlsym(h, "cuEventElapsedTime"));
  g_meter_driver.destroy = reinterpret_cast<PFN_cuEventDestroy_v4000>(dl.dlsym(h, "cuEventDestroy_v2"));
  g_meter_driver.is_capturing = g_is_capturing;
  g_meter_driver.is_capturing_ptsz = g_is_capturing_ptsz;
  t_in_dl = saved;
  g_driver_ready.store(true, std::memory_order_release);
  EnableMeter();
  return true;
}

inline void* RealFn(HookId id) {
  if (__builtin_expect(!g_driver_ready.load(std::memory_order_acquire), 0)) EnsureDriver(true);
  return g_real[static_cast<int>(id)];
}

// Pointer identity: the wrapper for exactly the real entry point `p`, or `p` itself.
void* Substitute(void* p) {
  if (p == nullptr || !EnsureDriver(false)) return p;
  for (int i = 0; i < kHookCount; ++i) {
    if (g_real[i] == p) {
      if (ProcessSlot* s = g_launch_slot.load(std::memory_order_acquire)) {
        s->resolver_substitutions.fetch_add(1, std::memory_order_relaxed);
      }
      return g_wrappers[i];
    }
  }
  return p;
}

// --- this process's slot ------------------------------------------------------------------------
// Serialises this process's SlotOps (the protocol needs it). A pointer, so that a fork child can
// start with a fresh one whatever the parent's other threads held at the fork.
std::mutex*& OpMuPtr() {
  static auto* mu = new std::mutex;
  return mu;
}
std::mutex& OpMu() { return *OpMuPtr(); }
ProcessSlot g_local_slot;  // launch counters of an unmanaged process
int g_slot = -1;           // under OpMu: -1 not yet claimed, -2 none available, -3 closed
pid_t g_slot_pid = 0;

// Claims the slot on first use. Caller holds OpMu.
int SlotLocked() {
  if (g_slot != -1) return g_slot;
  pid_t pid = ::getpid();
  std::optional<std::uint64_t> start = ProcessStartTime(pid);
  // exec keeps the pid and start time: slots of the image before exec are ours to release.
  if (start.has_value()) g_cfg.view->ReleaseSlotsOfEarlierImage(pid, *start);
  StatusOr<int> slot = g_cfg.view->ClaimSlot(pid, start.value_or(0));
  if (!slot.ok()) {
    Log("tessera-shim: %s\n", slot.status().ToString().c_str());
    g_slot = -2;
    return g_slot;
  }
  g_slot = *slot;
  g_slot_pid = pid;
  g_launch_slot.store(&g_cfg.counters->slots[g_slot], std::memory_order_release);
  return g_slot;
}

}  // namespace

ProcessSlot* LaunchSlotSlow() noexcept {
  if (g_cfg.managed) {
    std::lock_guard<std::mutex> lock(OpMu());
    if (SlotLocked() >= 0) return &g_cfg.counters->slots[g_slot];
  }
  ProcessSlot* expected = nullptr;
  g_launch_slot.compare_exchange_strong(expected, &g_local_slot, std::memory_order_acq_rel);
  return g_launch_slot.load(std::memory_order_acquire);
}

namespace {

// --- process-local allocation records -------------------------------------------------------------
struct Record {
  std::uint64_t bytes = 0;  // charged (rounded up to the granule)
  int gpu = 0;  // node GPU
  int refs = 1; // VMM handles: retains
  std::uint64_t size = 0;   // pointers: the allocation's own size (what scrub-on-free zeroes)
};

// A small sharded map (pointer/handle -> record); no allocation is recorded twice.
class RecordMap {
 public:
  void Put(std::uint64_t key, Record r) {
    Shard& s = shard(key);
    std::lock_guard<std::mutex> lock(s.mu);
    s.map[key] = r;
  }
  std::optional<Record> Take(std::uint64_t key) {
    Shard& s = shard(key);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) return std::nullopt;
    Record r = it->second;
    s.map.erase(it);
    return r;
  }
  // VMM release: drops one reference; returns the record if that was the last one (removed).
  std::optional<Record> Unref(std::uint64_t key, bool* found) {
    Shard& s = shard(key);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key);
    *found = it != s.map.end();
    if (!*found) return std::nullopt;
    if (--it->second.refs > 0) return std::nullopt;
    Record r = it->second;
    s.map.erase(it);
    return r;
  }
  bool Ref(std::uint64_t key, int delta) {
    Shard& s = shard(key);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) return false;
    it->second.refs += delta;
    return true;
  }
  std::optional<Record> Get(std::uint64_t key) {
    Shard& s = shard(key);
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.map.find(key);
    if (it == s.map.end()) return std::nullopt;
    return it->second;
  }

 private:
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::uint64_t, Record> map;
  };
  Shard& shard(std::uint64_t key) { return shards_[(key >> 8 ^ key >> 20) & (kShards - 1)]; }
  static constexpr int kShards = 16;
  Shard shards_[kShards];
};

RecordMap*& PointersPtr() {
  static auto* m = new RecordMap;
  return m;
}
RecordMap& Pointers() { return *PointersPtr(); }
RecordMap*& VmmHandlesPtr() {
  static auto* m = new RecordMap;
  return m;
}
RecordMap& VmmHandles() { return *VmmHandlesPtr(); }
RecordMap*& ArraysPtr() {
  static auto* m = new RecordMap;
  return m;
}
RecordMap& Arrays() { return *ArraysPtr(); }
RecordMap*& PoolsPtr() {  // pool -> gpu (refs = 0 for host pools)
  static auto* m = new RecordMap;
  return m;
}
RecordMap& Pools() { return *PoolsPtr(); }

std::uint64_t Key(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// --- accounting primitives ------------------------------------------------------------------------
std::uint64_t LimitBytes(int gpu) {
  return g_cfg.policy->tenants[g_cfg.tenant].limit_bytes[gpu].load(std::memory_order_acquire);
}

CUresult NodeGpuOfOrdinal(int ordinal, int* gpu) {
  if (ordinal < 0 || ordinal >= g_cfg.num_ordinals) return CUDA_ERROR_INVALID_DEVICE;
  *gpu = g_cfg.node_gpu[ordinal];
  return CUDA_SUCCESS;
}

CUresult CurrentNodeGpu(int* gpu) {
  if (g_ctx_get_device == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
  CUdevice dev = 0;
  CUresult rc = g_ctx_get_device(&dev);
  if (rc != CUDA_SUCCESS) return rc;
  return NodeGpuOfOrdinal(dev, gpu);
}

// --- the current context's device (context_cache.h) -----------------------------------------------
// Allocations still ask the driver (CurrentNodeGpu): only the launch path reads the cache.
thread_local ContextStackMirror t_ctx_mirror;
ContextTable* g_ctx_table = new ContextTable;  // leaked: used until the very end of the process

// The board a launch on CUDA ordinal `ordinal` is gated on (nullptr: not gated).
LeaseBoard* BoardOfOrdinal(int ordinal) {
  int gpu = 0;
  if (g_gate.boards == nullptr || NodeGpuOfOrdinal(ordinal, &gpu) != CUDA_SUCCESS || gpu >= g_gate.num_boards) {
    return nullptr;
  }
  return &g_gate.boards[gpu];
}

// After a change of this thread's mirror: the launch cache follows it. `generation` is the value
// read before the driver call that made the change (a bump during it makes the cache stale).
void PublishContext(uint64_t generation) {
  const int ordinal = t_ctx_mirror.CurrentOrdinal();
  ThreadContextBoard& cache = t_ctx_board;
  if (ordinal == kUnknownOrdinal) {
    cache.generation = 0;
    return;
  }
  cache.board = BoardOfOrdinal(ordinal);
  cache.generation = generation;
}
inline uint64_t ContextGeneration() { return g_ctx_generation.load(std::memory_order_acquire); }
void BumpContextGeneration() { g_ctx_generation.fetch_add(1, std::memory_order_acq_rel); }

CUresult Reserve(int gpu, std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(OpMu());
  int slot = SlotLocked();
  if (slot < 0) return CUDA_ERROR_NOT_PERMITTED;
  SlotOpResult r = SlotOp(*g_cfg.counters, slot, gpu, OpDirection::kReserve, bytes, LimitBytes(gpu));
  ProcessSlot& s = g_cfg.counters->slots[slot];
  if (r == SlotOpResult::kOverLimit) {
    s.denied.fetch_add(1, std::memory_order_relaxed);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  s.allocations.fetch_add(1, std::memory_order_relaxed);
  return CUDA_SUCCESS;
}

void Release(int gpu, std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(OpMu());
  if (g_slot < 0) return;
  SlotOp(*g_cfg.counters, g_slot, gpu, OpDirection::kRelease, bytes, kUnlimited);
  g_cfg.counters->slots[g_slot].frees.fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t Charge(std::uint64_t bytes) { return RoundUpToGranule(bytes, g_cfg.granule); }

std::uint64_t MulSaturating(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? ~0ULL : r;
}

// Unmanaged processes pass through; misconfigured fail-closed ones are refused allocations (frees,
// releases and destroys always pass through: TESSERA_RELEASE_PASS_THROUGH_UNLESS_MANAGED).
// Managed ones first make sure the process-local state is this process's (EnsureOwnProcess).
#define TESSERA_RELEASE_PASS_THROUGH_UNLESS_MANAGED(call) \
  do {                                                    \
    if (!g_cfg.managed) return call;                      \
    EnsureOwnProcess();                                   \
  } while (0)

#define TESSERA_PASS_THROUGH_UNLESS_MANAGED(call)                 \
  do {                                                            \
    if (!g_cfg.managed) {                                         \
      if (g_cfg.fail_closed) return CUDA_ERROR_NOT_PERMITTED;     \
      return call;                                                \
    }                                                             \
    EnsureOwnProcess();                                           \
  } while (0)

// Reserves `charge` on `gpu` before the driver call; gives it back if the call fails, records the
// allocation with `on_success` if it succeeds.
template <typename Call, typename OnSuccess>
CUresult ReserveThenCall(int gpu, std::uint64_t charge, Call call, OnSuccess on_success) {
  if (CUresult rc = Reserve(gpu, charge); rc != CUDA_SUCCESS) return rc;
  const CUresult rc = call();
  if (rc != CUDA_SUCCESS) {
    Release(gpu, charge);
    return rc;
  }
  on_success();
  return rc;
}

// --- handlers (one per ABI shape; `real` is exactly the variant the caller's name denotes) -------
template <typename Fn, typename Ptr, typename Size>
CUresult HandleMemAlloc(Fn real, HookId, Ptr* dptr, Size bytesize) {
  TESSERA_PASS_THROUGH_UNLESS_MANAGED(real(dptr, bytesize));
  if (dptr == nullptr || bytesize == 0) return real(dptr, bytesize);  // the driver's own error
  int gpu = 0;
  if (CUresult rc = CurrentNodeGpu(&gpu); rc != CUDA_SUCCESS) return rc;
  const std::uint64_t charge = Charge(bytesize);
  return ReserveThenCall(gpu, charge, [&] { return real(dptr, bytesize); },
                         [&] { Pointers().Put(*dptr, Record{charge, gpu, 1, bytesize}); });
}

template <typename Fn>
CUresult HandleMemAllocManaged(Fn real, HookId, CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  TESSERA_PASS_THROUGH_UNLESS_MANAGED(real(dptr, bytesize, flags));
  if (dptr == nullptr || bytesize == 0) return real(dptr, bytesize, flags);
  int gpu = 0;
  if (CUresult rc = CurrentNodeGpu(&gpu); rc != CUDA_SUCCESS) return rc;
  const std::uint64_t charge = Charge(bytesize);  // managed memory is charged in full
  return ReserveThenCall(gpu, charge, [&] { return real(dptr, bytesize, flags); },
                         [&] { Pointers().Put(*dptr, Record{charge, gpu, 1, bytesize}); });
}

// Pitch: reserve the lower bound width x height first, then top up to the pitch x height the
// driver actually used; if the top-up does not fit, free the allocation and refuse.
template <typename Fn, typename Ptr, typename Size>
CUresult HandleMemAllocPitch(Fn real, HookId, Ptr* dptr, Size* pitch, Size width, Size height,
                             unsigned int elem) {
  TESSERA_PASS_THROUGH_UNLESS_MANAGED(real(dptr, pitch, width, height, elem));
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) {
    return real(dptr, pitch, width, height, elem);
  }
  int gpu = 0;
  if (CUresult rc = CurrentNodeGpu(&gpu); rc != CUDA_SUCCESS) return rc;
  const std::uint64_t lower = Charge(MulSaturating(width, height));
  if (CUresult rc = Reserve(gpu, lower); rc != CUDA_SUCCESS) return rc;
  CUresult rc = real(dptr, pitch, width, height, elem);
  if (rc != CUDA_SUCCESS) {
    Release(gpu, lower);
    return rc;
  }
  const std::uint64_t actual = Charge(MulSaturating(*pitch, height));
  if (actual > lower) {
    if (Reserve(gpu, actual - lower) != CUDA_SUCCESS) {
      if constexpr (sizeof(Ptr) == 4) {
        reinterpret_cast<PFN_cuMemFree_v2000>(RealFn(HookId::k_cuMemFree))(*dptr);
      } else {
        reinterpret_cast<PFN_cuMemFree_v3020>(RealFn(HookId::k_cuMemFree_v2))(*dptr);
      }
      Release(gpu, lower);
      *dptr = 0;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  } else if (actual < lower) {
    Release(gpu, lower - actual);
  }
  Pointers().Put(*dptr, Record{actual, gpu, 1, MulSaturating(*pitch, height)});
  return rc;
}

// Scrub-on-free (the tenant's kTenantScrubOnFree flag, read on every free so that `tessera run
// --scrub` applies to running processes too): zero the allocation's own size, through the
// driver's memset (resolved with glibc's dlsym, never a hooked path), BEFORE the free.
//   cuMemFree(_v2): cuMemsetD8_v2 on the legacy default stream, then the free. The memset is
//     ordered after the work already submitted to the legacy stream and the blocking streams, and
//     the driver does not hand freed cuMemAlloc memory to anyone before the work submitted before
//     the free has finished (cuMemFree synchronises), so the zeros land before any reuse.
//   cuMemFreeAsync(_ptsz): cuMemsetD8Async(_ptsz) on the caller's stream, then the free on it:
//     stream order puts the memset before the free, and the pool reuses the memory only after it.
// A scrub that fails (or a driver without the memset) fails the free with its error, and the
// allocation stays allocated and charged: memory is never freed unscrubbed while scrubbing is on.
bool ScrubOnFree() {
  return (g_cfg.policy->tenants[g_cfg.tenant].flags.load(std::memory_order_acquire) & kTenantScrubOnFree) != 0;
}
CUresult Scrub(HookId, std::uint64_t dptr, std::uint64_t bytes) {
  if (g_memset == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return g_memset(static_cast<CUdeviceptr>(dptr), 0, static_cast<size_t>(bytes));
}
CUresult Scrub(HookId id, std::uint64_t dptr, std::uint64_t bytes, CUstream stream) {
  const bool per_thread = kHooks[static_cast<int>(id)].flavour == HookFlavour::kPerThread;
  PFN_cuMemsetD8Async_v3020 fn = per_thread ? g_memset_async_ptsz : g_memset_async;
  if (fn == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  return fn(static_cast<CUdeviceptr>(dptr), 0, static_cast<size_t>(bytes), stream);
}

template <typename Fn, typename Ptr, typename... Rest>
CUresult HandleMemFree(Fn real, HookId id, Ptr dptr, Rest... rest) {
  TESSERA_RELEASE_PASS_THROUGH_UNLESS_MANAGED(real(dptr, rest...));
  // Take the record before the driver frees: the address may be handed out again at once.
  std::optional<Record> rec = Pointers().Take(dptr);
  if (rec.has_value() && rec->size > 0 && ScrubOnFree()) {
    if (CUresult rc = Scrub(id, dptr, rec->size, rest...); rc != CUDA_SUCCESS) {
      Pointers().Put(dptr, *rec);
      if (g_cfg.log) Log("tessera-shim: scrub of %llu bytes failed (%d); the free is refused\n",
                         static_cast<unsigned long long>(rec->size), rc);
      return rc;
    }
  }
  CUresult rc = real(dptr, rest...);
  if (rec.has_value()) {
    if (rc == CUDA_SUCCESS) {
      Release(rec->gpu, rec->bytes);
    } else {
      Pointers().Put(dptr, *rec);
    }
  }
  return rc;
}

template <typename Fn>
CUresult HandleMemFreeAsync(Fn real, HookId id, CUdeviceptr dptr, CUstream stream) {
  // The reservation is released when the free is enqueued: the pool may keep the memory
  // (release threshold); docs/enforcement.md lists this as a known gap.
  return HandleMemFree(real, id, dptr, stream);
}

template <typename Fn>
CUresult HandleMemAllocAsync(Fn real, HookId, CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  TESSERA_PASS_THROUGH_UNLESS_MANAGED(real(dptr, bytesize, stream));
  if (dptr == nullptr || bytesize == 0) return real(dptr, bytesize, stream);
  int gpu = 0;
  if (CUresult rc = CurrentNodeGpu(&gpu); rc != CUDA_SUCCESS) return rc;
  const std::uint64_t charge = Charge(bytesize);
  return ReserveThenCall(gpu, charge, [&] { return real(dptr, bytesize, stream); },
                         [&] { Pointers().Put(*dptr, Record{charge, gpu, 1, bytesize}); });
}

template <typename Fn>
CUresult HandleMemAllocFromPoolAsync(Fn real, HookId, CUdeviceptr* dptr, size_t bytesize,
                                     CUmemoryPool pool, CUstream stream) {
  TESSERA_PASS_THROUGH_UNLESS_MANAGED(real(dptr, bytesize, pool, stream));
  if (dptr == nullptr || bytesize == 0 || pool == nullptr) return real(dptr, bytesize, pool, stream);
  int gpu = 0;
  std::optional<Record> p = Pools().Get(Key(pool));
  if (p.has_value() && p->refs == 0) return real(dptr, bytesize, pool, stream);  // a host pool
  if (p.has_value()) {
    gpu = p->gpu;
  } else if (CUresult rc = CurrentNodeGpu(&gpu); rc != CUDA_SUCCESS) {
    return rc;  // a pool we did not see created or looked up (e.g. imported): current device
  }
  const std::uint64_t charge = Charge(bytesize);
  return ReserveThenCall(gpu, charge, [&] { return real(dptr, bytesize, pool, stream); },
                         [&] { Pointers().Put(*dptr, Record{charge, gpu, 1, bytesize}); });
}

// A pool's memory lives where its location says: a DEVICE pool is charged to that device, which
// must be one of this process's ordinals (else CUDA_ERROR_INVALID_DEVICE, as for any allocation
// there, and the driver is not called); host pools (HOST, HOST_NUMA, HOST_NUMA_CURRENT) hand out
// pinned host memory, never charged; any other location is refused (CUDA_ERROR_NOT_SUPPORTED):
// the shim cannot tell which device's memory it would be (fail closed).
template <typename Fn>
CUresult HandleMemPoolCreate(Fn real, HookId, CUmemoryPool* pool, const CUmemPoolProps* props) {
  if (!g_cfg.managed || pool == nullptr || props == nullptr) return real(pool, props);
  EnsureOwnProcess();
  int gpu = -1;
  switch (props->location.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE:
      if (CUresult rc = NodeGpuOfOrdinal(props->location.id, &gpu); rc != CUDA_SUCCESS) return rc;
      break;
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
      break;
    default:
      if (g_cfg.log) Log("tessera-shim: memory pool location type %d refused\n", props->location.type);
      return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUresult rc = real(pool, props);
  if (rc == CUDA_SUCCESS) Pools().Put(Key(*pool), Record{0, std::max(gpu, 0), gpu >= 0 ? 1 : 0});
  return rc;
}

// A device's default or current pool: only of this process's ordinals; recorded as a DEVICE pool
// of that device, so that cuMemAllocFromPoolAsync charges the pool's device, not the context's.
template <typename Fn>
CUresult HandleDeviceGetMemPool(Fn real, HookId, CUmemoryPool* pool, CUdevice dev) {
  if (!g_cfg.managed || pool == nullptr) return real(pool, dev);
  EnsureOwnProcess();
  int gpu = 0;
  if (CUresult rc = NodeGpuOfOrdinal(dev, &gpu); rc != CUDA_SUCCESS) return rc;
  CUresult rc = real(pool, dev);
  if (rc == CUDA_SUCCESS && *pool != nullptr) Pools().Put(Key(*pool), Record{0, gpu, 1});
  return rc;
}

template <typename Fn>
CUresult HandleMemPoolDestroy(Fn real, HookId, CUmemoryPool pool) {
  if (g_cfg.managed) EnsureOwnProcess();
  CUresult rc = real(pool);
  if (rc == CUDA_SUCCESS && g_cfg.managed) Pools().Take(Key(pool));
  return rc;
}

// VMM: charge physical memory at creation, DEVICE locations only, device from prop->location.id.
template <typename Fn>
CUresult HandleMemCreate(Fn real, HookId, CUmemGenericAllocationHandle* handle, size_t size,
                         const CUmemAllocationProp* prop, unsigned long long flags) {
  TESSERA_PASS_THROUGH_UNLESS_MANAGED(real(handle, size, prop, flags));
  if (handle == nullptr || prop == nullptr || size == 0 ||
      prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) {
    return real(handle, size, prop, flags);  // host memory (never charged) or the driver's error
  }
  int gpu = 0;
  if (CUresult rc = NodeGpuOfOrdinal(prop->location.id, &gpu); rc != CUDA_SUCCESS) return rc;
  const std::uint64_t charge = Charge(size);
  return ReserveThenCall(gpu, charge, [&] { return real(handle, size, prop, flags); },
                         [&] { VmmHandles().Put(*handle, Record{charge, gpu, 1}); });
}

template <typename Fn>
CUresult HandleMemRetainAllocationHandle(Fn real, HookId, CUmemGenericAllocationHandle* handle, void* addr) {
  if (g_cfg.managed) EnsureOwnProcess();
  CUresult rc = real(handle, addr);
  if (rc == CUDA_SUCCESS && g_cfg.managed && handle != nullptr) VmmHandles().Ref(*handle, +1);
  return rc;
}

template <typename Fn>
CUresult HandleMemRelease(Fn real, HookId, CUmemGenericAllocationHandle handle) {
  TESSERA_RELEASE_PASS_THROUGH_UNLESS_MANAGED(real(handle));
  bool found = false;
  std::optional<Record> last = VmmHandles().Unref(handle, &found);
  CUresult rc = real(handle);
  if (!found) return rc;
  if (rc != CUDA_SUCCESS) {  // undo our bookkeeping
    if (last.has_value()) {
      VmmHandles().Put(handle, *last);
    } else {
      VmmHandles().Ref(handle, +1);
    }
    return rc;
  }
  if (last.has_value()) Release(last->gpu, last->bytes);
  return rc;
}

std::uint64_t FormatBytes(CUarray_format f) {
  switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
      return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
      return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
      return 4;
    default:
      return 16;  // block-compressed, video and packed formats: at most 16 bytes per element
  }
}

// Conservative array footprint: rows padded to 512 bytes, every mip level, rounded to the granule.
std::uint64_t ArrayBytes(std::uint64_t w, std::uint64_t h, std::uint64_t d, CUarray_format format,
                         unsigned int channels, unsigned int levels) {
  std::uint64_t total = 0;
  for (unsigned int l = 0; l < std::max(levels, 1u); ++l) {
    std::uint64_t row = MulSaturating(MulSaturating(std::max<std::uint64_t>(w >> l, 1), std::max(channels, 1u)),
                                      FormatBytes(format));
    row = row > ~0ULL - 511 ? ~0ULL : (row + 511) / 512 * 512;
    std::uint64_t level = MulSaturating(MulSaturating(row, std::max<std::uint64_t>(h >> l, 1)), std::max<std::uint64_t>(d >> l, 1));
    total = total > ~0ULL - level ? ~0ULL : total + level;
  }
  return Charge(total);
}

template <typename Fn, typename Handle, typename Desc, typename... Extra>
CUresult CreateArrayCharged(Fn real, Handle* handle, const Desc* desc, std::uint64_t bytes, Extra... extra) {
  int gpu = 0;
  if (CUresult rc = CurrentNodeGpu(&gpu); rc != CUDA_SUCCESS) return rc;
  if (CUresult rc = Reserve(gpu, bytes); rc != CUDA_SUCCESS) return rc;
  CUresult rc = real(handle, desc, extra...);
  if (rc != CUDA_SUCCESS) {
    Release(gpu, bytes);
    return rc;
  }
  Arrays().Put(Key(*handle), Record{bytes, gpu, 1});
  return rc;
}

template <typename Fn, typename Desc>
CUresult HandleArrayCreate(Fn real, HookId, CUarray* handle, const Desc* desc) {
  TESSERA_PASS_THROUGH_UNLESS_MANAGED(real(handle, desc));
  if (handle == nullptr || desc == nullptr) return real(handle, desc);
  return CreateArrayCharged(real, handle, desc,
                            ArrayBytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels, 1));
}

template <typename Fn, typename Desc>
CUresult HandleArray3DCreate(Fn real, HookId, CUarray* handle, const Desc* desc) {
  TESSERA_PASS_THROUGH_UNLESS_MANAGED(real(handle, desc));
  if (handle == nullptr || desc == nullptr) return real(handle, desc);
  return CreateArrayCharged(
      real, handle, desc, ArrayBytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels, 1));
}

template <typename Fn>
CUresult HandleMipmappedArrayCreate(Fn real, HookId, CUmipmappedArray* handle,
                                    const CUDA_ARRAY3D_DESCRIPTOR* desc, unsigned int levels) {
  TESSERA_PASS_THROUGH_UNLESS_MANAGED(real(handle, desc, levels));
  if (handle == nullptr || desc == nullptr || levels == 0) return real(handle, desc, levels);
  return CreateArrayCharged(
      real, handle, desc,
      ArrayBytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels, levels), levels);
}

template <typename Fn, typename Handle>
CUresult DestroyArrayCharged(Fn real, Handle handle) {
  TESSERA_RELEASE_PASS_THROUGH_UNLESS_MANAGED(real(handle));
  std::optional<Record> rec = Arrays().Take(Key(handle));
  CUresult rc = real(handle);
  if (rec.has_value()) {
    if (rc == CUDA_SUCCESS) {
      Release(rec->gpu, rec->bytes);
    } else {
      Arrays().Put(Key(handle), *rec);
    }
  }
  return rc;
}

template <typename Fn>
CUresult HandleArrayDestroy(Fn real, HookId, CUarray handle) { return DestroyArrayCharged(real, handle); }
template <typename Fn>
CUresult HandleMipmappedArrayDestroy(Fn real, HookId, CUmipmappedArray handle) {
  return DestroyArrayCharged(real, handle);
}

// The tenant's view: total = min(driver total, limit); free = min(driver free, total - reserved),
// all saturating (a counter above the limit shows free = 0, never a wrapped-around number).
template <typename Fn, typename Size>
CUresult HandleMemGetInfo(Fn real, HookId, Size* free_bytes, Size* total_bytes) {
  CUresult rc = real(free_bytes, total_bytes);
  if (rc != CUDA_SUCCESS || !g_cfg.managed || free_bytes == nullptr || total_bytes == nullptr) return rc;
  int gpu = 0;
  if (CurrentNodeGpu(&gpu) != CUDA_SUCCESS) return rc;
  const std::uint64_t limit = LimitBytes(gpu);
  if (limit >= kUnlimited) return rc;
  const std::uint64_t used = WordBytes(g_cfg.counters->counters[gpu].word.load());
  const std::uint64_t total = std::min<std::uint64_t>(*total_bytes, limit);
  const std::uint64_t room = total - std::min(used, total);
  *total_bytes = static_cast<Size>(total);
  *free_bytes = static_cast<Size>(std::min<std::uint64_t>(*free_bytes, room));
  return rc;
}

template <typename Fn, typename Size>
CUresult HandleDeviceTotalMem(Fn real, HookId, Size* bytes, CUdevice dev) {
  CUresult rc = real(bytes, dev);
  if (rc != CUDA_SUCCESS || !g_cfg.managed || bytes == nullptr) return rc;
  int gpu = 0;
  if (NodeGpuOfOrdinal(dev, &gpu) != CUDA_SUCCESS) return rc;
  const std::uint64_t limit = LimitBytes(gpu);
  if (limit < kUnlimited) *bytes = static_cast<Size>(std::min<std::uint64_t>(*bytes, limit));
  return rc;
}

// The stream a launch goes to: its CUstream argument, a launch config's hStream, else the
// default stream (cuLaunch, cuLaunchGrid, the multi-device cooperative launch).
inline CUstream PickStream(CUstream s, CUstream) { return s; }
inline CUstream PickStream(const CUlaunchConfig* config, CUstream s) {
  return config != nullptr ? config->hStream : s;
}
template <typename T>
inline CUstream PickStream(const T&, CUstream s) { return s; }
template <typename... Args>
inline CUstream StreamOf(const Args&... args) {
  CUstream s = nullptr;
  ((s = PickStream(args, s)), ...);
  return s;
}

template <CountedLaunch kKind, typename Fn, typename... Args>
inline CUresult HandleLaunch(Fn real, HookId id, Args... args) {
  if constexpr (kKind == CountedLaunch::kCaptureBegin) {
    LaunchGate(kKind);
  } else {
    LaunchGate(kKind, StreamOf(args...),
               kHooks[static_cast<int>(id)].flavour == HookFlavour::kPerThread);
  }
  return real(args...);
}

// --- graph charging (graph_exec_table.h) --------------------------------------------------------
GraphExecTable g_graph_execs;
std::atomic<bool> g_graph_table_full_logged{false};

// cuGraphLaunch(_ptsz): the lease is charged the kernel nodes of the exec (1 if unknown). The
// table is only consulted when compute is gated, and only on this path.
template <typename Fn>
CUresult HandleGraphLaunch(Fn real, HookId id, CUgraphExec exec, CUstream stream) {
  uint32_t kernels = 1;
  if (g_gate.boards != nullptr) {
    if (std::optional<uint32_t> k = g_graph_execs.Get(exec)) kernels = *k;
  }
  LaunchGate(CountedLaunch::kGraph, stream, kHooks[static_cast<int>(id)].flavour == HookFlavour::kPerThread,
             kernels);
  return real(exec, stream);
}

// Every instantiate variant: after a success, count the kernel nodes of the source graph and
// record them for the new exec. Not counted (charged 1 per launch): ungated processes, graphs
// the driver cannot describe, a full table.
template <typename Fn, typename... Rest>
CUresult HandleGraphInstantiate(Fn real, HookId, CUgraphExec* exec, CUgraph graph, Rest... rest) {
  const CUresult rc = real(exec, graph, rest...);
  if (rc != CUDA_SUCCESS || exec == nullptr || *exec == nullptr || g_gate.boards == nullptr) return rc;
  std::optional<uint64_t> kernels = CountGraphKernels(g_graph_fns, graph);
  if (!kernels.has_value()) {
    g_graph_execs.Erase(*exec);  // a stale entry of a reused handle must not stay
    if (g_cfg.log) Log("tessera-shim: cannot count the kernel nodes of graph %p; its launches are charged as 1 kernel\n",
                       static_cast<void*>(graph));
    return rc;
  }
  if (!g_graph_execs.Put(*exec, static_cast<uint32_t>(*kernels)) && !g_graph_table_full_logged.exchange(true)) {
    Log("tessera-shim: no room for executable graph %p in the graph table (%d slots, probe window %d); "
        "launches of such graphs are charged as 1 kernel\n", static_cast<void*>(*exec), GraphExecTable::kSlots,
        GraphExecTable::kMaxProbe);
  }
  return rc;
}

template <typename Fn>
CUresult HandleGraphExecDestroy(Fn real, HookId, CUgraphExec exec) {
  g_graph_execs.Erase(exec);  // before the driver frees the handle: it may hand it out again at once
  return real(exec);
}

// True when `stream` is being captured, or when the driver cannot say (any error, e.g. an
// implicit-capture conflict or an invalid stream): such a launch must never wait.
bool StreamCapturing(CUstream stream, bool per_thread) {
  // No capture has begun in this process (every begin passes LaunchGate): no stream can be
  // capturing, and the wait path asks the driver nothing.
  if (!g_capture_begun.load(std::memory_order_acquire)) return false;
  EnsureDriver(false);
  PFN_cuStreamIsCapturing_v10000 query = per_thread && g_is_capturing_ptsz != nullptr ? g_is_capturing_ptsz
                                                                                        : g_is_capturing;
  if (query == nullptr) return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult rc = query(stream, &status);
  if (rc != CUDA_SUCCESS) return true;  // cannot tell: never block (the launch reports the error)
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

std::atomic<uint64_t> g_ungated_launches{0};  // launched without a lease (fail open)
std::atomic<bool> g_alarm_logged{false};

}  // namespace

// An arbiter that has not stepped for this long is dead (it steps at least every 50 ms).
constexpr uint64_t kArbiterStaleNs = 1'000'000'000;
// Waits are cut into steps of this length, so that a dead arbiter is noticed.
constexpr uint64_t kWaitStepNs = 250'000'000;

LeaseBoard* ContextBoardSlow() noexcept {
  const uint64_t generation = ContextGeneration();
  EnsureDriver(false);
  if (g_ctx_get_device == nullptr) return nullptr;
  CUdevice dev = 0;
  if (g_ctx_get_device(&dev) != CUDA_SUCCESS) return nullptr;  // no current context: ask again next time
  t_ctx_mirror.Learn(dev);
  PublishContext(generation);
  return BoardOfOrdinal(dev);
}

void LaunchGateSlow(LeaseBoard* board, CountedLaunch kind, CUstream stream, bool per_thread,
                    uint32_t graph_kernels) noexcept {
  if (board == nullptr) {  // a process using several node GPUs: the current context's
    board = ContextBoardSlow();
    if (board == nullptr) return;
  }
  const uint32_t slot = g_gate.slot;
  // Only a process gated on one board meters (gpu_meter.h): its streams all run on that GPU.
  const bool metered = board == g_gate.single;
  LaunchRequest request;
  request.kind = LeaseKindOf(kind);
  request.graph_kernels = graph_kernels;
  if (TryAdmitLaunch(*board, slot, request, MonotonicNowNs()) == GateResult::kAdmitted &&
      (!metered || MeterLaunch(*board, slot, stream, per_thread, graph_kernels) == MeterResult::kAdmitted)) {
    return;
  }
  // Not registered on this GPU's board (no share): nothing to gate against.
  if (board->node[slot].state.load(std::memory_order_acquire) !=
      static_cast<uint32_t>(LeaseSlotState::kActive)) {
    return;
  }
  if (StreamCapturing(stream, per_thread)) {
    request.capturing = true;
    TryAdmitLaunch(*board, slot, request, 0);
    return;
  }
  // The tenant cannot launch until it holds the lease again: let the arbiter see what its queued
  // work measured so far.
  if (metered) MeterFlush(*board, slot);
  for (;;) {
    const uint64_t now = MonotonicNowNs();
    if (!g_cfg.compute_fail_closed && !ArbiterAlive(*board, now, kArbiterStaleNs)) {
      // Fail open (decision 0002): the arbiter is dead; launch, counted, with an alarm.
      RecordLaunch(*board, slot, request, now);
      g_ungated_launches.fetch_add(1, std::memory_order_relaxed);
      if (!g_alarm_logged.exchange(true)) {
        Log("tessera-shim: ALARM: the lease arbiter of GPU %u is not running; launches run without a "
            "compute lease (TESSERA_SHIM_COMPUTE_FAIL=open)\n", board->header.gpu_index);
      }
      return;
    }
    const GateResult r = GateLaunch(*board, slot, request, kWaitStepNs);
    if (r == GateResult::kTimedOut) continue;
    // Admitted: the meter may still hold the launch until its queued work fits the new lease, and
    // send it back to wait if that lease ends first (the launch is then counted once more).
    if (r != GateResult::kAdmitted || !metered ||
        MeterLaunch(*board, slot, stream, per_thread, graph_kernels) == MeterResult::kAdmitted) {
      return;
    }
  }
}

namespace {

// --- context hooks: every change of the calling thread's current context (context_cache.h) ------
// Each calls the driver with the caller's exact arguments and returns its answer unchanged; after
// it, the thread's mirror and launch cache say what the driver now has as current, or "unknown"
// (a failed call forgets what the mirror knew: the next launch asks the driver).
template <typename Fn, typename... Rest>
CUresult HandleCtxCreate(Fn real, HookId, CUcontext* pctx, Rest... rest) {
  const uint64_t generation = ContextGeneration();
  const CUresult rc = real(pctx, rest...);
  if (rc == CUDA_SUCCESS && pctx != nullptr) {
    // The device is the last argument of every variant (v1/v2: flags, dev; v3: params, n, flags,
    // dev; v4: params, flags, dev); the driver pushes the new context.
    const CUdevice ordinal = std::get<sizeof...(Rest) - 1>(std::tuple<Rest...>(rest...));
    g_ctx_table->Put(*pctx, ordinal, /*primary=*/false);
    t_ctx_mirror.Push(*pctx, ordinal);
  } else {
    t_ctx_mirror.Forget();
  }
  PublishContext(generation);
  return rc;
}

template <typename Fn>
CUresult HandleCtxDestroy(Fn real, HookId, CUcontext ctx) {
  g_ctx_table->Erase(ctx);  // before the driver frees the handle: it may hand it out again at once
  const CUresult rc = real(ctx);
  // The driver pops ctx if it is this thread's current context; whatever else the mirror knew is
  // forgotten too (the next launch asks), and every other thread asks once more.
  if (rc == CUDA_SUCCESS && t_ctx_mirror.CurrentContext() == ctx) t_ctx_mirror.Pop();
  t_ctx_mirror.Forget();
  BumpContextGeneration();
  PublishContext(ContextGeneration());
  return rc;
}

template <typename Fn>
CUresult HandleCtxSetCurrent(Fn real, HookId, CUcontext ctx) {
  const uint64_t generation = ContextGeneration();
  const CUresult rc = real(ctx);
  if (rc == CUDA_SUCCESS) {
    t_ctx_mirror.Set(ctx, g_ctx_table->Get(ctx));
  } else {
    t_ctx_mirror.Forget();
  }
  PublishContext(generation);
  return rc;
}

template <typename Fn>
CUresult HandleCtxPushCurrent(Fn real, HookId, CUcontext ctx) {
  const uint64_t generation = ContextGeneration();
  const CUresult rc = real(ctx);
  if (rc == CUDA_SUCCESS) {
    t_ctx_mirror.Push(ctx, g_ctx_table->Get(ctx));
  } else {
    t_ctx_mirror.Forget();
  }
  PublishContext(generation);
  return rc;
}

template <typename Fn>
CUresult HandleCtxPopCurrent(Fn real, HookId, CUcontext* pctx) {
  const uint64_t generation = ContextGeneration();
  const CUresult rc = real(pctx);
  if (rc == CUDA_SUCCESS) {
    t_ctx_mirror.Pop();
  } else {
    t_ctx_mirror.Forget();
  }
  PublishContext(generation);
  return rc;
}

// Retain does not change the current context; it tells the shim the primary context's device.
template <typename Fn>
CUresult HandlePrimaryCtxRetain(Fn real, HookId, CUcontext* pctx, CUdevice dev) {
  const CUresult rc = real(pctx, dev);
  if (rc == CUDA_SUCCESS && pctx != nullptr) g_ctx_table->Put(*pctx, dev, /*primary=*/true);
  return rc;
}

// Release and reset: the primary context may be destroyed (its handle reused), on any thread.
template <typename Fn>
CUresult HandlePrimaryCtxDrop(Fn real, HookId, CUdevice dev) {
  g_ctx_table->ErasePrimary(dev);
  const CUresult rc = real(dev);
  BumpContextGeneration();
  return rc;
}

// Resolvers: call the real one with the caller's exact arguments; errors, NULL results and
// VERSION_NOT_SUFFICIENT pass through unchanged; a success is mapped by pointer identity.
template <typename Fn>
CUresult HandleGetProcAddress(Fn real, HookId, const char* symbol, void** pfn, int version,
                              cuuint64_t flags) {
  CUresult rc = real(symbol, pfn, version, flags);
  if (rc == CUDA_SUCCESS && pfn != nullptr && *pfn != nullptr) *pfn = Substitute(*pfn);
  return rc;
}
template <typename Fn>
CUresult HandleGetProcAddress(Fn real, HookId, const char* symbol, void** pfn, int version,
                              cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  CUresult rc = real(symbol, pfn, version, flags, status);
  if (rc != CUDA_SUCCESS || pfn == nullptr || *pfn == nullptr) return rc;
  if (status != nullptr && *status != CU_GET_PROC_ADDRESS_SUCCESS) return rc;
  *pfn = Substitute(*pfn);
  return rc;
}

}  // namespace
}  // namespace tessera::enforce::shim

// --- the exported wrappers, one per row of the hook list ------------------------------------------
using tessera::enforce::CountedLaunch;
using tessera::enforce::shim::HookId;

#define TESSERA_SHIM_DEFINE_WRAPPER(symbol, base, version, flavour, family, handler, params, args) \
  extern "C" TESSERA_SHIM_EXPORT CUresult symbol params noexcept {                                \
    using Fn = CUresult(*) params;                                                                \
    Fn real = reinterpret_cast<Fn>(tessera::enforce::shim::RealFn(HookId::k_##symbol));           \
    if (real == nullptr) return CUDA_ERROR_NOT_FOUND;                                             \
    return tessera::enforce::shim::handler(real, HookId::k_##symbol, TESSERA_UNPAREN args);       \
  }
TESSERA_SHIM_HOOKS(TESSERA_SHIM_DEFINE_WRAPPER)
#undef TESSERA_SHIM_DEFINE_WRAPPER

// --- dlsym / dlvsym: substitute only on libcuda's handle, RTLD_DEFAULT and RTLD_NEXT --------------
// The exported dlsym/dlvsym live in dl_override.cc (built without sanitizer instrumentation: a
// sanitizer runtime calls dlsym before its shadow memory exists); for names starting with "cu"
// they ask DriverLookup() here.
namespace tessera::enforce::shim {

void* DriverLookup(void* handle, const char* name, const char* version, bool* handled) {
  *handled = false;
  if (t_in_dl) return nullptr;
  if (handle != RTLD_DEFAULT && handle != RTLD_NEXT && handle != DriverHandle()) return nullptr;
  *handled = true;
  const RealDl& dl = GetRealDl();
  t_in_dl = true;
  void* p = version == nullptr ? dl.dlsym(handle, name) : dl.dlvsym(handle, name, version);
  t_in_dl = false;
  return Substitute(p);
}

}  // namespace tessera::enforce::shim

// --- initialisation -------------------------------------------------------------------------------
namespace tessera::enforce::shim {
namespace {

bool ParseInt(const char* s, long min, long max, long* out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

// The tenant the node side assigned to this process, from the node directory's members folder
// (tessera/node/node_dir.h: members/<pid> holds "<start time> <index>" per tenant of that member,
// written only by the node side): the nearest ancestor, this process included, whose file has
// exactly one line with a matching start time, else the session leader's. -1 when none: a process
// not started by `tessera run` or the agent, or one that left its supervisor's tree and session.
// Worked example: `tessera run` (pid 500, member of tenant 3) forks sh (501) which runs the probe
// (502): members/502 and members/501 do not exist, members/500 says "<start of 500> 3": tenant 3,
// whatever TESSERA_SHIM_TENANT says.
struct ProcLine {
  long ppid = 0;
  long sid = 0;
};
std::optional<ProcLine> ReadProcLine(long pid) {
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return std::nullopt;
  char buf[1024] = {};
  const std::size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  const char* paren = std::strrchr(buf, ')');
  ProcLine line;
  char state = 0;
  long pgrp = 0;
  if (n == 0 || paren == nullptr || std::sscanf(paren + 1, " %c %ld %ld %ld", &state, &line.ppid, &pgrp, &line.sid) != 4)
    return std::nullopt;
  return line;
}
// The one tenant of member `pid`, or -1 (no file, a stale one, or a member of several tenants).
int MemberTenant(const std::string& members, long pid) {
  const std::string path = members + "/" + std::to_string(pid);
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return -1;
  unsigned long long start = 0;
  long index = -1, extra_index = -1;
  unsigned long long extra_start = 0;
  const int got = std::fscanf(f, "%llu %ld %llu %ld", &start, &index, &extra_start, &extra_index);
  std::fclose(f);
  if (got != 2 || index < 0 || index >= kMaxTenants) return -1;
  const std::optional<std::uint64_t> now = ProcessStartTime(static_cast<pid_t>(pid));
  return now && *now == start ? static_cast<int>(index) : -1;
}
int AssignedTenant(const std::string& members) {
  long pid = ::getpid();
  std::optional<ProcLine> self = ReadProcLine(pid);
  for (int depth = 0; depth < 64 && pid > 1; ++depth) {
    if (int t = MemberTenant(members, pid); t >= 0) return t;
    std::optional<ProcLine> line = ReadProcLine(pid);
    if (!line) break;
    pid = line->ppid;
  }
  return self && self->sid > 1 ? MemberTenant(members, self->sid) : -1;
}

// The tenant in `path` (a `tenant` file next to the policy: "<index>\n", written by the DRA
// driver and mounted read-only into the claim's containers, tessera/integrations/k8s/dra_driver.h),
// -1 when there is no such file, -2 when it is there and does not hold an index (fail closed).
// Example: a file holding "3\n" -> 3, whatever TESSERA_SHIM_TENANT says.
int FileTenant(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) return errno == ENOENT ? -1 : -2;
  char text[32] = {};
  std::size_t n = std::fread(text, 1, sizeof(text) - 1, f);
  std::fclose(f);
  while (n > 0 && text[n - 1] == '\n') text[--n] = '\0';
  long index = -1;
  return ParseInt(text, 0, kMaxTenants - 1, &index) ? static_cast<int>(index) : -2;
}

void Configure() {
  const char* policy = std::getenv("TESSERA_SHIM_POLICY");
  const char* counters = std::getenv("TESSERA_SHIM_COUNTERS");
  const char* tenant = std::getenv("TESSERA_SHIM_TENANT");
  const char* gpus = std::getenv("TESSERA_SHIM_GPUS");
  const char* lib = std::getenv("TESSERA_SHIM_LIBCUDA");
  const char* fail = std::getenv("TESSERA_SHIM_FAIL");
  const char* log = std::getenv("TESSERA_SHIM_LOG");
  g_cfg.log = log != nullptr && std::strcmp(log, "1") == 0;
  if (lib != nullptr && *lib != '\0') std::snprintf(g_cfg.libcuda, sizeof(g_cfg.libcuda), "%s", lib);
  if (policy == nullptr || *policy == '\0') return;  // unmanaged
  const bool fail_open = fail != nullptr && std::strcmp(fail, "open") == 0;
  if (fail != nullptr && !fail_open && std::strcmp(fail, "closed") != 0) {
    Log("tessera-shim: TESSERA_SHIM_FAIL='%s' is neither 'open' nor 'closed'; using closed\n", fail);
  }
  auto refuse = [&](const std::string& why) {
    Log("tessera-shim: %s; device allocations %s\n", why.c_str(),
        fail_open ? "run UNACCOUNTED (TESSERA_SHIM_FAIL=open)" : "are refused (CUDA_ERROR_NOT_PERMITTED)");
    g_cfg.fail_closed = !fail_open;
  };
  if (counters == nullptr || *counters == '\0') return refuse("TESSERA_SHIM_COUNTERS is not set");
  long t = 0;
  const std::string policy_path(policy);
  const std::size_t slash = policy_path.rfind('/');
  const std::string policy_dir = slash == std::string::npos ? std::string(".") : policy_path.substr(0, slash);
  const std::string members = policy_dir + "/members";
  const std::string tenant_file = policy_dir + "/tenant";
  const int from_file = FileTenant(tenant_file);
  if (from_file != -1) {  // a claim's container: the DRA driver says who we are
    if (from_file < 0) return refuse("'" + tenant_file + "' does not hold a tenant index 0.." + std::to_string(kMaxTenants - 1));
    long claimed = 0;
    if (tenant != nullptr && *tenant != '\0' && (!ParseInt(tenant, 0, kMaxTenants - 1, &claimed) || claimed != from_file)) {
      Log("tessera-shim: TESSERA_SHIM_TENANT='%s' ignored: '%s' says tenant %d\n", tenant, tenant_file.c_str(), from_file);
    }
    t = from_file;
  } else if (::access(members.c_str(), F_OK) == 0) {  // a node directory: the node side says who we are
    const int assigned = AssignedTenant(members);
    if (assigned < 0) {
      return refuse("no tenant is assigned to this process in '" + members +
                    "' (not started by tessera run or the agent, or it left its supervisor's process tree and session)");
    }
    long claimed = 0;
    if (tenant != nullptr && *tenant != '\0' && (!ParseInt(tenant, 0, kMaxTenants - 1, &claimed) || claimed != assigned)) {
      Log("tessera-shim: TESSERA_SHIM_TENANT='%s' ignored: the node assigned tenant %d to this process\n", tenant,
          assigned);
    }
    t = assigned;
  } else if (!ParseInt(tenant, 0, kMaxTenants - 1, &t)) {
    return refuse(std::string("TESSERA_SHIM_TENANT='") + (tenant ? tenant : "") +
                  "' is not a tenant index 0.." + std::to_string(kMaxTenants - 1));
  }
  StatusOr<TenantView> view = TenantView::Open(policy, CountersFilePath(counters, static_cast<int>(t)), static_cast<int>(t));
  if (!view.ok()) return refuse(view.status().ToString());
  auto* v = new TenantView(std::move(*view));
  const int num_gpus = static_cast<int>(v->policy().header.num_gpus);
  int n = 0;
  if (gpus != nullptr && *gpus != '\0') {
    std::string list(gpus);
    std::size_t pos = 0;
    while (pos <= list.size()) {
      std::size_t end = list.find(',', pos);
      if (end == std::string::npos) end = list.size();
      std::string item = list.substr(pos, end - pos);
      long g = 0;
      if (n >= kMaxGpus || !ParseInt(item.c_str(), 0, num_gpus - 1, &g)) {
        return refuse("TESSERA_SHIM_GPUS='" + list + "': '" + item + "' is not a node GPU 0.." +
                      std::to_string(num_gpus - 1));
      }
      g_cfg.node_gpu[n++] = static_cast<int>(g);
      pos = end + 1;
    }
  } else {
    for (; n < num_gpus; ++n) g_cfg.node_gpu[n] = n;
  }
  g_cfg.num_ordinals = n;
  g_cfg.tenant = static_cast<int>(t);
  g_cfg.view = v;
  g_cfg.policy = &v->policy();
  g_cfg.counters = &v->counters();
  g_cfg.granule = v->policy().header.granule_bytes;
  g_cfg.managed = true;
  const char* leases = std::getenv("TESSERA_SHIM_LEASES");
  const char* compute_fail = std::getenv("TESSERA_SHIM_COMPUTE_FAIL");
  // Unset (or empty) or "open": fail open; "closed": fail closed; anything else is a
  // misconfiguration, which gets the safe choice (closed) and one line naming it (decision 0002).
  g_cfg.compute_fail_closed =
      compute_fail != nullptr && *compute_fail != '\0' && std::strcmp(compute_fail, "open") != 0;
  if (g_cfg.compute_fail_closed && std::strcmp(compute_fail, "closed") != 0) {
    Log("tessera-shim: TESSERA_SHIM_COMPUTE_FAIL='%s' is neither 'open' nor 'closed'; using closed\n",
        compute_fail);
  }
  if (leases != nullptr && *leases != '\0') {
    // The node's file read-only, and only this tenant's pages (in its own counters file) writable:
    // the shim cannot take the lease word nor touch another tenant's lines (enforce/lease_file.h).
    StatusOr<LeaseFile> file = LeaseFile::OpenTenant(leases, CountersFilePath(counters, static_cast<int>(t)), static_cast<int>(t));
    if (!file.ok()) {
      g_cfg.managed = false;
      return refuse(file.status().ToString());
    }
    if (file->num_gpus() < num_gpus) {
      g_cfg.managed = false;
      return refuse("lease file '" + std::string(leases) + "' covers " + std::to_string(file->num_gpus()) +
                    " GPU(s), the segment " + std::to_string(num_gpus));
    }
    const int boards = file->num_gpus();
    LeaseBoard* base = file->Release();  // kept for the life of the process
    bool one_gpu = n > 0;
    for (int i = 1; i < n; ++i) one_gpu = one_gpu && g_cfg.node_gpu[i] == g_cfg.node_gpu[0];
    g_gate.slot = static_cast<uint32_t>(t);
    g_gate.num_boards = boards;
    g_gate.boards = base;
    g_gate.single = one_gpu ? &base[g_cfg.node_gpu[0]] : nullptr;
    const char* meter = std::getenv("TESSERA_SHIM_GPU_METER");
    g_cfg.gpu_meter = meter == nullptr || std::strcmp(meter, "0") != 0;
    EnableMeter();
  }
  if (g_cfg.log) Log("tessera-shim: tenant %ld, %d GPU(s), granule %llu\n", t, n,
                     static_cast<unsigned long long>(g_cfg.granule));
}

// The child of a fork has no CUDA allocations of its own (device memory is not inherited): it
// forgets the parent's records and claims its own slot on first use. It starts with fresh maps and
// a fresh mutex (the old ones are leaked): another thread of the parent may have held them at the
// fork, and locking them all in a prepare handler would mean 65 locks held at once.
void ResetProcessState() {
  PointersPtr() = new RecordMap;
  VmmHandlesPtr() = new RecordMap;
  ArraysPtr() = new RecordMap;
  PoolsPtr() = new RecordMap;
  OpMuPtr() = new std::mutex;
  DriverMuPtr() = new std::mutex;  // another thread may have been loading the driver at the fork
  g_slot = -1;
  g_slot_pid = 0;
  g_launch_slot.store(nullptr, std::memory_order_release);
  g_graph_execs.ResetAfterFork();
  MeterResetAfterFork();
  g_ctx_table->ResetAfterFork();
  t_ctx_mirror = ContextStackMirror{};  // the forking thread's; CUDA contexts are not inherited
  BumpContextGeneration();
}

// The pid the process-local state belongs to: 0 in a child whose copy of the wipe-on-fork page
// the kernel zeroed, kResetting while one thread resets the state. It lives in that page when
// madvise(MADV_WIPEONFORK) works (Linux >= 4.14), else in g_owner_static (then compared with
// getpid() on every call).
constexpr pid_t kResetting = -1;
std::atomic<pid_t> g_owner_static{0};
std::atomic<pid_t>* g_owner = &g_owner_static;
bool g_owner_wiped_on_fork = false;

void InitOwner() {
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif
  const long page = ::sysconf(_SC_PAGESIZE);
  void* p = ::mmap(nullptr, static_cast<std::size_t>(page > 0 ? page : 4096), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p != MAP_FAILED && ::madvise(p, static_cast<std::size_t>(page > 0 ? page : 4096), MADV_WIPEONFORK) == 0) {
    g_owner = new (p) std::atomic<pid_t>(0);
    g_owner_wiped_on_fork = true;
  } else if (p != MAP_FAILED) {
    ::munmap(p, static_cast<std::size_t>(page > 0 ? page : 4096));
  }
  g_owner->store(::getpid(), std::memory_order_release);
}

void AtForkChild() {
  ResetProcessState();
  g_owner->store(::getpid(), std::memory_order_release);
}

void EnsureOwnProcess() {
  const pid_t owner = g_owner->load(std::memory_order_acquire);
  if (g_owner_wiped_on_fork) {
    // The page is only zeroed in a child, so a nonzero pid is always ours, even in a CLONE_VM
    // child (it shares the parent's memory and state, and must not reset it).
    if (__builtin_expect(owner > 0, 1)) return;
  }
  const pid_t me = ::getpid();
  if (owner == me) return;
  // Only the thread that called clone exists in the child; threads it started since may race
  // here: one resets, the others wait for it (a few instructions of work, no lock).
  for (pid_t seen = owner;; seen = g_owner->load(std::memory_order_acquire)) {
    if (seen == me) return;
    if (seen == kResetting) {
      ::sched_yield();
      continue;
    }
    if (g_owner->compare_exchange_strong(seen, kResetting, std::memory_order_acq_rel)) {
      ResetProcessState();
      g_owner->store(me, std::memory_order_release);
      if (g_cfg.log) Log("tessera-shim: pid %d was not forked (raw clone?): claiming its own slot\n", static_cast<int>(me));
      return;
    }
  }
}

__attribute__((constructor)) void ShimInit() {
  InitOwner();
  GetRealDl();
#define TESSERA_SHIM_WRAPPER_ADDR(symbol, base, version, flavour, family, handler, params, args) \
  g_wrappers[static_cast<int>(HookId::k_##symbol)] = reinterpret_cast<void*>(&::symbol);
  TESSERA_SHIM_HOOKS(TESSERA_SHIM_WRAPPER_ADDR)
#undef TESSERA_SHIM_WRAPPER_ADDR
  Configure();
  pthread_atfork(nullptr, nullptr, AtForkChild);
  EnsureDriver(false);  // a directly linked driver is already loaded; otherwise on first use
}

// Normal exit: the driver frees the process's memory, so its reservations go too.
__attribute__((destructor)) void ShimFini() {
  if (!g_cfg.managed) return;
  std::lock_guard<std::mutex> lock(OpMu());
  if (g_slot >= 0 && g_slot_pid == ::getpid()) {
    g_cfg.view->ReleaseSlot(g_slot);
    g_launch_slot.store(&g_local_slot, std::memory_order_release);
    g_slot = -3;
  }
}

}  // namespace
}  // namespace tessera::enforce::shim
