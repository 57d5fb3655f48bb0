// Test builders: small clusters and tasks in one line.
//
//   auto cluster = MakeCluster({{8000, 32768, 2, "T4"}, {64000, 262144, 8, "G2"}});
//   TaskRequest t = Share(500, /*cpu=*/1000);   // one GPU, 500 milli
#pragma once

#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/fragmentation.h"
#include "tessera/placement/task.h"

namespace tessera::testing {

struct NodeArgs {
  int64_t cpu_milli;
  int64_t memory_mib;
  int gpus;
  std::string model;  // "" for CPU-only nodes
};

inline std::vector<placement::NodeSpec> MakeNodes(const std::vector<NodeArgs>& args) {
  std::vector<placement::NodeSpec> nodes;
  const auto& catalog = GpuModelCatalog::Builtin();
  for (size_t i = 0; i < args.size(); ++i) {
    placement::NodeSpec n;
    n.name = "node-" + std::to_string(i);
    n.cpu = CpuMilli{args[i].cpu_milli};
    n.memory = MiB{args[i].memory_mib};
    n.gpu_count = args[i].gpus;
    if (!args[i].model.empty()) n.model = *catalog.Find(args[i].model);
    nodes.push_back(n);
  }
  return nodes;
}

inline placement::ClusterSnapshot MakeCluster(const std::vector<NodeArgs>& args) {
  return *placement::ClusterSnapshot::Create(MakeNodes(args));
}

inline placement::TaskRequest CpuOnly(int64_t cpu, int64_t mem = 0) {
  return {.cpu = CpuMilli{cpu}, .memory = MiB{mem}};
}
inline placement::TaskRequest Share(int64_t milli, int64_t cpu = 0, int64_t mem = 0) {
  return {.cpu = CpuMilli{cpu}, .memory = MiB{mem}, .num_gpu = 1, .gpu_milli = GpuMilli{milli}};
}
inline placement::TaskRequest Whole(int count, int64_t cpu = 0, int64_t mem = 0) {
  return {.cpu = CpuMilli{cpu}, .memory = MiB{mem}, .num_gpu = count, .gpu_milli = GpuMilli{1000}};
}
// A target-workload type: `num_gpu` GPUs of `milli` each plus `cpu`, with weight p_m.
inline placement::TaskType Type(int64_t cpu, int32_t num_gpu, int64_t milli, double weight, ModelMask models = 0) {
  placement::TaskType t;
  t.cpu = CpuMilli{cpu};
  t.num_gpu = num_gpu;
  t.gpu_milli = GpuMilli{milli};
  t.allowed_models = models;
  t.weight = weight;
  return t;
}

inline ModelMask Models(const std::string& list) { return *GpuModelCatalog::Builtin().ParseModelList(list); }

// The same task restricted to the '|'-separated models, e.g. WithModels(Share(500), "T4|A10").
inline placement::TaskRequest WithModels(placement::TaskRequest t, const std::string& list) {
  t.allowed_models = Models(list);
  return t;
}

// Takes `milli` of GPU `gpu` on node `node` (a sharing task below 1000, a 1-GPU whole task at
// 1000), so tests can set up per-GPU free values: Occupy(c, 0, 1, 500) -> GPU1 of node 0 has
// 500 free. Returns Apply's status.
inline Status Occupy(placement::ClusterSnapshot& cluster, uint32_t node, int gpu, int64_t milli,
                     int64_t cpu = 0) {
  const placement::TaskRequest t = milli >= 1000 ? Whole(1, cpu) : Share(milli, cpu);
  return cluster.Apply(t, {NodeIndex{node}, placement::GpuBit(gpu)});
}

// Free milli of each GPU of node `node`, GPU 0 first.
inline std::vector<int32_t> GpuFrees(const placement::ClusterSnapshot& cluster, uint32_t node) {
  std::vector<int32_t> out;
  for (int g = 0; g < cluster.gpu_count(NodeIndex{node}); ++g) out.push_back(cluster.gpu_free(NodeIndex{node}, g));
  return out;
}

// Path of a file in the repository's data/ folder.
inline std::string DataPath(const std::string& rel) { return std::string(TESSERA_SOURCE_DIR) + "/data/" + rel; }

}  // namespace tessera::testing
