// tessera slurm config [--node-name NAME] [--shards-per-gpu N] [--device-prefix P]
//                      [--mig-minors FILE] [--fake-gpus MODEL:COUNT[:mig],...] [--nvml LIB]
// Prints the gres.conf and slurm.conf GPU lines of this node (docs/slurm.md). Parsing and
// printing only: the rules are in tessera/integrations/slurm_config.h.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "tessera/core/gpu_model.h"
#include "tessera/enforce/nvml.h"
#include "tessera/integrations/slurm_config.h"
#include "tessera/node/inventory.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

constexpr char kCommand[] = "slurm config";
constexpr char kMigMinors[] = "/proc/driver/nvidia-caps/mig-minors";

struct SlurmConfigFlags {
  std::string node_name, device_prefix = "/dev/nvidia", mig_minors, fake_gpus, nvml = "libnvidia-ml.so.1";
  int shards_per_gpu = 0;
};

int RunSlurmConfig(SlurmConfigFlags f) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  if (f.node_name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) f.node_name = std::string(host).substr(0, std::string(host).find('.'));
  }
  if (!f.fake_gpus.empty()) {
    StatusOr<std::string> config = node::FakeNvmlConfig(f.fake_gpus, catalog);
    if (!config.ok()) return Fail(kCommand, config.status(), kExitBadInput);
    StatusOr<std::string> library = FindFakeNvml();
    if (!library.ok()) return Fail(kCommand, library.status(), kExitBadInput);
    ::setenv("TESSERA_FAKE_NVML_CONFIG", config->c_str(), 1);
    f.nvml = *library;
  }
  std::string minors;
  const bool minors_given = !f.mig_minors.empty();
  if (std::ifstream in(minors_given ? f.mig_minors : kMigMinors); in) {
    std::ostringstream text;
    text << in.rdbuf();
    minors = text.str();
  } else if (minors_given) {
    return Fail(kCommand, "--mig-minors " + f.mig_minors + ": cannot be read", kExitBadInput);
  }
  enforce::DlopenNvml nvml({.library_path = f.nvml});
  if (Status st = nvml.Init(); !st.ok()) return Fail(kCommand, "NVML: " + std::string(st.message()), kExitFailure);
  StatusOr<std::vector<integrations::slurm::NodeGpuView>> gpus = integrations::slurm::ReadNodeGpus(nvml, catalog);
  (void)nvml.Shutdown();  // read-only use
  if (!gpus.ok()) return Fail(kCommand, gpus.status(), kExitFailure);
  StatusOr<integrations::slurm::SlurmConfigText> text = integrations::slurm::RenderSlurmConfig(
      *gpus, {.node_name = f.node_name, .shards_per_gpu = f.shards_per_gpu, .device_prefix = f.device_prefix,
              .mig_minors = minors});
  if (!text.ok()) return Fail(kCommand, text.status(), kExitBadInput);
  std::cout << text->gres_conf << "\n" << text->slurm_conf;
  return kExitOk;
}

}  // namespace

void RegisterSlurm(CLI::App& app, int* exit_code) {
  CLI::App* slurm = app.add_subcommand("slurm", "Slurm integration: the node's gres.conf / slurm.conf GPU lines");
  slurm->require_subcommand(1);
  auto flags = std::make_shared<SlurmConfigFlags>();
  CLI::App* config = slurm->add_subcommand(
      "config", "Print this node's gres.conf and slurm.conf GPU lines (gpu, shard, MIG instances as typed GPUs)");
  config->add_option("--node-name", flags->node_name, "NodeName= in slurm.conf (default: the short host name)");
  config->add_option("--shards-per-gpu", flags->shards_per_gpu,
                     "Shards per GPU (gres/shard lines; default 0: none); the SPANK plugin's shards_per_gpu=")
      ->check(CLI::Range(0, 1000));
  config->add_option("--device-prefix", flags->device_prefix,
                     "Device files are <prefix><index> (default /dev/nvidia; tests use fake device files)");
  config->add_option("--mig-minors", flags->mig_minors,
                     std::string("The driver's MIG capability minors (default ") + kMigMinors + " when present)");
  config->add_option("--fake-gpus", flags->fake_gpus,
                     "Use the in-tree fake NVML with these GPUs: MODEL:COUNT[:mig],... (e.g. A100-40GB:2)");
  config->add_option("--nvml", flags->nvml, "NVML library to load (default libnvidia-ml.so.1, the driver's)");
  config->callback([flags, exit_code] { *exit_code = RunSlurmConfig(*flags); });
}

}  // namespace tessera::cli
