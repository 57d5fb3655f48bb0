// LeaseArbiter on a virtual clock: weighted shares for 2, 3, 4 and 8 tenants within 3 % over
// 10 s of virtual time on the VirtualNode fake GPU, graphs charged by their kernels, strict
// priority bounds the high-priority tenant's launch wait, idle tenants' share goes to others,
// dead waiters cost at most one short grant, min/max shares, hierarchical groups, and the
// exact charges of the header's worked example stepped by hand.
#include "tessera/node/lease_arbiter.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "tests/node/virtual_node.h"

namespace tessera::node {
namespace {

using enforce::LeaseBoard;
using enforce::LaunchKind;
using testing::SimProcess;
using testing::VirtualNode;
using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr uint64_t kMs = 1'000'000;

struct alignas(64) BoardMemory {
  unsigned char bytes[sizeof(LeaseBoard)];
};

// --- options and configuration --------------------------------------------------------------

TEST(LeaseArbiterTest, CreateRejectsBadOptionsNamingTheField) {
  auto mem = std::make_unique<BoardMemory>();
  LeaseBoard* board = nullptr;
  ASSERT_EQ(enforce::InitLeaseBoard(mem.get(), sizeof(BoardMemory), 0, 0, &board), enforce::LeaseBoardCheck::kOk);
  EXPECT_EQ(LeaseArbiter::Create(nullptr, {}).status().message(), "lease arbiter: board is null");
  EXPECT_EQ(LeaseArbiter::Create(board, {.quantum = Nanos(0)}).status().message(),
            "lease arbiter: quantum must be > 0");
  EXPECT_EQ(LeaseArbiter::Create(board, {.quantum = milliseconds(1), .idle_grace = milliseconds(1)}).status().message(),
            "lease arbiter: idle_grace must be > 0 and < quantum");
  const auto bad_policy = LeaseArbiter::Create(board, {.policy = "fifo"});
  EXPECT_EQ(bad_policy.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad_policy.status().message().find("lease arbiter: policy: unknown time-slice policy 'fifo'"),
            std::string::npos)
      << bad_policy.status().message();
  // Memory that is not a board.
  auto junk = std::make_unique<BoardMemory>();
  std::fill(std::begin(junk->bytes), std::end(junk->bytes), 0);
  EXPECT_EQ(LeaseArbiter::Create(reinterpret_cast<LeaseBoard*>(junk.get()), {}).status().message(),
            "lease arbiter: board: bad magic (not a lease board)");
}

TEST(LeaseArbiterTest, AddTenantValidatesAndPublishesTheSlot) {
  auto mem = std::make_unique<BoardMemory>();
  LeaseBoard* board = nullptr;
  ASSERT_EQ(enforce::InitLeaseBoard(mem.get(), sizeof(BoardMemory), 0, 0, &board), enforce::LeaseBoardCheck::kOk);
  auto arbiter = std::move(LeaseArbiter::Create(board, {}).value());
  EXPECT_EQ(arbiter->AddTenant(64, {}).message(), "lease tenant slot 64: out of range (0..63)");
  EXPECT_EQ(arbiter->AddTenant(1, {.weight = 0}).message(), "lease tenant slot 1: weight must be >= 1");
  EXPECT_EQ(arbiter->AddTenant(1, {.min_share = 0.5, .max_share = 0.4}).message(),
            "lease tenant slot 1: min_share exceeds max_share");
  EXPECT_EQ(arbiter->AddTenant(1, {.max_share = 1.5}).message(), "lease tenant slot 1: max_share must be in (0, 1]");
  ASSERT_TRUE(arbiter->AddTenant(1, {.tenant_id = 77, .weight = 2, .min_share = 0.6, .kernel_estimate = microseconds(250)}).ok());
  EXPECT_EQ(arbiter->AddTenant(1, {}).message(), "lease tenant slot 1: already in use");
  EXPECT_EQ(arbiter->AddTenant(2, {.min_share = 0.5}).message(),
            "lease tenant slot 2: the min shares of all tenants exceed 1");
  EXPECT_EQ(board->node[1].state.load(), static_cast<uint32_t>(enforce::LeaseSlotState::kActive));
  EXPECT_EQ(board->node[1].tenant_id.load(), 77u);
  EXPECT_EQ(board->node[1].kernel_est_ns.load(), 250'000u);
  ASSERT_TRUE(arbiter->SetKernelEstimate(1, microseconds(400)).ok());
  EXPECT_EQ(board->node[1].kernel_est_ns.load(), 400'000u);
  ASSERT_TRUE(arbiter->RemoveTenant(1).ok());
  EXPECT_EQ(board->node[1].state.load(), static_cast<uint32_t>(enforce::LeaseSlotState::kFree));
  EXPECT_EQ(arbiter->RemoveTenant(1).code(), StatusCode::kNotFound);
}

// --- the header's worked example, stepped by hand ---------------------------------------------

TEST(LeaseArbiterTest, HeaderWorkedExampleStepByStep) {
  auto mem = std::make_unique<BoardMemory>();
  LeaseBoard* board = nullptr;
  ASSERT_EQ(enforce::InitLeaseBoard(mem.get(), sizeof(BoardMemory), 0, 0, &board), enforce::LeaseBoardCheck::kOk);
  auto arbiter = std::move(LeaseArbiter::Create(board, {}).value());  // weighted_fair, 10 ms
  ASSERT_TRUE(arbiter->AddTenant(0, {.weight = 1, .kernel_estimate = milliseconds(1)}).ok());  // A
  ASSERT_TRUE(arbiter->AddTenant(1, {.weight = 3, .kernel_estimate = milliseconds(1)}).ok());  // B
  enforce::BeginLeaseWait(*board, 0);
  enforce::BeginLeaseWait(*board, 1);
  // t=0: tie -> A, lease [0, 10 ms); A's waiters are woken (wake_seq moved). B waits, so the
  // arbiter looks again when A's grant would count as unused (wake_grace, 2 ms).
  EXPECT_EQ(arbiter->Step(0), 2 * kMs);
  EXPECT_EQ(arbiter->holder(), 0u);
  EXPECT_EQ(board->node[0].wake_seq.load(), 1u);
  EXPECT_TRUE(enforce::LeaseHeld(*board, 0, 9 * kMs));
  EXPECT_FALSE(enforce::LeaseHeld(*board, 0, 10 * kMs));
  EXPECT_FALSE(enforce::LeaseHeld(*board, 1, 5 * kMs));
  // A launches one 1 ms kernel per ms.
  for (uint64_t t = 0; t < 10; ++t) {
    EXPECT_EQ(enforce::TryAdmitLaunch(*board, 0, {}, t * kMs), enforce::GateResult::kAdmitted);
  }
  // t=10: A charged 10 ms; B (vtime 0) gets [10, 20).
  arbiter->Step(10 * kMs);
  EXPECT_EQ(arbiter->stats(0).charged_ns, 10 * kMs);
  EXPECT_EQ(arbiter->holder(), 1u);
  for (int round = 0; round < 3; ++round) {
    const uint64_t t0 = (10 + 10 * round) * kMs;
    EXPECT_EQ(arbiter->holder(), 1u) << "round " << round;
    for (uint64_t t = 0; t < 10; ++t) {
      EXPECT_EQ(enforce::TryAdmitLaunch(*board, 1, {}, t0 + t * kMs), enforce::GateResult::kAdmitted);
    }
    arbiter->Step(t0 + 10 * kMs);
  }
  // B ran 3 leases (vtime 10 = A's), then A again (tie, lower slot).
  EXPECT_EQ(arbiter->stats(1).charged_ns, 30 * kMs);
  EXPECT_EQ(arbiter->holder(), 0u);
  // A now stops launching after t = 43 ms (four 1 ms kernels at 40..43). B waits, so the
  // lease ends when A is idle: max(work drained at 44, last launch 43 + 1 ms estimate)
  // + max(0.5 ms grace, half an estimate) = 44.5 ms. A is charged its 4 ms of work (more than
  // the 3 ms up to its last launch), and B gets the GPU.
  for (uint64_t t = 40; t < 44; ++t) EXPECT_EQ(enforce::TryAdmitLaunch(*board, 0, {}, t * kMs), enforce::GateResult::kAdmitted);
  const uint64_t next = arbiter->Step(43 * kMs + 100'000);
  EXPECT_EQ(next, 44 * kMs + 500'000);
  arbiter->Step(44 * kMs + 499'999);
  EXPECT_EQ(arbiter->holder(), 0u);
  arbiter->Step(44 * kMs + 500'000);
  EXPECT_EQ(arbiter->holder(), 1u);
  EXPECT_EQ(arbiter->stats(0).charged_ns, 14 * kMs);
  EXPECT_EQ(arbiter->stats(0).ended_idle, 1u);
}

// --- a tenant's own lines are its word, not the truth ------------------------------------------

// A hostile tenant writes its own page (enforce/lease.h) with values that, believed, would make
// its charge negative (a uint64 above 2^63 becomes a negative duration in the policy) and so win
// it every lease. The arbiter clamps them, counts them, and the honest tenant gets its turns.
TEST(LeaseArbiterTest, ImplausibleMeasuredTimeIsClampedAndCounted) {
  auto mem = std::make_unique<BoardMemory>();
  LeaseBoard* board = nullptr;
  ASSERT_EQ(enforce::InitLeaseBoard(mem.get(), sizeof(BoardMemory), 0, 0, &board), enforce::LeaseBoardCheck::kOk);
  auto arbiter = std::move(LeaseArbiter::Create(board, {}).value());  // weighted_fair, 10 ms
  ASSERT_TRUE(arbiter->AddTenant(0, {.kernel_estimate = milliseconds(1)}).ok());  // hostile, metering
  ASSERT_TRUE(arbiter->AddTenant(1, {.kernel_estimate = milliseconds(1)}).ok());  // honest
  board->slots[0].gpu.metering.store(1);
  enforce::BeginLeaseWait(*board, 0);
  enforce::BeginLeaseWait(*board, 1);
  arbiter->Step(0);
  ASSERT_EQ(arbiter->holder(), 0u);
  EXPECT_EQ(enforce::TryAdmitLaunch(*board, 0, {}, 1 * kMs), enforce::GateResult::kAdmitted);
  // "Measured" 2^63 + 5 ns in 1 ms, queued work that never ends, a launch in the far future.
  board->slots[0].gpu.gpu_ns.store((1ULL << 63) + 5);
  board->slots[0].gpu.busy_until_ns.store(~0ULL);
  board->slots[0].tenant.last_launch_ns.store(~0ULL);
  arbiter->Step(1 * kMs);
  // Believed: at most its credit of late reports (kMaxMeasuredCreditNs); the rest is counted.
  EXPECT_EQ(arbiter->stats(0).charged_ns, kMaxMeasuredCreditNs);
  EXPECT_EQ(arbiter->stats(0).implausible_reports, 1u);
  EXPECT_EQ(arbiter->stats(0).clamped_ns, (1ULL << 63) + 5 - kMaxMeasuredCreditNs);
  // Its lease still ends at expiry; its claimed tail is believed for kMaxTailQuanta quanta at most.
  arbiter->Step(10 * kMs);
  EXPECT_EQ(arbiter->holder(), 1u);
  EXPECT_GE(arbiter->stats(0).implausible_reports, 2u);  // + the queued work ending at ~0
  EXPECT_LE(board->lease.expiry_ns.load(), 10 * kMs + (kMaxTailQuanta + 1) * 10 * kMs);
  // Backwards: nothing charged, counted.
  board->slots[0].gpu.gpu_ns.store(0);
  const uint64_t charged = arbiter->stats(0).charged_ns;
  const uint64_t reports = arbiter->stats(0).implausible_reports;
  arbiter->Step(11 * kMs);
  EXPECT_EQ(arbiter->stats(0).charged_ns, charged);
  EXPECT_EQ(arbiter->stats(0).implausible_reports, reports + 1);
  // The honest tenant (charged its leases only) keeps the GPU while both wait.
  for (uint64_t t = 12; t < 200; t += 10) {
    EXPECT_EQ(enforce::TryAdmitLaunch(*board, 1, {}, t * kMs), enforce::GateResult::kAdmitted) << t;
    arbiter->Step((t + 10) * kMs);
    EXPECT_EQ(arbiter->holder(), 1u) << t;
  }
}

// The same for a tenant that does not meter: its submitted estimate (its own line) is believed up
// to the end of its lease plus the tail bound, so a huge one cannot wrap its charge negative.
TEST(LeaseArbiterTest, ImplausibleSubmittedEstimateIsClampedAndCounted) {
  auto mem = std::make_unique<BoardMemory>();
  LeaseBoard* board = nullptr;
  ASSERT_EQ(enforce::InitLeaseBoard(mem.get(), sizeof(BoardMemory), 0, 0, &board), enforce::LeaseBoardCheck::kOk);
  auto arbiter = std::move(LeaseArbiter::Create(board, {}).value());  // weighted_fair, 10 ms
  ASSERT_TRUE(arbiter->AddTenant(0, {.kernel_estimate = milliseconds(1)}).ok());  // hostile
  ASSERT_TRUE(arbiter->AddTenant(1, {.kernel_estimate = milliseconds(1)}).ok());  // honest
  enforce::BeginLeaseWait(*board, 0);
  enforce::BeginLeaseWait(*board, 1);
  arbiter->Step(0);
  ASSERT_EQ(arbiter->holder(), 0u);
  EXPECT_EQ(enforce::TryAdmitLaunch(*board, 0, {}, 1 * kMs), enforce::GateResult::kAdmitted);
  board->slots[0].tenant.submitted_est_ns.store((1ULL << 63) + 5);
  arbiter->Step(10 * kMs);
  EXPECT_EQ(arbiter->holder(), 1u);
  // Charged the lease plus the believed tail: 10 ms + kMaxTailQuanta x 10 ms, not 2^63 ns.
  EXPECT_EQ(arbiter->stats(0).charged_ns, (1 + kMaxTailQuanta) * 10 * kMs);
  EXPECT_GE(arbiter->stats(0).implausible_reports, 1u);
  // The honest tenant launches a 1 ms kernel every ms while it holds the GPU.
  uint64_t t = 10;
  while (arbiter->holder() == 1u && t < 1000) {
    EXPECT_EQ(enforce::TryAdmitLaunch(*board, 1, {}, t * kMs), enforce::GateResult::kAdmitted) << t;
    arbiter->Step(++t * kMs);
  }
  // The hostile tenant waited its turn: the honest one was charged as much (90 ms) first.
  EXPECT_EQ(arbiter->holder(), 0u);
  EXPECT_GE(arbiter->stats(1).charged_ns, (1 + kMaxTailQuanta) * 10 * kMs);
}

TEST(LeaseArbiterTest, TailOfQueuedWorkIsChargedAndDelaysTheNextLease) {
  auto mem = std::make_unique<BoardMemory>();
  LeaseBoard* board = nullptr;
  ASSERT_EQ(enforce::InitLeaseBoard(mem.get(), sizeof(BoardMemory), 0, 0, &board), enforce::LeaseBoardCheck::kOk);
  auto arbiter = std::move(LeaseArbiter::Create(board, {}).value());
  ASSERT_TRUE(arbiter->AddTenant(0, {.kernel_estimate = milliseconds(1)}).ok());
  ASSERT_TRUE(arbiter->AddTenant(1, {.kernel_estimate = milliseconds(1)}).ok());
  enforce::BeginLeaseWait(*board, 0);
  enforce::BeginLeaseWait(*board, 1);
  arbiter->Step(0);
  // Slot 0 launches a graph of 14 kernels at t=1 ms: ~14 ms of GPU work, past its expiry.
  EXPECT_EQ(enforce::TryAdmitLaunch(*board, 0, {.kind = LaunchKind::kGraph, .graph_kernels = 14}, 1 * kMs),
            enforce::GateResult::kAdmitted);
  EXPECT_EQ(board->slots[0].tenant.graph_launches.load(), 1u);
  EXPECT_EQ(board->slots[0].tenant.submitted_est_ns.load(), 14 * kMs);
  arbiter->Step(10 * kMs);
  EXPECT_EQ(arbiter->stats(0).charged_ns, 14 * kMs);  // max(10 ms lease, 14 ms of work)
  EXPECT_EQ(arbiter->holder(), 1u);
  EXPECT_EQ(board->lease.start_ns.load(), 14 * kMs);   // the GPU drains slot 0's tail first
  EXPECT_EQ(board->lease.expiry_ns.load(), 20 * kMs);  // still one quantum after the grant
}

// A tenant that pauses to synchronise with its own GPU work (PyTorch's loop reading a loss)
// keeps its place, and the tenant granted the GPU in its pause hands it back the moment it
// waits again (issue 29: without this the weight-9 tenant of a 10/90 split got 0.58-0.81).
TEST(LeaseArbiterTest, APausedTenantGetsTheGpuBackWhenItWaitsAgain) {
  auto mem = std::make_unique<BoardMemory>();
  LeaseBoard* board = nullptr;
  ASSERT_EQ(enforce::InitLeaseBoard(mem.get(), sizeof(BoardMemory), 0, 0, &board), enforce::LeaseBoardCheck::kOk);
  auto arbiter = std::move(LeaseArbiter::Create(board, {}).value());  // weighted_fair, 10 ms
  ASSERT_TRUE(arbiter->AddTenant(0, {.weight = 1, .kernel_estimate = milliseconds(1)}).ok());  // A
  ASSERT_TRUE(arbiter->AddTenant(1, {.weight = 3, .kernel_estimate = milliseconds(1)}).ok());  // B
  enforce::BeginLeaseWait(*board, 0);
  enforce::BeginLeaseWait(*board, 1);
  arbiter->Step(0);  // A [0, 10)
  for (uint64_t t = 0; t < 10; ++t) ASSERT_EQ(enforce::TryAdmitLaunch(*board, 0, {}, t * kMs), enforce::GateResult::kAdmitted);
  arbiter->Step(10 * kMs);  // A charged 10 ms; B [10, 20)
  ASSERT_EQ(arbiter->holder(), 1u);
  enforce::EndLeaseWait(*board, 1, 0);
  // B launches three 1 ms kernels, then synchronises: idle at 13 + 0.5 ms grace. A gets the GPU.
  for (uint64_t t = 10; t < 13; ++t) ASSERT_EQ(enforce::TryAdmitLaunch(*board, 1, {}, t * kMs), enforce::GateResult::kAdmitted);
  arbiter->Step(13 * kMs + 500'000);
  EXPECT_EQ(arbiter->stats(1).ended_idle, 1u);
  ASSERT_EQ(arbiter->holder(), 0u);
  ASSERT_EQ(enforce::TryAdmitLaunch(*board, 0, {}, 13 * kMs + 600'000), enforce::GateResult::kAdmitted);
  // B is back with more work at 14 ms: A's borrowed lease ends now, not at its 23.5 ms expiry.
  enforce::BeginLeaseWait(*board, 1);
  arbiter->Step(14 * kMs);
  EXPECT_EQ(arbiter->holder(), 1u);
  EXPECT_EQ(arbiter->stats(0).ended_returned, 1u);
  EXPECT_EQ(arbiter->stats(0).charged_ns, 11 * kMs);  // 10 + its one borrowed 1 ms kernel
  // A tenant gone for longer than a quantum is not a lender: B (after its lease) stops for good.
  enforce::EndLeaseWait(*board, 1, 0);
  ASSERT_EQ(enforce::TryAdmitLaunch(*board, 1, {}, 14 * kMs), enforce::GateResult::kAdmitted);
  arbiter->Step(30 * kMs);  // B idle long ago; A (still waiting) holds [30, 40)
  ASSERT_EQ(arbiter->holder(), 0u);
  enforce::BeginLeaseWait(*board, 1);
  arbiter->Step(31 * kMs);
  EXPECT_EQ(arbiter->holder(), 0u);
  EXPECT_EQ(arbiter->stats(0).ended_returned, 1u);
}

// --- weighted shares on the virtual GPU ---------------------------------------------------------

struct ShareCase {
  std::string name;
  std::vector<uint32_t> weights;
};

class WeightedShareTest : public ::testing::TestWithParam<ShareCase> {};

// Tenants with different kernel lengths (0.3-3 ms), synchronous and asynchronous launchers and
// jittered kernel times; each tenant's estimate is its mean kernel time.
TEST_P(WeightedShareTest, SharesWithinThreePercentOverTenVirtualSeconds) {
  const std::vector<uint32_t>& w = GetParam().weights;
  VirtualNode node({.policy = "weighted_fair"}, /*seed=*/42);
  const Nanos kernels[] = {microseconds(1000), microseconds(300), microseconds(2500), microseconds(700)};
  for (uint32_t i = 0; i < w.size(); ++i) {
    const Nanos k = kernels[i % 4];
    node.AddTenant(i, {.tenant_id = 100 + i, .weight = w[i], .kernel_estimate = k});
    node.AddProcess({.slot = i, .kernel = k, .jitter = (i % 3 == 2) ? 0.3 : 0.0, .max_inflight = 1 + i % 2});
  }
  const VirtualNode::Result r = node.Run(seconds(10));
  const double total_w = std::accumulate(w.begin(), w.end(), 0.0);
  for (uint32_t i = 0; i < w.size(); ++i) {
    const double want = w[i] / total_w;
    EXPECT_NEAR(r.Share(i), want, 0.03 * want) << "tenant " << i << " weight " << w[i];
  }
  EXPECT_GE(static_cast<double>(r.busy_ns), 0.97 * 10e9) << "the GPU idled";
}

INSTANTIATE_TEST_SUITE_P(Weights, WeightedShareTest,
                         ::testing::Values(ShareCase{"w30_70", {30, 70}}, ShareCase{"w10_90", {10, 90}},
                                           ShareCase{"w1_2_3", {1, 2, 3}}, ShareCase{"w1_2_3_4", {1, 2, 3, 4}},
                                           ShareCase{"w8mixed", {1, 2, 2, 3, 4, 5, 6, 9}}),
                         [](const ::testing::TestParamInfo<ShareCase>& p) { return p.param.name; });

// A metering tenant that reports a tenth of the GPU time its kernels took (a hostile shim, or one
// that zeroes its gpu_ns) is charged a tenth and takes most of a 30/70 GPU; the node side's
// observed time (VirtualNode::ObserveEvery: the agent's NVML pass, UnderChargedNs) charges it what
// the GPU ran, and the split comes back to 30/70.
TEST(LeaseArbiterSimTest, ObservedTimeChargesATenantThatUnderReportsItsGpuTime) {
  const auto run = [](bool observe) {
    VirtualNode node({.policy = "weighted_fair"}, /*seed=*/7);
    node.AddTenant(0, {.tenant_id = 100, .weight = 30, .kernel_estimate = milliseconds(1)});
    node.AddTenant(1, {.tenant_id = 101, .weight = 70, .kernel_estimate = milliseconds(1)});
    node.AddProcess({.slot = 0, .kernel = milliseconds(1), .report = 0.1});
    node.AddProcess({.slot = 1, .kernel = milliseconds(1), .report = 1});
    if (observe) node.ObserveEvery(seconds(1));
    const VirtualNode::Result r = node.Run(seconds(120));
    return std::make_pair(r.Share(0), node.arbiter().stats(0).recharged_ns);
  };
  const auto [believed, none] = run(false);
  EXPECT_GT(believed, 0.5) << "the under-report no longer pays: the test shows nothing";
  EXPECT_EQ(none, 0u);
  const auto [observed, recharged] = run(true);
  EXPECT_NEAR(observed, 0.30, 0.03);
  EXPECT_GT(recharged, 0u);
}

// An honest metering tenant whose kernels last 1.5 s reports each when it ends, up to two passes
// after NVML saw it run: the lag keeps it from paying for them twice.
TEST(LeaseArbiterSimTest, ObservedTimeDoesNotChargeAnHonestTenantsLongKernelsTwice) {
  VirtualNode node({.policy = "weighted_fair"}, /*seed=*/7);
  node.AddTenant(0, {.tenant_id = 100, .weight = 30, .kernel_estimate = milliseconds(1500)});
  node.AddTenant(1, {.tenant_id = 101, .weight = 70, .kernel_estimate = milliseconds(1)});
  node.AddProcess({.slot = 0, .kernel = milliseconds(1500), .report = 1});
  node.AddProcess({.slot = 1, .kernel = milliseconds(1), .report = 1});
  node.ObserveEvery(seconds(1));
  (void)node.Run(seconds(30));
  EXPECT_EQ(node.arbiter().stats(0).recharged_ns, 0u);
  EXPECT_EQ(node.arbiter().stats(1).recharged_ns, 0u);
}

// An honest tenant (estimate = its kernels) is never charged from the observations.
TEST(LeaseArbiterSimTest, ObservedTimeLeavesHonestTenantsAlone) {
  VirtualNode node({.policy = "weighted_fair"}, /*seed=*/7);
  node.AddTenant(0, {.tenant_id = 100, .weight = 30, .kernel_estimate = milliseconds(1)});
  node.AddTenant(1, {.tenant_id = 101, .weight = 70, .kernel_estimate = milliseconds(2)});
  node.AddProcess({.slot = 0, .kernel = milliseconds(1), .report = 1});
  node.AddProcess({.slot = 1, .kernel = milliseconds(2), .jitter = 0.3});  // charged by its estimate
  node.ObserveEvery(seconds(1));
  const VirtualNode::Result r = node.Run(seconds(10));
  EXPECT_EQ(node.arbiter().stats(0).recharged_ns, 0u);
  EXPECT_EQ(node.arbiter().stats(1).recharged_ns, 0u);
  EXPECT_NEAR(r.Share(0), 0.30, 0.03);
}

TEST(LeaseArbiterTest, UnderChargeTrackerFollowsTheHeadersWorkedExample) {
  UnderChargeTracker t(seconds(2));
  const uint64_t s = 1'000'000'000;
  EXPECT_EQ(t.Pass(s, 0, s), 0u);      // pass 1: within the lag
  EXPECT_EQ(t.Pass(s, 0, s), 0u);      // pass 2
  EXPECT_NEAR(static_cast<double>(t.Pass(s, 0, s)), 1e9, 1e6);  // pass 3: pass 1 enters, own 0
  EXPECT_EQ(t.Pass(0, 3 * s, s), 0u);  // pass 4: the 3 s report
  EXPECT_EQ(t.Pass(0, 0, s), 0u);
  EXPECT_EQ(t.Pass(0, 0, s), 0u);
  // A tenant that reports nothing pays what NVML saw, a lag late.
  UnderChargeTracker hostile(seconds(2));
  uint64_t added = 0;
  for (int i = 0; i < 10; ++i) added += hostile.Pass(s / 2, 0, s);
  EXPECT_NEAR(static_cast<double>(added), 8 * 0.5e9, 0.1e9);
}

TEST(LeaseArbiterTest, UnderChargedNsNeedsAClearMarginAsTheHeaderSays) {
  EXPECT_EQ(UnderChargedNs(600 * kMs, 100 * kMs, 1000 * kMs), 500 * kMs);
  EXPECT_EQ(UnderChargedNs(320 * kMs, 300 * kMs, 1000 * kMs), 0u);
  EXPECT_EQ(UnderChargedNs(400 * kMs, 0, 1000 * kMs), 400 * kMs);
  EXPECT_EQ(UnderChargedNs(40 * kMs, 0, 1000 * kMs), 0u);             // the header's example
  EXPECT_EQ(UnderChargedNs(49 * kMs, 0, 1000 * kMs), 0u);             // below the margin
  EXPECT_EQ(UnderChargedNs(50 * kMs, 0, 1000 * kMs), 50 * kMs);       // at it
  EXPECT_EQ(UnderChargedNs(900 * kMs, 450 * kMs, 1000 * kMs), 0u);    // not more than twice
  EXPECT_EQ(UnderChargedNs(150 * kMs, 0, 4000 * kMs), 0u);            // the margin scales with the window
  EXPECT_EQ(UnderChargedNs(150 * kMs, 0, 1000 * kMs), 150 * kMs);
}

// The arbiter charges the growth of a slot's observed_extra_ns once, from the value it found.
TEST(LeaseArbiterTest, ObservedExtraTimeIsChargedOnceFromWhereTheArbiterFoundIt) {
  auto mem = std::make_unique<BoardMemory>();
  LeaseBoard* board = nullptr;
  ASSERT_EQ(enforce::InitLeaseBoard(mem.get(), sizeof(BoardMemory), 0, 0, &board), enforce::LeaseBoardCheck::kOk);
  board->node[0].observed_extra_ns.store(7 * kMs);  // left by a tenant this arbiter never served
  auto arbiter = std::move(LeaseArbiter::Create(board, {}).value());
  ASSERT_TRUE(arbiter->AddTenant(0, {.kernel_estimate = milliseconds(1)}).ok());
  arbiter->Step(0);
  EXPECT_EQ(arbiter->stats(0).recharged_ns, 0u);
  board->node[0].observed_extra_ns.fetch_add(40 * kMs);
  arbiter->Step(1 * kMs);
  arbiter->Step(2 * kMs);
  EXPECT_EQ(arbiter->stats(0).recharged_ns, 40 * kMs);
  EXPECT_EQ(arbiter->stats(0).charged_ns, 40 * kMs);
  EXPECT_EQ(board->node[0].charged_ns.load(), 40 * kMs);
}

// The same 30/70 split through the other proportional policies.
TEST(LeaseArbiterSimTest, LotteryAndHierarchicalAlsoGiveWeightedShares) {
  for (const std::string policy : {"lottery", "hierarchical"}) {
    VirtualNode node({.policy = policy}, 7);
    node.AddTenant(0, {.weight = 30, .group = 0, .group_weight = 30, .kernel_estimate = milliseconds(1)});
    node.AddTenant(1, {.weight = 70, .group = 1, .group_weight = 70, .kernel_estimate = milliseconds(1)});
    node.AddProcess({.slot = 0});
    node.AddProcess({.slot = 1});
    const auto r = node.Run(seconds(10));
    // Lottery is a seeded draw over ~1000 leases: sd of the 30 % share is ~1.4 points.
    const double tol = policy == "lottery" ? 0.05 : 0.009;
    EXPECT_NEAR(r.Share(0), 0.30, tol) << policy;
  }
}

// round_robin and edf (equal relative deadlines: the longest waiter first) ignore weights and
// charges: they give equal turns. Turns are not equal time: the previous holder's queued tail
// runs in the next holder's lease, which only a charging policy (weighted_fair) corrects.
TEST(LeaseArbiterSimTest, RoundRobinAndEdfTakeTurns) {
  for (const std::string policy : {"round_robin", "edf"}) {
    VirtualNode node({.policy = policy}, 7);
    node.AddTenant(0, {.weight = 30, .kernel_estimate = milliseconds(1)});
    node.AddTenant(1, {.weight = 70, .kernel_estimate = milliseconds(1)});
    node.AddTenant(2, {.weight = 1, .kernel_estimate = microseconds(300)});
    node.AddProcess({.slot = 0});
    node.AddProcess({.slot = 1, .max_inflight = 2});
    node.AddProcess({.slot = 2, .kernel = microseconds(300)});
    const auto r = node.Run(seconds(10));
    const uint64_t g0 = node.arbiter().stats(0).grants;
    EXPECT_GE(g0, 300u) << policy;
    for (uint32_t i = 0; i < 3; ++i) {
      EXPECT_NEAR(static_cast<double>(node.arbiter().stats(i).grants), static_cast<double>(g0), 1.0)
          << policy << " tenant " << i;
      EXPECT_NEAR(r.Share(i), 1.0 / 3, 0.05) << policy << " tenant " << i;
    }
  }
}

TEST(LeaseArbiterSimTest, HierarchicalSplitsByGroupThenByTenant) {
  VirtualNode node({.policy = "hierarchical"}, 3);
  // Group 0 (weight 1): tenants 0 and 1 (1:1). Group 1 (weight 1): tenant 2.
  node.AddTenant(0, {.weight = 1, .group = 0, .group_weight = 1, .kernel_estimate = milliseconds(1)});
  node.AddTenant(1, {.weight = 1, .group = 0, .group_weight = 1, .kernel_estimate = milliseconds(1)});
  node.AddTenant(2, {.weight = 1, .group = 1, .group_weight = 1, .kernel_estimate = milliseconds(1)});
  for (uint32_t i = 0; i < 3; ++i) node.AddProcess({.slot = i});
  const auto r = node.Run(seconds(10));
  EXPECT_NEAR(r.Share(0), 0.25, 0.0075);
  EXPECT_NEAR(r.Share(1), 0.25, 0.0075);
  EXPECT_NEAR(r.Share(2), 0.50, 0.015);
}

// --- graphs ----------------------------------------------------------------------------------

// Tenant 0 replays a CUDA graph of 10 x 0.5 ms kernels with two graphs in flight; tenant 1
// launches 1 ms kernels. Equal weights. Charging graphs by their kernels keeps 50/50; charging
// a graph launch like one kernel lets its queued tail escape and tenant 0 gets far more.
TEST(LeaseArbiterSimTest, GraphLaunchesAreChargedByTheirKernels) {
  {
    VirtualNode node({}, 5);
    node.AddTenant(0, {.kernel_estimate = microseconds(500)});  // 10 x 0.5 ms = 5 ms per graph
    node.AddTenant(1, {.kernel_estimate = milliseconds(1)});
    node.AddProcess({.slot = 0, .kernel = microseconds(500), .max_inflight = 2, .kind = LaunchKind::kGraph,
                     .graph_kernels = 10});
    node.AddProcess({.slot = 1, .kernel = milliseconds(1), .max_inflight = 2});
    const auto r = node.Run(seconds(10));
    EXPECT_NEAR(r.Share(0), 0.5, 0.015);
    EXPECT_GT(node.board().slots[0].tenant.graph_launches.load(), 500u);
  }
  {
    // The negative control: the same GPU work, estimated as one 0.5 ms kernel per graph launch.
    VirtualNode node({}, 5);
    node.AddTenant(0, {.kernel_estimate = Nanos(50'000)});  // 10 x 50 us = 0.5 ms per graph
    node.AddTenant(1, {.kernel_estimate = milliseconds(1)});
    node.AddProcess({.slot = 0, .kernel = microseconds(500), .max_inflight = 2, .kind = LaunchKind::kGraph,
                     .graph_kernels = 10});
    node.AddProcess({.slot = 1, .kernel = milliseconds(1), .max_inflight = 2});
    const auto r = node.Run(seconds(10));
    EXPECT_GT(r.Share(0), 0.53) << "an under-estimated graph should escape its lease";
  }
}

// --- strict priority --------------------------------------------------------------------------

// Seven tenants saturate the GPU (2 ms kernels, two in flight); a high-priority tenant issues
// a burst of three 0.5 ms kernels every 25 ms (an inference service). Its launch wait is at
// most one quantum without preemption, and only the arbiter's reaction time with it.
TEST(LeaseArbiterSimTest, StrictPriorityBoundsTheHighPriorityLaunchWait) {
  for (const bool preempt : {false, true}) {
    VirtualNode node({.policy = "priority", .preempt_for_priority = preempt}, 11);
    for (uint32_t i = 0; i < 7; ++i) {
      node.AddTenant(i, {.priority = 0, .kernel_estimate = milliseconds(2)});
      node.AddProcess({.slot = i, .kernel = milliseconds(2), .max_inflight = 2});
    }
    node.AddTenant(7, {.priority = 10, .kernel_estimate = microseconds(500)});
    node.AddProcess({.slot = 7, .kernel = microseconds(500), .period = milliseconds(25), .phase = microseconds(3100),
                     .burst = 3});
    const auto r = node.Run(seconds(10));
    const uint64_t max_wait = r.MaxWait(7);
    // One quantum, plus the modelled arbiter (10 us) and futex wake-up (30 us) latencies.
    EXPECT_LE(max_wait, 10 * kMs + 40'000) << "preempt=" << preempt;
    if (preempt) {
      EXPECT_LE(max_wait, 100'000u);  // doorbell + arbiter + wake latency
    }
    EXPECT_GE(r.waits_ns[7].size(), 350u) << "the bursts must have had to wait";
    EXPECT_GE(r.launches[7], 3u * 399) << "every burst served";
    // The others share the rest round robin.
    for (uint32_t i = 1; i < 7; ++i) EXPECT_NEAR(r.Share(i), r.Share(0), 0.02) << "tenant " << i;
    EXPECT_GE(static_cast<double>(r.busy_ns), 0.97 * 10e9);
  }
}

// --- work conservation ------------------------------------------------------------------------

TEST(LeaseArbiterSimTest, IdleTenantsShareGoesToOthers) {
  VirtualNode node({}, 9);
  node.AddTenant(0, {.weight = 1, .kernel_estimate = milliseconds(1)});
  node.AddTenant(1, {.weight = 1, .kernel_estimate = milliseconds(1)});
  node.AddTenant(2, {.weight = 2, .kernel_estimate = milliseconds(1)});  // busy only in [2 s, 6 s)
  node.AddTenant(3, {.weight = 5, .kernel_estimate = milliseconds(1)});  // never launches
  node.AddProcess({.slot = 0});
  node.AddProcess({.slot = 1, .max_inflight = 2});
  node.AddProcess({.slot = 2, .active_from = seconds(2), .active_until = seconds(6)});
  const auto r = node.Run(seconds(10));
  // 6 s at 50/50, 4 s at 25/25/50: 4 s, 4 s, 2 s.
  EXPECT_NEAR(r.Share(0), 0.40, 0.012);
  EXPECT_NEAR(r.Share(1), 0.40, 0.012);
  EXPECT_NEAR(r.Share(2), 0.20, 0.006);
  EXPECT_EQ(r.gpu_ns[3], 0u);
  EXPECT_EQ(node.arbiter().stats(3).grants, 0u);
  EXPECT_GE(static_cast<double>(r.busy_ns), 0.98 * 10e9) << "the idle tenants' time was not reused";
}

// A tenant with a bursty load (a 1 ms kernel every 20 ms) holds the GPU only while it has
// work: the lease ends half a millisecond after its last launch, not at expiry.
TEST(LeaseArbiterSimTest, IdleHolderLosesTheLeaseEarly) {
  VirtualNode node({}, 13);
  node.AddTenant(0, {.weight = 10, .kernel_estimate = milliseconds(1)});
  node.AddTenant(1, {.weight = 1, .kernel_estimate = milliseconds(1)});
  node.AddProcess({.slot = 0, .period = milliseconds(20), .burst = 1});
  node.AddProcess({.slot = 1});
  const auto r = node.Run(seconds(10));
  EXPECT_NEAR(static_cast<double>(r.gpu_ns[0]), 0.5e9, 0.01e9);  // 500 kernels of 1 ms
  EXPECT_GE(static_cast<double>(r.busy_ns), 0.97 * 10e9);
  EXPECT_GE(node.arbiter().stats(0).ended_idle, 450u);
}

// A process killed while waiting leaves `waiting` raised on its slot. The arbiter grants that
// slot once, sees no launch within wake_grace, and sets it aside until a live waiter re-arms.
TEST(LeaseArbiterSimTest, DeadWaiterCostsOneShortGrant) {
  VirtualNode node({}, 17);
  for (uint32_t i = 0; i < 3; ++i) node.AddTenant(i, {.kernel_estimate = milliseconds(1)});
  node.AddProcess({.slot = 0});
  node.AddProcess({.slot = 1});
  enforce::BeginLeaseWait(node.board(), 2);  // the ghost
  const auto r = node.Run(seconds(10));
  EXPECT_EQ(node.arbiter().stats(2).grants, 1u);
  EXPECT_EQ(node.arbiter().stats(2).unused_grants, 1u);
  EXPECT_NEAR(r.Share(0), 0.5, 0.015);
  EXPECT_GE(static_cast<double>(r.busy_ns), 0.98 * 10e9);
}

// --- min / max shares -------------------------------------------------------------------------

TEST(LeaseArbiterSimTest, MaxShareCapsAHeavyTenant) {
  VirtualNode node({}, 19);
  node.AddTenant(0, {.weight = 9, .max_share = 0.2, .kernel_estimate = milliseconds(1)});
  node.AddTenant(1, {.weight = 1, .kernel_estimate = milliseconds(1)});
  node.AddProcess({.slot = 0});
  node.AddProcess({.slot = 1});
  const auto r = node.Run(seconds(10));
  EXPECT_NEAR(r.Share(0), 0.20, 0.02);
  EXPECT_GE(static_cast<double>(r.busy_ns), 0.97 * 10e9);  // the other tenant takes the rest
}

TEST(LeaseArbiterSimTest, MaxShareIsAHardCapEvenWhenAlone) {
  VirtualNode node({}, 19);
  node.AddTenant(0, {.max_share = 0.3, .kernel_estimate = milliseconds(1)});
  node.AddProcess({.slot = 0});
  const auto r = node.Run(seconds(10));
  EXPECT_NEAR(static_cast<double>(r.gpu_ns[0]) / 10e9, 0.30, 0.02);
}

TEST(LeaseArbiterSimTest, MinShareLiftsALightTenant) {
  VirtualNode node({}, 23);
  node.AddTenant(0, {.weight = 1, .min_share = 0.4, .kernel_estimate = milliseconds(1)});
  node.AddTenant(1, {.weight = 9, .kernel_estimate = milliseconds(1)});
  node.AddProcess({.slot = 0});
  node.AddProcess({.slot = 1});
  const auto r = node.Run(seconds(10));
  EXPECT_NEAR(r.Share(0), 0.40, 0.02);
}

// --- determinism ------------------------------------------------------------------------------

TEST(LeaseArbiterSimTest, SameSeedSameResult) {
  auto once = [] {
    VirtualNode node({.policy = "lottery"}, 99);
    for (uint32_t i = 0; i < 3; ++i) {
      node.AddTenant(i, {.weight = i + 1, .kernel_estimate = milliseconds(1)});
      node.AddProcess({.slot = i, .jitter = 0.5});
    }
    return node.Run(seconds(2)).gpu_ns;
  };
  EXPECT_EQ(once(), once());
}

}  // namespace
}  // namespace tessera::node
