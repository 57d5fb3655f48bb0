// The event feed on a real SQLite store: events in id order to the streams allowed to see them,
// replay after an id, a held gap (PostgreSQL's out-of-order commits) released when it fills or
// after the grace, pings, and streams that went away or lost their token dropped.
#include "src/daemon/event_feed.h"
#include "tessera/daemon/api_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace tessera::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// What a connection would write, kept for the test.
class RecordingStream final : public HttpStream {
 public:
  bool Send(std::string bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!open_) return false;
    text_ += bytes;
    return true;
  }
  bool open() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return open_;
  }
  void Close() override {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
    closed_by_server_ = true;
  }
  void ClientGoesAway() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = false;
  }
  std::string text() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }
  bool closed_by_server() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_by_server_;
  }
  // The ids in the order they were written.
  std::vector<int64_t> Ids() const {
    std::vector<int64_t> out;
    const std::string t = text();
    for (size_t at = t.find("id: "); at != std::string::npos; at = t.find("\nid: ", at + 1)) {
      const size_t from = t[at] == '\n' ? at + 5 : at + 4;
      out.push_back(std::stoll(t.substr(from, t.find('\n', from) - from)));
    }
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::string text_;
  bool open_ = true;
  bool closed_by_server_ = false;
};

class EventFeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-feed-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto db = store::Open("sqlite:" + (dir_ / "t.db").string());
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    for (const char* t : {"a", "b"}) {
      store::TenantRecord rec;
      rec.name = t;
      ASSERT_TRUE(db_->Transact([&](store::Transaction& tx) { return tx.CreateTenant(rec); }).ok());
    }
    wa_ = Insert("a");
    wb_ = Insert("b");
  }
  void TearDown() override {
    feed_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  int64_t Insert(const std::string& tenant) {
    store::WorkloadRecord w;
    w.tenant = tenant;
    w.spec_json = "{}";
    w.state = WorkloadState::kPending;
    int64_t id = 0;
    EXPECT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      TESSERA_ASSIGN_OR_RETURN(id, tx.InsertWorkload(w));
      return Status::Ok();
    }).ok());
    return id;
  }
  int64_t Event(int64_t workload, const std::string& kind) {
    int64_t id = 0;
    EXPECT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      TESSERA_ASSIGN_OR_RETURN(id, tx.AppendWorkloadEvent({0, workload, 1000, kind, "detail of " + kind}));
      return Status::Ok();
    }).ok());
    if (feed_) feed_->Notify();
    return id;
  }
  int64_t ObjectEvent(const std::string& subject, const std::string& name, const std::string& scope,
                      const std::string& kind) {
    int64_t id = 0;
    EXPECT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      TESSERA_ASSIGN_OR_RETURN(id, tx.AppendObjectEvent({subject, name, scope, 1000, kind, ""}));
      return Status::Ok();
    }).ok());
    if (feed_) feed_->Notify();
    return id;
  }
  void StartFeed(EventFeedOptions o = {}) {
    o.poll_interval_ms = std::min(o.poll_interval_ms, 50);
    feed_ = std::make_unique<EventFeed>(*db_, o);
    feed_->Start();
  }
  std::shared_ptr<RecordingStream> Subscribe(EventFeed::Subscription s = {}) {
    auto out = std::make_shared<RecordingStream>();
    s.out = out;
    feed_->Subscribe(std::move(s));
    // Wait until the feed placed it (its start point is "now" only once the thread took it).
    for (int i = 0; i < 200 && feed_->subscribers() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    return out;
  }
  template <class Pred>
  static bool Eventually(Pred p, int ms = 3000) {
    for (int i = 0; i < ms / 10; ++i) {
      if (p()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return p();
  }

  std::filesystem::path dir_;
  std::unique_ptr<store::Store> db_;
  std::unique_ptr<EventFeed> feed_;
  int64_t wa_ = 0, wb_ = 0;
};

TEST(EventStreamRecordTest, IsOneIdLineAndOneDataLineOfJson) {
  store::TenantWorkloadEvent e{{42, 7, 1764590000000, "placed", "node-1 gpu 0\nsecond line"}, "vision"};
  EXPECT_EQ(EventStreamRecord(e),
            "id: 42\ndata: {\"detail\":\"node-1 gpu 0\\nsecond line\",\"id\":42,\"kind\":\"placed\",\"tenant\":"
            "\"vision\",\"time_ms\":1764590000000,\"workload\":7}\n\n");
}

TEST(EventStreamRecordTest, AnObjectEventNamesItsObjectInsteadOfAWorkload) {
  const store::TenantWorkloadEvent node{{43, 0, 5, "node.cordoned", ""}, "", "node", "node-1"};
  EXPECT_EQ(EventStreamRecord(node),
            "id: 43\ndata: {\"detail\":\"\",\"id\":43,\"kind\":\"node.cordoned\",\"node\":\"node-1\","
            "\"time_ms\":5}\n\n");
  // A deleted tenant's event is seen by its parent's subtree (the scope); it names the tenant.
  const store::TenantWorkloadEvent tenant{{44, 0, 6, "tenant.deleted", ""}, "acme", "tenant", "ranking"};
  EXPECT_EQ(EventStreamRecord(tenant),
            "id: 44\ndata: {\"detail\":\"\",\"id\":44,\"kind\":\"tenant.deleted\",\"tenant\":\"ranking\","
            "\"time_ms\":6}\n\n");
  const store::TenantWorkloadEvent admin_token{{45, 0, 7, "token.created", "role admin"}, "", "token", "tok_1"};
  EXPECT_EQ(EventStreamRecord(admin_token),
            "id: 45\ndata: {\"detail\":\"role admin\",\"id\":45,\"kind\":\"token.created\",\"tenant\":null,"
            "\"time_ms\":7,\"token\":\"tok_1\"}\n\n");
}

TEST(EventStreamParserTest, GivesEachEventsDataWhateverPiecesTheStreamArrivesIn) {
  const std::string stream =
      "retry: 3000\n\n: ping\n\nid: 1\ndata: {\"a\":1}\n\nid: 2\r\ndata: x\r\ndata: y\r\n\r\n"
      "data\n\nid: 3\rdata:  z\r\r";
  const std::vector<std::string> want = {"{\"a\":1}", "x\ny", "", " z"};
  for (size_t piece : {size_t{1}, size_t{2}, size_t{7}, stream.size()}) {
    EventStreamParser p;
    std::vector<std::string> got;
    for (size_t at = 0; at < stream.size(); at += piece)
      for (std::string& d : p.Feed(std::string_view(stream).substr(at, piece))) got.push_back(std::move(d));
    EXPECT_EQ(got, want) << "pieces of " << piece;
    EXPECT_EQ(p.last_event_id(), "3");
  }
  EventStreamParser partial;
  EXPECT_TRUE(partial.Feed("id: 9\ndata: half").empty());  // no blank line yet: no event
  EXPECT_EQ(partial.last_event_id(), "");
}

TEST_F(EventFeedTest, NewEventsReachEachStreamOnceInIdOrderFilteredByTenantAndWorkload) {
  const int64_t before = Event(wa_, "submitted");  // before anyone subscribed: not sent
  StartFeed();
  auto all = Subscribe();
  auto only_a = Subscribe({.visible = [](const store::TenantWorkloadEvent& e) { return e.tenant == "a"; }});
  auto only_wb = Subscribe({.workload = wb_});
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(Event(i % 2 ? wb_ : wa_, "placed"));
  ASSERT_TRUE(Eventually([&] { return all->Ids().size() == 6; })) << all->text();
  EXPECT_EQ(all->Ids(), ids);
  EXPECT_THAT(all->text(), Not(HasSubstr("id: " + std::to_string(before) + "\n")));
  ASSERT_TRUE(Eventually([&] { return only_a->Ids().size() == 3 && only_wb->Ids().size() == 3; }));
  EXPECT_EQ(only_a->Ids(), (std::vector<int64_t>{ids[0], ids[2], ids[4]}));
  EXPECT_EQ(only_wb->Ids(), (std::vector<int64_t>{ids[1], ids[3], ids[5]}));
  EXPECT_THAT(only_a->text(), Not(HasSubstr("\"tenant\":\"b\"")));
}

// Object events go out in the one id order with the workload events; a stream of one workload
// gets none of them, and the visible filter sees each event's subject and scope.
TEST_F(EventFeedTest, ObjectEventsShareTheStreamAndAWorkloadStreamGetsNone) {
  StartFeed();
  auto all = Subscribe();
  auto only_wa = Subscribe({.workload = wa_});
  auto no_nodes = Subscribe({.visible = [](const store::TenantWorkloadEvent& e) { return e.subject != "node"; }});
  const int64_t placed = Event(wa_, "placed");
  const int64_t lost = ObjectEvent("node", "n1", "", "node.lost");
  const int64_t created = ObjectEvent("tenant", "c", "a", "tenant.created");
  ASSERT_TRUE(Eventually([&] { return all->Ids().size() == 3 && no_nodes->Ids().size() == 2; })) << all->text();
  EXPECT_EQ(all->Ids(), (std::vector<int64_t>{placed, lost, created}));
  EXPECT_THAT(all->text(), HasSubstr("\"node\":\"n1\""));
  EXPECT_EQ(no_nodes->Ids(), (std::vector<int64_t>{placed, created}));
  EXPECT_EQ(only_wa->Ids(), (std::vector<int64_t>{placed}));
}

TEST_F(EventFeedTest, AStreamGivenAnIdFirstGetsWhatItMissedFromTheStore) {
  std::vector<int64_t> ids;
  for (int i = 0; i < 250; ++i) ids.push_back(Event(wa_, "changed"));  // more than two pages
  StartFeed({.page = 100});
  auto late = Subscribe({.after = ids[49]});
  ids.push_back(Event(wa_, "placed"));  // live, after the replay
  ASSERT_TRUE(Eventually([&] { return late->Ids().size() == 201; })) << late->Ids().size();
  EXPECT_EQ(late->Ids(), std::vector<int64_t>(ids.begin() + 50, ids.end()));
}

TEST_F(EventFeedTest, AGapIsHeldUntilItFillsOrTheGraceHasPassed) {
  const int64_t base = Event(wa_, "placed");
  StartFeed({.gap_grace_ms = 60'000});
  auto s = Subscribe();
  // A transaction that drew base+1 has not committed; base+2 has (PostgreSQL can do this).
  const auto insert = [&](int64_t id) {
    ASSERT_TRUE(db_->ExecForTesting("INSERT INTO workload_events (id, workload_id, time_ms, kind, detail) VALUES (" +
                                    std::to_string(id) + ", " + std::to_string(wa_) + ", 1, 'placed', '')")
                    .ok());
    feed_->Notify();
  };
  insert(base + 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(s->Ids().empty()) << s->text();
  insert(base + 1);
  ASSERT_TRUE(Eventually([&] { return s->Ids().size() == 2; })) << s->text();
  EXPECT_EQ(s->Ids(), (std::vector<int64_t>{base + 1, base + 2}));

  // A gap that never fills (a rolled-back transaction) goes after the grace.
  feed_.reset();
  StartFeed({.gap_grace_ms = 300});
  auto t = Subscribe();
  insert(base + 4);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(t->Ids().empty()) << t->text();
  ASSERT_TRUE(Eventually([&] { return t->Ids().size() == 1; })) << t->text();
  EXPECT_EQ(t->Ids(), (std::vector<int64_t>{base + 4}));
}

TEST_F(EventFeedTest, StreamsArePingedAndDroppedWhenTheClientLeavesOrTheTokenIsRevoked) {
  StartFeed({.ping_interval_ms = 50});
  std::atomic<bool> token_valid{true};
  auto leaver = Subscribe();
  auto revoked = Subscribe({.authorized = [&] { return token_valid.load(); }});
  ASSERT_TRUE(Eventually([&] { return leaver->text().find(": ping\n\n") != std::string::npos; })) << leaver->text();
  ASSERT_EQ(feed_->subscribers(), 2u);
  leaver->ClientGoesAway();
  ASSERT_TRUE(Eventually([&] { return feed_->subscribers() == 1; }));
  token_valid = false;
  ASSERT_TRUE(Eventually([&] { return feed_->subscribers() == 0; }));
  EXPECT_TRUE(revoked->closed_by_server());
}

TEST_F(EventFeedTest, StoppingClosesEveryStream) {
  StartFeed();
  auto s = Subscribe();
  feed_->Stop();
  EXPECT_TRUE(s->closed_by_server());
}

}  // namespace
}  // namespace tessera::daemon
