#include "tessera/sim/report_charts.h"
#include "tessera/sim/report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <nlohmann/json.hpp>

#include "tests/testing/sim_builders.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ReplayResult Run(const std::string& policy, uint64_t seed, double alloc100, double alloc130, double rate100) {
  ReplayResult r;
  r.policy = policy;
  r.seed = seed;
  r.pods_name = "openb_pod_list_default";
  r.tasks_arrived = 100;
  r.tasks_placed = 90;
  r.tasks_failed = 10;
  r.gpu_capacity_milli = 6'212'000;
  r.arrived_gpu_milli = 8'000'000;
  r.allocated_gpu_milli = 5'900'000;
  r.target_workload_types = 12;
  r.wall_seconds = 0.25;
  r.buckets.alloc_pct.assign(131, 50.0);
  r.buckets.frag_amount_pct.assign(131, 1.0);
  r.buckets.frag_rate_pct.assign(131, 10.0);
  r.buckets.alloc_pct[100] = alloc100;
  r.buckets.alloc_pct[130] = alloc130;
  r.buckets.frag_rate_pct[100] = rate100;
  return r;
}

std::vector<ReplayResult> SampleRuns() {
  return {Run("fgd", 42, 95.25, 95.5, 98.0), Run("fgd", 43, 95.0, kNaN, 97.0),
          Run("bestfit", 42, 92.0, 93.5, 99.0)};
}

// `word` in `text` with no letter on either side.
bool HasWord(const std::string& text, const std::string& word) {
  for (size_t p = text.find(word); p != std::string::npos; p = text.find(word, p + 1)) {
    const bool left = p > 0 && std::isalpha(static_cast<unsigned char>(text[p - 1]));
    const bool right = p + word.size() < text.size() && std::isalpha(static_cast<unsigned char>(text[p + word.size()]));
    if (!left && !right) return true;
  }
  return false;
}

const ArtifactReference& Bundled() {
  static const ArtifactReference ref =
      *LoadArtifactReference(testing::DataPath("alibaba-gpu-2023/expected/analysis_allo_discrete.csv"));
  return ref;
}

TEST(RenderJsonTest, HasTheContractKeys) {
  const std::vector<ReplayResult> runs = SampleRuns();
  const std::string text = RenderJson(runs, Summarize(runs), nullptr);
  nlohmann::json j = nlohmann::json::parse(text);  // throws (failing the test) if invalid
  ASSERT_TRUE(j.contains("runs"));
  ASSERT_TRUE(j["runs"].is_array());
  ASSERT_EQ(j["runs"].size(), 3u);
  const auto& r0 = j["runs"][0];
  EXPECT_EQ(r0["policy"], "fgd");
  EXPECT_EQ(r0["seed"], 42);
  EXPECT_EQ(r0["pods"], "openb_pod_list_default");
  EXPECT_DOUBLE_EQ(r0["unallocated_gpu_pct_at_100"].get<double>(), 4.75);
  EXPECT_DOUBLE_EQ(r0["unallocated_gpu_pct_at_130"].get<double>(), 4.5);
  EXPECT_DOUBLE_EQ(r0["frag_rate_pct_at_100"].get<double>(), 98.0);
  EXPECT_DOUBLE_EQ(r0["wall_seconds"].get<double>(), 0.25);
  EXPECT_EQ(r0["tasks_arrived"], 100);
  EXPECT_EQ(r0["tasks_failed"], 10);
  EXPECT_EQ(r0["gpu_capacity_milli"], 6'212'000);
  for (const auto& r : j["runs"]) {
    for (const char* key : {"policy", "seed", "pods", "unallocated_gpu_pct_at_100", "unallocated_gpu_pct_at_130",
                            "frag_rate_pct_at_100", "wall_seconds"}) {
      EXPECT_TRUE(r.contains(key)) << key;
    }
    EXPECT_TRUE(r["seed"].is_number_unsigned());
    EXPECT_TRUE(r["wall_seconds"].is_number());
  }
  EXPECT_EQ(j["runs"][2]["policy"], "bestfit");

  ASSERT_TRUE(j["summary"].is_array());
  ASSERT_EQ(j["summary"].size(), 2u);
  EXPECT_EQ(j["summary"][0]["policy"], "fgd");
  EXPECT_EQ(j["summary"][0]["runs"], 2);
  EXPECT_DOUBLE_EQ(j["summary"][0]["median_unallocated_gpu_pct_at_100"].get<double>(), 4.875);
  EXPECT_FALSE(j["summary"][0].contains("artifact_median_unallocated_gpu_pct_at_100"));
}

TEST(RenderJsonTest, NaNBecomesNull) {
  const std::vector<ReplayResult> runs = SampleRuns();
  ReplayResult empty;  // no buckets at all
  empty.policy = "random";
  empty.pods_name = "tiny";
  std::vector<ReplayResult> all = runs;
  all.push_back(empty);
  const std::string text = RenderJson(all, Summarize(all), nullptr);
  EXPECT_THAT(text, Not(HasSubstr("NaN")));
  EXPECT_THAT(text, Not(HasSubstr("nan")));
  nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_TRUE(j["runs"][1]["unallocated_gpu_pct_at_130"].is_null());
  EXPECT_TRUE(j["runs"][3]["unallocated_gpu_pct_at_100"].is_null());
  EXPECT_TRUE(j["runs"][3]["frag_rate_pct_at_100"].is_null());
  EXPECT_TRUE(j["summary"][2]["median_unallocated_gpu_pct_at_100"].is_null());
  EXPECT_TRUE(j["summary"][2]["min_unallocated_gpu_pct_at_100"].is_null());
}

TEST(RenderJsonTest, WithTheArtifactReference) {
  const std::vector<ReplayResult> runs = SampleRuns();
  nlohmann::json j = nlohmann::json::parse(RenderJson(runs, Summarize(runs), &Bundled()));
  const auto& fgd = j["summary"][0];
  ASSERT_TRUE(fgd.contains("artifact_median_unallocated_gpu_pct_at_100"));
  EXPECT_NEAR(fgd["artifact_median_unallocated_gpu_pct_at_100"].get<double>(), 4.77, 0.005);
  EXPECT_DOUBLE_EQ(fgd["tolerance_pct"].get<double>(), 0.3);
  EXPECT_EQ(fgd["within_tolerance"], true);  // 4.875 vs 4.77
  const auto& bestfit = j["summary"][1];
  EXPECT_EQ(bestfit["within_tolerance"], false);  // 8.0 vs 7.09
}

TEST(RenderHtmlTest, SelfContainedWithChartsAndPolicies) {
  const std::vector<ReplayResult> runs = SampleRuns();
  ReportInputs in;
  in.command = "tessera simulate --pods <mine>.csv";
  in.nodes_path = "nodes.csv";
  in.pods_paths = {"openb_pod_list_default.csv"};
  in.seeds = "42-43";
  in.node_count = 1213;
  in.gpu_count = 6212;
  const std::string html = RenderHtmlReport(Summarize(runs), in, &Bundled());
  EXPECT_THAT(html, HasSubstr("<!doctype html>"));
  EXPECT_THAT(html, HasSubstr(ReportChartsUseUplot() ? "id='chart-alloc-0'" : "<svg"));  // uPlot or static SVG
  EXPECT_THAT(html, HasSubstr("fgd"));
  EXPECT_THAT(html, HasSubstr("bestfit"));
  EXPECT_THAT(html, HasSubstr("openb_pod_list_default"));
  EXPECT_THAT(html, HasSubstr("1213 nodes, 6212 GPUs"));
  EXPECT_THAT(html, HasSubstr("&lt;mine&gt;"));  // escaped
  EXPECT_THAT(html, Not(HasSubstr("<mine>")));
  EXPECT_THAT(html, HasSubstr("</html>"));
  EXPECT_FALSE(HasWord(html, "nan"));
  EXPECT_FALSE(HasWord(html, "inf"));
  // Self-contained: the SVG namespace and uPlot's banner comment are the only URLs.
  std::string rest = html;
  for (size_t p; (p = rest.find("https://github.com/leeoniya/uPlot")) != std::string::npos;) rest.erase(p, 33);
  for (size_t p; (p = rest.find("http://www.w3.org/2000/svg")) != std::string::npos;) rest.erase(p, 26);
  EXPECT_THAT(rest, Not(HasSubstr("http")));
}

TEST(RenderHtmlTest, EscapesNamesInCharts) {
  std::vector<ReplayResult> runs = SampleRuns();
  for (auto& r : runs) r.pods_name = "a<b>&\"c\"";
  const std::string html = RenderHtmlReport(Summarize(runs), ReportInputs{}, nullptr);
  EXPECT_THAT(html, HasSubstr("a&lt;b&gt;&amp;&quot;c&quot;"));
  EXPECT_THAT(html, Not(HasSubstr("a<b>")));
}

TEST(RenderSummaryTableTest, OneLinePerPolicyWithArtifactColumns) {
  const std::vector<ReplayResult> runs = SampleRuns();
  const std::string plain = RenderSummaryTable(Summarize(runs), nullptr);
  EXPECT_EQ(testing::SplitLines(plain).size(), 3u);  // header + 2
  EXPECT_THAT(plain, HasSubstr("4.88"));
  EXPECT_THAT(plain, Not(HasSubstr("artifact")));
  const std::string with_ref = RenderSummaryTable(Summarize(runs), &Bundled());
  EXPECT_THAT(with_ref, HasSubstr("artifact@100%"));
  EXPECT_THAT(with_ref, HasSubstr("4.77"));
  EXPECT_THAT(with_ref, HasSubstr("yes"));  // fgd: 4.88 vs 4.77
  EXPECT_THAT(with_ref, HasSubstr("NO"));   // bestfit: 8.00 vs 7.09
  std::vector<ReplayResult> other = runs;
  for (auto& r : other) r.pods_name = "mine";
  const std::string no_match = RenderSummaryTable(Summarize(other), &Bundled());
  EXPECT_THAT(no_match, Not(HasSubstr("yes")));
  EXPECT_THAT(no_match, Not(HasSubstr("NO")));
}

}  // namespace
}  // namespace tessera::sim

namespace tessera::sim {
namespace {

// The page carries its charts' data as JSON (parsed back here), ten distinct colours, and uPlot
// itself when the build had npm (ui/node_modules); the palette is the dashboard's (palette.js).
TEST(ReportChartsTest, DataJsonPaletteAndUplot) {
  ChartSpec c{.id = "t", .title = "t", .x_label = "x", .x_unit = "h", .x = {0, 1}, .y_label = "y", .y_unit = "%"};
  c.series = {{.name = "a</script>", .y = {1, std::nan("")}, .color = 9}};
  const std::string page = RenderChartAssets({c});
  const std::string open = "<script type='application/json' id='tessera-report-data'>";
  const size_t from = page.find(open);
  ASSERT_NE(from, std::string::npos);
  const size_t to = page.find("</script>", from);
  const nlohmann::json j = nlohmann::json::parse(page.substr(from + open.size(), to - from - open.size()));
  EXPECT_EQ(j.at("charts").at(0).at("series").at(0).at("name"), "a</script>");
  EXPECT_TRUE(j.at("charts").at(0).at("series").at(0).at("y").at(1).is_null());
  const auto palette = j.at("palette").get<std::vector<std::string>>();
  EXPECT_EQ(std::set<std::string>(palette.begin(), palette.end()).size(), 10u);
  const std::string js = testing::ReadTextFile(std::string(TESSERA_SOURCE_DIR) + "/ui/src/palette.js");
  for (std::string_view colour : kReportPalette) EXPECT_NE(js.find(std::string(colour)), std::string::npos) << colour;
  EXPECT_EQ(ReportChartsUseUplot(), page.find("var uPlot=") != std::string::npos);
  EXPECT_EQ(FormatWait(5400), "1 h 30 min");
  EXPECT_EQ(FormatWait(750), "13 min");
  EXPECT_THAT(RenderParametersTable({{"seed", "42"}}), HasSubstr("<td class='l'>seed</td><td class='l'>42</td>"));
}

}  // namespace
}  // namespace tessera::sim
