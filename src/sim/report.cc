#include "tessera/sim/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include "tessera/core/html.h"
#include "tessera/sim/report_charts.h"

namespace tessera::sim {
namespace {

std::string Fixed(double v, int digits = 2) {
  if (std::isnan(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

nlohmann::json Num(double v) { return std::isnan(v) ? nlohmann::json(nullptr) : nlohmann::json(v); }

std::string Pad(const std::string& s, size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

struct Series {
  std::string name;
  std::vector<double> y;  // index = x
};

// A line chart of y over x = x_lo..x_hi (whole percent buckets): the static drawing of a build
// without uPlot (report_charts.h).
std::string SvgChart(const std::string& title, const std::string& y_label, const std::vector<Series>& series,
                     int x_lo, int x_hi) {
  const double W = 640, H = 360, L = 60, R = 150, T = 30, B = 45;
  double y_lo = 1e300, y_hi = -1e300;
  for (const Series& s : series) {
    for (int x = x_lo; x <= x_hi && x < static_cast<int>(s.y.size()); ++x) {
      if (std::isnan(s.y[x])) continue;
      y_lo = std::min(y_lo, s.y[x]);
      y_hi = std::max(y_hi, s.y[x]);
    }
  }
  if (y_lo > y_hi) {
    y_lo = 0;
    y_hi = 1;
  }
  // "Nice" axis: a step of 1, 2 or 5 x 10^k giving about five intervals.
  const double raw_step = std::max(1e-9, (y_hi - y_lo) / 5.0);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * magnitude >= raw_step) {
      step = m * magnitude;
      break;
    }
  }
  y_lo = std::floor(y_lo / step) * step;
  y_hi = std::ceil(y_hi / step) * step;
  if (y_hi <= y_lo) y_hi = y_lo + step;
  auto px = [&](double x) { return L + (x - x_lo) / std::max(1, x_hi - x_lo) * (W - L - R); };
  auto py = [&](double y) { return T + (y_hi - y) / (y_hi - y_lo) * (H - T - B); };
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>";
  o << "<text x='" << W / 2 - 60 << "' y='18' font-weight='bold'>" << HtmlEscape(title) << "</text>";
  // Axes and grid.
  for (double y = y_lo; y <= y_hi + step / 2; y += step) {
    o << "<line x1='" << L << "' x2='" << W - R << "' y1='" << py(y) << "' y2='" << py(y)
      << "' stroke='#ddd'/><text x='" << L - 6 << "' y='" << py(y) + 4 << "' text-anchor='end'>"
      << Fixed(y, step < 1 ? 1 : 0) << "</text>";
  }
  const int x_step = (x_hi - x_lo) > 60 ? 10 : 5;
  for (int x = x_lo; x <= x_hi; x += x_step) {
    o << "<line x1='" << px(x) << "' x2='" << px(x) << "' y1='" << T << "' y2='" << H - B
      << "' stroke='#eee'/><text x='" << px(x) << "' y='" << H - B + 16 << "' text-anchor='middle'>" << x
      << "</text>";
  }
  o << "<text x='" << (L + W - R) / 2 << "' y='" << H - 8
    << "' text-anchor='middle'>arrived GPU request (% of capacity)</text>";
  o << "<text transform='translate(14," << (T + H - B) / 2 << ") rotate(-90)' text-anchor='middle'>"
    << HtmlEscape(y_label) << "</text>";
  o << "<rect x='" << L << "' y='" << T << "' width='" << W - L - R << "' height='" << H - T - B
    << "' fill='none' stroke='#444'/>";
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    const std::string color(kReportPalette[i % kReportPalette.size()]);
    std::string path;
    bool pen_down = false;
    for (int x = x_lo; x <= x_hi && x < static_cast<int>(s.y.size()); ++x) {
      if (std::isnan(s.y[x])) {
        pen_down = false;
        continue;
      }
      path += (pen_down ? " L" : " M") + Fixed(px(x), 1) + "," + Fixed(py(s.y[x]), 1);
      pen_down = true;
    }
    o << "<path d='" << path << "' fill='none' stroke='" << color << "' stroke-width='2'/>";
    const double ly = T + 10 + 18.0 * static_cast<double>(i);
    o << "<line x1='" << W - R + 10 << "' x2='" << W - R + 30 << "' y1='" << ly << "' y2='" << ly
      << "' stroke='" << color << "' stroke-width='3'/><text x='" << W - R + 35 << "' y='" << ly + 4
      << "'>" << HtmlEscape(s.name) << "</text>";
  }
  o << "</svg>";
  return o.str();
}

}  // namespace

std::string RenderSummaryTable(const std::vector<RunSummary>& summaries, const ArtifactReference* ref) {
  // Columns widen for long pod-list or policy names (at least one space to the next column).
  size_t name_w = 26, policy_w = 14;
  for (const RunSummary& s : summaries) {
    name_w = std::max(name_w, s.pods_name.size() + 1);
    policy_w = std::max(policy_w, s.policy.size() + 1);
  }
  std::ostringstream o;
  o << Pad("pod list", name_w, true) << Pad("policy", policy_w, true) << Pad("runs", 5) << Pad("unalloc@100%", 14)
    << Pad("[min-max]", 15) << Pad("unalloc@130%", 14) << Pad("frag rate@100%", 16) << Pad("sec/run", 9);
  if (ref) o << Pad("artifact@100%", 15) << Pad("diff", 8) << Pad("tol", 6) << "  match";
  o << "\n";
  for (const RunSummary& s : summaries) {
    o << Pad(s.pods_name, name_w, true) << Pad(s.policy, policy_w, true) << Pad(std::to_string(s.runs), 5)
      << Pad(Fixed(s.unallocated_pct_at_100), 14)
      << Pad("[" + Fixed(s.unallocated_pct_at_100_min) + "-" + Fixed(s.unallocated_pct_at_100_max) + "]", 15)
      << Pad(Fixed(s.unallocated_pct_at_130), 14) << Pad(Fixed(s.frag_rate_pct_at_100, 1), 16)
      << Pad(Fixed(s.wall_seconds, 3), 9);
    if (ref) {
      if (const ArtifactEntry* e = ref->Find(s.pods_name, s.policy)) {
        const double a = e->MedianUnallocatedAt(100);
        const double diff = s.unallocated_pct_at_100 - a;
        const double tol = ToleranceAt100(*e);
        o << Pad(Fixed(a), 15) << Pad((diff >= 0 ? "+" : "") + Fixed(diff), 8) << Pad(Fixed(tol), 6)
          << (WithinToleranceAt100(*e, s.unallocated_pct_at_100) ? "  yes" : "  NO");
      } else {
        o << Pad("-", 15) << Pad("-", 8) << Pad("-", 6) << "  -";
      }
    }
    o << "\n";
  }
  return o.str();
}

std::string RenderHeadline(const std::vector<RunSummary>& summaries, const std::string& policy) {
  std::ostringstream o;
  for (const RunSummary& s : summaries) {
    if (s.policy != policy) continue;
    o << s.pods_name << ": " << policy << " leaves " << Fixed(s.unallocated_pct_at_100)
      << " % of GPU capacity unallocated at 100 % arrived";
    for (const RunSummary& f : summaries) {
      if (f.pods_name != s.pods_name || f.policy != "fgd" || policy == "fgd") continue;
      const double change = (s.unallocated_pct_at_100 - f.unallocated_pct_at_100) / f.unallocated_pct_at_100 * 100;
      o << " (fgd " << Fixed(f.unallocated_pct_at_100) << " %, " << (change >= 0 ? "+" : "") << Fixed(change, 1)
        << " %)";
    }
    o << "\n";
  }
  return o.str();
}

std::string RenderJson(const std::vector<ReplayResult>& runs, const std::vector<RunSummary>& summaries,
                       const ArtifactReference* ref) {
  nlohmann::json j;
  j["runs"] = nlohmann::json::array();
  for (const ReplayResult& r : runs) {
    j["runs"].push_back({
        {"policy", r.policy},
        {"seed", r.seed},
        {"pods", r.pods_name},
        {"unallocated_gpu_pct_at_100", Num(r.UnallocatedPctAt(100))},
        {"unallocated_gpu_pct_at_130", Num(r.UnallocatedPctAt(130))},
        {"frag_rate_pct_at_100", Num(r.FragRatePctAt(100))},
        {"frag_amount_pct_at_100", Num(r.FragAmountPctAt(100))},
        {"wall_seconds", r.wall_seconds},
        {"tasks_arrived", r.tasks_arrived},
        {"tasks_placed", r.tasks_placed},
        {"tasks_failed", r.tasks_failed},
        {"gpu_capacity_milli", r.gpu_capacity_milli},
        {"arrived_gpu_milli", r.arrived_gpu_milli},
        {"allocated_gpu_milli", r.allocated_gpu_milli},
        {"target_workload_types", r.target_workload_types},
    });
  }
  j["summary"] = nlohmann::json::array();
  for (const RunSummary& s : summaries) {
    nlohmann::json e = {
        {"pods", s.pods_name},
        {"policy", s.policy},
        {"runs", s.runs},
        {"median_unallocated_gpu_pct_at_100", Num(s.unallocated_pct_at_100)},
        {"min_unallocated_gpu_pct_at_100", Num(s.unallocated_pct_at_100_min)},
        {"max_unallocated_gpu_pct_at_100", Num(s.unallocated_pct_at_100_max)},
        {"median_unallocated_gpu_pct_at_130", Num(s.unallocated_pct_at_130)},
        {"median_frag_rate_pct_at_100", Num(s.frag_rate_pct_at_100)},
        {"median_wall_seconds", s.wall_seconds},
    };
    if (ref) {
      if (const ArtifactEntry* a = ref->Find(s.pods_name, s.policy)) {
        e["artifact_median_unallocated_gpu_pct_at_100"] = a->MedianUnallocatedAt(100);
        e["artifact_median_unallocated_gpu_pct_at_130"] = a->MedianUnallocatedAt(130);
        e["tolerance_pct"] = ToleranceAt100(*a);
        e["within_tolerance"] = WithinToleranceAt100(*a, s.unallocated_pct_at_100);
      }
    }
    j["summary"].push_back(e);
  }
  return j.dump(2) + "\n";
}

std::string RenderHtmlReport(const std::vector<RunSummary>& summaries, const ReportInputs& in,
                             const ArtifactReference* ref) {
  std::ostringstream o;
  o << "<!doctype html><html><head><meta charset='utf-8'><title>tessera simulate report</title>"
       "<style>body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}th{background:#f4f4f4}"
       "td.l{text-align:left}.no{color:#b00;font-weight:bold}.charts{display:flex;flex-wrap:wrap;gap:1em}"
       "code{background:#f4f4f4;padding:2px 4px}</style></head><body>";
  o << "<h1>tessera simulate: GPU placement replay</h1>";
  o << "<p>Replays a pod list through each placement policy with the FGD artifact's protocol "
       "(shuffle, inflate to " << Fixed(in.tune_ratio * 100, 0) << " % of GPU capacity, place once or drop). "
       "<b>Unallocated GPU %</b> is the share of the cluster's GPU capacity left unallocated when the "
       "arrived GPU request equals 100 % of capacity: lower is better.</p>";
  const std::string headline = RenderHeadline(summaries, "tessera");
  if (!headline.empty()) {
    o << "<p><b>Default policy:</b></p><pre>" << HtmlEscape(headline) << "</pre>";
  }
  std::vector<std::pair<std::string, std::string>> params = {
      {"command", in.command},
      {"nodes", in.nodes_path + " (" + std::to_string(in.node_count) + " nodes, " + std::to_string(in.gpu_count) +
                    " GPUs)"}};
  for (const auto& p : in.pods_paths) params.emplace_back("pods", p);
  params.emplace_back("seeds", in.seeds);
  params.emplace_back("inflation (tune ratio)", Fixed(in.tune_ratio * 100, 0) + " % of GPU capacity");
  o << "<h2>Inputs</h2>" << RenderParametersTable(params);

  o << "<h2>Results</h2><table><tr><th>pod list</th><th>policy</th><th>runs</th>"
       "<th>unallocated GPU % @100 (median)</th><th>min–max</th><th>unallocated GPU % @130</th>"
       "<th>frag rate % @100</th><th>seconds/run</th>";
  if (ref) o << "<th>artifact median @100</th><th>difference</th><th>tolerance</th><th>match</th>";
  o << "</tr>";
  for (const RunSummary& s : summaries) {
    o << "<tr><td class='l'>" << HtmlEscape(s.pods_name) << "</td><td class='l'>" << HtmlEscape(s.policy)
      << "</td><td>" << s.runs << "</td><td>" << Fixed(s.unallocated_pct_at_100) << "</td><td>"
      << Fixed(s.unallocated_pct_at_100_min) << "–" << Fixed(s.unallocated_pct_at_100_max) << "</td><td>"
      << Fixed(s.unallocated_pct_at_130) << "</td><td>" << Fixed(s.frag_rate_pct_at_100, 1) << "</td><td>"
      << Fixed(s.wall_seconds, 3) << "</td>";
    if (ref) {
      if (const ArtifactEntry* e = ref->Find(s.pods_name, s.policy)) {
        const double a = e->MedianUnallocatedAt(100);
        const double diff = s.unallocated_pct_at_100 - a;
        const bool ok = WithinToleranceAt100(*e, s.unallocated_pct_at_100);
        o << "<td>" << Fixed(a) << "</td><td>" << Fixed(diff) << "</td><td>" << Fixed(ToleranceAt100(*e))
          << "</td><td class='" << (ok ? "" : "no") << "'>" << (ok ? "yes" : "NO") << "</td>";
      } else {
        o << "<td>-</td><td>-</td><td>-</td><td>-</td>";
      }
    }
    o << "</tr>";
  }
  o << "</table>";
  // Charts per pod list.
  std::vector<std::string> lists;
  for (const RunSummary& s : summaries) {
    if (std::find(lists.begin(), lists.end(), s.pods_name) == lists.end()) lists.push_back(s.pods_name);
  }
  std::vector<ChartSpec> charts;
  for (size_t l = 0; l < lists.size(); ++l) {
    const std::string& list = lists[l];
    std::vector<Series> alloc, unalloc, rate;
    for (const RunSummary& s : summaries) {
      if (s.pods_name != list) continue;
      alloc.push_back({s.policy, s.alloc_pct_curve});
      Series u{s.policy, s.alloc_pct_curve};
      for (size_t x = 0; x < u.y.size(); ++x) u.y[x] = 100.0 - u.y[x];
      unalloc.push_back(u);
      rate.push_back({s.policy, s.frag_rate_pct_curve});
    }
    auto chart = [&](const char* id, const std::string& title, const std::string& y_label,
                     const std::vector<Series>& series, int x_lo, int x_hi) {
      ChartSpec c{.id = std::string(id) + "-" + std::to_string(l), .title = title,
                  .x_label = "arrived GPU request (% of capacity)", .x_unit = "%", .y_label = y_label, .y_unit = "%"};
      for (int x = x_lo; x <= x_hi; ++x) c.x.push_back(x);
      for (size_t i = 0; i < series.size(); ++i) {
        ChartSeries cs{.name = series[i].name, .color = static_cast<int>(i % kReportPalette.size())};
        for (int x = x_lo; x <= x_hi; ++x)
          cs.y.push_back(x < static_cast<int>(series[i].y.size()) ? series[i].y[x] : std::nan(""));
        c.series.push_back(std::move(cs));
      }
      c.fallback_svg = SvgChart(title, y_label, series, x_lo, x_hi);
      charts.push_back(c);
      return RenderChart(c);
    };
    o << "<h2>" << HtmlEscape(list) << "</h2><div class='charts'>";
    o << chart("alloc", "GPU allocation ratio (median over seeds)", "allocated GPU (% of capacity)", alloc, 0, 130);
    o << chart("unalloc", "Unallocated GPU near saturation", "unallocated GPU (% of capacity)", unalloc, 90, 130);
    o << chart("frag", "Fragmentation rate", "fragmented (% of free GPU)", rate, 0, 130);
    o << "</div>";
  }

  o << "<p>Data: Alibaba cluster-trace-gpu-v2023 (Weng et al., ATC'23), research and study use; "
       "see data/alibaba-gpu-2023/SOURCE.md.</p>" << RenderChartAssets(charts) << "</body></html>\n";
  return o.str();
}

}  // namespace tessera::sim
