// /v1/nodes (read, cordon, uncordon, drain, remove) and the node-agent endpoints (register, heartbeat,
// desired state).
#include <algorithm>

#include <nlohmann/json.hpp>

#include "src/daemon/api_codec.h"
#include "src/daemon/control_plane_impl.h"
#include "tessera/api/node_wire.h"

namespace tessera::daemon {

using json = nlohmann::json;

namespace {

// Whether the agent registering now (its token's id and instance id) is the one that registered
// `held`. The instance id decides when both sides have one (it survives the agent's restarts and
// a new token; a fleet shares one token, so the token alone cannot tell two agents apart); an
// agent without one is known by its token. A node registered before identities were kept (schema
// version 3) belongs to whoever registers it next.
bool SameAgent(const store::NodeRecord& held, const std::string& token_id, const std::string& agent_id) {
  if (held.agent_token.empty() && held.agent_id.empty()) return true;
  if (!held.agent_id.empty() && !agent_id.empty()) return held.agent_id == agent_id;
  return held.agent_token == token_id;
}

}  // namespace

Status ControlPlane::Impl::PersistRequeue(const std::vector<sched::JobId>& ids, std::string_view why,
                                          store::Transaction& tx, int64_t now) {
  for (sched::JobId id : ids) TESSERA_RETURN_IF_ERROR(PersistPending(id, "requeued", why, tx, now));
  return Status::Ok();
}

Status ControlPlane::Impl::PersistPending(sched::JobId id, std::string_view kind, std::string_view detail,
                                          store::Transaction& tx, int64_t now) {
  TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(id));
  w.state = WorkloadState::kPending;
  w.placement_json.clear();
  w.start_ms.reset();
  w.wait_reason = "queued";
  w.updated_ms = now;
  TESSERA_RETURN_IF_ERROR(tx.UpdateWorkload(w).status());
  return tx.AppendWorkloadEvent({0, id, now, std::string(kind), std::string(detail)}).status();
}

namespace {

// `conditions`: the agent's, as its last heartbeat said (null for a lost node: nothing is known).
// `shares`: per GPU index, what runs on it (GET /v1/nodes/{name} only; null leaves "shares" out).
json NodeJson(const store::NodeRecord& rec, NodeState state, const sched::LiveScheduler::NodeView* view,
              const std::map<std::string, api::NodeCondition>* conditions,
              const std::vector<json>* shares = nullptr) {
  json inv = json::parse(rec.inventory_json, nullptr, false);
  if (inv.is_discarded() || !inv.is_object()) inv = json::object();
  json gpus = inv.value("gpus", json::array());
  for (size_t g = 0; g < gpus.size(); ++g) {
    const bool known = view && g < view->gpu_free_milli.size();
    gpus[g]["allocated_milli"] = known ? 1000 - view->gpu_free_milli[g] : 0;
    if (!shares) continue;
    gpus[g]["shares"] = g < shares->size() ? (*shares)[g] : json::array();
    // The GPU's use: the sum over its shares' newest samples (left out when none was sampled).
    int64_t mem = 0, busy = 0;
    bool sampled = false;
    for (const json& sh : gpus[g]["shares"])
      if (sh.contains("used_mem_mib")) {
        sampled = true;
        mem += sh["used_mem_mib"].get<int64_t>();
        busy += sh["used_milli"].get<int64_t>();
      }
    if (sampled) {
      gpus[g]["used_mem_mib"] = mem;
      gpus[g]["used_milli"] = busy;
    }
  }
  json out = {{"name", rec.name},
              {"state", NodeStateName(state)},
              {"cpu_milli", inv.value("cpu_milli", int64_t{0})},
              {"memory_mib", inv.value("memory_mib", int64_t{0})},
              {"gpus", gpus},
              {"workloads", view ? view->jobs.size() : 0},
              {"last_heartbeat_ms", rec.last_heartbeat_ms}};
  json list = json::array();
  if (conditions)
    for (const auto& [type, c] : *conditions) {
      json one = {{"type", type}, {"ok", c.ok}};
      if (!c.detail.empty()) one["detail"] = c.detail;
      list.push_back(std::move(one));
    }
  out["conditions"] = std::move(list);
  return out;
}

}  // namespace

HttpResponse ControlPlane::Impl::ListNodes(const HttpRequest&, const Caller&) {
  std::lock_guard<std::mutex> lock(mu);
  std::vector<store::NodeRecord> stored;
  Status st = Transact("read", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(stored, tx.ListNodes());
    return Status::Ok();
  });
  if (!st.ok()) return ErrorResponse(st);
  const std::vector<sched::LiveScheduler::NodeView> views = live->nodes();
  json list = json::array();
  for (store::NodeRecord& rec : stored) {
    const sched::LiveScheduler::NodeView* view = nullptr;
    for (const auto& v : views)
      if (v.name == rec.name) view = &v;
    auto known = nodes.find(rec.name);
    if (known != nodes.end()) rec.last_heartbeat_ms = known->second.last_heartbeat_ms;
    list.push_back(NodeJson(rec, view ? NodeStateOf(view->state) : NodeState::kLost, view, known != nodes.end() ? &known->second.conditions : nullptr));
  }
  return HttpResponse::Json(200, json{{"nodes", list}}.dump());
}

HttpResponse ControlPlane::Impl::GetNode(const HttpRequest& r, const Caller&) {
  const std::string name = r.path_params.at("name");
  std::lock_guard<std::mutex> lock(mu);
  StatusOr<store::NodeRecord> rec = store::NodeRecord{};
  Status st = Transact("read", [&](store::Transaction& tx) -> Status {
    rec = tx.GetNode(name);
    return Status::Ok();
  });
  if (!st.ok()) return ErrorResponse(st);
  if (!rec.ok()) return NotFound("node '" + name + "'");
  // Per GPU, the running workloads with a pod on it (a workload of several GPUs under each of
  // them), from the same placements the agent's desired state is made of.
  std::vector<json> shares(placement::kMaxGpusPerNode, json::array());
  if (const std::optional<sched::LiveScheduler::NodeView> v = live->node(name)) {
    for (sched::JobId id : v->jobs) {
      auto job = jobs.find(id);
      if (job == jobs.end()) continue;
      const WorkloadShape& s = job->second.shape;
      for (const sched::PodPlacement& p : live->placement_of(id)) {
        if (p.node != name) continue;
        json one = {{"workload", id},
                    {"tenant", s.request.tenant},
                    {"milli", s.job.pod.gpu_milli.value()},
                    {"mem_mib", s.request.gpu_mem_mib},
                    {"mode", s.mode.ToString()}};
        if (p.mig_start >= 0) {
          one["mig_profile"] = s.request.mig_profile;
          one["mig_start"] = p.mig_start;
        }
        for (int g = 0; g < placement::kMaxGpusPerNode; ++g) {
          if (!(p.gpus >> g & 1)) continue;
          json here = one;
          // The newest usage sample of this workload on this GPU, where the agent sent one.
          if (std::optional<ShareUse> use = usage_service->LastUse(name, std::to_string(g), std::to_string(id))) {
            here["used_mem_mib"] = use->memory_mib;
            here["used_milli"] = use->used_milli;
            here["sampled_end"] = use->end_s;
          }
          shares[static_cast<size_t>(g)].push_back(std::move(here));
        }
      }
    }
    const KnownNode& known = nodes[name];
    rec->last_heartbeat_ms = known.last_heartbeat_ms;
    return HttpResponse::Json(
        200, NodeJson(*rec, NodeStateOf(v->state), &*v, &known.conditions, &shares).dump());
  }
  return HttpResponse::Json(200, NodeJson(*rec, NodeState::kLost, nullptr, nullptr, &shares).dump());
}

HttpResponse ControlPlane::Impl::NodeAction(const HttpRequest& r, const Caller& c) {
  const std::string name = r.path_params.at("name");
  const std::string action = r.path.substr(r.path.rfind('/') + 1);
  std::lock_guard<std::mutex> lock(mu);
  auto node = nodes.find(name);
  if (node == nodes.end()) return NotFound("node '" + name + "' (registered and not lost)");
  const int64_t now = NowMs();
  std::vector<sched::JobId> drained;
  Status st;
  if (action == "cordon") st = live->Cordon(name);
  else if (action == "uncordon") st = live->Uncordon(name);
  else {
    StatusOr<std::vector<sched::JobId>> ids = live->Drain(name);
    st = ids.status();
    if (ids.ok()) drained = *ids;
  }
  if (!st.ok()) return ErrorResponse(st);
  store::NodeRecord rec = node->second.record;
  rec.state = action == "uncordon" ? NodeState::kReady : NodeState::kCordoned;
  // "node.cordoned", "node.uncordoned", "node.drained" on the event feed, in the same transaction.
  const std::string kind = "node." + action + "ed";
  const std::string detail =
      action == "drain" ? std::to_string(drained.size()) + (drained.size() == 1 ? " workload" : " workloads") + " requeued"
                        : "";
  st = Transact("node", [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.PutNode(rec));
    TESSERA_RETURN_IF_ERROR(PersistRequeue(drained, "node '" + name + "' drained", tx, now));
    TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"node", name, "", now, kind, detail}).status());
    return tx.AppendAudit({now, c.token_id, "node." + action, "nodes/" + name, "200"}).status();
  });
  if (!st.ok()) {
    loop_healthy = Restore().ok();  // the scheduler changed; the store did not: back to the store
    return ErrorResponse(st);
  }
  node->second.record = rec;
  if (action == "uncordon") Unpark();
  wake = true;
  wake_cv.notify_one();
  json requeued = json::array();
  for (sched::JobId id : drained) requeued.push_back(id);
  return HttpResponse::Json(200, json{{"node", name}, {"state", NodeStateName(rec.state)}, {"requeued", requeued}}.dump());
}

// DELETE /v1/nodes/{name} (admins): forgets a node that is lost (its work was requeued when it
// was lost) or cordoned with nothing running (drain it first). A ready node, or a cordoned one
// that still runs work, is 409 naming why; nothing changes then. If its agent comes back, its
// next heartbeat is 404 and it registers again as a new node.
HttpResponse ControlPlane::Impl::RemoveNode(const HttpRequest& r, const Caller& c) {
  const std::string name = r.path_params.at("name");
  std::lock_guard<std::mutex> lock(mu);
  const bool lost = lost_nodes.count(name) > 0;
  if (!lost && !nodes.count(name)) return NotFound("node '" + name + "'");
  const std::string was(NodeStateName(lost ? NodeState::kLost : NodeState::kCordoned));
  if (!lost)
    for (const auto& v : live->nodes()) {
      if (v.name != name) continue;
      if (v.state == sched::NodeState::kReady)
        return HttpResponse::Error(409, "conflict", "node '" + name +
                                                        "' is ready: cordon it (no new work) or drain it (its work "
                                                        "requeued) before removing it");
      if (!v.jobs.empty()) {
        std::string ids;
        for (sched::JobId id : v.jobs) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
        return HttpResponse::Error(409, "conflict", "node '" + name + "' still runs workload" +
                                                        (v.jobs.size() > 1 ? "s " : " ") + ids +
                                                        ": drain it (requeues them) or wait until they end");
      }
    }
  const int64_t now = NowMs();
  Status st = Transact("node", [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.DeleteNode(name));
    TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"node", name, "", now, "node.removed", "was " + was}).status());
    return tx.AppendAudit({now, c.token_id, "node.remove", "nodes/" + name, "200"}).status();
  });
  if (!st.ok()) return ErrorResponse(st);
  if (lost) {
    lost_nodes.erase(name);
  } else {
    nodes.erase(name);
    if (!live->RemoveNode(name).ok()) loop_healthy = Restore().ok();  // back to what the store says
  }
  UpdateGauges();
  wake = true;
  wake_cv.notify_one();
  return HttpResponse::Json(200, json{{"node", name}, {"removed", true}, {"was", was}}.dump());
}

HttpResponse ControlPlane::Impl::RegisterNode(const HttpRequest& r, const Caller& c) {
  const std::string name = r.path_params.at("name");
  if (Status st = CheckName(name, "node"); !st.ok()) return ErrorResponse(st, "node");
  std::string field;
  StatusOr<NodeInventory> inv = DecodeNodeInventory(name, r.body, catalog, &field);
  if (!inv.ok()) return ErrorResponse(inv.status(), field);
  std::lock_guard<std::mutex> lock(mu);
  const int64_t now = NowMs();
  auto known = nodes.find(name);
  // A live node (ready or cordoned) is its agent's: a second agent with the same name would
  // replace its inventory and requeue its work. A lost node is anyone's to take over.
  if (known != nodes.end() && !SameAgent(known->second.record, c.token_id, inv->agent_id)) {
    // The same text every time (an agent prints a changed error once, not every round).
    return HttpResponse::Error(
        409, "conflict",
        "node '" + name + "' is held by another agent (registered with token " + known->second.record.agent_token +
            "): a second agent may not register the same name; stop the other agent, give this one another "
            "name, or wait until the node is lost (no heartbeat for " + std::to_string(opt.node_timeout_s) + " s)");
  }
  if (known != nodes.end() && known->second.record.inventory_json == inv->canonical_json) {
    known->second.last_heartbeat_ms = now;  // the same inventory again (an agent restarted)
    store::NodeRecord& held = known->second.record;
    if (held.agent_token != c.token_id || held.agent_id != inv->agent_id) {  // a new token, or a first id
      store::NodeRecord rec = held;
      rec.agent_token = c.token_id;
      rec.agent_id = inv->agent_id;
      Status st = Transact("node", [&](store::Transaction& tx) { return tx.PutNode(rec); });
      if (!st.ok()) return ErrorResponse(st);
      held = rec;
    }
    return HttpResponse::Json(200, api::EncodeRegisterAnswer({name, held.state}));
  }
  if (known != nodes.end()) {
    if (std::optional<HttpResponse> a = RegisterMigChange(name, *inv, c, now)) return *a;  // control_plane_mig.cc
  }
  std::vector<sched::JobId> lost;
  if (known != nodes.end()) {
    StatusOr<std::vector<sched::JobId>> ids = live->RemoveNode(name);
    if (!ids.ok()) return ErrorResponse(ids.status());
    lost = *ids;
  }
  if (Status st = live->AddNode(inv->spec); !st.ok()) {
    if (known != nodes.end()) loop_healthy = Restore().ok();
    return ErrorResponse(st, "gpus");
  }
  store::NodeRecord rec{name, inv->canonical_json, NodeState::kReady, now, c.token_id, inv->agent_id};
  const std::string detail =
      known != nodes.end()
          ? "a new inventory; " + std::to_string(lost.size()) + (lost.size() == 1 ? " workload" : " workloads") +
                " requeued"
          : lost_nodes.count(name) ? "back after it was lost" : "";
  Status st = Transact("node", [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.PutNode(rec));
    TESSERA_RETURN_IF_ERROR(PersistRequeue(lost, "node '" + name + "' registered a new inventory", tx, now));
    TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"node", name, "", now, "node.registered", detail}).status());
    return tx.AppendAudit({now, c.token_id, "node.register", "nodes/" + name, "200"}).status();
  });
  if (!st.ok()) {
    loop_healthy = Restore().ok();
    return ErrorResponse(st);
  }
  nodes[name] = KnownNode{rec, inv->spec, now};
  lost_nodes.erase(name);
  for (sched::JobId id : lost) Queue(id);
  Unpark();
  UpdateGauges();
  wake = true;
  wake_cv.notify_one();
  return HttpResponse::Json(200, api::EncodeRegisterAnswer({name, api::NodeState::kReady}));
}

HttpResponse ControlPlane::Impl::Heartbeat(const HttpRequest& r, const Caller&) {
  const std::string name = r.path_params.at("name");
  std::string field;
  StatusOr<api::Heartbeat> beat = api::DecodeHeartbeat(r.body, &field);
  if (!beat.ok()) return ErrorResponse(beat.status(), field);
  using Done = api::FinishedWorkload;
  using NodeEvent = api::AgentEvent;
  const std::vector<Done>& done = beat->finished;
  const std::vector<NodeEvent>& reported = beat->events;
  std::lock_guard<std::mutex> lock(mu);
  auto node = nodes.find(name);
  if (node == nodes.end())
    return HttpResponse::Error(404, "not_found", "node '" + name + "' is not registered (register it again)");
  const int64_t now = NowMs();
  node->second.last_heartbeat_ms = now;
  std::vector<Done> here;
  std::vector<NodeEvent> here_events;
  std::vector<int64_t> ignored;
  auto on_node = [&](int64_t id) {
    bool on = false;
    for (const sched::PodPlacement& p : live->placement_of(id)) on |= p.node == name;
    return on;
  };
  for (const Done& x : done) {
    if (on_node(x.id)) here.push_back(x);
    else ignored.push_back(x.id);
  }
  for (const NodeEvent& e : reported) {
    if (on_node(e.id)) here_events.push_back(e);
    else if (std::find(ignored.begin(), ignored.end(), e.id) == ignored.end()) ignored.push_back(e.id);
  }
  // The node's conditions: a change is a `node.condition` event (one first seen not ok, or whose
  // ok flipped; the detail alone changing is not). A type the agent stops sending is forgotten.
  std::map<std::string, api::NodeCondition> conditions;
  std::vector<std::string> condition_events;
  for (const api::NodeCondition& cond : beat->conditions) {
    auto was = node->second.conditions.find(cond.type);
    const bool was_ok = was == node->second.conditions.end() || was->second.ok;
    if (cond.ok != was_ok)
      condition_events.push_back(cond.type + (cond.ok ? ": ok" : ": not ok") +
                                 (cond.detail.empty() ? "" : " (" + cond.detail + ")"));
    conditions[cond.type] = cond;
  }
  if (!condition_events.empty()) {
    Status st = Transact("node", [&](store::Transaction& tx) -> Status {
      for (const std::string& detail : condition_events)
        TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"node", name, "", now, "node.condition", detail}).status());
      return Status::Ok();
    });
    if (!st.ok()) return ErrorResponse(st);  // the agent sends its conditions again next time
  }
  node->second.conditions = std::move(conditions);
  if (!here.empty() || !here_events.empty()) {
    Status st = Transact("finish", [&](store::Transaction& tx) -> Status {
      // Events first: a violation's detail comes before the end it caused.
      for (const NodeEvent& e : here_events)
        TESSERA_RETURN_IF_ERROR(tx.AppendWorkloadEvent({0, e.id, now, e.kind, e.detail}).status());
      for (const Done& x : here) {
        TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(x.id));
        w.state = x.exit_code == 0 && x.reason.empty() ? WorkloadState::kCompleted : WorkloadState::kFailed;
        w.wait_reason = x.reason;  // a failed workload's "reason" (docs/api.md)
        // The command's exit code, for the view's "exit_code" (clients read it there, not out of
        // the event's text). The spec is this daemon's own document; nothing else reads the key.
        json spec = json::parse(w.spec_json, nullptr, false);
        if (spec.is_object()) {
          spec["exit_code"] = x.exit_code;
          w.spec_json = spec.dump();
        }
        w.updated_ms = now;
        TESSERA_RETURN_IF_ERROR(tx.UpdateWorkload(w).status());
        TESSERA_RETURN_IF_ERROR(tx.AppendWorkloadEvent({0, x.id, now, "finished",
                                                        "exit code " + std::to_string(x.exit_code) +
                                                            (x.reason.empty() ? "" : " (" + x.reason + ")")})
                                    .status());
      }
      return Status::Ok();
    });
    if (!st.ok()) return ErrorResponse(st);
    for (const Done& x : here) {
      (void)live->Complete(x.id, sched::Seconds{now / 1000});
      jobs.erase(x.id);
    }
    wake = true;
    wake_cv.notify_one();
  }
  return HttpResponse::Json(200, api::EncodeHeartbeatAnswer({name, node->second.record.state, std::move(ignored)}));
}

HttpResponse ControlPlane::Impl::DesiredState(const HttpRequest& r, const Caller&) {
  const std::string name = r.path_params.at("name");
  std::lock_guard<std::mutex> lock(mu);
  auto node = nodes.find(name);
  if (node == nodes.end())
    return HttpResponse::Error(404, "not_found", "node '" + name + "' is not registered (register it again)");
  api::DesiredState desired{name, node->second.record.state, {}};
  desired.gpus = DesiredMigLayouts(name, node->second);  // MIG nodes: each GPU's target layout
  if (const std::optional<sched::LiveScheduler::NodeView> v = live->node(name)) {
    for (sched::JobId id : v->jobs) {
      auto job = jobs.find(id);
      if (job == jobs.end()) continue;
      const WorkloadShape& s = job->second.shape;
      api::DesiredWorkload w{.id = id,
                             .tenant = s.request.tenant,
                             .mode = s.mode.ToString(),
                             .gpu_milli = static_cast<int>(s.job.pod.gpu_milli.value()),
                             .gpu_mem_mib = s.request.gpu_mem_mib,
                             .priority = s.request.priority,
                             .mig_profile = s.request.mig_profile,
                             .command = s.request.command,
                             .pods = {}};
      for (const sched::PodPlacement& p : live->placement_of(id))
        if (p.node == name) {
          api::DesiredPod pod{.gpus = {}, .mig_start = p.mig_start >= 0 ? p.mig_start : -1};
          for (int g = 0; g < placement::kMaxGpusPerNode; ++g)
            if (p.gpus >> g & 1) pod.gpus.push_back(g);
          w.pods.push_back(std::move(pod));
        }
      desired.workloads.push_back(std::move(w));
    }
  }
  return HttpResponse::Json(200, api::EncodeDesiredState(desired));
}

}  // namespace tessera::daemon
