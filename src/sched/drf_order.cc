// Fair-share bookkeeping: weighted dominant shares and their decay (the order in which a cycle
// visits tenants by these shares is a FairOrder, fair_order.cc).

#include "src/sched/scheduler_impl.h"

#include <algorithm>
#include <cmath>

namespace tessera::sched {

double Scheduler::Impl::ShareWith(TenantIndex a, const Resources& delta, int sign) const {
  double s = 0;
  for (int d = 0; d < kMaxResourceDims; ++d) {
    if (!(drf_dims >> d & 1)) continue;
    const double u = static_cast<double>(usage[a][d] + sign * delta[d]);
    s = std::max(s, u / static_cast<double>(capacity[d]));
  }
  return s / tree->spec(a).weight;
}

double Scheduler::Impl::ShareOf(TenantIndex a) const {
  double s = 0;
  for (int d = 0; d < kMaxResourceDims; ++d) {
    if (!(drf_dims >> d & 1)) continue;
    const double u = opt.fair_share_half_life_s > 0 ? decayed[a][d]
                                                    : static_cast<double>(usage[a][d]);
    s = std::max(s, u / static_cast<double>(capacity[d]));
  }
  return s / tree->spec(a).weight;
}

void Scheduler::Impl::AddUsage(TenantIndex t, const Resources& r, QosClass q, int sign) {
  for (TenantIndex a : tree->path(t)) {
    if (sign > 0) usage[a] += r;
    else usage[a] -= r;
    if (q == QosClass::kBestEffort) {
      if (sign > 0) be_usage[a] += r;
      else be_usage[a] -= r;
    }
    if (q == QosClass::kGuaranteed) {
      if (sign > 0) g_usage[a] += r;
      else g_usage[a] -= r;
    }
    share[a] = ShareOf(a);
  }
}

void Scheduler::Impl::Decay(Seconds now) {
  if (opt.fair_share_half_life_s <= 0) return;
  if (!decay_started) {
    decay_started = true;
    last_decay = now;
    return;
  }
  const double dt = static_cast<double>((now - last_decay).count());
  if (dt <= 0) return;
  last_decay = now;
  const double keep = std::exp2(-dt / opt.fair_share_half_life_s);
  for (int a = 0; a < tree->size(); ++a) {
    for (int d = 0; d < kMaxResourceDims; ++d)
      decayed[a][d] = decayed[a][d] * keep + static_cast<double>(usage[a][d]) * (1 - keep);
    share[a] = ShareOf(a);
  }
}

}  // namespace tessera::sched
