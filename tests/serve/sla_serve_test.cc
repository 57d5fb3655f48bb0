// SLA credits end to end: a real `tessera serve` with a price plan whose sla_credits rule gives a
// Guaranteed tenant 10 % back when its worst hour's wait p99 is above 120 s. The test owns serve's
// wall clock (libfaketime, Debian's `faketime` package, preloaded with a time file the test
// rewrites; the monotonic clock stays real), so an hour closes when the test says so:
//
//   09:50:00  vision submits a Guaranteed workload; no node exists, so it waits
//   09:55:00  a node registers; the next cycle places the workload (a wait of ~300 s)
//   10:00:05  the hour 09:00-10:00 closes: serve stores vision's guaranteed_wait_p99_s (~300 s)
//
// GET /v1/invoices and `tessera ctl invoices` then show vision's credit of 10 % of its charges
// (half a GPU-hour at 2.40 an hour -> -0.12), `other` (no Guaranteed wait) has none, and a restarted serve
// bills the same (the observation is in the store) (issue 36).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/testing/serve_process.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::testing {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kAdmin = "admin-token-for-the-sla-serve-test";
constexpr int64_t kHour = 3600;
constexpr int64_t kNine = 1794992400;  // 2026-11-18T09:00:00Z

constexpr const char* kPlan = R"(currency: USD
idle: operator
capacity: {A100-80GB: 1}
prices:
  A100-80GB: {gpu_hour: 2.40}
sla_credits:
  - {metric: guaranteed_wait_p99_s, above: 120, credit_percent: 10}
)";

json Body(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

// Serve's wall clock: libfaketime reads the offset from this file at every clock read
// (FAKETIME_NO_CACHE=1), so rewriting it moves serve's clock at once.
class FakeWallClock {
 public:
  explicit FakeWallClock(std::string path) : path_(std::move(path)) {}
  void Set(int64_t unix_s) const {
    const int64_t offset = unix_s - static_cast<int64_t>(std::time(nullptr));
    const std::string tmp = path_ + ".tmp";
    WriteTextFile(tmp, (offset >= 0 ? "+" : "") + std::to_string(offset) + "\n");
    std::filesystem::rename(tmp, path_);  // never a half-written file
  }
  std::vector<std::string> Env() const {
    return {std::string("LD_PRELOAD=") + TESSERA_FAKETIME_LIBRARY, "FAKETIME_TIMESTAMP_FILE=" + path_,
            "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1"};
  }

 private:
  std::string path_;
};

TEST(SlaServe, AGuaranteedWaitAboveTheSlaCreditsTheInvoiceOfARealServe) {
  ASSERT_TRUE(std::filesystem::exists(TESSERA_FAKETIME_LIBRARY))
      << "libfaketime not found at '" << TESSERA_FAKETIME_LIBRARY
      << "': install Debian's faketime package (scripts/setup does) and reconfigure";
  TempDir dir;
  WriteTextFile(dir.File("plan.yaml"), kPlan);
  const FakeWallClock clock(dir.File("faketime.rc"));
  clock.Set(kNine + 50 * 60);
  auto start = [&] {
    std::vector<std::string> env = clock.Env();
    env.push_back(std::string("TESSERA_BOOTSTRAP_TOKEN=") + kAdmin);
    auto serve = std::make_unique<ServeProcess>(
        std::vector<std::string>{TESSERA_BINARY, "serve", "--db", dir.File("t.db"), "--listen", "127.0.0.1:0",
                                 "--price-plan", dir.File("plan.yaml"), "--node-timeout", "86400", "--rate",
                                 "100000", "--burst", "100000"},
        env);
    EXPECT_TRUE(serve->WaitListening()) << serve->output();
    return serve;
  };
  std::unique_ptr<ServeProcess> serve = start();
  auto call = [&](const std::string& method, const std::string& target, const std::string& body = "",
                  const std::string& token = kAdmin) {
    return HttpCall(serve->port(), method, target, body, {"Authorization: Bearer " + token});
  };
  const json one_gpu = {{"guaranteed", {{"gpu_milli", 1000}, {"gpus", {{"A100-80GB", 1}}}}}};
  ASSERT_EQ(call("POST", "/v1/tenants", json{{"name", "vision"}, {"quota", one_gpu}}.dump()).status, 201);
  ASSERT_EQ(call("POST", "/v1/tenants", R"({"name": "other", "quota": {}})").status, 201);
  const std::string agent = Body(call("POST", "/v1/tokens", R"({"role": "node-agent"})").body)["token"];

  // 09:50: nothing can hold the workload yet.
  HttpResult r = call("POST", "/v1/workloads", R"({"tenant": "vision", "gpus": 1, "qos": "Guaranteed"})");
  ASSERT_EQ(r.status, 201) << r.body;
  const int64_t id = Body(r.body)["id"];
  // Serve's clock is the fake one: the submit's event is stamped 09:50.
  r = call("GET", "/v1/workloads/" + std::to_string(id));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Body(r.body)["state"], "pending") << r.body;

  // 09:55: a node comes; the workload is placed after waiting about 300 s.
  clock.Set(kNine + 55 * 60);
  r = call("POST", "/v1/nodes/gpu-1/register",
           R"({"cpu_milli":8000,"memory_mib":65536,"gpus":[{"index":0,"uuid":"GPU-1","model":"A100-80GB"}]})", agent);
  ASSERT_EQ(r.status, 200) << r.body;
  std::string state;
  for (int i = 0; i < 300 && state != "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    state = Body(call("GET", "/v1/workloads/" + std::to_string(id)).body).value("state", "");
  }
  ASSERT_EQ(state, "running");
  // Half a GPU each in 08:00-09:00 (the agent reports closed intervals).
  json samples = json::array();
  int seq = 0;
  for (const char* tenant : {"vision", "other"})
    samples.push_back({{"tenant", tenant}, {"workload", std::string(tenant) + "-w"}, {"gpu", "0"},
                       {"model", "A100-80GB"}, {"partition", "share"}, {"seq", seq++}, {"start", kNine - kHour},
                       {"end", kNine}, {"gpu_milli_s_allocated", 500 * kHour}, {"gpu_milli_s_used", 250 * kHour},
                       {"memory_mib_s", 0}, {"peak_memory_mib", 0}, {"kernel_launches", 0}});
  r = call("POST", "/v1/nodes/gpu-1/usage", json{{"samples", samples}}.dump(), agent);
  ASSERT_EQ(r.status, 200) << r.body;
  // The hour is still open: no observation, no credit.
  EXPECT_THAT(call("GET", "/metrics").body, Not(HasSubstr("tessera_tenant_guaranteed_wait_p99_seconds{")));

  // 10:00:05: the hour closes at the next cycle.
  clock.Set(kNine + kHour + 5);
  std::string metrics;
  for (int i = 0; i < 300 && metrics.find("tessera_tenant_guaranteed_wait_p99_seconds{tenant=\"vision\"}") ==
                                 std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    metrics = call("GET", "/metrics").body;
  }
  // The wait: 300 s of fake time plus the real time from the clock's step to the cycle that placed it,
  // within a second either way (the test sets the clock's offset in whole seconds).
  const std::string gauge = "tessera_tenant_guaranteed_wait_p99_seconds{tenant=\"vision\"} ";
  const size_t at = metrics.find(gauge);
  ASSERT_NE(at, std::string::npos) << metrics;
  const double wait_p99 = std::stod(metrics.substr(at + gauge.size()));
  EXPECT_GE(wait_p99, 299);
  EXPECT_LT(wait_p99, 330);

  auto check_invoices = [&] {
    const HttpResult got = call("GET", "/v1/invoices?period=2026-11");
    ASSERT_EQ(got.status, 200) << got.body;
    const json run = Body(got.body);
    json vision, other;
    for (const json& i : run["invoices"]) {
      if (i["tenant"] == "vision") vision = i;
      if (i["tenant"] == "other") other = i;
    }
    ASSERT_TRUE(vision.is_object() && other.is_object()) << got.body;
    json credit;
    for (const json& l : vision["lines"])
      if (l["charge_category"] == "Credit") credit = l;
    ASSERT_TRUE(credit.is_object()) << vision.dump();
    // "SLA credit: guaranteed_wait_p99_s 300.412000 > 120.000000": the hour's p99, as the gauge said.
    const std::string description = credit["description"];
    const std::string prefix = "SLA credit: guaranteed_wait_p99_s ";
    ASSERT_EQ(description.rfind(prefix, 0), 0u) << description;
    EXPECT_NEAR(std::stod(description.substr(prefix.size())), wait_p99, 1e-3) << description;
    EXPECT_THAT(description, HasSubstr(" > 120.000000"));
    EXPECT_EQ(credit["amount_micro"], -120'000);
    EXPECT_EQ(vision["total_micro"], 1'080'000);
    for (const json& l : other["lines"]) EXPECT_NE(l["charge_category"], "Credit") << other.dump();
    EXPECT_EQ(other["total_micro"], 1'200'000);
  };
  check_invoices();
  const std::string ctl = "'" + std::string(TESSERA_BINARY) + "' ctl --server http://127.0.0.1:" +
                          std::to_string(serve->port()) + " --token " + kAdmin + " invoices --period 2026-11";
  CommandResult c = RunCommand(ctl, dir);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_THAT(c.out, HasSubstr("SLA credit: guaranteed_wait_p99_s"));

  // The observation is in the store: a restarted serve bills the same.
  EXPECT_EQ(serve->Kill(SIGTERM), 0);
  serve = start();
  check_invoices();
  EXPECT_EQ(serve->Kill(SIGTERM), 0);
}

}  // namespace
}  // namespace tessera::testing
