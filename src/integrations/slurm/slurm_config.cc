#include "tessera/integrations/slurm_config.h"

#include <cctype>
#include <map>
#include <sstream>

#include "tessera/enforce/mig_apply.h"
#include "tessera/node/inventory.h"

namespace tessera::integrations::slurm {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// "gpu1/gi2/access 156" lines -> {"gpu1/gi2/access": "156"}.
std::map<std::string, std::string> ParseMinors(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string name, minor;
  while (in >> name >> minor) out[name] = minor;
  return out;
}

}  // namespace

StatusOr<SlurmConfigText> RenderSlurmConfig(const std::vector<NodeGpuView>& gpus, const SlurmConfigOptions& o) {
  if (o.node_name.empty()) return InvalidArgumentError("node name: empty (give --node-name)");
  const std::map<std::string, std::string> minors = ParseMinors(o.mig_minors);
  std::ostringstream gres;
  gres << "# gres.conf GPU lines for node " << o.node_name << " (tessera slurm config)\n"
       << "AutoDetect=off\n";
  std::vector<std::pair<std::string, int>> counts;  // type -> GPUs, in order of appearance
  auto count = [&counts](const std::string& type) {
    for (auto& [t, n] : counts) {
      if (t == type) return void(++n);
    }
    counts.emplace_back(type, 1);
  };
  int shards = 0;
  for (const NodeGpuView& g : gpus) {
    const std::string device = o.device_prefix + std::to_string(g.index);
    if (!g.mig_enabled) {
      const std::string type = Lower(g.model);
      gres << "Name=gpu Type=" << type << " File=" << device << "\n";
      if (o.shards_per_gpu > 0) gres << "Name=shard Count=" << o.shards_per_gpu << " File=" << device << "\n";
      shards += o.shards_per_gpu;
      count(type);
      continue;
    }
    for (const MigInstanceView& m : g.mig_instances) {
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
      count(m.profile);
    }
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
      TESSERA_ASSIGN_OR_RETURN(std::vector<enforce::MigInstanceState> state,
                               enforce::ReadMigInstances(nvml, static_cast<uint32_t>(g.index)));
      const MigGeometry* geometry = nullptr;
      if (StatusOr<GpuModelId> id = catalog.Find(g.model); id.ok() && catalog.info(*id).mig) {
        geometry = &*catalog.info(*id).mig;
      }
      for (const enforce::MigInstanceState& s : state) {
        std::string profile = "profile" + std::to_string(s.gpu_instance.profile_id);
        for (size_t i = 0; geometry != nullptr && i < geometry->profiles.size(); ++i) {
          if (geometry->profiles[i].profile_id == static_cast<int>(s.gpu_instance.profile_id)) {
            profile = geometry->profiles[i].name;
          }
        }
        for (const enforce::ComputeInstance& c : s.compute_instances) {
          view.mig_instances.push_back({.gpu_instance_id = static_cast<int>(s.gpu_instance.id),
                                        .compute_instance_id = static_cast<int>(c.id),
                                        .profile = profile});
        }
      }
    }
    out.push_back(std::move(view));
  }
  return out;
}

}  // namespace tessera::integrations::slurm
