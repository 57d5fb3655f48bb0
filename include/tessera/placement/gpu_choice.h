// GPU choice inside a chosen node, as the FGD artifact's GPU-share plugin does it.
//
// Whole-GPU tasks always take the k lowest-index fully free GPUs. A sharing task (one GPU, a
// fraction) takes one GPU that has enough free milli, chosen by a rule:
//   best   - least free that still fits (lowest index on ties)    free = {600, 300, 1000}, d=250
//            -> GPU 1
//   worst  - most free (lowest index on ties)                      -> GPU 2
//   first  - lowest index that fits                                -> GPU 0
//   random - uniform among those that fit (needs an Rng)
// A MIG request (one instance) is treated like a sharing task, where "fits" means the GPU has a
// valid start for its profile (ClusterSnapshot::mig_valid_starts).
//
// Each function takes an optional `usable` mask (a node's eligible GPUs, policy.h's
// Eligibility): GPUs outside it are never chosen, as if they had no room; the default kAllGpus
// leaves every GPU a candidate. With free = {600, 300, 1000}, d = 250 and usable = {0, 2}:
// best -> GPU 0, worst -> GPU 2, first -> GPU 0; a Whole(2) task on free = {1000, 1000, 1000}
// with usable = {1, 2} takes GPUs 1 and 2.
//
// On a mixed-model node (cluster_snapshot.h) a task's GPUs are of one model it allows: a 1-GPU
// task chooses among the GPUs of its allowed models, a k-GPU task inside the first model group
// (by lowest GPU index) where it fits. GPUs 0-1 H100, 2-5 A100, GPU 0 taken: Whole(2) of any
// model -> {2, 3}, not {1, 2}.
//
// Thread-safety: pure functions.
#pragma once

#include "tessera/core/rng.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/task.h"

namespace tessera::placement {

enum class SharingGpuRule { kBest, kWorst, kFirst, kRandom };

// The k lowest-index GPUs of node n with 1000 milli free; 0 if there are fewer than k.
GpuSet LowestFullyFreeGpus(const ClusterSnapshot& cluster, NodeIndex n, int k, GpuSet usable = kAllGpus);

// The GPUs `task` takes on node n (which must fit it with `usable`). CPU-only tasks take none.
// `rng` is used only by kRandom.
GpuSet ChooseGpus(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                  SharingGpuRule rule, Rng* rng, GpuSet usable = kAllGpus);

// ChooseGpus as a Placement; a MIG request takes the lowest valid start on the chosen GPU.
Placement ChoosePlacement(const ClusterSnapshot& cluster, NodeIndex n, const TaskRequest& task,
                          SharingGpuRule rule, Rng* rng, GpuSet usable = kAllGpus);

}  // namespace tessera::placement
