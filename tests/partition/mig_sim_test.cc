// MIG serving: fraction -> profile mapping, static and dynamic serving on small cases.
#include "tessera/partition/mig_sim.h"

#include <gtest/gtest.h>

namespace tessera::partition {
namespace {

const MigGeometry& H100() {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  return *cat.info(*cat.Find("H100-80GB")).mig;
}

int P(const char* name) { return *FindProfileIndex(H100(), name); }

TEST(MigSimTest, FractionMapsToTheSmallestCoveringProfile) {
  const MigGeometry& g = H100();
  auto name = [&](int64_t milli) { return g.profiles[static_cast<size_t>(*ProfileForFraction(g, GpuMilli{milli}))].name; };
  EXPECT_EQ(name(100), "1g.10gb");   // 1/7 compute, 1/8 memory cover 0.1
  EXPECT_EQ(name(130), "1g.20gb");   // 1/8 memory = 0.125 < 0.13 -> 2 memory slices; 1/7 compute ok
  EXPECT_EQ(name(200), "2g.20gb");   // 2/7 compute
  EXPECT_EQ(name(460), "4g.40gb");   // 3/7 = 0.43 < 0.46 compute
  EXPECT_EQ(name(810), "7g.80gb");
  EXPECT_FALSE(ProfileForFraction(g, GpuMilli{0}).ok());
}

TEST(MigSimTest, HeaderWorkedExample) {
  const MigGeometry& g = H100();
  const std::vector<int> reqs = {P("1g.10gb"), P("3g.40gb"), P("3g.40gb")};
  const MigSimResult dyn = SimulateDynamicMig(g, 1, reqs);
  EXPECT_EQ(dyn.requested_slices, 9);  // the third request arrives: 1 + 4 < 8 before it
  EXPECT_EQ(dyn.served_slices, 5);
  const MigSimResult whole = SimulateStaticMig(g, 1, *ParseLayout(g, "7g.80gb@0"), reqs);
  EXPECT_EQ(whole.served_slices, 1);  // the 1g.10gb takes the only (7g) instance
  const MigSimResult two = SimulateStaticMig(g, 1, *ParseLayout(g, "3g.40gb@0,3g.40gb@4"), reqs);
  EXPECT_EQ(two.served_slices, 5);    // 1g in a 3g instance, one 3g served
  EXPECT_NEAR(two.unserved_pct, 100.0 * 3 / 8, 1e-9);
}

TEST(MigSimTest, DynamicNeverServesLessThanItsRequestsAllowAndStopsAtCapacity) {
  const MigGeometry& g = H100();
  std::vector<int> reqs(100, P("1g.10gb"));
  const MigSimResult dyn = SimulateDynamicMig(g, 2, reqs);
  EXPECT_EQ(dyn.capacity_slices, 16);
  EXPECT_EQ(dyn.requested_slices, 16);
  EXPECT_EQ(dyn.served_slices, 14);  // 7 x 1g.10gb per GPU (no 1g.10gb start at slice 7)
  const MigSimResult best = BestStaticMig(g, 2, reqs);
  EXPECT_EQ(best.served_slices, 14);
}

}  // namespace
}  // namespace tessera::partition
