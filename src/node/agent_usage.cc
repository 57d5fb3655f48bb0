// The agent's usage samples (tessera/node/agent.h): taken from the segment and the lease boards,
// kept in an outbox file until the control plane acknowledged them, sent in batches.
#include <unistd.h>

#include <algorithm>
#include <map>
#include <utility>
#include <nlohmann/json.hpp>

#include "src/node/agent_impl.h"
#include "tessera/api/usage_wire.h"
#include "tessera/node/agent.h"

namespace tessera::node {

using nlohmann::json;

namespace {

constexpr size_t kMaxBatch = 1000;      // samples per POST
constexpr size_t kMaxOutbox = 100'000;  // beyond it the oldest are dropped (and counted)

}  // namespace

bool Agent::HasUnsampledEnd() const {
  return std::any_of(held_.begin(), held_.end(),
                     [](const auto& p) { return p.second.ended && !p.second.final_sampled; });
}

bool Agent::RefreshSlotIndex(std::string* why) {
  const std::optional<FileStamp> stamp = StampOf(node_.paths().registry);
  if (!stamp) {
    *why = "cannot stat '" + node_.paths().registry + "'";
    return false;
  }
  if (stamp == slots_stamp_) return true;
  StatusOr<std::vector<TenantEntry>> entries = node_.RegistryEntries();
  if (!entries.ok()) {
    *why = std::string(entries.status().message());
    return false;
  }
  slot_index_.clear();
  for (const TenantEntry& e : *entries) slot_index_[e.name] = e.index;
  slots_stamp_ = stamp;
  return true;
}

Status Agent::MapUsageFiles() {
  std::string why;
  if (!RefreshSlotIndex(&why)) return UnavailableError("usage: " + why);
  if (usage_segment_ && usage_stamp_ != slots_stamp_ && !usage_segment_->RefreshCounters().ok()) usage_segment_.reset();
  if (!usage_segment_) {
    TESSERA_ASSIGN_OR_RETURN(enforce::NodeSegment seg,
                             enforce::NodeSegment::OpenOnDemand(node_.paths().policy, node_.paths().counters));
    usage_segment_.emplace(std::move(seg));
  }
  usage_stamp_ = slots_stamp_;
  if (!usage_leases_) {
    TESSERA_ASSIGN_OR_RETURN(enforce::LeaseFile leases, enforce::LeaseFile::OpenNodeLines(node_.paths().leases));
    usage_leases_.emplace(std::move(leases));
  }
  return Status::Ok();
}

StatusOr<std::map<std::pair<std::string, int>, Agent::SlotFigures>> Agent::HeldSlotFigures() {
  std::map<std::pair<std::string, int>, SlotFigures> out;
  if (held_.empty() || ::access(node_.paths().policy.c_str(), F_OK) != 0) return out;  // no node yet
  TESSERA_RETURN_IF_ERROR(MapUsageFiles());
  for (const auto& [id, w] : held_) {
    auto index = slot_index_.find(w.slot);
    if (w.final_sampled || index == slot_index_.end()) continue;
    const int t = index->second;
    const enforce::CounterSegment* counters = usage_segment_->counters(t);
    for (int gpu : w.gpus) {
      SlotFigures& f = out[{w.slot, gpu}];
      f.launches = counters != nullptr ? counters->lease_slots[gpu].tenant.launches.load() : 0;
      f.charged_ns = usage_leases_->board(gpu).node[t].charged_ns.load();
      f.used_bytes = usage_segment_->ReservedBytes(t, gpu);
      f.peak_bytes = usage_segment_->PeakBytes(t, gpu);
    }
  }
  return out;
}

Status Agent::SampleUsage(int64_t now_ms) {
  TESSERA_ASSIGN_OR_RETURN(const auto by_slot, HeldSlotFigures());  // (slot, GPU)
  const int64_t now_s = now_ms / 1000;
  bool outbox_changed = false;
  for (auto& [id, w] : held_) {
    if (w.final_sampled) continue;
    // A workload that ends in the second it started (or was last sampled in) is billed that
    // started second: its final sample spans 1 s, so short work is neither free nor loses its
    // kernel launches (the ledger takes no empty span).
    const int64_t end_s = w.ended ? std::max(now_s, w.usage_from_s + 1) : now_s;
    const int64_t span = end_s - w.usage_from_s;
    // One sample per GPU (a pod's GPUs each have their own source: node, workload, GPU), with
    // that GPU's counters; all of them share the span and the seq.
    for (size_t i = 0; i < w.gpus.size() && span > 0; ++i) {
      const int gpu = w.gpus[i];
      auto t = by_slot.find({w.slot, gpu});
      const uint64_t launches = t != by_slot.end() ? t->second.launches : w.reported_launches[i];
      const uint64_t charged = t != by_slot.end() ? t->second.charged_ns : w.reported_charged_ns[i];
      const uint64_t used = t != by_slot.end() ? t->second.used_bytes : 0;
      const uint64_t peak = t != by_slot.end() ? t->second.peak_bytes : 0;
      // Counters only grow while the slot lives; a reset (a reused index) counts from zero.
      const uint64_t new_launches = launches >= w.reported_launches[i] ? launches - w.reported_launches[i] : launches;
      const uint64_t new_charged = charged >= w.reported_charged_ns[i] ? charged - w.reported_charged_ns[i] : charged;
      const int64_t allocated = int64_t{w.gpu_milli} * span;
      // GPU time: 1 GPU-second = 1000 milli-GPU-seconds = 1e9 ns, so milli-seconds = ns / 1e6.
      // A MIG workload is not on the lease board (node_dir.h, TenantRequest::mig_instance): its
      // instance is its alone, billed as used for the span.
      const int64_t used_milli_s = w.mig_start >= 0 ? allocated
                                                    : std::min<int64_t>(static_cast<int64_t>(new_charged / 1'000'000), 1000 * span);
      api::UsageSample sample{.tenant = w.tenant,
                                    .workload = std::to_string(w.id),
                                    .gpu = std::to_string(gpu),
                                    .model = inventory_.gpus[static_cast<size_t>(gpu)].model,
                                    .partition = w.partition,
                                    .seq = w.next_seq,
                                    .start_s = w.usage_from_s,
                                    .end_s = end_s,
                                    .gpu_milli_s_allocated = allocated,
                                    .gpu_milli_s_used = used_milli_s,
                                    .memory_mib_s = static_cast<int64_t>(used >> 20) * span,
                                    .peak_memory_mib = static_cast<int64_t>(peak >> 20),
                                    .kernel_launches = static_cast<int64_t>(new_launches),
                                    .bytes_transferred = -1};
      // NVML's view of the same span (Backstop's window), where the driver gave it.
      if (auto win = nvml_windows_.find({w.id, gpu}); win != nvml_windows_.end()) {
        const NvmlWindow& v = win->second;
        if (!v.util_unknown && v.sampled && v.covered_ms > 0) sample.nvml_used_milli = v.busy_milli_ms / v.covered_ms;
        if (!v.memory_unknown && v.peak_mib >= 0) sample.nvml_memory_mib = v.peak_mib;
        nvml_windows_.erase(win);
      }
      outbox_.push_back(api::EncodeUsageSample(sample));
      outbox_changed = true;
      w.reported_launches[i] = launches;
      w.reported_charged_ns[i] = charged;
    }
    if (span > 0) {
      ++w.next_seq;
      w.usage_from_s = end_s;
    }
    if (w.ended) w.final_sampled = true;
  }
  if (outbox_.size() > kMaxOutbox) {
    const size_t drop = outbox_.size() - kMaxOutbox;
    outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(drop));
    stats_.samples_rejected += static_cast<int64_t>(drop);
    Log("usage outbox full: dropped the " + std::to_string(drop) + " oldest samples");
  }
  // The outbox first: a crash between the two files resends a sample (counted once), never
  // loses one or gives a seq twice to different values.
  if (outbox_changed) TESSERA_RETURN_IF_ERROR(SaveOutbox());
  TESSERA_RETURN_IF_ERROR(SaveUsageCursors());
  for (auto& [id, w] : held_) {
    if (w.ended && w.final_sampled && w.stop_deadline_ms == 0) (void)Release(w);  // the slot goes
  }
  return Status::Ok();
}

Status Agent::SendUsage() {
  const size_t n = std::min(outbox_.size(), kMaxBatch);
  const std::string body = api::EncodeUsageBatch({outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(n)});
  TESSERA_ASSIGN_OR_RETURN(LinkResponse r, link_->Call("POST", "/v1/nodes/" + options_.name + "/usage", body));
  if (r.status == 401 || r.status == 403) return internal::RefusedToken(r, "usage");
  // Anything else keeps the samples for the next round (a 404 for an unknown node is the
  // heartbeat's to handle: it registers again).
  if (r.status != 200) return UnavailableError("usage: " + internal::ResponseMessage(r));
  json j = json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("rejected") && j["rejected"].is_array()) {
    for (const json& x : j["rejected"]) {
      ++stats_.samples_rejected;
      Log("usage sample refused: " + (x.is_object() ? x.value("error", std::string("?")) : std::string("?")));
    }
    stats_.samples_sent += static_cast<int64_t>(n) - static_cast<int64_t>(j["rejected"].size());
  } else {
    stats_.samples_sent += static_cast<int64_t>(n);
  }
  outbox_.erase(outbox_.begin(), outbox_.begin() + static_cast<std::ptrdiff_t>(n));
  return SaveOutbox();
}

Status Agent::SaveOutbox() const {
  std::string text = "[";
  for (size_t i = 0; i < outbox_.size(); ++i) text += (i ? ",\n" : "\n") + outbox_[i];
  text += "\n]\n";
  return internal::WriteFileAtomically(AgentDir() + "/outbox.json", text);
}

Status Agent::SaveUsageCursors() const {
  json j = json::object();
  for (const auto& [id, w] : held_) {
    j[std::to_string(id)] = json{{"next_seq", w.next_seq},
                                 {"usage_from_s", w.usage_from_s},
                                 {"reported_launches", w.reported_launches},
                                 {"reported_charged_ns", w.reported_charged_ns}};
  }
  return internal::WriteFileAtomically(AgentDir() + "/usage_cursors.json", j.dump() + "\n");
}

Status Agent::LoadUsageCursors() {
  const std::string path = AgentDir() + "/usage_cursors.json";
  StatusOr<std::string> text = internal::ReadWholeFile(path);
  if (!text.ok()) return text.status().code() == StatusCode::kNotFound ? Status::Ok() : text.status();
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return DataLossError("'" + path + "': not a JSON object of workloads");
  for (auto& [id, w] : held_) {
    auto c = j.find(std::to_string(id));
    if (c == j.end()) continue;
    try {
      const int64_t next_seq = c->at("next_seq").get<int64_t>();
      if (next_seq <= w.next_seq) continue;  // w<id>.json was written after it (a limit change, a stop)
      std::vector<uint64_t> launches = c->at("reported_launches").get<std::vector<uint64_t>>();
      std::vector<uint64_t> charged = c->at("reported_charged_ns").get<std::vector<uint64_t>>();
      if (launches.size() != w.gpus.size() || charged.size() != w.gpus.size())
        return DataLossError("'" + path + "': workload " + std::to_string(id) + ": counters of " +
                             std::to_string(launches.size()) + " GPUs, it has " + std::to_string(w.gpus.size()));
      w.next_seq = next_seq;
      w.usage_from_s = c->at("usage_from_s").get<int64_t>();
      w.reported_launches = std::move(launches);
      w.reported_charged_ns = std::move(charged);
    } catch (const json::exception& e) {
      return DataLossError("'" + path + "': workload " + std::to_string(id) + ": field missing or of the wrong type (" +
                           e.what() + ")");
    }
  }
  return Status::Ok();
}

Status Agent::LoadOutbox() {
  const std::string path = AgentDir() + "/outbox.json";
  StatusOr<std::string> text = internal::ReadWholeFile(path);
  if (!text.ok()) return text.status().code() == StatusCode::kNotFound ? Status::Ok() : text.status();
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_array()) return DataLossError("'" + path + "': not a JSON array of samples");
  for (const json& s : j) {
    if (!s.is_object()) return DataLossError("'" + path + "': a sample is not an object");
    outbox_.push_back(s.dump());
  }
  return Status::Ok();
}

}  // namespace tessera::node
