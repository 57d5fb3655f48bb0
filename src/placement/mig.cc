#include "tessera/placement/mig.h"

#include <bit>
#include <cmath>

#include "tessera/partition/mig_layout.h"

namespace tessera::placement {
namespace {

// Bit p set: profile p can still be added somewhere on a GPU in state `st`.
uint64_t AddableProfiles(const MigGeometry& g, const ClusterSnapshot::MigGpuState& st) {
  uint64_t mask = 0;
  const size_t profiles = std::min<size_t>(g.profiles.size(), 64);
  for (size_t p = 0; p < profiles; ++p) {
    if (ClusterSnapshot::MigValidStarts(g, st, static_cast<int>(p)) != 0) mask |= uint64_t{1} << p;
  }
  return mask;
}

}  // namespace

StatusOr<TaskRequest> MigRequest(GpuModelId model, const MigGeometry& geometry, std::string_view profile,
                                 CpuMilli cpu, MiB memory) {
  TESSERA_ASSIGN_OR_RETURN(const int p, partition::FindProfileIndex(geometry, profile));
  if (geometry.memory_slices <= 0) return InvalidArgumentError("MIG geometry has no memory slices");
  TaskRequest t;
  t.cpu = cpu;
  t.memory = memory;
  t.num_gpu = 1;
  t.gpu_milli = GpuMilli{ClusterSnapshot::MigInstanceMilli(geometry, p)};
  t.allowed_models = ModelBit(model);
  t.mig_profile = p;
  return t;
}

int LowestMigStart(const ClusterSnapshot& cluster, NodeIndex n, int g, int profile) {
  const uint32_t starts = cluster.mig_valid_starts(n, g, profile);
  return starts == 0 ? -1 : std::countr_zero(starts);
}

MigFragmentation::MigFragmentation(const TargetWorkload* workload) {
  for (const TaskType& t : workload->types()) {
    if (t.mig_profile >= 0 && t.mig_profile < 64 && t.num_gpu == 1) {
      mig_types_.push_back({t.allowed_models, t.mig_profile, t.cpu.value(), t.weight});
    } else {
      other_weight_ += t.weight;
    }
  }
}

int64_t MigFragmentation::Score(double delta_milli, int32_t gpu_free_before) {
  return -(std::llround(delta_milli * 16.0) * 2048 + gpu_free_before);
}

double MigFragmentation::Evaluate(ModelMask model_bit, int64_t cpu_free, const int32_t* free,
                                  const uint64_t* addable, int gpus) const {
  int64_t total_free = 0;
  for (int g = 0; g < gpus; ++g) total_free += free[g];
  if (total_free == 0) return 0.0;
  double f = other_weight_ * static_cast<double>(total_free);
  for (const MigType& m : mig_types_) {
    int64_t frag = total_free;
    if ((m.models == 0 || (m.models & model_bit) != 0) && cpu_free >= m.cpu) {
      frag = 0;
      for (int g = 0; g < gpus; ++g) {
        if ((addable[g] >> m.profile & 1) == 0) frag += free[g];
      }
    }
    f += m.weight * static_cast<double>(frag);
  }
  return f;
}

double MigFragmentation::OfNode(const ClusterSnapshot& c, NodeIndex n) const {
  const int gpus = c.gpu_count(n);
  if (!c.mig_mode(n)) return static_cast<double>(c.node_gpu_free(n));
  const MigGeometry& geometry = *c.mig_geometry(n);
  std::array<uint64_t, kMaxGpusPerNode> addable{};
  for (int g = 0; g < gpus; ++g) addable[static_cast<size_t>(g)] = AddableProfiles(geometry, c.mig_gpu(n, g));
  return Evaluate(c.model_bit(n), c.free_cpu(n).value(), c.gpu_free_array(n).data(), addable.data(), gpus);
}

MigFragmentation::Choice MigFragmentation::Best(const ClusterSnapshot& c, NodeIndex n,
                                                const TaskRequest& task, GpuSet usable) const {
  Choice best;
  if (!c.mig_mode(n) || !task.IsMig()) return best;
  const MigGeometry& geometry = *c.mig_geometry(n);
  const int gpus = c.gpu_count(n);
  std::array<int32_t, kMaxGpusPerNode> free = c.gpu_free_array(n);
  std::array<uint64_t, kMaxGpusPerNode> addable{};
  for (int g = 0; g < gpus; ++g) addable[static_cast<size_t>(g)] = AddableProfiles(geometry, c.mig_gpu(n, g));
  const ModelMask model = c.model_bit(n);
  const double before = Evaluate(model, c.free_cpu(n).value(), free.data(), addable.data(), gpus);
  const int64_t cpu_after = c.free_cpu(n).value() - task.cpu.value();
  const int32_t milli = ClusterSnapshot::MigInstanceMilli(geometry, task.mig_profile);
  for (int g = 0; g < gpus; ++g) {
    if ((usable & GpuBit(g)) == 0) continue;
    const ClusterSnapshot::MigGpuState& st = c.mig_gpu(n, g);
    const uint32_t starts = ClusterSnapshot::MigValidStarts(geometry, st, task.mig_profile);
    if (starts == 0) continue;
    // GPUs in the same state give the same candidates; the lowest usable index already had them.
    bool seen = false;
    for (int h = 0; h < g && !seen; ++h) seen = (usable & GpuBit(h)) != 0 && c.mig_gpu(n, h) == st;
    if (seen) continue;
    const size_t gi = static_cast<size_t>(g);
    const int32_t free_before = free[gi];
    const uint64_t addable_before = addable[gi];
    free[gi] -= milli;
    for (uint32_t rest = starts; rest != 0; rest &= rest - 1) {
      const int s = std::countr_zero(rest);
      ClusterSnapshot::MigGpuState after = st;
      ClusterSnapshot::MigAdd(geometry, after, task.mig_profile, s, +1);
      addable[gi] = AddableProfiles(geometry, after);
      const double delta = Evaluate(model, cpu_after, free.data(), addable.data(), gpus) - before;
      const int64_t score = Score(delta, free_before);
      if (best.gpu < 0 || score > best.score) best = {g, s, delta, free_before, score};
    }
    free[gi] = free_before;
    addable[gi] = addable_before;
  }
  return best;
}

}  // namespace tessera::placement
