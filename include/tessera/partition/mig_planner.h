// The MIG planner: given N GPUs of one model (their current layouts, some instances in use)
// and a demand (profile -> count), choose target layouts that satisfy the most demand,
// weighted by memory slices, never touching in-use instances, and the ordered reconfiguration
// steps to get there (destroy free instances first, then create, each with its placement).
//
// How: every GPU's candidate target layouts are the valid layouts that contain its in-use
// instances (mig_layout.h). What a candidate offers is its count of not-in-use instances per
// profile; only Pareto-maximal offers matter for the objective
//     maximise  sum_p  memory_slices(p) * min(demand_p, sum_gpus offer_{gpu,p}).
// kExact searches offers GPU by GPU (depth-first, memoised on the remaining demand, with a
// bound); kHeuristic is described below; kAuto uses kExact up to 8 GPUs. Once each GPU's share of the
// demand is fixed, its layout is the candidate serving exactly that share with the fewest
// steps (existing free instances are kept where they fit).
//
// Worked example (H100-80GB, 1 empty GPU, demand 1g.10gb=2, 3g.40gb=2):
//   2 x 3g.40gb serve 8 memory slices, 3g.40gb + 2 x 1g.10gb only 6, so the target is
//   [0-3 3g.40gb][4-7 3g.40gb], unsatisfied {1g.10gb: 2}, steps: create 3g.40gb@0, 3g.40gb@4.
//   Demand 1g.10gb=9, 3g.40gb=2 on 2 GPUs: "both 3g.40gb on one GPU, 7 x 1g.10gb on the other"
//   serves 15 slices (1g.10gb cannot start at slice 7), but 4 x 1g.10gb@0-3 + 3g.40gb@4 on each
//   GPU serves 16; one 1g.10gb stays unsatisfied.
// kHeuristic (used above 8 GPUs) starts from two solutions, each GPU taking its best share in
// turn and a first-fit-decreasing packing of the demanded instances, improves both one GPU at
// a time and keeps the better; tests/partition measure it against kExact.
//
// Thread-safety: pure function.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/partition/mig_layout.h"

namespace tessera::partition {

struct MigGpuState {
  MigLayout current;          // instances that exist now
  std::vector<bool> in_use;   // per instance of `current`; missing entries = not in use
};

struct MigPlanStep {
  enum class Kind { kDestroy, kCreate };
  Kind kind;
  int gpu = 0;
  MigInstance instance;
};

struct MigPlan {
  std::vector<MigLayout> layouts;               // target layout per GPU
  std::map<std::string, int> unsatisfied;       // profile name -> count not served (only > 0)
  std::vector<MigPlanStep> steps;               // destroys first, then creates
  int satisfied_memory_slices = 0;              // the objective
};

enum class MigPlanMode { kAuto, kExact, kHeuristic };

// INVALID_ARGUMENT for an unknown profile or a negative count; FAILED_PRECONDITION if a GPU's
// current layout breaks the model's rules.
StatusOr<MigPlan> PlanMig(const MigGeometry& geometry, const std::vector<MigGpuState>& gpus,
                          const std::map<std::string, int>& demand, MigPlanMode mode = MigPlanMode::kAuto);

}  // namespace tessera::partition
