// ClusterHistory: what the dashboard's Cluster page draws over time, sampled by the control plane
// itself so that a page opened now sees the last day, not only what it sampled while open:
// per leaf tenant the GPU it holds (milli-GPU) and its pending workloads, and the cluster's idle
// GPUs. GET /v1/history serves it (docs/api.md), filtered like every read.
//
// Record(point) keeps at most one point per `step_s` (the latest of each step: the scheduler loop
// offers one per cycle, and a point offered later in the same step replaces the earlier) and drops
// points older than `keep_s`; it returns the point that the new one closed (the last of the step
// before, now final), which is the one the control plane stores. Read(from_s, step_s, visible)
// returns the points at or after `from_s`, thinned to one per `step_s` (the last point of each
// step: a sample, not an average, so a stacked chart of the result still adds up to what was held
// at that instant), with the tenants `visible` admits.
//
// Worked example (step 5 s): points at t=100 {a: 900}, t=103 {a: 500} (replaces t=100: same step), t=105
// {a: 500, b: 1000}, t=110 {b: 1000}. Read(100, 10, all) -> t [105, 110], a [500, 0], b [1000, 1000]
// (buckets [100,110) and [110,120); a tenant missing from a point holds 0 there).
//
// Memory: a point holds only the tenants with something held or pending; one day at 5 s is 17,280
// points. Persistence: the control plane stores each closed point (EncodeBody: one small row per
// step, store table cluster_history), removes stored points older than keep_s, and at start
// Preloads the stored points of the kept window (DecodeBody): a restarted `tessera serve` serves
// the day it had, less the step that was open when it stopped.
// Body worked example: {.t_s = 105, held_milli {b: 1000}, pending {b: 2}, idle_gpus 2} ->
// {"held_milli":{"b":1000},"idle_gpus":2,"pending":{"b":2}} (t_s is the row's key).
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
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

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

  // The point closed by `point` (see above), or nullopt: `point` is in the step of the last one
  // (replacing it), the history was empty, or the clock went back (the history starts afresh).
  std::optional<HistoryPoint> Record(HistoryPoint point);
  // The stored points of an earlier run (by t_s), put before what this run recorded so far: those
  // in a step before its first point's (one per step, the last), then the window trimmed to keep_s.
  void Preload(const std::vector<HistoryPoint>& stored);
  // `step_s` below the recording step is the recording step.
  HistoryWindow Read(int64_t from_s, int64_t step_s, const std::function<bool(const std::string&)>& visible) const;
  int64_t step_s() const { return step_s_; }
  int64_t keep_s() const { return keep_s_; }

  // A point's stored body (without t_s) and back; DecodeBody fails with INVALID_ARGUMENT naming
  // what it could not read.
  static std::string EncodeBody(const HistoryPoint& point);
  static StatusOr<HistoryPoint> DecodeBody(int64_t t_s, std::string_view body);

 private:
  const int64_t step_s_, keep_s_;
  mutable std::mutex mu_;
  std::deque<HistoryPoint> points_;
};

}  // namespace tessera::daemon
