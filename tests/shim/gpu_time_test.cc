// Compute shares by measured GPU time (issue 29 §1), end to end on the fake driver's simulated
// device clock: two probe processes under LD_PRELOAD=libtessera-shim.so, weights 30/70 or 10/90,
// each flooding its own stream(s) with kernels whose real duration is far from the arbiter's 1 ms
// duration estimate, against a LeaseArbiterRunner thread. The share is the device time each
// tenant's kernels got in a common window (tessera_fake_cuda_busy_ns), not a launch count.
//
// Before the shim measured GPU time (charging launches x the 1 ms estimate, and letting a tenant
// queue work without bound) these splits came out wrong, as on the H200 (issue 29): 50 us kernels
// at 30/70 gave tenant 1 0.81 (each launch was charged 20x its cost), 4 ms kernels synchronised
// every 8 launches gave 0.49 (each tenant queued 32 ms inside a 10 ms lease), 4 streams of 200 us
// kernels 0.45. With measured charging but a synchronising tenant sent to the back of the queue
// at each pause, 4 ms kernels gave 0.65-0.68 on a loaded machine (a CI failure) and graphs 0.76-0.81.
//
// Tolerance: +-5 points of the weighted share over 1.5 s (150 leases); the simulated device is
// exact, the slack absorbs the host scheduling of a loaded 2-core CI machine (a probe woken late
// starts its lease late). Realtime: these run alone (ctest label "realtime", RUN_SERIAL).
// Under a sanitizer (make test's TSan and ASan+UBSan runs of this binary) each launch costs the
// probe several times the host time, and a probe descheduled on a loaded machine leaves the device
// to the other tenant, as a work-conserving arbiter should: one CI run gave tenant 1 0.645 at 3/7
// with 4 streams (device busy 0.90, tenant 0 granted 54 leases to 97). There the share is checked
// to +-10 points, which still fails an arbiter that ignores weights (0.50); the Release run keeps
// +-5. The sanitizer runs are for races and memory errors in the meter, not for the split.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tessera/node/lease_arbiter.h"
#include "tests/shim/shim_test_util.h"

namespace tessera::enforce {
namespace {

using testing::FieldInt;
using testing::Probe;
using testing::ProbeOptions;

constexpr uint64_t kMs = 1'000'000;
// The device must stay busy (the bound must not starve it). A floor, not the >= 95 % target of a
// real GPU: on a loaded 2-core VM the probes' host threads submit late (0.78-0.97 measured here).
constexpr double kMinBusy = 0.75;
#ifdef TESSERA_SANITIZER_RUNTIME
constexpr double kShareTolerance = 0.10;
#else
constexpr double kShareTolerance = 0.05;
#endif

struct Flood {
  uint32_t weights[2] = {3, 7};
  long kernel_us = 1000;
  long batch = 0;    // cuCtxSynchronize every BATCH launches (0: never)
  long streams = 1;  // streams per tenant, round robin
  long graph_k = 0;  // > 0: cuGraphLaunch of a graph of this many kernels
  uint64_t window_ms = 1500;
};

struct Outcome {
  double share1 = 0;       // tenant 1's fraction of the device time both got
  double busy = 0;         // fraction of the window the device ran either tenant's kernels
  long busy_us[2] = {0, 0};
};

Outcome RunFlood(const Flood& f) {
  testing::TestLeaseNode node;
  for (int t = 0; t < 2; ++t) EXPECT_TRUE(node.segment.seg().SetLimit(t, 0, 1ULL << 30).ok());
  node::LeaseArbiterOptions options;  // weighted_fair, 10 ms quantum
  StatusOr<std::unique_ptr<node::LeaseArbiter>> arbiter = node::LeaseArbiter::Create(&node.board(), options);
  EXPECT_TRUE(arbiter.ok()) << arbiter.status().ToString();
  if (!arbiter.ok()) return {};
  for (uint32_t t = 0; t < 2; ++t) {
    node::LeaseTenantConfig config;
    config.tenant_id = t;
    config.weight = f.weights[t];
    config.kernel_estimate = std::chrono::milliseconds(1);  // the default estimate, wrong on purpose
    EXPECT_TRUE((*arbiter)->AddTenant(t, config).ok());
  }
  node::LeaseArbiterRunner runner(**arbiter);
  runner.Start();
  const std::string go = node.segment.dir.path() + "/go";
  const std::string cmd = "flood:" + std::to_string(f.kernel_us) + ":" + std::to_string(f.batch) + ":" +
                          std::to_string(f.streams) + ":" + std::to_string(f.graph_k) + ":" + go;
  auto options_for = [&](int tenant) {
    ProbeOptions o;
    o.segment = &node.segment;
    o.tenant = tenant;
    o.env.push_back("TESSERA_SHIM_LEASES=" + node.leases_path);
    return o;
  };
  Probe a(options_for(0), {"init", cmd});
  Probe b(options_for(1), {"init", cmd});
  // Both probes poll for the window; it opens 200 ms from now (time to start and map everything).
  const uint64_t start = MonotonicNowNs() + 200 * kMs;
  const uint64_t end = start + f.window_ms * kMs;
  {
    const std::string tmp = go + ".tmp";
    std::ofstream out(tmp);
    out << start << " " << end << "\n";
    out.close();
    EXPECT_EQ(::rename(tmp.c_str(), go.c_str()), 0);
  }
  EXPECT_EQ(a.Finish(), 0);
  EXPECT_EQ(b.Finish(), 0);
  runner.Stop();
  for (uint32_t t = 0; t < 2; ++t) {
    const node::LeaseTenantStats st = (*arbiter)->stats(t);
    std::printf("tenant %u: %lu leases (ended: %lu expired, %lu idle, %lu handed back), %lu unused\n", t,
                static_cast<unsigned long>(st.grants), static_cast<unsigned long>(st.ended_expired),
                static_cast<unsigned long>(st.ended_idle), static_cast<unsigned long>(st.ended_returned),
                static_cast<unsigned long>(st.unused_grants));
  }
  Outcome o;
  Probe* probes[2] = {&a, &b};
  for (int t = 0; t < 2; ++t) {
    for (const std::string& line : probes[t]->lines()) {
      if (line.rfind("flood ", 0) == 0) {
        o.busy_us[t] = FieldInt(line, "busy_us");
        EXPECT_EQ(FieldInt(line, "failures"), 0) << line;
      }
    }
  }
  const double total = static_cast<double>(o.busy_us[0] + o.busy_us[1]);
  o.share1 = total > 0 ? static_cast<double>(o.busy_us[1]) / total : 0;
  o.busy = total / (static_cast<double>(f.window_ms) * 1000.0);
  std::printf("kernels %ld us (batch %ld, %ld streams, graph %ld), weights %u/%u: device time %ld / %ld us, "
              "share of tenant 1 %.3f, device busy %.3f\n",
              f.kernel_us, f.batch, f.streams, f.graph_k, f.weights[0], f.weights[1], o.busy_us[0], o.busy_us[1],
              o.share1, o.busy);
  return o;
}

double Weighted(const Flood& f) {
  return static_cast<double>(f.weights[1]) / static_cast<double>(f.weights[0] + f.weights[1]);
}

TEST(ShimGpuTime, KernelsFarShorterThanTheEstimateSplitByWeight) {
  Flood f;
  f.kernel_us = 50;  // 1/20 of the estimate; the stream's 1024-deep queue holds 51 ms
  const Outcome o = RunFlood(f);
  EXPECT_NEAR(o.share1, Weighted(f), kShareTolerance);
  EXPECT_GT(o.busy, kMinBusy);
}

TEST(ShimGpuTime, KernelsFarLongerThanTheEstimateSplitByWeight) {
  Flood f;
  f.kernel_us = 4000;  // 4x the estimate, 8 queued between synchronisations (32 ms, a PyTorch loop)
  f.batch = 8;
  const Outcome o = RunFlood(f);
  EXPECT_NEAR(o.share1, Weighted(f), kShareTolerance);
  EXPECT_GT(o.busy, kMinBusy);
}

// The weight-9 tenant synchronises every 16 ms of work. Before a paused tenant kept its place
// (LeaseArbiter::Paused, TimeslicePolicy::KeepPlace) and got the GPU back when it returned
// (LeaseEndReason::kReturned), its lease ended as idle in each synchronisation, it re-entered
// the queue at the back, and it got 0.76-0.81.
TEST(ShimGpuTime, GraphsOfTenKernelsSplitByWeight) {
  Flood f;
  f.weights[0] = 1;
  f.weights[1] = 9;
  f.kernel_us = 100;
  f.graph_k = 10;  // 1 ms per graph launch, charged 10 ms by the estimate
  f.batch = 16;
  const Outcome o = RunFlood(f);
  EXPECT_NEAR(o.share1, Weighted(f), kShareTolerance);
  EXPECT_GT(o.busy, kMinBusy);
}

TEST(ShimGpuTime, FourStreamsPerTenantSplitByWeight) {
  Flood f;
  f.kernel_us = 200;
  f.streams = 4;
  const Outcome o = RunFlood(f);
  EXPECT_NEAR(o.share1, Weighted(f), kShareTolerance);
  EXPECT_GT(o.busy, kMinBusy);
}

}  // namespace
}  // namespace tessera::enforce
