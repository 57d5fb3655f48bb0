// The Numenta Anomaly Benchmark's scoring (NAB v1.1: nab/sweeper.py, nab/optimizer.py,
// nab/runner.py normalize()), re-implemented: used by `tessera anomalies --score` to score the
// detector on data/nab/ and by the tests. Pure: the caller reads the files and passes text and
// values. Thread-safety: free functions over values.
//
// The rules, as NAB's sweeper applies them to each file's rows (i = row index):
//   * probation: rows i < min(floor(0.15 * rows), 750) are not scored;
//   * inside a window [l, r] (row indices of its limits; width w = r - l + 1) a detection at i
//     is worth tp_weight * S(-(r - i + 1) / w) / S(-1), S(x) = 2 / (1 + e^(5x)) - 1 (so 1.0 at the
//     window's first row, falling towards 0 at its end); only the best (the first) detection in
//     a window counts; a window without one costs -fn_weight;
//   * outside windows a detection costs fp_weight * S(|i - r_prev| / (w_prev - 1)) (S < 0 after
//     a window, -1 beyond three widths), or -fp_weight when no window precedes it;
//   * a window counts only if one of its rows is past the probation.
// A row is a detection when its score >= the threshold. NAB's optimizer picks, over the whole
// corpus, the threshold with the best total; the raw corpus score at that threshold is then
// normalised: 100 * (raw - null) / (perfect - null), null = the score of detecting nothing
// (-fn_weight per counted window), perfect = tp_weight per labelled window.
//
// Worked example (tests/metering/nab_score_test.cc): 10 rows, probation 1, one window on rows
// 4..7 (w = 4), detections at rows 5 and 9. Row 5: position -(7 - 5 + 1) / 4 = -0.75,
// S(-0.75) = 0.95404, / S(-1) = 0.98661 -> +0.96699. Row 9: 2 rows past the window,
// S(2 / 3) = -0.93111 -> 0.11 * -0.93111 = -0.10242. Raw = 0.86457; null = -1, perfect = 1:
// normalised 100 * 1.86457 / 2 = 93.23.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::metering {

struct NabCostProfile {  // NAB's "standard" profile
  double tp_weight = 1.0;
  double fp_weight = 0.11;
  double fn_weight = 1.0;
};

struct NabWindow {
  int64_t start_s = 0;  // timestamps of the window's first and last rows
  int64_t end_s = 0;
};

// One file to score: its rows' timestamps, the detector's score for each, its windows.
struct NabFile {
  std::string name;  // e.g. "realTweets/Twitter_volume_AAPL.csv"
  std::vector<int64_t> timestamps;
  std::vector<double> scores;
  std::vector<NabWindow> windows;
};

struct NabFileScore {
  std::string name;
  double score = 0;  // raw, at the corpus threshold
  int windows = 0;   // windows that count (not wholly in the probation)
  int detected = 0;  // of them, with a detection
  int false_positives = 0;
};

struct NabCorpusScore {
  double threshold = 0;   // the threshold used (swept or given)
  double raw = 0;
  double null_score = 0;
  double perfect = 0;
  double normalized = 0;
  std::vector<NabFileScore> files;
};

// The per-row weights of NAB's sweeper for one file; nullopt for rows in the probation.
// INVALID_ARGUMENT when the sizes differ, a window limit is not a row's timestamp, or windows
// are inverted, unsorted or overlap. Windows are matched to rows in row order: a window opens at
// the first row with its start timestamp after the previous window's last row and closes at the
// first row with its end timestamp from there on. Where timestamps only go forward this is NAB's
// rule (the first row with the timestamp); after a clock step back (anomaly_series.h), where a
// timestamp can appear twice, the window is the rows where it first opens and closes in file
// order, so row-index widths stay positive and the scoring above applies unchanged.
struct NabRowWeight {
  bool scored = false;   // past the probation
  int window = -1;       // index into NabFile::windows, -1 outside
  double weight = 0;     // what a detection here is worth
};
StatusOr<std::vector<NabRowWeight>> NabRowWeights(const NabFile& file, const NabCostProfile& profile,
                                                  double probation_percent = 0.15);

// Scores the corpus: with `threshold` unset, sweeps every score value as NAB's optimizer does and
// keeps the best; otherwise scores at the given threshold.
StatusOr<NabCorpusScore> ScoreNabCorpus(const std::vector<NabFile>& files, const NabCostProfile& profile,
                                        std::optional<double> threshold, double probation_percent = 0.15);

// NAB's labels/combined_windows.json: {"folder/file.csv": [["start", "end"], ...], ...}, limits
// "YYYY-MM-DD HH:MM:SS[.ffffff]". INVALID_ARGUMENT names `file` and the entry.
StatusOr<std::map<std::string, std::vector<NabWindow>>> ParseNabLabels(std::string_view text, std::string_view file);

}  // namespace tessera::metering
