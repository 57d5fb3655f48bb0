// The node's GPU table: what the node side (`tessera node arbiter`, `tessera agent`) learnt from
// NVML about each GPU it drives, kept in the node directory (gpus.tsv) so that a joining task needs
// no NVML of its own. The Slurm plugin's task_init runs in every task of every step, before the
// task execs: loading and initialising NVML there costs milliseconds with the real driver (more
// without persistence mode), for facts that do not change while the node side runs (UUID, device
// minor, memory). A task reads the table when it is there and asks NVML only when it is not
// (a node side without NVML, or one of an earlier release, writes none).
//
// Format (text, one GPU per line, fields separated by one tab; '#' lines are comments):
//
//   # tessera gpu table 2
//   0	GPU-5c2a1e0b-0000-0000-0000-000000000000	0	40960	-
//   1	GPU-5c2a1e0b-0000-0000-0000-000000000001	1	40960	mig
//
// fields: NVML index, UUID ("-" when NVML gave none), /dev/nvidia<minor> (-1 when NVML gave
// none), total memory in MiB, and "mig" when MIG mode is on ("-" when off or unknown; tables of
// version 1 have four fields: MIG off). A MIG GPU matters to a Slurm task: Slurm numbers each of
// its MIG instances as a GPU of its own (`tessera slurm config`), so the GPU indexes Slurm gives
// a task on such a node are not NVML's. Worked example: with the table above, GpuFactsOf(table, 1) gives
// {uuid "GPU-...0001", minor 1, memory 40,960 MiB}, and a task pinned to GPU 1 gets
// CUDA_VISIBLE_DEVICES=GPU-...0001 and, without --gpu-mem, a limit of 40,960 MiB.
//
// The writer replaces the file atomically (a temporary file renamed over it, mode 0644): a reader
// sees the old table or the new one, never half of one. The node directory is the node side's
// (root's); a tenant can read the table, not change it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/enforce/nvml.h"

namespace tessera::node {

struct NodeGpuFacts {
  int index = 0;
  std::string uuid;        // empty: NVML gave none
  int minor = -1;          // -1: NVML gave none
  uint64_t memory_mib = 0; // 0: NVML gave none
  bool mig_enabled = false;  // MIG mode is on (current, not pending)
  bool operator==(const NodeGpuFacts&) const = default;
};

// The table's path in node directory `node_dir`.
std::string GpuTablePath(const std::string& node_dir);

// Renders / parses the format above. Parse errors name `where`:line and the field.
std::string FormatGpuTable(const std::vector<NodeGpuFacts>& gpus);
StatusOr<std::vector<NodeGpuFacts>> ParseGpuTable(std::string_view text, const std::string& where);

// Reads the table of `node_dir`; std::nullopt when there is none (the caller asks NVML).
StatusOr<std::optional<std::vector<NodeGpuFacts>>> ReadGpuTable(const std::string& node_dir);

// What NVML (initialised) says about `gpus`. NOT_FOUND naming the GPU when NVML counts fewer.
StatusOr<std::vector<NodeGpuFacts>> DiscoverGpuFacts(const enforce::NvmlApi& nvml, const std::vector<int>& gpus);

// Writes `gpus` as the table of `node_dir` (atomically, 0644).
Status WriteGpuTable(const std::string& node_dir, const std::vector<NodeGpuFacts>& gpus);
// Removes a table left by an earlier node side (one that now cannot ask NVML must not leave
// stale facts behind). OK when there is none.
Status RemoveGpuTable(const std::string& node_dir);

// What the node side does at start: NVML's (initialised) facts of `gpus` (empty: every GPU NVML
// counts) written as the table of `node_dir`. On an error nothing stale is left: the table is
// removed (tasks then ask NVML themselves) and the error returned for the caller to report.
Status PublishGpuTable(const std::string& node_dir, const enforce::NvmlApi& nvml, std::vector<int> gpus);
// The same with NVML loaded from `nvml_library` (DlopenNvml) for the call: `tessera node arbiter`.
Status PublishGpuTable(const std::string& node_dir, const std::string& nvml_library, std::vector<int> gpus);

// The facts of GPU `index` in `table`, if it lists it.
std::optional<NodeGpuFacts> GpuFactsOf(const std::vector<NodeGpuFacts>& table, int index);

}  // namespace tessera::node
