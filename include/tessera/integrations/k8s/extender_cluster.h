// The cluster as the scheduler extender sees it: each node's GPUs (model, count, memory) and
// what is in use on each GPU, plus each tenant's GPU quota and usage. Two sources:
//
//   * a node CSV (`tessera k8s extender --cluster FILE`, standalone tests), the simulator's node
//     list format (sn, cpu_milli, memory_mib, gpu, model) with two optional columns of per-GPU
//     use, '|'-separated: gpu_used_milli ("500|0") and gpu_used_mib ("20480|0"); other columns
//     are ignored. Quotas from a tenants CSV (--quotas FILE): tenant, limit_gpu_milli (-1 or
//     empty: unlimited), used_gpu_milli (optional).
//
//       sn,cpu_milli,memory_mib,gpu,model,gpu_used_milli
//       node-a,64000,262144,2,A100-40GB,500|0
//
//   * the control plane (`--server URL`): GET /v1/nodes and GET /v1/tenants/{name} bodies
//     (docs/api.md), read by ReadControlPlaneNodes / ReadControlPlaneTenant. These read another
//     component's view, so unknown fields are ignored (the view may grow); a field of the wrong
//     type is an error naming it. Nodes that are not `ready` are kept but marked unschedulable.
//
// BuildExtenderCluster turns the state into a placement::ClusterSnapshot with the use applied
// (a GPU with 500 milli used has 500 free), a name -> index map, per-GPU free memory, and two
// per-node keys the extender's per-pod walk uses so that it decides per kind of node, not per
// node: the node's rank among the names in byte order (its answer's FailedNodes keys are sorted)
// and its shape (GPU model, MIG mode, GPU count: what makes a pod's GPU ask resolvable there).
//
//   nodes b (A100 x8), a (A100 x8), c (T4 x4)  ->  name_rank 1, 0, 2; shape 0, 0, 1
// Node CPU is left out of the GPU decision (kube-scheduler checks CPU and memory itself).
//
// Thread-safety: an ExtenderCluster is immutable once built and may be read by many threads.
#pragma once

#include <cstdint>
#include <limits>
#include <functional>
#include <utility>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/placement/cluster_snapshot.h"

namespace tessera::k8s {

struct ClusterNode {
  std::string name;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::string model;                  // catalog or NVML name; "" for a node without GPUs
  // A mixed-model node: each GPU's model (catalog or NVML name), `model` being GPU 0's; empty
  // when every GPU is `model` (the control plane lists a model per GPU).
  std::vector<std::string> gpu_models;
  int32_t gpu_count = 0;
  bool mig = false;                   // GPUs in MIG mode
  bool schedulable = true;            // false: cordoned or lost in the control plane
  std::vector<int32_t> gpu_used_milli;  // per GPU (empty: none used)
  std::vector<int64_t> gpu_used_mib;    // per GPU (empty: none used)
  std::vector<int64_t> gpu_memory_mib;  // per GPU capacity (empty: the catalog's)
};

struct TenantQuota {
  std::string name;
  std::optional<int64_t> limit_gpu_milli;  // nullopt: unlimited
  int64_t used_gpu_milli = 0;
};

struct ClusterState {
  std::vector<ClusterNode> nodes;
  std::vector<TenantQuota> tenants;
};

StatusOr<std::vector<ClusterNode>> ParseNodeCsv(std::string_view text, std::string_view path);
StatusOr<std::vector<TenantQuota>> ParseQuotaCsv(std::string_view text, std::string_view path);
// The body of GET /v1/nodes: {"nodes": [{"name", "state", "cpu_milli", "memory_mib", "gpus":
// [{"index", "model", "memory_mib", "mig_enabled", "allocated_milli"}]}]}.
StatusOr<std::vector<ClusterNode>> ReadControlPlaneNodes(std::string_view body);
// The body of GET /v1/tenants: the tenant names (the list view carries no usage).
StatusOr<std::vector<std::string>> ReadControlPlaneTenantNames(std::string_view body);
// The body of GET /v1/tenants/{name}: quota.limit.gpu_milli and usage.gpu_milli.
StatusOr<TenantQuota> ReadControlPlaneTenant(std::string_view body);

// The control plane's state through `get` (a GET of a path, answering HTTP status and body: the
// CLI passes its API client): GET /v1/nodes, GET /v1/tenants, then GET /v1/tenants/{name} for each
// tenant (the list carries no usage). A non-200 answer is UNAVAILABLE naming the path and status.
using HttpGet = std::function<StatusOr<std::pair<int, std::string>>(const std::string& path)>;
StatusOr<ClusterState> LoadControlPlaneState(const HttpGet& get);

class ExtenderCluster {
 public:
  // INVALID_ARGUMENT naming the node for an unknown model, a duplicate name, a use list of the
  // wrong length or over a GPU's capacity.
  static StatusOr<std::shared_ptr<const ExtenderCluster>> Build(ClusterState state, const GpuModelCatalog& catalog);

  const placement::ClusterSnapshot& snapshot() const { return *snapshot_; }
  const GpuModelCatalog& catalog() const { return *catalog_; }
  // The node's index, nullopt for a name the cluster does not have.
  std::optional<NodeIndex> Find(std::string_view name) const;
  // The same, trying node `hint` first (callers walking a list in the cluster's own order pass
  // the previous index + 1 and skip the hash lookup).
  std::optional<NodeIndex> Find(std::string_view name, uint32_t hint) const {
    if (hint < views_.size() && name_of(hint) == name) return NodeIndex{hint};
    return Find(name);
  }
  const ClusterNode& node(NodeIndex n) const { return nodes_[n.value()]; }
  bool schedulable(NodeIndex n) const { return views_[n.value()].schedulable; }
  // Free memory of GPU g of node n in MiB; -1 where the model's memory is not known.
  int64_t gpu_free_mib(NodeIndex n, int g) const { return free_mib_[first_gpu_[n.value()] + static_cast<size_t>(g)]; }
  // GPU g's memory capacity in MiB (0: unknown).
  int64_t gpu_memory_mib(NodeIndex n, int g) const { return capacity_mib_[first_gpu_[n.value()] + static_cast<size_t>(g)]; }
  // GPUs of node n the extender must not hand out: MIG GPUs with instances in use whose layout
  // the state does not tell (the control plane reports milli only).
  placement::GpuSet blocked_gpus(NodeIndex n) const { return views_[n.value()].blocked; }
  // The least free memory (MiB) of node n's GPUs whose memory is known; INT64_MAX if none is.
  int64_t min_free_mib(NodeIndex n) const { return views_[n.value()].min_free_mib; }
  // GPUs of node n with all their compute free but not all their memory (memory known).
  placement::GpuSet whole_short_gpus(NodeIndex n) const { return views_[n.value()].whole_short; }
  // The tenant's quota; nullptr for a tenant the state does not name (no quota: unlimited).
  const TenantQuota* tenant(std::string_view name) const;
  size_t node_count() const { return nodes_.size(); }
  // Node n's position among all node names sorted bytewise (0-based): x < y as names exactly
  // when name_rank(x) < name_rank(y).
  uint32_t name_rank(NodeIndex n) const { return views_[n.value()].name_rank; }
  // Node n's shape: nodes with the same GPU model, MIG mode and GPU count share one, numbered
  // 0..shape_count()-1 in order of first appearance.
  uint32_t shape(NodeIndex n) const { return views_[n.value()].shape; }
  size_t shape_count() const { return shape_count_; }

 private:
  ExtenderCluster() = default;
  const GpuModelCatalog* catalog_ = nullptr;
  std::vector<ClusterNode> nodes_;
  std::optional<placement::ClusterSnapshot> snapshot_;
  std::unordered_map<std::string_view, uint32_t> index_;  // views into nodes_[i].name
  std::vector<size_t> first_gpu_;              // per node: its GPUs' first entry below
  std::vector<int64_t> free_mib_, capacity_mib_;  // per GPU of every node, node by node
  // What the extender reads of every node for every pod, packed (nodes_ and the snapshot are
  // read only for the nodes that get that far).
  struct NodeView {
    uint32_t name_at = 0, name_size = 0;  // in names_
    uint32_t shape = 0, name_rank = 0;
    int64_t min_free_mib = INT64_MAX;
    placement::GpuSet blocked = 0, whole_short = 0;
    bool schedulable = true;
  };
  std::string_view name_of(uint32_t i) const { return std::string_view(names_).substr(views_[i].name_at, views_[i].name_size); }
  std::vector<NodeView> views_;
  std::string names_;  // every node's name, one after the other
  size_t shape_count_ = 0;
  std::vector<TenantQuota> tenants_;
};

}  // namespace tessera::k8s
