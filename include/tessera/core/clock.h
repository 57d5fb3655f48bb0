// Injected time. Libraries never read the wall clock; whoever needs time takes a Clock& (or,
// where it must outlive its caller, a std::shared_ptr<const Clock>). The CLI passes a steady clock
// for durations (tools/tessera), the control plane SystemClock for the instants it stores, tests a
// FakeClock.
//
//   FakeClock clock;
//   clock.Advance(std::chrono::seconds(5));
//   clock.Now().time_since_epoch() == std::chrono::seconds(5);
//
// Instants that are stored or sent (a record's created_ms, an event's time_ms) are milliseconds
// since the Unix epoch: UnixMillis reads them off a clock whose epoch is the Unix epoch
// (SystemClock's is; a FakeClock's is whatever the test starts it at).
//
//   FakeClock clock(FromUnixMillis(1'790'000'000'000));  // 2026-09-21T14:13:20Z
//   clock.Advance(std::chrono::milliseconds(1500));
//   UnixMillis(clock) == 1'790'000'001'500;
//   UnixMillis(SystemClock()) == milliseconds since 1970-01-01T00:00:00Z, now
//
// Thread-safety: every Clock here may be read from any thread. FakeClock is also safe to move
// from one thread while others read it (its time is one atomic word): a test may advance the
// clock that a control plane's HTTP threads and loop read.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

namespace tessera {

class Clock {
 public:
  using Duration = std::chrono::nanoseconds;
  using TimePoint = std::chrono::time_point<Clock, Duration>;

  virtual ~Clock() = default;
  virtual TimePoint Now() const = 0;
};

// The wall clock: time since the Unix epoch (std::chrono::system_clock). It may step backwards
// when the host's time is set; use it for instants that are stored, not for durations.
class SystemClock final : public Clock {
 public:
  TimePoint Now() const override {
    return TimePoint(
        std::chrono::duration_cast<Duration>(std::chrono::system_clock::now().time_since_epoch()));
  }
  // One shared instance, for options that default to the wall clock.
  static std::shared_ptr<const Clock> Shared() {
    static const std::shared_ptr<const Clock> clock = std::make_shared<SystemClock>();
    return clock;
  }
};

// A clock that moves only when told to. Reads and moves are atomic (see the header comment).
class FakeClock final : public Clock {
 public:
  explicit FakeClock(TimePoint start = TimePoint{}) : now_ns_(start.time_since_epoch().count()) {}
  TimePoint Now() const override { return TimePoint(Duration(now_ns_.load())); }
  void Advance(Duration d) { now_ns_.fetch_add(d.count()); }
  void Set(TimePoint t) { now_ns_.store(t.time_since_epoch().count()); }

 private:
  std::atomic<Duration::rep> now_ns_;
};

inline double SecondsBetween(Clock::TimePoint a, Clock::TimePoint b) {
  return std::chrono::duration<double>(b - a).count();
}

// Milliseconds since the clock's epoch (the Unix epoch for SystemClock), rounded down.
inline int64_t UnixMillis(const Clock& clock) {
  return std::chrono::floor<std::chrono::milliseconds>(clock.Now().time_since_epoch()).count();
}

// The instant `ms` milliseconds after the epoch: FakeClock clock(FromUnixMillis(t0_ms)).
inline Clock::TimePoint FromUnixMillis(int64_t ms) {
  return Clock::TimePoint(std::chrono::milliseconds(ms));
}

}  // namespace tessera
