#include "tessera/sim/dedicated_vs_shared.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "tessera/config/quota_file.h"
#include "tessera/core/html.h"
#include "tessera/sim/ledger_export.h"
#include "tessera/sim/report_charts.h"
#include "tessera/sim/trace.h"

namespace tessera::sim {
namespace {

// Dedicated and shared in every chart (report_charts.h palette: vermillion, blue).
constexpr int kDedicatedColour = 5;
constexpr int kSharedColour = 4;

using QosWaits = std::map<std::string, std::pair<double, double>>;  // class -> (p50, p99)

nlohmann::json QosWaitsJson(const QosWaits& waits) {
  nlohmann::json q = nlohmann::json::object();
  for (const auto& [cls, v] : waits) q[cls] = {{"wait_seconds_p50", v.first}, {"wait_seconds_p99", v.second}};
  return q;
}

double GuaranteedP99(const QosWaits& waits) {
  auto it = waits.find("Guaranteed");
  return it == waits.end() ? 0.0 : it->second.second;
}

nlohmann::json ToJson(const sim::ModeMetrics& m) {
  nlohmann::json j;
  j["gpu_allocation_pct"] = m.gpu_allocation_pct;
  j["gpu_allocation_wasted_pct"] = m.gpu_allocation_wasted_pct;
  j["gpu_allocation_useful_pct"] = m.gpu_allocation_useful_pct;
  j["gpu_held_pct"] = m.gpu_held_pct;
  j["cpu_allocation_pct"] = m.cpu_allocation_pct;
  j["jobs_submitted"] = m.jobs_submitted;
  j["jobs_completed"] = m.jobs_completed;
  j["jobs_rejected"] = m.jobs_rejected;
  j["wait_seconds_p50"] = m.wait_seconds_p50;
  j["wait_seconds_p99"] = m.wait_seconds_p99;
  j["wait_by_qos"] = QosWaitsJson(m.wait_by_qos);
  j["wait_by_qos_admitted"] = QosWaitsJson(m.wait_by_qos_admitted);
  j["jain_fairness"] = m.jain_fairness;
  j["jain_fairness_top_level"] = m.jain_fairness_top_level;
  j["jain_fairness_with_best_effort"] = m.jain_fairness_with_best_effort;
  j["jain_loss_pct_by_smallest_waiting_job"] = m.jain_loss_by_smallest_waiting_job;
  nlohmann::json fb = nlohmann::json::object();
  for (const sim::TenantFairness& f : m.fairness_by_tenant)
    fb[f.tenant] = {{"hours_waiting", f.hours_waiting},
                    {"relative_share_while_waiting", f.relative_share_while_waiting},
                    {"jain_loss_pct", f.jain_loss_pct}};
  j["fairness_by_tenant"] = fb;
  j["guarantee_violations"] = m.guarantee_violations;
  j["preemptions"] = m.preemptions;
  j["preemptions_by_cause"] = m.preemptions_by_cause;
  j["gpu_allocation_wasted_pct_by_cause"] = m.gpu_allocation_wasted_pct_by_cause;
  j["preemptions_by_kind"] = m.preemptions_by_kind;
  j["gpu_allocation_wasted_pct_by_kind"] = m.gpu_allocation_wasted_pct_by_kind;
  j["consolidation_moves"] = m.consolidation_moves;
  j["scheduling_cycles"] = m.cycles;
  j["mean_pending_by_reason"] = m.mean_pending_by_reason;
  j["wall_seconds"] = m.wall_seconds;
  nlohmann::json t = nlohmann::json::object();
  for (const auto& [name, w] : m.mean_wait_by_tenant) t[name] = w;
  j["mean_wait_seconds_by_tenant"] = t;
  j["allocation_pct_by_hour"] = m.allocation_by_hour;
  return j;
}

// "fair_share" -> "fair share" (ModeMetrics::preemptions_by_cause keys, for people).
std::string CauseName(const std::string& cause) {
  if (cause == "fair_share") return "fair share";
  if (cause == "restart_move") return "moves with a restart";
  return cause;
}

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The static drawing of a build without uPlot (report_charts.h): a horizontal bar chart, one pair
// of bars (dedicated, shared) per name.
std::string Bars(const std::vector<std::string>& names, const std::vector<double>& dv,
                 const std::vector<double>& sv, std::string (*format)(double)) {
  const int W = 900, bh = 14, gap = 8, LW = 120;
  const std::string dedicated_colour(kReportPalette[kDedicatedColour]), shared_colour(kReportPalette[kSharedColour]);
  double maxv = 1e-9;
  for (double v : dv) maxv = std::isnan(v) ? maxv : std::max(maxv, v);
  for (double v : sv) maxv = std::isnan(v) ? maxv : std::max(maxv, v);
  const int SH = static_cast<int>(names.size()) * (2 * bh + gap) + 20;
  std::string h = "<svg width=\"" + std::to_string(W) + "\" height=\"" + std::to_string(SH) + "\" role=\"img\">";
  auto bar = [&](double y, double v, const std::string& color) {
    if (std::isnan(v))
      return "<text x=\"" + std::to_string(LW) + "\" y=\"" + Fmt("%.0f", y + bh - 2) +
             "\" font-size=\"10\" fill=\"" + color + "\">never waited</text>";
    const double w = (W - LW - 80) * v / maxv;
    return "<rect x=\"" + std::to_string(LW) + "\" y=\"" + Fmt("%.0f", y) + "\" width=\"" +
           Fmt("%.1f", w) + "\" height=\"" + std::to_string(bh) + "\" fill=\"" + color +
           "\"/><text x=\"" + Fmt("%.0f", LW + w + 4) + "\" y=\"" + Fmt("%.0f", y + bh - 2) +
           "\" font-size=\"10\">" + format(v) + "</text>";
  };
  for (size_t i = 0; i < names.size(); ++i) {
    const double y = static_cast<double>(i) * (2 * bh + gap);
    h += "<text x=\"0\" y=\"" + Fmt("%.0f", y + bh + 4) + "\" font-size=\"11\">" + HtmlEscape(names[i]) + "</text>";
    h += bar(y, i < dv.size() ? dv[i] : 0.0, dedicated_colour);
    h += bar(y + bh, i < sv.size() ? sv[i] : 0.0, shared_colour);
  }
  return h + "</svg>";
}

std::string Ratio(double v) { return Fmt("%.2f", v); }

// The static drawing of allocation per hour (two lines), for a build without uPlot.
std::string AllocationSvg(const sim::ModeMetrics& d, const sim::ModeMetrics& s) {
  const int W = 900, H = 260, L = 50, B = 30;
  const size_t n = std::max(d.allocation_by_hour.size(), s.allocation_by_hour.size());
  auto poly = [&](const std::vector<double>& v, std::string_view color) {
    std::string p = "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"1.5\" points=\"";
    for (size_t i = 0; i < v.size(); ++i)
      p += Fmt("%.1f", L + (W - L - 10) * static_cast<double>(i) / std::max<size_t>(1, n - 1)) + "," +
           Fmt("%.1f", (H - B) - (H - B - 10) * std::min(100.0, v[i]) / 100.0) + " ";
    return p + "\"/>";
  };
  std::string h = "<svg width=\"" + std::to_string(W) + "\" height=\"" + std::to_string(H) + "\" role=\"img\">";
  for (int pct = 0; pct <= 100; pct += 25) {
    const double y = (H - B) - (H - B - 10) * pct / 100.0;
    h += "<line x1=\"" + std::to_string(L) + "\" x2=\"" + std::to_string(W - 10) + "\" y1=\"" +
         Fmt("%.1f", y) + "\" y2=\"" + Fmt("%.1f", y) + "\" stroke=\"#eee\"/><text x=\"5\" y=\"" +
         Fmt("%.1f", y + 4) + "\" font-size=\"11\">" + std::to_string(pct) + "%</text>";
  }
  h += poly(d.allocation_by_hour, kReportPalette[kDedicatedColour]) + poly(s.allocation_by_hour, kReportPalette[kSharedColour]);
  h += "<text x=\"" + std::to_string(L) + "\" y=\"" + std::to_string(H - 8) + "\" font-size=\"11\">hour 0 … " +
       std::to_string(n) + " — vermillion: dedicated, blue: shared</text></svg>";
  return h;
}

// The metrics table: dedicated and shared side by side; waits in h/min.
std::string ResultsTable(const sim::ModeMetrics& d, const sim::ModeMetrics& s) {
  std::string h = "<table><tr><th>metric</th><th>dedicated</th><th>shared</th></tr>";
  auto text_row = [&](const std::string& name, const std::string& a, const std::string& b) {
    h += "<tr><td>" + HtmlEscape(name) + "</td><td>" + a + "</td><td>" + b + "</td></tr>";
  };
  auto row = [&](const std::string& name, double a, double b, const char* f) { text_row(name, Fmt(f, a), Fmt(f, b)); };
  row("GPU allocation: requested by running jobs (time-averaged, %)", d.gpu_allocation_pct, s.gpu_allocation_pct, "%.1f");
  row("of which runs that preemptions threw away (%)", d.gpu_allocation_wasted_pct, s.gpu_allocation_wasted_pct, "%.1f");
  for (const auto& [kind, v] : s.gpu_allocation_wasted_pct_by_kind)
    row("thrown away by preempting " + kind + " jobs (%)", d.gpu_allocation_wasted_pct_by_kind.at(kind), v, "%.1f");
  row("useful GPU allocation: the rest (%)", d.gpu_allocation_useful_pct, s.gpu_allocation_useful_pct, "%.1f");
  row("GPU held, whole GPUs for fractional jobs in dedicated (%)", d.gpu_held_pct, s.gpu_held_pct, "%.1f");
  row("jobs completed", static_cast<double>(d.jobs_completed), static_cast<double>(s.jobs_completed), "%.0f");
  row("jobs rejected", static_cast<double>(d.jobs_rejected), static_cast<double>(s.jobs_rejected), "%.0f");
  text_row("wait p50", FormatWait(d.wait_seconds_p50), FormatWait(s.wait_seconds_p50));
  text_row("wait p99", FormatWait(d.wait_seconds_p99), FormatWait(s.wait_seconds_p99));
  text_row("Guaranteed wait p99", FormatWait(GuaranteedP99(d.wait_by_qos)), FormatWait(GuaranteedP99(s.wait_by_qos)));
  row("Jain's fairness (tenants waiting with Guaranteed/Burstable work)", d.jain_fairness, s.jain_fairness, "%.3f");
  row("Jain's fairness among organisations", d.jain_fairness_top_level, s.jain_fairness_top_level, "%.3f");
  row("Jain's fairness, also tenants waiting with BestEffort work only", d.jain_fairness_with_best_effort,
      s.jain_fairness_with_best_effort, "%.3f");
  row("guarantee violations (tenant-seconds)", d.guarantee_violations, s.guarantee_violations, "%.0f");
  row("preemptions", static_cast<double>(d.preemptions), static_cast<double>(s.preemptions), "%.0f");
  for (const auto& [kind, n] : s.preemptions_by_kind)
    row("preemptions of " + kind + " jobs", static_cast<double>(d.preemptions_by_kind.at(kind)), static_cast<double>(n), "%.0f");
  for (const auto& [cause, n] : s.preemptions_by_cause) {
    row("preemptions by " + CauseName(cause), static_cast<double>(d.preemptions_by_cause.at(cause)),
        static_cast<double>(n), "%.0f");
    row("allocation thrown away by " + CauseName(cause) + " (%)", d.gpu_allocation_wasted_pct_by_cause.at(cause),
        s.gpu_allocation_wasted_pct_by_cause.at(cause), "%.1f");
  }
  return h + "</table>";
}

// The charts, each after its heading; `specs` collects them for RenderChartAssets.
std::string Charts(const DedicatedVsSharedResult& r, std::vector<ChartSpec>& specs) {
  const sim::ModeMetrics &d = r.dedicated, &s = r.shared;
  std::string h;
  auto add = [&](const std::string& heading, ChartSpec c) {
    h += "<h2>" + HtmlEscape(heading) + "</h2>" + RenderChart(c);
    specs.push_back(std::move(c));
  };
  ChartSpec useful{.id = "useful", .title = "Useful and re-run GPU allocation (time-averaged)", .kind = ChartKind::kBars,
                   .x_label = "cluster", .categories = {"dedicated", "shared"},
                   .y_label = "GPU allocation (% of the cluster)", .y_unit = "%",
                   .bound = r.allocation_upper_bound_pct, .bound_label = "upper bound on useful allocation, any scheduler"};
  useful.series = {{.name = "useful", .y = {d.gpu_allocation_useful_pct, s.gpu_allocation_useful_pct}, .color = 2},
                   {.name = "re-run (thrown away by preemptions)",
                    .y = {d.gpu_allocation_wasted_pct, s.gpu_allocation_wasted_pct}, .color = 0}};
  add("Useful vs re-run GPU allocation, with the upper bound", std::move(useful));

  const size_t n = std::max(d.allocation_by_hour.size(), s.allocation_by_hour.size());
  ChartSpec alloc{.id = "alloc", .title = "GPU allocation per hour", .x_label = "simulated time since the start",
                  .x_unit = "h", .y_label = "GPU allocation (% of the cluster)", .y_unit = "%", .width = 900};
  for (size_t i = 0; i < n; ++i) alloc.x.push_back(static_cast<double>(i));
  auto padded = [n](std::vector<double> v) { v.resize(n, std::nan("")); return v; };
  alloc.series = {{.name = "dedicated", .y = padded(d.allocation_by_hour), .color = kDedicatedColour},
                  {.name = "shared", .y = padded(s.allocation_by_hour), .color = kSharedColour}};
  alloc.fallback_svg = AllocationSvg(d, s);
  add("GPU allocation over time (% of the cluster, per hour)", std::move(alloc));

  // Per tenant: mean wait, and the share it got while it waited.
  std::vector<std::string> names;
  std::vector<double> dw, sw, dr, sr;
  for (size_t i = 0; i < d.mean_wait_by_tenant.size(); ++i) {
    names.push_back(d.mean_wait_by_tenant[i].first);
    dw.push_back(d.mean_wait_by_tenant[i].second);
    sw.push_back(i < s.mean_wait_by_tenant.size() ? s.mean_wait_by_tenant[i].second : 0.0);
    auto rel = [&](const sim::ModeMetrics& m) {
      if (i >= m.fairness_by_tenant.size() || m.fairness_by_tenant[i].hours_waiting == 0)
        return std::numeric_limits<double>::quiet_NaN();  // "never waited"
      return m.fairness_by_tenant[i].relative_share_while_waiting;
    };
    dr.push_back(rel(d));
    sr.push_back(rel(s));
  }
  auto per_tenant = [&](const char* id, const char* title, const char* y_label, const char* unit,
                        const std::vector<double>& a, const std::vector<double>& b, std::string svg) {
    ChartSpec c{.id = id, .title = title, .kind = ChartKind::kDots, .x_label = "tenant", .categories = names,
                .y_label = y_label, .y_unit = unit, .width = 900, .fallback_svg = std::move(svg)};
    c.series = {{.name = "dedicated", .y = a, .color = kDedicatedColour}, {.name = "shared", .y = b, .color = kSharedColour}};
    return c;
  };
  add("Mean wait per tenant (vermillion: dedicated, blue: shared)",
      per_tenant("wait", "Mean wait per tenant", "mean wait", "duration", dw, sw, Bars(names, dw, sw, FormatWait)));
  add("Share while waiting with Guaranteed/Burstable work, relative to the mean of the waiting tenants "
      "(1 = served like the others; no mark: never waited)",
      per_tenant("share", "Share while waiting, relative to the waiting tenants' mean", "relative share", "", dr, sr,
                 Bars(names, dr, sr, Ratio)));
  return h;
}

nlohmann::json Params(const DedicatedVsSharedResult& r);

std::string Html(const DedicatedVsSharedResult& r, const std::string& sections,
                 const std::vector<ChartSpec>& section_charts) {
  const sim::ModeMetrics &d = r.dedicated, &s = r.shared;
  std::string h = "<!doctype html><html><head><meta charset=\"utf-8\"><title>tessera: dedicated vs "
                  "shared</title><style>body{font-family:sans-serif;margin:2em;max-width:1000px}"
                  "table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
                  "text-align:right}th{background:#f4f4f4}td.l{text-align:left;word-break:break-all}"
                  "th:first-child,td:first-child{text-align:left}</style></head><body>";
  h += "<h1>Dedicated vs shared GPUs</h1><h2>Scenario parameters</h2>";
  std::vector<std::pair<std::string, std::string>> params;
  const nlohmann::json scenario = Params(r);
  for (const auto& [name, value] : scenario.items())
    params.emplace_back(name, value.is_string() ? value.get<std::string>() : value.dump());
  params.emplace_back("useful allocation upper bound, any scheduler (%)", Fmt("%.1f", r.allocation_upper_bound_pct));
  h += RenderParametersTable(params);
  h += "<h2>Results</h2>" + ResultsTable(d, s);
  std::vector<ChartSpec> specs;
  h += Charts(r, specs);
  h += "<h2>Where Jain's fairness loses (% of the loss, by the smallest job the under-served "
       "tenant had waiting)</h2><table><tr><th>smallest waiting job</th><th>dedicated</th><th>shared</th></tr>";
  for (const auto& [bucket, v] : s.jain_loss_by_smallest_waiting_job) {
    const auto it = d.jain_loss_by_smallest_waiting_job.find(bucket);
    h += "<tr><td>" + HtmlEscape(bucket) + "</td><td>" +
         Fmt("%.1f", it == d.jain_loss_by_smallest_waiting_job.end() ? 0.0 : it->second) + "</td><td>" +
         Fmt("%.1f", v) + "</td></tr>";
  }
  h += "</table>";
  specs.insert(specs.end(), section_charts.begin(), section_charts.end());
  h += sections + RenderChartAssets(specs) + "</body></html>\n";
  return h;
}

nlohmann::json Params(const DedicatedVsSharedResult& r) {
  const DedicatedVsSharedSpec& f = r.spec;
  return {{"quotas", f.quotas_path}, {"pods", f.pods_path}, {"nodes", f.nodes_path},
          {"node_stride", f.node_stride}, {"gpus", r.gpus},
          {"time_compression", f.compression}, {"days", f.days},
          {"best_effort_fraction", f.best_effort_fraction},
          {"guaranteed_fraction", f.guaranteed_fraction},
          {"submission_window_s", f.submission_window}, {"tenant_arrivals", f.tenant_arrivals},
          {"min_runtime_s", f.min_runtime},
          {"half_life_s", f.half_life},
          {"fair_share_defrag", f.fair_share_defrag},
          {"checkpoint_interval_s", f.checkpoint_interval},
          {"service_qos", f.service_qos}, {"service_startup_s", f.service_startup},
          {"service_jobs", r.service_jobs},
          {"fair_share_max_victim_run_s", f.fair_share_max_victim_run},
          {"fair_share_rule", f.fair_share_rule},
          {"clearable_nodes", !f.no_clearable_nodes}, {"seed", f.seed}, {"placement", f.placement},
          {"jobs", r.jobs}};
}

// "LS,BE" -> {"LS", "BE"}; "" -> {} (no services). INVALID_ARGUMENT for an empty label.
StatusOr<std::vector<std::string>> ServiceQos(const std::string& list) {
  std::vector<std::string> out;
  if (list.empty()) return out;
  size_t from = 0;
  while (true) {
    const size_t comma = list.find(',', from);
    std::string label = list.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
    if (label.empty()) return InvalidArgumentError("service qos '" + list + "': an empty label");
    out.push_back(std::move(label));
    if (comma == std::string::npos) return out;
    from = comma + 1;
  }
}

}  // namespace

StatusOr<DedicatedVsSharedResult> RunDedicatedVsShared(const DedicatedVsSharedSpec& f, const GpuModelCatalog& catalog,
                                                       std::ostream* progress) {
  if (f.node_stride < 1) return InvalidArgumentError("node stride must be >= 1");
  TESSERA_ASSIGN_OR_RETURN(config::QuotaFile quota, config::LoadQuotaFile(f.quotas_path, catalog));
  TESSERA_ASSIGN_OR_RETURN(std::vector<placement::NodeSpec> all_nodes, ReadNodeList(f.nodes_path, catalog));
  std::vector<placement::NodeSpec> nodes;
  for (size_t i = 0; i < all_nodes.size(); i += static_cast<size_t>(f.node_stride)) nodes.push_back(all_nodes[i]);
  sched::Resources cap = sched::Resources::Filled(sched::kUnlimited);
  cap[sched::kGpuMilliDim] = 0;
  for (const auto& n : nodes) cap[sched::kGpuMilliDim] += int64_t{n.gpu_count} * kWholeGpu.value();
  if (Status st = quota.tenants.CheckFits(cap); !st.ok())
    return InvalidArgumentError(f.quotas_path + ": " + st.message() + " (--node-stride " +
                                std::to_string(f.node_stride) + ")");
  TESSERA_ASSIGN_OR_RETURN(std::vector<TimedPod> pods, ReadTimedPods(f.pods_path, catalog));
  TESSERA_ASSIGN_OR_RETURN(std::vector<double> skew, ReadAppSkew(f.app_skew_path));
  std::vector<std::vector<double>> arrivals;
  if (f.tenant_arrivals == "app-profile") {
    TESSERA_ASSIGN_OR_RETURN(arrivals, ReadAppArrivals(f.app_arrivals_path));
  } else if (f.tenant_arrivals != "skew") {
    return InvalidArgumentError("tenant arrivals: '" + f.tenant_arrivals + "' is neither skew nor app-profile");
  }
  WorkloadOptions wo;
  wo.app_arrivals = arrivals.empty() ? nullptr : &arrivals;
  wo.time_compression = f.compression;
  wo.horizon = sched::Seconds{static_cast<int64_t>(f.days * 86400)};
  wo.best_effort_fraction = f.best_effort_fraction;
  wo.guaranteed_fraction = f.guaranteed_fraction;
  wo.submission_window = sched::Seconds{f.submission_window};
  wo.seed = f.seed;
  TESSERA_ASSIGN_OR_RETURN(wo.service_qos, ServiceQos(f.service_qos));
  if (f.service_startup < 0) return InvalidArgumentError("service start-up must be >= 0 seconds");
  wo.service_startup = sched::Seconds{f.service_startup};
  TESSERA_ASSIGN_OR_RETURN(std::vector<WorkloadJob> jobs, BuildTenantWorkload(pods, quota.tenants, skew, wo));
  std::vector<placement::TaskRequest> tasks;
  for (const auto& w : jobs) tasks.push_back(w.job.pod);
  const placement::TargetWorkload target = placement::TargetWorkload::FromTasks(tasks);
  ScenarioOptions so;
  so.horizon = wo.horizon;
  so.scheduler.placement_policy = f.placement;
  so.scheduler.target_workload = &target;
  so.scheduler.min_runtime = sched::Seconds{f.min_runtime};
  so.scheduler.fair_share_half_life_s = f.half_life;
  so.scheduler.fair_share_defragmentation = f.fair_share_defrag;
  so.scheduler.keep_large_nodes_clearable = !f.no_clearable_nodes;
  so.checkpoint_interval = sched::Seconds{f.checkpoint_interval};
  so.restart_at = sched::Seconds{f.restart_at};
  so.scheduler.fair_share_max_victim_runtime = sched::Seconds{f.fair_share_max_victim_run};
  TESSERA_ASSIGN_OR_RETURN(so.scheduler.fair_share_rule, sched::ParseFairShareRule(f.fair_share_rule));
  so.scheduler.seed = f.seed;
  if (progress != nullptr)
    *progress << "scenario dedicated-vs-shared: " << jobs.size() << " jobs, " << nodes.size() << " nodes, "
              << cap[sched::kGpuMilliDim] / 1000 << " GPUs, " << quota.tenants.size() << " tenants\n";
  DedicatedVsSharedResult r;
  r.spec = f;
  TESSERA_ASSIGN_OR_RETURN(r.dedicated, RunDedicated(quota.tenants, nodes, jobs, so));
  if (progress != nullptr) *progress << "  dedicated done in " << Fmt("%.1f", r.dedicated.wall_seconds) << " s\n";
  TESSERA_ASSIGN_OR_RETURN(r.shared, RunShared(quota.tenants, nodes, jobs, so));
  if (progress != nullptr) *progress << "  shared done in " << Fmt("%.1f", r.shared.wall_seconds) << " s\n";
  r.gpus = cap[sched::kGpuMilliDim] / 1000;
  r.jobs = jobs.size();
  for (const auto& w : jobs) r.service_jobs += w.job.kind == sched::JobKind::kService ? 1 : 0;
  // The useful allocation any scheduler could reach on this workload and capacity.
  r.allocation_upper_bound_pct = AllocationUpperBoundPct(jobs, cap[sched::kGpuMilliDim], wo.horizon);
  const ModeMetrics& d = r.dedicated;
  const ModeMetrics& s = r.shared;
  r.checks.useful_allocation_1_5x = s.gpu_allocation_useful_pct >= 1.5 * d.gpu_allocation_useful_pct;
  r.checks.guaranteed_p99_wait = GuaranteedP99(s.wait_by_qos) <= GuaranteedP99(d.wait_by_qos);
  r.checks.zero_guarantee_violations = s.guarantee_violations == 0;
  r.checks.jain_0_9 = s.jain_fairness >= 0.9;
  if (f.ledger)
    r.ledger = RenderScenarioLedger(quota.tenants, nodes, jobs, wo.horizon, catalog, s.guaranteed_wait_p99_by_hour);
  return r;
}

std::string RenderDedicatedVsSharedTable(const DedicatedVsSharedResult& r) {
  const ModeMetrics& d = r.dedicated;
  const ModeMetrics& s = r.shared;
  std::string out;
  auto printf_line = [&out](const std::string& name, const std::string& a, const std::string& b) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%-40s %12s %12s\n", name.c_str(), a.c_str(), b.c_str());
    out += buf;
  };
  printf_line("dedicated vs shared", "dedicated", "shared");
  auto line = [&](const std::string& name, double a, double b, const char* fmt) {
    printf_line(name, Fmt(fmt, a), Fmt(fmt, b));
  };
  line("GPU allocation (requested), avg (%)", d.gpu_allocation_pct, s.gpu_allocation_pct, "%.1f");
  line("  of which runs preemptions threw away (%)", d.gpu_allocation_wasted_pct,
       s.gpu_allocation_wasted_pct, "%.1f");
  for (const auto& [cause, v] : s.gpu_allocation_wasted_pct_by_cause)
    line(("    by " + CauseName(cause)), d.gpu_allocation_wasted_pct_by_cause.at(cause), v, "%.1f");
  for (const auto& [kind, v] : s.gpu_allocation_wasted_pct_by_kind)
    line(("    preempting " + kind + " jobs"), d.gpu_allocation_wasted_pct_by_kind.at(kind), v, "%.1f");
  line("  useful (the rest) (%)", d.gpu_allocation_useful_pct, s.gpu_allocation_useful_pct, "%.1f");
  line("GPU held (incl. whole-GPU rounding) (%)", d.gpu_held_pct, s.gpu_held_pct, "%.1f");
  line("CPU allocation, time-averaged (%)", d.cpu_allocation_pct, s.cpu_allocation_pct, "%.1f");
  line("jobs completed", static_cast<double>(d.jobs_completed), static_cast<double>(s.jobs_completed), "%.0f");
  line("jobs rejected (can never fit)", static_cast<double>(d.jobs_rejected), static_cast<double>(s.jobs_rejected), "%.0f");
  line("wait p50 (s)", d.wait_seconds_p50, s.wait_seconds_p50, "%.0f");
  line("wait p99 (s)", d.wait_seconds_p99, s.wait_seconds_p99, "%.0f");
  for (const char* q : {"Guaranteed", "Burstable", "BestEffort"}) {
    auto dv = d.wait_by_qos.count(q) ? d.wait_by_qos.at(q) : std::pair<double, double>{0, 0};
    auto sv = s.wait_by_qos.count(q) ? s.wait_by_qos.at(q) : std::pair<double, double>{0, 0};
    line((std::string("  ") + q + " wait p50 (s)"), dv.first, sv.first, "%.0f");
    line((std::string("  ") + q + " wait p99 (s)"), dv.second, sv.second, "%.0f");
  }
  line("  Guaranteed p99, admitted jobs only (s)", GuaranteedP99(d.wait_by_qos_admitted),
       GuaranteedP99(s.wait_by_qos_admitted), "%.0f");
  line("Jain's fairness (tenants waiting with G/B work)", d.jain_fairness, s.jain_fairness, "%.3f");
  line("  same among top-level tenants", d.jain_fairness_top_level, s.jain_fairness_top_level, "%.3f");
  line("  incl. tenants waiting with BestEffort only", d.jain_fairness_with_best_effort,
       s.jain_fairness_with_best_effort, "%.3f");
  for (const auto& [bucket, v] : s.jain_loss_by_smallest_waiting_job) {
    const double dv = d.jain_loss_by_smallest_waiting_job.count(bucket) ? d.jain_loss_by_smallest_waiting_job.at(bucket) : 0.0;
    line(("  loss (%), smallest job " + bucket), dv, v, "%.1f");
  }
  line("guarantee violations (tenant-seconds)", d.guarantee_violations, s.guarantee_violations, "%.0f");
  line("preemptions", static_cast<double>(d.preemptions), static_cast<double>(s.preemptions), "%.0f");
  for (const auto& [cause, n] : s.preemptions_by_cause)
    line(("  by " + CauseName(cause)), static_cast<double>(d.preemptions_by_cause.at(cause)),
         static_cast<double>(n), "%.0f");
  for (const auto& [kind, n] : s.preemptions_by_kind)
    line(("  of " + kind + " jobs"), static_cast<double>(d.preemptions_by_kind.at(kind)), static_cast<double>(n), "%.0f");
  for (const auto& [reason, v] : s.mean_pending_by_reason) {
    const double dv = d.mean_pending_by_reason.count(reason) ? d.mean_pending_by_reason.at(reason) : 0.0;
    line(("  mean jobs waiting on " + reason), dv, v, "%.1f");
  }
  line("consolidation moves", static_cast<double>(d.consolidation_moves), static_cast<double>(s.consolidation_moves), "%.0f");
  const double bound = r.allocation_upper_bound_pct;
  char buf[512];
  std::snprintf(buf, sizeof buf, "useful allocation upper bound (any scheduler): %.1f %% = %.2fx dedicated's useful\n",
                bound, d.gpu_allocation_useful_pct > 0 ? bound / d.gpu_allocation_useful_pct : 0.0);
  out += buf;
  const DedicatedVsSharedChecks& c = r.checks;
  std::snprintf(buf, sizeof buf,
                "\nchecks: useful allocation >= 1.5x dedicated %s (%.2fx; raw %.2fx); Guaranteed p99 wait "
                "<= dedicated %s; zero guarantee violations %s; Jain >= 0.9 %s\n",
                c.useful_allocation_1_5x ? "PASS" : "FAIL",
                d.gpu_allocation_useful_pct > 0 ? s.gpu_allocation_useful_pct / d.gpu_allocation_useful_pct : 0.0,
                d.gpu_allocation_pct > 0 ? s.gpu_allocation_pct / d.gpu_allocation_pct : 0.0,
                c.guaranteed_p99_wait ? "PASS" : "FAIL", c.zero_guarantee_violations ? "PASS" : "FAIL",
                c.jain_0_9 ? "PASS" : "FAIL");
  out += buf;
  return out;
}

std::string RenderDedicatedVsSharedJson(const DedicatedVsSharedResult& r) {
  const DedicatedVsSharedChecks& c = r.checks;
  nlohmann::json j = {{"scenario", Params(r)}, {"dedicated", ToJson(r.dedicated)}, {"shared", ToJson(r.shared)},
                      {"allocation_upper_bound_pct", r.allocation_upper_bound_pct},
                      {"checks", {{"useful_allocation_1_5x", c.useful_allocation_1_5x}, {"guaranteed_p99_wait", c.guaranteed_p99_wait},
                                  {"zero_guarantee_violations", c.zero_guarantee_violations},
                                  {"jain_0_9", c.jain_0_9}}}};
  return j.dump(2) + "\n";
}

std::string RenderDedicatedVsSharedHtml(const DedicatedVsSharedResult& r, const std::string& sections,
                                        const std::vector<ChartSpec>& section_charts) {
  return Html(r, sections, section_charts);
}

}  // namespace tessera::sim
