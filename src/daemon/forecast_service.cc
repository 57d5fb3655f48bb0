#include "src/daemon/forecast_service.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <map>
#include <utility>

#include "tessera/metering/civil_time.h"

namespace tessera::daemon {

namespace {

constexpr int64_t kHour = metering::kSecondsPerHour;
constexpr double kMilliSecondsPerGpuHour = 3'600'000.0;

// "" -> the default; "48" -> 48; anything but a whole number of hours in range INVALID_ARGUMENT.
StatusOr<int> HorizonHours(const std::string& text) {
  if (text.empty()) return kDefaultHorizonHours;
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text[0] == '-' || text[0] == '+')
    return InvalidArgumentError("horizon: '" + text + "' is not a whole number of hours (e.g. 24)");
  if (v < 1 || v > kMaxHorizonHours)
    return InvalidArgumentError("horizon: " + text + " hours is out of range: give 1 to " +
                                std::to_string(kMaxHorizonHours) + " (90 days)");
  return v;
}

}  // namespace

ForecastService::ForecastService(const Clock& clock, ParentOf parents,
                                 std::function<StatusOr<UsageHours>(int64_t)> read_usage)
    : clock_(clock), parents_(std::move(parents)), read_usage_(std::move(read_usage)) {}

StatusOr<DemandForecast> ForecastService::Run(const ReadCaller& caller, const ForecastRequest& req) const {
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kReadUsage, req.tenant, "tenant '" + req.tenant + "'"));
  if (!req.tenant.empty() && !parents_(req.tenant)) return NotFoundError("tenant '" + req.tenant + "' not found");
  TESSERA_ASSIGN_OR_RETURN(const int horizon, HorizonHours(req.horizon));
  const bool tenant_role = caller.principal.role == Role::kTenantAdmin || caller.principal.role == Role::kTenantUser;
  const std::string root = !req.tenant.empty() ? req.tenant : tenant_role ? caller.principal.tenant : "";

  const int64_t now_hour = metering::HourOf(UnixMillis(clock_) / 1000) * kHour;  // the current hour: not over
  const int64_t from = now_hour - int64_t{kMaxHistoryHours} * kHour;
  TESSERA_ASSIGN_OR_RETURN(const UsageHours usage, read_usage_(from));
  std::map<int64_t, int64_t> by_hour;  // hour -> milli-GPU seconds allocated
  std::map<uint32_t, bool> in_view;    // source -> in the subtree (asked once per source)
  for (const metering::HourlyRecord& h : usage.records) {
    if (h.hour < from || h.hour >= now_hour || h.source >= usage.sources.size()) continue;
    auto [it, first] = in_view.try_emplace(h.source, true);
    if (first && !root.empty()) it->second = InSubtree(usage.sources[h.source].tenant, root, parents_);
    if (it->second) by_hour[h.hour] += h.gpu_milli_s_allocated;
  }

  DemandForecast out;
  out.tenant = req.tenant;
  out.start_s = now_hour;
  out.horizon_hours = horizon;
  out.history_start_s = by_hour.empty() ? now_hour : by_hour.begin()->first;
  out.history_hours = static_cast<int>((now_hour - out.history_start_s) / kHour);
  if (out.history_hours < kMinHistoryHours) {
    const std::string whose = !root.empty() ? "tenant '" + root + "'" : "the cluster";
    return FailedPreconditionError(
        whose + " has " + std::to_string(out.history_hours) + " hours of usage history (from its first usage record " +
        "to the start of the current hour); a forecast needs at least " + std::to_string(kMinHistoryHours) +
        " (3 days)" +
        (by_hour.empty() ? std::string()
                         : ": it can forecast from " + metering::FormatUtc(out.history_start_s +
                                                                              int64_t{kMinHistoryHours} * kHour)));
  }
  out.history.assign(static_cast<size_t>(out.history_hours), 0.0);
  for (const auto& [hour, milli_s] : by_hour)
    out.history[static_cast<size_t>((hour - out.history_start_s) / kHour)] =
        static_cast<double>(milli_s) / kMilliSecondsPerGpuHour;
  metering::ForecastOptions options;
  options.interval_level = out.level;
  out.forecast = metering::ForecastHourly(out.history, horizon, options);
  return out;
}

}  // namespace tessera::daemon
