#include "tessera/partition/mig_layout.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace tessera::partition {
namespace {

std::string Describe(const MigGeometry& g, const MigInstance& i) {
  return g.profiles[static_cast<size_t>(i.profile)].name + "@" + std::to_string(i.start);
}

bool IsMediaExtended(const MigProfile& p) { return p.media_extensions || p.name.find("+me") != std::string::npos; }

// The depth-first search adds new instances in increasing start order, so every layout is
// produced exactly once; no de-duplication is needed.
void Emit(MigLayout current, std::vector<MigLayout>& out) {
  std::sort(current.begin(), current.end(), [](const MigInstance& a, const MigInstance& b) { return a.start < b.start; });
  out.push_back(std::move(current));
}

void Extend(const MigGeometry& g, MigLayout& current, MigOccupancy& occ, int from_slice, bool with_me,
            std::vector<MigLayout>& out, bool only_maximal) {
  // Add instances whose start is >= from_slice (canonical order avoids permutations).
  bool extended = false;
  for (int slice = from_slice; slice < g.memory_slices; ++slice) {
    for (int p = 0; p < static_cast<int>(g.profiles.size()); ++p) {
      const MigProfile& prof = g.profiles[static_cast<size_t>(p)];
      if (!with_me && IsMediaExtended(prof)) continue;
      if (!occ.Fits(g, p, slice)) continue;
      extended = true;
      current.push_back({p, slice});
      occ.Add(g, p, slice, +1);
      Extend(g, current, occ, slice + prof.size, with_me, out, only_maximal);
      occ.Add(g, p, slice, -1);
      current.pop_back();
    }
  }
  if (!only_maximal) {
    Emit(current, out);
    return;
  }
  if (extended) return;
  // Maximal only if nothing at all (at any start, including before from_slice) can be added.
  for (int p = 0; p < static_cast<int>(g.profiles.size()); ++p) {
    const MigProfile& prof = g.profiles[static_cast<size_t>(p)];
    if (!with_me && IsMediaExtended(prof)) continue;
    for (int s : prof.starts) {
      if (occ.Fits(g, p, s)) return;
    }
  }
  Emit(current, out);
}

void Enumerate(const MigGeometry& g, const MigLayout& fixed, bool with_me, std::vector<MigLayout>& out,
               bool only_maximal) {
  MigOccupancy occ(g);
  for (const MigInstance& i : fixed) occ.Add(g, i.profile, i.start, +1);
  MigLayout current = fixed;
  Extend(g, current, occ, 0, with_me, out, only_maximal);
}

}  // namespace

StatusOr<int> FindProfileIndex(const MigGeometry& g, std::string_view name) {
  for (size_t i = 0; i < g.profiles.size(); ++i) {
    if (g.profiles[i].name == name) return static_cast<int>(i);
  }
  std::string known;
  for (const MigProfile& p : g.profiles) known += (known.empty() ? "" : ", ") + p.name;
  return NotFoundError("unknown MIG profile '" + std::string(name) + "' (this model has: " + known + ")");
}

Status ValidateLayout(const MigGeometry& g, const MigLayout& layout) {
  std::vector<int> owner(static_cast<size_t>(g.memory_slices), -1);
  std::vector<int> count(g.profiles.size(), 0);
  int compute = 0;
  for (size_t k = 0; k < layout.size(); ++k) {
    const MigInstance& i = layout[k];
    if (i.profile < 0 || static_cast<size_t>(i.profile) >= g.profiles.size()) {
      return FailedPreconditionError("rule 1 (profile exists): instance " + std::to_string(k) +
                                     " names profile index " + std::to_string(i.profile));
    }
    const MigProfile& p = g.profiles[static_cast<size_t>(i.profile)];
    if (std::find(p.starts.begin(), p.starts.end(), i.start) == p.starts.end()) {
      std::string starts;
      for (int s : p.starts) starts += (starts.empty() ? "" : ",") + std::to_string(s);
      return FailedPreconditionError("rule 2 (valid placement): " + Describe(g, i) + ": " + p.name +
                                     " may start only at memory slice " + starts);
    }
    for (int s = i.start; s < i.start + p.size; ++s) {
      if (s >= g.memory_slices) {
        return FailedPreconditionError("rule 2 (valid placement): " + Describe(g, i) + " runs past memory slice " +
                                       std::to_string(g.memory_slices - 1));
      }
      if (owner[static_cast<size_t>(s)] >= 0) {
        return FailedPreconditionError("rule 3 (no overlap): " + Describe(g, i) + " and " +
                                       Describe(g, layout[static_cast<size_t>(owner[static_cast<size_t>(s)])]) +
                                       " both use memory slice " + std::to_string(s));
      }
      owner[static_cast<size_t>(s)] = static_cast<int>(k);
    }
    if (++count[static_cast<size_t>(i.profile)] > p.max_count) {
      return FailedPreconditionError("rule 4 (max count): more than " + std::to_string(p.max_count) + " " + p.name +
                                     " instances");
    }
    compute += p.compute_slices;
  }
  if (static_cast<int>(layout.size()) > g.max_gpu_instances) {
    return FailedPreconditionError("rule 5 (max instances): " + std::to_string(layout.size()) +
                                   " GPU instances, the model allows " + std::to_string(g.max_gpu_instances));
  }
  if (compute > g.compute_slices) {
    return FailedPreconditionError("rule 6 (compute slices): the instances need " + std::to_string(compute) +
                                   " compute slices, the model has " + std::to_string(g.compute_slices));
  }
  return Status::Ok();
}

bool CanAdd(const MigGeometry& g, const MigLayout& layout, const MigInstance& instance) {
  MigLayout with = layout;
  with.push_back(instance);
  return ValidateLayout(g, with).ok();
}

std::vector<MigLayout> EnumerateMaximalLayouts(const MigGeometry& g, bool with_media_extensions) {
  std::vector<MigLayout> out;
  Enumerate(g, {}, with_media_extensions, out, /*only_maximal=*/true);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<MigLayout> EnumerateLayoutsContaining(const MigGeometry& g, const MigLayout& fixed,
                                                  bool with_media_extensions) {
  std::vector<MigLayout> out;
  if (!ValidateLayout(g, fixed).ok() || g.memory_slices > 32) return {};
  Enumerate(g, fixed, with_media_extensions, out, /*only_maximal=*/false);
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<MigLayout> ParseLayout(const MigGeometry& g, std::string_view text) {
  MigLayout layout;
  if (text.empty()) return layout;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = text.find(',', pos);
    const std::string_view item = text.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    const size_t at = item.find('@');
    if (item.empty() || at == std::string_view::npos) {
      return InvalidArgumentError("layout item '" + std::string(item) + "': expected PROFILE@START, e.g. 3g.40gb@4");
    }
    auto profile = FindProfileIndex(g, item.substr(0, at));
    if (!profile.ok()) return InvalidArgumentError("layout item '" + std::string(item) + "': " + profile.status().message());
    int start = -1;
    const std::string_view num = item.substr(at + 1);
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), start);
    if (ec != std::errc() || ptr != num.data() + num.size() || start < 0) {
      return InvalidArgumentError("layout item '" + std::string(item) + "': start must be a memory-slice number");
    }
    layout.push_back({*profile, start});
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return layout;
}

std::string FormatLayout(const MigGeometry& g, const MigLayout& layout) {
  MigLayout sorted = layout;
  std::sort(sorted.begin(), sorted.end(), [](const MigInstance& a, const MigInstance& b) { return a.start < b.start; });
  std::string out;
  for (const MigInstance& i : sorted) {
    if (!out.empty()) out.append(",");
    out.append(Describe(g, i));
  }
  return out;
}

std::string SlotDiagram(const MigGeometry& g, const MigLayout& layout) {
  std::vector<int> owner(static_cast<size_t>(g.memory_slices), -1);
  for (size_t k = 0; k < layout.size(); ++k) {
    const MigProfile& p = g.profiles[static_cast<size_t>(layout[k].profile)];
    for (int s = layout[k].start; s < layout[k].start + p.size && s < g.memory_slices; ++s) {
      owner[static_cast<size_t>(s)] = static_cast<int>(k);
    }
  }
  std::string out;
  for (int s = 0; s < g.memory_slices;) {
    const int k = owner[static_cast<size_t>(s)];
    out.append("[").append(std::to_string(s));
    if (k < 0) {
      out.append(" -]");
      ++s;
      continue;
    }
    const MigProfile& p = g.profiles[static_cast<size_t>(layout[static_cast<size_t>(k)].profile)];
    const int end = layout[static_cast<size_t>(k)].start + p.size - 1;
    if (end > s) out.append("-").append(std::to_string(end));
    out.append(" ").append(p.name).append("]");
    s = end + 1;
  }
  return out;
}

}  // namespace tessera::partition
