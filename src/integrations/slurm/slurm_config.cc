#include "tessera/integrations/slurm_config.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "tessera/node/gpu_table.h"
#include "tessera/node/inventory.h"

namespace tessera::integrations::slurm {
namespace {

// "gpu1/gi2/access 156" lines -> {"gpu1/gi2/access": "156"}.
std::map<std::string, std::string> ParseMinors(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string name, minor;
  while (in >> name >> minor) out[name] = minor;
  return out;
}

}  // namespace

std::string SlurmGpuType(std::string model) {
  for (char& c : model) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return model;
}

std::vector<SlurmGpu> InSlurmOrder(std::vector<SlurmGpu> walk) {
  std::vector<std::string> types;  // in order of first appearance
  for (const SlurmGpu& g : walk) {
    if (std::find(types.begin(), types.end(), g.type) == types.end()) types.push_back(g.type);
  }
  auto rank = [&types](const SlurmGpu& g) { return std::find(types.begin(), types.end(), g.type) - types.begin(); };
  std::stable_sort(walk.begin(), walk.end(), [&rank](const SlurmGpu& a, const SlurmGpu& b) { return rank(a) < rank(b); });
  return walk;
}

StatusOr<SlurmConfigText> RenderSlurmConfig(const std::vector<NodeGpuView>& gpus, const SlurmConfigOptions& o) {
  if (o.node_name.empty()) return InvalidArgumentError("node name: empty (give --node-name)");
  const std::map<std::string, std::string> minors = ParseMinors(o.mig_minors);
  std::ostringstream gres;
  gres << "# gres.conf GPU lines for node " << o.node_name << " (tessera slurm config)\n"
       << "AutoDetect=off\n";
  std::vector<SlurmGpu> walk;
  for (const NodeGpuView& g : gpus) {
    if (!g.mig_enabled) walk.push_back({.gpu = g.index, .type = SlurmGpuType(g.model)});
    for (size_t m = 0; g.mig_enabled && m < g.mig_instances.size(); ++m) {
      walk.push_back({.gpu = g.index, .mig = static_cast<int>(m), .type = g.mig_instances[m].profile});
    }
  }
  std::vector<std::pair<std::string, int>> counts;  // type -> GPUs, in Slurm's order
  int shards = 0;
  for (const SlurmGpu& s : InSlurmOrder(std::move(walk))) {
    const NodeGpuView& g = *std::find_if(gpus.begin(), gpus.end(), [&s](const NodeGpuView& v) { return v.index == s.gpu; });
    if (counts.empty() || counts.back().first != s.type) counts.emplace_back(s.type, 0);
    ++counts.back().second;
    const std::string device = o.device_prefix + std::to_string(g.index);
    if (s.mig < 0) {
      gres << "Name=gpu Type=" << s.type << " File=" << device << "\n";
      if (o.shards_per_gpu > 0) gres << "Name=shard Count=" << o.shards_per_gpu << " File=" << device << "\n";
      shards += o.shards_per_gpu;
      continue;
    }
    const MigInstanceView& m = g.mig_instances[static_cast<size_t>(s.mig)];
    const std::string gi = "gpu" + std::to_string(g.index) + "/gi" + std::to_string(m.gpu_instance_id);
    const std::string ci = gi + "/ci" + std::to_string(m.compute_instance_id);
    auto gi_minor = minors.find(gi + "/access"), ci_minor = minors.find(ci + "/access");
    if (gi_minor == minors.end() || ci_minor == minors.end()) {
      return InvalidArgumentError("GPU " + std::to_string(g.index) + " MIG instance " + ci + ": no '" +
                                  (gi_minor == minors.end() ? gi : ci) +
                                  "/access' in the mig-minors text (--mig-minors, "
                                  "/proc/driver/nvidia-caps/mig-minors)");
    }
    gres << "Name=gpu Type=" << m.profile << " MultipleFiles=" << device << ",/dev/nvidia-caps/nvidia-cap"
         << gi_minor->second << ",/dev/nvidia-caps/nvidia-cap" << ci_minor->second << "\n";
  }
  std::ostringstream conf;
  conf << "# slurm.conf GPU lines for node " << o.node_name << " (tessera slurm config)\n"
       << "GresTypes=gpu" << (shards > 0 ? ",shard" : "") << "\n"
       << "SelectType=select/cons_tres\n"
       << "NodeName=" << o.node_name << " Gres=";
  bool first = true;
  for (const auto& [type, n] : counts) {
    conf << (first ? "" : ",") << "gpu:" << type << ":" << n;
    first = false;
  }
  if (shards > 0) conf << (first ? "" : ",") << "shard:" << shards;
  conf << "\n";
  return SlurmConfigText{.gres_conf = gres.str(), .slurm_conf = conf.str()};
}

}  // namespace tessera::integrations::slurm

namespace tessera::integrations::slurm {

StatusOr<std::vector<NodeGpuView>> ReadNodeGpus(const enforce::NvmlApi& nvml, const GpuModelCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(node::Inventory inventory, node::DiscoverInventory(nvml, catalog));
  std::vector<NodeGpuView> out;
  for (const node::InventoryGpu& g : inventory.gpus) {
    NodeGpuView view{.index = g.index, .model = g.model, .mig_enabled = g.mig_enabled};
    if (g.mig_enabled) {
      // The order the GPU table gives the instances too (gpu_table.h): Slurm numbers them so.
      const MigGeometry* geometry = nullptr;
      if (StatusOr<GpuModelId> id = catalog.Find(g.model); id.ok() && catalog.info(*id).mig) {
        geometry = &*catalog.info(*id).mig;
      }
      TESSERA_ASSIGN_OR_RETURN(std::vector<node::MigInstanceFacts> instances,
                               node::ReadMigInstanceFacts(nvml, g.index, geometry));
      for (const node::MigInstanceFacts& m : instances) {
        view.mig_instances.push_back({.gpu_instance_id = m.gpu_instance_id,
                                      .compute_instance_id = m.compute_instance_id,
                                      .profile = m.profile});
      }
    }
    out.push_back(std::move(view));
  }
  return out;
}

}  // namespace tessera::integrations::slurm
