// UsageMeter: usage samples for the tenants of a node directory that no agent meters: Slurm tasks
// joined by spank_tessera.so, metered by `tessera node arbiter --usage-ledger` (docs/slurm.md).
// The agent meters its own workloads (agent_usage.cc); this is the same arithmetic for tenants
// that come and go on their own.
//
// Observe(status, now_s) is given the node's status (NodeDir::ReadStatus) a few times a second. Per
// tenant it accumulates, since its join (or since the meter started, whichever is later):
//   - GPU time used: the growth of its lease-board charge (charged_ns; a counter that goes back,
//     a re-added slot, counts from zero), in milli-GPU-seconds (1 GPU-second = 1000); a tenant on
//     a MIG instance is not on the board (node_dir.h): its samples are partition "mig" and used
//     = allocated (the instance is its alone for the span);
//   - GPU time allocated: its share, milli of the GPU as the node directory holds it (node_dir.h;
//     share 250 -> 250 milli-GPU-s per second; at most one GPU);
//   - memory held (MiB-seconds, the bytes it holds at each look times the time since the
//     previous look), its peak, and its kernel launches.
// It returns one sample per tenant when `period_s` has passed since the tenant's last sample, and
// a final one, ending at the last look that saw it, when the tenant has left. The sample's
// tenant is the registry entry's `account` (else its name) and its workload the entry's
// `workload` (else its name); seq is the sample's start second (unique per source, and the same
// after a restart of the meter only for the same interval, which the ledger counts once). An
// entry relabelled while it runs (NodeDir::Relabel) ends its interval at the previous look under
// the old labels; the new labels bill from there: k8s-dp/U::0 (account kubernetes) seen at 1000
// and 1001, relabelled to account team-a before 1002 -> Observe(.., 1002) returns {kubernetes,
// [1000, 1001)} and team-a's interval starts at 1001.
//
// Worked example (period 60 s): "physics.42" (account physics, workload slurm-job-42, share 500,
// GPU 0) joins at t=1000 and is seen every second; by t=1060 its charge grew by 12 s of GPU time.
// Observe(.., 1060) returns {tenant physics, workload slurm-job-42, start 1000, end 1060,
// allocated 30000, used 12000}. It leaves at t=1075 (last seen at 1074): Observe(.., 1075) returns
// [1060, 1074).
//
// Departures (NodeDir::KeepDepartures / TakeDepartures) close a tenant's interval when it left,
// with the counters its slot held then, so a job shorter than a look is billed too. A source seen
// again after its departure (its entry still listed) starts where its last sample ended, so no
// second is metered twice and no seq is used twice. What is not
// seen: memory held only between two looks (`tessera node arbiter` looks every 250 ms), and GPU
// time the arbiter charged after the tenant left.
//
// Thread-safety: one UsageMeter is used by one thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/api/usage_wire.h"
#include "tessera/node/node_dir.h"

namespace tessera::node {

struct UsageMeterOptions {
  std::map<int, std::string> gpu_models;  // node GPU index -> catalog model name ("A100-40GB")
  int64_t period_s = 60;                  // one sample per tenant per period
  int64_t start_s = 0;                    // unix seconds the meter started: nothing before it is metered
};

class UsageMeter {
 public:
  explicit UsageMeter(UsageMeterOptions options);

  // One look at the node at unix second `now_s`: the samples that are due (see above). A tenant
  // on a GPU without a model in the options is skipped (and named in `unmetered()`).
  std::vector<api::UsageSample> Observe(const NodeStatus& status, int64_t now_s);
  // Tenants that went (NodeDir::TakeDepartures; call it before Observe): each gets its final
  // sample, ending when it left, with the counters its slot held then, including a tenant that
  // came and went between two looks.
  std::vector<api::UsageSample> Depart(const std::vector<Departure>& departures);
  // Closes every open interval at `now_s` (at shutdown); the tenants are forgotten.
  std::vector<api::UsageSample> Flush(int64_t now_s);
  const std::vector<std::string>& unmetered() const { return unmetered_; }

 private:
  struct Open {
    std::string tenant, workload, model;
    int gpu = 0;
    int share = 0;
    bool mig = false;         // TenantStatus::mig: billed as used for the whole span
    int64_t from_s = 0;       // start of the open interval
    int64_t last_seen_s = 0;
    uint64_t launches_seen = 0, charged_seen_ns = 0;
    uint64_t launches = 0, charged_ns = 0;  // accumulated in the open interval
    double memory_mib_s = 0;
    uint64_t peak_bytes = 0;
  };
  api::UsageSample Close(Open& o, int64_t end_s);

  UsageMeterOptions options_;
  // By registry name and GPU: a tenant on several GPUs (a multi-GPU Slurm step) is a source per
  // GPU, each with its own interval and seqs.
  std::map<std::pair<std::string, int>, Open> open_;
  // Where each closed source's last sample ended and the counters it had seen, should its entry
  // be listed again (a departure recorded while a copy of the entry lingers) or its departure
  // come after a look that no longer saw it (the entry went between TakeDepartures and
  // ReadStatus): it re-opens from there, never before, with only the counters' growth since.
  // Dropped after an hour (names are per job; a lingering entry is seen again within a look).
  struct Closed {
    int64_t until_s = 0;
    uint64_t launches_seen = 0, charged_seen_ns = 0;
  };
  std::map<std::pair<std::string, int>, Closed> closed_until_;
  std::vector<std::string> unmetered_;
};

}  // namespace tessera::node
