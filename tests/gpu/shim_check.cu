// GPU checks of libtessera-shim.so (issues 6 and 29), run under `tessera run` by
// tests/gpu/shim_run.sh on a machine with a real NVIDIA GPU. Never changes MIG mode, clocks or
// compute mode.
//
//   shim_check limit LIMIT_MIB       allocations at limit - 1 MiB succeed and at limit + 1 MiB
//                                    fail, through cudaMalloc, cuMemAlloc and cudaMallocAsync;
//                                    prints one line "limit <api> below=<ok|fail> above=<ok|fail>"
//   shim_check calibrate             the SM clock as the kernels see it: a one-thread kernel reads
//                                    clock64 and %globaltimer (the GPU's ns timer) at both ends of
//                                    a 50 ms spin, median of 3: "calibrate cycles_per_us=<x>
//                                    events_cycles_per_us=<y> attr_mhz=<z>" (y: the same from
//                                    cudaEvent timing of a 20 ms clock64 spin; z: the device's
//                                    nominal clock attribute, for comparison only); then for each
//                                    duration of the sweep the spin measured back to back with
//                                    events: "spin kernel_us=<us> kernels=<n> measured_us=<x>"
//   shim_check loop SECONDS [us=KERNEL_US] [streams=N] [graph=K] [cycles_per_us=X] [barrier=DIR:N]
//                                    floods N streams (default 1) with one-thread kernels that
//                                    spin KERNEL_US (default 1000) x X cycles (X calibrated as
//                                    above when not given), or with graph launches of K such
//                                    kernels (graph=0: plain launches); keeps ~32 ms of work queued
//                                    per stream (at most 1,000 kernels), one timing event per ~1 ms
//                                    of work. With barrier=DIR:N it waits, after its warm-up, until
//                                    N files ready.* are in DIR (its own included), so that N
//                                    tenants start their windows together. Counts the kernels whose
//                                    batch completed within SECONDS of GPU time after the window's
//                                    start event (cudaEventElapsedTime), so that neither a late
//                                    host nor the final drain counts; prints "loop kernels=<n>
//                                    seconds=<s> kernel_us=<us> streams=<n> graph=<k> gpu_ms=<n x
//                                    us / 1000, summed over streams> cycles_per_us=<x>"
//   shim_check launch N              N empty-kernel launches + sync; prints "launch ns_per=<x>"
//   shim_check scrubcost SIZE_MIB    cudaMalloc SIZE_MIB, write it, sync, then time cudaFree
//                                    (repeated; 50/20/5 times for <=1 MiB / <=256 MiB / larger);
//                                    prints "scrubcost mib=<n> reps=<r> free_us_median=<x>" (run
//                                    with and without `tessera run --scrub`: the difference is the
//                                    scrub, a cuMemsetD8_v2 of the allocation before the free)
//   shim_check scrubverify SIZE_MIB  fill an allocation with 0xAB, free it, allocate the same size
//                                    again and count nonzero bytes in it: "scrubverify mib=<n>
//                                    same_address=<yes|no> nonzero=<count>" (with --scrub: 0)
//   shim_check hold MIB SECONDS      cudaMalloc MIB, write it, then print "hold mib=<n> rc=ok
//                                    pid=<pid> t_ms=<epoch ms> free_mib=<f> total_mib=<t>" (flushed:
//                                    t_ms is when the memory was in use) and sleep SECONDS; "hold
//                                    mib=<n> rc=fail:<error>" and exit 1 when refused. Run with
//                                    `env -u LD_PRELOAD` it escapes the shim (the NVML backstop's
//                                    case, shim_run.sh section 5).
//
// Worked example of the loop: us=100 streams=1 graph=0, 5 s, cycles_per_us=1755 -> each kernel
// spins 175,500 cycles; a batch is 10 kernels (~1 ms) followed by an event; at most 32 batches
// are queued; a tenant holding 30 % of the GPU completes ~15,000 kernels in the window:
// "loop kernels=15000 seconds=5.000 kernel_us=100 ... gpu_ms=1500.0".
#include <cuda.h>
#include <cuda_runtime.h>

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

namespace {

__global__ void Spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void Empty() {}

__device__ __forceinline__ unsigned long long GlobalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Spins for `ns` of the GPU's ns timer and reports the SM cycles (clock64) that passed meanwhile:
// out[0] = cycles, out[1] = ns. Both counters are read inside one kernel, so neither launch
// latency nor a host-side wait enters the ratio.
__global__ void ClockVsTimer(unsigned long long ns, unsigned long long* out) {
  const unsigned long long t0 = GlobalTimerNs();
  const long long c0 = clock64();
  unsigned long long t1 = t0;
  while (t1 - t0 < ns) t1 = GlobalTimerNs();
  const long long c1 = clock64();
  out[0] = static_cast<unsigned long long>(c1 - c0);
  out[1] = t1 - t0;
}

double NowEpochMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// SM cycles per microsecond, median of 3 in-kernel measurements of 50 ms each; 0 on error.
double CyclesPerUs() {
  unsigned long long* d = nullptr;
  if (cudaMalloc(&d, 2 * sizeof(unsigned long long)) != cudaSuccess) return 0;
  std::vector<double> r;
  for (int i = 0; i < 3; ++i) {
    unsigned long long h[2] = {0, 0};
    ClockVsTimer<<<1, 1>>>(50'000'000ull, d);
    if (cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess || h[1] == 0) continue;
    r.push_back(static_cast<double>(h[0]) * 1000.0 / static_cast<double>(h[1]));
  }
  cudaFree(d);
  if (r.empty()) return 0;
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

// Milliseconds between two events around `n` back-to-back Spin(cycles) kernels on stream 0.
double TimeSpins(long long cycles, int n) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  cudaEventRecord(a, 0);
  for (int i = 0; i < n; ++i) Spin<<<1, 1>>>(cycles);
  cudaEventRecord(b, 0);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return ms;
}

const char* Ok(bool b) { return b ? "ok" : "fail"; }

int Limit(long long limit_mib) {
  const size_t mib = 1 << 20;
  const size_t below = static_cast<size_t>(limit_mib - 1) * mib, above = static_cast<size_t>(limit_mib + 1) * mib;
  cudaFree(0);  // create the context first
  void* p = nullptr;
  bool b = cudaMalloc(&p, below) == cudaSuccess;
  if (b) cudaFree(p);
  bool a = cudaMalloc(&p, above) == cudaSuccess;
  if (a) cudaFree(p);
  std::printf("limit cudaMalloc below=%s above=%s\n", Ok(b), Ok(a));
  CUdeviceptr d = 0;
  b = cuMemAlloc(&d, below) == CUDA_SUCCESS;
  if (b) cuMemFree(d);
  a = cuMemAlloc(&d, above) == CUDA_SUCCESS;
  if (a) cuMemFree(d);
  std::printf("limit cuMemAlloc below=%s above=%s\n", Ok(b), Ok(a));
  cudaStream_t s;
  cudaStreamCreate(&s);
  b = cudaMallocAsync(&p, below, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess;
  if (b) { cudaFreeAsync(p, s); cudaStreamSynchronize(s); }
  cudaMemPool_t pool;
  cudaDeviceGetDefaultMemPool(&pool, 0);
  cudaMemPoolTrimTo(pool, 0);
  a = cudaMallocAsync(&p, above, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess;
  if (a) { cudaFreeAsync(p, s); cudaStreamSynchronize(s); }
  std::printf("limit cudaMallocAsync below=%s above=%s\n", Ok(b), Ok(a));
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  std::printf("meminfo free_mib=%zu total_mib=%zu\n", free_b / mib, total_b / mib);
  return 0;
}

struct LoopOptions {
  double seconds = 0;
  double kernel_us = 1000;
  int streams = 1;
  int graph = 0;             // kernels per graph launch; 0: plain launches
  double cycles_per_us = 0;  // 0: calibrate first
  std::string barrier_dir;   // empty: no barrier
  int barrier_n = 0;
};

int Calibrate() {
  cudaFree(0);
  const double cpu = CyclesPerUs();
  if (cpu <= 0) {
    std::printf("calibrate error=no_measurement\n");
    return 1;
  }
  Spin<<<1, 1>>>(1000);  // module load and first launch out of the timing
  cudaDeviceSynchronize();
  const long long c20ms = std::llround(cpu * 20000.0);
  const double ms = TimeSpins(c20ms, 1);
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  std::printf("calibrate cycles_per_us=%.2f events_cycles_per_us=%.2f attr_mhz=%.0f\n", cpu,
              ms > 0 ? static_cast<double>(c20ms) / (ms * 1000.0) : 0.0, clock_khz / 1000.0);
  for (const int us : {20, 100, 500, 1000, 10000}) {
    const int n = std::max(5, std::min(1000, 200000 / us));  // ~0.2 s of spinning each, at least 5
    const double t = TimeSpins(std::llround(cpu * us), n);
    std::printf("spin kernel_us=%d kernels=%d measured_us=%.2f\n", us, n, t * 1000.0 / n);
  }
  return 0;
}

// Waits until `n` files named ready.* are in `dir` (ours included); gives up after 120 s.
void Barrier(const std::string& dir, int n) {
  const std::string mine = dir + "/ready." + std::to_string(::getpid());
  const int fd = ::open(mine.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd >= 0) ::close(fd);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (;;) {
    int ready = 0;
    if (DIR* d = ::opendir(dir.c_str())) {
      while (const dirent* e = ::readdir(d))
        if (std::strncmp(e->d_name, "ready.", 6) == 0) ++ready;
      ::closedir(d);
    }
    if (ready >= n) return;
    if (std::chrono::steady_clock::now() > give_up) {
      std::fprintf(stderr, "shim_check: barrier %s: %d of %d ready after 120 s; starting alone\n", dir.c_str(), ready, n);
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

int Loop(const LoopOptions& o) {
  cudaFree(0);
  const double cpu = o.cycles_per_us > 0 ? o.cycles_per_us : CyclesPerUs();
  if (cpu <= 0 || o.streams < 1 || o.kernel_us <= 0 || o.graph < 0) {
    std::printf("loop error=bad_options_or_calibration cycles_per_us=%.2f\n", cpu);
    return 1;
  }
  const long long cycles = std::llround(o.kernel_us * cpu);
  const int per_unit = o.graph > 0 ? o.graph : 1;  // kernels per launch unit
  const double unit_us = o.kernel_us * per_unit;
  const int batch = std::max(1, static_cast<int>(1000.0 / unit_us));  // units per event, ~1 ms
  const int max_batches =
      std::max(2, std::min(static_cast<int>(32000.0 / (batch * unit_us)), 1000 / (batch * per_unit)));
  std::vector<cudaStream_t> streams(o.streams);
  std::vector<cudaGraphExec_t> execs(o.streams, nullptr);
  for (int s = 0; s < o.streams; ++s) {
    if (cudaStreamCreateWithFlags(&streams[s], cudaStreamNonBlocking) != cudaSuccess) {
      std::printf("loop error=cudaStreamCreate\n");
      return 1;
    }
    if (o.graph > 0) {  // one executable graph per stream: launches of one exec serialise
      cudaGraph_t g = nullptr;
      cudaStreamBeginCapture(streams[s], cudaStreamCaptureModeThreadLocal);
      for (int k = 0; k < o.graph; ++k) Spin<<<1, 1, 0, streams[s]>>>(cycles);
      if (cudaStreamEndCapture(streams[s], &g) != cudaSuccess || cudaGraphInstantiate(&execs[s], g, 0) != cudaSuccess) {
        std::printf("loop error=graph_capture\n");
        return 1;
      }
      cudaGraphDestroy(g);
    }
  }
  auto launch_unit = [&](int s) {
    if (o.graph > 0) cudaGraphLaunch(execs[s], streams[s]);
    else Spin<<<1, 1, 0, streams[s]>>>(cycles);
  };
  for (int s = 0; s < o.streams; ++s) launch_unit(s);  // warm-up: module load, first graph upload
  cudaDeviceSynchronize();
  if (!o.barrier_dir.empty()) Barrier(o.barrier_dir, o.barrier_n);

  cudaEvent_t start;
  cudaEventCreate(&start);
  cudaEventRecord(start, streams[0]);
  cudaEventSynchronize(start);  // complete before any batch of the window: elapsed times are defined
  std::vector<std::deque<cudaEvent_t>> pending(o.streams);
  std::vector<cudaEvent_t> spare;
  const float window_ms = static_cast<float>(o.seconds * 1000.0);
  long long units = 0;
  // Retires the oldest batch of stream s if it completed (or wait: until it does); counts it
  // when it completed inside the window.
  auto retire = [&](int s, bool wait) {
    if (pending[s].empty()) return false;
    cudaEvent_t e = pending[s].front();
    if (wait) cudaEventSynchronize(e);
    else if (cudaEventQuery(e) != cudaSuccess) return false;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start, e) == cudaSuccess && ms <= window_ms) units += batch;
    pending[s].pop_front();
    spare.push_back(e);
    return true;
  };
  const auto host_end = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.seconds);
  while (std::chrono::steady_clock::now() < host_end) {
    bool progressed = false;
    for (int s = 0; s < o.streams; ++s) {
      while (retire(s, false)) progressed = true;
      if (static_cast<int>(pending[s].size()) >= max_batches) continue;
      for (int i = 0; i < batch; ++i) launch_unit(s);
      cudaEvent_t e;
      if (spare.empty()) cudaEventCreate(&e);
      else { e = spare.back(); spare.pop_back(); }
      cudaEventRecord(e, streams[s]);
      pending[s].push_back(e);
      progressed = true;
    }
    if (!progressed) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  for (int s = 0; s < o.streams; ++s)
    while (retire(s, true)) {
    }
  const long long kernels = units * per_unit;
  std::printf("loop kernels=%lld seconds=%.3f kernel_us=%g streams=%d graph=%d gpu_ms=%.1f cycles_per_us=%.2f\n",
              kernels, o.seconds, o.kernel_us, o.streams, o.graph, static_cast<double>(kernels) * o.kernel_us / 1000.0,
              cpu);
  return 0;
}

int Launch(long long n) {
  cudaFree(0);
  Empty<<<1, 1>>>();
  cudaDeviceSynchronize();
  const auto t0 = std::chrono::steady_clock::now();
  for (long long i = 0; i < n; ++i) Empty<<<1, 1>>>();
  cudaDeviceSynchronize();
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  std::printf("launch ns_per=%.1f\n", ns / static_cast<double>(n));
  return 0;
}

int ScrubCost(long long mib) {
  const size_t bytes = static_cast<size_t>(mib) << 20;
  const int reps = mib <= 1 ? 50 : mib <= 256 ? 20 : 5;
  cudaFree(0);
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
      std::printf("scrubcost mib=%lld error=cudaMalloc\n", mib);
      return 1;
    }
    cudaMemset(p, 0x5A, bytes);  // the application's data
    cudaDeviceSynchronize();
    const auto t0 = std::chrono::steady_clock::now();
    const cudaError_t rc = cudaFree(p);  // the shim scrubs here when the tenant asked for it
    cudaDeviceSynchronize();
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (rc != cudaSuccess) {
      std::printf("scrubcost mib=%lld error=cudaFree:%d\n", mib, static_cast<int>(rc));
      return 1;
    }
  }
  std::sort(us.begin(), us.end());
  std::printf("scrubcost mib=%lld reps=%d free_us_median=%.1f\n", mib, reps, us[us.size() / 2]);
  return 0;
}

int ScrubVerify(long long mib) {
  const size_t bytes = static_cast<size_t>(mib) << 20;
  cudaFree(0);
  void* a = nullptr;
  void* b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess) return 1;
  cudaMemset(a, 0xAB, bytes);
  cudaDeviceSynchronize();
  cudaFree(a);
  if (cudaMalloc(&b, bytes) != cudaSuccess) return 1;
  std::vector<unsigned char> host(bytes);
  cudaMemcpy(host.data(), b, bytes, cudaMemcpyDeviceToHost);
  const long long nonzero = static_cast<long long>(bytes - std::count(host.begin(), host.end(), 0));
  std::printf("scrubverify mib=%lld same_address=%s nonzero=%lld\n", mib, a == b ? "yes" : "no", nonzero);
  cudaFree(b);
  return 0;
}

int Hold(long long mib, double seconds) {
  const size_t bytes = static_cast<size_t>(mib) << 20;
  cudaFree(0);
  void* p = nullptr;
  const cudaError_t rc = cudaMalloc(&p, bytes);
  if (rc != cudaSuccess) {
    std::printf("hold mib=%lld rc=fail:%s\n", mib, cudaGetErrorName(rc));
    std::fflush(stdout);
    return 1;
  }
  cudaMemset(p, 0x5A, bytes);  // in use, not only reserved
  cudaDeviceSynchronize();
  size_t free_b = 0, total_b = 0;
  cudaMemGetInfo(&free_b, &total_b);
  std::printf("hold mib=%lld rc=ok pid=%d t_ms=%.0f free_mib=%zu total_mib=%zu\n", mib, static_cast<int>(::getpid()),
              NowEpochMs(), free_b >> 20, total_b >> 20);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  cudaFree(p);
  std::printf("hold mib=%lld done\n", mib);
  return 0;
}

}  // namespace

// loop's options after SECONDS: key=value words.
bool ParseLoop(int argc, char** argv, LoopOptions* o) {
  o->seconds = std::atof(argv[2]);
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    const size_t eq = a.find('=');
    if (eq == std::string::npos) return false;
    const std::string k = a.substr(0, eq), v = a.substr(eq + 1);
    if (k == "us") o->kernel_us = std::atof(v.c_str());
    else if (k == "streams") o->streams = std::atoi(v.c_str());
    else if (k == "graph") o->graph = std::atoi(v.c_str());
    else if (k == "cycles_per_us") o->cycles_per_us = std::atof(v.c_str());
    else if (k == "barrier") {
      const size_t colon = v.rfind(':');
      if (colon == std::string::npos) return false;
      o->barrier_dir = v.substr(0, colon);
      o->barrier_n = std::atoi(v.c_str() + colon + 1);
    } else {
      return false;
    }
  }
  return o->seconds > 0;
}

int main(int argc, char** argv) {
  const char* usage =
      "usage: shim_check limit LIMIT_MIB | calibrate | loop SECONDS [us=KERNEL_US] [streams=N] [graph=K] "
      "[cycles_per_us=X] [barrier=DIR:N] | launch N | scrubcost MIB | scrubverify MIB | hold MIB SECONDS\n";
  if (argc < 2) {
    std::fputs(usage, stderr);
    return 2;
  }
  const std::string mode = argv[1];
  const int want = mode == "calibrate" ? 2 : mode == "hold" ? 4 : 3;
  if (mode == "loop" ? argc < 3 : argc != want) {
    std::fputs(usage, stderr);
    return 2;
  }
  if (cuInit(0) != CUDA_SUCCESS) {
    std::fprintf(stderr, "shim_check: cuInit failed (no GPU?)\n");
    return 1;
  }
  if (mode == "limit") return Limit(std::atoll(argv[2]));
  if (mode == "calibrate") return Calibrate();
  if (mode == "loop") {
    LoopOptions o;
    if (!ParseLoop(argc, argv, &o)) {
      std::fputs(usage, stderr);
      return 2;
    }
    return Loop(o);
  }
  if (mode == "launch") return Launch(std::atoll(argv[2]));
  if (mode == "scrubcost") return ScrubCost(std::atoll(argv[2]));
  if (mode == "scrubverify") return ScrubVerify(std::atoll(argv[2]));
  if (mode == "hold") return Hold(std::atoll(argv[2]), std::atof(argv[3]));
  std::fprintf(stderr, "shim_check: unknown mode '%s'\n", argv[1]);
  return 2;
}
