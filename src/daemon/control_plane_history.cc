// GET /v1/history: the Cluster page's series over time (ClusterHistory), filtered like /v1/usage:
// an admin or viewer sees every tenant and the idle GPUs, a tenant token its subtree's tenants
// (and no idle GPUs: the nodes are the cluster's). docs/api.md, "History".
#include <nlohmann/json.hpp>

#include "src/daemon/control_plane_impl.h"
#include "src/daemon/usage_codec.h"

namespace tessera::daemon {

using nlohmann::json;

HttpResponse ControlPlane::Impl::GetHistory(const HttpRequest& r, const Caller& c) {
  ReadQuery q;
  if (auto bad = ReadPrelude(r, c, &q)) return *bad;
  const std::string& tenant = q.tenant;
  const ParentOf parents = Parents();
  const int64_t from = q.from_s.value_or(NowMs() / 1000 - 3600);  // the last hour by default
  int64_t step = history.step_s();
  if (auto it = r.query.find("step"); it != r.query.end()) {
    const std::string& text = it->second;
    char* end = nullptr;
    const long long v = std::strtoll(text.c_str(), &end, 10);
    // Digits only: strtoll alone would take " 5" and "+5".
    const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || end == text.c_str() || *end != '\0' || v < 1 || v > 86400) {
      return HttpResponse::Error(400, "invalid_argument", "step: '" + text + "' is not a number of seconds 1..86400",
                                 "step");
    }
    step = v;
  }
  const bool whole = SeesAllTenants(c.principal);
  const std::string root = !tenant.empty() ? tenant : whole ? "" : c.principal.tenant;
  const HistoryWindow w = history.Read(from, step, [&](const std::string& name) {
    return root.empty() || InSubtree(name, root, parents);
  });
  json answer = {{"from", from},
                 {"step_s", w.step_s},
                 {"recorded_every_s", history.step_s()},
                 {"kept_s", history.keep_s()},
                 {"t", w.t_s},
                 {"held_milli", json(w.held_milli)},
                 {"pending", json(w.pending)}};
  answer["idle_gpus"] = whole && tenant.empty() ? json(w.idle_gpus) : json(nullptr);
  return HttpResponse::Json(200, answer.dump());
}

}  // namespace tessera::daemon
