#include "src/daemon/event_feed.h"

#include <algorithm>

#include "tessera/api/event_wire.h"

namespace tessera::daemon {

std::string EventStreamRecord(const store::TenantWorkloadEvent& e) {
  // api::EncodeEvent: a tenant event's tenant is the tenant itself (its scope is where it is seen,
  // the parent once deleted). JSON escapes newlines, so the data is one line as the format requires.
  const api::Event data{e.event.id, e.subject, e.event.workload_id, e.name, e.tenant,
                        e.event.time_ms, e.event.kind, e.event.detail};
  return "id: " + std::to_string(e.event.id) + "\ndata: " + api::EncodeEvent(data) + "\n\n";
}

EventFeed::EventFeed(store::Store& db, EventFeedOptions options) : db_(db), options_(options) {}

EventFeed::~EventFeed() { Stop(); }

void EventFeed::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Main(); });
}

void EventFeed::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (Subscriber& s : incoming_) s.s.out->Close();
  incoming_.clear();
}

void EventFeed::Subscribe(Subscription s) {
  // "From now on" is the store's head at this call, not at the feed's next round: an event
  // committed while a round runs was published by that round before the stream joined, and the
  // stream never got it (seen under make test's load). Without a store answer: the next round's.
  int64_t start = -1;
  if (s.after) {
    start = std::max<int64_t>(0, *s.after);
  } else {
    StatusOr<int64_t> head = 0;
    (void)db_.Transact([&](store::Transaction& tx) -> Status {
      head = tx.LastWorkloadEventId();
      return head.status();
    });
    if (head.ok()) start = *head;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming_.push_back({std::move(s), start});
    wake_ = true;
  }
  cv_.notify_all();
}

void EventFeed::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_count_ == 0 && incoming_.empty()) return;  // nobody listens: no query
    wake_ = true;
  }
  cv_.notify_all();
}

size_t EventFeed::subscribers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_count_ + incoming_.size();
}

void EventFeed::Main() {
  std::vector<Subscriber> subs;
  auto next_ping = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.ping_interval_ms);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_until(lock, std::min(next_ping, std::chrono::steady_clock::now() +
                                                 std::chrono::milliseconds(options_.poll_interval_ms)),
                   [this] { return wake_ || stopping_; });
    if (stopping_) break;
    wake_ = false;
    for (Subscriber& s : incoming_) subs.push_back(std::move(s));
    incoming_.clear();
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    const bool ping = now >= next_ping;
    if (ping) next_ping = now + std::chrono::milliseconds(options_.ping_interval_ms);
    Round(subs, ping);
    lock.lock();
    live_count_ = subs.size();
  }
  live_count_ = 0;
  lock.unlock();
  for (Subscriber& s : subs) s.s.out->Close();
}

void EventFeed::Round(std::vector<Subscriber>& subs, bool ping) {
  for (Subscriber& s : subs)
    if (s.s.authorized && !s.s.authorized()) s.s.out->Close();
  subs.erase(std::remove_if(subs.begin(), subs.end(),
                            [](const Subscriber& s) {
                              // Closed by the client, or by us just above (its bytes drain first).
                              return !s.s.out->open() || (s.s.authorized && !s.s.authorized());
                            }),
             subs.end());
  if (subs.empty()) {
    published_ = -1;  // nobody listens: the next subscriber starts from the store's head
    gap_seen_.clear();
    return;
  }
  if (published_ < 0) {
    StatusOr<int64_t> head = 0;
    (void)db_.Transact([&](store::Transaction& tx) -> Status {
      head = tx.LastWorkloadEventId();
      return head.status();
    });
    if (!head.ok()) return;  // the store is down: try again next round
    published_ = *head;
  }
  for (Subscriber& sub : subs) {
    if (sub.cursor < 0) sub.cursor = sub.s.after ? std::max<int64_t>(0, *sub.s.after) : published_;
    if (sub.cursor < published_ && !CatchUp(sub).ok()) return;
  }
  if (!PublishNew(subs).ok()) return;
  if (ping)
    for (Subscriber& sub : subs) (void)sub.s.out->Send(": ping\n\n");
}

Status EventFeed::CatchUp(Subscriber& sub) {
  // A few pages per round, so that one far-behind stream does not hold up the live ones.
  for (int pages = 0; pages < 8 && sub.cursor < published_; ++pages) {
    std::vector<store::TenantWorkloadEvent> got;
    TESSERA_RETURN_IF_ERROR(db_.Transact([&](store::Transaction& tx) -> Status {
      TESSERA_ASSIGN_OR_RETURN(got, tx.ListEventsAfter(sub.cursor, options_.page));
      return Status::Ok();
    }));
    for (const store::TenantWorkloadEvent& e : got) {
      if (e.event.id > published_) break;
      Deliver(sub, e);
    }
    if (got.size() < static_cast<size_t>(options_.page) || (!got.empty() && got.back().event.id >= published_))
      sub.cursor = published_;
  }
  return Status::Ok();
}

Status EventFeed::PublishNew(std::vector<Subscriber>& subs) {
  for (;;) {
    std::vector<store::TenantWorkloadEvent> got;
    TESSERA_RETURN_IF_ERROR(db_.Transact([&](store::Transaction& tx) -> Status {
      TESSERA_ASSIGN_OR_RETURN(got, tx.ListEventsAfter(published_, options_.page));
      return Status::Ok();
    }));
    const auto now = std::chrono::steady_clock::now();
    const int64_t before = published_;
    for (const store::TenantWorkloadEvent& e : got) {
      if (e.event.id != published_ + 1 && options_.gap_grace_ms > 0) {
        const auto [it, first] = gap_seen_.emplace(published_ + 1, now);
        if (first || now - it->second < std::chrono::milliseconds(options_.gap_grace_ms)) break;
      }
      gap_seen_.erase(published_ + 1);
      for (Subscriber& sub : subs)
        if (sub.cursor == published_) {
          Deliver(sub, e);
          sub.cursor = e.event.id;
        }
      published_ = e.event.id;
    }
    // Stop at a held gap or when the page was not full.
    if (published_ == before || got.size() < static_cast<size_t>(options_.page)) return Status::Ok();
  }
}

void EventFeed::Deliver(Subscriber& sub, const store::TenantWorkloadEvent& e) {
  sub.cursor = e.event.id;
  if (sub.s.workload && (e.subject != "workload" || *sub.s.workload != e.event.workload_id)) return;
  if (sub.s.visible && !sub.s.visible(e)) return;
  (void)sub.s.out->Send(EventStreamRecord(e));
}

}  // namespace tessera::daemon
