#include <string>

#include "src/placement/policies.h"

namespace tessera::placement {

const std::vector<std::string>& ArtifactPolicyNames() {
  static const std::vector<std::string> names = {"random",     "dotproduct", "gpuclustering",
                                                 "gpupacking", "bestfit",    "fgd"};
  return names;
}

const std::vector<std::string>& PolicyNames() {
  static const std::vector<std::string> names = {
      "tessera", "random",   "dotproduct", "gpuclustering", "gpupacking",
      "bestfit", "fgd",      "firstfit",   "nextfit",       "worstfit"};
  return names;
}

const std::string& DefaultPolicyName() {
  static const std::string name = "tessera";
  return name;
}

StatusOr<std::unique_ptr<PlacementPolicy>> MakePolicy(std::string_view name,
                                                      const PolicyOptions& options) {
  if (name == "random") return MakeRandomPolicy();
  if (name == "dotproduct") return MakeDotProductPolicy();
  if (name == "gpuclustering") return MakeGpuClusteringPolicy();
  if (name == "gpupacking") return MakeGpuPackingPolicy();
  if (name == "bestfit") return MakeBestFitPolicy();
  if (name == "fgd") {
    if (options.target_workload == nullptr || options.target_workload->empty()) {
      return InvalidArgumentError("policy 'fgd' needs a non-empty target workload");
    }
    return MakeFgdPolicy(options.target_workload);
  }
  if (name == "tessera") {
    if (options.target_workload == nullptr || options.target_workload->empty()) {
      return InvalidArgumentError("policy 'tessera' needs a non-empty target workload");
    }
    return MakeTesseraPolicy(options.target_workload, options.tessera);
  }
  if (name == "firstfit") return MakeFirstFitPolicy();
  if (name == "nextfit") return MakeNextFitPolicy();
  if (name == "worstfit") return MakeWorstFitPolicy();
  std::string known;
  for (const auto& n : PolicyNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgumentError("unknown policy '" + std::string(name) + "' (known: " + known + ")");
}

}  // namespace tessera::placement
