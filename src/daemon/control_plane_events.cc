// GET /v1/events: decode -> EventService::Open -> a server-sent-event stream the service's feed
// writes (src/daemon/event_service.h: which events a caller sees, the order of the checks; the
// feed: src/daemon/event_feed.h).
#include <nlohmann/json.hpp>

#include "src/daemon/control_plane_impl.h"
#include "src/daemon/tokens.h"

namespace tessera::daemon {

bool ControlPlane::Impl::TokenStillValid(const std::string& hash) const {
  return token_service->StillValid(hash);
}

HttpResponse ControlPlane::Impl::StreamEvents(const HttpRequest& r, const Caller& c) {
  std::string field;
  StatusOr<ReadQuery> q = ParseReadQuery(r.query, &field);
  if (!q.ok()) return ErrorResponse(q.status(), field);
  EventRequest request{q->tenant, std::nullopt, q->after, r.Header("last-event-id")};
  if (auto it = r.query.find("workload"); it != r.query.end()) request.workload = it->second;
  StatusOr<EventFilter> filter = event_service->Open(ReadCallerOf(c), request);
  if (!filter.ok()) {
    const std::string message(filter.status().message());
    // Each INVALID_ARGUMENT names what it is about first ("workload: ...", "Last-Event-ID: ...").
    const bool bad = filter.status().code() == StatusCode::kInvalidArgument;
    return ErrorResponse(filter.status(), bad ? message.substr(0, message.find(':')) : "");
  }
  HttpResponse resp;
  resp.status = 200;
  resp.content_type = "text/event-stream";
  resp.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  resp.body = "retry: 3000\n\n";  // EventSource reconnects after 3 s
  const std::string hash = TokenHash(BearerToken(r.Header("authorization")));
  resp.open_stream = [this, f = *std::move(filter), hash](std::shared_ptr<HttpStream> out) mutable {
    event_service->Subscribe(std::move(f), std::move(out), [this, hash] { return TokenStillValid(hash); });
  };
  return resp;
}

}  // namespace tessera::daemon
