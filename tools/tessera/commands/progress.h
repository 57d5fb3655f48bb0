// The CLI's wall clock and its progress bar on stderr (the libraries get the clock injected).
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "tessera/core/clock.h"

namespace tessera::cli {

// The wall clock lives at the edge; libraries get it injected.
class SteadyClock final : public Clock {
 public:
  TimePoint Now() const override {
    return TimePoint(std::chrono::duration_cast<Duration>(
        std::chrono::steady_clock::now().time_since_epoch()));
  }
};

// A one-line progress bar on stderr, shown only once the run has taken more than a second.
class ProgressBar {
 public:
  ProgressBar(bool enabled, const Clock& clock) : enabled_(enabled), clock_(clock), start_(clock.Now()) {}
  void Update(double fraction, int done, int total) {
    if (!enabled_) return;
    const auto now = clock_.Now();
    if (SecondsBetween(start_, now) < 1.0) return;
    if (SecondsBetween(last_, now) < 0.1 && done < total) return;
    last_ = now;
    const int width = 40;
    const int filled = static_cast<int>(fraction * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar += std::string(static_cast<size_t>(width - filled), '.');
    const double elapsed = SecondsBetween(start_, now);
    const double eta = fraction > 0.01 ? elapsed * (1 - fraction) / fraction : 0;
    std::fprintf(stderr, "\r[%s] %3.0f%%  %d/%d runs  %.0fs elapsed, ~%.0fs left ", bar.c_str(),
                 fraction * 100, done, total, elapsed, eta);
    std::fflush(stderr);
    shown_ = true;
  }
  void Finish() {
    if (shown_) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_;
  const Clock& clock_;
  Clock::TimePoint start_;
  Clock::TimePoint last_{};
  bool shown_ = false;
};

}  // namespace tessera::cli
