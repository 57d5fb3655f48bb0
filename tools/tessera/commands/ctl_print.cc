// Tables for `tessera ctl -o table` (the default): one row per object, the columns people look at.
#include <algorithm>
#include <string>
#include <vector>

#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {

using json = nlohmann::json;

namespace {

std::string Text(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

std::string Render(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      out += cells[c];
      if (c + 1 < cells.size()) out += std::string(width[c] - cells[c].size() + 2, ' ');
    }
    out += "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
  return out;
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
    return Render({"NAME", "PARENT", "GUARANTEED", "LIMIT", "WEIGHT"}, rows);
  }
  if (area == "tokens") {
    std::vector<json> list = verb == "list" ? a.value("tokens", json::array()).get<std::vector<json>>()
                                            : std::vector<json>{a};
    std::vector<std::vector<std::string>> rows;
    for (const json& t : list)
      rows.push_back({Text(t["id"]), Text(t["role"]), Text(t["tenant"]), Text(t.value("node", json())),
                      Text(t["expires_ms"]), t.value("revoked", false) ? "yes" : "no"});
    std::string out = Render({"ID", "ROLE", "TENANT", "NODE", "EXPIRES_MS", "REVOKED"}, rows);
    if (a.contains("token")) out += "token (shown once): " + a["token"].get<std::string>() + "\n";
    return out;
  }
  if (area == "workloads" && (verb == "list" || verb == "get" || verb == "cancel" || verb == "update")) {
    std::vector<std::vector<std::string>> rows;
    if (verb == "list")
      for (const json& w : a.value("workloads", json::array())) rows.push_back(WorkloadRow(w));
    else
      rows.push_back(WorkloadRow(a));
    std::string out = Render({"ID", "NAME", "TENANT", "STATE", "QOS", "MODE", "PLACEMENT", "WAITING_FOR"}, rows);
    if (verb == "get")
      for (const json& e : a.value("events", json::array()))
        out += "  event " + Text(e["time_ms"]) + " " + Text(e["kind"]) + ": " + Text(e["detail"]) + "\n";
    if (a.contains("continue") && !a["continue"].is_null()) out += "more: --continue " + Text(a["continue"]) + "\n";
    return out;
  }
  if (area == "nodes" && verb == "remove")
    return "node '" + Text(a.value("node", json())) + "' removed (was " + Text(a.value("was", json())) + ")\n";
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
    return Render({"NAME", "STATE", "GPUS", "MODEL", "ALLOCATED_MILLI", "WORKLOADS"}, rows);
  }
  if (area == "usage") {
    // Totals first, then the hours (GPU-seconds: milli-GPU seconds / 1000, rounded down).
    std::vector<std::vector<std::string>> rows;
    auto gpu_s = [](const json& v) { return v.is_number_integer() ? std::to_string(v.get<int64_t>() / 1000) : "-"; };
    for (const json& t : a.value("tenants", json::array()))
      rows.push_back({Text(t["tenant"]), gpu_s(t["gpu_milli_s_allocated"]), gpu_s(t["gpu_milli_s_used"]),
                      Text(t["kernel_launches"]), Text(t["samples"])});
    std::string out = Render({"TENANT", "GPU_S_ALLOCATED", "GPU_S_USED", "KERNEL_LAUNCHES", "SAMPLES"}, rows);
    rows.clear();
    for (const json& h : a.value("hours", json::array()))
      rows.push_back({Text(h["hour"]), Text(h["tenant"]), Text(h["node"]) + ":" + Text(h["gpu"]), Text(h["workload"]),
                      Text(h["partition"]), gpu_s(h["gpu_milli_s_allocated"]), gpu_s(h["gpu_milli_s_used"])});
    if (!rows.empty())
      out += "\n" + Render({"HOUR", "TENANT", "GPU", "WORKLOAD", "PARTITION", "GPU_S_ALLOCATED", "GPU_S_USED"}, rows);
    return out;
  }
  if (area == "audit") {
    std::vector<std::vector<std::string>> rows;
    for (const json& r : a.value("records", json::array()))
      rows.push_back({Text(r["seq"]), Text(r["time_ms"]), Text(r["actor"]), Text(r["action"]), Text(r["target"]),
                      Text(r["result"])});
    return Render({"SEQ", "TIME_MS", "ACTOR", "ACTION", "TARGET", "RESULT"}, rows);
  }
  return a.dump(2) + "\n";
}

}  // namespace tessera::cli
