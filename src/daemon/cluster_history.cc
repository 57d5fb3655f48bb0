#include "src/daemon/cluster_history.h"

#include <algorithm>

namespace tessera::daemon {

ClusterHistory::ClusterHistory(int64_t step_s, int64_t keep_s)
    : step_s_(std::max<int64_t>(step_s, 1)), keep_s_(std::max<int64_t>(keep_s, step_s_)) {}

void ClusterHistory::Record(HistoryPoint point) {
  std::lock_guard<std::mutex> lock(mu_);
  // One point per step: the latest offered in it. A clock that went back starts afresh.
  if (!points_.empty() && point.t_s < points_.back().t_s) points_.clear();
  if (!points_.empty() && point.t_s / step_s_ == points_.back().t_s / step_s_) points_.pop_back();
  points_.push_back(std::move(point));
  while (!points_.empty() && points_.front().t_s < points_.back().t_s - keep_s_) points_.pop_front();
}

HistoryWindow ClusterHistory::Read(int64_t from_s, int64_t step_s,
                                   const std::function<bool(const std::string&)>& visible) const {
  HistoryWindow w;
  w.step_s = std::max(step_s, step_s_);
  std::lock_guard<std::mutex> lock(mu_);
  // The last point of each bucket [k*step, (k+1)*step).
  std::vector<const HistoryPoint*> chosen;
  for (const HistoryPoint& p : points_) {
    if (p.t_s < from_s) continue;
    if (!chosen.empty() && chosen.back()->t_s / w.step_s == p.t_s / w.step_s) {
      chosen.back() = &p;
    } else {
      chosen.push_back(&p);
    }
  }
  for (const HistoryPoint* p : chosen) {
    for (const auto& [tenant, v] : p->held_milli)
      if (!w.held_milli.count(tenant) && visible(tenant)) w.held_milli[tenant] = {};
    for (const auto& [tenant, v] : p->pending)
      if (!w.pending.count(tenant) && visible(tenant)) w.pending[tenant] = {};
  }
  for (const HistoryPoint* p : chosen) {
    w.t_s.push_back(p->t_s);
    w.idle_gpus.push_back(p->idle_gpus);
    for (auto& [tenant, series] : w.held_milli) {
      auto it = p->held_milli.find(tenant);
      series.push_back(it == p->held_milli.end() ? 0 : it->second);
    }
    for (auto& [tenant, series] : w.pending) {
      auto it = p->pending.find(tenant);
      series.push_back(it == p->pending.end() ? 0 : it->second);
    }
  }
  return w;
}

}  // namespace tessera::daemon
