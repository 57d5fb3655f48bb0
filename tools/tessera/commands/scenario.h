// `tessera simulate --scenario dedicated-vs-shared`: the flags of the multi-tenant scenario
// (sim/dedicated_vs_shared.h runs it and renders its table, JSON and HTML).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tessera/sim/dedicated_vs_shared.h"

namespace tessera::cli {

struct ScenarioFlags {
  std::string name;                  // set: run the scenario instead of the placement replay
  std::string quotas;                // default: data/scenarios/quotas-default.yaml
  std::string ledger;                // "" = none: where the scenario's usage ledger goes
  std::string price_plan;            // the report's invoices; default: data/examples/price-plan.yaml
  sim::DedicatedVsSharedSpec spec;   // the options; paths filled in by RunScenario
};

// What the scenario shares with the replay's flags.
struct ScenarioShared {
  std::string nodes;                 // default: the bundled node list
  std::vector<std::string> pods;     // at most one; default: the bundled default pod list
  std::string json_out;              // "" = none, "-" = stdout
  std::string html_out;              // "" = none
  bool check = false;
  bool quiet = false;
};

// Adds the scenario's own flags to `simulate`; their names are in kScenarioOnlyFlags.
void AddScenarioFlags(CLI::App* simulate, ScenarioFlags* flags);
inline const char* const kScenarioOnlyFlags[] = {
    "--scenario", "--quotas", "--node-stride", "--compression", "--days", "--submission-window",
    "--tenant-arrivals", "--guaranteed-fraction", "--best-effort-fraction", "--min-runtime", "--half-life",
    "--checkpoint-interval", "--fair-share-max-victim-run", "--fair-share-rule", "--fair-share-defrag",
    "--no-clearable-nodes", "--seed", "--placement", "--service-qos", "--service-startup",
    "--ledger", "--price-plan"};

// Runs it; `check` exits 1 unless the done-when criteria of the multi-tenancy issue hold.
int RunScenario(const ScenarioFlags& flags, const ScenarioShared& shared);

}  // namespace tessera::cli
