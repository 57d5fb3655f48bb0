// Events without HTTP: the control plane's event feed (src/daemon/event_feed.h: the store's
// workload and object events fanned out as they commit) and what a caller may see of it.
// GET /v1/events (control_plane_events.cc) is decode -> EventService::Open -> a server-sent-event
// stream handed to Subscribe; tests/daemon/event_service_test.cc drives Open directly.
//
// Open(caller, request) checks and decodes, in this order (the first failure is the answer):
//   tenant         "" : no check here (the route wrapper authorised Action::kReadEvents);
//                  else the caller's check of Action::kReadWorkload on it (NOT_FOUND "tenant 'x'
//                  not found" for another subtree's, PERMISSION_DENIED), then NOT_FOUND for a
//                  tenant that does not exist
//   workload       absent: every workload; else a positive integer, INVALID_ARGUMENT "workload: a
//                  workload id (a positive integer)"
//   after          the query's ?after= (decoded with the other read parameters); when absent, the
//                  Last-Event-ID an EventSource sends when it reconnects, INVALID_ARGUMENT
//                  "Last-Event-ID: '<text>' is not an integer >= 0"
// and returns the stream's filter: an event is visible when MaySeeEvent lets the caller see it
// (authz.h: by its subject and tenant) and, with a tenant, when its tenant is in that subtree (a
// node event, of no tenant, is outside every one); with a workload, only that workload's events.
// Each INVALID_ARGUMENT message starts with the name of what it is about.
//
// Worked example (acme -> vision, other a root):
//   Open(vision's tenant-user, {})                      -> vision's workload and tenant events
//   Open(admin, {.tenant = "acme"})                      -> acme's and vision's events, no node event
//   Open(other's tenant-user, {.tenant = "vision"})      -> NOT_FOUND "tenant 'vision' not found"
//   Open(admin, {.workload = "x"})                       -> INVALID_ARGUMENT "workload: ..."
//   Open(admin, {.last_event_id = "42"})                 -> replay after 42
//
// Thread-safety: Open, Subscribe and Notify from any thread; Start and Stop from one (the feed's).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "src/daemon/authz.h"
#include "src/daemon/event_feed.h"
#include "tessera/core/status.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

// GET /v1/events: ?tenant= and ?after= decoded (ParseReadQuery), ?workload= and the
// Last-Event-ID header as given.
struct EventRequest {
  std::string tenant;                   // "": every tenant the caller may see
  std::optional<std::string> workload;  // ?workload= when present
  std::optional<int64_t> after;         // ?after=
  std::string last_event_id;            // "": none
};

// What one stream receives.
struct EventFilter {
  std::function<bool(const store::TenantWorkloadEvent& e)> visible;
  std::optional<int64_t> workload;  // only this workload's events (no object event)
  std::optional<int64_t> after;     // replay from the store after this id; none: from now on
};

class EventService {
 public:
  // `db` outlives the service.
  EventService(store::Store& db, EventFeedOptions options, ParentOf parents);

  void Start();
  void Stop();    // the streams are closed
  void Notify();  // a transaction committed: there may be new events

  StatusOr<EventFilter> Open(const ReadCaller& caller, const EventRequest& request) const;
  // A stream with the filter Open gave; `authorized` is checked every round (false closes it).
  void Subscribe(EventFilter filter, std::shared_ptr<HttpStream> out, std::function<bool()> authorized);
  size_t subscribers() const;

 private:
  const ParentOf parents_;
  EventFeed feed_;
};

}  // namespace tessera::daemon
