#include "src/daemon/event_service.h"

#include <utility>

#include "src/daemon/read_query.h"

namespace tessera::daemon {

EventService::EventService(store::Store& db, EventFeedOptions options, ParentOf parents)
    : parents_(std::move(parents)), feed_(db, options) {}

void EventService::Start() { feed_.Start(); }
void EventService::Stop() { feed_.Stop(); }
void EventService::Notify() { feed_.Notify(); }
size_t EventService::subscribers() const { return feed_.subscribers(); }

StatusOr<EventFilter> EventService::Open(const ReadCaller& caller, const EventRequest& request) const {
  const std::string& tenant = request.tenant;
  if (!tenant.empty()) {
    TESSERA_RETURN_IF_ERROR(caller.check(Action::kReadWorkload, tenant, "tenant '" + tenant + "'"));
    if (!parents_(tenant)) return NotFoundError("tenant '" + tenant + "' not found");
  }
  EventFilter out;
  if (request.workload) {
    out.workload = ParseId(*request.workload);
    if (!out.workload) return InvalidArgumentError("workload: a workload id (a positive integer)");
  }
  out.after = request.after;
  if (!out.after && !request.last_event_id.empty()) {
    TESSERA_ASSIGN_OR_RETURN(const int64_t after, ParseAfter(request.last_event_id, "Last-Event-ID"));
    out.after = after;
  }
  out.visible = [parents = parents_, principal = caller.principal, tenant](const store::TenantWorkloadEvent& e) {
    // ?tenant=: that subtree's events only (a node event, of no tenant, is outside every one).
    if (!tenant.empty() && !InSubtree(e.tenant, tenant, parents)) return false;
    return MaySeeEvent(principal, e.subject, e.tenant, parents);
  };
  return out;
}

void EventService::Subscribe(EventFilter filter, std::shared_ptr<HttpStream> out, std::function<bool()> authorized) {
  EventFeed::Subscription s;
  s.out = std::move(out);
  s.visible = std::move(filter.visible);
  s.workload = filter.workload;
  s.after = filter.after;
  s.authorized = std::move(authorized);
  feed_.Subscribe(std::move(s));
}

}  // namespace tessera::daemon
