// MIG-aware placement and the static-vs-dynamic comparison of the partitioning issue.
//
// A stream of MIG requests (one profile each) arrives at N GPUs of one model; nothing departs
// (the FGD artifact's protocol). Two ways to serve it:
//   static   every GPU is cut once into the same maximal layout; a request takes a free instance
//            of its profile or, failing that, of the smallest larger profile (the rest of that
//            instance is wasted). Every maximal layout is tried; the best is reported.
//   dynamic  GPUs start empty; each request gets a new instance on the GPU and start that keep
//            the most future demand placeable: the choice minimises the growth of MIG
//            fragmentation F(gpu) = sum_p q_p * (free memory slices if profile p can no longer
//            be added, else 0), q_p = the demand mix; ties go to the fuller GPU, then the lower
//            index and start.
// The metric: served memory slices (the requested profiles' sizes) when the requested slices
// reach 100 % of capacity, and the unserved share of capacity at that point.
//
// Worked example (1 H100, requests 1g.10gb, 3g.40gb, 3g.40gb; all three arrive, the requested
// slices pass the GPU's 8 with the third):
//   static 7g.80gb@0             the 1g.10gb takes the only instance: 1 slice served
//   static 3g.40gb@0,3g.40gb@4   the 1g.10gb takes a 3g instance, one 3g is served: 5 slices
//   dynamic                      the 1g.10gb goes to slices 0-3 (at 4-6 it would block both 3g
//                                starts), the first 3g.40gb takes 4-7: 5 slices
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/quantity.h"
#include "tessera/core/status.h"
#include "tessera/partition/mig_layout.h"

namespace tessera::partition {

// The smallest MIG profile (no media extensions) whose compute and memory shares both cover
// `milli` / 1000 of the GPU (the trace's fractional GPU is that share of memory and of compute).
// NOT_FOUND if none does (e.g. milli = 0).
StatusOr<int> ProfileForFraction(const MigGeometry& geometry, GpuMilli milli);

struct MigSimResult {
  std::string strategy;            // "static:<layout>" or "dynamic"
  int gpus = 0;
  int64_t capacity_slices = 0;     // gpus x memory slices
  int64_t requested_slices = 0;    // of the requests that arrived up to 100 % of capacity
  int64_t served_slices = 0;       // of those, served
  double unserved_pct = 0;         // (capacity - served) / capacity x 100 at arrived = 100 %
};

// Requests are profile indexes in arrival order; the run stops when the requested slices reach
// the capacity (arrived = 100 %).
MigSimResult SimulateStaticMig(const MigGeometry& geometry, int gpus, const MigLayout& layout,
                               const std::vector<int>& requests);
// Static with a layout per GPU (e.g. planned once by PlanMig for the expected mix).
MigSimResult SimulateStaticLayouts(const MigGeometry& geometry, const std::vector<MigLayout>& layouts,
                                   const std::vector<int>& requests);
MigSimResult SimulateDynamicMig(const MigGeometry& geometry, int gpus, const std::vector<int>& requests);

// The best static layout (over EnumerateMaximalLayouts) for these requests.
MigSimResult BestStaticMig(const MigGeometry& geometry, int gpus, const std::vector<int>& requests);

}  // namespace tessera::partition
