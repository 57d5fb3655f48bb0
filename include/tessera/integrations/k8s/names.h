// The Kubernetes integration's names (docs/kubernetes.md): the DRA driver's name, and the
// DeviceClass of each way tessera hands out a GPU.
//
//   DeviceClassName(DeviceClassKind::kShare)         -> "share.gpu.tessera.io"
//   ParseDeviceClassName("mig.gpu.tessera.io")        -> DeviceClassKind::kMig
//   ParseDeviceClassName("gpu.nvidia.com")            -> std::nullopt
//
// A MIG device's name (one per profile and placement start of a GPU in MIG mode, as the
// ResourceSlices publish it: resource_slices.h) and its parts back from it, for Prepare:
//   MigDeviceName(1, "3g.40gb", 4)                    -> "gpu-1-mig-3g-40gb-4"
//   MigDeviceName(0, "1g.10gb+me", 6)                 -> "gpu-0-mig-1g-10gb-me-6"
//   ParseMigDeviceName("gpu-1-mig-3g-40gb-4")         -> {gpu 1, profile_label "3g-40gb", start 4}
//   ParseMigDeviceName("gpu-0-mig-1g-10gb-me-6")      -> {gpu 0, profile_label "1g-10gb-me", start 6}
//   ParseMigDeviceName("gpu-1-mig-3g-40gb")           -> INVALID_ARGUMENT "'gpu-1-mig-3g-40gb' is not
//       one of tessera's MIG devices (gpu-<index>-mig-<profile>-<start>, e.g. gpu-1-mig-3g-40gb-4)"
// The profile comes back as its label (ProfileLabel: "1g.10gb+me" -> "1g-10gb-me", the name as a
// DNS label): the caller finds the GPU model's profile whose label it is (ProfileLabel(p.name) ==
// profile_label). The start is the placement's first memory slice; the label is everything between
// "-mig-" and the last '-' (a label never ends in '-', a start is digits only).
//
// The module (`k8s`: src/integrations/k8s/, include/tessera/integrations/k8s/) holds the DRA
// kubelet plugin, the scheduler extender and the device plugin; it links gRPC, which is why it is
// its own target beside the Slurm integration (spank_tessera.so must not pull gRPC in).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tessera/core/status.h"

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

// "1g.10gb+me" -> "1g-10gb-me": a MIG profile name as part of a DNS label (lower-case letters
// and digits; every run of other characters one '-'; none at either end).
std::string ProfileLabel(std::string_view profile);

// The parts of a MIG device's name (see above).
struct MigDeviceParts {
  int gpu = -1;               // node GPU index, 0..enforce::kMaxGpus-1
  std::string profile_label;  // ProfileLabel of the GPU-instance profile, e.g. "3g-40gb"
  int start = -1;             // the placement's first memory slice, 0..7
  friend bool operator==(const MigDeviceParts&, const MigDeviceParts&) = default;
};

// "gpu-<gpu>-mig-<ProfileLabel(profile)>-<start>": the publisher's device name, and the one name
// Prepare parses back (ParseMigDeviceName).
std::string MigDeviceName(int gpu, std::string_view profile, int start);
// The parts of a name MigDeviceName made; INVALID_ARGUMENT naming the device for any other name.
StatusOr<MigDeviceParts> ParseMigDeviceName(std::string_view device);

}  // namespace tessera::k8s
