// `tessera plan capacity (--history LEDGER | --server URL [--token T]) --horizon 90d
// [--capacity MODEL=N,...] [-o json] [--json OUT]`: per GPU model, when the forecast demand first
// exceeds capacity and how many GPUs to add. Parsing, file reading and printing only; the work is
// in tessera::metering (capacity_plan.h); --server reads the live control plane's usage through
// daemon::FetchDemandByModel (GET /v1/usage).
// A given capacity the ledger's own demand exceeded is warned about on stderr and in the JSON
// ("warnings", and each model's "warning" and "hours_over_capacity").
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/input_bytes.h"
#include "tessera/metering/capacity_plan.h"
#include "tessera/metering/civil_time.h"
#include "tessera/daemon/usage_history.h"
#include "tessera/metering/ledger_file.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {
namespace {

constexpr const char* kCommand = "plan capacity";

struct PlanFlags {
  std::string history;
  CtlConnection server;   // --server, --token, --token-file, --ca-file (ctl.h)
  int history_days = 56;  // with --server: how far back the usage is read
  std::string horizon = "90d";
  std::vector<std::string> capacity;
  OutputFlags output;  // -o table|json, --json PATH (common.h)
  double level = 0.9;
};

StatusOr<std::string> ReadInput(const std::string& path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    return DecompressIfGzip(ss.str(), "<stdin>");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("--history: cannot read '" + path + "'");
  ss << in.rdbuf();
  return DecompressIfGzip(ss.str(), path);
}

// "90d", "13w", "2160h" (rounded up to whole days) -> days, 1 .. 1098.
StatusOr<int> ParseHorizonDays(const std::string& text) {
  const Status bad = InvalidArgumentError("--horizon: '" + text + "' is not a number of days, weeks or hours (90d, 13w, 2160h)");
  if (text.size() < 2) return bad;
  const char unit = text.back();
  const std::string digits = text.substr(0, text.size() - 1);
  if (digits.size() > 6 || digits.find_first_not_of("0123456789") != std::string::npos) return bad;
  const long v = std::strtol(digits.c_str(), nullptr, 10);
  long days = unit == 'd' ? v : unit == 'w' ? v * 7 : unit == 'h' ? (v + 23) / 24 : -1;
  if (days < 1 || days > 1098) return unit == 'd' || unit == 'w' || unit == 'h' ? InvalidArgumentError("--horizon: give 1 day to 3 years") : bad;
  return static_cast<int>(days);
}

// "A100-80GB=64,H100-80GB=16" (repeatable) -> the capacity map; every bad item is listed.
Status ParseCapacity(const std::vector<std::string>& items, std::map<std::string, double>* out) {
  std::string problems;
  for (const std::string& flag : items) {
    std::stringstream ss(flag);
    std::string item;
    while (std::getline(ss, item, ',')) {
      const size_t eq = item.find('=');
      char* end = nullptr;
      const std::string number = eq == std::string::npos ? "" : item.substr(eq + 1);
      const double v = number.empty() ? -1 : std::strtod(number.c_str(), &end);
      if (eq == 0 || eq == std::string::npos || end != number.c_str() + number.size() || !std::isfinite(v) || v < 0) {
        problems += (problems.empty() ? "" : "\n") + std::string("--capacity: '") + item +
                    "' is not MODEL=GPUS (a number >= 0)";
        continue;
      }
      (*out)[item.substr(0, eq)] = v;
    }
  }
  return problems.empty() ? Status::Ok() : InvalidArgumentError(problems);
}

std::string When(int64_t at) { return at < 0 ? "not within the horizon" : metering::FormatUtc(at); }

// The hourly demand per model: of the ledger file (--history), or of the control plane's usage
// over the last --history-days whole days up to the current hour (--server). `source` names it.
StatusOr<std::vector<metering::ModelDemand>> ReadDemand(const PlanFlags& f, std::string* source) {
  if (!f.server.server.empty()) {
    *source = f.server.server + " (the last " + std::to_string(f.history_days) + " days of GET /v1/usage)";
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<daemon::ApiClient> client, CtlClient(f.server));
    const int64_t now_hour = static_cast<int64_t>(std::time(nullptr)) / 3600 * 3600;
    return daemon::FetchDemandByModel(*client, now_hour - int64_t{f.history_days} * 86400, now_hour);
  }
  *source = "'" + f.history + "'";
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadInput(f.history));
  TESSERA_ASSIGN_OR_RETURN(metering::LedgerFile ledger, metering::ParseLedgerJsonl(
      text, f.history == "-" ? "<stdin>" : f.history, GpuModelCatalog::Builtin()));
  return metering::HourlyDemandByModel(ledger.ledger);
}

int RunPlan(const PlanFlags& f) {
  if (f.history.empty() == f.server.server.empty())
    return Fail(kCommand, "give one of --history LEDGER or --server URL", kExitBadInput);
  metering::CapacityPlanOptions o;
  std::string problems;
  auto days = ParseHorizonDays(f.horizon);
  if (!days.ok()) problems += days.status().message();
  else o.horizon_days = *days;
  const Status cap = ParseCapacity(f.capacity, &o.capacity_gpus);
  if (!cap.ok()) problems += (problems.empty() ? "" : "\n") + cap.message();
  if (!problems.empty()) return Fail(kCommand, problems, kExitBadInput);
  o.forecast.interval_level = f.level;
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  for (const auto& [model, gpus] : o.capacity_gpus) {
    if (!catalog.Find(model).ok()) problems += (problems.empty() ? "" : "\n") + ("--capacity: unknown GPU model '" + model + "'");
  }
  if (!problems.empty()) return Fail(kCommand, problems, kExitBadInput);
  std::string source;
  StatusOr<std::vector<metering::ModelDemand>> demand = ReadDemand(f, &source);
  if (!demand.ok()) return Fail(kCommand, demand.status(), f.history.empty() ? kExitFailure : kExitBadInput);
  const std::vector<metering::ModelPlan> plans = metering::PlanCapacity(*demand, o);
  if (plans.empty()) return Fail(kCommand, source + " has no usage records to plan from", kExitBadInput);
  std::string out;
  char line[512];
  nlohmann::json models = nlohmann::json::array();
  nlohmann::json warnings = nlohmann::json::array();
  for (const metering::ModelPlan& p : plans) {
    nlohmann::json warning = nullptr;
    if (p.hours_over_capacity > 0) {
      std::snprintf(line, sizeof line,
                    "%s: the ledger's demand exceeds the given capacity of %.0f GPUs in %d of its %d hours (peak "
                    "%.2f): the cluster could not have held that use; is the ledger of demand rather than of what "
                    "ran, or is the capacity wrong?",
                    p.model.c_str(), p.capacity_gpus, p.hours_over_capacity, p.history_hours, p.peak_demand_gpus);
      warning = line;
      warnings.push_back(line);
      std::fprintf(stderr, "tessera %s: warning: %s\n", kCommand, line);
    }
    std::snprintf(line, sizeof line,
                  "%s: %d hours of history from %s, peak demand %.2f GPUs (hourly mean of allocated GPUs)\n"
                  "  capacity %.0f GPUs (%s)\n"
                  "  forecast over %d days (%s): highest daily peak %.2f GPUs, upper bound (%.0f%%) %.2f\n"
                  "  demand exceeds capacity: %s (forecast), %s (upper bound)\n"
                  "  GPUs to add to keep the upper bound under capacity: %d x %s\n",
                  p.model.c_str(), p.history_hours, metering::FormatUtc(p.history_start).c_str(), p.peak_demand_gpus,
                  p.capacity_gpus, p.capacity_from_history ? "none given: the peak hourly demand seen in the ledger, rounded up" : "given",
                  o.horizon_days, p.methods.empty() ? "" : ("mean of " + p.methods[0] + (p.methods.size() > 1 ? " and " + p.methods[1] : "")).c_str(),
                  *std::max_element(p.daily_peak.begin(), p.daily_peak.end()), f.level * 100,
                  *std::max_element(p.daily_peak_upper.begin(), p.daily_peak_upper.end()),
                  When(p.first_exceed_hour).c_str(), When(p.first_exceed_upper_hour).c_str(), p.gpus_to_add, p.model.c_str());
    out += line;
    nlohmann::json bt = nullptr;
    if (p.backtest.windows > 0) {
      const double owa = metering::Owa(p.backtest.smape, p.backtest.mase, p.backtest.smape_naive2, p.backtest.mase_naive2);
      std::snprintf(line, sizeof line,
                    "  backtest of this forecast (last %d h held out, %d-hour windows): sMAPE %.2f, MASE %.3f, OWA %.3f "
                    "against Naive2 (seasonal naive: sMAPE %.2f, MASE %.3f), interval coverage %.0f%%\n",
                    p.backtest_holdout_hours, p.backtest_horizon_hours, p.backtest.smape, p.backtest.mase, owa,
                    p.backtest.smape_snaive, p.backtest.mase_snaive, p.backtest.coverage * 100);
      bt = {{"holdout_hours", p.backtest_holdout_hours}, {"horizon_hours", p.backtest_horizon_hours},
            {"windows", p.backtest.windows}, {"smape", p.backtest.smape}, {"mase", p.backtest.mase},
            {"owa", std::isfinite(owa) ? nlohmann::json(owa) : nlohmann::json(nullptr)},
            {"smape_snaive", p.backtest.smape_snaive}, {"mase_snaive", p.backtest.mase_snaive},
            {"coverage", p.backtest.coverage}};
    } else {
      std::snprintf(line, sizeof line, "  backtest: history too short (needs at least 3 days)\n");
    }
    out += line;
    models.push_back({{"model", p.model}, {"history_start", metering::FormatUtc(p.history_start)},
                      {"history_hours", p.history_hours}, {"peak_demand_gpus", p.peak_demand_gpus},
                      {"capacity_gpus", p.capacity_gpus}, {"capacity_from_history", p.capacity_from_history},
                      {"hours_over_capacity", p.hours_over_capacity}, {"warning", warning},
                      {"first_exceed", p.first_exceed_hour < 0 ? nlohmann::json(nullptr) : nlohmann::json(metering::FormatUtc(p.first_exceed_hour))},
                      {"first_exceed_upper", p.first_exceed_upper_hour < 0 ? nlohmann::json(nullptr) : nlohmann::json(metering::FormatUtc(p.first_exceed_upper_hour))},
                      {"gpus_to_add", p.gpus_to_add}, {"daily_peak_gpus", p.daily_peak},
                      {"daily_peak_upper_gpus", p.daily_peak_upper}, {"methods", p.methods}, {"backtest", bt}});
  }
  const nlohmann::json j = {
      {"horizon_days", o.horizon_days}, {"level", f.level}, {"warnings", warnings}, {"models", models}};
  const Status w = EmitOutput(f.output, out, j.dump(2) + "\n");
  if (!w.ok()) return Fail(kCommand, w, kExitFailure);
  return kExitOk;
}

}  // namespace

void RegisterPlan(CLI::App& app, int* exit_code) {
  CLI::App* plan = app.add_subcommand("plan", "Plan from metered history (capacity)");
  plan->require_subcommand(1);
  auto f = std::make_shared<PlanFlags>();
  CLI::App* cmd = plan->add_subcommand(
      "capacity",
      "Per GPU model: forecast the hourly GPU demand of a ledger, say when its daily peak first exceeds capacity and "
      "how many GPUs to add so that the forecast's upper bound stays under it; with the forecast's backtest error");
  cmd->add_option("--history", f->history,
                  "Ledger (JSON lines, plain or gzip-compressed, the format of tessera bill --usage; - = stdin). "
                  "Demand per model and hour = allocated GPU milli-seconds / 3600 / 1000, in GPUs (GPU-hours per "
                  "hour) (required without --server)");
  cmd->add_option("--server", f->server.server,
                  "Plan from a live control plane instead: its usage (GET /v1/usage) over the last --history-days, "
                  "up to the current hour (hours without usage count 0), summed the same way. http://HOST:PORT or "
                  "https://HOST[:PORT]; an admin or viewer token plans the whole cluster, a tenant token its subtree");
  cmd->add_option("--token", f->server.token, "With --server: API token (else --token-file, else $TESSERA_TOKEN)");
  cmd->add_option("--token-file", f->server.token_file, "With --server: file whose first line is the API token");
  cmd->add_option("--ca-file", f->server.ca_file, "With --server over https: PEM CA certificates (default: $TESSERA_CA_FILE, else the system's)");
  cmd->add_option("--history-days", f->history_days, "With --server: days of usage to read, 3 to 366 (default 56, 8 weeks)")
      ->check(CLI::Range(3, 366));
  cmd->add_option("--horizon", f->horizon, "How far ahead: days (90d), weeks (13w) or hours (2160h, rounded up to days); default 90d");
  cmd->add_option("--capacity", f->capacity,
                  "GPUs installed per model, MODEL=N[,MODEL=N...] (catalog names, e.g. A100-80GB=64); a model not "
                  "given gets the peak hourly demand seen in the ledger, rounded up (the output says so)");
  cmd->add_option("--level", f->level, "Coverage of the forecast's prediction interval, in (0.5, 1) (default 0.9)")
      ->check(CLI::Range(0.5, 0.999));
  AddOutputFlags(cmd, &f->output,
                 "the plan: {\"horizon_days\", \"level\", \"warnings\", \"models\": [{\"model\", \"first_exceed\", "
                 "\"gpus_to_add\", \"daily_peak_gpus\", ...}]}");
  cmd->callback([f, exit_code] { *exit_code = RunPlan(*f); });
}

}  // namespace tessera::cli
