// HistoryService without HTTP (src/daemon/history_service.h): a ClusterHistory of a few points read
// as an admin (every tenant, the idle GPUs) and as a tenant (its subtree only), thinned by step,
// and the refusals: another subtree's tenant, a step out of range naming "step".
#include "src/daemon/history_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>

namespace tessera::daemon {
namespace {

using ::testing::ElementsAre;

class HistoryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One point every 5 s for a minute: ml holds 500 milli, cv 1000 and has one pending; 2 idle GPUs.
    for (int64_t t = kNow - 60; t < kNow; t += 5) history_.Record({t, {{"ml", 500}, {"cv", 1000}}, {{"cv", 1}}, 2});
    service_ = std::make_unique<HistoryService>(history_, Parents(), clock_);
  }
  static ParentOf Parents() {
    return [](std::string_view t) -> std::optional<std::string> {
      if (t == "ml" || t == "cv") return std::string();
      return std::nullopt;
    };
  }
  // The control plane's check (Impl::Check) for `who` over the tenants ml and cv.
  static ReadCaller As(Principal who) {
    return {who, [who](Action action, std::string_view tenant, std::string_view what) -> Status {
              const Decision d = Authorize(who, action, tenant, Parents());
              if (d == Decision::kAllow) return Status::Ok();
              if (d == Decision::kNotFound) return NotFoundError(std::string(what) + " not found");
              return Status(StatusCode::kPermissionDenied, "this token's role may not " + std::string(ActionText(action)));
            }};
  }

  static constexpr int64_t kNow = 1'800'000'000;
  FakeClock clock_{FromUnixMillis(kNow * 1000)};
  ClusterHistory history_{5, 86400};
  std::unique_ptr<HistoryService> service_;
};

TEST_F(HistoryServiceTest, AnAdminSeesEveryTenantAndTheIdleGpusOfTheLastHour) {
  StatusOr<HistoryAnswer> a = service_->Read(As({Role::kAdmin, ""}), {});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->from_s, kNow - 3600);
  EXPECT_EQ(a->recorded_every_s, 5);
  EXPECT_EQ(a->kept_s, 86400);
  EXPECT_TRUE(a->idle_gpus);
  EXPECT_EQ(a->window.step_s, 5);
  ASSERT_FALSE(a->window.t_s.empty());
  EXPECT_EQ(a->window.held_milli.count("ml"), 1u);
  EXPECT_EQ(a->window.held_milli.count("cv"), 1u);
  EXPECT_EQ(a->window.idle_gpus.front(), 2);
}

TEST_F(HistoryServiceTest, ATenantSeesItsSubtreeOnlyAndNoIdleGpus) {
  const ReadCaller ml = As({Role::kTenantUser, "ml"});
  StatusOr<HistoryAnswer> a = service_->Read(ml, {.step = "30"});
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_FALSE(a->idle_gpus);
  EXPECT_EQ(a->window.step_s, 30);
  std::vector<std::string> seen;
  for (const auto& [tenant, series] : a->window.held_milli) seen.push_back(tenant);
  EXPECT_THAT(seen, ElementsAre("ml"));
  const Status other = service_->Read(ml, {.tenant = "cv"}).status();
  EXPECT_EQ(other.code(), StatusCode::kNotFound);
  EXPECT_EQ(other.message(), "tenant 'cv' not found");
  EXPECT_EQ(service_->Read(As({Role::kAdmin, ""}), {.tenant = "nope"}).status().message(), "tenant 'nope' not found");
  // An admin naming a tenant sees that subtree, without the idle GPUs.
  StatusOr<HistoryAnswer> cv = service_->Read(As({Role::kAdmin, ""}), {.tenant = "cv", .from_s = kNow - 30});
  ASSERT_TRUE(cv.ok()) << cv.status().message();
  EXPECT_FALSE(cv->idle_gpus);
  EXPECT_EQ(cv->from_s, kNow - 30);
  EXPECT_EQ(cv->window.pending.count("cv"), 1u);
  EXPECT_EQ(cv->window.held_milli.count("ml"), 0u);
}

TEST_F(HistoryServiceTest, AStepOutOfRangeIsRefusedNamingIt) {
  for (const char* step : {"0", "86401", "+5", " 5", "5s", ""}) {
    std::string field;
    const Status st = service_->Read(As({Role::kAdmin, ""}), {.step = step}, &field).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << step;
    EXPECT_EQ(field, "step") << step;
  }
  EXPECT_EQ(service_->Read(As({Role::kAdmin, ""}), {.step = "x"}).status().message(),
            "step: 'x' is not a number of seconds 1..86400");
}

}  // namespace
}  // namespace tessera::daemon
