// Rate limiting for the API (429 with Retry-After): a token bucket per key, refilled continuously
// at `rate_per_s` up to `burst`. The control plane's keys: "token/<id>" for a token's calls,
// "node/<name>" for node-agent calls about a node (a fleet shares one token). The clock is the
// caller's, so tests and the simulator drive it; the server passes steady_clock.
//
//   RateLimiter limiter({.rate_per_s = 10, .burst = 20});
//   limiter.Admit("tok-1", t)             -> 0 s: admitted (20 requests at once pass)
//   the 21st at the same t                -> 0.1 s: refused, retry after 100 ms (one token's refill)
//
// Memory is bounded: at most `max_keys` buckets; a full table forgets the least recently used
// one (it has had the longest to refill, and a forgotten key starts again with a full bucket).
// Thread-safety: Admit may be called from any thread (one mutex).
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tessera::daemon {

struct RateLimitOptions {
  double rate_per_s = 50;   // sustained requests per second per key (> 0)
  double burst = 100;       // requests allowed at once (>= 1)
  size_t max_keys = 100000;
};

class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(RateLimitOptions options);

  // Zero: admitted (one token taken). Otherwise refused, and the wait until one token is there
  // (rounded up to whole milliseconds; Retry-After takes whole seconds, rounded up by the caller).
  std::chrono::milliseconds Admit(std::string_view key, Clock::time_point now);
  size_t size() const;

 private:
  struct Bucket {
    double tokens;
    Clock::time_point last;
    std::list<std::string>::iterator lru;
  };
  RateLimitOptions opt_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
  std::list<std::string> lru_;  // most recently used first
};

}  // namespace tessera::daemon
