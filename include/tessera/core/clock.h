// Injected time. Libraries never read the wall clock; whoever needs time takes a Clock&.
// The CLI passes a steady clock (tools/tessera), tests pass FakeClock.
//
//   FakeClock clock;
//   clock.Advance(std::chrono::seconds(5));
//   clock.Now().time_since_epoch() == std::chrono::seconds(5);
//
// Thread-safety: FakeClock is not synchronised; give each thread its own or guard it.
#pragma once

#include <chrono>

namespace tessera {

class Clock {
 public:
  using Duration = std::chrono::nanoseconds;
  using TimePoint = std::chrono::time_point<Clock, Duration>;

  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint{}) : now_(start) {}
  TimePoint Now() const override { return now_; }
  void Advance(Duration d) { now_ += d; }
  void Set(TimePoint t) { now_ = t; }

 private:
  TimePoint now_;
};

inline double SecondsBetween(Clock::TimePoint a, Clock::TimePoint b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace tessera
