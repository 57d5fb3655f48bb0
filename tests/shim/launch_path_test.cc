// The launch path makes no driver call of its own (issue 29 §2): a cuLaunchKernel through
// libtessera-shim.so reaches the driver once — the launch itself — and the shim's other driver
// calls (the GPU meter's events, the capture query, the current context's device) are bounded per
// segment, per lease or per context change, never paid per launch. A process on two GPUs is gated
// on the board of its current context's GPU, through every way of switching contexts.
//
// Each case runs the probe's `drivercalls:W:N[:STREAM[:ptsz]]` command under the shim with the
// fake driver, which counts every entry point it is called through (tessera_fake_cuda_calls):
// W warm-up launches, then N counted ones (100,000 each). The bound, at most one other driver
// call per 1,000 launches, is what "never per launch" means once the meter's segments (at most 4,096 launches
// each, an eighth of a quantum of work) have been amortised; on today's H200 the meter opens a
// segment every few hundred empty kernels at most, i.e. a handful of calls per segment.
//
// Worked example (one GPU, lease held, meter on; N = 100,000). Before: launch=100000 other=120
// calls=cuStreamIsCapturing:24,cuEventRecord:48,cuEventQuery:24,cuEventElapsedTime:24 (five calls
// per meter segment of 4,096 launches: query the capture state, record end and begin, query the
// end, read the time), over the bound of 100. Now: other=48-50 calls=cuEventRecord:25,
// cuEventElapsedTime:25 (a segment's end event is the next one's begin; cuEventElapsedTime answers
// NOT_READY itself, so no cuEventQuery; no capture query while the process never began a capture).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/node/lease_arbiter.h"
#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tests/shim/shim_test_util.h"

namespace tessera::enforce {
namespace {

using testing::FieldInt;
using testing::ProbeOptions;
using testing::ProbeRun;
using testing::RunProbe;

constexpr long kWarm = 100'000;
constexpr long kLaunches = 100'000;
// Driver calls allowed besides the launches, per launch. The meter's calls come per segment and
// per lease, i.e. per unit of time; under a sanitizer a launch takes ~20x longer, so the same
// time holds 20x fewer launches (TSan: 3,955 calls in 3 M launches, 126 leases). A driver call
// per launch would still be 100x over either bound.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define TESSERA_SANITIZED_BUILD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define TESSERA_SANITIZED_BUILD 1
#endif
#endif
#ifdef TESSERA_SANITIZED_BUILD
constexpr long kLaunchesPerAllowedCall = 100;
#else
constexpr long kLaunchesPerAllowedCall = 1'000;
#endif

// A node of `gpus` GPUs with a lease file; tenant 0 holds every board's lease for an hour and the
// arbiter's heartbeat is fresh (a lease granted and not yet over, as a busy tenant sees it).
struct HeldLeaseNode {
  explicit HeldLeaseNode(int gpus) : segment(512, gpus) {
    leases_path = segment.dir.path() + "/leases";
    StatusOr<LeaseFile> f = LeaseFile::Create(leases_path, gpus, segment.counters);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    if (!f.ok()) return;
    leases.emplace(std::move(*f));
    const uint64_t expiry = MonotonicNowNs() + 3600ULL * 1'000'000'000ULL;
    for (int g = 0; g < gpus; ++g) {
      EXPECT_TRUE(segment.seg().SetLimit(0, g, 1ULL << 30).ok());
      LeaseBoard& b = leases->board(g);
      b.node[0].state.store(static_cast<uint32_t>(LeaseSlotState::kActive));
      b.node[0].kernel_est_ns.store(100'000);
      b.arbiter.quantum_ns.store(10'000'000);
      b.lease.expiry_ns.store(expiry);
      b.lease.holder.store(1);
      b.lease.word.store(PackLeaseWord(0, expiry));
      b.arbiter.heartbeat_ns.store(expiry);
    }
  }
  ProbeOptions Options(std::vector<std::string> extra = {}) {
    ProbeOptions o;
    o.segment = &segment;
    o.tenant = 0;
    o.env.push_back("TESSERA_SHIM_LEASES=" + leases_path);
    for (std::string& e : extra) o.env.push_back(std::move(e));
    return o;
  }
  testing::TestSegment segment;
  std::string leases_path;
  std::optional<LeaseFile> leases;
};

// Runs `drivercalls` and checks the counts; returns the probe's line for the message.
std::string ExpectNoDriverCallPerLaunch(const ProbeOptions& o, const std::vector<std::string>& before,
                                        const std::string& spec, long launches = kLaunches) {
  std::vector<std::string> args = before;
  args.push_back("drivercalls:" + std::to_string(kWarm) + ":" + std::to_string(launches) + spec);
  ProbeRun run = RunProbe(o, args);
  EXPECT_EQ(run.exit_code, 0);
  const std::string line = run.Find("drivercalls ");
  EXPECT_EQ(FieldInt(line, "failures"), 0) << line;
  EXPECT_EQ(FieldInt(line, "launch"), launches) << line;  // the launch itself, exactly once
  EXPECT_LE(FieldInt(line, "other"), launches / kLaunchesPerAllowedCall) << line;
  return line;
}

TEST(ShimLaunchPath, HeldLeaseOnOneGpuMakesNoDriverCallPerLaunch) {
  HeldLeaseNode node(1);
  std::printf("%s\n", ExpectNoDriverCallPerLaunch(node.Options(), {"init"}, "").c_str());
  std::printf("%s\n", ExpectNoDriverCallPerLaunch(node.Options(), {"init"}, ":0x40").c_str());
  std::printf("%s\n", ExpectNoDriverCallPerLaunch(node.Options(), {"init"}, ":0:ptsz").c_str());
  // The meter really ran (it is what calls the driver per segment): the slot meters and segments
  // were read back.
  EXPECT_EQ(node.leases->board(0).slots[0].gpu.metering.load(), 1u);
  EXPECT_GT(node.leases->board(0).slots[0].gpu.segments.load(), 0u);
}

TEST(ShimLaunchPath, MeterOffAndUngatedMakeNoDriverCallPerLaunch) {
  HeldLeaseNode node(1);
  ExpectNoDriverCallPerLaunch(node.Options({"TESSERA_SHIM_GPU_METER=0"}), {"init"}, "");
  ProbeOptions ungated;  // managed memory, no lease file
  ungated.segment = &node.segment;
  ExpectNoDriverCallPerLaunch(ungated, {"init"}, "");
  ProbeOptions unmanaged;  // preloaded, no segment
  ExpectNoDriverCallPerLaunch(unmanaged, {"init"}, "");
}

// One tenant under a running arbiter (as `tessera run --share 100`): leases end every quantum and
// the tenant waits for the next at most once per lease; lease boundaries add no driver call per
// launch either (the wait path asks nothing about capture while no capture has begun; the meter
// flushes once per wait).
TEST(ShimLaunchPath, LeaseBoundariesUnderARunningArbiterMakeNoDriverCallPerLaunch) {
  testing::TestLeaseNode node;
  ASSERT_TRUE(node.segment.seg().SetLimit(0, 0, 1ULL << 30).ok());
  node::LeaseArbiterOptions options;  // weighted_fair, 10 ms quantum
  StatusOr<std::unique_ptr<node::LeaseArbiter>> arbiter = node::LeaseArbiter::Create(&node.board(), options);
  ASSERT_TRUE(arbiter.ok()) << arbiter.status().ToString();
  node::LeaseTenantConfig config;
  config.tenant_id = 0;
  config.kernel_estimate = std::chrono::microseconds(100);
  ASSERT_TRUE((*arbiter)->AddTenant(0, config).ok());
  node::LeaseArbiterRunner runner(**arbiter);
  runner.Start();
  ProbeOptions o;
  o.segment = &node.segment;
  o.env.push_back("TESSERA_SHIM_LEASES=" + node.leases_path);
  // 3 M launches: 20-30 leases of 10 ms on the development VM.
  const std::string line = ExpectNoDriverCallPerLaunch(o, {"init"}, "", 3'000'000);
  runner.Stop();
  std::printf("%s waits=%llu grants=%llu\n", line.c_str(),
              static_cast<unsigned long long>(node.board().slots[0].tenant.waits.load()),
              static_cast<unsigned long long>(node.board().node[0].grants.load()));
  EXPECT_GE(node.board().slots[0].tenant.launches.load(), 3'000'000u);
  EXPECT_GT(node.board().node[0].grants.load(), 2u);  // it did cross lease boundaries
}

// A process on two node GPUs: the board is the current context's GPU's. The shim caches the
// current context's device per thread (src/enforce/shim/context_cache.h), kept by its hooks on every
// entry point that changes the current context; before, the gate asked the driver at every launch
// (other=100000 calls=cuCtxGetDevice:100000).
TEST(ShimLaunchPath, HeldLeaseOnTwoGpusMakesNoDriverCallPerLaunch) {
  HeldLeaseNode node(2);
  const std::vector<std::string> env = {"TESSERA_SHIM_GPUS=0,1", "TESSERA_FAKE_CUDA_DEVICES=2"};
  const std::string line = ExpectNoDriverCallPerLaunch(node.Options(env), {"init", "ctx:1"}, "");
  std::printf("%s\n", line.c_str());
  // ... and the launches were gated on GPU 1's board, the current context's.
  EXPECT_GE(node.leases->board(1).slots[0].tenant.launches.load(), static_cast<uint64_t>(kLaunches));
  EXPECT_EQ(node.leases->board(0).slots[0].tenant.launches.load(), 0u);
}

// Switching the current context between GPUs 0 and 1 gates every launch on the board of the GPU
// it runs on: a stale cache would charge GPU 1's launches to GPU 0's lease or the reverse. Each
// round launches 3 times on GPU 1 and once on GPU 0, so the boards must count exactly 3N and N.
// The context entry points are called directly and through cuGetProcAddress_v2 (as the CUDA
// runtime gets them); switching through the hooks asks the driver nothing, a destroy makes the
// next launch ask once.
struct SwitchCase {
  const char* mode;
  const char* route;
  long max_getdevice;  // cuCtxGetDevice calls allowed during the N rounds
};

void ExpectEachLaunchOnItsGpu(const SwitchCase& c) {
  constexpr long kRounds = 5'000;
  HeldLeaseNode node(2);
  const std::vector<std::string> env = {"TESSERA_SHIM_GPUS=0,1", "TESSERA_FAKE_CUDA_DEVICES=2"};
  ProbeRun run = RunProbe(node.Options(env), {"init", std::string("ctxswitch:") + c.mode + ":" + c.route + ":" +
                                                          std::to_string(kRounds)});
  EXPECT_EQ(run.exit_code, 0);
  const std::string line = run.Find("ctxswitch ");
  SCOPED_TRACE(std::string(c.mode) + " via " + c.route + ": " + line);
  EXPECT_EQ(FieldInt(line, "failures"), 0);
  EXPECT_EQ(FieldInt(line, "launches"), 4 * kRounds);
  EXPECT_LE(FieldInt(line, "getdevice"), c.max_getdevice);
  EXPECT_EQ(node.leases->board(1).slots[0].tenant.launches.load(), static_cast<uint64_t>(3 * kRounds));
  EXPECT_EQ(node.leases->board(0).slots[0].tenant.launches.load(), static_cast<uint64_t>(kRounds));
}

TEST(ShimLaunchPath, SetCurrentBetweenTwoGpusGatesEachLaunchOnItsGpu) {
  ExpectEachLaunchOnItsGpu({"set", "direct", 0});
  ExpectEachLaunchOnItsGpu({"set", "gpa2", 0});
}

TEST(ShimLaunchPath, PushAndPopOnOneThreadGateEachLaunchOnItsGpu) {
  ExpectEachLaunchOnItsGpu({"pushpop", "direct", 0});
  ExpectEachLaunchOnItsGpu({"pushpop", "gpa2", 0});
  ExpectEachLaunchOnItsGpu({"pushpop", "gpa1", 0});
}

TEST(ShimLaunchPath, TwoThreadsOnTwoGpusGateEachLaunchOnItsGpu) {
  ExpectEachLaunchOnItsGpu({"threads", "direct", 0});
  ExpectEachLaunchOnItsGpu({"threads", "gpa2", 0});
}

// After a destroy the shim does not trust what it knew: the next launch asks the driver, once.
TEST(ShimLaunchPath, DestroyingTheCurrentContextGatesOnTheOneBelow) {
  ExpectEachLaunchOnItsGpu({"destroy", "direct", 5'000});
  ExpectEachLaunchOnItsGpu({"destroy", "gpa2", 5'000});
}

}  // namespace
}  // namespace tessera::enforce
