// Consolidation: moving fractional pods live to free whole GPUs for a queued whole-GPU job.

#include "src/sched/scheduler_impl.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

namespace tessera::sched {

std::vector<MoveEvent> Scheduler::Impl::Consolidate(const Job& j, const TaskRequest& pod) {
  std::vector<MoveEvent> moves;
  for (size_t n = 0; n < snap.node_count(); ++n) {
    const NodeIndex ni{static_cast<uint32_t>(n)};
    if (!Open(ni) || !empty.Fits(ni, pod) || on_node[n].empty()) continue;
    if (snap.fully_free_gpus(ni) >= pod.num_gpu) continue;  // the engine would have used it
    // GPUs whose occupants are all movable sharing pods, by fewest occupants.
    std::vector<std::pair<int, int>> candidates;  // (occupants, gpu)
    for (int g = 0; g < snap.gpu_count(ni); ++g) {
      if (snap.gpu_free(ni, g) == kWholeGpu.value()) continue;
      int occupants = 0;
      bool movable = true;
      for (JobId id : on_node[n]) {
        const Running& r = running.at(id);
        for (const Placement& p : r.pods) {
          if (p.node != ni || !(p.gpus >> g & 1)) continue;
          ++occupants;
          if (r.job.qos == QosClass::kGuaranteed || !r.pod.IsSharing() || r.job.pods != 1)
            movable = false;
        }
      }
      if (movable) candidates.emplace_back(occupants, g);
    }
    const int need = pod.num_gpu - snap.fully_free_gpus(ni);
    if (static_cast<int>(candidates.size()) < need) continue;
    std::sort(candidates.begin(), candidates.end());
    Journal journal(&internal_error);
    std::vector<MoveEvent> trial;
    bool ok = true;
    placement::GpuSet freeing = 0;
    for (int c = 0; c < need; ++c) freeing |= placement::GpuBit(candidates[c].second);
    for (int c = 0; c < need && ok; ++c) {
      const int g = candidates[c].second;
      for (JobId id : on_node[n]) {
        const Running& r = running.at(id);
        if (r.pods[0].node != ni || !(r.pods[0].gpus >> g & 1)) continue;
        Expect(journal.Undo(snap, r.pod, r.pods[0]), "lifting a pod to consolidate");
        // Best destination: the fullest GPU (elsewhere, not being freed) that takes it.
        std::optional<Placement> dest;
        int32_t dest_free = INT32_MAX;
        for (size_t m = 0; m < snap.node_count(); ++m) {
          const NodeIndex mi{static_cast<uint32_t>(m)};
          if (!Open(mi) || !snap.Fits(mi, r.pod)) continue;
          for (int h = 0; h < snap.gpu_count(mi); ++h) {
            if (mi == ni && (freeing >> h & 1)) continue;
            const int32_t f = snap.gpu_free(mi, h);
            if (f >= r.pod.gpu_milli.value() && f < dest_free) {
              dest_free = f;
              dest = Placement{mi, placement::GpuBit(h)};
            }
          }
        }
        if (!dest || !journal.Apply(snap, r.pod, *dest).ok()) {
          ok = false;
          break;
        }
        trial.push_back({id, 0, r.pods[0], *dest, j.id, false});
      }
    }
    if (ok && snap.Fits(ni, pod)) {
      for (MoveEvent& m : trial) {
        Running& r = running.at(m.job);
        auto& src = on_node[m.from.node.value()];
        src.erase(std::find(src.begin(), src.end(), m.job));
        on_node[m.to.node.value()].push_back(m.job);
        r.pods[0] = m.to;
        r.seq = m.seq = next_seq++;
      }
      caps_dirty = true;
      return trial;
    }
    journal.RollbackTo(snap, 0);
  }
  return moves;
}

}  // namespace tessera::sched
