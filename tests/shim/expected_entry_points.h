// The allocation, launch and resolver entry points of the CUDA 12/13 driver API (and the graph
// instantiate/destroy entry points, which tell the shim what a graph launch runs, and every entry
// point that changes the calling thread's current context, whose device the shim caches), written down
// independently of the shim's hook list (from cuda.h and cudaTypedefs.h of CUDA 13.0: the PFN
// version of each ABI and its _ptsz twin). hook_table_test.cc checks that the shim hooks exactly
// these variants, and that every other allocation-like entry point of cuda.h is in kNotHooked
// with the reason.
//
// EXPECT_HOOK(symbol, base, version, per_thread)
#pragma once

// clang-format off
#define TESSERA_EXPECTED_HOOKS(X) \
  X(cuMemAlloc, cuMemAlloc, 2000, false) \
  X(cuMemAlloc_v2, cuMemAlloc, 3020, false) \
  X(cuMemAllocPitch, cuMemAllocPitch, 2000, false) \
  X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, false) \
  X(cuMemAllocManaged, cuMemAllocManaged, 6000, false) \
  X(cuMemFree, cuMemFree, 2000, false) \
  X(cuMemFree_v2, cuMemFree, 3020, false) \
  X(cuMemAllocAsync, cuMemAllocAsync, 11020, false) \
  X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, true) \
  X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, false) \
  X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, true) \
  X(cuMemFreeAsync, cuMemFreeAsync, 11020, false) \
  X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, true) \
  X(cuMemPoolCreate, cuMemPoolCreate, 11020, false) \
  X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, false) \
  X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, false) \
  X(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, false) \
  X(cuMemCreate, cuMemCreate, 10020, false) \
  X(cuMemRelease, cuMemRelease, 10020, false) \
  X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, false) \
  X(cuArrayCreate, cuArrayCreate, 2000, false) \
  X(cuArrayCreate_v2, cuArrayCreate, 3020, false) \
  X(cuArray3DCreate, cuArray3DCreate, 2000, false) \
  X(cuArray3DCreate_v2, cuArray3DCreate, 3020, false) \
  X(cuArrayDestroy, cuArrayDestroy, 2000, false) \
  X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, false) \
  X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, false) \
  X(cuMemGetInfo, cuMemGetInfo, 2000, false) \
  X(cuMemGetInfo_v2, cuMemGetInfo, 3020, false) \
  X(cuDeviceTotalMem, cuDeviceTotalMem, 2000, false) \
  X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, false) \
  X(cuLaunchKernel, cuLaunchKernel, 4000, false) \
  X(cuLaunchKernel_ptsz, cuLaunchKernel, 7000, true) \
  X(cuLaunchKernelEx, cuLaunchKernelEx, 11060, false) \
  X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060, true) \
  X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, false) \
  X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 9000, true) \
  X(cuLaunchCooperativeKernelMultiDevice, cuLaunchCooperativeKernelMultiDevice, 9000, false) \
  X(cuLaunch, cuLaunch, 2000, false) \
  X(cuLaunchGrid, cuLaunchGrid, 2000, false) \
  X(cuLaunchGridAsync, cuLaunchGridAsync, 2000, false) \
  X(cuGraphLaunch, cuGraphLaunch, 10000, false) \
  X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, true) \
  X(cuGraphInstantiate, cuGraphInstantiate, 10000, false) \
  X(cuGraphInstantiate_v2, cuGraphInstantiate, 11000, false) \
  X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, false) \
  X(cuGraphInstantiateWithParams, cuGraphInstantiateWithParams, 12000, false) \
  X(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams, 12000, true) \
  X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, false) \
  X(cuStreamBeginCapture, cuStreamBeginCapture, 10000, false) \
  X(cuStreamBeginCapture_ptsz, cuStreamBeginCapture, 10000, true) \
  X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010, false) \
  X(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture, 10010, true) \
  X(cuStreamBeginCaptureToGraph, cuStreamBeginCaptureToGraph, 12030, false) \
  X(cuStreamBeginCaptureToGraph_ptsz, cuStreamBeginCaptureToGraph, 12030, true) \
  X(cuCtxCreate, cuCtxCreate, 2000, false) \
  X(cuCtxCreate_v2, cuCtxCreate, 3020, false) \
  X(cuCtxCreate_v3, cuCtxCreate, 11040, false) \
  X(cuCtxCreate_v4, cuCtxCreate, 12050, false) \
  X(cuCtxDestroy, cuCtxDestroy, 2000, false) \
  X(cuCtxDestroy_v2, cuCtxDestroy, 4000, false) \
  X(cuCtxSetCurrent, cuCtxSetCurrent, 4000, false) \
  X(cuCtxPushCurrent, cuCtxPushCurrent, 2000, false) \
  X(cuCtxPushCurrent_v2, cuCtxPushCurrent, 4000, false) \
  X(cuCtxPopCurrent, cuCtxPopCurrent, 2000, false) \
  X(cuCtxPopCurrent_v2, cuCtxPopCurrent, 4000, false) \
  X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, false) \
  X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, false) \
  X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, false) \
  X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, false) \
  X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, false) \
  X(cuGetProcAddress, cuGetProcAddress, 11030, false) \
  X(cuGetProcAddress_v2, cuGetProcAddress, 12000, false)
// clang-format on

namespace tessera::enforce::testing {

struct ExpectedHook {
  const char* symbol;
  const char* base;
  int version;
  bool per_thread;
};

inline constexpr ExpectedHook kExpectedHooks[] = {
#define TESSERA_EXPECTED_ROW(symbol, base, version, per_thread) {#symbol, #base, version, per_thread},
    TESSERA_EXPECTED_HOOKS(TESSERA_EXPECTED_ROW)
#undef TESSERA_EXPECTED_ROW
};

// Allocation-like entry points the shim deliberately does not hook, and why (docs/enforcement.md).
struct NotHooked {
  const char* base;
  const char* reason;
};
inline constexpr NotHooked kNotHooked[] = {
    {"cuMemAllocHost", "host memory: never charged"},
    {"cuMemHostAlloc", "host memory: never charged"},
    {"cuMemHostRegister", "host-registered memory: never charged"},
    {"cuMemFreeHost", "host memory: never charged"},
    {"cuLaunchHostFunc", "a host callback, not device work"},
    {"cuGraphAddMemAllocNode", "graph-owned memory: allocated at graph launch; not charged yet (gap)"},
    {"cuGraphAddMemFreeNode", "graph-owned memory: see cuGraphAddMemAllocNode"},
    {"cuMulticastCreate", "multicast objects: not charged yet (gap)"},
    {"cuIpcOpenMemHandle", "an import: charged to the exporting tenant"},
    {"cuMemImportFromShareableHandle", "an import: charged to the exporting tenant"},
    {"cuDeviceSetMemPool", "selects a pool; its allocations are charged at cuMemAllocAsync"},
    {"cuMemSetMemPool", "selects a pool; its allocations are charged at cuMemAllocAsync"},
};

}  // namespace tessera::enforce::testing
