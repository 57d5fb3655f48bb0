// The node directory's other tenants, as the agent's heartbeat reports them (issue 34; step 2 of
// tessera/node/agent.h): the tenants that DRA claims, device-plugin slots, Slurm tasks or a
// `tessera run` by hand joined on this node, which the control plane did not place and so would
// otherwise count as free.
//
// Cost per round: one stat(2) of the registry (the file is parsed again only when a join or a
// leave replaced it) and the liveness of the other tenants' members (NodeDir::LiveEntries: one
// kill(2) per command group or member, each asked once). No counters file is mapped. With
// --meter-local-slots (MeterLocalSlots), their figures come from the segment and lease file the
// usage samples keep mapped (a counters file mapped once, again only when the registry changed).
//
// What a slot says: its GPUs (those of this node's inventory; an index beyond it is left out, a
// tenant with none left is not sent), its share as milli of each GPU (the DRA driver, the device
// plugin and the agent join with milli; a larger weight, such as `tessera run --share 2000`,
// counts as the whole GPU: min(share, 1000)), its memory limit in MiB rounded up (0 when it has
// none, enforce::kUnlimited) and its MIG instance.
//
// Worked example (a 2-GPU node; the agent holds workload 7, slot "w7"; the registry holds w7,
// "k8s-dra/ns/c" on GPU 0 with share 600 and 10 GiB, and "x" on GPUs 1 and 5 with share 3000):
//   LocalSlots() = [{"k8s-dra/ns/c", {0}, 600, 10240, ""}, {"x", {1}, 1000, 0, ""}]
// (w7 is the agent's own; GPU 5 is not this node's.)
#include <unistd.h>

#include <algorithm>
#include <map>
#include <set>

#include "tessera/api/usage_wire.h"
#include "tessera/enforce/segment.h"
#include "tessera/node/agent.h"

namespace tessera::node {

std::optional<std::vector<api::LocalSlot>> Agent::LocalSlots() {
  std::vector<api::LocalSlot> out;
  const std::optional<FileStamp> stamp = StampOf(node_.paths().registry);
  if (!stamp) return out;  // no node directory yet: nobody joined
  if (stamp != local_stamp_) {
    StatusOr<std::vector<TenantEntry>> entries = node_.RegistryEntries();
    if (!entries.ok()) {
      Log("local slots not reported: " + std::string(entries.status().message()));
      return std::nullopt;
    }
    local_entries_ = std::move(*entries);
    local_stamp_ = stamp;
  }
  std::set<std::string> own;
  for (const auto& [id, w] : held_) own.insert(w.slot);
  std::vector<TenantEntry> others;
  for (const TenantEntry& e : local_entries_)
    if (!own.count(e.name)) others.push_back(e);
  const int gpus = static_cast<int>(inventory_.gpus.size());
  for (const TenantEntry& e : node_.LiveEntries(std::move(others), nullptr)) {
    // Names and instances the wire does not take (a heartbeat refused each round would lose the
    // node) are left out; the node directory's own names are shorter.
    if (e.name.empty() || e.name.size() > 253 || e.mig_instance.size() > 96) continue;
    api::LocalSlot slot{.tenant = e.name};
    for (int g : e.gpus)
      if (g >= 0 && g < gpus) slot.gpus.push_back(g);
    if (slot.gpus.empty()) continue;
    slot.milli = std::clamp(e.share, 0, 1000);
    constexpr uint64_t kMiB = uint64_t{1} << 20;
    slot.mem_mib = e.mem_bytes >= enforce::kUnlimited
                       ? 0
                       : static_cast<int64_t>(std::min<uint64_t>((e.mem_bytes + kMiB - 1) / kMiB, uint64_t{1} << 31));
    slot.mig_instance = e.mig_instance;
    out.push_back(std::move(slot));
  }
  std::sort(out.begin(), out.end(), [](const api::LocalSlot& a, const api::LocalSlot& b) { return a.tenant < b.tenant; });
  if (out.size() > api::kMaxLocalSlots) out.resize(api::kMaxLocalSlots);
  return out;
}

Status Agent::MeterLocalSlots(int64_t now_ms) {
  if (!options_.meter_local_slots) return Status::Ok();
  std::set<std::string> own;
  for (const auto& [id, w] : held_) own.insert(w.slot);
  std::vector<TenantEntry> others;
  for (const TenantEntry& e : local_entries_)
    if (!own.count(e.name)) others.push_back(e);
  if (others.empty() && !local_meter_) return Status::Ok();  // nothing to meter, nothing open
  const int64_t now_s = now_ms / 1000;
  if (!local_meter_) {
    UsageMeterOptions o{.period_s = options_.usage_interval_s, .start_s = now_s};
    for (const InventoryGpu& g : inventory_.gpus) o.gpu_models[g.index] = g.model;
    local_meter_.emplace(std::move(o));
  }
  // What NodeDir::ReadStatus says of these tenants, from the mappings kept between rounds (it maps
  // the policy, the lease file and all 64 counters files twice, then unmaps them: at 1 round a
  // second, 3 % of a core for an agent beside 32 claims, mostly the TLB shootdowns of munmap).
  NodeStatus status;
  if (!others.empty() && ::access(node_.paths().policy.c_str(), F_OK) == 0) {
    TESSERA_RETURN_IF_ERROR(MapUsageFiles());
    std::map<int, GpuStatus> gpus;
    for (const TenantEntry& e : node_.LiveEntries(std::move(others), &*usage_segment_)) {
      if (e.index < 0 || e.index >= enforce::kMaxTenants) continue;
      const enforce::CounterSegment* counters = usage_segment_->counters(e.index);
      for (int gpu : e.gpus) {
        if (gpu < 0 || gpu >= enforce::kMaxGpus) continue;
        TenantStatus t{.name = e.name,
                       .index = e.index,
                       .limit_bytes = usage_segment_->policy().tenants[e.index].limit_bytes[gpu].load(),
                       .used_bytes = usage_segment_->ReservedBytes(e.index, gpu),
                       .peak_bytes = usage_segment_->PeakBytes(e.index, gpu),
                       .share = e.share,
                       .priority = e.priority,
                       .account = e.account,
                       .workload = e.workload,
                       .joined_s = e.joined_s,
                       .launches = counters != nullptr ? counters->lease_slots[gpu].tenant.launches.load() : 0,
                       .charged_ns = usage_leases_->board(gpu).node[e.index].charged_ns.load(),
                       .mig = !e.mig_instance.empty()};
        GpuStatus& g = gpus[gpu];
        g.gpu = gpu;
        g.tenants.push_back(std::move(t));
      }
    }
    for (auto& [gpu, g] : gpus) status.gpus.push_back(std::move(g));
  }
  bool added = false;
  for (const api::UsageSample& s : local_meter_->Observe(status, now_s)) {
    outbox_.push_back(api::EncodeUsageSample(s));
    added = true;
  }
  return added ? SaveOutbox() : Status::Ok();
}

}  // namespace tessera::node
