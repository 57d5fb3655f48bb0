// Reports of the MIG comparison (mig_replay.h): per-strategy rows, text tables and JSON.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tessera/sim/mig_replay.h"
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

}  // namespace tessera::sim
