// The Kubernetes integration's names (docs/kubernetes.md): the DRA driver's name, and the
// DeviceClass of each way tessera hands out a GPU.
//
//   DeviceClassName(DeviceClassKind::kShare)         -> "share.gpu.tessera.io"
//   ParseDeviceClassName("mig.gpu.tessera.io")        -> DeviceClassKind::kMig
//   ParseDeviceClassName("gpu.nvidia.com")            -> std::nullopt
//
// The module (`k8s`: src/integrations/k8s/, include/tessera/integrations/k8s/) holds the DRA
// kubelet plugin, the scheduler extender and the device plugin; it links gRPC, which is why it is
// its own target beside the Slurm integration (spank_tessera.so must not pull gRPC in).
#pragma once

#include <optional>
#include <string_view>

namespace tessera::k8s {

// The DRA driver's name: ResourceSlice.spec.driver, the kubelet plugin's registration name, and
// the domain of the device attributes ("gpu.tessera.io/model").
inline constexpr std::string_view kDriverName = "gpu.tessera.io";

enum class DeviceClassKind {
  kWhole,  // a whole GPU, exclusive
  kShare,  // a fraction of a GPU's compute and memory, enforced by the shim
  kMig,    // a MIG instance (partitionable device)
};

// "whole.gpu.tessera.io", "share.gpu.tessera.io", "mig.gpu.tessera.io".
std::string_view DeviceClassName(DeviceClassKind kind);

// The kind a DeviceClass name stands for, or nullopt for a name that is not one of tessera's.
std::optional<DeviceClassKind> ParseDeviceClassName(std::string_view name);

}  // namespace tessera::k8s
