// The flags both kubelet plugins of `tessera k8s` share (`dra-driver`, `device-plugin`): where the
// slots go and what a container is given to reach them; and the NVML backstop both run
// (--backstop-ms, tessera/integrations/k8s/dra_backstop.h), with its report lines.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "tessera/core/status.h"
#include "tessera/enforce/nvml.h"
#include "tessera/integrations/k8s/dra_backstop.h"
#include "tools/tessera/commands/common.h"

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

// The NVML backstop of a plugin, on an NVML handle of its own, checking every --backstop-ms on a
// thread of its own until destroyed. Each finding is a line on stderr, e.g.
//   "tessera k8s device-plugin: backstop: slot k8s-dp/U::0: 4500 MiB on GPU 0 over its limit of
//    4096 MiB (beyond 500 MiB of context per process) (pids 7070); killed"
class PluginBackstop {
 public:
  struct Input {
    std::string command;       // "k8s dra-driver", in the report lines
    std::string nvml_library;  // the plugin's --nvml (or the fake one)
    k8s::DraBackstopOptions options;  // proc_dir, counters_dir, slot_mount, owner (the rest from the flags)
    k8s::DraBackstop::ClaimsFn claims;
    k8s::DraBackstop::RefreshFn refresh;  // may be empty
  };
  // nullptr when --backstop-ms is 0; FAILED_PRECONDITION "NVML, for the backstop (--backstop-ms 0
  // turns it off): ..." when NVML cannot be opened (the plugin then does not start).
  static StatusOr<std::unique_ptr<PluginBackstop>> Start(const BackstopFlags& flags, Input in);
  ~PluginBackstop();
  PluginBackstop(const PluginBackstop&) = delete;
  PluginBackstop& operator=(const PluginBackstop&) = delete;

 private:
  explicit PluginBackstop(const std::string& library);
  enforce::DlopenNvml nvml_;
  std::optional<k8s::DraBackstop> backstop_;
  std::optional<k8s::DraBackstopLoop> loop_;
};

}  // namespace tessera::cli
