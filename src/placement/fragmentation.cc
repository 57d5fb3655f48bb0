#include "tessera/placement/fragmentation.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>

namespace tessera::placement {

TargetWorkload TargetWorkload::FromTasks(std::span<const TaskRequest> tasks, double coverage) {
  // cpu, gpu_milli, num_gpu, models, MIG profile (-1 for every non-MIG task, so lists without
  // MIG requests sort exactly as the artifact's 4-tuples).
  using Shape = std::tuple<int64_t, int64_t, int32_t, uint64_t, int32_t>;
  std::map<Shape, int64_t> counts;
  for (const TaskRequest& t : tasks) {
    ++counts[{t.cpu.value(), t.gpu_milli.value(), t.num_gpu, t.allowed_models, t.mig_profile}];
  }
  std::vector<std::pair<Shape, int64_t>> sorted(counts.begin(), counts.end());
  // Most common first; equal counts: larger tuple first (the artifact sorts descending).
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first > b.first;
  });
  const double total = static_cast<double>(tasks.size());
  std::vector<TaskType> types;
  int64_t kept = 0;
  for (const auto& [shape, count] : sorted) {
    if (total > 0 && static_cast<double>(kept) / total >= coverage) break;
    TaskType t;
    t.cpu = CpuMilli{std::get<0>(shape)};
    t.gpu_milli = GpuMilli{std::get<1>(shape)};
    t.num_gpu = std::get<2>(shape);
    t.allowed_models = std::get<3>(shape);
    t.mig_profile = std::get<4>(shape);
    t.count = count;
    types.push_back(t);
    kept += count;
  }
  for (TaskType& t : types) t.weight = static_cast<double>(t.count) / static_cast<double>(kept);
  TargetWorkload w;
  w.types_ = std::move(types);
  return w;
}

TargetWorkload TargetWorkload::FromTypes(std::vector<TaskType> types) {
  std::erase_if(types, [](const TaskType& t) { return !(t.weight > 0); });
  double sum = 0;
  for (const TaskType& t : types) sum += t.weight;
  for (TaskType& t : types) t.weight /= sum;
  TargetWorkload w;
  w.types_ = std::move(types);
  return w;
}

double NodeFragmentation(const TargetWorkload& workload, ModelMask model_bit, int64_t cpu_free,
                         std::span<const int32_t> gpu_free) {
  int64_t total_free = 0;
  for (int32_t u : gpu_free) total_free += u;
  if (total_free == 0) return 0.0;
  double f = 0.0;
  for (const TaskType& m : workload.types()) {
    int64_t frag = total_free;
    if (m.num_gpu > 0 && m.mig_profile < 0 &&
        (m.allowed_models == 0 || (m.allowed_models & model_bit) != 0) && cpu_free >= m.cpu.value()) {
      const int64_t d = m.gpu_milli.value();
      int fitting = 0;
      int64_t small = 0;
      for (int32_t u : gpu_free) {
        if (u >= d) {
          ++fitting;
        } else {
          small += u;
        }
      }
      if (fitting >= m.num_gpu) frag = small;
    }
    f += m.weight * static_cast<double>(frag);
  }
  return f;
}

size_t FragmentationMemo::KeyHash::operator()(const Key& k) const {
  // The GPUs as four 64-bit words (four multiplies, not one per GPU: this runs for every GPU
  // choice a fragmentation policy weighs).
  static_assert(sizeof(k.gpus) == 4 * sizeof(uint64_t));
  uint64_t w[4];
  std::memcpy(w, k.gpus.data(), sizeof(w));
  uint64_t h = k.model_bit * 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(k.cpu_free);
  for (uint64_t v : w) {
    h = (h ^ v) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
  }
  return static_cast<size_t>(h);
}

double FragmentationMemo::Get(ModelMask model_bit, int64_t cpu_free,
                              std::span<const int32_t> gpu_free) {
  Key key;
  key.model_bit = model_bit;
  key.cpu_free = cpu_free;
  key.gpus.fill(-1);
  // Sorted descending by insertion as it is filled (at most 16 values: cheaper than std::sort's
  // general path, which this call spent most of its time in).
  for (size_t i = 0; i < gpu_free.size(); ++i) {
    const auto v = static_cast<int16_t>(gpu_free[i]);
    size_t j = i;
    for (; j > 0 && key.gpus[j - 1] < v; --j) key.gpus[j] = key.gpus[j - 1];
    key.gpus[j] = v;
  }
  auto it = memo_.find(key);
  if (it != memo_.end()) return it->second;
  const double f = NodeFragmentation(*workload_, model_bit, cpu_free, gpu_free);
  memo_.emplace(key, f);
  return f;
}

double FragmentationMemo::OfMixedNode(const ClusterSnapshot& cluster, NodeIndex n, int64_t cpu_free,
                                      std::span<const int32_t> gpu_free) {
  double f = 0.0;
  std::array<int32_t, kMaxGpusPerNode> group_free{};
  for (const ModelGroup& g : cluster.model_groups(n)) {
    size_t k = 0;
    for (size_t i = 0; i < gpu_free.size(); ++i)
      if (g.gpus & GpuBit(static_cast<int>(i))) group_free[k++] = gpu_free[i];
    f += Get(g.model_bit, cpu_free, std::span<const int32_t>(group_free.data(), k));
  }
  return f;
}

double ClusterFragmentation(const ClusterSnapshot& cluster, FragmentationMemo& memo) {
  double f = 0.0;
  for (uint32_t i = 0; i < cluster.node_count(); ++i) f += memo.OfNode(cluster, NodeIndex{i});
  return f;
}

}  // namespace tessera::placement
