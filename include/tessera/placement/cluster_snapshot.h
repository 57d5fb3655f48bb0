// The cluster as the placement engine sees it: for each node its capacity (CPU milli, memory
// MiB, GPU model and count) and what is still free (CPU, memory, per-GPU milli), plus which
// kinds of GPU task it hosts (GpuClustering needs that).
//
// Policies receive a `const ClusterSnapshot&` and never change it. The owner (simulator,
// scheduler) commits a decision with Apply and can take it back with Undo; both cost O(GPUs on
// the node). Every change bumps the node's version(), which lets policies memoise per-node
// scores safely (see ScoringPolicy).
//
//   auto snap = ClusterSnapshot::Create({{"n0", CpuMilli{8000}, MiB{32768}, 2, t4}});
//   TaskRequest half{.cpu = CpuMilli{1000}, .memory = MiB{1024}, .num_gpu = 1,
//                    .gpu_milli = GpuMilli{500}};
//   Placement p{NodeIndex{0}, GpuBit(1)};
//   snap->Apply(half, p);      // n0: cpu 7000 free, GPU1 500 free
//   snap->Undo(half, p);       // back to empty (version has moved on)
//
// Thread-safety: const methods may run concurrently; Apply/Undo need exclusive access.
// A copy is an independent snapshot with a new uid().
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/ids.h"
#include "tessera/core/quantity.h"
#include "tessera/core/status.h"
#include "tessera/placement/task.h"

namespace tessera::placement {

inline constexpr int kMaxGpusPerNode = 16;

// A set of GPUs on one node, bit g = GPU index g.
using GpuSet = uint32_t;
inline constexpr GpuSet GpuBit(int g) { return GpuSet{1} << g; }

struct NodeSpec {
  std::string name;
  CpuMilli cpu{0};
  MiB memory{0};
  int32_t gpu_count = 0;
  GpuModelId model;  // invalid when gpu_count == 0
};

// Where a task goes: a node and, for GPU tasks, the GPUs it takes there.
struct Placement {
  NodeIndex node;
  GpuSet gpus = 0;
  friend bool operator==(const Placement&, const Placement&) = default;
};

// GPU-task kinds GpuClustering groups by: sharing tasks, and k-GPU whole tasks.
inline constexpr int kShareTag = 0;
inline int TaskTag(const TaskRequest& t) { return t.IsSharing() ? kShareTag : t.num_gpu; }
inline constexpr int kTagCount = kMaxGpusPerNode + 1;

class ClusterSnapshot {
 public:
  // Validates every node (non-negative capacity, GPU count 0..16, model set iff GPUs).
  static StatusOr<ClusterSnapshot> Create(std::vector<NodeSpec> nodes);

  ClusterSnapshot(const ClusterSnapshot& other);
  ClusterSnapshot& operator=(const ClusterSnapshot& other);
  ClusterSnapshot(ClusterSnapshot&&) noexcept = default;
  ClusterSnapshot& operator=(ClusterSnapshot&&) noexcept = default;

  size_t node_count() const { return specs_.size(); }
  const NodeSpec& spec(NodeIndex n) const { return specs_[n.value()]; }
  ModelMask model_bit(NodeIndex n) const { return state_[n.value()].model_bit; }

  CpuMilli free_cpu(NodeIndex n) const { return CpuMilli{state_[n.value()].cpu_free}; }
  MiB free_memory(NodeIndex n) const { return MiB{state_[n.value()].mem_free}; }
  int gpu_count(NodeIndex n) const { return state_[n.value()].gpu_count; }
  // Free milli of GPU g on node n.
  int32_t gpu_free(NodeIndex n, int g) const { return state_[n.value()].gpu_free[g]; }
  const std::array<int32_t, kMaxGpusPerNode>& gpu_free_array(NodeIndex n) const {
    return state_[n.value()].gpu_free;
  }
  // Sum of free milli over the node's GPUs.
  int64_t node_gpu_free(NodeIndex n) const { return state_[n.value()].gpu_free_sum; }
  int fully_free_gpus(NodeIndex n) const { return state_[n.value()].full_free; }
  int32_t max_gpu_free(NodeIndex n) const { return state_[n.value()].max_free; }
  // Number of tasks of each TaskTag currently on the node.
  int tag_count(NodeIndex n, int tag) const { return tags_[n.value()][tag]; }
  // Changes on every Apply/Undo of this node; never repeats within one snapshot.
  uint32_t version(NodeIndex n) const { return state_[n.value()].version; }
  // Distinct for every snapshot object (copies included) in this process.
  uint64_t uid() const { return uid_; }

  GpuMilli total_gpu_capacity() const { return GpuMilli{total_gpu_capacity_}; }
  GpuMilli allocated_gpu() const { return GpuMilli{allocated_gpu_}; }
  CpuMilli total_cpu_capacity() const { return CpuMilli{total_cpu_capacity_}; }

  // The standard filter every policy shares: CPU and memory fit, the node has GPUs of an allowed
  // model if the task wants GPUs, and at least num_gpu GPUs each have gpu_milli free.
  bool Fits(NodeIndex n, const TaskRequest& task) const;

  // Commits `task` on `where`. FAILED_PRECONDITION (nothing changed) if it does not fit there
  // or the GPU set is not num_gpu GPUs that each have gpu_milli free.
  Status Apply(const TaskRequest& task, const Placement& where);
  // Takes back an earlier Apply of the same task and placement. FAILED_PRECONDITION if that
  // would free more than the node has.
  Status Undo(const TaskRequest& task, const Placement& where);

 private:
  struct NodeState {
    int64_t cpu_free = 0;
    int64_t mem_free = 0;
    int64_t gpu_free_sum = 0;
    ModelMask model_bit = 0;
    uint32_t version = 0;
    int32_t max_free = 0;
    int16_t gpu_count = 0;
    int16_t full_free = 0;
    std::array<int32_t, kMaxGpusPerNode> gpu_free{};
  };

  ClusterSnapshot() = default;
  void RefreshDerived(NodeState& s);

  std::vector<NodeSpec> specs_;
  std::vector<NodeState> state_;
  std::vector<std::array<uint16_t, kTagCount>> tags_;
  int64_t total_gpu_capacity_ = 0;
  int64_t total_cpu_capacity_ = 0;
  int64_t allocated_gpu_ = 0;
  uint64_t uid_ = 0;
};

}  // namespace tessera::placement
