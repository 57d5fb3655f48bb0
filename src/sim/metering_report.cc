#include "tessera/sim/metering_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <map>
#include <span>
#include <vector>

#include "tessera/metering/anomaly_series.h"
#include "tessera/metering/capacity_plan.h"
#include "tessera/metering/civil_time.h"
#include "tessera/metering/forecast.h"
#include "tessera/metering/invoice.h"
#include "tessera/metering/ledger_file.h"
#include "tessera/metering/money.h"
#include "tessera/metering/price_plan.h"
#include "tessera/core/html.h"
#include "tessera/sim/report_charts.h"

namespace tessera::sim {
namespace {

constexpr int kW = 900, kH = 260, kL = 50, kB = 30;  // the report's line-chart frame

std::string Fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string InvoiceSection(const metering::InvoiceRun& run) {
  std::string h = "<h2 id=\"invoices\">Invoices per tenant (" + HtmlEscape(run.period.name) + ", " +
                  HtmlEscape(run.currency) + ")</h2>";
  if (!run.complete) {
    h += "<p>Partial month: observed " + metering::FormatUtc(run.observed_start) + " to " +
         metering::FormatUtc(run.observed_end) + "; idle capacity and reservations are billed for those hours only.</p>";
  }
  h += "<table><tr><th>account</th><th>organisation / team</th><th>usage</th><th>idle capacity and "
       "reservations</th><th>credits</th><th>total</th></tr>";
  for (const metering::Invoice& inv : run.invoices) {
    metering::Micro usage = 0, fixed = 0, credits = 0;
    for (const metering::InvoiceLine& l : inv.lines) {
      if (l.charge_category == "Credit") credits += l.amount_micro;
      else if (l.resource == "idle" || l.resource == "reservation") fixed += l.amount_micro;
      else usage += l.amount_micro;
    }
    h += "<tr><td>" + HtmlEscape(inv.tenant) + "</td><td>" + HtmlEscape(inv.organisation) + " / " + HtmlEscape(inv.team) +
         "</td><td>" + metering::FormatMicro(usage) + "</td><td>" + metering::FormatMicro(fixed) + "</td><td>" +
         metering::FormatMicro(credits) + "</td><td>" + metering::FormatMicro(inv.total_micro) + "</td></tr>";
  }
  h += "<tr><th>metered total</th><td></td><td></td><td></td><td></td><th>" +
       metering::FormatMicro(run.metered_total_micro) + "</th></tr></table>";
  for (const std::string& n : run.notes) h += "<p>" + HtmlEscape(n) + "</p>";
  return h;
}

struct TenantSeries {
  std::string tenant;
  std::vector<double> gpus;  // per hour from the ledger's first hour
};

// GPUs allocated per hour per tenant, hours [start, end) of the observed span.
std::vector<TenantSeries> TenantHours(const metering::Ledger& ledger, int64_t start, int hours) {
  std::map<std::string, std::vector<double>> by;
  const std::vector<metering::SourceKey>& sources = ledger.sources();
  for (const metering::HourlyRecord& r : ledger.Records()) {
    std::vector<double>& v = by[sources[r.source].tenant];
    v.resize(static_cast<size_t>(hours), 0.0);
    const int64_t i = (r.hour - start) / metering::kSecondsPerHour;
    if (i >= 0 && i < hours) v[static_cast<size_t>(i)] += static_cast<double>(r.gpu_milli_s_allocated) / 3.6e6;
  }
  std::vector<TenantSeries> out;
  for (auto& [t, v] : by) out.push_back({t, std::move(v)});
  return out;
}

struct Flag {
  size_t tenant;
  int hour;  // index from the observed span's first hour
  double value;
  std::string reason;
};

// Each tenant's series through the online detector with the report's hourly settings.
std::vector<Flag> Detect(const std::vector<TenantSeries>& tenants, int64_t start, int hours) {
  std::vector<Flag> flags;
  for (size_t t = 0; t < tenants.size(); ++t) {
    metering::AnomalyDetector detector(HourlyAnomalyOptions());
    for (int i = 0; i < hours; ++i) {
      const double value = tenants[t].gpus[static_cast<size_t>(i)];
      const metering::AnomalyVerdict v = detector.Step(start + int64_t{i} * metering::kSecondsPerHour, value);
      if (!v.flagged) continue;
      flags.push_back({t, i, value,
                       std::string(value > v.expected ? "above" : "below") + " expected " + Fmt("%.3g", v.expected) +
                           " GPUs (robust z " + Fmt("%.1f", v.z) + ", likelihood z " + Fmt("%.1f", v.lz) + ")"});
    }
  }
  return flags;
}

// The static timeline of a build without uPlot: one lane per tenant, a red mark per flag.
std::string AnomalySvg(const std::vector<TenantSeries>& tenants, const std::vector<Flag>& flags, int64_t start,
                       int hours) {
  const int lane = 16, LW = 120;
  const int SH = static_cast<int>(tenants.size()) * lane + 24;
  const double span = std::max(1, hours - 1);
  std::string svg = "<svg width=\"" + std::to_string(kW) + "\" height=\"" + std::to_string(SH) + "\" role=\"img\">";
  for (size_t t = 0; t < tenants.size(); ++t) {
    const double y = static_cast<double>(t) * lane + lane / 2.0;
    svg += "<text x=\"0\" y=\"" + Fmt("%.0f", y + 4) + "\" font-size=\"11\">" + HtmlEscape(tenants[t].tenant) +
           "</text><line x1=\"" + std::to_string(LW) + "\" x2=\"" + std::to_string(kW - 10) + "\" y1=\"" +
           Fmt("%.1f", y) + "\" y2=\"" + Fmt("%.1f", y) + "\" stroke=\"#eee\"/>";
  }
  for (const Flag& f : flags) {
    const double y = static_cast<double>(f.tenant) * lane + lane / 2.0;
    svg += "<circle cx=\"" + Fmt("%.1f", LW + (kW - LW - 10) * f.hour / span) + "\" cy=\"" + Fmt("%.1f", y) +
           "\" r=\"4\" fill=\"#D55E00\"><title>" + HtmlEscape(tenants[f.tenant].tenant) + " " +
           metering::FormatUtc(start + int64_t{f.hour} * metering::kSecondsPerHour) + ": " + Fmt("%.3g", f.value) +
           " GPUs, " + f.reason + "</title></circle>";
  }
  return svg + "<text x=\"" + std::to_string(LW) + "\" y=\"" + std::to_string(SH - 6) + "\" font-size=\"11\">hour 0 … " +
         std::to_string(hours) + " — a mark per flag (hover: the reason)</text></svg>";
}

// Palette entries of the tenants' lines: all but vermillion (5), the flags' colour.
constexpr int kLineColours[] = {0, 1, 2, 3, 4, 6, 7, 8, 9};
constexpr int kFlagColour = 5;

std::string AnomalySection(const std::vector<TenantSeries>& tenants, int64_t start, int hours,
                           std::vector<ChartSpec>& charts) {
  std::string h = "<h2 id=\"anomalies\">Anomalies: GPUs allocated per tenant per hour</h2><p>The online "
                  "detector (docs/anomaly.md) over each tenant's GPUs allocated per hour; hourly settings: "
                  "the first 48 hours are its warm-up, at most one alarm per tenant per 24 hours. Each "
                  "flag is a mark on the tenant's line (hover it for the reason).</p>";
  const std::vector<Flag> flags = Detect(tenants, start, hours);
  ChartSpec c{.id = "anomalies", .title = "GPUs allocated per tenant per hour, with the detector's flags",
              .x_label = "time since " + metering::FormatUtc(start), .x_unit = "h", .y_label = "GPUs allocated",
              .y_unit = "GPUs", .width = 900};
  for (int i = 0; i < hours; ++i) c.x.push_back(i);
  const int ncolours = static_cast<int>(std::size(kLineColours));
  for (size_t t = 0; t < tenants.size(); ++t) {
    const int k = static_cast<int>(t);
    c.series.push_back({.name = tenants[t].tenant, .y = tenants[t].gpus, .color = kLineColours[k % ncolours],
                        .dashed = (k / ncolours) % 2 == 1});
  }
  ChartSeries marks{.name = "flags", .y = std::vector<double>(static_cast<size_t>(hours), std::nan("")),
                    .color = kFlagColour, .points_only = true, .labels = std::vector<std::string>(static_cast<size_t>(hours))};
  for (const Flag& f : flags) {  // two flags in one hour: one mark (the higher value), both reasons
    const size_t i = static_cast<size_t>(f.hour);
    if (std::isnan(marks.y[i]) || f.value > marks.y[i]) marks.y[i] = f.value;
    marks.labels[i] += (marks.labels[i].empty() ? "" : "; ") + tenants[f.tenant].tenant + ": " + Fmt("%.3g", f.value) +
                       " GPUs, " + f.reason;
  }
  c.series.push_back(std::move(marks));
  c.fallback_svg = AnomalySvg(tenants, flags, start, hours);
  h += RenderChart(c);
  charts.push_back(std::move(c));
  h += "<p>" + std::to_string(flags.size()) + " flag(s) over " + std::to_string(tenants.size()) + " tenants and " +
       std::to_string(hours) + " hours.</p>";
  if (flags.empty()) return h;
  h += "<table><tr><th>tenant</th><th>hour (UTC)</th><th>GPUs</th><th>reason</th></tr>";
  for (const Flag& f : flags) {
    h += "<tr><td>" + HtmlEscape(tenants[f.tenant].tenant) + "</td><td>" +
         metering::FormatUtc(start + int64_t{f.hour} * metering::kSecondsPerHour) + "</td><td>" + Fmt("%.3g", f.value) +
         "</td><td>" + f.reason + "</td></tr>";
  }
  return h + "</table>";
}

// The static forecast chart of a build without uPlot.
std::string ForecastSvg(const std::vector<double>& history, const metering::Forecast& f) {
  double top = 1e-9;
  for (double v : history) top = std::max(top, v);
  for (double v : f.upper) top = std::max(top, v);
  const size_t n = history.size() + f.values.size();
  auto x = [&](size_t i) { return kL + (kW - kL - 10) * static_cast<double>(i) / std::max<size_t>(1, n - 1); };
  auto y = [&](double v) { return (kH - kB) - (kH - kB - 10) * v / top; };
  auto poly = [&](const std::vector<double>& v, size_t from, const char* color) {
    std::string p = "<polyline fill=\"none\" stroke=\"" + std::string(color) + "\" stroke-width=\"1.5\" points=\"";
    for (size_t i = 0; i < v.size(); ++i) p += Fmt("%.1f", x(from + i)) + "," + Fmt("%.1f", y(v[i])) + " ";
    return p + "\"/>";
  };
  std::string h = "<svg width=\"" + std::to_string(kW) + "\" height=\"" + std::to_string(kH) + "\" role=\"img\">";
  for (int q = 0; q <= 4; ++q) {
    const double v = top * q / 4;
    h += "<line x1=\"" + std::to_string(kL) + "\" x2=\"" + std::to_string(kW - 10) + "\" y1=\"" + Fmt("%.1f", y(v)) +
         "\" y2=\"" + Fmt("%.1f", y(v)) + "\" stroke=\"#eee\"/><text x=\"5\" y=\"" + Fmt("%.1f", y(v) + 4) +
         "\" font-size=\"11\">" + Fmt("%.3g", v) + "</text>";
  }
  std::string band = "<polygon class=\"interval\" fill=\"#56B4E9\" fill-opacity=\"0.2\" stroke=\"none\" points=\"";
  for (size_t i = 0; i < f.upper.size(); ++i) band += Fmt("%.1f", x(history.size() + i)) + "," + Fmt("%.1f", y(f.upper[i])) + " ";
  for (size_t i = f.lower.size(); i-- > 0;) band += Fmt("%.1f", x(history.size() + i)) + "," + Fmt("%.1f", y(f.lower[i])) + " ";
  h += band + "\"/>" + poly(history, 0, "#0072B2") + poly(f.values, history.size(), "#000000");
  return h + "<text x=\"" + std::to_string(kL) + "\" y=\"" + std::to_string(kH - 8) + "\" font-size=\"11\">hour 0 … " +
         std::to_string(n) + " — blue: history, black: forecast, band: 90 % interval</text></svg>";
}

std::string ForecastSection(const std::vector<double>& history, int64_t start, int horizon,
                            std::vector<ChartSpec>& charts) {
  const metering::Forecast f = metering::ForecastHourly(std::span<const double>(history), horizon);
  std::string h = "<h2 id=\"forecast\">Demand forecast: GPUs allocated per hour, next " + std::to_string(horizon) +
                  " hours</h2>";
  const size_t past = history.size(), n = past + f.values.size();
  ChartSpec c{.id = "forecast", .title = "Demand (GPUs allocated, all models) and its forecast with the 90 % interval",
              .x_label = "time since " + metering::FormatUtc(start), .x_unit = "h", .y_label = "GPUs allocated",
              .y_unit = "GPUs", .width = 900};
  for (size_t i = 0; i < n; ++i) c.x.push_back(static_cast<double>(i));
  std::vector<double> demand(n, std::nan("")), forecast(n, std::nan("")), upper(n, std::nan("")), lower(n, std::nan(""));
  for (size_t i = 0; i < past; ++i) demand[i] = history[i];
  if (past > 0) forecast[past - 1] = upper[past - 1] = lower[past - 1] = history[past - 1];  // joined to the history
  for (size_t i = 0; i < f.values.size(); ++i) {
    forecast[past + i] = f.values[i];
    upper[past + i] = i < f.upper.size() ? f.upper[i] : std::nan("");
    lower[past + i] = i < f.lower.size() ? f.lower[i] : std::nan("");
  }
  c.series = {{.name = "demand (ledger)", .y = std::move(demand), .color = 4},
              {.name = "forecast", .y = std::move(forecast), .color = 7},
              {.name = "90 % interval, upper", .y = std::move(upper), .color = 1, .dashed = true},
              {.name = "90 % interval, lower", .y = std::move(lower), .color = 1, .dashed = true}};
  c.bands = {{2, 3}};
  c.fallback_svg = ForecastSvg(history, f);
  h += RenderChart(c);
  charts.push_back(std::move(c));
  double peak = 0, peak_upper = 0;
  for (size_t i = 0; i < f.values.size(); ++i) peak = std::max(peak, f.values[i]), peak_upper = std::max(peak_upper, f.upper[i]);
  std::string methods;
  for (const std::string& m : f.methods) methods += (methods.empty() ? "" : ", ") + m;
  h += "<p>Forecast peak " + Fmt("%.1f", peak) + " GPUs (upper bound " + Fmt("%.1f", peak_upper) + ") from " +
       std::to_string(history.size()) + " hours of history; methods averaged: " + HtmlEscape(methods) + ".</p>";
  return h;
}

}  // namespace

metering::AnomalyOptions HourlyAnomalyOptions() {
  metering::AnomalyOptions o;
  o.warmup_rows = 48;
  o.suppress_rows = 24;
  return o;
}

StatusOr<MeteringSections> RenderMeteringSections(std::string_view ledger_jsonl, std::string_view plan_yaml,
                                                  std::string_view plan_source, const GpuModelCatalog& catalog,
                                                  int horizon_hours) {
  TESSERA_ASSIGN_OR_RETURN(metering::LedgerFile ledger, metering::ParseLedgerJsonl(ledger_jsonl, "ledger", catalog));
  TESSERA_ASSIGN_OR_RETURN(metering::PricePlan plan, metering::ParsePricePlanYaml(plan_yaml, plan_source, catalog));
  const std::vector<metering::HourlyRecord> records = ledger.ledger.Records();
  MeteringSections out;
  if (records.empty()) {
    out.html = "<h2 id=\"invoices\">Invoices</h2><p>The ledger is empty.</p>";
    return out;
  }
  metering::InvoiceOptions options;
  std::tie(options.observed_start, options.observed_end) = metering::ObservedSpan(records);
  const metering::Period period = metering::MonthOf(options.observed_start);
  auto run = metering::ComputeInvoices(ledger.ledger.sources(), records, ledger.sla, plan, period, catalog, options);
  if (!run.ok()) return InvalidArgumentError(std::string(plan_source) + ": " + run.status().message());
  out.html = InvoiceSection(*run);

  const int64_t start = options.observed_start;
  const int hours = static_cast<int>((options.observed_end - start) / metering::kSecondsPerHour);
  const std::vector<TenantSeries> tenants = TenantHours(ledger.ledger, start, hours);
  out.html += AnomalySection(tenants, start, hours, out.charts);
  std::vector<double> demand(static_cast<size_t>(hours), 0.0);
  for (const TenantSeries& t : tenants)
    for (size_t i = 0; i < demand.size(); ++i) demand[i] += t.gpus[i];
  out.html += ForecastSection(demand, start, horizon_hours, out.charts);
  return out;
}

}  // namespace tessera::sim
