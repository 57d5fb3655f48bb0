// GET /v1/forecast through the control plane's API (ControlPlane::Handle, no socket, a test
// clock): usage samples POSTed by a node agent become the tenant's hourly demand, forecast with
// its interval; tenant-scoped like GET /v1/usage; strict parameters; too little history is 409.
// On SQLite (on PostgreSQL when the fixture finds one, as the other API tests).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "src/daemon/http_server.h"
#include "tests/testing/pg_schema.h"
#include "tessera/daemon/control_plane.h"

namespace tessera::daemon {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kAdmin = "admin-token-for-the-forecast-tests";
constexpr int64_t kT0 = 1793491200;  // 2026-11-01T00:00:00Z
constexpr int64_t kHour = 3600;

class ForecastApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-forecast-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    if (testing::PgTestSchema::Available()) {
      ASSERT_TRUE(pg_.Create());
    }
    ControlPlaneOptions o;
    o.db = testing::PgTestSchema::Available() ? pg_.url() : "sqlite:" + (dir_ / "tessera.db").string();
    o.listen_port = 0;
    o.bootstrap_token = kAdmin;
    o.run_loop = false;
    o.node_timeout_s = 1'000'000;
    o.clock = clock_;
    auto cp = ControlPlane::Create(std::move(o));
    ASSERT_TRUE(cp.ok()) << cp.status().message();
    cp_ = std::move(*cp);
    Ok("POST", "/v1/tenants", R"({"name": "acme", "quota": {}})", kAdmin, 201);
    Ok("POST", "/v1/tenants", R"({"name": "vision", "parent": "acme", "quota": {}})", kAdmin, 201);
    Ok("POST", "/v1/tenants", R"({"name": "other", "quota": {}})", kAdmin, 201);
    agent_ = Token("node-agent");
    Ok("POST", "/v1/nodes/n1/register",
       R"({"cpu_milli": 64000, "memory_mib": 262144, "gpus": [{"index": 0, "uuid": "GPU-n1-0", "model": "A100-80GB"}]})",
       agent_);
  }
  void TearDown() override {
    cp_.reset();
    std::filesystem::remove_all(dir_);
  }

  HttpResponse Request(const std::string& target, const std::string& token = kAdmin, const std::string& method = "GET",
                       const std::string& body = "") const {
    HttpRequest r;
    r.method = method;
    const size_t q = target.find('?');
    r.raw_path = r.path = target.substr(0, q);
    if (q != std::string::npos) r.query = ParseQuery(target.substr(q + 1));
    r.body = body;
    r.headers["authorization"] = "Bearer " + token;
    return cp_->Handle(std::move(r));
  }
  json Ok(const std::string& method, const std::string& target, const std::string& body = "",
          const std::string& token = kAdmin, int expected = 200) const {
    HttpResponse r = Request(target, token, method, body);
    EXPECT_EQ(r.status, expected) << method << " " << target << ": " << r.body;
    json j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json::object() : j;
  }
  json Error(const std::string& target, const std::string& token, int expected) const {
    HttpResponse r = Request(target, token);
    EXPECT_EQ(r.status, expected) << target << ": " << r.body;
    json j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json::object() : j.value("error", json::object());
  }
  std::string Token(const std::string& role, const std::string& tenant = "") {
    json body = {{"role", role}};
    if (!tenant.empty()) body["tenant"] = tenant;
    return Ok("POST", "/v1/tokens", body.dump(), kAdmin, 201).value("token", std::string());
  }
  // `milli` of GPU 0 of n1 held by `tenant` over the hour from `hour`.
  void PostHour(const std::string& tenant, int64_t seq, int64_t hour, int64_t milli) {
    json s = {{"tenant", tenant}, {"workload", tenant + "-w"}, {"gpu", "0"}, {"model", "A100-80GB"},
              {"partition", "share"}, {"seq", seq}, {"start", hour}, {"end", hour + kHour},
              {"gpu_milli_s_allocated", milli * kHour}, {"gpu_milli_s_used", milli * kHour / 2},
              {"memory_mib_s", 0}, {"peak_memory_mib", 0}, {"kernel_launches", 0}, {"bytes_transferred", -1}};
    json r = Ok("POST", "/v1/nodes/n1/usage", json{{"samples", json::array({s})}}.dump(), agent_);
    ASSERT_EQ(r["stored"], 1) << r.dump();
  }
  // Four days of vision: about 0.9 GPU 08:00-18:00 UTC, a fifth of one otherwise (+-0.04, fixed
  // noise: a series without any lets the forecaster tie its candidates).
  static int64_t VisionMilli(int h) { return (h % 24 >= 8 && h % 24 < 18 ? 900 : 200) + (h * 37 % 11 - 5) * 8; }
  void FourDaysOfVision() {
    SetNow(kT0 + 96 * kHour + 600);  // 2026-11-05T00:10Z
    for (int h = 0; h < 96; ++h) PostHour("vision", h, kT0 + h * kHour, VisionMilli(h));
  }

  std::filesystem::path dir_;
  testing::PgTestSchema pg_;
  std::unique_ptr<ControlPlane> cp_;
  std::string agent_;
  // The control plane's clock, at `unix_s` seconds since the epoch.
  void SetNow(int64_t unix_s) { clock_->Set(Clock::TimePoint(std::chrono::seconds(unix_s))); }
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>(Clock::TimePoint(std::chrono::seconds(kT0)));
};

TEST_F(ForecastApiTest, ATenantsDailyDemandIsForecastWithItsIntervalInGpuHoursPerHour) {
  FourDaysOfVision();
  const json f = Ok("GET", "/v1/forecast?tenant=vision&horizon=48");
  EXPECT_EQ(f["tenant"], "vision");
  EXPECT_EQ(f["unit"], "gpu_hours_per_hour");
  EXPECT_EQ(f["level"], 0.9);
  EXPECT_EQ(f["history_start"], "2026-11-01T00:00:00Z");
  EXPECT_EQ(f["history_hours"], 96);
  EXPECT_EQ(f["start"], "2026-11-05T00:00:00Z");
  EXPECT_EQ(f["start_s"], kT0 + 96 * kHour);
  EXPECT_EQ(f["horizon"], 48);
  EXPECT_FALSE(f["methods"].empty());
  ASSERT_EQ(f["hours"].size(), 48u) << f.dump();
  EXPECT_EQ(f["hours"][10]["hour"], "2026-11-05T10:00:00Z");
  for (int h = 0; h < 48; ++h) {
    const json& x = f["hours"][h];
    const double expected = h % 24 >= 8 && h % 24 < 18 ? 0.9 : 0.2;
    EXPECT_NEAR(x["value"].get<double>(), expected, 0.15) << x.dump();
    EXPECT_LE(x["lower"].get<double>(), x["value"].get<double>());
    EXPECT_GE(x["upper"].get<double>(), x["value"].get<double>());
    EXPECT_GE(x["lower"].get<double>(), 0);
  }
  // The default horizon is a day; without tenant an admin gets the whole cluster (vision's here).
  const json all = Ok("GET", "/v1/forecast");
  EXPECT_TRUE(all["tenant"].is_null());
  EXPECT_EQ(all["hours"].size(), 24u);
  EXPECT_EQ(all["history_hours"], 96);
}

TEST_F(ForecastApiTest, ScopedAsUsageWithStrictParametersAndAClearAnswerForTooLittleHistory) {
  FourDaysOfVision();
  const std::string acme_admin = Token("tenant-admin", "acme");
  const std::string other_user = Token("tenant-user", "other");
  EXPECT_EQ(Ok("GET", "/v1/forecast?tenant=vision", "", acme_admin)["history_hours"], 96);
  EXPECT_EQ(Ok("GET", "/v1/forecast", "", acme_admin)["history_hours"], 96);  // its subtree
  EXPECT_EQ(Ok("GET", "/v1/forecast?tenant=vision", "", Token("viewer"))["history_hours"], 96);
  EXPECT_EQ(Error("/v1/forecast?tenant=vision", other_user, 404)["message"], "tenant 'vision' not found");
  EXPECT_EQ(Error("/v1/forecast?tenant=nobody", kAdmin, 404)["code"], "not_found");
  EXPECT_EQ(Error("/v1/forecast", agent_, 403)["code"], "forbidden");

  json e = Error("/v1/forecast?tenant=vision&horizon=2d", kAdmin, 400);
  EXPECT_EQ(e["field"], "horizon");
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("not a whole number of hours"));
  e = Error("/v1/forecast?tenant=vision&horizon=2161", kAdmin, 400);
  EXPECT_EQ(e["field"], "horizon");
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("give 1 to 2160"));
  EXPECT_EQ(Error("/v1/forecast?tenant=vision&horizon=0", kAdmin, 400)["field"], "horizon");
  e = Error("/v1/forecast?tenant=vision&level=0.8", kAdmin, 400);
  EXPECT_EQ(e["field"], "level");
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("takes: tenant, horizon"));

  // other has no usage; vision's own first 50 hours are not enough either.
  e = Error("/v1/forecast", other_user, 409);
  EXPECT_EQ(e["code"], "insufficient_history");
  EXPECT_THAT(e["message"].get<std::string>(),
              HasSubstr("tenant 'other' has 0 hours of usage history (from its first usage record to the start of "
                        "the current hour); a forecast needs at least 72 (3 days)"));
  SetNow(kT0 + 50 * kHour);
  e = Error("/v1/forecast?tenant=vision", kAdmin, 409);
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("has 50 hours"));
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("it can forecast from 2026-11-04T00:00:00Z"));
}

}  // namespace
}  // namespace tessera::daemon
