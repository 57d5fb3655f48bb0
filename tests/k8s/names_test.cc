// The Kubernetes integration's names: each DeviceClass name parses back to its kind, and names
// that are not tessera's do not parse; a MIG device's name parses back to its GPU, profile and start.
#include "tessera/integrations/k8s/names.h"

#include <gtest/gtest.h>

#include "tessera/core/gpu_model.h"

namespace tessera::k8s {
namespace {

TEST(K8sNames, EachDeviceClassNameParsesBackToItsKind) {
  for (DeviceClassKind kind : {DeviceClassKind::kWhole, DeviceClassKind::kShare, DeviceClassKind::kMig}) {
    std::string_view name = DeviceClassName(kind);
    EXPECT_TRUE(name.ends_with(std::string(".") + std::string(kDriverName))) << name;
    ASSERT_TRUE(ParseDeviceClassName(name).has_value()) << name;
    EXPECT_EQ(*ParseDeviceClassName(name), kind);
  }
  EXPECT_EQ(DeviceClassName(DeviceClassKind::kShare), "share.gpu.tessera.io");
}

TEST(K8sNames, OtherDriversClassesAreNotOurs) {
  EXPECT_FALSE(ParseDeviceClassName("gpu.nvidia.com").has_value());
  EXPECT_FALSE(ParseDeviceClassName("").has_value());
  EXPECT_FALSE(ParseDeviceClassName("share.gpu.tessera.io.evil").has_value());
}

// Every device name the publisher makes for every MIG model of the catalog parses back to the
// GPU, the profile (by its label: exactly one profile of the model has it) and the start.
TEST(K8sNames, EveryMigDeviceNameOfTheCatalogParsesBackToItsGpuProfileAndStart) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  int names = 0;
  for (size_t m = 0; m < catalog.size(); ++m) {
    const GpuModelInfo& info = catalog.info(GpuModelId(static_cast<uint32_t>(m)));
    if (!info.mig) continue;
    for (const MigProfile& p : info.mig->profiles) {
      int same_label = 0;
      for (const MigProfile& q : info.mig->profiles) same_label += ProfileLabel(q.name) == ProfileLabel(p.name);
      EXPECT_EQ(same_label, 1) << info.name << " " << p.name;
      for (int start : p.starts) {
        const std::string name = MigDeviceName(15, p.name, start);
        StatusOr<MigDeviceParts> parts = ParseMigDeviceName(name);
        ASSERT_TRUE(parts.ok()) << name << ": " << parts.status().ToString();
        EXPECT_EQ(*parts, (MigDeviceParts{.gpu = 15, .profile_label = ProfileLabel(p.name), .start = start})) << name;
        ++names;
      }
    }
  }
  EXPECT_GT(names, 50);
  EXPECT_EQ(MigDeviceName(1, "3g.40gb", 4), "gpu-1-mig-3g-40gb-4");
  EXPECT_EQ(*ParseMigDeviceName("gpu-0-mig-1g-10gb-me-6"),
            (MigDeviceParts{.gpu = 0, .profile_label = "1g-10gb-me", .start = 6}));
}

TEST(K8sNames, ABadMigDeviceNameIsInvalidArgumentNamingIt) {
  for (const char* bad : {"gpu-1-mig-3g-40gb", "gpu-1-mig--4", "gpu-16-mig-1g-10gb-0", "gpu-01-mig-1g-10gb-0",
                          "gpu-1-mig-1g-10gb-8", "gpu-1-mig-1g-10gb-04", "gpu-1-mig-1G-10gb-0", "gpu-1-mig-1g--10gb-0",
                          "gpu-1", "gpu-x-mig-1g-10gb-0", "nvidia-1-mig-1g-10gb-0", "gpu-1-mig-1g.10gb-0", ""}) {
    StatusOr<MigDeviceParts> parts = ParseMigDeviceName(bad);
    EXPECT_EQ(parts.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(parts.status().message(), "'" + std::string(bad) +
                                            "' is not one of tessera's MIG devices (gpu-<index>-mig-<profile>-<start>, "
                                            "e.g. gpu-1-mig-3g-40gb-4)");
  }
}

}  // namespace
}  // namespace tessera::k8s
