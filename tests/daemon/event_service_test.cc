// EventService without HTTP (src/daemon/event_service.h): a caller and a decoded request in, the
// stream's filter out. The header's worked example, the order of its checks, and which events each
// role sees (workload, tenant, token and node events) with and without ?tenant=.
#include "src/daemon/event_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "tests/daemon/service_test_store.h"

namespace tessera::daemon {
namespace {

using ::testing::StartsWith;

class EventServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenServiceTestStore("tessera-event-service", dir_, db_);
    ASSERT_NE(db_, nullptr);
    service_ = std::make_unique<EventService>(*db_, EventFeedOptions{},
                                              [this](std::string_view t) { return ParentOf(t); });
  }
  void TearDown() override {
    service_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::optional<std::string> ParentOf(std::string_view t) const {
    auto it = parents_.find(std::string(t));
    return it == parents_.end() ? std::nullopt : std::optional<std::string>(it->second);
  }
  // The control plane's check (Impl::Check) for `who`; counts its calls.
  ReadCaller As(Principal who) {
    return {who, [this, who](Action action, std::string_view tenant, std::string_view what) -> Status {
              ++checks_;
              const Decision d = Authorize(who, action, tenant, [this](std::string_view t) { return ParentOf(t); });
              if (d == Decision::kAllow) return Status::Ok();
              if (d == Decision::kNotFound) return NotFoundError(std::string(what) + " not found");
              return Status(StatusCode::kPermissionDenied, "this token's role may not " + std::string(ActionText(action)));
            }};
  }
  static store::TenantWorkloadEvent Event(std::string subject, std::string tenant, std::string kind) {
    store::TenantWorkloadEvent e;
    e.subject = std::move(subject);
    e.tenant = std::move(tenant);
    e.event.kind = std::move(kind);
    return e;
  }
  // The kinds of the sample events `f` lets through.
  static std::vector<std::string> Seen(const EventFilter& f) {
    std::vector<std::string> out;
    for (const store::TenantWorkloadEvent& e :
         {Event("workload", "vision", "placed"), Event("workload", "acme", "submitted"),
          Event("workload", "other", "finished"), Event("tenant", "vision", "tenant.created"),
          Event("token", "vision", "token.created"), Event("node", "", "node.lost")})
      if (f.visible(e)) out.push_back(e.event.kind);
    return out;
  }

  std::filesystem::path dir_;
  std::unique_ptr<store::Store> db_;
  std::map<std::string, std::string> parents_ = {{"acme", ""}, {"vision", "acme"}, {"other", ""}};
  int checks_ = 0;
  std::unique_ptr<EventService> service_;
};

TEST_F(EventServiceTest, TheHeadersWorkedExample) {
  StatusOr<EventFilter> vision = service_->Open(As({Role::kTenantUser, "vision"}), {});
  ASSERT_TRUE(vision.ok()) << vision.status().message();
  EXPECT_THAT(Seen(*vision), ::testing::ElementsAre("placed", "tenant.created"));
  EXPECT_FALSE(vision->workload.has_value());
  EXPECT_FALSE(vision->after.has_value());  // from now on

  StatusOr<EventFilter> acme = service_->Open(As({Role::kAdmin, ""}), {.tenant = "acme"});
  ASSERT_TRUE(acme.ok());
  EXPECT_THAT(Seen(*acme), ::testing::ElementsAre("placed", "submitted", "tenant.created", "token.created"));

  StatusOr<EventFilter> hidden = service_->Open(As({Role::kTenantUser, "other"}), {.tenant = "vision"});
  EXPECT_EQ(hidden.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(hidden.status().message(), "tenant 'vision' not found");

  StatusOr<EventFilter> bad = service_->Open(As({Role::kAdmin, ""}), {.workload = "x"});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "workload: a workload id (a positive integer)");

  StatusOr<EventFilter> replay = service_->Open(As({Role::kAdmin, ""}), {.last_event_id = "42"});
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(replay->after, 42);
}

TEST_F(EventServiceTest, AnAdminSeesEverythingAndANodeEventIsOutsideEveryTenant) {
  StatusOr<EventFilter> all = service_->Open(As({Role::kAdmin, ""}), {});
  ASSERT_TRUE(all.ok());
  EXPECT_THAT(Seen(*all), ::testing::ElementsAre("placed", "submitted", "finished", "tenant.created",
                                                 "token.created", "node.lost"));
  EXPECT_EQ(checks_, 0);  // no tenant named: the route wrapper authorised it
  StatusOr<EventFilter> other = service_->Open(As({Role::kAdmin, ""}), {.tenant = "other"});
  ASSERT_TRUE(other.ok());
  EXPECT_THAT(Seen(*other), ::testing::ElementsAre("finished"));
  // A tenant-admin sees its subtree's token events, a tenant-user does not.
  StatusOr<EventFilter> admin = service_->Open(As({Role::kTenantAdmin, "acme"}), {});
  ASSERT_TRUE(admin.ok());
  EXPECT_THAT(Seen(*admin), ::testing::ElementsAre("placed", "submitted", "tenant.created", "token.created"));
}

TEST_F(EventServiceTest, ChecksComeInOrderTenantThenWorkloadThenLastEventId) {
  // Another subtree's tenant is 404 before a bad workload or Last-Event-ID is looked at.
  EXPECT_EQ(service_->Open(As({Role::kTenantUser, "other"}), {.tenant = "acme", .workload = "0", .last_event_id = "x"})
                .status()
                .code(),
            StatusCode::kNotFound);
  // A tenant that does not exist is 404 for an admin too.
  EXPECT_EQ(service_->Open(As({Role::kAdmin, ""}), {.tenant = "ghost"}).status().message(),
            "tenant 'ghost' not found");
  EXPECT_EQ(service_->Open(As({Role::kNodeAgent, ""}), {.tenant = "acme"}).status().code(),
            StatusCode::kPermissionDenied);
  StatusOr<EventFilter> both = service_->Open(As({Role::kAdmin, ""}), {.workload = "0", .last_event_id = "x"});
  EXPECT_THAT(both.status().message(), StartsWith("workload: "));
  StatusOr<EventFilter> id = service_->Open(As({Role::kAdmin, ""}), {.workload = "7", .last_event_id = "-1"});
  EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(id.status().message(), StartsWith("Last-Event-ID: "));
  // ?after= wins over Last-Event-ID (which is not even read then).
  StatusOr<EventFilter> after = service_->Open(As({Role::kAdmin, ""}), {.workload = "7", .after = 3, .last_event_id = "x"});
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_EQ(after->after, 3);
  EXPECT_EQ(after->workload, 7);
}

}  // namespace
}  // namespace tessera::daemon
