// The JSON forms of MIG layouts and plans: what `tessera mig layouts/plan --json` write and what
// `tessera mig apply --plan FILE` (and the node agent) read back. Encoding and decoding live
// together so that a plan written by one version is read by the same rules.
//
// Plan document (EncodeMigPlanJson; DecodeMigPlanJson reads "model" and "steps", ignores the rest):
//   {"model": "H100-80GB",
//    "gpus": [{"index": 0, "instances": [{"profile": "3g.40gb", "start": 0, "size": 4}, ...]}],
//    "unsatisfied": {"1g.10gb": 2},
//    "steps": [{"action": "create", "gpu": 0, "profile": "3g.40gb", "start": 0, "size": 4}],
//    "satisfied_memory_slices": 8}
// Decoding checks every step against the model's geometry (known profile, a start the profile
// allows, gpu 0..100000) and the plan's model against the one the caller applies it to (catalog
// names and NVML names are both accepted). Errors name the source and the JSON path of the bad
// field, and the line:column for text that is not JSON:
//   "plan.json: steps[0].profile: unknown MIG profile '5g.50gb' ..."
//   "plan.json:3:14: not JSON: syntax error ..."
//   "plan.json: model: the plan is for "H100-80GB", not A100-40GB"
//
// Callers: the CLI (tools/tessera/commands/mig.cc), the fuzzer (tests/fuzz/mig_plan_json_fuzzer.cc).
// Thread-safety: pure functions. Ownership: results are values.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/partition/mig_layout.h"
#include "tessera/partition/mig_planner.h"

namespace tessera::partition {

// {"model": model, "layouts": [[{"profile", "start", "size"}, ...], ...]} (instances by start),
// indented by 2, with a final newline.
std::string EncodeMigLayoutsJson(const MigGeometry& geometry, const std::string& model,
                                 const std::vector<MigLayout>& layouts);
// {"model": model, "valid": true, "instances": [{"profile", "start", "size"}, ...]} for a layout
// that passed ValidateLayout (indented by 2, final newline).
std::string EncodeMigValidLayoutJson(const MigGeometry& geometry, const std::string& model, const MigLayout& layout);
// The plan document above, indented by 2, with a final newline.
std::string EncodeMigPlanJson(const MigGeometry& geometry, const std::string& model, const MigPlan& plan);

struct DecodedMigPlan {
  std::string model;               // as the plan names it; empty when it names none
  std::vector<MigPlanStep> steps;  // in file order; profile = index into geometry.profiles
};

// `model` is the catalog model the plan is applied to (its geometry is the one checked against).
// INVALID_ARGUMENT naming `source` and the field for any problem.
StatusOr<DecodedMigPlan> DecodeMigPlanJson(const GpuModelCatalog& catalog, GpuModelId model, std::string_view text,
                                           std::string_view source);
// Reads `path` and decodes it; NOT_FOUND "<path>: cannot open file".
StatusOr<DecodedMigPlan> ReadMigPlanFile(const GpuModelCatalog& catalog, GpuModelId model, const std::string& path);

}  // namespace tessera::partition
