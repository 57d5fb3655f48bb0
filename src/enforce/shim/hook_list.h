// The one declarative list of every CUDA driver entry point libtessera-shim.so intercepts.
//
// Each row is one *exported driver symbol* (one ABI version and stream flavour of a base name):
//
//   X(symbol, base, version, flavour, family, handler, (params), (args))
//
//   symbol    the exported name, e.g. cuMemAllocAsync_ptsz; the shim exports a wrapper with exactly
//             this name and type, and forwards to exactly this variant of the real driver.
//   base      the name callers pass to cuGetProcAddress (cuMemAllocAsync).
//   version   the CUDA version whose ABI this is (cudaTypedefs.h's PFN_<base>_v<version>).
//   flavour   kLegacy or kPerThread (_ptsz/_ptds: what CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
//             returns).
//   family    what the shim does with it (HookFamily below).
//   handler   the function in src/enforce/shim/ that implements it for this ABI.
//
// Everything else is generated from this list by macro expansion: the HookId enum, the table of
// names used to fill the real pointers (dlsym on libcuda, one per row), the exported wrappers, and
// the real-pointer -> wrapper map that cuGetProcAddress, dlsym and dlvsym substitution uses.
// tests/shim/hook_table_test.cc checks the list against an independent list of every allocation and
// launch entry point of the CUDA 12/13 driver API (and, when the toolkit is installed, against
// cuda.h itself), so a new variant cannot be forgotten silently.
//
// Example: a CUDA 12.x runtime built with per-thread default streams asks
// cuGetProcAddress("cuLaunchKernel", &p, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM).
// The real resolver returns the driver's cuLaunchKernel_ptsz; that address is in the table (row
// cuLaunchKernel_ptsz), so the caller receives the shim's cuLaunchKernel_ptsz wrapper, which
// forwards to the real cuLaunchKernel_ptsz.
#pragma once

// clang-format off
#define TESSERA_SHIM_HOOKS(X) \
  /* --- device memory: plain, pitch, managed ---------------------------------------------- */ \
  X(cuMemAlloc, cuMemAlloc, 2000, kLegacy, kAlloc, HandleMemAlloc, \
    (CUdeviceptr_v1* dptr, unsigned int bytesize), (dptr, bytesize)) \
  X(cuMemAlloc_v2, cuMemAlloc, 3020, kLegacy, kAlloc, HandleMemAlloc, \
    (CUdeviceptr* dptr, size_t bytesize), (dptr, bytesize)) \
  X(cuMemAllocPitch, cuMemAllocPitch, 2000, kLegacy, kAlloc, HandleMemAllocPitch, \
    (CUdeviceptr_v1* dptr, unsigned int* pPitch, unsigned int width, unsigned int height, \
     unsigned int elem), (dptr, pPitch, width, height, elem)) \
  X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, kLegacy, kAlloc, HandleMemAllocPitch, \
    (CUdeviceptr* dptr, size_t* pPitch, size_t width, size_t height, unsigned int elem), \
    (dptr, pPitch, width, height, elem)) \
  X(cuMemAllocManaged, cuMemAllocManaged, 6000, kLegacy, kAlloc, HandleMemAllocManaged, \
    (CUdeviceptr* dptr, size_t bytesize, unsigned int flags), (dptr, bytesize, flags)) \
  X(cuMemFree, cuMemFree, 2000, kLegacy, kFree, HandleMemFree, (CUdeviceptr_v1 dptr), (dptr)) \
  X(cuMemFree_v2, cuMemFree, 3020, kLegacy, kFree, HandleMemFree, (CUdeviceptr dptr), (dptr)) \
  /* --- stream-ordered allocator ----------------------------------------------------------- */ \
  X(cuMemAllocAsync, cuMemAllocAsync, 11020, kLegacy, kAlloc, HandleMemAllocAsync, \
    (CUdeviceptr* dptr, size_t bytesize, CUstream stream), (dptr, bytesize, stream)) \
  X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, kPerThread, kAlloc, HandleMemAllocAsync, \
    (CUdeviceptr* dptr, size_t bytesize, CUstream stream), (dptr, bytesize, stream)) \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, kLegacy, kAlloc, \
    HandleMemAllocFromPoolAsync, (CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, \
    CUstream stream), (dptr, bytesize, pool, stream)) \
  X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, kPerThread, kAlloc, \
    HandleMemAllocFromPoolAsync, (CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, \
    CUstream stream), (dptr, bytesize, pool, stream)) \
  X(cuMemFreeAsync, cuMemFreeAsync, 11020, kLegacy, kFree, HandleMemFreeAsync, \
    (CUdeviceptr dptr, CUstream stream), (dptr, stream)) \
  X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, kPerThread, kFree, HandleMemFreeAsync, \
    (CUdeviceptr dptr, CUstream stream), (dptr, stream)) \
  X(cuMemPoolCreate, cuMemPoolCreate, 11020, kLegacy, kPool, HandleMemPoolCreate, \
    (CUmemoryPool* pool, const CUmemPoolProps* props), (pool, props)) \
  X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, kLegacy, kPool, HandleMemPoolDestroy, \
    (CUmemoryPool pool), (pool)) \
  X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, kLegacy, kPool, \
    HandleDeviceGetMemPool, (CUmemoryPool* pool, CUdevice dev), (pool, dev)) \
  X(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, kLegacy, kPool, HandleDeviceGetMemPool, \
    (CUmemoryPool* pool, CUdevice dev), (pool, dev)) \
  /* --- virtual memory management ---------------------------------------------------------- */ \
  X(cuMemCreate, cuMemCreate, 10020, kLegacy, kAlloc, HandleMemCreate, \
    (CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop, \
     unsigned long long flags), (handle, size, prop, flags)) \
  X(cuMemRelease, cuMemRelease, 10020, kLegacy, kFree, HandleMemRelease, \
    (CUmemGenericAllocationHandle handle), (handle)) \
  X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, kLegacy, kAlloc, \
    HandleMemRetainAllocationHandle, (CUmemGenericAllocationHandle* handle, void* addr), \
    (handle, addr)) \
  /* --- arrays ------------------------------------------------------------------------------ */ \
  X(cuArrayCreate, cuArrayCreate, 2000, kLegacy, kAlloc, HandleArrayCreate, \
    (CUarray* handle, const CUDA_ARRAY_DESCRIPTOR_v1* desc), (handle, desc)) \
  X(cuArrayCreate_v2, cuArrayCreate, 3020, kLegacy, kAlloc, HandleArrayCreate, \
    (CUarray* handle, const CUDA_ARRAY_DESCRIPTOR* desc), (handle, desc)) \
  X(cuArray3DCreate, cuArray3DCreate, 2000, kLegacy, kAlloc, HandleArray3DCreate, \
    (CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR_v1* desc), (handle, desc)) \
  X(cuArray3DCreate_v2, cuArray3DCreate, 3020, kLegacy, kAlloc, HandleArray3DCreate, \
    (CUarray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc), (handle, desc)) \
  X(cuArrayDestroy, cuArrayDestroy, 2000, kLegacy, kFree, HandleArrayDestroy, \
    (CUarray handle), (handle)) \
  X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, kLegacy, kAlloc, \
    HandleMipmappedArrayCreate, (CUmipmappedArray* handle, const CUDA_ARRAY3D_DESCRIPTOR* desc, \
    unsigned int levels), (handle, desc, levels)) \
  X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, kLegacy, kFree, \
    HandleMipmappedArrayDestroy, (CUmipmappedArray handle), (handle)) \
  /* --- queries that show the tenant's view ------------------------------------------------- */ \
  X(cuMemGetInfo, cuMemGetInfo, 2000, kLegacy, kQuery, HandleMemGetInfo, \
    (unsigned int* free_bytes, unsigned int* total_bytes), (free_bytes, total_bytes)) \
  X(cuMemGetInfo_v2, cuMemGetInfo, 3020, kLegacy, kQuery, HandleMemGetInfo, \
    (size_t* free_bytes, size_t* total_bytes), (free_bytes, total_bytes)) \
  X(cuDeviceTotalMem, cuDeviceTotalMem, 2000, kLegacy, kQuery, HandleDeviceTotalMem, \
    (unsigned int* bytes, CUdevice dev), (bytes, dev)) \
  X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, kLegacy, kQuery, HandleDeviceTotalMem, \
    (size_t* bytes, CUdevice dev), (bytes, dev)) \
  /* --- kernel launches ---------------------------------------------------------------------- */ \
  X(cuLaunchKernel, cuLaunchKernel, 4000, kLegacy, kLaunch, HandleLaunch<CountedLaunch::kKernel>, \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void** params, \
     void** extra), (f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra)) \
  X(cuLaunchKernel_ptsz, cuLaunchKernel, 7000, kPerThread, kLaunch, \
    HandleLaunch<CountedLaunch::kKernel>, \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void** params, \
     void** extra), (f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra)) \
  X(cuLaunchKernelEx, cuLaunchKernelEx, 11060, kLegacy, kLaunch, HandleLaunch<CountedLaunch::kKernel>, \
    (const CUlaunchConfig* config, CUfunction f, void** params, void** extra), \
    (config, f, params, extra)) \
  X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060, kPerThread, kLaunch, \
    HandleLaunch<CountedLaunch::kKernel>, \
    (const CUlaunchConfig* config, CUfunction f, void** params, void** extra), \
    (config, f, params, extra)) \
  X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, kLegacy, kLaunch, \
    HandleLaunch<CountedLaunch::kCooperative>, \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void** params), \
    (f, gx, gy, gz, bx, by, bz, shmem, stream, params)) \
  X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 9000, kPerThread, kLaunch, \
    HandleLaunch<CountedLaunch::kCooperative>, \
    (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, \
     unsigned int by, unsigned int bz, unsigned int shmem, CUstream stream, void** params), \
    (f, gx, gy, gz, bx, by, bz, shmem, stream, params)) \
  X(cuLaunchCooperativeKernelMultiDevice, cuLaunchCooperativeKernelMultiDevice, 9000, kLegacy, \
    kLaunch, HandleLaunch<CountedLaunch::kCooperative>, \
    (CUDA_LAUNCH_PARAMS* list, unsigned int num_devices, unsigned int flags), \
    (list, num_devices, flags)) \
  X(cuLaunch, cuLaunch, 2000, kLegacy, kLaunch, HandleLaunch<CountedLaunch::kKernel>, \
    (CUfunction f), (f)) \
  X(cuLaunchGrid, cuLaunchGrid, 2000, kLegacy, kLaunch, HandleLaunch<CountedLaunch::kKernel>, \
    (CUfunction f, int gw, int gh), (f, gw, gh)) \
  X(cuLaunchGridAsync, cuLaunchGridAsync, 2000, kLegacy, kLaunch, \
    HandleLaunch<CountedLaunch::kKernel>, (CUfunction f, int gw, int gh, CUstream stream), \
    (f, gw, gh, stream)) \
  /* --- graphs and stream capture (charged/counted, never blocked while capturing) ------------ */ \
  X(cuGraphLaunch, cuGraphLaunch, 10000, kLegacy, kLaunch, HandleGraphLaunch, \
    (CUgraphExec exec, CUstream stream), (exec, stream)) \
  X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, kPerThread, kLaunch, HandleGraphLaunch, \
    (CUgraphExec exec, CUstream stream), (exec, stream)) \
  /* --- graph instantiation: learns how many kernel nodes each executable graph launches ----- */ \
  X(cuGraphInstantiate, cuGraphInstantiate, 10000, kLegacy, kGraphExec, HandleGraphInstantiate, \
    (CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log, size_t log_size), \
    (exec, graph, error_node, log, log_size)) \
  X(cuGraphInstantiate_v2, cuGraphInstantiate, 11000, kLegacy, kGraphExec, HandleGraphInstantiate, \
    (CUgraphExec* exec, CUgraph graph, CUgraphNode* error_node, char* log, size_t log_size), \
    (exec, graph, error_node, log, log_size)) \
  X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, kLegacy, kGraphExec, \
    HandleGraphInstantiate, (CUgraphExec* exec, CUgraph graph, unsigned long long flags), \
    (exec, graph, flags)) \
  X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, kLegacy, kGraphExec, \
    HandleGraphInstantiate, (CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params), \
    (exec, graph, params)) \
  X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 12000, kPerThread, kGraphExec, \
    HandleGraphInstantiate, (CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS* params), \
    (exec, graph, params)) \
  X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, kLegacy, kGraphExec, HandleGraphExecDestroy, \
    (CUgraphExec exec), (exec)) \
  X(cuStreamBeginCapture, cuStreamBeginCapture, 10000, kLegacy, kCapture, \
    HandleLaunch<CountedLaunch::kCaptureBegin>, (CUstream stream), (stream)) \
  X(cuStreamBeginCapture_ptsz, cuStreamBeginCapture, 10000, kPerThread, kCapture, \
    HandleLaunch<CountedLaunch::kCaptureBegin>, (CUstream stream), (stream)) \
  X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010, kLegacy, kCapture, \
    HandleLaunch<CountedLaunch::kCaptureBegin>, (CUstream stream, CUstreamCaptureMode mode), \
    (stream, mode)) \
  X(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture, 10010, kPerThread, kCapture, \
    HandleLaunch<CountedLaunch::kCaptureBegin>, (CUstream stream, CUstreamCaptureMode mode), \
    (stream, mode)) \
  X(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph, 12030, kLegacy, kCapture, \
    HandleLaunch<CountedLaunch::kCaptureBegin>, (CUstream stream, CUgraph graph, \
    const CUgraphNode* deps, const CUgraphEdgeData* edges, size_t num_deps, \
    CUstreamCaptureMode mode), (stream, graph, deps, edges, num_deps, mode)) \
  X(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph, 12030, kPerThread, kCapture, \
    HandleLaunch<CountedLaunch::kCaptureBegin>, (CUstream stream, CUgraph graph, \
    const CUgraphNode* deps, const CUgraphEdgeData* edges, size_t num_deps, \
    CUstreamCaptureMode mode), (stream, graph, deps, edges, num_deps, mode)) \
  /* --- the current context: the device a multi-GPU process's launches are gated on ------------ */ \
  X(cuCtxCreate, cuCtxCreate, 2000, kLegacy, kContext, HandleCtxCreate, \
    (CUcontext* pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev)) \
  X(cuCtxCreate_v2, cuCtxCreate, 3020, kLegacy, kContext, HandleCtxCreate, \
    (CUcontext* pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev)) \
  X(cuCtxCreate_v3, cuCtxCreate, 11040, kLegacy, kContext, HandleCtxCreate, \
    (CUcontext* pctx, CUexecAffinityParam* params, int num_params, unsigned int flags, CUdevice dev), \
    (pctx, params, num_params, flags, dev)) \
  X(cuCtxCreate_v4, cuCtxCreate, 12050, kLegacy, kContext, HandleCtxCreate, \
    (CUcontext* pctx, CUctxCreateParams* params, unsigned int flags, CUdevice dev), (pctx, params, flags, dev)) \
  X(cuCtxDestroy, cuCtxDestroy, 2000, kLegacy, kContext, HandleCtxDestroy, (CUcontext ctx), (ctx)) \
  X(cuCtxDestroy_v2, cuCtxDestroy, 4000, kLegacy, kContext, HandleCtxDestroy, (CUcontext ctx), (ctx)) \
  X(cuCtxSetCurrent, cuCtxSetCurrent, 4000, kLegacy, kContext, HandleCtxSetCurrent, (CUcontext ctx), (ctx)) \
  X(cuCtxPushCurrent, cuCtxPushCurrent, 2000, kLegacy, kContext, HandleCtxPushCurrent, (CUcontext ctx), (ctx)) \
  X(cuCtxPushCurrent_v2, cuCtxPushCurrent, 4000, kLegacy, kContext, HandleCtxPushCurrent, (CUcontext ctx), \
    (ctx)) \
  X(cuCtxPopCurrent, cuCtxPopCurrent, 2000, kLegacy, kContext, HandleCtxPopCurrent, (CUcontext* pctx), (pctx)) \
  X(cuCtxPopCurrent_v2, cuCtxPopCurrent, 4000, kLegacy, kContext, HandleCtxPopCurrent, (CUcontext* pctx), \
    (pctx)) \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, kLegacy, kContext, HandlePrimaryCtxRetain, \
    (CUcontext* pctx, CUdevice dev), (pctx, dev)) \
  X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, kLegacy, kContext, HandlePrimaryCtxDrop, \
    (CUdevice dev), (dev)) \
  X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, kLegacy, kContext, HandlePrimaryCtxDrop, \
    (CUdevice dev), (dev)) \
  X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, kLegacy, kContext, HandlePrimaryCtxDrop, \
    (CUdevice dev), (dev)) \
  X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, kLegacy, kContext, HandlePrimaryCtxDrop, \
    (CUdevice dev), (dev)) \
  /* --- the resolvers (substitution by pointer identity) ------------------------------------ */ \
  X(cuGetProcAddress, cuGetProcAddress, 11030, kLegacy, kResolver, HandleGetProcAddress, \
    (const char* symbol, void** pfn, int cuda_version, cuuint64_t flags), \
    (symbol, pfn, cuda_version, flags)) \
  X(cuGetProcAddress_v2, cuGetProcAddress, 12000, kLegacy, kResolver, HandleGetProcAddress, \
    (const char* symbol, void** pfn, int cuda_version, cuuint64_t flags, \
     CUdriverProcAddressQueryResult* status), (symbol, pfn, cuda_version, flags, status))
// clang-format on

namespace tessera::enforce::shim {

enum class HookFlavour : unsigned char { kLegacy, kPerThread };
enum class HookFamily : unsigned char {
  kAlloc,     // reserves device memory before calling the driver
  kFree,      // releases what the matching allocation reserved
  kPool,      // stream-ordered pool bookkeeping (location of the pool's memory)
  kQuery,     // answers with the tenant's view of memory
  kLaunch,    // passes LaunchGate() before calling the driver
  kCapture,   // stream-capture begin: counted by LaunchGate(), never blocked
  kGraphExec, // graph instantiate/destroy: records the kernel nodes a graph launch is charged for
  kContext,   // changes the calling thread's current context: keeps context_cache.h up to date
  kResolver,  // cuGetProcAddress: substitutes wrappers by pointer identity
};

enum class HookId : unsigned short {
#define TESSERA_SHIM_HOOK_ID(symbol, base, version, flavour, family, handler, params, args) k_##symbol,
  TESSERA_SHIM_HOOKS(TESSERA_SHIM_HOOK_ID)
#undef TESSERA_SHIM_HOOK_ID
      kCount
};
inline constexpr int kHookCount = static_cast<int>(HookId::kCount);

struct HookInfo {
  const char* symbol;
  const char* base;
  int version;
  HookFlavour flavour;
  HookFamily family;
};

inline constexpr HookInfo kHooks[kHookCount] = {
#define TESSERA_SHIM_HOOK_INFO(symbol, base, version, flavour, family, handler, params, args) \
  {#symbol, #base, version, HookFlavour::flavour, HookFamily::family},
    TESSERA_SHIM_HOOKS(TESSERA_SHIM_HOOK_INFO)
#undef TESSERA_SHIM_HOOK_INFO
};

}  // namespace tessera::enforce::shim
