// FetchDemandByModel (tessera/daemon/usage_history.h) against a local HttpServer that answers GET
// /v1/usage as a script says: the header's worked example, a day at a time, and the errors
// (an error answer keeps its code and message; an answer of another shape names the field).
#include "tessera/daemon/usage_history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "src/daemon/http_server.h"

namespace tessera::daemon {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kT0 = 1793491200;  // 2026-11-01T00:00:00Z
constexpr int64_t kHour = 3600;

class UsageHistoryTest : public ::testing::Test {
 protected:
  // GET /v1/usage answers answer(from, to).
  void Serve(std::function<HttpResponse(int64_t from, int64_t to)> answer) {
    client_.reset();
    server_.reset();
    answer_ = std::move(answer);
    server_ = std::make_unique<HttpServer>(HttpServerOptions{.listen_host = "127.0.0.1", .listen_port = 0});
    ASSERT_TRUE(server_
                    ->Route("GET", "/v1/usage",
                            [this](const HttpRequest& r) {
                              std::lock_guard<std::mutex> lock(mu_);
                              const int64_t from = std::stoll(r.query.at("from")), to = std::stoll(r.query.at("to"));
                              asked_.push_back({from, to});
                              return answer_(from, to);
                            })
                    .ok());
    ASSERT_TRUE(server_->Start().ok());
    auto client = ApiClient::Create("http://127.0.0.1:" + std::to_string(server_->port()),
                                    ApiClientOptions{.token = "t", .retry_budget_ms = 0});
    ASSERT_TRUE(client.ok()) << client.status().message();
    client_ = std::move(*client);
  }
  static std::string Hour(const std::string& model, int64_t hour, int64_t milli_s) {
    return R"({"tenant":"ml","model":")" + model + R"(","hour_s":)" + std::to_string(hour) +
           R"(,"gpu_milli_s_allocated":)" + std::to_string(milli_s) + "}";
  }

  std::mutex mu_;
  std::function<HttpResponse(int64_t, int64_t)> answer_;
  std::vector<std::pair<int64_t, int64_t>> asked_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<ApiClient> client_;
};

TEST_F(UsageHistoryTest, HeaderExampleSumsPerModelAndHourWithZerosUpToTheEnd) {
  const int64_t ten = kT0 + 10 * kHour;
  Serve([&](int64_t, int64_t) {
    return HttpResponse::Json(200, R"({"tenants": [], "hours": [)" + Hour("A100-80GB", ten, 1'800'000) + "," +
                                       Hour("A100-80GB", ten, 3'600'000) + "," +
                                       Hour("H100-80GB", ten + kHour, 900'000) + "]}");
  });
  StatusOr<std::vector<metering::ModelDemand>> d = FetchDemandByModel(*client_, ten, ten + 3 * kHour);
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[0].model, "A100-80GB");
  EXPECT_EQ((*d)[0].start_hour, ten);
  EXPECT_THAT((*d)[0].gpus, ElementsAre(DoubleNear(1.5, 1e-12), 0.0, 0.0));
  EXPECT_EQ((*d)[1].model, "H100-80GB");
  EXPECT_EQ((*d)[1].start_hour, ten + kHour);
  EXPECT_THAT((*d)[1].gpus, ElementsAre(DoubleNear(0.25, 1e-12), 0.0));
}

TEST_F(UsageHistoryTest, AsksADayAtATimeAndPlacesEachDaysHours) {
  // One GPU held in the first hour of each day it is asked for.
  Serve([](int64_t from, int64_t) {
    return HttpResponse::Json(200, R"({"hours": [)" + Hour("A100-80GB", from, 3'600'000) + "]}");
  });
  StatusOr<std::vector<metering::ModelDemand>> d = FetchDemandByModel(*client_, kT0, kT0 + 50 * kHour);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_THAT(asked_, ElementsAre(std::pair{kT0, kT0 + 24 * kHour}, std::pair{kT0 + 24 * kHour, kT0 + 48 * kHour},
                                  std::pair{kT0 + 48 * kHour, kT0 + 50 * kHour}));
  ASSERT_EQ(d->size(), 1u);
  ASSERT_EQ((*d)[0].gpus.size(), 50u);
  EXPECT_EQ((*d)[0].gpus[0], 1.0);
  EXPECT_EQ((*d)[0].gpus[24], 1.0);
  EXPECT_EQ((*d)[0].gpus[48], 1.0);
  EXPECT_EQ((*d)[0].gpus[1], 0.0);
}

TEST_F(UsageHistoryTest, ErrorAnswersKeepTheirCodeAndOtherShapesNameTheField) {
  Serve([](int64_t, int64_t) { return HttpResponse::Error(403, "forbidden", "this token's role may not read usage"); });
  Status st = FetchDemandByModel(*client_, kT0, kT0 + kHour).status();
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(st.message(), HasSubstr("GET /v1/usage?from=1793491200&to=1793494800: HTTP 403: this token's role may "
                                      "not read usage"));
  Serve([](int64_t, int64_t) { return HttpResponse::Json(200, R"({"hours": [{"model": "A100-80GB", "hour_s": 5}]})"); });
  st = FetchDemandByModel(*client_, kT0, kT0 + kHour).status();
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(st.message(), HasSubstr("the answer's hours[0].hour_s is not the start of an hour"));
  Serve([](int64_t, int64_t) { return HttpResponse::Json(200, R"({"items": []})"); });
  EXPECT_THAT(FetchDemandByModel(*client_, kT0, kT0 + kHour).status().message(), HasSubstr("hours is not an array"));
  EXPECT_EQ(FetchDemandByModel(*client_, kT0 + 5, kT0 + kHour).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FetchDemandByModel(*client_, kT0, kT0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::daemon
