// Online anomaly detection and SLA observations inside `tessera serve` (docs/metering.md, "In the
// control plane"). HTTP-free: the control plane tells it what happened (usage samples it stored,
// workloads that started, submits it refused, preemptions) and, once per loop cycle, asks it to
// close the hours that are over; closing an hour scores one row per tenant and series with that
// series' metering::AnomalyDetector and gives back the anomalies found and the SLA observations
// of the hour, which the control plane persists (an `anomaly` event on the feed, a row of the
// store's sla_observations) and GET /v1/anomalies lists.
//
// Series (one detector per tenant and series, each fed one row per closed hour):
//   usage_gpu_seconds        GPU-seconds used in the hour (usage samples, by the hour of their
//                            start); a row only for hours with samples
//   usage_used_fraction      GPU-seconds used / GPU-seconds allocated in the hour; likewise
//   queue_wait_p99_s         p99 of the waits (submit -> start) of the workloads that started in
//                            the hour; a row only for hours with starts
//   refusals                 submits refused for quota or QoS in the hour (0 rows too)
//   preemptions              the tenant's workloads preempted in the hour (0 rows too)
// The count series have a row every hour for every tenant the control plane knows.
//
// SLA observation: for each tenant with Guaranteed workloads that started in the hour, the
// metric guaranteed_wait_p99_s = the nearest-rank p99 of their waits, in micro-seconds of a
// second (store::SlaObservationRecord). Example: 100 Guaranteed starts in 10:00-11:00, waits
// 1..100 s -> p99 = the 99th smallest = 99 s -> {tenant, "guaranteed_wait_p99_s", 10:00, 99'000'000}.
//
// An anomaly carries the expected range: the detector's forecast +- threshold_z robust scales
// (scale = |value - forecast| / z, the detector's own), clipped at 0. Example: forecast 3600
// GPU-seconds, value 36'000, z 40, threshold_z 10 -> scale 810, range 0..11'700 (3600 - 8100 < 0).
//
// Hours: an observation counts in the hour of its time; hours up to the one before `now` are
// closed by CloseHours, and an observation of an hour already closed is dropped (a late sample
// moves the ledger and the invoices, not the detector). At most kMaxCatchUpHours are closed at
// once (a control plane that was stopped for a week does not score a week of empty hours).
//
// A restart (Warm, once, before the first CloseHours): the usage series (usage_gpu_seconds,
// usage_used_fraction) of each tenant are rebuilt from the metering ledger's hourly records (the
// store's usage samples, split at hour boundaries as the ledger splits them). Of the last
// kMaxReplayHours closed hours, those before the catch-up window (the last kMaxCatchUpHours closed
// hours) are fed to the detectors without a verdict (warm-up); those inside it are scored as
// CloseHours scores them, so a spike in an hour that closed while serve was down is flagged at
// start. No hour is flagged twice: an hour at or before the newest hour of a persisted `anomaly`
// event of the tenant (`flagged_until`, read from the store's events) is fed without a verdict,
// so every hour a previous run flagged is skipped. An hour a previous run scored without a flag
// may be flagged now (this run's detector has seen more history): that is its first flag. The
// count series (refusals, preemptions, queue_wait_p99_s) start over with the current hour (their
// observations are not stored), and GET /v1/anomalies lists the flags of this run only (the
// earlier ones stay on the event feed).
//   Example (kMaxCatchUpHours 168, kMaxReplayHours 720, now 2026-11-10T12:30Z, vision has usage
//   rows for the 200 hours before 12:00, 36'000 GPU-seconds in 11:00-12:00 against ~3600 before,
//   no persisted anomaly): hours 2026-11-02T04:00 .. 11-03T11:00 (32 rows) are warm-up, the 168
//   hours from 11-03T12:00 are scored (row 33 on: the detector's verdicts begin after its
//   warmup_rows) and 11:00 is flagged -> one `anomaly` event. Restarted again at 13:10 with the
//   event persisted: flagged_until[vision] = 11:00, every hour up to 11:00 is warm-up, nothing is
//   flagged twice.
// Bounds: at most kMaxReplayHours rows per tenant and usage series are replayed (1,000 tenants:
// 1.44 M detector steps at start); the detectors' memory is as below.
//
// Memory: a detector's windows hold at most a few thousand doubles (~60 KB once full, after about
// 1,500 hours), so 1,000 tenants x 5 series are about 300 MB after two months; the anomaly list
// keeps the newest kMaxAnomalies.
//
// What a caller may see (List, GET /v1/anomalies): the flags of tenants in its view, as GET
// /v1/usage: an admin or viewer every tenant's (or tenant=T's subtree), a tenant token its
// subtree's (or tenant=T inside it). Errors: NOT_FOUND "tenant 'x' not found" (unknown, or
// another subtree's), PERMISSION_DENIED (the caller's check, Action::kReadUsage), INVALID_ARGUMENT
// naming the field ("from: ...", "to: ...", "from: must be before to").
//
// Worked example (vision under acme, other a root; vision's usage spiked in the hour from
// 2026-11-02T16:00Z and the hour closed):
//   List(admin, {})                                     -> [vision usage_gpu_seconds 16:00]
//   List(acme's tenant-admin, {.tenant = "vision"})     -> the same
//   List(other's tenant-user, {})                       -> []
//   List(other's tenant-user, {.tenant = "vision"})     -> NOT_FOUND "tenant 'vision' not found"
//   List(admin, {.to = "2026-11-02T16:00:00Z"})         -> [] (the hour does not overlap [from, to))
//   List(admin, {.from = "yesterday"})                  -> INVALID_ARGUMENT "from: ..."
//
// Thread-safety: every method may be called from any thread (one internal lock, never held while
// calling out; List calls the caller's check and the parent map without it). Ownership: the
// control plane owns it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/daemon/authz.h"
#include "tessera/core/status.h"
#include "tessera/metering/anomaly.h"
#include "tessera/metering/ledger_file.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

using metering::kSlaGuaranteedWaitP99;

struct AnomalyRecord {
  int64_t id = 0;  // 1, 2, ... in the order found since the control plane started
  std::string tenant;
  std::string series;
  int64_t hour_s = 0;  // the hour scored (its start, seconds since the epoch)
  double value = 0;
  double expected = 0;
  double low = 0;   // the expected range
  double high = 0;
  double score = 0;  // the detector's, in [0, 1)
  std::string reason;  // in words, e.g. "GPU-seconds used 36000 in the hour, expected about 3600 (0 to 11700)"
};

// GET /v1/anomalies, its query: times as GET /v1/usage takes them (unix seconds or RFC 3339);
// "" for none.
struct AnomalyListRequest {
  std::string tenant;  // "": the caller's view
  std::string from;    // flags of hours that end after it
  std::string to;      // flags of hours that start before it
};

struct AnomalyList {
  std::vector<AnomalyRecord> anomalies;  // oldest first
  std::optional<int64_t> from_s;         // the window as decoded (seconds since the epoch)
  std::optional<int64_t> to_s;
};

// One tenant's usage in one closed hour (the ledger's hourly records, summed over its sources).
struct UsageHour {
  std::string tenant;
  int64_t hour_s = 0;  // the hour's start
  int64_t allocated_milli_s = 0;
  int64_t used_milli_s = 0;
};

struct ClosedHours {
  std::vector<AnomalyRecord> anomalies;
  std::vector<store::SlaObservationRecord> sla;
};

class AnomalyService {
 public:
  static constexpr int kMaxCatchUpHours = 168;
  static constexpr size_t kMaxAnomalies = 10'000;
  static constexpr int kMaxReplayHours = 720;  // Warm's history per tenant (30 days)

  // `now_s`: the control plane's clock at start (the hours before its hour are closed already);
  // `parents`: the tenants' parent links (List's subtree filter and its unknown tenants).
  AnomalyService(metering::AnomalyOptions options, int64_t now_s, ParentOf parents);

  void ObserveUsage(const std::string& tenant, int64_t start_s, int64_t allocated_milli_s, int64_t used_milli_s);
  void ObserveStart(const std::string& tenant, bool guaranteed, int64_t now_s, double wait_s);
  void ObserveRefusal(const std::string& tenant, int64_t now_s);
  void ObservePreemption(const std::string& tenant, int64_t now_s);

  // Closes every open hour before the hour of now_s, scoring `tenants` (and any tenant observed)
  // in each; what it found is also kept for List.
  ClosedHours CloseHours(int64_t now_s, const std::vector<std::string>& tenants);

  // At start, before the first CloseHours (see "A restart" above): replays `hours` (any order;
  // rows of the same tenant and hour are summed; hours outside the last kMaxReplayHours closed
  // ones are ignored) into the usage detectors, scoring the catch-up window's hours of each tenant
  // after its flagged_until hour (absent: none). What it found is kept for List and returned.
  ClosedHours Warm(const std::vector<UsageHour>& hours, const std::map<std::string, int64_t>& flagged_until);

  // The anomalies kept that the caller may see (see above), of hours overlapping [from, to).
  StatusOr<AnomalyList> List(const ReadCaller& caller, const AnomalyListRequest& request) const;

 private:
  struct HourTotals {
    int64_t allocated_milli_s = 0;
    int64_t used_milli_s = 0;
    bool usage = false;
    std::vector<double> waits_s;
    std::vector<double> guaranteed_waits_s;
    int64_t refusals = 0;
    int64_t preemptions = 0;
  };
  HourTotals* Open(const std::string& tenant, int64_t time_s);  // nullptr: an hour already closed
  // out nullptr: the detector learns the row, no verdict is kept (Warm's warm-up).
  void Score(const std::string& tenant, std::string_view series, int64_t hour_s, double value, ClosedHours* out);
  void ScoreUsage(const std::string& tenant, int64_t hour_s, int64_t allocated_milli_s, int64_t used_milli_s,
                  ClosedHours* out);
  void Keep(ClosedHours* out);  // numbers out's anomalies and keeps them for List; mu_ held

  metering::AnomalyOptions options_;
  const ParentOf parents_;
  mutable std::mutex mu_;
  int64_t closed_until_s_;  // hours starting before this are closed
  std::map<std::pair<int64_t, std::string>, HourTotals> open_;  // (hour, tenant) -> totals
  std::map<std::pair<std::string, std::string>, metering::AnomalyDetector> detectors_;  // (tenant, series)
  std::deque<AnomalyRecord> found_;
  int64_t next_id_ = 1;
};

// The hour an `anomaly` event's detail names ("<series>: <reason>", the reason saying "in the
// hour from 2026-11-02T16:00:00Z"): its start in seconds; nullopt when it names none.
std::optional<int64_t> AnomalyEventHour(std::string_view detail);

// The nearest-rank quantile q (0 < q <= 1) of `values` (not empty): the ceil(q * n)-th smallest.
double NearestRankQuantile(std::vector<double> values, double q);

// The month observations of `hourly` (the store's rows) as the invoice run takes them: per tenant,
// metric and calendar month (UTC) the worst hour's value (the largest). Example: hours of vision
// in 2026-11 with 2 s, 420 s and 3 s -> {vision, "2026-11", guaranteed_wait_p99_s, 420'000'000}.
std::vector<metering::SlaObservation> MonthlySlaObservations(const std::vector<store::SlaObservationRecord>& hourly);

}  // namespace tessera::daemon
