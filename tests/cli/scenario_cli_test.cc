// Contract of `tessera simulate --scenario dedicated-vs-shared`: the JSON shape the
// multi-tenancy issue asks for, determinism, and exit 2 with every problem listed on a bad quota
// file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "tessera/sim/report_charts.h"
#include "tests/testing/cli_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::RunTessera;
using testing::TempDir;

TEST(ScenarioCli, WritesBothModesWithTheIssuesFields) {
  TempDir dir;
  CommandResult r = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --json a.json --html a.html");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("dedicated vs shared"));
  const nlohmann::json j = nlohmann::json::parse(testing::ReadTextFile(dir.File("a.json")));
  for (const char* mode : {"dedicated", "shared"}) {
    const auto& m = j.at(mode);
    for (const char* k : {"gpu_allocation_pct", "jobs_completed", "wait_seconds_p50", "wait_seconds_p99",
                          "jain_fairness", "guarantee_violations", "preemptions", "wait_by_qos"})
      EXPECT_TRUE(m.contains(k)) << mode << "." << k;
    EXPECT_GT(m.at("jobs_completed").get<int>(), 0);
    EXPECT_GE(m.at("gpu_allocation_pct").get<double>(), 0.0);
    EXPECT_LE(m.at("gpu_allocation_pct").get<double>(), 100.0);
  }
  EXPECT_EQ(j.at("dedicated").at("preemptions").get<int>(), 0);
  // The fairness breakdown: the loss by smallest waiting job adds up to 100 % when there is a
  // loss, and every leaf tenant has a row.
  for (const char* mode : {"dedicated", "shared"}) {
    const auto& m = j.at(mode);
    ASSERT_LT(m.at("jain_fairness").get<double>(), 1.0) << mode;
    double loss = 0;
    for (const auto& [bucket, v] : m.at("jain_loss_pct_by_smallest_waiting_job").items()) loss += v.get<double>();
    EXPECT_NEAR(loss, 100.0, 1e-6) << mode;
    EXPECT_EQ(m.at("fairness_by_tenant").size(), 16u) << mode;
  }
  // Job kinds: LS pods are services by default; waste and preemptions split by kind in the
  // JSON (adding up to the totals), the text and the HTML; useful = raw - waste.
  EXPECT_EQ(j.at("scenario").at("service_qos"), "LS");
  EXPECT_EQ(j.at("scenario").at("service_startup_s").get<int>(), 60);
  EXPECT_GT(j.at("scenario").at("service_jobs").get<int>(), 0);
  {
    const auto& s = j.at("shared");
    int64_t n = 0;
    double wasted = 0;
    for (const char* kind : {"batch", "service"}) {
      n += s.at("preemptions_by_kind").at(kind).get<int64_t>();
      wasted += s.at("gpu_allocation_wasted_pct_by_kind").at(kind).get<double>();
    }
    EXPECT_EQ(n, s.at("preemptions").get<int64_t>());
    EXPECT_NEAR(wasted, s.at("gpu_allocation_wasted_pct").get<double>(), 1e-9);
    EXPECT_GT(s.at("preemptions_by_kind").at("service").get<int64_t>(), 0);
    EXPECT_NEAR(s.at("gpu_allocation_useful_pct").get<double>(),
                s.at("gpu_allocation_pct").get<double>() - s.at("gpu_allocation_wasted_pct").get<double>(), 1e-9);
  }
  EXPECT_TRUE(j.at("checks").contains("useful_allocation_1_5x"));
  EXPECT_THAT(r.out, HasSubstr("preempting service jobs"));
  EXPECT_THAT(r.out, HasSubstr("useful allocation >= 1.5x dedicated"));
  const std::string page = testing::ReadTextFile(dir.File("a.html"));
  EXPECT_THAT(page, HasSubstr("preemptions of service jobs"));
  EXPECT_THAT(page, HasSubstr(sim::ReportChartsUseUplot() ? "id='chart-" : "<svg"));  // uPlot or static SVG
  EXPECT_THAT(page, HasSubstr("Mean wait per tenant"));
  EXPECT_THAT(page, HasSubstr("Where Jain's fairness loses"));
  // The same seed gives the same numbers.
  ASSERT_EQ(RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --json b.json").exit_code, 0);
  nlohmann::json j2 = nlohmann::json::parse(testing::ReadTextFile(dir.File("b.json")));
  for (const char* mode : {"dedicated", "shared"}) {
    j2[mode].erase("wall_seconds");
    nlohmann::json a = j[mode];
    a.erase("wall_seconds");
    EXPECT_EQ(a, j2[mode]) << mode;
  }
}

TEST(ScenarioCli, ReportsWasteTheBoundAndCheckpoints) {
  TempDir dir;
  ASSERT_EQ(RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --json a.json").exit_code, 0);
  CommandResult r = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --checkpoint-interval 3600 --json c.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("allocation upper bound"));
  const nlohmann::json a = nlohmann::json::parse(testing::ReadTextFile(dir.File("a.json")));
  const nlohmann::json c = nlohmann::json::parse(testing::ReadTextFile(dir.File("c.json")));
  // The bound is a property of the workload and the cluster: the same with checkpoints.
  const double bound = a.at("allocation_upper_bound_pct").get<double>();
  EXPECT_GT(bound, 0.0);
  EXPECT_LE(bound, 100.0);
  EXPECT_EQ(bound, c.at("allocation_upper_bound_pct").get<double>());
  EXPECT_EQ(a.at("dedicated").at("gpu_allocation_wasted_pct").get<double>(), 0.0);
  EXPECT_GT(a.at("shared").at("gpu_allocation_wasted_pct").get<double>(), 0.0);
  // Hourly checkpoints keep most of what preemption would throw away.
  EXPECT_LT(c.at("shared").at("gpu_allocation_wasted_pct").get<double>(),
            a.at("shared").at("gpu_allocation_wasted_pct").get<double>() / 2);
  EXPECT_EQ(c.at("scenario").at("checkpoint_interval_s").get<int>(), 3600);
  EXPECT_EQ(RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --checkpoint-interval -1").exit_code, 2);
  EXPECT_EQ(RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --service-startup -1").exit_code, 2);
  CommandResult bad = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --service-qos LS,,BE");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("service qos 'LS,,BE': an empty label"));
}

TEST(ScenarioCli, TheFairShareRuleIsAnOption) {
  TempDir dir;
  ASSERT_EQ(RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --json a.json").exit_code, 0);
  CommandResult r = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --fair-share-rule equalize "
                                    "--no-fair-share-defrag --json e.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json a = nlohmann::json::parse(testing::ReadTextFile(dir.File("a.json")));
  const nlohmann::json e = nlohmann::json::parse(testing::ReadTextFile(dir.File("e.json")));
  EXPECT_EQ(a.at("scenario").at("fair_share_rule"), "lexicographic");
  EXPECT_EQ(e.at("scenario").at("fair_share_rule"), "equalize");
  EXPECT_EQ(e.at("scenario").at("fair_share_defrag"), false);
  // The equalize rule never lets a job larger than its tenant's fair share preempt: fewer
  // preemptions on the same workload (the dedicated mode does not preempt at all).
  EXPECT_LT(e.at("shared").at("preemptions").get<int>(), a.at("shared").at("preemptions").get<int>());
  nlohmann::json ad = a.at("dedicated"), ed = e.at("dedicated");
  ad.erase("wall_seconds");
  ed.erase("wall_seconds");
  EXPECT_EQ(ad, ed);
  CommandResult bad = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --fair-share-rule fifo");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--fair-share-rule"));
}

TEST(ScenarioCli, TenantsCanFollowTheApplicationsArrivals) {
  TempDir dir;
  ASSERT_EQ(RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --json a.json").exit_code, 0);
  CommandResult r = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --tenant-arrivals app-profile --json p.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json a = nlohmann::json::parse(testing::ReadTextFile(dir.File("a.json")));
  const nlohmann::json p = nlohmann::json::parse(testing::ReadTextFile(dir.File("p.json")));
  EXPECT_EQ(a.at("scenario").at("tenant_arrivals"), "skew");
  EXPECT_EQ(p.at("scenario").at("tenant_arrivals"), "app-profile");
  // The same pods arrive at the same times; only who submits them changes.
  EXPECT_EQ(a.at("scenario").at("jobs"), p.at("scenario").at("jobs"));
  EXPECT_NE(a.at("dedicated").at("mean_wait_seconds_by_tenant"), p.at("dedicated").at("mean_wait_seconds_by_tenant"));
  // Preemptions and the allocation they threw away add up over their causes.
  for (const nlohmann::json* j : {&a, &p}) {
    const nlohmann::json& s = j->at("shared");
    int64_t n = 0;
    double wasted = 0;
    for (const char* cause : {"reclaim", "fair_share", "restart_move"}) {
      n += s.at("preemptions_by_cause").at(cause).get<int64_t>();
      wasted += s.at("gpu_allocation_wasted_pct_by_cause").at(cause).get<double>();
    }
    EXPECT_EQ(n, s.at("preemptions").get<int64_t>());
    EXPECT_NEAR(wasted, s.at("gpu_allocation_wasted_pct").get<double>(), 1e-9);
    EXPECT_GT(s.at("preemptions_by_cause").at("fair_share").get<int64_t>(), 0);
  }
  CommandResult bad = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --tenant-arrivals hourly");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--tenant-arrivals"));
}

TEST(ScenarioCli, BadQuotaFileListsEveryProblemAndExitsTwo) {
  TempDir dir;
  std::ofstream(dir.File("bad.yaml")) << "tenants:\n"
                                         "  - name: a\n    parent: b\n"
                                         "  - name: b\n    parent: a\n"
                                         "  - name: c\n    guaranteed: {gpu_milli: -1}\n"
                                         "  - name: d\n    parent: ghost\n";
  CommandResult r = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --quotas bad.yaml");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("3 problem(s)"));
  EXPECT_THAT(r.err, HasSubstr("cycle"));
  EXPECT_THAT(r.err, HasSubstr("bad.yaml:7: tenant 'c' guaranteed.gpu_milli: negative quantity -1"));
  EXPECT_THAT(r.err, HasSubstr("unknown parent 'ghost'"));
  std::ofstream(dir.File("big.yaml")) << "tenants:\n  - name: a\n    guaranteed: {gpu_milli: 99000000}\n";
  r = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --quotas big.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("guarantees over capacity"));
  r = RunTessera(dir, "simulate --scenario no-such-thing -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("known: dedicated-vs-shared"));
  r = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --quotas /nonexistent.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot read quota file"));
}

TEST(ScenarioCli, TheReportHasInvoiceAnomalyAndForecastSections) {
  // The HTML report bills the scenario's ledger (one invoice row per tenant in it), runs the
  // anomaly detector over each tenant's hourly GPUs and forecasts the demand with its interval.
  // Failed before: the page had none of the three sections.
  TempDir dir;
  CommandResult r = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --html r.html --ledger l.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string page = testing::ReadTextFile(dir.File("r.html"));
  const size_t invoices = page.find("<h2 id=\"invoices\">"), anomalies = page.find("<h2 id=\"anomalies\">"),
               forecast = page.find("<h2 id=\"forecast\">");
  ASSERT_NE(invoices, std::string::npos);
  ASSERT_NE(anomalies, std::string::npos);
  ASSERT_NE(forecast, std::string::npos);
  EXPECT_LT(invoices, anomalies);
  EXPECT_LT(anomalies, forecast);
  const std::string invoice_part = page.substr(invoices, anomalies - invoices);
  EXPECT_THAT(invoice_part, HasSubstr("Invoices per tenant (2026-11, USD)"));
  EXPECT_THAT(invoice_part, HasSubstr("metered total"));
  std::ifstream ledger(dir.File("l.jsonl"));
  std::set<std::string> tenants;
  size_t sla_lines = 0;
  for (std::string line; std::getline(ledger, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j.contains("tenant")) tenants.insert(j.at("tenant").get<std::string>());
    if (j.value("type", "") == "sla") {  // the shared run's hourly SLA observations (issue 36)
      ++sla_lines;
      EXPECT_EQ(j.at("metric"), "guaranteed_wait_p99_s");
      EXPECT_TRUE(j.contains("hour")) << line;
    }
  }
  ASSERT_GT(tenants.size(), 3u);
  EXPECT_GT(sla_lines, 0u);
  for (const std::string& t : tenants) EXPECT_THAT(invoice_part, HasSubstr("<tr><td>" + t + "</td>")) << t;
  // The example plan's SLA rule credits a tenant whose Guaranteed p99 wait was over 300 s in an hour.
  EXPECT_THAT(invoice_part, ::testing::ContainsRegex("</td><td>-[0-9]+\\.[0-9]{6}</td><td>"));
  // The timeline and the forecast are charts like the report's others: a uPlot place (or, in a
  // build without npm, the static SVG) in their section, their data in the page's JSON.
  const std::string anomaly_part = page.substr(anomalies, forecast - anomalies);
  const bool uplot = page.find("data-charts-rendered") != std::string::npos;
  EXPECT_THAT(anomaly_part, HasSubstr(uplot ? "<div id='chart-anomalies'>" : "<svg"));
  EXPECT_THAT(anomaly_part, HasSubstr(" flag(s) over " + std::to_string(tenants.size()) + " tenants and 168 hours"));
  const std::string forecast_part = page.substr(forecast);
  EXPECT_THAT(forecast_part, HasSubstr("next 48 hours"));
  EXPECT_THAT(forecast_part, HasSubstr(uplot ? "<div id='chart-forecast'>" : "<polygon class=\"interval\""));
  EXPECT_THAT(forecast_part, HasSubstr("Forecast peak "));
  const std::string open = "<script type='application/json' id='tessera-report-data'>";
  const size_t data_at = page.find(open);
  ASSERT_NE(data_at, std::string::npos);
  const nlohmann::json data =
      nlohmann::json::parse(page.substr(data_at + open.size(), page.find("</script>", data_at) - data_at - open.size()));
  std::map<std::string, nlohmann::json> charts;
  for (const nlohmann::json& c : data.at("charts")) charts[c.at("id").get<std::string>()] = c;
  ASSERT_TRUE(charts.contains("anomalies"));
  ASSERT_TRUE(charts.contains("forecast"));
  const nlohmann::json& timeline = charts["anomalies"];
  EXPECT_EQ(timeline.at("x_unit"), "h");
  EXPECT_EQ(timeline.at("y_unit"), "GPUs");
  ASSERT_EQ(timeline.at("series").size(), tenants.size() + 1);  // a line per tenant, then the flags
  EXPECT_EQ(timeline.at("series").back().at("name"), "flags");
  EXPECT_EQ(timeline.at("series").back().at("points_only"), true);
  EXPECT_EQ(timeline.at("x").size(), 168u);
  EXPECT_EQ(charts["forecast"].at("x").size(), 168u + 48u);
  EXPECT_EQ(charts["forecast"].at("bands"), nlohmann::json::parse("[[2,3]]"));
  // A plan that cannot be read, or does not price the ledger's models, is bad input naming it.
  CommandResult bad = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --html x.html --price-plan none.yaml");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--price-plan: cannot read 'none.yaml'"));
  std::ofstream(dir.File("plan.yaml")) << "currency: USD\nprices:\n  T4: {gpu_hour: 0.35}\n";
  bad = RunTessera(dir, "simulate --scenario dedicated-vs-shared -q --html x.html --price-plan plan.yaml");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("plan.yaml"));
  EXPECT_THAT(bad.err, HasSubstr("G2"));
}

}  // namespace
}  // namespace tessera
