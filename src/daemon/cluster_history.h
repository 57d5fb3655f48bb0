// ClusterHistory: what the dashboard's Cluster page draws over time, sampled by the control plane
// itself so that a page opened now sees the last day, not only what it sampled while open:
// per leaf tenant the GPU it holds (milli-GPU) and its pending workloads, and the cluster's idle
// GPUs. GET /v1/history serves it (docs/api.md), filtered like every read.
//
// Record(now_s, point) keeps at most one point per `step_s` (the latest of each step: the scheduler
// loop offers one per cycle, and a point offered later in the same step replaces the earlier) and drops points older than `keep_s`. Read(from_s, step_s, visible)
// returns the points at or after `from_s`, thinned to one per `step_s` (the last point of each
// step: a sample, not an average, so a stacked chart of the result still adds up to what was held
// at that instant), with the tenants `visible` admits.
//
// Worked example (step 5 s): points at t=100 {a: 900}, t=103 {a: 500} (replaces t=100: same step), t=105
// {a: 500, b: 1000}, t=110 {b: 1000}. Read(100, 10, all) -> t [105, 110], a [500, 0], b [1000, 1000]
// (buckets [100,110) and [110,120); a tenant missing from a point holds 0 there).
//
// Memory: a point holds only the tenants with something held or pending; one day at 5 s is 17,280
// points. The history lives in memory: a restarted `tessera serve` starts a new one.
//
// Thread-safety: all methods are safe from any thread (one mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace tessera::daemon {

struct HistoryPoint {
  int64_t t_s = 0;
  std::map<std::string, int64_t> held_milli;  // leaf tenant -> milli-GPU held (only > 0)
  std::map<std::string, int64_t> pending;     // leaf tenant -> pending workloads (only > 0)
  int64_t idle_gpus = 0;                      // whole GPUs nothing holds, on ready nodes
};

struct HistoryWindow {
  int64_t step_s = 0;
  std::vector<int64_t> t_s;
  std::map<std::string, std::vector<int64_t>> held_milli;  // every visible tenant seen in the window
  std::map<std::string, std::vector<int64_t>> pending;
  std::vector<int64_t> idle_gpus;
};

class ClusterHistory {
 public:
  explicit ClusterHistory(int64_t step_s = 5, int64_t keep_s = 86400);

  void Record(HistoryPoint point);
  // `step_s` below the recording step is the recording step.
  HistoryWindow Read(int64_t from_s, int64_t step_s, const std::function<bool(const std::string&)>& visible) const;
  int64_t step_s() const { return step_s_; }
  int64_t keep_s() const { return keep_s_; }

 private:
  const int64_t step_s_, keep_s_;
  mutable std::mutex mu_;
  std::deque<HistoryPoint> points_;
};

}  // namespace tessera::daemon
