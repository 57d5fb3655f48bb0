// The Kubernetes integration's names: each DeviceClass name parses back to its kind, and names
// that are not tessera's do not parse.
#include "tessera/integrations/k8s/names.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tessera::k8s
