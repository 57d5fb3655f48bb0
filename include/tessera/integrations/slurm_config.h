// The GPU lines of Slurm's gres.conf and slurm.conf for one node, from the node's GPUs as NVML
// (real or the in-tree fake) reports them: what `tessera slurm config` prints, so that Slurm
// counts exactly the GPUs, shards and MIG instances that tessera confines (docs/slurm.md).
//
// Rules:
//   * a GPU without MIG is one `Name=gpu Type=<model> File=<device>` line (model lower-cased,
//     "h100-80gb") and, with shards_per_gpu > 0, one `Name=shard Count=<n> File=<device>` line;
//   * a GPU with MIG enabled is not a GPU for Slurm: each of its GPU instances is one typed GPU
//     (`Type=<profile>`, "3g.40gb") whose MultipleFiles are the parent device and the instance's
//     two capability files (/dev/nvidia-caps/nvidia-cap<minor>, the minors of "gpu<G>/gi<I>/access"
//     and "gpu<G>/gi<I>/ci<C>/access" in /proc/driver/nvidia-caps/mig-minors); MIG instances get
//     no shards (Slurm cannot share them);
//   * slurm.conf gets GresTypes, SelectType and the node's Gres= counts per type, the types in the
//     order they first appear going through the GPUs by index;
//   * the gpu lines come in the order Slurm numbers the node's GPUs (InSlurmOrder): slurmd takes
//     the records of each type of the node's Gres= list in turn (seen with Slurm 22.05: `slurmd
//     -G` lists them so, and the GPU indexes of a job, SLURM_STEP_GPUS, follow it), whatever the
//     order of gres.conf. So the first gpu line is Slurm's GPU 0, and so on.
//
// Worked example: node "n1", GPU 0 an H100-80GB without MIG, GPU 1 an H100-80GB with two 3g.40gb
// instances (gi 1 and 2, ci 0 each), shards_per_gpu 4, mig-minors listing gpu1/gi1/access 147,
// gpu1/gi1/ci0/access 148, gpu1/gi2/access 156, gpu1/gi2/ci0/access 157:
//   gres.conf:  AutoDetect=off
//               Name=gpu Type=h100-80gb File=/dev/nvidia0
//               Name=shard Count=4 File=/dev/nvidia0
//               Name=gpu Type=3g.40gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap147,/dev/nvidia-caps/nvidia-cap148
//               Name=gpu Type=3g.40gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap156,/dev/nvidia-caps/nvidia-cap157
//   slurm.conf: GresTypes=gpu,shard
//               SelectType=select/cons_tres
//               NodeName=n1 Gres=gpu:h100-80gb:1,gpu:3g.40gb:2,shard:4
//
// Thread-safety: pure. Callers: tools/tessera/commands/slurm.cc.
#pragma once

#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/enforce/nvml.h"

namespace tessera::integrations::slurm {

// One GPU as Slurm counts it: a whole GPU or one MIG instance of one.
struct SlurmGpu {
  int gpu = 0;         // the node's (NVML's) index
  int mig = -1;        // the instance's position among the GPU's MIG instances; -1: the whole GPU
  std::string type;    // its gres Type: SlurmGpuType(model), or the MIG profile
  bool operator==(const SlurmGpu&) const = default;
};
// A whole GPU's gres Type: the catalog model, lower-cased ("H100-80GB" -> "h100-80gb").
std::string SlurmGpuType(std::string model);
// Slurm's numbering of a node's GPUs from `walk`, the node's GPUs by index with each MIG GPU
// replaced by its instances (gpu_table.h's order): the GPUs of the type that appears first, in
// walk order, then those of the next type, and so on (a stable sort by the rank of the type's
// first appearance). Example: walk [GPU 0 "a100-40gb", GPU 1 mig 0 "3g.20gb", GPU 1 mig 1
// "3g.20gb", GPU 2 "a100-40gb"] -> [GPU 0, GPU 2, GPU 1 mig 0, GPU 1 mig 1]: Slurm's GPU 1 is
// node GPU 2 (Gres=gpu:a100-40gb:2,gpu:3g.20gb:2). Shared by RenderSlurmConfig and the task's
// MapSlurmGpus (slurm_step.h), so that what the one prints is what the other maps.
std::vector<SlurmGpu> InSlurmOrder(std::vector<SlurmGpu> walk);

struct MigInstanceView {
  int gpu_instance_id = 0;
  int compute_instance_id = 0;
  std::string profile;  // "3g.40gb"
};

struct NodeGpuView {
  int index = 0;
  std::string model;  // catalog name, "H100-80GB"
  bool mig_enabled = false;
  std::vector<MigInstanceView> mig_instances;  // when MIG is enabled
};

struct SlurmConfigOptions {
  std::string node_name;
  int shards_per_gpu = 0;                      // 0: no shard lines
  std::string device_prefix = "/dev/nvidia";   // File=<prefix><index> (tests use fake files)
  std::string mig_minors;                      // the text of /proc/driver/nvidia-caps/mig-minors
};

struct SlurmConfigText {
  std::string gres_conf;
  std::string slurm_conf;
};

// INVALID_ARGUMENT for an empty node name or a GPU with MIG instances whose minors are not in
// `mig_minors` (naming the entry it looked for); a MIG-enabled GPU without instances gives no line.
StatusOr<SlurmConfigText> RenderSlurmConfig(const std::vector<NodeGpuView>& gpus, const SlurmConfigOptions& options);

// The node's GPUs through NVML (Init done by the caller): model from the catalog
// (node::DiscoverInventory), and for MIG-enabled GPUs one view per compute instance, named by its
// GPU instance's profile ("3g.40gb"; "profile <id>" when the catalog lacks it).
StatusOr<std::vector<NodeGpuView>> ReadNodeGpus(const enforce::NvmlApi& nvml, const GpuModelCatalog& catalog);

}  // namespace tessera::integrations::slurm
