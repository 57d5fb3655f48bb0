// Invoices through the control plane's API (ControlPlane::Handle, no socket): node agents POST
// usage samples, GET /v1/invoices bills them with the price plan given at start; the answer is
// what the metering library computes for the same samples and plan, to the micro-unit, and a
// tenant's token sees its subtree's invoices and nothing of the others' amounts. On SQLite, and on
// PostgreSQL under ctest daemon_postgres.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "src/daemon/http_server.h"
#include "tests/testing/pg_schema.h"
#include "tessera/core/gpu_model.h"
#include "tessera/daemon/control_plane.h"
#include "tessera/metering/invoice.h"
#include "tessera/metering/invoice_render.h"
#include "tessera/metering/price_plan.h"

namespace tessera::daemon {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using metering::Micro;

constexpr const char* kAdmin = "admin-token-for-the-invoice-tests";
constexpr int64_t kT0 = 1793491200;  // 2026-11-01T00:00:00Z
constexpr int64_t kDecember = 1796083200;  // 2026-12-01T00:00:00Z

// One A100 the operator provides; idle capacity is the operator's; vision is acme's ml team.
constexpr const char* kPlan = R"(currency: USD
idle: operator
capacity: {A100-80GB: 1}
prices:
  A100-80GB: {gpu_hour: 2.40, memory_gib_hour: 0.002}
chargeback:
  - {tenant: vision, organisation: acme, team: ml}
)";

class InvoicesApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera-invoices-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    if (testing::PgTestSchema::Available()) {  // ctest daemon_postgres
      ASSERT_TRUE(pg_.Create());
    }
    Write("plan.yaml", kPlan);
    ASSERT_TRUE(Open(File("plan.yaml")).ok());
    Tenant("acme");
    Tenant("vision", "acme");
    Tenant("other");
    agent_ = Token("node-agent");
    Ok("POST", "/v1/nodes/n1/register",
       R"({"cpu_milli": 64000, "memory_mib": 262144, "gpus": [{"index": 0, "uuid": "GPU-n1-0", "model": "A100-80GB"}]})",
       agent_);
  }
  void TearDown() override {
    cp_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string File(const std::string& name) const { return (dir_ / name).string(); }
  void Write(const std::string& name, const std::string& text) const { std::ofstream(File(name)) << text; }

  Status Open(const std::string& plan) {
    cp_.reset();
    ControlPlaneOptions o;
    o.db = testing::PgTestSchema::Available() ? pg_.url() : "sqlite:" + File("tessera.db");
    o.listen_port = 0;
    o.bootstrap_token = kAdmin;
    o.run_loop = false;
    o.clock = clock_;
    o.price_plan = plan;
    auto cp = ControlPlane::Create(std::move(o));
    if (!cp.ok()) return cp.status();
    cp_ = std::move(*cp);
    return Status::Ok();
  }

  HttpResponse Call(const std::string& target, const std::string& token = kAdmin) const {
    return Request("GET", target, "", token);
  }
  HttpResponse Request(const std::string& method, const std::string& target, const std::string& body,
                       const std::string& token) const {
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
  void Tenant(const std::string& name, const std::string& parent = "") {
    json body = {{"name", name}, {"quota", json::object()}};
    if (!parent.empty()) body["parent"] = parent;
    Ok("POST", "/v1/tenants", body.dump(), kAdmin, 201);
  }

  // `milli` of GPU 0 of n1 as a share, and 1 GiB of its memory, over [start, end).
  static json Sample(const std::string& tenant, const std::string& workload, int64_t seq, int64_t start,
                     int64_t end, int64_t milli) {
    return {{"tenant", tenant}, {"workload", workload}, {"gpu", "0"}, {"model", "A100-80GB"},
            {"partition", "share"}, {"seq", seq}, {"start", start}, {"end", end},
            {"gpu_milli_s_allocated", milli * (end - start)}, {"gpu_milli_s_used", milli * (end - start) / 2},
            {"memory_mib_s", 1024 * (end - start)}, {"peak_memory_mib", 1024}, {"kernel_launches", 10},
            {"bytes_transferred", -1}};
  }
  // Posts the samples and feeds them to `ledger` as the library's own input.
  void Post(const json& samples) {
    json r = Ok("POST", "/v1/nodes/n1/usage", json{{"samples", samples}}.dump(), agent_);
    ASSERT_EQ(r["stored"], samples.size()) << r.dump();
    for (const json& s : samples) {
      metering::SampleValues v;
      v.seq = s["seq"];
      v.start = s["start"];
      v.end = s["end"];
      v.gpu_milli_s_allocated = s["gpu_milli_s_allocated"];
      v.gpu_milli_s_used = s["gpu_milli_s_used"];
      v.memory_mib_s = s["memory_mib_s"];
      v.peak_memory_mib = s["peak_memory_mib"];
      v.kernel_launches = s["kernel_launches"];
      v.bytes_transferred = s["bytes_transferred"];
      ASSERT_TRUE(ledger_.Ingest({s["tenant"], "n1", "0", "A100-80GB", "share", s["workload"]}, v).ok());
    }
  }
  // The usage of every test: vision half the GPU for November's first hour and a half, other a
  // quarter of it for 40 minutes across the first hour's end, acme a little; December's sample is
  // outside the period.
  void PostTheMonth() {
    Post(json::array({Sample("vision", "v1", 0, kT0, kT0 + 5400, 500),
                      Sample("other", "o1", 0, kT0 + 3000, kT0 + 5400, 250),
                      Sample("acme", "a1", 0, kT0 + 7200, kT0 + 7201, 1),
                      Sample("vision", "v1", 1, kDecember, kDecember + 3600, 1000)}));
  }
  // What the metering library bills for the same samples, plan and period.
  // Observed: from the first sample's hour to the start of the control plane's current hour.
  metering::InvoiceRun Expected(const std::string& period = "2026-11") const {
    const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
    auto plan = metering::ParsePricePlanYaml(kPlan, "plan.yaml", catalog);
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    metering::InvoiceOptions o;
    o.observed_start = metering::ObservedSpan(ledger_.Records()).first;
    o.observed_end = UnixMillis(*clock_) / 1000 / 3600 * 3600;
    auto run = metering::ComputeInvoices(ledger_.sources(), ledger_.Records(), {}, *plan,
                                         *metering::ParsePeriod(period), catalog, o);
    EXPECT_TRUE(run.ok()) << run.status().message();
    return *run;
  }
  static json Body(const HttpResponse& r) {
    json j = json::parse(r.body, nullptr, false);
    return j.is_discarded() ? json::object() : j;
  }
  static std::vector<std::string> Accounts(const json& answer) {
    std::vector<std::string> out;
    for (const json& i : answer.value("invoices", json::array())) out.push_back(i["tenant"]);
    return out;
  }

  std::filesystem::path dir_;
  testing::PgTestSchema pg_;  // dropped after cp_ is gone (declared first)
  std::unique_ptr<ControlPlane> cp_;
  std::string agent_;
  metering::Ledger ledger_;
  // The control plane's clock, at `unix_s` seconds since the epoch.
  void SetNow(int64_t unix_s) { clock_->Set(Clock::TimePoint(std::chrono::seconds(unix_s))); }
  std::shared_ptr<FakeClock> clock_ =
      std::make_shared<FakeClock>(Clock::TimePoint(std::chrono::seconds(kT0 + 86400)));  // 2026-11-02
};

TEST_F(InvoicesApiTest, AnAdminGetsWhatTheMeteringLibraryComputesToTheMicroUnit) {
  PostTheMonth();
  HttpResponse r = Call("/v1/invoices?period=2026-11");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  const metering::InvoiceRun expected = Expected();
  EXPECT_EQ(r.body, metering::RenderInvoicesJson(expected));  // `tessera bill -o json`, byte for byte
  const json j = Body(r);
  EXPECT_EQ(j["period"], "2026-11");
  EXPECT_EQ(Accounts(j), (std::vector<std::string>{"acme", "operator", "other", "vision"}));
  // vision: 0.75 GPU-hour at 2.40 = 1,800,000 and 1.5 GiB-hours at 0.002 = 3,000.
  EXPECT_EQ(j["invoices"][3]["total_micro"], 1'803'000);
  // The month so far (2026-11-01 00:00, the first sample, to 2026-11-02 00:00, now) is 24
  // GPU-hours of the one A100, billed to tenants or as idle to the operator, plus memory: 1.5 +
  // 2/3 GiB-hours and 1 GiB-second at 0.002 (4,333.89 -> 4,334).
  Micro sum = 0;
  for (const json& i : j["invoices"]) sum += i["total_micro"].get<Micro>();
  EXPECT_EQ(sum, j["metered_total_micro"].get<Micro>());
  EXPECT_EQ(j["metered_total_micro"], expected.metered_total_micro);
  EXPECT_EQ(j["metered_total_micro"], 24 * 2'400'000 + 4'334);
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["observed_start"], "2026-11-01T00:00:00Z");
  EXPECT_EQ(j["observed_end"], "2026-11-02T00:00:00Z");
  EXPECT_EQ(j["observed_hours"], 24);
  // Without a period: the month of the control plane's clock (2026-11-02).
  EXPECT_EQ(Call("/v1/invoices").body, r.body);
  // December holds the one later sample.
  HttpResponse dec = Call("/v1/invoices?period=2026-12");
  ASSERT_EQ(dec.status, 200) << dec.body;
  EXPECT_EQ(dec.body, metering::RenderInvoicesJson(Expected("2026-12")));
}

TEST_F(InvoicesApiTest, TheSameInvoicesAfterARestart) {
  PostTheMonth();
  const std::string before = Call("/v1/invoices?period=2026-11").body;
  ASSERT_TRUE(Open(File("plan.yaml")).ok());  // the ledger rebuilt from the store
  EXPECT_EQ(Call("/v1/invoices?period=2026-11").body, before);
}

TEST_F(InvoicesApiTest, ATenantSeesItsSubtreesInvoicesAndNothingOfTheOthersAmounts) {
  PostTheMonth();
  const json all = Ok("GET", "/v1/invoices?period=2026-11");
  auto total_of = [&](const std::string& tenant) {
    for (const json& i : all["invoices"])
      if (i["tenant"] == tenant) return i["total_micro"].get<Micro>();
    return Micro{-1};
  };
  const Micro acme = total_of("acme"), vision = total_of("vision");
  for (const std::string role : {"tenant-admin", "tenant-user"}) {
    const std::string token = Token(role, "acme");
    HttpResponse r = Call("/v1/invoices?period=2026-11", token);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = Body(r);
    EXPECT_EQ(Accounts(j), (std::vector<std::string>{"acme", "vision"})) << role;
    // The lines as the whole run priced them; the metered total is of what it sees.
    EXPECT_EQ(j["invoices"][0], all["invoices"][0]);
    EXPECT_EQ(j["invoices"][1], all["invoices"][3]);
    EXPECT_EQ(j["metered_total_micro"], acme + vision);
    EXPECT_THAT(r.body, Not(HasSubstr("\"other\"")));
    EXPECT_THAT(r.body, Not(HasSubstr("\"operator\"")));
    EXPECT_THAT(r.body, Not(HasSubstr(std::to_string(all["metered_total_micro"].get<Micro>()))));
    EXPECT_EQ(j["chargeback"].size(), 2u);  // acme/ml (vision) and unassigned/acme
    // Its subtree narrowed to vision; its parent, a sibling or an unknown tenant: 404.
    const json v = Ok("GET", "/v1/invoices?period=2026-11&tenant=vision", "", token);
    EXPECT_EQ(Accounts(v), std::vector<std::string>{"vision"});
    EXPECT_EQ(v["metered_total_micro"], vision);
    EXPECT_EQ(Call("/v1/invoices?period=2026-11&tenant=other", token).status, 404);
    EXPECT_EQ(Call("/v1/invoices?period=2026-11&tenant=nobody", token).status, 404);
  }
  const std::string vision_user = Token("tenant-user", "vision");
  const json v = Ok("GET", "/v1/invoices?period=2026-11", "", vision_user);
  EXPECT_EQ(Accounts(v), std::vector<std::string>{"vision"});
  ASSERT_EQ(v["chargeback"].size(), 1u);
  EXPECT_EQ(v["chargeback"][0]["organisation"], "acme");
  EXPECT_EQ(v["chargeback"][0]["total_micro"], vision);
  HttpResponse parent = Call("/v1/invoices?period=2026-11&tenant=acme", vision_user);
  EXPECT_EQ(parent.status, 404);
  EXPECT_EQ(Body(parent)["error"]["code"], "not_found");
  // An admin may narrow to one subtree the same way.
  const json a = Ok("GET", "/v1/invoices?period=2026-11&tenant=acme");
  EXPECT_EQ(Accounts(a), (std::vector<std::string>{"acme", "vision"}));
  EXPECT_EQ(a["metered_total_micro"], acme + vision);
  EXPECT_EQ(Call("/v1/invoices?period=2026-11&tenant=nobody").status, 404);
}

TEST_F(InvoicesApiTest, NodeAgentsAre403) {
  HttpResponse r = Call("/v1/invoices?period=2026-11", agent_);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(Body(r)["error"]["code"], "forbidden");
}

TEST_F(InvoicesApiTest, ABadPeriodOrFormatIs400NamingTheField) {
  for (const std::string bad : {"2026-13", "2026-11-01..2026-11-08", "november", "2026-1", "2026-11x"}) {
    HttpResponse r = Call("/v1/invoices?period=" + bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.body;
    EXPECT_EQ(Body(r)["error"]["field"], "period") << bad;
    EXPECT_THAT(r.body, HasSubstr("YYYY-MM")) << bad;
  }
  HttpResponse r = Call("/v1/invoices?period=2026-11&format=xml");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(Body(r)["error"]["field"], "format");
}

TEST_F(InvoicesApiTest, FormatCsvIsTheFocusCsvOfWhatTheCallerSees) {
  PostTheMonth();
  HttpResponse r = Call("/v1/invoices?period=2026-11&format=csv");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/csv; charset=utf-8");
  EXPECT_EQ(r.body, metering::RenderInvoicesCsv(Expected()));
  HttpResponse mine = Call("/v1/invoices?period=2026-11&format=csv", Token("tenant-user", "vision"));
  ASSERT_EQ(mine.status, 200) << mine.body;
  EXPECT_EQ(mine.body, metering::RenderInvoicesCsv(metering::RestrictToAccounts(
                           Expected(), [](const std::string& t) { return t == "vision"; })));
  EXPECT_THAT(mine.body, Not(HasSubstr(",other,")));
}

TEST_F(InvoicesApiTest, WithoutAPricePlanTheEndpointIs404NoPricePlan) {
  ASSERT_TRUE(Open("").ok());
  for (const std::string& token : {std::string(kAdmin), Token("tenant-user", "vision")}) {
    HttpResponse r = Call("/v1/invoices?period=2026-11", token);
    EXPECT_EQ(r.status, 404) << r.body;
    EXPECT_EQ(Body(r)["error"]["code"], "no_price_plan");
    EXPECT_THAT(Body(r)["error"]["message"].get<std::string>(), HasSubstr("no price plan is configured"));
  }
  EXPECT_EQ(Call("/v1/invoices?period=2026-11", agent_).status, 403);  // roles first
}

TEST_F(InvoicesApiTest, ABadPlanFailsTheStartWithTheParsersFileAndLine) {
  cp_.reset();
  Write("bad.yaml", "currency: USD\nprices:\n  A100-80GB: {gpu_hour: -1}\n  Z9000: {gpu_hour: 1}\n");
  Status st = Open(File("bad.yaml"));
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr(File("bad.yaml") + ":3:"));
  EXPECT_THAT(st.message(), HasSubstr(File("bad.yaml") + ":4:"));
  EXPECT_THAT(st.message(), HasSubstr("Z9000"));
  st = Open(File("missing.yaml"));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("price plan: cannot read '" + File("missing.yaml") + "'"));
  EXPECT_EQ(CheckPricePlan(File("bad.yaml")).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(CheckPricePlan(File("plan.yaml")).ok());
  EXPECT_TRUE(CheckPricePlan("").ok());
}

// Issue 31 item 7: a plan without prices for the cluster's GPU models used to answer 409 at query
// time only; it fails the start, naming the model and the plan file.
TEST_F(InvoicesApiTest, APlanWithoutPricesForTheClustersModelsFailsTheStart) {
  Write("t4.yaml", "prices:\n  T4: {gpu_hour: 0.35}\n");
  Status st = Open(File("t4.yaml"));  // n1, an A100-80GB, is in the store
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("price plan " + File("t4.yaml")));
  EXPECT_THAT(st.message(), HasSubstr("prices.A100-80GB: missing (node n1 has A100-80GB"));
  ASSERT_TRUE(Open(File("plan.yaml")).ok());
}

// A node of a model the plan lacks that registers after the start: 409 until the plan has it.
TEST_F(InvoicesApiTest, UsageOfAModelThatJoinedLaterIs409AndOnlyAdminsLearnWhy) {
  Ok("POST", "/v1/nodes/n2/register",
     R"({"cpu_milli": 64000, "memory_mib": 262144, "gpus": [{"index": 0, "uuid": "GPU-n2-0", "model": "T4"}]})",
     agent_);
  json t4 = Sample("vision", "t1", 0, kT0, kT0 + 60, 1000);
  t4["model"] = "T4";
  t4["partition"] = "whole";
  Ok("POST", "/v1/nodes/n2/usage", json{{"samples", json::array({t4})}}.dump(), agent_);
  HttpResponse r = Call("/v1/invoices?period=2026-11");
  EXPECT_EQ(r.status, 409) << r.body;
  EXPECT_EQ(Body(r)["error"]["code"], "price_plan_incomplete");
  EXPECT_THAT(r.body, HasSubstr("T4"));
  HttpResponse t = Call("/v1/invoices?period=2026-11", Token("tenant-user", "vision"));
  EXPECT_EQ(t.status, 409) << t.body;
  EXPECT_THAT(t.body, Not(HasSubstr("T4")));
  // And a restart with the same plan fails, naming both places the model is seen.
  Status st = Open(File("plan.yaml"));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.ToString();
  EXPECT_THAT(st.message(), HasSubstr("prices.T4: missing (node n2 has T4"));
}

// Issue 31 item 7: on 4 December `ctl invoices` billed idle capacity for all of December, and a
// month before the server existed billed the plan's reservation to a tenant not in the store.
TEST_F(InvoicesApiTest, CapacityIsBilledForWhatWasObservedAndReservationsForTenantsThatExist) {
  Write("reserved.yaml", std::string(kPlan) +
                             "reservations:\n"
                             "  - {tenant: vision, model: A100-80GB, gpus: 1, gpu_hour: 1.50}\n"
                             "  - {tenant: ghost, model: A100-80GB, gpus: 8, gpu_hour: 1.50}\n");
  SetNow(kDecember + 3 * 86400 + 10 * 3600 + 1234);  // 2026-12-04T10:20:34Z
  ASSERT_TRUE(Open(File("reserved.yaml")).ok());
  PostTheMonth();
  // December so far: 2026-12-01 00:00 to 10:00 on the 4th, 82 hours of vision's 1-GPU reservation
  // (ghost's is not billed: no such tenant); the one A100 is all reserved, so no idle capacity.
  const json dec = Ok("GET", "/v1/invoices?period=2026-12");
  EXPECT_EQ(dec["complete"], false);
  EXPECT_EQ(dec["observed_start"], "2026-12-01T00:00:00Z");
  EXPECT_EQ(dec["observed_end"], "2026-12-04T10:00:00Z");
  EXPECT_EQ(dec["observed_hours"], 82);
  EXPECT_EQ(Accounts(dec), std::vector<std::string>{"vision"});
  EXPECT_EQ(dec["notes"], json::array({"reservation ghost/A100-80GB not billed: tenant ghost does not exist"}));
  Micro reserved = 0;
  for (const json& l : dec["invoices"][0]["lines"])
    if (l["resource"] == "reservation") reserved += l["amount_micro"].get<Micro>();
  EXPECT_EQ(reserved, 82 * 1'500'000);
  // November: complete (the first sample at its first hour, now after its end).
  const json nov = Ok("GET", "/v1/invoices?period=2026-11");
  EXPECT_EQ(nov["complete"], true);
  EXPECT_EQ(nov["observed_hours"], 720);
  // October, before the first sample: nothing observed, nothing billed.
  const json oct = Ok("GET", "/v1/invoices?period=2026-10");
  EXPECT_EQ(oct["complete"], false);
  EXPECT_TRUE(oct["observed_start"].is_null());
  EXPECT_EQ(oct["observed_hours"], 0);
  EXPECT_TRUE(oct["invoices"].empty());
  EXPECT_EQ(oct["metered_total_micro"], 0);
  // A tenant's token does not read the notes about the plan's other tenants.
  const json mine = Ok("GET", "/v1/invoices?period=2026-12", "", Token("tenant-user", "vision"));
  EXPECT_TRUE(mine["notes"].empty());
}

}  // namespace
}  // namespace tessera::daemon
