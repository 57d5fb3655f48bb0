// Quantity, Id and the clocks: the plain value types of tessera/core.
#include <atomic>
#include <chrono>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/clock.h"
#include "tessera/core/ids.h"
#include "tessera/core/quantity.h"

namespace tessera {
namespace {

TEST(QuantityTest, DefaultIsZero) {
  EXPECT_EQ(GpuMilli().value(), 0);
  EXPECT_EQ(CpuMilli().value(), 0);
  EXPECT_EQ(MiB().value(), 0);
}

TEST(QuantityTest, Arithmetic) {
  const GpuMilli half{500};
  EXPECT_EQ((half + half).value(), 1000);
  EXPECT_EQ(half + half, kWholeGpu);
  EXPECT_EQ((kWholeGpu - GpuMilli{300}).value(), 700);
  EXPECT_EQ((GpuMilli{300} - kWholeGpu).value(), -700);
  EXPECT_EQ((half * 3).value(), 1500);
  EXPECT_EQ((4 * half).value(), 2000);
  EXPECT_EQ((half * 0).value(), 0);
  EXPECT_EQ((half * -2).value(), -1000);

  CpuMilli c{1000};
  c += CpuMilli{250};
  EXPECT_EQ(c.value(), 1250);
  c -= CpuMilli{2000};
  EXPECT_EQ(c.value(), -750);
  // Compound assignment returns the object itself.
  MiB m{1};
  (m += MiB{2}) += MiB{3};
  EXPECT_EQ(m.value(), 6);
}

TEST(QuantityTest, LargeValuesDoNotTruncate) {
  const MiB big{int64_t{1} << 40};
  EXPECT_EQ((big + big).value(), int64_t{1} << 41);
  EXPECT_EQ((big * 1024).value(), int64_t{1} << 50);
}

TEST(QuantityTest, Comparison) {
  EXPECT_LT(GpuMilli{1}, GpuMilli{2});
  EXPECT_LE(GpuMilli{2}, GpuMilli{2});
  EXPECT_GT(CpuMilli{0}, CpuMilli{-1});
  EXPECT_GE(MiB{5}, MiB{4});
  EXPECT_NE(MiB{5}, MiB{4});
  EXPECT_EQ(GpuMilli{1000}, kWholeGpu);
  EXPECT_EQ(kWholeGpu.value(), 1000);
}

TEST(QuantityTest, KindsDoNotMix) {
  static_assert(!std::is_convertible_v<CpuMilli, GpuMilli>);
  static_assert(!std::is_convertible_v<int64_t, GpuMilli>);  // explicit constructor
  static_assert(!std::is_same_v<GpuMilli, MiB>);
  static_assert(GpuMilli{2} + GpuMilli{3} == GpuMilli{5});  // constexpr
  SUCCEED();
}

TEST(IdTest, DefaultIsInvalid) {
  const NodeIndex n;
  EXPECT_FALSE(n.valid());
  EXPECT_EQ(n.value(), NodeIndex::kInvalidValue);
  EXPECT_EQ(NodeIndex::kInvalidValue, 0xFFFFFFFFu);
}

TEST(IdTest, ExplicitValuesAreValid) {
  EXPECT_TRUE(NodeIndex{0}.valid());
  EXPECT_EQ(NodeIndex{7}.value(), 7u);
  EXPECT_TRUE(GpuModelId{63}.valid());
  EXPECT_FALSE(TaskIndex{TaskIndex::kInvalidValue}.valid());
}

TEST(IdTest, OrderingAndHash) {
  EXPECT_LT(NodeIndex{1}, NodeIndex{2});
  EXPECT_EQ(NodeIndex{3}, NodeIndex{3});
  EXPECT_NE(NodeIndex{3}, NodeIndex{4});
  EXPECT_LT(NodeIndex{4}, NodeIndex{});  // invalid sorts last
  std::unordered_set<NodeIndex> set{NodeIndex{1}, NodeIndex{2}, NodeIndex{1}};
  EXPECT_EQ(set.size(), 2u);
  EXPECT_EQ(set.count(NodeIndex{2}), 1u);
  EXPECT_EQ(set.count(NodeIndex{3}), 0u);
}

TEST(IdTest, KindsDoNotMix) {
  static_assert(!std::is_convertible_v<NodeIndex, TaskIndex>);
  static_assert(!std::is_convertible_v<uint32_t, NodeIndex>);
  SUCCEED();
}

TEST(FakeClockTest, StartsAtGivenTimeAndAdvances) {
  FakeClock clock;
  EXPECT_EQ(clock.Now().time_since_epoch(), Clock::Duration::zero());
  clock.Advance(std::chrono::seconds(5));
  EXPECT_EQ(clock.Now().time_since_epoch(), std::chrono::seconds(5));
  clock.Advance(std::chrono::milliseconds(250));
  EXPECT_EQ(clock.Now().time_since_epoch(), std::chrono::milliseconds(5250));

  FakeClock later(Clock::TimePoint(std::chrono::seconds(100)));
  EXPECT_EQ(later.Now().time_since_epoch(), std::chrono::seconds(100));
}

TEST(FakeClockTest, SetAndSecondsBetween) {
  FakeClock clock;
  const Clock::TimePoint a = clock.Now();
  clock.Set(Clock::TimePoint(std::chrono::milliseconds(1500)));
  const Clock::TimePoint b = clock.Now();
  EXPECT_DOUBLE_EQ(SecondsBetween(a, b), 1.5);
  EXPECT_DOUBLE_EQ(SecondsBetween(b, a), -1.5);
  // Through the interface.
  const Clock& as_clock = clock;
  EXPECT_EQ(as_clock.Now(), b);
}

TEST(FakeClockTest, LosesNoTimeWhenAdvancedFromManyThreadsWhileRead) {
  FakeClock clock;
  constexpr int kThreads = 4, kSteps = 500'000;
  std::atomic<int> ready = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&clock, &ready] {
      ++ready;
      while (ready.load() < kThreads) {
      }  // all start together, so that their steps overlap
      for (int s = 0; s < kSteps; ++s) {
        clock.Advance(std::chrono::nanoseconds(1));
        // A compiler barrier: each step is its own read and write of the clock, as the control
        // plane's threads make them (without it the steps could be folded into one).
        std::atomic_signal_fence(std::memory_order_seq_cst);
        (void)clock.Now();
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(clock.Now().time_since_epoch(), std::chrono::nanoseconds(int64_t{kThreads} * kSteps));
}

TEST(UnixMillisTest, IsTheClocksTimeInWholeMillisecondsRoundedDown) {
  FakeClock clock(FromUnixMillis(1'790'000'000'000));
  EXPECT_EQ(UnixMillis(clock), 1'790'000'000'000);
  clock.Advance(std::chrono::microseconds(1999));
  EXPECT_EQ(UnixMillis(clock), 1'790'000'000'001);
  clock.Set(Clock::TimePoint(std::chrono::nanoseconds(-1)));  // before the epoch: down, not to zero
  EXPECT_EQ(UnixMillis(clock), -1);
}

TEST(SystemClockTest, IsMillisecondsSinceTheUnixEpochNow) {
  using std::chrono::milliseconds;
  const auto ms = [](std::chrono::system_clock::time_point t) {
    return std::chrono::floor<milliseconds>(t.time_since_epoch()).count();
  };
  const int64_t before = ms(std::chrono::system_clock::now());
  const int64_t got = UnixMillis(*SystemClock::Shared());
  const int64_t after = ms(std::chrono::system_clock::now());
  EXPECT_LE(before, got);
  EXPECT_LE(got, after);
  EXPECT_GT(got, int64_t{1'700'000'000'000});  // 2023-11: not a steady clock's epoch (boot)
  EXPECT_EQ(SystemClock::Shared().get(), SystemClock::Shared().get());  // one instance
}

}  // namespace
}  // namespace tessera
