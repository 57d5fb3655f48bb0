// include/tessera/enforce/cuda_abi.h against the toolkit's cuda.h/cudaTypedefs.h (CUDA 13 on the
// development and CI machines): every struct's size and field offsets, every constant, and every
// entry-point type parameter by parameter. Checked at compile time; without the toolkit only the
// self-contained checks below run.
#include "tessera/enforce/cuda_abi.h"

#include <cstddef>
#include <type_traits>

#include "gtest/gtest.h"

#ifdef TESSERA_HAVE_CUDA_H
// Also declare the pre-3.2/pre-10.1 ABIs (cuMemAlloc with 32-bit sizes, ...), which cuda.h and
// cudaTypedefs.h only show under this macro; nothing else in this file uses cuda.h's names.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>
#endif

namespace tessera::cuabi {
namespace {

// Self-contained: the 64-bit Linux sizes the shim relies on.
static_assert(sizeof(CUdeviceptr) == 8 && sizeof(CUdeviceptr_v1) == 4);
static_assert(sizeof(CUmemAllocationProp) == 32);
static_assert(sizeof(CUmemPoolProps) == 88);
static_assert(sizeof(CUDA_ARRAY3D_DESCRIPTOR) == 40);
static_assert(sizeof(CUlaunchConfig) == 56);

#ifdef TESSERA_HAVE_CUDA_H
template <class T, class = void>
struct IsComplete : std::false_type {};
template <class T>
struct IsComplete<T, decltype(void(sizeof(T)))> : std::true_type {};

template <class A>
constexpr bool kScalar = std::is_integral_v<A> || std::is_enum_v<A>;

// Same calling-convention shape: same size and kind; pointers to the same-sized pointee (opaque
// handles must be the very same type).
template <class A, class B>
constexpr bool ParamSame() {
  if constexpr (std::is_pointer_v<A> != std::is_pointer_v<B>) {
    return false;
  } else if constexpr (std::is_pointer_v<A>) {
    using PA = std::remove_cv_t<std::remove_pointer_t<A>>;
    using PB = std::remove_cv_t<std::remove_pointer_t<B>>;
    if constexpr (std::is_pointer_v<PA> || std::is_pointer_v<PB>) {
      return ParamSame<PA, PB>();
    } else if constexpr (std::is_void_v<PA> || std::is_void_v<PB>) {
      return std::is_void_v<PA> && std::is_void_v<PB>;
    } else if constexpr (IsComplete<PA>::value && IsComplete<PB>::value) {
      return sizeof(PA) == sizeof(PB) && kScalar<PA> == kScalar<PB>;
    } else {
      return std::is_same_v<PA, PB>;
    }
  } else {
    return sizeof(A) == sizeof(B) && kScalar<A> == kScalar<B>;
  }
}

template <class F1, class F2>
struct FnSame : std::false_type {};
template <class R1, class... A1, class R2, class... A2>
struct FnSame<R1 (*)(A1...), R2 (*)(A2...)> {
  static constexpr bool Check() {
    if constexpr (sizeof...(A1) != sizeof...(A2)) {
      return false;
    } else {
      return ParamSame<R1, R2>() && (... && ParamSame<A1, A2>());
    }
  }
  static constexpr bool value = Check();
};

#define TESSERA_SAME_PFN(name) static_assert(FnSame<name, ::name>::value, #name " differs from cudaTypedefs.h");
TESSERA_SAME_PFN(PFN_cuInit_v2000)
TESSERA_SAME_PFN(PFN_cuDriverGetVersion_v2020)
TESSERA_SAME_PFN(PFN_cuDeviceGet_v2000)
TESSERA_SAME_PFN(PFN_cuDeviceGetCount_v2000)
TESSERA_SAME_PFN(PFN_cuDeviceTotalMem_v2000)
TESSERA_SAME_PFN(PFN_cuDeviceTotalMem_v3020)
TESSERA_SAME_PFN(PFN_cuCtxCreate_v3020)
TESSERA_SAME_PFN(PFN_cuCtxDestroy_v4000)
TESSERA_SAME_PFN(PFN_cuCtxGetCurrent_v4000)
TESSERA_SAME_PFN(PFN_cuCtxSetCurrent_v4000)
TESSERA_SAME_PFN(PFN_cuCtxGetDevice_v2000)
TESSERA_SAME_PFN(PFN_cuDevicePrimaryCtxRetain_v7000)
TESSERA_SAME_PFN(PFN_cuDevicePrimaryCtxRelease_v11000)
TESSERA_SAME_PFN(PFN_cuCtxCreate_v2000)
TESSERA_SAME_PFN(PFN_cuCtxDestroy_v2000)
TESSERA_SAME_PFN(PFN_cuCtxPushCurrent_v2000)
TESSERA_SAME_PFN(PFN_cuCtxPushCurrent_v4000)
TESSERA_SAME_PFN(PFN_cuCtxPopCurrent_v2000)
TESSERA_SAME_PFN(PFN_cuCtxPopCurrent_v4000)
TESSERA_SAME_PFN(PFN_cuDevicePrimaryCtxRelease_v7000)
TESSERA_SAME_PFN(PFN_cuDevicePrimaryCtxReset_v7000)
TESSERA_SAME_PFN(PFN_cuDevicePrimaryCtxReset_v11000)
TESSERA_SAME_PFN(PFN_cuMemAlloc_v2000)
TESSERA_SAME_PFN(PFN_cuMemAlloc_v3020)
TESSERA_SAME_PFN(PFN_cuMemAllocPitch_v2000)
TESSERA_SAME_PFN(PFN_cuMemAllocPitch_v3020)
TESSERA_SAME_PFN(PFN_cuMemAllocManaged_v6000)
TESSERA_SAME_PFN(PFN_cuMemFree_v2000)
TESSERA_SAME_PFN(PFN_cuMemFree_v3020)
TESSERA_SAME_PFN(PFN_cuMemGetInfo_v2000)
TESSERA_SAME_PFN(PFN_cuMemGetInfo_v3020)
TESSERA_SAME_PFN(PFN_cuMemsetD8_v3020)
TESSERA_SAME_PFN(PFN_cuMemsetD8Async_v3020)
TESSERA_SAME_PFN(PFN_cuMemAllocAsync_v11020)
TESSERA_SAME_PFN(PFN_cuMemAllocFromPoolAsync_v11020)
TESSERA_SAME_PFN(PFN_cuMemFreeAsync_v11020)
TESSERA_SAME_PFN(PFN_cuMemPoolCreate_v11020)
TESSERA_SAME_PFN(PFN_cuMemPoolDestroy_v11020)
TESSERA_SAME_PFN(PFN_cuDeviceGetDefaultMemPool_v11020)
TESSERA_SAME_PFN(PFN_cuDeviceGetMemPool_v11020)
TESSERA_SAME_PFN(PFN_cuMemCreate_v10020)
TESSERA_SAME_PFN(PFN_cuMemRelease_v10020)
TESSERA_SAME_PFN(PFN_cuMemRetainAllocationHandle_v11000)
TESSERA_SAME_PFN(PFN_cuMemGetAllocationGranularity_v10020)
TESSERA_SAME_PFN(PFN_cuArrayCreate_v2000)
TESSERA_SAME_PFN(PFN_cuArrayCreate_v3020)
TESSERA_SAME_PFN(PFN_cuArray3DCreate_v2000)
TESSERA_SAME_PFN(PFN_cuArray3DCreate_v3020)
TESSERA_SAME_PFN(PFN_cuArrayDestroy_v2000)
TESSERA_SAME_PFN(PFN_cuMipmappedArrayCreate_v5000)
TESSERA_SAME_PFN(PFN_cuMipmappedArrayDestroy_v5000)
TESSERA_SAME_PFN(PFN_cuMemHostRegister_v6050)
TESSERA_SAME_PFN(PFN_cuMemHostUnregister_v4000)
TESSERA_SAME_PFN(PFN_cuMemAllocHost_v3020)
TESSERA_SAME_PFN(PFN_cuMemFreeHost_v2000)
TESSERA_SAME_PFN(PFN_cuLaunchKernel_v4000)
TESSERA_SAME_PFN(PFN_cuLaunchKernelEx_v11060)
TESSERA_SAME_PFN(PFN_cuLaunchCooperativeKernel_v9000)
TESSERA_SAME_PFN(PFN_cuLaunchCooperativeKernelMultiDevice_v9000)
TESSERA_SAME_PFN(PFN_cuLaunch_v2000)
TESSERA_SAME_PFN(PFN_cuLaunchGrid_v2000)
TESSERA_SAME_PFN(PFN_cuLaunchGridAsync_v2000)
TESSERA_SAME_PFN(PFN_cuGraphLaunch_v10000)
TESSERA_SAME_PFN(PFN_cuGraphCreate_v10000)
TESSERA_SAME_PFN(PFN_cuGraphAddKernelNode_v12000)
TESSERA_SAME_PFN(PFN_cuGraphAddChildGraphNode_v10000)
TESSERA_SAME_PFN(PFN_cuGraphAddEmptyNode_v10000)
TESSERA_SAME_PFN(PFN_cuGraphGetNodes_v10000)
TESSERA_SAME_PFN(PFN_cuGraphNodeGetType_v10000)
TESSERA_SAME_PFN(PFN_cuGraphChildGraphNodeGetGraph_v10000)
TESSERA_SAME_PFN(PFN_cuGraphInstantiate_v10000)
TESSERA_SAME_PFN(PFN_cuGraphInstantiate_v11000)
TESSERA_SAME_PFN(PFN_cuGraphInstantiateWithFlags_v11040)
TESSERA_SAME_PFN(PFN_cuGraphInstantiateWithParams_v12000)
TESSERA_SAME_PFN(PFN_cuGraphExecDestroy_v10000)
TESSERA_SAME_PFN(PFN_cuGraphDestroy_v10000)
TESSERA_SAME_PFN(PFN_cuStreamBeginCapture_v10000)
TESSERA_SAME_PFN(PFN_cuStreamBeginCapture_v10010)
TESSERA_SAME_PFN(PFN_cuStreamBeginCaptureToGraph_v12030)
TESSERA_SAME_PFN(PFN_cuStreamEndCapture_v10000)
TESSERA_SAME_PFN(PFN_cuStreamIsCapturing_v10000)
TESSERA_SAME_PFN(PFN_cuEventCreate_v2000)
TESSERA_SAME_PFN(PFN_cuEventRecord_v2000)
TESSERA_SAME_PFN(PFN_cuEventQuery_v2000)
TESSERA_SAME_PFN(PFN_cuEventSynchronize_v2000)
TESSERA_SAME_PFN(PFN_cuEventElapsedTime_v2000)
TESSERA_SAME_PFN(PFN_cuEventDestroy_v4000)
TESSERA_SAME_PFN(PFN_cuStreamSynchronize_v2000)
TESSERA_SAME_PFN(PFN_cuCtxSynchronize_v2000)
TESSERA_SAME_PFN(PFN_cuGetProcAddress_v11030)
TESSERA_SAME_PFN(PFN_cuGetProcAddress_v12000)
#undef TESSERA_SAME_PFN
// The _ptsz twins have the types of their legacy variants.
static_assert(FnSame<PFN_cuLaunchKernel_v4000, ::PFN_cuLaunchKernel_v7000_ptsz>::value);
static_assert(FnSame<PFN_cuMemAllocAsync_v11020, ::PFN_cuMemAllocAsync_v11020_ptsz>::value);
static_assert(FnSame<PFN_cuMemsetD8_v3020, ::PFN_cuMemsetD8_v7000_ptds>::value);
static_assert(FnSame<PFN_cuMemsetD8Async_v3020, ::PFN_cuMemsetD8Async_v7000_ptsz>::value);
static_assert(FnSame<PFN_cuGraphLaunch_v10000, ::PFN_cuGraphLaunch_v10000_ptsz>::value);
static_assert(FnSame<PFN_cuGraphInstantiateWithParams_v12000, ::PFN_cuGraphInstantiateWithParams_v12000_ptsz>::value);
static_assert(FnSame<PFN_cuStreamBeginCapture_v10010, ::PFN_cuStreamBeginCapture_v10010_ptsz>::value);

// Handles are the very same types.
static_assert(std::is_same_v<CUcontext, ::CUcontext> && std::is_same_v<CUstream, ::CUstream> &&
              std::is_same_v<CUfunction, ::CUfunction> && std::is_same_v<CUarray, ::CUarray> &&
              std::is_same_v<CUmipmappedArray, ::CUmipmappedArray> &&
              std::is_same_v<CUmemoryPool, ::CUmemoryPool> && std::is_same_v<CUgraphExec, ::CUgraphExec> &&
              std::is_same_v<CUgraph, ::CUgraph> && std::is_same_v<CUgraphNode, ::CUgraphNode> &&
              std::is_same_v<CUkernel, ::CUkernel>);
static_assert(std::is_same_v<CUdeviceptr, ::CUdeviceptr> && std::is_same_v<CUdevice, ::CUdevice> &&
              std::is_same_v<CUmemGenericAllocationHandle, ::CUmemGenericAllocationHandle>);

#define TESSERA_SAME_STRUCT(mine, theirs) \
  static_assert(sizeof(mine) == sizeof(::theirs) && alignof(mine) == alignof(::theirs), #mine);
#define TESSERA_SAME_FIELD(mine, theirs, field) \
  static_assert(offsetof(mine, field) == offsetof(::theirs, field), #mine "." #field);
TESSERA_SAME_STRUCT(CUmemLocation, CUmemLocation)
TESSERA_SAME_FIELD(CUmemLocation, CUmemLocation, id)
TESSERA_SAME_STRUCT(CUmemAllocationProp, CUmemAllocationProp)
TESSERA_SAME_FIELD(CUmemAllocationProp, CUmemAllocationProp, location)
TESSERA_SAME_FIELD(CUmemAllocationProp, CUmemAllocationProp, win32HandleMetaData)
TESSERA_SAME_FIELD(CUmemAllocationProp, CUmemAllocationProp, allocFlags)
TESSERA_SAME_STRUCT(CUmemPoolProps, CUmemPoolProps)
TESSERA_SAME_FIELD(CUmemPoolProps, CUmemPoolProps, location)
TESSERA_SAME_FIELD(CUmemPoolProps, CUmemPoolProps, maxSize)
TESSERA_SAME_FIELD(CUmemPoolProps, CUmemPoolProps, usage)
TESSERA_SAME_STRUCT(CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR_v2)
TESSERA_SAME_FIELD(CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR_v2, Format)
TESSERA_SAME_FIELD(CUDA_ARRAY_DESCRIPTOR, CUDA_ARRAY_DESCRIPTOR_v2, NumChannels)
TESSERA_SAME_STRUCT(CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR_v2)
TESSERA_SAME_FIELD(CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR_v2, Depth)
TESSERA_SAME_FIELD(CUDA_ARRAY3D_DESCRIPTOR, CUDA_ARRAY3D_DESCRIPTOR_v2, Flags)
TESSERA_SAME_STRUCT(CUDA_ARRAY_DESCRIPTOR_v1, CUDA_ARRAY_DESCRIPTOR_v1)
TESSERA_SAME_FIELD(CUDA_ARRAY_DESCRIPTOR_v1, CUDA_ARRAY_DESCRIPTOR_v1, Format)
TESSERA_SAME_STRUCT(CUDA_ARRAY3D_DESCRIPTOR_v1, CUDA_ARRAY3D_DESCRIPTOR_v1)
TESSERA_SAME_FIELD(CUDA_ARRAY3D_DESCRIPTOR_v1, CUDA_ARRAY3D_DESCRIPTOR_v1, Flags)
TESSERA_SAME_STRUCT(CUlaunchConfig, CUlaunchConfig)
TESSERA_SAME_FIELD(CUlaunchConfig, CUlaunchConfig, hStream)
TESSERA_SAME_FIELD(CUlaunchConfig, CUlaunchConfig, attrs)
TESSERA_SAME_FIELD(CUlaunchConfig, CUlaunchConfig, numAttrs)
TESSERA_SAME_STRUCT(CUDA_LAUNCH_PARAMS, CUDA_LAUNCH_PARAMS)
TESSERA_SAME_FIELD(CUDA_LAUNCH_PARAMS, CUDA_LAUNCH_PARAMS, kernelParams)
TESSERA_SAME_STRUCT(CUgraphEdgeData, CUgraphEdgeData)
TESSERA_SAME_STRUCT(CUDA_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2)
TESSERA_SAME_FIELD(CUDA_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, sharedMemBytes)
TESSERA_SAME_FIELD(CUDA_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, kernelParams)
TESSERA_SAME_FIELD(CUDA_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, kern)
TESSERA_SAME_FIELD(CUDA_KERNEL_NODE_PARAMS, CUDA_KERNEL_NODE_PARAMS_v2, ctx)
TESSERA_SAME_STRUCT(CUDA_GRAPH_INSTANTIATE_PARAMS, CUDA_GRAPH_INSTANTIATE_PARAMS)
TESSERA_SAME_FIELD(CUDA_GRAPH_INSTANTIATE_PARAMS, CUDA_GRAPH_INSTANTIATE_PARAMS, hUploadStream)
TESSERA_SAME_FIELD(CUDA_GRAPH_INSTANTIATE_PARAMS, CUDA_GRAPH_INSTANTIATE_PARAMS, hErrNode_out)
TESSERA_SAME_FIELD(CUDA_GRAPH_INSTANTIATE_PARAMS, CUDA_GRAPH_INSTANTIATE_PARAMS, result_out)
#undef TESSERA_SAME_STRUCT
#undef TESSERA_SAME_FIELD

static_assert(CUDA_SUCCESS == ::CUDA_SUCCESS && CUDA_ERROR_OUT_OF_MEMORY == ::CUDA_ERROR_OUT_OF_MEMORY &&
              CUDA_ERROR_NOT_FOUND == ::CUDA_ERROR_NOT_FOUND &&
              CUDA_ERROR_NOT_READY == ::CUDA_ERROR_NOT_READY &&
              CUDA_ERROR_INVALID_DEVICE == ::CUDA_ERROR_INVALID_DEVICE &&
              CUDA_ERROR_NOT_PERMITTED == ::CUDA_ERROR_NOT_PERMITTED &&
              CUDA_ERROR_INVALID_CONTEXT == ::CUDA_ERROR_INVALID_CONTEXT &&
              CUDA_ERROR_NOT_INITIALIZED == ::CUDA_ERROR_NOT_INITIALIZED &&
              CUDA_ERROR_INVALID_VALUE == ::CUDA_ERROR_INVALID_VALUE &&
              CUDA_ERROR_INVALID_HANDLE == ::CUDA_ERROR_INVALID_HANDLE &&
              CUDA_ERROR_NOT_SUPPORTED == ::CUDA_ERROR_NOT_SUPPORTED &&
              CUDA_ERROR_LAUNCH_FAILED == ::CUDA_ERROR_LAUNCH_FAILED);
static_assert(CU_GET_PROC_ADDRESS_LEGACY_STREAM == ::CU_GET_PROC_ADDRESS_LEGACY_STREAM &&
              CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM == ::CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM &&
              CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT == ::CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT &&
              CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND == ::CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
static_assert(CU_MEM_LOCATION_TYPE_DEVICE == ::CU_MEM_LOCATION_TYPE_DEVICE &&
              CU_MEM_LOCATION_TYPE_HOST == ::CU_MEM_LOCATION_TYPE_HOST &&
              CU_MEM_LOCATION_TYPE_HOST_NUMA == ::CU_MEM_LOCATION_TYPE_HOST_NUMA &&
              CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT == ::CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT &&
              CU_MEM_ALLOCATION_TYPE_PINNED == ::CU_MEM_ALLOCATION_TYPE_PINNED);
static_assert(CU_AD_FORMAT_FLOAT == ::CU_AD_FORMAT_FLOAT && CU_AD_FORMAT_HALF == ::CU_AD_FORMAT_HALF &&
              CU_AD_FORMAT_SIGNED_INT32 == ::CU_AD_FORMAT_SIGNED_INT32 &&
              CU_AD_FORMAT_UNSIGNED_INT16 == ::CU_AD_FORMAT_UNSIGNED_INT16);
static_assert(CU_STREAM_CAPTURE_STATUS_ACTIVE == ::CU_STREAM_CAPTURE_STATUS_ACTIVE);
static_assert(CU_EVENT_DEFAULT == ::CU_EVENT_DEFAULT && CU_EVENT_BLOCKING_SYNC == ::CU_EVENT_BLOCKING_SYNC);
static_assert(CU_GRAPH_NODE_TYPE_KERNEL == ::CU_GRAPH_NODE_TYPE_KERNEL &&
              CU_GRAPH_NODE_TYPE_GRAPH == ::CU_GRAPH_NODE_TYPE_GRAPH &&
              CU_GRAPH_NODE_TYPE_EMPTY == ::CU_GRAPH_NODE_TYPE_EMPTY &&
              CU_GRAPH_NODE_TYPE_CONDITIONAL == ::CU_GRAPH_NODE_TYPE_CONDITIONAL);
#endif

TEST(CudaAbi, CheckedAgainstTheToolkitWhenInstalled) {
#ifdef TESSERA_HAVE_CUDA_H
  // The static_asserts above compiled: the declarations match cuda.h of CUDA_VERSION.
  EXPECT_GE(CUDA_VERSION, 12000);
#else
  GTEST_SKIP() << "no CUDA toolkit headers: only the self-contained size checks ran";
#endif
}

}  // namespace
}  // namespace tessera::cuabi
