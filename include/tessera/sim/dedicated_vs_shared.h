// The dedicated-vs-shared scenario of the multi-tenancy issue, end to end: read the quota file,
// node list, pod list and tenant-skew data, build the tenant workload (multitenant.h), run it
// once on per-tenant dedicated slices and once on one shared pool, and judge the outcome targets.
// Renderers turn the result into the text table, the JSON document and the HTML report that
// `tessera simulate --scenario dedicated-vs-shared` prints or writes.
//
// Called by the CLI (tools/tessera/commands/scenario.cc), which resolves the default paths,
// parses flags, and prints or writes what the renderers return.
//
//   DedicatedVsSharedSpec spec;  // paths filled in by the caller, options left at their defaults
//   auto r = RunDedicatedVsShared(spec, GpuModelCatalog::Builtin(), &std::cerr);
//   std::cout << RenderDedicatedVsSharedTable(*r);   // "  useful (the rest) (%) 45.0 70.5"
//   r->checks.Passed()   // shared useful allocation (allocation minus what preemptions threw
//                        // away) >= 1.5x dedicated's, Guaranteed p99 wait no worse,
//                        // zero guarantee violations, Jain >= 0.9
//
// Thread-safety: pure functions of their inputs (seeded); `progress` is written from the
// calling thread only. Ownership: the result owns everything it holds.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/sim/multitenant.h"
#include "tessera/sim/report_charts.h"

namespace tessera::sim {

struct DedicatedVsSharedSpec {
  std::string quotas_path;         // quota YAML (config/quota_file.h)
  std::string nodes_path;          // node list CSV; every node_stride-th node is kept
  std::string pods_path;           // pod list CSV with creation/deletion times
  std::string app_skew_path;       // data/tenants/dlrm-app-skew.csv
  std::string app_arrivals_path;   // data/tenants/dlrm-app-arrivals.csv (read for app-profile)
  int node_stride = 96;
  double compression = 0;          // 0: fit the trace's busy window into the horizon
  double days = 7;
  double best_effort_fraction = 0.25;
  double guaranteed_fraction = 0.25;
  int64_t submission_window = 3600;
  std::string tenant_arrivals = "skew";  // skew | app-profile
  int64_t min_runtime = 0;
  double half_life = 0;
  bool fair_share_defrag = true;
  int64_t checkpoint_interval = 0;  // batch jobs (ScenarioOptions::checkpoint_interval)
  // Comma-separated trace qos labels whose pods are services (WorkloadOptions::service_qos);
  // empty: every pod is batch.
  std::string service_qos = "LS";
  int64_t service_startup = 60;      // seconds (WorkloadOptions::service_startup)
  // Fair-share preemption leaves batch work that has run longer than this alone (service
  // replicas lose only their start-up and are always taken): on seeds 42-49 it buys back most
  // of the re-run batch work at little cost in fairness (docs/multitenancy.md). 0: any.
  int64_t fair_share_max_victim_run = 7200;
  std::string fair_share_rule = "lexicographic";
  bool no_clearable_nodes = false;
  uint64_t seed = 42;
  std::string placement = "tessera";
  // > 0: the control plane restarts at this second (ScenarioOptions::restart_at). Not echoed in
  // the JSON: the results do not depend on it (tests/sim/restart_test.cc).
  int64_t restart_at = 0;
  // Also render the workload's usage ledger (sim/ledger_export.h) into the result's `ledger`.
  bool ledger = false;
};

struct DedicatedVsSharedChecks {
  bool useful_allocation_1_5x = false;     // shared useful allocation >= 1.5 x dedicated's
  bool guaranteed_p99_wait = false;        // shared Guaranteed p99 wait <= dedicated
  bool zero_guarantee_violations = false;  // in the shared mode
  bool jain_0_9 = false;                   // shared Jain's fairness >= 0.9
  bool Passed() const { return useful_allocation_1_5x && guaranteed_p99_wait && zero_guarantee_violations && jain_0_9; }
};

struct DedicatedVsSharedResult {
  DedicatedVsSharedSpec spec;
  ModeMetrics dedicated;
  ModeMetrics shared;
  int64_t gpus = 0;                   // GPUs of the kept nodes
  size_t jobs = 0;
  double allocation_upper_bound_pct = 0;  // useful allocation of any scheduler
  size_t service_jobs = 0;                // jobs of kind service (the rest are batch)
  DedicatedVsSharedChecks checks;
  std::string ledger;  // JSON lines (metering/ledger_file.h) when spec.ledger; else empty
};

// INVALID_ARGUMENT / NOT_FOUND naming the file (and line) for bad input, or a quota file whose
// guarantees do not fit the kept nodes (names --node-stride). `progress` (may be null) gets one
// line before the runs and one after each.
StatusOr<DedicatedVsSharedResult> RunDedicatedVsShared(const DedicatedVsSharedSpec& spec,
                                                       const GpuModelCatalog& catalog, std::ostream* progress);

// The text table with the upper bound and the checks line (what the CLI prints on stdout).
std::string RenderDedicatedVsSharedTable(const DedicatedVsSharedResult& result);
// {"scenario": parameters, "dedicated": metrics, "shared": metrics, "allocation_upper_bound_pct",
//  "checks"}, indented by 2, with a final newline.
std::string RenderDedicatedVsSharedJson(const DedicatedVsSharedResult& result);
// A standalone HTML page: the metric table, allocation per hour, per-tenant waits and shares, then
// `sections` (HTML, e.g. sim/metering_report.h's invoice, anomaly and forecast sections) whose
// chart places (RenderChart) are drawn from `section_charts`.
std::string RenderDedicatedVsSharedHtml(const DedicatedVsSharedResult& result, const std::string& sections = "",
                                        const std::vector<ChartSpec>& section_charts = {});

}  // namespace tessera::sim
