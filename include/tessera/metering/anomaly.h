// Online anomaly detection over one time series: the detector behind `tessera anomalies`, meant
// to run per tenant over usage, error counts and wait times (docs/anomaly.md).
//
// Called by the CLI (one series from a file) and, later, by the control plane's metering loop.
// Pure: no I/O, no clock (times come with the rows). Thread-safety: one AnomalyDetector per
// series and per thread; different detectors share nothing. It owns its history (bounded: a few
// thousand doubles).
//
// Online by construction: the detector is fed one row at a time (Step) and each verdict is made
// from that row and the state the earlier rows left, so feeding a prefix of a series gives
// exactly the verdicts of that prefix (tests/metering/anomaly_test.cc checks it).
//
// Method (docs/anomaly.md has the derivation and the NAB scores):
//   1. Two forecasts of the row's value from earlier rows: the median of the last
//      `level_window` values (robust to spikes; follows a level shift after half a window), and,
//      when the rows are regular enough to have a daily period, a seasonal forecast: the level of
//      the last day plus this time of day's learned offset (an EWMA of value - level per bin).
//   2. Each forecast's error is scaled by a robust scale of that forecast's own past errors (a
//      quantile of the last `scale_window` absolute errors) -> z scores; the series' z is the
//      smaller of the two (an anomaly is a value neither forecast explains; a square wave or a
//      daily cycle is explained by the seasonal one, a level shift by the level one once it has
//      moved).
//   3. A windowed likelihood of the residual (Numenta's "anomaly likelihood", made robust to the
//      score's bounded range): r = z / (z + score_z_half) per row; the mean of the last
//      `likelihood_short` r against the mean and standard deviation (floored at 0.02) of the
//      `likelihood_window` r before them gives lz = (short mean - long mean) / sd. A run of
//      moderately large errors (a drift, a noisier regime) that no single row makes anomalous
//      raises lz; a lone spike barely moves it.
//   4. `method` picks what flags: 0 the residual z alone, 1 lz alone, 2 both (each against its own
//      threshold). The row's effective z is threshold_z * max(z / threshold_z, lz / likelihood_z)
//      (method 2), z (method 0) or threshold_z * lz / likelihood_z (method 1);
//      score = effective z / (effective z + score_z_half) in [0, 1); a row is flagged when the
//      effective z >= threshold_z, and after a flag the next `suppress_rows` rows are not flagged
//      and score 0 (one alarm per event: NAB rewards the first detection in a window and charges
//      every false one).
//   5. With spectral_tau > 0, a spectral-residual score (Ren et al. 2019; anomaly_spectral.cc
//      has the steps and a worked example) also flags: the effective z becomes
//      max(effective z, threshold_z * ratio / spectral_tau).
//   6. With context_threshold > 0, a contextual-novelty score (CAD-OSE style; anomaly_context.cc
//      has the steps and a worked example): values quantised on a grid fixed by the warm-up,
//      novelty = the share of the row's (lag, earlier bucket, bucket) contexts never seen before.
//      It also flags: the effective z becomes max(effective z, threshold_z * novelty /
//      context_threshold) (only on rows whose residual z is >= context_min_z, 0 by default);
//      `method` 3 flags on the novelty alone.
//
// Worked example (level only, level_window 5, suppress 0): values 10 10 11 10 10 | 30. The
// forecast for 30 is median(10 10 11 10 10) = 10, the error 20; with a scale of 0.5 (the quantile
// of earlier errors, floored at min_scale_rel * level) z = 40 >= threshold_z = 10, so the row is
// flagged with score 40 / (40 + 10) = 0.8.
//
// Worked example (likelihood, likelihood_short 2): the long window's r have mean 0.20 and sd 0.05;
// the last two rows' r are 0.40 and 0.50 (z 6.7 and 10 with score_z_half 10: neither flags on
// its own at threshold_z 10.5) -> lz = (0.45 - 0.20) / 0.05 = 5 >= likelihood_z 4, so with
// method 2 the effective z is 10.5 * max(10 / 10.5, 5 / 4) = 13.1 and the row is flagged.
//
// The method and its few parameters are chosen by leave-one-folder-out cross-validation over the
// NAB subset's folders (bench/anomaly_lofo.cc; docs/anomaly.md has the per-folder table): the
// defaults are the setting the training folds agree on, never the best on the whole subset.
// Today (3 of 5 folds): method 2 with the novelty at context_threshold 1 (8 buckets, 7 lag
// pairs), threshold_z 20, warm-up 150 rows, suppression 250 rows. One consequence: the grid is
// fixed by the warm-up, so a series whose warm-up did not see its whole range (a daily cycle
// with a warm-up under a day) is flagged once when it first leaves that range.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/metering/anomaly_series.h"

namespace tessera::metering {

struct AnomalyOptions {
  int warmup_rows = 150;           // rows before the first verdict (score 0, never flagged)
  int level_window = 16;           // rows in the level forecast's median
  int scale_window = 1500;         // past absolute errors the robust scale is taken from
  double scale_quantile = 0.8;     // which quantile of them (then divided by its normal value)
  double min_scale_rel = 0.01;     // scale floor, relative to the level's magnitude
  bool seasonal = true;            // use the daily seasonal forecast when the rows allow it
  double season_alpha = 0.05;      // EWMA weight of a new value in its time-of-day bin
  int combine = 1;                 // 0: max of the two z, 1: min, 2: level only
  bool log_values = false;         // forecast sign(v) log(1 + |v|) (count-like series)
  double threshold_z = 20.0;       // flag at z >= this
  double score_z_half = 20.0;      // z at which the score is 0.5 (= threshold_z: a flag is score 0.5)
  int suppress_rows = 250;         // rows after a flag that are not flagged
  int method = 2;                  // 0: residual z, 1: windowed likelihood, 2: either (step 4), 3: novelty alone (step 6)
  int likelihood_window = 1000;    // past per-row scores the likelihood's mean and sd come from
  int likelihood_short = 10;       // recent per-row scores averaged
  double likelihood_z = 4.0;       // flag at lz >= this (methods 1 and 2)
  double spectral_tau = 0;         // > 0: also flag at spectral-residual ratio >= this (step 5)
  double context_threshold = 1;    // > 0: also flag at contextual novelty >= this, in [0, 1]; 0: off (step 6)
  int context_buckets = 8;         // quantisation buckets over the warm-up's value range (step 6)
  int context_len = 7;             // lag pairs per row: the last this many rows (step 6)
  bool context_daily = false;      // also the context (hour of day, bucket) on daily series (step 6)
  double context_min_z = 0;        // the novelty flags only rows whose residual z is >= this (step 6)
};

struct AnomalyVerdict {
  double score = 0;    // in [0, 1); 0 during warm-up and suppression
  double z = 0;        // the robust z of the forecast residual
  double lz = 0;       // the windowed likelihood's z (0 until its window has 100 rows)
  double sr = 0;       // the spectral-residual ratio (computed only when spectral_tau > 0)
  double novelty = 0;  // the share of unseen contexts (computed only when step 6 is on)
  bool flagged = false;
  double expected = 0;  // the forecast the row was compared with (in value units)
};

class AnomalyDetector {
 public:
  explicit AnomalyDetector(AnomalyOptions options = {});

  // The verdict on one row, then folds it into the history. Rows come in arrival order; a time
  // before the previous row's (a clock step back) is accepted: it does not teach the row spacing
  // and falls into its own time-of-day bin.
  AnomalyVerdict Step(int64_t time_s, double value);

  // The score at which Step flags (score of threshold_z).
  double FlagScore() const;
  const AnomalyOptions& options() const { return options_; }

 private:
  // A window of the last `capacity` values kept in arrival order and sorted.
  class SortedWindow {
   public:
    explicit SortedWindow(int capacity) : capacity_(capacity < 1 ? 1 : capacity) {}
    void Push(double v);
    bool empty() const { return fifo_.empty(); }
    size_t size() const { return fifo_.size(); }
    double Quantile(double q) const;  // requires !empty()

   private:
    size_t capacity_;
    std::deque<double> fifo_;
    std::vector<double> sorted_;
  };

  double Transform(double v) const;
  double Untransform(double v) const;
  void LearnPeriod(int64_t time_s);
  double Scale(const SortedWindow& errors, double level) const;

  AnomalyOptions options_;
  int64_t rows_ = 0;
  int64_t suppressed_until_ = -1;  // row index until which flags are suppressed
  // period learning: the first diffs between rows
  std::vector<int64_t> diffs_;
  int64_t last_time_s_ = 0;
  int64_t step_s_ = 0;  // learned row spacing; 0 = not yet
  int bins_ = 0;        // time-of-day bins (0 = no seasonal forecast)
  SortedWindow level_;
  SortedWindow day_;    // the last day of values (the seasonal forecast's level)
  std::vector<double> bin_offset_;
  std::vector<char> bin_seen_;
  SortedWindow level_errors_;
  SortedWindow season_errors_;
  // the windowed likelihood: per-row scores r, long (with running sums) and short
  std::deque<double> long_r_;
  double long_sum_ = 0, long_sum2_ = 0;
  std::deque<double> short_r_;
  double short_sum_ = 0;
  double Likelihood(double r);  // lz of r, then folds r into the windows
  // the spectral residual (anomaly_spectral.cc): the last values and the last saliencies
  std::deque<double> sr_values_;
  std::deque<double> sr_recent_;
  double SpectralResidual(double y);  // the ratio of the row with value y, then folds it in
  // the contextual novelty (anomaly_context.cc): the grid, the last buckets, the learned contexts
  bool ctx_ready_ = false;
  double ctx_lo_ = 0, ctx_step_ = 1;
  std::vector<double> ctx_values_;  // the warm-up's values and times until the grid is fixed
  std::vector<int64_t> ctx_times_;
  std::deque<int64_t> ctx_recent_;
  std::unordered_set<uint64_t> ctx_known_;
  double ContextNovelty(int64_t time_s, double y);  // the novelty of the row, then learns it
};

// Sets one option from "name=value" (the names of AnomalyOptions' fields; `tessera anomalies
// --set`, for tuning and the held-out check). INVALID_ARGUMENT names the unknown key or bad value.
Status SetAnomalyOption(AnomalyOptions* options, std::string_view assignment);

// Runs a fresh detector over the rows in order: one verdict per row.
std::vector<AnomalyVerdict> DetectAnomalies(const Series& series, const AnomalyOptions& options);

}  // namespace tessera::metering
