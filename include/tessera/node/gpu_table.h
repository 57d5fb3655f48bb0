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
//   # tessera gpu table 3
//   0	GPU-5c2a1e0b-0000-0000-0000-000000000000	0	81559	-	H100-80GB
//   1	GPU-5c2a1e0b-0000-0000-0000-000000000001	1	81559	mig	H100-80GB
//   mig	1	1	0	MIG-7f1e0000-0000-0000-0000-000000000001	3g.40gb	40192
//   mig	1	2	0	MIG-7f1e0000-0000-0000-0000-000000000002	3g.40gb	40192
//   2	GPU-5c2a1e0b-0000-0000-0000-000000000002	2	81559	-	H100-80GB
//
// GPU lines: NVML index, UUID ("-" when NVML gave none), /dev/nvidia<minor> (-1 when NVML gave
// none), total memory in MiB, "mig" when MIG mode is on ("-" when off or unknown) and the model
// by the catalog's name ("-" when the catalog does not know it). Tables of version 2 lack the
// model, those of version 1 the MIG mode too (MIG off). "mig" lines (version 3) are the MIG
// instances of a MIG GPU listed above them: parent GPU index, GPU instance id, compute instance
// id, the MIG device's UUID ("-" when NVML gave none), the GPU instance's profile by the
// catalog's name and its memory in MiB (0: unknown), in the order ReadMigInstanceFacts gives
// them, which `tessera slurm config` prints them in too.
//
// Why a Slurm task needs all this: Slurm numbers the GPUs of a node by the gres.conf records of
// each type of the node's `Gres=` list in turn, and a MIG GPU's instances are records (typed
// GPUs) of their own, so the GPU indexes Slurm gives a task are not NVML's on a MIG node (nor on
// a node of two models). integrations/slurm_step.h (MapSlurmGpus) maps them back with this table.
// Worked example: with the table above `tessera slurm config` prints Gres=gpu:h100-80gb:2,
// gpu:3g.40gb:2, and Slurm's GPUs are 0 = GPU 0, 1 = GPU 2, 2 = GPU 1's gi1/ci0, 3 = its gi2/ci0;
// a task on Slurm's GPU 2 gets CUDA_VISIBLE_DEVICES=MIG-...0001 and, without --gpu-mem, a limit
// of 40,192 MiB; GpuFactsOf(table, 1) gives GPU 1's facts with its two instances.
// A reader of version 2 fails on a line of version 3, naming it: plugin and node side ship
// together (one package). The MIG layout is read at the node side's start: a MIG reconfiguration
// needs it restarted (as Slurm needs its gres lines printed again and slurmd restarted).
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

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/enforce/nvml.h"

namespace tessera::node {

// One MIG instance of a MIG GPU: a compute instance as CUDA sees it (a MIG device).
struct MigInstanceFacts {
  int gpu_instance_id = 0;
  int compute_instance_id = 0;
  std::string uuid;         // "MIG-..."; empty: NVML gave none
  std::string profile;      // the GPU instance's profile, "3g.40gb" ("profile<id>" unknown to the catalog)
  uint64_t memory_mib = 0;  // the GPU instance's memory; 0: unknown
  bool operator==(const MigInstanceFacts&) const = default;
};

struct NodeGpuFacts {
  int index = 0;
  std::string uuid;        // empty: NVML gave none
  int minor = -1;          // -1: NVML gave none
  uint64_t memory_mib = 0; // 0: NVML gave none
  bool mig_enabled = false;  // MIG mode is on (current, not pending)
  std::string model;         // the catalog's name, "H100-80GB"; empty: unknown
  std::vector<MigInstanceFacts> mig_instances;  // MIG on: its instances, in Slurm's order
  bool operator==(const NodeGpuFacts&) const = default;
};

// The table's path in node directory `node_dir`.
std::string GpuTablePath(const std::string& node_dir);

// Renders / parses the format above. Parse errors name `where`:line and the field.
std::string FormatGpuTable(const std::vector<NodeGpuFacts>& gpus);
StatusOr<std::vector<NodeGpuFacts>> ParseGpuTable(std::string_view text, const std::string& where);

// Reads the table of `node_dir`; std::nullopt when there is none (the caller asks NVML).
StatusOr<std::optional<std::vector<NodeGpuFacts>>> ReadGpuTable(const std::string& node_dir);

// The MIG instances of MIG GPU `gpu` in the order Slurm numbers them, which is the order of the
// gres lines `tessera slurm config` prints (integrations/slurm_config.h; it reads them here):
// GPU instances by placement start (enforce::ReadMigInstances), inside each its compute
// instances by start. Profile names and memory from the catalog's geometry of the GPU's model
// (`geometry`, null when the catalog lacks it: "profile<id>", memory from NVML's profile info
// when it gives it); UUIDs from NVML's MIG devices (empty where the library lacks them). Example:
// an H100-80GB with 3g.40gb GIs at slices 4 (GI 2) and 0 (GI 1), CI 0 each ->
// [{gi 1, ci 0, "MIG-...", "3g.40gb", 40192}, {gi 2, ci 0, ...}].
StatusOr<std::vector<MigInstanceFacts>> ReadMigInstanceFacts(const enforce::NvmlApi& nvml, int gpu,
                                                             const MigGeometry* geometry);

// What NVML (initialised) says about `gpus`: model from the built-in catalog, MIG instances
// (ReadMigInstanceFacts) of the MIG GPUs. NOT_FOUND naming the GPU when NVML counts fewer.
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
