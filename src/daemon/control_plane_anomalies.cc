// Anomalies and SLA observations in the control plane (src/daemon/anomaly_service.h has the
// series, the hours, the SLA metric and who sees what): GET /v1/anomalies?tenant=&from=&to= is
// decode -> AnomalyService::List -> render, what the detector flagged since the control plane
// started (tenant-scoped like GET /v1/usage); each flag is also an `anomaly` event of its
// tenant on GET /v1/events and counts in tessera_anomalies_total. The loop closes the hours that
// are over (CloseAnomalyHours) and stores each Guaranteed tenant's guaranteed_wait_p99_s per hour;
// GET /v1/invoices bills with the month's worst hour (SlaObservationsOf), so the price plan's
// sla_credits rules apply.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/daemon/control_plane_impl.h"
#include "tessera/metering/civil_time.h"

namespace tessera::daemon {

using json = nlohmann::json;

Status ControlPlane::Impl::InitAnomalyMetrics() {
  TESSERA_ASSIGN_OR_RETURN(m.anomalies,
                           registry.AddCounter("tessera_anomalies_total",
                                               "Hours the anomaly detector flagged, by tenant and series.",
                                               {"tenant", "series"}));
  TESSERA_ASSIGN_OR_RETURN(m.sla_wait_p99,
                           registry.AddGauge("tessera_tenant_guaranteed_wait_p99_seconds",
                                             "The last closed hour's p99 wait of a tenant's Guaranteed workloads "
                                             "(its SLA observation).",
                                             {"tenant"}));
  return Status::Ok();
}

Status ControlPlane::Impl::CloseAnomalyHours(int64_t cycle_ms) {
  std::vector<std::string> names;
  for (const auto& [name, t] : tenant_service->tenants_locked()) names.push_back(name);
  return PersistClosedHours(anomaly_service->CloseHours(cycle_ms / 1000, names), cycle_ms);
}

Status ControlPlane::Impl::PersistClosedHours(const ClosedHours& closed, int64_t event_ms) {
  if (closed.anomalies.empty() && closed.sla.empty()) return Status::Ok();
  Status st = Transact("anomalies", [&](store::Transaction& tx) -> Status {
    for (const store::SlaObservationRecord& o : closed.sla) TESSERA_RETURN_IF_ERROR(tx.PutSlaObservation(o));
    for (const AnomalyRecord& a : closed.anomalies)
      TESSERA_RETURN_IF_ERROR(
          tx.AppendObjectEvent({"tenant", a.tenant, a.tenant, event_ms, "anomaly", a.series + ": " + a.reason}).status());
    return Status::Ok();
  });
  for (const AnomalyRecord& a : closed.anomalies) m.anomalies->Inc({a.tenant, a.series});
  for (const store::SlaObservationRecord& o : closed.sla)
    m.sla_wait_p99->Set({o.tenant}, static_cast<double>(o.value_micro) / 1e6);
  return st;
}

StatusOr<std::map<std::string, int64_t>> ControlPlane::Impl::FlaggedUntil(int64_t since_ms) {
  constexpr int kPage = 1000;
  std::map<std::string, int64_t> out;
  TESSERA_RETURN_IF_ERROR(Transact("read", [&](store::Transaction& tx) -> Status {
    out.clear();
    // The first event appended at or after since_ms, by bisection over the ids (which follow the
    // append time; on PostgreSQL roughly: the caller's since_ms keeps an hour's margin).
    TESSERA_ASSIGN_OR_RETURN(const int64_t last, tx.LastWorkloadEventId());
    int64_t lo = 0, hi = last;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      TESSERA_ASSIGN_OR_RETURN(const std::vector<store::TenantWorkloadEvent> one, tx.ListEventsAfter(mid, 1));
      if (one.empty() || one.front().event.time_ms >= since_ms) hi = mid;
      else lo = mid + 1;
    }
    for (int64_t cursor = lo;;) {
      TESSERA_ASSIGN_OR_RETURN(const std::vector<store::TenantWorkloadEvent> page, tx.ListEventsAfter(cursor, kPage));
      for (const store::TenantWorkloadEvent& e : page) {
        if (e.subject != "tenant" || e.event.kind != "anomaly") continue;
        if (const std::optional<int64_t> hour = AnomalyEventHour(e.event.detail)) {
          auto [it, first] = out.try_emplace(e.name, *hour);
          if (!first) it->second = std::max(it->second, *hour);
        }
      }
      if (page.size() < static_cast<size_t>(kPage)) break;
      cursor = page.back().event.id;
    }
    return Status::Ok();
  }));
  return out;
}

Status ControlPlane::Impl::WarmAnomalyDetectors() {
  const int64_t now_ms = NowMs();
  const int64_t until = now_ms / 1000 / metering::kSecondsPerHour * metering::kSecondsPerHour;
  const int64_t first = until - int64_t{AnomalyService::kMaxReplayHours} * metering::kSecondsPerHour;
  std::vector<UsageHour> hours;
  usage_service->Peek([&](const metering::Ledger& ledger) {
    const std::vector<metering::SourceKey>& sources = ledger.sources();
    for (const metering::HourlyRecord& h : ledger.Records())
      if (h.hour >= first && h.hour < until)
        hours.push_back({sources[h.source].tenant, h.hour, h.gpu_milli_s_allocated, h.gpu_milli_s_used});
  });
  // Flags of the catch-up window's hours were appended after their hour closed.
  const int64_t catch_up = until - int64_t{AnomalyService::kMaxCatchUpHours} * metering::kSecondsPerHour;
  TESSERA_ASSIGN_OR_RETURN(const auto flagged_until, FlaggedUntil((catch_up - metering::kSecondsPerHour) * 1000));
  return PersistClosedHours(anomaly_service->Warm(hours, flagged_until), now_ms);
}

StatusOr<std::vector<metering::SlaObservation>> ControlPlane::Impl::SlaObservationsOf(const metering::Period& period) {
  std::vector<store::SlaObservationRecord> hourly;
  TESSERA_RETURN_IF_ERROR(Transact("read", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(hourly, tx.ListSlaObservations(period.start, period.end));
    return Status::Ok();
  }));
  std::vector<metering::SlaObservation> monthly = MonthlySlaObservations(hourly);
  for (metering::SlaObservation& o : monthly) o.period = period.name;
  return monthly;
}

HttpResponse ControlPlane::Impl::GetAnomalies(const HttpRequest& r, const Caller& c) {
  auto param = [&](const char* key) {
    auto it = r.query.find(key);
    return it == r.query.end() ? std::string() : it->second;
  };
  StatusOr<AnomalyList> found =
      anomaly_service->List(ReadCallerOf(c), {param("tenant"), param("from"), param("to")});
  if (!found.ok()) {
    const std::string_view message = found.status().message();
    const bool bad_time = found.status().code() == StatusCode::kInvalidArgument;
    return ErrorResponse(found.status(), !bad_time ? "" : message.starts_with("to:") ? "to" : "from");
  }
  json list = json::array();
  for (const AnomalyRecord& a : found->anomalies) {
    list.push_back({{"id", a.id},
                    {"tenant", a.tenant},
                    {"series", a.series},
                    {"hour", metering::FormatUtc(a.hour_s)},
                    {"hour_s", a.hour_s},
                    {"value", a.value},
                    {"expected", a.expected},
                    {"expected_low", a.low},
                    {"expected_high", a.high},
                    {"score", a.score},
                    {"reason", a.reason}});
  }
  json answer = {{"anomalies", list}};
  if (found->from_s) answer["from"] = *found->from_s;
  if (found->to_s) answer["to"] = *found->to_s;
  return HttpResponse::Json(200, answer.dump());
}

}  // namespace tessera::daemon
