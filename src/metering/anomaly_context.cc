// The contextual-novelty score of AnomalyDetector (anomaly.h, step 6), in the spirit of the
// Contextual Anomaly Detector (CAD-OSE, Smirnov and Numenta's NAB entry, described in NAB's
// results and its author's write-up; written here from that description, not from its code):
// a value is anomalous when the pattern it completes has never been seen before.
//
//   1. Quantise. The first `warmup_rows` values fix a grid: step = (max - min) / context_buckets
//      of those values (a flat warm-up: step = 0.1 % of |min|, at least 1e-9); a value's bucket is
//      floor((v - min) / step), unbounded, so a value outside the warm-up's range has its own
//      bucket (it is not clipped into the edge one).
//   2. Contexts. Row t with buckets q(t - k) .. q(t) (k = context_len) completes k contexts: the
//      lag pairs (j, q(t - j), q(t)) for j = 1..k ("j rows ago the value was in bucket a, now it
//      is in b"). Each is a 64-bit key in a learned set.
//   3. Score. novelty = the share of the row's k contexts that are not in the set, in [0, 1];
//      then all k are learned (the set is online: a pattern is novel once). At its bound
//      (kContextCapacity keys) the set stops growing.
//   With context_daily, a series with a daily period (rows 1 min to 6 h apart) also completes the
//   context (hour of day, q(t)): a value never seen at this hour adds to the novelty, one seen
//   at this hour before lowers it.
//   The warm-up's own rows are learned when the grid is fixed (row warmup_rows), before that
//   row is scored: each verdict still comes from its row and the earlier rows only.
//
// Worked example (context_buckets 4, context_len 2): warm-up values 0 4 0 4 (min 0, max 4, step 1)
// -> buckets 0 4 0 4 (4 is max: bucket 4), learned pairs (1,0,4) (1,4,0) (2,0,0) (2,4,4). Next row
// 0: pairs (1,4,0) and (2,0,0) are known -> novelty 0. Next row 2: bucket 2, pairs (1,0,2) and
// (2,4,2) are both new -> novelty 1: the value 2, inside the range, was never reached from the
// recent values; with context_threshold 1 the row is flagged. A daily cycle or square wave
// repeats its contexts and scores 0 from its second period on; a noisy series learns its
// transitions among ordinary buckets quickly, and a spike or a level shift into buckets (or
// transitions) never seen scores high once.
#include <algorithm>
#include <cmath>

#include "tessera/metering/anomaly.h"

namespace tessera::metering {
namespace {

constexpr size_t kContextCapacity = 1 << 18;  // learned keys (a few MiB at most)

uint64_t ContextKey(int lag, int64_t from, int64_t to) {
  constexpr int64_t kBias = int64_t{1} << 21;
  auto field = [](int64_t b) { return static_cast<uint64_t>(std::clamp<int64_t>(b + kBias, 0, 2 * kBias - 1)); };
  return (static_cast<uint64_t>(lag & 0xff) << 48) | (field(from) << 24) | field(to);
}

}  // namespace

double AnomalyDetector::ContextNovelty(int64_t time_s, double y) {
  const int k = std::max(options_.context_len, 1);
  if (!ctx_ready_) {
    ctx_values_.push_back(y);
    ctx_times_.push_back(time_s);
    if (static_cast<int>(ctx_values_.size()) <= options_.warmup_rows) return 0;
    // Fix the grid from the warm-up rows (all but this one), learn their contexts, then score
    // this row (the last value in ctx_values_).
    const auto [lo, hi] = std::minmax_element(ctx_values_.begin(), ctx_values_.end() - 1);
    ctx_lo_ = *lo;
    ctx_step_ = (*hi - *lo) / std::max(options_.context_buckets, 1);
    if (!(ctx_step_ > 0)) ctx_step_ = std::max(std::abs(*lo) * 1e-3, 1e-9);
    ctx_ready_ = true;
    const std::vector<double> warm(ctx_values_.begin(), ctx_values_.end() - 1);
    const std::vector<int64_t> warm_times(ctx_times_.begin(), ctx_times_.end() - 1);
    ctx_values_.clear();
    ctx_times_.clear();
    for (size_t i = 0; i < warm.size(); ++i) ContextNovelty(warm_times[i], warm[i]);
  }
  const double b = std::floor((y - ctx_lo_) / ctx_step_);
  const int64_t q = std::isfinite(b) ? static_cast<int64_t>(std::clamp(b, -1e6, 1e6)) : 1000000;
  int novel = 0, contexts = 0;
  for (int j = 1; j <= k && j <= static_cast<int>(ctx_recent_.size()); ++j, ++contexts) {
    const uint64_t key = ContextKey(j, ctx_recent_[ctx_recent_.size() - static_cast<size_t>(j)], q);
    if (ctx_known_.count(key) == 0) {
      ++novel;
      if (ctx_known_.size() < kContextCapacity) ctx_known_.insert(key);
    }
  }
  if (options_.context_daily && bins_ > 0) {  // a daily series: also (hour of day, bucket)
    const int64_t hour = (((time_s % 86400) + 86400) % 86400) / 3600;
    const uint64_t key = ContextKey(0xfe, hour, q);
    ++contexts;
    if (ctx_known_.count(key) == 0) {
      ++novel;
      if (ctx_known_.size() < kContextCapacity) ctx_known_.insert(key);
    }
  }
  ctx_recent_.push_back(q);
  if (static_cast<int>(ctx_recent_.size()) > k) ctx_recent_.pop_front();
  return contexts == 0 ? 0 : static_cast<double>(novel) / contexts;
}

}  // namespace tessera::metering
