// The slice of the CUDA driver API's C ABI that tessera's shim (libtessera-shim.so) and the fake
// driver used in tests (tests/testing/fake_cuda/) need, declared by hand so that nothing needs the
// CUDA toolkit to build.
//
// Who uses it: src/enforce/shim/ (the LD_PRELOAD interposer), tests/testing/fake_cuda/ (an in-tree
// libcuda.so.1), tests/shim/ and bench/shim_bench.cc. Types only: no functions are defined here.
//
// Everything lives in namespace tessera::cuabi so that a translation unit may include both this
// header and the toolkit's <cuda.h>; tests/shim/cuda_abi_test.cc does exactly that when the
// toolkit is installed and static_asserts every struct layout (size and field offsets) and every
// function-pointer type below against cuda.h/cudaTypedefs.h (CUDA 13.0), parameter by parameter.
// The opaque handle tags (struct CUctx_st, ...) are declared at global scope, as cuda.h does, so
// that handle types are the very same C++ types in both.
//
// Names follow cudaTypedefs.h: PFN_<base>_v<version>[_ptsz] is the type of the entry point whose
// ABI appeared in CUDA <version> (e.g. PFN_cuMemAlloc_v3020 is cuMemAlloc_v2, which takes size_t;
// PFN_cuMemAlloc_v2000 is the original cuMemAlloc with 32-bit sizes and pointers). The exported
// symbol of each is listed next to it. Only 64-bit Linux is supported (CUDAAPI is empty there).
//
// Thread-safety/ownership: plain declarations.
#pragma once

#include <cstddef>
#include <cstdint>

// Opaque driver objects: the same global tags as cuda.h.
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;
struct CUarray_st;
struct CUmipmappedArray_st;
struct CUmemPoolHandle_st;
struct CUgraph_st;
struct CUgraphNode_st;
struct CUgraphExec_st;
struct CUlaunchAttribute_st;
struct CUkern_st;
struct CUexecAffinityParam_st;  // only passed through (cuCtxCreate_v3)
struct CUctxCreateParams_st;    // only passed through (cuCtxCreate_v4)

namespace tessera::cuabi {

// CUresult is a C enum (4 bytes); the shim passes driver codes through untouched, so it is an int.
using CUresult = int;
inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
inline constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
inline constexpr CUresult CUDA_ERROR_NOT_INITIALIZED = 3;
inline constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
inline constexpr CUresult CUDA_ERROR_INVALID_DEVICE = 101;
inline constexpr CUresult CUDA_ERROR_INVALID_CONTEXT = 201;
inline constexpr CUresult CUDA_ERROR_INVALID_HANDLE = 400;
inline constexpr CUresult CUDA_ERROR_NOT_FOUND = 500;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr CUresult CUDA_ERROR_LAUNCH_FAILED = 719;
inline constexpr CUresult CUDA_ERROR_NOT_PERMITTED = 800;
inline constexpr CUresult CUDA_ERROR_NOT_SUPPORTED = 801;
inline constexpr CUresult CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900;
inline constexpr CUresult CUDA_ERROR_UNKNOWN = 999;

using cuuint64_t = std::uint64_t;
using CUdevice = int;                      // CUdevice_v1
using CUdeviceptr = unsigned long long;    // CUdeviceptr_v2
using CUdeviceptr_v1 = unsigned int;       // pre-3.2 32-bit device pointers
using CUmemGenericAllocationHandle = unsigned long long;
using CUcontext = ::CUctx_st*;
using CUmodule = ::CUmod_st*;
using CUfunction = ::CUfunc_st*;
using CUstream = ::CUstream_st*;
using CUevent = ::CUevent_st*;
using CUarray = ::CUarray_st*;
using CUmipmappedArray = ::CUmipmappedArray_st*;
using CUmemoryPool = ::CUmemPoolHandle_st*;
using CUgraph = ::CUgraph_st*;
using CUgraphNode = ::CUgraphNode_st*;
using CUgraphExec = ::CUgraphExec_st*;

// Enums are 4-byte C enums in cuda.h; int here.
using CUarray_format = int;
using CUmemLocationType = int;
using CUmemAllocationType = int;
using CUmemAllocationHandleType = int;
using CUmemAllocationGranularity_flags = int;
using CUstreamCaptureStatus = int;
using CUstreamCaptureMode = int;
using CUdriverProcAddressQueryResult = int;
using CUgraphNodeType = int;
using CUgraphInstantiateResult = int;
using CUkernel = ::CUkern_st*;
using CUexecAffinityParam = ::CUexecAffinityParam_st;
using CUctxCreateParams = ::CUctxCreateParams_st;

inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_INVALID = 0;
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_DEVICE = 1;
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_HOST = 2;
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_HOST_NUMA = 3;
inline constexpr CUmemLocationType CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 4;
inline constexpr CUmemAllocationType CU_MEM_ALLOCATION_TYPE_PINNED = 1;

inline constexpr CUstreamCaptureStatus CU_STREAM_CAPTURE_STATUS_NONE = 0;
inline constexpr CUstreamCaptureStatus CU_STREAM_CAPTURE_STATUS_ACTIVE = 1;
// cuEventCreate flags.
inline constexpr unsigned int CU_EVENT_DEFAULT = 0x0;
inline constexpr unsigned int CU_EVENT_BLOCKING_SYNC = 0x1;
inline constexpr CUstreamCaptureMode CU_STREAM_CAPTURE_MODE_GLOBAL = 0;

// CUgraphNodeType values the shim's graph charging looks at (the others count no kernels).
inline constexpr CUgraphNodeType CU_GRAPH_NODE_TYPE_KERNEL = 0;
inline constexpr CUgraphNodeType CU_GRAPH_NODE_TYPE_GRAPH = 4;  // a child graph
inline constexpr CUgraphNodeType CU_GRAPH_NODE_TYPE_EMPTY = 5;
inline constexpr CUgraphNodeType CU_GRAPH_NODE_TYPE_CONDITIONAL = 13;

// cuGetProcAddress flags and the v2 resolver's symbolStatus values.
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_DEFAULT = 0;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1u << 0;
inline constexpr cuuint64_t CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1u << 1;
inline constexpr CUdriverProcAddressQueryResult CU_GET_PROC_ADDRESS_SUCCESS = 0;
inline constexpr CUdriverProcAddressQueryResult CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1;
inline constexpr CUdriverProcAddressQueryResult CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2;

// CUarray_format values whose element sizes the shim knows (others are charged conservatively).
inline constexpr CUarray_format CU_AD_FORMAT_UNSIGNED_INT8 = 0x01;
inline constexpr CUarray_format CU_AD_FORMAT_UNSIGNED_INT16 = 0x02;
inline constexpr CUarray_format CU_AD_FORMAT_UNSIGNED_INT32 = 0x03;
inline constexpr CUarray_format CU_AD_FORMAT_SIGNED_INT8 = 0x08;
inline constexpr CUarray_format CU_AD_FORMAT_SIGNED_INT16 = 0x09;
inline constexpr CUarray_format CU_AD_FORMAT_SIGNED_INT32 = 0x0a;
inline constexpr CUarray_format CU_AD_FORMAT_HALF = 0x10;
inline constexpr CUarray_format CU_AD_FORMAT_FLOAT = 0x20;

struct CUmemLocation {  // CUmemLocation_v1
  CUmemLocationType type;
  int id;
};

struct CUmemAllocationProp {  // CUmemAllocationProp_v1
  CUmemAllocationType type;
  CUmemAllocationHandleType requestedHandleTypes;
  CUmemLocation location;
  void* win32HandleMetaData;
  struct {
    unsigned char compressionType;
    unsigned char gpuDirectRDMACapable;
    unsigned short usage;
    unsigned char reserved[4];
  } allocFlags;
};

struct CUmemPoolProps {  // CUmemPoolProps_v1
  CUmemAllocationType allocType;
  CUmemAllocationHandleType handleTypes;
  CUmemLocation location;
  void* win32SecurityAttributes;
  size_t maxSize;
  unsigned short usage;
  unsigned char reserved[54];
};

struct CUDA_ARRAY_DESCRIPTOR {  // CUDA_ARRAY_DESCRIPTOR_v2 (cuArrayCreate_v2)
  size_t Width;
  size_t Height;
  CUarray_format Format;
  unsigned int NumChannels;
};

struct CUDA_ARRAY_DESCRIPTOR_v1 {  // cuArrayCreate (pre-3.2)
  unsigned int Width;
  unsigned int Height;
  CUarray_format Format;
  unsigned int NumChannels;
};

struct CUDA_ARRAY3D_DESCRIPTOR {  // CUDA_ARRAY3D_DESCRIPTOR_v2
  size_t Width;
  size_t Height;
  size_t Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
};

struct CUDA_ARRAY3D_DESCRIPTOR_v1 {
  unsigned int Width;
  unsigned int Height;
  unsigned int Depth;
  CUarray_format Format;
  unsigned int NumChannels;
  unsigned int Flags;
};

struct CUlaunchConfig {
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  ::CUlaunchAttribute_st* attrs;  // CUlaunchAttribute* (the shim never looks inside)
  unsigned int numAttrs;
};

struct CUDA_LAUNCH_PARAMS {  // CUDA_LAUNCH_PARAMS_v1
  CUfunction function;
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  CUstream hStream;
  void** kernelParams;
};

struct CUgraphEdgeData {
  unsigned char from_port;
  unsigned char to_port;
  unsigned char type;
  unsigned char reserved[5];
};

struct CUDA_KERNEL_NODE_PARAMS {  // CUDA_KERNEL_NODE_PARAMS_v2 (cuGraphAddKernelNode_v2)
  CUfunction func;
  unsigned int gridDimX;
  unsigned int gridDimY;
  unsigned int gridDimZ;
  unsigned int blockDimX;
  unsigned int blockDimY;
  unsigned int blockDimZ;
  unsigned int sharedMemBytes;
  void** kernelParams;
  void** extra;
  CUkernel kern;
  CUcontext ctx;
};

struct CUDA_GRAPH_INSTANTIATE_PARAMS {  // cuGraphInstantiateWithParams
  cuuint64_t flags;
  CUstream hUploadStream;
  CUgraphNode hErrNode_out;
  CUgraphInstantiateResult result_out;
};

// --- entry-point types (exported symbol in the comment) ------------------------------------------
// Initialisation, devices, contexts (used by tests and by the shim to find the current device).
using PFN_cuInit_v2000 = CUresult (*)(unsigned int Flags);                          // cuInit
using PFN_cuDriverGetVersion_v2020 = CUresult (*)(int* driverVersion);              // cuDriverGetVersion
using PFN_cuDeviceGet_v2000 = CUresult (*)(CUdevice* device, int ordinal);          // cuDeviceGet
using PFN_cuDeviceGetCount_v2000 = CUresult (*)(int* count);                        // cuDeviceGetCount
using PFN_cuDeviceTotalMem_v2000 = CUresult (*)(unsigned int* bytes, CUdevice dev);  // cuDeviceTotalMem
using PFN_cuDeviceTotalMem_v3020 = CUresult (*)(size_t* bytes, CUdevice dev);        // cuDeviceTotalMem_v2
using PFN_cuCtxCreate_v3020 = CUresult (*)(CUcontext* pctx, unsigned int flags, CUdevice dev);  // cuCtxCreate_v2
using PFN_cuCtxDestroy_v4000 = CUresult (*)(CUcontext ctx);                         // cuCtxDestroy_v2
using PFN_cuCtxGetCurrent_v4000 = CUresult (*)(CUcontext* pctx);                    // cuCtxGetCurrent
using PFN_cuCtxSetCurrent_v4000 = CUresult (*)(CUcontext ctx);                      // cuCtxSetCurrent
using PFN_cuCtxGetDevice_v2000 = CUresult (*)(CUdevice* device);                    // cuCtxGetDevice
using PFN_cuDevicePrimaryCtxRetain_v7000 = CUresult (*)(CUcontext* pctx, CUdevice dev);
using PFN_cuDevicePrimaryCtxRelease_v11000 = CUresult (*)(CUdevice dev);  // cuDevicePrimaryCtxRelease_v2
// Every entry point that changes the calling thread's current context (the shim caches its device).
using PFN_cuCtxCreate_v2000 = CUresult (*)(CUcontext* pctx, unsigned int flags, CUdevice dev);  // cuCtxCreate
using PFN_cuCtxCreate_v11040 = CUresult (*)(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams,
                                            unsigned int flags, CUdevice dev);  // cuCtxCreate_v3
using PFN_cuCtxCreate_v12050 = CUresult (*)(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags,
                                            CUdevice dev);  // cuCtxCreate_v4
using PFN_cuCtxDestroy_v2000 = CUresult (*)(CUcontext ctx);       // cuCtxDestroy
using PFN_cuCtxPushCurrent_v2000 = CUresult (*)(CUcontext ctx);   // cuCtxPushCurrent
using PFN_cuCtxPushCurrent_v4000 = CUresult (*)(CUcontext ctx);   // cuCtxPushCurrent_v2
using PFN_cuCtxPopCurrent_v2000 = CUresult (*)(CUcontext* pctx);  // cuCtxPopCurrent
using PFN_cuCtxPopCurrent_v4000 = CUresult (*)(CUcontext* pctx);  // cuCtxPopCurrent_v2
using PFN_cuDevicePrimaryCtxRelease_v7000 = CUresult (*)(CUdevice dev);  // cuDevicePrimaryCtxRelease
using PFN_cuDevicePrimaryCtxReset_v7000 = CUresult (*)(CUdevice dev);    // cuDevicePrimaryCtxReset
using PFN_cuDevicePrimaryCtxReset_v11000 = CUresult (*)(CUdevice dev);   // cuDevicePrimaryCtxReset_v2

// Device memory.
using PFN_cuMemAlloc_v2000 = CUresult (*)(CUdeviceptr_v1* dptr, unsigned int bytesize);  // cuMemAlloc
using PFN_cuMemAlloc_v3020 = CUresult (*)(CUdeviceptr* dptr, size_t bytesize);          // cuMemAlloc_v2
using PFN_cuMemAllocPitch_v2000 = CUresult (*)(CUdeviceptr_v1* dptr, unsigned int* pPitch,
                                              unsigned int WidthInBytes, unsigned int Height,
                                              unsigned int ElementSizeBytes);  // cuMemAllocPitch
using PFN_cuMemAllocPitch_v3020 = CUresult (*)(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes,
                                              size_t Height,
                                              unsigned int ElementSizeBytes);  // cuMemAllocPitch_v2
using PFN_cuMemAllocManaged_v6000 = CUresult (*)(CUdeviceptr* dptr, size_t bytesize,
                                                unsigned int flags);  // cuMemAllocManaged
using PFN_cuMemFree_v2000 = CUresult (*)(CUdeviceptr_v1 dptr);         // cuMemFree
using PFN_cuMemFree_v3020 = CUresult (*)(CUdeviceptr dptr);            // cuMemFree_v2
using PFN_cuMemGetInfo_v2000 = CUresult (*)(unsigned int* free, unsigned int* total);  // cuMemGetInfo
using PFN_cuMemGetInfo_v3020 = CUresult (*)(size_t* free, size_t* total);  // cuMemGetInfo_v2
// Memset (the shim's scrub-on-free; cuMemsetD8_v2_ptds / cuMemsetD8Async_ptsz have the same types).
using PFN_cuMemsetD8_v3020 = CUresult (*)(CUdeviceptr dstDevice, unsigned char uc, size_t N);  // cuMemsetD8_v2
using PFN_cuMemsetD8Async_v3020 = CUresult (*)(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                              CUstream hStream);  // cuMemsetD8Async
// Stream-ordered allocator (the _ptsz twins have the same types).
using PFN_cuMemAllocAsync_v11020 = CUresult (*)(CUdeviceptr* dptr, size_t bytesize, CUstream hStream);
using PFN_cuMemAllocFromPoolAsync_v11020 = CUresult (*)(CUdeviceptr* dptr, size_t bytesize,
                                                       CUmemoryPool pool, CUstream hStream);
using PFN_cuMemFreeAsync_v11020 = CUresult (*)(CUdeviceptr dptr, CUstream hStream);
using PFN_cuMemPoolCreate_v11020 = CUresult (*)(CUmemoryPool* pool, const CUmemPoolProps* poolProps);
using PFN_cuMemPoolDestroy_v11020 = CUresult (*)(CUmemoryPool pool);
using PFN_cuDeviceGetDefaultMemPool_v11020 = CUresult (*)(CUmemoryPool* pool_out, CUdevice dev);
using PFN_cuDeviceGetMemPool_v11020 = CUresult (*)(CUmemoryPool* pool, CUdevice dev);
// Virtual memory management.
using PFN_cuMemCreate_v10020 = CUresult (*)(CUmemGenericAllocationHandle* handle, size_t size,
                                           const CUmemAllocationProp* prop, unsigned long long flags);
using PFN_cuMemRelease_v10020 = CUresult (*)(CUmemGenericAllocationHandle handle);
using PFN_cuMemRetainAllocationHandle_v11000 = CUresult (*)(CUmemGenericAllocationHandle* handle,
                                                           void* addr);
using PFN_cuMemGetAllocationGranularity_v10020 = CUresult (*)(size_t* granularity,
                                                             const CUmemAllocationProp* prop,
                                                             CUmemAllocationGranularity_flags option);
// Arrays.
using PFN_cuArrayCreate_v2000 = CUresult (*)(CUarray* pHandle,
                                            const CUDA_ARRAY_DESCRIPTOR_v1* pAllocateArray);  // cuArrayCreate
using PFN_cuArrayCreate_v3020 = CUresult (*)(CUarray* pHandle,
                                            const CUDA_ARRAY_DESCRIPTOR* pAllocateArray);  // cuArrayCreate_v2
using PFN_cuArray3DCreate_v2000 = CUresult (*)(CUarray* pHandle,
                                              const CUDA_ARRAY3D_DESCRIPTOR_v1* pAllocateArray);
using PFN_cuArray3DCreate_v3020 = CUresult (*)(CUarray* pHandle,
                                              const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray);
using PFN_cuArrayDestroy_v2000 = CUresult (*)(CUarray hArray);
using PFN_cuMipmappedArrayCreate_v5000 = CUresult (*)(CUmipmappedArray* pHandle,
                                                     const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                                     unsigned int numMipmapLevels);
using PFN_cuMipmappedArrayDestroy_v5000 = CUresult (*)(CUmipmappedArray hMipmappedArray);
// Host memory (never charged; the fake implements them so tests can show that).
using PFN_cuMemHostRegister_v6050 = CUresult (*)(void* p, size_t bytesize, unsigned int Flags);  // cuMemHostRegister_v2
using PFN_cuMemHostUnregister_v4000 = CUresult (*)(void* p);
using PFN_cuMemAllocHost_v3020 = CUresult (*)(void** pp, size_t bytesize);  // cuMemAllocHost_v2
using PFN_cuMemFreeHost_v2000 = CUresult (*)(void* p);

// Launches (the _ptsz twins have the same types).
using PFN_cuLaunchKernel_v4000 = CUresult (*)(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                             unsigned int gridDimZ, unsigned int blockDimX,
                                             unsigned int blockDimY, unsigned int blockDimZ,
                                             unsigned int sharedMemBytes, CUstream hStream,
                                             void** kernelParams, void** extra);
using PFN_cuLaunchKernelEx_v11060 = CUresult (*)(const CUlaunchConfig* config, CUfunction f,
                                                void** kernelParams, void** extra);
using PFN_cuLaunchCooperativeKernel_v9000 = CUresult (*)(CUfunction f, unsigned int gridDimX,
                                                        unsigned int gridDimY, unsigned int gridDimZ,
                                                        unsigned int blockDimX, unsigned int blockDimY,
                                                        unsigned int blockDimZ,
                                                        unsigned int sharedMemBytes, CUstream hStream,
                                                        void** kernelParams);
using PFN_cuLaunchCooperativeKernelMultiDevice_v9000 = CUresult (*)(CUDA_LAUNCH_PARAMS* launchParamsList,
                                                                   unsigned int numDevices,
                                                                   unsigned int flags);
using PFN_cuLaunch_v2000 = CUresult (*)(CUfunction f);
using PFN_cuLaunchGrid_v2000 = CUresult (*)(CUfunction f, int grid_width, int grid_height);
using PFN_cuLaunchGridAsync_v2000 = CUresult (*)(CUfunction f, int grid_width, int grid_height,
                                                CUstream hStream);
using PFN_cuGraphLaunch_v10000 = CUresult (*)(CUgraphExec hGraphExec, CUstream hStream);
// Graphs: building and inspecting (the shim counts kernel nodes at instantiation), instantiating
// (cuGraphInstantiate and cuGraphInstantiate_v2 share the pre-12.0 type; the _ptsz twin of
// cuGraphInstantiateWithParams has its type), destroying.
using PFN_cuGraphCreate_v10000 = CUresult (*)(CUgraph* phGraph, unsigned int flags);
using PFN_cuGraphAddKernelNode_v12000 = CUresult (*)(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                    const CUgraphNode* dependencies, size_t numDependencies,
                                                    const CUDA_KERNEL_NODE_PARAMS* nodeParams);  // cuGraphAddKernelNode_v2
using PFN_cuGraphAddChildGraphNode_v10000 = CUresult (*)(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                        const CUgraphNode* dependencies,
                                                        size_t numDependencies, CUgraph childGraph);
using PFN_cuGraphAddEmptyNode_v10000 = CUresult (*)(CUgraphNode* phGraphNode, CUgraph hGraph,
                                                   const CUgraphNode* dependencies, size_t numDependencies);
using PFN_cuGraphGetNodes_v10000 = CUresult (*)(CUgraph hGraph, CUgraphNode* nodes, size_t* numNodes);
using PFN_cuGraphNodeGetType_v10000 = CUresult (*)(CUgraphNode hNode, CUgraphNodeType* type);
using PFN_cuGraphChildGraphNodeGetGraph_v10000 = CUresult (*)(CUgraphNode hNode, CUgraph* phGraph);
using PFN_cuGraphInstantiate_v10000 = CUresult (*)(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                  CUgraphNode* phErrorNode, char* logBuffer,
                                                  size_t bufferSize);  // cuGraphInstantiate
using PFN_cuGraphInstantiate_v11000 = PFN_cuGraphInstantiate_v10000;  // cuGraphInstantiate_v2
using PFN_cuGraphInstantiateWithFlags_v11040 = CUresult (*)(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                           unsigned long long flags);
using PFN_cuGraphInstantiateWithParams_v12000 = CUresult (*)(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                            CUDA_GRAPH_INSTANTIATE_PARAMS* instantiateParams);
using PFN_cuGraphExecDestroy_v10000 = CUresult (*)(CUgraphExec hGraphExec);
using PFN_cuGraphDestroy_v10000 = CUresult (*)(CUgraph hGraph);
// Stream capture.
using PFN_cuStreamBeginCapture_v10000 = CUresult (*)(CUstream hStream);  // cuStreamBeginCapture[_ptsz]
using PFN_cuStreamBeginCapture_v10010 = CUresult (*)(CUstream hStream,
                                                    CUstreamCaptureMode mode);  // cuStreamBeginCapture_v2[_ptsz]
using PFN_cuStreamBeginCaptureToGraph_v12030 = CUresult (*)(CUstream hStream, CUgraph hGraph,
                                                           const CUgraphNode* dependencies,
                                                           const CUgraphEdgeData* dependencyData,
                                                           size_t numDependencies,
                                                           CUstreamCaptureMode mode);
using PFN_cuStreamEndCapture_v10000 = CUresult (*)(CUstream hStream, CUgraph* phGraph);
using PFN_cuStreamIsCapturing_v10000 = CUresult (*)(CUstream hStream,
                                                   CUstreamCaptureStatus* captureStatus);

// Events and synchronisation (the shim times the tenant's GPU work with events; the _ptsz twins
// have the same types).
using PFN_cuEventCreate_v2000 = CUresult (*)(CUevent* phEvent, unsigned int Flags);
using PFN_cuEventRecord_v2000 = CUresult (*)(CUevent hEvent, CUstream hStream);  // cuEventRecord[_ptsz]
using PFN_cuEventQuery_v2000 = CUresult (*)(CUevent hEvent);
using PFN_cuEventSynchronize_v2000 = CUresult (*)(CUevent hEvent);
using PFN_cuEventElapsedTime_v2000 = CUresult (*)(float* pMilliseconds, CUevent hStart, CUevent hEnd);
using PFN_cuEventDestroy_v4000 = CUresult (*)(CUevent hEvent);  // cuEventDestroy_v2
using PFN_cuStreamSynchronize_v2000 = CUresult (*)(CUstream hStream);  // cuStreamSynchronize[_ptsz]
using PFN_cuCtxSynchronize_v2000 = CUresult (*)(void);

// The resolvers.
using PFN_cuGetProcAddress_v11030 = CUresult (*)(const char* symbol, void** pfn, int cudaVersion,
                                                cuuint64_t flags);  // cuGetProcAddress
using PFN_cuGetProcAddress_v12000 = CUresult (*)(const char* symbol, void** pfn, int cudaVersion,
                                                cuuint64_t flags,
                                                CUdriverProcAddressQueryResult* symbolStatus);  // cuGetProcAddress_v2

}  // namespace tessera::cuabi
