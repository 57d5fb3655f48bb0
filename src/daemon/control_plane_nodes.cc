// /v1/nodes (read, cordon, uncordon, drain, remove) and the node-agent endpoints (register, heartbeat,
// desired state): decode -> NodeService -> render; and the world NodeService asks (the scheduler,
// the node registry, the loop).
#include <nlohmann/json.hpp>

#include "src/daemon/api_codec.h"
#include "src/daemon/control_plane_impl.h"
#include "tessera/api/node_wire.h"

namespace tessera::daemon {

using json = nlohmann::json;

namespace {

// GET /v1/nodes and /v1/nodes/{name}: a node's JSON ("shares" only when the view has them).
json NodeJson(const NodeView& view) {
  const store::NodeRecord& rec = view.record;
  json inv = json::parse(rec.inventory_json, nullptr, false);
  if (inv.is_discarded() || !inv.is_object()) inv = json::object();
  json gpus = inv.value("gpus", json::array());
  for (size_t g = 0; g < gpus.size(); ++g) {
    gpus[g]["allocated_milli"] = g < view.allocated_milli.size() ? view.allocated_milli[g] : 0;
    if (!view.shares) continue;
    json list = json::array();
    if (g < view.shares->size())
      for (const NodeShare& sh : (*view.shares)[g]) {
        json one = {{"tenant", sh.tenant}, {"milli", sh.milli}, {"mem_mib", sh.mem_mib}, {"mode", sh.mode}};
        if (!sh.local) one["workload"] = sh.workload;  // a local slot is no workload of ours
        if (!sh.mig_instance.empty()) one["mig_instance"] = sh.mig_instance;
        if (sh.mig_start >= 0) {
          one["mig_profile"] = sh.mig_profile;
          one["mig_start"] = sh.mig_start;
        }
        if (sh.use) {
          one["used_mem_mib"] = sh.use->memory_mib;
          one["used_milli"] = sh.use->used_milli;
          one["sampled_end"] = sh.use->end_s;
          // NVML's view beside the shim's (left out where the agent had none: absent is not zero).
          if (sh.use->nvml_used_milli) one["nvml_used_milli"] = *sh.use->nvml_used_milli;
          if (sh.use->nvml_memory_mib) one["nvml_used_mem_mib"] = *sh.use->nvml_memory_mib;
        }
        list.push_back(std::move(one));
      }
    gpus[g]["shares"] = std::move(list);
    // The GPU's use: the sum over its shares' newest samples (left out when none was sampled).
    // NVML's sums only when every sampled share has NVML's figure (a partial sum would read low).
    int64_t mem = 0, busy = 0, nvml_mem = 0, nvml_busy = 0;
    bool sampled = false, all_nvml_mem = true, all_nvml_busy = true;
    for (const json& sh : gpus[g]["shares"])
      if (sh.contains("used_mem_mib")) {
        sampled = true;
        mem += sh["used_mem_mib"].get<int64_t>();
        busy += sh["used_milli"].get<int64_t>();
        if (sh.contains("nvml_used_mem_mib")) nvml_mem += sh["nvml_used_mem_mib"].get<int64_t>();
        else all_nvml_mem = false;
        if (sh.contains("nvml_used_milli")) nvml_busy += sh["nvml_used_milli"].get<int64_t>();
        else all_nvml_busy = false;
      }
    if (sampled) {
      gpus[g]["used_mem_mib"] = mem;
      gpus[g]["used_milli"] = busy;
      if (all_nvml_mem) gpus[g]["nvml_used_mem_mib"] = nvml_mem;
      if (all_nvml_busy) gpus[g]["nvml_used_milli"] = nvml_busy;
    }
  }
  json out = {{"name", rec.name},
              {"state", std::string(api::NodeStateName(view.state))},
              {"cpu_milli", inv.value("cpu_milli", int64_t{0})},
              {"memory_mib", inv.value("memory_mib", int64_t{0})},
              {"gpus", gpus},
              {"workloads", view.workloads},
              {"last_heartbeat_ms", rec.last_heartbeat_ms}};
  json list = json::array();
  for (const auto& [type, c] : view.conditions) {
    json one = {{"type", type}, {"ok", c.ok}};
    if (!c.detail.empty()) one["detail"] = c.detail;
    list.push_back(std::move(one));
  }
  out["conditions"] = std::move(list);
  return out;
}

}  // namespace

NodeCaller ControlPlane::Impl::NodeCallerOf(const Caller& c) const {
  return {c.token_id, c.node, [this, &c](Action action) { return Check(c, "", "", action); }};
}

std::unique_ptr<NodeService> ControlPlane::Impl::MakeNodeService() {
  NodeWorld w;
  w.mu = &mu;
  w.nodes = &nodes;
  w.lost = &lost_nodes;
  w.node_timeout_s = opt.node_timeout_s;
  w.node_view = [this](const std::string& name) { return live->node(name); };
  w.node_views = [this] { return live->nodes(); };
  w.placement_of = [this](int64_t id) { return live->placement_of(id); };
  w.job_shape = [this](int64_t id) -> const WorkloadShape* {
    auto it = jobs.find(id);
    return it == jobs.end() ? nullptr : &it->second.shape;
  };
  w.add_node = [this](const placement::NodeSpec& spec) { return live->AddNode(spec); };
  w.remove_node = [this](const std::string& name) { return live->RemoveNode(name); };
  w.cordon = [this](const std::string& name) { return live->Cordon(name); };
  w.uncordon = [this](const std::string& name) { return live->Uncordon(name); };
  w.drain = [this](const std::string& name) { return live->Drain(name); };
  w.complete = [this](int64_t id, int64_t now_ms) {
    (void)live->Complete(id, sched::Seconds{now_ms / 1000});
    jobs.erase(id);
  };
  w.queue = [this](const std::vector<int64_t>& ids) {
    for (int64_t id : ids) Queue(id);
  };
  w.unpark = [this] { Unpark(); };
  w.restore = [this] { loop_healthy = Restore().ok(); };
  w.gauges = [this] { UpdateGauges(); };
  w.wake = [this] {
    wake = true;
    wake_cv.notify_one();
  };
  w.mig_layouts = [this](const std::string& name, const KnownNode& node) { return DesiredMigLayouts(name, node); };
  w.last_use = [this](const std::string& node, int gpu, int64_t id) {
    return usage_service->LastUse(node, std::to_string(gpu), std::to_string(id));
  };
  return std::make_unique<NodeService>(
      [this](std::string_view operation, const std::function<Status(store::Transaction&)>& fn) {
        return Transact(operation, fn);
      },
      *opt.clock, std::move(w), catalog);
}

HttpResponse ControlPlane::Impl::ListNodes(const HttpRequest&, const Caller& c) {
  StatusOr<std::vector<NodeView>> views = node_service->List(NodeCallerOf(c));
  if (!views.ok()) return ErrorResponse(views.status());
  json list = json::array();
  for (const NodeView& v : *views) list.push_back(NodeJson(v));
  return HttpResponse::Json(200, json{{"nodes", list}}.dump());
}

HttpResponse ControlPlane::Impl::GetNode(const HttpRequest& r, const Caller& c) {
  StatusOr<NodeView> view = node_service->Get(NodeCallerOf(c), r.path_params.at("name"));
  if (!view.ok()) return ErrorResponse(view.status());
  return HttpResponse::Json(200, NodeJson(*view).dump());
}

HttpResponse ControlPlane::Impl::NodeAction(const HttpRequest& r, const Caller& c) {
  const std::string action = r.path.substr(r.path.rfind('/') + 1);
  const NodeOp op = action == "cordon" ? NodeOp::kCordon : action == "uncordon" ? NodeOp::kUncordon : NodeOp::kDrain;
  StatusOr<NodeOpResult> done = node_service->Apply(NodeCallerOf(c), r.path_params.at("name"), op);
  if (!done.ok()) return ErrorResponse(done.status());
  json requeued = json::array();
  for (int64_t id : done->requeued) requeued.push_back(id);
  return HttpResponse::Json(
      200, json{{"node", done->node}, {"state", std::string(api::NodeStateName(done->state))}, {"requeued", requeued}}.dump());
}

// DELETE /v1/nodes/{name} (admins): forgets a node that is lost (its work was requeued when it
// was lost) or cordoned with nothing running (drain it first); 409 naming why otherwise.
HttpResponse ControlPlane::Impl::RemoveNode(const HttpRequest& r, const Caller& c) {
  StatusOr<RemovedNode> done = node_service->Remove(NodeCallerOf(c), r.path_params.at("name"));
  if (!done.ok()) return ErrorResponse(done.status());
  return HttpResponse::Json(
      200, json{{"node", done->node}, {"removed", true}, {"was", std::string(api::NodeStateName(done->was))}}.dump());
}

HttpResponse ControlPlane::Impl::RegisterNode(const HttpRequest& r, const Caller& c) {
  const std::string name = r.path_params.at("name");
  if (Status st = CheckName(name, "node"); !st.ok()) return ErrorResponse(st, "node");  // the path before the body
  std::string field;
  StatusOr<api::NodeInventory> inv = api::DecodeNodeInventory(r.body, &field);
  if (!inv.ok()) return ErrorResponse(inv.status(), field);
  StatusOr<api::RegisterAnswer> answer = node_service->Register(NodeCallerOf(c), name, *inv, &field);
  if (!answer.ok()) return ErrorResponse(answer.status(), field);
  return HttpResponse::Json(200, api::EncodeRegisterAnswer(*answer));
}

HttpResponse ControlPlane::Impl::Heartbeat(const HttpRequest& r, const Caller& c) {
  std::string field;
  StatusOr<api::Heartbeat> beat = api::DecodeHeartbeat(r.body, &field);
  if (!beat.ok()) return ErrorResponse(beat.status(), field);
  StatusOr<api::HeartbeatAnswer> answer = node_service->Heartbeat(NodeCallerOf(c), r.path_params.at("name"), *beat);
  if (!answer.ok()) return ErrorResponse(answer.status());
  return HttpResponse::Json(200, api::EncodeHeartbeatAnswer(*answer));
}

HttpResponse ControlPlane::Impl::DesiredState(const HttpRequest& r, const Caller& c) {
  StatusOr<api::DesiredState> desired = node_service->Desired(NodeCallerOf(c), r.path_params.at("name"));
  if (!desired.ok()) return ErrorResponse(desired.status());
  // The ETag is the version the heartbeat's answer carries; a client that holds it gets a 304
  // with no body (docs/api.md).
  HttpResponse out = HttpResponse::Json(200, api::EncodeDesiredState(*desired));
  const std::string etag = "\"" + api::DesiredVersion(out.body) + "\"";
  if (r.Header("If-None-Match") == etag) {
    out.status = 304;
    out.body.clear();
  }
  out.headers.emplace_back("ETag", etag);
  return out;
}

}  // namespace tessera::daemon
