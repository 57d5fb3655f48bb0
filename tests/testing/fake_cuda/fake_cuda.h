// Control API of the in-tree fake libcuda.so.1 (tests/testing/fake_cuda/fake_cuda.cc): what tests,
// the shim probe and the benchmark call to inject errors and to read the driver's own view.
// These functions are exported by the fake only; a program that uses them must link the fake.
//
// Configuration read once when the fake is loaded (environment):
//   TESSERA_FAKE_CUDA_DEVICES         number of devices (default 1, at most 8)
//   TESSERA_FAKE_CUDA_MEM_BYTES       device memory per device (default 16 GiB)
//   TESSERA_FAKE_CUDA_DRIVER_VERSION  the driver's CUDA version (default 13000); entry points whose
//                                     ABI is newer do not exist for cuGetProcAddress
//   TESSERA_FAKE_CUDA_PITCH_ALIGN     pitch alignment of cuMemAllocPitch (default 512)
//   TESSERA_FAKE_CUDA_SHARED          a file holding the per-device used/peak bytes, shared by every
//                                     process that names it (the device is a node-wide resource)
//   TESSERA_FAKE_CUDA_FAIL            SYMBOL:CODE[:COUNT][,...]: the exported entry point SYMBOL
//                                     returns CODE (a CUresult) for its next COUNT calls (default:
//                                     every call), e.g. "cuMemAlloc_v2:2:1"
//   TESSERA_FAKE_GPU_STATE            a folder: each process writes its device bytes to <folder>/<pid>
//                                     ("<node GPU> <bytes>" lines; CUDA_VISIBLE_DEVICES maps ordinals
//                                     to node GPUs), which the fake NVML reports as its processes; a
//                                     copy of the library loaded under another file name writes
//                                     <folder>/<pid>.<file name> (the fake NVML adds them up)
//   TESSERA_FAKE_CUDA_LOAD_DELAY_MS   the library's constructor sleeps this long (a slow dlopen)
//   TESSERA_FAKE_CUDA_KERNEL_NS       simulated duration of every kernel (default 0: launches take no
//                                     device time). With a duration, the device runs one command at a
//                                     time in submission order on a clock shared through
//                                     TESSERA_FAKE_CUDA_SHARED; events complete, and the synchronize
//                                     calls return, when the work submitted before them has run
//   TESSERA_FAKE_CUDA_QUEUE_DEPTH     unfinished launches a stream holds before the next launch blocks
//                                     the host (default 1024)
//   TESSERA_FAKE_CUDA_CALL_NS         charged mode: every exported driver entry point busy-waits this
//                                     many ns on the calling thread before it does anything (default
//                                     0: free), so that a driver call a wrapper adds costs what a real
//                                     driver call roughly costs (the H200's launch path: ~100-300 ns
//                                     per call) and shows in tessera_shim_bench; counts per entry point
//                                     are kept in either mode (tessera_fake_cuda_calls)
//
// Thread-safety: every function may be called from any thread.
#pragma once

extern "C" {
// Name of the last driver entry point this thread entered (e.g. "cuLaunchKernel_ptsz"), or "".
const char* tessera_fake_cuda_last_call(void);
// Number of calls of the exported entry point `symbol` in this process.
unsigned long long tessera_fake_cuda_calls(const char* symbol);
// Calls of every exported entry point together, in this process.
unsigned long long tessera_fake_cuda_total_calls(void);
// The name of entry point number `index` (0, 1, ...), or NULL past the last: with
// tessera_fake_cuda_calls, a test lists which entry points a piece of code called.
const char* tessera_fake_cuda_entry_name(int index);
// Charged mode from now on, in this process: every entry point busy-waits `ns` (0: off).
void tessera_fake_cuda_set_call_ns(unsigned long long ns);
// Makes `symbol` return `code` for its next `count` calls (count < 0: every call; 0: stop).
// Returns 0, or -1 if the fake has no such entry point.
int tessera_fake_cuda_inject(const char* symbol, int code, int count);
// Device memory the driver has handed out on `device` (all processes sharing the file), and the
// highest value seen.
unsigned long long tessera_fake_cuda_device_used(int device);
unsigned long long tessera_fake_cuda_device_peak(int device);
// Live device allocations of this process (pointers, VMM handles, arrays).
unsigned long long tessera_fake_cuda_live_allocations(void);
// The simulated duration of one kernel from now on, in this process (0: launches take no time).
void tessera_fake_cuda_set_kernel_ns(unsigned long long ns);
// Device time this process's kernels occupied within [from_ns, to_ns) of CLOCK_MONOTONIC.
unsigned long long tessera_fake_cuda_busy_ns(unsigned long long from_ns, unsigned long long to_ns);
// Kernel nodes this process's cuGraphLaunch* calls have run (child graphs included).
unsigned long long tessera_fake_cuda_graph_kernels_run(void);
// Free audit (scrub-on-free tests): while on, every free of a host-backed device allocation counts
// the allocation's nonzero bytes at the moment of the free (what the next owner of the memory could
// read). Turning it on or off resets the count.
void tessera_fake_cuda_audit_frees(int on);
unsigned long long tessera_fake_cuda_freed_dirty_bytes(void);
// The last successful cuMemsetD8* of this process: its entry point ("" if none), range and stream.
const char* tessera_fake_cuda_last_memset(unsigned long long* dptr, unsigned long long* bytes,
                                          unsigned long long* stream);
}
