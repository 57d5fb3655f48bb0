#include "tessera/node/timeslice.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "tessera/core/rng.h"

namespace tessera::node {
namespace {

// Shared bookkeeping: the registered clients.
class PolicyBase : public TimeslicePolicy {
 public:
  Status AddClient(const TimesliceClient& c) override {
    if (c.weight == 0) return InvalidArgumentError("client " + std::to_string(c.id) + ": weight must be >= 1");
    if (c.tenant_weight == 0) {
      return InvalidArgumentError("client " + std::to_string(c.id) + ": tenant_weight must be >= 1");
    }
    if (!clients_.emplace(c.id, c).second) {
      return InvalidArgumentError("client " + std::to_string(c.id) + " already exists");
    }
    OnAdd(c);
    return Status::Ok();
  }
  Status RemoveClient(uint32_t id) override {
    auto it = clients_.find(id);
    if (it == clients_.end()) return NotFoundError("no client " + std::to_string(id));
    OnRemove(it->second);
    clients_.erase(it);
    return Status::Ok();
  }

 protected:
  virtual void OnAdd(const TimesliceClient&) {}
  virtual void OnRemove(const TimesliceClient&) {}
  const TimesliceClient* Find(uint32_t id) const {
    auto it = clients_.find(id);
    return it == clients_.end() ? nullptr : &it->second;
  }
  std::map<uint32_t, TimesliceClient> clients_;
};

class RoundRobin final : public PolicyBase {
 public:
  std::string_view name() const override { return "round_robin"; }
  std::optional<uint32_t> Pick(std::span<const RunnableClient> runnable) override {
    std::optional<uint32_t> first, next;
    for (const RunnableClient& r : runnable) {
      if (Find(r.id) == nullptr) continue;
      if (!first || r.id < *first) first = r.id;
      if ((!last_ || r.id > *last_) && (!next || r.id < *next)) next = r.id;
    }
    last_ = next ? next : first;
    return last_;
  }
  void Charge(uint32_t, Nanos) override {}

 private:
  std::optional<uint32_t> last_;
};

// Stride scheduling over virtual time (used / weight). A client that was not runnable at the
// previous pick re-enters at the current virtual time, so idling earns no credit, unless it was
// kept (KeepPlace): then it re-enters at most `max_lag` behind.
class VirtualTimeQueue {
 public:
  void Reset(uint32_t id) {
    vtime_.erase(id);
    was_runnable_.erase(id);
    kept_.erase(id);
  }
  // The next Pick treats `paused` as still runnable (they keep their place).
  void Keep(std::span<const uint32_t> paused, double max_lag) {
    keep_next_.assign(paused.begin(), paused.end());
    max_lag_ = max_lag;
  }
  // Lowest virtual time among `ids` (ties: lowest id); updates who is known runnable.
  std::optional<uint32_t> Pick(const std::vector<uint32_t>& ids) {
    std::set<uint32_t> now(ids.begin(), ids.end());
    for (uint32_t id : ids) {
      double& v = vtime_[id];
      if (!was_runnable_.count(id)) {
        v = std::max(v, virtual_now_);
      } else if (kept_.count(id)) {
        v = std::max(v, virtual_now_ - max_lag_);
      }
    }
    std::set<uint32_t> kept;
    for (uint32_t id : keep_next_) {
      // Only a client known runnable (or kept) before can be kept: a pause, not a return.
      if (!now.count(id) && was_runnable_.count(id)) kept.insert(id);
    }
    keep_next_.clear();
    was_runnable_ = std::move(now);
    was_runnable_.insert(kept.begin(), kept.end());
    kept_ = std::move(kept);
    std::optional<uint32_t> best;
    for (uint32_t id : ids) {
      if (!best || vtime_[id] < vtime_[*best] || (vtime_[id] == vtime_[*best] && id < *best)) best = id;
    }
    if (best) virtual_now_ = std::max(virtual_now_, vtime_[*best]);
    return best;
  }
  void Charge(uint32_t id, Nanos used, uint32_t weight) {
    vtime_[id] += static_cast<double>(used.count()) / static_cast<double>(weight);
  }
  // The virtual time `id` would be picked at now (a kept client's lag bound applied).
  double VirtualTime(uint32_t id) const {
    auto it = vtime_.find(id);
    const double v = it == vtime_.end() ? 0 : it->second;
    if (!was_runnable_.count(id)) return std::max(v, virtual_now_);
    return kept_.count(id) ? std::max(v, virtual_now_ - max_lag_) : v;
  }

 private:
  std::map<uint32_t, double> vtime_;
  std::set<uint32_t> was_runnable_;  // runnable at the previous pick, or kept
  std::set<uint32_t> kept_;          // in was_runnable_ only because they were kept
  std::vector<uint32_t> keep_next_;
  double max_lag_ = 0;
  double virtual_now_ = 0;
};

class WeightedFair final : public PolicyBase {
 public:
  std::string_view name() const override { return "weighted_fair"; }
  std::optional<uint32_t> Pick(std::span<const RunnableClient> runnable) override {
    std::vector<uint32_t> ids;
    for (const RunnableClient& r : runnable) {
      if (Find(r.id) != nullptr) ids.push_back(r.id);
    }
    return queue_.Pick(ids);
  }
  void Charge(uint32_t id, Nanos used) override {
    if (const TimesliceClient* c = Find(id)) queue_.Charge(id, used, c->weight);
  }
  void KeepPlace(std::span<const uint32_t> paused, Nanos max_lag) override {
    queue_.Keep(paused, static_cast<double>(max_lag.count()));
  }
  bool Prefers(uint32_t a, uint32_t b) const override {
    return Find(a) != nullptr && Find(b) != nullptr && queue_.VirtualTime(a) < queue_.VirtualTime(b);
  }

 protected:
  void OnRemove(const TimesliceClient& c) override { queue_.Reset(c.id); }

 private:
  VirtualTimeQueue queue_;
};

class EarliestDeadlineFirst final : public PolicyBase {
 public:
  std::string_view name() const override { return "edf"; }
  std::optional<uint32_t> Pick(std::span<const RunnableClient> runnable) override {
    const RunnableClient* best = nullptr;
    for (const RunnableClient& r : runnable) {
      if (Find(r.id) == nullptr) continue;
      if (best == nullptr || r.deadline < best->deadline || (r.deadline == best->deadline && r.id < best->id)) {
        best = &r;
      }
    }
    return best ? std::optional<uint32_t>(best->id) : std::nullopt;
  }
  void Charge(uint32_t, Nanos) override {}
};

class Lottery final : public PolicyBase {
 public:
  explicit Lottery(uint64_t seed) : rng_(seed) {}
  std::string_view name() const override { return "lottery"; }
  std::optional<uint32_t> Pick(std::span<const RunnableClient> runnable) override {
    uint64_t total = 0;
    for (const RunnableClient& r : runnable) {
      if (const TimesliceClient* c = Find(r.id)) total += c->weight;
    }
    if (total == 0) return std::nullopt;
    uint64_t draw = rng_.Uniform(total);
    for (const RunnableClient& r : runnable) {
      const TimesliceClient* c = Find(r.id);
      if (c == nullptr) continue;
      if (draw < c->weight) return r.id;
      draw -= c->weight;
    }
    return std::nullopt;  // unreachable
  }
  void Charge(uint32_t, Nanos) override {}

 private:
  Rng rng_;
};

class StrictPriority final : public PolicyBase {
 public:
  std::string_view name() const override { return "priority"; }
  std::optional<uint32_t> Pick(std::span<const RunnableClient> runnable) override {
    std::optional<int32_t> top;
    for (const RunnableClient& r : runnable) {
      if (const TimesliceClient* c = Find(r.id); c != nullptr && (!top || c->priority > *top)) top = c->priority;
    }
    if (!top) return std::nullopt;
    // Round robin within the top priority.
    std::optional<uint32_t> first, next;
    std::optional<uint32_t>& last = last_[*top];
    for (const RunnableClient& r : runnable) {
      const TimesliceClient* c = Find(r.id);
      if (c == nullptr || c->priority != *top) continue;
      if (!first || r.id < *first) first = r.id;
      if ((!last || r.id > *last) && (!next || r.id < *next)) next = r.id;
    }
    last = next ? next : first;
    return last;
  }
  void Charge(uint32_t, Nanos) override {}

 private:
  std::map<int32_t, std::optional<uint32_t>> last_;
};

class Hierarchical final : public PolicyBase {
 public:
  std::string_view name() const override { return "hierarchical"; }
  std::optional<uint32_t> Pick(std::span<const RunnableClient> runnable) override {
    std::map<uint32_t, std::vector<uint32_t>> by_tenant;
    for (const RunnableClient& r : runnable) {
      if (const TimesliceClient* c = Find(r.id)) by_tenant[c->tenant].push_back(r.id);
    }
    std::vector<uint32_t> tenants;
    for (const auto& [t, ids] : by_tenant) tenants.push_back(t);
    const std::optional<uint32_t> tenant = tenants_.Pick(tenants);
    if (!tenant) return std::nullopt;
    // Tenants' other clients keep their place in their own queue.
    return clients_of_[*tenant].Pick(by_tenant[*tenant]);
  }
  void Charge(uint32_t id, Nanos used) override {
    const TimesliceClient* c = Find(id);
    if (c == nullptr) return;
    tenants_.Charge(c->tenant, used, c->tenant_weight);
    clients_of_[c->tenant].Charge(id, used, c->weight);
  }
  // A paused client keeps its place in its tenant's queue, and its tenant its place among the
  // tenants.
  void KeepPlace(std::span<const uint32_t> paused, Nanos max_lag) override {
    std::map<uint32_t, std::vector<uint32_t>> by_tenant;
    std::vector<uint32_t> tenants;
    for (uint32_t id : paused) {
      if (const TimesliceClient* c = Find(id)) {
        if (by_tenant[c->tenant].empty()) tenants.push_back(c->tenant);
        by_tenant[c->tenant].push_back(id);
      }
    }
    const double lag = static_cast<double>(max_lag.count());
    tenants_.Keep(tenants, lag);
    for (auto& [tenant, ids] : by_tenant) clients_of_[tenant].Keep(ids, lag);
  }
  bool Prefers(uint32_t a, uint32_t b) const override {
    const TimesliceClient* ca = Find(a);
    const TimesliceClient* cb = Find(b);
    if (ca == nullptr || cb == nullptr) return false;
    if (ca->tenant != cb->tenant) return tenants_.VirtualTime(ca->tenant) < tenants_.VirtualTime(cb->tenant);
    auto it = clients_of_.find(ca->tenant);
    return it != clients_of_.end() && it->second.VirtualTime(a) < it->second.VirtualTime(b);
  }

 protected:
  void OnRemove(const TimesliceClient& c) override { clients_of_[c.tenant].Reset(c.id); }

 private:
  VirtualTimeQueue tenants_;
  std::map<uint32_t, VirtualTimeQueue> clients_of_;
};

}  // namespace

const std::vector<std::string>& TimeslicePolicyNames() {
  static const std::vector<std::string> names = {"round_robin", "weighted_fair", "edf",
                                                 "lottery",     "priority",      "hierarchical"};
  return names;
}

StatusOr<std::unique_ptr<TimeslicePolicy>> MakeTimeslicePolicy(std::string_view name, uint64_t seed) {
  if (name == "round_robin") return std::unique_ptr<TimeslicePolicy>(std::make_unique<RoundRobin>());
  if (name == "weighted_fair") return std::unique_ptr<TimeslicePolicy>(std::make_unique<WeightedFair>());
  if (name == "edf") return std::unique_ptr<TimeslicePolicy>(std::make_unique<EarliestDeadlineFirst>());
  if (name == "lottery") return std::unique_ptr<TimeslicePolicy>(std::make_unique<Lottery>(seed));
  if (name == "priority") return std::unique_ptr<TimeslicePolicy>(std::make_unique<StrictPriority>());
  if (name == "hierarchical") return std::unique_ptr<TimeslicePolicy>(std::make_unique<Hierarchical>());
  std::string known;
  for (const auto& n : TimeslicePolicyNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgumentError("unknown time-slice policy '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace tessera::node
