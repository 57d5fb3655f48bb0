#include "tools/tessera/commands/k8s_flags.h"

#include <chrono>
#include <cstdio>

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

PluginBackstop::PluginBackstop(const std::string& library) : nvml_({.library_path = library}) {}

PluginBackstop::~PluginBackstop() {
  if (loop_) loop_->Stop();
  if (backstop_) (void)nvml_.Shutdown();
}

StatusOr<std::unique_ptr<PluginBackstop>> PluginBackstop::Start(const BackstopFlags& flags, Input in) {
  if (flags.period_ms <= 0) return std::unique_ptr<PluginBackstop>();
  std::unique_ptr<PluginBackstop> b(new PluginBackstop(in.nvml_library));
  if (Status st = b->nvml_.Init(); !st.ok()) {
    return FailedPreconditionError("NVML, for the backstop (--backstop-ms 0 turns it off): " +
                                   std::string(st.message()));
  }
  in.options.context_allowance_mib = flags.context_allowance_mib;
  in.options.kill = flags.enforce == "kill";
  b->backstop_.emplace(in.options, b->nvml_);
  const std::string prefix = "tessera " + in.command + ": backstop: ";
  const std::string owner = in.options.owner;
  auto report = [prefix, owner](const k8s::DraBackstop::Pass& pass) {
    for (const k8s::BackstopFinding& f : pass.findings) {
      std::fprintf(stderr, "%s%s%s%s\n", prefix.c_str(), f.claim.empty() ? "" : (owner + " " + f.claim + ": ").c_str(),
                   f.detail.c_str(), f.killed ? "; killed" : " (--enforce report: not killed)");
    }
    for (const std::string& p : pass.problems) std::fprintf(stderr, "%s%s\n", prefix.c_str(), p.c_str());
  };
  b->loop_.emplace(*b->backstop_, std::move(in.claims), std::move(in.refresh),
                   std::chrono::milliseconds(flags.period_ms), std::move(report));
  return b;
}

}  // namespace tessera::cli
