// Tables for `tessera ctl -o table` (the default): one row per object, the columns people look at.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <chrono>
#include <stdexcept>
#include <string_view>
#include <ctime>
#include <string>
#include <vector>

#include "tessera/api/workload_wire.h"
#include "tessera/metering/money.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {

using json = nlohmann::json;

std::string CtlText(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

namespace {

std::string Text(const json& v) { return CtlText(v); }

std::string Money(const json& v) { return v.is_number_integer() ? metering::FormatMicro(v.get<int64_t>()) : "-"; }

// 1260 -> "1260", 0.35 -> "0.35", 410.5 -> "410.50".
std::string Number(const json& v) {
  if (!v.is_number()) return "-";
  const double d = v.get<double>();
  char buf[64];
  if (d == static_cast<double>(static_cast<int64_t>(d)) || d >= 100 || d <= -100)
    std::snprintf(buf, sizeof buf, "%.0f", d);
  else
    std::snprintf(buf, sizeof buf, "%.2f", d);
  return buf;
}

std::string AnomalyTable(const json& a) {
  const json list = a.value("anomalies", json::array());
  if (list.empty()) return "No anomalies.\n";
  std::vector<std::vector<std::string>> rows = {{"HOUR", "TENANT", "SERIES", "VALUE", "EXPECTED", "RANGE", "SCORE"}};
  for (const json& x : list)
    rows.push_back({Text(x["hour"]), Text(x["tenant"]), Text(x["series"]), Number(x["value"]), Number(x["expected"]),
                    Number(x["expected_low"]) + ".." + Number(x["expected_high"]), Number(x["score"])});
  return TextTable(rows);
}

// The accounts with their totals, then every line.
std::string InvoiceTable(const json& a) {
  std::string out = "Invoices for " + Text(a["period"]) + " (" + Text(a["currency"]) + "), total " +
                    Money(a["metered_total_micro"]) + "\n";
  // A month so far, or one the cluster reported nothing in for part of it (docs/api.md#invoices).
  if (a.value("complete", true) == false) {
    const json hours = a.value("observed_hours", json(0));
    if (a["observed_start"].is_string())
      out += "Not complete: observed " + Text(a["observed_start"]) + " to " + Text(a["observed_end"]) + " (" +
             Text(hours) + " hours); idle capacity and reservations are billed for those hours only\n";
    else
      out += "Not complete: nothing of " + Text(a["period"]) + " was observed; no idle capacity or reservation is billed\n";
  }
  for (const json& n : a.value("notes", json::array())) out += "Note: " + Text(n) + "\n";
  out += "\n";
  std::vector<std::vector<std::string>> accounts = {{"TENANT", "ORGANISATION", "TEAM", "TOTAL"}};
  std::vector<std::vector<std::string>> lines = {{"TENANT", "DESCRIPTION", "QUANTITY", "UNIT", "AMOUNT"}};
  for (const json& i : a.value("invoices", json::array())) {
    accounts.push_back({Text(i["tenant"]), Text(i["organisation"]), Text(i["team"]), Money(i["total_micro"])});
    for (const json& l : i.value("lines", json::array()))
      lines.push_back({Text(i["tenant"]), Text(l["description"]), Text(l["quantity"]), Text(l["unit"]),
                       Money(l["amount_micro"])});
  }
  out += TextTable(accounts);
  if (lines.size() > 1) out += "\n" + TextTable(lines);
  return out;
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

std::string Placement(const api::WorkloadView& w) {
  if (w.pods.empty()) return "-";
  std::string gpus;
  for (int g : w.pods[0].gpus) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
  return w.pods[0].node + ":[" + gpus + "]";
}

std::string Dash(const std::string& s) { return s.empty() ? "-" : s; }

std::vector<std::string> WorkloadRow(const api::WorkloadView& w) {
  const std::string why = w.state == api::WorkloadState::kPending && w.wait_reason ? *w.wait_reason : "";
  return {std::to_string(w.id), Dash(w.name), w.tenant, std::string(api::WorkloadStateName(w.state)), w.qos, w.mode,
          Placement(w), why};
}

// Workloads' answers, read through their codecs (api/workload_wire.h). An answer outside the
// contract is thrown: CtlGuard says "internal error: the answer is not a workload: <field>: ...", exit 1.
std::string WorkloadTable(const std::string& verb, const json& a) {
  api::WorkloadPage page;
  const std::string body = a.dump(-1, ' ', false, json::error_handler_t::replace);
  if (verb == "list") {
    StatusOr<api::WorkloadPage> p = api::DecodeWorkloadPage(body, nullptr);
    if (!p.ok()) throw std::runtime_error("the answer is not a page of workloads: " + p.status().message());
    page = *std::move(p);
  } else {
    StatusOr<api::WorkloadView> v = api::DecodeWorkloadView(body, nullptr);
    if (!v.ok()) throw std::runtime_error("the answer is not a workload: " + v.status().message());
    page.workloads.push_back(*std::move(v));
  }
  std::vector<std::vector<std::string>> rows;
  for (const api::WorkloadView& w : page.workloads) rows.push_back(WorkloadRow(w));
  std::string out = TextTable({"ID", "NAME", "TENANT", "STATE", "QOS", "MODE", "PLACEMENT", "WAITING_FOR"}, rows);
  if (verb == "get" && page.workloads[0].events)
    for (const api::WorkloadHistoryEntry& e : *page.workloads[0].events)
      out += "  event " + Rfc3339(e.time_ms) + " " + e.kind + ": " + e.detail + "\n";
  if (!page.next_continue.empty()) out += "more: --continue " + page.next_continue + "\n";
  return out;
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
  if (area == "workloads" && (verb == "list" || verb == "get" || verb == "cancel" || verb == "update"))
    return WorkloadTable(verb, a);
  if (area == "nodes" && verb == "remove")
    return "node '" + Text(a.value("node", json())) + "' removed (was " + Text(a.value("was", json())) + ")\n";
  if (area == "workloads" && verb == "submit") {
    StatusOr<api::WorkloadCreated> created = api::DecodeWorkloadCreated(a.dump(), nullptr);
    if (!created.ok()) throw std::runtime_error("the answer is not a submitted workload: " + created.status().message());
    return "workload " + std::to_string(created->id) + " submitted: " + created->state + "\n";
  }
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
      int64_t alloc = 0;
      for (const json& g : n.value("gpus", json::array())) alloc += g.value("allocated_milli", int64_t{0});
      const std::string model = CtlModels(n.value("gpus", json::array()));
      rows.push_back({Text(n["name"]), Text(n["state"]), std::to_string(n.value("gpus", json::array()).size()), model,
                      std::to_string(alloc), Text(n["workloads"])});
    }
    std::string out = TextTable({"NAME", "STATE", "GPUS", "MODEL", "ALLOCATED_MILLI", "WORKLOADS"}, rows);
    if (verb == "get") out += "\n" + CtlGpuMap(a);
    return out;
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
  if (area == "anomalies") return AnomalyTable(a);
  if (area == "invoices") return InvoiceTable(a);
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
