// Tables for `tessera ctl -o table` (the default): one row per object, the columns people look at.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <string>
#include <vector>

#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {

using json = nlohmann::json;

namespace {

std::string Text(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// A *_ms field as RFC 3339 ("-" when absent or not a number; `absent` instead when given).
std::string Time(const json& v, const std::string& absent = "-") {
  return v.is_number_integer() ? Rfc3339(v.get<int64_t>()) : absent;
}

// active, revoked or expired (revoked first: a revoked token that also expired was revoked).
std::string TokenState(const json& t) {
  if (t.value("revoked", false)) return "revoked";
  const json& expires = t.contains("expires_ms") ? t["expires_ms"] : json();
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  return expires.is_number_integer() && expires.get<int64_t>() <= now ? "expired" : "active";
}

std::string Placement(const json& w) {
  if (!w.contains("placement")) return "-";
  return Text(w["placement"]["node"]) + ":" + Text(w["placement"]["gpus"]);
}

std::vector<std::string> WorkloadRow(const json& w) {
  const std::string why = w.value("state", "") == "pending" ? Text(w.value("wait_reason", json())) : "";
  return {Text(w["id"]), Text(w.value("name", json())), Text(w["tenant"]), Text(w["state"]), Text(w["qos"]),
          Text(w["mode"]), Placement(w), why};
}

std::string Quota(const json& q, const char* part) {
  if (!q.contains(part) || q[part].empty()) return "-";
  std::string s;
  for (const auto& [k, v] : q[part].items()) s += (s.empty() ? "" : " ") + k + "=" + Text(v);
  return s;
}

}  // namespace

std::string Rfc3339(int64_t ms) {
  const std::time_t t = static_cast<std::time_t>(ms / 1000 - (ms % 1000 < 0 ? 1 : 0));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string CtlTable(const std::string& area, const std::string& verb, const json& a) {
  if (area == "tenants") {
    // DELETE answers {"name": ..., "deleted": true}: no quota to tabulate (issue 31: reading one
    // from it aborted ctl after the server had deleted).
    if (verb == "delete") return "tenant '" + Text(a.value("name", json())) + "' deleted\n";
    std::vector<json> list = verb == "list" ? a.value("tenants", json::array()).get<std::vector<json>>()
                                            : std::vector<json>{a};
    std::vector<std::vector<std::string>> rows;
    for (const json& t : list)
      rows.push_back({Text(t["name"]), Text(t["parent"]), Quota(t["quota"], "guaranteed"), Quota(t["quota"], "limit"),
                      Text(t["quota"].value("weight", json(1)))});
    return TextTable({"NAME", "PARENT", "GUARANTEED", "LIMIT", "WEIGHT"}, rows);
  }
  if (area == "tokens") {
    std::vector<json> list = verb == "list" ? a.value("tokens", json::array()).get<std::vector<json>>()
                                            : std::vector<json>{a};
    std::vector<std::vector<std::string>> rows;
    for (const json& t : list)
      rows.push_back({Text(t["id"]), Text(t["role"]), Text(t["tenant"]), Text(t.value("node", json())), TokenState(t),
                      Time(t["expires_ms"], "never"), Time(t.value("created_ms", json()))});
    std::string out = TextTable({"ID", "ROLE", "TENANT", "NODE", "STATE", "EXPIRES", "CREATED"}, rows);
    if (a.contains("token")) out += "token (shown once): " + a["token"].get<std::string>() + "\n";
    return out;
  }
  if (area == "workloads" && (verb == "list" || verb == "get" || verb == "cancel" || verb == "update")) {
    std::vector<std::vector<std::string>> rows;
    if (verb == "list")
      for (const json& w : a.value("workloads", json::array())) rows.push_back(WorkloadRow(w));
    else
      rows.push_back(WorkloadRow(a));
    std::string out = TextTable({"ID", "NAME", "TENANT", "STATE", "QOS", "MODE", "PLACEMENT", "WAITING_FOR"}, rows);
    if (verb == "get")
      for (const json& e : a.value("events", json::array()))
        out += "  event " + Time(e["time_ms"]) + " " + Text(e["kind"]) + ": " + Text(e["detail"]) + "\n";
    if (a.contains("continue") && !a["continue"].is_null()) out += "more: --continue " + Text(a["continue"]) + "\n";
    return out;
  }
  if (area == "nodes" && verb == "remove")
    return "node '" + Text(a.value("node", json())) + "' removed (was " + Text(a.value("was", json())) + ")\n";
  if (area == "workloads" && verb == "submit")
    return "workload " + Text(a.value("id", json())) + " submitted: " + Text(a.value("state", json())) + "\n";
  if (area == "nodes" && verb != "list" && verb != "get") {
    // cordon, uncordon, drain: {"node", "state", "requeued": [ids]}.
    std::string out = "node '" + Text(a.value("node", json())) + "' " + Text(a.value("state", json()));
    if (verb == "drain") {
      std::string ids;
      for (const json& id : a.value("requeued", json::array())) ids += (ids.empty() ? "" : ", ") + Text(id);
      out += ", workloads requeued: " + (ids.empty() ? std::string("none") : ids);
    }
    return out + "\n";
  }
  if (area == "health")
    return TextTable({"STATUS", "STORE", "SCHEDULER"},
                  {{Text(a.value("status", json())), Text(a.value("store", json())), Text(a.value("scheduler", json()))}});
  if (area == "nodes" && (verb == "list" || verb == "get")) {
    std::vector<json> list = verb == "list" ? a.value("nodes", json::array()).get<std::vector<json>>()
                                            : std::vector<json>{a};
    std::vector<std::vector<std::string>> rows;
    for (const json& n : list) {
      std::string model = "-", used;
      int64_t alloc = 0;
      for (const json& g : n.value("gpus", json::array())) {
        model = Text(g["model"]);
        alloc += g.value("allocated_milli", int64_t{0});
      }
      rows.push_back({Text(n["name"]), Text(n["state"]), std::to_string(n.value("gpus", json::array()).size()), model,
                      std::to_string(alloc), Text(n["workloads"])});
    }
    return TextTable({"NAME", "STATE", "GPUS", "MODEL", "ALLOCATED_MILLI", "WORKLOADS"}, rows);
  }
  if (area == "usage") {
    // Totals first, then the hours (GPU-seconds: milli-GPU seconds / 1000, rounded down).
    std::vector<std::vector<std::string>> rows;
    auto gpu_s = [](const json& v) { return v.is_number_integer() ? std::to_string(v.get<int64_t>() / 1000) : "-"; };
    for (const json& t : a.value("tenants", json::array()))
      rows.push_back({Text(t["tenant"]), gpu_s(t["gpu_milli_s_allocated"]), gpu_s(t["gpu_milli_s_used"]),
                      Text(t["kernel_launches"]), Text(t["samples"])});
    std::string out = TextTable({"TENANT", "GPU_S_ALLOCATED", "GPU_S_USED", "KERNEL_LAUNCHES", "SAMPLES"}, rows);
    rows.clear();
    for (const json& h : a.value("hours", json::array()))
      rows.push_back({Text(h["hour"]), Text(h["tenant"]), Text(h["node"]) + ":" + Text(h["gpu"]), Text(h["workload"]),
                      Text(h["partition"]), gpu_s(h["gpu_milli_s_allocated"]), gpu_s(h["gpu_milli_s_used"])});
    if (!rows.empty())
      out += "\n" + TextTable({"HOUR", "TENANT", "GPU", "WORKLOAD", "PARTITION", "GPU_S_ALLOCATED", "GPU_S_USED"}, rows);
    return out;
  }
  if (area == "audit") {
    std::vector<std::vector<std::string>> rows;
    for (const json& r : a.value("records", json::array()))
      rows.push_back({Text(r["seq"]), Time(r["time_ms"]), Text(r["actor"]), Text(r["action"]), Text(r["target"]),
                      Text(r["result"])});
    return TextTable({"SEQ", "TIME", "ACTOR", "ACTION", "TARGET", "RESULT"}, rows);
  }
  return a.dump(2) + "\n";
}

}  // namespace tessera::cli
