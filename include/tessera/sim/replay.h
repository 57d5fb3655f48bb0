// The FGD artifact's placement replay (Weng et al., ATC'23, research/fgd.md §3), reimplemented:
//
//   1. Target workload M from the whole pod list (placement::TargetWorkload::FromTasks, 95 %).
//   2. Arrival order: pods sorted by name, then shuffled uniformly with the run's seed.
//   3. Tune the total GPU request to `tune_ratio` x cluster GPU capacity (1.3 in the paper):
//      append pods drawn uniformly with replacement from the list, stopping at the first draw
//      whose *per-GPU* milli would push the total past the target (the artifact's quirk); or,
//      when the list asks for more, remove uniformly chosen pods until the total fits.
//   4. Tie-break rank: a random permutation of the nodes, fixed for the run.
//   5. Each pod is placed once (the policy picks node and GPUs) or dropped for good; nothing
//      departs.
//   6. After every pod: arrived GPU request, allocated GPU, cluster fragmentation F(M).
//
// Metrics are bucketed by arrived request in whole percent of capacity (round half to even, as
// the artifact's pandas script does) and averaged over the events of each bucket; an empty
// bucket borrows the events of its neighbours (+-1), also as the artifact does.
//
//   ReplayInput in{&nodes, &pods, "openb_pod_list_default"};
//   StatusOr<ReplayResult> r = RunReplay(in, "fgd", {.seed = 42}, clock);
//   r->UnallocatedPctAt(100);   // ~4.8 for FGD on the default list
//
// Thread-safety: RunReplay is reentrant (no shared state); run seeds on separate threads.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessera/core/clock.h"
#include "tessera/core/rng.h"
#include "tessera/core/status.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/fragmentation.h"
#include "tessera/sim/trace.h"

namespace tessera::sim {

struct ReplayOptions {
  uint64_t seed = 42;          // the artifact uses 42..51
  double tune_ratio = 1.3;     // total GPU request / cluster GPU capacity; <= 0 = no tuning
  double workload_coverage = 0.95;  // share of tasks the target workload M covers
};

struct ReplayInput {
  const std::vector<placement::NodeSpec>* nodes = nullptr;
  const std::vector<PodRecord>* pods = nullptr;
  std::string pods_name;       // e.g. the pod list's file stem; copied into the result
};

// Per-percent-bucket averages; index = arrived % (0 .. max). NaN where no event fell near.
struct BucketSeries {
  std::vector<double> alloc_pct;        // allocated GPU milli / capacity * 100
  std::vector<double> frag_amount_pct;  // F(M) / capacity * 100
  std::vector<double> frag_rate_pct;    // F(M) / free GPU milli * 100
};

struct ReplayResult {
  std::string policy;
  uint64_t seed = 0;
  std::string pods_name;
  int64_t tasks_arrived = 0;
  int64_t tasks_placed = 0;
  int64_t tasks_failed = 0;
  int64_t tasks_failed_gpu = 0;         // failed tasks that asked for GPUs
  int64_t gpu_capacity_milli = 0;
  int64_t arrived_gpu_milli = 0;
  int64_t allocated_gpu_milli = 0;      // at the end
  size_t target_workload_types = 0;
  BucketSeries buckets;
  double wall_seconds = 0.0;            // measured with the injected clock

  // 100 - alloc_pct[bucket]; NaN if the bucket is out of range or empty.
  double UnallocatedPctAt(int bucket) const;
  double FragRatePctAt(int bucket) const;
  double FragAmountPctAt(int bucket) const;
};

// The arrival sequence of steps 2-3 (indexes into pods). Exposed for tests.
std::vector<uint32_t> BuildArrivalOrder(const std::vector<PodRecord>& pods, int64_t gpu_capacity_milli,
                                        double tune_ratio, Rng& rng);

// Runs one (policy, pod list, seed) replay. INVALID_ARGUMENT for an unknown policy or empty
// input. `progress`, if set, is called with (tasks done, tasks total) every 256 tasks.
StatusOr<ReplayResult> RunReplay(const ReplayInput& input, const std::string& policy,
                                 const ReplayOptions& options, const Clock& clock,
                                 const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace tessera::sim
