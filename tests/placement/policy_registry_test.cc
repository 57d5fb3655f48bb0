#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/placement/fragmentation.h"
#include "tessera/placement/policy.h"
#include "tests/testing/builders.h"

namespace tessera::placement {
namespace {

using ::tessera::testing::Share;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(PolicyRegistryTest, PolicyNamesListTheBuiltInPoliciesInReportOrder) {
  // The nine classic policies in this relative order (other policies may be listed around
  // them), each name once.
  const std::vector<std::string> classic = {"random", "dotproduct", "gpuclustering", "gpupacking", "bestfit",
                                            "fgd",    "firstfit",   "nextfit",       "worstfit"};
  const std::vector<std::string>& names = PolicyNames();
  auto pos = names.begin();
  for (const std::string& c : classic) {
    pos = std::find(pos, names.end(), c);
    ASSERT_NE(pos, names.end()) << c << " missing or out of order";
  }
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "duplicate name";
  EXPECT_EQ(&PolicyNames(), &PolicyNames());  // one list
}

TEST(PolicyRegistryTest, ArtifactPolicyNamesAreTheFirstSix) {
  EXPECT_THAT(ArtifactPolicyNames(),
              ElementsAre("random", "dotproduct", "gpuclustering", "gpupacking", "bestfit", "fgd"));
  for (const std::string& n : ArtifactPolicyNames()) {
    EXPECT_NE(std::find(PolicyNames().begin(), PolicyNames().end(), n), PolicyNames().end()) << n;
  }
}

TEST(PolicyRegistryTest, MakesEveryNamedPolicy) {
  const TargetWorkload w = TargetWorkload::FromTasks(std::vector<TaskRequest>{Share(500)});
  for (const std::string& name : PolicyNames()) {
    StatusOr<std::unique_ptr<PlacementPolicy>> p = MakePolicy(name, {.target_workload = &w});
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    ASSERT_NE(*p, nullptr);
    EXPECT_EQ((*p)->name(), name);
  }
}

TEST(PolicyRegistryTest, ClassicPoliciesDoNotNeedTheTargetWorkload) {
  for (const char* name : {"random", "dotproduct", "gpuclustering", "gpupacking", "bestfit", "firstfit",
                           "nextfit", "worstfit"}) {
    StatusOr<std::unique_ptr<PlacementPolicy>> p = MakePolicy(name, {});
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    EXPECT_EQ((*p)->name(), name);
  }
}

TEST(PolicyRegistryTest, UnknownNameListsKnownPolicies) {
  StatusOr<std::unique_ptr<PlacementPolicy>> p = MakePolicy("tetris", {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("'tetris'"));
  std::string known;
  for (const std::string& n : PolicyNames()) known += (known.empty() ? "" : ", ") + n;
  EXPECT_THAT(p.status().message(), HasSubstr("(known: " + known + ")"));
  EXPECT_THAT(p.status().message(), HasSubstr("bestfit, fgd, firstfit, nextfit, worstfit"));
  // Names are case-sensitive and exact.
  EXPECT_EQ(MakePolicy("FGD", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakePolicy("", {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(MakePolicy("bestfit ", {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(PolicyRegistryTest, FgdWithoutTargetWorkloadIsInvalid) {
  StatusOr<std::unique_ptr<PlacementPolicy>> p = MakePolicy("fgd", {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), HasSubstr("fgd"));
  EXPECT_THAT(p.status().message(), HasSubstr("target workload"));
  const TargetWorkload empty;
  EXPECT_EQ(MakePolicy("fgd", {.target_workload = &empty}).status().code(), StatusCode::kInvalidArgument);
}

TEST(PolicyRegistryTest, NodeRankDefaultsToIndex) {
  PlacementContext ctx;
  EXPECT_EQ(NodeRank(ctx, NodeIndex{0}), 0u);
  EXPECT_EQ(NodeRank(ctx, NodeIndex{5}), 5u);
  const std::vector<uint32_t> rank{2, 0, 1};
  ctx.node_rank = rank;
  EXPECT_EQ(NodeRank(ctx, NodeIndex{0}), 2u);
  EXPECT_EQ(NodeRank(ctx, NodeIndex{1}), 0u);
  EXPECT_EQ(NodeRank(ctx, NodeIndex{2}), 1u);
}

}  // namespace
}  // namespace tessera::placement
