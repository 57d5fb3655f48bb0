#include "tessera/api/workload_wire.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <nlohmann/json.hpp>

#include "src/api/wire_json.h"
#include "tessera/api/json_fields.h"

namespace tessera::api {

using json = nlohmann::json;

namespace {

constexpr std::string_view kRequestFields[] = {
    "tenant", "gpus", "qos", "gpu_milli", "gpu_mem_mib", "mig_profile", "vgpu_profile", "mode", "isolation",
    "latency_slo_ms", "priority", "pods", "cpu_milli", "memory_mib", "model", "workload_class", "label", "name",
    "command"};

bool EqualsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

Status OnlyRequestFields(const json& j, const JsonFields& f) {
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kRequestFields), std::end(kRequestFields), key) == std::end(kRequestFields))
      return f.Fail(key, "unknown field (known: tenant, gpus, qos, gpu_milli, gpu_mem_mib, mig_profile, "
                         "vgpu_profile, mode, isolation, latency_slo_ms, priority, pods, cpu_milli, "
                         "memory_mib, model, workload_class, label, name, command)");
  }
  return Status::Ok();
}

Status DecodeCommand(const json& j, const JsonFields& f, std::vector<std::string>* out) {
  if (!j.contains("command")) return Status::Ok();
  const json& c = j["command"];
  if (!c.is_array() || c.empty() || c.size() > kMaxCommandArgs)
    return f.Fail("command", "expected an array of 1.." + std::to_string(kMaxCommandArgs) + " strings");
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string at = "command[" + std::to_string(i) + "]";
    if (!c[i].is_string()) return f.Fail(at, "expected a string");
    const std::string& arg = c[i].get_ref<const std::string&>();
    if (arg.size() > kMaxCommandArgBytes || arg.find('\0') != std::string::npos || (i == 0 && arg.empty()))
      return f.Fail(at, i == 0 ? "the program must be a non-empty string without NUL of at most 4096 bytes"
                               : "at most 4096 bytes, without NUL");
    out->push_back(arg);
  }
  return Status::Ok();
}

// The rules between fields that need no GPU catalog (the daemon checks the profiles' names).
Status CheckShape(const JsonFields& f, const WorkloadRequest& r) {
  const bool fraction = r.gpu_milli < 1000;
  if (!r.mig_profile.empty() && !r.vgpu_profile.empty())
    return f.Fail("vgpu_profile", "give mig_profile or vgpu_profile, not both");
  if (fraction && r.gpus != 1)
    return f.Fail("gpu_milli", "a fraction of a GPU (" + std::to_string(r.gpu_milli) + " milli) needs gpus = 1");
  if (fraction && (!r.mig_profile.empty() || !r.vgpu_profile.empty()))
    return f.Fail("gpu_milli", "a MIG or vGPU profile sets the share: leave gpu_milli out");
  if (r.mode == "mig" && r.mig_profile.empty() && !fraction)
    return f.Fail("mode", "mode 'mig' needs mig_profile or a fraction (gpu_milli) to size the instance");
  if (r.mode == "exclusive" && fraction) return f.Fail("mode", "mode 'exclusive' takes whole GPUs: leave gpu_milli out");
  if ((r.mode == "mps" || r.mode == "timeslice" || r.mode == "fraction") && !r.mig_profile.empty())
    return f.Fail("mode", "a MIG profile runs in mode 'mig'");
  if (fraction && r.gpu_mem_mib == 0) return f.Fail("gpu_mem_mib", "a fraction of a GPU needs its memory limit (MiB, > 0)");
  return Status::Ok();
}

json RequestJson(const WorkloadRequest& r) {
  json j = {{"tenant", r.tenant}, {"gpus", r.gpus}};
  if (!r.qos.empty()) j["qos"] = r.qos;
  if (!r.name.empty()) j["name"] = r.name;
  if (r.gpu_milli != 1000) j["gpu_milli"] = r.gpu_milli;
  if (r.gpu_mem_mib != 0) j["gpu_mem_mib"] = r.gpu_mem_mib;
  if (!r.mig_profile.empty()) j["mig_profile"] = r.mig_profile;
  if (!r.vgpu_profile.empty()) j["vgpu_profile"] = r.vgpu_profile;
  if (!r.mode.empty()) j["mode"] = r.mode;
  if (!r.isolation.empty()) j["isolation"] = r.isolation;
  if (r.latency_slo_ms) j["latency_slo_ms"] = *r.latency_slo_ms;
  if (r.priority != 0) j["priority"] = r.priority;
  if (r.pods != 1) j["pods"] = r.pods;
  if (r.cpu_milli != 1000) j["cpu_milli"] = r.cpu_milli;
  if (r.memory_mib != 4096) j["memory_mib"] = r.memory_mib;
  if (!r.model.empty()) j["model"] = r.model;
  if (!r.workload_class.empty()) j["workload_class"] = r.workload_class;
  if (!r.label.empty()) j["label"] = r.label;
  if (!r.command.empty()) j["command"] = r.command;
  return j;
}

StatusOr<WorkloadRequest> RequestFrom(const json& j, const JsonFields& f) {
  TESSERA_RETURN_IF_ERROR(OnlyRequestFields(j, f));
  TESSERA_RETURN_IF_ERROR(f.Require("tenant"));
  TESSERA_RETURN_IF_ERROR(f.Require("gpus"));
  WorkloadRequest r;
  TESSERA_ASSIGN_OR_RETURN(r.tenant, f.Str("tenant", 253));
  TESSERA_ASSIGN_OR_RETURN(r.name, f.Str("name", 253));
  TESSERA_ASSIGN_OR_RETURN(r.qos, f.Str("qos", 32));
  if (!r.qos.empty() && !EqualsIgnoringCase(r.qos, "Guaranteed") && !EqualsIgnoringCase(r.qos, "Burstable") &&
      !EqualsIgnoringCase(r.qos, "BestEffort"))
    return f.Fail("qos", "'" + r.qos + "' is not Guaranteed, Burstable or BestEffort");
  TESSERA_ASSIGN_OR_RETURN(const int64_t gpus, f.Int("gpus", 1, 16, 1));
  r.gpus = static_cast<int32_t>(gpus);
  TESSERA_ASSIGN_OR_RETURN(const int64_t milli, f.Int("gpu_milli", 1, 1000, 1000));
  r.gpu_milli = static_cast<int32_t>(milli);
  TESSERA_ASSIGN_OR_RETURN(r.gpu_mem_mib, f.Int("gpu_mem_mib", 0, int64_t{1} << 31, 0));
  TESSERA_ASSIGN_OR_RETURN(const int64_t priority, f.Int("priority", -1000, 1000, 0));
  r.priority = static_cast<int32_t>(priority);
  TESSERA_ASSIGN_OR_RETURN(const int64_t pods, f.Int("pods", 1, 1024, 1));
  r.pods = static_cast<int32_t>(pods);
  TESSERA_ASSIGN_OR_RETURN(r.cpu_milli, f.Int("cpu_milli", 0, int64_t{1} << 31, 1000));
  TESSERA_ASSIGN_OR_RETURN(r.memory_mib, f.Int("memory_mib", 0, int64_t{1} << 31, 4096));
  TESSERA_ASSIGN_OR_RETURN(r.model, f.Str("model", 128));
  TESSERA_ASSIGN_OR_RETURN(r.mig_profile, f.Str("mig_profile", 32));
  TESSERA_ASSIGN_OR_RETURN(r.vgpu_profile, f.Str("vgpu_profile", 64));
  TESSERA_ASSIGN_OR_RETURN(r.mode, f.Str("mode", 32));
  if (!r.mode.empty() && r.mode != "exclusive" && r.mode != "mig" && r.mode != "mps" && r.mode != "timeslice" &&
      r.mode != "fraction")
    return f.Fail("mode", "'" + r.mode + "' is not exclusive, mig, mps, timeslice or fraction");
  TESSERA_ASSIGN_OR_RETURN(r.isolation, f.Str("isolation", 32));
  if (!r.isolation.empty() && r.isolation != "none" && r.isolation != "process" && r.isolation != "hardware")
    return f.Fail("isolation", "'" + r.isolation + "' is not none, process or hardware");
  TESSERA_ASSIGN_OR_RETURN(const double slo, f.Number("latency_slo_ms"));
  if (!std::isnan(slo)) {
    if (!(slo > 0) || slo > 3600000) return f.Fail("latency_slo_ms", "must be > 0 and <= 3600000 (one hour)");
    r.latency_slo_ms = slo;
  }
  TESSERA_ASSIGN_OR_RETURN(r.workload_class, f.Str("workload_class", 63));
  TESSERA_ASSIGN_OR_RETURN(r.label, f.Str("label", 63));
  TESSERA_RETURN_IF_ERROR(DecodeCommand(j, f, &r.command));
  TESSERA_RETURN_IF_ERROR(CheckShape(f, r));
  return r;
}

json PodJson(const WorkloadPod& p) {
  json one = {{"node", p.node}, {"gpus", p.gpus}};
  if (p.mig_start >= 0) one["mig_start"] = p.mig_start;
  return one;
}

StatusOr<WorkloadPod> PodFrom(const JsonFields& f) {
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"node", "gpus", "mig_start"}));
  TESSERA_RETURN_IF_ERROR(f.Require("node"));
  WorkloadPod p;
  TESSERA_ASSIGN_OR_RETURN(p.node, f.Str("node", 253));
  TESSERA_ASSIGN_OR_RETURN(const json gpus, f.Array("gpus"));
  for (size_t i = 0; i < gpus.size(); ++i) {
    const std::string at = "gpus[" + std::to_string(i) + "]";
    if (!gpus[i].is_number_integer() || gpus[i].get<int64_t>() < 0 || gpus[i].get<int64_t>() > 15)
      return f.Fail(at, "expected a GPU index 0..15");
    p.gpus.push_back(gpus[i].get<int>());
  }
  TESSERA_ASSIGN_OR_RETURN(const int64_t mig_start, f.Int("mig_start", 0, 7, -1));
  p.mig_start = static_cast<int>(mig_start);
  return p;
}

json ViewJson(const WorkloadView& v) {
  json out = {{"id", v.id},
              {"tenant", v.tenant},
              {"state", std::string(WorkloadStateName(v.state))},
              {"qos", v.qos},
              {"priority", v.priority},
              {"request", RequestJson(v.request)},
              {"mode", v.mode},
              {"mode_reason", v.mode_reason},
              {"created_ms", v.created_ms},
              {"updated_ms", v.updated_ms},
              {"version", v.version}};
  if (!v.name.empty()) out["name"] = v.name;
  if (v.wait_reason) out["wait_reason"] = *v.wait_reason;
  if (!v.reason.empty()) out["reason"] = v.reason;
  if (v.exit_code) out["exit_code"] = *v.exit_code;
  if (v.start_ms) out["start_ms"] = *v.start_ms;
  if (!v.pods.empty()) {
    json pods = json::array();
    for (const WorkloadPod& p : v.pods) pods.push_back(PodJson(p));
    out["placement"] = pods[0];
    out["pods"] = std::move(pods);
  }
  if (v.events) {
    json list = json::array();
    for (const WorkloadHistoryEntry& e : *v.events)
      list.push_back({{"time_ms", e.time_ms}, {"kind", e.kind}, {"detail", e.detail}});
    out["events"] = std::move(list);
  }
  return out;
}

// Strings a view carries that may be empty ("mode" before the choice, a wait reason).
StatusOr<std::string> MaybeEmpty(const json& j, const JsonFields& f, const std::string& field) {
  if (!j.contains(field)) return std::string();
  if (!j[field].is_string()) return f.Fail(field, "expected a string, got " + JsonTypeName(j[field]));
  return j[field].get<std::string>();
}

StatusOr<WorkloadView> ViewFrom(const json& j, const JsonFields& f) {
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"id", "tenant", "state", "qos", "priority", "request", "mode", "mode_reason",
                                       "created_ms", "updated_ms", "version", "name", "wait_reason", "reason",
                                       "exit_code", "start_ms", "placement", "pods", "events"}));
  for (const char* required : {"id", "tenant", "state", "request"}) TESSERA_RETURN_IF_ERROR(f.Require(required));
  WorkloadView v;
  constexpr int64_t kMax = INT64_MAX;
  TESSERA_ASSIGN_OR_RETURN(v.id, f.Int("id", 1, kMax, 0));
  TESSERA_ASSIGN_OR_RETURN(v.tenant, f.Str("tenant", 253));
  TESSERA_ASSIGN_OR_RETURN(const std::string state, f.Str("state", 32));
  StatusOr<WorkloadState> known = ParseWorkloadState(state);
  if (!known.ok()) return f.Fail("state", known.status().message());
  v.state = *known;
  TESSERA_ASSIGN_OR_RETURN(v.qos, MaybeEmpty(j, f, "qos"));
  TESSERA_ASSIGN_OR_RETURN(v.priority, f.Int("priority", -1000, 1000, 0));
  TESSERA_ASSIGN_OR_RETURN(const JsonFields rf, f.Nested(j["request"], "request"));
  TESSERA_ASSIGN_OR_RETURN(v.request, RequestFrom(j["request"], rf));
  TESSERA_ASSIGN_OR_RETURN(v.mode, MaybeEmpty(j, f, "mode"));
  TESSERA_ASSIGN_OR_RETURN(v.mode_reason, MaybeEmpty(j, f, "mode_reason"));
  TESSERA_ASSIGN_OR_RETURN(v.created_ms, f.Int("created_ms", 0, kMax, 0));
  TESSERA_ASSIGN_OR_RETURN(v.updated_ms, f.Int("updated_ms", 0, kMax, 0));
  TESSERA_ASSIGN_OR_RETURN(v.version, f.Int("version", 0, kMax, 0));
  TESSERA_ASSIGN_OR_RETURN(v.name, f.Str("name", 253));
  if (j.contains("wait_reason")) {
    TESSERA_ASSIGN_OR_RETURN(v.wait_reason, MaybeEmpty(j, f, "wait_reason"));
  }
  TESSERA_ASSIGN_OR_RETURN(v.reason, f.Str("reason", size_t{1} << 20));
  if (j.contains("exit_code")) {
    TESSERA_ASSIGN_OR_RETURN(v.exit_code, f.Int("exit_code", -255, 255, 0));
  }
  if (j.contains("start_ms")) {
    TESSERA_ASSIGN_OR_RETURN(v.start_ms, f.Int("start_ms", 0, kMax, 0));
  }
  TESSERA_ASSIGN_OR_RETURN(const json pods, f.Array("pods"));
  for (size_t i = 0; i < pods.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const JsonFields pf, f.Nested(pods[i], "pods[" + std::to_string(i) + "]"));
    TESSERA_ASSIGN_OR_RETURN(WorkloadPod p, PodFrom(pf));
    v.pods.push_back(std::move(p));
  }
  // "placement" is pods[0] written again: it must be exactly that.
  if (j.contains("placement") != !v.pods.empty() || (j.contains("placement") && j["placement"] != pods[0]))
    return f.Fail("placement", "must be the first of pods (and only with pods)");
  if (j.contains("events")) {
    TESSERA_ASSIGN_OR_RETURN(const json events, f.Array("events"));
    v.events.emplace();
    for (size_t i = 0; i < events.size(); ++i) {
      TESSERA_ASSIGN_OR_RETURN(const JsonFields ef, f.Nested(events[i], "events[" + std::to_string(i) + "]"));
      TESSERA_RETURN_IF_ERROR(ef.OnlyKnown({"time_ms", "kind", "detail"}));
      WorkloadHistoryEntry e;
      TESSERA_ASSIGN_OR_RETURN(e.time_ms, ef.Int("time_ms", 0, kMax, 0));
      TESSERA_ASSIGN_OR_RETURN(e.kind, MaybeEmpty(events[i], ef, "kind"));
      TESSERA_ASSIGN_OR_RETURN(e.detail, MaybeEmpty(events[i], ef, "detail"));
      v.events->push_back(std::move(e));
    }
  }
  return v;
}

}  // namespace

std::string EncodeWorkloadRequest(const WorkloadRequest& r) { return Dump(RequestJson(r)); }

StatusOr<WorkloadRequest> DecodeWorkloadRequest(std::string_view body, std::string* bad_field) {
  if (bad_field) bad_field->clear();
  TESSERA_ASSIGN_OR_RETURN(const json j, ParseJsonObject(body));
  return RequestFrom(j, JsonFields(j, "", bad_field));
}

std::string EncodeWorkloadCreated(const WorkloadCreated& c) { return Dump(json{{"id", c.id}, {"state", c.state}}); }

StatusOr<WorkloadCreated> DecodeWorkloadCreated(std::string_view body, std::string* bad_field) {
  if (bad_field) bad_field->clear();
  TESSERA_ASSIGN_OR_RETURN(const json j, ParseJsonObject(body));
  JsonFields f(j, "", bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"id", "state"}));
  TESSERA_RETURN_IF_ERROR(f.Require("id"));
  TESSERA_RETURN_IF_ERROR(f.Require("state"));
  WorkloadCreated c;
  TESSERA_ASSIGN_OR_RETURN(c.id, f.Int("id", 1, INT64_MAX, 0));
  TESSERA_ASSIGN_OR_RETURN(c.state, f.Str("state", 32));
  return c;
}

std::string EncodeWorkloadView(const WorkloadView& v) { return Dump(ViewJson(v)); }

StatusOr<WorkloadView> DecodeWorkloadView(std::string_view body, std::string* bad_field) {
  if (bad_field) bad_field->clear();
  TESSERA_ASSIGN_OR_RETURN(const json j, ParseJsonObject(body));
  return ViewFrom(j, JsonFields(j, "", bad_field));
}

std::string EncodeWorkloadPage(const WorkloadPage& page) {
  json list = json::array();
  for (const WorkloadView& v : page.workloads) list.push_back(ViewJson(v));
  return Dump(json{{"continue", page.next_continue.empty() ? json(nullptr) : json(page.next_continue)},
                   {"workloads", std::move(list)}});
}

StatusOr<WorkloadPage> DecodeWorkloadPage(std::string_view body, std::string* bad_field) {
  if (bad_field) bad_field->clear();
  TESSERA_ASSIGN_OR_RETURN(const json j, ParseJsonObject(body));
  JsonFields f(j, "", bad_field);
  TESSERA_RETURN_IF_ERROR(f.OnlyKnown({"continue", "workloads"}));
  TESSERA_RETURN_IF_ERROR(f.Require("workloads"));
  WorkloadPage page;
  if (j.contains("continue") && !j["continue"].is_null()) {
    TESSERA_ASSIGN_OR_RETURN(page.next_continue, f.Str("continue", 4096));
  }
  TESSERA_ASSIGN_OR_RETURN(const json list, f.Array("workloads"));
  for (size_t i = 0; i < list.size(); ++i) {
    TESSERA_ASSIGN_OR_RETURN(const JsonFields vf, f.Nested(list[i], "workloads[" + std::to_string(i) + "]"));
    TESSERA_ASSIGN_OR_RETURN(WorkloadView v, ViewFrom(list[i], vf));
    page.workloads.push_back(std::move(v));
  }
  return page;
}

}  // namespace tessera::api
