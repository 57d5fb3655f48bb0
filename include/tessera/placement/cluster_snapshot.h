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
// MIG: a node whose spec carries a MigGeometry has its GPUs in MIG mode. Only MIG requests
// (TaskRequest::mig_profile) use them, and each takes one GPU instance at a memory-slice start
// (Placement::mig_start) that the model's rules allow (partition/mig_layout.h, rules 2-6);
// MIG requests fit nowhere else. A MIG GPU's free milli is its free memory slices x 1000 /
// memory slices, so milli-GPU totals stay meaningful. Apply/Undo of an instance are O(GPUs on
// the node) and Undo is exact (it checks that this very instance, profile and start, exists).
//
//   auto h100 = std::make_shared<const MigGeometry>(*catalog.info(id).mig);
//   NodeSpec n{"m0", CpuMilli{64000}, MiB{1 << 20}, 8, id, h100};
//   TaskRequest t = *MigRequest(id, *h100, "3g.40gb");   // mig.h; gpu_milli 500
//   snap->Apply(t, Placement{NodeIndex{0}, GpuBit(0), /*mig_start=*/4});  // GPU0 slices 4-7
//   snap->mig_valid_starts(NodeIndex{0}, 0, t.mig_profile) == 0b1 (only start 0 is left)
// A node whose MIG layouts cannot change (NodeSpec::mig_fixed: its agent may not reconfigure MIG)
// takes a MIG request only at a free instance of that profile that exists: with GPU 0 fixed at
// "3g.40gb@0,1g.10gb@4", mig_valid_starts(n, 0, 3g.40gb) == 0b1 and a 2g.20gb fits nowhere.
//
// Mixed-model nodes: a node may hold GPUs of several models (NodeSpec::gpu_models, one model per
// GPU). Its GPUs fall into model groups (the GPUs of one model, ordered by their lowest index),
// and a task is placed inside ONE group whose model it allows: a sharing task or a 1-GPU task
// takes a GPU of an allowed model, a k-GPU task k GPUs of one model (a job's GPUs are never of
// two models). Fits, Apply and gpu_choice.h apply the rule; the scoring policies score each group
// on its own (ScoringPolicy) and F_n of such a node is the sum of its groups' F (fragmentation.h).
// CPU and memory stay the node's, shared by its groups. Why per GPU in the snapshot, not one
// placement node per model: a split node would have to split (or double-count) its CPU and
// memory, and the node name users see would need mapping back everywhere.
//
//   NodeSpec n{"mix", CpuMilli{64000}, MiB{1 << 19}, 6, h100, nullptr, {}, {},
//              {h100, h100, a100, a100, a100, a100}};     // GPUs 0-1 H100, 2-5 A100
//   groups: {H100: GPUs {0,1}}, {A100: GPUs {2,3,4,5}}
//   TaskRequest a{.num_gpu = 1, .gpu_milli = GpuMilli{1000}, .allowed_models = ModelBit(a100)};
//   Fits(0, a) -> true; Apply(a, {0, GpuBit(0)}) -> FAILED_PRECONDITION (GPU 0 is an H100);
//   ChooseGpus -> GPU 2.  A 2-GPU task of any model -> GPUs {0,1}; after one H100 is taken,
//   {2,3} (never {1,2}). A 3-GPU task allowing only H100 fits nowhere on this node.
// A mixed node cannot be in MIG mode (NodeSpec::mig must be empty).
//
// Thread-safety: const methods may run concurrently; Apply/Undo need exclusive access.
// A copy is an independent snapshot with a new uid().
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/ids.h"
#include "tessera/core/quantity.h"
#include "tessera/core/status.h"
#include "tessera/partition/mig_layout.h"
#include "tessera/placement/task.h"

namespace tessera::placement {

inline constexpr int kMaxGpusPerNode = 16;
// Memory slices of a MIG GPU the snapshot supports (every catalog model has 4 or 8).
inline constexpr int kMaxMigSlices = 8;

// A set of GPUs on one node, bit g = GPU index g.
using GpuSet = uint32_t;
inline constexpr GpuSet GpuBit(int g) { return GpuSet{1} << g; }
// Every GPU of any node (bits beyond a node's GPU count are ignored wherever a GpuSet is a mask).
inline constexpr GpuSet kAllGpus = ~GpuSet{0};
// All GPUs of a node with `count` GPUs.
inline constexpr GpuSet GpusOfCount(int count) { return count >= 32 ? kAllGpus : (GpuSet{1} << count) - 1; }

struct NodeSpec {
  std::string name;
  CpuMilli cpu{0};
  MiB memory{0};
  int32_t gpu_count = 0;
  GpuModelId model;  // invalid when gpu_count == 0
  // Set: the GPUs are in MIG mode with this geometry (the model's, from the catalog or a models
  // file) and take only MIG requests. Empty: whole / fractional GPUs.
  std::shared_ptr<const MigGeometry> mig;
  // MIG GPUs only: instances that exist and are in use when the snapshot is created, per GPU
  // (empty, or gpu_count layouts); each layout must pass partition::ValidateLayout.
  std::vector<partition::MigLayout> mig_in_use;
  // MIG GPUs only: empty, or gpu_count layouts that are all the GPUs will ever have (the instances
  // that exist on a node that may not be reconfigured); each must pass ValidateLayout and contain
  // that GPU's mig_in_use.
  std::vector<partition::MigLayout> mig_fixed;
  // Empty: every GPU is `model`. Else gpu_count models, GPU g's at [g] (a mixed-model node, see
  // above); `model` must then be gpu_models[0]. Models all equal = an ordinary node.
  std::vector<GpuModelId> gpu_models;
};

// The model of GPU g of node `spec`.
inline GpuModelId GpuModelOf(const NodeSpec& spec, int g) {
  return spec.gpu_models.empty() ? spec.model : spec.gpu_models[static_cast<size_t>(g)];
}

// The GPUs of one model on a node.
struct ModelGroup {
  ModelMask model_bit = 0;
  GpuSet gpus = 0;
};

// Where a task goes: a node and, for GPU tasks, the GPUs it takes there.
struct Placement {
  NodeIndex node;
  GpuSet gpus = 0;
  int32_t mig_start = -1;  // MIG requests: the instance's first memory slice; else -1
  friend bool operator==(const Placement&, const Placement&) = default;
};

// GPU-task kinds GpuClustering groups by: sharing tasks, and k-GPU whole tasks.
inline constexpr int kShareTag = 0;
// A MIG instance is a share of one GPU, so MIG requests count as sharing tasks here.
inline int TaskTag(const TaskRequest& t) { return t.IsSharing() || t.IsMig() ? kShareTag : t.num_gpu; }
inline constexpr int kTagCount = kMaxGpusPerNode + 1;

class ClusterSnapshot {
 public:
  // Validates every node (non-negative capacity, GPU count 0..16, model set iff GPUs, gpu_models
  // empty or one per GPU starting with `model`, no MIG on a mixed node).
  static StatusOr<ClusterSnapshot> Create(std::vector<NodeSpec> nodes);

  ClusterSnapshot(const ClusterSnapshot& other);
  ClusterSnapshot& operator=(const ClusterSnapshot& other);
  ClusterSnapshot(ClusterSnapshot&&) noexcept = default;
  ClusterSnapshot& operator=(ClusterSnapshot&&) noexcept = default;

  size_t node_count() const { return specs_.size(); }
  const NodeSpec& spec(NodeIndex n) const { return specs_[n.value()]; }
  // The models of node n's GPUs (one bit, or several for a mixed node).
  ModelMask model_bit(NodeIndex n) const { return state_[n.value()].model_bit; }
  // Mixed-model nodes (see above): whether node n is one, and its model groups (empty if not).
  bool mixed(NodeIndex n) const { return state_[n.value()].mixed; }
  std::span<const ModelGroup> model_groups(NodeIndex n) const {
    return groups_.empty() ? std::span<const ModelGroup>() : std::span<const ModelGroup>(groups_[n.value()]);
  }
  // The GPUs of node n whose model is in `models` (0 = any model): all of them on an ordinary
  // node whose model is allowed, none if it is not.
  GpuSet ModelGpus(NodeIndex n, ModelMask models) const;
  // The model of the lowest GPU in `gpus` on node n (the node's only model on an ordinary node;
  // 0 when gpus is empty on a mixed node).
  ModelMask ModelOfGpus(NodeIndex n, GpuSet gpus) const;

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
  // MIG. Whether node n's GPUs are in MIG mode, and their geometry (nullptr if not).
  bool mig_mode(NodeIndex n) const { return state_[n.value()].mig; }
  const MigGeometry* mig_geometry(NodeIndex n) const { return specs_[n.value()].mig.get(); }
  // Bit s set: an instance of `profile` may be added to GPU g of node n at memory slice s
  // (rules 2-6 of partition/mig_layout.h). 0 for a non-MIG node or an unknown profile.
  uint32_t mig_valid_starts(NodeIndex n, int g, int profile) const;
  // The instances on GPU g of node n, sorted by start (empty for a non-MIG node).
  partition::MigLayout mig_layout(NodeIndex n, int g) const;
  // Memory slices in use on GPU g of node n (bit s = slice s).
  uint32_t mig_used_slices(NodeIndex n, int g) const;
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
  // The filter when only the GPUs in `usable` may be taken (an eligibility mask, policy.h): CPU
  // and memory as above; a whole-GPU task needs num_gpu fully free usable GPUs, a fractional task
  // num_gpu usable GPUs with gpu_milli free, a MIG request a usable GPU with a valid start. The
  // GPUs outside `usable` are not changed or hidden, only not counted. Equals Fits(n, task) when
  // `usable` holds every GPU of the node (the fast path it then takes).
  bool Fits(NodeIndex n, const TaskRequest& task, GpuSet usable) const;

  // Commits `task` on `where`. FAILED_PRECONDITION (nothing changed) if it does not fit there
  // or the GPU set is not num_gpu GPUs that each have gpu_milli free.
  Status Apply(const TaskRequest& task, const Placement& where);
  // Takes back an earlier Apply of the same task and placement. FAILED_PRECONDITION if that
  // would free more than the node has.
  Status Undo(const TaskRequest& task, const Placement& where);

  // The milli-GPU a MIG instance of `profile` blocks: size x 1000 / memory slices.
  static int32_t MigInstanceMilli(const MigGeometry& geometry, int profile);

  // One MIG GPU's instances: `at[s]` = profile index of the instance starting at slice s, or -1.
  struct MigGpuState {
    std::array<int8_t, kMaxMigSlices> at{-1, -1, -1, -1, -1, -1, -1, -1};
    uint16_t used = 0;     // bit s = memory slice s taken
    int8_t instances = 0;
    int8_t compute = 0;    // compute slices taken
    bool fixed = false;    // the layout cannot change: only `exists` may be taken
    std::array<int8_t, kMaxMigSlices> exists{-1, -1, -1, -1, -1, -1, -1, -1};  // fixed: profile at s, or -1
    friend bool operator==(const MigGpuState&, const MigGpuState&) = default;
  };
  // GPU g of MIG node n (n must be in MIG mode).
  const MigGpuState& mig_gpu(NodeIndex n, int g) const { return mig_[n.value()][static_cast<size_t>(g)]; }
  // Valid starts of `profile` on a GPU in state `st` (the rules, without the snapshot).
  static uint32_t MigValidStarts(const MigGeometry& geometry, const MigGpuState& st, int profile);
  // st + one instance of profile at start (which must be valid).
  static void MigAdd(const MigGeometry& geometry, MigGpuState& st, int profile, int start, int sign);

 private:
  bool MigFits(NodeIndex n, const TaskRequest& t) const;
  // The GPU part of Fits on the GPUs in `usable`, models not checked (CPU/memory checked by the
  // caller).
  bool FitsOn(NodeIndex n, const TaskRequest& t, GpuSet usable) const;
  // Fits on a mixed node: inside one model group the task allows.
  bool FitsMixed(NodeIndex n, const TaskRequest& t, GpuSet usable) const;
  Status ApplyMig(const TaskRequest& t, const Placement& where);
  Status UndoMig(const TaskRequest& t, const Placement& where);

  struct NodeState {
    int64_t cpu_free = 0;
    int64_t mem_free = 0;
    int64_t gpu_free_sum = 0;
    ModelMask model_bit = 0;
    uint32_t version = 0;
    int32_t max_free = 0;
    int16_t gpu_count = 0;
    int16_t full_free = 0;
    bool mig = false;  // GPUs in MIG mode (sits in padding: NodeState keeps its size)
    bool mixed = false;  // GPUs of several models (groups_), also in padding
    std::array<int32_t, kMaxGpusPerNode> gpu_free{};
  };

  ClusterSnapshot() = default;
  void RefreshDerived(NodeState& s);
  Status InitMigNode(size_t i, const NodeSpec& n, const std::string& where);
  Status InitModelGroups(size_t i, const NodeSpec& n, const std::string& where);

  std::vector<NodeSpec> specs_;
  std::vector<NodeState> state_;
  std::vector<std::array<uint16_t, kTagCount>> tags_;
  // Per node, its GPUs' MIG state; empty unless some node is in MIG mode, and empty for nodes
  // that are not.
  std::vector<std::vector<MigGpuState>> mig_;
  // Per node, its model groups; empty unless some node is mixed, and empty for nodes that are not.
  std::vector<std::vector<ModelGroup>> groups_;
  int64_t total_gpu_capacity_ = 0;
  int64_t total_cpu_capacity_ = 0;
  int64_t allocated_gpu_ = 0;
  uint64_t uid_ = 0;
};

}  // namespace tessera::placement
