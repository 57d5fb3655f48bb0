// MIG requests in the placement engine, and MIG-geometry fragmentation: which GPU and start a
// MIG instance should take so that the most future demand stays placeable.
//
// Callers: the fgd and tessera policies score MIG requests with MigFragmentation::Best; every
// other policy takes the lowest valid start on the GPU it chose (LowestMigStart); the MIG
// replay (sim/mig_replay.h) reports MigFragmentation::OfNode.
//
// Fragmentation in MIG geometry. FGD's measure (fragmentation.h) asks "is there a GPU with d
// milli free?"; on a MIG GPU the answer also depends on where the free slices are and on the
// model's rules (placements, max count, compute slices). For a MIG node n and the target
// workload M (types m with weights p_m):
//   F_n(m) = sum over GPUs g of n of free_milli(g) if m's profile can no longer be added on g
//            (no valid start left, partition/mig_layout.h rules 2-6), else 0
//            -- when m is a MIG request for n's model and n has the CPU m asks for;
//   F_n(m) = all free GPU milli of n  -- otherwise (CPU-only, non-MIG GPU types, other models,
//            CPU short), as in FGD;
//   F_n(M) = sum_m p_m F_n(m).
// This is mig_sim.h's per-GPU F(gpu) summed over a node, with the cluster's expected demand
// mix (the target workload) as weights and milli-GPU as unit (one of 8 memory slices = 125).
// A MIG request goes to the (GPU, start) of the node that increases F_n(M) least; ties go to
// the fuller GPU (less free milli before), then the lower GPU index, then the lower start.
// Across nodes the policy compares Score(delta, free_before), higher wins.
//
// Worked example (H100-80GB, 8 memory slices of 125 milli; M = {1g.10gb p=0.5, 4g.40gb
// p=0.5}; 4g.40gb may start only at slice 0). A node has GPU0 = 3g.40gb@0 (slices 4-7 free,
// 500 milli) and GPU1 empty. A 1g.10gb request arrives (starts 0-6).
//   Before: GPU0 cannot take a 4g.40gb -> 0.5 * 500 = 250; GPU1 takes both -> 0. F = 250.
//   GPU0 @4..6: 4g.40gb still impossible there, free 375 -> F = 187.5   delta -62.5
//   GPU1 @0..3: blocks 4g.40gb on GPU1 -> 250 + 0.5 * 875 = 687.5       delta +437.5
//   GPU1 @4..6: 4g.40gb@0 still possible -> F = 250                      delta 0
// -> GPU0, start 4. With only GPU1 on the node the choice is GPU1 @4: milli-GPU accounting
// (both leave 875 milli free) cannot tell start 0 from start 4, MIG geometry can.
//
// Thread-safety: MigFragmentation is immutable after construction (safe to share).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/ids.h"
#include "tessera/core/quantity.h"
#include "tessera/core/status.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/fragmentation.h"
#include "tessera/placement/task.h"

namespace tessera::placement {

// A request for one instance of the profile named `profile` of `model` (whose MIG geometry is
// `geometry`). NOT_FOUND naming the model's profiles for an unknown profile.
StatusOr<TaskRequest> MigRequest(GpuModelId model, const MigGeometry& geometry, std::string_view profile,
                                 CpuMilli cpu = CpuMilli{0}, MiB memory = MiB{0});

// The lowest valid start of `profile` on GPU g of node n, or -1 if there is none.
int LowestMigStart(const ClusterSnapshot& cluster, NodeIndex n, int g, int profile);

class MigFragmentation {
 public:
  // `workload` must outlive this object.
  explicit MigFragmentation(const TargetWorkload* workload);

  // F_n(M) in milli-GPU for a MIG node (see above); FGD's NodeFragmentation is the measure for
  // other nodes, and this returns all their free GPU milli.
  double OfNode(const ClusterSnapshot& cluster, NodeIndex n) const;

  struct Choice {
    int gpu = -1;               // -1: the request fits nowhere on the node
    int start = -1;
    double delta = 0;           // growth of F_n(M), milli-GPU
    int32_t gpu_free_before = 0;
    int64_t score = 0;          // Score(delta, gpu_free_before)
  };
  // The slot for MIG request `task` on node n that grows F_n(M) least (ties as above), among
  // the GPUs in `usable` (an eligibility mask, policy.h; the others still count in F_n(M)).
  Choice Best(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
              GpuSet usable = kAllGpus) const;

  // Higher is better: smaller delta first (to 1/16 milli), then less free milli on the GPU.
  static int64_t Score(double delta_milli, int32_t gpu_free_before);

 private:
  struct MigType {
    ModelMask models;
    int profile;
    int64_t cpu;
    double weight;
  };
  // F_n(M) of a node whose GPUs have free milli `free` and addable-profile masks `addable`.
  double Evaluate(ModelMask model_bit, int64_t cpu_free, const int32_t* free, const uint64_t* addable,
                  int gpus) const;

  std::vector<MigType> mig_types_;
  double other_weight_ = 0;  // weight of the types that never run on a MIG GPU
};

}  // namespace tessera::placement
