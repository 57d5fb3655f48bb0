// `tessera ctl anomalies`: GET /v1/anomalies, what the control plane's anomaly detector flagged
// per tenant over the closed hours (docs/api.md#anomalies); -o json prints the server's JSON.
#include <memory>
#include <string>

#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {

namespace {

struct AnomalyFlags {
  std::string tenant;
  std::string from;
};

int Anomalies(const CtlConnection& c, const AnomalyFlags& f) {
  return CtlCall(c, "", "anomalies", "", "GET", "/v1/anomalies" + QueryString({{"tenant", f.tenant}, {"from", f.from}}));
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
