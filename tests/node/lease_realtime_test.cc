// The lease protocol in real time: a LeaseArbiterRunner thread drives a board in a MAP_SHARED
// memfd, forked tenant processes gate their "kernels" (1 ms of blocking while the lease is
// held, standing in for a GPU kernel and its synchronisation) with enforce::GateLaunch, and
//   - the kernel time each tenant got matches its weight within 5 percentage points, with
//     the default options (10 ms quantum). The 3 % requirement is met in virtual time
//     (lease_arbiter_test.cc); here 2 s of wall time are 200 leases (one lease is 0.5 % of
//     the total), and on a 2-core CI machine running other builds a woken tenant can wait
//     milliseconds for a CPU, which costs it part of its lease: the tolerance is for that
//     noise. Measured on the loaded development machine: within 1.5 points in every run;
//   - a process SIGKILLed while it holds the lease blocks nobody: another tenant holds the
//     lease within one quantum (plus an allowance for OS scheduling) and every survivor ends;
//   - the same with threads in one process (the ThreadSanitizer run of `make tsan`).
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include "tessera/node/lease_arbiter.h"
#include "tessera/enforce/lease.h"

namespace tessera::node {
namespace {

using enforce::GateResult;
using enforce::LeaseBoard;
using enforce::MonotonicNowNs;
using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kKernelNs = 1 * kMs;

// What the children report back, next to the board in the same shared mapping.
struct alignas(64) ChildReport {
  std::atomic<uint64_t> kernels;
  std::atomic<uint64_t> kernel_ns;  // wall time the "kernels" actually took
  std::atomic<uint64_t> timeouts;
  std::atomic<uint32_t> started;
};
struct Shared {
  LeaseBoard board;
  std::atomic<uint32_t> go;
  std::atomic<uint32_t> stop;
  std::atomic<uint32_t> sleep_kernels;  // 1: a kernel blocks (like cuStreamSynchronize) instead of spinning
  ChildReport reports[8];
};

// One tenant process: gate, then hold the "GPU" for one kernel time, until told to stop.
[[noreturn]] void ChildLoop(Shared* sh, uint32_t slot, uint32_t index) {
  ChildReport& rep = sh->reports[index];
  rep.started.store(1);
  while (sh->go.load() == 0) usleep(100);
  while (sh->stop.load() == 0) {
    const GateResult r = enforce::GateLaunch(sh->board, slot, {}, 200 * kMs);
    if (r == GateResult::kAdmitted) {
      const uint64_t start = MonotonicNowNs();
      if (sh->sleep_kernels.load() != 0) {
        usleep(kKernelNs / 1000);
      } else {
        while (MonotonicNowNs() < start + kKernelNs) {
        }
      }
      rep.kernel_ns.fetch_add(MonotonicNowNs() - start);
      rep.kernels.fetch_add(1);
    } else if (r == GateResult::kTimedOut) {
      rep.timeouts.fetch_add(1);
    } else {
      _exit(2);
    }
  }
  _exit(0);
}

class RealTimeLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fd_ = memfd_create("tessera-lease-realtime", 0);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(ftruncate(fd_, sizeof(Shared)), 0);
    void* mem = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    ASSERT_NE(mem, MAP_FAILED);
    sh_ = static_cast<Shared*>(mem);
    LeaseBoard* board = nullptr;
    ASSERT_EQ(enforce::InitLeaseBoard(&sh_->board, sizeof(LeaseBoard), 0, MonotonicNowNs(), &board),
              enforce::LeaseBoardCheck::kOk);
  }
  void TearDown() override {
    for (pid_t p : children_) {
      if (p > 0) kill(p, SIGKILL);
    }
    for (pid_t p : children_) {
      if (p > 0) waitpid(p, nullptr, 0);
    }
    if (sh_ != nullptr) munmap(sh_, sizeof(Shared));
    if (fd_ >= 0) close(fd_);
  }

  // Forks one child per slot (before any thread exists in this process).
  void Fork(uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) {
      const pid_t p = fork();
      ASSERT_GE(p, 0);
      if (p == 0) ChildLoop(sh_, i, i);
      children_.push_back(p);
    }
    const uint64_t t0 = MonotonicNowNs();
    for (uint32_t i = 0; i < n; ++i) {
      while (sh_->reports[i].started.load() == 0 && MonotonicNowNs() - t0 < 5000 * kMs) usleep(200);
      ASSERT_EQ(sh_->reports[i].started.load(), 1u) << "child " << i << " did not start";
    }
  }

  // Stops the children and reaps them; fails if one does not end within 5 s (a hang).
  void StopAndReap() {
    sh_->stop.store(1);
    const uint64_t t0 = MonotonicNowNs();
    for (pid_t& p : children_) {
      if (p <= 0) continue;
      int status = 0;
      pid_t r = 0;
      while ((r = waitpid(p, &status, WNOHANG)) == 0 && MonotonicNowNs() - t0 < 5000 * kMs) usleep(1000);
      ASSERT_EQ(r, p) << "a tenant process hung";
      p = -1;
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    }
  }

  std::vector<double> Shares(uint32_t n) const {
    std::vector<double> k(n);
    for (uint32_t i = 0; i < n; ++i) k[i] = static_cast<double>(sh_->reports[i].kernel_ns.load());
    const double total = std::accumulate(k.begin(), k.end(), 0.0);
    for (double& v : k) v = total == 0 ? 0 : v / total;
    return k;
  }

  int fd_ = -1;
  Shared* sh_ = nullptr;
  std::vector<pid_t> children_;
};

TEST_F(RealTimeLeaseTest, ProcessesGetWeightedShares) {
  for (const std::vector<uint32_t>& w : {std::vector<uint32_t>{30, 70}, std::vector<uint32_t>{1, 2, 3, 4}}) {
    SCOPED_TRACE(::testing::PrintToString(w));
    TearDown();
    children_.clear();
    SetUp();
    const uint32_t n = static_cast<uint32_t>(w.size());
    // The "GPU" here is the wall clock: a kernel is 1 ms of blocking (a real kernel runs
    // without the launching process's CPU). A busy-wait kernel (sleep_kernels = 0) works on
    // an idle machine, but on a loaded 2-core CI machine (load average 6-8 while other
    // builds run) the spinning holder is descheduled for 10+ ms at a time, which the arbiter
    // rightly sees as idleness: the measured shares then reflect the OS scheduler (30/70
    // came out 40-53/47-60), not the lease protocol.
    sh_->sleep_kernels.store(1);
    Fork(n);
    auto arbiter = LeaseArbiter::Create(&sh_->board, {});
    ASSERT_TRUE(arbiter.ok()) << arbiter.status().ToString();
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_TRUE((*arbiter)->AddTenant(i, {.tenant_id = i, .weight = w[i], .kernel_estimate = Nanos(kKernelNs)}).ok());
    }
    LeaseArbiterRunner runner(**arbiter);
    runner.Start();
    sh_->go.store(1);
    usleep(2'000'000);
    StopAndReap();
    runner.Stop();
    const std::vector<double> shares = Shares(n);
    for (uint32_t i = 0; i < n; ++i) {
      const LeaseTenantStats st = (*arbiter)->stats(i);
      std::printf("tenant %u weight %u: share %.3f kernels %lu timeouts %lu grants %lu idle %lu unused %lu\n", i, w[i],
                  shares[i], static_cast<unsigned long>(sh_->reports[i].kernels.load()),
                  static_cast<unsigned long>(sh_->reports[i].timeouts.load()), static_cast<unsigned long>(st.grants),
                  static_cast<unsigned long>(st.ended_idle), static_cast<unsigned long>(st.unused_grants));
    }
    const double total_w = std::accumulate(w.begin(), w.end(), 0.0);
    for (uint32_t i = 0; i < n; ++i) {
      EXPECT_NEAR(shares[i], w[i] / total_w, 0.05) << "tenant " << i << " kernels " << sh_->reports[i].kernels.load();
    }
    uint64_t kernels = 0;
    for (uint32_t i = 0; i < n; ++i) kernels += sh_->reports[i].kernels.load();
    EXPECT_GE(kernels, 1000u) << "2 s of 1 ms kernels: the GPU mostly idled";
  }
}

TEST_F(RealTimeLeaseTest, KilledHolderBlocksNobodyBeyondOneQuantum) {
  sh_->sleep_kernels.store(1);  // see ProcessesGetWeightedShares
  Fork(3);
  auto arbiter = LeaseArbiter::Create(&sh_->board, {});
  ASSERT_TRUE(arbiter.ok());
  for (uint32_t i = 0; i < 3; ++i) {
    ASSERT_TRUE((*arbiter)->AddTenant(i, {.tenant_id = i, .kernel_estimate = Nanos(kKernelNs)}).ok());
  }
  LeaseArbiterRunner runner(**arbiter);
  runner.Start();
  sh_->go.store(1);
  usleep(200'000);
  // Kill tenant 0 while it holds the lease (in the middle of a "kernel" or between two).
  const uint64_t t0 = MonotonicNowNs();
  while (sh_->board.lease.holder.load() != 1 && MonotonicNowNs() - t0 < 2000 * kMs) usleep(50);
  ASSERT_EQ(sh_->board.lease.holder.load(), 1u) << "tenant 0 never got the lease";
  ASSERT_EQ(kill(children_[0], SIGKILL), 0);
  const uint64_t killed = MonotonicNowNs();
  waitpid(children_[0], nullptr, 0);
  children_[0] = -1;
  // Another tenant holds the lease within a quantum (10 ms) plus 90 ms for OS scheduling.
  uint32_t h = 0;
  while (((h = sh_->board.lease.holder.load()) == 0 || h == 1) && MonotonicNowNs() - killed < 2000 * kMs) usleep(50);
  const uint64_t handover = MonotonicNowNs() - killed;
  EXPECT_TRUE(h == 2 || h == 3) << "holder " << h;
  EXPECT_LE(handover, 100 * kMs);
  const uint64_t k1 = sh_->reports[1].kernels.load(), k2 = sh_->reports[2].kernels.load();
  const uint64_t dead_grants = sh_->board.node[0].grants.load();
  usleep(300'000);
  // The survivors keep running and share the GPU between them (about 140 kernels each in
  // 300 ms; at least 30, for a loaded machine).
  EXPECT_GE(sh_->reports[1].kernels.load() - k1, 30u);
  EXPECT_GE(sh_->reports[2].kernels.load() - k2, 30u);
  StopAndReap();
  runner.Stop();
  // The dead tenant was not waiting, so it is never granted again.
  EXPECT_EQ(sh_->board.node[0].grants.load(), dead_grants);
  std::printf("handover after SIGKILL of the holder: %.2f ms\n", static_cast<double>(handover) / 1e6);
}

// Threads instead of processes: the same gate and arbiter under ThreadSanitizer.
TEST(RealTimeLeaseThreadsTest, ThreadsShareTheBoardWithoutRaces) {
  struct alignas(64) Mem {
    unsigned char bytes[sizeof(LeaseBoard)];
  };
  auto mem = std::make_unique<Mem>();
  LeaseBoard* board = nullptr;
  ASSERT_EQ(enforce::InitLeaseBoard(mem.get(), sizeof(Mem), 0, MonotonicNowNs(), &board), enforce::LeaseBoardCheck::kOk);
  auto arbiter = LeaseArbiter::Create(board, {});
  ASSERT_TRUE(arbiter.ok());
  const uint32_t weights[] = {1, 3};
  for (uint32_t i = 0; i < 2; ++i) {
    ASSERT_TRUE((*arbiter)->AddTenant(i, {.weight = weights[i], .kernel_estimate = microseconds(200)}).ok());
  }
  LeaseArbiterRunner runner(**arbiter);
  runner.Start();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> kernels[2] = {0, 0};
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 4; ++t) {  // two threads per tenant (one slot, shared lease)
    const uint32_t slot = t % 2;
    threads.emplace_back([&, slot] {
      while (!stop.load()) {
        const GateResult r = enforce::GateLaunch(*board, slot, {}, 100 * kMs);
        if (r != GateResult::kAdmitted) continue;
        usleep(200);  // a 0.2 ms blocking "kernel"
        kernels[slot].fetch_add(1);
      }
    });
  }
  // Change the configuration while it runs (through the runner's lock).
  usleep(100'000);
  ASSERT_TRUE(runner.WithArbiter([](LeaseArbiter& a) { return a.SetKernelEstimate(1, microseconds(200)); }).ok());
  usleep(300'000);
  stop.store(true);
  for (auto& th : threads) th.join();
  runner.Stop();
  // Shares are checked with processes above and in virtual time; under ThreadSanitizer's
  // slowdown only progress and exact counting across threads are checked.
  for (uint32_t i = 0; i < 2; ++i) {
    EXPECT_GE(kernels[i].load(), 10u) << "tenant " << i;
    EXPECT_EQ(board->slots[i].tenant.launches.load(), kernels[i].load()) << "tenant " << i;
    EXPECT_EQ(board->slots[i].tenant.submitted_est_ns.load(), 200'000 * kernels[i].load()) << "tenant " << i;
  }
  EXPECT_EQ(board->slots[0].tenant.waiting.load(), 0u);
  EXPECT_EQ(board->slots[1].tenant.waiting.load(), 0u);
  EXPECT_EQ(board->lease.word.load(), 0u) << "Stop() leaves no holder";
}

}  // namespace
}  // namespace tessera::node
