// Renders replay results for people and programs: a text table for the terminal, the JSON
// contract of `tessera simulate --json`, and a self-contained HTML report with SVG charts.
//
// JSON (stable contract, more fields may be added):
//   {"runs":[{"policy":"fgd","seed":42,"pods":"openb_pod_list_default",
//             "unallocated_gpu_pct_at_100":4.71,"unallocated_gpu_pct_at_130":4.55,
//             "frag_rate_pct_at_100":98.1,"wall_seconds":0.41, ...}, ...],
//    "summary":[{"pods":..,"policy":..,"median_unallocated_gpu_pct_at_100":.., ...}]}
// Percentages are of cluster GPU capacity (fragmentation rate: of free GPU capacity), as in the
// FGD paper; a bucket with no data is null.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "tessera/sim/artifact_reference.h"
#include "tessera/sim/sweep.h"

namespace tessera::sim {

struct ReportInputs {
  std::string command;                 // the command line that produced the results
  std::string nodes_path;
  std::vector<std::string> pods_paths;
  std::string seeds;                   // "42-51"
  double tune_ratio = 1.3;
  size_t node_count = 0;
  int64_t gpu_count = 0;
};

// Text table, one line per (pod list, policy); with `ref`, adds the artifact's median, the
// difference and whether it is within ToleranceAt100.
std::string RenderSummaryTable(const std::vector<RunSummary>& summaries, const ArtifactReference* ref);

// One line per pod list comparing `policy` (the default placement policy) with FGD, e.g.
// "openb_pod_list_default: tessera leaves 4.18 % of GPU capacity unallocated at 100 % arrived
// (fgd 4.85 %, -13.9 %)". Empty if `policy` was not run.
std::string RenderHeadline(const std::vector<RunSummary>& summaries, const std::string& policy);

std::string RenderJson(const std::vector<ReplayResult>& runs, const std::vector<RunSummary>& summaries,
                       const ArtifactReference* ref);

std::string RenderHtmlReport(const std::vector<RunSummary>& summaries, const ReportInputs& inputs,
                             const ArtifactReference* ref);

}  // namespace tessera::sim
