// `tessera forecast`: forecasts hourly series (--input IN.csv --horizon H [-o json] [--json OUT]),
// or backtests the forecaster against M4's benchmarks on held-out weeks (--backtest). A table on
// stdout; -o json prints the JSON instead, --json PATH also writes it (common.h).
// Parsing, file reading and printing only; the work is in tessera::metering (forecast.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/core/input_bytes.h"
#include "tessera/metering/civil_time.h"
#include "tessera/metering/forecast.h"
#include "tessera/metering/forecast_input.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

constexpr const char* kCommand = "forecast";

struct ForecastFlags {
  std::string input;
  OutputFlags output;
  int horizon = 0;
  bool backtest = false;
  int holdout = 336;
  bool interval = false;
  metering::ForecastOptions options;
};

// A forecast value in the table: 4 significant digits are plenty to read (the JSON has them all).
std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

StatusOr<std::vector<metering::HourlySeries>> Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  TESSERA_ASSIGN_OR_RETURN(const std::string csv, DecompressIfGzip(text.str(), path));
  return metering::ParseHourlySeriesCsv(csv, path);
}

int Forecast(const ForecastFlags& f) {
  if (f.input.empty()) return Fail(kCommand, "--input IN.csv is required (or --backtest)", kExitBadInput);
  if (f.horizon <= 0 || f.horizon > 24 * 366) return Fail(kCommand, "--horizon: give 1 .. 8784 hours", kExitBadInput);
  auto series = Load(f.input);
  if (!series.ok()) return Fail(kCommand, series.status(), kExitBadInput);
  nlohmann::json out = {{"forecasts", nlohmann::json::array()}};
  std::vector<std::vector<std::string>> rows;
  for (const metering::HourlySeries& s : *series) {
    const metering::Forecast fc = metering::ForecastHourly(s.values, f.horizon, f.options);
    nlohmann::json j = {{"series", s.name}, {"values", fc.values}};
    if (f.interval) j["lower"] = fc.lower, j["upper"] = fc.upper, j["methods"] = fc.methods;
    out["forecasts"].push_back(std::move(j));
    const int64_t first = s.start + static_cast<int64_t>(s.values.size()) * 3600;  // the hour after the last row
    for (size_t h = 0; h < fc.values.size(); ++h) {
      std::vector<std::string> row = {s.name, metering::FormatUtc(first + static_cast<int64_t>(h) * 3600),
                                      Number(fc.values[h])};
      if (f.interval && h < fc.lower.size() && h < fc.upper.size()) {
        row.push_back(Number(fc.lower[h]));
        row.push_back(Number(fc.upper[h]));
      }
      rows.push_back(std::move(row));
    }
  }
  const std::string table = TextTable(f.interval ? std::vector<std::string>{"SERIES", "HOUR", "FORECAST", "LOWER", "UPPER"}
                             : std::vector<std::string>{"SERIES", "HOUR", "FORECAST"},
                                    rows);
  const Status w = EmitOutput(f.output, table, out.dump() + "\n");
  if (!w.ok()) return Fail(kCommand, w, kExitFailure);
  return kExitOk;
}

int Backtest(const ForecastFlags& f) {
  const std::string input = f.input.empty() ? DataDir() + "/forecast/trace-demand.csv" : f.input;
  const int horizon = f.horizon > 0 ? f.horizon : 48;
  if (f.holdout < horizon) return Fail(kCommand, "--holdout must be at least --horizon", kExitBadInput);
  auto series = Load(input);
  if (!series.ok()) return Fail(kCommand, series.status(), kExitBadInput);
  char line[320];
  std::string text;
  std::snprintf(line, sizeof line, "%-22s %4s %8s %7s %8s %7s %8s %7s %6s %6s %5s\n", "series", "win", "sMAPE",
                "MASE", "sMAPE_n2", "MASE_n2", "sMAPE_sn", "MASE_sn", "OWA", "OWA_sn", "cov");
  text += line;
  nlohmann::json per = nlohmann::json::array();
  double sm = 0, ma = 0, sm2 = 0, ma2 = 0, sms = 0, mas = 0, cov = 0;
  int counted = 0, skipped = 0;
  for (const metering::HourlySeries& s : *series) {
    const metering::BacktestScores b = metering::BacktestHourly(s.values, horizon, f.holdout, f.options);
    if (b.windows == 0 || !std::isfinite(b.mase) || !std::isfinite(b.mase_naive2) || !std::isfinite(b.mase_snaive)) {
      ++skipped;
      continue;
    }
    const double owa = metering::Owa(b.smape, b.mase, b.smape_naive2, b.mase_naive2);
    const double owa_sn = metering::Owa(b.smape_snaive, b.mase_snaive, b.smape_naive2, b.mase_naive2);
    std::snprintf(line, sizeof line, "%-22s %4d %8.3f %7.3f %8.3f %7.3f %8.3f %7.3f %6.3f %6.3f %5.2f\n",
                  s.name.c_str(), b.windows, b.smape, b.mase, b.smape_naive2, b.mase_naive2, b.smape_snaive,
                  b.mase_snaive, owa, owa_sn, b.coverage);
    text += line;
    per.push_back({{"series", s.name}, {"windows", b.windows}, {"smape", b.smape}, {"mase", b.mase},
                   {"smape_naive2", b.smape_naive2}, {"mase_naive2", b.mase_naive2}, {"smape_snaive", b.smape_snaive},
                   {"mase_snaive", b.mase_snaive}, {"owa", owa}, {"owa_snaive", owa_sn}, {"coverage", b.coverage}});
    sm += b.smape, ma += b.mase, sm2 += b.smape_naive2, ma2 += b.mase_naive2, sms += b.smape_snaive,
        mas += b.mase_snaive, cov += b.coverage;
    ++counted;
  }
  if (counted == 0) return Fail(kCommand, "no series long enough for the backtest in '" + input + "'", kExitBadInput);
  const double n = counted;
  const double owa = metering::Owa(sm / n, ma / n, sm2 / n, ma2 / n);
  const double owa_sn = metering::Owa(sms / n, mas / n, sm2 / n, ma2 / n);
  std::snprintf(line, sizeof line, "%-22s %4s %8.3f %7.3f %8.3f %7.3f %8.3f %7.3f %6.3f %6.3f %5.2f\n", "overall (mean)",
                "", sm / n, ma / n, sm2 / n, ma2 / n, sms / n, mas / n, owa, owa_sn, cov / n);
  text += line;
  std::snprintf(line, sizeof line,
                "%d series (%d skipped: too short or constant), horizon %d h, last %d h held out; OWA against "
                "Naive2: tessera %.3f, seasonal naive (m=24) %.3f\n",
                counted, skipped, horizon, f.holdout, owa, owa_sn);
  text += line;
  const nlohmann::json j = {{"horizon", horizon}, {"holdout", f.holdout}, {"series", per}, {"owa", owa},
                            {"owa_snaive", owa_sn}, {"smape", sm / n}, {"mase", ma / n},
                            {"smape_naive2", sm2 / n}, {"mase_naive2", ma2 / n}, {"smape_snaive", sms / n},
                            {"mase_snaive", mas / n}, {"coverage", cov / n}};
  const Status w = EmitOutput(f.output, text, j.dump(2) + "\n");
  if (!w.ok()) return Fail(kCommand, w, kExitFailure);
  return kExitOk;
}

}  // namespace

void RegisterForecast(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ForecastFlags>();
  CLI::App* cmd = app.add_subcommand(
      kCommand, "Forecast hourly series (daily and weekly seasons, trend, robust to outliers); or backtest the "
                "forecaster with M4's measures (--backtest)");
  cmd->add_option("--input", f->input,
                  "CSV (required without --backtest; plain or gzip-compressed) with header series,timestamp,value: timestamps ISO 8601 UTC on the hour "
                  "(2026-11-01T00:00:00Z), one row per hour, each series' rows together; with --backtest "
                  "default data/forecast/trace-demand.csv");
  cmd->add_option("--horizon", f->horizon, "Hours to forecast after each series' last row, 1..8784 (required without --backtest; with it default 48)");
  AddOutputFlags(cmd, &f->output,
                 "{\"forecasts\":[{\"series\",\"values\":[H numbers]}]}; with --backtest the scores per series. "
                 "The table: SERIES, HOUR (RFC 3339, UTC), FORECAST (4 significant digits)[, LOWER, UPPER]");
  cmd->add_flag("--interval", f->interval,
                "Add \"lower\", \"upper\" (the prediction interval) and \"methods\" (the candidates averaged) per series");
  cmd->add_option("--level", f->options.interval_level, "Coverage of the prediction interval, in (0, 1) (default 0.9)")
      ->check(CLI::Range(0.5, 0.999));
  cmd->add_flag("--backtest", f->backtest,
                "Hold back the last --holdout hours of each series, forecast them in windows of --horizon hours, "
                "print sMAPE, MASE (m=24) and OWA against Naive2, for tessera and seasonal naive (m=24)");
  cmd->add_option("--holdout", f->holdout, "--backtest: hours held back at the end of each series (default 336)");
  cmd->add_option("--combine", f->options.combine_top, "How many of the best candidate methods to average (default 2)")
      ->check(CLI::Range(1, 7));
  cmd->callback([f, exit_code] { *exit_code = f->backtest ? Backtest(*f) : Forecast(*f); });
}

}  // namespace tessera::cli
