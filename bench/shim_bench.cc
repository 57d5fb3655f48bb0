// What libtessera-shim.so adds to the driver calls it intercepts, measured against the in-tree fake
// driver (tests/testing/fake_cuda/) in one process: the *Direct benchmarks call the fake's entry
// points, the *ThroughShim ones call the shim's wrappers of the same entry points (which call the
// same fake functions), both through function pointers. The difference of a pair is the shim's
// added cost (issue 6 targets: launch <= 50 ns, allocation <= 1 us).
//
//   BM_LaunchDirect / BM_LaunchThroughShim   one cuLaunchKernel
//   BM_LaunchDirectCharged / BM_LaunchThroughShimCharged   the same with the fake in charged mode:
//                                            every driver entry point called busy-waits
//                                            TESSERA_BENCH_CALL_NS (default 200 ns, about what a
//                                            real driver call on the launch path costs), so a driver
//                                            call the shim adds per launch shows as +200 ns, one per
//                                            1,000 launches as +0.2 ns; the counters reported are
//                                            the fake's driver calls per launch (launch entry point
//                                            and all others)
//   BM_AllocDirect  / BM_AllocThroughShim    one cuMemAlloc_v2 (4 KiB) + its cuMemFree_v2: the
//                                            shim reserves on the shared tenant counter, records
//                                            the pointer, and releases both on free
//   BM_FreeThroughShim/BYTES / BM_FreeThroughShimScrubbed/BYTES  (4 KiB and 64 MiB)
//                                            one cuMemFree_v2 through the shim, without and with
//                                            the tenant's scrub-on-free flag; only the free is
//                                            timed (manual time, steady_clock around the call), not
//                                            the allocation and the application's write of every
//                                            byte (page faults of fresh host memory would swamp
//                                            the figure). The difference is the scrub: a
//                                            cuMemsetD8_v2 of the allocation before the free. On
//                                            the fake driver that is a host memset, NOT the GPU's
//                                            cost (tests/gpu/shim_run.sh section 4 measures that).
//
// The shim runs managed (a node segment in a temporary directory, tenant 0 with a 64 GiB limit, and
// a lease file whose board says tenant 0 holds the compute lease), as it does in a tenant process:
// BM_LaunchThroughShim is the lease gate's fast path (counter, lease word, TSC clock).
// TESSERA_BENCH_GPUS=2: the process is gated on two GPUs (TESSERA_SHIM_GPUS=0,1, the fake with two
// devices, tenant 0 holding both boards' leases) and launches in a context on device 1, so the
// gate picks the current context's GPU's board at every launch (the multi-GPU path; no meter). Keep the benchmark names stable: bench/run.sh and the README use them.
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "benchmark/benchmark.h"
#include "tessera/enforce/cuda_abi.h"
#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tessera/enforce/segment.h"

namespace {

using namespace tessera::cuabi;  // NOLINT

struct Fns {
  PFN_cuLaunchKernel_v4000 launch = nullptr;
  PFN_cuMemAlloc_v3020 alloc = nullptr;
  PFN_cuMemFree_v3020 free = nullptr;
};

Fns g_direct, g_shim;
bool g_ready = false;
tessera::enforce::NodeSegment* g_segment = nullptr;
unsigned long long (*g_fake_calls)(const char*) = nullptr;  // the fake's tessera_fake_cuda_calls
unsigned long long (*g_fake_total_calls)() = nullptr;        // tessera_fake_cuda_total_calls
void (*g_fake_set_call_ns)(unsigned long long) = nullptr;    // tessera_fake_cuda_set_call_ns

void Die(const char* what) {
  std::fprintf(stderr, "tessera_shim_bench: %s: %s\n", what, dlerror());
  std::exit(1);
}

void Setup() {
  if (g_ready) return;
  // The node side: a segment with a large limit for tenant 0.
  std::string dir = "/tmp/tessera_shim_bench_" + std::to_string(::getpid());
  std::string mk = "mkdir -p " + dir;
  if (std::system(mk.c_str()) != 0) Die("mkdir");
  const char* gpus_env = std::getenv("TESSERA_BENCH_GPUS");
  const int gpus = gpus_env != nullptr && std::strcmp(gpus_env, "2") == 0 ? 2 : 1;
  tessera::enforce::SegmentOptions options;
  options.policy_path = dir + "/policy";
  options.counters_dir = dir + "/counters";
  options.num_gpus = gpus;
  static auto segment = tessera::enforce::NodeSegment::Create(options);
  if (!segment.ok()) {
    std::fprintf(stderr, "%s\n", segment.status().ToString().c_str());
    std::exit(1);
  }
  for (int g = 0; g < gpus; ++g) {
    if (!segment->SetLimit(0, g, 64ULL << 30).ok()) Die("SetLimit");
  }
  g_segment = &*segment;
  // The compute gate: a lease file whose GPU 0 board says tenant 0 holds the lease for the next
  // hour, as an arbiter would have granted it, so every launch takes the gate's fast path.
  static auto leases = tessera::enforce::LeaseFile::Create(dir + "/leases", gpus, options.counters_dir);
  if (!leases.ok()) {
    std::fprintf(stderr, "%s\n", leases.status().ToString().c_str());
    std::exit(1);
  }
  for (int g = 0; g < gpus; ++g) {
    tessera::enforce::LeaseBoard& board = leases->board(g);
    const uint64_t now = tessera::enforce::MonotonicNowNs();
    const uint64_t expiry = now + 3600ULL * 1'000'000'000ULL;
    board.node[0].state.store(static_cast<uint32_t>(tessera::enforce::LeaseSlotState::kActive));
    board.node[0].kernel_est_ns.store(100'000);
    board.arbiter.quantum_ns.store(10'000'000);  // the arbiter's default quantum (sizes the meter's segments)
    board.lease.expiry_ns.store(expiry);
    board.lease.holder.store(1);
    board.lease.word.store(tessera::enforce::PackLeaseWord(0, expiry));
    board.arbiter.heartbeat_ns.store(expiry);
  }
  ::setenv("TESSERA_SHIM_LEASES", (dir + "/leases").c_str(), 1);
  ::setenv("TESSERA_SHIM_POLICY", options.policy_path.c_str(), 1);
  ::setenv("TESSERA_SHIM_COUNTERS", options.counters_dir.c_str(), 1);
  ::setenv("TESSERA_SHIM_TENANT", "0", 1);
  if (gpus == 2) {
    ::setenv("TESSERA_SHIM_GPUS", "0,1", 1);
    ::setenv("TESSERA_FAKE_CUDA_DEVICES", "2", 1);
  }

  // The fake driver first (the shim finds it by its soname), then the shim.
  void* cuda = dlopen(TESSERA_FAKE_CUDA_LIBRARY, RTLD_NOW | RTLD_GLOBAL);
  if (cuda == nullptr) Die("dlopen fake libcuda");
  void* shim = dlopen(TESSERA_SHIM_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (shim == nullptr) Die("dlopen libtessera-shim.so");
  auto get = [](void* h, const char* name) {
    void* p = dlsym(h, name);
    if (p == nullptr) Die(name);
    return p;
  };
  g_direct = {reinterpret_cast<PFN_cuLaunchKernel_v4000>(get(cuda, "cuLaunchKernel")),
              reinterpret_cast<PFN_cuMemAlloc_v3020>(get(cuda, "cuMemAlloc_v2")),
              reinterpret_cast<PFN_cuMemFree_v3020>(get(cuda, "cuMemFree_v2"))};
  g_shim = {reinterpret_cast<PFN_cuLaunchKernel_v4000>(get(shim, "cuLaunchKernel")),
            reinterpret_cast<PFN_cuMemAlloc_v3020>(get(shim, "cuMemAlloc_v2")),
            reinterpret_cast<PFN_cuMemFree_v3020>(get(shim, "cuMemFree_v2"))};
  g_fake_calls = reinterpret_cast<unsigned long long (*)(const char*)>(get(cuda, "tessera_fake_cuda_calls"));
  g_fake_total_calls = reinterpret_cast<unsigned long long (*)()>(get(cuda, "tessera_fake_cuda_total_calls"));
  g_fake_set_call_ns = reinterpret_cast<void (*)(unsigned long long)>(get(cuda, "tessera_fake_cuda_set_call_ns"));
  auto init = reinterpret_cast<PFN_cuInit_v2000>(get(cuda, "cuInit"));
  auto create = reinterpret_cast<PFN_cuCtxCreate_v3020>(get(cuda, "cuCtxCreate_v2"));
  CUcontext ctx = nullptr;
  if (init(0) != CUDA_SUCCESS || create(&ctx, 0, 0) != CUDA_SUCCESS) Die("cuInit/cuCtxCreate_v2");
  // Two GPUs: launch on device 1 (a context created through the shim, as an application's is).
  const int dev = gpus - 1;
  if (gpus == 2) {
    auto shim_create = reinterpret_cast<PFN_cuCtxCreate_v3020>(dlsym(shim, "cuCtxCreate_v2"));
    if (shim_create == nullptr) shim_create = create;  // a shim without context hooks (before)
    if (shim_create(&ctx, 0, dev) != CUDA_SUCCESS) Die("cuCtxCreate_v2 on device 1");
  }
  // Both paths must work (and the shim must really account) before anything is timed.
  CUdeviceptr p = 0;
  if (g_shim.alloc(&p, 4096) != CUDA_SUCCESS || segment->ReservedBytes(0, dev) != 4096) Die("shim alloc");
  if (g_shim.free(p) != CUDA_SUCCESS || segment->ReservedBytes(0, dev) != 0) Die("shim free");
  // ... and the launch must really pass the lease gate (counted on the tenant's lease line).
  const uint64_t before = leases->board(dev).slots[0].tenant.launches.load();
  if (g_shim.launch(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr) != CUDA_SUCCESS ||
      leases->board(dev).slots[0].tenant.launches.load() != before + 1) {
    Die("shim launch is not gated");
  }
  std::string rm = "rm -rf " + dir;  // the mappings stay valid after the files are gone
  if (std::system(rm.c_str()) != 0) Die("rm");
  g_ready = true;
}

void Launch(benchmark::State& state, const Fns& f) {
  Setup();
  for (auto _ : state) {
    CUresult rc = f.launch(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
    benchmark::DoNotOptimize(rc);
  }
}

// Charged mode: the fake charges every entry point `ns`; reports driver calls per launch.
void LaunchCharged(benchmark::State& state, const Fns& f) {
  Setup();
  const char* env = std::getenv("TESSERA_BENCH_CALL_NS");
  const unsigned long long ns = env != nullptr && *env != '\0' ? std::strtoull(env, nullptr, 10) : 200;
  const unsigned long long launches0 = g_fake_calls("cuLaunchKernel");
  const unsigned long long total0 = g_fake_total_calls();
  g_fake_set_call_ns(ns);
  for (auto _ : state) {
    CUresult rc = f.launch(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
    benchmark::DoNotOptimize(rc);
  }
  g_fake_set_call_ns(0);
  const double n = static_cast<double>(state.iterations());
  const double launched = static_cast<double>(g_fake_calls("cuLaunchKernel") - launches0);
  state.counters["call_ns"] = static_cast<double>(ns);
  state.counters["launch_calls"] = n > 0 ? launched / n : 0;
  state.counters["other_calls"] = n > 0 ? (static_cast<double>(g_fake_total_calls() - total0) - launched) / n : 0;
}

void Alloc(benchmark::State& state, const Fns& f) {
  Setup();
  for (auto _ : state) {
    CUdeviceptr p = 0;
    if (f.alloc(&p, 4096) != CUDA_SUCCESS || f.free(p) != CUDA_SUCCESS) {
      state.SkipWithError("allocation failed");
      break;
    }
  }
}

// One free through the shim, scrub-on-free off or on (the flag is read at every free); the
// allocation and the application's write of it are not timed.
void Free(benchmark::State& state, bool scrub) {
  Setup();
  const size_t bytes = static_cast<size_t>(state.range(0));
  if (!g_segment->SetTenantFlags(0, scrub ? tessera::enforce::kTenantScrubOnFree : 0).ok()) Die("flags");
  const unsigned long long memsets_before = g_fake_calls("cuMemsetD8_v2");
  for (auto _ : state) {
    CUdeviceptr p = 0;
    if (g_shim.alloc(&p, bytes) != CUDA_SUCCESS) {
      state.SkipWithError("allocation failed");
      break;
    }
    std::memset(reinterpret_cast<void*>(p), 0x5A, bytes);  // the fake's device memory is host memory
    benchmark::ClobberMemory();
    const auto t0 = std::chrono::steady_clock::now();
    const CUresult rc = g_shim.free(p);
    const auto t1 = std::chrono::steady_clock::now();
    if (rc != CUDA_SUCCESS) {
      state.SkipWithError("free failed");
      break;
    }
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
  }
  (void)g_segment->SetTenantFlags(0, 0);
  // The scrub must really have run (once per free), and never without the flag.
  const unsigned long long memsets = g_fake_calls("cuMemsetD8_v2") - memsets_before;
  if (memsets != (scrub ? static_cast<unsigned long long>(state.iterations()) : 0ULL)) {
    state.SkipWithError("the fake driver saw the wrong number of scrub memsets");
  }
}

void BM_LaunchDirect(benchmark::State& state) { Launch(state, g_direct); }
void BM_LaunchThroughShim(benchmark::State& state) { Launch(state, g_shim); }
void BM_LaunchDirectCharged(benchmark::State& state) { LaunchCharged(state, g_direct); }
void BM_LaunchThroughShimCharged(benchmark::State& state) { LaunchCharged(state, g_shim); }
void BM_AllocDirect(benchmark::State& state) { Alloc(state, g_direct); }
void BM_AllocThroughShim(benchmark::State& state) { Alloc(state, g_shim); }
void BM_FreeThroughShim(benchmark::State& state) { Free(state, false); }
void BM_FreeThroughShimScrubbed(benchmark::State& state) { Free(state, true); }

}  // namespace

// Setup() fills g_direct/g_shim before the first iteration; the lambdas read them then.
BENCHMARK(BM_LaunchDirect);
BENCHMARK(BM_LaunchThroughShim);
BENCHMARK(BM_LaunchDirectCharged);
BENCHMARK(BM_LaunchThroughShimCharged);
BENCHMARK(BM_AllocDirect);
BENCHMARK(BM_AllocThroughShim);
// 64 MiB: a fixed iteration count, since each iteration also allocates and writes 64 MiB of fresh
// host memory untimed (page faults: ~0.2 s per iteration on the 2-core development machine).
BENCHMARK(BM_FreeThroughShim)->Arg(4096)->UseManualTime();
BENCHMARK(BM_FreeThroughShim)->Arg(64 << 20)->Iterations(16)->UseManualTime();
BENCHMARK(BM_FreeThroughShimScrubbed)->Arg(4096)->UseManualTime();
BENCHMARK(BM_FreeThroughShimScrubbed)->Arg(64 << 20)->Iterations(16)->UseManualTime();

BENCHMARK_MAIN();
