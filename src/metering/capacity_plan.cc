#include "tessera/metering/capacity_plan.h"

#include <algorithm>
#include <cmath>

#include "tessera/metering/civil_time.h"

namespace tessera::metering {

std::vector<ModelDemand> HourlyDemandByModel(const Ledger& ledger) {
  std::map<std::string, std::map<int64_t, double>> by_model;
  for (const HourlyRecord& r : ledger.Records()) {
    by_model[ledger.source(r.source).model][r.hour] += static_cast<double>(r.gpu_milli_s_allocated) / 3600.0 / 1000.0;
  }
  std::vector<ModelDemand> out;
  for (const auto& [model, hours] : by_model) {
    ModelDemand d{model, hours.begin()->first, {}};
    const int64_t last = hours.rbegin()->first;
    d.gpus.assign(static_cast<size_t>((last - d.start_hour) / kSecondsPerHour + 1), 0.0);
    for (const auto& [hour, gpus] : hours) d.gpus[static_cast<size_t>((hour - d.start_hour) / kSecondsPerHour)] = gpus;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<ModelPlan> PlanCapacity(const Ledger& ledger, const CapacityPlanOptions& options) {
  return PlanCapacity(HourlyDemandByModel(ledger), options);
}

std::vector<ModelPlan> PlanCapacity(const std::vector<ModelDemand>& demand, const CapacityPlanOptions& options) {
  std::vector<ModelPlan> plans;
  const int horizon = std::max(options.horizon_days, 1) * 24;
  for (const ModelDemand& d : demand) {
    if (d.gpus.empty()) continue;
    ModelPlan p;
    p.model = d.model;
    p.history_start = d.start_hour;
    p.history_hours = static_cast<int>(d.gpus.size());
    p.peak_demand_gpus = *std::max_element(d.gpus.begin(), d.gpus.end());
    const auto given = options.capacity_gpus.find(d.model);
    p.capacity_from_history = given == options.capacity_gpus.end();
    // 1e-9: a peak of exactly 8 GPUs computed as 8.0000000001 is still 8.
    p.capacity_gpus = p.capacity_from_history ? std::ceil(p.peak_demand_gpus - 1e-9) : given->second;
    for (double g : d.gpus) p.hours_over_capacity += g > p.capacity_gpus + 1e-9 ? 1 : 0;
    const Forecast f = ForecastHourly(d.gpus, horizon, options.forecast);
    p.methods = f.methods;
    const int64_t first_forecast_hour = d.start_hour + static_cast<int64_t>(d.gpus.size()) * kSecondsPerHour;
    double max_upper = 0;
    for (int h = 0; h < horizon; ++h) {
      const size_t day = static_cast<size_t>(h / 24);
      if (day >= p.daily_peak.size()) p.daily_peak.push_back(f.values[h]), p.daily_peak_upper.push_back(f.upper[h]);
      p.daily_peak[day] = std::max(p.daily_peak[day], f.values[h]);
      p.daily_peak_upper[day] = std::max(p.daily_peak_upper[day], f.upper[h]);
      max_upper = std::max(max_upper, f.upper[h]);
      const int64_t at = first_forecast_hour + h * kSecondsPerHour;
      if (p.first_exceed_hour < 0 && f.values[h] > p.capacity_gpus) p.first_exceed_hour = at;
      if (p.first_exceed_upper_hour < 0 && f.upper[h] > p.capacity_gpus) p.first_exceed_upper_hour = at;
    }
    p.gpus_to_add = std::max(0, static_cast<int>(std::ceil(max_upper - p.capacity_gpus - 1e-9)));
    // The backtest: as configured, cut to what the history allows (a third of it held out, whole days).
    const int n = p.history_hours;
    int holdout = std::min(options.backtest_holdout_hours, n / 3 / 24 * 24);
    int bh = std::min(options.backtest_horizon_hours, holdout);
    if (bh >= 24) {
      holdout = holdout / bh * bh;
      p.backtest = BacktestHourly(d.gpus, bh, holdout, options.forecast);
      p.backtest_horizon_hours = bh;
      p.backtest_holdout_hours = holdout;
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

}  // namespace tessera::metering
