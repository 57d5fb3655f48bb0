// tessera_shim_probe: the program tests/shim/ runs under LD_PRELOAD=libtessera-shim.so. It links
// the fake driver directly (route 1: direct binding) and can also resolve entry points through
// dlsym/dlvsym on libcuda's handle, RTLD_DEFAULT, RTLD_NEXT and cuGetProcAddress v1/v2.
//
// Usage: tessera_shim_probe COMMAND...   Each command prints exactly one line, "<command> key=value
// ...", so that tests can parse the output. Commands:
//   init                      cuInit + a context on device 0
//   ctx:D                     a new current context on device D
//   alloc:FAMILY:ARGS         allocate one object (kept in a list, index printed as id=)
//       mem:B mem32:B managed:B async:B async_ptsz:B pool:B pool_ptsz:B hostpool:B
//       locpool:TYPE:ID:B (a new pool at CUmemLocation {TYPE, ID}; rc = the create's if it fails)
//       defpool:ORD:B getpool:ORD:B (cuDeviceGetDefaultMemPool / cuDeviceGetMemPool of ordinal ORD)
//       vmm:B vmmhost:B vmmdev:ID:B pitch:W:H pitch32:W:H array:W:H array32:W:H
//       array3d:W:H:D array3d32:W:H:D mipmap:W:H:LEVELS hostreg:B allochost:B
//   free:ID | freeall         free one object / all objects (each by its family's free)
//   retain:ID | release:ID    cuMemRetainAllocationHandle / an extra cuMemRelease on a VMM object
//   fill:FAMILY:B             allocate B-byte objects until the first failure: count= rc=
//   meminfo | meminfo32 | totalmem   cuMemGetInfo_v2 / cuMemGetInfo / cuDeviceTotalMem_v2(0)
//   inject:SYMBOL:CODE:COUNT  make the fake driver fail SYMBOL (see fake_cuda.h)
//   route:ROUTE:NAME[:VERSION:FLAGS]   resolve NAME; prints who owns the result:
//       shim:<symbol>, driver:<symbol>, other:<symbol> or null. ROUTE is one of direct, dlsym,
//       dlsym_default, dlsym_next, dlvsym, gpa1 (cuGetProcAddress), gpa2 (cuGetProcAddress_v2)
//   invoke:ROUTE:NAME:VERSION:FLAGS    resolve, call it with harmless arguments, print the driver
//       entry point the call reached (the fake's last call) and rc
//   launches                  call every launch and capture entry point once, directly
//   forkfill:N:B              fork N children that allocate B-byte cuMemAlloc_v2 blocks until the
//                             first failure, all at once; prints their counts, then waits (as wait)
//   stress:SEED:MAXB          allocate/free random sizes through several families forever
//   kernels:MS:US:GOFILE      wait until GOFILE exists, then for MS ms of wall time: cuLaunchKernel
//                             of a US us kernel (the fake's simulated clock), then cuCtxSynchronize
//                             (a synchronous kernel of that length); prints
//                             "kernels count=N"
//   flood:US:BATCH:STREAMS:GRAPHK:GOFILE   a tenant that floods the GPU: kernels of US us on the
//                             fake's simulated clock; waits until GOFILE holds "START END" (CLOCK_MONOTONIC
//                             ns), then from START to END launches round robin on STREAMS streams
//                             (cuLaunchKernel, or cuGraphLaunch of a graph of GRAPHK kernels when
//                             GRAPHK > 0), with cuCtxSynchronize after every BATCH launches (0: never;
//                             the stream's bounded queue holds it back); prints "flood launches=N
//                             failures=F busy_us=<device time its kernels got in [START, END)>"
//   launch:N                  N cuLaunchKernel on the default stream: "launch n=N failures=F"
//   drivercalls:W:N[:STREAM[:ptsz]]   W warm-up cuLaunchKernel (or _ptsz) calls on stream handle
//                             STREAM (default 0), then N more, counting every driver entry point the
//                             fake saw during the N: "drivercalls n=N launch=<calls of the launch
//                             entry point> other=<all other calls> ns_per=<wall ns per launch>
//                             calls=<name>:<count>,..." (the other entry points that were called)
//   ctxswitch:MODE:ROUTE:N    switch the current context between ordinals 0 and 1 while launching
//                             (cuLaunchKernel): each round 3 launches on ordinal 1 and 1 on ordinal 0.
//                             The context entry points come through ROUTE (direct, dlsym, ...: the
//                             symbols cuCtxCreate_v2, cuCtxSetCurrent, ...; gpa1/gpa2: the base names
//                             at CUDA 13.0, as the runtime asks). MODE: set (the primary contexts of
//                             0 and 1, cuCtxSetCurrent before each run of launches), pushpop (a
//                             context on 1 pushed and popped over the current one, e.g. init's on 0),
//                             destroy (a new context on 1 each round, destroyed after its launches),
//                             threads (two threads, each with a new context on its own ordinal, one
//                             launching 3N times and one N times, at once). Prints "ctxswitch
//                             launches=L failures=F getdevice=<cuCtxGetDevice calls meanwhile>"
//   capture:N                 begin a capture on a stream, N cuLaunchKernel and one cuGraphLaunch
//                             on it, end the capture: "capture n=N failures=F"
//   exec:A,B,...              exec this program again (same pid) with the commands A B ...
//   graph:SPEC                build a graph: k = kernel node, e = empty node, (SPEC) = child graph
//                             node, e.g. "kkkkk(kk(k))e": "graph id=G rc=R"
//   ginst:G:VARIANT[:COUNT]   instantiate graph G COUNT times (default 1) through cuGraphInstantiate
//                             (v1), _v2 (v2), WithFlags (flags), WithParams (params, params_ptsz):
//                             "ginst id=<last exec> rc=R"
//   glaunch:E:N[:ptsz]        cuGraphLaunch(_ptsz) exec E (an index, null or bogus) N times:
//                             "glaunch n=N failures=F rc=<last> ran=<kernel nodes the fake ran>"
//   gexecdestroy:E | gdestroy:G   cuGraphExecDestroy / cuGraphDestroy: "... rc=R"
//   wait                      print "wait ready" and block until stdin reaches EOF
//   clone:B                   raw clone(2) with SIGCHLD (no fork(): no pthread_atfork handlers);
//                             the child allocates B bytes (cuMemAlloc_v2), prints "clone child
//                             rc=R", blocks until stdin reaches EOF and exits; the parent waits
//                             for the child's line, prints "clone pid=<child>" and goes on
//   daemonize                 double fork (setsid between): the grandchild runs the remaining
//                             commands; the original process waits for its `detach` and exits 0
//   detach                    (in a daemonized grandchild) lets the original process exit
//   selfkill                  SIGKILL this process (nothing is released)
//   pid                       "pid value=<getpid()>"
//   clock                     "clock ns=<CLOCK_MONOTONIC in ns>" (for tests that time what follows)
//   counter:T:G:B             hostile: map tenant T's file in the TESSERA_SHIM_COUNTERS folder
//                             read-write and set its reservation counter on node GPU G to B bytes
//                             (T = an index, or self: TESSERA_SHIM_TENANT): "counter rc=0 was=<bytes
//                             it said>"; "counter rc=1 errno=<E>": the file could not be opened
//                             (EACCES: another uid's) or mapped, or T/G are out of range
//   driver2:PATH:B            hostile: dlopen a second copy of the driver from PATH (another file
//                             name, so the shim does not know it), cuInit, a context on device 0 and
//                             cuMemAlloc_v2 of B bytes through it: "driver2 rc=R" (R=-1: not loaded)
//   poke:ID:B                 write 0xA5 into the first B bytes of object ID (fake memory is host memory)
//   audit:0|1                 the fake's free audit (counts nonzero bytes of blocks as they are freed)
//   freeon:ID:STREAM          free object ID (async or async_ptsz family) on stream handle STREAM
//   scrubinfo                 "scrubinfo dirty=<audited nonzero bytes> memset=<last memset entry point>
//                             id=<object it hit, -1> bytes=B stream=S sync=N async=N async_ptsz=N"
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tessera/enforce/cuda_abi.h"
#include "tessera/enforce/segment.h"
#include "tests/shim/expected_entry_points.h"
#include "tests/testing/fake_cuda/fake_cuda.h"

using namespace tessera::cuabi;  // NOLINT

// The driver entry points the probe calls directly (bound by the dynamic linker: with the shim
// preloaded, to the shim's wrappers).
extern "C" {
CUresult cuInit(unsigned int);
CUresult cuCtxCreate_v2(CUcontext*, unsigned int, CUdevice);
CUresult cuMemAlloc(CUdeviceptr_v1*, unsigned int);
CUresult cuMemAlloc_v2(CUdeviceptr*, size_t);
CUresult cuMemAllocPitch(CUdeviceptr_v1*, unsigned int*, unsigned int, unsigned int, unsigned int);
CUresult cuMemAllocPitch_v2(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
CUresult cuMemAllocManaged(CUdeviceptr*, size_t, unsigned int);
CUresult cuMemFree(CUdeviceptr_v1);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemAllocAsync(CUdeviceptr*, size_t, CUstream);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr*, size_t, CUstream);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
CUresult cuMemFreeAsync(CUdeviceptr, CUstream);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr, CUstream);
CUresult cuMemPoolCreate(CUmemoryPool*, const CUmemPoolProps*);
CUresult cuDeviceGetDefaultMemPool(CUmemoryPool*, CUdevice);
CUresult cuDeviceGetMemPool(CUmemoryPool*, CUdevice);
CUresult cuMemCreate(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long);
CUresult cuMemRelease(CUmemGenericAllocationHandle);
CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle*, void*);
CUresult cuArrayCreate(CUarray*, const CUDA_ARRAY_DESCRIPTOR_v1*);
CUresult cuArrayCreate_v2(CUarray*, const CUDA_ARRAY_DESCRIPTOR*);
CUresult cuArray3DCreate(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR_v1*);
CUresult cuArray3DCreate_v2(CUarray*, const CUDA_ARRAY3D_DESCRIPTOR*);
CUresult cuArrayDestroy(CUarray);
CUresult cuMipmappedArrayCreate(CUmipmappedArray*, const CUDA_ARRAY3D_DESCRIPTOR*, unsigned int);
CUresult cuMipmappedArrayDestroy(CUmipmappedArray);
CUresult cuMemGetInfo(unsigned int*, unsigned int*);
CUresult cuMemGetInfo_v2(size_t*, size_t*);
CUresult cuDeviceTotalMem_v2(size_t*, CUdevice);
CUresult cuMemHostRegister_v2(void*, size_t, unsigned int);
CUresult cuMemHostUnregister(void*);
CUresult cuMemAllocHost_v2(void**, size_t);
CUresult cuMemFreeHost(void*);
CUresult cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        CUstream, void**, void**);
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
CUresult cuLaunchKernelEx(const CUlaunchConfig*, CUfunction, void**, void**);
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig*, CUfunction, void**, void**);
CUresult cuLaunchCooperativeKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, CUstream, void**);
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                        unsigned, unsigned, CUstream, void**);
CUresult cuGraphLaunch(CUgraphExec, CUstream);
CUresult cuGraphLaunch_ptsz(CUgraphExec, CUstream);
CUresult cuGraphCreate(CUgraph*, unsigned int);
CUresult cuGraphAddKernelNode_v2(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, const CUDA_KERNEL_NODE_PARAMS*);
CUresult cuGraphAddChildGraphNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t, CUgraph);
CUresult cuGraphAddEmptyNode(CUgraphNode*, CUgraph, const CUgraphNode*, size_t);
CUresult cuGraphInstantiate(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
CUresult cuGraphInstantiate_v2(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
CUresult cuGraphInstantiateWithFlags(CUgraphExec*, CUgraph, unsigned long long);
CUresult cuGraphInstantiateWithParams(CUgraphExec*, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS*);
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec*, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS*);
CUresult cuGraphExecDestroy(CUgraphExec);
CUresult cuGraphDestroy(CUgraph);
CUresult cuStreamBeginCapture_v2(CUstream, CUstreamCaptureMode);
CUresult cuStreamEndCapture(CUstream, CUgraph*);
CUresult cuStreamIsCapturing(CUstream, CUstreamCaptureStatus*);
CUresult cuCtxSynchronize(void);
CUresult cuGetProcAddress(const char*, void**, int, cuuint64_t);
CUresult cuGetProcAddress_v2(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
}

// Route 1 for every expected variant: its address as the dynamic linker binds it for this program.
// asm labels let these untyped declarations name the same symbols as the typed ones above.
#define PROBE_DIRECT_DECL(symbol, base, version, per_thread) \
  extern "C" void probe_direct_##symbol() __asm__(#symbol);
TESSERA_EXPECTED_HOOKS(PROBE_DIRECT_DECL)
#undef PROBE_DIRECT_DECL

namespace {
struct DirectSymbol {
  const char* name;
  void* address;
};
const DirectSymbol kDirectSymbols[] = {
#define PROBE_DIRECT_ROW(symbol, base, version, per_thread) \
  {#symbol, reinterpret_cast<void*>(&probe_direct_##symbol)},
    TESSERA_EXPECTED_HOOKS(PROBE_DIRECT_ROW)
#undef PROBE_DIRECT_ROW
};
}  // namespace

namespace {

struct Object {
  std::string family;
  unsigned long long value = 0;  // pointer, handle or array
  bool live = false;
};
std::vector<Object> g_objects;
CUmemoryPool g_device_pool = nullptr;
const char* g_reached = nullptr;  // the driver entry point an invoke reached (before cleanup calls)
CUmemoryPool g_host_pool = nullptr;

unsigned long long MonoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1'000'000'000ULL + static_cast<unsigned long long>(ts.tv_nsec);
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  for (;;) {
    std::size_t end = s.find(sep, pos);
    out.push_back(s.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (end == std::string::npos) return out;
    pos = end + 1;
  }
}

unsigned long long Num(const std::vector<std::string>& a, std::size_t i) {
  return i < a.size() ? std::strtoull(a[i].c_str(), nullptr, 0) : 0;
}

CUmemoryPool Pool(bool host) {
  CUmemoryPool& pool = host ? g_host_pool : g_device_pool;
  if (pool == nullptr) {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    cuMemPoolCreate(&pool, &props);
  }
  return pool;
}

// Allocates one object of `family` from the argument list starting at a[first].
CUresult Allocate(const std::string& family, const std::vector<std::string>& a, std::size_t first,
                  Object* obj, std::string* extra) {
  obj->family = family;
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  const unsigned long long n = Num(a, first);
  if (family == "mem") {
    CUdeviceptr p = 0;
    rc = cuMemAlloc_v2(&p, n);
    obj->value = p;
  } else if (family == "mem32") {
    CUdeviceptr_v1 p = 0;
    rc = cuMemAlloc(&p, static_cast<unsigned int>(n));
    obj->value = p;
  } else if (family == "managed") {
    CUdeviceptr p = 0;
    rc = cuMemAllocManaged(&p, n, 1);
    obj->value = p;
  } else if (family == "async" || family == "async_ptsz") {
    CUdeviceptr p = 0;
    rc = family == "async" ? cuMemAllocAsync(&p, n, nullptr) : cuMemAllocAsync_ptsz(&p, n, nullptr);
    obj->value = p;
  } else if (family == "pool" || family == "pool_ptsz" || family == "hostpool") {
    CUdeviceptr p = 0;
    CUmemoryPool pool = Pool(family == "hostpool");
    rc = family == "pool_ptsz" ? cuMemAllocFromPoolAsync_ptsz(&p, n, pool, nullptr)
                               : cuMemAllocFromPoolAsync(&p, n, pool, nullptr);
    obj->value = p;
  } else if (family == "locpool" || family == "defpool" || family == "getpool") {
    CUmemoryPool pool = nullptr;
    std::size_t size_at = first + 1;
    if (family == "locpool") {
      CUmemPoolProps props{};
      props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      props.location.type = static_cast<CUmemLocationType>(n);
      props.location.id = static_cast<int>(Num(a, first + 1));
      rc = cuMemPoolCreate(&pool, &props);
      size_at = first + 2;
    } else {
      rc = family == "defpool" ? cuDeviceGetDefaultMemPool(&pool, static_cast<CUdevice>(n))
                               : cuDeviceGetMemPool(&pool, static_cast<CUdevice>(n));
    }
    CUdeviceptr p = 0;
    if (rc == CUDA_SUCCESS) rc = cuMemAllocFromPoolAsync(&p, Num(a, size_at), pool, nullptr);
    obj->value = p;
  } else if (family == "vmm" || family == "vmmhost" || family == "vmmdev") {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = family == "vmmhost" ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    unsigned long long bytes = n;
    if (family == "vmmdev") {
      prop.location.id = static_cast<int>(n);
      bytes = Num(a, first + 1);
    }
    CUmemGenericAllocationHandle h = 0;
    rc = cuMemCreate(&h, bytes, &prop, 0);
    obj->value = h;
  } else if (family == "pitch") {
    CUdeviceptr p = 0;
    size_t pitch = 0;
    rc = cuMemAllocPitch_v2(&p, &pitch, n, Num(a, first + 1), 4);
    obj->value = p;
    *extra = " pitch=" + std::to_string(pitch);
  } else if (family == "pitch32") {
    CUdeviceptr_v1 p = 0;
    unsigned int pitch = 0;
    rc = cuMemAllocPitch(&p, &pitch, static_cast<unsigned>(n), static_cast<unsigned>(Num(a, first + 1)), 4);
    obj->value = p;
    *extra = " pitch=" + std::to_string(pitch);
  } else if (family == "array" || family == "array32") {
    CUarray arr = nullptr;
    if (family == "array") {
      CUDA_ARRAY_DESCRIPTOR d{n, Num(a, first + 1), CU_AD_FORMAT_FLOAT, 1};
      rc = cuArrayCreate_v2(&arr, &d);
    } else {
      CUDA_ARRAY_DESCRIPTOR_v1 d{static_cast<unsigned>(n), static_cast<unsigned>(Num(a, first + 1)),
                                 CU_AD_FORMAT_FLOAT, 1};
      rc = cuArrayCreate(&arr, &d);
    }
    obj->value = reinterpret_cast<uintptr_t>(arr);
  } else if (family == "array3d" || family == "array3d32") {
    CUarray arr = nullptr;
    if (family == "array3d") {
      CUDA_ARRAY3D_DESCRIPTOR d{n, Num(a, first + 1), Num(a, first + 2), CU_AD_FORMAT_FLOAT, 1, 0};
      rc = cuArray3DCreate_v2(&arr, &d);
    } else {
      CUDA_ARRAY3D_DESCRIPTOR_v1 d{static_cast<unsigned>(n), static_cast<unsigned>(Num(a, first + 1)),
                                   static_cast<unsigned>(Num(a, first + 2)), CU_AD_FORMAT_FLOAT, 1, 0};
      rc = cuArray3DCreate(&arr, &d);
    }
    obj->value = reinterpret_cast<uintptr_t>(arr);
  } else if (family == "mipmap") {
    CUmipmappedArray arr = nullptr;
    CUDA_ARRAY3D_DESCRIPTOR d{n, Num(a, first + 1), 0, CU_AD_FORMAT_FLOAT, 1, 0};
    rc = cuMipmappedArrayCreate(&arr, &d, static_cast<unsigned>(Num(a, first + 2)));
    obj->value = reinterpret_cast<uintptr_t>(arr);
  } else if (family == "hostreg") {
    void* p = std::malloc(n);
    rc = cuMemHostRegister_v2(p, n, 0);
    obj->value = reinterpret_cast<uintptr_t>(p);
  } else if (family == "allochost") {
    void* p = nullptr;
    rc = cuMemAllocHost_v2(&p, n);
    obj->value = reinterpret_cast<uintptr_t>(p);
  }
  obj->live = rc == CUDA_SUCCESS;
  return rc;
}

CUresult Free(Object& o) {
  if (!o.live) return CUDA_SUCCESS;
  CUresult rc = CUDA_ERROR_INVALID_VALUE;
  const std::string& f = o.family;
  if (f == "mem" || f == "managed" || f == "pitch") {
    rc = cuMemFree_v2(o.value);
  } else if (f == "mem32" || f == "pitch32") {
    rc = cuMemFree(static_cast<CUdeviceptr_v1>(o.value));
  } else if (f == "async" || f == "pool" || f == "hostpool" || f == "locpool" || f == "defpool" ||
             f == "getpool") {
    rc = cuMemFreeAsync(o.value, nullptr);
  } else if (f == "async_ptsz" || f == "pool_ptsz") {
    rc = cuMemFreeAsync_ptsz(o.value, nullptr);
  } else if (f == "vmm" || f == "vmmhost" || f == "vmmdev") {
    rc = cuMemRelease(o.value);
  } else if (f == "array" || f == "array32" || f == "array3d" || f == "array3d32") {
    rc = cuArrayDestroy(reinterpret_cast<CUarray>(o.value));
  } else if (f == "mipmap") {
    rc = cuMipmappedArrayDestroy(reinterpret_cast<CUmipmappedArray>(o.value));
  } else if (f == "hostreg") {
    rc = cuMemHostUnregister(reinterpret_cast<void*>(o.value));
    std::free(reinterpret_cast<void*>(o.value));
  } else if (f == "allochost") {
    rc = cuMemFreeHost(reinterpret_cast<void*>(o.value));
  }
  if (rc == CUDA_SUCCESS) o.live = false;
  return rc;
}

std::string Owner(void* p) {
  if (p == nullptr) return "null";
  Dl_info info{};
  if (dladdr(p, &info) == 0 || info.dli_sname == nullptr) return "other:?";
  std::string file = info.dli_fname ? info.dli_fname : "";
  std::string who = file.find("tessera-shim") != std::string::npos ? "shim"
                    : file.find("libcuda") != std::string::npos   ? "driver"
                                                                  : "other";
  // dladdr reports the nearest symbol; insist on an exact match so "close enough" never passes.
  if (info.dli_saddr != p) return who + ":?";
  return who + ":" + info.dli_sname;
}

struct Resolved {
  void* p = nullptr;
  CUresult rc = CUDA_SUCCESS;
  int status = -1;
};

Resolved Resolve(const std::string& route, const std::string& name, int version, cuuint64_t flags) {
  Resolved r;
  if (route == "direct") {
    for (const auto& d : kDirectSymbols) {
      if (name == d.name) r.p = d.address;
    }
  } else if (route == "dlsym" || route == "dlvsym") {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    r.p = route == "dlsym" ? dlsym(h, name.c_str()) : dlvsym(h, name.c_str(), "TESSERA_FAKE_CUDA_1");
    if (h) dlclose(h);
  } else if (route == "dlsym_default") {
    r.p = dlsym(RTLD_DEFAULT, name.c_str());
  } else if (route == "dlsym_next") {
    r.p = dlsym(RTLD_NEXT, name.c_str());
  } else if (route == "gpa1") {
    r.rc = cuGetProcAddress(name.c_str(), &r.p, version, flags);
  } else if (route == "gpa2") {
    CUdriverProcAddressQueryResult st = -1;
    r.rc = cuGetProcAddress_v2(name.c_str(), &r.p, version, flags, &st);
    r.status = st;
  }
  return r;
}

// Calls an entry point of base `name` through `p` with harmless arguments.
CUresult Invoke(const std::string& name, int version, void* p) {
  if (p == nullptr) return CUDA_ERROR_NOT_FOUND;
  if (name == "cuLaunchKernel") {
    return reinterpret_cast<PFN_cuLaunchKernel_v4000>(p)(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
  }
  if (name == "cuLaunchKernelEx") {
    CUlaunchConfig cfg{};
    return reinterpret_cast<PFN_cuLaunchKernelEx_v11060>(p)(&cfg, nullptr, nullptr, nullptr);
  }
  if (name == "cuLaunchCooperativeKernel") {
    return reinterpret_cast<PFN_cuLaunchCooperativeKernel_v9000>(p)(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr);
  }
  if (name == "cuGraphLaunch") return reinterpret_cast<PFN_cuGraphLaunch_v10000>(p)(nullptr, nullptr);
  if (name == "cuMemAllocAsync") {
    CUdeviceptr d = 0;
    CUresult rc = reinterpret_cast<PFN_cuMemAllocAsync_v11020>(p)(&d, 4096, nullptr);
    if (rc == CUDA_SUCCESS) g_objects.push_back(Object{"async", d, true});
    return rc;
  }
  if (name == "cuMemAlloc" && version >= 3020) {
    CUdeviceptr d = 0;
    CUresult rc = reinterpret_cast<PFN_cuMemAlloc_v3020>(p)(&d, 4096);
    if (rc == CUDA_SUCCESS) g_objects.push_back(Object{"mem", d, true});
    return rc;
  }
  if (name == "cuStreamBeginCapture") {
    auto* stream = reinterpret_cast<CUstream>(0x5000 + version);
    CUresult rc = version >= 10010
                      ? reinterpret_cast<PFN_cuStreamBeginCapture_v10010>(p)(stream, CU_STREAM_CAPTURE_MODE_GLOBAL)
                      : reinterpret_cast<PFN_cuStreamBeginCapture_v10000>(p)(stream);
    g_reached = tessera_fake_cuda_last_call();
    CUgraph g = nullptr;
    cuStreamEndCapture(stream, &g);
    return rc;
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

// --- graphs ---------------------------------------------------------------------------------------
std::vector<CUgraph> g_graphs;
std::vector<CUgraphExec> g_execs;

// Builds a graph from SPEC: k = kernel node, e = empty node, (...) = child graph node (the child is
// built, added (the driver clones it) and destroyed). Advances *pos past what it consumed.
CUresult BuildGraph(const std::string& spec, std::size_t* pos, CUgraph* out) {
  CUgraph g = nullptr;
  CUresult rc = cuGraphCreate(&g, 0);
  if (rc != CUDA_SUCCESS) return rc;
  while (*pos < spec.size() && spec[*pos] != ')') {
    const char c = spec[(*pos)++];
    CUgraphNode node = nullptr;
    if (c == 'k') {
      CUDA_KERNEL_NODE_PARAMS params{};
      params.gridDimX = params.gridDimY = params.gridDimZ = 1;
      params.blockDimX = params.blockDimY = params.blockDimZ = 1;
      rc = cuGraphAddKernelNode_v2(&node, g, nullptr, 0, &params);
    } else if (c == 'e') {
      rc = cuGraphAddEmptyNode(&node, g, nullptr, 0);
    } else if (c == '(') {
      CUgraph child = nullptr;
      rc = BuildGraph(spec, pos, &child);
      if (rc == CUDA_SUCCESS && (*pos >= spec.size() || spec[(*pos)++] != ')')) rc = CUDA_ERROR_INVALID_VALUE;
      if (rc == CUDA_SUCCESS) rc = cuGraphAddChildGraphNode(&node, g, nullptr, 0, child);
      if (child != nullptr) cuGraphDestroy(child);
    } else {
      rc = CUDA_ERROR_INVALID_VALUE;
    }
    if (rc != CUDA_SUCCESS) break;
  }
  if (rc != CUDA_SUCCESS) {
    cuGraphDestroy(g);
    return rc;
  }
  *out = g;
  return CUDA_SUCCESS;
}

CUresult Instantiate(const std::string& variant, CUgraph g, CUgraphExec* exec) {
  if (variant == "v1") return cuGraphInstantiate(exec, g, nullptr, nullptr, 0);
  if (variant == "v2") return cuGraphInstantiate_v2(exec, g, nullptr, nullptr, 0);
  if (variant == "flags") return cuGraphInstantiateWithFlags(exec, g, 0);
  CUDA_GRAPH_INSTANTIATE_PARAMS params{};
  if (variant == "params") return cuGraphInstantiateWithParams(exec, g, &params);
  if (variant == "params_ptsz") return cuGraphInstantiateWithParams_ptsz(exec, g, &params);
  return CUDA_ERROR_INVALID_VALUE;
}

// An exec by index, or "null", or "bogus" (a handle no driver handed out).
CUgraphExec ExecArg(const std::string& a) {
  if (a == "null") return nullptr;
  if (a == "bogus") return reinterpret_cast<CUgraphExec>(static_cast<uintptr_t>(0x7e57e0));
  const std::size_t i = std::strtoull(a.c_str(), nullptr, 0);
  return i < g_execs.size() ? g_execs[i] : nullptr;
}

void WaitForEof() {
  std::printf("wait ready\n");
  std::fflush(stdout);
  char buf[64];
  while (read(0, buf, sizeof(buf)) > 0) {
  }
}

[[noreturn]] void Stress(unsigned seed, unsigned long long max_bytes) {
  std::mt19937_64 rng(seed);
  std::vector<Object> live;
  bool announced = false;
  const char* families[] = {"mem", "async", "vmm", "pitch", "array", "managed", "pool"};
  for (;;) {
    if (!live.empty() && (rng() % 3 == 0 || live.size() > 64)) {
      std::size_t i = rng() % live.size();
      Free(live[i]);
      live[i] = live.back();
      live.pop_back();
      continue;
    }
    std::string fam = families[rng() % 7];
    unsigned long long bytes = 1 + rng() % max_bytes;
    std::vector<std::string> args{"", "", std::to_string(bytes), "16"};
    if (fam == "vmm") args[2] = std::to_string((1 + rng() % 4) << 21);
    Object o;
    std::string extra;
    if (Allocate(fam, args, 2, &o, &extra) == CUDA_SUCCESS) {
      live.push_back(o);
      if (!announced) {  // the slot is claimed and holds memory: ready to be killed
        std::printf("stress started\n");
        std::fflush(stdout);
        announced = true;
      }
    }
  }
}

void ForkFill(int n, unsigned long long bytes) {
  int go[2], report[2], hold[2];
  if (pipe(go) != 0 || pipe(report) != 0 || pipe(hold) != 0) std::exit(3);
  std::vector<pid_t> kids;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      close(go[1]);
      close(report[0]);
      close(hold[1]);
      char c;
      if (read(go[0], &c, 1) != 1) _exit(4);
      long count = 0;
      for (;;) {
        CUdeviceptr p = 0;
        if (cuMemAlloc_v2(&p, bytes) != CUDA_SUCCESS) break;
        ++count;
      }
      if (write(report[1], &count, sizeof(count)) != static_cast<ssize_t>(sizeof(count))) _exit(5);
      while (read(hold[0], &c, 1) > 0) {
      }
      std::exit(0);  // normal exit: the shim releases this child's reservations
    }
    kids.push_back(pid);
  }
  close(go[0]);
  close(report[1]);
  close(hold[0]);
  std::string all(static_cast<std::size_t>(n), 'g');
  if (write(go[1], all.data(), all.size()) != static_cast<ssize_t>(all.size())) std::exit(6);
  long total = 0;
  std::string counts;
  for (int i = 0; i < n; ++i) {
    long c = 0;
    if (read(report[0], &c, sizeof(c)) != static_cast<ssize_t>(sizeof(c))) std::exit(7);
    total += c;
    counts += (counts.empty() ? "" : ",") + std::to_string(c);
  }
  std::printf("forkfill counts=%s total=%ld\n", counts.c_str(), total);
  WaitForEof();
  close(hold[1]);
  for (pid_t k : kids) waitpid(k, nullptr, 0);
}

// clone(2) without glibc's fork(): the child runs no pthread_atfork handler.
void CloneChild(unsigned long long bytes) {
  int report[2];
  if (pipe(report) != 0) std::exit(3);
  std::fflush(stdout);
  const long pid = syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid < 0) std::exit(4);
  if (pid == 0) {
    close(report[0]);
    CUdeviceptr p = 0;
    const CUresult rc = cuMemAlloc_v2(&p, bytes);
    std::printf("clone child rc=%d\n", rc);
    std::fflush(stdout);
    char c = 'r';
    if (write(report[1], &c, 1) != 1) _exit(5);
    char buf[64];
    while (read(0, buf, sizeof(buf)) > 0) {
    }
    std::exit(0);  // normal exit: the shim releases the child's own reservations
  }
  close(report[1]);
  char c;
  if (read(report[0], &c, 1) != 1) std::exit(6);
  close(report[0]);
  std::printf("clone pid=%ld\n", pid);
}

int g_detach_fd = -1;  // a daemonized grandchild's end of the pipe the original process waits on

// The original process waits for the grandchild's `detach` (or its exit), then exits 0.
void Daemonize() {
  int done[2];
  if (pipe(done) != 0) std::exit(3);
  std::fflush(stdout);
  const pid_t child = fork();
  if (child < 0) std::exit(4);
  if (child > 0) {
    close(done[1]);
    char c;
    while (read(done[0], &c, 1) < 0) {
    }
    waitpid(child, nullptr, 0);
    std::exit(0);
  }
  setsid();
  const pid_t grandchild = fork();
  if (grandchild < 0) _exit(4);
  if (grandchild > 0) _exit(0);
  close(done[0]);
  g_detach_fd = done[1];
}

}  // namespace

// counter:T:G:B (see the usage comment): what a tenant that writes a counters file does: it maps
// tenant T's file in the counters folder read-write and stores B in its counter of GPU G. A file
// it may not write: "counter rc=1 errno=<errno of open>".
void SetCounter(const std::string& who, int gpu, unsigned long long bytes) {
  const char* dir = std::getenv("TESSERA_SHIM_COUNTERS");
  const char* tenant = who == "self" ? std::getenv("TESSERA_SHIM_TENANT") : who.c_str();
  const int t = tenant != nullptr ? std::atoi(tenant) : -1;
  if (dir == nullptr || t < 0 || t >= tessera::enforce::kMaxTenants || gpu < 0 || gpu >= tessera::enforce::kMaxGpus) {
    std::printf("counter rc=1 errno=0\n");
    return;
  }
  const std::string path = std::string(dir) + "/" + std::to_string(t);  // CountersFilePath
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    std::printf("counter rc=1 errno=%d\n", errno);
    return;
  }
  void* p = mmap(nullptr, sizeof(tessera::enforce::CounterSegment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED) {
    std::printf("counter rc=1 errno=%d\n", err);
    return;
  }
  auto* seg = static_cast<tessera::enforce::CounterSegment*>(p);
  const std::uint64_t was = seg->counters[gpu].word.exchange(bytes & tessera::enforce::kMaxCountedBytes);
  std::printf("counter rc=0 was=%llu\n", static_cast<unsigned long long>(was & tessera::enforce::kMaxCountedBytes));
  munmap(p, sizeof(tessera::enforce::CounterSegment));
}

// ctxswitch:MODE:ROUTE:N (see the usage comment).
void CtxSwitch(const std::string& mode, const std::string& route, long rounds) {
  auto fn = [&](const char* base, const char* symbol) -> void* {
    return route == "gpa1" || route == "gpa2" ? Resolve(route, base, 13000, 0).p : Resolve(route, symbol, 0, 0).p;
  };
  // cuGetProcAddress("cuCtxCreate", 13000) answers cuCtxCreate_v4 (CUctxCreateParams*, NULL here).
  const bool by_base = route == "gpa1" || route == "gpa2";
  static PFN_cuCtxCreate_v3020 create_v2;
  static PFN_cuCtxCreate_v12050 create_v4;
  create_v2 = by_base ? nullptr : reinterpret_cast<PFN_cuCtxCreate_v3020>(fn("cuCtxCreate", "cuCtxCreate_v2"));
  create_v4 = by_base ? reinterpret_cast<PFN_cuCtxCreate_v12050>(fn("cuCtxCreate", "cuCtxCreate_v4")) : nullptr;
  PFN_cuCtxCreate_v3020 create = nullptr;
  if (create_v2 != nullptr || create_v4 != nullptr) {
    create = [](CUcontext* pctx, unsigned int flags, CUdevice dev) {
      return create_v2 != nullptr ? create_v2(pctx, flags, dev) : create_v4(pctx, nullptr, flags, dev);
    };
  }
  auto set = reinterpret_cast<PFN_cuCtxSetCurrent_v4000>(fn("cuCtxSetCurrent", "cuCtxSetCurrent"));
  auto push = reinterpret_cast<PFN_cuCtxPushCurrent_v4000>(fn("cuCtxPushCurrent", "cuCtxPushCurrent_v2"));
  auto pop = reinterpret_cast<PFN_cuCtxPopCurrent_v4000>(fn("cuCtxPopCurrent", "cuCtxPopCurrent_v2"));
  auto retain = reinterpret_cast<PFN_cuDevicePrimaryCtxRetain_v7000>(
      fn("cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain"));
  auto destroy = reinterpret_cast<PFN_cuCtxDestroy_v4000>(fn("cuCtxDestroy", "cuCtxDestroy_v2"));
  if (create == nullptr || set == nullptr || push == nullptr || pop == nullptr || retain == nullptr ||
      destroy == nullptr) {
    std::printf("ctxswitch launches=0 failures=-1 getdevice=0\n");
    return;
  }
  auto launch = [](long n) {
    int bad = 0;
    for (long k = 0; k < n; ++k) bad += cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != 0;
    return bad;
  };
  const unsigned long long asked0 = tessera_fake_cuda_calls("cuCtxGetDevice");
  long launches = 0;
  int bad = 0;
  if (mode == "set") {
    CUcontext primary[2] = {};
    bad += (retain(&primary[0], 0) != 0) + (retain(&primary[1], 1) != 0);
    for (long r = 0; r < rounds; ++r) {
      bad += set(primary[1]) != 0;
      bad += launch(3);
      bad += set(primary[0]) != 0;
      bad += launch(1);
      launches += 4;
    }
  } else if (mode == "pushpop") {
    CUcontext on1 = nullptr;
    CUcontext popped = nullptr;
    bad += create(&on1, 0, 1) != 0;  // pushed: current
    bad += pop(&popped) != 0 || popped != on1;
    for (long r = 0; r < rounds; ++r) {
      bad += push(on1) != 0;
      bad += launch(3);
      bad += pop(&popped) != 0 || popped != on1;
      bad += launch(1);
      launches += 4;
    }
  } else if (mode == "destroy") {
    for (long r = 0; r < rounds; ++r) {
      CUcontext on1 = nullptr;
      bad += create(&on1, 0, 1) != 0;  // pushed over the current one
      bad += launch(3);
      bad += destroy(on1) != 0;  // popped: the one below is current again
      bad += launch(1);
      launches += 4;
    }
  } else if (mode == "threads") {
    struct Arg {
      PFN_cuCtxCreate_v3020 create;
      int ordinal;
      long n;
      int bad;
    };
    Arg args[2] = {{create, 0, rounds, 0}, {create, 1, 3 * rounds, 0}};
    auto body = [](void* p) -> void* {
      auto* a = static_cast<Arg*>(p);
      CUcontext ctx = nullptr;
      a->bad += a->create(&ctx, 0, a->ordinal) != 0;
      for (long k = 0; k < a->n; ++k)
        a->bad += cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != 0;
      return nullptr;
    };
    pthread_t threads[2];
    for (int t = 0; t < 2; ++t) pthread_create(&threads[t], nullptr, body, &args[t]);
    for (int t = 0; t < 2; ++t) pthread_join(threads[t], nullptr);
    bad += args[0].bad + args[1].bad;
    launches = 4 * rounds;
  } else {
    bad = -1;
  }
  std::printf("ctxswitch launches=%ld failures=%d getdevice=%llu\n", launches, bad,
              tessera_fake_cuda_calls("cuCtxGetDevice") - asked0);
}

// driver2:PATH:B (see the usage comment): allocation through a copy of the driver the shim does
// not know. dlsym on the copy's own handle is not one the shim substitutes.
void SecondDriver(const std::string& path, std::size_t bytes) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  auto init = h != nullptr ? reinterpret_cast<CUresult (*)(unsigned int)>(dlsym(h, "cuInit")) : nullptr;
  auto create =
      h != nullptr ? reinterpret_cast<CUresult (*)(CUcontext*, unsigned int, CUdevice)>(dlsym(h, "cuCtxCreate_v2"))
                   : nullptr;
  auto alloc = h != nullptr ? reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(dlsym(h, "cuMemAlloc_v2")) : nullptr;
  if (init == nullptr || create == nullptr || alloc == nullptr) {
    std::printf("driver2 rc=-1\n");
    return;
  }
  CUcontext ctx = nullptr;
  CUdeviceptr p = 0;
  CUresult rc = init(0);
  if (rc == CUDA_SUCCESS) rc = create(&ctx, 0, 0);
  if (rc == CUDA_SUCCESS) rc = alloc(&p, bytes);
  std::printf("driver2 rc=%d\n", static_cast<int>(rc));
}

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> a = Split(argv[i], ':');
    const std::string& cmd = a[0];
    if (cmd == "init") {
      CUresult r1 = cuInit(0);
      CUcontext ctx = nullptr;
      CUresult r2 = cuCtxCreate_v2(&ctx, 0, 0);
      std::printf("init rc=%d,%d\n", r1, r2);
    } else if (cmd == "ctx") {
      CUcontext ctx = nullptr;
      std::printf("ctx rc=%d\n", cuCtxCreate_v2(&ctx, 0, static_cast<int>(Num(a, 1))));
    } else if (cmd == "alloc") {
      Object o;
      std::string extra;
      CUresult rc = Allocate(a.size() > 1 ? a[1] : "", a, 2, &o, &extra);
      g_objects.push_back(o);
      std::printf("alloc family=%s rc=%d id=%zu%s\n", o.family.c_str(), rc, g_objects.size() - 1, extra.c_str());
    } else if (cmd == "free") {
      std::size_t id = Num(a, 1);
      CUresult rc = id < g_objects.size() ? Free(g_objects[id]) : CUDA_ERROR_INVALID_VALUE;
      std::printf("free id=%zu rc=%d\n", id, rc);
    } else if (cmd == "freeall") {
      int bad = 0;
      for (Object& o : g_objects) bad += Free(o) != CUDA_SUCCESS;
      std::printf("freeall failures=%d\n", bad);
    } else if (cmd == "retain" || cmd == "release") {
      std::size_t id = Num(a, 1);
      CUresult rc = CUDA_ERROR_INVALID_VALUE;
      if (id < g_objects.size()) {
        if (cmd == "retain") {
          CUmemGenericAllocationHandle h = 0;
          rc = cuMemRetainAllocationHandle(&h, reinterpret_cast<void*>(g_objects[id].value));
        } else {
          rc = cuMemRelease(g_objects[id].value);
        }
      }
      std::printf("%s id=%zu rc=%d\n", cmd.c_str(), id, rc);
    } else if (cmd == "fill") {
      long count = 0;
      CUresult rc = CUDA_SUCCESS;
      for (;;) {
        Object o;
        std::string extra;
        rc = Allocate(a[1], a, 2, &o, &extra);
        if (rc != CUDA_SUCCESS) break;
        g_objects.push_back(o);
        ++count;
      }
      std::printf("fill family=%s count=%ld rc=%d\n", a[1].c_str(), count, rc);
    } else if (cmd == "meminfo") {
      size_t f = 0, t = 0;
      CUresult rc = cuMemGetInfo_v2(&f, &t);
      std::printf("meminfo rc=%d free=%zu total=%zu\n", rc, f, t);
    } else if (cmd == "meminfo32") {
      unsigned int f = 0, t = 0;
      CUresult rc = cuMemGetInfo(&f, &t);
      std::printf("meminfo32 rc=%d free=%u total=%u\n", rc, f, t);
    } else if (cmd == "totalmem") {
      size_t t = 0;
      CUresult rc = cuDeviceTotalMem_v2(&t, 0);
      std::printf("totalmem rc=%d total=%zu\n", rc, t);
    } else if (cmd == "inject") {
      int r = tessera_fake_cuda_inject(a[1].c_str(), static_cast<int>(Num(a, 2)), static_cast<int>(std::atoi(a[3].c_str())));
      std::printf("inject rc=%d\n", r);
    } else if (cmd == "route" || cmd == "invoke") {
      int version = static_cast<int>(Num(a, 3));
      cuuint64_t flags = Num(a, 4);
      Resolved r = Resolve(a[1], a[2], version, flags);
      if (cmd == "route") {
        std::printf("route %s %s %d %llu rc=%d status=%d -> %s\n", a[1].c_str(), a[2].c_str(), version,
                    static_cast<unsigned long long>(flags), r.rc, r.status, Owner(r.p).c_str());
      } else {
        g_reached = nullptr;
        CUresult rc = Invoke(a[2], version, r.p);
        if (g_reached == nullptr) g_reached = tessera_fake_cuda_last_call();
        std::printf("invoke %s %s %d %llu rc=%d reached=%s via=%s\n", a[1].c_str(), a[2].c_str(), version,
                    static_cast<unsigned long long>(flags), rc, g_reached,
                    Owner(r.p).c_str());
      }
    } else if (cmd == "launches") {
      CUlaunchConfig cfg{};
      int bad = 0;
      bad += cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != 0;
      bad += cuLaunchKernel_ptsz(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != 0;
      bad += cuLaunchKernelEx(&cfg, nullptr, nullptr, nullptr) != 0;
      bad += cuLaunchKernelEx_ptsz(&cfg, nullptr, nullptr, nullptr) != 0;
      bad += cuLaunchCooperativeKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr) != 0;
      bad += cuLaunchCooperativeKernel_ptsz(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr) != 0;
      bad += cuGraphLaunch(nullptr, nullptr) != 0;
      bad += cuGraphLaunch_ptsz(nullptr, nullptr) != 0;
      auto* stream = reinterpret_cast<CUstream>(0x77);
      bad += cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) != 0;
      CUstreamCaptureStatus st = 0;
      bad += cuStreamIsCapturing(stream, &st) != 0 || st != CU_STREAM_CAPTURE_STATUS_ACTIVE;
      bad += cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr) != 0;  // captured
      CUgraph g = nullptr;
      bad += cuStreamEndCapture(stream, &g) != 0;
      std::printf("launches failures=%d\n", bad);
    } else if (cmd == "kernels") {
      const std::string go = a.size() > 3 ? a[3] : "";
      while (!go.empty() && access(go.c_str(), F_OK) != 0) usleep(100);
      const long us = static_cast<long>(Num(a, 2));
      tessera_fake_cuda_set_kernel_ns(static_cast<unsigned long long>(us) * 1000);
      struct timespec t0 {}, t1 {};
      clock_gettime(CLOCK_MONOTONIC, &t0);
      const double end_ms = static_cast<double>(Num(a, 1));
      long count = 0;
      for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6 >= end_ms) break;
        if (cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != 0) break;
        cuCtxSynchronize();  // the kernel runs US us on the fake's simulated device clock
        ++count;
      }
      std::printf("kernels count=%ld\n", count);
    } else if (cmd == "flood") {
      // flood:US:BATCH:STREAMS:GRAPHK:GOFILE (see the usage above).
      tessera_fake_cuda_set_kernel_ns(static_cast<unsigned long long>(Num(a, 1)) * 1000);
      const long batch = static_cast<long>(Num(a, 2));
      const long streams = std::max(1L, static_cast<long>(Num(a, 3)));
      const long graph_k = static_cast<long>(Num(a, 4));
      const std::string go = a.size() > 5 ? a[5] : "";
      unsigned long long start_ns = 0, end_ns = 0;
      for (;;) {
        FILE* f = std::fopen(go.c_str(), "r");
        if (f != nullptr) {
          const int got = std::fscanf(f, "%llu %llu", &start_ns, &end_ns);
          std::fclose(f);
          if (got == 2) break;
        }
        usleep(200);
      }
      CUgraphExec exec = nullptr;
      if (graph_k > 0) {
        CUgraph g = nullptr;
        std::size_t pos = 0;
        const std::string spec(static_cast<std::size_t>(graph_k), 'k');
        if (BuildGraph(spec, &pos, &g) != 0 || cuGraphInstantiateWithFlags(&exec, g, 0) != 0) {
          std::printf("flood failures=1\n");
          continue;
        }
      }
      while (MonoNs() < start_ns) usleep(100);
      long launches = 0;
      int bad = 0;
      while (MonoNs() < end_ns) {
        auto* stream = reinterpret_cast<CUstream>(static_cast<uintptr_t>(0x100 + launches % streams));
        bad += (graph_k > 0 ? cuGraphLaunch(exec, stream)
                            : cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr)) != 0;
        ++launches;
        if (batch > 0 && launches % batch == 0) bad += cuCtxSynchronize() != 0;
      }
      bad += cuCtxSynchronize() != 0;
      std::printf("flood launches=%ld failures=%d busy_us=%llu\n", launches, bad,
                  tessera_fake_cuda_busy_ns(start_ns, end_ns) / 1000);
    } else if (cmd == "launch") {
      const long n = static_cast<long>(Num(a, 1));
      int bad = 0;
      for (long k = 0; k < n; ++k) bad += cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != 0;
      std::printf("launch n=%ld failures=%d\n", n, bad);
    } else if (cmd == "drivercalls") {
      const long warm = static_cast<long>(Num(a, 1));
      const long n = static_cast<long>(Num(a, 2));
      auto* stream = reinterpret_cast<CUstream>(a.size() > 3 ? Num(a, 3) : 0);
      const bool ptsz = a.size() > 4 && a[4] == "ptsz";
      const char* launch_name = ptsz ? "cuLaunchKernel_ptsz" : "cuLaunchKernel";
      auto launch = [&] {
        return ptsz ? cuLaunchKernel_ptsz(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr)
                    : cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr);
      };
      int bad = 0;
      for (long k = 0; k < warm; ++k) bad += launch() != 0;
      std::vector<unsigned long long> before;
      for (int e = 0; tessera_fake_cuda_entry_name(e) != nullptr; ++e)
        before.push_back(tessera_fake_cuda_calls(tessera_fake_cuda_entry_name(e)));
      const unsigned long long t0 = MonoNs();
      for (long k = 0; k < n; ++k) bad += launch() != 0;
      const unsigned long long t1 = MonoNs();
      unsigned long long launched = 0, other = 0;
      std::string calls;
      for (int e = 0; e < static_cast<int>(before.size()); ++e) {
        const char* name = tessera_fake_cuda_entry_name(e);
        const unsigned long long d = tessera_fake_cuda_calls(name) - before[static_cast<std::size_t>(e)];
        if (d == 0) continue;
        if (std::strcmp(name, launch_name) == 0) {
          launched = d;
          continue;
        }
        other += d;
        calls += (calls.empty() ? "" : ",") + std::string(name) + ":" + std::to_string(d);
      }
      std::printf("drivercalls n=%ld launch=%llu other=%llu failures=%d ns_per=%.1f calls=%s\n", n, launched, other,
                  bad, n > 0 ? static_cast<double>(t1 - t0) / static_cast<double>(n) : 0.0,
                  calls.empty() ? "-" : calls.c_str());
    } else if (cmd == "ctxswitch") {
      CtxSwitch(a.size() > 1 ? a[1] : "", a.size() > 2 ? a[2] : "direct", static_cast<long>(Num(a, 3)));
    } else if (cmd == "capture") {
      const long n = static_cast<long>(Num(a, 1));
      auto* stream = reinterpret_cast<CUstream>(0x78);
      int bad = cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) != 0;
      for (long k = 0; k < n; ++k) bad += cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, stream, nullptr, nullptr) != 0;
      bad += cuGraphLaunch(nullptr, stream) != 0;
      CUgraph g = nullptr;
      bad += cuStreamEndCapture(stream, &g) != 0;
      std::printf("capture n=%ld failures=%d\n", n, bad);
    } else if (cmd == "graph") {
      std::size_t pos = 0;
      const std::string spec = a.size() > 1 ? a[1] : "";
      CUgraph g = nullptr;
      CUresult rc = BuildGraph(spec, &pos, &g);
      if (rc == CUDA_SUCCESS && pos != spec.size()) rc = CUDA_ERROR_INVALID_VALUE;  // unbalanced ')'
      g_graphs.push_back(g);
      std::printf("graph id=%zu rc=%d\n", g_graphs.size() - 1, rc);
    } else if (cmd == "ginst") {  // ginst:GRAPH:VARIANT[:COUNT] (COUNT execs of the graph)
      const std::size_t gid = Num(a, 1);
      const long count = a.size() > 3 ? static_cast<long>(Num(a, 3)) : 1;
      CUresult rc = gid < g_graphs.size() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
      for (long k = 0; k < count && rc == CUDA_SUCCESS; ++k) {
        CUgraphExec e = nullptr;
        rc = Instantiate(a.size() > 2 ? a[2] : "", g_graphs[gid], &e);
        if (rc == CUDA_SUCCESS) g_execs.push_back(e);
      }
      std::printf("ginst id=%zu rc=%d\n", g_execs.size() - 1, rc);
    } else if (cmd == "glaunch") {  // glaunch:EXEC:N[:ptsz]
      CUgraphExec e = ExecArg(a.size() > 1 ? a[1] : "null");
      const long n = static_cast<long>(Num(a, 2));
      const bool ptsz = a.size() > 3 && a[3] == "ptsz";
      const unsigned long long ran0 = tessera_fake_cuda_graph_kernels_run();
      int bad = 0;
      CUresult rc = CUDA_SUCCESS;
      for (long k = 0; k < n; ++k) {
        rc = ptsz ? cuGraphLaunch_ptsz(e, nullptr) : cuGraphLaunch(e, nullptr);
        bad += rc != CUDA_SUCCESS;
      }
      std::printf("glaunch n=%ld failures=%d rc=%d ran=%llu\n", n, bad, rc,
                  tessera_fake_cuda_graph_kernels_run() - ran0);
    } else if (cmd == "gexecdestroy") {
      CUgraphExec e = ExecArg(a.size() > 1 ? a[1] : "null");
      std::printf("gexecdestroy rc=%d\n", cuGraphExecDestroy(e));
    } else if (cmd == "gdestroy") {
      const std::size_t gid = Num(a, 1);
      std::printf("gdestroy rc=%d\n", gid < g_graphs.size() ? cuGraphDestroy(g_graphs[gid]) : CUDA_ERROR_INVALID_VALUE);
    } else if (cmd == "forkfill") {
      ForkFill(static_cast<int>(Num(a, 1)), Num(a, 2));
    } else if (cmd == "stress") {
      Stress(static_cast<unsigned>(Num(a, 1)), Num(a, 2));
    } else if (cmd == "exec") {  // exec:ARG1,ARG2,... replaces this image, same pid
      std::vector<std::string> rest = Split(argv[i] + 5, ',');
      std::vector<char*> args{argv[0]};
      for (std::string& r : rest) args.push_back(r.data());
      args.push_back(nullptr);
      std::fflush(stdout);
      execv("/proc/self/exe", args.data());
      std::printf("exec failed\n");
      return 3;
    } else if (cmd == "poke") {
      std::size_t id = Num(a, 1);
      bool ok = id < g_objects.size() && g_objects[id].live;
      if (ok) std::memset(reinterpret_cast<void*>(g_objects[id].value), 0xA5, Num(a, 2));
      std::printf("poke id=%zu rc=%d\n", id, ok ? 0 : 1);
    } else if (cmd == "audit") {
      tessera_fake_cuda_audit_frees(static_cast<int>(Num(a, 1)));
      std::printf("audit on=%d\n", static_cast<int>(Num(a, 1)));
    } else if (cmd == "freeon") {
      std::size_t id = Num(a, 1);
      CUresult rc = CUDA_ERROR_INVALID_VALUE;
      auto* stream = reinterpret_cast<CUstream>(static_cast<uintptr_t>(Num(a, 2)));
      if (id < g_objects.size() && g_objects[id].live) {
        Object& o = g_objects[id];
        rc = o.family == "async_ptsz" || o.family == "pool_ptsz" ? cuMemFreeAsync_ptsz(o.value, stream)
                                                                 : cuMemFreeAsync(o.value, stream);
        if (rc == CUDA_SUCCESS) o.live = false;
      }
      std::printf("freeon id=%zu rc=%d\n", id, rc);
    } else if (cmd == "scrubinfo") {
      unsigned long long ptr = 0, bytes = 0, stream = 0;
      const char* sym = tessera_fake_cuda_last_memset(&ptr, &bytes, &stream);
      long hit = -1;
      for (std::size_t k = 0; k < g_objects.size(); ++k) {
        if (*sym != '\0' && g_objects[k].value == ptr) hit = static_cast<long>(k);
      }
      std::printf("scrubinfo dirty=%llu memset=%s id=%ld bytes=%llu stream=%llu sync=%llu async=%llu async_ptsz=%llu\n",
                  tessera_fake_cuda_freed_dirty_bytes(), *sym ? sym : "none", hit, bytes, stream,
                  tessera_fake_cuda_calls("cuMemsetD8_v2"), tessera_fake_cuda_calls("cuMemsetD8Async"),
                  tessera_fake_cuda_calls("cuMemsetD8Async_ptsz"));
    } else if (cmd == "wait") {
      WaitForEof();
    } else if (cmd == "clone") {
      CloneChild(Num(a, 1));
    } else if (cmd == "daemonize") {
      Daemonize();
    } else if (cmd == "detach") {
      std::printf("detach rc=%d\n", g_detach_fd >= 0 ? 0 : 1);
      std::fflush(stdout);
      if (g_detach_fd >= 0) close(g_detach_fd);
      g_detach_fd = -1;
    } else if (cmd == "selfkill") {
      std::fflush(stdout);
      kill(getpid(), SIGKILL);
    } else if (cmd == "pid") {
      std::printf("pid value=%d\n", static_cast<int>(getpid()));
    } else if (cmd == "clock") {
      timespec ts{};
      clock_gettime(CLOCK_MONOTONIC, &ts);
      std::printf("clock ns=%lld\n", static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec);
    } else if (cmd == "counter") {
      SetCounter(a.size() > 1 ? a[1] : "", static_cast<int>(Num(a, 2)), Num(a, 3));
    } else if (cmd == "driver2") {
      SecondDriver(a.size() > 1 ? a[1] : "", Num(a, 2));
    } else {
      std::printf("error unknown command '%s'\n", argv[i]);
      return 2;
    }
  }
  return 0;
}
