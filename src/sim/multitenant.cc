#include "tessera/sim/multitenant.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <queue>
#include <set>
#include <sstream>

#include "tessera/core/rng.h"
#include "tessera/sim/csv.h"

namespace tessera::sim {

using placement::NodeSpec;
using sched::Job;
using sched::QosClass;
using sched::Scheduler;
using sched::Seconds;
using sched::TenantIndex;
using sched::TenantTree;

namespace {

StatusOr<int64_t> OptionalTime(const CsvTable& t, const CsvRow& row, size_t col) {
  const std::string& f = row.fields[col];
  if (f.empty()) return int64_t{-1};
  int64_t v = 0;
  for (char c : f) {
    if (c < '0' || c > '9' || v > (int64_t{1} << 40))
      return InvalidArgumentError(t.Where(row, col) + ": " + t.header[col] +
                                  ": expected seconds (a non-negative integer), got '" + f + "'");
    v = v * 10 + (c - '0');
  }
  return v;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

// Buckets of the smallest waiting job (GPU milli over all pods) for the Jain-loss breakdown.
constexpr int kJainLossBuckets = 5;
constexpr const char* kJainLossBucketNames[kJainLossBuckets] = {"0-0.9 GPUs", "1-1.9 GPUs", "2-3.9 GPUs",
                                                                 "4-7.9 GPUs", "8+ GPUs"};
int JainLossBucket(int64_t gpu_milli) {
  if (gpu_milli < 1000) return 0;
  if (gpu_milli < 2000) return 1;
  if (gpu_milli < 4000) return 2;
  if (gpu_milli < 8000) return 3;
  return 4;
}

std::string ShortNumber(double v) {  // 1e+06 -> "1e+06", 1 -> "1"
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// ParseAppArrivals / ReadAppArrivals once the CSV layer has read the table.
StatusOr<std::vector<std::vector<double>>> AppArrivalsFromTable(const CsvTable& t) {
  const std::string where = t.path + ":1:1: ";
  std::array<size_t, 3> col{};
  const std::array<const char*, 3> names = {"rank", "day", "gpus_created"};
  for (size_t i = 0; i < names.size(); ++i) {
    auto c = t.ColumnIndex(names[i]);
    if (!c) return InvalidArgumentError(where + "missing column '" + names[i] + "'");
    col[i] = *c;
  }
  std::map<std::pair<int64_t, int64_t>, double> cells;
  int64_t ranks = 0, days = 0;
  for (const CsvRow& row : t.rows) {
    std::array<double, 3> v{};
    for (size_t i = 0; i < col.size(); ++i) {
      const std::string& f = row.fields[col[i]];
      char* end = nullptr;
      v[i] = std::strtod(f.c_str(), &end);
      const bool integral = i < 2;
      const double lo = i == 0 ? 1 : 0, hi = integral ? 1e6 : 1e12;
      if (end == f.c_str() || *end != '\0' || !(v[i] >= lo && v[i] <= hi) || (integral && v[i] != std::floor(v[i])))
        return InvalidArgumentError(t.Where(row, col[i]) + ": " + names[i] + ": expected " +
                                    (integral ? "an integer in [" : "a number in [") + ShortNumber(lo) + ", " + ShortNumber(hi) + "]");
    }
    const auto key = std::make_pair(static_cast<int64_t>(v[0]), static_cast<int64_t>(v[1]));
    if (!cells.emplace(key, v[2]).second)
      return InvalidArgumentError(t.Where(row, col[0]) + ": rank " + std::to_string(key.first) + " day " +
                                  std::to_string(key.second) + " appears twice");
    ranks = std::max(ranks, key.first);
    days = std::max(days, key.second + 1);
  }
  if (cells.empty()) return InvalidArgumentError(where + "no rows");
  const auto n = static_cast<int64_t>(cells.size());
  if (ranks > n || days > n || ranks * days != n)  // ranks, days <= n: the product fits
    return InvalidArgumentError(where + "expected every rank 1.." + std::to_string(ranks) + " on every day 0.." +
                                std::to_string(days - 1) + ", got " + std::to_string(n) + " rows");
  std::vector<std::vector<double>> out(static_cast<size_t>(ranks), std::vector<double>(static_cast<size_t>(days)));
  for (const auto& [key, gpus] : cells) out[static_cast<size_t>(key.first - 1)][static_cast<size_t>(key.second)] = gpus;
  return out;
}

}  // namespace

StatusOr<std::vector<TimedPod>> ReadTimedPods(const std::string& path, const GpuModelCatalog& catalog) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read pod list '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  TESSERA_ASSIGN_OR_RETURN(std::vector<PodRecord> pods, ParsePodList(text, path, catalog));
  TESSERA_ASSIGN_OR_RETURN(CsvTable table, ParseCsv(text, path));
  std::vector<size_t> cols;
  for (const char* name : {"creation_time", "scheduled_time", "deletion_time", "qos"}) {
    auto c = table.ColumnIndex(name);
    if (!c) return InvalidArgumentError(path + ":1:1: missing column '" + name + "'");
    cols.push_back(*c);
  }
  std::vector<TimedPod> out;
  out.reserve(pods.size());
  for (size_t i = 0; i < pods.size(); ++i) {
    const CsvRow& row = table.rows[i];
    TimedPod p;
    p.pod = std::move(pods[i]);
    TESSERA_ASSIGN_OR_RETURN(int64_t creation, OptionalTime(table, row, cols[0]));
    if (creation < 0)
      return InvalidArgumentError(table.Where(row, cols[0]) + ": creation_time: required");
    p.creation = creation;
    TESSERA_ASSIGN_OR_RETURN(p.scheduled, OptionalTime(table, row, cols[1]));
    TESSERA_ASSIGN_OR_RETURN(p.deletion, OptionalTime(table, row, cols[2]));
    if (p.deletion >= 0 && p.deletion < std::max(p.creation, p.scheduled))
      return InvalidArgumentError(table.Where(row, cols[2]) +
                                  ": deletion_time: before the pod was created or scheduled");
    p.qos = row.fields[cols[3]];
    out.push_back(std::move(p));
  }
  return out;
}

StatusOr<std::vector<double>> ReadAppSkew(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable t, ReadCsvFile(path));
  auto col = t.ColumnIndex("share");
  if (!col) return InvalidArgumentError(path + ":1:1: missing column 'share'");
  std::vector<double> shares;
  for (const CsvRow& row : t.rows) {
    char* end = nullptr;
    const double v = std::strtod(row.fields[*col].c_str(), &end);
    if (end == row.fields[*col].c_str() || *end != '\0' || !(v >= 0) || v > 1)
      return InvalidArgumentError(t.Where(row, *col) + ": share: expected a number in [0, 1]");
    shares.push_back(v);
  }
  if (shares.empty()) return InvalidArgumentError(path + ": no applications");
  std::sort(shares.rbegin(), shares.rend());
  return shares;
}

StatusOr<std::vector<std::vector<double>>> ParseAppArrivals(std::string_view text, std::string_view path) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable t, ParseCsv(text, path));
  return AppArrivalsFromTable(t);
}

StatusOr<std::vector<std::vector<double>>> ReadAppArrivals(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable t, ReadCsvFile(path));
  return AppArrivalsFromTable(t);
}

StatusOr<std::vector<WorkloadJob>> BuildTenantWorkload(const std::vector<TimedPod>& pods,
                                                       const TenantTree& tenants,
                                                       const std::vector<double>& app_skew,
                                                       const WorkloadOptions& options) {
  if (options.time_compression < 0) return InvalidArgumentError("time compression must be > 0");
  if (pods.empty()) return InvalidArgumentError("no pods");
  // The trace's busy window: from the 1st percentile of creation times (a few pods were created
  // months before the rest) to the last creation.
  std::vector<int64_t> created;
  for (const TimedPod& p : pods) created.push_back(p.creation);
  std::sort(created.begin(), created.end());
  const int64_t t0 = created[created.size() / 100];
  const int64_t t1 = created.back();
  const double compression =
      options.time_compression > 0
          ? options.time_compression
          : std::max(1e-9, static_cast<double>(t1 - t0) / static_cast<double>(options.horizon.count()));
  // Leaves ranked by guarantee (largest first; file order on ties) take the applications'
  // shares in rank order; more leaves than applications get the smallest share.
  std::vector<TenantIndex> leaves;
  for (TenantIndex t = 0; t < tenants.size(); ++t)
    if (tenants.is_leaf(t)) leaves.push_back(t);
  std::stable_sort(leaves.begin(), leaves.end(), [&](TenantIndex a, TenantIndex b) {
    return tenants.spec(a).guaranteed[sched::kGpuMilliDim] > tenants.spec(b).guaranteed[sched::kGpuMilliDim];
  });
  std::vector<double> cumulative;
  double sum = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    sum += app_skew[std::min(i, app_skew.size() - 1)];
    cumulative.push_back(sum);
  }
  if (!(sum > 0)) return InvalidArgumentError("application skew sums to 0");
  // With arrival profiles: one cumulative weight vector per trace day (see WorkloadOptions).
  std::vector<std::vector<double>> cumulative_by_day;
  if (options.app_arrivals != nullptr && !options.app_arrivals->empty()) {
    const auto& arrivals = *options.app_arrivals;
    const size_t days = arrivals.front().size();
    std::vector<double> mean(arrivals.size(), 0.0);  // per application, over the days
    for (size_t a = 0; a < arrivals.size(); ++a)
      for (double x : arrivals[a]) mean[a] += x / static_cast<double>(days);
    cumulative_by_day.assign(days, {});
    for (size_t d = 0; d < days; ++d) {
      double day_sum = 0;
      for (size_t i = 0; i < leaves.size(); ++i) {
        const size_t a = std::min(i, arrivals.size() - 1);
        const double burst = mean[a] > 0 ? arrivals[a][d] / mean[a] : 1.0;  // 1: a steady app
        day_sum += app_skew[std::min(i, app_skew.size() - 1)] * burst;
        cumulative_by_day[d].push_back(day_sum);
      }
      if (!(day_sum > 0)) cumulative_by_day[d] = cumulative;  // nobody arrived that day: the skew
    }
  }
  int64_t trace_end = 0;
  for (const TimedPod& p : pods) trace_end = std::max({trace_end, p.creation, p.scheduled, p.deletion});
  // Lifetimes of the pods that finished inside the trace; a censored pod (never deleted, or
  // deleted at the trace end: still running when the snapshot was taken) draws one of them.
  std::vector<int64_t> finished;
  for (const TimedPod& p : pods)
    if (p.deletion >= 0 && p.deletion < trace_end)
      finished.push_back(std::max<int64_t>(1, p.deletion - (p.scheduled >= 0 ? p.scheduled : p.creation)));
  if (finished.empty()) return InvalidArgumentError("no pod of the trace finished: no lifetimes to draw from");
  Rng rng(options.seed);
  Rng lifetimes = rng.Fork(1);
  std::vector<WorkloadJob> jobs;
  // A submission = the pods of one request shape created in the same trace hour (replicas of one
  // deployment or job); all of a submission's pods go to the same tenant.
  std::map<std::tuple<int64_t, int64_t, int64_t, int32_t, int64_t, ModelMask>, TenantIndex> submission;
  for (const TimedPod& p : pods) {
    // Every pod draws, so the assignment of one pod does not depend on which others are kept.
    const double u01 = rng.UniformDouble();
    const double be = rng.UniformDouble();
    const auto& q = p.pod.request;
    const auto key = std::make_tuple(p.creation / options.submission_window.count(), q.cpu.value(), q.memory.value(), q.num_gpu,
                                     q.gpu_milli.value(), q.allowed_models);
    const std::vector<double>* weights = &cumulative;
    if (!cumulative_by_day.empty()) {
      const double x = t1 > t0 ? static_cast<double>(p.creation - t0) / static_cast<double>(t1 - t0) : 0.0;
      const size_t day = static_cast<size_t>(std::clamp(x, 0.0, 1.0) * static_cast<double>(cumulative_by_day.size()));
      weights = &cumulative_by_day[std::min(day, cumulative_by_day.size() - 1)];
    }
    const double u = u01 * weights->back();
    const TenantIndex drawn_tenant = leaves[std::min<size_t>(
        std::lower_bound(weights->begin(), weights->end(), u) - weights->begin(), leaves.size() - 1)];
    const TenantIndex tenant = submission.emplace(key, drawn_tenant).first->second;
    const int64_t drawn = finished[lifetimes.Uniform(finished.size())];
    if (p.creation < t0) continue;
    const int64_t submit =
        static_cast<int64_t>(std::floor(static_cast<double>(p.creation - t0) / compression));
    if (submit >= options.horizon.count()) continue;
    const int64_t start = p.scheduled >= 0 ? p.scheduled : p.creation;
    const bool censored = p.deletion < 0 || p.deletion >= trace_end;
    WorkloadJob w;
    w.duration = Seconds{censored ? drawn : std::max<int64_t>(1, p.deletion - start)};
    Job& j = w.job;
    j.tenant = tenant;
    if (p.qos == "Guaranteed" || (p.qos == "LS" && be < options.guaranteed_fraction))
      j.qos = QosClass::kGuaranteed;
    else if (p.qos == "BE" && be < options.best_effort_fraction)
      j.qos = QosClass::kBestEffort;
    else
      j.qos = QosClass::kBurstable;
    j.pod = p.pod.request;
    j.submit = Seconds{submit};
    if (std::find(options.service_qos.begin(), options.service_qos.end(), p.qos) != options.service_qos.end()) {
      j.kind = sched::JobKind::kService;
      j.startup = options.service_startup;
    }
    jobs.push_back(std::move(w));
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const WorkloadJob& a, const WorkloadJob& b) { return a.job.submit < b.job.submit; });
  for (size_t i = 0; i < jobs.size(); ++i) jobs[i].job.id = static_cast<sched::JobId>(i + 1);
  return jobs;
}

StatusOr<std::vector<std::vector<NodeSpec>>> CarveDedicatedSlices(const TenantTree& tenants,
                                                                  const std::vector<NodeSpec>& nodes) {
  std::vector<std::vector<NodeSpec>> slices(tenants.size());
  std::vector<TenantIndex> leaves;
  int64_t guaranteed = 0, total_gpus = 0;
  for (TenantIndex t = 0; t < tenants.size(); ++t)
    if (tenants.is_leaf(t)) {
      leaves.push_back(t);
      guaranteed += tenants.spec(t).guaranteed[sched::kGpuMilliDim];
    }
  for (const NodeSpec& n : nodes) total_gpus += n.gpu_count;
  if (guaranteed > total_gpus * kWholeGpu.value())
    return InvalidArgumentError("dedicated slices: the leaf tenants are guaranteed " +
                                std::to_string(guaranteed) + " GPU milli, the cluster has " +
                                std::to_string(total_gpus * kWholeGpu.value()));
  if (guaranteed == 0) return slices;
  // Per GPU model, the model's GPUs are apportioned to the leaves in proportion to their
  // guarantees (largest remainder), and carved node by node in file order, so each slice has
  // the cluster's model mix and mostly whole nodes.
  std::map<int32_t, std::vector<size_t>> by_model;  // model id -> node indexes
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].gpu_count > 0) by_model[static_cast<int32_t>(nodes[i].model.value())].push_back(i);
  for (const auto& [model, idx] : by_model) {
    int64_t model_gpus = 0;
    for (size_t i : idx) model_gpus += nodes[i].gpu_count;
    // Only the guaranteed part of the cluster is handed out.
    const double pool = static_cast<double>(model_gpus) * static_cast<double>(guaranteed) /
                        static_cast<double>(total_gpus * kWholeGpu.value());
    std::vector<int64_t> share(leaves.size());
    std::vector<std::pair<double, size_t>> remainders;
    int64_t given = 0;
    for (size_t k = 0; k < leaves.size(); ++k) {
      const double exact = pool * static_cast<double>(tenants.spec(leaves[k]).guaranteed[sched::kGpuMilliDim]) /
                           static_cast<double>(guaranteed);
      share[k] = static_cast<int64_t>(std::floor(exact));
      given += share[k];
      remainders.emplace_back(-(exact - static_cast<double>(share[k])), k);
    }
    std::sort(remainders.begin(), remainders.end());
    const int64_t target = static_cast<int64_t>(std::llround(pool));
    for (size_t r = 0; r < remainders.size() && given < target; ++r, ++given) share[remainders[r].second]++;
    size_t node = 0;
    int used = 0;
    for (size_t k = 0; k < leaves.size(); ++k) {
      int64_t want = share[k];
      while (want > 0 && node < idx.size()) {
        const NodeSpec& n = nodes[idx[node]];
        const int take = static_cast<int>(std::min<int64_t>(want, n.gpu_count - used));
        NodeSpec part = n;
        part.name = n.name + "/" + tenants.name(leaves[k]);
        part.gpu_count = take;
        part.cpu = CpuMilli{n.cpu.value() * take / n.gpu_count};
        part.memory = MiB{n.memory.value() * take / n.gpu_count};
        slices[leaves[k]].push_back(part);
        used += take;
        want -= take;
        if (used == n.gpu_count) {
          ++node;
          used = 0;
        }
      }
    }
  }
  return slices;
}

namespace {

// The event loop shared by both modes: `route[t]` = (scheduler, local tenant) of global tenant t.
class Loop {
 public:
  Loop(const TenantTree& tenants, const std::vector<WorkloadJob>& jobs, Seconds horizon,
       int64_t capacity_milli)
      : tenants_(tenants), jobs_(jobs), horizon_(horizon), capacity_(capacity_milli) {}

  void AddScheduler(Scheduler* s) { scheds_.push_back(s); }
  // At the first instant >= `at`, replace scheduler i by make(i), rebuilt from the old one's
  // running and pending jobs (ScenarioOptions::restart_at).
  using SchedulerFactory = std::function<StatusOr<std::unique_ptr<Scheduler>>(size_t)>;
  void SetRestart(Seconds at, SchedulerFactory make) {
    restart_at_ = at.count();
    make_ = std::move(make);
  }
  void SetCheckpointInterval(Seconds every) { checkpoint_interval_ = every.count(); }
  void Route(TenantIndex t, int sched, TenantIndex local) {
    if (route_.size() < static_cast<size_t>(tenants_.size())) route_.resize(tenants_.size(), {-1, -1});
    route_[t] = {sched, local};
  }

  StatusOr<ModeMetrics> Run() {
    const auto wall0 = std::chrono::steady_clock::now();
    Start();
    const int64_t H = horizon_.count();
    int64_t now = 0;
    while (!events_.empty() && std::get<0>(events_.top()) < H) {
      now = std::get<0>(events_.top());
      if (restart_at_ > 0 && now >= restart_at_ && restarted_.empty()) TESSERA_RETURN_IF_ERROR(RestartSchedulers());
      TESSERA_RETURN_IF_ERROR(TakeEvents(now));
      for (size_t si = 0; si < scheds_.size(); ++si) {
        if (!acc_.touched[si]) continue;
        TESSERA_RETURN_IF_ERROR(ApplyCycle(si, scheds_[si]->Cycle(Seconds{now}), now));
      }
      // Integrate until the next instant.
      const int64_t next = events_.empty() ? H : std::min<int64_t>(H, std::get<0>(events_.top()));
      Integrate(now, next);
    }
    Finish();
    m_.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    return std::move(m_);
  }

 private:
  // (time, kind, job (the scheduler for kFollowUp), generation)
  // kinds: 0 = completion, 1 = arrival, 2 = follow-up cycle, 3 = the deletion time of a
  // preempted service replica that may still be waiting (it is withdrawn: nothing to serve)
  static constexpr int kFollowUp = 2;
  static constexpr int kServiceDeletion = 3;
  using Ev = std::tuple<int64_t, int, sched::JobId, int>;

  // What Run integrates over the horizon, and the per-instant scratch it reuses.
  struct Accumulators {
    double wasted_integral = 0;  // GPU milli-seconds of runs that a preemption or restart discarded
    std::map<std::string, double> wasted_by_cause, wasted_by_kind;
    std::vector<double> alloc_hours;
    double cpu_integral = 0;
    double jain_top_integral = 0, jain_top_time = 0;
    std::vector<double> root_usage;
    std::vector<char> root_waiting;
    double alloc_integral = 0, requested_integral = 0, jain_integral = 0, jain_time = 0;
    double jain_be_integral = 0, jain_be_time = 0;
    // Fairness breakdown: per leaf tenant, time waiting (with G/B work), its share relative to
    // the mean of the waiting tenants integrated over that time, and the part of the Jain loss
    // put on it; the smallest G/B job each tenant has pending (GPU milli, all pods).
    std::vector<double> fair_wait_time, fair_rel_integral, fair_loss;
    std::array<double, kJainLossBuckets> loss_by_bucket{};
    std::vector<std::multiset<int64_t>> pending_gpu;
    std::vector<std::pair<TenantIndex, double>> waiting_x;
    int64_t requested_now = 0;
    std::array<double, sched::kWaitReasonCount> reason_sum{};
    int64_t reason_samples = 0;
    std::vector<char> touched;
    std::vector<int64_t> follow_up_at;  // the instant of each scheduler's last follow-up
  };

  void Start() {
    const size_t n = jobs_.size();
    first_start_.assign(n + 1, -1);
    run_start_.assign(n + 1, -1);
    saved_.assign(n + 1, 0);
    end_.assign(n + 1, -1);
    warm_until_.assign(n + 1, -1);
    warm_cause_.assign(n + 1, nullptr);
    running_.assign(n + 1, 0);
    for (const char* cause : {"reclaim", "fair_share", "restart_move"}) {
      m_.preemptions_by_cause[cause] = 0;
      acc_.wasted_by_cause[cause] = 0;
    }
    for (sched::JobKind k : {sched::JobKind::kBatch, sched::JobKind::kService}) {
      m_.preemptions_by_kind[std::string(sched::JobKindName(k))] = 0;
      acc_.wasted_by_kind[std::string(sched::JobKindName(k))] = 0;
    }
    generation_.assign(n + 1, 0);
    rejected_.assign(n + 1, 0);
    for (const WorkloadJob& w : jobs_) events_.push({w.job.submit.count(), 1, w.job.id, 0});
    const int64_t H = horizon_.count();
    acc_.alloc_hours.assign(static_cast<size_t>((H + 3599) / 3600), 0.0);
    const size_t nt = static_cast<size_t>(tenants_.size());
    acc_.root_usage.assign(nt, 0.0);
    acc_.root_waiting.assign(nt, 0);
    acc_.fair_wait_time.assign(nt, 0.0);
    acc_.fair_rel_integral.assign(nt, 0.0);
    acc_.fair_loss.assign(nt, 0.0);
    acc_.pending_gpu.assign(nt, {});
    acc_.touched.assign(scheds_.size(), 0);
    acc_.follow_up_at.assign(scheds_.size(), -1);
  }

  // Completions, arrivals and follow-ups at `now`: marks the schedulers that must cycle.
  Status TakeEvents(int64_t now) {
    std::fill(acc_.touched.begin(), acc_.touched.end(), 0);
    while (!events_.empty() && std::get<0>(events_.top()) == now) {
      auto [t, kind, id, gen] = events_.top();
      events_.pop();
      if (kind == kFollowUp) {  // `id` is the scheduler
        acc_.touched[static_cast<size_t>(id)] = 1;
        continue;
      }
      const WorkloadJob& w = jobs_[id - 1];
      const auto [si, local] = route_[w.job.tenant];
      if (kind == kServiceDeletion) {
        // Preempted and not re-created before its deletion time: the replica is withdrawn.
        if (gen != generation_[id] || running_[id]) continue;  // re-created (or preempted again) since
        if (Status st = scheds_[si]->Cancel(id); !st.ok())
          return InternalError(st.message() + " at t=" + std::to_string(now));
        if (w.job.qos != sched::QosClass::kBestEffort) {
          auto& pg = acc_.pending_gpu[w.job.tenant];
          if (auto it = pg.find(RequestedMilli(w.job)); it != pg.end()) pg.erase(it);
        }
        running_[id] = 2;  // done
        ++m_.jobs_completed;
        acc_.touched[si] = 1;
        continue;
      }
      if (kind == 0) {
        if (gen != generation_[id]) continue;  // preempted since
        if (Status st = scheds_[si]->Complete(id, Seconds{now}); !st.ok())
          return InternalError(st.message() + " at t=" + std::to_string(now));
        acc_.requested_now -= RequestedMilli(w.job);
        running_[id] = 2;
        ++m_.jobs_completed;
      } else {
        ++m_.jobs_submitted;
        Job j = w.job;
        j.tenant = local;
        // The scheduler costs a batch victim by its run since its last checkpoint.
        if (j.kind == sched::JobKind::kBatch) j.checkpoint_interval = Seconds{checkpoint_interval_};
        if (!scheds_[si]->Submit(j).ok()) {
          rejected_[id] = 1;
          ++m_.jobs_rejected;
          continue;
        }
        if (w.job.qos != sched::QosClass::kBestEffort) acc_.pending_gpu[w.job.tenant].insert(RequestedMilli(w.job));
      }
      acc_.touched[si] = 1;
    }
    return Status::Ok();
  }

  // What one cycle of scheduler `si` decided: preemptions, starts and moves.
  Status ApplyCycle(size_t si, const sched::CycleResult& r, int64_t now) {
    if (!r.error.ok()) return r.error.WithPrefix("t=" + std::to_string(now) + ": ");
    ++m_.cycles;
    // A cycle that preempted requeued its victims, and they may not start in the cycle
    // that took them: the scheduler runs once more at the same instant, so that they are
    // placed (or reclaim what they are entitled to) before time moves on (once per instant:
    // reclaim and fair-share preemption cannot cycle, but the follow-up is bounded anyway).
    if (!r.preempted.empty() && acc_.follow_up_at[si] != now) {
      acc_.follow_up_at[si] = now;
      events_.push({now, kFollowUp, static_cast<sched::JobId>(si), 0});
    }
    for (const sched::PreemptEvent& p : r.preempted) {
      ++generation_[p.victim];
      const char* cause = p.fair_share ? "fair_share" : "reclaim";
      Waste(p.victim, cause, static_cast<double>(Interrupt(p.victim, now)));
      warm_cause_[p.victim] = cause;  // what its re-created replica's start-up is put on
      running_[p.victim] = 0;
      ++m_.preemptions;
      ++m_.preemptions_by_cause[cause];
      ++m_.preemptions_by_kind[std::string(sched::JobKindName(jobs_[p.victim - 1].job.kind))];
      // A service replica waits to be re-created until its deletion time at the latest.
      if (IsService(p.victim)) events_.push({end_[p.victim], kServiceDeletion, p.victim, generation_[p.victim]});
      acc_.requested_now -= RequestedMilli(jobs_[p.victim - 1].job);
      const Job& vj = jobs_[p.victim - 1].job;  // requeued
      if (vj.qos != sched::QosClass::kBestEffort) acc_.pending_gpu[vj.tenant].insert(RequestedMilli(vj));
    }
    for (const sched::StartEvent& s : r.started) {
      const bool restart = first_start_[s.job] >= 0;
      if (!restart) first_start_[s.job] = now;
      run_start_[s.job] = now;
      running_[s.job] = 1;
      const WorkloadJob& w = jobs_[s.job - 1];
      if (w.job.qos != sched::QosClass::kBestEffort) {
        auto& pg = acc_.pending_gpu[w.job.tenant];
        if (auto it = pg.find(RequestedMilli(w.job)); it != pg.end()) pg.erase(it);
      }
      acc_.requested_now += RequestedMilli(w.job);
      if (IsService(s.job)) {
        // A service serves until its deletion time, its first start + its lifetime; a
        // re-created replica spends its start-up first (the trace's lifetime includes the first).
        if (!restart) end_[s.job] = now + w.duration.count();
        else StartUp(s.job, now);
        events_.push({end_[s.job], 0, s.job, generation_[s.job]});
      } else {
        events_.push({now + w.duration.count() - saved_[s.job], 0, s.job, generation_[s.job]});
      }
    }
    m_.consolidation_moves += static_cast<int64_t>(r.moves.size());
    for (const sched::MoveEvent& mv : r.moves) {
      if (!mv.restart) continue;  // a fractional pod moves live: its end stays
      // A whole-GPU pod restarts at its destination: it loses its progress since its last
      // checkpoint (counted as a preemption) and runs the rest from there.
      ++generation_[mv.job];
      Waste(mv.job, "restart_move", static_cast<double>(Interrupt(mv.job, now)));
      run_start_[mv.job] = now;
      ++m_.preemptions;
      ++m_.preemptions_by_cause["restart_move"];
      ++m_.preemptions_by_kind[std::string(sched::JobKindName(jobs_[mv.job - 1].job.kind))];
      if (IsService(mv.job)) {
        warm_cause_[mv.job] = "restart_move";
        StartUp(mv.job, now);
        events_.push({end_[mv.job], 0, mv.job, generation_[mv.job]});
        continue;
      }
      events_.push({now + jobs_[mv.job - 1].duration.count() - saved_[mv.job], 0, mv.job, generation_[mv.job]});
    }
    return Status::Ok();
  }

  // Allocation, CPU, wait-reason samples and fairness from `now` until `next`.
  void Integrate(int64_t now, int64_t next) {
    Accumulators& a = acc_;
    const double dt = static_cast<double>(next - now);
    int64_t held = 0, cpu_free = 0, cpu_total = 0;
    for (Scheduler* s : scheds_) {
      held += s->cluster().allocated_gpu().value();
      const auto& c = s->cluster();
      for (size_t k = 0; k < c.node_count(); ++k) cpu_free += c.free_cpu(NodeIndex{static_cast<uint32_t>(k)}).value();
      cpu_total += c.total_cpu_capacity().value();
    }
    a.cpu_integral += static_cast<double>(cpu_total - cpu_free) / static_cast<double>(std::max<int64_t>(1, cpu_total)) * dt;
    a.alloc_integral += static_cast<double>(held) * dt;
    a.requested_integral += static_cast<double>(a.requested_now) * dt;
    for (int64_t h = (now + 3599) / 3600; h * 3600 < next; ++h) {  // hourly samples
      ++a.reason_samples;
      for (Scheduler* s : scheds_) {
        const auto by = s->PendingByReason();
        for (int r = 0; r < sched::kWaitReasonCount; ++r) a.reason_sum[r] += by[r];
      }
    }
    for (int64_t h = now / 3600; h * 3600 < next; ++h) {
      const int64_t lo = std::max<int64_t>(h * 3600, now), hi = std::min<int64_t>((h + 1) * 3600, next);
      a.alloc_hours[h] += static_cast<double>(a.requested_now) * static_cast<double>(hi - lo);
    }
    IntegrateFairness(dt);
  }

  // Jain's index among the waiting leaf tenants (with and without BestEffort-only waiters) and
  // among the organisations, guarantee violations, and where the Jain loss goes.
  void IntegrateFairness(double dt) {
    Accumulators& a = acc_;
    double sx = 0, sxx = 0, bx = 0, bxx = 0;
    int waiting = 0, waiting_be = 0;
    std::fill(a.root_usage.begin(), a.root_usage.end(), 0.0);
    std::fill(a.root_waiting.begin(), a.root_waiting.end(), 0);
    a.waiting_x.clear();
    for (TenantIndex t = 0; t < tenants_.size(); ++t) {
      if (!tenants_.is_leaf(t)) continue;
      const auto [si, local] = route_[t];
      const Scheduler& s = *scheds_[si];
      if (s.BelowGuaranteeWithWaiting(local)) m_.guarantee_violations += dt;
      const double used = static_cast<double>(s.usage(local)[sched::kGpuMilliDim]);
      const TenantIndex root = tenants_.path(t).front();
      a.root_usage[root] += used;
      if (!s.HasRunnableWaiting(local, /*include_best_effort=*/true)) continue;
      const double x = used / static_cast<double>(capacity_) / tenants_.spec(t).weight;
      ++waiting_be;
      bx += x;
      bxx += x * x;
      // A tenant waiting with BestEffort work only claims no share (leftovers only).
      if (!s.HasRunnableWaiting(local, /*include_best_effort=*/false)) continue;
      a.root_waiting[root] = 1;
      ++waiting;
      sx += x;
      sxx += x * x;
      a.waiting_x.emplace_back(t, x);
    }
    if (waiting >= 2 && dt > 0) {
      const double jain = sxx > 0 ? sx * sx / (waiting * sxx) : 1.0;
      a.jain_integral += jain * dt;
      a.jain_time += dt;
      // Breakdown: the loss (1 - J) goes to the tenants below the mean, by how far below.
      const double mean = sx / waiting;
      double below = 0;
      for (const auto& [t, x] : a.waiting_x) below += std::max(0.0, mean - x);
      for (const auto& [t, x] : a.waiting_x) {
        a.fair_wait_time[t] += dt;
        a.fair_rel_integral[t] += (mean > 0 ? x / mean : 1.0) * dt;
        if (below <= 0 || x >= mean) continue;
        const double loss = (1.0 - jain) * dt * (mean - x) / below;
        a.fair_loss[t] += loss;
        const auto& pg = a.pending_gpu[t];
        a.loss_by_bucket[JainLossBucket(pg.empty() ? 0 : *pg.begin())] += loss;
      }
    }
    if (waiting_be >= 2 && dt > 0) {
      a.jain_be_integral += (bxx > 0 ? bx * bx / (waiting_be * bxx) : 1.0) * dt;
      a.jain_be_time += dt;
    }
    // The same among the top-level tenants (organisations), whose guarantees are theirs.
    double rx = 0, rxx = 0;
    int rwaiting = 0;
    for (TenantIndex r : tenants_.roots()) {
      if (!a.root_waiting[r]) continue;
      ++rwaiting;
      const double x = a.root_usage[r] / static_cast<double>(capacity_) / tenants_.spec(r).weight;
      rx += x;
      rxx += x * x;
    }
    if (rwaiting >= 2 && dt > 0) {
      a.jain_top_integral += (rxx > 0 ? rx * rx / (rwaiting * rxx) : 1.0) * dt;
      a.jain_top_time += dt;
    }
  }

  // The metrics from the integrals and the jobs' first starts.
  void Finish() {
    Accumulators& a = acc_;
    ModeMetrics& m = m_;
    const int64_t H = horizon_.count();
    const double span = static_cast<double>(H) * static_cast<double>(capacity_);
    m.gpu_held_pct = 100.0 * a.alloc_integral / span;
    m.gpu_allocation_pct = 100.0 * a.requested_integral / span;
    m.gpu_allocation_wasted_pct = 100.0 * a.wasted_integral / span;
    m.gpu_allocation_useful_pct = m.gpu_allocation_pct - m.gpu_allocation_wasted_pct;
    for (const auto& [cause, lost] : a.wasted_by_cause) m.gpu_allocation_wasted_pct_by_cause[cause] = 100.0 * lost / span;
    for (const auto& [kind, lost] : a.wasted_by_kind) m.gpu_allocation_wasted_pct_by_kind[kind] = 100.0 * lost / span;
    m.cpu_allocation_pct = 100.0 * a.cpu_integral / static_cast<double>(H);
    m.jain_fairness = a.jain_time > 0 ? a.jain_integral / a.jain_time : 1.0;
    m.jain_fairness_top_level = a.jain_top_time > 0 ? a.jain_top_integral / a.jain_top_time : 1.0;
    m.jain_fairness_with_best_effort = a.jain_be_time > 0 ? a.jain_be_integral / a.jain_be_time : 1.0;
    for (int r = 1; r < sched::kWaitReasonCount; ++r)
      m.mean_pending_by_reason[std::string(sched::WaitReasonName(static_cast<sched::WaitReason>(r)))] =
          a.reason_samples ? a.reason_sum[r] / static_cast<double>(a.reason_samples) : 0.0;
    for (double& x : a.alloc_hours) x = 100.0 * x / (3600.0 * static_cast<double>(capacity_));
    m.allocation_by_hour = std::move(a.alloc_hours);
    FinishWaits();
    double total_loss = 0;
    for (double l : a.loss_by_bucket) total_loss += l;
    for (int b = 0; b < kJainLossBuckets; ++b)
      m.jain_loss_by_smallest_waiting_job[kJainLossBucketNames[b]] =
          total_loss > 0 ? 100.0 * a.loss_by_bucket[b] / total_loss : 0.0;
    for (TenantIndex t = 0; t < tenants_.size(); ++t) {
      if (!tenants_.is_leaf(t)) continue;
      TenantFairness f;
      f.tenant = tenants_.name(t);
      f.hours_waiting = a.fair_wait_time[t] / 3600.0;
      f.relative_share_while_waiting = a.fair_wait_time[t] > 0 ? a.fair_rel_integral[t] / a.fair_wait_time[t] : 0.0;
      f.jain_loss_pct = total_loss > 0 ? 100.0 * a.fair_loss[t] / total_loss : 0.0;
      m.fairness_by_tenant.push_back(std::move(f));
    }
  }

  // Waits: submit -> first start; still waiting at the horizon: the wait so far. A job its
  // mode rejected (it can never run there) never starts: it counts like one still waiting.
  void FinishWaits() {
    ModeMetrics& m = m_;
    const int64_t H = horizon_.count();
    std::vector<double> all;
    std::map<std::string, std::vector<double>> by_qos, by_qos_admitted;
    std::vector<double> tenant_sum(tenants_.size(), 0);
    std::vector<int> tenant_n(tenants_.size(), 0);
    for (const WorkloadJob& w : jobs_) {
      if (w.job.submit.count() >= H) continue;
      const int64_t start = first_start_[w.job.id] >= 0 ? first_start_[w.job.id] : H;
      const double wait = static_cast<double>(start - w.job.submit.count());
      all.push_back(wait);
      by_qos[std::string(sched::QosName(w.job.qos))].push_back(wait);
      if (!rejected_[w.job.id]) by_qos_admitted[std::string(sched::QosName(w.job.qos))].push_back(wait);
      tenant_sum[w.job.tenant] += wait;
      tenant_n[w.job.tenant]++;
    }
    m.wait_seconds_p50 = Percentile(all, 50);
    m.wait_seconds_p99 = Percentile(all, 99);
    for (auto& [q, v] : by_qos) m.wait_by_qos[q] = {Percentile(v, 50), Percentile(v, 99)};
    for (auto& [q, v] : by_qos_admitted)
      m.wait_by_qos_admitted[q] = {Percentile(v, 50), Percentile(v, 99)};
    for (TenantIndex t = 0; t < tenants_.size(); ++t)
      if (tenants_.is_leaf(t))
        m.mean_wait_by_tenant.emplace_back(tenants_.name(t), tenant_n[t] ? tenant_sum[t] / tenant_n[t] : 0.0);
    // The SLA observation: the Guaranteed jobs that started, by tenant and the hour they started.
    std::map<std::pair<TenantIndex, int64_t>, std::vector<double>> guaranteed;
    for (const WorkloadJob& w : jobs_) {
      const int64_t start = first_start_[w.job.id];
      if (w.job.qos != QosClass::kGuaranteed || start < 0 || start >= H) continue;
      guaranteed[{w.job.tenant, start / 3600 * 3600}].push_back(static_cast<double>(start - w.job.submit.count()));
    }
    for (auto& [key, waits] : guaranteed) {
      std::sort(waits.begin(), waits.end());  // nearest rank, as the control plane's
      const size_t rank = static_cast<size_t>(std::ceil(0.99 * static_cast<double>(waits.size())));
      m.guaranteed_wait_p99_by_hour[tenants_.name(key.first)][key.second] = waits[std::max<size_t>(rank, 1) - 1];
    }
  }

  int64_t RequestedMilli(const Job& j) const {
    return static_cast<int64_t>(j.pods) * j.pod.TotalGpu().value();
  }

  const TenantTree& tenants_;
  const std::vector<WorkloadJob>& jobs_;
  Seconds horizon_;
  int64_t capacity_;
  // The control plane's restart: each scheduler rebuilt from what its caller would persist.
  Status RestartSchedulers() {
    for (size_t si = 0; si < scheds_.size(); ++si) {
      TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> fresh, make_(si));
      const Scheduler& old = *scheds_[si];
      for (sched::JobId id : old.running_jobs()) {
        TESSERA_RETURN_IF_ERROR(fresh->Adopt(*old.job(id), *old.placement_of(id), *old.start_time(id),
                                             old.placed_seq(id)));
      }
      for (sched::JobId id : old.pending_jobs()) {
        TESSERA_RETURN_IF_ERROR(fresh->SubmitRestored(*old.job(id), old.wait_reason(id)));
      }
      TESSERA_RETURN_IF_ERROR(fresh->RestoreFairShareMemory(old.fair_share_memory()));
      scheds_[si] = fresh.get();
      restarted_.push_back(std::move(fresh));
    }
    return Status::Ok();
  }

  std::vector<Scheduler*> scheds_;
  std::priority_queue<Ev, std::vector<Ev>, std::greater<>> events_;
  Accumulators acc_;
  ModeMetrics m_;
  int64_t restart_at_ = 0;
  SchedulerFactory make_;
  std::vector<std::unique_ptr<Scheduler>> restarted_;
  std::vector<std::pair<int, TenantIndex>> route_;
  std::vector<int64_t> first_start_;
  std::vector<int64_t> run_start_;  // start of the current run (a restart starts a new one)
  std::vector<int64_t> saved_;      // progress kept by the last checkpoint (seconds of work)
  int64_t checkpoint_interval_ = 0;  // 0: a stopped job starts over

  bool IsService(sched::JobId id) const { return jobs_[id - 1].job.kind == sched::JobKind::kService; }

  // `seconds` of job `id`'s GPU request thrown away, put on `cause` and on the job's kind.
  void Waste(sched::JobId id, const char* cause, double seconds) {
    const double lost = static_cast<double>(RequestedMilli(jobs_[id - 1].job)) * seconds;
    acc_.wasted_integral += lost;
    acc_.wasted_by_cause[cause] += lost;
    acc_.wasted_by_kind[std::string(sched::JobKindName(jobs_[id - 1].job.kind))] += lost;
  }

  // A service replica re-created at `now` holds its GPUs for its start-up (cut at its deletion
  // time and at the horizon) before it serves: all of it is waste, put on the cause of the
  // preemption or move that stopped it (a later stop gives back what it did not spend).
  void StartUp(sched::JobId id, int64_t now) {
    const int64_t warm =
        std::max<int64_t>(0, std::min({jobs_[id - 1].job.startup.count(), end_[id] - now, horizon_.count() - now}));
    warm_until_[id] = now + warm;
    Waste(id, warm_cause_[id] != nullptr ? warm_cause_[id] : "reclaim", static_cast<double>(warm));
  }

  // A running job stops at `now` (preempted, or moved with a restart). A batch job's progress
  // rounds down to its last checkpoint: returns the seconds of work thrown away. A service
  // replica keeps what it served (0), and gives back the part of a start-up it did not spend.
  int64_t Interrupt(sched::JobId id, int64_t now) {
    if (IsService(id)) {
      const int64_t unspent = std::max<int64_t>(0, warm_until_[id] - now);
      if (unspent > 0) Waste(id, warm_cause_[id], -static_cast<double>(unspent));
      warm_until_[id] = now;
      return 0;
    }
    const int64_t progress = saved_[id] + (now - run_start_[id]);
    const int64_t kept = checkpoint_interval_ > 0 ? progress / checkpoint_interval_ * checkpoint_interval_ : 0;
    const int64_t lost = progress - kept;
    saved_[id] = kept;
    return lost;
  }
  // Services: deletion time (first start + lifetime), end of the current start-up, and the
  // cause of the stop that the start-up pays for.
  std::vector<int64_t> end_, warm_until_;
  std::vector<const char*> warm_cause_;
  std::vector<char> running_;  // 0 waiting (or not submitted), 1 running, 2 done
  std::vector<int> generation_;
  std::vector<char> rejected_;
};

int64_t CapacityMilli(const std::vector<NodeSpec>& nodes) {
  int64_t c = 0;
  for (const NodeSpec& n : nodes) c += int64_t{n.gpu_count} * kWholeGpu.value();
  return c;
}

}  // namespace

double AllocationUpperBoundPct(const std::vector<WorkloadJob>& jobs, int64_t capacity_milli,
                               Seconds horizon) {
  const int64_t T = horizon.count();
  if (T <= 0 || capacity_milli <= 0) return 0.0;
  const double cap = static_cast<double>(capacity_milli);
  double best = cap * static_cast<double>(T);  // t1 = 0
  for (int64_t t1 = std::min<int64_t>(3600, T);; t1 = std::min<int64_t>(t1 + 3600, T)) {
    double work = 0;  // GPU milli-seconds that can run in [0, t1]
    for (const WorkloadJob& w : jobs) {
      const int64_t run = std::clamp<int64_t>(t1 - w.job.submit.count(), 0, w.duration.count());
      work += static_cast<double>(w.job.pods) * static_cast<double>(w.job.pod.TotalGpu().value()) *
              static_cast<double>(run);
    }
    const double bound = std::min(cap * static_cast<double>(t1), work) + cap * static_cast<double>(T - t1);
    best = std::min(best, bound);
    if (t1 == T) break;
  }
  return 100.0 * best / (cap * static_cast<double>(T));
}

StatusOr<ModeMetrics> RunShared(const TenantTree& tenants, const std::vector<NodeSpec>& nodes,
                                const std::vector<WorkloadJob>& jobs, const ScenarioOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> s,
                           Scheduler::Create(&tenants, nodes, options.scheduler));
  Loop loop(tenants, jobs, options.horizon, CapacityMilli(nodes));
  loop.SetCheckpointInterval(options.checkpoint_interval);
  loop.AddScheduler(s.get());
  for (TenantIndex t = 0; t < tenants.size(); ++t) loop.Route(t, 0, t);
  if (options.restart_at.count() > 0) {
    loop.SetRestart(options.restart_at,
                    [&](size_t) { return Scheduler::Create(&tenants, nodes, options.scheduler); });
  }
  return loop.Run();
}

StatusOr<ModeMetrics> RunDedicated(const TenantTree& tenants, const std::vector<NodeSpec>& nodes,
                                   const std::vector<WorkloadJob>& jobs,
                                   const ScenarioOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(auto slices, CarveDedicatedSlices(tenants, nodes));
  // One single-tenant tree and scheduler per leaf: guarantee = limit = the slice.
  std::vector<std::unique_ptr<TenantTree>> trees;
  std::vector<std::unique_ptr<Scheduler>> scheds;
  struct SliceSpec {
    const TenantTree* tree;
    std::vector<NodeSpec> nodes;
    sched::SchedulerOptions options;
  };
  std::vector<SliceSpec> slice_specs;  // what each scheduler was made of (for restart_at)
  Loop loop(tenants, jobs, options.horizon, CapacityMilli(nodes));
  loop.SetCheckpointInterval(options.checkpoint_interval);
  for (TenantIndex t = 0; t < tenants.size(); ++t) {
    if (!tenants.is_leaf(t)) continue;
    sched::TenantSpec spec;
    spec.name = tenants.name(t);
    spec.guaranteed[sched::kGpuMilliDim] = CapacityMilli(slices[t]);
    spec.limit = spec.guaranteed;
    for (int d = 1; d < sched::kMaxResourceDims; ++d) spec.limit[d] = sched::kUnlimited;
    std::vector<NodeSpec> slice = slices[t];
    if (slice.empty()) {
      // A tenant without a guarantee owns nothing: a node without GPUs keeps the scheduler
      // valid and rejects every GPU job.
      slice.push_back(NodeSpec{tenants.name(t) + "/none", CpuMilli{0}, MiB{0}, 0, GpuModelId()});
    }
    TESSERA_ASSIGN_OR_RETURN(TenantTree tree, TenantTree::Create({spec}, sched::ResourceSpace()));
    trees.push_back(std::make_unique<TenantTree>(std::move(tree)));
    sched::SchedulerOptions opt = options.scheduler;
    opt.whole_gpus_only = true;
    opt.preemption = false;
    opt.consolidation = false;
    opt.defragmentation = false;
    opt.fair_share_defragmentation = false;
    opt.keep_large_nodes_clearable = false;
    opt.affinity = {};
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> s,
                             Scheduler::Create(trees.back().get(), slice, opt));
    loop.AddScheduler(s.get());
    loop.Route(t, static_cast<int>(scheds.size()), 0);
    scheds.push_back(std::move(s));
    slice_specs.push_back({trees.back().get(), std::move(slice), std::move(opt)});
  }
  if (options.restart_at.count() > 0) {
    loop.SetRestart(options.restart_at, [&](size_t i) {
      return Scheduler::Create(slice_specs[i].tree, slice_specs[i].nodes, slice_specs[i].options);
    });
  }
  return loop.Run();
}

}  // namespace tessera::sim
