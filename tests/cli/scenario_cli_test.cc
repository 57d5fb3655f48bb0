// Contract of `tessera simulate --scenario dedicated-vs-shared`: the JSON shape the
// multi-tenancy issue asks for, and exit 2 with every problem listed on a bad quota file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

using ::testing::HasSubstr;

struct CliRun {
  int code;
  std::string out;
};

CliRun Tessera(const std::string& args) {
  const std::string cmd = std::string(TESSERA_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WEXITSTATUS(status), out};
}

TEST(ScenarioCli, WritesBothModesWithTheIssuesFields) {
  const std::string json = ::testing::TempDir() + "/scenario.json";
  const std::string html = ::testing::TempDir() + "/scenario.html";
  CliRun r = Tessera("simulate --scenario dedicated-vs-shared -q --json " + json + " --html " + html);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("dedicated vs shared"));
  std::ifstream in(json);
  const nlohmann::json j = nlohmann::json::parse(in);
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
  std::ifstream h(html);
  std::string page((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
  EXPECT_THAT(page, HasSubstr("<svg"));
  EXPECT_THAT(page, HasSubstr("Mean wait per tenant"));
  // The same seed gives the same numbers.
  const std::string json2 = ::testing::TempDir() + "/scenario2.json";
  ASSERT_EQ(Tessera("simulate --scenario dedicated-vs-shared -q --json " + json2).code, 0);
  std::ifstream in2(json2);
  nlohmann::json j2 = nlohmann::json::parse(in2);
  for (const char* mode : {"dedicated", "shared"}) {
    j2[mode].erase("wall_seconds");
    nlohmann::json a = j[mode];
    a.erase("wall_seconds");
    EXPECT_EQ(a, j2[mode]) << mode;
  }
}

TEST(ScenarioCli, BadQuotaFileListsEveryProblemAndExitsTwo) {
  const std::string path = ::testing::TempDir() + "/bad-quotas.yaml";
  std::ofstream(path) << "tenants:\n"
                         "  - name: a\n    parent: b\n"
                         "  - name: b\n    parent: a\n"
                         "  - name: c\n    guaranteed: {gpu_milli: -1}\n"
                         "  - name: d\n    parent: ghost\n";
  CliRun r = Tessera("simulate --scenario dedicated-vs-shared -q --quotas " + path);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_THAT(r.out, HasSubstr("3 problem(s)"));
  EXPECT_THAT(r.out, HasSubstr("cycle"));
  EXPECT_THAT(r.out, HasSubstr("negative quantity -1"));
  EXPECT_THAT(r.out, HasSubstr("unknown parent 'ghost'"));
  // Guarantees over the cluster's capacity.
  std::ofstream(path) << "tenants:\n  - name: a\n    guaranteed: {gpu_milli: 99000000}\n";
  r = Tessera("simulate --scenario dedicated-vs-shared -q --quotas " + path);
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("guarantees over capacity"));
  r = Tessera("simulate --scenario no-such-thing -q");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("known: dedicated-vs-shared"));
  r = Tessera("simulate --scenario dedicated-vs-shared -q --quotas /nonexistent.yaml");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, HasSubstr("cannot read quota file"));
}

}  // namespace
