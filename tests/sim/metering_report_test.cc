// The scenario report's metering sections (include/tessera/sim/metering_report.h): the header's
// worked example, and bad plans named.
#include "tessera/sim/metering_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "tessera/metering/civil_time.h"

namespace tessera::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int64_t kStart = 1793491200;  // 2026-11-01T00:00:00Z

// One whole-GPU source of `tenant` (GPU `gpu`) busy for the hour `h`.
std::string Line(const std::string& tenant, int gpu, int h) {
  const int64_t s = kStart + int64_t{h} * 3600;
  return "{\"start\":\"" + metering::FormatUtc(s) + "\",\"end\":\"" + metering::FormatUtc(s + 3600) +
         "\",\"tenant\":\"" + tenant + "\",\"node\":\"n\",\"gpu\":\"" + std::to_string(gpu) +
         "\",\"model\":\"G2\",\"partition\":\"whole\",\"workload\":\"w\",\"seq\":" + std::to_string(h + 1) +
         ",\"gpu_milli_s_allocated\":3600000,\"gpu_milli_s_used\":3600000}\n";
}

// Tenant a holds 4 GPUs every hour but hour 100 (40 GPUs); tenant b holds 1 GPU every hour.
std::string Ledger() {
  std::string out;
  for (int h = 0; h < 168; ++h) {
    for (int g = 0; g < (h == 100 ? 40 : 4); ++g) out += Line("a", g, h);
    out += Line("b", 50, h);
  }
  return out;
}

const char* const kPlan = "currency: USD\nprices:\n  G2: {gpu_hour: 2.00}\n";

TEST(MeteringReport, TheWorkedExampleBillsFlagsTheSpikeAndForecasts) {
  auto sections = RenderMeteringSections(Ledger(), kPlan, "plan.yaml", GpuModelCatalog::Builtin());
  ASSERT_TRUE(sections.ok()) << sections.status().message();
  const std::string* html = &sections->html;
  // 2 tenants: a = (167 x 4 + 40) GPU-hours x 2.00 = 1416.00, b = 168 x 2.00 = 336.00.
  EXPECT_THAT(*html, HasSubstr("<tr><td>a</td>"));
  EXPECT_THAT(*html, HasSubstr("1416.000000</td></tr>"));
  EXPECT_THAT(*html, HasSubstr("<tr><td>b</td>"));
  EXPECT_THAT(*html, HasSubstr("336.000000</td></tr>"));
  // The spike at hour 100 (2026-11-05T04:00:00Z) is tenant a's one flag; b is never flagged.
  EXPECT_THAT(*html, HasSubstr("<tr><td>a</td><td>2026-11-05T04:00:00Z</td><td>40</td><td>above expected 4 GPUs"));
  EXPECT_THAT(*html, HasSubstr("1 flag(s) over 2 tenants and 168 hours"));
  EXPECT_THAT(*html, Not(HasSubstr("<tr><td>b</td><td>2026-")));
  EXPECT_THAT(*html, HasSubstr("<h2 id=\"forecast\">Demand forecast: GPUs allocated per hour, next 48 hours</h2>"));
  EXPECT_THAT(*html, HasSubstr("from 168 hours of history"));
  // The two charts: the timeline's flag mark at hour 100 carries the reason; the forecast's band
  // lies between its interval series over the 48 hours after the history.
  ASSERT_EQ(sections->charts.size(), 2u);
  const ChartSpec& timeline = sections->charts[0];
  EXPECT_EQ(timeline.id, "anomalies");
  EXPECT_EQ(timeline.x_unit, "h");
  EXPECT_EQ(timeline.y_unit, "GPUs");
  ASSERT_EQ(timeline.series.size(), 3u);  // a, b, flags
  const ChartSeries& flags = timeline.series[2];
  EXPECT_TRUE(flags.points_only);
  ASSERT_EQ(flags.y.size(), 168u);
  EXPECT_EQ(flags.y[100], 40.0);
  EXPECT_THAT(flags.labels[100], HasSubstr("a: 40 GPUs, above expected 4 GPUs"));
  size_t marks = 0;
  for (double v : flags.y) marks += std::isnan(v) ? 0 : 1;
  EXPECT_EQ(marks, 1u);
  const ChartSpec& forecast = sections->charts[1];
  EXPECT_EQ(forecast.id, "forecast");
  ASSERT_EQ(forecast.x.size(), 168u + 48u);
  ASSERT_EQ(forecast.bands.size(), 1u);
  const ChartSeries& upper = forecast.series[static_cast<size_t>(forecast.bands[0].first)];
  const ChartSeries& lower = forecast.series[static_cast<size_t>(forecast.bands[0].second)];
  EXPECT_TRUE(std::isnan(upper.y[100]));
  for (size_t i = 168; i < 216; ++i) EXPECT_LE(lower.y[i], upper.y[i]) << i;
}

TEST(MeteringReport, APlanThatDoesNotPriceTheLedgerIsNamed) {
  auto html = RenderMeteringSections(Ledger(), "currency: USD\nprices:\n  T4: {gpu_hour: 1}\n", "plan.yaml",
                                         GpuModelCatalog::Builtin());
  ASSERT_FALSE(html.ok());
  EXPECT_THAT(html.status().message(), HasSubstr("plan.yaml"));
  EXPECT_THAT(html.status().message(), HasSubstr("G2"));
  html = RenderMeteringSections(Ledger(), "currency: [", "bad.yaml", GpuModelCatalog::Builtin());
  ASSERT_FALSE(html.ok());
  EXPECT_THAT(html.status().message(), HasSubstr("bad.yaml"));
}

}  // namespace
}  // namespace tessera::sim
