// Runs many replays (pod lists x policies x seeds) on a pool of threads and summarises them.
//
//   SweepSpec spec{.inputs = {default_list}, .policies = {"fgd", "bestfit"},
//                  .seeds = {42, 43, 44}, .jobs = 2};
//   StatusOr<std::vector<ReplayResult>> runs = RunSweep(spec, clock, on_progress);
//   std::vector<RunSummary> table = Summarize(*runs);   // medians per (list, policy)
//
// Results come back in (input, policy, seed) order whatever the thread count, and each run is
// deterministic in its seed, so the output does not depend on --jobs.
//
// Thread-safety: RunSweep starts and joins its own threads; `progress` is called from them
// under a lock. `clock` must be safe to read from several threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/sim/replay.h"

namespace tessera::sim {

struct SweepSpec {
  std::vector<ReplayInput> inputs;
  std::vector<std::string> policies;
  std::vector<uint64_t> seeds;
  ReplayOptions options;   // its seed is replaced by each of `seeds`
  int jobs = 1;            // worker threads
};

// progress(fraction done 0..1, runs finished, runs total)
using SweepProgress = std::function<void(double, int, int)>;

StatusOr<std::vector<ReplayResult>> RunSweep(const SweepSpec& spec, const Clock& clock,
                                             const SweepProgress& progress = {});

// Medians over seeds for one (pod list, policy).
struct RunSummary {
  std::string pods_name;
  std::string policy;
  int runs = 0;
  double unallocated_pct_at_100 = 0;   // median over seeds
  double unallocated_pct_at_100_min = 0;
  double unallocated_pct_at_100_max = 0;
  double unallocated_pct_at_130 = 0;
  double frag_rate_pct_at_100 = 0;
  double frag_amount_pct_at_100 = 0;
  double wall_seconds = 0;             // median
  std::vector<double> alloc_pct_curve;       // median over seeds per arrived-% bucket
  std::vector<double> frag_rate_pct_curve;   // median over seeds per arrived-% bucket
};

// One summary per (pods_name, policy), in first-seen order.
std::vector<RunSummary> Summarize(const std::vector<ReplayResult>& runs);

// Median of the non-NaN values; NaN if there are none.
double Median(std::vector<double> values);

}  // namespace tessera::sim
