// Capacity planning from the usage ledger: per GPU model, the hourly demand in GPUs, its forecast
// over a horizon (days), when demand first exceeds capacity and how many GPUs to add so that the
// forecast's upper bound stays under capacity; with the backtest error of the forecast used.
//
// Demand of a model in an hour = sum over its hourly records of gpu_milli_s_allocated / 3600 /
// 1000 (GPUs held on average in that hour; a 0.5-GPU share held all hour counts 0.5). Hours
// between the model's first and last record with no record count 0. What matters for capacity is
// each day's peak hour: the plan compares the daily peaks of the forecast (point and upper bound)
// with the capacity.
//
// Worked example: capacity 10 GPUs; history 4 weeks whose daily peak grows from 6 to 8 GPUs; the
// forecast's daily peaks reach 9.1 (upper 10.4) on day 20 and 9.6 (upper 11.2) on day 90. The
// upper bound first exceeds 10 on day 20 (first_exceed_upper_hour), the point forecast never does
// (first_exceed_hour = -1); to keep the upper bound under capacity: ceil(11.2 - 10) = 2 GPUs.
//
// Capacity per model: given by the caller, or else the highest hourly demand seen in the ledger
// rounded up (capacity_from_history = true; the report says so). A given capacity that the
// history's demand exceeds (hours_over_capacity > 0) is suspect: the cluster could not have held
// that use, so the ledger is of demand rather than of what ran, or the capacity is wrong; the
// report warns.
//
// Callers: `tessera plan capacity`, tests. Pure: no I/O, no clock. Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/metering/forecast.h"
#include "tessera/metering/ledger.h"

namespace tessera::metering {

struct CapacityPlanOptions {
  int horizon_days = 90;
  std::map<std::string, double> capacity_gpus;  // by model; absent: the peak seen
  ForecastOptions forecast;                     // interval_level is the upper bound's level
  int backtest_horizon_hours = 48;              // the backtest's windows (cut to the history)
  int backtest_holdout_hours = 336;
};

struct ModelDemand {
  std::string model;
  int64_t start_hour = 0;    // seconds since the epoch of the first hour
  std::vector<double> gpus;  // one per hour
};

struct ModelPlan {
  std::string model;
  int64_t history_start = 0;  // seconds, first hour
  int history_hours = 0;
  double peak_demand_gpus = 0;  // the highest hourly demand in the history
  double capacity_gpus = 0;
  bool capacity_from_history = false;
  int hours_over_capacity = 0;  // history hours whose demand exceeded the given capacity
  std::vector<double> daily_peak;        // of the forecast, one per day of the horizon
  std::vector<double> daily_peak_upper;  // of the interval's upper bound
  int64_t first_exceed_hour = -1;        // seconds: the first forecast hour above capacity; -1 none
  int64_t first_exceed_upper_hour = -1;  // the same for the upper bound
  int gpus_to_add = 0;                   // ceil(max upper bound - capacity), at least 0
  std::vector<std::string> methods;      // the forecaster's candidates averaged
  BacktestScores backtest;               // of the forecaster on this history
  int backtest_horizon_hours = 0, backtest_holdout_hours = 0;  // as used (0: history too short)
};

// Hourly demand per model (models in name order).
std::vector<ModelDemand> HourlyDemandByModel(const Ledger& ledger);

std::vector<ModelPlan> PlanCapacity(const Ledger& ledger, const CapacityPlanOptions& options);
// The same from hourly demand already summed per model (`tessera plan capacity --server` sums it
// from a live control plane's GET /v1/usage: daemon/usage_history.h); models with no hours are
// skipped.
std::vector<ModelPlan> PlanCapacity(const std::vector<ModelDemand>& demand, const CapacityPlanOptions& options);

}  // namespace tessera::metering
