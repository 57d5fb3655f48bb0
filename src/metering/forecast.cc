#include "tessera/metering/forecast.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <numeric>

namespace tessera::metering {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kDay = 24;
constexpr int kWeek = 168;

using Vec = std::vector<double>;

double Median(Vec v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) m = (m + *std::max_element(v.begin(), v.begin() + mid)) / 2;
  return m;
}

double Mean(std::span<const double> v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// M4's acf: lag-k autocorrelation with the whole series' mean and variance.
double Acf(std::span<const double> x, int k) {
  const double m = Mean(x);
  double s1 = 0, s2 = 0;
  for (size_t i = static_cast<size_t>(k); i < x.size(); ++i) s1 += (x[i] - m) * (x[i - k] - m);
  for (double v : x) s2 += (v - m) * (v - m);
  return s2 == 0 ? 0 : s1 / s2;
}

// Centred moving median of window w (edges use the nearest full window), computed every
// kMedianStride hours and interpolated linearly in between (the trend is smooth; 8x cheaper).
constexpr int kMedianStride = 8;
Vec MovingMedian(std::span<const double> y, int w) {
  const int n = static_cast<int>(y.size());
  Vec out(n);
  if (n <= w) {
    std::fill(out.begin(), out.end(), Median(Vec(y.begin(), y.end())));
    return out;
  }
  Vec window(w);
  auto at = [&](int i) {
    const int lo = std::clamp(i - w / 2, 0, n - w);
    std::copy(y.begin() + lo, y.begin() + lo + w, window.begin());
    return Median(window);
  };
  int prev = 0;
  double prev_v = at(0);
  out[0] = prev_v;
  while (prev < n - 1) {
    const int next = std::min(n - 1, prev + kMedianStride);
    const double next_v = at(next);
    for (int i = prev + 1; i <= next; ++i) out[i] = prev_v + (next_v - prev_v) * (i - prev) / (next - prev);
    prev = next, prev_v = next_v;
  }
  return out;
}

// Centred moving mean of window w, shrinking at the edges.
Vec MovingMean(const Vec& y, int w) {
  const int n = static_cast<int>(y.size());
  Vec prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + y[i];
  Vec out(n);
  for (int i = 0; i < n; ++i) {
    const int lo = std::max(0, i - w / 2), hi = std::min(n, i - w / 2 + w);
    out[i] = (prefix[hi] - prefix[lo]) / (hi - lo);
  }
  return out;
}

// The robust decomposition y = trend + day[t % 24] + week[t % 168] + remainder; `adjusted` is the
// seasonally adjusted series with outliers clipped.
struct Decomposition {
  Vec day = Vec(kDay, 0), week = Vec(kWeek, 0);
  Vec adjusted;
};

Decomposition Decompose(std::span<const double> y) {
  const int n = static_cast<int>(y.size());
  Decomposition d;
  const bool weekly = n >= 2 * kWeek;
  Vec work(y.begin(), y.end());
  for (int pass = 0; pass < 2; ++pass) {
    Vec trend = MovingMean(MovingMedian(work, weekly ? kWeek : kDay), kDay);
    Vec detr(n);
    for (int t = 0; t < n; ++t) detr[t] = work[t] - trend[t];
    std::vector<Vec> by(kDay);
    for (int t = 0; t < n; ++t) by[t % kDay].push_back(detr[t]);
    for (int h = 0; h < kDay; ++h) d.day[h] = Median(by[h]);
    const double dm = Mean(d.day);
    for (double& v : d.day) v -= dm;
    std::fill(d.week.begin(), d.week.end(), 0.0);
    if (weekly) {
      std::vector<Vec> wb(kWeek);
      for (int t = 0; t < n; ++t) wb[t % kWeek].push_back(detr[t] - d.day[t % kDay]);
      for (int h = 0; h < kWeek; ++h) d.week[h] = Median(wb[h]);
      // Remove what is daily in the weekly profile (keep it a pure day-of-week effect).
      Vec fix(kDay, 0);
      for (int h = 0; h < kWeek; ++h) fix[h % kDay] += d.week[h] / 7;
      for (int h = 0; h < kWeek; ++h) d.week[h] -= fix[h % kDay];
    }
    Vec rem(n);
    for (int t = 0; t < n; ++t) rem[t] = detr[t] - d.day[t % kDay] - d.week[t % kWeek];
    Vec abs_rem(n);
    for (int t = 0; t < n; ++t) abs_rem[t] = std::fabs(rem[t]);
    const double sigma = 1.4826 * Median(abs_rem);
    const double cap = 4 * sigma;
    d.adjusted.assign(n, 0);
    for (int t = 0; t < n; ++t) {
      const double r = sigma > 0 ? std::clamp(rem[t], -cap, cap) : rem[t];
      work[t] = y[t] - rem[t] + r;  // outliers clipped for the next pass
      d.adjusted[t] = trend[t] + r;
    }
  }
  return d;
}

// Damped-trend Holt, grid-fitted by one-step squared error.
Vec DampedHolt(const Vec& a, int horizon) {
  const int n = static_cast<int>(a.size());
  static constexpr double kAlpha[] = {0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 0.9};
  static constexpr double kBeta[] = {0.0, 0.01, 0.05, 0.15};
  static constexpr double kPhi[] = {0.8, 0.9, 0.95, 0.98};
  double best = std::numeric_limits<double>::infinity(), bl = a.back(), bb = 0, bphi = 0.9;
  const double b0 = n > kDay ? (a[kDay] - a[0]) / kDay : 0;
  for (double alpha : kAlpha) {
    for (double beta : kBeta) {
      for (double phi : kPhi) {
        double l = a[0], b = b0, sse = 0;
        for (int t = 1; t < n; ++t) {
          const double f = l + phi * b;
          const double e = a[t] - f;
          sse += e * e;
          const double nl = f + alpha * e;
          b = phi * b + alpha * beta * e;
          l = nl;
        }
        if (sse < best) best = sse, bl = l, bb = b, bphi = phi;
      }
    }
  }
  Vec out(horizon);
  double damp = 0, p = 1;
  for (int h = 0; h < horizon; ++h) {
    p *= bphi;
    damp += p;
    out[h] = bl + damp * bb;
  }
  return out;
}

// Theta (M4's): SES with drift = half the slope of the fitted line.
Vec Theta(const Vec& a, int horizon) {
  const int n = static_cast<int>(a.size());
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (int t = 0; t < n; ++t) sx += t, sy += a[t], sxx += double(t) * t, sxy += t * a[t];
  const double den = n * sxx - sx * sx;
  const double slope = den > 0 ? (n * sxy - sx * sy) / den : 0;
  static constexpr double kAlpha[] = {0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.9};
  double best = std::numeric_limits<double>::infinity(), bl = a.back(), balpha = 0.5;
  for (double alpha : kAlpha) {
    double l = a[0], sse = 0;
    for (int t = 1; t < n; ++t) {
      const double e = a[t] - l;
      sse += e * e;
      l += alpha * e;
    }
    if (sse < best) best = sse, bl = l, balpha = alpha;
  }
  Vec out(horizon);
  for (int h = 0; h < horizon; ++h) {
    const double drift = slope / 2 * (h + 1 + 1 / balpha - std::pow(1 - balpha, n) / balpha);
    out[h] = bl + drift;
  }
  return out;
}

// Simple exponential smoothing, grid-fitted (no season, no trend).
Vec Ses(std::span<const double> a, int horizon) {
  static constexpr double kAlpha[] = {0.1, 0.2, 0.3, 0.5, 0.7, 0.9};
  double best = std::numeric_limits<double>::infinity(), bl = a.back();
  for (double alpha : kAlpha) {
    double l = a[0], sse = 0;
    for (size_t t = 1; t < a.size(); ++t) {
      const double e = a[t] - l;
      sse += e * e;
      l += alpha * e;
    }
    if (sse < best) best = sse, bl = l;
  }
  return Vec(horizon, bl);
}

// Forecasts from one decomposition: damped Holt and Theta on the adjusted series.
void DecompForecasts(std::span<const double> y, int horizon, bool log_scale, Vec* damped, Vec* theta) {
  const int n = static_cast<int>(y.size());
  Vec in(y.begin(), y.end());
  if (log_scale)
    for (double& v : in) v = std::log(v);
  const Decomposition d = Decompose(in);
  *damped = DampedHolt(d.adjusted, horizon);
  *theta = Theta(d.adjusted, horizon);
  for (Vec* f : {damped, theta}) {
    for (int h = 0; h < horizon; ++h) {
      const int t = n + h;
      (*f)[h] += d.day[t % kDay] + d.week[t % kWeek];
      if (log_scale) (*f)[h] = std::exp(std::min((*f)[h], 700.0));
    }
  }
}

Vec WeekProfile(std::span<const double> y, int horizon) {
  const int n = static_cast<int>(y.size());
  const int weeks = std::min(4, n / kWeek - 1);
  Vec prof(kWeek, 0);
  for (int h = 0; h < kWeek; ++h) {
    for (int k = 1; k <= weeks; ++k) prof[h] += y[n - k * kWeek + h];
    prof[h] /= weeks;
  }
  // The level of the last day against the same hours of the weeks before it.
  double shift = 0;
  for (int i = n - kDay; i < n; ++i) {
    double before = 0;
    for (int k = 1; k <= weeks; ++k) before += y[i - k * kWeek];
    shift += y[i] - before / weeks;
  }
  shift /= kDay;
  Vec out(horizon);
  for (int h = 0; h < horizon; ++h) out[h] = prof[h % kWeek] + shift / 2;
  return out;
}

// Per hour of the day, the mean of the last 7 days, moved half way to the level of the last day.
Vec DayProfile(std::span<const double> y, int horizon) {
  const int n = static_cast<int>(y.size());
  const int days = std::min(7, n / kDay);
  Vec prof(kDay, 0);
  for (int h = 0; h < kDay; ++h) {
    for (int k = 1; k <= days; ++k) prof[h] += y[n - k * kDay + h];
    prof[h] /= days;
  }
  double last = 0;
  for (int i = n - kDay; i < n; ++i) last += y[i];
  const double shift = (last / kDay - Mean(prof)) / 2;
  Vec out(horizon);
  for (int h = 0; h < horizon; ++h) out[h] = prof[h % kDay] + shift;
  return out;
}

constexpr const char* kCandidateNames[] = {"snaive24",         "snaive168",       "week_profile", "decomp_damped",
                                           "decomp_theta",     "decomp_damped_log", "decomp_theta_log", "naive",
                                           "naive2",           "ses",               "day_profile"};
constexpr int kCandidates = static_cast<int>(std::size(kCandidateNames));

// Every candidate's forecast of `horizon` hours after `y` (empty where it does not apply).
std::vector<Vec> Candidates(std::span<const double> y, int horizon, bool positive) {
  const int n = static_cast<int>(y.size());
  std::vector<Vec> out(kCandidates);
  out[0] = SeasonalNaive(y, horizon, kDay);
  if (n >= 2 * kWeek) out[1] = SeasonalNaive(y, horizon, kWeek);
  if (n >= 2 * kWeek) out[2] = WeekProfile(y, horizon);
  if (n >= 3 * kDay) DecompForecasts(y, horizon, false, &out[3], &out[4]);
  if (n >= 3 * kDay && positive) DecompForecasts(y, horizon, true, &out[5], &out[6]);
  out[7] = Vec(horizon, y.back());
  out[8] = Naive2(y, horizon, kDay);
  out[9] = Ses(y, horizon);
  out[10] = DayProfile(y, horizon);
  return out;
}

double Quantile(Vec v, double q) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1);
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

}  // namespace

std::vector<double> SeasonalNaive(std::span<const double> history, int horizon, int m) {
  Vec out(std::max(horizon, 0), 0);
  const int n = static_cast<int>(history.size());
  if (n == 0) return out;
  if (n < m) m = 1;
  for (int h = 0; h < horizon; ++h) out[h] = history[n - m + h % m];
  return out;
}

bool M4SeasonalityTest(std::span<const double> history, int m) {
  if (m <= 1 || history.size() < static_cast<size_t>(3 * m)) return false;
  double s = Acf(history, 1);
  for (int k = 2; k < m; ++k) s += std::pow(Acf(history, k), 2);
  const double limit = 1.645 * std::sqrt((1 + 2 * s) / static_cast<double>(history.size()));
  return std::fabs(Acf(history, m)) > limit;
}

std::vector<double> Naive2(std::span<const double> history, int horizon, int m) {
  const int n = static_cast<int>(history.size());
  Vec out(std::max(horizon, 0), 0);
  if (n == 0) return out;
  bool positive = true;
  for (double v : history) positive &= v > 0;
  if (!positive || !M4SeasonalityTest(history, m)) {
    std::fill(out.begin(), out.end(), history.back());
    return out;
  }
  // statsmodels' seasonal_decompose(model="multiplicative"): a centred 2 x m moving average.
  Vec sum(m, 0);
  std::vector<int> count(m, 0);
  const int half = m / 2;
  for (int t = half; t + half < n; ++t) {
    double ma = 0;
    if (m % 2 == 0) {
      for (int k = -half; k <= half; ++k) ma += history[t + k] * ((k == -half || k == half) ? 0.5 : 1.0);
    } else {
      for (int k = -half; k <= half; ++k) ma += history[t + k];
    }
    ma /= m;
    sum[t % m] += history[t] / ma;
    ++count[t % m];
  }
  Vec index(m);
  for (int p = 0; p < m; ++p) index[p] = count[p] ? sum[p] / count[p] : 1;
  const double mean = Mean(index);
  for (double& v : index) v /= mean;
  const double last = history[n - 1] / index[(n - 1) % m];
  for (int h = 0; h < horizon; ++h) out[h] = last * index[(n + h) % m];
  return out;
}

double Smape(std::span<const double> actual, std::span<const double> forecast) {
  if (actual.empty() || actual.size() != forecast.size()) return kNaN;
  double s = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double den = std::fabs(actual[i]) + std::fabs(forecast[i]);
    if (den > 0) s += 2 * std::fabs(actual[i] - forecast[i]) / den;
  }
  return 100 * s / static_cast<double>(actual.size());
}

double Mase(std::span<const double> history, std::span<const double> actual, std::span<const double> forecast,
            int m) {
  if (actual.empty() || actual.size() != forecast.size() || history.size() <= static_cast<size_t>(m)) return kNaN;
  double scale = 0;
  for (size_t t = m; t < history.size(); ++t) scale += std::fabs(history[t] - history[t - m]);
  scale /= static_cast<double>(history.size() - m);
  if (scale == 0) return kNaN;
  double e = 0;
  for (size_t i = 0; i < actual.size(); ++i) e += std::fabs(actual[i] - forecast[i]);
  return e / static_cast<double>(actual.size()) / scale;
}

Forecast ForecastHourly(std::span<const double> history, int horizon, const ForecastOptions& options) {
  Forecast out;
  horizon = std::max(horizon, 0);
  const int n = static_cast<int>(history.size());
  const bool non_negative = std::all_of(history.begin(), history.end(), [](double v) { return v >= 0; });
  const bool positive = std::all_of(history.begin(), history.end(), [](double v) { return v > 0; });
  if (n < 2 * kDay) {
    out.values.assign(horizon, n ? history.back() : 0);
    out.lower = out.upper = out.values;
    out.methods = {"naive"};
    return out;
  }
  // The holdout: `origins` windows of `hv` hours, one day apart, ending at the history's end.
  const int hv = std::clamp(std::min(options.holdout_hours, horizon), 1, n / 4);
  const int origins = std::clamp(options.holdout_origins, 1, 10);
  struct Scored {
    int candidate;
    double score;
    std::vector<Vec> holdout;  // forecasts per origin
  };
  std::vector<Scored> scored;
  std::vector<int> starts;
  for (int k = 0; k < origins; ++k) {
    const int start = n - hv - k * kDay;
    if (start >= 2 * kDay) starts.push_back(start);
  }
  std::vector<std::vector<Vec>> runs;  // per origin, per candidate
  for (int start : starts) runs.push_back(Candidates(history.first(start), hv, positive));
  for (int c = 0; c < kCandidates; ++c) {
    Scored s{c, 0, {}};
    double sm = 0, sm_base = 0, ma = 0, ma_base = 0;
    bool usable = !starts.empty();
    for (size_t k = 0; k < starts.size() && usable; ++k) {
      if (runs[k][c].empty()) {
        usable = false;
        break;
      }
      const auto train = history.first(starts[k]);
      const auto actual = history.subspan(starts[k], hv);
      s.holdout.push_back(runs[k][c]);
      sm += Smape(actual, runs[k][c]);
      sm_base += Smape(actual, runs[k][0]);
      const double m1 = Mase(train, actual, runs[k][c], kDay), m0 = Mase(train, actual, runs[k][0], kDay);
      if (std::isfinite(m1) && std::isfinite(m0)) ma += m1, ma_base += m0;
    }
    if (!usable) continue;
    const double rs = sm_base > 0 ? sm / sm_base : (sm > 0 ? 2 : 1);
    const double rm = ma_base > 0 ? ma / ma_base : (ma > 0 ? 2 : 1);
    s.score = (rs + rm) / 2;
    if (std::isfinite(s.score)) scored.push_back(std::move(s));
  }
  if (scored.empty()) {  // not enough history for the holdout
    out.values = SeasonalNaive(history, horizon, kDay);
    out.lower = out.upper = out.values;
    out.methods = {"snaive24"};
    return out;
  }
  std::stable_sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) { return a.score < b.score; });
  const size_t top = std::clamp<size_t>(options.combine_top, 1, scored.size());
  out.values.assign(horizon, 0);
  std::vector<Vec> combined(starts.size(), Vec(hv, 0));
  const std::vector<Vec> final_runs = Candidates(history, horizon, positive);
  for (size_t i = 0; i < top; ++i) {
    const Vec& f = final_runs[scored[i].candidate];
    for (int h = 0; h < horizon; ++h) out.values[h] += f[h] / top;
    for (size_t k = 0; k < starts.size(); ++k)
      for (int h = 0; h < hv; ++h) combined[k][h] += scored[i].holdout[k][h] / top;
    out.methods.push_back(kCandidateNames[scored[i].candidate]);
  }
  // The interval from the combination's holdout errors.
  const double level = std::clamp(options.interval_level, 0.5, 0.999);
  Vec width(hv);
  for (int h = 0; h < hv; ++h) {
    Vec errs;
    const int upto = std::min(hv - 1, std::max(h, kDay - 1));
    for (size_t k = 0; k < starts.size(); ++k)
      for (int j = 0; j <= upto; ++j) errs.push_back(std::fabs(history[starts[k] + j] - combined[k][j]));
    width[h] = Quantile(std::move(errs), level);
    if (h > 0) width[h] = std::max(width[h], width[h - 1]);
  }
  out.lower.resize(horizon);
  out.upper.resize(horizon);
  for (int h = 0; h < horizon; ++h) {
    // Beyond the holdout the width grows like a random walk's, but only up to a week ahead:
    // demand series revert to their seasons, and an unbounded sqrt(h) makes a 90-day plan absurd.
    const int lead = std::min(h + 1, std::max(hv, kWeek));
    const double w = h < hv ? width[h] : width[hv - 1] * std::sqrt(static_cast<double>(lead) / hv);
    if (non_negative) out.values[h] = std::max(out.values[h], 0.0);
    out.lower[h] = out.values[h] - w;
    out.upper[h] = out.values[h] + w;
    if (non_negative) out.lower[h] = std::max(out.lower[h], 0.0);
  }
  return out;
}

BacktestScores BacktestHourly(std::span<const double> series, int horizon, int holdout,
                              const ForecastOptions& options) {
  BacktestScores s;
  const int n = static_cast<int>(series.size());
  if (horizon <= 0 || holdout < horizon || holdout >= n) return s;
  int inside = 0, total = 0;
  for (int start = n - holdout; start + horizon <= n; start += horizon) {
    const auto train = series.first(start);
    const auto actual = series.subspan(start, horizon);
    const Forecast f = ForecastHourly(train, horizon, options);
    const Vec n2 = Naive2(train, horizon, kDay), sn = SeasonalNaive(train, horizon, kDay);
    s.smape += Smape(actual, f.values);
    s.mase += Mase(train, actual, f.values);
    s.smape_naive2 += Smape(actual, n2);
    s.mase_naive2 += Mase(train, actual, n2);
    s.smape_snaive += Smape(actual, sn);
    s.mase_snaive += Mase(train, actual, sn);
    for (int h = 0; h < horizon; ++h, ++total) inside += actual[h] >= f.lower[h] && actual[h] <= f.upper[h];
    ++s.windows;
  }
  if (s.windows > 0) {
    const double w = s.windows;
    s.smape /= w, s.mase /= w, s.smape_naive2 /= w, s.mase_naive2 /= w, s.smape_snaive /= w, s.mase_snaive /= w;
    s.coverage = static_cast<double>(inside) / total;
  }
  return s;
}

}  // namespace tessera::metering
