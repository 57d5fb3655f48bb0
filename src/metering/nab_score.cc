#include "tessera/metering/nab_score.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "tessera/metering/anomaly_series.h"

namespace tessera::metering {
namespace {

// NAB's scaledSigmoid: 2 * sigmoid(-5 x) - 1, and -1 beyond three widths past a window.
double ScaledSigmoid(double x) {
  if (x > 3.0) return -1.0;
  return 2.0 / (1.0 + std::exp(5.0 * x)) - 1.0;
}

// What NAB's "nothing detected" threshold is: 1.1 above scores in [0, 1].
double NothingThreshold(double max_score) {
  return max_score < 1.1 ? 1.1 : std::numeric_limits<double>::infinity();
}

StatusOr<int64_t> ParseLimit(const nlohmann::json& j, const std::string& where) {
  if (!j.is_string()) return InvalidArgumentError(where + ": a window limit is not a string");
  const std::string s = j.get<std::string>();
  StatusOr<int64_t> t = ParseNabTimestamp(std::string_view(s).substr(0, 19));
  if (!t.ok()) return InvalidArgumentError(where + ": " + t.status().message());
  const std::string_view rest = std::string_view(s).substr(std::min<size_t>(19, s.size()));
  if (!rest.empty()) {
    bool ok = rest.size() >= 2 && rest[0] == '.';
    for (size_t i = 1; ok && i < rest.size(); ++i) ok = rest[i] == '0';
    if (!ok) return InvalidArgumentError(where + ": limit '" + s + "' is not a whole second (YYYY-MM-DD HH:MM:SS[.000000])");
  }
  return *t;
}

// A window's first and last rows (indices into the file's rows).
struct WindowRows {
  int64_t left = 0;
  int64_t right = 0;
};

// First index >= `from` whose timestamp is `t`; -1 when none.
int64_t FindRow(const std::vector<int64_t>& timestamps, int64_t from, int64_t t) {
  for (auto i = static_cast<size_t>(from); i < timestamps.size(); ++i) {
    if (timestamps[i] == t) return static_cast<int64_t>(i);
  }
  return -1;
}

// Matches the windows' limits to rows in row order: a window starts at the first row with its
// start timestamp after the previous window's last row, and ends at the first row with its end
// timestamp from there on. For timestamps that only go forward this is NAB's rule (the first row
// with the timestamp); after a clock step back, where a timestamp can appear twice, the window
// takes the rows where it first opens and closes in file order, so it is never inverted.
StatusOr<std::vector<WindowRows>> MatchWindowsToRows(const NabFile& file) {
  std::vector<WindowRows> out;
  int64_t from = 0;
  for (size_t k = 0; k < file.windows.size(); ++k) {
    const NabWindow& w = file.windows[k];
    const std::string which = file.name + ": window " + std::to_string(k + 1) + " [" + FormatNabTimestamp(w.start_s) +
                              ", " + FormatNabTimestamp(w.end_s) + "]";
    if (w.end_s < w.start_s) return InvalidArgumentError(which + ": ends before it starts");
    if (k > 0 && w.start_s <= file.windows[k - 1].end_s) {
      return InvalidArgumentError(which + ": starts before the previous window ends (windows must be sorted, apart)");
    }
    const int64_t left = FindRow(file.timestamps, from, w.start_s);
    const int64_t right = left < 0 ? -1 : FindRow(file.timestamps, left, w.end_s);
    if (left < 0 || right < 0) {
      return InvalidArgumentError(which + ": a limit is not the timestamp of a row (in row order, after the previous window)");
    }
    out.push_back({left, right});
    from = right + 1;
  }
  return out;
}

}  // namespace

StatusOr<std::vector<NabRowWeight>> NabRowWeights(const NabFile& file, const NabCostProfile& profile,
                                                  double probation_percent) {
  const size_t n = file.timestamps.size();
  if (file.scores.size() != n) {
    return InvalidArgumentError(file.name + ": " + std::to_string(file.scores.size()) + " scores for " +
                                std::to_string(n) + " rows");
  }
  TESSERA_ASSIGN_OR_RETURN(const std::vector<WindowRows> rows_of, MatchWindowsToRows(file));
  const double probation = std::min(std::floor(probation_percent * static_cast<double>(n)), probation_percent * 5000);
  const double max_tp = ScaledSigmoid(-1.0);
  std::vector<NabRowWeight> out(n);
  size_t next = 0;
  int cur = -1;
  int64_t prev_right = -1;
  double prev_width = 0;
  for (size_t i = 0; i < n; ++i) {
    const auto ii = static_cast<int64_t>(i);
    if (cur < 0 && next < rows_of.size() && ii == rows_of[next].left) cur = static_cast<int>(next++);
    NabRowWeight& row = out[i];
    if (cur >= 0) {
      const WindowRows& w = rows_of[cur];
      const double width = static_cast<double>(w.right - w.left + 1);
      row.weight = ScaledSigmoid(-static_cast<double>(w.right - ii + 1) / width) * profile.tp_weight / max_tp;
      row.window = cur;
    } else if (prev_right < 0) {
      row.weight = -1.0 * profile.fp_weight;
    } else {
      // NAB divides by (width - 1); a one-row window would divide by zero there: treat it as far.
      const double pos = prev_width > 1 ? std::abs(static_cast<double>(prev_right - ii)) / (prev_width - 1)
                                        : std::numeric_limits<double>::infinity();
      row.weight = ScaledSigmoid(pos) * profile.fp_weight;
    }
    row.scored = static_cast<double>(i) >= probation;
    if (cur >= 0 && ii == rows_of[cur].right) {
      prev_right = ii;
      prev_width = static_cast<double>(rows_of[cur].right - rows_of[cur].left + 1);
      cur = -1;
    }
  }
  return out;
}

StatusOr<NabCorpusScore> ScoreNabCorpus(const std::vector<NabFile>& files, const NabCostProfile& profile,
                                        std::optional<double> threshold, double probation_percent) {
  struct Point {
    double score;
    int window;  // global window id, -1 outside
    double weight;
  };
  std::vector<std::vector<NabRowWeight>> weights;
  std::vector<Point> points;
  std::vector<int> window_base;
  int windows = 0, labelled = 0;
  std::vector<char> counted;
  double max_score = -std::numeric_limits<double>::infinity();
  for (const NabFile& f : files) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<NabRowWeight> w, NabRowWeights(f, profile, probation_percent));
    window_base.push_back(windows);
    counted.resize(windows + f.windows.size(), 0);
    for (size_t i = 0; i < w.size(); ++i) {
      if (!w[i].scored) continue;
      const int gw = w[i].window < 0 ? -1 : windows + w[i].window;
      if (gw >= 0) counted[gw] = 1;
      points.push_back({f.scores[i], gw, w[i].weight});
      max_score = std::max(max_score, f.scores[i]);
    }
    windows += static_cast<int>(f.windows.size());
    labelled += static_cast<int>(f.windows.size());
    weights.push_back(std::move(w));
  }
  NabCorpusScore result;
  int counted_windows = 0;
  for (char c : counted) counted_windows += c;
  result.null_score = -profile.fn_weight * counted_windows;
  result.perfect = profile.tp_weight * labelled;

  if (!threshold) {
    // NAB's calcScoreByThreshold over the whole corpus: lower the threshold one score value at
    // a time; the first (highest) threshold with the best total wins.
    std::stable_sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.score > b.score; });
    std::vector<double> best(windows, -profile.fn_weight);
    double total = result.null_score;
    double best_total = total;
    double best_threshold = NothingThreshold(max_score);
    for (size_t i = 0; i < points.size();) {
      const double s = points[i].score;
      for (; i < points.size() && points[i].score == s; ++i) {
        const Point& p = points[i];
        if (p.window < 0) {
          total += p.weight;
        } else if (p.weight > best[p.window]) {
          total += p.weight - best[p.window];
          best[p.window] = p.weight;
        }
      }
      if (total > best_total) {
        best_total = total;
        best_threshold = s;
      }
    }
    threshold = best_threshold;
  }
  result.threshold = *threshold;

  // Each file at the threshold: detections are rows with score >= threshold.
  for (size_t f = 0; f < files.size(); ++f) {
    NabFileScore fs;
    fs.name = files[f].name;
    std::vector<double> best(files[f].windows.size(), -profile.fn_weight);
    std::vector<char> in_play(files[f].windows.size(), 0);
    for (size_t i = 0; i < weights[f].size(); ++i) {
      const NabRowWeight& w = weights[f][i];
      if (!w.scored) continue;
      if (w.window >= 0) in_play[w.window] = 1;
      if (files[f].scores[i] < *threshold) continue;
      if (w.window < 0) {
        fs.score += w.weight;
        ++fs.false_positives;
      } else {
        best[w.window] = std::max(best[w.window], w.weight);
      }
    }
    for (size_t k = 0; k < best.size(); ++k) {
      if (!in_play[k]) continue;
      ++fs.windows;
      if (best[k] > -profile.fn_weight) ++fs.detected;
      fs.score += best[k];
    }
    result.raw += fs.score;
    result.files.push_back(fs);
  }
  const double span = result.perfect - result.null_score;
  result.normalized = span > 0 ? 100.0 * (result.raw - result.null_score) / span : 0.0;
  return result;
}

StatusOr<std::map<std::string, std::vector<NabWindow>>> ParseNabLabels(std::string_view text, std::string_view file) {
  const std::string where(file);
  const nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgumentError(where + ": not valid JSON");
  if (!j.is_object()) return InvalidArgumentError(where + ": expected an object {\"folder/file.csv\": [[start, end], ...]}");
  std::map<std::string, std::vector<NabWindow>> out;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string entry = where + ": \"" + it.key() + "\"";
    if (!it.value().is_array()) return InvalidArgumentError(entry + ": expected a list of [start, end] windows");
    std::vector<NabWindow> windows;
    for (const nlohmann::json& w : it.value()) {
      const std::string which = entry + " window " + std::to_string(windows.size() + 1);
      if (!w.is_array() || w.size() != 2) return InvalidArgumentError(which + ": expected [start, end]");
      TESSERA_ASSIGN_OR_RETURN(const int64_t start, ParseLimit(w[0], which));
      TESSERA_ASSIGN_OR_RETURN(const int64_t end, ParseLimit(w[1], which));
      windows.push_back({start, end});
    }
    out.emplace(it.key(), std::move(windows));
  }
  return out;
}

}  // namespace tessera::metering
