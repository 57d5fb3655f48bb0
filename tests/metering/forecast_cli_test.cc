// Contract of `tessera forecast` (the JSON shape of the issue, --backtest) and `tessera plan
// capacity`: good input, and exit 2 with file:line (or the flag) on bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/cli_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::CommandResult;
using testing::ExpectOneLineBadInput;
using testing::RunTessera;
using testing::TempDir;

const std::string kDemand = std::string(TESSERA_SOURCE_DIR) + "/data/forecast/trace-demand.csv";

// Two series of `hours` hourly rows from 2026-11-01T00:00:00Z: a daily cycle, and a constant.
std::string SeriesCsv(int hours) {
  std::string csv = "series,timestamp,value\n";
  char line[128];
  for (int s = 0; s < 2; ++s) {
    for (int h = 0; h < hours; ++h) {
      std::snprintf(line, sizeof line, "%s,2026-11-%02dT%02d:00:00Z,%.3f\n", s == 0 ? "gpus/A100" : "flat", 1 + h / 24,
                    h % 24, s == 0 ? 10 + 5 * std::sin(2 * M_PI * h / 24) : 3.0);
      csv += line;
    }
  }
  return csv;
}

TEST(ForecastCli, WritesOneForecastPerSeries) {
  TempDir dir;
  testing::WriteTextFile(dir.File("in.csv"), SeriesCsv(24 * 20));
  const CommandResult r = RunTessera(dir, "forecast --input in.csv --horizon 30 --json out.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(testing::ReadTextFile(dir.File("out.json")));
  ASSERT_EQ(j.at("forecasts").size(), 2u);
  EXPECT_EQ(j["forecasts"][0].at("series"), "gpus/A100");
  EXPECT_EQ(j["forecasts"][1].at("series"), "flat");
  ASSERT_EQ(j["forecasts"][0].at("values").size(), 30u);
  // The cycle continues: hour 6 of a day is the peak (15), hour 18 the trough (5).
  EXPECT_NEAR(j["forecasts"][0]["values"][6].get<double>(), 15, 0.5);
  EXPECT_NEAR(j["forecasts"][0]["values"][18].get<double>(), 5, 0.5);
  EXPECT_NEAR(j["forecasts"][1]["values"][29].get<double>(), 3, 1e-9);
  EXPECT_FALSE(j["forecasts"][0].contains("lower"));
  // --interval adds the bounds.
  const CommandResult ri = RunTessera(dir, "forecast --input in.csv --horizon 5 --interval --json -");
  ASSERT_EQ(ri.exit_code, 0) << ri.err;
  const nlohmann::json ji = nlohmann::json::parse(ri.out);
  EXPECT_EQ(ji["forecasts"][0].at("upper").size(), 5u);
  EXPECT_LE(ji["forecasts"][0]["lower"][0].get<double>(), ji["forecasts"][0]["values"][0].get<double>());
}

TEST(ForecastCli, BadInputListsEveryProblemAndExitsTwo) {
  TempDir dir;
  testing::WriteTextFile(dir.File("bad.csv"),
                         "series,timestamp,value\na,2026-11-01T00:00:00Z,1\na,2026-11-01T02:00:00Z,x\n");
  const CommandResult r = RunTessera(dir, "forecast --input bad.csv --horizon 3 --json o.json");
  EXPECT_FALSE(r.Crashed());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("tessera forecast: bad.csv:3: value 'x' is not a finite number\n"
                               "bad.csv:3: timestamp '2026-11-01T02:00:00Z' is not one hour after"));
  EXPECT_FALSE(std::filesystem::exists(dir.File("o.json")));
  ExpectOneLineBadInput(RunTessera(dir, "forecast --input missing.csv --horizon 3"), "cannot read 'missing.csv'");
  testing::WriteTextFile(dir.File("ok.csv"), SeriesCsv(48));
  ExpectOneLineBadInput(RunTessera(dir, "forecast --input ok.csv"), "tessera forecast: --horizon: give 1 .. 8784 hours");
  ExpectOneLineBadInput(RunTessera(dir, "forecast --horizon 3"), "--input IN.csv is required");
}

TEST(ForecastCli, BacktestPrintsOwaAgainstNaive2AndSeasonalNaive) {
  TempDir dir;
  const CommandResult r =
      RunTessera(dir, "forecast --backtest --input '" + kDemand + "' --horizon 48 --holdout 96 --json bt.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("openb/gpus"));
  EXPECT_THAT(r.out, HasSubstr("OWA against Naive2: tessera"));
  const nlohmann::json j = nlohmann::json::parse(testing::ReadTextFile(dir.File("bt.json")));
  EXPECT_EQ(j.at("series").size(), 13u);
  EXPECT_EQ(j["series"][0].at("windows").get<int>(), 2);
  EXPECT_GT(j.at("owa").get<double>(), 0);
  EXPECT_LT(j.at("owa").get<double>(), j.at("owa_snaive").get<double>());
}

// One whole A100 per gpus(h) held through hour h.
std::string Ledger(int hours) {
  std::string out;
  char line[512];
  for (int h = 0; h < hours; ++h) {
    const int gpus = static_cast<int>(std::lround(6 + 3 * std::sin(2 * M_PI * h / 24) + h / 168.0));
    for (int g = 0; g < gpus; ++g) {
      std::snprintf(line, sizeof line,
                    "{\"tenant\":\"t\",\"node\":\"n\",\"gpu\":\"%d\",\"model\":\"A100-80GB\",\"partition\":\"whole\","
                    "\"workload\":\"w%d\",\"seq\":%d,\"start\":\"2026-11-%02dT%02d:00:00Z\",\"end\":\"2026-11-%02dT%02d:"
                    "59:59Z\",\"gpu_milli_s_allocated\":3599000,\"gpu_milli_s_used\":0}\n",
                    g, g, h + 1, 1 + h / 24, h % 24, 1 + h / 24, h % 24);
      out += line;
    }
  }
  return out;
}

TEST(PlanCapacityCli, SaysWhenAndHowManyPerModel) {
  TempDir dir;
  testing::WriteTextFile(dir.File("ledger.jsonl"), Ledger(24 * 21));
  const CommandResult r =
      RunTessera(dir, "plan capacity --history ledger.jsonl --horizon 90d --capacity A100-80GB=12 --json plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("A100-80GB: 504 hours of history from 2026-11-01T00:00:00Z"));
  EXPECT_THAT(r.out, HasSubstr("capacity 12 GPUs (given)"));
  EXPECT_THAT(r.out, HasSubstr("backtest of this forecast"));
  const nlohmann::json j = nlohmann::json::parse(testing::ReadTextFile(dir.File("plan.json")));
  ASSERT_EQ(j.at("models").size(), 1u);
  const nlohmann::json& m = j["models"][0];
  EXPECT_EQ(m.at("daily_peak_gpus").size(), 90u);
  EXPECT_EQ(m.at("capacity_gpus").get<double>(), 12);
  EXPECT_GT(m.at("gpus_to_add").get<int>(), 0);
  EXPECT_TRUE(m.at("first_exceed_upper").is_string());
  EXPECT_TRUE(m.at("backtest").at("smape").is_number());
  // No --capacity: the peak seen, said so.
  const CommandResult seen = RunTessera(dir, "plan capacity --history ledger.jsonl --horizon 2w");
  ASSERT_EQ(seen.exit_code, 0) << seen.err;
  EXPECT_THAT(seen.out, HasSubstr("none given: the peak hourly demand seen in the ledger"));
}

// Demand above the given capacity: a warning on stderr and in the JSON (issue 31, item 8).
TEST(PlanCapacityCli, WarnsWhenTheLedgersDemandExceedsTheGivenCapacity) {
  TempDir dir;
  testing::WriteTextFile(dir.File("ledger.jsonl"), Ledger(24 * 21));
  const CommandResult r =
      RunTessera(dir, "plan capacity --history ledger.jsonl --horizon 2w --capacity A100-80GB=1 --json plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tessera plan capacity: warning: A100-80GB: the ledger's demand exceeds the given "
                               "capacity of 1 GPUs in "));
  const nlohmann::json j = nlohmann::json::parse(testing::ReadTextFile(dir.File("plan.json")));
  ASSERT_EQ(j.at("warnings").size(), 1u);
  EXPECT_THAT(j["warnings"][0].get<std::string>(), HasSubstr("A100-80GB: the ledger's demand exceeds"));
  EXPECT_GT(j["models"][0].at("hours_over_capacity").get<int>(), 0);
  EXPECT_EQ(j["models"][0].at("warning"), j["warnings"][0]);
  // Capacity enough: no warning.
  const CommandResult ok =
      RunTessera(dir, "plan capacity --history ledger.jsonl --horizon 2w --capacity A100-80GB=1000 --json plan.json");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.err, Not(HasSubstr("warning")));
  const nlohmann::json k = nlohmann::json::parse(testing::ReadTextFile(dir.File("plan.json")));
  EXPECT_TRUE(k.at("warnings").empty());
  EXPECT_TRUE(k["models"][0].at("warning").is_null());
  EXPECT_EQ(k["models"][0].at("hours_over_capacity"), 0);
}

TEST(PlanCapacityCli, BadInputExitsTwo) {
  TempDir dir;
  testing::WriteTextFile(dir.File("ledger.jsonl"), Ledger(30));
  ExpectOneLineBadInput(RunTessera(dir, "plan capacity --history ledger.jsonl --horizon 90x"),
                        "tessera plan capacity: --horizon: '90x' is not a number of days");
  ExpectOneLineBadInput(RunTessera(dir, "plan capacity --history ledger.jsonl --capacity A100-80GB"),
                        "--capacity: 'A100-80GB' is not MODEL=GPUS");
  ExpectOneLineBadInput(RunTessera(dir, "plan capacity --history ledger.jsonl --capacity B300=4"),
                        "--capacity: unknown GPU model 'B300'");
  ExpectOneLineBadInput(RunTessera(dir, "plan capacity --history missing.jsonl"), "cannot read 'missing.jsonl'");
  testing::WriteTextFile(dir.File("bad.jsonl"), "{\"tenant\":\"t\"}\n");
  const CommandResult r = RunTessera(dir, "plan capacity --history bad.jsonl");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("tessera plan capacity: 10 problems in the ledger:\n  bad.jsonl:1: node: missing\n"));
}

}  // namespace
}  // namespace tessera
