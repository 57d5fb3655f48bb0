// Forecasting hourly series (GPU demand, usage) and the M4 competition's accuracy measures.
//
// Callers: `tessera forecast` (the CLI reads series with forecast_input.h), `tessera plan
// capacity` (capacity_plan.h), the backtest and the benchmark. Pure: no I/O, no clock.
// Thread-safety: free functions over values; nothing is shared between calls.
//
// The forecaster (ForecastHourly) fits a few simple methods and combines those that did best on
// the series' own recent past (a holdout of its last hours, at a few origins):
//   snaive24 / snaive168   the value 24 / 168 hours earlier (seasonal naive)
//   week_profile           per hour of the week, the mean of the last weeks (up to 4), shifted to
//                          the level of the last day
//   day_profile            per hour of the day, the mean of the last 7 days, moved half way to
//                          the level of the last day
//   naive, naive2, ses     the last value; M4's Naive2 (below); simple exponential smoothing
//   decomp_damped[_log]    robust decomposition: trend = centred moving median, daily and weekly
//                          profiles = medians of the detrended values, outliers (|remainder| above
//                          4 robust sigmas) clipped; the seasonally adjusted series is extrapolated
//                          with damped-trend Holt (grid-fitted), the profiles are added back. The
//                          _log variant works on log(y) (positive series: multiplicative seasons)
//   decomp_theta[_log]     the same decomposition, the adjusted series forecast by the Theta
//                          method (SES plus half the fitted linear slope, as in M4's Theta)
// Each candidate is scored on the holdout by sMAPE and MASE relative to snaive24 (as OWA is);
// the forecast is the mean of the best `combine_top`. The prediction interval comes from the
// combination's holdout errors: at lead h the `interval_level` quantile of the absolute errors at
// leads <= max(h, 23), widened by sqrt(h / holdout) beyond the holdout up to one week ahead and
// held there (demand reverts to its seasons; a 90-day plan must not grow without bound). A series that was never
// negative gets no negative forecast or bound.
//
// Measures (as the M4 competition defines them; `history` is the training part, `actual` the
// held-out truth, `forecast` the same length as `actual`):
//   sMAPE = 200/H * sum |y - f| / (|y| + |f|)           (a term with y = f = 0 counts 0)
//   MASE  = (1/H * sum |y - f|) / (1/(n-m) * sum_{t>m} |x_t - x_{t-m}|),   m = 24
//   Naive2: the last value of the seasonally adjusted history, re-seasonalised; adjusted by a
//           classical multiplicative decomposition (centred 2x24 moving average, indices averaged
//           per hour and normalised to mean 1) when M4's 90 % seasonality test says the series
//           is seasonal: |acf(24)| > 1.645 sqrt((1 + 2 s) / n), s = acf(1) + sum_{k=2}^{23} acf(k)^2
//           (M4's code adds acf(1) unsquared; kept, to give M4's Naive2). A series with a value
//           <= 0 cannot be divided by its indices and is treated as not seasonal.
//   OWA   = (sMAPE / sMAPE_Naive2 + MASE / MASE_Naive2) / 2; over many series M4 divides the
//           means (mean sMAPE over the series / mean sMAPE of Naive2, the same for MASE).
//
// Worked example (m = 2 to keep it small; ForecastHourly uses m = 24):
//   history x = 1 3 1 3 1 3, actual y = 1 3, forecast f = 2 2
//   sMAPE = 200/2 * (|1-2|/(1+2) + |3-2|/(3+2)) = 100 * (1/3 + 1/5) = 53.33
//   MASE scale = mean |x_t - x_{t-2}| = 0 (perfectly seasonal): MASE is undefined (NaN).
//   history x = 1 2 3 4 5 6, m = 2: scale = mean(|3-1|, |4-2|, |5-3|, |6-4|) = 2;
//   actual 7 8, forecast 7 7: MASE = mean(0, 1) / 2 = 0.25; seasonal naive (m = 2) gives 5 6,
//   MASE = mean(2, 2) / 2 = 1.
//   With sMAPE 10 and MASE 0.5 against Naive2's 20 and 2: OWA = (10/20 + 0.5/2) / 2 = 0.375.
#pragma once

#include <span>
#include <string>
#include <vector>

namespace tessera::metering {

struct ForecastOptions {
  int combine_top = 2;          // how many of the best candidates are averaged
  int holdout_hours = 48;       // the holdout horizon per origin (at most the forecast horizon)
  int holdout_origins = 7;      // origins, one day apart, at the end of the history
  double interval_level = 0.9;  // the prediction interval's coverage (two-sided), in (0, 1)
};

struct Forecast {
  std::vector<double> values;  // one per hour after the history
  std::vector<double> lower;   // the prediction interval, same length
  std::vector<double> upper;
  std::vector<std::string> methods;  // the candidates averaged, best first
};

// Forecasts the `horizon` hours after an hourly `history` (oldest first, no gaps). An empty
// history forecasts zeros; a short one (under two days) repeats its last value.
Forecast ForecastHourly(std::span<const double> history, int horizon, const ForecastOptions& options = {});

// The M4 benchmarks.
std::vector<double> SeasonalNaive(std::span<const double> history, int horizon, int m);
std::vector<double> Naive2(std::span<const double> history, int horizon, int m = 24);
// M4's seasonality test at 90 % (false when the history is shorter than 3 m).
bool M4SeasonalityTest(std::span<const double> history, int m);

// The measures; NaN when undefined (empty, or MASE's scale is 0).
double Smape(std::span<const double> actual, std::span<const double> forecast);
double Mase(std::span<const double> history, std::span<const double> actual, std::span<const double> forecast,
            int m = 24);
inline double Owa(double smape, double mase, double smape_naive2, double mase_naive2) {
  return (smape / smape_naive2 + mase / mase_naive2) / 2;
}

// A backtest of ForecastHourly against Naive2 and seasonal naive (m = 24) on one series: the last
// `holdout` hours are cut into windows of `horizon` hours; each window is forecast from all the
// hours before it. The scores are means over the windows.
struct BacktestScores {
  int windows = 0;
  double smape = 0, mase = 0;                // ForecastHourly
  double smape_naive2 = 0, mase_naive2 = 0;  // Naive2
  double smape_snaive = 0, mase_snaive = 0;  // seasonal naive, m = 24
  double coverage = 0;                       // share of actual values inside the interval
};
BacktestScores BacktestHourly(std::span<const double> series, int horizon, int holdout,
                              const ForecastOptions& options = {});

}  // namespace tessera::metering
