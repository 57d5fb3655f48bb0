// What a node's GPUs look like under MIG, read through NvmlApi, and its text and JSON forms:
// what `tessera mig show` prints and what `tessera mig apply` prints after applying a plan.
//
//   auto gpus = ReadNodeMig(nvml);  // one entry per GPU: name, MIG mode, GPU/compute instances
//   FormatMigInstances(0, (*gpus)[0].instances, &h100)
//     -> "  GPU 0: [gi 1 3g.40gb@0:4 ci 0 @0:3] [gi 2 3g.40gb@4:4 ci 0 @0:3]"
//   EncodeNodeMigJson("libnvidia-ml.so.1", *gpus)
//     -> {"library": ..., "gpus": [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "mig": "enabled",
//          "gpu_instances": [{"id", "profile_id", "start", "size", "compute_instances": [...]}]}]}
//
// Callers: the CLI (tools/tessera/commands/mig_node.cc). Read-only.
// Thread-safety: none of its own (NvmlApi's). Ownership: results are values.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/enforce/mig_apply.h"
#include "tessera/enforce/nvml.h"

namespace tessera::enforce {

struct GpuMigReport {
  uint32_t index = 0;
  std::string name;   // nvmlDeviceGetName, or the error's message when it could not be read
  bool name_ok = true;
  std::string mig;    // "enabled" | "disabled" | "not supported"
  std::vector<MigInstanceState> instances;  // read when MIG is enabled
};

// Every GPU of the node; the first error reading the count or an enabled GPU's instances.
StatusOr<std::vector<GpuMigReport>> ReadNodeMig(const NvmlApi& nvml);

// "  GPU 0: [gi 1 3g.40gb@0:4 ci 0 @0:3] ..." ("profile <id> " where `geometry` is null or lacks
// the profile id; " no GPU instances" for none), without a final newline.
std::string FormatMigInstances(uint32_t gpu, const std::vector<MigInstanceState>& state,
                               const MigGeometry* geometry = nullptr);

// The JSON above (indented by 2, final newline).
std::string EncodeNodeMigJson(const std::string& library, const std::vector<GpuMigReport>& gpus);

// `tessera mig apply --json`: {"model", "library", "steps": ["create 3g.40gb@0 on GPU 0", ...],
// "applied": [{"step", "gpu_instance_id", "compute_instance_ids"}], "gpus": [{"index",
// "gpu_instances": [...]}]} for the GPUs the steps touched (indented by 2, final newline).
std::string EncodeMigApplyJson(const std::string& model, const std::string& library,
                               const std::vector<MigStep>& steps, const std::vector<MigStepResult>& applied,
                               const std::vector<std::pair<uint32_t, std::vector<MigInstanceState>>>& after);

}  // namespace tessera::enforce
