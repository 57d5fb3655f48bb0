// The flags both kubelet plugins of `tessera k8s` share (`dra-driver`, `device-plugin`): where the
// slots go and what a container is given to reach them. Flags only.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace tessera::cli {

struct ContainerFlagTargets {
  std::string* node_dir;       // --node-dir
  std::string* container_dir;  // --container-dir
  std::string* dev_dir;        // --dev-dir
  std::string* shim_path;      // --shim
  std::string* fake_gpus;      // --fake-gpus
};

// Adds --node-dir, --container-dir, --dev-dir, --shim and --fake-gpus to `cmd`, with their help
// (units, defaults: each target's value when called).
void AddContainerFlags(CLI::App* cmd, const ContainerFlagTargets& t);

}  // namespace tessera::cli
