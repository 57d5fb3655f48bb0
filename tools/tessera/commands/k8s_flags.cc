#include "tools/tessera/commands/k8s_flags.h"

namespace tessera::cli {

void AddContainerFlags(CLI::App* cmd, const ContainerFlagTargets& t) {
  cmd->add_option("--node-dir", *t.node_dir,
                  "The node directory (segment, leases, tenant registry) the slots go into: the agent's --run-dir "
                  "(default: TESSERA_RUN_DIR, else $XDG_RUNTIME_DIR/tessera, else /tmp/tessera-<uid>)");
  cmd->add_option("--container-dir", *t.container_dir,
                  "Where the shim and the node's policy/counters/leases files appear inside the container")
      ->default_str(*t.container_dir);
  cmd->add_option("--dev-dir", *t.dev_dir,
                  "Host folder of the NVIDIA device nodes (nvidiactl, nvidia-uvm, nvidia<minor>) given to the "
                  "containers; \"\" adds none (left to the NVIDIA container toolkit)")
      ->default_str(*t.dev_dir);
  cmd->add_option("--shim", *t.shim_path,
                  "Host path of libtessera-shim.so, bind-mounted into the containers (default: next to the "
                  "tessera executable, ../lib/libtessera-shim.so)");
  cmd->add_option("--fake-gpus", *t.fake_gpus,
                  "Use the in-tree fake NVML with these GPUs (tests): MODEL:COUNT[:mig],... (e.g. A100-40GB:2)");
}

}  // namespace tessera::cli
