// The fair orders (include/tessera/sched/fair_order.h) and their registry.

#include "tessera/sched/fair_order.h"

#include <memory>
#include <string>

namespace tessera::sched {
namespace {

// Hierarchical weighted DRF: the least-served active root, then its least-served active child,
// ... down to a leaf. Strict `<`: ties go to the tenant listed first.
class HdrfOrder final : public FairOrder {
 public:
  TenantIndex Next(const TenantTree& tree, std::span<const double> share,
                   std::span<const int> active) const override {
    const std::vector<TenantIndex>* level = &tree.roots();
    while (true) {
      TenantIndex best = kNoTenant;
      for (TenantIndex c : *level)
        if (active[c] > 0 && (best == kNoTenant || share[c] < share[best])) best = c;
      if (best == kNoTenant || tree.is_leaf(best)) return best;
      level = &tree.children(best);
    }
  }
  std::string_view name() const override { return "hdrf"; }
};

// Weighted DRF over the leaves alone: the least-served active leaf, ties by index.
class FlatDrfOrder final : public FairOrder {
 public:
  TenantIndex Next(const TenantTree& tree, std::span<const double> share,
                   std::span<const int> active) const override {
    TenantIndex best = kNoTenant;
    for (TenantIndex t = 0; t < tree.size(); ++t)
      if (tree.is_leaf(t) && active[t] > 0 && (best == kNoTenant || share[t] < share[best])) best = t;
    return best;
  }
  std::string_view name() const override { return "flat-drf"; }
};

}  // namespace

const std::vector<std::string>& FairOrderNames() {
  static const std::vector<std::string> names = {"hdrf", "flat-drf"};
  return names;
}

StatusOr<std::unique_ptr<FairOrder>> MakeFairOrder(std::string_view name) {
  if (name == "hdrf") return std::unique_ptr<FairOrder>(std::make_unique<HdrfOrder>());
  if (name == "flat-drf") return std::unique_ptr<FairOrder>(std::make_unique<FlatDrfOrder>());
  std::string known;
  for (const std::string& n : FairOrderNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgumentError("unknown fair order '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace tessera::sched
