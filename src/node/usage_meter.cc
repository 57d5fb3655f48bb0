#include "tessera/node/usage_meter.h"

#include <algorithm>
#include <set>

namespace tessera::node {

UsageMeter::UsageMeter(UsageMeterOptions options) : options_(std::move(options)) {
  if (options_.period_s < 1) options_.period_s = 1;
}

api::UsageSample UsageMeter::Close(Open& o, int64_t end_s) {
  const int64_t end = std::max(end_s, o.from_s + 1);  // the ledger takes no empty span
  const int64_t span = end - o.from_s;
  const int64_t milli_per_s = std::min<int64_t>(std::max(o.share, 0), 1000);  // milli of the GPU
  // 1 GPU-second = 1000 milli-GPU-seconds = 1e9 ns; never more than one GPU busy for the span.
  // A MIG instance is the tenant's alone and not on the lease board (node_dir.h): its GPU time is
  // not measured, the whole instance is billed as used for the span.
  const int64_t used = o.mig ? milli_per_s * span
                             : std::min<int64_t>(static_cast<int64_t>(o.charged_ns / 1'000'000), 1000 * span);
  api::UsageSample s{.tenant = o.tenant,
                     .workload = o.workload,
                     .gpu = std::to_string(o.gpu),
                     .model = o.model,
                     .partition = o.mig ? "mig" : "share",
                     .seq = o.from_s,
                     .start_s = o.from_s,
                     .end_s = end,
                     .gpu_milli_s_allocated = milli_per_s * span,
                     .gpu_milli_s_used = used,
                     .memory_mib_s = static_cast<int64_t>(o.memory_mib_s),
                     .peak_memory_mib = static_cast<int64_t>(o.peak_bytes >> 20),
                     .kernel_launches = static_cast<int64_t>(o.launches),
                     .bytes_transferred = -1};
  o.from_s = end;
  o.launches = o.charged_ns = 0;
  o.memory_mib_s = 0;
  o.peak_bytes = 0;
  return s;
}

std::vector<api::UsageSample> UsageMeter::Observe(const NodeStatus& status, int64_t now_s) {
  std::vector<api::UsageSample> out;
  std::set<std::pair<std::string, int>> seen;
  for (const GpuStatus& g : status.gpus) {
    for (const TenantStatus& t : g.tenants) {
      auto model = options_.gpu_models.find(g.gpu);
      if (model == options_.gpu_models.end()) {
        if (std::find(unmetered_.begin(), unmetered_.end(), t.name) == unmetered_.end()) unmetered_.push_back(t.name);
        continue;
      }
      const std::pair<std::string, int> key{t.name, g.gpu};
      seen.insert(key);
      auto it = open_.find(key);
      if (it == open_.end()) {  // (a tenant moved to another GPU: a new source; the old one closes below)
        // A source closed before (a departure, yet its entry is listed again) starts where its
        // last sample ended: one second is never metered twice, and no seq is reused.
        const auto closed = closed_until_.find(key);
        const int64_t from = std::max(std::max(t.joined_s, options_.start_s),
                                      closed == closed_until_.end() ? int64_t{0} : closed->second.until_s);
        Open o{.tenant = t.account.empty() ? t.name : t.account,
               .workload = t.workload.empty() ? t.name : t.workload,
               .model = model->second,
               .gpu = g.gpu,
               .share = t.share,
               .mig = t.mig,
               .from_s = std::min(now_s, from),
               .last_seen_s = now_s};
        // Its counters started at zero with its slot: what they hold now is all its own (unless
        // it joined before the meter started: then only what comes from now on).
        if (t.joined_s < options_.start_s) {
          o.launches_seen = t.launches;
          o.charged_seen_ns = t.charged_ns;
        }
        if (closed != closed_until_.end()) {  // what its closed samples billed is not billed again
          o.launches_seen = closed->second.launches_seen;
          o.charged_seen_ns = closed->second.charged_seen_ns;
        }
        it = open_.insert_or_assign(key, std::move(o)).first;
      }
      Open& o = it->second;
      // Relabelled (NodeDir::Relabel: a slot whose owner became known): what was seen up to the
      // previous look is billed under the old labels, the rest under the new ones.
      std::string tenant_label = t.account.empty() ? t.name : t.account;
      std::string workload_label = t.workload.empty() ? t.name : t.workload;
      if (o.tenant != tenant_label || o.workload != workload_label) {
        if (o.last_seen_s > o.from_s || o.charged_ns > 0 || o.launches > 0) out.push_back(Close(o, o.last_seen_s));
        o.tenant = std::move(tenant_label);
        o.workload = std::move(workload_label);
      }
      // Counters only grow while the slot lives; one that went back was reset (a re-added
      // slot, a new arbiter) and counts from zero.
      o.launches += t.launches >= o.launches_seen ? t.launches - o.launches_seen : t.launches;
      o.charged_ns += t.charged_ns >= o.charged_seen_ns ? t.charged_ns - o.charged_seen_ns : t.charged_ns;
      o.launches_seen = t.launches;
      o.charged_seen_ns = t.charged_ns;
      o.memory_mib_s += static_cast<double>(t.used_bytes >> 20) * static_cast<double>(std::max<int64_t>(now_s - o.last_seen_s, 0));
      o.peak_bytes = std::max(o.peak_bytes, t.peak_bytes);
      o.share = t.share;  // the latest share applies to the open interval
      o.last_seen_s = now_s;
      if (now_s - o.from_s >= options_.period_s) out.push_back(Close(o, now_s));
    }
  }
  for (auto it = open_.begin(); it != open_.end();) {
    if (seen.count(it->first)) {
      ++it;
      continue;
    }
    Open& o = it->second;
    // A tenant that left right after a periodic sample has nothing more to report.
    if (o.last_seen_s > o.from_s || o.charged_ns > 0 || o.launches > 0) out.push_back(Close(o, o.last_seen_s));
    closed_until_[it->first] = {o.from_s, o.launches_seen, o.charged_seen_ns};
    it = open_.erase(it);
  }
  std::erase_if(closed_until_, [now_s](const auto& c) { return c.second.until_s < now_s - 3600; });
  return out;
}

std::vector<api::UsageSample> UsageMeter::Depart(const std::vector<Departure>& departures) {
  std::vector<api::UsageSample> out;
  for (const Departure& d : departures) {
    auto model = options_.gpu_models.find(d.gpu);
    if (model == options_.gpu_models.end()) {
      if (std::find(unmetered_.begin(), unmetered_.end(), d.name) == unmetered_.end()) unmetered_.push_back(d.name);
      continue;
    }
    auto it = open_.find({d.name, d.gpu});
    if (it != open_.end()) {
      Open& o = it->second;
      o.launches += d.launches >= o.launches_seen ? d.launches - o.launches_seen : d.launches;
      o.charged_ns += d.charged_ns >= o.charged_seen_ns ? d.charged_ns - o.charged_seen_ns : d.charged_ns;
      o.peak_bytes = std::max(o.peak_bytes, d.peak_bytes);
      out.push_back(Close(o, std::max(d.left_s, o.last_seen_s)));
      closed_until_[it->first] = {o.from_s, d.launches, d.charged_ns};  // Close moved from_s to the sample's end
      open_.erase(it);
      continue;
    }
    // Its interval closed at a look that no longer saw it, before its departure was taken: only
    // what came after that sample (time, counters' growth) is left to bill.
    if (auto closed = closed_until_.find({d.name, d.gpu}); closed != closed_until_.end()) {
      const Closed c = closed->second;
      const uint64_t launches = d.launches >= c.launches_seen ? d.launches - c.launches_seen : d.launches;
      const uint64_t charged = d.charged_ns >= c.charged_seen_ns ? d.charged_ns - c.charged_seen_ns : d.charged_ns;
      // Nothing after the last sample's end: a duplicate departure, or one of the second it ended.
      if (d.left_s <= c.until_s && launches == 0 && charged == 0) continue;
      Open rest{.tenant = d.account.empty() ? d.name : d.account,
                .workload = d.workload.empty() ? d.name : d.workload,
                .model = model->second,
                .gpu = d.gpu,
                .share = d.share,
                .mig = d.mig,
                .from_s = c.until_s,
                .last_seen_s = d.left_s,
                .launches = launches,
                .charged_ns = charged,
                .peak_bytes = d.peak_bytes};
      out.push_back(Close(rest, d.left_s));
      closed->second = {rest.from_s, d.launches, d.charged_ns};
      continue;
    }
    // Came and went between two looks: all its counters are its own (unless it joined before
    // the meter started: then its time before is not this meter's, and its counters are
    // billed from the meter's start, as an estimate).
    Open o{.tenant = d.account.empty() ? d.name : d.account,
           .workload = d.workload.empty() ? d.name : d.workload,
           .model = model->second,
           .gpu = d.gpu,
           .share = d.share,
           .mig = d.mig,
           .from_s = std::min(d.left_s, std::max(d.joined_s, options_.start_s)),
           .last_seen_s = d.left_s,
           .launches = d.launches,
           .charged_ns = d.charged_ns,
           .peak_bytes = d.peak_bytes};
    out.push_back(Close(o, d.left_s));
    closed_until_[{d.name, d.gpu}] = {o.from_s, d.launches, d.charged_ns};
  }
  return out;
}

std::vector<api::UsageSample> UsageMeter::Flush(int64_t now_s) {
  std::vector<api::UsageSample> out;
  for (auto& [key, o] : open_) out.push_back(Close(o, now_s));
  open_.clear();
  return out;
}

}  // namespace tessera::node
