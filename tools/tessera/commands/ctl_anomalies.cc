// `tessera ctl anomalies`: GET /v1/anomalies, what the control plane's anomaly detector flagged
// per tenant over the closed hours (docs/api.md#anomalies); -o json prints the server's JSON.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {

namespace {

using json = nlohmann::json;

struct AnomalyFlags {
  std::string tenant;
  std::string from;
};

std::string Text(const json& v) { return v.is_string() ? v.get<std::string>() : v.is_null() ? "-" : v.dump(); }

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

int Anomalies(const CtlConnection& c, const AnomalyFlags& f) {
  const std::string command = "ctl anomalies";
  StatusOr<std::unique_ptr<daemon::ApiClient>> client = CtlClient(c);
  if (!client.ok()) return Fail(command, client.status(), kExitBadInput);
  std::string target = "/v1/anomalies";
  for (const auto& [key, v] : {std::pair{"tenant", f.tenant}, {"from", f.from}})
    if (!v.empty()) target += std::string(target.find('?') == std::string::npos ? "?" : "&") + key + "=" + QueryEscape(v);
  StatusOr<daemon::ApiResponse> r = (*client)->Call("GET", target, "", {});
  if (!r.ok()) return Fail(command, r.status(), kExitFailure);
  if (r->status < 200 || r->status > 299)
    return Fail(command, "HTTP " + std::to_string(r->status) + ": " + daemon::ApiError(*r), kExitFailure);
  const json answer = json::parse(r->body, nullptr, false);
  if (answer.is_discarded()) return Fail(command, "the server's answer is not JSON", kExitFailure);
  std::printf("%s", c.output == "json" ? (answer.dump(2) + "\n").c_str() : AnomalyTable(answer).c_str());
  return kExitOk;
}

}  // namespace

void RegisterCtlAnomalies(CLI::App* ctl, std::shared_ptr<const CtlConnection> connection, int* exit_code) {
  auto f = std::make_shared<AnomalyFlags>();
  CLI::App* anomalies = ctl->add_subcommand(
      "anomalies",
      "What the control plane's anomaly detector flagged, oldest first: per tenant and closed hour\n"
      "(UTC), the series (usage_gpu_seconds: GPU-seconds used; usage_used_fraction: used / allocated;\n"
      "queue_wait_p99_s: seconds; refusals, preemptions: counts), its value, the expected value and\n"
      "range, and the score (0..1). A tenant token sees its subtree's only.");
  anomalies->fallthrough();
  anomalies->add_option("--tenant", f->tenant, "A tenant and its subtree (default: the token's; admins: all)");
  anomalies->add_option("--from", f->from,
                        "Only hours that end after this time: RFC 3339 (2026-11-02T00:00:00Z) or unix seconds "
                        "(default: since the control plane started)");
  anomalies->callback([connection, f, exit_code] { *exit_code = CtlGuard([&] { return Anomalies(*connection, *f); }); });
}

}  // namespace tessera::cli
