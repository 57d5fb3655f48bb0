// ArbiterDuty: a tenant that joins is put on the board at the arbiter's next round, not at the
// next 100 ms registry sync (what lets a Slurm task start a millisecond after it joined); a
// standby sleeps until the lock is free (no polling) and takes over within 100 ms of the holder's
// death; its round comes back when its wake fd is readable, and its destructor stops its waiter.
#include "tessera/node/arbiter_duty.h"

#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::node {
namespace {

bool Active(const NodeDir& node, int index) {
  StatusOr<enforce::LeaseFile> leases = enforce::LeaseFile::OpenNodeLines(node.paths().leases);
  return leases.ok() && leases->board(0).node[index].state.load() ==
                            static_cast<uint32_t>(enforce::LeaseSlotState::kActive);
}

TEST(ArbiterDuty, AJoinIsOnTheBoardAtTheNextRound) {
  tessera::testing::TempDir dir;
  const NodeDir node(dir.File("node"));
  const long self = ::getpid();
  ASSERT_EQ(node.Join({.name = "a", .gpus = {0}, .mem_bytes = 1 << 20, .share = 30}, self).value(), 0);
  ArbiterDuty duty(node, 0);
  // The round that takes over syncs (a) and then waits at most 50 ms: the next periodic sync is
  // still about 50 ms away when the round after the join below starts.
  for (int i = 0; i < 100 && !duty.holds(); ++i) duty.Round();
  ASSERT_TRUE(duty.holds());
  ASSERT_TRUE(Active(node, 0));
  ASSERT_EQ(node.Join({.name = "b", .gpus = {0}, .mem_bytes = 1 << 20, .share = 70}, self).value(), 1);
  duty.Round();  // one round: the registry was replaced, so it syncs now
  EXPECT_TRUE(Active(node, 1));
}

// Under a sanitizer on a loaded 2-core machine the take-over gets more room; Release holds it to the
// 100 ms the supervisors promise (the kernel's wake-up itself is about a millisecond).
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr std::chrono::milliseconds kTakeOverBound{400};
#else
constexpr std::chrono::milliseconds kTakeOverBound{100};
#endif

// The holder is another process; the standby's rounds wait up to 10 s each. Over half a second the
// standby's round does not come back (a 50 ms poll of the lock came back 10 times: 64 standby
// supervisors made ~1,300 wake-ups a second that way), and when the holder is SIGKILLed the
// standby takes over (the board names it) within 100 ms, not at the end of its 10 s wait.
TEST(ArbiterDuty, AStandbySleepsUntilTheHolderDiesAndThenTakesOverWithinAHundredMilliseconds) {
  tessera::testing::TempDir dir;
  const NodeDir node(dir.File("node"));
  ASSERT_EQ(node.Join({.name = "a", .gpus = {0}, .mem_bytes = 1 << 20, .share = 30}, ::getpid()).value(), 0);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    ::close(ready[0]);
    ArbiterDuty duty(node, 0);
    for (int i = 0; i < 1000 && !duty.holds(); ++i) duty.Round();
    const char held = duty.holds() ? '1' : '0';
    (void)!::write(ready[1], &held, 1);
    for (;;) ::pause();
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reap{holder};
  ::close(ready[1]);
  char held = 0;
  ASSERT_EQ(::read(ready[0], &held, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(held, '1');
  StatusOr<enforce::LeaseFile> leases = enforce::LeaseFile::OpenNodeLines(node.paths().leases);
  ASSERT_TRUE(leases.ok()) << leases.status().message();
  const auto arbiter_pid = [&] { return static_cast<pid_t>(leases->board(0).arbiter.arbiter_pid.load()); };
  ASSERT_EQ(arbiter_pid(), holder);

  ArbiterDuty standby(node, 0);
  std::atomic<int> rounds{0};
  std::thread driver([&] {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!standby.holds() && std::chrono::steady_clock::now() < give_up) {
      standby.Round(std::chrono::seconds(10));
      rounds.fetch_add(1);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(rounds.load(), 0) << "a standby's round came back while the holder held the lock";
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(::kill(holder, SIGKILL), 0);
  while (arbiter_pid() != ::getpid() && std::chrono::steady_clock::now() < killed + std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
  driver.join();
  EXPECT_EQ(arbiter_pid(), ::getpid());
  EXPECT_LT(took.count(), kTakeOverBound.count()) << "take-over after the holder's death";
  EXPECT_EQ(rounds.load(), 1);
}

// A standby's round comes back at once when its wake fd (`tessera run`: its command's pidfd) is
// readable, not at the end of its 10 s wait; destroying the standby stops its waiter (blocked in
// flock while the holder lives) at once.
TEST(ArbiterDuty, AStandbysRoundReturnsWhenItsWakeFdIsReadableAndItsDestructorStopsItsWaiter) {
  tessera::testing::TempDir dir;
  const NodeDir node(dir.File("node"));
  ASSERT_EQ(node.Join({.name = "a", .gpus = {0}, .mem_bytes = 1 << 20, .share = 30}, ::getpid()).value(), 0);
  ArbiterDuty holder(node, 0);
  for (int i = 0; i < 100 && !holder.holds(); ++i) holder.Round();
  ASSERT_TRUE(holder.holds());
  const int wake = ::eventfd(0, EFD_CLOEXEC);
  ASSERT_GE(wake, 0);
  const auto start = std::chrono::steady_clock::now();
  {
    ArbiterDuty standby(node, 0);
    const ArbiterDuty::Wait wait{.holder = std::chrono::milliseconds(50), .standby = std::chrono::seconds(10),
                                 .wake_fd = wake};
    std::thread ring([wake] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const uint64_t one = 1;
      (void)!::write(wake, &one, sizeof(one));
    });
    standby.Round(wait);  // its waiter blocks in flock; the round sleeps until the ring
    ring.join();
    EXPECT_FALSE(standby.holds());
    standby.Round(wait);  // the fd is still readable: back at once
    EXPECT_FALSE(standby.holds());
  }
  const auto took = std::chrono::steady_clock::now() - start;
  ::close(wake);
  EXPECT_LT(took, std::chrono::seconds(5)) << "the rounds waited for their 10 s, or the destructor for the waiter";
  EXPECT_TRUE(holder.holds());
}

// A tenant on a MIG instance is isolated by the hardware: never on its GPU's board, so it is not
// time-sliced against a tenant on another instance of the same GPU (node_dir.h).
TEST(ArbiterDuty, ATenantOnAMigInstanceIsNeverOnTheBoard) {
  tessera::testing::TempDir dir;
  const NodeDir node(dir.File("node"));
  const long self = ::getpid();
  ASSERT_EQ(node.Join({.name = "a", .gpus = {0}, .mem_bytes = 1 << 20, .share = 30, .mig_instance = "MIG-aaaa"}, self)
                .value(),
            0);
  ASSERT_EQ(node.Join({.name = "b", .gpus = {0}, .mem_bytes = 1 << 20, .share = 70, .mig_instance = "MIG-bbbb"}, self)
                .value(),
            1);
  ASSERT_EQ(node.Join({.name = "c", .gpus = {0}, .mem_bytes = 1 << 20, .share = 10}, self).value(), 2);
  ArbiterDuty duty(node, 0);
  for (int i = 0; i < 100 && !duty.holds(); ++i) duty.Round();
  ASSERT_TRUE(duty.holds());
  for (int i = 0; i < 5; ++i) duty.Round();
  EXPECT_FALSE(Active(node, 0));
  EXPECT_FALSE(Active(node, 1));
  EXPECT_TRUE(Active(node, 2));  // the GPU's other tenant is still driven
}

}  // namespace
}  // namespace tessera::node
