// Contract of `tessera anomalies`: the JSON shape of the issue, and exit 2 with file:line on bad
// input; `--score` runs NAB's scoring over a labelled corpus.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/cli_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::ExpectOneLineBadInput;
using testing::RunTessera;
using testing::TempDir;

const std::string kNab = std::string(TESSERA_SOURCE_DIR) + "/data/nab";

TEST(AnomaliesCli, WritesRowsAndFlaggedAnomalies) {
  TempDir dir;
  const CommandResult r = RunTessera(
      dir, "anomalies --input '" + kNab + "/data/artificialWithAnomaly/art_daily_jumpsup.csv' --json out.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(testing::ReadTextFile(dir.File("out.json")));
  EXPECT_EQ(j.at("rows").get<int>(), 4032);
  ASSERT_TRUE(j.at("anomalies").is_array());
  ASSERT_FALSE(j.at("anomalies").empty());
  for (const auto& a : j.at("anomalies")) {
    EXPECT_EQ(a.at("timestamp").get<std::string>().size(), 19u);
    EXPECT_GE(a.at("score").get<double>(), 0.5);
    EXPECT_LT(a.at("score").get<double>(), 1.0);
    EXPECT_TRUE(a.contains("reason"));
  }
  // The labelled jump (window 2014-04-10 16:15 .. 2014-04-12 01:45) is among the flags.
  bool in_window = false;
  for (const auto& a : j.at("anomalies")) {
    const std::string t = a.at("timestamp").get<std::string>();
    in_window |= t >= "2014-04-10 16:15:00" && t <= "2014-04-12 01:45:00";
  }
  EXPECT_TRUE(in_window) << j.dump();
}

TEST(AnomaliesCli, BadInputIsFileLineAndExitTwo) {
  TempDir dir;
  testing::WriteTextFile(dir.File("ts.csv"), "timestamp,value\n2015-02-26 21:42:53,1\n2015-02-26 25:00:00,2\n");
  ExpectOneLineBadInput(RunTessera(dir, "anomalies --input ts.csv --json o.json"),
                        "tessera anomalies: ts.csv:3: timestamp '2015-02-26 25:00:00' is not a valid date");
  testing::WriteTextFile(dir.File("v.csv"), "timestamp,value\n2015-02-26 21:42:53,12x\n");
  ExpectOneLineBadInput(RunTessera(dir, "anomalies --input v.csv --json o.json"),
                        "tessera anomalies: v.csv:2: value '12x' is not a finite number");
  testing::WriteTextFile(dir.File("h.csv"), "ts,value\n2015-02-26 21:42:53,1\n");
  ExpectOneLineBadInput(RunTessera(dir, "anomalies --input h.csv --json o.json"),
                        "tessera anomalies: h.csv:1: header is 'ts,value', expected 'timestamp,value'");
  ExpectOneLineBadInput(RunTessera(dir, "anomalies --input missing.csv"), "cannot read 'missing.csv'");
  ExpectOneLineBadInput(RunTessera(dir, "anomalies --input h.csv --set bogus=1"), "unknown option 'bogus'");
  EXPECT_FALSE(std::filesystem::exists(dir.File("o.json")));
}

TEST(AnomaliesCli, AcceptsStepsBackDuplicatesAndGapsAndSaysSoOnce) {
  TempDir dir;
  const std::string text = "timestamp,value\n2015-02-26 10:00:00,1\n2015-02-26 10:05:00,2\n2015-02-26 10:05:00,9\n"
                     "2015-02-26 09:10:00,3\n2015-02-26 09:15:00,4\n2015-02-26 10:15:00,5\n";
  testing::WriteTextFile(dir.File("clock.csv"), text);
  const CommandResult r = RunTessera(dir, "anomalies --input clock.csv --json out.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err,
            "tessera anomalies: clock.csv: 1 step back in time (largest 55 min, at line 5), 1 duplicate timestamp "
            "(first value kept, not scored twice, first at line 4), 1 gap longer than twice the usual 5 min spacing "
            "(largest 1 h, at line 7)\n");
  const nlohmann::json j = nlohmann::json::parse(testing::ReadTextFile(dir.File("out.json")));
  EXPECT_EQ(j.at("rows").get<int>(), 5);  // six rows, the duplicate scored once

  // The same series gzip-compressed reads the same; a series without irregularities says nothing.
  ASSERT_EQ(testing::RunCommand("gzip -c '" + dir.File("clock.csv") + "' > '" + dir.File("clock.csv.gz") + "'", dir)
                .exit_code,
            0);
  const CommandResult gz = RunTessera(dir, "anomalies --input clock.csv.gz --json gz.json");
  ASSERT_EQ(gz.exit_code, 0) << gz.err;
  EXPECT_THAT(gz.err, HasSubstr("clock.csv.gz: 1 step back in time"));
  EXPECT_EQ(testing::ReadTextFile(dir.File("gz.json")), testing::ReadTextFile(dir.File("out.json")));
  testing::WriteTextFile(dir.File("plain.csv"), "timestamp,value\n2015-02-26 10:00:00,1\n2015-02-26 10:05:00,2\n");
  const CommandResult plain = RunTessera(dir, "anomalies --input plain.csv --json p.json");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.err, "");
}

TEST(AnomaliesCli, ScoresACorpusWithNabsRules) {
  // A two-file corpus: one file without windows, one with.
  TempDir dir;
  testing::WriteTextFile(dir.File("labels.json"),
                         R"({"artificialNoAnomaly/art_daily_no_noise.csv": [],
                             "artificialWithAnomaly/art_daily_jumpsup.csv": [["2014-04-10 16:15:00.000000",
                                                                              "2014-04-12 01:45:00.000000"]]})");
  const CommandResult r = RunTessera(dir, "anomalies --score --data-dir '" + kNab +
                                              "/data' --labels labels.json --json score.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NAB standard profile"));
  const nlohmann::json j = nlohmann::json::parse(testing::ReadTextFile(dir.File("score.json")));
  EXPECT_EQ(j.at("null").get<double>(), -1.0);
  EXPECT_EQ(j.at("perfect").get<double>(), 1.0);
  EXPECT_EQ(j.at("files").size(), 2u);
  EXPECT_GT(j.at("score").get<double>(), 50.0);  // the jump is found, early in its window
  EXPECT_TRUE(j.at("threshold_swept").get<bool>());
  // A labels file naming a timestamp that is not a row is bad input.
  testing::WriteTextFile(dir.File("bad.json"),
                         R"({"artificialWithAnomaly/art_daily_jumpsup.csv": [["2014-04-10 16:16:00", "2014-04-12 01:45:00"]]})");
  ExpectOneLineBadInput(
      RunTessera(dir, "anomalies --score --data-dir '" + kNab + "/data' --labels bad.json"),
      "art_daily_jumpsup.csv: window 1 [2014-04-10 16:16:00, 2014-04-12 01:45:00]: a limit is not the timestamp");
}

}  // namespace
}  // namespace tessera
