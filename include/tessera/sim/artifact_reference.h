// The FGD artifact's released per-run results (analysis_allo_discrete.csv: allocation ratio per
// arrived-% bucket for 17 pod lists x 6 policies x seeds 42..51), read so that our replay can be
// compared with it run for run.
//
//   StatusOr<ArtifactReference> ref = LoadArtifactReference("data/.../analysis_allo_discrete.csv");
//   const ArtifactEntry* e = ref->Find("openb_pod_list_default", "fgd");
//   e->MedianUnallocatedAt(100);   // 4.77
//   ToleranceAt100(*e);           // max(0.3, (max - min) / 2) percentage points
//
// Thread-safety: immutable after loading.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::sim {

struct ArtifactEntry {
  std::string workload;   // "openb_pod_list_default"
  std::string policy;     // tessera's name: "fgd", "bestfit", ...
  std::vector<double> unallocated_at_100;  // one per seed
  std::vector<double> unallocated_at_130;

  double MedianUnallocatedAt(int bucket) const;
  double MinUnallocatedAt100() const;
  double MaxUnallocatedAt100() const;
};

class ArtifactReference {
 public:
  const ArtifactEntry* Find(const std::string& workload, const std::string& policy) const;
  const std::map<std::pair<std::string, std::string>, ArtifactEntry>& entries() const { return entries_; }

 private:
  friend StatusOr<ArtifactReference> LoadArtifactReference(const std::string& path);
  std::map<std::pair<std::string, std::string>, ArtifactEntry> entries_;
};

StatusOr<ArtifactReference> LoadArtifactReference(const std::string& path);

// "06-FGD" -> "fgd"; empty for names tessera does not implement.
std::string PolicyFromArtifactName(const std::string& artifact_name);

// The reproduction tolerance of the foundation issue: 0.3 percentage points, or half the
// artifact's own min-max spread across its seeds where that is wider.
double ToleranceAt100(const ArtifactEntry& e);
// |our_median - the artifact's median at 100 %| <= ToleranceAt100(e).
bool WithinToleranceAt100(const ArtifactEntry& e, double our_median);

}  // namespace tessera::sim
