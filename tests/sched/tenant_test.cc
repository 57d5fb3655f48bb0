#include "tessera/sched/tenant.h"

#include <gtest/gtest.h>

#include <vector>

namespace tessera::sched {
namespace {

TEST(TenantTree, CheckFitsAgainstALaterCapacity) {
  std::vector<TenantSpec> specs(2);
  specs[0].name = "a";
  specs[0].guaranteed[kGpuMilliDim] = 3000;
  specs[1].name = "b";
  specs[1].guaranteed[kGpuMilliDim] = 2000;
  auto tree = TenantTree::Create(specs, ResourceSpace());
  ASSERT_TRUE(tree.ok());
  Resources cap = Resources::Filled(kUnlimited);
  cap[kGpuMilliDim] = 5000;
  EXPECT_TRUE(tree->CheckFits(cap).ok());
  cap[kGpuMilliDim] = 4999;
  EXPECT_FALSE(tree->CheckFits(cap).ok());
}

}  // namespace
}  // namespace tessera::sched
