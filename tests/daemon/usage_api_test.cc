// Usage through the control plane's API (ControlPlane::Handle, no socket): node agents POST
// samples to /v1/nodes/{name}/usage, tenants read GET /v1/usage; on a real SQLite store in a
// temporary folder, with a test clock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "src/daemon/http_server.h"
#include "tessera/daemon/control_plane.h"
#include "tessera/store/store.h"
#include "tests/testing/pg_schema.h"

namespace tessera::daemon {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kAdmin = "admin-token-for-the-usage-tests";
constexpr int64_t kT0 = 1793491200;  // 2026-11-01T00:00:00Z

class UsageApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-usage-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    if (testing::PgTestSchema::Available()) {  // ctest daemon_postgres
      ASSERT_TRUE(pg_.Create());
    }
    Open();
    Tenant("acme");
    Tenant("vision", "acme");
    Tenant("other");
    agent_ = Token("node-agent");
    Ok("POST", "/v1/nodes/n1/register",
       R"({"cpu_milli": 64000, "memory_mib": 262144, "gpus": [{"index": 0, "uuid": "GPU-n1-0", "model": "A100-80GB"}]})", agent_);
  }
  void TearDown() override {
    cp_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Open() {
    cp_.reset();
    ControlPlaneOptions o;
    o.db = testing::PgTestSchema::Available() ? pg_.url() : "sqlite:" + (dir_ / "tessera.db").string();
    o.listen_port = 0;
    o.bootstrap_token = kAdmin;
    o.run_loop = false;
    o.clock = std::make_shared<FakeClock>(Clock::TimePoint(std::chrono::seconds(kT0)));
    auto cp = ControlPlane::Create(std::move(o));
    ASSERT_TRUE(cp.ok()) << cp.status().ToString();
    cp_ = std::move(*cp);
  }

  HttpResponse Call(const std::string& method, const std::string& target, const std::string& body = "",
                    const std::string& token = kAdmin) {
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
          const std::string& token = kAdmin, int expected = 200) {
    HttpResponse r = Call(method, target, body, token);
    EXPECT_EQ(r.status, expected) << method << " " << target << ": " << r.body;
    json j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json::object() : j;
  }
  std::string Token(const std::string& role, const std::string& tenant = "") {
    json body = {{"role", role}};
    if (!tenant.empty()) body["tenant"] = tenant;
    return Ok("POST", "/v1/tokens", body.dump(), kAdmin, 201).value("token", std::string());
  }
  void Tenant(const std::string& name, const std::string& parent = "") {
    json body = {{"name", name}, {"quota", json::object()}};
    if (!parent.empty()) body["parent"] = parent;
    Ok("POST", "/v1/tenants", body.dump(), kAdmin, 201);
  }

  // A sample of half a GPU, as src/node/agent_usage.cc writes it.
  static json Sample(const std::string& tenant, const std::string& workload, int64_t seq, int64_t start,
                     int64_t end) {
    return {{"tenant", tenant}, {"workload", workload}, {"gpu", "0"}, {"model", "A100-80GB"},
            {"partition", "share"}, {"seq", seq}, {"start", start}, {"end", end},
            {"gpu_milli_s_allocated", 500 * (end - start)}, {"gpu_milli_s_used", 200 * (end - start)},
            {"memory_mib_s", 1024 * (end - start)}, {"peak_memory_mib", 1024}, {"kernel_launches", 10},
            {"bytes_transferred", -1}};
  }
  json Post(const json& samples, const std::string& node = "n1", int expected = 200) {
    return Ok("POST", "/v1/nodes/" + node + "/usage", json{{"samples", samples}}.dump(), agent_, expected);
  }
  std::string Metrics() { return Call("GET", "/metrics").body; }

  std::filesystem::path dir_;
  testing::PgTestSchema pg_;  // dropped after cp_ is gone (declared first)
  std::unique_ptr<ControlPlane> cp_;
  std::string agent_;
};

TEST_F(UsageApiTest, OnlyNodeAgentTokensMayPostUsage) {
  const std::string body = json{{"samples", json::array({Sample("acme", "1", 0, kT0, kT0 + 60)})}}.dump();
  for (const std::string& token : {std::string(kAdmin), Token("tenant-admin", "acme"), Token("tenant-user", "acme")}) {
    HttpResponse r = Call("POST", "/v1/nodes/n1/usage", body, token);
    EXPECT_EQ(r.status, 403) << r.body;
    EXPECT_THAT(r.body, HasSubstr("node-agent"));
  }
  EXPECT_EQ(Ok("GET", "/v1/usage")["hours"].size(), 0u);  // nothing was stored
  EXPECT_EQ(Call("GET", "/v1/usage", "", agent_).status, 403);  // and agents do not read it
}

TEST_F(UsageApiTest, AnUnknownNodeIs404AndStoresNothing) {
  json r = Post(json::array({Sample("acme", "1", 0, kT0, kT0 + 60)}), "n9", 404);
  EXPECT_THAT(r["error"]["message"].get<std::string>(), HasSubstr("node 'n9'"));
  EXPECT_EQ(Ok("GET", "/v1/usage")["hours"].size(), 0u);
}

TEST_F(UsageApiTest, MoreThan2000SamplesIs413WithAJsonError) {
  json many = json::array();
  for (int i = 0; i < 2001; ++i) many.push_back(Sample("acme", "1", i, kT0 + 10 * i, kT0 + 10 * i + 10));
  json r = Post(many, "n1", 413);
  EXPECT_EQ(r["error"]["code"], "too_many_samples");
  EXPECT_THAT(r["error"]["message"].get<std::string>(), HasSubstr("at most 2000"));
  EXPECT_EQ(Ok("GET", "/v1/usage")["hours"].size(), 0u);
  many.erase(many.end() - 1);
  EXPECT_EQ(Post(many)["stored"], 2000);  // 2000 is fine
}

TEST_F(UsageApiTest, EachBadSampleIsRejectedNamingItsFieldAndTheRestIsStored) {
  json samples = json::array();
  samples.push_back(Sample("acme", "1", 0, kT0, kT0 + 60));  // 0: good
  samples.push_back(Sample("nobody", "1", 0, kT0, kT0 + 60));  // 1: unknown tenant
  json s = Sample("acme", "2", 0, kT0, kT0 + 60);
  s["end"] = kT0;
  samples.push_back(s);  // 2: end <= start
  s = Sample("acme", "3", 0, kT0, kT0 + 60);
  s["kernel_launches"] = -1;
  samples.push_back(s);  // 3: negative
  s = Sample("acme", "4", 0, kT0, kT0 + 60);
  s["gpu_milli_s_used"] = 1000 * 60 + 1;
  samples.push_back(s);  // 4: busier than one GPU (above the allocation alone is a burst: allowed)
  s = Sample("acme", "5", 0, kT0, kT0 + 60);
  s.erase("model");
  samples.push_back(s);  // 5: missing
  s = Sample("acme", "6", 0, kT0, kT0 + 60);
  s["seq"] = "zero";
  samples.push_back(s);  // 6: wrong type
  samples.push_back(Sample("vision", "7", 0, kT0, kT0 + 60));  // 7: good
  samples.push_back(Sample("acme", "1", 1, kT0 + 30, kT0 + 90));  // 8: overlaps sample 0
  s = Sample("vision", "9", 0, kT0, kT0 + 60);
  s["gpu_milli_s_used"] = 1000 * 60;  // 9: good, a 500-milli share that kept the whole GPU busy
  samples.push_back(s);
  json r = Post(samples);
  EXPECT_EQ(r["stored"], 3);
  std::map<int, std::string> field_of;
  for (const json& x : r["rejected"]) {
    field_of[x["index"].get<int>()] = x["field"].get<std::string>();
    EXPECT_THAT(x["error"].get<std::string>(), HasSubstr(x["field"].get<std::string>()));  // the agent logs error
  }
  EXPECT_EQ(field_of, (std::map<int, std::string>{{1, "samples[1].tenant"},
                                                  {2, "samples[2].end"},
                                                  {3, "samples[3].kernel_launches"},
                                                  {4, "samples[4].gpu_milli_s_used"},
                                                  {5, "samples[5].model"},
                                                  {6, "samples[6].seq"},
                                                  {8, "samples[8].start"}}));
  json usage = Ok("GET", "/v1/usage");
  ASSERT_EQ(usage["hours"].size(), 3u);  // acme 1, vision 7 and 9
  EXPECT_EQ(usage["tenants"][0]["tenant"], "acme");
  EXPECT_EQ(usage["tenants"][0]["gpu_milli_s_allocated"], 30000);
  EXPECT_THAT(Metrics(), HasSubstr("tessera_usage_samples_total{result=\"rejected\"} 7"));
  // A body that is not a batch is refused whole.
  EXPECT_EQ(Call("POST", "/v1/nodes/n1/usage", R"({"samples": 3})", agent_).status, 400);
  EXPECT_EQ(Call("POST", "/v1/nodes/n1/usage", "not json", agent_).status, 400);
}

TEST_F(UsageApiTest, AResentSampleIsNotCountedTwice) {
  const json batch = json::array({Sample("acme", "1", 0, kT0, kT0 + 60), Sample("acme", "1", 1, kT0 + 60, kT0 + 120)});
  json first = Post(batch);
  EXPECT_EQ(first["stored"], 2);
  EXPECT_EQ(first["duplicates"], 0);
  json again = Post(batch);  // the agent did not see the answer and sends the same samples again
  EXPECT_EQ(again["stored"], 0);
  EXPECT_EQ(again["duplicates"], 2);
  EXPECT_TRUE(again["rejected"].empty());
  json usage = Ok("GET", "/v1/usage?tenant=acme");
  ASSERT_EQ(usage["tenants"].size(), 1u);
  EXPECT_EQ(usage["tenants"][0]["gpu_milli_s_allocated"], 60000);
  EXPECT_EQ(usage["hours"][0]["seconds"], 120);
  const std::string text = Metrics();
  EXPECT_THAT(text, HasSubstr("tessera_tenant_gpu_milli_seconds_allocated_total{tenant=\"acme\"} 60000"));
  EXPECT_THAT(text, HasSubstr("tessera_tenant_gpu_milli_seconds_used_total{tenant=\"acme\"} 24000"));
  EXPECT_THAT(text, HasSubstr("tessera_usage_samples_total{result=\"stored\"} 2"));
  EXPECT_THAT(text, HasSubstr("tessera_usage_samples_total{result=\"duplicate\"} 2"));
  // The same seq with other values is a conflict, not a second count.
  json changed = batch[0];
  changed["kernel_launches"] = 11;
  json conflict = Post(json::array({changed}));
  ASSERT_EQ(conflict["rejected"].size(), 1u);
  EXPECT_EQ(conflict["rejected"][0]["field"], "samples[0].seq");
  EXPECT_EQ(Ok("GET", "/v1/usage?tenant=acme")["tenants"][0]["gpu_milli_s_allocated"], 60000);
}

// Per-GPU use on /metrics: each GPU's busy milli-GPU seconds and memory MiB seconds, summed over
// its workloads' stored samples (rate() gives utilisation and average memory); a resend does not
// count twice, and a restart rebuilds the same totals from the store.
TEST_F(UsageApiTest, EachGpusUseAndMemoryAreCountersOnMetricsThatSurviveARestart) {
  json on_gpu1 = Sample("vision", "2", 0, kT0, kT0 + 60);
  on_gpu1["gpu"] = "1";
  const json batch = json::array({Sample("acme", "1", 0, kT0, kT0 + 60), on_gpu1, Sample("vision", "3", 0, kT0, kT0 + 30)});
  EXPECT_EQ(Post(batch)["stored"], 3);
  EXPECT_EQ(Post(batch)["duplicates"], 3);
  const auto check = [&](const std::string& when) {
    const std::string text = Metrics();
    // GPU 0: workloads 1 (60 s) and 3 (30 s) at 200 milli and 1024 MiB; GPU 1: workload 2 (60 s).
    EXPECT_THAT(text, HasSubstr("tessera_gpu_used_milli_seconds_total{node=\"n1\",gpu=\"0\",model=\"A100-80GB\"} 18000"))
        << when;
    EXPECT_THAT(text, HasSubstr("tessera_gpu_used_milli_seconds_total{node=\"n1\",gpu=\"1\",model=\"A100-80GB\"} 12000"))
        << when;
    EXPECT_THAT(text, HasSubstr("tessera_gpu_memory_mib_seconds_total{node=\"n1\",gpu=\"0\",model=\"A100-80GB\"} 92160"))
        << when;
    EXPECT_THAT(text, HasSubstr("tessera_gpu_memory_mib_seconds_total{node=\"n1\",gpu=\"1\",model=\"A100-80GB\"} 61440"))
        << when;
    EXPECT_THAT(text, HasSubstr("# TYPE tessera_gpu_used_milli_seconds_total counter")) << when;
  };
  check("after the posts");
  Open();  // a restart on the same database
  check("after a restart");
}

// NVML's view on /metrics (issue 32): the milli-GPU seconds NVML saw busy and the seconds that
// carried it, per GPU, and the samples NVML saw far busier than counted, per tenant (issue 29);
// stored with the samples, so a restart rebuilds them.
TEST_F(UsageApiTest, NvmlsViewAndUnderReportedSamplesAreCountersOnMetricsThatSurviveARestart) {
  json busy = Sample("acme", "1", 0, kT0, kT0 + 60);  // the shim counted 200 milli
  busy["nvml_used_milli"] = 700;                         // NVML saw 700: under-reported
  busy["nvml_memory_mib"] = 2000;
  json fair = Sample("vision", "3", 0, kT0, kT0 + 30);
  fair["nvml_used_milli"] = 300;
  const json batch = json::array({busy, fair, Sample("vision", "2", 0, kT0, kT0 + 60)});
  EXPECT_EQ(Post(batch)["stored"], 3);
  EXPECT_EQ(Post(batch)["duplicates"], 3);
  const auto check = [&](const std::string& when) {
    const std::string text = Metrics();
    EXPECT_THAT(text,
                HasSubstr("tessera_gpu_nvml_used_milli_seconds_total{node=\"n1\",gpu=\"0\",model=\"A100-80GB\"} 51000"))
        << when;  // 700 x 60 + 300 x 30; workload 2's sample had no NVML figure
    EXPECT_THAT(text, HasSubstr("tessera_gpu_nvml_observed_seconds_total{node=\"n1\",gpu=\"0\",model=\"A100-80GB\"} 90"))
        << when;
    EXPECT_THAT(text, HasSubstr("tessera_usage_under_reported_samples_total{tenant=\"acme\"} 1")) << when;
    EXPECT_THAT(text, Not(HasSubstr("tessera_usage_under_reported_samples_total{tenant=\"vision\"}"))) << when;
  };
  check("after the posts");
  Open();  // a restart on the same database
  check("after a restart");
}

TEST_F(UsageApiTest, ATenantSeesOnlyItsSubtreeAndAnotherTenantIs404) {
  Post(json::array({Sample("acme", "1", 0, kT0, kT0 + 60), Sample("vision", "2", 0, kT0, kT0 + 60),
                    Sample("other", "3", 0, kT0, kT0 + 60)}));
  const std::string vision = Token("tenant-user", "vision");
  const std::string acme = Token("tenant-admin", "acme");
  auto tenants = [](const json& usage) {
    std::vector<std::string> out;
    for (const json& t : usage["tenants"]) out.push_back(t["tenant"]);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(tenants(Ok("GET", "/v1/usage", "", vision)), V{"vision"});
  EXPECT_EQ(tenants(Ok("GET", "/v1/usage", "", acme)), (V{"acme", "vision"}));
  EXPECT_EQ(tenants(Ok("GET", "/v1/usage?tenant=vision", "", acme)), V{"vision"});
  EXPECT_EQ(tenants(Ok("GET", "/v1/usage")), (V{"acme", "other", "vision"}));
  for (const char* target : {"/v1/usage?tenant=other", "/v1/usage?tenant=acme", "/v1/usage?tenant=nobody"}) {
    HttpResponse r = Call("GET", target, "", vision);
    EXPECT_EQ(r.status, 404) << target << ": " << r.body;
    EXPECT_THAT(r.body, ::testing::Not(HasSubstr("gpu_milli")));
  }
  EXPECT_EQ(Call("GET", "/v1/usage?tenant=nobody").status, 404);  // unknown to admins too
}

TEST_F(UsageApiTest, TheLedgerIsRebuiltFromTheStoreAfterARestart) {
  Post(json::array({Sample("acme", "1", 0, kT0 + 3000, kT0 + 4200),  // crosses the hour: split 600 / 600
                    Sample("vision", "2", 0, kT0, kT0 + 60)}));
  const json before = Ok("GET", "/v1/usage");
  ASSERT_EQ(before["hours"].size(), 3u);
  Open();  // a restart on the same database
  EXPECT_EQ(Ok("GET", "/v1/usage"), before);
  EXPECT_THAT(Metrics(), HasSubstr("tessera_tenant_gpu_milli_seconds_allocated_total{tenant=\"acme\"} 600000"));
  // The restarted ledger knows what was counted: a resend is a duplicate, an overlap is refused.
  json again = Post(json::array({Sample("acme", "1", 0, kT0 + 3000, kT0 + 4200),
                                 Sample("acme", "1", 1, kT0 + 4100, kT0 + 4300)}));
  EXPECT_EQ(again["duplicates"], 1);
  ASSERT_EQ(again["rejected"].size(), 1u);
  EXPECT_EQ(again["rejected"][0]["index"], 1);
  EXPECT_EQ(Ok("GET", "/v1/usage"), before);
}

// A write that fails after the ledger took a sample of the batch: nothing is stored, and the
// ledger (rebuilt from the table) does not count it either; the agent's resend then stores it once.
TEST_F(UsageApiTest, AFailedTransactionLeavesTheLedgerAsTheTable) {
  const bool pg = testing::PgTestSchema::Available();
  auto db = store::Open(pg ? pg_.url() : "sqlite:" + (dir_ / "tessera.db").string());
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_TRUE((*db)->ExecForTesting(
                      pg ? "CREATE FUNCTION boom() RETURNS trigger AS $$ BEGIN IF NEW.workload = 'boom' THEN "
                           "RAISE EXCEPTION 'injected'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql; "
                           "CREATE TRIGGER boom BEFORE INSERT ON usage_samples FOR EACH ROW EXECUTE FUNCTION boom()"
                         : "CREATE TRIGGER boom BEFORE INSERT ON usage_samples WHEN NEW.workload = 'boom' "
                           "BEGIN SELECT RAISE(ABORT, 'injected'); END")
                  .ok());
  const json good = Sample("acme", "1", 0, kT0, kT0 + 60);
  HttpResponse r = Call("POST", "/v1/nodes/n1/usage",
                        json{{"samples", json::array({good, Sample("acme", "boom", 0, kT0, kT0 + 60)})}}.dump(), agent_);
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_THAT(r.body, HasSubstr("injected"));
  EXPECT_EQ(Ok("GET", "/v1/usage")["hours"].size(), 0u);
  ASSERT_TRUE((*db)->ExecForTesting(pg ? "DROP TRIGGER boom ON usage_samples" : "DROP TRIGGER boom").ok());
  json again = Post(json::array({good}));
  EXPECT_EQ(again["stored"], 1);  // new to the table and to the ledger, not a duplicate
  EXPECT_EQ(Ok("GET", "/v1/usage")["tenants"][0]["gpu_milli_s_allocated"], 30000);
  EXPECT_THAT(Metrics(), HasSubstr("tessera_tenant_gpu_milli_seconds_allocated_total{tenant=\"acme\"} 30000"));
}

TEST_F(UsageApiTest, FromAndToSelectWholeHours) {
  json posted = Post(json::array({Sample("acme", "1", 0, kT0 + 10, kT0 + 70),
                                  Sample("acme", "1", 1, kT0 + 3610, kT0 + 3670),
                                  Sample("acme", "1", 2, kT0 + 7210, kT0 + 7270)}));
  ASSERT_EQ(posted["stored"], 3) << posted;
  auto hours = [&](const std::string& query) {
    std::vector<int64_t> out;
    const json usage = Ok("GET", "/v1/usage" + query);  // held: a range-for over a temporary's member dangles
    for (const json& h : usage["hours"]) out.push_back(h["hour_s"].get<int64_t>() - kT0);
    return out;
  };
  using V = std::vector<int64_t>;
  EXPECT_EQ(hours(""), (V{0, 3600, 7200}));
  EXPECT_EQ(hours("?from=2026-11-01T01:00:00Z"), (V{3600, 7200}));
  EXPECT_EQ(hours("?from=2026-11-01T01:00:00Z&to=" + std::to_string(kT0 + 7200)), V{3600});
  EXPECT_EQ(hours("?from=2026-11-01T02:30:00%2B01:00&to=2026-11-01T02:00:00Z"), V{3600});  // 01:30Z..02:00Z
  EXPECT_EQ(hours("?to=" + std::to_string(kT0 + 1)), V{0});  // the hour that holds `to - 1` counts whole
  json first = Ok("GET", "/v1/usage?from=" + std::to_string(kT0) + "&to=" + std::to_string(kT0 + 3600));
  EXPECT_EQ(first["tenants"][0]["gpu_milli_s_allocated"], 30000);
  EXPECT_EQ(first["from"], kT0);
  HttpResponse bad = Call("GET", "/v1/usage?from=yesterday");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("from"));
  EXPECT_EQ(Call("GET", "/v1/usage?from=" + std::to_string(kT0 + 10) + "&to=" + std::to_string(kT0)).status, 400);
}

}  // namespace
}  // namespace tessera::daemon
