// GPU checks of libtessera-shim.so (issue 6), run under `tessera run` by tests/gpu/shim_run.sh on
// a machine with a real NVIDIA GPU. Never changes MIG mode, clocks or compute mode.
//
//   shim_check limit LIMIT_MIB       allocations at limit - 1 MiB succeed and at limit + 1 MiB
//                                    fail, through cudaMalloc, cuMemAlloc and cudaMallocAsync;
//                                    prints one line "limit <api> below=<ok|fail> above=<ok|fail>"
//   shim_check loop SECONDS          launches a fixed ~1 ms kernel back to back for SECONDS;
//                                    prints "loop kernels=<n> seconds=<s>"
//   shim_check launch N              N empty-kernel launches + sync; prints "launch ns_per=<x>"
//   shim_check scrubcost SIZE_MIB    cudaMalloc SIZE_MIB, write it, sync, then time cudaFree
//                                    (repeated; 50/20/5 times for <=1 MiB / <=256 MiB / larger);
//                                    prints "scrubcost mib=<n> reps=<r> free_us_median=<x>" (run
//                                    with and without `tessera run --scrub`: the difference is the
//                                    scrub, a cuMemsetD8_v2 of the allocation before the free)
//   shim_check scrubverify SIZE_MIB  fill an allocation with 0xAB, free it, allocate the same size
//                                    again and count nonzero bytes in it: "scrubverify mib=<n>
//                                    same_address=<yes|no> nonzero=<count>" (with --scrub: 0)
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <cstdlib>
#include <cstring>

namespace {

__global__ void Spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

__global__ void Empty() {}

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

int Loop(double seconds) {
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  const long long cycles = static_cast<long long>(clock_khz);  // ~1 ms
  const auto t0 = std::chrono::steady_clock::now();
  long long kernels = 0;
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int i = 0; i < 8; ++i, ++kernels) Spin<<<1, 1>>>(cycles);
    cudaDeviceSynchronize();
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::printf("loop kernels=%lld seconds=%.3f\n", kernels, elapsed);
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

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: shim_check limit LIMIT_MIB | loop SECONDS | launch N | scrubcost MIB | "
                         "scrubverify MIB\n");
    return 2;
  }
  if (cuInit(0) != CUDA_SUCCESS) {
    std::fprintf(stderr, "shim_check: cuInit failed (no GPU?)\n");
    return 1;
  }
  if (!std::strcmp(argv[1], "limit")) return Limit(std::atoll(argv[2]));
  if (!std::strcmp(argv[1], "loop")) return Loop(std::atof(argv[2]));
  if (!std::strcmp(argv[1], "launch")) return Launch(std::atoll(argv[2]));
  if (!std::strcmp(argv[1], "scrubcost")) return ScrubCost(std::atoll(argv[2]));
  if (!std::strcmp(argv[1], "scrubverify")) return ScrubVerify(std::atoll(argv[2]));
  std::fprintf(stderr, "shim_check: unknown mode '%s'\n", argv[1]);
  return 2;
}
