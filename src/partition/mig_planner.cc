#include "tessera/partition/mig_planner.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_map>

namespace tessera::partition {
namespace {

using Offer = std::vector<int>;  // per profile index

// Shared by all GPUs with the same in-use instances.
struct GpuCandidates {
  MigLayout fixed;                     // in-use instances
  std::vector<MigLayout> layouts;      // every valid layout containing `fixed`
  std::vector<Offer> layout_offers;    // per layout: its not-in-use instances per profile
  std::vector<Offer> offers;           // the Pareto-maximal ones
};

Offer OfferOf(const MigGeometry& g, const MigLayout& layout, const MigLayout& fixed) {
  Offer o(g.profiles.size(), 0);
  for (const MigInstance& i : layout) {
    if (std::find(fixed.begin(), fixed.end(), i) == fixed.end()) ++o[static_cast<size_t>(i.profile)];
  }
  return o;
}

bool Dominates(const Offer& a, const Offer& b) {  // a >= b componentwise
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] < b[i]) return false;
  }
  return true;
}

int Value(const MigGeometry& g, const Offer& used) {
  int v = 0;
  for (size_t p = 0; p < used.size(); ++p) v += used[p] * g.profiles[p].memory_slices;
  return v;
}

// The part of `offer` that serves `remaining`.
Offer Take(const Offer& offer, const Offer& remaining) {
  Offer t(offer.size());
  for (size_t i = 0; i < offer.size(); ++i) t[i] = std::min(offer[i], remaining[i]);
  return t;
}

class Planner {
 public:
  Planner(const MigGeometry& g, std::vector<const GpuCandidates*> gpus, Offer demand)
      : g_(g), gpus_(std::move(gpus)), demand_(std::move(demand)) {}

  std::vector<Offer> Exact() {
    best_value_ = -1;
    std::vector<Offer> current(gpus_.size(), Offer(demand_.size(), 0));
    memo_.clear();
    Search(0, demand_, 0, current);
    return best_;
  }

  std::vector<Offer> Heuristic() {
    // Two starts, each improved by coordinate ascent; keep the better.
    std::vector<Offer> greedy = ImprovePairs(Improve(GreedyByGpu()));
    std::vector<Offer> ffd = ImprovePairs(Improve(FirstFitDecreasing()));
    return Total(ffd) > Total(greedy) ? ffd : greedy;
  }

  // Re-split the demand served by two GPUs jointly (exactly, given the rest) while that helps,
  // within a budget of pair evaluations so large clusters stay fast.
  std::vector<Offer> ImprovePairs(std::vector<Offer> assigned) const {
    Offer remaining = demand_;
    for (const Offer& a : assigned) {
      for (size_t p = 0; p < remaining.size(); ++p) remaining[p] -= a[p];
    }
    // Offer-pair evaluations: exhaustive for small clusters, bounded for large ones.
    int64_t budget = 300'000;
    for (int pass = 0; pass < 3 && budget > 0; ++pass) {
      bool improved = false;
      for (size_t k = 0; k < gpus_.size() && budget > 0; ++k) {
        for (size_t j = k + 1; j < gpus_.size() && budget > 0; ++j) {
          Offer pool = remaining;
          for (size_t p = 0; p < pool.size(); ++p) pool[p] += assigned[k][p] + assigned[j][p];
          const int current = Value(g_, assigned[k]) + Value(g_, assigned[j]);
          int best = current;
          Offer best_k, best_j;
          for (const Offer& ok : gpus_[k]->offers) {
            const Offer tk = Take(ok, pool);
            Offer rest = pool;
            for (size_t p = 0; p < rest.size(); ++p) rest[p] -= tk[p];
            const Offer tj = BestFor(j, rest);
            budget -= static_cast<int64_t>(gpus_[j]->offers.size());
            const int v = Value(g_, tk) + Value(g_, tj);
            if (v > best) {
              best = v;
              best_k = tk;
              best_j = tj;
            }
          }
          if (best > current) {
            assigned[k] = best_k;
            assigned[j] = best_j;
            for (size_t p = 0; p < pool.size(); ++p) remaining[p] = pool[p] - best_k[p] - best_j[p];
            improved = true;
          }
        }
      }
      if (!improved) break;
    }
    return assigned;
  }

 private:
  int Total(const std::vector<Offer>& assigned) const {
    int v = 0;
    for (const Offer& o : assigned) v += Value(g_, o);
    return v;
  }

  // Each GPU in turn takes its most valuable share of what is left.
  std::vector<Offer> GreedyByGpu() const {
    std::vector<Offer> assigned(gpus_.size(), Offer(demand_.size(), 0));
    Offer remaining = demand_;
    for (size_t k = 0; k < gpus_.size(); ++k) {
      assigned[k] = BestFor(k, remaining);
      for (size_t p = 0; p < remaining.size(); ++p) remaining[p] -= assigned[k][p];
    }
    return assigned;
  }

  // Bin packing: demanded instances largest first, each into the GPU and start where it fits
  // tightest (fewest free memory slices left; then lowest GPU index and start).
  std::vector<Offer> FirstFitDecreasing() const {
    std::vector<MigOccupancy> layout(gpus_.size(), MigOccupancy(g_));
    std::vector<int> used_slices(gpus_.size(), 0);
    for (size_t k = 0; k < gpus_.size(); ++k) {
      for (const MigInstance& i : gpus_[k]->fixed) {
        layout[k].Add(g_, i.profile, i.start, +1);
        used_slices[k] += g_.profiles[static_cast<size_t>(i.profile)].size;
      }
    }
    std::vector<int> order(demand_.size());
    for (size_t p = 0; p < order.size(); ++p) order[p] = static_cast<int>(p);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      const MigProfile& pa = g_.profiles[static_cast<size_t>(a)];
      const MigProfile& pb = g_.profiles[static_cast<size_t>(b)];
      if (pa.memory_slices != pb.memory_slices) return pa.memory_slices > pb.memory_slices;
      return pa.compute_slices > pb.compute_slices;
    });
    std::vector<Offer> assigned(gpus_.size(), Offer(demand_.size(), 0));
    for (int p : order) {
      const MigProfile& prof = g_.profiles[static_cast<size_t>(p)];
      for (int n = 0; n < demand_[static_cast<size_t>(p)]; ++n) {
        int best_k = -1, best_start = -1, best_left = 0;
        for (size_t k = 0; k < gpus_.size(); ++k) {
          const int left = g_.memory_slices - used_slices[k] - prof.size;
          if (left < 0 || (best_k >= 0 && left >= best_left)) continue;
          for (int start : prof.starts) {
            if (layout[k].Fits(g_, p, start)) {
              best_k = static_cast<int>(k);
              best_start = start;
              best_left = left;
              break;
            }
          }
        }
        if (best_k < 0) break;  // no GPU fits another instance of this profile
        layout[static_cast<size_t>(best_k)].Add(g_, p, best_start, +1);
        used_slices[static_cast<size_t>(best_k)] += prof.size;
        ++assigned[static_cast<size_t>(best_k)][static_cast<size_t>(p)];
      }
    }
    return assigned;
  }

  // Re-choose one GPU's share at a time, given the others, while that helps.
  std::vector<Offer> Improve(std::vector<Offer> assigned) const {
    Offer remaining = demand_;
    for (const Offer& a : assigned) {
      for (size_t p = 0; p < remaining.size(); ++p) remaining[p] -= a[p];
    }
    // Improve one GPU at a time while it helps (bounded passes).
    for (int pass = 0; pass < 4; ++pass) {
      bool improved = false;
      for (size_t k = 0; k < gpus_.size(); ++k) {
        Offer without = remaining;
        for (size_t p = 0; p < without.size(); ++p) without[p] += assigned[k][p];
        const Offer best = BestFor(k, without);
        if (Value(g_, best) > Value(g_, assigned[k])) {
          assigned[k] = best;
          improved = true;
        }
        for (size_t p = 0; p < without.size(); ++p) remaining[p] = without[p] - assigned[k][p];
      }
      if (!improved) break;
    }
    return assigned;
  }

  Offer BestFor(size_t k, const Offer& remaining) const {
    Offer best(remaining.size(), 0);
    int best_value = -1;
    for (const Offer& o : gpus_[k]->offers) {
      const Offer t = Take(o, remaining);
      const int v = Value(g_, t);
      if (v > best_value) {
        best_value = v;
        best = t;
      }
    }
    return best;
  }

  int MaxValueFrom(size_t k, const Offer& remaining) const {
    // Upper bound: each remaining GPU serves its best offer alone, capped by the demand left.
    int bound = 0;
    for (size_t j = k; j < gpus_.size(); ++j) bound += Value(g_, BestFor(j, remaining));
    return std::min(bound, Value(g_, remaining));
  }

  void Search(size_t k, const Offer& remaining, int value, std::vector<Offer>& current) {
    if (value > best_value_) {
      best_value_ = value;
      best_ = current;
      for (size_t j = k; j < gpus_.size(); ++j) best_[j].assign(demand_.size(), 0);
    }
    if (k == gpus_.size()) return;
    if (value + MaxValueFrom(k, remaining) <= best_value_) return;
    auto key = std::make_pair(k, remaining);
    auto it = memo_.find(key);
    if (it != memo_.end() && it->second >= value) return;
    memo_[key] = value;
    // Distinct useful takes of this GPU, best first.
    std::vector<Offer> takes;
    for (const Offer& o : gpus_[k]->offers) {
      Offer t = Take(o, remaining);
      if (std::find(takes.begin(), takes.end(), t) == takes.end()) takes.push_back(std::move(t));
    }
    std::sort(takes.begin(), takes.end(), [&](const Offer& a, const Offer& b) { return Value(g_, a) > Value(g_, b); });
    for (const Offer& t : takes) {
      Offer next = remaining;
      for (size_t p = 0; p < next.size(); ++p) next[p] -= t[p];
      current[k] = t;
      Search(k + 1, next, value + Value(g_, t), current);
    }
    current[k].assign(demand_.size(), 0);
  }

  const MigGeometry& g_;
  std::vector<const GpuCandidates*> gpus_;
  Offer demand_;
  int best_value_ = -1;
  std::vector<Offer> best_;
  std::map<std::pair<size_t, Offer>, int> memo_;
};

// The layout containing `fixed` whose free instances are exactly `use`, with the fewest steps
// from the GPU's current layout (`existing_free` = its instances that are not in use).
MigLayout LayoutFor(const GpuCandidates& c, const MigLayout& existing_free, const Offer& use) {
  const MigLayout* best = nullptr;
  int best_steps = 0;
  for (size_t n = 0; n < c.layouts.size(); ++n) {
    if (c.layout_offers[n] != use) continue;
    const MigLayout& l = c.layouts[n];
    int steps = 0;
    for (const MigInstance& i : l) {
      const bool fixed = std::find(c.fixed.begin(), c.fixed.end(), i) != c.fixed.end();
      const bool exists = std::find(existing_free.begin(), existing_free.end(), i) != existing_free.end();
      if (!fixed && !exists) ++steps;  // create
    }
    for (const MigInstance& i : existing_free) {
      if (std::find(l.begin(), l.end(), i) == l.end()) ++steps;  // destroy
    }
    if (best == nullptr || steps < best_steps) {
      best = &l;
      best_steps = steps;
    }
  }
  return best != nullptr ? *best : c.fixed;
}

}  // namespace

StatusOr<MigPlan> PlanMig(const MigGeometry& g, const std::vector<MigGpuState>& gpus,
                          const std::map<std::string, int>& demand, MigPlanMode mode) {
  Offer want(g.profiles.size(), 0);
  for (const auto& [name, count] : demand) {
    auto p = FindProfileIndex(g, name);
    if (!p.ok()) return InvalidArgumentError("demand: " + p.status().message());
    if (count < 0) return InvalidArgumentError("demand: " + name + "=" + std::to_string(count) + " is negative");
    want[static_cast<size_t>(*p)] += count;
  }
  // Candidates per distinct GPU state (1000 GPUs usually share a handful of states).
  std::map<MigLayout, GpuCandidates> by_state;
  std::vector<const GpuCandidates*> per_gpu;
  std::vector<MigLayout> existing_free(gpus.size());
  for (size_t k = 0; k < gpus.size(); ++k) {
    const MigGpuState& s = gpus[k];
    if (Status st = ValidateLayout(g, s.current); !st.ok()) return st.WithPrefix("GPU " + std::to_string(k));
    MigLayout fixed, free;
    for (size_t i = 0; i < s.current.size(); ++i) {
      (i < s.in_use.size() && s.in_use[i] ? fixed : free).push_back(s.current[i]);
    }
    std::sort(fixed.begin(), fixed.end());
    std::sort(free.begin(), free.end());
    existing_free[k] = free;
    auto [it, inserted] = by_state.try_emplace(fixed);
    if (inserted) {
      GpuCandidates& c = it->second;
      c.fixed = fixed;
      const bool with_me = std::any_of(s.current.begin(), s.current.end(), [&](const MigInstance& i) {
        return g.profiles[static_cast<size_t>(i.profile)].media_extensions;
      }) || std::any_of(demand.begin(), demand.end(), [](const auto& d) { return d.first.find("+me") != std::string::npos && d.second > 0; });
      c.layouts = EnumerateLayoutsContaining(g, fixed, with_me);
      for (const MigLayout& l : c.layouts) {
        Offer o = OfferOf(g, l, fixed);
        c.layout_offers.push_back(o);
        bool dominated = false;
        for (const Offer& e : c.offers) dominated |= Dominates(e, o);
        if (dominated) continue;
        std::erase_if(c.offers, [&](const Offer& e) { return Dominates(o, e); });
        c.offers.push_back(std::move(o));
      }
    }
    per_gpu.push_back(&it->second);
  }

  Planner planner(g, per_gpu, want);
  const bool exact = mode == MigPlanMode::kExact || (mode == MigPlanMode::kAuto && gpus.size() <= 8);
  const std::vector<Offer> use = gpus.empty() ? std::vector<Offer>{} : (exact ? planner.Exact() : planner.Heuristic());

  MigPlan plan;
  Offer served(want.size(), 0);
  for (size_t k = 0; k < gpus.size(); ++k) {
    plan.layouts.push_back(LayoutFor(*per_gpu[k], existing_free[k], use[k]));
    for (size_t p = 0; p < want.size(); ++p) served[p] += use[k][p];
  }
  for (size_t p = 0; p < want.size(); ++p) {
    plan.satisfied_memory_slices += served[p] * g.profiles[p].memory_slices;
    if (want[p] > served[p]) plan.unsatisfied[g.profiles[p].name] = want[p] - served[p];
  }
  // Steps: destroy free instances not kept, then create new ones (per GPU, by start).
  for (size_t k = 0; k < gpus.size(); ++k) {
    for (const MigInstance& i : existing_free[k]) {
      const MigLayout& target = plan.layouts[k];
      if (std::find(target.begin(), target.end(), i) == target.end()) {
        plan.steps.push_back({MigPlanStep::Kind::kDestroy, static_cast<int>(k), i});
      }
    }
  }
  for (size_t k = 0; k < gpus.size(); ++k) {
    MigLayout target = plan.layouts[k];
    std::sort(target.begin(), target.end(), [](auto& a, auto& b) { return a.start < b.start; });
    for (const MigInstance& i : target) {
      const auto& cur = gpus[k].current;
      if (std::find(cur.begin(), cur.end(), i) == cur.end()) {
        plan.steps.push_back({MigPlanStep::Kind::kCreate, static_cast<int>(k), i});
      }
    }
  }
  return plan;
}

}  // namespace tessera::partition
