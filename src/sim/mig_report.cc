// Reports of the MIG comparison (mig_replay.h): per-strategy rows, text tables, JSON and HTML.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tessera/core/html.h"
#include "tessera/sim/mig_replay.h"
#include "tessera/sim/report_charts.h"
#include "tessera/sim/sweep.h"

namespace tessera::sim {
namespace {

std::string Printf(const char* fmt, auto... args) {
  const int n = std::snprintf(nullptr, 0, fmt, args...);
  std::string out(static_cast<size_t>(n > 0 ? n : 0), '\0');
  std::snprintf(out.data(), out.size() + 1, fmt, args...);
  return out;
}

// The row of the baseline `name` (they always exist, after the engine rows).
const MigComparisonRow& Row(const MigComparisonReport& r, size_t from_end) {
  return r.rows[r.rows.size() - from_end];
}

}  // namespace

MigComparisonReport SummarizeMigComparison(const MigComparisonInput& in, const std::vector<MigComparisonRun>& runs,
                                           const std::string& model, const std::string& pods_path,
                                           const std::string& seeds_text) {
  MigComparisonReport r;
  r.model = model;
  r.pods_path = pods_path;
  r.seeds_text = seeds_text;
  r.seeds = in.seeds;
  r.gpus = in.gpus;
  r.gpus_per_node = in.gpus_per_node;
  const MigGeometry& g = *in.geometry;
  for (const std::string& p : in.policies) r.rows.push_back({"engine:" + p, "dynamic", {}, {}});
  r.rows.push_back({"mig_sim dynamic (standalone)", "dynamic", {}, {}});
  r.rows.push_back({"static, layouts planned for the mix", "static", {}, {}});
  r.rows.push_back({"static, best uniform layout", "static", {}, {}});
  auto stranded = [&](const partition::MigSimResult& m) {
    return static_cast<double>(m.capacity_slices - m.served_slices) / g.memory_slices;
  };
  for (const MigComparisonRun& run : runs) {
    size_t i = 0;
    for (const MigReplayResult& e : run.engine) {
      r.rows[i].unserved_pct.push_back(e.unserved_pct);
      r.rows[i++].stranded_gpus.push_back(e.stranded_gpus);
    }
    for (const partition::MigSimResult* m : {&run.standalone_dynamic, &run.planned_static, &run.best_static}) {
      r.rows[i].unserved_pct.push_back(m->unserved_pct);
      r.rows[i++].stranded_gpus.push_back(stranded(*m));
    }
    ++r.best_static_layouts[run.best_static.strategy];
  }
  if (in.pods != nullptr) {
    for (int p : MigProfilesOfPods(g, *in.pods)) ++r.demand_mix[g.profiles[static_cast<size_t>(p)].name];
  }
  return r;
}

std::string RenderMigComparisonTable(const MigComparisonReport& r) {
  std::string o = Printf("MIG serving of the trace's fractional tasks on %d x %s, nodes of %d GPUs (seeds %s)\n",
                         r.gpus, r.model.c_str(), r.gpus_per_node, r.seeds_text.c_str());
  o += Printf("pods: %s\ndemand mix (nearest profile):", r.pods_path.c_str());
  for (const auto& [p, n] : r.demand_mix) o += Printf(" %s=%d", p.c_str(), n);
  o += "\nunserved capacity when the requests reach 100 % of capacity (median over seeds):\n";
  o += Printf("  %-38s %-8s %11s %15s\n", "strategy", "kind", "unserved %", "stranded GPUs");
  for (const MigComparisonRow& row : r.rows) {
    o += Printf("  %-38s %-8s %11.2f %15.2f\n", row.name.c_str(), row.kind.c_str(), Median(row.unserved_pct),
                Median(row.stranded_gpus));
  }
  for (const auto& [l, n] : r.best_static_layouts) o += Printf("  best uniform layout in %d seed(s): %s\n", n, l.c_str());
  return o;
}

std::string RenderMigComparisonJson(const MigComparisonReport& r) {
  nlohmann::json strategies = nlohmann::json::array();
  for (const MigComparisonRow& row : r.rows) {
    strategies.push_back({{"name", row.name},
                          {"kind", row.kind},
                          {"unserved_pct", row.unserved_pct},
                          {"median_unserved_pct", Median(row.unserved_pct)},
                          {"stranded_gpus", row.stranded_gpus},
                          {"median_stranded_gpus", Median(row.stranded_gpus)}});
  }
  const nlohmann::json j = {{"mode", "mig"},
                            {"model", r.model},
                            {"gpus", r.gpus},
                            {"gpus_per_node", r.gpus_per_node},
                            {"pods", r.pods_path},
                            {"seeds", r.seeds},
                            {"demand_mix", r.demand_mix},
                            {"strategies", strategies},
                            {"best_static_layouts", r.best_static_layouts}};
  return j.dump(2) + "\n";
}

std::string RenderMigServingText(const MigComparisonReport& r) {
  const std::vector<double>& dyn = Row(r, 3).unserved_pct;
  const std::vector<double>& planned = Row(r, 2).unserved_pct;
  const std::vector<double>& best = Row(r, 1).unserved_pct;
  std::string o = Printf("MIG serving of the trace's fractional tasks on %d x %s (seeds %s)\n", r.gpus,
                         r.model.c_str(), r.seeds_text.c_str());
  o += "demand mix:";
  for (const auto& [p, n] : r.demand_mix) o += Printf(" %s=%d", p.c_str(), n);
  o += Printf("\nunserved capacity at arrived = 100 %% (median): dynamic %.2f %%, best uniform static layout %.2f %%, "
              "static layouts planned for the mix %.2f %%\n",
              Median(dyn), Median(best), Median(planned));
  for (const auto& [l, n] : r.best_static_layouts) o += Printf("  best static layout in %d seed(s): %s\n", n, l.c_str());
  return o;
}

std::string RenderMigServingJson(const MigComparisonReport& r) {
  const std::vector<double>& dyn = Row(r, 3).unserved_pct;
  const std::vector<double>& planned = Row(r, 2).unserved_pct;
  const std::vector<double>& best = Row(r, 1).unserved_pct;
  const nlohmann::json j = {{"model", r.model}, {"gpus", r.gpus}, {"pods", r.pods_path}, {"seeds", r.seeds_text},
                            {"demand_mix", r.demand_mix}, {"dynamic_unserved_pct", dyn},
                            {"static_unserved_pct", best}, {"median_dynamic_unserved_pct", Median(dyn)},
                            {"median_best_static_unserved_pct", Median(best)},
                            {"planned_static_unserved_pct", planned},
                            {"median_planned_static_unserved_pct", Median(planned)},
                            {"best_static_layouts", r.best_static_layouts}};
  return j.dump(2) + "\n";
}

std::string RenderMigComparisonHtml(const MigComparisonReport& r) {
  std::string h = "<!doctype html><html><head><meta charset=\"utf-8\"><title>tessera: MIG serving on " +
                  HtmlEscape(r.model) + "</title><style>body{font-family:sans-serif;margin:2em;max-width:1000px}"
                  "table{border-collapse:collapse;margin:0.5em 0}td,th{border:1px solid #ccc;padding:4px 8px;"
                  "text-align:right}th{background:#f4f4f4}td.l{text-align:left;word-break:break-all}"
                  "th:first-child,td:first-child{text-align:left}</style></head><body>";
  h += "<h1>MIG serving of the trace's fractional tasks: placement engine vs static layouts</h1>";
  h += "<p>Each fractional GPU task of the pod list asks for the nearest MIG profile; tasks arrive in a "
       "random order per seed until the requests reach 100 % of the GPUs' capacity. Unserved: the "
       "capacity (in memory slices) no instance serves at that point; stranded GPUs: the same in GPUs.</p>";
  h += "<h2>Parameters</h2>";
  std::string mix;
  for (const auto& [p, n] : r.demand_mix) mix += (mix.empty() ? "" : ", ") + p + " = " + std::to_string(n);
  h += RenderParametersTable({{"GPU model", r.model},
                              {"GPUs", std::to_string(r.gpus)},
                              {"GPUs per node", std::to_string(r.gpus_per_node)},
                              {"pod list", r.pods_path},
                              {"seeds", r.seeds_text + " (" + std::to_string(r.seeds.size()) + ")"},
                              {"demand mix (tasks per nearest profile)", mix}});
  h += "<h2>Results (median over seeds)</h2><table><tr><th>strategy</th><th>kind</th><th>unserved (%)</th>"
       "<th>stranded GPUs</th></tr>";
  for (const MigComparisonRow& row : r.rows) {
    h += "<tr><td>" + HtmlEscape(row.name) + "</td><td>" + HtmlEscape(row.kind) + "</td><td>" +
         Printf("%.2f", Median(row.unserved_pct)) + "</td><td>" + Printf("%.2f", Median(row.stranded_gpus)) +
         "</td></tr>";
  }
  h += "</table>";
  for (const auto& [l, n] : r.best_static_layouts)
    h += "<p>Best uniform layout in " + std::to_string(n) + " seed(s): " + HtmlEscape(l) + "</p>";
  // One bar per strategy (its median); one dot per strategy and seed.
  std::vector<std::string> names;
  std::vector<double> unserved, stranded;
  for (const MigComparisonRow& row : r.rows) {
    // Short axis labels (the table has the full names): they must not overlap at 900 px.
    const std::string name = row.name.starts_with("mig_sim") ? "mig_sim dynamic"
                             : row.name.starts_with("static, layouts planned") ? "static, planned"
                             : row.name.starts_with("static, best uniform") ? "static, best uniform"
                                                                             : row.name;
    names.push_back(name);
    unserved.push_back(Median(row.unserved_pct));
    stranded.push_back(Median(row.stranded_gpus));
  }
  std::vector<ChartSpec> specs;
  ChartSpec u{.id = "mig-unserved", .title = "Unserved capacity at 100 % arrived (median over seeds)",
              .kind = ChartKind::kBars, .x_label = "strategy", .categories = names,
              .y_label = "unserved capacity (% of the GPUs)", .y_unit = "%", .width = 900};
  u.series = {{.name = "median unserved", .y = unserved, .color = 4}};
  ChartSpec g{.id = "mig-stranded", .title = "Stranded GPUs per seed", .kind = ChartKind::kDots,
              .x_label = "strategy", .categories = names, .y_label = "stranded capacity", .y_unit = "GPUs",
              .width = 900};
  for (size_t k = 0; k < r.seeds.size(); ++k) {
    ChartSeries s{.name = "seed " + std::to_string(r.seeds[k]), .color = static_cast<int>(k % kReportPalette.size())};
    for (const MigComparisonRow& row : r.rows) s.y.push_back(k < row.stranded_gpus.size() ? row.stranded_gpus[k] : NAN);
    g.series.push_back(std::move(s));
  }
  h += "<h2>Unserved capacity by strategy</h2>" + RenderChart(u);
  h += "<h2>Stranded GPUs by strategy and seed</h2>" + RenderChart(g);
  specs.push_back(std::move(u));
  specs.push_back(std::move(g));
  return h + RenderChartAssets(specs) + "</body></html>\n";
}

}  // namespace tessera::sim
