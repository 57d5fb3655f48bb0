#include "tessera/integrations/k8s/names.h"

#include <cctype>

#include "tessera/enforce/segment.h"

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

std::string ProfileLabel(std::string_view profile) {
  std::string out;
  for (char c : profile) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::string MigDeviceName(int gpu, std::string_view profile, int start) {
  return "gpu-" + std::to_string(gpu) + "-mig-" + ProfileLabel(profile) + "-" + std::to_string(start);
}

namespace {

// A decimal number without leading zeros, below `limit`; -1 otherwise.
int SmallNumber(std::string_view digits, int limit) {
  if (digits.empty() || digits.size() > 3 || (digits.size() > 1 && digits[0] == '0')) return -1;
  int n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
    n = n * 10 + (c - '0');
  }
  return n < limit ? n : -1;
}

}  // namespace

StatusOr<MigDeviceParts> ParseMigDeviceName(std::string_view device) {
  const Status bad = InvalidArgumentError("'" + std::string(device) +
                                          "' is not one of tessera's MIG devices (gpu-<index>-mig-<profile>-<start>, "
                                          "e.g. gpu-1-mig-3g-40gb-4)");
  constexpr std::string_view kPrefix = "gpu-", kMig = "-mig-";
  if (!device.starts_with(kPrefix)) return bad;
  const size_t mig = device.find(kMig);
  const size_t last = device.rfind('-');
  if (mig == std::string_view::npos || last < mig + kMig.size()) return bad;
  MigDeviceParts parts;
  parts.gpu = SmallNumber(device.substr(kPrefix.size(), mig - kPrefix.size()), enforce::kMaxGpus);
  parts.start = SmallNumber(device.substr(last + 1), 8);
  parts.profile_label = std::string(device.substr(mig + kMig.size(), last - mig - kMig.size()));
  if (parts.gpu < 0 || parts.start < 0 || parts.profile_label.empty() ||
      ProfileLabel(parts.profile_label) != parts.profile_label) {
    return bad;
  }
  return parts;
}

}  // namespace tessera::k8s
