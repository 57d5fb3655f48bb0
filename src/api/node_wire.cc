#include "tessera/api/node_wire.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tessera/api/json_fields.h"

namespace tessera::api {

using json = nlohmann::json;

namespace {

std::string At(const char* list, size_t i) { return std::string(list) + "[" + std::to_string(i) + "]"; }

// Parses `body` and checks its top-level fields; the decoders below go on from there.
StatusOr<json> ParseWith(std::string_view body, std::string* bad_field) {
  if (bad_field) bad_field->clear();
  return ParseJsonObject(body);
}

// The node state at "state" (required by the caller where it is).
StatusOr<NodeState> StateOf(const JsonFields& f) {
  TESSERA_ASSIGN_OR_RETURN(const std::string name, f.Str("state", 32));
  StatusOr<NodeState> s = ParseNodeState(name);
  if (!s.ok()) return f.Fail("state", s.status().message());
  return *s;
}

}  // namespace

// --- register -------------------------------------------------------------------------------

std::string EncodeNodeInventory(const NodeInventory& inv) {
  json gpus = json::array();
  for (const InventoryGpu& g : inv.gpus) {
    json one = {{"index", g.index}, {"model", g.model}, {"memory_mib", g.memory_mib}, {"mig_enabled", g.mig_enabled}};
    if (!g.uuid.empty()) one["uuid"] = g.uuid;  // optional: an empty one would not decode
    if (!g.mig_instances.empty()) {
      json list = json::array();
      for (const InventoryMigInstance& m : g.mig_instances) {
        json inst = {{"profile", m.profile}, {"start", m.start}};
        if (m.in_use) inst["in_use"] = true;
        list.push_back(std::move(inst));
      }
      one["mig_instances"] = std::move(list);
    }
    gpus.push_back(std::move(one));
  }
  json body = {{"cpu_milli", inv.cpu_milli}, {"memory_mib", inv.memory_mib}, {"gpus", gpus}};
  if (inv.mig_reconfigure) body["mig_reconfigure"] = true;
  if (!inv.agent_id.empty()) body["agent_id"] = inv.agent_id;
  if (!inv.agent_version.empty()) body["agent_version"] = inv.agent_version;
  return body.dump();
}

StatusOr<NodeInventory> DecodeNodeInventory(std::string_view body, std::string* bad_field) {
  TESSERA_ASSIGN_OR_RETURN(const json j, ParseWith(body, bad_field));
  JsonFields f(j, "", bad_field);
  TESSERA_RETURN_IF_ERROR(
      f.OnlyKnown({"cpu_milli", "memory_mib", "gpus", "agent_version", "agent_id", "mig_reconfigure"}));
  TESSERA_RETURN_IF_ERROR(f.Require("cpu_milli"));
  TESSERA_RETURN_IF_ERROR(f.Require("memory_mib"));
  NodeInventory out;
  TESSERA_ASSIGN_OR_RETURN(out.cpu_milli, f.Int("cpu_milli", 0, int64_t{1} << 40, 0));
  TESSERA_ASSIGN_OR_RETURN(out.memory_mib, f.Int("memory_mib", 0, int64_t{1} << 40, 0));
  TESSERA_ASSIGN_OR_RETURN(out.agent_id, f.Str("agent_id", 64));
  TESSERA_ASSIGN_OR_RETURN(out.agent_version, f.Str("agent_version", 64));
  TESSERA_ASSIGN_OR_RETURN(out.mig_reconfigure, f.Bool("mig_reconfigure", false));
  TESSERA_ASSIGN_OR_RETURN(const json gpus, f.Array("gpus"));
  if (gpus.size() > static_cast<size_t>(kMaxGpusPerNode))
    return f.Fail("gpus", std::to_string(gpus.size()) + " GPUs; a node has at most 16");
  for (size_t i = 0; i < gpus.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const JsonFields g, f.Nested(gpus[i], At("gpus", i)));
    TESSERA_RETURN_IF_ERROR(g.OnlyKnown({"index", "uuid", "model", "memory_mib", "mig_enabled", "mig_instances"}));
    TESSERA_RETURN_IF_ERROR(g.Require("model"));
    InventoryGpu gpu;
    TESSERA_ASSIGN_OR_RETURN(const int64_t index, g.Int("index", 0, kMaxGpusPerNode - 1, static_cast<int64_t>(i)));
    if (index != static_cast<int64_t>(i))
      return g.Fail("index", "GPUs are listed by index from 0 (expected " + std::to_string(i) + ")");
    gpu.index = static_cast<int>(index);
    TESSERA_ASSIGN_OR_RETURN(gpu.uuid, g.Str("uuid", 96));
    TESSERA_ASSIGN_OR_RETURN(gpu.model, g.Str("model", 128));
    TESSERA_ASSIGN_OR_RETURN(gpu.memory_mib, g.Int("memory_mib", 0, int64_t{1} << 24, 0));
    TESSERA_ASSIGN_OR_RETURN(gpu.mig_enabled, g.Bool("mig_enabled", false));
    TESSERA_ASSIGN_OR_RETURN(const json instances, g.Array("mig_instances"));
    if (instances.size() > kMaxMigInstancesPerGpu)
      return g.Fail("mig_instances", std::to_string(instances.size()) + " instances; a GPU has at most 8");
    if (!instances.empty() && !gpu.mig_enabled) return g.Fail("mig_instances", "MIG instances on a GPU without MIG");
    for (size_t k = 0; k < instances.size(); ++k) {
      TESSERA_ASSIGN_OR_RETURN(const JsonFields m, g.Nested(instances[k], At("mig_instances", k)));
      TESSERA_RETURN_IF_ERROR(m.OnlyKnown({"profile", "start", "in_use"}));
      TESSERA_RETURN_IF_ERROR(m.Require("profile"));
      TESSERA_RETURN_IF_ERROR(m.Require("start"));
      InventoryMigInstance inst;
      TESSERA_ASSIGN_OR_RETURN(inst.profile, m.Str("profile", 64));
      if (inst.profile.empty()) return m.Fail("profile", "expected a MIG profile name");
      TESSERA_ASSIGN_OR_RETURN(const int64_t start, m.Int("start", 0, 7, 0));
      inst.start = static_cast<int>(start);
      TESSERA_ASSIGN_OR_RETURN(inst.in_use, m.Bool("in_use", false));
      gpu.mig_instances.push_back(std::move(inst));
    }
    out.gpus.push_back(std::move(gpu));
  }
  return out;
}

std::string EncodeRegisterAnswer(const RegisterAnswer& a) {
  return json{{"node", a.node}, {"state", NodeStateName(a.state)}}.dump();
}

StatusOr<RegisterAnswer> DecodeRegisterAnswer(std::string_view body, std::string* bad_field) {
  TESSERA_ASSIGN_OR_RETURN(const json j, ParseWith(body, bad_field));
  JsonFields f(j, "", bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"node", "state"}));
  TESSERA_RETURN_IF_ERROR(f.Require("node"));
  TESSERA_RETURN_IF_ERROR(f.Require("state"));
  RegisterAnswer out;
  TESSERA_ASSIGN_OR_RETURN(out.node, f.Str("node", 253));
  TESSERA_ASSIGN_OR_RETURN(out.state, StateOf(f));
  return out;
}

// --- heartbeat ------------------------------------------------------------------------------

std::string EncodeHeartbeat(const Heartbeat& h) {
  if (h.empty()) return "";
  json body = json::object();
  if (!h.finished.empty()) {
    json list = json::array();
    for (const FinishedWorkload& f : h.finished) {
      json one = {{"id", f.id}, {"exit_code", f.exit_code}};
      if (!f.reason.empty()) one["reason"] = f.reason;
      list.push_back(std::move(one));
    }
    body["finished"] = std::move(list);
  }
  if (!h.events.empty()) {
    json list = json::array();
    for (const AgentEvent& e : h.events) {
      json one = {{"id", e.id}, {"kind", e.kind}};
      if (!e.detail.empty()) one["detail"] = e.detail;
      list.push_back(std::move(one));
    }
    body["events"] = std::move(list);
  }
  if (!h.conditions.empty()) {
    json list = json::array();
    for (const NodeCondition& c : h.conditions) {
      json one = {{"type", c.type}, {"ok", c.ok}};
      if (!c.detail.empty()) one["detail"] = c.detail;
      list.push_back(std::move(one));
    }
    body["conditions"] = std::move(list);
  }
  if (h.local_slots) {
    json list = json::array();
    for (const LocalSlot& l : *h.local_slots) {
      json one = {{"tenant", l.tenant}, {"gpus", l.gpus}, {"milli", l.milli}, {"mem_mib", l.mem_mib}};
      if (!l.mig_instance.empty()) one["mig_instance"] = l.mig_instance;
      list.push_back(std::move(one));
    }
    body["local_slots"] = std::move(list);
  }
  return body.dump();
}

namespace {

// "local_slots" of a heartbeat (present: the caller checked f.Has).
StatusOr<std::vector<LocalSlot>> DecodeLocalSlots(const JsonFields& f) {
  TESSERA_ASSIGN_OR_RETURN(const json list, f.Array("local_slots"));
  if (list.size() > kMaxLocalSlots)
    return f.Fail("local_slots", "at most " + std::to_string(kMaxLocalSlots) + " local slots");
  std::vector<LocalSlot> out;
  for (size_t i = 0; i < list.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const JsonFields g, f.Nested(list[i], At("local_slots", i)));
    TESSERA_RETURN_IF_ERROR(g.OnlyKnown({"tenant", "gpus", "milli", "mem_mib", "mig_instance"}));
    for (const char* required : {"tenant", "gpus", "milli"}) TESSERA_RETURN_IF_ERROR(g.Require(required));
    LocalSlot l;
    TESSERA_ASSIGN_OR_RETURN(l.tenant, g.Str("tenant", 253));
    if (l.tenant.empty()) return g.Fail("tenant", "expected a tenant name");
    for (const LocalSlot& earlier : out)
      if (earlier.tenant == l.tenant) return g.Fail("tenant", "'" + l.tenant + "' is given twice");
    TESSERA_ASSIGN_OR_RETURN(const json gpus, g.Array("gpus"));
    if (gpus.empty() || gpus.size() > static_cast<size_t>(kMaxGpusPerNode))
      return g.Fail("gpus", "expected 1..16 GPU indexes, got " + std::to_string(gpus.size()));
    for (size_t k = 0; k < gpus.size(); ++k) {
      if (!gpus[k].is_number_integer() || gpus[k].get<int64_t>() < 0 || gpus[k].get<int64_t>() >= kMaxGpusPerNode)
        return g.Fail(At("gpus", k), "expected a GPU index 0..15, got " + gpus[k].dump());
      const int gpu = gpus[k].get<int>();
      if (std::find(l.gpus.begin(), l.gpus.end(), gpu) != l.gpus.end())
        return g.Fail(At("gpus", k), "GPU " + std::to_string(gpu) + " is given twice");
      l.gpus.push_back(gpu);
    }
    TESSERA_ASSIGN_OR_RETURN(l.milli, g.Int("milli", 0, 1000, 0));
    TESSERA_ASSIGN_OR_RETURN(l.mem_mib, g.Int("mem_mib", 0, int64_t{1} << 31, 0));
    TESSERA_ASSIGN_OR_RETURN(l.mig_instance, g.Str("mig_instance", 96));
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace

StatusOr<Heartbeat> DecodeHeartbeat(std::string_view body, std::string* bad_field) {
  if (bad_field) bad_field->clear();
  Heartbeat out;
  if (body.empty()) return out;
  TESSERA_ASSIGN_OR_RETURN(const json j, ParseWith(body, bad_field));
  JsonFields f(j, "", bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"finished", "events", "conditions", "local_slots"}));
  if (f.Has("local_slots")) {
    TESSERA_ASSIGN_OR_RETURN(out.local_slots, DecodeLocalSlots(f));
  }
  TESSERA_ASSIGN_OR_RETURN(const json finished, f.Array("finished"));
  TESSERA_ASSIGN_OR_RETURN(const json events, f.Array("events"));
  TESSERA_ASSIGN_OR_RETURN(const json conditions, f.Array("conditions"));
  if (conditions.size() > kMaxNodeConditions)
    return f.Fail("conditions", "at most " + std::to_string(kMaxNodeConditions) + " conditions");
  for (size_t i = 0; i < conditions.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const JsonFields g, f.Nested(conditions[i], At("conditions", i)));
    TESSERA_RETURN_IF_ERROR(g.OnlyKnown({"type", "ok", "detail"}));
    TESSERA_RETURN_IF_ERROR(g.Require("type"));
    TESSERA_RETURN_IF_ERROR(g.Require("ok"));
    NodeCondition c;
    TESSERA_ASSIGN_OR_RETURN(c.type, g.Str("type", 64));
    if (c.type.empty() || c.type.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_.-") != std::string::npos)
      return g.Fail("type", "'" + c.type + "' is not a condition type (1..64 of a-z, 0-9, '_', '.', '-')");
    for (const NodeCondition& earlier : out.conditions)
      if (earlier.type == c.type) return g.Fail("type", "'" + c.type + "' is given twice");
    TESSERA_ASSIGN_OR_RETURN(c.ok, g.Bool("ok", true));
    TESSERA_ASSIGN_OR_RETURN(c.detail, g.Str("detail", 1000));
    out.conditions.push_back(std::move(c));
  }
  for (size_t i = 0; i < events.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const JsonFields g, f.Nested(events[i], At("events", i)));
    TESSERA_RETURN_IF_ERROR(g.OnlyKnown({"id", "kind", "detail"}));
    TESSERA_RETURN_IF_ERROR(g.Require("id"));
    TESSERA_RETURN_IF_ERROR(g.Require("kind"));
    AgentEvent e;
    TESSERA_ASSIGN_OR_RETURN(e.id, g.Int("id", 1, INT64_MAX, 0));
    TESSERA_ASSIGN_OR_RETURN(e.kind, g.Str("kind", 64));
    if (e.kind != kViolatedLimit && e.kind != kMpsUnavailable && e.kind != kNoTenantUid && e.kind != kGpuTimeRecharged)
      return g.Fail("kind", "'" + e.kind +
                                "' is not an agent event (violated_limit, mps_unavailable, no_tenant_uid, "
                                "gpu_time_recharged)");
    TESSERA_ASSIGN_OR_RETURN(e.detail, g.Str("detail", 1000));
    out.events.push_back(std::move(e));
  }
  for (size_t i = 0; i < finished.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const JsonFields g, f.Nested(finished[i], At("finished", i)));
    TESSERA_RETURN_IF_ERROR(g.OnlyKnown({"id", "exit_code", "reason"}));
    TESSERA_RETURN_IF_ERROR(g.Require("id"));
    FinishedWorkload x;
    TESSERA_ASSIGN_OR_RETURN(x.id, g.Int("id", 1, INT64_MAX, 0));
    TESSERA_ASSIGN_OR_RETURN(x.exit_code, g.Int("exit_code", -255, 255, 0));
    TESSERA_ASSIGN_OR_RETURN(x.reason, g.Str("reason", 64));
    if (!x.reason.empty() && x.reason != kViolatedLimit && x.reason != kMpsUnavailable && x.reason != kNoTenantUid)
      return g.Fail("reason",
                    "'" + x.reason + "' is not an end reason (violated_limit, mps_unavailable, no_tenant_uid)");
    out.finished.push_back(std::move(x));
  }
  return out;
}

std::string EncodeHeartbeatAnswer(const HeartbeatAnswer& a) {
  json out = {{"node", a.node}, {"state", NodeStateName(a.state)}, {"ignored", a.ignored}};
  if (!a.desired_version.empty()) out["desired_version"] = a.desired_version;
  return out.dump();
}

StatusOr<HeartbeatAnswer> DecodeHeartbeatAnswer(std::string_view body, std::string* bad_field) {
  TESSERA_ASSIGN_OR_RETURN(const json j, ParseWith(body, bad_field));
  JsonFields f(j, "", bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"node", "state", "ignored", "desired_version"}));
  TESSERA_RETURN_IF_ERROR(f.Require("node"));
  TESSERA_RETURN_IF_ERROR(f.Require("state"));
  HeartbeatAnswer out;
  TESSERA_ASSIGN_OR_RETURN(out.node, f.Str("node", 253));
  TESSERA_ASSIGN_OR_RETURN(out.state, StateOf(f));
  TESSERA_ASSIGN_OR_RETURN(const json ignored, f.Array("ignored"));
  for (size_t i = 0; i < ignored.size(); ++i) {
    if (!ignored[i].is_number_integer() || ignored[i].get<int64_t>() < 1)
      return f.Fail(At("ignored", i), "expected a workload id (an integer >= 1), got " + ignored[i].dump());
    out.ignored.push_back(ignored[i].get<int64_t>());
  }
  TESSERA_ASSIGN_OR_RETURN(out.desired_version, f.Str("desired_version", 16));
  bool hex = out.desired_version.empty() || out.desired_version.size() == 16;
  for (char c : out.desired_version) hex &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  if (!hex) return f.Fail("desired_version", "expected 16 lowercase hex digits, got '" + out.desired_version + "'");
  return out;
}

// --- desired state --------------------------------------------------------------------------

std::string EncodeDesiredState(const DesiredState& s) {
  json list = json::array();
  for (const DesiredWorkload& w : s.workloads) {
    json pods = json::array();
    for (const DesiredPod& p : w.pods) {
      json one = {{"gpus", p.gpus}};
      if (p.mig_start >= 0) one["mig_start"] = p.mig_start;
      pods.push_back(std::move(one));
    }
    json one = {{"id", w.id},           {"tenant", w.tenant},           {"mode", w.mode},
                {"gpu_milli", w.gpu_milli}, {"gpu_mem_mib", w.gpu_mem_mib}, {"priority", w.priority},
                {"pods", std::move(pods)}};
    if (!w.mig_profile.empty()) one["mig_profile"] = w.mig_profile;
    if (!w.command.empty()) one["command"] = w.command;
    list.push_back(std::move(one));
  }
  json out = {{"workloads", std::move(list)}};
  if (!s.gpus.empty()) {  // left out when empty, so that an older agent reads a non-MIG node's state
    json gpus = json::array();
    for (const DesiredGpu& g : s.gpus) gpus.push_back({{"index", g.index}, {"mig_layout", g.mig_layout}});
    out["gpus"] = std::move(gpus);
  }
  if (!s.node.empty()) out["node"] = s.node;  // optional on decode, so left out when empty
  if (s.state) out["state"] = NodeStateName(*s.state);
  return out.dump();
}

std::string DesiredVersion(std::string_view body) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64: the offset basis, then per byte xor and multiply
  for (unsigned char c : body) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

namespace {

StatusOr<DesiredPod> DecodePod(const JsonFields& w, const json& v, size_t i) {
  TESSERA_ASSIGN_OR_RETURN(const JsonFields p, w.Nested(v, At("pods", i)));
  TESSERA_RETURN_IF_ERROR(p.OnlyKnown({"gpus", "mig_start"}));
  TESSERA_RETURN_IF_ERROR(p.Require("gpus"));
  DesiredPod pod;
  TESSERA_ASSIGN_OR_RETURN(const json gpus, p.Array("gpus"));
  if (gpus.empty() || gpus.size() > static_cast<size_t>(kMaxGpusPerNode))
    return p.Fail("gpus", "expected 1..16 GPU indexes, got " + std::to_string(gpus.size()));
  for (size_t g = 0; g < gpus.size(); ++g) {
    if (!gpus[g].is_number_integer() || gpus[g].get<int64_t>() < 0 || gpus[g].get<int64_t>() >= kMaxGpusPerNode)
      return p.Fail(At("gpus", g), "expected a GPU index 0..15, got " + gpus[g].dump());
    pod.gpus.push_back(gpus[g].get<int>());
  }
  TESSERA_ASSIGN_OR_RETURN(const int64_t mig_start, p.Int("mig_start", -1, 7, -1));
  pod.mig_start = static_cast<int>(mig_start);
  return pod;
}

StatusOr<DesiredWorkload> DecodeDesiredWorkload(const JsonFields& f, const json& v, size_t i) {
  TESSERA_ASSIGN_OR_RETURN(const JsonFields w, f.Nested(v, At("workloads", i)));
  TESSERA_RETURN_IF_ERROR(w.OnlyKnown({"id", "tenant", "mode", "gpu_milli", "gpu_mem_mib", "priority", "mig_profile",
                                       "command", "pods"}));
  for (const char* required : {"id", "tenant", "mode", "pods"}) TESSERA_RETURN_IF_ERROR(w.Require(required));
  DesiredWorkload d;
  TESSERA_ASSIGN_OR_RETURN(d.id, w.Int("id", 1, INT64_MAX, 0));
  TESSERA_ASSIGN_OR_RETURN(d.tenant, w.Str("tenant", 253));
  TESSERA_ASSIGN_OR_RETURN(d.mode, w.Str("mode", 256));
  TESSERA_ASSIGN_OR_RETURN(const int64_t milli, w.Int("gpu_milli", 1, 1000, 1000));
  d.gpu_milli = static_cast<int>(milli);
  TESSERA_ASSIGN_OR_RETURN(d.gpu_mem_mib, w.Int("gpu_mem_mib", 0, int64_t{1} << 31, 0));
  TESSERA_ASSIGN_OR_RETURN(const int64_t priority, w.Int("priority", -1000, 1000, 0));
  d.priority = static_cast<int>(priority);
  TESSERA_ASSIGN_OR_RETURN(d.mig_profile, w.Str("mig_profile", 64));
  TESSERA_ASSIGN_OR_RETURN(d.command, w.Strings("command"));
  TESSERA_ASSIGN_OR_RETURN(const json pods, w.Array("pods"));
  if (pods.empty()) return w.Fail("pods", "expected at least one pod on this node");
  for (size_t p = 0; p < pods.size(); ++p) {
    TESSERA_ASSIGN_OR_RETURN(DesiredPod pod, DecodePod(w, pods[p], p));
    d.pods.push_back(std::move(pod));
  }
  return d;
}

}  // namespace

StatusOr<DesiredState> DecodeDesiredState(std::string_view body, std::string* bad_field) {
  TESSERA_ASSIGN_OR_RETURN(const json j, ParseWith(body, bad_field));
  JsonFields f(j, "", bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"node", "state", "workloads", "gpus"}));
  TESSERA_RETURN_IF_ERROR(f.Require("workloads"));
  DesiredState out;
  TESSERA_ASSIGN_OR_RETURN(const json gpus, f.Array("gpus"));
  if (gpus.size() > static_cast<size_t>(kMaxGpusPerNode))
    return f.Fail("gpus", std::to_string(gpus.size()) + " GPUs; a node has at most 16");
  for (size_t i = 0; i < gpus.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const JsonFields g, f.Nested(gpus[i], At("gpus", i)));
    TESSERA_RETURN_IF_ERROR(g.OnlyKnown({"index", "mig_layout"}));
    TESSERA_RETURN_IF_ERROR(g.Require("index"));
    TESSERA_RETURN_IF_ERROR(g.Require("mig_layout"));
    DesiredGpu gpu;
    TESSERA_ASSIGN_OR_RETURN(const int64_t index, g.Int("index", 0, kMaxGpusPerNode - 1, 0));
    gpu.index = static_cast<int>(index);
    for (const DesiredGpu& earlier : out.gpus)
      if (earlier.index == gpu.index) return g.Fail("index", "GPU " + std::to_string(gpu.index) + " is given twice");
    // "" is a layout (no instance), so not Str (which refuses an empty string).
    const json& layout = gpus[i]["mig_layout"];
    if (!layout.is_string()) return g.Fail("mig_layout", "expected a string, got " + JsonTypeName(layout));
    gpu.mig_layout = layout.get<std::string>();
    if (gpu.mig_layout.size() > 256) return g.Fail("mig_layout", "longer than 256 characters");
    out.gpus.push_back(std::move(gpu));
  }
  TESSERA_ASSIGN_OR_RETURN(out.node, f.Str("node", 253));
  if (f.Has("state")) {
    TESSERA_ASSIGN_OR_RETURN(out.state, StateOf(f));
  }
  TESSERA_ASSIGN_OR_RETURN(const json list, f.Array("workloads"));
  for (size_t i = 0; i < list.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(DesiredWorkload w, DecodeDesiredWorkload(f, list[i], i));
    out.workloads.push_back(std::move(w));
  }
  return out;
}

}  // namespace tessera::api
