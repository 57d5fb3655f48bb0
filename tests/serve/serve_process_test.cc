// `tessera serve` as a process: it starts, answers, stops on SIGTERM; an acknowledged submit
// survives SIGKILL at any moment (the crash test); a real Prometheus scrapes it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "tests/testing/serve_process.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::testing {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr const char* kAdmin = "admin-token-for-the-process-tests";
const std::string kAuth = std::string("Authorization: Bearer ") + kAdmin;

std::vector<std::string> ServeArgs(const std::string& db, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {TESSERA_BINARY, "serve", "--db", db, "--listen", "127.0.0.1:0",
                                   "--rate", "100000", "--burst", "100000"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}
std::vector<std::string> Env() { return {std::string("TESSERA_BOOTSTRAP_TOKEN=") + kAdmin}; }

// `run("tenants list")`: runs `tessera ctl tenants list` as the admin against `serve`, in `dir`.
std::function<CommandResult(const std::string&)> AdminCtl(const ServeProcess& serve, const TempDir& dir) {
  const std::string ctl = "TESSERA_SERVER=http://127.0.0.1:" + std::to_string(serve.port()) +
                          " TESSERA_TOKEN=" + kAdmin + " '" + std::string(TESSERA_BINARY) + "' ctl ";
  return [ctl, &dir](const std::string& args) { return RunCommand(ctl + args, dir); };
}

json Body(const HttpResult& r) {
  json j = json::parse(r.body, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

TEST(ServeProcess, StartsAnswersAndStopsOnSigterm) {
  TempDir dir;
  ServeProcess serve(ServeArgs(dir.File("t.db")), Env());
  ASSERT_TRUE(serve.WaitListening()) << serve.output();
  EXPECT_EQ(HttpCall(serve.port(), "GET", "/healthz").status, 200);
  HttpResult ready = HttpCall(serve.port(), "GET", "/readyz");
  EXPECT_EQ(ready.status, 200) << ready.body;
  EXPECT_EQ(Body(ready)["scheduler"], "ok");
  EXPECT_EQ(HttpCall(serve.port(), "GET", "/v1/tenants").status, 401);
  EXPECT_EQ(HttpCall(serve.port(), "GET", "/v1/tenants", "", {kAuth}).status, 200);
  EXPECT_EQ(serve.Kill(SIGTERM), 0);
}

TEST(ServeProcess, PrintsAGeneratedBootstrapTokenOnceForAnEmptyStore) {
  TempDir dir;
  std::string token;
  {
    ServeProcess serve(ServeArgs(dir.File("t.db")));
    ASSERT_TRUE(serve.WaitListening()) << serve.output();
    const std::string& out = serve.output();
    const size_t at = out.find("tsr_");
    ASSERT_NE(at, std::string::npos) << out;
    token = out.substr(at, out.find('\n', at) - at);
    EXPECT_EQ(HttpCall(serve.port(), "GET", "/v1/tenants", "", {"Authorization: Bearer " + token}).status, 200);
    EXPECT_EQ(serve.Kill(SIGTERM), 0);
  }
  ServeProcess again(ServeArgs(dir.File("t.db")));
  ASSERT_TRUE(again.WaitListening()) << again.output();
  EXPECT_EQ(again.output().find("tsr_"), std::string::npos) << again.output();
  EXPECT_EQ(HttpCall(again.port(), "GET", "/v1/tenants", "", {"Authorization: Bearer " + token}).status, 200);
}

TEST(ServeProcess, BadFlagsAndAnUnopenableStoreAreClearErrors) {
  TempDir dir;
  CommandResult r = RunCommand("'" + std::string(TESSERA_BINARY) + "' serve --listen nonsense", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--listen"));
  r = RunCommand("'" + std::string(TESSERA_BINARY) + "' serve --db /nonexistent/dir/t.db --listen 127.0.0.1:0", dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tessera serve: "));
  EXPECT_THAT(r.err, HasSubstr("/nonexistent/dir/t.db"));
  WriteTextFile(dir.File("bad.yaml"), "listen: 127.0.0.1:0\nnode_timeout_s: soon\n");
  r = RunCommand("'" + std::string(TESSERA_BINARY) + "' serve --config '" + dir.File("bad.yaml") + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("bad.yaml:2: node_timeout_s"));
}

// One control plane per store (issue 31): a second serve on the same SQLite file used to start
// and schedule onto the same GPUs. Now it exits 2 naming the owner's pid and host; and once the
// owner is SIGKILLed, the lock file it leaves behind blocks nobody (the kernel dropped its lock).
TEST(ServeProcess, ASecondServeOnTheSameStoreExits2NamingTheOwner) {
  TempDir dir;
  const std::string db = "sqlite:" + dir.File("t.db");
  ServeProcess first(ServeArgs(db), Env());
  ASSERT_TRUE(first.WaitListening()) << first.output();
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  // `timeout`: without the fix the second serve would run until killed (exit 124 here).
  CommandResult second = RunCommand("timeout 20 '" + std::string(TESSERA_BINARY) + "' serve --db '" + db +
                                        "' --listen 127.0.0.1:0",
                                    dir);
  EXPECT_EQ(second.exit_code, 2) << second.out << second.err;
  EXPECT_THAT(second.err, HasSubstr("tessera serve: the store " + dir.File("t.db") +
                                    " is owned by another tessera serve (pid " + std::to_string(first.pid()) +
                                    " on host " + host + ", since "));
  EXPECT_THAT(second.err, HasSubstr("only one control plane may own a store"));
  EXPECT_EQ(HttpCall(first.port(), "GET", "/readyz").status, 200);  // the owner is untouched

  EXPECT_EQ(first.Kill(SIGKILL), 128 + SIGKILL);
  EXPECT_TRUE(std::filesystem::exists(dir.File("t.db.owner")));  // left behind, still naming it
  ServeProcess third(ServeArgs(db), Env());
  ASSERT_TRUE(third.WaitListening()) << third.output();
  EXPECT_EQ(HttpCall(third.port(), "GET", "/readyz").status, 200);
  std::ifstream owner(dir.File("t.db.owner"));
  const std::string text((std::istreambuf_iterator<char>(owner)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("pid=" + std::to_string(third.pid()) + "\n"));
  EXPECT_EQ(third.Kill(SIGTERM), 0);
}

TEST(ServeProcess, TheConfigFileSetsOptionsAndFlagsWin) {
  TempDir dir;
  WriteTextFile(dir.File("serve.yaml"), "db: sqlite:" + dir.File("from-config.db") +
                                            "\nlisten: 127.0.0.1:1\nscheduler:\n  min_runtime_s: 5\n");
  ServeProcess serve({TESSERA_BINARY, "serve", "--config", dir.File("serve.yaml"), "--listen", "127.0.0.1:0"}, Env());
  ASSERT_TRUE(serve.WaitListening()) << serve.output();  // the flag's port 0, not the file's 1
  EXPECT_EQ(HttpCall(serve.port(), "GET", "/readyz").status, 200);
  EXPECT_TRUE(std::filesystem::exists(dir.File("from-config.db")));
}

// `tessera ctl` over every API area against a real daemon: tables by default, the server's JSON
// with -o json, exit 1 with the server's message for an error answer, 2 for bad flags.
TEST(ServeProcess, CtlCoversEveryAreaOfTheApi) {
  TempDir dir;
  ServeProcess serve(ServeArgs(dir.File("t.db")), Env());
  ASSERT_TRUE(serve.WaitListening()) << serve.output();
  auto run = AdminCtl(serve, dir);
  CommandResult r = run("tenants create acme --quota '{\"guaranteed\": {\"gpu_milli\": 2000}}'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("gpu_milli=2000"));
  ASSERT_EQ(run("tenants create ml --parent acme").exit_code, 0);
  r = run("tenants list");
  EXPECT_THAT(r.out, HasSubstr("ml    acme"));
  r = run("tokens create --role node-agent -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string agent = Body({200, {}, r.out})["token"];
  ASSERT_FALSE(agent.empty()) << r.out;
  ASSERT_EQ(HttpCall(serve.port(), "POST", "/v1/nodes/gpu-1/register",
                     R"({"cpu_milli":8000,"memory_mib":65536,"gpus":[{"model":"A100-80GB"},{"model":"A100-80GB"}]})",
                     {"Authorization: Bearer " + agent})
                .status,
            200);
  r = run("workloads submit --tenant ml --gpus 1 --gpu-milli 500 --gpu-mem-mib 8192 --qos Burstable --idempotency-key k1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(run("workloads submit --tenant ml --gpus 1 --gpu-milli 500 --gpu-mem-mib 8192 --qos Burstable "
                "--idempotency-key k1").out,
            r.out);  // the retry gets the first answer
  bool placed = false;
  for (int i = 0; i < 100 && !placed; ++i) {
    placed = run("workloads get 1").out.find("running") != std::string::npos;
    if (!placed) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r = run("workloads get 1");
  EXPECT_TRUE(placed) << r.out;
  EXPECT_THAT(r.out, HasSubstr("gpu-1:[0]"));
  EXPECT_THAT(r.out, HasSubstr("event"));
  EXPECT_THAT(run("workloads list --tenant ml").out, HasSubstr("fraction(500,8192MiB)"));
  EXPECT_THAT(run("nodes list").out, HasSubstr("gpu-1  ready  2     A100-80GB  500"));
  EXPECT_EQ(run("nodes cordon gpu-1").exit_code, 0);
  EXPECT_THAT(run("nodes get gpu-1").out, HasSubstr("cordoned"));
  EXPECT_EQ(run("workloads cancel 1").exit_code, 0);
  EXPECT_THAT(run("audit list").out, HasSubstr("workload.cancel"));
  // The workload's history replayed from the stream: placed, then cancelled, one line each (the
  // stream also carries the tenant, token and node events, which --workload leaves out).
  r = run("events --workload 1 --after 0 --count 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::MatchesRegex("ID +TIME +TENANT +WORKLOAD +KIND +DETAIL\n"
                                             "[0-9]+ +[0-9T:-]+Z +ml +1 +placed +gpu-1 \\[0\\]\n"
                                             "[0-9]+ +[0-9T:-]+Z +ml +1 +cancelled +.*\n"));
  const std::string placed_id = r.out.substr(r.out.find('\n') + 1, r.out.find(' ', r.out.find('\n')) - r.out.find('\n') - 1);
  r = run("events --workload 1 --after " + placed_id + " --count 1 -o json");
  EXPECT_EQ(Body({200, {}, r.out})["kind"], "cancelled") << r.out;
  r = run("events --tenant nobody");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("HTTP 404"));
  EXPECT_THAT(run("health -o json").out, HasSubstr("\"ready\""));
  r = run("workloads get 99");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tessera ctl workloads get: HTTP 404: workload 99 not found"));
  EXPECT_EQ(run("tenants create x --quota nope").exit_code, 2);
  r = RunCommand("TESSERA_SERVER=http://127.0.0.1:1 '" + std::string(TESSERA_BINARY) + "' ctl tenants list", dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot reach the control plane"));
}

// Issue 31: `ctl tenants delete` aborted (type_error.306, exit 134) after the server had deleted;
// a tenant a token refers to answered "FOREIGN KEY constraint failed". Now: a line saying it is
// deleted, exit 0; and the 409 names the token, exit 1.
TEST(ServeProcess, CtlDeletesATenantAndSaysWhatKeepsOne) {
  TempDir dir;
  ServeProcess serve(ServeArgs(dir.File("t.db")), Env());
  ASSERT_TRUE(serve.WaitListening()) << serve.output();
  auto run = AdminCtl(serve, dir);
  ASSERT_EQ(run("tenants create gone").exit_code, 0);
  CommandResult r = run("tenants delete gone");
  EXPECT_FALSE(r.Crashed()) << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "tenant 'gone' deleted\n");
  EXPECT_EQ(run("tenants get gone").exit_code, 1);
  ASSERT_EQ(run("tenants create kept").exit_code, 0);
  r = run("tokens create --role tenant-user --tenant kept -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string id = Body({200, {}, r.out})["id"];
  r = run("tenants delete kept");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tessera ctl tenants delete: HTTP 409: tenant 'kept' has 1 token (" + id + ")"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("FOREIGN KEY")));
}

// Issue 31: `ctl tokens revoke` of the last admin token succeeded and every call was 401 after,
// with no way back ($TESSERA_BOOTSTRAP_TOKEN is ignored once the store has tokens). Now the revoke
// is refused (409, naming why), and `serve --issue-admin-token FILE`, with the store and no serve
// owning it, makes a new admin token, audited as local-recovery, and exits.
TEST(ServeProcess, TheLastAdminTokenStaysAndTheStoreCanIssueANewOne) {
  TempDir dir;
  const std::string db = "sqlite:" + dir.File("t.db");
  const std::string tessera = "'" + std::string(TESSERA_BINARY) + "' ";
  const std::string recover = tessera + "serve --db '" + db + "' --issue-admin-token ";
  {
    ServeProcess serve(ServeArgs(db), Env());
    ASSERT_TRUE(serve.WaitListening()) << serve.output();
    auto run = AdminCtl(serve, dir);
    CommandResult r = run("tokens revoke bootstrap");
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr("HTTP 409: token 'bootstrap': not revoked: no other admin token that never expires"));
    EXPECT_EQ(run("tenants list").exit_code, 0);  // the token still works
    // While the serve owns the store, the recovery is refused and leaves no file behind.
    r = RunCommand("timeout 20 " + recover + "'" + dir.File("admin.token") + "'", dir);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr("--issue-admin-token: the store " + dir.File("t.db") + " is owned by another tessera serve"));
    EXPECT_FALSE(std::filesystem::exists(dir.File("admin.token")));
    EXPECT_EQ(serve.Kill(SIGTERM), 0);
  }
  CommandResult r = RunCommand(recover + "'" + dir.File("admin.token") + "'", dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("audit actor local-recovery"));
  EXPECT_THAT(r.out, HasSubstr("not serving"));
  EXPECT_EQ(r.out.find("tsr_"), std::string::npos) << r.out;  // the secret is in the file only
  EXPECT_EQ(std::filesystem::status(dir.File("admin.token")).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const std::string first = ReadTextFile(dir.File("admin.token"));
  EXPECT_THAT(first, ::testing::StartsWith("tsr_"));
  // The file is never overwritten; "-" prints the token alone on stdout.
  r = RunCommand(recover + "'" + dir.File("admin.token") + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("admin.token: exists"));
  EXPECT_EQ(ReadTextFile(dir.File("admin.token")), first);
  r = RunCommand(recover + "-", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::MatchesRegex("tsr_[A-Za-z0-9_-]+\n"));
  EXPECT_THAT(r.err, HasSubstr("audit actor local-recovery"));

  ServeProcess serve(ServeArgs(db), Env());
  ASSERT_TRUE(serve.WaitListening()) << serve.output();
  const std::string ctl = "TESSERA_SERVER=http://127.0.0.1:" + std::to_string(serve.port()) + " " + tessera +
                          "ctl --token-file '" + dir.File("admin.token") + "' ";
  r = RunCommand(ctl + "audit list -o json", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("local-recovery"));
  // With the recovered token, the old one can go: it is not the last admin token any more.
  EXPECT_EQ(RunCommand(ctl + "tokens revoke bootstrap", dir).exit_code, 0);
  EXPECT_EQ(HttpCall(serve.port(), "GET", "/v1/tenants", "", {kAuth}).status, 401);
}

// `tessera serve --metrics-auth`: /metrics asks for a token (401 without); open by default.
TEST(ServeProcess, MetricsAuthMakesMetricsAskForAToken) {
  TempDir dir;
  ServeProcess open(ServeArgs(dir.File("open.db")), Env());
  ASSERT_TRUE(open.WaitListening()) << open.output();
  EXPECT_EQ(HttpCall(open.port(), "GET", "/metrics").status, 200);
  ServeProcess closed(ServeArgs(dir.File("closed.db"), {"--metrics-auth"}), Env());
  ASSERT_TRUE(closed.WaitListening()) << closed.output();
  HttpResult none = HttpCall(closed.port(), "GET", "/metrics");
  EXPECT_EQ(none.status, 401) << none.body;
  EXPECT_EQ(none.headers["www-authenticate"], "Bearer");
  HttpResult with = HttpCall(closed.port(), "GET", "/metrics", "", {kAuth});
  EXPECT_EQ(with.status, 200) << with.body;
  EXPECT_THAT(with.body, HasSubstr("tessera_api_requests_total"));
}

// `tessera ctl usage`: what node agents reported, per tenant and hour, from a real daemon.
TEST(ServeProcess, CtlUsagePrintsTotalsAndHours) {
  TempDir dir;
  ServeProcess serve(ServeArgs(dir.File("t.db")), Env());
  ASSERT_TRUE(serve.WaitListening()) << serve.output();
  auto run = AdminCtl(serve, dir);
  ASSERT_EQ(run("tenants create ml").exit_code, 0);
  const std::string agent = Body({200, {}, run("tokens create --role node-agent -o json").out})["token"];
  ASSERT_EQ(HttpCall(serve.port(), "POST", "/v1/nodes/gpu-1/register",
                     R"({"cpu_milli":8000,"memory_mib":65536,"gpus":[{"model":"A100-80GB"}]})",
                     {"Authorization: Bearer " + agent})
                .status,
            200);
  // 2026-11-01T00:59:00Z .. 01:01:00Z at half a GPU: 30 GPU-seconds in each hour.
  const std::string sample =
      R"({"tenant":"ml","workload":"1","gpu":"0","model":"A100-80GB","partition":"share","seq":0,)"
      R"("start":1793494740,"end":1793494860,"gpu_milli_s_allocated":60000,"gpu_milli_s_used":12000,)"
      R"("memory_mib_s":0,"peak_memory_mib":0,"kernel_launches":4})";
  HttpResult posted = HttpCall(serve.port(), "POST", "/v1/nodes/gpu-1/usage", "{\"samples\":[" + sample + "]}",
                               {"Authorization: Bearer " + agent});
  ASSERT_EQ(posted.status, 200) << posted.body;
  CommandResult r = run("usage");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("TENANT  GPU_S_ALLOCATED  GPU_S_USED  KERNEL_LAUNCHES  SAMPLES"));
  EXPECT_THAT(r.out, HasSubstr("ml      60               12"));
  EXPECT_THAT(r.out, HasSubstr("2026-11-01T00:00:00Z  ml      gpu-1:0  1         share      30"));
  EXPECT_THAT(r.out, HasSubstr("2026-11-01T01:00:00Z"));
  r = run("usage --tenant ml --from 2026-11-01T01:00:00Z -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = Body({200, {}, r.out});
  ASSERT_EQ(j["hours"].size(), 1u) << r.out;
  EXPECT_EQ(j["tenants"][0]["gpu_milli_s_allocated"], 30000);
  r = run("usage --from yesterday");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tessera ctl usage: HTTP 400: from:"));
  r = run("usage --tenant nobody");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("HTTP 404"));
}

// `tessera serve --price-plan`: a bad plan fails the start (and --check) with the parser's
// file:line, exit 2; with a good one `tessera ctl invoices` prints the month's invoices.
TEST(ServeProcess, APricePlanBillsUsageAndABadOneFailsTheStart) {
  TempDir dir;
  const std::string serve = "'" + std::string(TESSERA_BINARY) + "' serve --db '" + dir.File("t.db") +
                            "' --listen 127.0.0.1:0 ";
  WriteTextFile(dir.File("bad.yaml"), "currency: USD\nprices:\n  A100-80GB: {gpu_hour: lots}\n");
  CommandResult r = RunCommand(serve + "--price-plan '" + dir.File("bad.yaml") + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(dir.File("bad.yaml") + ":3:"));
  EXPECT_THAT(r.err, HasSubstr("gpu_hour"));
  EXPECT_FALSE(std::filesystem::exists(dir.File("t.db")));  // refused before the store is opened
  r = RunCommand(serve + "--check --price-plan '" + dir.File("bad.yaml") + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(dir.File("bad.yaml") + ":3:"));
  WriteTextFile(dir.File("serve.yaml"), "price_plan: " + dir.File("bad.yaml") + "\n");
  r = RunCommand(serve + "--config '" + dir.File("serve.yaml") + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(dir.File("bad.yaml") + ":3:"));
  r = RunCommand(serve + "--price-plan '" + dir.File("missing.yaml") + "'", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("price plan: cannot read"));

  WriteTextFile(dir.File("plan.yaml"), "currency: USD\nprices:\n  A100-80GB: {gpu_hour: 2.40}\n");
  ServeProcess server(ServeArgs(dir.File("t.db"), {"--price-plan", dir.File("plan.yaml")}), Env());
  ASSERT_TRUE(server.WaitListening()) << server.output();
  auto run = AdminCtl(server, dir);
  ASSERT_EQ(run("tenants create ml").exit_code, 0);
  const std::string agent = Body({200, {}, run("tokens create --role node-agent -o json").out})["token"];
  ASSERT_EQ(HttpCall(server.port(), "POST", "/v1/nodes/gpu-1/register",
                     R"({"cpu_milli":8000,"memory_mib":65536,"gpus":[{"model":"A100-80GB"}]})",
                     {"Authorization: Bearer " + agent})
                .status,
            200);
  // Half a GPU for two minutes of 2026-11-01: 60 GPU-seconds at 2.40 per GPU-hour = 0.04.
  const std::string sample =
      R"({"tenant":"ml","workload":"1","gpu":"0","model":"A100-80GB","partition":"share","seq":0,)"
      R"("start":1793494740,"end":1793494860,"gpu_milli_s_allocated":60000,"gpu_milli_s_used":12000,)"
      R"("memory_mib_s":0,"peak_memory_mib":0,"kernel_launches":4})";
  ASSERT_EQ(HttpCall(server.port(), "POST", "/v1/nodes/gpu-1/usage", "{\"samples\":[" + sample + "]}",
                     {"Authorization: Bearer " + agent})
                .status,
            200);
  r = run("invoices --period 2026-11");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Invoices for 2026-11 (USD), total 0.040000"));
  // A month before the first sample: nothing observed, nothing billed, and it says so.
  const CommandResult before = run("invoices --period 2026-10");
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_THAT(before.out, HasSubstr("Invoices for 2026-10 (USD), total 0.000000\nNot complete: nothing of 2026-10 was "
                                    "observed; no idle capacity or reservation is billed\n"));
  EXPECT_THAT(r.out, HasSubstr("TENANT  ORGANISATION  TEAM  TOTAL\nml      unassigned    ml    0.040000\n"));
  EXPECT_THAT(r.out, HasSubstr("A100-80GB GPU share  16.666667"));
  r = run("invoices --period 2026-11 --tenant ml -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = Body({200, {}, r.out});
  EXPECT_EQ(j["metered_total_micro"], 40000) << r.out;
  EXPECT_EQ(j["invoices"][0]["tenant"], "ml");
  r = run("invoices --period 2026-13");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tessera ctl invoices: HTTP 400: period:"));
  r = run("invoices --tenant nobody");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("HTTP 404"));
}

// The crash test of issue 15: 500 submits, each with its own Idempotency-Key, while the daemon
// is SIGKILLed at random moments and restarted; the client retries a submit that got no answer
// with the same key. Afterwards every acknowledged submit is there, and none twice.
TEST(ServeProcess, EveryAcknowledgedSubmitSurvivesSigkillAndNoneIsThereTwice) {
  TempDir dir;
  const std::string db = dir.File("t.db");
  auto serve = std::make_unique<ServeProcess>(ServeArgs(db), Env());
  ASSERT_TRUE(serve->WaitListening()) << serve->output();
  ASSERT_EQ(HttpCall(serve->port(), "POST", "/v1/tenants", R"({"name":"a"})", {kAuth}).status, 201);
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> kill_after_ms(20, 400);
  std::map<int, int64_t> acknowledged;  // submit -> id
  int kills = 0, retries = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kill_after_ms(rng));
  const int kSubmits = 500;
  for (int i = 0; i < kSubmits;) {
    if (std::chrono::steady_clock::now() >= deadline) {
      serve->Kill(SIGKILL);  // between two requests, or (below) in the middle of one
      ++kills;
    }
    if (serve->pid() == 0) {
      serve = std::make_unique<ServeProcess>(ServeArgs(db), Env());
      ASSERT_TRUE(serve->WaitListening()) << serve->output();
      deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kill_after_ms(rng));
    }
    // Some kills land while a request is in flight.
    std::thread killer;
    if (rng() % 40 == 0) {
      const int delay_us = static_cast<int>(rng() % 3000);
      ServeProcess* s = serve.get();
      killer = std::thread([s, delay_us] {
        std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        s->Signal(SIGKILL);
      });
    }
    const std::string body = R"({"tenant":"a","gpus":1,"qos":"Burstable","name":"job-)" + std::to_string(i) + "\"}";
    HttpResult r = HttpCall(serve->port(), "POST", "/v1/workloads", body,
                            {kAuth, "Idempotency-Key: submit-" + std::to_string(i)});
    if (killer.joinable()) {
      killer.join();
      serve->Wait();
      ++kills;
    }
    if (r.status == 201) {
      const int64_t id = Body(r).value("id", int64_t{0});
      ASSERT_GT(id, 0) << r.body;
      if (acknowledged.count(i)) {
        ASSERT_EQ(acknowledged[i], id) << "submit " << i << " answered twice differently";
      }
      acknowledged[i] = id;
      ++i;
    } else {
      ASSERT_EQ(r.status, 0) << "submit " << i << ": " << r.status << " " << r.body;
      ++retries;  // no answer: the daemon died; retry with the same key
    }
  }
  if (serve->pid() == 0) {
    serve = std::make_unique<ServeProcess>(ServeArgs(db), Env());
    ASSERT_TRUE(serve->WaitListening());
  }
  std::map<std::string, int> names;
  std::set<int64_t> ids;
  std::string cont;
  do {
    HttpResult page = HttpCall(serve->port(), "GET", "/v1/workloads?tenant=a&limit=1000" +
                                                        (cont.empty() ? "" : "&continue=" + cont), "", {kAuth});
    ASSERT_EQ(page.status, 200) << page.body;
    const json j = Body(page);
    for (const json& w : j["workloads"]) {
      names[w["name"].get<std::string>()]++;
      ids.insert(w["id"].get<int64_t>());
    }
    cont = j["continue"].is_null() ? "" : j["continue"].get<std::string>();
  } while (!cont.empty());
  EXPECT_EQ(names.size(), static_cast<size_t>(kSubmits));
  for (const auto& [name, count] : names) EXPECT_EQ(count, 1) << name << " is there " << count << " times";
  for (const auto& [i, id] : acknowledged) EXPECT_TRUE(ids.count(id)) << "acknowledged submit " << i << " (id " << id << ") is gone";
  EXPECT_GE(kills, 10);
  std::printf("crash test: %d submits, %d kills, %d retries without an answer\n", kSubmits, kills, retries);
}

// A real Prometheus (Debian's package) scrapes the daemon on loopback, and a tenant's series
// comes back through its query API; promtool accepts the exposition.
TEST(ServeProcess, ARealPrometheusScrapesTheDaemonAndATenantsSeriesComesBack) {
  ASSERT_EQ(std::system("command -v prometheus > /dev/null && command -v promtool > /dev/null"), 0)
      << "prometheus and promtool are installed by scripts/setup";
  TempDir dir;
  ServeProcess serve(ServeArgs(dir.File("t.db")), Env());
  ASSERT_TRUE(serve.WaitListening()) << serve.output();
  ASSERT_EQ(HttpCall(serve.port(), "POST", "/v1/tenants",
                     R"({"name":"vision","quota":{"guaranteed":{"gpu_milli":3000}}})", {kAuth})
                .status,
            201);
  HttpResult metrics = HttpCall(serve.port(), "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  WriteTextFile(dir.File("metrics.txt"), metrics.body);
  CommandResult lint = RunCommand("promtool check metrics < '" + dir.File("metrics.txt") + "'", dir);
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;

  // A free port for Prometheus: bind 0, read it, close (a small race, retried below).
  int prom_port = 0;
  for (int attempt = 0; attempt < 3 && prom_port == 0; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      prom_port = ntohs(a.sin_port);
    ::close(fd);
  }
  ASSERT_GT(prom_port, 0);
  WriteTextFile(dir.File("prometheus.yml"),
                "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: tessera\n    static_configs:\n"
                "      - targets: ['127.0.0.1:" + std::to_string(serve.port()) + "']\n");
  ServeProcess prom({"/usr/bin/prometheus", "--config.file=" + dir.File("prometheus.yml"),
                     "--storage.tsdb.path=" + dir.File("tsdb"),
                     "--web.listen-address=127.0.0.1:" + std::to_string(prom_port)});
  const std::string query = "/api/v1/query?query=tessera_tenant_guaranteed_gpu_milli%7Btenant%3D%22vision%22%7D";
  std::string value;
  for (int i = 0; i < 300 && value.empty(); ++i) {  // up to 30 s: Prometheus starts, scrapes every second
    HttpResult r = HttpCall(prom_port, "GET", query);
    if (r.status == 200) {
      const json j = Body(r);
      if (j["data"]["result"].is_array() && !j["data"]["result"].empty())
        value = j["data"]["result"][0]["value"][1].get<std::string>();
    }
    if (value.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(value, "3000");
  prom.Kill(SIGTERM);
}

}  // namespace
}  // namespace tessera::testing
