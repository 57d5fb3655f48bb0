#include "tessera/integrations/k8s/names.h"

namespace tessera::k8s {

std::string_view DeviceClassName(DeviceClassKind kind) {
  switch (kind) {
    case DeviceClassKind::kWhole:
      return "whole.gpu.tessera.io";
    case DeviceClassKind::kShare:
      return "share.gpu.tessera.io";
    case DeviceClassKind::kMig:
      return "mig.gpu.tessera.io";
  }
  return "whole.gpu.tessera.io";
}

std::optional<DeviceClassKind> ParseDeviceClassName(std::string_view name) {
  for (DeviceClassKind kind : {DeviceClassKind::kWhole, DeviceClassKind::kShare, DeviceClassKind::kMig}) {
    if (DeviceClassName(kind) == name) return kind;
  }
  return std::nullopt;
}

}  // namespace tessera::k8s
