// Contract tests of `tessera bill`: its outputs (table, JSON shape, FOCUS CSV, HTML) on a small
// ledger and plan, and bad ledgers / plans: every problem with file:line, exit 2.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/cli_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using testing::RunTessera;
using testing::TempDir;
using testing::WriteTextFile;

const char* const kLedger =
    R"({"tenant":"vision","node":"n1","gpu":"0","model":"A100-80GB","partition":"share","workload":"j1","seq":1,"start":"2026-11-01T00:00:00Z","end":"2026-11-01T01:00:00Z","gpu_milli_s_allocated":900000,"gpu_milli_s_used":400000,"memory_mib_s":36864000}
{"tenant":"vision","node":"n1","gpu":"0","model":"A100-80GB","partition":"share","workload":"j1","seq":1,"start":"2026-11-01T00:00:00Z","end":"2026-11-01T01:00:00Z","gpu_milli_s_allocated":900000,"gpu_milli_s_used":400000,"memory_mib_s":36864000}
{"tenant":"nlp","node":"n1","gpu":"1","model":"A100-80GB","partition":"3g.40gb","workload":"j2","seq":1,"start":"2026-11-01T00:30:00Z","end":"2026-11-01T02:30:00Z","gpu_milli_s_allocated":0,"gpu_milli_s_used":0}
{"tenant":"nlp","node":"n2","gpu":"0","model":"A100-80GB","partition":"whole","workload":"j3","seq":1,"start":"2026-11-01T00:00:00Z","end":"2026-11-01T03:00:00Z","gpu_milli_s_allocated":10800000,"gpu_milli_s_used":9000000}
{"type":"sla","tenant":"nlp","period":"2026-11","metric":"guaranteed_wait_p99_s","value":420}
)";

const char* const kPlan = R"(currency: USD
idle: operator
capacity: {A100-80GB: 2}
prices:
  A100-80GB:
    gpu_hour: 2.40
    memory_gib_hour: 0.002
    mig: {3g.40gb: 1.15}
reservations:
  - {tenant: vision, model: A100-80GB, gpu_milli: 200, gpu_hour: 1.80, burst_gpu_hour: 3.00}
chargeback:
  - {tenant: vision, organisation: acme, team: ml}
  - {tenant: nlp, organisation: acme, team: language}
sla_credits:
  - {metric: guaranteed_wait_p99_s, above: 300, credit_percent: 10}
)";

struct Files {
  TempDir dir;
  Files(const std::string& ledger = kLedger, const std::string& plan = kPlan) {
    WriteTextFile(dir.File("ledger.jsonl"), ledger);
    WriteTextFile(dir.File("plan.yaml"), plan);
  }
};

TEST(BillCli, JsonHasTheIssuesShapeAndReconciles) {
  Files f;
  auto r = RunTessera(f.dir, "bill --usage ledger.jsonl --plan plan.yaml -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["period"], "2026-11");
  int64_t sum = 0;
  std::map<std::string, nlohmann::json> by_tenant;
  for (const auto& inv : j["invoices"]) {
    int64_t lines = 0;
    for (const auto& l : inv["lines"]) {
      for (const char* k : {"description", "quantity", "unit", "amount_micro"}) EXPECT_TRUE(l.contains(k)) << k;
      lines += l["amount_micro"].get<int64_t>();
    }
    EXPECT_EQ(lines, inv["total_micro"].get<int64_t>());
    sum += lines;
    by_tenant[inv["tenant"]] = inv;
  }
  EXPECT_EQ(sum, j["metered_total_micro"].get<int64_t>());
  ASSERT_EQ(by_tenant.size(), 3u);  // nlp, operator (idle), vision
  EXPECT_EQ(by_tenant["vision"]["organisation"], "acme");
  EXPECT_EQ(by_tenant["nlp"]["team"], "language");
  // vision: 0.25 GPU-hour of share (the resend counted once) under a 0.2-GPU reservation:
  // 0.2 covered, 0.05 burst at 3.00 = 150000 micro.
  bool burst = false;
  for (const auto& l : by_tenant["vision"]["lines"]) {
    if (l["resource"] == "burst") {
      burst = true;
      EXPECT_EQ(l["quantity"], "0.050000");
      EXPECT_EQ(l["amount_micro"], 150000);
    }
  }
  EXPECT_TRUE(burst);
  // nlp: 3 GPU-hours whole (7.2) + 2 profile-hours (2.3), minus 10 % = 8.55.
  EXPECT_EQ(by_tenant["nlp"]["total_micro"], 8'550'000);
}

TEST(BillCli, CsvHasTheFocusColumnsAndTableAndHtmlRender) {
  Files f;
  auto csv = RunTessera(f.dir, "bill --usage ledger.jsonl --plan plan.yaml --period 2026-11 -o csv");
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const std::string header = csv.out.substr(0, csv.out.find('\n'));
  for (const char* col : {"BilledCost", "EffectiveCost", "ListCost", "ChargeCategory", "ConsumedQuantity", "ConsumedUnit",
                          "PricingQuantity", "PricingUnit", "CommitmentDiscountId", "CommitmentDiscountStatus",
                          "SubAccountId", "BillingPeriodStart"}) {
    EXPECT_THAT(header, HasSubstr(col));
  }
  EXPECT_THAT(csv.out, HasSubstr("Unused"));
  EXPECT_THAT(csv.out, HasSubstr("Credit"));
  auto table = RunTessera(f.dir, "bill --usage ledger.jsonl --plan plan.yaml");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, StartsWith("Invoices for 2026-11 (USD), metered total "));
  EXPECT_THAT(table.out, HasSubstr("A100-80GB MIG 3g.40gb"));
  auto html = RunTessera(f.dir, "bill --usage ledger.jsonl --plan plan.yaml -o html");
  ASSERT_EQ(html.exit_code, 0);
  EXPECT_THAT(html.out, StartsWith("<!DOCTYPE html>"));
}

// Issue 31 item 7: without --period a short ledger billed idle capacity and the reservation for
// the whole month. They are billed for the hours the ledger covers (2026-11-01 00:00 to 03:00
// here), the month is marked not complete, and a reservation of a tenant the ledger does not
// name is not billed.
TEST(BillCli, AMonthTheLedgerCoversInPartIsBilledForThoseHoursAndSaysSo) {
  std::string plan = kPlan;
  plan.replace(plan.find("chargeback:"), 0, "  - {tenant: ghost, model: A100-80GB, gpus: 8, gpu_hour: 1.50}\n");
  Files f(kLedger, plan);
  auto r = RunTessera(f.dir, "bill --usage ledger.jsonl --plan plan.yaml -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tessera bill: 2026-11 is not complete: the ledger covers 3 of its 720 hours "
                               "(2026-11-01T00:00:00Z to 2026-11-01T03:00:00Z)\n"));
  EXPECT_THAT(r.err, HasSubstr("tessera bill: reservation ghost/A100-80GB not billed: tenant ghost does not exist\n"));
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["observed_start"], "2026-11-01T00:00:00Z");
  EXPECT_EQ(j["observed_end"], "2026-11-01T03:00:00Z");
  EXPECT_EQ(j["observed_hours"], 3);
  std::map<std::string, nlohmann::json> by_tenant;
  for (const auto& inv : j["invoices"]) by_tenant[inv["tenant"]] = inv;
  EXPECT_EQ(by_tenant.count("ghost"), 0u);
  // vision's 0.2-GPU reservation over 3 hours: 0.6 GPU-hours, 0.2 of them used.
  bool unused = false;
  for (const auto& l : by_tenant["vision"]["lines"]) {
    if (l["commitment_status"] != "Unused") continue;
    unused = true;
    EXPECT_EQ(l["quantity"], "0.400000");
  }
  EXPECT_TRUE(unused);
  // The operator's idle: 2 GPUs x 3 hours minus what was held, not 2 x 720.
  ASSERT_EQ(by_tenant["operator"]["lines"].size(), 1u);
  EXPECT_LT(std::stod(by_tenant["operator"]["lines"][0]["quantity"].get<std::string>()), 6.0);
  auto table = RunTessera(f.dir, "bill --usage ledger.jsonl --plan plan.yaml");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("\nNot complete: observed 2026-11-01T00:00:00Z to 2026-11-01T03:00:00Z (3 of 720 "
                                   "hours); idle capacity and reservations are billed for those hours only\n"));
  EXPECT_THAT(table.out, HasSubstr("\nNote: reservation ghost/A100-80GB not billed: tenant ghost does not exist\n"));
}

TEST(BillCli, BadLedgerAndBadPlanListEveryProblemAndExit2) {
  const std::string bad_ledger = std::string(kLedger) +
                                 R"({"tenant":"vision","node":"n1","gpu":"0","model":"A100-80GB","partition":"share","workload":"j1","seq":2,"start":"2026-11-01T00:30:00Z","end":"2026-11-01T01:30:00Z","gpu_milli_s_allocated":1,"gpu_milli_s_used":0})"
                                 "\n{oops\n";
  Files f(bad_ledger, "prices:\n  H999: {gpu_hour: 1}\n  A100-80GB: {gpu_hour: -1, colour: red}\n");
  auto r = RunTessera(f.dir, "bill --usage ledger.jsonl --plan plan.yaml -o json");
  EXPECT_FALSE(r.Crashed());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_THAT(r.err, StartsWith("tessera bill: "));
  EXPECT_THAT(r.err, HasSubstr("ledger.jsonl:6: overlaps seq 1 of the same source"));
  EXPECT_THAT(r.err, HasSubstr("ledger.jsonl:7: not a JSON object"));
  EXPECT_THAT(r.err, HasSubstr("plan.yaml:2: prices: unknown GPU model 'H999'"));
  EXPECT_THAT(r.err, HasSubstr("plan.yaml:3: prices.A100-80GB.gpu_hour: negative price -1"));
  EXPECT_THAT(r.err, HasSubstr("plan.yaml:3: prices.A100-80GB: unknown key 'colour'"));
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("INVALID_ARGUMENT")));

  Files missing(kLedger, "prices:\n  A10: {gpu_hour: 1}\n");
  auto m = RunTessera(missing.dir, "bill --usage ledger.jsonl --plan plan.yaml");
  EXPECT_EQ(m.exit_code, 2);
  EXPECT_THAT(m.err, HasSubstr("prices.A100-80GB.mig.3g.40gb"));

  Files ok;
  testing::ExpectOneLineBadInput(RunTessera(ok.dir, "bill --usage nope.jsonl --plan plan.yaml"), "--usage: cannot read 'nope.jsonl'");
  testing::ExpectOneLineBadInput(RunTessera(ok.dir, "bill --usage ledger.jsonl --plan plan.yaml --period 2026-13"), "--period");
  testing::ExpectOneLineBadInput(RunTessera(ok.dir, "bill --usage ledger.jsonl --plan plan.yaml -o xml"), "xml");
}

TEST(BillCli, TheShippedExampleBills) {
  TempDir dir;
  const std::string data = std::string(TESSERA_SOURCE_DIR) + "/data/examples/";
  auto r = testing::RunCommand("gzip -dc '" + data + "ledger-default-week.jsonl.gz' | '" + std::string(TESSERA_BINARY) +
                                   "' bill --usage - --plan '" + data + "price-plan.yaml' --period 2026-11-01..2026-11-08 -o json",
                               dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["period"], "2026-11-01..2026-11-08");
  // The default quota file's 16 teams and the operator, who keeps the idle T4, V100M16, G3 and
  // P100 GPUs that no team held (the workload asks for no model: its jobs are metered on G2).
  EXPECT_EQ(j["invoices"].size(), 17u);
  int64_t sum = 0;
  for (const auto& inv : j["invoices"]) sum += inv["total_micro"].get<int64_t>();
  EXPECT_EQ(sum, j["metered_total_micro"].get<int64_t>());
  // The ledger carries the shared run's hourly SLA observations, so the plan's rule (a Guaranteed
  // p99 wait over 300 s gives 10 % back) credits the tenants whose worst hour in the week was over
  // it: app-18's was 8420 s, 10 % of its 1304.847554 before credits (README's bill).
  std::map<std::string, std::string> credits;
  for (const auto& inv : j["invoices"])
    for (const auto& line : inv["lines"])
      if (line["charge_category"] == "Credit") credits[inv["tenant"].get<std::string>()] = line["description"];
  EXPECT_EQ(credits.size(), 7u);
  EXPECT_EQ(credits["app-18"], "SLA credit: guaranteed_wait_p99_s 8420.000000 > 300.000000");
  EXPECT_FALSE(credits.contains("app-0"));  // its worst hour: no wait
  EXPECT_FALSE(credits.contains("operator"));
  // The table prints the credit line under the tenant's charges.
  auto table = RunTessera(dir, "bill --usage '" + data + "ledger-default-week.jsonl.gz' --plan '" + data +
                                   "price-plan.yaml' --period 2026-11-01..2026-11-08");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("  SLA credit: guaranteed_wait_p99_s 8420.000000 > 300.000000        10.000000 percent   "
                                   "           -130.484755\n"));
}

// Issue 31 item 8: the example plan's comment named a file that does not exist, and the example
// ledger's demand (74.85 G2 GPUs at its peak) exceeded the plan's capacity (32 G2).
TEST(BillCli, TheShippedExamplesFilesExistAndItsDemandFitsThePlansCapacity) {
  TempDir dir;
  const std::string root = std::string(TESSERA_SOURCE_DIR) + "/";
  const std::string plan = testing::ReadTextFile(root + "data/examples/price-plan.yaml");
  size_t named = 0;
  for (size_t at = plan.find("data/"); at != std::string::npos; at = plan.find("data/", at + 1)) {
    const std::string path = plan.substr(at, plan.find_first_of(" \n,;:)", at) - at);
    EXPECT_TRUE(std::filesystem::exists(root + path)) << "price-plan.yaml names " << path;
    ++named;
  }
  EXPECT_GE(named, 2u);
  const size_t g2 = plan.find("capacity: {G2: ");
  ASSERT_NE(g2, std::string::npos);
  const std::string gpus = plan.substr(g2 + 15, plan.find(',', g2) - g2 - 15);
  auto r = RunTessera(dir, "plan capacity --history '" + root + "data/examples/ledger-default-week.jsonl.gz' --horizon 7d "
                           "--capacity G2=" + gpus + " --json plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto j = nlohmann::json::parse(testing::ReadTextFile(dir.File("plan.json")));
  EXPECT_TRUE(j["warnings"].empty()) << j["warnings"];
  EXPECT_LE(j["models"][0]["peak_demand_gpus"].get<double>(), std::stod(gpus));
}

TEST(BillCli, ReadsTheShippedGzipLedgerDirectlyAsWhenPiped) {
  TempDir dir;
  const std::string data = std::string(TESSERA_SOURCE_DIR) + "/data/examples/";
  const std::string args = " --plan '" + data + "price-plan.yaml' --period 2026-11-01..2026-11-08 -o json";
  const std::string tessera = "'" + std::string(TESSERA_BINARY) + "'";
  auto piped = testing::RunCommand(
      "gzip -dc '" + data + "ledger-default-week.jsonl.gz' | " + tessera + " bill --usage -" + args, dir);
  ASSERT_EQ(piped.exit_code, 0) << piped.err;
  auto direct = RunTessera(dir, "bill --usage '" + data + "ledger-default-week.jsonl.gz'" + args);
  ASSERT_EQ(direct.exit_code, 0) << direct.err;
  EXPECT_EQ(direct.err, "");
  EXPECT_EQ(direct.out, piped.out);  // the same invoices, byte for byte
  EXPECT_EQ(nlohmann::json::parse(direct.out)["invoices"].size(), 17u);
  // Compressed bytes on standard input are read the same way.
  auto stdin_gz = testing::RunCommand("cat '" + data + "ledger-default-week.jsonl.gz' | " + tessera + " bill --usage -" + args, dir);
  ASSERT_EQ(stdin_gz.exit_code, 0) << stdin_gz.err;
  EXPECT_EQ(stdin_gz.out, piped.out);
}

TEST(BillCli, ABrokenGzipOrANonLedgerSaysWhatItIs) {
  TempDir dir;
  const std::string data = std::string(TESSERA_SOURCE_DIR) + "/data/examples/";
  WriteTextFile(dir.File("plan.yaml"), kPlan);
  ASSERT_EQ(testing::RunCommand("head -c 1000 '" + data + "ledger-default-week.jsonl.gz' > '" + dir.File("cut.jsonl.gz") + "'", dir)
                .exit_code,
            0);
  testing::ExpectOneLineBadInput(RunTessera(dir, "bill --usage cut.jsonl.gz --plan plan.yaml"),
                                 "tessera bill: cut.jsonl.gz: gzip data is truncated (the stream ends after 1000 of its bytes)");
  WriteTextFile(dir.File("usage.csv"), "tenant,hour,gpu_hours\nvision,2026-11-01T00:00:00Z,2\nnlp,2026-11-01T00:00:00Z,1\n");
  auto csv = RunTessera(dir, "bill --usage usage.csv --plan plan.yaml");
  EXPECT_EQ(csv.exit_code, 2);
  EXPECT_EQ(csv.err, "tessera bill: 1 problem in the ledger:\n  usage.csv:1: not a JSON object; it looks like CSV (commas, "
                     "no '{'), so the rest was not read\n");
}

TEST(BillCli, TheScenarioWritesALedgerThatBills) {
  TempDir dir;
  auto sim = RunTessera(dir, "simulate --scenario dedicated-vs-shared --days 0.02 --ledger out/ledger.jsonl --quiet");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const std::string ledger = testing::ReadTextFile(dir.File("out/ledger.jsonl"));
  EXPECT_THAT(ledger, StartsWith("{"));
  EXPECT_THAT(ledger, HasSubstr("\"start\":\"2026-11-01T00:00:00Z\""));
  WriteTextFile(dir.File("plan.yaml"), "prices:\n  G2: {gpu_hour: 2}\n  T4: {gpu_hour: 1}\n  V100M16: {gpu_hour: 1}\n  P100: {gpu_hour: 1}\n");
  auto bill = RunTessera(dir, "bill --usage out/ledger.jsonl --plan plan.yaml -o json");
  ASSERT_EQ(bill.exit_code, 0) << bill.err;
  EXPECT_GT(nlohmann::json::parse(bill.out)["metered_total_micro"].get<int64_t>(), 0);
  // --ledger belongs to the scenario.
  testing::ExpectOneLineBadInput(RunTessera(dir, "simulate --ledger x.jsonl"), "--ledger");
}

}  // namespace
}  // namespace tessera
