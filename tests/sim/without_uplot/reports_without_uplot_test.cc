// The simulator's reports in a build without npm (issue 35: "a build without npm still builds the
// daemon", and the reports must still show something). This binary links tessera_sim with the
// assets a configure without npm generates (cmake/EmbedUplot.cmake with no JS: empty arrays,
// tests/CMakeLists.txt), so it runs the fallback of report_charts.h in the normal build, in a few
// milliseconds, instead of a second configure: charts become their static SVG or a table of their
// values, the page says why, and the data JSON is still there.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/metering/ledger_file.h"
#include "tessera/sim/dedicated_vs_shared.h"
#include "tessera/sim/ledger_export.h"
#include "tessera/sim/metering_report.h"
#include "tessera/sim/mig_replay.h"
#include "tessera/sim/report_charts.h"

namespace tessera::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Tenant a holds 4 G2 GPUs each hour but hour 100 (40), over 168 hours from 2026-11-01.
std::string Ledger() {
  std::string out;
  for (int h = 0; h < 168; ++h) {
    for (int g = 0; g < (h == 100 ? 40 : 4); ++g) {
      metering::UsageSample s;
      s.key = {"a", "n", std::to_string(g), "G2", "whole", "w"};
      s.values.seq = h + 1;
      s.values.start = kScenarioEpoch + int64_t{h} * 3600;
      s.values.end = s.values.start + 3600;
      s.values.gpu_milli_s_allocated = s.values.gpu_milli_s_used = 3'600'000;
      out += metering::RenderUsageLine(s);
    }
  }
  return out;
}

TEST(ReportsWithoutUplot, TheBuildHasNoUplot) {
  EXPECT_FALSE(ReportChartsUseUplot());
  EXPECT_EQ(UplotVersion(), "");
}

TEST(ReportsWithoutUplot, ChartsAreTheirStaticSvgOrATableAndThePageSaysWhy) {
  ChartSpec line{.id = "alloc", .title = "GPU allocation per hour", .x_label = "time", .x_unit = "h",
                 .x = {0, 1}, .y_label = "allocation", .y_unit = "%"};
  line.series = {{.name = "shared", .y = {10, 20}}};
  EXPECT_THAT(RenderChart(line), HasSubstr("<table><caption>GPU allocation per hour</caption>"));
  EXPECT_THAT(RenderChart(line), HasSubstr("<td>20.00 %</td>"));
  line.fallback_svg = "<svg>drawn</svg>";
  EXPECT_EQ(RenderChart(line), "<svg>drawn</svg>");
  const std::string assets = RenderChartAssets({line});
  EXPECT_THAT(assets, HasSubstr("built without npm"));
  EXPECT_THAT(assets, HasSubstr("<script type='application/json' id='tessera-report-data'>"));
  EXPECT_THAT(assets, Not(HasSubstr("data-charts-rendered")));  // no renderer, no uPlot
}

TEST(ReportsWithoutUplot, TheScenarioReportDrawsItsMeteringSectionsAsSvg) {
  auto sections = RenderMeteringSections(Ledger(), "currency: USD\nprices:\n  G2: {gpu_hour: 2.00}\n", "plan.yaml",
                                         GpuModelCatalog::Builtin());
  ASSERT_TRUE(sections.ok()) << sections.status().message();
  const std::string page = RenderDedicatedVsSharedHtml(DedicatedVsSharedResult{}, sections->html, sections->charts);
  for (const char* part : {"<h2 id=\"invoices\">", "<h2 id=\"anomalies\">", "<h2 id=\"forecast\">",
                           "<polygon class=\"interval\"", "<circle ", "built without npm", "</html>"}) {
    EXPECT_THAT(page, HasSubstr(part));
  }
  EXPECT_THAT(page, Not(HasSubstr("<div id='chart-")));
}

TEST(ReportsWithoutUplot, TheMigReportShowsItsChartsAsTables) {
  MigComparisonReport r;
  r.model = "H100-80GB";
  r.seeds = {42};
  r.seeds_text = "42";
  r.rows = {{"engine:fgd", "dynamic", {10.0}, {2.5}}, {"static, best uniform layout", "static", {28.0}, {6.75}}};
  const std::string page = RenderMigComparisonHtml(r);
  EXPECT_THAT(page, HasSubstr("<caption>Unserved capacity at 100 % arrived (median over seeds)</caption>"));
  EXPECT_THAT(page, HasSubstr("<caption>Stranded GPUs per seed</caption>"));
  EXPECT_THAT(page, HasSubstr("<td>6.75 GPUs</td>"));
  EXPECT_THAT(page, HasSubstr("built without npm"));
}

}  // namespace
}  // namespace tessera::sim
