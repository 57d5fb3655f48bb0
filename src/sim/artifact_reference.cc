#include "tessera/sim/artifact_reference.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "tessera/sim/csv.h"
#include "tessera/sim/sweep.h"

namespace tessera::sim {

std::string PolicyFromArtifactName(const std::string& n) {
  if (n == "01-Random") return "random";
  if (n == "02-DotProd") return "dotproduct";
  if (n == "03-GpuClustering") return "gpuclustering";
  if (n == "04-GpuPacking") return "gpupacking";
  if (n == "05-BestFit") return "bestfit";
  if (n == "06-FGD") return "fgd";
  return "";
}

double ArtifactEntry::MedianUnallocatedAt(int bucket) const {
  return Median(bucket == 130 ? unallocated_at_130 : unallocated_at_100);
}
double ArtifactEntry::MinUnallocatedAt100() const {
  return *std::min_element(unallocated_at_100.begin(), unallocated_at_100.end());
}
double ArtifactEntry::MaxUnallocatedAt100() const {
  return *std::max_element(unallocated_at_100.begin(), unallocated_at_100.end());
}

double ToleranceAt100(const ArtifactEntry& e) {
  return std::max(0.3, (e.MaxUnallocatedAt100() - e.MinUnallocatedAt100()) / 2.0);
}

bool WithinToleranceAt100(const ArtifactEntry& e, double our_median) {
  return std::fabs(our_median - e.MedianUnallocatedAt(100)) <= ToleranceAt100(e);
}

const ArtifactEntry* ArtifactReference::Find(const std::string& workload, const std::string& policy) const {
  auto it = entries_.find({workload, policy});
  return it == entries_.end() ? nullptr : &it->second;
}

StatusOr<ArtifactReference> LoadArtifactReference(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable t, ReadCsvFile(path));
  auto wl = t.ColumnIndex("workload");
  auto pol = t.ColumnIndex("sc_policy");
  auto c100 = t.ColumnIndex("100");
  auto c130 = t.ColumnIndex("130");
  if (!wl || !pol || !c100 || !c130) {
    return InvalidArgumentError(path + ":1:1: expected columns workload, sc_policy, 100 and 130");
  }
  ArtifactReference ref;
  for (const CsvRow& row : t.rows) {
    const std::string policy = PolicyFromArtifactName(row.fields[*pol]);
    if (policy.empty()) continue;
    auto parse = [&](size_t col) -> StatusOr<double> {
      const std::string& s = row.fields[col];
      char* end = nullptr;
      double v = std::strtod(s.c_str(), &end);
      if (s.empty() || end != s.c_str() + s.size()) {
        return InvalidArgumentError(t.Where(row, col) + ": " + t.header[col] + ": expected a number, got '" + s + "'");
      }
      return v;
    };
    TESSERA_ASSIGN_OR_RETURN(double a100, parse(*c100));
    TESSERA_ASSIGN_OR_RETURN(double a130, parse(*c130));
    ArtifactEntry& e = ref.entries_[{row.fields[*wl], policy}];
    e.workload = row.fields[*wl];
    e.policy = policy;
    e.unallocated_at_100.push_back(100.0 - a100);
    e.unallocated_at_130.push_back(100.0 - a130);
  }
  if (ref.entries_.empty()) return InvalidArgumentError(path + ": no rows for known policies");
  return ref;
}

}  // namespace tessera::sim
