// Anomalies end to end: a real `tessera serve` whose node agent (a node-agent token over HTTP, as
// `tessera agent` sends them) reported 200 hours of a tenant's usage after the hours had closed,
// the last one a spike. Restarted on the same store, serve warms its detectors from the stored
// usage and flags the spike at start (src/daemon/anomaly_service.h, "A restart"): GET
// /v1/anomalies and `tessera ctl anomalies` show it, another tenant's token does not see it, and a
// second restart does not flag it again (issue 36).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>
#include <ctime>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/testing/serve_process.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::testing {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kAdmin = "admin-token-for-the-anomaly-serve-tests";
constexpr int kHours = 200;

json Body(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

TEST(AnomaliesServe, ARestartedServeFlagsTheSpikeOfAnHourThatClosedBeforeItsUsageCame) {
  TempDir dir;
  auto start = [&] {
    auto serve = std::make_unique<ServeProcess>(
        std::vector<std::string>{TESSERA_BINARY, "serve", "--db", dir.File("t.db"), "--listen", "127.0.0.1:0",
                                 "--rate", "100000", "--burst", "100000"},
        std::vector<std::string>{std::string("TESSERA_BOOTSTRAP_TOKEN=") + kAdmin});
    EXPECT_TRUE(serve->WaitListening()) << serve->output();
    return serve;
  };
  std::unique_ptr<ServeProcess> serve = start();
  auto call = [&](const std::string& method, const std::string& target, const std::string& body = "",
                  const std::string& token = kAdmin) {
    return HttpCall(serve->port(), method, target, body, {"Authorization: Bearer " + token});
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
  // The 200 hours before the current one: 0.1 GPU allocated, half of it used (180 GPU-seconds an
  // hour), then the whole GPU in the last closed hour (1800 GPU-seconds).
  const int64_t now_hour = static_cast<int64_t>(std::time(nullptr)) / 3600 * 3600;
  const int64_t spike = now_hour - 3600;
  json samples = json::array();
  for (int h = 0; h < kHours; ++h) {
    const int64_t begin = now_hour - (kHours - h) * 3600;
    const int64_t milli = begin == spike ? 1000 : 100;
    samples.push_back({{"tenant", "ml"}, {"workload", "1"}, {"gpu", "0"}, {"model", "A100-80GB"},
                       {"partition", "share"}, {"seq", h}, {"start", begin}, {"end", begin + 3600},
                       {"gpu_milli_s_allocated", milli * 3600}, {"gpu_milli_s_used", milli * 1800},
                       {"memory_mib_s", 0}, {"peak_memory_mib", 0}, {"kernel_launches", 0}});
  }
  const HttpResult posted = call("POST", "/v1/nodes/gpu-1/usage", json{{"samples", samples}}.dump(), agent);
  ASSERT_EQ(posted.status, 200) << posted.body;
  ASSERT_EQ(Body(posted.body)["stored"], kHours) << posted.body;
  // This run started after those hours had closed: it scores none of them.
  HttpResult got = call("GET", "/v1/anomalies");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_TRUE(Body(got.body)["anomalies"].empty()) << got.body;

  EXPECT_EQ(serve->Kill(SIGTERM), 0);
  serve = start();
  got = call("GET", "/v1/anomalies", "", ml);
  ASSERT_EQ(got.status, 200) << got.body;
  const json list = Body(got.body)["anomalies"];
  ASSERT_EQ(list.size(), 1u) << got.body;
  const json& a = list[0];
  EXPECT_EQ(a["tenant"], "ml");
  EXPECT_EQ(a["series"], "usage_gpu_seconds");
  EXPECT_EQ(a["hour_s"], spike);
  EXPECT_DOUBLE_EQ(a["value"].get<double>(), 1800);
  EXPECT_DOUBLE_EQ(a["expected"].get<double>(), 180);
  EXPECT_LT(a["expected_high"].get<double>(), 1800);
  EXPECT_THAT(a["reason"].get<std::string>(), HasSubstr("GPU-seconds used 1800 in the hour from " +
                                                        a["hour"].get<std::string>() + ", expected about 180"));
  // Another tenant's user sees nothing of ml's, and ml is not found from there.
  got = call("GET", "/v1/anomalies", "", other);
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_TRUE(Body(got.body)["anomalies"].empty()) << got.body;
  EXPECT_EQ(call("GET", "/v1/anomalies?tenant=ml", "", other).status, 404);

  const std::string ctl = "'" + std::string(TESSERA_BINARY) + "' ctl --server http://127.0.0.1:" +
                          std::to_string(serve->port()) + " --token ";
  CommandResult r = RunCommand(ctl + kAdmin + " anomalies", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("usage_gpu_seconds"));
  EXPECT_THAT(r.out, HasSubstr(a["hour"].get<std::string>()));
  EXPECT_THAT(r.out, HasSubstr("1800"));
  r = RunCommand(ctl + other + " anomalies", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("No anomalies."));

  // Restarted again: the hour is flagged already (its `anomaly` event is stored), not twice.
  EXPECT_EQ(serve->Kill(SIGTERM), 0);
  serve = start();
  got = call("GET", "/v1/anomalies");
  ASSERT_EQ(got.status, 200) << got.body;
  EXPECT_TRUE(Body(got.body)["anomalies"].empty()) << got.body;
  EXPECT_EQ(serve->Kill(SIGTERM), 0);
}

}  // namespace
}  // namespace tessera::testing
