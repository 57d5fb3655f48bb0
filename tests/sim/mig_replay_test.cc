// The MIG replay through the placement engine (sim/mig_replay.h): same request stream as the
// standalone MIG simulation, engine placements that are valid and at least as good as it, and
// dynamic placement stranding fewer GPUs than the best static layout.
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/core/gpu_model.h"
#include "tessera/partition/mig_sim.h"
#include "tessera/sim/mig_replay.h"
#include "tessera/sim/trace.h"

namespace tessera::sim {
namespace {

using ::testing::HasSubstr;

const std::vector<PodRecord>& DefaultPods() {
  static const auto* pods = new std::vector<PodRecord>(*ReadPodList(
      std::string(TESSERA_SOURCE_DIR) + "/data/alibaba-gpu-2023/csv/openb_pod_list_default.csv",
      GpuModelCatalog::Builtin()));
  return *pods;
}

MigComparisonInput Input(const std::string& model, int gpus, std::vector<uint64_t> seeds,
                         std::vector<std::string> policies) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  MigComparisonInput in;
  in.model = *cat.Find(model);
  in.geometry = std::make_shared<const MigGeometry>(*cat.info(in.model).mig);
  in.gpus = gpus;
  in.pods = &DefaultPods();
  in.seeds = std::move(seeds);
  in.policies = std::move(policies);
  return in;
}

TEST(MigReplayTest, ArrivalsAreSeededAndReachTheTarget) {
  const MigComparisonInput in = Input("H100-80GB", 10, {}, {});
  const std::vector<int> base = MigProfilesOfPods(*in.geometry, DefaultPods());
  ASSERT_GT(base.size(), 3000u);  // the default list's 3,078 sharing tasks, all mappable
  const std::vector<int> a = MigArrivals(*in.geometry, base, 80, 42);
  EXPECT_EQ(a, MigArrivals(*in.geometry, base, 80, 42));
  EXPECT_NE(a, MigArrivals(*in.geometry, base, 80, 43));
  EXPECT_GE(a.size(), base.size());  // the list itself, shuffled, then more if needed
}

TEST(MigReplayTest, EngineMatchesOrBeatsTheStandaloneDynamicAndBeatsStatic) {
  auto runs = RunMigComparison(Input("H100-80GB", 100, {42, 43, 44, 45, 46}, {"fgd", "tessera", "firstfit"}));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 5u);
  for (const MigComparisonRun& r : *runs) {
    ASSERT_EQ(r.engine.size(), 3u);
    for (const MigReplayResult& e : r.engine) {
      EXPECT_EQ(e.capacity_slices, 800);
      EXPECT_EQ(e.requested_slices, r.standalone_dynamic.requested_slices) << "same request stream";
      EXPECT_LE(e.served_slices, e.capacity_slices);
      EXPECT_GT(e.served_slices, r.best_static.served_slices) << e.policy << " seed " << r.seed;
      EXPECT_NEAR(e.stranded_gpus, e.unserved_pct, 1e-9);  // 100 GPUs: one GPU = 1 %
    }
    // fgd and tessera place MIG requests by MIG fragmentation: never worse than mig_sim's placer.
    EXPECT_GE(r.engine[0].served_slices, r.standalone_dynamic.served_slices) << "seed " << r.seed;
    EXPECT_GE(r.engine[1].served_slices, r.standalone_dynamic.served_slices) << "seed " << r.seed;
  }
}

TEST(MigReplayTest, SmallGeometryExampleServesWhatStaticCannot) {
  // A30 (4 memory slices): the replay uses the catalog's rules for another geometry too.
  auto runs = RunMigComparison(Input("A30-24GB", 16, {42, 43}, {"tessera"}));
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  for (const MigComparisonRun& r : *runs) {
    EXPECT_EQ(r.engine[0].capacity_slices, 64);
    EXPECT_GT(r.engine[0].served_slices, r.best_static.served_slices);
    EXPECT_GT(r.engine[0].gpus_with_instances, 0);
  }
}

TEST(MigReplayTest, BadInputIsNamed) {
  MigComparisonInput in = Input("H100-80GB", 4, {42}, {"nosuch"});
  auto unknown = RunMigComparison(in);
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("nosuch"));

  std::vector<PodRecord> whole_only;
  for (const PodRecord& p : DefaultPods()) {
    if (!p.request.IsSharing()) whole_only.push_back(p);
  }
  in = Input("H100-80GB", 4, {42}, {"fgd"});
  in.pods = &whole_only;
  auto none = RunMigComparison(in);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("no GPU-sharing tasks"));

  in = Input("H100-80GB", 0, {42}, {"fgd"});
  EXPECT_FALSE(RunMigComparison(in).ok());
}

}  // namespace
}  // namespace tessera::sim
