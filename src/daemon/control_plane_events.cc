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
  ReadQuery q;
  if (auto bad = ReadPrelude(r, c, &q, /*scope_all=*/false, Action::kReadWorkload)) return *bad;
  const std::string tenant = q.tenant;
  std::optional<int64_t> workload;
  if (auto it = r.query.find("workload"); it != r.query.end()) {
    workload = ParseId(it->second);
    if (!workload)
      return HttpResponse::Error(400, "invalid_argument", "workload: a workload id (a positive integer)", "workload");
  }
  // EventSource sends Last-Event-ID when it reconnects; ?after= is the same for other clients.
  std::optional<int64_t> after = q.after;
  if (const std::string header = r.Header("last-event-id"); !after && !header.empty()) {
    StatusOr<int64_t> a = ParseAfter(header, "Last-Event-ID");
    if (!a.ok()) return ErrorResponse(a.status(), "Last-Event-ID");
    after = *a;
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
