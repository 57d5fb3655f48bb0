// Leave-one-folder-out cross-validation of the anomaly detector on the NAB subset (data/nab/):
// the protocol that chooses the detector's method and its few parameters without tuning on the
// series it is judged on (docs/anomaly.md, "How the defaults are chosen").
//
//   build/bench/tessera_anomaly_lofo [DATA_DIR]      (default: the checkout's data/nab)
//
// For every setting of a small grid (score: residual z / windowed likelihood / either / the
// contextual novelty alone or with them, x threshold x suppression x warm-up x forecast
// combination or novelty grid) the detector flags every file of the subset once. Then,
// for each of the 5 folders F: the setting with the best NAB standard score over the other 4
// folders (scoring the flags, threshold 0.5, as the product ships them; primary criterion: NAB's
// score of the 4 folders pooled; also shown: the mean of their per-folder scores) is chosen, and
// F is scored with it. The LOFO subset score pools those held-out raw scores (each file scored by a setting
// chosen without its folder) and normalises them as NAB does. The shipped defaults are the setting
// chosen by the most folds (ties: the first in grid order), never the best on the whole subset.
//
// Worked example of the selection: with settings A and B and folders f1..f3, training scores
// (f2+f3, f1+f3, f1+f2) of A = (60, 55, 40) and of B = (58, 50, 45): folds 1 and 2 choose A,
// fold 3 chooses B; f1 is scored with A, f2 with A, f3 with B; the default is A (2 folds of 3).
//
// Output: one table per method family (the LOFO protocol restricted to that family's settings:
// what each idea scored on each held-out folder), then the full grid's table with the setting
// each fold chose, then the default. artificialNoAnomaly has no windows: its cell is the raw
// score (false positives only), and it counts in the pooled score through its raw score.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/metering/anomaly.h"
#include "tessera/metering/anomaly_series.h"
#include "tessera/metering/nab_score.h"

namespace {

using tessera::metering::AnomalyOptions;

struct Setting {
  std::string name;  // "method=2 threshold_z=10 ..."
  AnomalyOptions options;
};

struct FolderScore {  // the NAB standard score of one folder's files under one setting
  double raw = 0, null_score = 0, perfect = 0;
  int windows = 0, found = 0, fps = 0;
};

double Normalised(double raw, double null_score, double perfect) {
  return perfect == null_score ? 0 : 100 * (raw - null_score) / (perfect - null_score);
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "tessera_anomaly_lofo: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<Setting> Grid() {
  std::vector<Setting> out;
  auto add = [&](const std::vector<std::string>& sets) {
    Setting s;
    for (const std::string& a : sets) {
      if (!tessera::metering::SetAnomalyOption(&s.options, a).ok()) std::abort();
      s.name += (s.name.empty() ? "" : " ") + a;
    }
    out.push_back(s);
  };
  // {method, likelihood_z}: the residual alone, residual or likelihood, likelihood alone. (The
  // spectral residual, 288 more settings at tau 3 and 6, was dropped from the grid after it was
  // never chosen: 26.56 LOFO as a family, docs/anomaly.md; `--set spectral_tau=` still runs it.)
  const std::vector<std::pair<std::string, std::string>> scores = {
      {"0", "4"}, {"2", "4"}, {"2", "3"}, {"2", "6"}, {"1", "4"}, {"1", "3"}, {"1", "6"}};
  for (const auto& [method, lz] : scores)
    for (const char* t : method == "1" ? std::vector<const char*>{"10"} : std::vector<const char*>{"10", "7", "14"})
      for (const char* suppress : {"250", "150", "500"})
        for (const char* warmup : {"300", "150"})
          for (const char* combine : {"1", "2"})
            add({"method=" + method, std::string("threshold_z=") + t, std::string("score_z_half=") + t,
                 std::string("suppress_rows=") + suppress,
                 std::string("warmup_rows=") + warmup, std::string("combine=") + combine, "likelihood_z=" + lz,
                 "context_threshold=0"});
  // The contextual novelty (step 6): alone (method 3), or with the residual z (method 0), or with
  // the residual z and the likelihood (method 2); x its threshold and grid; the residual's
  // threshold 10 / 14 / 20 (the novelty's flag does not depend on it); with or without the
  // (hour of day, bucket) context; the novelty alone or only where the residual z is >= 3. score_z_half follows
  // threshold_z everywhere, so that a flag is always score 0.5 (`tessera anomalies --score
  // --threshold 0.5` scores the shipped flags) and the likelihood's r = z / (z + threshold_z).
  for (const char* method : {"3", "0", "2"})
    for (const char* t : std::string(method) == "3" ? std::vector<const char*>{"10"}
                                                    : std::vector<const char*>{"10", "14", "20"})
      for (const char* ct : {"1", "0.75"})
        for (const char* buckets : {"8", "16"})
          for (const char* suppress : {"250", "150", "500"})
            for (const char* warmup : {"300", "150"})
              for (const char* daily : {"0", "1"})
              for (const char* min_z : {"0", "3"})
              add({std::string("method=") + method, std::string("threshold_z=") + t,
                   std::string("score_z_half=") + t, std::string("suppress_rows=") + suppress, std::string("warmup_rows=") + warmup, "combine=1",
                   "likelihood_z=4", std::string("context_threshold=") + ct,
                   std::string("context_buckets=") + buckets, std::string("context_daily=") + daily,
                   std::string("context_min_z=") + min_z});
  return out;
}

struct Lofo {
  std::vector<size_t> chosen;  // per folder: the setting chosen on the other folders
  double pooled = 0;           // the LOFO subset score
};

// The protocol over the settings `candidates` (indices into scores' first dimension). The training
// score of a setting is, with `per_folder_mean`, the mean of the training folders' normalised
// scores, each folder weighing the same (a folder without windows adds its false positives' cost
// as it would count in the pooled score: 100 x raw / (perfect - null of the training folders)),
// else the NAB score of the training folders pooled (dominated by the folder with most windows).
Lofo RunLofo(const std::vector<std::vector<FolderScore>>& scores, const std::vector<size_t>& candidates,
             size_t folders, bool per_folder_mean) {
  Lofo out;
  double raw = 0, null_score = 0, perfect = 0;
  for (size_t held = 0; held < folders; ++held) {
    size_t best = candidates[0];
    double best_score = -1e300;
    for (size_t c : candidates) {
      double r = 0, n = 0, p = 0, mean = 0, quiet_raw = 0;
      int counted = 0;
      for (size_t f = 0; f < folders; ++f) {
        if (f == held) continue;
        const FolderScore& fs = scores[c][f];
        r += fs.raw, n += fs.null_score, p += fs.perfect;
        if (fs.windows > 0) {
          mean += Normalised(fs.raw, fs.null_score, fs.perfect), ++counted;
        } else {
          quiet_raw += fs.raw;
        }
      }
      mean = mean / std::max(counted, 1) + (p > n ? 100 * quiet_raw / (p - n) : 0);
      const double s = per_folder_mean ? mean : Normalised(r, n, p);
      if (s > best_score) best_score = s, best = c;
    }
    out.chosen.push_back(best);
    raw += scores[best][held].raw, null_score += scores[best][held].null_score, perfect += scores[best][held].perfect;
  }
  out.pooled = Normalised(raw, null_score, perfect);
  return out;
}

std::string Cell(const FolderScore& s) {
  char b[64];
  if (s.windows == 0) {
    std::snprintf(b, sizeof b, "raw %.2f (%d FP)", s.raw, s.fps);
  } else {
    std::snprintf(b, sizeof b, "%.2f (%d/%d, %d FP)", Normalised(s.raw, s.null_score, s.perfect), s.found, s.windows,
                  s.fps);
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string root = argc > 1 ? argv[1] : std::string(TESSERA_SOURCE_DIR) + "/data/nab";
  const std::string labels_path = root + "/labels/combined_windows.json";
  auto labels = tessera::metering::ParseNabLabels(Read(labels_path), labels_path);
  if (!labels.ok()) {
    std::fprintf(stderr, "tessera_anomaly_lofo: %s\n", labels.status().message().c_str());
    return 2;
  }
  std::vector<std::string> folders;
  std::vector<size_t> folder_of;
  std::vector<tessera::metering::Series> series;
  std::vector<std::vector<tessera::metering::NabWindow>> windows;
  for (const auto& [name, w] : *labels) {
    const std::string folder = name.substr(0, name.find('/'));
    if (folders.empty() || folders.back() != folder) folders.push_back(folder);
    folder_of.push_back(folders.size() - 1);
    auto s = tessera::metering::ParseNabSeries(Read(root + "/data/" + name), name);
    if (!s.ok()) {
      std::fprintf(stderr, "tessera_anomaly_lofo: %s\n", s.status().message().c_str());
      return 2;
    }
    series.push_back(std::move(*s));
    windows.push_back(w);
  }
  const std::vector<Setting> grid = Grid();
  std::fprintf(stderr, "%zu settings x %zu files ...\n", grid.size(), series.size());
  std::vector<std::vector<FolderScore>> scores(grid.size(), std::vector<FolderScore>(folders.size()));
  for (size_t g = 0; g < grid.size(); ++g) {
    for (size_t f = 0; f < folders.size(); ++f) {
      std::vector<tessera::metering::NabFile> files;
      for (size_t i = 0; i < series.size(); ++i) {
        if (folder_of[i] != f) continue;
        tessera::metering::NabFile file{"", {}, {}, windows[i]};
        for (const auto& v : tessera::metering::DetectAnomalies(series[i], grid[g].options))
          file.scores.push_back(v.flagged ? 1.0 : 0.0);
        for (const auto& r : series[i].rows) file.timestamps.push_back(r.time_s);
        files.push_back(std::move(file));
      }
      auto s = tessera::metering::ScoreNabCorpus(files, tessera::metering::NabCostProfile{}, 0.5);
      if (!s.ok()) {
        std::fprintf(stderr, "tessera_anomaly_lofo: %s\n", s.status().message().c_str());
        return 2;
      }
      FolderScore& out = scores[g][f];
      out.raw = s->raw, out.null_score = s->null_score, out.perfect = s->perfect;
      for (const auto& fs : s->files) out.windows += fs.windows, out.found += fs.detected, out.fps += fs.false_positives;
    }
  }

  auto print = [&](const char* title, const std::vector<size_t>& candidates, bool show_choice, bool mean) {
    const Lofo l = RunLofo(scores, candidates, folders.size(), mean);
    std::printf("\n%s (%zu settings; chosen by the %s): LOFO subset score %.2f\n", title, candidates.size(),
                mean ? "training folders' mean score" : "training folders' pooled score", l.pooled);
    for (size_t f = 0; f < folders.size(); ++f) {
      std::printf("  %-22s %-26s", folders[f].c_str(), Cell(scores[l.chosen[f]][f]).c_str());
      if (show_choice) std::printf("  chosen on the others: %s", grid[l.chosen[f]].name.c_str());
      std::printf("\n");
    }
    return l;
  };
  std::printf("NAB standard profile, flags (threshold 0.5); held-out folder: score (windows found, FPs)\n");
  // The settings without the novelty end in "context_threshold=0".
  static const auto off = [](const std::string& n) {
    const std::string tail = " context_threshold=0";
    return n.size() >= tail.size() && n.compare(n.size() - tail.size(), tail.size(), tail) == 0;
  };
  static const auto is = [](const std::string& n, const char* method) { return n.rfind(method, 0) == 0; };
  const std::pair<const char*, bool (*)(const std::string&)> families[] = {
      {"forecast-residual z alone", [](const std::string& n) { return is(n, "method=0 ") && off(n); }},
      {"windowed likelihood alone", [](const std::string& n) { return is(n, "method=1 "); }},
      {"residual z or likelihood", [](const std::string& n) { return is(n, "method=2 ") && off(n); }},
      {"contextual novelty alone", [](const std::string& n) { return is(n, "method=3 "); }},
      {"residual z or novelty", [](const std::string& n) { return is(n, "method=0 ") && !off(n); }},
      {"residual z, likelihood or novelty", [](const std::string& n) { return is(n, "method=2 ") && !off(n); }},
      {"novelty only where z >= 3 (with the residual, with or without the likelihood)",
       [](const std::string& n) { return n.find("context_min_z=3") != std::string::npos; }},
      {"every family without the novelty (the previous grid less the spectral residual)", [](const std::string& n) { return off(n); }}};
  for (const auto& [title, member] : families) {
    std::vector<size_t> c;
    for (size_t g = 0; g < grid.size(); ++g)
      if (member(grid[g].name)) c.push_back(g);
    for (bool mean : {false, true}) print(title, c, false, mean);
  }
  std::vector<size_t> all(grid.size());
  for (size_t g = 0; g < grid.size(); ++g) all[g] = g;
  print("full grid", all, true, true);
  const Lofo l = print("full grid", all, true, false);  // the primary protocol: NAB's pooled score
  std::map<size_t, int> votes;
  for (size_t c : l.chosen) ++votes[c];
  size_t best = l.chosen[0];
  for (size_t c : l.chosen)
    if (votes[c] > votes[best] || (votes[c] == votes[best] && c < best)) best = c;
  double r = 0, n = 0, p = 0;
  for (size_t f = 0; f < folders.size(); ++f) r += scores[best][f].raw, n += scores[best][f].null_score, p += scores[best][f].perfect;
  std::printf("\ndefault (chosen by %d of %zu folds): %s\n", votes[best], folders.size(), grid[best].name.c_str());
  std::printf("its whole-subset score (NOT held out, for reference): %.2f\n", Normalised(r, n, p));
  return 0;
}
