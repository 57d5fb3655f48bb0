// `tessera mig`: shared by mig.cc (layouts, validate, plan, simulate) and mig_node.cc (show,
// apply: the node's GPUs through NVML).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"

namespace tessera::cli {

struct MigFlags {
  std::string models_file;
  std::string pods;
  std::string seeds_text = "42-51";
  std::string model;
  std::string layout;
  int gpus = 1;
  std::string demand;
  std::string in_use;
  std::string json_out;  // "" = text only, "-" = JSON on stdout instead of the text, else a file
  bool with_me = false;
  std::string plan_file;
  std::string nvml = "libnvidia-ml.so.1";
  bool yes = false;
};

// The built-in catalog, or a copy with the models of --models FILE added (read once per run).
StatusOr<const GpuModelCatalog*> MigCatalog(const std::string& models_file);
// --model of a MIG-capable model (catalog or NVML name); INVALID_ARGUMENT lists the MIG models.
StatusOr<GpuModelId> MigModel(const GpuModelCatalog& catalog, const std::string& model);

// Prints `text` unless --json is "-", then writes `json` to --json if given. Returns the exit code.
int MigOutput(const std::string& command, const MigFlags& f, const std::string& text, const std::string& json);

// Adds `mig show` and `mig apply` to `mig` (mig_node.cc).
void RegisterMigNode(CLI::App* mig, const std::shared_ptr<MigFlags>& flags, int* exit_code);

}  // namespace tessera::cli
