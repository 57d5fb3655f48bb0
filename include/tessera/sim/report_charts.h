// Charts, palette and small formatting shared by the simulator's HTML reports (`tessera simulate`,
// report.h; `--scenario dedicated-vs-shared`, dedicated_vs_shared.h). A report is one
// self-contained file opened from disk with no network: the build compiles uPlot's minified JS and
// CSS (the version pinned in ui/package-lock.json, the dashboard's chart library) into tessera_sim
// (cmake/TesseraReportAssets.cmake), and each chart's data travels as JSON inside the page:
//
//   <figure class='chart'><div id='chart-alloc'></div></figure>       RenderChart(spec), per chart
//   <script type='application/json' id='tessera-report-data'>
//     {"uplot":"1.6.32","palette":["#E69F00",...],"charts":[{"id":"alloc","kind":"line",
//      "x":[0,1,2],"series":[{"name":"fgd","color":0,"y":[0,1.5,null]}],...}]}</script>
//   <style>uPlot's CSS</style><script>uPlot</script><script>draws every chart</script>
//                                                                      RenderChartAssets(specs)
//
// A build without npm has no uPlot: RenderChart returns the caller's static SVG (or a table of the
// values) and RenderChartAssets a note saying so, still with the data JSON.
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tessera::sim {

// The dashboard's colours (ui/src/palette.js: the eight Okabe-Ito colours, then the first two of
// its darker repeats), so that ten policies can be told apart with the common forms of colour
// blindness. tests/sim/report_charts_test.cc checks this list against palette.js.
inline constexpr std::array<std::string_view, 10> kReportPalette = {
    "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2",
    "#D55E00", "#CC79A7", "#000000", "#8a5f00", "#2c6d8f"};

struct ChartSeries {
  std::string name;
  std::vector<double> y;  // one per x (line) or category (bars, dots); NaN: no value
  int color = 0;          // index into kReportPalette
  bool dashed = false;
  bool points_only = false;  // kLine: a mark at each value, no line (flags on a timeline)
  // Empty, or one per x: the text the legend shows for that x instead of the value (a flag's
  // reason); "" at an x: the value.
  std::vector<std::string> labels;
};

enum class ChartKind {
  kLine,  // y over numeric x
  kBars,  // one stacked bar per category (series stacked in order, first at the bottom)
  kDots,  // one dot per series and category (grouped comparisons)
};

// Units (x_unit, y_unit): "%", "h" (hours), "duration" (seconds, shown as h/min), "" (a number).
struct ChartSpec {
  std::string id;  // unique in the page: [a-z0-9-]
  std::string title;
  ChartKind kind = ChartKind::kLine;
  std::string x_label, x_unit;
  std::vector<double> x;                // kLine
  std::vector<std::string> categories;  // kBars, kDots
  std::string y_label, y_unit;
  std::vector<ChartSeries> series;
  double bound = -1;  // >= 0: a dashed horizontal line at this y, labelled bound_label
  std::string bound_label;
  // kLine: (upper, lower) indices into `series`; the area between them is filled with the upper
  // series' colour (a forecast's interval).
  std::vector<std::pair<int, int>> bands;
  int width = 640;  // CSS pixels (narrower on a narrow page)
  std::string fallback_svg;  // drawn instead when the build has no uPlot (empty: a table)
};

// Whether this build embedded uPlot, and its version ("" when not).
bool ReportChartsUseUplot();
std::string UplotVersion();

// The chart's place in the page (uPlot) or its static fallback.
std::string RenderChart(const ChartSpec& chart);
// The data JSON of every chart, uPlot and the script that draws them (or the no-uPlot note): once,
// at the end of <body>.
std::string RenderChartAssets(const std::vector<ChartSpec>& charts);

// Parameters as a two-column HTML table (name, value), both escaped.
std::string RenderParametersTable(const std::vector<std::pair<std::string, std::string>>& rows);

// A wait for people: 42 -> "42 s", 750 -> "13 min", 5400 -> "1 h 30 min", 86400 -> "24 h 00 min";
// NaN or negative -> "-".
std::string FormatWait(double seconds);

}  // namespace tessera::sim
