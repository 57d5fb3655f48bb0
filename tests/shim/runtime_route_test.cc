// The runtime route: cudaGetDriverEntryPoint / cudaGetDriverEntryPointByVersion (and the _ptsz
// twins that per-thread-default-stream code calls). The real runtime answers them by dlopen of
// libcuda.so.1, dlsym of cuGetProcAddress_v2 and a call of it; tests/testing/fake_cudart does
// exactly that, and tessera_cudart_probe reaches the driver only through it (it does not link
// libcuda). With libtessera-shim.so preloaded:
//   - the runtime receives the shim's resolver (dlsym substitution on libcuda's handle, loaded after
//     the shim's constructor), so every answer is the shim's wrapper of exactly the variant the
//     driver chose for the runtime's version and stream flags; without the shim, the driver's own;
//   - "not found" / "version not sufficient" answers and invalid requests pass through unchanged;
//   - an allocation through a pointer obtained this way is charged, a launch is counted.
// This models the runtime's documented behaviour with a fake; the real libcudart is exercised by
// tests/gpu only.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/shim/shim_test_util.h"

#ifdef TESSERA_HAVE_CUDA_H
#include <cuda_runtime_api.h>

#include <type_traits>
// The fake implements these signatures with int for the C enums; check the toolkit agrees.
static_assert(std::is_same_v<decltype(&::cudaGetDriverEntryPointByVersion),
                             cudaError_t (*)(const char*, void**, unsigned int, unsigned long long,
                                             cudaDriverEntryPointQueryResult*)>);
static_assert(sizeof(cudaError_t) == sizeof(int) && sizeof(cudaDriverEntryPointQueryResult) == sizeof(int));
static_assert(cudaEnableDefault == 0 && cudaEnableLegacyStream == 1 && cudaEnablePerThreadDefaultStream == 2);
static_assert(cudaDriverEntryPointSuccess == 0 && cudaDriverEntryPointSymbolNotFound == 1 &&
              cudaDriverEntryPointVersionNotSufficent == 2);
static_assert(cudaErrorInvalidValue == 1 && cudaErrorInsufficientDriver == 35 && cudaErrorNotSupported == 801);
#endif

namespace tessera::enforce {
namespace {

using testing::FieldInt;
using testing::Probe;
using testing::ProbeOptions;
using testing::ProbeRun;
using testing::RunProbe;

ProbeOptions RuntimeProbe(bool preload) {
  ProbeOptions o;
  o.preload = preload;
  o.program = TESSERA_CUDART_PROBE;
  return o;
}

std::string Tail(const std::string& line) {
  auto p = line.find("-> ");
  return p == std::string::npos ? "<no result: " + line + ">" : line.substr(p + 3);
}

struct Case {
  std::string arg;
  std::string variant;  // "" = null
  std::string rc_status;
};

const std::vector<Case> kCases = {
    {"rt:cuMemAlloc:0", "cuMemAlloc_v2", "rc=0 status=0"},
    {"rt:cuMemAlloc:2", "cuMemAlloc_v2", "rc=0 status=0"},  // no per-thread variant: the legacy one
    {"rt:cuMemAllocAsync:0", "cuMemAllocAsync", "rc=0 status=0"},
    {"rt:cuMemAllocAsync:1", "cuMemAllocAsync", "rc=0 status=0"},
    {"rt:cuMemAllocAsync:2", "cuMemAllocAsync_ptsz", "rc=0 status=0"},
    {"rt_ptsz:cuMemAllocAsync:0", "cuMemAllocAsync_ptsz", "rc=0 status=0"},  // default = per-thread
    {"rt_ptsz:cuMemAllocAsync:1", "cuMemAllocAsync", "rc=0 status=0"},
    {"rt:cuLaunchKernel:0", "cuLaunchKernel", "rc=0 status=0"},
    {"rt:cuLaunchKernel:2", "cuLaunchKernel_ptsz", "rc=0 status=0"},
    {"rt_ptsz:cuLaunchKernel:0", "cuLaunchKernel_ptsz", "rc=0 status=0"},
    {"rt:cuMemFree:0", "cuMemFree_v2", "rc=0 status=0"},
    {"rt:cuGetProcAddress:0", "cuGetProcAddress_v2", "rc=0 status=0"},
    {"rtv:cuMemAlloc:3000:0", "cuMemAlloc", "rc=0 status=0"},  // before 3.2: the 32-bit ABI
    {"rtv:cuMemAlloc:12000:0", "cuMemAlloc_v2", "rc=0 status=0"},
    {"rtv:cuLaunchKernel:12080:2", "cuLaunchKernel_ptsz", "rc=0 status=0"},
    {"rtv:cuMemAllocAsync:11000:0", "", "rc=0 status=2"},       // newer than asked: NOT_SUFFICIENT
    {"rt:cuNoSuchFunction:0", "", "rc=0 status=1"},             // not found
    {"rt:cuMemAlloc:3", "", "rc=1 status=-1"},                  // invalid flags
    {"rtv:cuMemAlloc:14000:0", "", "rc=1 status=-1"},           // above the driver's version
};

void CheckCases(bool with_shim) {
  std::vector<std::string> args;
  for (const Case& c : kCases) args.push_back(c.arg);
  ProbeRun run = RunProbe(RuntimeProbe(with_shim), args);
  ASSERT_EQ(run.exit_code, 0);
  ASSERT_EQ(run.lines.size(), kCases.size());
  const std::string owner = with_shim ? "shim:" : "driver:";
  for (std::size_t i = 0; i < kCases.size(); ++i) {
    const std::string expected = kCases[i].variant.empty() ? "null" : owner + kCases[i].variant;
    EXPECT_EQ(Tail(run.lines[i]), expected) << kCases[i].arg;
    EXPECT_NE(run.lines[i].find(kCases[i].rc_status), std::string::npos) << run.lines[i];
  }
}

TEST(RuntimeRoute, EntryPointsAreTheShimsWrappersOfTheDriversChoice) { CheckCases(/*with_shim=*/true); }

TEST(RuntimeRoute, WithoutTheShimTheRuntimeGetsTheDriversOwn) { CheckCases(/*with_shim=*/false); }

TEST(RuntimeRoute, OlderRuntimeVersionSelectsOlderVariants) {
  ProbeOptions o = RuntimeProbe(true);
  o.env = {"TESSERA_FAKE_CUDART_VERSION=11080"};
  ProbeRun run = RunProbe(o, {"rt:cuGetProcAddress:0", "rt:cuStreamBeginCaptureToGraph:0", "rt:cuLaunchKernelEx:2"});
  ASSERT_EQ(run.lines.size(), 3u);
  EXPECT_EQ(Tail(run.lines[0]), "shim:cuGetProcAddress");  // an 11.8 runtime: the 4-argument one
  EXPECT_EQ(Tail(run.lines[1]), "null");                   // a 12.3 entry point
  EXPECT_NE(run.lines[1].find("status=2"), std::string::npos) << run.lines[1];
  EXPECT_EQ(Tail(run.lines[2]), "shim:cuLaunchKernelEx_ptsz");
}

TEST(RuntimeRoute, AllocationsAreChargedAndLaunchesCounted) {
  testing::TestSegment t;
  ASSERT_TRUE(t.seg().SetLimit(0, 0, 2 * testing::kMiB).ok());
  ProbeOptions o = RuntimeProbe(true);
  o.segment = &t;
  Probe p(o, {"init", "alloc:1048576", "allocasync:4096", "alloc:1048576", "launch:0", "launch:2", "wait"});
  EXPECT_EQ(p.ReadLine(), "init rc=0,0");
  EXPECT_EQ(p.ReadLine(), "alloc rc=0 via=shim:cuMemAlloc_v2");
  EXPECT_EQ(p.ReadLine(), "allocasync rc=0 via=shim:cuMemAllocAsync");
  // 1 MiB + 4 KiB are charged: another 1 MiB is over the 2 MiB limit, refused by the shim.
  EXPECT_EQ(p.ReadLine(), "alloc rc=2 via=shim:cuMemAlloc_v2");
  EXPECT_EQ(p.ReadLine(), "launch rc=0 reached=cuLaunchKernel via=shim:cuLaunchKernel");
  EXPECT_EQ(p.ReadLine(), "launch rc=0 reached=cuLaunchKernel_ptsz via=shim:cuLaunchKernel_ptsz");
  EXPECT_EQ(p.ReadLine(), "wait ready");
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), testing::kMiB + 4096);
  EXPECT_EQ(t.seg().DeniedAllocations(0, 0), 1u);
  const ProcessSlot* slot = nullptr;
  for (const ProcessSlot& s : t.seg().counters(0)->slots) {
    SlotStateWord st = UnpackSlotState(s.state.load());
    if (st.state == SlotState::kActive && st.pid == static_cast<std::uint32_t>(p.pid())) slot = &s;
  }
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot->launches[static_cast<int>(CountedLaunch::kKernel)].load(), 2u);
  EXPECT_GE(slot->resolver_substitutions.load(), 4u);  // those resolved after the slot was claimed
  EXPECT_EQ(p.Finish(), 0);
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), 0u);  // released at exit
}

// A fork taken while another thread is loading the driver inside the shim (holding its driver
// lock, in dlopen of libcuda): the child must not inherit the held lock (AtForkChild gives it a
// fresh one). Without that the child's first driver call blocks forever.
TEST(ShimFork, AForkWhileTheShimLoadsTheDriverDoesNotDeadlockTheChild) {
  ProbeOptions o = RuntimeProbe(true);
  o.env = {"TESSERA_FAKE_CUDA_LOAD_DELAY_MS=700"};
  ProbeRun run = RunProbe(o, {"forkwhileloading"});
  ASSERT_EQ(run.exit_code, 0);
  ASSERT_EQ(run.lines.size(), 1u);
  EXPECT_EQ(run.lines[0], "forkwhileloading child=exited:0");
}

}  // namespace
}  // namespace tessera::enforce
