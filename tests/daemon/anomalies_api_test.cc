// Anomalies and SLA observations through the control plane's API (ControlPlane::Handle, no socket,
// a test clock, the loop driven by RunCycle): the detector runs per tenant over each closed hour,
// a flag is listed by GET /v1/anomalies (tenant-scoped), is an `anomaly` event of its tenant on
// the event feed and counts in tessera_anomalies_total; each Guaranteed tenant's wait p99 per hour
// is stored and the price plan's SLA credit rules apply to GET /v1/invoices. On SQLite, and on
// PostgreSQL under ctest daemon_postgres.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "src/daemon/anomaly_service.h"
#include "src/daemon/http_server.h"
#include "tests/testing/pg_schema.h"
#include "tessera/core/gpu_model.h"
#include "tessera/daemon/control_plane.h"
#include "tessera/metering/invoice.h"
#include "tessera/metering/invoice_render.h"
#include "tessera/metering/price_plan.h"
#include "tessera/store/store.h"

namespace tessera::daemon {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kAdmin = "admin-token-for-the-anomaly-tests";
constexpr int64_t kT0 = 1793491200;  // 2026-11-01T00:00:00Z
constexpr int64_t kHour = 3600;

// A credit of 10 % when a tenant's worst hour of Guaranteed waits has a p99 above 300 s.
constexpr const char* kPlan = R"(currency: USD
idle: operator
capacity: {A100-80GB: 1}
prices:
  A100-80GB: {gpu_hour: 2.40}
sla_credits:
  - {metric: guaranteed_wait_p99_s, above: 300, credit_percent: 10}
)";

class AnomaliesApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-anomalies-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    if (testing::PgTestSchema::Available()) {  // ctest daemon_postgres
      ASSERT_TRUE(pg_.Create());
    }
    std::ofstream(File("plan.yaml")) << kPlan;
    StartControlPlane();
    const json one_gpu = {{"guaranteed", {{"gpu_milli", 1000}, {"gpus", {{"A100-80GB", 1}}}}}};
    Tenant("acme", "", one_gpu);
    Tenant("vision", "acme", one_gpu);
    Tenant("other", "", json::object());
    agent_ = Token("node-agent");
  }
  // A control plane on the test's store (again: a restart), at the clock's now.
  void StartControlPlane() {
    cp_.reset();
    ControlPlaneOptions o;
    o.db = Url();
    o.listen_port = 0;
    o.bootstrap_token = kAdmin;
    o.run_loop = false;
    o.node_timeout_s = 1'000'000;  // the test clock moves by hours; the node stays
    o.clock = clock_;
    o.price_plan = File("plan.yaml");
    o.anomaly.warmup_rows = warmup_rows_;
    auto cp = ControlPlane::Create(std::move(o));
    ASSERT_TRUE(cp.ok()) << cp.status().message();
    cp_ = std::move(*cp);
  }
  void TearDown() override {
    cp_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string File(const std::string& name) const { return (dir_ / name).string(); }
  std::string Url() const {
    return testing::PgTestSchema::Available() ? pg_.url() : "sqlite:" + File("tessera.db");
  }

  HttpResponse Request(const std::string& method, const std::string& target, const std::string& body = "",
                       const std::string& token = kAdmin) const {
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
    HttpResponse r = Request(method, target, body, token);
    EXPECT_EQ(r.status, expected) << method << " " << target << ": " << r.body;
    json j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json::object() : j;
  }
  std::string Token(const std::string& role, const std::string& tenant = "") {
    json body = {{"role", role}};
    if (!tenant.empty()) body["tenant"] = tenant;
    return Ok("POST", "/v1/tokens", body.dump(), kAdmin, 201).value("token", std::string());
  }
  void Tenant(const std::string& name, const std::string& parent, const json& quota) {
    json body = {{"name", name}, {"quota", quota}};
    if (!parent.empty()) body["parent"] = parent;
    Ok("POST", "/v1/tenants", body.dump(), kAdmin, 201);
  }
  void RegisterNode() {
    Ok("POST", "/v1/nodes/n1/register",
       R"({"cpu_milli": 64000, "memory_mib": 262144, "gpus": [{"index": 0, "uuid": "GPU-n1-0", "model": "A100-80GB"}]})",
       agent_);
  }
  // `milli` of GPU 0 of n1 as a share over the hour from `hour` (allocated; half of it used).
  void PostHour(const std::string& tenant, int64_t seq, int64_t hour, int64_t milli) {
    json s = {{"tenant", tenant}, {"workload", tenant + "-w"}, {"gpu", "0"}, {"model", "A100-80GB"},
              {"partition", "share"}, {"seq", seq}, {"start", hour}, {"end", hour + kHour},
              {"gpu_milli_s_allocated", milli * kHour}, {"gpu_milli_s_used", milli * kHour / 2},
              {"memory_mib_s", 0}, {"peak_memory_mib", 0}, {"kernel_launches", 0}, {"bytes_transferred", -1}};
    json r = Ok("POST", "/v1/nodes/n1/usage", json{{"samples", json::array({s})}}.dump(), agent_);
    ASSERT_EQ(r["stored"], 1) << r.dump();
  }
  void Cycle() { ASSERT_TRUE(cp_->RunCycle().ok()); }
  std::vector<store::TenantWorkloadEvent> Events() const {
    auto db = store::Open(Url());
    EXPECT_TRUE(db.ok()) << db.status().message();
    std::vector<store::TenantWorkloadEvent> out;
    if (!db.ok()) return out;
    EXPECT_TRUE((*db)->Transact([&](store::Transaction& tx) -> Status {
                       TESSERA_ASSIGN_OR_RETURN(out, tx.ListEventsAfter(0, 10000));
                       return Status::Ok();
                     }).ok());
    return out;
  }

  std::filesystem::path dir_;
  testing::PgTestSchema pg_;  // dropped after cp_ is gone (declared first)
  std::unique_ptr<ControlPlane> cp_;
  std::string agent_;
  // The control plane's clock, at `unix_s` seconds since the epoch.
  void SetNow(int64_t unix_s) { clock_->Set(Clock::TimePoint(std::chrono::seconds(unix_s))); }
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>(Clock::TimePoint(std::chrono::seconds(kT0)));
  int warmup_rows_ = 24;  // a day of hours before the first verdict (the default is 150)
};

// A restart warms the usage detectors from the stored usage (anomaly_service.h, "A restart"):
// 200 hours of vision's usage reached the store while the control plane could not score them
// (the samples came in after their hours closed), 70 milli-GPU steady, then 700 in the last
// closed hour. Restarted, the control plane replays the history (with the default warm-up of 150
// rows, more than a restarted detector could ever reach before) and flags the spike at start:
// GET /v1/anomalies, one `anomaly` event, the metric. A second restart skips the hour that is
// flagged already: still one event.
TEST_F(AnomaliesApiTest, ARestartFlagsASpikeOfAnHourThatClosedWhileDownExactlyOnce) {
  warmup_rows_ = metering::AnomalyOptions{}.warmup_rows;
  StartControlPlane();
  RegisterNode();
  constexpr int kHours = 200;
  SetNow(kT0 + kHours * kHour + 10);
  Cycle();  // every hour below is closed
  for (int h = 0; h < kHours; ++h) {
    PostHour("vision", h, kT0 + h * kHour, h == kHours - 1 ? 700 : 70);
    PostHour("other", h, kT0 + h * kHour, 250);
  }
  Cycle();
  EXPECT_TRUE(Ok("GET", "/v1/anomalies")["anomalies"].empty());  // the hours closed before they came
  auto anomaly_events = [&] {
    int n = 0;
    for (const store::TenantWorkloadEvent& e : Events()) n += e.event.kind == "anomaly";
    return n;
  };
  EXPECT_EQ(anomaly_events(), 0);

  StartControlPlane();
  const json all = Ok("GET", "/v1/anomalies");
  ASSERT_EQ(all["anomalies"].size(), 1u) << all.dump();
  const json& a = all["anomalies"][0];
  EXPECT_EQ(a["tenant"], "vision");
  EXPECT_EQ(a["series"], "usage_gpu_seconds");
  EXPECT_EQ(a["hour_s"], kT0 + (kHours - 1) * kHour);
  EXPECT_DOUBLE_EQ(a["value"].get<double>(), 1260);
  EXPECT_DOUBLE_EQ(a["expected"].get<double>(), 126);
  EXPECT_THAT(a["reason"].get<std::string>(), HasSubstr("GPU-seconds used 1260 in the hour from 2026-11-09T07:00:00Z"));
  EXPECT_EQ(anomaly_events(), 1);
  EXPECT_THAT(Request("GET", "/metrics").body,
              HasSubstr("tessera_anomalies_total{tenant=\"vision\",series=\"usage_gpu_seconds\"} 1"));
  Cycle();
  EXPECT_EQ(anomaly_events(), 1);

  clock_->Advance(std::chrono::hours(1));  // an hour later, nothing new
  StartControlPlane();
  EXPECT_TRUE(Ok("GET", "/v1/anomalies")["anomalies"].empty());
  EXPECT_EQ(anomaly_events(), 1);
}

TEST(AnomalyServiceTest, AnAnomalyEventNamesItsHour) {
  EXPECT_EQ(AnomalyEventHour("usage_gpu_seconds: GPU-seconds used 1260 in the hour from 2026-11-02T16:00:00Z, "
                             "expected about 126 (0 to 300)"),
            std::optional<int64_t>(kT0 + 40 * kHour));
  EXPECT_EQ(AnomalyEventHour("node n1 registered"), std::nullopt);
  EXPECT_EQ(AnomalyEventHour("refusals: x in the hour from soon"), std::nullopt);
}

// 40 steady hours of vision and other, then an hour in which vision uses ten times as much: that
// hour, and only it, is an anomaly of vision's usage_gpu_seconds, with the steady value as the
// expected one; an admin and acme's admin see it, other's user does not, and tenant=vision is 404
// to it; the event feed and the metrics have it.
TEST_F(AnomaliesApiTest, AUsageSpikeIsFlaggedOnceListedInItsSubtreeAnEventAndAMetric) {
  RegisterNode();
  constexpr int kSteady = 40;
  for (int h = 0; h <= kSteady; ++h) {
    SetNow(kT0 + (h + 1) * kHour + 10);  // the hour h is over
    PostHour("vision", h, kT0 + h * kHour, h == kSteady ? 700 : 70);
    PostHour("other", h, kT0 + h * kHour, 250);
    Cycle();
  }
  const json all = Ok("GET", "/v1/anomalies");
  ASSERT_EQ(all["anomalies"].size(), 1u) << all.dump();
  const json& a = all["anomalies"][0];
  EXPECT_EQ(a["tenant"], "vision");
  EXPECT_EQ(a["series"], "usage_gpu_seconds");
  EXPECT_EQ(a["hour_s"], kT0 + kSteady * kHour);
  EXPECT_EQ(a["hour"], "2026-11-02T16:00:00Z");
  EXPECT_DOUBLE_EQ(a["value"].get<double>(), 1260);   // 700 milli x 3600 s / 2 used, in GPU-seconds
  EXPECT_DOUBLE_EQ(a["expected"].get<double>(), 126);  // the steady hours'
  EXPECT_LE(a["expected_low"].get<double>(), 126);
  EXPECT_GE(a["expected_high"].get<double>(), 126);
  EXPECT_LT(a["expected_high"].get<double>(), 1260);
  EXPECT_GT(a["score"].get<double>(), 0.5);
  EXPECT_THAT(a["reason"].get<std::string>(), HasSubstr("GPU-seconds used 1260 in the hour from 2026-11-02T16:00:00Z, expected about 126"));

  // Tenant-scoped like GET /v1/usage.
  const std::string acme_admin = Token("tenant-admin", "acme");
  const std::string other_user = Token("tenant-user", "other");
  EXPECT_EQ(Ok("GET", "/v1/anomalies", "", acme_admin)["anomalies"].size(), 1u);
  EXPECT_EQ(Ok("GET", "/v1/anomalies?tenant=vision", "", acme_admin)["anomalies"].size(), 1u);
  EXPECT_TRUE(Ok("GET", "/v1/anomalies", "", other_user)["anomalies"].empty());
  EXPECT_EQ(Request("GET", "/v1/anomalies?tenant=vision", "", other_user).status, 404);
  EXPECT_EQ(Request("GET", "/v1/anomalies", "", agent_).status, 403);
  EXPECT_EQ(Request("GET", "/v1/anomalies?tenant=nobody").status, 404);
  EXPECT_EQ(Request("GET", "/v1/anomalies?limit=3").status, 400);  // not a parameter of the route
  // The window: hours overlapping [from, to).
  EXPECT_EQ(Ok("GET", "/v1/anomalies?from=2026-11-02T16:30:00Z")["anomalies"].size(), 1u);
  EXPECT_TRUE(Ok("GET", "/v1/anomalies?to=2026-11-02T16:00:00Z")["anomalies"].empty());
  EXPECT_EQ(Request("GET", "/v1/anomalies?from=yesterday").status, 400);

  int events = 0;
  for (const store::TenantWorkloadEvent& e : Events()) {
    if (e.event.kind != "anomaly") continue;
    ++events;
    EXPECT_EQ(e.subject, "tenant");
    EXPECT_EQ(e.name, "vision");
    EXPECT_EQ(e.tenant, "vision");
    EXPECT_THAT(e.event.detail, HasSubstr("usage_gpu_seconds: GPU-seconds used 1260"));
  }
  EXPECT_EQ(events, 1);
  const std::string metrics = Request("GET", "/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("tessera_anomalies_total{tenant=\"vision\",series=\"usage_gpu_seconds\"} 1"));
}

// vision's Guaranteed workload waits 400 s (no node can hold it until one registers): the hour's
// p99 is stored when the hour closes, and vision's invoice gets the plan's 10 % SLA credit, to
// the micro-unit what the metering library gives for that observation; other waited for nothing
// and gets none.
TEST_F(AnomaliesApiTest, AGuaranteedWaitAboveTheSlaCreditsTheInvoice) {
  Ok("POST", "/v1/workloads", R"({"tenant": "vision", "gpus": 1, "qos": "Guaranteed"})", kAdmin, 201);
  Cycle();
  SetNow(kT0 + 400);
  RegisterNode();
  Cycle();
  PostHour("vision", 0, kT0, 1000);
  PostHour("other", 0, kT0 + kHour, 250);
  SetNow(kT0 + 2 * kHour + 10);
  Cycle();
  EXPECT_THAT(Request("GET", "/metrics").body,
              HasSubstr("tessera_tenant_guaranteed_wait_p99_seconds{tenant=\"vision\"} 400"));

  const json run = Ok("GET", "/v1/invoices?period=2026-11");
  json vision;
  for (const json& i : run["invoices"])
    if (i["tenant"] == "vision") vision = i;
  ASSERT_TRUE(vision.is_object()) << run.dump();
  json credit;
  for (const json& l : vision["lines"])
    if (l["charge_category"] == "Credit") credit = l;
  ASSERT_TRUE(credit.is_object()) << vision.dump();
  EXPECT_EQ(credit["description"], "SLA credit: guaranteed_wait_p99_s 400.000000 > 300.000000");
  // One GPU-hour at 2.40, 10 % back.
  EXPECT_EQ(credit["amount_micro"], -240'000);
  EXPECT_EQ(vision["total_micro"], 2'160'000);
  for (const json& i : run["invoices"]) {
    if (i["tenant"] == "vision") continue;
    for (const json& l : i["lines"]) EXPECT_NE(l["charge_category"], "Credit") << i.dump();
  }
}

TEST(AnomalyServiceTest, NearestRankP99AndTheMonthsWorstHour) {
  std::vector<double> waits;
  for (int i = 100; i >= 1; --i) waits.push_back(i);
  EXPECT_EQ(NearestRankQuantile(waits, 0.99), 99);
  EXPECT_EQ(NearestRankQuantile({7}, 0.99), 7);
  const std::vector<metering::SlaObservation> monthly = MonthlySlaObservations({
      {"vision", "guaranteed_wait_p99_s", kT0, 2'000'000},
      {"vision", "guaranteed_wait_p99_s", kT0 + kHour, 420'000'000},
      {"vision", "guaranteed_wait_p99_s", kT0 + 2 * kHour, 3'000'000},
      {"vision", "guaranteed_wait_p99_s", kT0 - kHour, 900'000'000},  // October's last hour
  });
  ASSERT_EQ(monthly.size(), 2u);
  EXPECT_EQ(monthly[0].period, "2026-10");
  EXPECT_EQ(monthly[0].value, 900'000'000);
  EXPECT_EQ(monthly[1].period, "2026-11");
  EXPECT_EQ(monthly[1].value, 420'000'000);
}

// An observation of an hour already closed is dropped; hours are closed once, and a Guaranteed
// start gives the hour's SLA observation.
TEST(AnomalyServiceTest, ClosesEachHourOnceAndDropsLateObservations) {
  AnomalyService s(metering::AnomalyOptions{}, kT0 + 10, [](std::string_view) { return std::optional<std::string>(""); });
  s.ObserveStart("a", true, kT0 - 5, 1000);  // before the start: an hour already closed
  s.ObserveStart("a", true, kT0 + 20, 30);
  s.ObserveStart("a", false, kT0 + 30, 5000);  // not Guaranteed: not in the SLA
  EXPECT_TRUE(s.CloseHours(kT0 + kHour - 1, {"a"}).sla.empty());  // the hour is not over
  const ClosedHours closed = s.CloseHours(kT0 + kHour, {"a"});
  ASSERT_EQ(closed.sla.size(), 1u);
  EXPECT_EQ(closed.sla[0], (store::SlaObservationRecord{"a", "guaranteed_wait_p99_s", kT0, 30'000'000}));
  EXPECT_TRUE(s.CloseHours(kT0 + kHour + 5, {"a"}).sla.empty());
  s.ObserveStart("a", true, kT0 + 100, 9);  // late
  EXPECT_TRUE(s.CloseHours(kT0 + 3 * kHour, {"a"}).sla.empty());
}

// List directly (no HTTP): a caller sees the flags of its view, a tenant outside it is NOT_FOUND,
// the window takes the hours overlapping [from, to), and a bad time names its field.
TEST(AnomalyServiceTest, ListIsScopedToTheCallersSubtreeAndTheWindow) {
  const std::map<std::string, std::string> parent_of = {{"acme", ""}, {"vision", "acme"}, {"other", ""}};
  const ParentOf parents = [&](std::string_view t) -> std::optional<std::string> {
    auto it = parent_of.find(std::string(t));
    return it == parent_of.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
  metering::AnomalyOptions o;
  o.warmup_rows = 24;
  AnomalyService s(o, kT0, parents);
  for (int h = 0; h <= 40; ++h) {
    const int64_t used = h == 40 ? 1'260'000 : 126'000;  // GPU-milli-seconds; half of the allocated
    s.ObserveUsage("vision", kT0 + h * kHour, 2 * used, used);
    s.ObserveUsage("other", kT0 + h * kHour, 3'600'000, 900'000);
    s.CloseHours(kT0 + (h + 1) * kHour, {"acme", "vision", "other"});
  }
  auto caller = [&](Role role, const std::string& tenant) {
    ReadCaller c;
    c.principal.role = role;
    c.principal.tenant = tenant;
    c.check = [&parents, role, tenant](Action, std::string_view t, std::string_view what) {
      if (role == Role::kAdmin || role == Role::kViewer || t.empty() || InSubtree(t, tenant, parents)) return Status::Ok();
      return NotFoundError(std::string(what) + " not found");
    };
    return c;
  };
  StatusOr<AnomalyList> all = s.List(caller(Role::kViewer, ""), {});
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->anomalies.size(), 1u);
  EXPECT_EQ(all->anomalies[0].tenant, "vision");
  EXPECT_EQ(all->anomalies[0].series, "usage_gpu_seconds");
  EXPECT_EQ(all->anomalies[0].hour_s, kT0 + 40 * kHour);
  EXPECT_EQ(s.List(caller(Role::kTenantAdmin, "acme"), {.tenant = "vision"})->anomalies.size(), 1u);
  EXPECT_TRUE(s.List(caller(Role::kTenantUser, "other"), {})->anomalies.empty());
  EXPECT_EQ(s.List(caller(Role::kTenantUser, "other"), {.tenant = "vision"}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.List(caller(Role::kAdmin, ""), {.tenant = "nobody"}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s.List(caller(Role::kAdmin, ""), {.from = "2026-11-02T16:59:59Z"})->anomalies.size(), 1u);
  EXPECT_TRUE(s.List(caller(Role::kAdmin, ""), {.from = "2026-11-02T17:00:00Z"})->anomalies.empty());
  EXPECT_TRUE(s.List(caller(Role::kAdmin, ""), {.to = "2026-11-02T16:00:00Z"})->anomalies.empty());
  const StatusOr<AnomalyList> bad = s.List(caller(Role::kAdmin, ""), {.to = "tomorrow"});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("to:"));
  EXPECT_THAT(std::string(s.List(caller(Role::kAdmin, ""), {.from = "7200", .to = "3600"}).status().message()),
              HasSubstr("from: must be before to"));
}

}  // namespace
}  // namespace tessera::daemon
