#include "src/daemon/cluster_history.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace tessera::daemon {

ClusterHistory::ClusterHistory(int64_t step_s, int64_t keep_s)
    : step_s_(std::max<int64_t>(step_s, 1)), keep_s_(std::max<int64_t>(keep_s, step_s_)) {}

std::optional<HistoryPoint> ClusterHistory::Record(HistoryPoint point) {
  std::lock_guard<std::mutex> lock(mu_);
  std::optional<HistoryPoint> closed;
  // One point per step: the latest offered in it. A clock that went back starts afresh.
  if (!points_.empty() && point.t_s < points_.back().t_s) points_.clear();
  if (!points_.empty() && point.t_s / step_s_ == points_.back().t_s / step_s_) {
    points_.pop_back();
  } else if (!points_.empty()) {
    closed = points_.back();
  }
  points_.push_back(std::move(point));
  while (!points_.empty() && points_.front().t_s < points_.back().t_s - keep_s_) points_.pop_front();
  return closed;
}

void ClusterHistory::Preload(const std::vector<HistoryPoint>& stored) {
  std::lock_guard<std::mutex> lock(mu_);
  std::deque<HistoryPoint> before;
  for (const HistoryPoint& p : stored) {
    if (!points_.empty() && p.t_s / step_s_ >= points_.front().t_s / step_s_) break;
    if (!before.empty() && p.t_s < before.back().t_s) before.clear();  // as Record: a clock that went back
    if (!before.empty() && p.t_s / step_s_ == before.back().t_s / step_s_) before.pop_back();
    before.push_back(p);
  }
  points_.insert(points_.begin(), before.begin(), before.end());
  while (!points_.empty() && points_.front().t_s < points_.back().t_s - keep_s_) points_.pop_front();
}

std::string ClusterHistory::EncodeBody(const HistoryPoint& point) {
  return nlohmann::json{{"held_milli", point.held_milli}, {"pending", point.pending}, {"idle_gpus", point.idle_gpus}}
      .dump();
}

StatusOr<HistoryPoint> ClusterHistory::DecodeBody(int64_t t_s, std::string_view body) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  const std::string at = "history point at t_s " + std::to_string(t_s) + ": ";
  if (!j.is_object()) return InvalidArgumentError(at + "not a JSON object");
  HistoryPoint p{.t_s = t_s};
  for (const char* field : {"held_milli", "pending"}) {
    auto it = j.find(field);
    if (it == j.end() || !it->is_object()) return InvalidArgumentError(at + field + ": not an object");
    std::map<std::string, int64_t>& out = std::string_view(field) == "held_milli" ? p.held_milli : p.pending;
    for (const auto& [tenant, v] : it->items()) {
      if (!v.is_number_integer()) return InvalidArgumentError(at + field + "." + tenant + ": not an integer");
      out[tenant] = v.get<int64_t>();
    }
  }
  auto idle = j.find("idle_gpus");
  if (idle == j.end() || !idle->is_number_integer()) return InvalidArgumentError(at + "idle_gpus: not an integer");
  p.idle_gpus = idle->get<int64_t>();
  return p;
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
