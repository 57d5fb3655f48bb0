#include "src/daemon/node_service.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "tessera/api/workload_wire.h"
#include "tessera/partition/mig_planner.h"

namespace tessera::daemon {

using json = nlohmann::json;

namespace {

api::NodeState SchedState(sched::NodeState s) {
  return s == sched::NodeState::kCordoned ? api::NodeState::kCordoned : api::NodeState::kReady;
}

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

std::string Workloads(size_t n) { return std::to_string(n) + (n == 1 ? " workload" : " workloads"); }

}  // namespace

std::string_view NodeOpName(NodeOp op) {
  switch (op) {
    case NodeOp::kCordon: return "cordon";
    case NodeOp::kUncordon: return "uncordon";
    case NodeOp::kDrain: return "drain";
  }
  return "?";
}

Status PersistRequeue(const std::vector<int64_t>& ids, std::string_view why, store::Transaction& tx, int64_t now) {
  for (int64_t id : ids) TESSERA_RETURN_IF_ERROR(PersistPending(id, "requeued", why, tx, now));
  return Status::Ok();
}

Status PersistPending(int64_t id, std::string_view kind, std::string_view detail, store::Transaction& tx, int64_t now) {
  TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(id));
  w.state = api::WorkloadState::kPending;
  w.placement_json.clear();
  w.start_ms.reset();
  w.wait_reason = "queued";
  w.updated_ms = now;
  TESSERA_RETURN_IF_ERROR(tx.UpdateWorkload(w).status());
  return tx.AppendWorkloadEvent({0, id, now, std::string(kind), std::string(detail)}).status();
}

NodeService::NodeService(TransactFn transact, const Clock& clock, NodeWorld world, const GpuModelCatalog& catalog)
    : transact_(std::move(transact)), clock_(clock), world_(std::move(world)), catalog_(catalog) {}

Status NodeService::Authorize(const NodeCaller& caller, Action action, const std::string& name) const {
  TESSERA_RETURN_IF_ERROR(caller.check(action));
  if (!caller.node.empty() && !name.empty() && caller.node != name)
    return Status(StatusCode::kPermissionDenied,
                  "this token is bound to node '" + caller.node + "'; it may not act for node '" + name + "'");
  return Status::Ok();
}

NodeView NodeService::ViewOf(store::NodeRecord rec, const sched::LiveScheduler::NodeView* view,
                             const KnownNode* known) const {
  NodeView out;
  if (known) {
    rec.last_heartbeat_ms = known->last_heartbeat_ms;
    out.conditions = known->conditions;
  }
  out.record = std::move(rec);
  out.state = view ? SchedState(view->state) : api::NodeState::kLost;
  if (view) {
    for (int32_t free : view->gpu_free_milli) out.allocated_milli.push_back(1000 - free);
    out.workloads = static_cast<int64_t>(view->jobs.size());
    // The node directory's other tenants are used too (issue 34); a GPU they overcommit shows
    // 1000 (what the Kubernetes extender and `ctl nodes` read as full), its shares say more.
    if (known)
      for (const api::LocalSlot& l : known->local_slots)
        for (int g : l.gpus)
          if (g >= 0 && static_cast<size_t>(g) < out.allocated_milli.size()) {
            int32_t& a = out.allocated_milli[static_cast<size_t>(g)];
            a = static_cast<int32_t>(std::min<int64_t>(1000, a + l.milli));
          }
  }
  return out;
}

StatusOr<std::vector<NodeView>> NodeService::List(const NodeCaller& caller) {
  TESSERA_RETURN_IF_ERROR(Authorize(caller, Action::kReadNodes, ""));
  std::lock_guard<std::mutex> lock(*world_.mu);
  std::vector<store::NodeRecord> stored;
  const Status read = transact_("read", [&](store::Transaction& tx) -> Status {
    TESSERA_ASSIGN_OR_RETURN(stored, tx.ListNodes());
    return Status::Ok();
  });
  if (!read.ok()) return read;
  const std::vector<sched::LiveScheduler::NodeView> views = world_.node_views();
  std::vector<NodeView> out;
  for (store::NodeRecord& rec : stored) {
    const sched::LiveScheduler::NodeView* view = nullptr;
    for (const auto& v : views)
      if (v.name == rec.name) view = &v;
    auto known = world_.nodes->find(rec.name);
    out.push_back(ViewOf(std::move(rec), view, known != world_.nodes->end() ? &known->second : nullptr));
  }
  return out;
}

StatusOr<NodeView> NodeService::Get(const NodeCaller& caller, const std::string& name) {
  TESSERA_RETURN_IF_ERROR(Authorize(caller, Action::kReadNodes, ""));
  std::lock_guard<std::mutex> lock(*world_.mu);
  StatusOr<store::NodeRecord> rec = store::NodeRecord{};
  const Status read = transact_("read", [&](store::Transaction& tx) -> Status {
    rec = tx.GetNode(name);
    return Status::Ok();
  });
  if (!read.ok()) return read;
  if (!rec.ok()) return NotFoundError("node '" + name + "' not found");
  // Per GPU, the running workloads with a pod on it (a workload of several GPUs under each of
  // them), from the same placements the agent's desired state is made of.
  std::vector<std::vector<NodeShare>> shares(placement::kMaxGpusPerNode);
  const std::optional<sched::LiveScheduler::NodeView> v = world_.node_view(name);
  if (v) {
    for (int64_t id : v->jobs) {
      const WorkloadShape* s = world_.job_shape(id);
      if (s == nullptr) continue;
      for (const sched::PodPlacement& p : world_.placement_of(id)) {
        if (p.node != name) continue;
        NodeShare one{id, s->request.tenant, s->job.pod.gpu_milli.value(), s->request.gpu_mem_mib,
                      s->mode.ToString(), "", -1, std::nullopt};
        if (p.mig_start >= 0) {
          one.mig_profile = s->request.mig_profile;
          one.mig_start = p.mig_start;
        }
        for (int g = 0; g < placement::kMaxGpusPerNode; ++g) {
          if (!(p.gpus >> g & 1)) continue;
          NodeShare here = one;
          if (world_.last_use) here.use = world_.last_use(name, g, id);
          shares[static_cast<size_t>(g)].push_back(std::move(here));
        }
      }
    }
  }
  auto known = world_.nodes->find(name);
  const KnownNode* k = v ? (known != world_.nodes->end() ? &known->second : nullptr) : nullptr;
  if (k)
    for (const api::LocalSlot& l : k->local_slots)
      for (int g : l.gpus)
        if (g >= 0 && g < v->gpu_count) {
          NodeShare here{0, l.tenant, l.milli, l.mem_mib, "local", "", -1, std::nullopt};
          here.local = true;
          here.mig_instance = l.mig_instance;
          shares[static_cast<size_t>(g)].push_back(std::move(here));
        }
  NodeView out = ViewOf(*std::move(rec), v ? &*v : nullptr, k);
  if (v && k == nullptr) out.record.last_heartbeat_ms = 0;  // held by the scheduler, not (yet) known
  out.shares = std::move(shares);
  return out;
}

StatusOr<NodeOpResult> NodeService::Apply(const NodeCaller& caller, const std::string& name, NodeOp op) {
  TESSERA_RETURN_IF_ERROR(Authorize(caller, Action::kManageNodes, ""));
  const std::string action(NodeOpName(op));
  std::lock_guard<std::mutex> lock(*world_.mu);
  auto node = world_.nodes->find(name);
  if (node == world_.nodes->end()) return NotFoundError("node '" + name + "' (registered and not lost) not found");
  const int64_t now = UnixMillis(clock_);
  std::vector<int64_t> drained;
  Status st;
  if (op == NodeOp::kCordon) st = world_.cordon(name);
  else if (op == NodeOp::kUncordon) st = world_.uncordon(name);
  else {
    StatusOr<std::vector<int64_t>> ids = world_.drain(name);
    st = ids.status();
    if (ids.ok()) drained = *ids;
  }
  if (!st.ok()) return st;
  store::NodeRecord rec = node->second.record;
  const api::NodeState state = op == NodeOp::kUncordon ? api::NodeState::kReady : api::NodeState::kCordoned;
  rec.state = state;
  // "node.cordoned", "node.uncordoned", "node.drained" on the event feed, in the same transaction.
  const std::string kind = "node." + action + "ed";
  const std::string detail = op == NodeOp::kDrain ? Workloads(drained.size()) + " requeued" : "";
  st = transact_("node", [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.PutNode(rec));
    TESSERA_RETURN_IF_ERROR(PersistRequeue(drained, "node '" + name + "' drained", tx, now));
    TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"node", name, "", now, kind, detail}).status());
    return tx.AppendAudit({now, caller.actor, "node." + action, "nodes/" + name, "200"}).status();
  });
  if (!st.ok()) {
    world_.restore();  // the scheduler changed; the store did not: back to the store
    return st;
  }
  node->second.record = rec;
  if (op == NodeOp::kUncordon) world_.unpark();
  world_.wake();
  return NodeOpResult{name, state, std::move(drained)};
}

// A ready node, or a cordoned one that still runs work, is refused naming why; nothing changes
// then. If its agent comes back, its next heartbeat is NOT_FOUND and it registers again as new.
StatusOr<RemovedNode> NodeService::Remove(const NodeCaller& caller, const std::string& name) {
  TESSERA_RETURN_IF_ERROR(Authorize(caller, Action::kManageNodes, ""));
  std::lock_guard<std::mutex> lock(*world_.mu);
  const bool lost = world_.lost->count(name) > 0;
  if (!lost && !world_.nodes->count(name)) return NotFoundError("node '" + name + "' not found");
  const api::NodeState was = lost ? api::NodeState::kLost : api::NodeState::kCordoned;
  if (!lost)
    for (const auto& v : world_.node_views()) {
      if (v.name != name) continue;
      if (v.state == sched::NodeState::kReady)
        return FailedPreconditionError("node '" + name +
                                       "' is ready: cordon it (no new work) or drain it (its work requeued) before "
                                       "removing it");
      if (!v.jobs.empty()) {
        std::string ids;
        for (int64_t id : v.jobs) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
        return FailedPreconditionError("node '" + name + "' still runs workload" + (v.jobs.size() > 1 ? "s " : " ") +
                                       ids + ": drain it (requeues them) or wait until they end");
      }
    }
  const int64_t now = UnixMillis(clock_);
  const Status written = transact_("node", [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.DeleteNode(name));
    TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"node", name, "", now, "node.removed", "was " + std::string(api::NodeStateName(was))}).status());
    return tx.AppendAudit({now, caller.actor, "node.remove", "nodes/" + name, "200"}).status();
  });
  if (!written.ok()) return written;
  if (lost) {
    world_.lost->erase(name);
  } else {
    world_.nodes->erase(name);
    if (!world_.remove_node(name).ok()) world_.restore();  // back to what the store says
  }
  world_.gauges();
  world_.wake();
  return RemovedNode{name, was};
}

StatusOr<api::RegisterAnswer> NodeService::Register(const NodeCaller& caller, const std::string& name,
                                                    const api::NodeInventory& inventory, std::string* bad_field) {
  std::string ignored;
  if (bad_field == nullptr) bad_field = &ignored;
  TESSERA_RETURN_IF_ERROR(Authorize(caller, Action::kNodeAgent, name));
  if (Status st = CheckName(name, "node"); !st.ok()) {
    *bad_field = "node";
    return st;
  }
  TESSERA_ASSIGN_OR_RETURN(NodeInventory inv, ResolveNodeInventory(name, inventory, catalog_, bad_field));
  std::lock_guard<std::mutex> lock(*world_.mu);
  std::map<std::string, KnownNode>& nodes = *world_.nodes;
  const int64_t now = UnixMillis(clock_);
  auto known = nodes.find(name);
  // A live node (ready or cordoned) is its agent's: a second agent with the same name would
  // replace its inventory and requeue its work. A lost node is anyone's to take over.
  if (known != nodes.end() && !SameAgent(known->second.record, caller.actor, inv.agent_id)) {
    // The same text every time (an agent prints a changed error once, not every round).
    return FailedPreconditionError(
        "node '" + name + "' is held by another agent (registered with token " + known->second.record.agent_token +
        "): a second agent may not register the same name; stop the other agent, give this one another "
        "name, or wait until the node is lost (no heartbeat for " + std::to_string(world_.node_timeout_s) + " s)");
  }
  if (known != nodes.end() && known->second.record.inventory_json == inv.canonical_json) {
    known->second.last_heartbeat_ms = now;  // the same inventory again (an agent restarted)
    known->second.local_slots.clear();      // the agent sends them after registering
    store::NodeRecord& held = known->second.record;
    if (held.agent_token != caller.actor || held.agent_id != inv.agent_id) {  // a new token, or a first id
      store::NodeRecord rec = held;
      rec.agent_token = caller.actor;
      rec.agent_id = inv.agent_id;
      TESSERA_RETURN_IF_ERROR(transact_("node", [&](store::Transaction& tx) { return tx.PutNode(rec); }));
      held = rec;
    }
    return api::RegisterAnswer{name, held.state};
  }
  if (known != nodes.end()) {
    if (std::optional<StatusOr<api::RegisterAnswer>> a = RegisterMigChange(caller, name, inv, now)) return *a;
  }
  std::vector<int64_t> lost;
  if (known != nodes.end()) {
    TESSERA_ASSIGN_OR_RETURN(lost, world_.remove_node(name));
  }
  if (Status st = world_.add_node(inv.spec); !st.ok()) {
    if (known != nodes.end()) world_.restore();
    *bad_field = "gpus";
    return st;
  }
  store::NodeRecord rec{name, inv.canonical_json, api::NodeState::kReady, now, caller.actor, inv.agent_id};
  const std::string detail = known != nodes.end()     ? "a new inventory; " + Workloads(lost.size()) + " requeued"
                             : world_.lost->count(name) ? "back after it was lost"
                                                        : "";
  Status st = transact_("node", [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.PutNode(rec));
    TESSERA_RETURN_IF_ERROR(PersistRequeue(lost, "node '" + name + "' registered a new inventory", tx, now));
    TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"node", name, "", now, "node.registered", detail}).status());
    return tx.AppendAudit({now, caller.actor, "node.register", "nodes/" + name, "200"}).status();
  });
  if (!st.ok()) {
    world_.restore();
    return st;
  }
  nodes[name] = KnownNode{rec, inv.spec, now, {}};
  world_.lost->erase(name);
  world_.queue(lost);
  world_.unpark();
  world_.gauges();
  world_.wake();
  return api::RegisterAnswer{name, api::NodeState::kReady};
}

std::optional<StatusOr<api::RegisterAnswer>> NodeService::RegisterMigChange(const NodeCaller& caller,
                                                                            const std::string& name,
                                                                            const NodeInventory& inv, int64_t now) {
  auto known = world_.nodes->find(name);
  if (known == world_.nodes->end() || !inv.mig_reconfigure || !known->second.spec.mig_fixed.empty())
    return std::nullopt;
  std::string field;
  StatusOr<NodeInventory> was = DecodeNodeInventory(name, known->second.record.inventory_json, catalog_, &field);
  if (!was.ok() || !was->mig_reconfigure || was->hardware_json != inv.hardware_json) return std::nullopt;
  // The scheduler's view is the same spec (MIG GPUs it may cut freely): only the record changes.
  store::NodeRecord rec = known->second.record;
  rec.inventory_json = inv.canonical_json;
  rec.agent_token = caller.actor;
  rec.agent_id = inv.agent_id;
  std::string layouts;
  for (size_t g = 0; g < inv.mig_current.size(); ++g)
    layouts += (g ? "; GPU " : "GPU ") + std::to_string(g) + ": '" +
               partition::FormatLayout(*known->second.spec.mig, inv.mig_current[g].current) + "'";
  Status st = transact_("node", [&](store::Transaction& tx) -> Status {
    TESSERA_RETURN_IF_ERROR(tx.PutNode(rec));
    return tx.AppendObjectEvent({"node", name, "", now, "node.mig_layout", layouts}).status();
  });
  if (!st.ok()) return StatusOr<api::RegisterAnswer>(st);
  known->second.record = rec;
  known->second.last_heartbeat_ms = now;
  known->second.local_slots.clear();  // the agent sends them after registering
  world_.wake();
  return StatusOr<api::RegisterAnswer>(api::RegisterAnswer{name, rec.state});
}

StatusOr<api::HeartbeatAnswer> NodeService::Heartbeat(const NodeCaller& caller, const std::string& name,
                                                      const api::Heartbeat& beat) {
  TESSERA_RETURN_IF_ERROR(Authorize(caller, Action::kNodeAgent, name));
  using Done = api::FinishedWorkload;
  using NodeEvent = api::AgentEvent;
  std::lock_guard<std::mutex> lock(*world_.mu);
  auto node = world_.nodes->find(name);
  if (node == world_.nodes->end()) return NotFoundError("node '" + name + "' is not registered (register it again)");
  const int64_t now = UnixMillis(clock_);
  node->second.last_heartbeat_ms = now;
  std::vector<Done> here;
  std::vector<NodeEvent> here_events;
  std::vector<int64_t> ignored;
  auto on_node = [&](int64_t id) {
    bool on = false;
    for (const sched::PodPlacement& p : world_.placement_of(id)) on |= p.node == name;
    return on;
  };
  for (const Done& x : beat.finished) {
    if (on_node(x.id)) here.push_back(x);
    else ignored.push_back(x.id);
  }
  for (const NodeEvent& e : beat.events) {
    if (on_node(e.id)) here_events.push_back(e);
    else if (std::find(ignored.begin(), ignored.end(), e.id) == ignored.end()) ignored.push_back(e.id);
  }
  // The node's conditions: a change is a `node.condition` event (one first seen not ok, or whose
  // ok flipped; the detail alone changing is not). A type the agent stops sending is forgotten.
  std::map<std::string, api::NodeCondition> conditions;
  std::vector<std::string> condition_events;
  for (const api::NodeCondition& cond : beat.conditions) {
    auto was = node->second.conditions.find(cond.type);
    const bool was_ok = was == node->second.conditions.end() || was->second.ok;
    if (cond.ok != was_ok)
      condition_events.push_back(cond.type + (cond.ok ? ": ok" : ": not ok") +
                                 (cond.detail.empty() ? "" : " (" + cond.detail + ")"));
    conditions[cond.type] = cond;
  }
  if (!condition_events.empty()) {
    // On failure the agent sends its conditions again next time.
    const Status written = transact_("node", [&](store::Transaction& tx) -> Status {
      for (const std::string& detail : condition_events)
        TESSERA_RETURN_IF_ERROR(tx.AppendObjectEvent({"node", name, "", now, "node.condition", detail}).status());
      return Status::Ok();
    });
    if (!written.ok()) return written;
  }
  node->second.conditions = std::move(conditions);
  if (beat.local_slots) node->second.local_slots = *beat.local_slots;  // absent: unchanged
  if (!here.empty() || !here_events.empty()) {
    const Status written = transact_("finish", [&](store::Transaction& tx) -> Status {
      // Events first: a violation's detail comes before the end it caused.
      for (const NodeEvent& e : here_events)
        TESSERA_RETURN_IF_ERROR(tx.AppendWorkloadEvent({0, e.id, now, e.kind, e.detail}).status());
      for (const Done& x : here) {
        TESSERA_ASSIGN_OR_RETURN(store::WorkloadRecord w, tx.GetWorkload(x.id));
        w.state = x.exit_code == 0 && x.reason.empty() ? api::WorkloadState::kCompleted : api::WorkloadState::kFailed;
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
    if (!written.ok()) return written;
    for (const Done& x : here) world_.complete(x.id, now);
    world_.wake();
  }
  KnownNode& known = node->second;
  api::DesiredState desired = DesiredOf(name, known);
  if (known.desired_version.empty() || desired != known.desired) {
    known.desired_version = api::DesiredVersion(api::EncodeDesiredState(desired));
    known.desired = std::move(desired);
  }
  return api::HeartbeatAnswer{name, known.record.state, std::move(ignored), known.desired_version};
}

StatusOr<api::DesiredState> NodeService::Desired(const NodeCaller& caller, const std::string& name) {
  TESSERA_RETURN_IF_ERROR(Authorize(caller, Action::kNodeAgent, name));
  std::lock_guard<std::mutex> lock(*world_.mu);
  auto node = world_.nodes->find(name);
  if (node == world_.nodes->end()) return NotFoundError("node '" + name + "' is not registered (register it again)");
  return DesiredOf(name, node->second);
}

api::DesiredState NodeService::DesiredOf(const std::string& name, const KnownNode& node) const {
  api::DesiredState desired{name, node.record.state, {}};
  if (world_.mig_layouts) desired.gpus = world_.mig_layouts(name, node);  // MIG nodes: each GPU's layout
  if (const std::optional<sched::LiveScheduler::NodeView> v = world_.node_view(name)) {
    for (int64_t id : v->jobs) {
      const WorkloadShape* s = world_.job_shape(id);
      if (s == nullptr) continue;
      api::DesiredWorkload w{.id = id,
                             .tenant = s->request.tenant,
                             .mode = s->mode.ToString(),
                             .gpu_milli = static_cast<int>(s->job.pod.gpu_milli.value()),
                             .gpu_mem_mib = s->request.gpu_mem_mib,
                             .priority = s->request.priority,
                             .mig_profile = s->request.mig_profile,
                             .command = s->request.command,
                             .pods = {}};
      for (const sched::PodPlacement& p : world_.placement_of(id))
        if (p.node == name) {
          api::DesiredPod pod{.gpus = {}, .mig_start = p.mig_start >= 0 ? p.mig_start : -1};
          for (int g = 0; g < placement::kMaxGpusPerNode; ++g)
            if (p.gpus >> g & 1) pod.gpus.push_back(g);
          w.pods.push_back(std::move(pod));
        }
      desired.workloads.push_back(std::move(w));
    }
  }
  return desired;
}

}  // namespace tessera::daemon
