#include "src/daemon/rate_limit.h"

#include <algorithm>
#include <cmath>

namespace tessera::daemon {

RateLimiter::RateLimiter(RateLimitOptions options) : opt_(options) {
  if (!(opt_.rate_per_s > 0)) opt_.rate_per_s = 1;
  opt_.burst = std::max(1.0, opt_.burst);
  opt_.max_keys = std::max<size_t>(1, opt_.max_keys);
}

size_t RateLimiter::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_.size();
}

std::chrono::milliseconds RateLimiter::Admit(std::string_view key_view, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key(key_view);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= opt_.max_keys) {
      // Forget the least recently used bucket: it has had the longest time to refill, so it is
      // the one most likely full (and a full bucket is what a new key starts with anyway).
      buckets_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(key);
    it = buckets_.emplace(key, Bucket{opt_.burst, now, lru_.begin()}).first;
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  Bucket& b = it->second;
  if (now > b.last) {
    const double elapsed = std::chrono::duration<double>(now - b.last).count();
    b.tokens = std::min(opt_.burst, b.tokens + elapsed * opt_.rate_per_s);
    b.last = now;
  }
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return std::chrono::milliseconds(0);
  }
  const double wait_s = (1 - b.tokens) / opt_.rate_per_s;
  return std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wait_s * 1000))));
}

}  // namespace tessera::daemon
