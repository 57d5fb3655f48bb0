// Node inventory: what a node agent registers with the control plane (docs/api.md, POST
// /v1/nodes/{name}/register): the machine's CPUs and memory and, per GPU, its NVML index, UUID,
// catalog model, memory and MIG mode, read through the NVML adapter (the real driver's
// libnvidia-ml.so.1 or the in-tree fake).
//
// Worked example: on a node whose NVML reports two "NVIDIA H100 80GB HBM3" GPUs (81559 MiB, MIG
// on), DiscoverInventory(nvml, GpuModelCatalog::Builtin()) returns gpus = [{0, "GPU-...",
// "H100-80GB", 81559, true}, {1, ...}] and InventoryJson gives
//   {"cpu_milli": 16000, "memory_mib": 128000,
//    "gpus": [{"index": 0, "uuid": "GPU-...", "model": "H100-80GB", "memory_mib": 81559,
//              "mig_enabled": true}, ...]}
// A GPU whose NVML name the catalog does not know is an error naming it (the control plane
// could not place work on it); so is a GPU whose memory or MIG mode cannot be read.
// A GPU in MIG mode also lists its GPU instances (DiscoverMigInstances): with one 3g.40gb at slice
// 0 running a process, "mig_instances": [{"profile": "3g.40gb", "start": 0, "in_use": true}].
//
// Thread-safety: pure but for the NVML calls (NvmlApi is thread-safe after Init).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/api/node_wire.h"
#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/enforce/nvml.h"

namespace tessera::node {

// One GPU as registered: the wire contract's (model: the catalog name, "H100-80GB").
using InventoryGpu = api::InventoryGpu;

struct Inventory {
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::vector<InventoryGpu> gpus;
  friend bool operator==(const Inventory&, const Inventory&) = default;
};

// The GPUs from NVML (Init done by the caller) and this machine's CPUs and memory (sysconf).
StatusOr<Inventory> DiscoverInventory(const enforce::NvmlApi& nvml, const GpuModelCatalog& catalog);

// The GPU instances of MIG GPU `gpu`, by start: each one's catalog profile (matched by the profile
// id the driver reports, checked against the placement's size) and whether a compute process runs
// in it (NvmlApi::RunningProcesses' GPU-instance id). An instance of a profile the catalog lacks
// is FAILED_PRECONDITION naming the GPU, the profile id and the placement.
StatusOr<std::vector<api::InventoryMigInstance>> DiscoverMigInstances(const enforce::NvmlApi& nvml, uint32_t gpu,
                                                                      const MigGeometry& geometry);

// The register body (see above; api::EncodeNodeInventory), with "agent_id" when `agent_id` is not
// empty (the agent's instance id: the control plane tells a restart of the node's agent from a
// second agent by it) and "mig_reconfigure": true when the agent applies desired MIG layouts.
std::string InventoryJson(const Inventory& inventory, std::string_view agent_id = "", bool mig_reconfigure = false);

// `--fake-gpus H100-80GB:2,A100-40GB:4` (MODEL:COUNT[:mig], COUNT 1..16) as the fake NVML's
// TESSERA_FAKE_NVML_CONFIG ("H100-80GB*2:mig=1,..."). A model the catalog lacks, a bad count or
// more than 16 GPUs in all is INVALID_ARGUMENT naming the item. `mig` turns MIG mode on (the
// model must have MIG).
StatusOr<std::string> FakeNvmlConfig(const std::string& fake_gpus, const GpuModelCatalog& catalog);

}  // namespace tessera::node
