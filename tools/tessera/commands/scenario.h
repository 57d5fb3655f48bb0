// `tessera simulate --scenario dedicated-vs-shared`: the multi-tenant scenario (sim/multitenant.h)
// with its flags, text table, JSON and HTML report.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace tessera::cli {

struct ScenarioFlags {
  std::string name;          // set: run the scenario instead of the placement replay
  std::string quotas;        // default: data/scenarios/quotas-default.yaml
  std::string nodes;         // default: the bundled node list
  std::string pods;          // default: the bundled default pod list
  int node_stride = 96;
  double compression = 0;    // 0: fit the busy window into the horizon
  double days = 7;
  double best_effort_fraction = 0.25;
  double guaranteed_fraction = 0.25;
  int64_t submission_window = 3600;
  std::string tenant_arrivals = "skew";  // skew | app-profile
  int64_t min_runtime = 0;
  double half_life = 0;
  bool fair_share_defrag = true;
  int64_t checkpoint_interval = 0;
  int64_t fair_share_max_victim_run = 0;
  std::string fair_share_rule = "lexicographic";
  bool no_clearable_nodes = false;
  uint64_t seed = 42;
  std::string placement = "tessera";
};

// Adds the scenario's own flags to `simulate`.
void AddScenarioFlags(CLI::App* simulate, ScenarioFlags* flags);
// Runs it; `json_out` / `html_out` may be empty; `check` exits 1 unless the done-when criteria
// of the multi-tenancy issue hold.
int RunScenario(const ScenarioFlags& flags, const std::string& json_out, const std::string& html_out,
                bool check, bool quiet);

}  // namespace tessera::cli
