// Demand forecasts: GET /v1/forecast?tenant=&horizon= is decode -> ForecastService::Run -> render
// (src/daemon/forecast_service.h has the series, its unit, the interval and who sees what). Too
// little history is 409 insufficient_history, a bad horizon 400 naming `horizon`.
#include <nlohmann/json.hpp>

#include "src/daemon/control_plane_impl.h"
#include "tessera/metering/civil_time.h"

namespace tessera::daemon {

using json = nlohmann::json;

StatusOr<UsageHours> ControlPlane::Impl::ReadUsageHours(int64_t from_hour_s) {
  UsageHours out;
  TESSERA_RETURN_IF_ERROR(usage_service->Read([&](const metering::Ledger& ledger) {
    out.sources = ledger.sources();
    for (const metering::HourlyRecord& h : ledger.Records())
      if (h.hour >= from_hour_s) out.records.push_back(h);
  }));
  return out;
}

HttpResponse ControlPlane::Impl::GetForecast(const HttpRequest& r, const Caller& c) {
  auto param = [&](const char* key) {
    auto it = r.query.find(key);
    return it == r.query.end() ? std::string() : it->second;
  };
  StatusOr<DemandForecast> f = forecast_service->Run(ReadCallerOf(c), {param("tenant"), param("horizon")});
  if (!f.ok()) {
    const std::string message(f.status().message());
    if (f.status().code() == StatusCode::kFailedPrecondition)
      return HttpResponse::Error(409, "insufficient_history", message);
    return ErrorResponse(f.status(), f.status().code() == StatusCode::kInvalidArgument ? "horizon" : "");
  }
  json hours = json::array();
  for (int h = 0; h < f->horizon_hours; ++h) {
    const int64_t at = f->start_s + int64_t{h} * metering::kSecondsPerHour;
    hours.push_back({{"hour", metering::FormatUtc(at)},
                     {"hour_s", at},
                     {"value", f->forecast.values[h]},
                     {"lower", f->forecast.lower[h]},
                     {"upper", f->forecast.upper[h]}});
  }
  json answer = {{"tenant", f->tenant.empty() ? json(nullptr) : json(f->tenant)},
                 {"unit", "gpu_hours_per_hour"},
                 {"level", f->level},
                 {"history_start", metering::FormatUtc(f->history_start_s)},
                 {"history_start_s", f->history_start_s},
                 {"history_hours", f->history_hours},
                 {"start", metering::FormatUtc(f->start_s)},
                 {"start_s", f->start_s},
                 {"horizon", f->horizon_hours},
                 {"methods", f->forecast.methods},
                 {"hours", hours}};
  return HttpResponse::Json(200, answer.dump());
}

}  // namespace tessera::daemon
