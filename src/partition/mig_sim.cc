#include "tessera/partition/mig_sim.h"

#include <algorithm>

namespace tessera::partition {
namespace {

bool IsMe(const MigProfile& p) { return p.media_extensions || p.name.find("+me") != std::string::npos; }

int FreeSlices(const MigGeometry& g, const MigOccupancy& occ) {
  int used = 0;
  for (int s = 0; s < g.memory_slices; ++s) used += (occ.slices >> s) & 1u;
  return g.memory_slices - used;
}

bool CanPlace(const MigGeometry& g, const MigOccupancy& occ, int p) {
  for (int s : g.profiles[static_cast<size_t>(p)].starts) {
    if (occ.Fits(g, p, s)) return true;
  }
  return false;
}

// Expected free memory slices the demand mix `q` could not use on this GPU.
double Fragmentation(const MigGeometry& g, const MigOccupancy& occ, const std::vector<double>& q) {
  const int free = FreeSlices(g, occ);
  double f = 0;
  for (size_t p = 0; p < q.size(); ++p) {
    if (q[p] > 0 && !CanPlace(g, occ, static_cast<int>(p))) f += q[p] * free;
  }
  return f;
}

MigSimResult Finish(MigSimResult r) {
  r.unserved_pct = r.capacity_slices > 0
                       ? 100.0 * static_cast<double>(r.capacity_slices - r.served_slices) /
                             static_cast<double>(r.capacity_slices)
                       : 0.0;
  return r;
}

}  // namespace

StatusOr<int> ProfileForFraction(const MigGeometry& g, GpuMilli milli) {
  const int64_t m = milli.value();
  int best = -1;
  for (size_t i = 0; i < g.profiles.size(); ++i) {
    const MigProfile& p = g.profiles[i];
    if (IsMe(p) || m <= 0) continue;
    if (int64_t{p.compute_slices} * 1000 < m * g.compute_slices) continue;
    if (int64_t{p.memory_slices} * 1000 < m * g.memory_slices) continue;
    const MigProfile* b = best >= 0 ? &g.profiles[static_cast<size_t>(best)] : nullptr;
    if (b == nullptr || p.memory_slices < b->memory_slices ||
        (p.memory_slices == b->memory_slices && p.compute_slices < b->compute_slices)) {
      best = static_cast<int>(i);
    }
  }
  if (best < 0) return NotFoundError("no MIG profile covers " + std::to_string(m) + " milli-GPU");
  return best;
}

MigSimResult SimulateStaticMig(const MigGeometry& g, int gpus, const MigLayout& layout,
                               const std::vector<int>& requests) {
  MigSimResult r = SimulateStaticLayouts(g, std::vector<MigLayout>(static_cast<size_t>(gpus), layout), requests);
  r.strategy = "static:" + FormatLayout(g, layout);
  return r;
}

MigSimResult SimulateStaticLayouts(const MigGeometry& g, const std::vector<MigLayout>& layouts,
                                   const std::vector<int>& requests) {
  MigSimResult r;
  r.strategy = "static:planned";
  r.gpus = static_cast<int>(layouts.size());
  r.capacity_slices = int64_t{r.gpus} * g.memory_slices;
  // Free instances per profile across the cluster.
  std::vector<int64_t> free(g.profiles.size(), 0);
  for (const MigLayout& layout : layouts) {
    for (const MigInstance& i : layout) ++free[static_cast<size_t>(i.profile)];
  }
  for (int p : requests) {
    if (r.requested_slices >= r.capacity_slices) break;
    const MigProfile& want = g.profiles[static_cast<size_t>(p)];
    r.requested_slices += want.memory_slices;
    // Its own profile, else the smallest larger one.
    int take = free[static_cast<size_t>(p)] > 0 ? p : -1;
    for (size_t c = 0; take != p && c < g.profiles.size(); ++c) {
      const MigProfile& cand = g.profiles[c];
      if (free[c] == 0 || cand.memory_slices < want.memory_slices || cand.compute_slices < want.compute_slices) continue;
      if (take < 0 || cand.memory_slices < g.profiles[static_cast<size_t>(take)].memory_slices) take = static_cast<int>(c);
    }
    if (take < 0) continue;
    --free[static_cast<size_t>(take)];
    r.served_slices += want.memory_slices;
  }
  return Finish(r);
}

MigSimResult SimulateDynamicMig(const MigGeometry& g, int gpus, const std::vector<int>& requests) {
  MigSimResult r;
  r.strategy = "dynamic";
  r.gpus = gpus;
  r.capacity_slices = int64_t{gpus} * g.memory_slices;
  // The demand mix, weighted by slices requested.
  std::vector<double> q(g.profiles.size(), 0.0);
  double total = 0;
  for (int p : requests) {
    q[static_cast<size_t>(p)] += g.profiles[static_cast<size_t>(p)].memory_slices;
    total += g.profiles[static_cast<size_t>(p)].memory_slices;
  }
  for (double& x : q) x = total > 0 ? x / total : 0;
  std::vector<MigOccupancy> occ(static_cast<size_t>(gpus), MigOccupancy(g));
  std::vector<double> frag(static_cast<size_t>(gpus), Fragmentation(g, MigOccupancy(g), q));
  for (int p : requests) {
    if (r.requested_slices >= r.capacity_slices) break;
    const MigProfile& want = g.profiles[static_cast<size_t>(p)];
    r.requested_slices += want.memory_slices;
    int best_gpu = -1, best_start = -1, best_free = 0;
    double best_delta = 0;
    for (int k = 0; k < gpus; ++k) {
      MigOccupancy& o = occ[static_cast<size_t>(k)];
      const int free_before = FreeSlices(g, o);
      if (free_before < want.memory_slices) continue;
      for (int s : want.starts) {
        if (!o.Fits(g, p, s)) continue;
        o.Add(g, p, s, +1);
        const double delta = Fragmentation(g, o, q) - frag[static_cast<size_t>(k)];
        o.Add(g, p, s, -1);
        const bool better = best_gpu < 0 || delta < best_delta - 1e-12 ||
                            (delta <= best_delta + 1e-12 && free_before < best_free);
        if (better) {
          best_gpu = k;
          best_start = s;
          best_delta = delta;
          best_free = free_before;
        }
      }
    }
    if (best_gpu < 0) continue;
    MigOccupancy& o = occ[static_cast<size_t>(best_gpu)];
    o.Add(g, p, best_start, +1);
    frag[static_cast<size_t>(best_gpu)] = Fragmentation(g, o, q);
    r.served_slices += want.memory_slices;
  }
  return Finish(r);
}

MigSimResult BestStaticMig(const MigGeometry& g, int gpus, const std::vector<int>& requests) {
  MigSimResult best;
  bool have = false;
  for (const MigLayout& l : EnumerateMaximalLayouts(g)) {
    MigSimResult r = SimulateStaticMig(g, gpus, l, requests);
    if (!have || r.served_slices > best.served_slices) {
      best = r;
      have = true;
    }
  }
  return best;
}

}  // namespace tessera::partition
