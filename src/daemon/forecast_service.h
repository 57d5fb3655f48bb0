// Demand forecasts without HTTP: GET /v1/forecast?tenant=&horizon= (control_plane_forecast.cc:
// decode -> ForecastService::Run -> render) forecasts a tenant's hourly GPU demand from the usage
// the control plane's metering ledger holds, with the forecaster of `tessera forecast` and
// `tessera plan capacity` (metering::ForecastHourly). tests/daemon/forecast_service_test.cc drives
// it directly.
//
// The series: demand in an hour = the GPU-milli-seconds allocated to the tenant's subtree in the
// hour (every usage record whose tenant is the tenant or under it) / 3'600'000, in GPU-hours per
// hour (= GPUs held on average in the hour; half a GPU held all hour counts 0.5). It runs from the
// subtree's first record (at most kMaxHistoryHours back) to the hour before the current one (the
// current hour is not over); hours without a record count 0. The forecast covers the `horizon`
// hours from the start of the current hour, each with ForecastHourly's prediction interval at
// kForecastLevel (two-sided 90 %: the 0.9 quantile of the combined forecast's absolute errors on
// the history's own last days, widened by sqrt(lead / holdout) up to one week ahead; never
// negative).
//
// What a caller may see, as GET /v1/usage: an admin or viewer any tenant's demand (no tenant: the
// whole cluster's), a tenant token its subtree's (no tenant: its own subtree). The caller's check
// is Action::kReadUsage.
//
// Errors (each names its query parameter): INVALID_ARGUMENT "horizon: ..." (not a whole number of
// hours in 1..kMaxHorizonHours); NOT_FOUND "tenant 'x' not found" (unknown, or another
// subtree's); PERMISSION_DENIED (the caller's check); FAILED_PRECONDITION when the history is
// shorter than kMinHistoryHours (the message says how much there is and how much is needed; the
// API's 409 insufficient_history).
//
// Worked example (vision under acme, other a root; vision held 2 GPUs every hour from
// 2026-11-01T00:00Z; the clock is 2026-11-05T00:10Z, so 96 hours of history):
//   Run(admin, {.tenant = "vision", .horizon = "24"})    -> start 2026-11-05T00:00Z, 24 values of
//                                                            2 GPU-hours per hour, interval 2..2
//   Run(acme's tenant-user, {})                          -> the same series (acme's subtree)
//   Run(other's tenant-user, {.tenant = "vision"})       -> NOT_FOUND "tenant 'vision' not found"
//   Run(admin, {.tenant = "vision", .horizon = "3d"})    -> INVALID_ARGUMENT "horizon: ..."
//   Run(admin, {.tenant = "other"})                      -> FAILED_PRECONDITION "... 0 hours ..."
//
// Thread-safety: all methods may be called from any thread (no state of its own; the ledger is
// read through `read_usage`, under UsageService's lock).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "src/daemon/authz.h"
#include "tessera/core/clock.h"
#include "tessera/core/status.h"
#include "tessera/metering/forecast.h"
#include "tessera/metering/ledger.h"

namespace tessera::daemon {

inline constexpr int kDefaultHorizonHours = 24;
inline constexpr int kMaxHorizonHours = 2160;    // 90 days, `tessera plan capacity`'s default horizon
inline constexpr int kMinHistoryHours = 72;      // 3 days: the forecaster's holdout needs 2 days + a window
inline constexpr int kMaxHistoryHours = 8 * 168;  // 8 weeks: the forecaster looks back 4 weeks at most
inline constexpr double kForecastLevel = 0.9;

// GET /v1/forecast, its query as given (the service decodes and checks it).
struct ForecastRequest {
  std::string tenant;   // "": the caller's view (the whole cluster for an admin or viewer)
  std::string horizon;  // hours, "1".."2160"; "": kDefaultHorizonHours
};

// The ledger's records from an hour on (copied under its lock).
struct UsageHours {
  std::vector<metering::SourceKey> sources;
  std::vector<metering::HourlyRecord> records;
};

struct DemandForecast {
  std::string tenant;          // as asked ("": the caller's whole view)
  int64_t history_start_s = 0;  // the first hour of the history
  int history_hours = 0;
  std::vector<double> history;  // GPU-hours per hour, one per history hour
  int64_t start_s = 0;          // the first forecast hour (the current hour)
  int horizon_hours = 0;
  double level = kForecastLevel;
  metering::Forecast forecast;  // values, lower, upper (GPU-hours per hour), methods
};

class ForecastService {
 public:
  ForecastService(const Clock& clock, ParentOf parents,
                  std::function<StatusOr<UsageHours>(int64_t from_hour_s)> read_usage);

  StatusOr<DemandForecast> Run(const ReadCaller& caller, const ForecastRequest& request) const;

 private:
  const Clock& clock_;  // outlives the service
  const ParentOf parents_;
  const std::function<StatusOr<UsageHours>(int64_t)> read_usage_;
};

}  // namespace tessera::daemon
