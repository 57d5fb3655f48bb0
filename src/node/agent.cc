// The node agent's rounds (tessera/node/agent.h): registration, heartbeat, desired state. The
// workload processes and the files that let a restarted agent re-adopt them are in
// agent_workloads.cc; usage samples in agent_usage.cc.
#include "tessera/node/agent.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <random>
#include <nlohmann/json.hpp>

#include "src/node/agent_impl.h"
#include "tessera/api/event_wire.h"
#include "tessera/node/arbiter_duty.h"

namespace tessera::node {

using nlohmann::json;

namespace internal {

std::string ResponseMessage(const LinkResponse& r) {
  if (StatusOr<api::ErrorEnvelope> e = api::DecodeErrorEnvelope(r.body, nullptr); e.ok() && !e->message.empty())
    return e->message;
  return "HTTP " + std::to_string(r.status) + (r.body.empty() ? "" : ": " + r.body.substr(0, 200));
}

Status RefusedToken(const LinkResponse& r, std::string_view what) {
  const std::string m = std::string(what) + ": the control plane refused the token (HTTP " +
                        std::to_string(r.status) + "): " + ResponseMessage(r);
  return Status(r.status == 401 ? StatusCode::kUnauthenticated : StatusCode::kPermissionDenied, m);
}

}  // namespace internal

Agent::Agent(AgentOptions options, Inventory inventory, ControlPlaneLink* link)
    : options_(std::move(options)),
      inventory_(std::move(inventory)),
      link_(link),
      node_(options_.run_dir),
      mps_({.run_dir = options_.run_dir, .control_binary = options_.mps_control}) {}

Agent::~Agent() { StopArbiters(); }

std::string Agent::AgentDir() const { return options_.run_dir + "/agent"; }

void Agent::Log(std::string line) { log_.push_back(std::move(line)); }

std::vector<std::string> Agent::TakeLog() { return std::exchange(log_, {}); }

Status Agent::Register() {
  TESSERA_ASSIGN_OR_RETURN(LinkResponse r,
                           link_->Call("POST", "/v1/nodes/" + options_.name + "/register",
                                       InventoryJson(inventory_, agent_id_, options_.allow_mig_reconfigure)));
  if (r.status == 401 || r.status == 403) return internal::RefusedToken(r, "register");
  if (r.status == 400) return InvalidArgumentError("the control plane refused the inventory: " + internal::ResponseMessage(r));
  if (r.status != 200) return UnavailableError("register: " + internal::ResponseMessage(r));
  registered_ = true;
  desired_version_.clear();  // a node registered again: its desired state is fetched afresh
  local_acked_.emplace();    // ... and the control plane holds no local slots for it (none to send)
  ++stats_.registrations;
  Log("registered node '" + options_.name + "' (" + std::to_string(inventory_.gpus.size()) + " GPUs)");
  return Status::Ok();
}

Status Agent::Heartbeat(int64_t now_ms) {
  api::Heartbeat beat{finished_, events_, {}};
  if (nvml_condition_) beat.conditions.push_back(*nvml_condition_);
  if (mig_condition_) beat.conditions.push_back(*mig_condition_);
  // The node directory's other tenants: only when the control plane does not hold this list.
  std::optional<std::vector<api::LocalSlot>> local = LocalSlots();
  // Their GPUs' lease boards are driven from here too: a DRA claim's or a device-plugin slot's
  // share is enforced by its GPU's arbiter, and no other process of a Kubernetes node runs one
  // (on a Slurm node tessera-node-arbiter.service does; the arbiter lock makes one of them drive).
  if (local)
    for (const api::LocalSlot& l : *local)
      if (l.mig_instance.empty())
        for (int g : l.gpus) EnsureArbiter(g);
  // Sent unless an older control plane refused the field (see below).
  if (local && now_ms >= local_refused_until_ms_ &&
      (!local_acked_ || *local_acked_ != *local || (!local->empty() && now_ms - local_acked_ms_ >= kLocalSlotsResendMs)))
    beat.local_slots = std::move(*local);
  const std::string body = api::EncodeHeartbeat(beat);
  const size_t events_sent = events_.size();
  TESSERA_ASSIGN_OR_RETURN(LinkResponse r, link_->Call("POST", "/v1/nodes/" + options_.name + "/heartbeat", body));
  if (r.status == 401 || r.status == 403) return internal::RefusedToken(r, "heartbeat");
  if (r.status == 404) {  // the control plane does not know the node (lost, or a new store)
    registered_ = false;
    Log("the control plane does not know node '" + options_.name + "': registering again");
    return Status::Ok();
  }
  if (r.status == 400 && beat.local_slots && r.body.find("local_slots") != std::string::npos) {
    // A control plane older than the field refuses the whole heartbeat (its decoding is strict):
    // the heartbeat goes again at once without the list, and the list waits kLocalSlotsRetryMs, so
    // that agents upgraded before their control plane keep their nodes alive.
    local_refused_until_ms_ = now_ms + kLocalSlotsRetryMs;
    Log("the control plane refused the heartbeat's local_slots (" + internal::ResponseMessage(r) +
        "): an older version; the node directory's other tenants are not reported for " +
        std::to_string(kLocalSlotsRetryMs / 60'000) + " minutes (upgrade the control plane first)");
    return Heartbeat(now_ms);
  }
  if (r.status == 400 && r.body.find(api::kGpuTimeRecharged) != std::string::npos &&
      std::erase_if(events_, [](const api::AgentEvent& e) { return e.kind == api::kGpuTimeRecharged; }) > 0) {
    // The same for the newer event kind: the charge stands (it is the arbiter's), the events are
    // dropped and not queued again for kLocalSlotsRetryMs; the agent's log keeps them.
    recharge_events_refused_until_ms_ = now_ms + kLocalSlotsRetryMs;
    Log("the control plane refused the heartbeat's gpu_time_recharged events (" + internal::ResponseMessage(r) +
        "): an older version; they stay in this log for " + std::to_string(kLocalSlotsRetryMs / 60'000) +
        " minutes (upgrade the control plane first)");
    return Heartbeat(now_ms);
  }
  if (r.status != 200) return UnavailableError("heartbeat: " + internal::ResponseMessage(r));
  // The desired state's version (none from an older control plane, or an answer this agent
  // cannot read: then GET desired every round, as before).
  StatusOr<api::HeartbeatAnswer> answer = api::DecodeHeartbeatAnswer(r.body, nullptr);
  heard_version_ = answer.ok() ? answer->desired_version : "";
  if (beat.local_slots) {
    local_acked_ = std::move(beat.local_slots);
    local_acked_ms_ = now_ms;
    ++stats_.local_slot_reports;
  }
  for (const api::FinishedWorkload& f : finished_) {
    const int64_t id = f.id;
    auto w = held_.find(id);
    if (w != held_.end()) {
      done_.insert(id);
      (void)::unlink(internal::WorkloadFile(AgentDir(), id).c_str());
      held_.erase(w);
    }
    ++stats_.finished_reported;
  }
  finished_.clear();
  events_.erase(events_.begin(), events_.begin() + static_cast<std::ptrdiff_t>(events_sent));
  return Status::Ok();
}

Status Agent::Start() {
  if (::mkdir(options_.run_dir.c_str(), 0755) != 0 && errno != EEXIST)
    return InternalError("node directory '" + options_.run_dir + "': " + std::strerror(errno));
  if (::mkdir(AgentDir().c_str(), 0755) != 0 && errno != EEXIST)
    return InternalError("agent directory '" + AgentDir() + "': " + std::strerror(errno));
  TESSERA_RETURN_IF_ERROR(LoadAgentId());
  TESSERA_RETURN_IF_ERROR(LoadTenantUids());
  TESSERA_RETURN_IF_ERROR(Adopt());
  TESSERA_RETURN_IF_ERROR(LoadUsageCursors());
  AdoptMps();
  shim_inode_ = ShimInode();
  return LoadOutbox();
}

uint64_t Agent::ShimInode() const {
  // The shim the supervisors load: TESSERA_SHIM_PATH as they get it, else next to the supervisor
  // (node::ResolveShim's default, seen from the supervisor's executable).
  std::vector<std::string> candidates;
  for (const auto& [key, value] : options_.child_env)
    if (key == "TESSERA_SHIM_PATH") candidates.push_back(value);
  if (const char* env = std::getenv("TESSERA_SHIM_PATH"); env != nullptr && *env != '\0') candidates.push_back(env);
  const std::string dir = options_.supervisor.substr(0, options_.supervisor.rfind('/') + 1);
  candidates.push_back(dir + "libtessera-shim.so");
  candidates.push_back(dir + "../lib/libtessera-shim.so");
  for (const std::string& c : candidates) {
    struct stat st {};
    if (!c.empty() && ::stat(c.c_str(), &st) == 0) return static_cast<uint64_t>(st.st_ino);
  }
  return 0;
}

// The instance id is drawn once and kept in the agent directory, so that a restarted agent is
// the same agent to the control plane (it may register its node again) and an agent on another
// machine with the same --name is not (409 while the node is live).
Status Agent::LoadAgentId() {
  const std::string path = AgentDir() + "/agent_id";
  StatusOr<std::string> text = internal::ReadWholeFile(path);
  if (text.ok()) {
    std::string id = *text;
    while (!id.empty() && (id.back() == '\n' || id.back() == '\r')) id.pop_back();
    bool hex = id.size() == 32;
    for (char c : id) hex &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    if (!hex) return DataLossError("'" + path + "': expected 32 lowercase hex digits (remove the file for a new id)");
    agent_id_ = id;
    return Status::Ok();
  }
  if (text.status().code() != StatusCode::kNotFound) return text.status();
  std::random_device rd;
  char buf[33];
  for (int i = 0; i < 4; ++i) std::snprintf(buf + 8 * i, 9, "%08x", static_cast<unsigned>(rd()));
  agent_id_ = buf;
  return internal::WriteFileAtomically(path, agent_id_ + "\n");
}

Status Agent::Round(int64_t now_ms) {
  ++stats_.rounds;
  if (!registered_) TESSERA_RETURN_IF_ERROR(Register());
  Backstop(now_ms);
  Reap(now_ms);
  ReconcileMps();  // a daemon that died starts again; one whose GPU has no MPS client left stops
  // Ended workloads get their last sample (and leave their slots) before they are reported.
  if (now_ms >= next_usage_ms_ || HasUnsampledEnd()) {
    TESSERA_RETURN_IF_ERROR(SampleUsage(now_ms));
    if (now_ms >= next_usage_ms_) next_usage_ms_ = now_ms + options_.usage_interval_s * 1000;
  }
  TESSERA_RETURN_IF_ERROR(Heartbeat(now_ms));
  if (Status m = MeterLocalSlots(now_ms); !m.ok()) Log("local slots not metered this round: " + std::string(m.message()));
  if (!registered_) return Status::Ok();  // the next round registers first
  TESSERA_RETURN_IF_ERROR(ApplyDesired(now_ms));
  if (!outbox_.empty()) TESSERA_RETURN_IF_ERROR(SendUsage());
  stats_.samples_pending = static_cast<int64_t>(outbox_.size());
  return Status::Ok();
}

StatusOr<const api::DesiredState*> Agent::CurrentDesired(int64_t now_ms) {
  if (!desired_version_.empty() && heard_version_ == desired_version_ && now_ms >= desired_fetched_ms_ &&
      now_ms - desired_fetched_ms_ < kDesiredRefetchMs)
    return &desired_;
  desired_version_.clear();
  TESSERA_ASSIGN_OR_RETURN(LinkResponse r, link_->Call("GET", "/v1/nodes/" + options_.name + "/desired", ""));
  ++stats_.desired_fetches;
  if (r.status == 401 || r.status == 403) return internal::RefusedToken(r, "desired");
  if (r.status == 404) {
    registered_ = false;
    return nullptr;
  }
  if (r.status != 200) return UnavailableError("desired: " + internal::ResponseMessage(r));
  TESSERA_ASSIGN_OR_RETURN(desired_, internal::ParseDesiredState(r.body));
  desired_version_ = api::DesiredVersion(r.body);
  desired_fetched_ms_ = now_ms;
  return &desired_;
}

Status Agent::ApplyDesired(int64_t now_ms) {
  TESSERA_ASSIGN_OR_RETURN(const api::DesiredState* current, CurrentDesired(now_ms));
  if (current == nullptr) return Status::Ok();
  const api::DesiredState& state = *current;
  // MIG layouts first, so that a workload whose instance was just created starts this round.
  TESSERA_RETURN_IF_ERROR(ReconcileMig(state.gpus));
  if (!registered_) return Status::Ok();
  const std::vector<internal::DesiredWorkload>& desired = state.workloads;
  std::set<int64_t> wanted;
  for (const internal::DesiredWorkload& d : desired) {
    wanted.insert(d.id);
    if (done_.count(d.id)) continue;  // ended here and reported; the control plane catches up
    Status st = Hold(d, now_ms);
    if (!st.ok()) Log("workload " + std::to_string(d.id) + ": " + std::string(st.message()));
  }
  for (auto& [id, w] : held_) {
    if (!wanted.count(id) && !w.ended && w.stop_deadline_ms == 0) StopWorkload(w, now_ms);
  }
  // Stopped workloads whose processes are gone leave their slots and are forgotten (not reported:
  // the control plane stopped them).
  for (auto it = held_.begin(); it != held_.end();) {
    HeldWorkload& w = it->second;
    if (w.stop_deadline_ms > 0 && w.ended && w.final_sampled) {
      (void)Release(w);
      (void)::unlink(internal::WorkloadFile(AgentDir(), w.id).c_str());
      ++stats_.stopped;
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  return Status::Ok();
}

void Agent::EnsureArbiter(int gpu) {
  if (!options_.run_arbiters || arbiters_.count(gpu)) return;
  arbiters_[gpu] = std::thread([this, gpu] {
    // 200 ms: each wake costs a futex wait over the board (8 GPUs, 64 tenants: bench/node/agent_cpu.sh);
    // a stop is seen within it. The arbiter's own idle step (its heartbeat, which the shim holds
    // stale after 1 s) comes at the same pace, not every 50 ms: a waiting tenant rings the
    // doorbell, and a lease's end is a step of its own.
    LeaseArbiterOptions options;
    options.max_sleep = std::chrono::milliseconds(200);
    ArbiterDuty duty(node_, gpu, options);
    while (!stop_arbiters_.load(std::memory_order_relaxed)) duty.Round(std::chrono::milliseconds(200));
  });
}

void Agent::StopArbiters() {
  stop_arbiters_ = true;
  for (auto& [gpu, t] : arbiters_)
    if (t.joinable()) t.join();
  arbiters_.clear();
}

}  // namespace tessera::node
