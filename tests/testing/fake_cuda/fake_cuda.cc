// A fake libcuda.so.1: the CUDA driver entry points tessera's shim tests use, implemented on host
// memory with the real C ABI (types from include/tessera/enforce/cuda_abi.h, checked below against
// each entry point's PFN type), so that libtessera-shim.so is tested end to end — LD_PRELOAD, dlsym,
// dlvsym, cuGetProcAddress v1/v2 — on machines without a GPU. Configuration and the control API
// are described in fake_cuda.h.
//
// What it models, and how (the rest returns CUDA_SUCCESS without doing anything):
//   * cuInit must come first (CUDA_ERROR_NOT_INITIALIZED otherwise), except for
//     cuDriverGetVersion and the resolvers; each thread has its own context stack (every
//     cuCtxCreate, cuCtxPushCurrent and cuCtxPopCurrent variant, cuCtxSetCurrent, cuCtxDestroy*
//     of the current context pops it; primary contexts, one per device, never made current by
//     retain); allocations need a current context.
//   * Device memory is counted per device against TESSERA_FAKE_CUDA_MEM_BYTES
//     (CUDA_ERROR_OUT_OF_MEMORY beyond), optionally shared between processes through a file.
//     Pointers from the 64-bit entry points are real host allocations; the 32-bit (pre-3.2)
//     entry points get unbacked addresses below 4 GiB.
//   * cuMemAllocPitch: pitch = width rounded up to TESSERA_FAKE_CUDA_PITCH_ALIGN; element size
//     must be 4, 8 or 16. cuMemCreate: size must be a multiple of the 2 MiB granularity; DEVICE
//     locations charge the device, HOST ones do not. cuMemRetainAllocationHandle: the fake has
//     no cuMemMap, so `addr` is taken to be the handle value itself. Arrays charge
//     width x height x depth x channels x element size (all mip levels for mipmapped arrays).
//   * cuGetProcAddress (4-argument, CUDA 11.3) and cuGetProcAddress_v2 (5-argument, CUDA 12.0)
//     return, among the variants of the requested base name that this driver version has, the
//     newest whose ABI version is not newer than `cudaVersion`, taking the per-thread (_ptsz)
//     flavour when CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM is set and the base has one at
//     that version; SYMBOL_NOT_FOUND / VERSION_NOT_SUFFICIENT otherwise (CUDA_ERROR_NOT_FOUND,
//     *pfn = NULL). Flags other than the two stream flags are CUDA_ERROR_INVALID_VALUE.
//   * cuMemsetD8_v2 (+_ptds) and cuMemsetD8Async (+_ptsz): the range must lie inside one device
//     allocation; host-backed memory is written at once (no queues), the last memset is kept for
//     tests, and an optional free audit counts nonzero bytes of blocks as they are freed.
//   * Stream capture state per stream handle (cuStreamBeginCapture*, cuStreamIsCapturing,
//     cuStreamEndCapture). Launches do nothing, unless a kernel duration is set: then each kernel
//     occupies a simulated device clock shared by the processes of one device file, and events
//     (cuEventCreate/Record/Query/Synchronize/ElapsedTime/Destroy_v2) and cuStreamSynchronize /
//     cuCtxSynchronize follow that clock ("simulated device time" below).
//   * Graphs: kernel, empty and child-graph nodes (cuGraphCreate, cuGraphAdd{Kernel,Empty,
//     ChildGraph}Node, cuGraphGetNodes, cuGraphNodeGetType, cuGraphChildGraphNodeGetGraph), every
//     instantiate variant, cuGraphLaunch(_ptsz) running the exec's kernel nodes (counted, see
//     fake_cuda.h), cuGraphExecDestroy, cuGraphDestroy.
//
// The library is linked with -Bsymbolic, as the real driver behaves: the addresses it hands out
// from cuGetProcAddress are its own functions even when an LD_PRELOADed library exports the same
// names.
#include "tests/testing/fake_cuda/fake_cuda.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "tessera/enforce/cuda_abi.h"

using namespace tessera::cuabi;  // NOLINT: the C ABI's names, as cuda.h has them

// clang-format off
// X(symbol, base, version, per_thread, pfn)
#define FAKE_ENTRIES(X) \
  X(cuInit, cuInit, 2000, false, PFN_cuInit_v2000) \
  X(cuDriverGetVersion, cuDriverGetVersion, 2020, false, PFN_cuDriverGetVersion_v2020) \
  X(cuDeviceGet, cuDeviceGet, 2000, false, PFN_cuDeviceGet_v2000) \
  X(cuDeviceGetCount, cuDeviceGetCount, 2000, false, PFN_cuDeviceGetCount_v2000) \
  X(cuDeviceTotalMem, cuDeviceTotalMem, 2000, false, PFN_cuDeviceTotalMem_v2000) \
  X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, false, PFN_cuDeviceTotalMem_v3020) \
  X(cuCtxCreate_v2, cuCtxCreate, 3020, false, PFN_cuCtxCreate_v3020) \
  X(cuCtxDestroy_v2, cuCtxDestroy, 4000, false, PFN_cuCtxDestroy_v4000) \
  X(cuCtxGetCurrent, cuCtxGetCurrent, 4000, false, PFN_cuCtxGetCurrent_v4000) \
  X(cuCtxSetCurrent, cuCtxSetCurrent, 4000, false, PFN_cuCtxSetCurrent_v4000) \
  X(cuCtxGetDevice, cuCtxGetDevice, 2000, false, PFN_cuCtxGetDevice_v2000) \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, false, PFN_cuDevicePrimaryCtxRetain_v7000) \
  X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, false, PFN_cuDevicePrimaryCtxRelease_v11000) \
  X(cuCtxCreate, cuCtxCreate, 2000, false, PFN_cuCtxCreate_v2000) \
  X(cuCtxCreate_v3, cuCtxCreate, 11040, false, PFN_cuCtxCreate_v11040) \
  X(cuCtxCreate_v4, cuCtxCreate, 12050, false, PFN_cuCtxCreate_v12050) \
  X(cuCtxDestroy, cuCtxDestroy, 2000, false, PFN_cuCtxDestroy_v2000) \
  X(cuCtxPushCurrent, cuCtxPushCurrent, 2000, false, PFN_cuCtxPushCurrent_v2000) \
  X(cuCtxPushCurrent_v2, cuCtxPushCurrent, 4000, false, PFN_cuCtxPushCurrent_v4000) \
  X(cuCtxPopCurrent, cuCtxPopCurrent, 2000, false, PFN_cuCtxPopCurrent_v2000) \
  X(cuCtxPopCurrent_v2, cuCtxPopCurrent, 4000, false, PFN_cuCtxPopCurrent_v4000) \
  X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, false, PFN_cuDevicePrimaryCtxRelease_v7000) \
  X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, false, PFN_cuDevicePrimaryCtxReset_v7000) \
  X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, false, PFN_cuDevicePrimaryCtxReset_v11000) \
  X(cuMemAlloc, cuMemAlloc, 2000, false, PFN_cuMemAlloc_v2000) \
  X(cuMemAlloc_v2, cuMemAlloc, 3020, false, PFN_cuMemAlloc_v3020) \
  X(cuMemAllocPitch, cuMemAllocPitch, 2000, false, PFN_cuMemAllocPitch_v2000) \
  X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, false, PFN_cuMemAllocPitch_v3020) \
  X(cuMemAllocManaged, cuMemAllocManaged, 6000, false, PFN_cuMemAllocManaged_v6000) \
  X(cuMemFree, cuMemFree, 2000, false, PFN_cuMemFree_v2000) \
  X(cuMemFree_v2, cuMemFree, 3020, false, PFN_cuMemFree_v3020) \
  X(cuMemGetInfo, cuMemGetInfo, 2000, false, PFN_cuMemGetInfo_v2000) \
  X(cuMemGetInfo_v2, cuMemGetInfo, 3020, false, PFN_cuMemGetInfo_v3020) \
  X(cuMemsetD8_v2, cuMemsetD8, 3020, false, PFN_cuMemsetD8_v3020) \
  X(cuMemsetD8_v2_ptds, cuMemsetD8, 7000, true, PFN_cuMemsetD8_v3020) \
  X(cuMemsetD8Async, cuMemsetD8Async, 3020, false, PFN_cuMemsetD8Async_v3020) \
  X(cuMemsetD8Async_ptsz, cuMemsetD8Async, 7000, true, PFN_cuMemsetD8Async_v3020) \
  X(cuMemAllocAsync, cuMemAllocAsync, 11020, false, PFN_cuMemAllocAsync_v11020) \
  X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, true, PFN_cuMemAllocAsync_v11020) \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, false, PFN_cuMemAllocFromPoolAsync_v11020) \
  X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, true, PFN_cuMemAllocFromPoolAsync_v11020) \
  X(cuMemFreeAsync, cuMemFreeAsync, 11020, false, PFN_cuMemFreeAsync_v11020) \
  X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, true, PFN_cuMemFreeAsync_v11020) \
  X(cuMemPoolCreate, cuMemPoolCreate, 11020, false, PFN_cuMemPoolCreate_v11020) \
  X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, false, PFN_cuMemPoolDestroy_v11020) \
  X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, false, PFN_cuDeviceGetDefaultMemPool_v11020) \
  X(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, false, PFN_cuDeviceGetMemPool_v11020) \
  X(cuMemCreate, cuMemCreate, 10020, false, PFN_cuMemCreate_v10020) \
  X(cuMemRelease, cuMemRelease, 10020, false, PFN_cuMemRelease_v10020) \
  X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, false, PFN_cuMemRetainAllocationHandle_v11000) \
  X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 10020, false, PFN_cuMemGetAllocationGranularity_v10020) \
  X(cuArrayCreate, cuArrayCreate, 2000, false, PFN_cuArrayCreate_v2000) \
  X(cuArrayCreate_v2, cuArrayCreate, 3020, false, PFN_cuArrayCreate_v3020) \
  X(cuArray3DCreate, cuArray3DCreate, 2000, false, PFN_cuArray3DCreate_v2000) \
  X(cuArray3DCreate_v2, cuArray3DCreate, 3020, false, PFN_cuArray3DCreate_v3020) \
  X(cuArrayDestroy, cuArrayDestroy, 2000, false, PFN_cuArrayDestroy_v2000) \
  X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, false, PFN_cuMipmappedArrayCreate_v5000) \
  X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, false, PFN_cuMipmappedArrayDestroy_v5000) \
  X(cuMemHostRegister_v2, cuMemHostRegister, 6050, false, PFN_cuMemHostRegister_v6050) \
  X(cuMemHostUnregister, cuMemHostUnregister, 4000, false, PFN_cuMemHostUnregister_v4000) \
  X(cuMemAllocHost_v2, cuMemAllocHost, 3020, false, PFN_cuMemAllocHost_v3020) \
  X(cuMemFreeHost, cuMemFreeHost, 2000, false, PFN_cuMemFreeHost_v2000) \
  X(cuLaunchKernel, cuLaunchKernel, 4000, false, PFN_cuLaunchKernel_v4000) \
  X(cuLaunchKernel_ptsz, cuLaunchKernel, 7000, true, PFN_cuLaunchKernel_v4000) \
  X(cuLaunchKernelEx, cuLaunchKernelEx, 11060, false, PFN_cuLaunchKernelEx_v11060) \
  X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060, true, PFN_cuLaunchKernelEx_v11060) \
  X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, false, PFN_cuLaunchCooperativeKernel_v9000) \
  X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 9000, true, PFN_cuLaunchCooperativeKernel_v9000) \
  X(cuLaunchCooperativeKernelMultiDevice, cuLaunchCooperativeKernelMultiDevice, 9000, false, PFN_cuLaunchCooperativeKernelMultiDevice_v9000) \
  X(cuLaunch, cuLaunch, 2000, false, PFN_cuLaunch_v2000) \
  X(cuLaunchGrid, cuLaunchGrid, 2000, false, PFN_cuLaunchGrid_v2000) \
  X(cuLaunchGridAsync, cuLaunchGridAsync, 2000, false, PFN_cuLaunchGridAsync_v2000) \
  X(cuGraphLaunch, cuGraphLaunch, 10000, false, PFN_cuGraphLaunch_v10000) \
  X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, true, PFN_cuGraphLaunch_v10000) \
  X(cuGraphCreate, cuGraphCreate, 10000, false, PFN_cuGraphCreate_v10000) \
  X(cuGraphAddKernelNode_v2, cuGraphAddKernelNode, 12000, false, PFN_cuGraphAddKernelNode_v12000) \
  X(cuGraphAddChildGraphNode, cuGraphAddChildGraphNode, 10000, false, PFN_cuGraphAddChildGraphNode_v10000) \
  X(cuGraphAddEmptyNode, cuGraphAddEmptyNode, 10000, false, PFN_cuGraphAddEmptyNode_v10000) \
  X(cuGraphGetNodes, cuGraphGetNodes, 10000, false, PFN_cuGraphGetNodes_v10000) \
  X(cuGraphNodeGetType, cuGraphNodeGetType, 10000, false, PFN_cuGraphNodeGetType_v10000) \
  X(cuGraphChildGraphNodeGetGraph, cuGraphChildGraphNodeGetGraph, 10000, false, PFN_cuGraphChildGraphNodeGetGraph_v10000) \
  X(cuGraphInstantiate, cuGraphInstantiate, 10000, false, PFN_cuGraphInstantiate_v10000) \
  X(cuGraphInstantiate_v2, cuGraphInstantiate, 11000, false, PFN_cuGraphInstantiate_v11000) \
  X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, false, PFN_cuGraphInstantiateWithFlags_v11040) \
  X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, false, PFN_cuGraphInstantiateWithParams_v12000) \
  X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 12000, true, PFN_cuGraphInstantiateWithParams_v12000) \
  X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, false, PFN_cuGraphExecDestroy_v10000) \
  X(cuGraphDestroy, cuGraphDestroy, 10000, false, PFN_cuGraphDestroy_v10000) \
  X(cuStreamBeginCapture, cuStreamBeginCapture, 10000, false, PFN_cuStreamBeginCapture_v10000) \
  X(cuStreamBeginCapture_ptsz, cuStreamBeginCapture, 10000, true, PFN_cuStreamBeginCapture_v10000) \
  X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010, false, PFN_cuStreamBeginCapture_v10010) \
  X(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture, 10010, true, PFN_cuStreamBeginCapture_v10010) \
  X(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph, 12030, false, PFN_cuStreamBeginCaptureToGraph_v12030) \
  X(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph, 12030, true, PFN_cuStreamBeginCaptureToGraph_v12030) \
  X(cuStreamEndCapture, cuStreamEndCapture, 10000, false, PFN_cuStreamEndCapture_v10000) \
  X(cuStreamEndCapture_ptsz, cuStreamEndCapture, 10000, true, PFN_cuStreamEndCapture_v10000) \
  X(cuStreamIsCapturing, cuStreamIsCapturing, 10000, false, PFN_cuStreamIsCapturing_v10000) \
  X(cuStreamIsCapturing_ptsz, cuStreamIsCapturing, 10000, true, PFN_cuStreamIsCapturing_v10000) \
  X(cuEventCreate, cuEventCreate, 2000, false, PFN_cuEventCreate_v2000) \
  X(cuEventRecord, cuEventRecord, 2000, false, PFN_cuEventRecord_v2000) \
  X(cuEventRecord_ptsz, cuEventRecord, 7000, true, PFN_cuEventRecord_v2000) \
  X(cuEventQuery, cuEventQuery, 2000, false, PFN_cuEventQuery_v2000) \
  X(cuEventSynchronize, cuEventSynchronize, 2000, false, PFN_cuEventSynchronize_v2000) \
  X(cuEventElapsedTime, cuEventElapsedTime, 2000, false, PFN_cuEventElapsedTime_v2000) \
  X(cuEventDestroy_v2, cuEventDestroy, 4000, false, PFN_cuEventDestroy_v4000) \
  X(cuStreamSynchronize, cuStreamSynchronize, 2000, false, PFN_cuStreamSynchronize_v2000) \
  X(cuStreamSynchronize_ptsz, cuStreamSynchronize, 7000, true, PFN_cuStreamSynchronize_v2000) \
  X(cuCtxSynchronize, cuCtxSynchronize, 2000, false, PFN_cuCtxSynchronize_v2000) \
  X(cuGetProcAddress, cuGetProcAddress, 11030, false, PFN_cuGetProcAddress_v11030) \
  X(cuGetProcAddress_v2, cuGetProcAddress, 12000, false, PFN_cuGetProcAddress_v12000)
// clang-format on

namespace {

enum FakeId : int {
#define FAKE_ID(symbol, base, version, per_thread, pfn) kId_##symbol,
  FAKE_ENTRIES(FAKE_ID)
#undef FAKE_ID
      kIdCount
};

constexpr int kMaxDevices = 8;
constexpr unsigned long long kVmmGranularity = 2ULL << 20;

struct Config {
  int devices = 1;
  unsigned long long mem_bytes = 16ULL << 30;
  int driver_version = 13000;
  unsigned long long pitch_align = 512;
  unsigned long long queue_depth = 1024;
};

struct DeviceUsage {
  std::atomic<unsigned long long> used[kMaxDevices];
  std::atomic<unsigned long long> peak[kMaxDevices];
  // The simulated device clock: CLOCK_MONOTONIC ns at which the last command submitted to the
  // device (by any process sharing the file) finishes.
  std::atomic<unsigned long long> busy_until[kMaxDevices];
};

struct Injection {
  std::atomic<int> code{0};
  std::atomic<int> remaining{0};  // < 0: every call
};

enum class Kind { kDevice, kDevice32, kHost, kVmmDevice, kVmmHost, kArray };

struct Allocation {
  unsigned long long bytes = 0;
  int device = 0;
  Kind kind = Kind::kDevice;
  int refs = 1;
  void* backing = nullptr;
};

struct FakeCtx {
  int device = 0;
};

struct FakePool {
  CUmemLocation location{};
};

Config g_config;
DeviceUsage g_local_usage;
DeviceUsage* g_usage = &g_local_usage;
std::atomic<bool> g_initialized{false};
std::atomic<bool> g_any_injection{false};
Injection g_inject[kIdCount];
std::atomic<unsigned long long> g_calls[kIdCount];
thread_local const char* t_last_call = "";
thread_local FakeCtx* t_ctx = nullptr;  // the current context: the top of t_ctx_stack
FakeCtx g_primary[kMaxDevices];
// The calling thread's context stack, as the real driver keeps it: cuCtxCreate* and
// cuCtxPushCurrent* push, cuCtxPopCurrent* pops, cuCtxSetCurrent replaces the top (pushes on an
// empty stack; NULL pops), cuCtxDestroy* of the current context pops it.
constexpr int kMaxCtxStack = 16;
thread_local FakeCtx* t_ctx_stack[kMaxCtxStack];
thread_local int t_ctx_depth = 0;
void SyncCurrent() { t_ctx = t_ctx_depth > 0 ? t_ctx_stack[t_ctx_depth - 1] : nullptr; }
CUresult PushCtx(FakeCtx* c) {
  if (t_ctx_depth == kMaxCtxStack) return CUDA_ERROR_INVALID_VALUE;
  t_ctx_stack[t_ctx_depth++] = c;
  SyncCurrent();
  return CUDA_SUCCESS;
}
FakeCtx* PopCtx() {
  if (t_ctx_depth == 0) return nullptr;
  FakeCtx* top = t_ctx_stack[--t_ctx_depth];
  SyncCurrent();
  return top;
}
FakePool g_default_pools[kMaxDevices];
std::atomic<unsigned long long> g_kernel_ns{0};  // simulated duration of one kernel (0: none)
std::atomic<unsigned long long> g_call_ns{0};    // charged mode: busy-wait this long in every entry point

// All bookkeeping below under one mutex; the real driver is thread-safe too.
std::mutex& Mu() {
  static auto* mu = new std::mutex;
  return *mu;
}
std::unordered_map<unsigned long long, Allocation>& Allocs() {  // pointers and arrays
  static auto* m = new std::unordered_map<unsigned long long, Allocation>;
  return *m;
}
std::unordered_map<unsigned long long, Allocation>& Vmm() {  // VMM handles
  static auto* m = new std::unordered_map<unsigned long long, Allocation>;
  return *m;
}
std::set<CUstream>& Capturing() {
  static auto* s = new std::set<CUstream>;
  return *s;
}
unsigned long long g_next_handle = 1;
// Memsets and the free audit (under Mu()).
struct MemsetRecord {
  const char* symbol = "";
  unsigned long long dptr = 0, bytes = 0, stream = 0;
};
MemsetRecord g_last_memset;
bool g_audit_frees = false;
unsigned long long g_freed_dirty_bytes = 0;
unsigned long long g_next_ptr32 = 0x10000000ULL;

struct EntryInfo {
  const char* symbol;
  const char* base;
  int version;
  bool per_thread;
  void* fn;
};


const char* const kSymbolNames[kIdCount] = {
#define FAKE_NAME(symbol, base, version, per_thread, pfn) #symbol,
    FAKE_ENTRIES(FAKE_NAME)
#undef FAKE_NAME
};

int FindId(std::string_view symbol) {
  for (int i = 0; i < kIdCount; ++i) {
    if (symbol == kSymbolNames[i]) return i;
  }
  return -1;
}

unsigned long long EnvU64(const char* name, unsigned long long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 0);
}

void ParseFailures(const char* spec) {
  if (spec == nullptr) return;
  std::string s(spec);
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    pos = end + 1;
    std::size_t c1 = item.find(':');
    if (c1 == std::string::npos) continue;
    std::string name = item.substr(0, c1);
    std::string rest = item.substr(c1 + 1);
    std::size_t c2 = rest.find(':');
    int code = std::atoi(rest.substr(0, c2).c_str());
    int count = c2 == std::string::npos ? -1 : std::atoi(rest.substr(c2 + 1).c_str());
    tessera_fake_cuda_inject(name.c_str(), code, count);
  }
}

void LoadProcessStateConfig();  // TESSERA_FAKE_GPU_STATE, below

__attribute__((constructor)) void LoadConfig() {
  g_config.devices = static_cast<int>(std::clamp<unsigned long long>(
      EnvU64("TESSERA_FAKE_CUDA_DEVICES", 1), 1, kMaxDevices));
  g_config.mem_bytes = EnvU64("TESSERA_FAKE_CUDA_MEM_BYTES", 16ULL << 30);
  g_config.driver_version = static_cast<int>(EnvU64("TESSERA_FAKE_CUDA_DRIVER_VERSION", 13000));
  g_config.pitch_align = std::max<unsigned long long>(1, EnvU64("TESSERA_FAKE_CUDA_PITCH_ALIGN", 512));
  g_config.queue_depth = std::max<unsigned long long>(1, EnvU64("TESSERA_FAKE_CUDA_QUEUE_DEPTH", 1024));
  g_kernel_ns.store(EnvU64("TESSERA_FAKE_CUDA_KERNEL_NS", 0), std::memory_order_relaxed);
  g_call_ns.store(EnvU64("TESSERA_FAKE_CUDA_CALL_NS", 0), std::memory_order_relaxed);
  for (int d = 0; d < kMaxDevices; ++d) g_primary[d].device = d;
  if (const char* shared = std::getenv("TESSERA_FAKE_CUDA_SHARED"); shared != nullptr && *shared) {
    int fd = ::open(shared, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0 && ::ftruncate(fd, sizeof(DeviceUsage)) == 0) {
      void* p = ::mmap(nullptr, sizeof(DeviceUsage), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) g_usage = static_cast<DeviceUsage*>(p);
    }
    if (fd >= 0) ::close(fd);
  }
  ParseFailures(std::getenv("TESSERA_FAKE_CUDA_FAIL"));
  LoadProcessStateConfig();
  // A slow driver load (tests of a fork taken while another thread is inside dlopen of libcuda).
  if (unsigned long long ms = EnvU64("TESSERA_FAKE_CUDA_LOAD_DELAY_MS", 0); ms > 0) ::usleep(static_cast<useconds_t>(ms * 1000));
}

// Charged mode: spins (no sleep, no yield: a real driver call costs CPU time on the calling
// thread) until `ns` of CLOCK_MONOTONIC have passed since the entry. The clock read itself costs
// 20-70 ns on a VM, so a charge is never shorter than about one read.
__attribute__((noinline)) void Spin(unsigned long long ns) {
  timespec t0{}, t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t0);
  const long long start = static_cast<long long>(t0.tv_sec) * 1'000'000'000LL + t0.tv_nsec;
  do {
    ::clock_gettime(CLOCK_MONOTONIC, &t);
  } while (static_cast<long long>(t.tv_sec) * 1'000'000'000LL + t.tv_nsec - start < static_cast<long long>(ns));
}

// Every entry point starts here: records the call, charges its cost (charged mode), applies an
// injected error.
inline bool Enter(FakeId id, CUresult* injected) {
  t_last_call = kSymbolNames[id];
  g_calls[id].fetch_add(1, std::memory_order_relaxed);
  if (const unsigned long long ns = g_call_ns.load(std::memory_order_relaxed); __builtin_expect(ns != 0, 0)) Spin(ns);
  if (!g_any_injection.load(std::memory_order_relaxed)) return false;
  Injection& inj = g_inject[id];
  int remaining = inj.remaining.load(std::memory_order_acquire);
  while (remaining != 0) {
    if (remaining < 0 || inj.remaining.compare_exchange_weak(remaining, remaining - 1)) {
      *injected = inj.code.load(std::memory_order_relaxed);
      return true;
    }
  }
  return false;
}

#define ENTER(symbol)                                       \
  do {                                                      \
    CUresult injected_ = CUDA_SUCCESS;                      \
    if (Enter(kId_##symbol, &injected_)) return injected_;  \
  } while (0)

#define REQUIRE_INIT()                                                       \
  do {                                                                       \
    if (!g_initialized.load(std::memory_order_acquire)) return CUDA_ERROR_NOT_INITIALIZED; \
  } while (0)

bool ValidDevice(int d) { return d >= 0 && d < g_config.devices; }

CUresult CurrentDevice(int* dev) {
  if (t_ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = t_ctx->device;
  return CUDA_SUCCESS;
}

// Per-process device memory for the fake NVML (TESSERA_FAKE_GPU_STATE, a folder): after every
// change this process's bytes per device are in <folder>/<pid>, one "<node GPU> <bytes>" line per
// device it touched, replaced atomically. The node GPU of ordinal i is the i-th entry of
// CUDA_VISIBLE_DEVICES (an index, or a fake NVML UUID "GPU-fa4e0000-0000-4000-8000-<12 hex>"),
// else i. A fork()ed child starts from zero: a CUDA context is not inherited. A second copy of the
// library in the same process (loaded from another file name, as a hostile tenant does to get
// round the shim) records in <folder>/<pid>.<its file name>, so the fake NVML can add the copies
// up as the real one sees the process's memory whatever library allocated it.
struct ProcessState {
  std::string dir;     // empty: not recorded
  std::string suffix;  // "" for libcuda.so.1, ".<file name>" for a copy under another name
  int node_gpu[kMaxDevices] = {};
  std::mutex mu;
  pid_t pid = 0;
  long long used[kMaxDevices] = {};
  bool touched[kMaxDevices] = {};
};
ProcessState& ProcState() {
  static auto* s = new ProcessState;
  return *s;
}

void LoadProcessStateConfig() {
  ProcessState& ps = ProcState();
  for (int d = 0; d < kMaxDevices; ++d) ps.node_gpu[d] = d;
  const char* dir = std::getenv("TESSERA_FAKE_GPU_STATE");
  if (dir == nullptr || *dir == '\0') return;
  ps.dir = dir;
  Dl_info self{};
  if (::dladdr(reinterpret_cast<void*>(&LoadProcessStateConfig), &self) != 0 && self.dli_fname != nullptr) {
    std::string file = self.dli_fname;
    file = file.substr(file.rfind('/') + 1);  // npos + 1 == 0: the whole name
    std::replace_if(file.begin(), file.end(), [](char c) { return c == '/' || c == ' '; }, '_');
    if (file != "libcuda.so.1") ps.suffix = "." + file;
  }
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible == nullptr) return;
  std::string list(visible);
  int ordinal = 0;
  for (std::size_t pos = 0; pos <= list.size() && ordinal < kMaxDevices; ++ordinal) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    const std::string item = list.substr(pos, comma - pos);
    pos = comma + 1;
    if (!item.empty() && std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      ps.node_gpu[ordinal] = std::atoi(item.c_str());
    } else if (item.rfind("GPU-", 0) == 0 && item.size() >= 12) {
      ps.node_gpu[ordinal] = static_cast<int>(std::strtol(item.substr(item.size() - 12).c_str(), nullptr, 16));
    }
  }
}

void RecordProcessUsage(int dev, long long delta) {
  ProcessState& ps = ProcState();
  if (ps.dir.empty() || dev < 0 || dev >= kMaxDevices) return;
  std::lock_guard<std::mutex> lock(ps.mu);
  const pid_t self = ::getpid();
  if (ps.pid != self) {
    ps.pid = self;
    std::fill(std::begin(ps.used), std::end(ps.used), 0);
    std::fill(std::begin(ps.touched), std::end(ps.touched), false);
  }
  ps.used[dev] = std::max<long long>(0, ps.used[dev] + delta);
  ps.touched[dev] = true;
  std::string text;
  for (int d = 0; d < kMaxDevices; ++d)
    if (ps.touched[d]) text += std::to_string(ps.node_gpu[d]) + " " + std::to_string(ps.used[d]) + "\n";
  const std::string path = ps.dir + "/" + std::to_string(self) + ps.suffix;
  const std::string tmp = ps.dir + "/." + std::to_string(self) + ps.suffix + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (written) (void)::rename(tmp.c_str(), path.c_str());
}

CUresult ChargeDevice(int dev, unsigned long long bytes) {
  auto& used = g_usage->used[dev];
  unsigned long long cur = used.load(std::memory_order_relaxed);
  do {
    if (bytes > g_config.mem_bytes || cur > g_config.mem_bytes - bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  } while (!used.compare_exchange_weak(cur, cur + bytes, std::memory_order_acq_rel));
  unsigned long long now = cur + bytes;
  auto& peak = g_usage->peak[dev];
  unsigned long long p = peak.load(std::memory_order_relaxed);
  while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
  }
  RecordProcessUsage(dev, static_cast<long long>(bytes));
  return CUDA_SUCCESS;
}

void UnchargeDevice(int dev, unsigned long long bytes) {
  g_usage->used[dev].fetch_sub(bytes, std::memory_order_acq_rel);
  RecordProcessUsage(dev, -static_cast<long long>(bytes));
}

// Device allocation on the current context's device, or on `on_device` if >= 0 (a pool's device)
// (64-bit pointer, host-backed).
CUresult AllocDevice(CUdeviceptr* dptr, size_t bytes, Kind kind, int on_device = -1) {
  REQUIRE_INIT();
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  int dev = 0;
  if (CUresult rc = CurrentDevice(&dev); rc != CUDA_SUCCESS) return rc;
  if (on_device >= 0) dev = on_device;
  if (kind == Kind::kDevice) {
    if (CUresult rc = ChargeDevice(dev, bytes); rc != CUDA_SUCCESS) return rc;
  }
  void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (p == nullptr) {
    if (kind == Kind::kDevice) UnchargeDevice(dev, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  {
    std::lock_guard<std::mutex> lock(Mu());
    Allocs()[reinterpret_cast<uintptr_t>(p)] = Allocation{bytes, dev, kind, 1, p};
  }
  *dptr = reinterpret_cast<uintptr_t>(p);
  return CUDA_SUCCESS;
}

CUresult FreeDevice(unsigned long long ptr) {
  REQUIRE_INIT();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(Mu());
    auto it = Allocs().find(ptr);
    if (it == Allocs().end() || it->second.kind == Kind::kArray) return CUDA_ERROR_INVALID_VALUE;
    a = it->second;
    Allocs().erase(it);
    if (g_audit_frees && a.backing != nullptr) {  // what another tenant could read after reuse
      const auto* b = static_cast<const unsigned char*>(a.backing);
      g_freed_dirty_bytes += static_cast<unsigned long long>(
          a.bytes - static_cast<unsigned long long>(std::count(b, b + a.bytes, 0)));
    }
  }
  if (a.kind == Kind::kDevice || a.kind == Kind::kDevice32) UnchargeDevice(a.device, a.bytes);
  std::free(a.backing);
  return CUDA_SUCCESS;
}

unsigned long long FormatBytes(CUarray_format f) {
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
      return 0;
  }
}

CUresult CreateArray(void** handle, unsigned long long w, unsigned long long h, unsigned long long d,
                     CUarray_format format, unsigned int channels, unsigned int levels) {
  REQUIRE_INIT();
  if (handle == nullptr || w == 0) return CUDA_ERROR_INVALID_VALUE;
  unsigned long long elem = FormatBytes(format);
  if (elem == 0 || (channels != 1 && channels != 2 && channels != 4)) return CUDA_ERROR_INVALID_VALUE;
  int dev = 0;
  if (CUresult rc = CurrentDevice(&dev); rc != CUDA_SUCCESS) return rc;
  unsigned long long bytes = 0;
  for (unsigned int l = 0; l < std::max(levels, 1u); ++l) {
    bytes += std::max(w >> l, 1ULL) * std::max(h >> l, 1ULL) * std::max(d >> l, 1ULL) * channels * elem;
  }
  if (CUresult rc = ChargeDevice(dev, bytes); rc != CUDA_SUCCESS) return rc;
  auto* obj = new char[16];
  {
    std::lock_guard<std::mutex> lock(Mu());
    Allocs()[reinterpret_cast<uintptr_t>(obj)] = Allocation{bytes, dev, Kind::kArray, 1, nullptr};
  }
  *handle = obj;
  return CUDA_SUCCESS;
}

CUresult DestroyArray(void* handle) {
  REQUIRE_INIT();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(Mu());
    auto it = Allocs().find(reinterpret_cast<uintptr_t>(handle));
    if (it == Allocs().end() || it->second.kind != Kind::kArray) return CUDA_ERROR_INVALID_HANDLE;
    a = it->second;
    Allocs().erase(it);
  }
  UnchargeDevice(a.device, a.bytes);
  delete[] static_cast<char*>(handle);
  return CUDA_SUCCESS;
}

CUresult Resolve(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                 CUdriverProcAddressQueryResult* status);

}  // namespace

// --- control API ----------------------------------------------------------------------------------
// --- simulated device time -------------------------------------------------------------------------
// With TESSERA_FAKE_CUDA_KERNEL_NS (or tessera_fake_cuda_set_kernel_ns) > 0, every kernel occupies
// the device for that long. The device runs one command at a time, in submission order, across all
// streams and all processes that share TESSERA_FAKE_CUDA_SHARED (its clock, `busy_until`, lives
// there; without the file it is per process). A real GPU time-slices between the contexts of
// several processes instead; for shares the effect is the same: work a tenant has queued runs,
// whoever holds the lease. A stream holds at most TESSERA_FAKE_CUDA_QUEUE_DEPTH (default 1024)
// unfinished launches; the next launch blocks the host until the oldest finishes (the real
// driver's bounded push buffer). An event completes when the commands submitted to the device
// before it have run; cuEventSynchronize, cuStreamSynchronize and cuCtxSynchronize sleep until
// then. Worked example (one device, 1 ms kernels, idle at t = 0):
//   t=0    launch on stream A -> runs [0, 1) ms; launch on B (another process) -> [1, 2)
//   t=0.1  cuEventRecord(e, A) -> e completes at 2 ms (the device is busy until then)
//   t=0.5  cuEventQuery(e) -> CUDA_ERROR_NOT_READY; cuEventSynchronize(e) returns at t = 2
// Kernels of 0 ns (the default) touch none of this: a launch stays a counter increment.
namespace {

struct StreamSim {
  std::vector<unsigned long long> pending_end;  // end times of unfinished launches, oldest first
  unsigned long long last_end = 0;
};
struct EventSim {
  bool recorded = false;
  unsigned long long at = 0;  // completion time on the simulated clock
};
struct SimState {
  std::mutex mu;
  std::unordered_map<unsigned long long, StreamSim> streams;
  std::unordered_map<const void*, EventSim> events;
  unsigned long long last_end = 0;  // this process's latest command (cuCtxSynchronize)
  std::vector<std::pair<unsigned long long, unsigned long long>> busy;  // this process's kernels
};
SimState& Sim() {
  static auto* s = new SimState;
  return *s;
}

unsigned long long SimNowNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1'000'000'000ULL + static_cast<unsigned long long>(ts.tv_nsec);
}

void SleepUntil(unsigned long long t) {
  timespec ts{static_cast<time_t>(t / 1'000'000'000ULL), static_cast<long>(t % 1'000'000'000ULL)};
  while (SimNowNs() < t && ::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// The stream's identity: its handle; the per-thread default stream (NULL through a _ptsz entry
// point) is CU_STREAM_PER_THREAD (0x2), as the driver names it.
unsigned long long StreamKey(CUstream stream, bool per_thread) {
  if (stream == nullptr && per_thread) return 0x2;
  return reinterpret_cast<unsigned long long>(stream);
}

int SimDevice() { return t_ctx != nullptr ? t_ctx->device : 0; }

// Takes the device from max(now, its clock) for `dur` ns; returns the start.
unsigned long long TakeDevice(int dev, unsigned long long now, unsigned long long dur) {
  auto& clock = g_usage->busy_until[dev];
  unsigned long long cur = clock.load(std::memory_order_acquire);
  unsigned long long start = 0;
  do {
    start = std::max(now, cur);
  } while (!clock.compare_exchange_weak(cur, start + dur, std::memory_order_acq_rel));
  return start;
}

void Prune(StreamSim& s, unsigned long long now) {
  auto done = std::find_if(s.pending_end.begin(), s.pending_end.end(), [now](unsigned long long e) { return e > now; });
  s.pending_end.erase(s.pending_end.begin(), done);
}

// A launch of `kernels` kernels on `stream`: waits for room in the stream's queue, then queues it.
void SimLaunch(CUstream stream, bool per_thread, unsigned long long kernels) {
  const unsigned long long per_kernel = g_kernel_ns.load(std::memory_order_relaxed);
  if (per_kernel == 0 || kernels == 0) return;
  const unsigned long long dur = per_kernel * kernels;
  SimState& sim = Sim();
  std::unique_lock<std::mutex> lock(sim.mu);
  StreamSim& s = sim.streams[StreamKey(stream, per_thread)];
  for (;;) {
    Prune(s, SimNowNs());
    if (s.pending_end.size() < g_config.queue_depth) break;
    const unsigned long long wait = s.pending_end[s.pending_end.size() - g_config.queue_depth];
    lock.unlock();
    SleepUntil(wait);
    lock.lock();
  }
  const unsigned long long start = TakeDevice(SimDevice(), SimNowNs(), dur);
  s.pending_end.push_back(start + dur);
  s.last_end = start + dur;
  sim.last_end = std::max(sim.last_end, start + dur);
  sim.busy.emplace_back(start, start + dur);
}

}  // namespace

extern "C" {

const char* tessera_fake_cuda_last_call(void) { return t_last_call; }

unsigned long long tessera_fake_cuda_calls(const char* symbol) {
  int id = symbol ? FindId(symbol) : -1;
  return id < 0 ? 0 : g_calls[id].load(std::memory_order_relaxed);
}

unsigned long long tessera_fake_cuda_total_calls(void) {
  unsigned long long total = 0;
  for (int i = 0; i < kIdCount; ++i) total += g_calls[i].load(std::memory_order_relaxed);
  return total;
}

const char* tessera_fake_cuda_entry_name(int index) {
  return index >= 0 && index < kIdCount ? kSymbolNames[index] : nullptr;
}

void tessera_fake_cuda_set_call_ns(unsigned long long ns) { g_call_ns.store(ns, std::memory_order_relaxed); }

int tessera_fake_cuda_inject(const char* symbol, int code, int count) {
  int id = symbol ? FindId(symbol) : -1;
  if (id < 0) return -1;
  g_inject[id].code.store(code, std::memory_order_relaxed);
  g_inject[id].remaining.store(count, std::memory_order_release);
  if (count != 0) g_any_injection.store(true, std::memory_order_release);
  return 0;
}

unsigned long long tessera_fake_cuda_device_used(int device) {
  return device >= 0 && device < kMaxDevices ? g_usage->used[device].load() : 0;
}
unsigned long long tessera_fake_cuda_device_peak(int device) {
  return device >= 0 && device < kMaxDevices ? g_usage->peak[device].load() : 0;
}
void tessera_fake_cuda_audit_frees(int on) {
  std::lock_guard<std::mutex> lock(Mu());
  g_audit_frees = on != 0;
  g_freed_dirty_bytes = 0;
}

unsigned long long tessera_fake_cuda_freed_dirty_bytes(void) {
  std::lock_guard<std::mutex> lock(Mu());
  return g_freed_dirty_bytes;
}

const char* tessera_fake_cuda_last_memset(unsigned long long* dptr, unsigned long long* bytes,
                                          unsigned long long* stream) {
  std::lock_guard<std::mutex> lock(Mu());
  if (dptr != nullptr) *dptr = g_last_memset.dptr;
  if (bytes != nullptr) *bytes = g_last_memset.bytes;
  if (stream != nullptr) *stream = g_last_memset.stream;
  return g_last_memset.symbol;
}

unsigned long long tessera_fake_cuda_live_allocations(void) {
  std::lock_guard<std::mutex> lock(Mu());
  return Allocs().size() + Vmm().size();
}

// --- the driver API -------------------------------------------------------------------------------
CUresult cuInit(unsigned int flags) {
  ENTER(cuInit);
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  g_initialized.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int* version) {
  ENTER(cuDriverGetVersion);
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = g_config.driver_version;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  ENTER(cuDeviceGet);
  REQUIRE_INIT();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  ENTER(cuDeviceGetCount);
  REQUIRE_INIT();
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = g_config.devices;
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  ENTER(cuDeviceTotalMem);
  REQUIRE_INIT();
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = static_cast<unsigned int>(std::min<unsigned long long>(g_config.mem_bytes, 0xffffffffu));
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  ENTER(cuDeviceTotalMem_v2);
  REQUIRE_INIT();
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = g_config.mem_bytes;
  return CUDA_SUCCESS;
}

namespace {
CUresult CreateCtx(CUcontext* pctx, CUdevice dev) {
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  auto* ctx = new FakeCtx{dev};
  if (CUresult rc = PushCtx(ctx); rc != CUDA_SUCCESS) {
    delete ctx;
    return rc;
  }
  *pctx = reinterpret_cast<CUcontext>(ctx);
  return CUDA_SUCCESS;
}
CUresult DestroyCtx(CUcontext ctx) {
  auto* c = reinterpret_cast<FakeCtx*>(ctx);
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (t_ctx == c) PopCtx();
  if (c < &g_primary[0] || c > &g_primary[kMaxDevices - 1]) delete c;
  return CUDA_SUCCESS;
}
CUresult PushCurrent(CUcontext ctx) {
  if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return PushCtx(reinterpret_cast<FakeCtx*>(ctx));
}
CUresult PopCurrent(CUcontext* pctx) {
  if (t_ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
  FakeCtx* top = PopCtx();
  if (pctx != nullptr) *pctx = reinterpret_cast<CUcontext>(top);
  return CUDA_SUCCESS;
}
}  // namespace

CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  ENTER(cuCtxCreate);
  REQUIRE_INIT();
  (void)flags;
  return CreateCtx(pctx, dev);
}

CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  ENTER(cuCtxCreate_v2);
  REQUIRE_INIT();
  (void)flags;
  return CreateCtx(pctx, dev);
}

CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int num_params, unsigned int flags,
                        CUdevice dev) {
  ENTER(cuCtxCreate_v3);
  REQUIRE_INIT();
  (void)params, (void)num_params, (void)flags;
  return CreateCtx(pctx, dev);
}

CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev) {
  ENTER(cuCtxCreate_v4);
  REQUIRE_INIT();
  (void)params, (void)flags;
  return CreateCtx(pctx, dev);
}

CUresult cuCtxDestroy(CUcontext ctx) {
  ENTER(cuCtxDestroy);
  REQUIRE_INIT();
  return DestroyCtx(ctx);
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
  ENTER(cuCtxDestroy_v2);
  REQUIRE_INIT();
  return DestroyCtx(ctx);
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  ENTER(cuCtxGetCurrent);
  REQUIRE_INIT();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(t_ctx);
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  ENTER(cuCtxSetCurrent);
  REQUIRE_INIT();
  if (ctx == nullptr) {
    PopCtx();
    return CUDA_SUCCESS;
  }
  if (t_ctx_depth == 0) return PushCtx(reinterpret_cast<FakeCtx*>(ctx));
  t_ctx_stack[t_ctx_depth - 1] = reinterpret_cast<FakeCtx*>(ctx);
  SyncCurrent();
  return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent(CUcontext ctx) {
  ENTER(cuCtxPushCurrent);
  REQUIRE_INIT();
  return PushCurrent(ctx);
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  ENTER(cuCtxPushCurrent_v2);
  REQUIRE_INIT();
  return PushCurrent(ctx);
}

CUresult cuCtxPopCurrent(CUcontext* pctx) {
  ENTER(cuCtxPopCurrent);
  REQUIRE_INIT();
  return PopCurrent(pctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  ENTER(cuCtxPopCurrent_v2);
  REQUIRE_INIT();
  return PopCurrent(pctx);
}

CUresult cuCtxGetDevice(CUdevice* device) {
  ENTER(cuCtxGetDevice);
  REQUIRE_INIT();
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CurrentDevice(device);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  ENTER(cuDevicePrimaryCtxRetain);
  REQUIRE_INIT();
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = reinterpret_cast<CUcontext>(&g_primary[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  ENTER(cuDevicePrimaryCtxRelease);
  REQUIRE_INIT();
  return ValidDevice(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  ENTER(cuDevicePrimaryCtxRelease_v2);
  REQUIRE_INIT();
  return ValidDevice(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  ENTER(cuDevicePrimaryCtxReset);
  REQUIRE_INIT();
  return ValidDevice(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  ENTER(cuDevicePrimaryCtxReset_v2);
  REQUIRE_INIT();
  return ValidDevice(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuMemAlloc(CUdeviceptr_v1* dptr, unsigned int bytesize) {
  ENTER(cuMemAlloc);
  REQUIRE_INIT();
  if (dptr == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  int dev = 0;
  if (CUresult rc = CurrentDevice(&dev); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(Mu());
  unsigned long long step = (bytesize + 255ULL) / 256 * 256;
  if (g_next_ptr32 + step > 0xffff0000ULL) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult rc = ChargeDevice(dev, bytesize); rc != CUDA_SUCCESS) return rc;
  unsigned long long p = g_next_ptr32;
  g_next_ptr32 += step;
  Allocs()[p] = Allocation{bytesize, dev, Kind::kDevice32, 1, nullptr};
  *dptr = static_cast<CUdeviceptr_v1>(p);
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  ENTER(cuMemAlloc_v2);
  return AllocDevice(dptr, bytesize, Kind::kDevice);
}

CUresult cuMemAllocPitch(CUdeviceptr_v1* dptr, unsigned int* pitch, unsigned int width,
                         unsigned int height, unsigned int elem) {
  ENTER(cuMemAllocPitch);
  REQUIRE_INIT();
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (elem != 4 && elem != 8 && elem != 16) return CUDA_ERROR_INVALID_VALUE;
  unsigned long long p = (width + g_config.pitch_align - 1) / g_config.pitch_align * g_config.pitch_align;
  if (p * height > 0xffffffffULL) return CUDA_ERROR_OUT_OF_MEMORY;
  int dev = 0;
  if (CUresult rc = CurrentDevice(&dev); rc != CUDA_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(Mu());
  unsigned long long bytes = p * height;
  if (g_next_ptr32 + bytes > 0xffff0000ULL) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult rc = ChargeDevice(dev, bytes); rc != CUDA_SUCCESS) return rc;
  unsigned long long addr = g_next_ptr32;
  g_next_ptr32 += (bytes + 255) / 256 * 256;
  Allocs()[addr] = Allocation{bytes, dev, Kind::kDevice32, 1, nullptr};
  *dptr = static_cast<CUdeviceptr_v1>(addr);
  *pitch = static_cast<unsigned int>(p);
  return CUDA_SUCCESS;
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width, size_t height,
                            unsigned int elem) {
  ENTER(cuMemAllocPitch_v2);
  REQUIRE_INIT();
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
  if (elem != 4 && elem != 8 && elem != 16) return CUDA_ERROR_INVALID_VALUE;
  size_t p = (width + g_config.pitch_align - 1) / g_config.pitch_align * g_config.pitch_align;
  CUresult rc = AllocDevice(dptr, p * height, Kind::kDevice);
  if (rc == CUDA_SUCCESS) *pitch = p;
  return rc;
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  ENTER(cuMemAllocManaged);
  if (flags != 1 && flags != 2) return CUDA_ERROR_INVALID_VALUE;  // ATTACH_GLOBAL / ATTACH_HOST
  return AllocDevice(dptr, bytesize, Kind::kDevice);
}

CUresult cuMemFree(CUdeviceptr_v1 dptr) {
  ENTER(cuMemFree);
  return FreeDevice(dptr);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  ENTER(cuMemFree_v2);
  return FreeDevice(dptr);
}

CUresult cuMemGetInfo(unsigned int* free_bytes, unsigned int* total_bytes) {
  ENTER(cuMemGetInfo);
  REQUIRE_INIT();
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int dev = 0;
  if (CUresult rc = CurrentDevice(&dev); rc != CUDA_SUCCESS) return rc;
  unsigned long long used = g_usage->used[dev].load();
  unsigned long long total = g_config.mem_bytes;
  *free_bytes = static_cast<unsigned int>(std::min<unsigned long long>(total - std::min(used, total), 0xffffffffu));
  *total_bytes = static_cast<unsigned int>(std::min<unsigned long long>(total, 0xffffffffu));
  return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  ENTER(cuMemGetInfo_v2);
  REQUIRE_INIT();
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int dev = 0;
  if (CUresult rc = CurrentDevice(&dev); rc != CUDA_SUCCESS) return rc;
  unsigned long long used = g_usage->used[dev].load();
  *total_bytes = g_config.mem_bytes;
  *free_bytes = g_config.mem_bytes - std::min<unsigned long long>(used, g_config.mem_bytes);
  return CUDA_SUCCESS;
}

// The range must lie inside one device allocation (not an array); host-backed ones are written,
// the 32-bit entry points' unbacked ones only checked. Runs at once (the fake has no queues).
static CUresult Memset(const char* symbol, CUdeviceptr dptr, unsigned char value, size_t n, CUstream stream) {
  REQUIRE_INIT();
  if (n == 0) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> lock(Mu());
  const Allocation* hit = nullptr;
  unsigned long long base = 0;
  auto it = Allocs().find(dptr);
  if (it != Allocs().end()) {
    hit = &it->second;
    base = it->first;
  } else {
    for (const auto& [start, a] : Allocs()) {
      if (dptr >= start && dptr - start < a.bytes) {
        hit = &a;
        base = start;
        break;
      }
    }
  }
  if (hit == nullptr || hit->kind == Kind::kArray || n > hit->bytes - (dptr - base)) return CUDA_ERROR_INVALID_VALUE;
  if (hit->backing != nullptr) std::memset(static_cast<char*>(hit->backing) + (dptr - base), value, n);
  g_last_memset = MemsetRecord{symbol, dptr, n, reinterpret_cast<uintptr_t>(stream)};
  return CUDA_SUCCESS;
}

CUresult cuMemsetD8_v2(CUdeviceptr dptr, unsigned char value, size_t n) {
  ENTER(cuMemsetD8_v2);
  return Memset("cuMemsetD8_v2", dptr, value, n, nullptr);
}

CUresult cuMemsetD8_v2_ptds(CUdeviceptr dptr, unsigned char value, size_t n) {
  ENTER(cuMemsetD8_v2_ptds);
  return Memset("cuMemsetD8_v2_ptds", dptr, value, n, nullptr);
}

CUresult cuMemsetD8Async(CUdeviceptr dptr, unsigned char value, size_t n, CUstream stream) {
  ENTER(cuMemsetD8Async);
  return Memset("cuMemsetD8Async", dptr, value, n, stream);
}

CUresult cuMemsetD8Async_ptsz(CUdeviceptr dptr, unsigned char value, size_t n, CUstream stream) {
  ENTER(cuMemsetD8Async_ptsz);
  return Memset("cuMemsetD8Async_ptsz", dptr, value, n, stream);
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream) {
  ENTER(cuMemAllocAsync);
  return AllocDevice(dptr, bytesize, Kind::kDevice);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream) {
  ENTER(cuMemAllocAsync_ptsz);
  return AllocDevice(dptr, bytesize, Kind::kDevice);
}

static CUresult AllocFromPool(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool) {
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const auto* p = reinterpret_cast<const FakePool*>(pool);
  bool host = p->location.type != CU_MEM_LOCATION_TYPE_DEVICE;
  return AllocDevice(dptr, bytesize, host ? Kind::kHost : Kind::kDevice, host ? -1 : p->location.id);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream) {
  ENTER(cuMemAllocFromPoolAsync);
  return AllocFromPool(dptr, bytesize, pool);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream) {
  ENTER(cuMemAllocFromPoolAsync_ptsz);
  return AllocFromPool(dptr, bytesize, pool);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream) {
  ENTER(cuMemFreeAsync);
  return FreeDevice(dptr);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream) {
  ENTER(cuMemFreeAsync_ptsz);
  return FreeDevice(dptr);
}

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* props) {
  ENTER(cuMemPoolCreate);
  REQUIRE_INIT();
  if (pool == nullptr || props == nullptr || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (props->location.type == CU_MEM_LOCATION_TYPE_DEVICE && !ValidDevice(props->location.id)) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *pool = reinterpret_cast<CUmemoryPool>(new FakePool{props->location});
  return CUDA_SUCCESS;
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  ENTER(cuMemPoolDestroy);
  REQUIRE_INIT();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (const FakePool& d : g_default_pools) {
    if (reinterpret_cast<const FakePool*>(pool) == &d) return CUDA_ERROR_INVALID_VALUE;  // a device's own
  }
  delete reinterpret_cast<FakePool*>(pool);
  return CUDA_SUCCESS;
}

// Each device's default pool (the fake has no cuDeviceSetMemPool: the current pool is the default).
static CUresult DevicePool(CUmemoryPool* pool, CUdevice dev) {
  REQUIRE_INIT();
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!ValidDevice(dev)) return CUDA_ERROR_INVALID_DEVICE;
  g_default_pools[dev].location = CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, dev};
  *pool = reinterpret_cast<CUmemoryPool>(&g_default_pools[dev]);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  ENTER(cuDeviceGetDefaultMemPool);
  return DevicePool(pool, dev);
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  ENTER(cuDeviceGetMemPool);
  return DevicePool(pool, dev);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
  ENTER(cuMemCreate);
  REQUIRE_INIT();
  if (handle == nullptr || prop == nullptr || flags != 0 || size == 0 || size % kVmmGranularity != 0 ||
      prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  bool device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  if (device && !ValidDevice(prop->location.id)) return CUDA_ERROR_INVALID_DEVICE;
  if (!device && prop->location.type != CU_MEM_LOCATION_TYPE_HOST &&
      prop->location.type != CU_MEM_LOCATION_TYPE_HOST_NUMA) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (device) {
    if (CUresult rc = ChargeDevice(prop->location.id, size); rc != CUDA_SUCCESS) return rc;
  }
  std::lock_guard<std::mutex> lock(Mu());
  unsigned long long h = (0xABCULL << 48) | g_next_handle++;
  Vmm()[h] = Allocation{size, device ? prop->location.id : -1,
                        device ? Kind::kVmmDevice : Kind::kVmmHost, 1, nullptr};
  *handle = h;
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  ENTER(cuMemRelease);
  REQUIRE_INIT();
  Allocation a;
  {
    std::lock_guard<std::mutex> lock(Mu());
    auto it = Vmm().find(handle);
    if (it == Vmm().end()) return CUDA_ERROR_INVALID_VALUE;
    if (--it->second.refs > 0) return CUDA_SUCCESS;
    a = it->second;
    Vmm().erase(it);
  }
  if (a.kind == Kind::kVmmDevice) UnchargeDevice(a.device, a.bytes);
  return CUDA_SUCCESS;
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  ENTER(cuMemRetainAllocationHandle);
  REQUIRE_INIT();
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(Mu());
  auto it = Vmm().find(reinterpret_cast<uintptr_t>(addr));
  if (it == Vmm().end()) return CUDA_ERROR_INVALID_VALUE;
  ++it->second.refs;
  *handle = it->first;
  return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags) {
  ENTER(cuMemGetAllocationGranularity);
  REQUIRE_INIT();
  if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *granularity = kVmmGranularity;
  return CUDA_SUCCESS;
}

CUresult cuArrayCreate(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR_v1* d) {
  ENTER(cuArrayCreate);
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(reinterpret_cast<void**>(handle), d->Width, d->Height, 0, d->Format, d->NumChannels, 1);
}

CUresult cuArrayCreate_v2(CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* d) {
  ENTER(cuArrayCreate_v2);
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(reinterpret_cast<void**>(handle), d->Width, d->Height, 0, d->Format, d->NumChannels, 1);
}

CUresult cuArray3DCreate(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR_v1* d) {
  ENTER(cuArray3DCreate);
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(reinterpret_cast<void**>(handle), d->Width, d->Height, d->Depth, d->Format,
                     d->NumChannels, 1);
}

CUresult cuArray3DCreate_v2(CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* d) {
  ENTER(cuArray3DCreate_v2);
  if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(reinterpret_cast<void**>(handle), d->Width, d->Height, d->Depth, d->Format,
                     d->NumChannels, 1);
}

CUresult cuArrayDestroy(CUarray handle) {
  ENTER(cuArrayDestroy);
  return DestroyArray(handle);
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* d,
                                unsigned int levels) {
  ENTER(cuMipmappedArrayCreate);
  if (d == nullptr || levels == 0) return CUDA_ERROR_INVALID_VALUE;
  return CreateArray(reinterpret_cast<void**>(handle), d->Width, d->Height, d->Depth, d->Format,
                     d->NumChannels, levels);
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray handle) {
  ENTER(cuMipmappedArrayDestroy);
  return DestroyArray(handle);
}

CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int) {
  ENTER(cuMemHostRegister_v2);
  REQUIRE_INIT();
  return p == nullptr || bytesize == 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemHostUnregister(void* p) {
  ENTER(cuMemHostUnregister);
  REQUIRE_INIT();
  return p == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  ENTER(cuMemAllocHost_v2);
  REQUIRE_INIT();
  if (pp == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  *pp = std::malloc(bytesize);
  return *pp == nullptr ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void* p) {
  ENTER(cuMemFreeHost);
  REQUIRE_INIT();
  std::free(p);
  return CUDA_SUCCESS;
}

// Launches do no work; with a simulated kernel duration they occupy the device (SimLaunch).
#define FAKE_LAUNCH(symbol, params, stream, per_thread, kernels) \
  CUresult symbol params {                                         \
    ENTER(symbol);                                                 \
    REQUIRE_INIT();                                                \
    SimLaunch(stream, per_thread, kernels);                        \
    return CUDA_SUCCESS;                                           \
  }
FAKE_LAUNCH(cuLaunchKernel, (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                             unsigned int, unsigned int, unsigned int, CUstream hStream, void**, void**),
            hStream, false, 1)
FAKE_LAUNCH(cuLaunchKernel_ptsz, (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int,
                                  unsigned int, unsigned int, unsigned int, CUstream hStream, void**, void**),
            hStream, true, 1)
FAKE_LAUNCH(cuLaunchKernelEx, (const CUlaunchConfig* config, CUfunction, void**, void**),
            config != nullptr ? config->hStream : nullptr, false, 1)
FAKE_LAUNCH(cuLaunchKernelEx_ptsz, (const CUlaunchConfig* config, CUfunction, void**, void**),
            config != nullptr ? config->hStream : nullptr, true, 1)
FAKE_LAUNCH(cuLaunchCooperativeKernel, (CUfunction, unsigned int, unsigned int, unsigned int,
                                        unsigned int, unsigned int, unsigned int, unsigned int,
                                        CUstream hStream, void**),
            hStream, false, 1)
FAKE_LAUNCH(cuLaunchCooperativeKernel_ptsz, (CUfunction, unsigned int, unsigned int, unsigned int,
                                             unsigned int, unsigned int, unsigned int, unsigned int,
                                             CUstream hStream, void**),
            hStream, true, 1)
FAKE_LAUNCH(cuLaunchCooperativeKernelMultiDevice, (CUDA_LAUNCH_PARAMS*, unsigned int, unsigned int), nullptr,
            false, 0)
FAKE_LAUNCH(cuLaunch, (CUfunction), nullptr, false, 1)
FAKE_LAUNCH(cuLaunchGrid, (CUfunction, int, int), nullptr, false, 1)
FAKE_LAUNCH(cuLaunchGridAsync, (CUfunction, int, int, CUstream hStream), hStream, false, 1)
#undef FAKE_LAUNCH

// --- graphs: kernel, empty and child-graph nodes; an exec knows its kernel count --------------------
// cuGraphAddChildGraphNode clones the child (as the driver does); cuGraphChildGraphNodeGetGraph
// returns the clone. cuGraphLaunch "runs" the exec's kernel nodes as the fake runs a kernel launch
// (it does nothing) and counts them (tessera_fake_cuda_graph_kernels_run). A NULL exec launches
// nothing and succeeds (the probe's older launch checks pass NULL); another unknown exec is
// CUDA_ERROR_INVALID_HANDLE.
namespace {
struct FakeGraph;
struct FakeNode {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  FakeGraph* child = nullptr;  // owned clone (CU_GRAPH_NODE_TYPE_GRAPH)
};
struct FakeGraph {
  std::vector<FakeNode*> nodes;
};
struct FakeExec {
  unsigned long long kernels = 0;
};
std::set<const void*>& GraphObjects() {  // live graphs (clones included), nodes and execs
  static auto* s = new std::set<const void*>;
  return *s;
}
std::atomic<unsigned long long> g_graph_kernels_run{0};

bool LiveLocked(const void* p) { return p != nullptr && GraphObjects().count(p) != 0; }

FakeGraph* CloneLocked(const FakeGraph* g) {
  auto* copy = new FakeGraph;
  GraphObjects().insert(copy);
  for (const FakeNode* n : g->nodes) {
    auto* c = new FakeNode{n->type, n->child != nullptr ? CloneLocked(n->child) : nullptr};
    GraphObjects().insert(c);
    copy->nodes.push_back(c);
  }
  return copy;
}

void DestroyLocked(FakeGraph* g) {
  for (FakeNode* n : g->nodes) {
    if (n->child != nullptr) DestroyLocked(n->child);
    GraphObjects().erase(n);
    delete n;
  }
  GraphObjects().erase(g);
  delete g;
}

unsigned long long KernelsLocked(const FakeGraph* g) {
  unsigned long long k = 0;
  for (const FakeNode* n : g->nodes) {
    if (n->type == CU_GRAPH_NODE_TYPE_KERNEL) ++k;
    if (n->child != nullptr) k += KernelsLocked(n->child);
  }
  return k;
}

CUresult AddNode(CUgraphNode* node, CUgraph graph, CUgraphNodeType type, CUgraph child) {
  REQUIRE_INIT();
  if (node == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(Mu());
  auto* g = reinterpret_cast<FakeGraph*>(graph);
  if (!LiveLocked(g) || (type == CU_GRAPH_NODE_TYPE_GRAPH && !LiveLocked(child))) return CUDA_ERROR_INVALID_VALUE;
  auto* n = new FakeNode{type, type == CU_GRAPH_NODE_TYPE_GRAPH
                                   ? CloneLocked(reinterpret_cast<const FakeGraph*>(child))
                                   : nullptr};
  GraphObjects().insert(n);
  g->nodes.push_back(n);
  *node = reinterpret_cast<CUgraphNode>(n);
  return CUDA_SUCCESS;
}

CUresult Instantiate(CUgraphExec* exec, CUgraph graph) {
  REQUIRE_INIT();
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(Mu());
  auto* g = reinterpret_cast<const FakeGraph*>(graph);
  if (!LiveLocked(g)) return CUDA_ERROR_INVALID_VALUE;
  auto* e = new FakeExec{KernelsLocked(g)};
  GraphObjects().insert(e);
  *exec = reinterpret_cast<CUgraphExec>(e);
  return CUDA_SUCCESS;
}

CUresult GraphLaunch(CUgraphExec exec, CUstream stream, bool per_thread) {
  REQUIRE_INIT();
  if (exec == nullptr) return CUDA_SUCCESS;
  unsigned long long kernels = 0;
  {
    std::lock_guard<std::mutex> lock(Mu());
    if (!LiveLocked(exec)) return CUDA_ERROR_INVALID_HANDLE;
    kernels = reinterpret_cast<const FakeExec*>(exec)->kernels;
  }
  g_graph_kernels_run.fetch_add(kernels, std::memory_order_relaxed);
  SimLaunch(stream, per_thread, kernels);
  return CUDA_SUCCESS;
}
}  // namespace

CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  ENTER(cuGraphLaunch);
  return GraphLaunch(exec, stream, false);
}
CUresult cuGraphLaunch_ptsz(CUgraphExec exec, CUstream stream) {
  ENTER(cuGraphLaunch_ptsz);
  return GraphLaunch(exec, stream, true);
}

CUresult cuGraphCreate(CUgraph* graph, unsigned int flags) {
  ENTER(cuGraphCreate);
  REQUIRE_INIT();
  if (graph == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(Mu());
  auto* g = new FakeGraph;
  GraphObjects().insert(g);
  *graph = reinterpret_cast<CUgraph>(g);
  return CUDA_SUCCESS;
}
CUresult cuGraphAddKernelNode_v2(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t,
                                 const CUDA_KERNEL_NODE_PARAMS* params) {
  ENTER(cuGraphAddKernelNode_v2);
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return AddNode(node, graph, CU_GRAPH_NODE_TYPE_KERNEL, nullptr);
}
CUresult cuGraphAddChildGraphNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t, CUgraph child) {
  ENTER(cuGraphAddChildGraphNode);
  return AddNode(node, graph, CU_GRAPH_NODE_TYPE_GRAPH, child);
}
CUresult cuGraphAddEmptyNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*, size_t) {
  ENTER(cuGraphAddEmptyNode);
  return AddNode(node, graph, CU_GRAPH_NODE_TYPE_EMPTY, nullptr);
}
CUresult cuGraphGetNodes(CUgraph graph, CUgraphNode* nodes, size_t* num_nodes) {
  ENTER(cuGraphGetNodes);
  REQUIRE_INIT();
  if (num_nodes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(Mu());
  auto* g = reinterpret_cast<const FakeGraph*>(graph);
  if (!LiveLocked(g)) return CUDA_ERROR_INVALID_VALUE;
  if (nodes == nullptr) {
    *num_nodes = g->nodes.size();
    return CUDA_SUCCESS;
  }
  const size_t n = std::min(*num_nodes, g->nodes.size());
  for (size_t i = 0; i < *num_nodes; ++i) {
    nodes[i] = i < n ? reinterpret_cast<CUgraphNode>(g->nodes[i]) : nullptr;
  }
  *num_nodes = n;
  return CUDA_SUCCESS;
}
CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType* type) {
  ENTER(cuGraphNodeGetType);
  REQUIRE_INIT();
  if (type == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(Mu());
  if (!LiveLocked(node)) return CUDA_ERROR_INVALID_VALUE;
  *type = reinterpret_cast<const FakeNode*>(node)->type;
  return CUDA_SUCCESS;
}
CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode node, CUgraph* graph) {
  ENTER(cuGraphChildGraphNodeGetGraph);
  REQUIRE_INIT();
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(Mu());
  if (!LiveLocked(node) || reinterpret_cast<const FakeNode*>(node)->child == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *graph = reinterpret_cast<CUgraph>(reinterpret_cast<const FakeNode*>(node)->child);
  return CUDA_SUCCESS;
}
CUresult cuGraphInstantiate(CUgraphExec* exec, CUgraph graph, CUgraphNode*, char*, size_t) {
  ENTER(cuGraphInstantiate);
  return Instantiate(exec, graph);
}
CUresult cuGraphInstantiate_v2(CUgraphExec* exec, CUgraph graph, CUgraphNode*, char*, size_t) {
  ENTER(cuGraphInstantiate_v2);
  return Instantiate(exec, graph);
}
CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph, unsigned long long) {
  ENTER(cuGraphInstantiateWithFlags);
  return Instantiate(exec, graph);
}
static CUresult InstantiateWithParams(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  if (params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  params->hErrNode_out = nullptr;
  const CUresult rc = Instantiate(exec, graph);
  params->result_out = rc == CUDA_SUCCESS ? 0 : 1;  // CUDA_GRAPH_INSTANTIATE_SUCCESS / _ERROR
  return rc;
}
CUresult cuGraphInstantiateWithParams(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  ENTER(cuGraphInstantiateWithParams);
  return InstantiateWithParams(exec, graph, params);
}
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
  ENTER(cuGraphInstantiateWithParams_ptsz);
  return InstantiateWithParams(exec, graph, params);
}
CUresult cuGraphExecDestroy(CUgraphExec exec) {
  ENTER(cuGraphExecDestroy);
  REQUIRE_INIT();
  std::lock_guard<std::mutex> lock(Mu());
  if (!LiveLocked(exec)) return CUDA_ERROR_INVALID_VALUE;
  GraphObjects().erase(exec);
  delete reinterpret_cast<FakeExec*>(exec);
  return CUDA_SUCCESS;
}
CUresult cuGraphDestroy(CUgraph graph) {
  ENTER(cuGraphDestroy);
  REQUIRE_INIT();
  std::lock_guard<std::mutex> lock(Mu());
  if (!LiveLocked(graph)) return CUDA_ERROR_INVALID_VALUE;
  DestroyLocked(reinterpret_cast<FakeGraph*>(graph));
  return CUDA_SUCCESS;
}

unsigned long long tessera_fake_cuda_graph_kernels_run(void) {
  return g_graph_kernels_run.load(std::memory_order_relaxed);
}

static CUresult BeginCapture(CUstream stream) {
  REQUIRE_INIT();
  std::lock_guard<std::mutex> lock(Mu());
  if (!Capturing().insert(stream).second) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture(CUstream stream) {
  ENTER(cuStreamBeginCapture);
  return BeginCapture(stream);
}
CUresult cuStreamBeginCapture_ptsz(CUstream stream) {
  ENTER(cuStreamBeginCapture_ptsz);
  return BeginCapture(stream);
}
CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode) {
  ENTER(cuStreamBeginCapture_v2);
  return BeginCapture(stream);
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream stream, CUstreamCaptureMode) {
  ENTER(cuStreamBeginCapture_v2_ptsz);
  return BeginCapture(stream);
}
CUresult cuStreamBeginCaptureToGraph(CUstream stream, CUgraph, const CUgraphNode*,
                                     const CUgraphEdgeData*, size_t, CUstreamCaptureMode) {
  ENTER(cuStreamBeginCaptureToGraph);
  return BeginCapture(stream);
}
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream stream, CUgraph, const CUgraphNode*,
                                          const CUgraphEdgeData*, size_t, CUstreamCaptureMode) {
  ENTER(cuStreamBeginCaptureToGraph_ptsz);
  return BeginCapture(stream);
}

static CUresult EndCapture(CUstream stream, CUgraph* graph) {
  REQUIRE_INIT();
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(Mu());
  if (Capturing().erase(stream) == 0) return CUDA_ERROR_INVALID_VALUE;
  *graph = nullptr;
  return CUDA_SUCCESS;
}
CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  ENTER(cuStreamEndCapture);
  return EndCapture(stream, graph);
}
CUresult cuStreamEndCapture_ptsz(CUstream stream, CUgraph* graph) {
  ENTER(cuStreamEndCapture_ptsz);
  return EndCapture(stream, graph);
}

static CUresult IsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  REQUIRE_INIT();
  if (status == nullptr) return CUDA_ERROR_INVALID_VALUE;
  std::lock_guard<std::mutex> lock(Mu());
  *status = Capturing().count(stream) ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus* status) {
  ENTER(cuStreamIsCapturing);
  return IsCapturing(stream, status);
}
CUresult cuStreamIsCapturing_ptsz(CUstream stream, CUstreamCaptureStatus* status) {
  ENTER(cuStreamIsCapturing_ptsz);
  return IsCapturing(stream, status);
}

// --- events and synchronisation on the simulated clock (see "simulated device time") ---------------
// Every stream's work is on the one device queue: the event completes when the device has run
// everything submitted before it.
static CUresult EventRecord(CUevent event) {
  REQUIRE_INIT();
  SimState& sim = Sim();
  std::lock_guard<std::mutex> lock(sim.mu);
  auto it = sim.events.find(event);
  if (it == sim.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  it->second.recorded = true;
  it->second.at = TakeDevice(SimDevice(), SimNowNs(), 0);
  return CUDA_SUCCESS;
}

// The event's completion time, or an error for an unknown handle.
static CUresult EventAt(CUevent event, bool* recorded, unsigned long long* at) {
  SimState& sim = Sim();
  std::lock_guard<std::mutex> lock(sim.mu);
  auto it = sim.events.find(event);
  if (it == sim.events.end()) return CUDA_ERROR_INVALID_HANDLE;
  *recorded = it->second.recorded;
  *at = it->second.at;
  return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent* event, unsigned int) {
  ENTER(cuEventCreate);
  REQUIRE_INIT();
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (t_ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  auto* handle = new char;
  {
    std::lock_guard<std::mutex> lock(Sim().mu);
    Sim().events.emplace(handle, EventSim{});
  }
  *event = reinterpret_cast<CUevent>(handle);
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent event, CUstream) {
  ENTER(cuEventRecord);
  return EventRecord(event);
}
CUresult cuEventRecord_ptsz(CUevent event, CUstream) {
  ENTER(cuEventRecord_ptsz);
  return EventRecord(event);
}

CUresult cuEventQuery(CUevent event) {
  ENTER(cuEventQuery);
  REQUIRE_INIT();
  bool recorded = false;
  unsigned long long at = 0;
  if (CUresult rc = EventAt(event, &recorded, &at); rc != CUDA_SUCCESS) return rc;
  return !recorded || at <= SimNowNs() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(CUevent event) {
  ENTER(cuEventSynchronize);
  REQUIRE_INIT();
  bool recorded = false;
  unsigned long long at = 0;
  if (CUresult rc = EventAt(event, &recorded, &at); rc != CUDA_SUCCESS) return rc;
  if (recorded) SleepUntil(at);
  return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  ENTER(cuEventElapsedTime);
  REQUIRE_INIT();
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  bool rec_a = false, rec_b = false;
  unsigned long long a = 0, b = 0;
  if (CUresult rc = EventAt(start, &rec_a, &a); rc != CUDA_SUCCESS) return rc;
  if (CUresult rc = EventAt(end, &rec_b, &b); rc != CUDA_SUCCESS) return rc;
  if (!rec_a || !rec_b) return CUDA_ERROR_INVALID_HANDLE;
  if (std::max(a, b) > SimNowNs()) return CUDA_ERROR_NOT_READY;
  *ms = static_cast<float>(static_cast<double>(static_cast<long long>(b - a)) / 1e6);
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(CUevent event) {
  ENTER(cuEventDestroy_v2);
  REQUIRE_INIT();
  {
    std::lock_guard<std::mutex> lock(Sim().mu);
    if (Sim().events.erase(event) == 0) return CUDA_ERROR_INVALID_HANDLE;
  }
  delete reinterpret_cast<char*>(event);
  return CUDA_SUCCESS;
}

static CUresult StreamSynchronize(CUstream stream, bool per_thread) {
  REQUIRE_INIT();
  unsigned long long until = 0;
  {
    std::lock_guard<std::mutex> lock(Sim().mu);
    auto it = Sim().streams.find(StreamKey(stream, per_thread));
    if (it != Sim().streams.end()) until = it->second.last_end;
  }
  SleepUntil(until);
  return CUDA_SUCCESS;
}
CUresult cuStreamSynchronize(CUstream stream) {
  ENTER(cuStreamSynchronize);
  return StreamSynchronize(stream, false);
}
CUresult cuStreamSynchronize_ptsz(CUstream stream) {
  ENTER(cuStreamSynchronize_ptsz);
  return StreamSynchronize(stream, true);
}

CUresult cuCtxSynchronize(void) {
  ENTER(cuCtxSynchronize);
  REQUIRE_INIT();
  unsigned long long until = 0;
  {
    std::lock_guard<std::mutex> lock(Sim().mu);
    until = Sim().last_end;
  }
  SleepUntil(until);
  return CUDA_SUCCESS;
}

void tessera_fake_cuda_set_kernel_ns(unsigned long long ns) { g_kernel_ns.store(ns, std::memory_order_relaxed); }

unsigned long long tessera_fake_cuda_busy_ns(unsigned long long from_ns, unsigned long long to_ns) {
  std::lock_guard<std::mutex> lock(Sim().mu);
  unsigned long long total = 0;
  for (const auto& [a, b] : Sim().busy) {
    const unsigned long long lo = std::max(a, from_ns), hi = std::min(b, to_ns);
    if (hi > lo) total += hi - lo;
  }
  return total;
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags) {
  ENTER(cuGetProcAddress);
  return Resolve(symbol, pfn, cuda_version, flags, nullptr);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult* status) {
  ENTER(cuGetProcAddress_v2);
  return Resolve(symbol, pfn, cuda_version, flags, status);
}

}  // extern "C"

namespace {

// Every definition above has exactly its entry point's type.
#define FAKE_CHECK(symbol, base, version, per_thread, pfn) \
  static_assert(std::is_same_v<decltype(&::symbol), pfn>, #symbol " has the wrong type");
FAKE_ENTRIES(FAKE_CHECK)
#undef FAKE_CHECK

const EntryInfo kEntries[kIdCount] = {
#define FAKE_INFO(symbol, base, version, per_thread, pfn) \
  {#symbol, #base, version, per_thread, reinterpret_cast<void*>(&::symbol)},
    FAKE_ENTRIES(FAKE_INFO)
#undef FAKE_INFO
};

CUresult Resolve(const char* symbol, void** pfn, int cuda_version, cuuint64_t flags,
                 CUdriverProcAddressQueryResult* status) {
  if (symbol == nullptr || pfn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const cuuint64_t stream_flags =
      CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  if ((flags & ~stream_flags) != 0 || flags == stream_flags) return CUDA_ERROR_INVALID_VALUE;
  const bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  const EntryInfo* best_legacy = nullptr;
  const EntryInfo* best_per_thread = nullptr;
  bool known = false;
  for (const EntryInfo& e : kEntries) {
    if (std::strcmp(e.base, symbol) != 0 || e.version > g_config.driver_version) continue;
    known = true;
    if (e.version > cuda_version) continue;
    const EntryInfo*& best = e.per_thread ? best_per_thread : best_legacy;
    if (best == nullptr || e.version > best->version) best = &e;
  }
  const EntryInfo* chosen = per_thread && best_per_thread != nullptr ? best_per_thread : best_legacy;
  if (chosen == nullptr) {
    *pfn = nullptr;
    if (status != nullptr) {
      *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    }
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = chosen->fn;
  if (status != nullptr) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace
