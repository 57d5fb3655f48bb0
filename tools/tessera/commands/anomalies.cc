// `tessera anomalies`: the online anomaly detector over one NAB-format series
// (--input IN.csv [-o json] [--json OUT]), or NAB's scoring of it over a labelled corpus (--score).
// A table on stdout; -o json prints the JSON instead, --json PATH also writes it (common.h).
// Parsing, file reading and printing only; the work is in tessera::metering (docs/anomaly.md).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/core/input_bytes.h"
#include "tessera/metering/anomaly.h"
#include "tessera/metering/anomaly_series.h"
#include "tessera/metering/civil_time.h"
#include "tessera/metering/nab_score.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

constexpr const char* kCommand = "anomalies";

struct AnomalyFlags {
  std::string input;
  OutputFlags output;
  bool score = false;
  std::string data_dir;
  std::string labels;
  double threshold = -1;  // < 0: the detector's default (detect) or NAB's sweep (--score)
  std::vector<std::string> sets;
};

// The file's text (gzip-compressed files are decompressed).
StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError("cannot read '" + path + "'");
  std::ostringstream s;
  s << in.rdbuf();
  return DecompressIfGzip(s.str(), path);
}

// Reads and parses one series; what its clock did (steps back, duplicates, gaps: accepted, not
// errors) is said once, on one stderr line.
StatusOr<metering::Series> LoadSeries(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  TESSERA_ASSIGN_OR_RETURN(metering::Series series, metering::ParseNabSeries(text, path));
  if (series.irregularities.any()) {
    std::fprintf(stderr, "tessera %s: %s: %s\n", kCommand, path.c_str(),
                 metering::DescribeIrregularities(series.irregularities).c_str());
  }
  return series;
}

StatusOr<metering::AnomalyOptions> Options(const AnomalyFlags& f) {
  metering::AnomalyOptions o;
  for (const std::string& s : f.sets) TESSERA_RETURN_IF_ERROR(metering::SetAnomalyOption(&o, s));
  if (f.threshold >= 0) {
    if (f.threshold >= 1) return InvalidArgumentError("--threshold: must be in [0, 1)");
    o.threshold_z = o.score_z_half * f.threshold / (1 - f.threshold);  // score -> z
  }
  return o;
}

int Detect(const AnomalyFlags& f) {
  if (f.input.empty()) return Fail(kCommand, "--input IN.csv is required (or --score)", kExitBadInput);
  StatusOr<metering::AnomalyOptions> options = Options(f);
  if (!options.ok()) return Fail(kCommand, options.status(), kExitBadInput);
  StatusOr<metering::Series> series = LoadSeries(f.input);
  if (!series.ok()) return Fail(kCommand, series.status(), kExitBadInput);
  const std::vector<metering::AnomalyVerdict> verdicts = metering::DetectAnomalies(*series, *options);
  nlohmann::json out = {{"rows", series->rows.size()}, {"anomalies", nlohmann::json::array()}};
  std::string table = "TIMESTAMP             SCORE  REASON\n";
  size_t flagged = 0;
  for (size_t i = 0; i < verdicts.size(); ++i) {
    if (!verdicts[i].flagged) continue;
    const metering::SeriesRow& r = series->rows[i];
    const bool above = r.value > verdicts[i].expected;
    char reason[200];
    const bool novel = options->context_threshold > 0 && verdicts[i].novelty >= options->context_threshold;
    std::snprintf(reason, sizeof reason, "%s expected %.6g (robust z %.1f%s)", above ? "above" : "below",
                  verdicts[i].expected, verdicts[i].z, novel ? "; a pattern not seen before" : "");
    out["anomalies"].push_back(
        {{"timestamp", metering::FormatNabTimestamp(r.time_s)}, {"score", verdicts[i].score}, {"reason", reason}});
    char line[256];
    std::snprintf(line, sizeof line, "%-20s  %5.3f  %s\n", metering::FormatUtc(r.time_s).c_str(), verdicts[i].score,
                  reason);
    table += line;
    ++flagged;
  }
  table += std::to_string(flagged) + " of " + std::to_string(series->rows.size()) + " rows flagged\n";
  const Status w = EmitOutput(f.output, table, out.dump(2) + "\n");
  if (!w.ok()) return Fail(kCommand, w, kExitFailure);
  return kExitOk;
}

int Score(const AnomalyFlags& f) {
  StatusOr<metering::AnomalyOptions> options = Options(f);
  if (!options.ok()) return Fail(kCommand, options.status(), kExitBadInput);
  const std::string data_dir = f.data_dir.empty() ? DataDir() + "/nab/data" : f.data_dir;
  const std::string labels_path = f.labels.empty() ? DataDir() + "/nab/labels/combined_windows.json" : f.labels;
  StatusOr<std::string> labels_text = ReadFile(labels_path);
  if (!labels_text.ok()) return Fail(kCommand, labels_text.status(), kExitBadInput);
  auto labels = metering::ParseNabLabels(*labels_text, labels_path);
  if (!labels.ok()) return Fail(kCommand, labels.status(), kExitBadInput);
  std::vector<metering::NabFile> files;
  for (const auto& [name, windows] : *labels) {
    const std::string path = data_dir + "/" + name;
    StatusOr<metering::Series> series = LoadSeries(path);
    if (!series.ok()) return Fail(kCommand, series.status(), kExitBadInput);
    metering::NabFile file{name, {}, {}, windows};
    for (const metering::AnomalyVerdict& v : metering::DetectAnomalies(*series, *options)) file.scores.push_back(v.score);
    for (const metering::SeriesRow& r : series->rows) file.timestamps.push_back(r.time_s);
    files.push_back(std::move(file));
  }
  std::optional<double> threshold;
  if (f.threshold >= 0) threshold = f.threshold;
  auto score = metering::ScoreNabCorpus(files, metering::NabCostProfile{}, threshold);
  if (!score.ok()) return Fail(kCommand, score.status(), kExitBadInput);
  std::string text = "file                                                     windows  found   FPs    score\n";
  nlohmann::json per_file = nlohmann::json::array();
  char line[256];
  for (const metering::NabFileScore& s : score->files) {
    std::snprintf(line, sizeof line, "%-56s %7d %6d %5d %8.3f\n", s.name.c_str(), s.windows, s.detected,
                  s.false_positives, s.score);
    text += line;
    per_file.push_back({{"file", s.name}, {"windows", s.windows}, {"detected", s.detected},
                        {"false_positives", s.false_positives}, {"score", s.score}});
  }
  std::snprintf(line, sizeof line,
                "NAB standard profile: raw %.3f, null %.1f, perfect %.1f, threshold %.6f (%s): score %.2f\n",
                score->raw, score->null_score, score->perfect, score->threshold,
                threshold ? "given" : "swept, NAB's optimizer", score->normalized);
  text += line;
  const nlohmann::json j = {{"profile", "standard"}, {"threshold", score->threshold},
                            {"threshold_swept", !threshold.has_value()}, {"raw", score->raw},
                            {"null", score->null_score}, {"perfect", score->perfect},
                            {"score", score->normalized}, {"files", per_file}};
  const Status w = EmitOutput(f.output, text, j.dump(2) + "\n");
  if (!w.ok()) return Fail(kCommand, w, kExitFailure);
  return kExitOk;
}

}  // namespace

void RegisterAnomalies(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<AnomalyFlags>();
  CLI::App* cmd = app.add_subcommand(kCommand,
                                     "Flag anomalous rows of a time series (NAB format: timestamp,value), online; "
                                     "or score the detector on the NAB corpus (--score)");
  cmd->add_option("--input", f->input,
                  "Series CSV (required without --score; plain or gzip-compressed): header timestamp,value; timestamps YYYY-MM-DD HH:MM:SS, "
                  "scored in row order (steps back, duplicate timestamps and gaps are accepted and reported once "
                  "on stderr; a duplicate is not scored twice)");
  AddOutputFlags(cmd, &f->output,
                 "{\"rows\", \"anomalies\": [{\"timestamp\" (YYYY-MM-DD HH:MM:SS, as in the input), \"score\", "
                 "\"reason\"}]}; with --score the scores per file. The table: TIMESTAMP (RFC 3339, UTC), SCORE, REASON");
  cmd->add_flag("--score", f->score, "Score the detector with NAB's rules (standard profile) over --labels' files");
  cmd->add_option("--data-dir", f->data_dir, "--score: the corpus' data folder (default data/nab/data)");
  cmd->add_option("--labels", f->labels, "--score: NAB windows JSON (default data/nab/labels/combined_windows.json)");
  cmd->add_option("--threshold", f->threshold,
                  "Flag rows whose score >= this (in [0, 1); default: the detector's own, 0.5); with --score, "
                  "score at it instead of sweeping every threshold as NAB's optimizer does");
  cmd->add_option("--set", f->sets, "Detector option name=value (repeatable; docs/anomaly.md lists them)");
  cmd->callback([f, exit_code] { *exit_code = f->score ? Score(*f) : Detect(*f); });
}

}  // namespace tessera::cli
