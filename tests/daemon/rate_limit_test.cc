#include "src/daemon/rate_limit.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace tessera::daemon {
namespace {

using std::chrono::milliseconds;
using T = RateLimiter::Clock::time_point;

TEST(RateLimiter, HeaderExample) {
  RateLimiter limiter({.rate_per_s = 10, .burst = 20});
  const T t{};
  for (int k = 0; k < 20; ++k) EXPECT_EQ(limiter.Admit("tok-1", t), milliseconds(0)) << k;
  EXPECT_EQ(limiter.Admit("tok-1", t), milliseconds(100));
  // Another key has its own bucket.
  EXPECT_EQ(limiter.Admit("tok-2", t), milliseconds(0));
  // 100 ms later one token is back, and only one.
  EXPECT_EQ(limiter.Admit("tok-1", t + milliseconds(100)), milliseconds(0));
  EXPECT_EQ(limiter.Admit("tok-1", t + milliseconds(100)), milliseconds(100));
  // The sustained rate: 10 per second over 10 s, never more.
  int admitted = 0;
  for (int ms = 101; ms <= 10101; ms += 5)  // 100.01 tokens refilled by the end
    if (limiter.Admit("tok-1", t + milliseconds(ms)) == milliseconds(0)) ++admitted;
  EXPECT_EQ(admitted, 100);
}

TEST(RateLimiter, MemoryIsBoundedAndAForgottenKeyStartsFull) {
  RateLimiter limiter({.rate_per_s = 1, .burst = 2, .max_keys = 3});
  const T t{};
  for (const char* k : {"a", "b", "c", "d", "e"}) EXPECT_EQ(limiter.Admit(k, t), milliseconds(0));
  EXPECT_EQ(limiter.size(), 3u);
  // "a" was forgotten: it gets a full bucket again.
  EXPECT_EQ(limiter.Admit("a", t), milliseconds(0));
  EXPECT_EQ(limiter.Admit("a", t), milliseconds(0));
  EXPECT_EQ(limiter.Admit("a", t), milliseconds(1000));
}

TEST(RateLimiter, TimeGoingBackwardsGivesNothingBack) {
  RateLimiter limiter({.rate_per_s = 1, .burst = 1});
  const T t = T{} + std::chrono::seconds(100);
  EXPECT_EQ(limiter.Admit("k", t), milliseconds(0));
  EXPECT_EQ(limiter.Admit("k", t - std::chrono::seconds(50)), milliseconds(1000));
}

TEST(RateLimiter, ConcurrentCallersNeverExceedTheBurst) {
  RateLimiter limiter({.rate_per_s = 0.001, .burst = 1000});
  const T t{};
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < 4; ++th)
    threads.emplace_back([&] {
      for (int k = 0; k < 1000; ++k)
        if (limiter.Admit("shared", t) == milliseconds(0)) ++admitted;
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(admitted.load(), 1000);
}

}  // namespace
}  // namespace tessera::daemon
