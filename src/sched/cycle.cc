// Scheduler::Cycle: the three passes (entitled, borrowing, leftovers) in fair order.

#include "src/sched/scheduler_impl.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <set>
#include <vector>

namespace tessera::sched {

CycleResult Scheduler::Cycle(Seconds now) {
  Impl& m = *impl_;
  CycleResult out;
  m.Decay(now);
  const TenantTree& tree = *m.tree;
  const int nt = tree.size();
  std::vector<int> active(nt, 0);  // active leaves in the subtree
  std::vector<std::set<PendingKey>::iterator> cursor(nt), stop(nt);
  CycleState cs;
  cs.reclaims_left = m.opt.max_reclaims_per_cycle;

  for (int pass = 0; pass < 3; ++pass) {
    const uint8_t lo = pass == 2 ? 2 : (pass == 1 ? 1 : 0);
    const uint8_t hi = pass == 2 ? 3 : 2;  // [lo, hi) of QoS ranks
    std::fill(active.begin(), active.end(), 0);
    for (int t = 0; t < nt; ++t) {
      if (m.queue[t].empty()) continue;
      cursor[t] = m.queue[t].lower_bound(PendingKey{lo, INT32_MIN, INT64_MIN, INT64_MIN});
      stop[t] = m.queue[t].lower_bound(PendingKey{hi, INT32_MIN, INT64_MIN, INT64_MIN});
      if (cursor[t] == stop[t]) continue;
      for (TenantIndex a : tree.path(t)) active[a]++;
    }
    while (true) {
      const TenantIndex pick = m.fair_order->Next(tree, m.share, active);
      if (pick == kNoTenant) break;
      // Nothing more can start in this pass once no GPU is free, no victim search is left and
      // no CPU-only job waits: stop scanning the queue.
      if (m.cpu_only_pending == 0 && (cs.reclaims_left <= 0 || !m.opt.preemption || pass == 2) &&
          m.NoGpuFree())
        break;
      if (cursor[pick] == stop[pick]) {
        for (TenantIndex a : tree.path(pick)) active[a]--;
        continue;
      }
      const PendingKey key = *cursor[pick];
      ++cursor[pick];
      if (cs.requeued_now.count(key.id)) continue;  // preempted in this cycle: waits for the next
      AttemptJob(m, m.pending.at(key.id), pass, now, cs, out);
    }
  }
  out.error = m.internal_error;
  return out;
}

}  // namespace tessera::sched
