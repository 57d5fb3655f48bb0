// Readers for the Alibaba GPU trace (cluster-trace-gpu-v2023, "openb") node and pod lists.
//
// Node list columns: sn, cpu_milli, memory_mib, gpu, model (model empty on CPU-only nodes).
// Pod list columns:  name, cpu_milli, memory_mib, num_gpu, gpu_milli [, gpu_spec, ...]
// (gpu_spec is a '|'-separated list of allowed models; the multigpu* files omit it; other
// columns such as qos and the timestamps are ignored by the placement replay).
//
//   StatusOr<std::vector<placement::NodeSpec>> nodes =
//       ReadNodeList("data/alibaba-gpu-2023/csv/openb_node_list_gpu_node.csv", catalog);
//   StatusOr<std::vector<PodRecord>> pods = ReadPodList(".../openb_pod_list_default.csv", catalog);
//
// Every error names the file, line, column and field: missing files (NOT_FOUND), malformed
// rows, unknown GPU models, negative or absurd numbers, duplicate names, empty lists
// (INVALID_ARGUMENT).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/task.h"

namespace tessera::sim {

// Upper bounds above which a number is treated as a typo rather than a real machine or task.
inline constexpr int64_t kMaxCpuMilli = 100'000'000;   // 100k vCPU
inline constexpr int64_t kMaxMemoryMib = 1LL << 30;    // 1 PiB

struct PodRecord {
  std::string name;
  placement::TaskRequest request;
};

StatusOr<std::vector<placement::NodeSpec>> ParseNodeList(std::string_view text, std::string_view path,
                                                         const GpuModelCatalog& catalog);
StatusOr<std::vector<placement::NodeSpec>> ReadNodeList(const std::string& path,
                                                        const GpuModelCatalog& catalog);

StatusOr<std::vector<PodRecord>> ParsePodList(std::string_view text, std::string_view path,
                                              const GpuModelCatalog& catalog);
StatusOr<std::vector<PodRecord>> ReadPodList(const std::string& path, const GpuModelCatalog& catalog);

// "openb_pod_list_default" for ".../openb_pod_list_default.csv".
std::string FileStem(std::string_view path);

// The names reports key pod lists by, one per path: the file stem, or the path as given where
// two paths share a stem ("a/x.csv", "b/x.csv" -> "a/x.csv", "b/x.csv"; "a/x.csv", "b/y.csv"
// -> "x", "y"), so that every input gets a row of its own.
std::vector<std::string> PodListNames(const std::vector<std::string>& paths);

}  // namespace tessera::sim
