// GET /v1/events: workload and object events as server-sent events (src/daemon/event_feed.h); who
// sees which is MaySeeEvent's rule (src/daemon/authz.h).
#include <nlohmann/json.hpp>

#include "src/daemon/control_plane_impl.h"
#include "src/daemon/event_feed.h"
#include "src/daemon/tokens.h"

namespace tessera::daemon {

bool ControlPlane::Impl::TokenStillValid(const std::string& hash) const {
  return token_service->StillValid(hash);
}

HttpResponse ControlPlane::Impl::StreamEvents(const HttpRequest& r, const Caller& c) {
  std::string tenant;
  if (auto it = r.query.find("tenant"); it != r.query.end() && !it->second.empty()) {
    tenant = it->second;
    if (auto denied = Scope(c, tenant, "tenant '" + tenant + "'", Action::kReadWorkload)) return *denied;
    if (!Parents()(tenant)) return NotFound("tenant '" + tenant + "'");
  }
  std::optional<int64_t> workload;
  if (auto it = r.query.find("workload"); it != r.query.end()) {
    workload = ParseId(it->second);
    if (!workload)
      return HttpResponse::Error(400, "invalid_argument", "workload: a workload id (a positive integer)", "workload");
  }
  // EventSource sends Last-Event-ID when it reconnects; ?after= is the same for other clients.
  std::optional<int64_t> after;
  std::string after_text = r.Header("last-event-id");
  if (auto it = r.query.find("after"); it != r.query.end()) after_text = it->second;
  if (!after_text.empty()) {
    after = after_text == "0" ? std::optional<int64_t>(0) : ParseId(after_text);
    if (!after)
      return HttpResponse::Error(400, "invalid_argument", "after: an event id (an integer >= 0)", "after");
  }
  HttpResponse resp;
  resp.status = 200;
  resp.content_type = "text/event-stream";
  resp.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  resp.body = "retry: 3000\n\n";  // EventSource reconnects after 3 s
  const std::string hash = TokenHash(BearerToken(r.Header("authorization")));
  resp.open_stream = [this, principal = c.principal, tenant, workload, after, hash](std::shared_ptr<HttpStream> out) {
    EventFeed::Subscription s;
    s.out = std::move(out);
    s.workload = workload;
    s.after = after;
    s.visible = [this, principal, tenant](const store::TenantWorkloadEvent& e) {
      const ParentOf parents = Parents();
      // ?tenant=: that subtree's events only (a node event, of no tenant, is outside every one).
      if (!tenant.empty() && !InSubtree(e.tenant, tenant, parents)) return false;
      return MaySeeEvent(principal, e.subject, e.tenant, parents);
    };
    s.authorized = [this, hash] { return TokenStillValid(hash); };
    feed->Subscribe(std::move(s));
  };
  return resp;
}

}  // namespace tessera::daemon
