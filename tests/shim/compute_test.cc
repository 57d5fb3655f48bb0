// Compute leases through libtessera-shim.so, end to end: probe processes under LD_PRELOAD with
// the fake driver gate their cuLaunchKernel calls on the lease file's board (TESSERA_SHIM_LEASES),
// driven either by a real LeaseArbiter thread in this test process or by a board the test writes
// by hand (to pin down one situation: "another tenant holds the lease, the arbiter is alive").
//
//   - Shares: two tenants, weights 3 and 7, each a process launching 1 ms synchronous "kernels"
//     (launch, then sleep 1 ms) for 2 s: the kernel counts split about 30/70. The exact ±3 %
//     is shown in virtual time by tests/node; 2 s of wall time on a loaded 2-core CI machine
//     (where a woken process can wait milliseconds for a CPU) gets a tolerance of ±10 points.
//   - Stream capture never blocks: with another tenant holding the lease and the arbiter alive,
//     a process capturing a stream launches 200 kernels and a graph at once (counted as captured),
//     while a plain launch of the same tenant blocks.
//   - Failure policy (docs/decisions/0002-shim-fail-open-or-closed.md): with a dead arbiter (no
//     heartbeat) launches run ungated by default (TESSERA_SHIM_COMPUTE_FAIL=open, counted), and
//     block with TESSERA_SHIM_COMPUTE_FAIL=closed.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/node/lease_arbiter.h"
#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tests/shim/shim_test_util.h"

namespace tessera::enforce {
namespace {

using testing::FieldInt;
using testing::Probe;
using testing::ProbeOptions;
using testing::ProbeRun;
using testing::RunProbe;

constexpr uint64_t kMs = 1'000'000;

struct LeaseSetup : testing::TestLeaseNode {
  LeaseSetup() {
    for (int t = 0; t < 2; ++t) EXPECT_TRUE(segment.seg().SetLimit(t, 0, 1ULL << 30).ok());
  }
  ProbeOptions Options(int tenant, std::vector<std::string> extra = {}) {
    ProbeOptions o;
    o.segment = &segment;
    o.tenant = tenant;
    o.env.push_back("TESSERA_SHIM_LEASES=" + leases_path);
    for (std::string& e : extra) o.env.push_back(std::move(e));  // later ones replace earlier ones
    return o;
  }
  // By hand: slots 0 and 1 active, slot 0 holds the lease for an hour; heartbeat fresh or dead.
  void HandGrantToSlot0(bool arbiter_alive) {
    LeaseBoard& b = board();
    const uint64_t expiry = MonotonicNowNs() + 3600ULL * 1000 * kMs;
    for (int s = 0; s < 2; ++s) {
      b.node[s].state.store(static_cast<uint32_t>(LeaseSlotState::kActive));
      b.node[s].kernel_est_ns.store(100'000);
    }
    b.lease.expiry_ns.store(expiry);
    b.lease.holder.store(1);
    b.lease.word.store(PackLeaseWord(0, expiry));
    b.arbiter.heartbeat_ns.store(arbiter_alive ? expiry : 0);
  }
};

// True when the probe printed a line within `ms`.
bool PrintsWithin(Probe& p, int ms) {
  // The probe's stdout is a FILE*: read it on a thread, watch the clock here.
  std::atomic<bool> got{false};
  std::thread reader([&] { got = !p.ReadLine().empty(); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!got && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const bool printed = got;
  p.Kill();  // unblocks the reader (EOF)
  reader.join();
  return printed;
}

TEST(ShimCompute, WeightedSharesBetweenTwoProcesses) {
  LeaseSetup s;
  node::LeaseArbiterOptions options;  // weighted_fair, 10 ms quantum
  StatusOr<std::unique_ptr<node::LeaseArbiter>> arbiter = node::LeaseArbiter::Create(&s.board(), options);
  ASSERT_TRUE(arbiter.ok()) << arbiter.status().ToString();
  const uint32_t weights[2] = {3, 7};
  for (uint32_t t = 0; t < 2; ++t) {
    node::LeaseTenantConfig config;
    config.tenant_id = t;
    config.weight = weights[t];
    config.kernel_estimate = std::chrono::milliseconds(1);
    ASSERT_TRUE((*arbiter)->AddTenant(t, config).ok());
  }
  node::LeaseArbiterRunner runner(**arbiter);
  runner.Start();
  const std::string go = s.segment.dir.path() + "/go";
  const std::string kernels = "kernels:2000:1000:" + go;
  Probe a(s.Options(0), {"init", kernels});
  Probe b(s.Options(1), {"init", kernels});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // both started and polling
  const int fd = ::open(go.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ::close(fd);
  ASSERT_EQ(a.Finish(), 0);
  ASSERT_EQ(b.Finish(), 0);
  runner.Stop();
  long count[2] = {0, 0};
  Probe* probes[2] = {&a, &b};
  for (int t = 0; t < 2; ++t) {
    for (const std::string& line : probes[t]->lines()) {
      if (line.rfind("kernels ", 0) == 0) count[t] = FieldInt(line, "count");
    }
  }
  ASSERT_GT(count[0], 0);
  ASSERT_GT(count[1], 0);
  const double share1 = static_cast<double>(count[1]) / static_cast<double>(count[0] + count[1]);
  std::printf("kernels: tenant 0 (weight 3) %ld, tenant 1 (weight 7) %ld: share of tenant 1 %.3f\n", count[0],
              count[1], share1);
  EXPECT_NEAR(share1, 0.7, 0.10);
  // The launches went through the gate of the tenants' own slots.
  EXPECT_GE(s.board().slots[0].tenant.launches.load(), static_cast<uint64_t>(count[0]));
  EXPECT_GE(s.board().slots[1].tenant.launches.load(), static_cast<uint64_t>(count[1]));
  // Both (nearly) saturated the GPU between them: 2 s of 1 ms kernels + launch overhead.
  EXPECT_GT(count[0] + count[1], 1000);
}

TEST(ShimCompute, CapturingNeverBlocksButAPlainLaunchWaits) {
  LeaseSetup s;
  s.HandGrantToSlot0(/*arbiter_alive=*/true);
  const auto t0 = std::chrono::steady_clock::now();
  ProbeRun capture = RunProbe(s.Options(1), {"init", "capture:200"});
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(capture.exit_code, 0);
  EXPECT_EQ(FieldInt(capture.Find("capture "), "failures"), 0);
  EXPECT_LT(ms, 5000.0);  // never waited (a wait step is 250 ms per launch: 201 launches would be 50 s)
  EXPECT_EQ(s.board().slots[1].tenant.captured_launches.load(), 201u);
  EXPECT_EQ(s.board().slots[1].tenant.launches.load(), 0u);
  EXPECT_EQ(s.board().slots[0].tenant.launches.load(), 0u);
  // The same tenant's plain launch waits for a lease that never comes.
  Probe plain(s.Options(1), {"init", "launch:1"});
  EXPECT_EQ(plain.ReadLine().rfind("init", 0), 0u);
  EXPECT_FALSE(PrintsWithin(plain, 400));
  EXPECT_GE(s.board().slots[1].tenant.waits.load(), 1u);
  // The holder's launches pass at once.
  ProbeRun holder = RunProbe(s.Options(0), {"init", "launch:50"});
  EXPECT_EQ(FieldInt(holder.Find("launch "), "failures"), 0);
  EXPECT_EQ(s.board().slots[0].tenant.launches.load(), 50u);
}

TEST(ShimCompute, DeadArbiterFailsOpenByDefaultAndClosedOnRequest) {
  LeaseSetup s;
  s.HandGrantToSlot0(/*arbiter_alive=*/false);
  ProbeRun open = RunProbe(s.Options(1), {"init", "launch:20"});
  ASSERT_EQ(open.exit_code, 0);
  EXPECT_EQ(FieldInt(open.Find("launch "), "failures"), 0);
  EXPECT_EQ(s.board().slots[1].tenant.launches.load(), 20u);  // counted although ungated
  Probe closed(s.Options(1, {"TESSERA_SHIM_COMPUTE_FAIL=closed"}), {"init", "launch:1"});
  EXPECT_EQ(closed.ReadLine().rfind("init", 0), 0u);
  EXPECT_FALSE(PrintsWithin(closed, 400));
  EXPECT_EQ(s.board().slots[1].tenant.launches.load(), 20u);
}

// A value other than open/closed is a misconfiguration: one stderr line naming the variable and the
// value, and the safe choice, closed (decision 0002).
TEST(ShimCompute, AnInvalidComputeFailValueIsReportedAndMeansClosed) {
  LeaseSetup s;
  s.HandGrantToSlot0(/*arbiter_alive=*/false);
  ProbeOptions o = s.Options(1, {"TESSERA_SHIM_COMPUTE_FAIL=opne"});
  o.stderr_path = s.segment.dir.path() + "/probe.stderr";
  Probe p(o, {"init", "launch:1"});
  EXPECT_EQ(p.ReadLine().rfind("init", 0), 0u);
  EXPECT_FALSE(PrintsWithin(p, 400));  // the launch waits for an arbiter: closed
  EXPECT_EQ(s.board().slots[1].tenant.launches.load(), 0u);
  std::ifstream in(o.stderr_path);
  std::vector<std::string> mentions;
  for (std::string line; std::getline(in, line);) {
    if (line.find("TESSERA_SHIM_COMPUTE_FAIL") != std::string::npos) mentions.push_back(line);
  }
  ASSERT_EQ(mentions.size(), 1u);
  EXPECT_NE(mentions[0].find("TESSERA_SHIM_COMPUTE_FAIL='opne'"), std::string::npos) << mentions[0];
  EXPECT_NE(mentions[0].find("using closed"), std::string::npos) << mentions[0];
}

TEST(ShimCompute, UnusableLeaseFileIsAMisconfiguration) {
  LeaseSetup s;
  ProbeOptions o = s.Options(0, {"TESSERA_SHIM_LEASES=" + s.segment.dir.path() + "/missing"});
  ProbeRun r = RunProbe(o, {"init", "alloc:mem:4096"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(FieldInt(r.Find("alloc "), "rc"), 800);  // CUDA_ERROR_NOT_PERMITTED (fail closed)
}

}  // namespace
}  // namespace tessera::enforce
