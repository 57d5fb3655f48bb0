// The control plane's online anomaly detection and SLA observations (anomaly_service.h).
#include "src/daemon/anomaly_service.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "src/daemon/usage_codec.h"
#include "tessera/metering/civil_time.h"

namespace tessera::daemon {

namespace {

using metering::kSecondsPerHour;

int64_t HourStart(int64_t time_s) { return metering::HourOf(time_s) * kSecondsPerHour; }

// 36000 -> "36000", 0.25 -> "0.25", 12.3456 -> "12.35".
std::string Number(double v) {
  char buf[64];
  if (std::abs(v) >= 100 || v == std::floor(v)) std::snprintf(buf, sizeof buf, "%.0f", v);
  else std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// What a series' value is, in words (the reason's subject).
std::string Subject(std::string_view series) {
  if (series == "usage_gpu_seconds") return "GPU-seconds used";
  if (series == "usage_used_fraction") return "used fraction of the allocated GPU time";
  if (series == "queue_wait_p99_s") return "p99 queue wait (s)";
  if (series == "refusals") return "refused submits";
  if (series == "preemptions") return "preemptions";
  return std::string(series);
}

}  // namespace

double NearestRankQuantile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(q * static_cast<double>(values.size()));
  const size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return values[std::min(i, values.size() - 1)];
}

std::vector<metering::SlaObservation> MonthlySlaObservations(const std::vector<store::SlaObservationRecord>& hourly) {
  std::map<std::tuple<std::string, std::string, std::string>, metering::Micro> worst;  // (tenant, month, metric)
  for (const store::SlaObservationRecord& o : hourly) {
    const auto key = std::make_tuple(o.tenant, metering::MonthOf(o.hour_s).name, o.metric);
    auto [it, first] = worst.try_emplace(key, o.value_micro);
    if (!first) it->second = std::max(it->second, o.value_micro);
  }
  std::vector<metering::SlaObservation> out;
  for (const auto& [key, value] : worst)
    out.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key), value});
  return out;
}

AnomalyService::AnomalyService(metering::AnomalyOptions options, int64_t now_s, ParentOf parents)
    : options_(options), parents_(std::move(parents)), closed_until_s_(HourStart(now_s)) {}

StatusOr<AnomalyList> AnomalyService::List(const ReadCaller& caller, const AnomalyListRequest& req) const {
  const std::string what = "tenant '" + req.tenant + "'";
  TESSERA_RETURN_IF_ERROR(caller.check(Action::kReadUsage, req.tenant, what));
  if (!req.tenant.empty() && !parents_(req.tenant)) return NotFoundError(what + " not found");
  AnomalyList out;
  if (!req.from.empty()) {
    TESSERA_ASSIGN_OR_RETURN(out.from_s, ParseUsageTime(req.from, "from"));
  }
  if (!req.to.empty()) {
    TESSERA_ASSIGN_OR_RETURN(out.to_s, ParseUsageTime(req.to, "to"));
  }
  if (out.from_s && out.to_s && *out.from_s >= *out.to_s) return InvalidArgumentError("from: must be before to");
  const std::string root =
      !req.tenant.empty() ? req.tenant : SeesAllTenants(caller.principal) ? "" : caller.principal.tenant;
  // An hour counts when it overlaps [from, to), as in GET /v1/usage.
  const int64_t first_hour = out.from_s ? *out.from_s - (kSecondsPerHour - 1) : INT64_MIN;
  const int64_t to = out.to_s.value_or(INT64_MAX);
  std::vector<AnomalyRecord> kept;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const AnomalyRecord& a : found_)
      if (a.hour_s >= first_hour && a.hour_s < to) kept.push_back(a);
  }
  for (AnomalyRecord& a : kept)
    if (root.empty() || InSubtree(a.tenant, root, parents_)) out.anomalies.push_back(std::move(a));
  return out;
}

AnomalyService::HourTotals* AnomalyService::Open(const std::string& tenant, int64_t time_s) {
  const int64_t hour = HourStart(time_s);
  if (hour < closed_until_s_) return nullptr;
  return &open_[{hour, tenant}];
}

void AnomalyService::ObserveUsage(const std::string& tenant, int64_t start_s, int64_t allocated_milli_s,
                                  int64_t used_milli_s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (HourTotals* h = Open(tenant, start_s)) {
    h->usage = true;
    h->allocated_milli_s += allocated_milli_s;
    h->used_milli_s += used_milli_s;
  }
}

void AnomalyService::ObserveStart(const std::string& tenant, bool guaranteed, int64_t now_s, double wait_s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (HourTotals* h = Open(tenant, now_s)) {
    h->waits_s.push_back(wait_s);
    if (guaranteed) h->guaranteed_waits_s.push_back(wait_s);
  }
}

void AnomalyService::ObserveRefusal(const std::string& tenant, int64_t now_s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (HourTotals* h = Open(tenant, now_s)) ++h->refusals;
}

void AnomalyService::ObservePreemption(const std::string& tenant, int64_t now_s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (HourTotals* h = Open(tenant, now_s)) ++h->preemptions;
}

void AnomalyService::Score(const std::string& tenant, std::string_view series, int64_t hour_s, double value,
                           ClosedHours* out) {
  auto it = detectors_.try_emplace({tenant, std::string(series)}, options_).first;
  const metering::AnomalyVerdict v = it->second.Step(hour_s, value);
  if (!v.flagged || out == nullptr) return;
  AnomalyRecord a;
  a.tenant = tenant;
  a.series = std::string(series);
  a.hour_s = hour_s;
  a.value = value;
  a.expected = v.expected;
  const double scale = v.z > 0 && std::isfinite(v.z) ? std::abs(value - v.expected) / v.z : 0;
  a.low = std::max(0.0, v.expected - options_.threshold_z * scale);
  a.high = v.expected + options_.threshold_z * scale;
  a.score = v.score;
  a.reason = Subject(series) + " " + Number(value) + " in the hour from " + metering::FormatUtc(hour_s) +
             ", expected about " + Number(v.expected) + " (" + Number(a.low) + " to " + Number(a.high) + ")";
  if (options_.context_threshold > 0 && v.novelty >= options_.context_threshold) {
    a.reason += ": a pattern of hours not seen before";  // the contextual novelty (anomaly.h, step 6)
  } else if (value >= a.low && value <= a.high) {
    a.reason += ": a run of unusual hours, not this one alone";
  }
  out->anomalies.push_back(std::move(a));
}

ClosedHours AnomalyService::CloseHours(int64_t now_s, const std::vector<std::string>& tenants) {
  std::lock_guard<std::mutex> lock(mu_);
  ClosedHours out;
  const int64_t until = HourStart(now_s);
  if (until <= closed_until_s_) return out;
  const int64_t first = std::max(closed_until_s_, until - kMaxCatchUpHours * kSecondsPerHour);
  for (int64_t hour = first; hour < until; hour += kSecondsPerHour) {
    std::set<std::string> who(tenants.begin(), tenants.end());
    for (auto it = open_.lower_bound({hour, ""}); it != open_.end() && it->first.first == hour; ++it)
      who.insert(it->first.second);
    for (const std::string& tenant : who) {
      auto it = open_.find({hour, tenant});
      const HourTotals h = it == open_.end() ? HourTotals{} : it->second;
      if (h.usage) ScoreUsage(tenant, hour, h.allocated_milli_s, h.used_milli_s, &out);
      if (!h.waits_s.empty()) Score(tenant, "queue_wait_p99_s", hour, NearestRankQuantile(h.waits_s, 0.99), &out);
      Score(tenant, "refusals", hour, static_cast<double>(h.refusals), &out);
      Score(tenant, "preemptions", hour, static_cast<double>(h.preemptions), &out);
      if (!h.guaranteed_waits_s.empty()) {
        const double p99 = NearestRankQuantile(h.guaranteed_waits_s, 0.99);
        out.sla.push_back({tenant, std::string(kSlaGuaranteedWaitP99), hour, std::llround(p99 * 1e6)});
      }
    }
  }
  open_.erase(open_.begin(), open_.lower_bound({until, ""}));
  closed_until_s_ = until;
  Keep(&out);
  return out;
}

void AnomalyService::Keep(ClosedHours* out) {
  for (AnomalyRecord& a : out->anomalies) {
    a.id = next_id_++;
    found_.push_back(a);
    if (found_.size() > kMaxAnomalies) found_.pop_front();
  }
}

void AnomalyService::ScoreUsage(const std::string& tenant, int64_t hour_s, int64_t allocated_milli_s,
                                int64_t used_milli_s, ClosedHours* out) {
  Score(tenant, "usage_gpu_seconds", hour_s, static_cast<double>(used_milli_s) / 1000.0, out);
  if (allocated_milli_s > 0)
    Score(tenant, "usage_used_fraction", hour_s,
          static_cast<double>(used_milli_s) / static_cast<double>(allocated_milli_s), out);
}

ClosedHours AnomalyService::Warm(const std::vector<UsageHour>& hours,
                                 const std::map<std::string, int64_t>& flagged_until) {
  std::lock_guard<std::mutex> lock(mu_);
  ClosedHours out;
  const int64_t until = closed_until_s_;
  const int64_t first = until - int64_t{kMaxReplayHours} * kSecondsPerHour;
  const int64_t catch_up = until - int64_t{kMaxCatchUpHours} * kSecondsPerHour;
  std::map<std::pair<std::string, int64_t>, std::pair<int64_t, int64_t>> sum;  // (tenant, hour) -> (alloc, used)
  for (const UsageHour& h : hours) {
    const int64_t hour = HourStart(h.hour_s);
    if (hour < first || hour >= until) continue;
    auto& q = sum[{h.tenant, hour}];
    q.first += h.allocated_milli_s;
    q.second += h.used_milli_s;
  }
  for (const auto& [key, q] : sum) {  // each tenant's hours in order
    const auto& [tenant, hour] = key;
    const auto f = flagged_until.find(tenant);
    const bool scored = hour >= catch_up && (f == flagged_until.end() || hour > f->second);
    ScoreUsage(tenant, hour, q.first, q.second, scored ? &out : nullptr);
  }
  std::stable_sort(out.anomalies.begin(), out.anomalies.end(),
                   [](const AnomalyRecord& a, const AnomalyRecord& b) { return a.hour_s < b.hour_s; });
  Keep(&out);
  return out;
}

std::optional<int64_t> AnomalyEventHour(std::string_view detail) {
  constexpr std::string_view kFrom = " in the hour from ";
  const size_t at = detail.find(kFrom);
  if (at == std::string_view::npos) return std::nullopt;
  StatusOr<int64_t> t = metering::ParseUtc(detail.substr(at + kFrom.size(), 20));  // "2026-11-02T16:00:00Z"
  if (!t.ok()) return std::nullopt;
  return *t;
}

}  // namespace tessera::daemon
