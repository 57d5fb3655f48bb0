// GPU fragmentation as defined by FGD (Weng et al., ATC'23), measured in milli-GPU.
//
// The target workload M is the expected task mix: task types m (CPU, GPU count k, per-GPU
// milli d, allowed models) with probabilities p_m. The fragment of node n seen by type m is
// the node's free GPU capacity that m cannot use:
//   - m is CPU-only, or m may not run on n's model, or m does not fit on n
//     (CPU short, or fewer than k GPUs with >= d free)          -> all free GPU milli U_n
//   - otherwise                                                 -> sum of free milli of the
//                                                                  GPUs with less than d free
// and the node fragmentation is F_n(M) = sum_m p_m * F_n(m). Memory is not considered.
//
// Worked example: node with 8000 CPU free, GPUs free {1000, 400, 0}; M = {A: 1 GPU x 500 milli,
// 2000 CPU, p=0.5; B: CPU-only, p=0.5}.
//   F(A) = 400 (GPU1 is too small for 500; GPU0 fits A)   F(B) = 1400 (CPU-only sees all)
//   F_n(M) = 0.5*400 + 0.5*1400 = 900 milli-GPU.
//
// TargetWorkload::FromTasks builds M exactly as the artifact does: group all tasks of the pod
// list by (cpu, per-GPU milli, GPU count, allowed models, MIG profile), most common first (ties:
// larger tuple first), and keep types until they cover >= 95 % of tasks. MIG request types count
// as not fitting (all free GPU milli) in F_n here; on MIG GPUs the measure is mig.h's.
//
// Thread-safety: TargetWorkload is immutable; FragmentationMemo is not synchronised.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/task.h"

namespace tessera::placement {

struct TaskType {
  CpuMilli cpu{0};
  int32_t num_gpu = 0;
  GpuMilli gpu_milli{0};
  ModelMask allowed_models = 0;
  int32_t mig_profile = -1;  // a MIG request (TaskRequest::mig_profile); never fits a non-MIG GPU
  int64_t count = 0;     // tasks of this type in the source list
  double weight = 0.0;   // p_m; weights of a TargetWorkload sum to 1
};

class TargetWorkload {
 public:
  TargetWorkload() = default;
  // Keeps the most popular types until they cover >= `coverage` of tasks (1.0 keeps all).
  static TargetWorkload FromTasks(std::span<const TaskRequest> tasks, double coverage = 0.95);
  // Explicit types; weights are normalised to sum to 1 (types with weight <= 0 are dropped).
  static TargetWorkload FromTypes(std::vector<TaskType> types);

  const std::vector<TaskType>& types() const { return types_; }
  bool empty() const { return types_.empty(); }

 private:
  std::vector<TaskType> types_;
};

// F_n(M) for a node of model `model_bit` (0 for a node without GPUs) with `cpu_free` milli CPU
// and per-GPU free milli `gpu_free`.
double NodeFragmentation(const TargetWorkload& workload, ModelMask model_bit, int64_t cpu_free,
                         std::span<const int32_t> gpu_free);

// Memoised NodeFragmentation, keyed on (model, free CPU, sorted free-GPU multiset). Over a whole
// trace replay only a few tens of thousands of distinct node states occur.
class FragmentationMemo {
 public:
  explicit FragmentationMemo(const TargetWorkload* workload) : workload_(workload) {}
  double Get(ModelMask model_bit, int64_t cpu_free, std::span<const int32_t> gpu_free);
  // F_n(M) of node n of `cluster` if it had `cpu_free` and per-GPU `gpu_free` (its GPU count). A
  // mixed-model node (cluster_snapshot.h) is the sum over its model groups, each group's GPUs
  // with the group's model and the node's free CPU: GPUs {H100 500, A100 1000, A100 300} and
  // M = {A100-only 1-GPU task} -> F = 500 (no H100 fits it) + 300 = 800, where the node as one
  // "H100|A100" model would say 300.
  double OfNodeState(const ClusterSnapshot& cluster, NodeIndex n, int64_t cpu_free,
                     std::span<const int32_t> gpu_free) {
    if (!cluster.mixed(n)) [[likely]] return Get(cluster.model_bit(n), cpu_free, gpu_free);
    return OfMixedNode(cluster, n, cpu_free, gpu_free);
  }
  double OfNode(const ClusterSnapshot& cluster, NodeIndex n) {
    return OfNodeState(cluster, n, cluster.free_cpu(n).value(),
                       std::span(cluster.gpu_free_array(n).data(), cluster.gpu_count(n)));
  }
  size_t size() const { return memo_.size(); }

 private:
  struct Key {
    uint64_t model_bit;
    int64_t cpu_free;
    std::array<int16_t, kMaxGpusPerNode> gpus;  // sorted descending, unused = -1
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  double OfMixedNode(const ClusterSnapshot& cluster, NodeIndex n, int64_t cpu_free, std::span<const int32_t> gpu_free);

  const TargetWorkload* workload_;
  std::unordered_map<Key, double, KeyHash> memo_;
};

// Cluster fragmentation F(M) = sum over nodes of F_n(M), in milli-GPU.
double ClusterFragmentation(const ClusterSnapshot& cluster, FragmentationMemo& memo);

}  // namespace tessera::placement
