// Private: constructors of the built-in policies, used by MakePolicy (policy_registry.cc).
// Adding a policy = one .cc file with its Make function + one line in policy_registry.cc.
#pragma once

#include <memory>

#include "tessera/placement/fragmentation.h"
#include "tessera/placement/policy.h"

namespace tessera::placement {

// Normalising constants of the FGD artifact: the biggest node of the Alibaba cluster.
inline constexpr double kMaxCpuMilli = 128000.0;
inline constexpr double kMaxGpuMilli = 8000.0;

std::unique_ptr<PlacementPolicy> MakeRandomPolicy();
std::unique_ptr<PlacementPolicy> MakeDotProductPolicy();
std::unique_ptr<PlacementPolicy> MakeGpuClusteringPolicy();
std::unique_ptr<PlacementPolicy> MakeGpuPackingPolicy();
std::unique_ptr<PlacementPolicy> MakeBestFitPolicy();
std::unique_ptr<PlacementPolicy> MakeFgdPolicy(const TargetWorkload* workload);
std::unique_ptr<PlacementPolicy> MakeFirstFitPolicy();
std::unique_ptr<PlacementPolicy> MakeNextFitPolicy();
std::unique_ptr<PlacementPolicy> MakeWorstFitPolicy();
std::unique_ptr<PlacementPolicy> MakeTesseraPolicy(const TargetWorkload* workload,
                                                   const TesseraOptions& options);

}  // namespace tessera::placement
