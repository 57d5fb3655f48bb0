// The control plane's event feed behind `GET /v1/events`: the events the store holds, fanned out
// to server-sent-event streams as they commit. Workload events (submitted, placed, preempted,
// requeued, moved, changed, finished, cancelled, rejected) and object events (a node, tenant or
// token changed: "node.cordoned", "tenant.created", "token.revoked", ...; store.h ObjectEvent)
// share one id sequence.
//
// One thread polls the store for the events after the last one it published, when a commit woke
// it (Notify) or every poll interval, and only while somebody is subscribed. Each event goes to
// the streams whose filter lets it through, written as
//
//   id: 42
//   data: {"id":42,"workload":7,"tenant":"vision","time_ms":1764590000000,"kind":"placed","detail":"node-1 gpu 0"}
//   (blank line)
//
// An object event names its object instead of a workload: {"id":43,"node":"node-1",...,
// "kind":"node.cordoned"}, {"id":44,"tenant":"ranking",...,"kind":"tenant.created"},
// {"id":45,"token":"tok_1f...","tenant":"vision",...,"kind":"token.revoked"} (a token's tenant is
// null for admin and node-agent tokens).
//
// so that an EventSource reconnecting with `Last-Event-ID: 42` (or `?after=42`) first gets what
// it missed, read back from the store, then the live events: on one stream ids only grow, and a
// stream never sees an event before it is durable. Every ping interval each stream gets a
// comment line (": ping"), which keeps proxies from closing an idle stream and finds clients that
// went away (their stream is dropped).
//
// Commit order: on SQLite (one writer) ids grow in commit order. On PostgreSQL a transaction that
// drew a lower id may commit after one with a higher id; with `gap_grace_ms` > 0 the feed holds
// the ids after a gap back until the gap fills or the grace passed (a rolled-back transaction
// leaves its gap forever). Worked example, grace 500 ms, published up to 10: a poll sees 12, 13
// (11 missing) and publishes nothing; 200 ms later it sees 11, 12, 13 and publishes all three.
// Had 11 rolled back, 12 and 13 would go out 500 ms after the gap was first seen.
//
//   EventFeed feed(*db, {.gap_grace_ms = 0});
//   feed.Start();
//   feed.Subscribe({.out = stream, .visible = [](const store::TenantWorkloadEvent& e) {
//     return e.subject == "workload" && e.tenant == "vision"; }});
//   ... after every committed transaction: feed.Notify();
//   feed.Stop();
//
// Thread-safety: Subscribe and Notify from any thread; Start/Stop from one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/daemon/http_server.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

struct EventFeedOptions {
  int poll_interval_ms = 1000;   // polls this often even when nothing woke it
  int ping_interval_ms = 15000;  // ": ping" to every stream
  int gap_grace_ms = 0;          // see the header comment; the control plane uses 2000 on PostgreSQL
  int page = 500;                // events read per query
};

// The bytes of one event on a stream (the format in the header comment).
std::string EventStreamRecord(const store::TenantWorkloadEvent& e);

class EventFeed {
 public:
  struct Subscription {
    std::shared_ptr<HttpStream> out;
    // Whether this stream may see this event (authorisation and the caller's filter): by its
    // subject, and its tenant (a workload's; an object event's scope).
    std::function<bool(const store::TenantWorkloadEvent& e)> visible;
    std::optional<int64_t> workload;  // only this workload's events (no object event)
    std::optional<int64_t> after;     // replay from the store after this id; none: from now on (the store's head when Subscribe is called)
    // Checked every round: false (the token was revoked or expired) closes the stream.
    std::function<bool()> authorized;
  };

  EventFeed(store::Store& db, EventFeedOptions options);
  ~EventFeed();  // Stop()s
  EventFeed(const EventFeed&) = delete;
  EventFeed& operator=(const EventFeed&) = delete;

  void Start();
  void Stop();  // the streams are closed
  void Subscribe(Subscription s);
  void Notify();  // a transaction committed: there may be new events
  size_t subscribers() const;

 private:
  struct Subscriber {
    Subscription s;
    int64_t cursor = -1;  // the last id it was sent; -1: not yet placed (from now on)
  };
  void Main();
  // One round: place new subscribers, catch up those behind, publish what is new, ping if due.
  void Round(std::vector<Subscriber>& subs, bool ping);
  Status CatchUp(Subscriber& sub);
  Status PublishNew(std::vector<Subscriber>& subs);
  static void Deliver(Subscriber& sub, const store::TenantWorkloadEvent& e);

  store::Store& db_;
  const EventFeedOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool wake_ = false;
  bool stopping_ = false;
  std::vector<Subscriber> incoming_;  // subscribed, not yet taken by the thread
  size_t live_count_ = 0;             // what the thread holds (for subscribers())
  std::thread thread_;
  // The thread's own state.
  int64_t published_ = -1;  // -1: to be read from the store (no one was subscribed)
  std::map<int64_t, std::chrono::steady_clock::time_point> gap_seen_;  // missing id -> first seen
};

}  // namespace tessera::daemon
