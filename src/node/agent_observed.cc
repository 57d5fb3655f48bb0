// The agent's NVML view charged to the lease arbiter (tessera/node/agent.h, "NVML's view charged to
// the arbiter"; the rule is node::UnderChargedNs, tessera/node/lease_arbiter.h).
#include <algorithm>
#include <string>

#include "tessera/enforce/lease_file.h"
#include "tessera/node/agent.h"
#include "tessera/node/lease_arbiter.h"

namespace tessera::node {

void Agent::ChargeObservedTime(const NvmlPass& pass, int64_t elapsed_ms) {
  std::erase_if(observed_watch_, [&](const auto& e) { return !held_.count(e.first.first); });
  if (elapsed_ms <= 0) return;
  std::string why;
  if (!RefreshSlotIndex(&why)) return;
  if (!observed_leases_) {
    StatusOr<enforce::LeaseFile> leases = enforce::LeaseFile::Open(node_.paths().leases);
    if (!leases.ok()) return;  // no board yet: nothing is time-sliced
    observed_leases_.emplace(std::move(*leases));
  }
  const uint64_t window_ns = static_cast<uint64_t>(elapsed_ms) * 1'000'000;
  for (auto& [id, w] : held_) {
    // Time-sliced workloads only: a whole GPU, a MIG instance or an MPS client is not on a board.
    if (w.ended || w.pid <= 0 || w.partition != "share" || w.mps_thread_pct > 0 || !w.mig_uuid.empty()) continue;
    auto index = slot_index_.find(w.slot);
    if (index == slot_index_.end()) continue;
    for (int gpu : w.gpus) {
      // No new sample on the GPU reads the same as a driver that does not sample: no judgement.
      if (!pass.sampled.count(gpu) || gpu >= observed_leases_->num_gpus()) continue;
      enforce::LeaseSlotNodeLine& line = observed_leases_->board(gpu).node[index->second];
      const uint64_t charged = line.charged_ns.load(std::memory_order_acquire);
      const uint64_t extra = line.observed_extra_ns.load(std::memory_order_acquire);
      auto [watch, first] = observed_watch_.try_emplace({id, gpu}, ObservedWatch{charged, extra, false, 0, UnderChargeTracker()});
      ObservedWatch& o = watch->second;
      if (first) continue;  // the first pass only sets where the charge stood
      // What the tenant was charged of its own since the previous pass: the charge's growth less
      // what this rule added then (the arbiter charged it since). A charge that went back to zero
      // (the arbiter added the slot again) counts from zero.
      const int64_t grown = charged >= o.charged_ns ? static_cast<int64_t>(charged - o.charged_ns)
                                                    : static_cast<int64_t>(charged);
      const uint64_t own = static_cast<uint64_t>(std::max<int64_t>(0, grown - static_cast<int64_t>(extra - o.extra_ns)));
      auto busy = pass.sm_milli.find({id, gpu});
      const int64_t milli = std::min<int64_t>(busy != pass.sm_milli.end() ? busy->second : 0, 1000);
      const uint64_t observed = static_cast<uint64_t>(milli) * window_ns / 1000;
      const uint64_t add = o.tracker.Pass(observed, own, window_ns);
      o.charged_ns = charged;
      o.extra_ns = extra;
      if (add == 0) {
        // An episode ends after ten quiet passes (the lag and the decay make single quiet ones).
        if (o.episode && ++o.quiet_passes >= 10) o.episode = false;
        continue;
      }
      o.quiet_passes = 0;
      line.observed_extra_ns.fetch_add(add, std::memory_order_release);
      stats_.gpu_time_recharged_ns += static_cast<int64_t>(add);
      if (o.episode) continue;  // one event per episode
      o.episode = true;
      const std::string detail = "GPU " + std::to_string(gpu) + ": NVML saw " + std::to_string(milli) +
                                 " milli of the GPU over " + std::to_string(elapsed_ms) + " ms, it was charged " +
                                 std::to_string(own / 1'000'000) + " ms; charged " + std::to_string(add / 1'000'000) +
                                 " ms more (and each period while it lasts)";
      if (last_backstop_ms_ >= recharge_events_refused_until_ms_)
        events_.push_back({w.id, std::string(api::kGpuTimeRecharged), detail});
      Log("workload " + std::to_string(w.id) + ": gpu_time_recharged: " + detail);
    }
  }
}

}  // namespace tessera::node
