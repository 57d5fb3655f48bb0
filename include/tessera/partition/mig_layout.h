// MIG layouts: which GPU instances (profile + placement start) one GPU holds, checked against
// its model's rules from the catalog (core/gpu_model.h).
//
// Rules (NVIDIA MIG User Guide, "Supported MIG Profiles" and placements):
//   1. the profile exists on the model;
//   2. the start is one of the profile's valid placement starts (memory-slice units);
//   3. instances occupy memory slices [start, start + size) that never overlap;
//   4. at most max_count instances of each profile;
//   5. at most max_gpu_instances instances in all;
//   6. their compute slices add up to at most the model's compute slices (7, or 4 on A30).
//
// Worked example (H100-80GB: 7 compute / 8 memory slices):
//   "3g.40gb@0,3g.40gb@4"           valid (slices 0-3 and 4-7; 6 of 7 compute slices)
//   "3g.40gb@0,4g.40gb@4"           rule 2: 4g.40gb may only start at 0
//   "4g.40gb@0,3g.40gb@4"           valid: 4 + 3 = 7 compute slices
//   "2g.20gb@0,2g.20gb@2,2g.20gb@4,1g.10gb@6"   valid; diagram [2g.20gb|2g.20gb|2g.20gb|1g|.]
//   "1g.10gb@0,1g.20gb@0"           rule 3: slices 0-0 and 0-1 overlap
//
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"

namespace tessera::partition {

struct MigInstance {
  int profile = 0;  // index into MigGeometry::profiles
  int start = 0;    // first memory slice
  friend auto operator<=>(const MigInstance&, const MigInstance&) = default;
};

using MigLayout = std::vector<MigInstance>;

// Incremental check of rules 2-6 while a layout is built instance by instance (the fast path of
// enumeration and packing; ValidateLayout is the full check with messages).
//   MigOccupancy occ(h100);
//   occ.Fits(h100, three_g, 0) -> true; occ.Add(h100, three_g, 0, +1);
//   occ.Fits(h100, four_g, 0) -> false (slices 0-3 taken)
struct MigOccupancy {
  explicit MigOccupancy(const MigGeometry& g) : count(g.profiles.size(), 0) {}
  uint32_t slices = 0;     // bit s = memory slice s used
  std::vector<int> count;  // instances per profile
  int instances = 0;
  int compute = 0;

  bool Fits(const MigGeometry& g, int profile, int start) const {
    const MigProfile& p = g.profiles[static_cast<size_t>(profile)];
    if (start < 0 || start + p.size > g.memory_slices || p.size <= 0 || p.size >= 32) return false;
    const uint32_t mask = ((1u << p.size) - 1u) << start;
    return (slices & mask) == 0 && count[static_cast<size_t>(profile)] < p.max_count &&
           instances < g.max_gpu_instances && compute + p.compute_slices <= g.compute_slices &&
           std::find(p.starts.begin(), p.starts.end(), start) != p.starts.end();
  }
  // sign = +1 adds the instance, -1 removes it (it must have been added).
  void Add(const MigGeometry& g, int profile, int start, int sign) {
    const MigProfile& p = g.profiles[static_cast<size_t>(profile)];
    const uint32_t mask = ((1u << p.size) - 1u) << start;
    slices = sign > 0 ? (slices | mask) : (slices & ~mask);
    count[static_cast<size_t>(profile)] += sign;
    instances += sign;
    compute += sign * p.compute_slices;
  }
};

// OK, or FAILED_PRECONDITION naming the rule broken and the instance(s) involved.
Status ValidateLayout(const MigGeometry& geometry, const MigLayout& layout);

// Whether `layout` + `instance` is valid (layout assumed valid).
bool CanAdd(const MigGeometry& geometry, const MigLayout& layout, const MigInstance& instance);

// Every valid layout to which no instance can be added, each sorted by start, in a canonical
// order. Profiles with media extensions ("+me") are left out unless asked for.
std::vector<MigLayout> EnumerateMaximalLayouts(const MigGeometry& geometry, bool with_media_extensions = false);

// Every valid layout that contains `fixed` (a valid layout), including `fixed` itself; the
// candidates a planner may move a GPU to without touching `fixed`.
std::vector<MigLayout> EnumerateLayoutsContaining(const MigGeometry& geometry, const MigLayout& fixed,
                                                  bool with_media_extensions = false);

// "3g.40gb@0,1g.10gb@4" -> layout; INVALID_ARGUMENT names the bad item (unknown profile lists
// the model's profiles). The result is not validated; call ValidateLayout.
StatusOr<MigLayout> ParseLayout(const MigGeometry& geometry, std::string_view text);
// The inverse of ParseLayout: "3g.40gb@0,1g.10gb@4" (sorted by start).
std::string FormatLayout(const MigGeometry& geometry, const MigLayout& layout);
// One cell per memory slice: "|3g.40gb........|1g.10gb|  free |" style diagram, e.g.
// "[0-3 3g.40gb][4 1g.10gb][5 -][6 -][7 -]".
std::string SlotDiagram(const MigGeometry& geometry, const MigLayout& layout);

// Index of the profile named `name`, or NOT_FOUND listing the model's profiles.
StatusOr<int> FindProfileIndex(const MigGeometry& geometry, std::string_view name);

}  // namespace tessera::partition
