// ForecastService without HTTP (src/daemon/forecast_service.h): a caller's check and a decoded
// query in, the tenant's hourly GPU demand and its forecast out, over a ledger built here; the
// header's worked example, the subtree scoping, every refusal and the history it needs.
#include "src/daemon/forecast_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <optional>

namespace tessera::daemon {
namespace {

using ::testing::Each;
using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1793491200;  // 2026-11-01T00:00:00Z
constexpr int64_t kHour = 3600;

class ForecastServiceTest : public ::testing::Test {
 protected:
  // vision held two GPUs every hour of 2026-11-01..04 (96 hours); the clock is 2026-11-05T00:10Z.
  void SetUp() override {
    for (int gpu = 0; gpu < 2; ++gpu) {
      const metering::SourceKey key{"vision", "n1", std::to_string(gpu), "A100-80GB", "whole", "1"};
      for (int h = 0; h < 96; ++h)
        ASSERT_TRUE(ledger_
                        .Ingest(key, {.seq = h, .start = kT0 + h * kHour, .end = kT0 + (h + 1) * kHour,
                                      .gpu_milli_s_allocated = 3'600'000})
                        .ok());
    }
  }
  ParentOf Parents() {
    return [this](std::string_view t) -> std::optional<std::string> {
      auto it = parents_.find(std::string(t));
      if (it == parents_.end()) return std::nullopt;
      return it->second;
    };
  }
  std::unique_ptr<ForecastService> Service() {
    return std::make_unique<ForecastService>(
        clock_, Parents(), [this](int64_t from) -> StatusOr<UsageHours> {
          ++reads_;
          UsageHours out{ledger_.sources(), {}};
          for (const auto& h : ledger_.Records())
            if (h.hour >= from) out.records.push_back(h);
          return out;
        });
  }
  // The control plane's check (Impl::Check) for `who` over the tenants here.
  ReadCaller As(Principal who) {
    return {who, [this, who](Action action, std::string_view tenant, std::string_view what) -> Status {
              const Decision d = Authorize(who, action, tenant, Parents());
              if (d == Decision::kAllow) return Status::Ok();
              if (d == Decision::kNotFound) return NotFoundError(std::string(what) + " not found");
              return Status(StatusCode::kPermissionDenied, "this token's role may not " + std::string(ActionText(action)));
            }};
  }

  // The clock the services read, at `unix_s` seconds since the epoch.
  void SetNow(int64_t unix_s) { clock_.Set(Clock::TimePoint(std::chrono::seconds(unix_s))); }

  FakeClock clock_{Clock::TimePoint(std::chrono::seconds(kT0 + 96 * kHour + 600))};
  metering::Ledger ledger_;
  int reads_ = 0;
  std::map<std::string, std::string> parents_{{"acme", ""}, {"vision", "acme"}, {"other", ""}};
};

TEST_F(ForecastServiceTest, HeaderExample) {
  auto service = Service();
  StatusOr<DemandForecast> f = service->Run(As({Role::kAdmin, ""}), {"vision", "24"});
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->tenant, "vision");
  EXPECT_EQ(f->history_start_s, kT0);
  EXPECT_EQ(f->history_hours, 96);
  EXPECT_THAT(f->history, Each(DoubleNear(2.0, 1e-12)));  // GPU-hours per hour
  EXPECT_EQ(f->start_s, kT0 + 96 * kHour);                // the current hour
  EXPECT_EQ(f->horizon_hours, 24);
  EXPECT_DOUBLE_EQ(f->level, 0.9);
  ASSERT_EQ(f->forecast.values.size(), 24u);
  EXPECT_THAT(f->forecast.values, Each(DoubleNear(2.0, 1e-9)));
  EXPECT_THAT(f->forecast.lower, Each(DoubleNear(2.0, 1e-9)));
  EXPECT_THAT(f->forecast.upper, Each(DoubleNear(2.0, 1e-9)));
  EXPECT_FALSE(f->forecast.methods.empty());
  // acme's tenant-user sees its subtree: vision's demand, the same series.
  StatusOr<DemandForecast> mine = service->Run(As({Role::kTenantUser, "acme"}), {});
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  EXPECT_EQ(mine->tenant, "");
  EXPECT_EQ(mine->history, f->history);
  EXPECT_EQ(mine->horizon_hours, kDefaultHorizonHours);
}

TEST_F(ForecastServiceTest, ATenantTokenSeesOnlyItsSubtree) {
  auto service = Service();
  const ReadCaller other = As({Role::kTenantUser, "other"});
  EXPECT_THAT(service->Run(other, {"vision", ""}).status().message(), HasSubstr("tenant 'vision' not found"));
  EXPECT_EQ(service->Run(other, {"vision", ""}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service->Run(other, {"acme", ""}).status().code(), StatusCode::kNotFound);
  // Its own view holds none of vision's usage: no history, said so.
  StatusOr<DemandForecast> own = service->Run(other, {});
  EXPECT_EQ(own.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(own.status().message(), HasSubstr("tenant 'other' has 0 hours of usage history"));
  // vision's own token may not look up at its parent.
  EXPECT_EQ(service->Run(As({Role::kTenantAdmin, "vision"}), {"acme", ""}).status().code(), StatusCode::kNotFound);
  // A viewer sees every tenant; an unknown one is NOT_FOUND; a node agent may not read usage.
  EXPECT_TRUE(service->Run(As({Role::kViewer, ""}), {"vision", "1"}).ok());
  EXPECT_EQ(service->Run(As({Role::kAdmin, ""}), {"nobody", ""}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(service->Run(As({Role::kNodeAgent, ""}), {}).status().code(), StatusCode::kPermissionDenied);
  // The whole cluster for an admin without a tenant: vision's is all there is.
  StatusOr<DemandForecast> all = service->Run(As({Role::kAdmin, ""}), {});
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->history_hours, 96);
}

TEST_F(ForecastServiceTest, TheHorizonIsAWholeNumberOfHoursInRange) {
  auto service = Service();
  const ReadCaller admin = As({Role::kAdmin, ""});
  for (const char* bad : {"3d", "0", "-4", "+4", "2161", "1.5", " 24", "99999999999"}) {
    const Status st = service->Run(admin, {"vision", bad}).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(st.message(), ::testing::StartsWith("horizon: ")) << bad;
  }
  EXPECT_THAT(service->Run(admin, {"vision", "2161"}).status().message(), HasSubstr("give 1 to 2160"));
  StatusOr<DemandForecast> max = service->Run(admin, {"vision", "2160"});
  ASSERT_TRUE(max.ok()) << max.status().message();
  EXPECT_EQ(max->forecast.values.size(), 2160u);
  // The caller's check comes first: another subtree's tenant is NOT_FOUND whatever the horizon.
  EXPECT_EQ(service->Run(As({Role::kTenantUser, "other"}), {"vision", "3d"}).status().code(), StatusCode::kNotFound);
}

TEST_F(ForecastServiceTest, TooLittleHistorySaysHowMuchIsNeededAndFromWhen) {
  SetNow(kT0 + 50 * kHour + 5);  // 50 hours of history
  auto service = Service();
  const Status st = service->Run(As({Role::kAdmin, ""}), {"vision", ""}).status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("tenant 'vision' has 50 hours of usage history"));
  EXPECT_THAT(st.message(), HasSubstr("needs at least 72 (3 days)"));
  EXPECT_THAT(st.message(), HasSubstr("it can forecast from 2026-11-04T00:00:00Z"));
  SetNow(kT0 + 72 * kHour);
  EXPECT_TRUE(service->Run(As({Role::kAdmin, ""}), {"vision", ""}).ok());
}

TEST_F(ForecastServiceTest, HoursWithoutUsageCountZeroAndTheCurrentHourIsLeftOut) {
  // vision stopped at 2026-11-05T00:00Z; a week later its demand is a week of zeros.
  const int64_t now_s = kT0 + (96 + 168) * kHour + 30;
  SetNow(now_s);
  // A sample in the current hour (not over yet) is not history.
  const metering::SourceKey key{"vision", "n1", "0", "A100-80GB", "whole", "1"};
  ASSERT_TRUE(ledger_.Ingest(key, {.seq = 1000, .start = now_s - 30, .end = now_s, .gpu_milli_s_allocated = 30'000}).ok());
  StatusOr<DemandForecast> f = Service()->Run(As({Role::kAdmin, ""}), {"vision", "2"});
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ(f->history_hours, 96 + 168);
  EXPECT_DOUBLE_EQ(f->history[95], 2.0);
  EXPECT_DOUBLE_EQ(f->history[96], 0.0);
  EXPECT_DOUBLE_EQ(f->history.back(), 0.0);
  EXPECT_THAT(f->forecast.values, ElementsAre(DoubleNear(0, 0.05), DoubleNear(0, 0.05)));
}

TEST_F(ForecastServiceTest, HistoryReachesBackEightWeeksAtMost) {
  SetNow(kT0 + (96 + 10 * 168) * kHour);  // ten weeks after the usage ended
  StatusOr<DemandForecast> f = Service()->Run(As({Role::kAdmin, ""}), {"vision", "1"});
  EXPECT_EQ(f.status().code(), StatusCode::kFailedPrecondition);  // nothing in the last 8 weeks
  SetNow(kT0 + 7 * 168 * kHour);  // 7 weeks: the whole usage is in the window
  f = Service()->Run(As({Role::kAdmin, ""}), {"vision", "1"});
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->history_start_s, kT0);
  SetNow(kT0 + (8 * 168 + 48) * kHour);  // the window starts 2 days into the usage
  f = Service()->Run(As({Role::kAdmin, ""}), {"vision", "1"});
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->history_start_s, kT0 + 48 * kHour);
  EXPECT_EQ(f->history_hours, kMaxHistoryHours);
}

}  // namespace
}  // namespace tessera::daemon
