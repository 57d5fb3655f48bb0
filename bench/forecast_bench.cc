// Forecasting benchmarks (README's performance table):
//   BM_Forecast/SERIES   ForecastHourly over SERIES hourly series of 6 weeks (1,008 hours) each,
//                        horizon 48 h (M4's hourly horizon): what one `tessera forecast` call
//                        with that many series costs, parsing aside. Synthetic series: daily and
//                        weekly seasons, trend, noise, an outlier every 500 hours (seeded).
//   BM_ForecastLong      one series, horizon 90 days (2,160 h): the forecast behind
//                        `tessera plan capacity --horizon 90d`, per GPU model.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

#include "tessera/metering/forecast.h"

namespace tessera::metering {
namespace {

std::vector<std::vector<double>> Series(int count, int hours) {
  std::mt19937 rng(42);
  std::normal_distribution<double> noise(0, 3);
  std::vector<std::vector<double>> out(count, std::vector<double>(hours));
  for (int s = 0; s < count; ++s) {
    const double level = 50 + s % 17 * 10, amp = 5 + s % 7 * 3;
    for (int t = 0; t < hours; ++t) {
      out[s][t] = level + 0.01 * t + amp * std::sin(2 * M_PI * t / 24) + ((t / 24) % 7 >= 5 ? -amp / 2 : 0) +
                  noise(rng) + (t % 500 == 250 ? 10 * amp : 0);
    }
  }
  return out;
}

void BM_Forecast(benchmark::State& state) {
  const auto series = Series(static_cast<int>(state.range(0)), 1008);
  for (auto _ : state) {
    for (const auto& y : series) benchmark::DoNotOptimize(ForecastHourly(y, 48));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Forecast)->Arg(100)->Arg(500)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_ForecastLong(benchmark::State& state) {
  const auto series = Series(1, 24 * 28);
  for (auto _ : state) benchmark::DoNotOptimize(ForecastHourly(series[0], 24 * 90));
}
BENCHMARK(BM_ForecastLong)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera::metering

BENCHMARK_MAIN();
