// The demand forecast end to end: a real `tessera serve` whose node agent (a node-agent token over
// HTTP, as `tessera agent` sends them) reported five days of usage; GET /v1/forecast forecasts the
// tenant's hourly demand and `tessera plan capacity --server` plans from the live usage (issue 36).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ctime>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/testing/serve_process.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::testing {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kAdmin = "admin-token-for-the-forecast-tests";
const std::string kAuth = std::string("Authorization: Bearer ") + kAdmin;
constexpr int kDays = 5;

json Body(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

TEST(ForecastServe, PlanCapacityServerAndTheForecastEndpointReadTheLiveUsage) {
  TempDir dir;
  ServeProcess serve({TESSERA_BINARY, "serve", "--db", dir.File("t.db"), "--listen", "127.0.0.1:0", "--rate",
                      "100000", "--burst", "100000"},
                     {std::string("TESSERA_BOOTSTRAP_TOKEN=") + kAdmin});
  ASSERT_TRUE(serve.WaitListening()) << serve.output();
  const std::string url = "http://127.0.0.1:" + std::to_string(serve.port());
  auto call = [&](const std::string& method, const std::string& target, const std::string& body = "",
                  const std::string& token = kAdmin) {
    return HttpCall(serve.port(), method, target, body, {"Authorization: Bearer " + token});
  };
  ASSERT_EQ(call("POST", "/v1/tenants", R"({"name": "ml", "quota": {}})").status, 201);
  ASSERT_EQ(call("POST", "/v1/tenants", R"({"name": "other", "quota": {}})").status, 201);
  const std::string agent = Body(call("POST", "/v1/tokens", R"({"role": "node-agent"})").body)["token"];
  const std::string ml = Body(call("POST", "/v1/tokens", R"({"role": "tenant-user", "tenant": "ml"})").body)["token"];
  const std::string other =
      Body(call("POST", "/v1/tokens", R"({"role": "tenant-user", "tenant": "other"})").body)["token"];
  ASSERT_EQ(call("POST", "/v1/nodes/gpu-1/register",
                 R"({"cpu_milli":8000,"memory_mib":65536,"gpus":[{"model":"A100-80GB"}]})", agent)
                .status,
            200);
  // Five days up to the current hour: 0.9 GPU 08:00-18:00 UTC, 0.2 otherwise (+-0.04).
  const int64_t now_hour = static_cast<int64_t>(std::time(nullptr)) / 3600 * 3600;
  json samples = json::array();
  for (int h = 0; h < kDays * 24; ++h) {
    const int64_t start = now_hour - (kDays * 24 - h) * 3600;
    const int hour_of_day = static_cast<int>(start / 3600 % 24);
    const int64_t milli = (hour_of_day >= 8 && hour_of_day < 18 ? 900 : 200) + (h * 37 % 11 - 5) * 8;
    samples.push_back({{"tenant", "ml"}, {"workload", "1"}, {"gpu", "0"}, {"model", "A100-80GB"},
                       {"partition", "share"}, {"seq", h}, {"start", start}, {"end", start + 3600},
                       {"gpu_milli_s_allocated", milli * 3600}, {"gpu_milli_s_used", milli * 1800},
                       {"memory_mib_s", 0}, {"peak_memory_mib", 0}, {"kernel_launches", 0}});
  }
  const HttpResult posted = call("POST", "/v1/nodes/gpu-1/usage", json{{"samples", samples}}.dump(), agent);
  ASSERT_EQ(posted.status, 200) << posted.body;
  ASSERT_EQ(Body(posted.body)["stored"], kDays * 24) << posted.body;

  // The endpoint: ml's own token, a day ahead, in GPU-hours per hour with the 90 % interval.
  HttpResult f = call("GET", "/v1/forecast?tenant=ml&horizon=24", "", ml);
  ASSERT_EQ(f.status, 200) << f.body;
  const json forecast = Body(f.body);
  EXPECT_EQ(forecast["unit"], "gpu_hours_per_hour");
  EXPECT_GE(forecast["history_hours"].get<int>(), kDays * 24);  // an hour more if the clock turned
  ASSERT_EQ(forecast["hours"].size(), 24u);
  for (const json& x : forecast["hours"]) {
    EXPECT_GT(x["value"].get<double>(), 0.05) << x.dump();
    EXPECT_LT(x["value"].get<double>(), 1.1) << x.dump();
    EXPECT_LE(x["lower"].get<double>(), x["value"].get<double>());
    EXPECT_GE(x["upper"].get<double>(), x["value"].get<double>());
  }
  EXPECT_EQ(call("GET", "/v1/forecast?tenant=ml", "", other).status, 404);
  EXPECT_EQ(call("GET", "/v1/forecast?tenant=ml&horizon=soon").status, 400);
  f = call("GET", "/v1/forecast", "", other);
  EXPECT_EQ(f.status, 409);
  EXPECT_THAT(f.body, HasSubstr("needs at least 72"));

  // `tessera plan capacity --server`: the live usage of the last 56 days, the whole cluster.
  const std::string plan = "'" + std::string(TESSERA_BINARY) + "' plan capacity --server " + url;
  CommandResult r = RunCommand(plan + " --token " + kAdmin + " --horizon 2d -o json", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = Body(r.out);
  ASSERT_EQ(j["models"].size(), 1u) << r.out;
  const json& m = j["models"][0];
  EXPECT_EQ(m["model"], "A100-80GB");
  EXPECT_GE(m["history_hours"].get<int>(), kDays * 24);
  EXPECT_LE(m["history_hours"].get<int>(), kDays * 24 + 1);
  EXPECT_NEAR(m["peak_demand_gpus"].get<double>(), 0.94, 0.001);  // 900 + 5 x 8 milli at most
  EXPECT_EQ(m["capacity_gpus"], 1);
  EXPECT_EQ(m["capacity_from_history"], true);
  EXPECT_EQ(m["daily_peak_gpus"].size(), 2u);
  EXPECT_GT(m["backtest"]["windows"].get<int>(), 0);
  // The table, with the token from the environment.
  r = RunCommand("TESSERA_TOKEN=" + std::string(kAdmin) + " " + plan + " --horizon 2d --capacity A100-80GB=4", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("A100-80GB: 12"));  // "12x hours of history from ..."
  EXPECT_THAT(r.out, HasSubstr("capacity 4 GPUs (given)"));
  // A tenant token plans its own subtree: other has no usage.
  r = RunCommand(plan + " --token " + other, dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("has no usage records to plan from"));
  r = RunCommand(plan + " --token wrong-token", dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("HTTP 401"));
  r = RunCommand(plan + " --token " + kAdmin + " --history ledger.jsonl", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("give one of --history LEDGER or --server URL"));
  EXPECT_EQ(serve.Kill(SIGTERM), 0);
}

}  // namespace
}  // namespace tessera::testing
