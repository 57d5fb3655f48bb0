#include "tessera/metering/anomaly.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace tessera::metering {
namespace {

// The q-quantile of |N(0, 1)|: Phi^-1((1 + q) / 2), by bisection on erf.
double AbsNormalQuantile(double q) {
  q = std::clamp(q, 0.01, 0.999);
  double lo = 0, hi = 10;
  for (int i = 0; i < 80; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erf(mid / std::sqrt(2.0)) < q ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

constexpr int kPeriodDiffs = 32;  // row spacings looked at before the period is fixed

}  // namespace

void AnomalyDetector::SortedWindow::Push(double v) {
  fifo_.push_back(v);
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), v), v);
  if (fifo_.size() > capacity_) {
    const double old = fifo_.front();
    fifo_.pop_front();
    sorted_.erase(std::lower_bound(sorted_.begin(), sorted_.end(), old));
  }
}

double AnomalyDetector::SortedWindow::Quantile(double q) const {
  const double pos = q * static_cast<double>(sorted_.size() - 1);
  const size_t i = static_cast<size_t>(pos);
  if (i + 1 >= sorted_.size()) return sorted_.back();
  const double f = pos - static_cast<double>(i);
  return sorted_[i] * (1 - f) + sorted_[i + 1] * f;
}

AnomalyDetector::AnomalyDetector(AnomalyOptions options)
    : options_(options),
      level_(options.level_window),
      day_(1),
      level_errors_(options.scale_window),
      season_errors_(options.scale_window) {}

double AnomalyDetector::FlagScore() const {
  return options_.threshold_z / (options_.threshold_z + options_.score_z_half);
}

double AnomalyDetector::Transform(double v) const {
  if (!options_.log_values) return v;
  return v >= 0 ? std::log1p(v) : -std::log1p(-v);
}

double AnomalyDetector::Untransform(double v) const {
  if (!options_.log_values) return v;
  return v >= 0 ? std::expm1(v) : -std::expm1(-v);
}

void AnomalyDetector::LearnPeriod(int64_t time_s) {
  if (step_s_ != 0 || rows_ == 0) return;
  if (time_s > last_time_s_) diffs_.push_back(time_s - last_time_s_);
  if (static_cast<int>(diffs_.size()) < kPeriodDiffs) return;
  std::nth_element(diffs_.begin(), diffs_.begin() + kPeriodDiffs / 2, diffs_.end());
  step_s_ = diffs_[kPeriodDiffs / 2];
  diffs_.clear();
  const int64_t bins = (86400 + step_s_ / 2) / step_s_;
  if (options_.seasonal && step_s_ >= 60 && bins >= 4 && bins <= 1440) {
    bins_ = static_cast<int>(bins);
    day_ = SortedWindow(bins_);
    bin_offset_.assign(bins_, 0.0);
    bin_seen_.assign(bins_, 0);
  }
}

double AnomalyDetector::Scale(const SortedWindow& errors, double level) const {
  static const double kNormal = AbsNormalQuantile(0.8);
  const double normal = options_.scale_quantile == 0.8 ? kNormal : AbsNormalQuantile(options_.scale_quantile);
  const double floor = options_.min_scale_rel * std::max(std::abs(level), 1e-6) + 1e-12;
  return std::max(errors.Quantile(options_.scale_quantile) / normal, floor);
}

AnomalyVerdict AnomalyDetector::Step(int64_t time_s, double value) {
  LearnPeriod(time_s);
  last_time_s_ = time_s;
  const double y = Transform(value);
  AnomalyVerdict v;

  // This time of day's learned offset from the daily level (0 without a seasonal forecast).
  int bin = -1;
  double offset = 0, day_level = 0;
  bool have_season = false;
  if (bins_ > 0 && !day_.empty()) {
    const int64_t tod = ((time_s % 86400) + 86400) % 86400;
    bin = static_cast<int>(std::min<int64_t>(tod * bins_ / 86400, bins_ - 1));
    day_level = day_.Quantile(0.5);
    have_season = bin_seen_[bin] != 0 && day_.size() >= static_cast<size_t>(bins_);
    if (have_season) offset = bin_offset_[bin];
  }
  // Forecasts from the earlier rows only: the recent level of the deseasonalised values plus the
  // offset, and the last day's level plus the offset.
  const bool have_level = !level_.empty();
  const double level = (have_level ? level_.Quantile(0.5) : y - offset) + offset;
  const double season = day_level + offset;
  const double err_level = y - level;
  const double err_season = y - season;
  const double sr = options_.spectral_tau > 0 ? SpectralResidual(y) : 0;
  const bool use_context = options_.context_threshold > 0 || options_.method == 3;
  const double novelty = use_context ? ContextNovelty(time_s, y) : 0;
  double clip = std::numeric_limits<double>::infinity();  // bound of an offset update
  if (rows_ >= options_.warmup_rows && level_errors_.size() >= 16) {
    const double zl = std::abs(err_level) / Scale(level_errors_, level);
    clip = 3 * Scale(level_errors_, level);
    double z = zl;
    v.expected = Untransform(level);
    if (have_season && season_errors_.size() >= 16 && options_.combine != 2) {
      const double zs = std::abs(err_season) / Scale(season_errors_, season);
      z = options_.combine == 0 ? std::max(zl, zs) : std::min(zl, zs);
      if ((options_.combine == 0) == (zs > zl)) v.expected = Untransform(season);
    }
    v.z = z;
    v.lz = Likelihood(z / (z + options_.score_z_half));
    const double t = options_.threshold_z;
    const double zlik = t * v.lz / options_.likelihood_z;
    v.sr = sr;
    v.novelty = novelty;
    double eff = options_.method == 0 ? z : options_.method == 1 ? zlik : options_.method == 2 ? std::max(z, zlik) : 0;
    if (options_.spectral_tau > 0) eff = std::max(eff, t * sr / options_.spectral_tau);
    if (use_context && z >= options_.context_min_z) {  // a novel pattern the forecast also finds off
      const double ct = options_.context_threshold > 0 ? options_.context_threshold : 1.0;
      eff = std::max(eff, t * novelty / ct);
    }
    if (rows_ > suppressed_until_) {
      // In [0, 1) as the header says: for a z so large that z / (z + half) rounds to 1 (or an
      // infinite one), the largest double below 1.
      const double score = eff > 0 ? eff / (eff + options_.score_z_half) : 0;
      v.score = std::isfinite(score) && score < 1 ? score : std::nextafter(1.0, 0.0);
      if (eff >= t) {
        v.flagged = true;
        suppressed_until_ = rows_ + options_.suppress_rows;
      }
    }
  }

  // Fold the row into the history.
  if (have_level) level_errors_.Push(std::abs(err_level));
  if (have_season) season_errors_.Push(std::abs(err_season));
  level_.Push(y - offset);
  if (bins_ > 0) {
    if (bin >= 0 && day_.size() >= static_cast<size_t>(bins_)) {  // offsets from full days only
      // A robust EWMA: one outlier moves its bin's offset by at most alpha * 3 scales.
      const double off = y - day_level;
      bin_offset_[bin] = bin_seen_[bin] ? bin_offset_[bin] + options_.season_alpha * std::clamp(off - bin_offset_[bin], -clip, clip)
                                        : off;
      bin_seen_[bin] = 1;
    }
    day_.Push(y);
  }
  ++rows_;
  return v;
}

double AnomalyDetector::Likelihood(double r) {
  if (!std::isfinite(r)) r = 1;
  short_r_.push_back(r);
  short_sum_ += r;
  if (static_cast<int>(short_r_.size()) > options_.likelihood_short) {
    short_sum_ -= short_r_.front();
    short_r_.pop_front();
  }
  double lz = 0;
  const double n = static_cast<double>(long_r_.size());
  if (long_r_.size() >= 100) {
    const double mean = long_sum_ / n;
    const double sd = std::max(std::sqrt(std::max(long_sum2_ / n - mean * mean, 0.0)), 0.02);
    lz = std::max((short_sum_ / static_cast<double>(short_r_.size()) - mean) / sd, 0.0);
  }
  long_r_.push_back(r);
  long_sum_ += r;
  long_sum2_ += r * r;
  if (static_cast<int>(long_r_.size()) > options_.likelihood_window) {
    long_sum_ -= long_r_.front();
    long_sum2_ -= long_r_.front() * long_r_.front();
    long_r_.pop_front();
  }
  return lz;
}

namespace {

StatusOr<double> ParseNumber(std::string_view key, std::string_view text) {
  const std::string copy(text);
  char* end = nullptr;
  const double v = std::strtod(copy.c_str(), &end);
  if (copy.empty() || end != copy.c_str() + copy.size() || !std::isfinite(v)) {
    return InvalidArgumentError("--set " + std::string(key) + ": '" + copy + "' is not a number");
  }
  return v;
}

}  // namespace

Status SetAnomalyOption(AnomalyOptions* o, std::string_view assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) {
    return InvalidArgumentError("--set '" + std::string(assignment) + "': expected name=value");
  }
  const std::string_view key = assignment.substr(0, eq);
  TESSERA_ASSIGN_OR_RETURN(const double v, ParseNumber(key, assignment.substr(eq + 1)));
  struct IntField { const char* name; int* field; int lo; int hi; };
  struct RealField { const char* name; double* field; double lo; double hi; };
  const IntField ints[] = {{"warmup_rows", &o->warmup_rows, 1, 100000},
                           {"level_window", &o->level_window, 1, 100000},
                           {"scale_window", &o->scale_window, 16, 100000},
                           {"combine", &o->combine, 0, 2},
                           {"suppress_rows", &o->suppress_rows, 0, 1000000},
                           {"method", &o->method, 0, 3},
                           {"context_buckets", &o->context_buckets, 1, 1000000},
                           {"context_len", &o->context_len, 1, 64},
                           {"likelihood_window", &o->likelihood_window, 100, 100000},
                           {"likelihood_short", &o->likelihood_short, 1, 10000}};
  const RealField reals[] = {{"scale_quantile", &o->scale_quantile, 0.05, 0.99},
                             {"min_scale_rel", &o->min_scale_rel, 0, 1},
                             {"season_alpha", &o->season_alpha, 0.001, 1},
                             {"threshold_z", &o->threshold_z, 0.01, 1e9},
                             {"score_z_half", &o->score_z_half, 0.01, 1e9},
                             {"likelihood_z", &o->likelihood_z, 0.01, 1e9},
                             {"spectral_tau", &o->spectral_tau, 0, 1e9},
                             {"context_threshold", &o->context_threshold, 0, 1},
                             {"context_min_z", &o->context_min_z, 0, 1e9}};
  auto range = [&](double lo, double hi) {
    return InvalidArgumentError("--set " + std::string(key) + ": " + std::to_string(v) + " is outside [" +
                                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  };
  for (const IntField& f : ints) {
    if (key != f.name) continue;
    if (v != std::floor(v) || v < f.lo || v > f.hi) return range(f.lo, f.hi);
    *f.field = static_cast<int>(v);
    return Status::Ok();
  }
  for (const RealField& f : reals) {
    if (key != f.name) continue;
    if (v < f.lo || v > f.hi) return range(f.lo, f.hi);
    *f.field = v;
    return Status::Ok();
  }
  if (key == "seasonal" || key == "log_values" || key == "context_daily") {
    if (v != 0 && v != 1) return range(0, 1);
    (key == "seasonal" ? o->seasonal : key == "log_values" ? o->log_values : o->context_daily) = v != 0;
    return Status::Ok();
  }
  return InvalidArgumentError("--set: unknown option '" + std::string(key) +
                              "' (known: warmup_rows, level_window, scale_window, scale_quantile, min_scale_rel, "
                              "seasonal, season_alpha, combine, log_values, threshold_z, score_z_half, suppress_rows, "
                              "method, likelihood_window, likelihood_short, likelihood_z, spectral_tau, context_threshold, "
                              "context_buckets, context_len, context_daily, context_min_z)");
}

std::vector<AnomalyVerdict> DetectAnomalies(const Series& series, const AnomalyOptions& options) {
  AnomalyDetector detector(options);
  std::vector<AnomalyVerdict> out;
  out.reserve(series.rows.size());
  for (const SeriesRow& r : series.rows) out.push_back(detector.Step(r.time_s, r.value));
  return out;
}

}  // namespace tessera::metering
