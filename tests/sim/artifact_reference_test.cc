#include "tessera/sim/artifact_reference.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "tessera/sim/sweep.h"
#include "tests/testing/builders.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string BundledPath() { return testing::DataPath("alibaba-gpu-2023/expected/analysis_allo_discrete.csv"); }

TEST(ArtifactReferenceTest, PolicyNames) {
  EXPECT_EQ(PolicyFromArtifactName("01-Random"), "random");
  EXPECT_EQ(PolicyFromArtifactName("02-DotProd"), "dotproduct");
  EXPECT_EQ(PolicyFromArtifactName("03-GpuClustering"), "gpuclustering");
  EXPECT_EQ(PolicyFromArtifactName("04-GpuPacking"), "gpupacking");
  EXPECT_EQ(PolicyFromArtifactName("05-BestFit"), "bestfit");
  EXPECT_EQ(PolicyFromArtifactName("06-FGD"), "fgd");
  EXPECT_EQ(PolicyFromArtifactName("07-Something"), "");
  EXPECT_EQ(PolicyFromArtifactName("fgd"), "");
  EXPECT_EQ(PolicyFromArtifactName(""), "");
}

// The bundled file read with a naive splitter: (workload, tessera policy) -> 100 - allocation
// at columns "100" and "130", one per seed.
std::map<std::pair<std::string, std::string>, std::pair<std::vector<double>, std::vector<double>>> Independent() {
  const std::string text = testing::ReadTextFile(BundledPath());
  EXPECT_EQ(text.find('"'), std::string::npos);
  std::vector<std::string> lines = testing::SplitLines(text);
  std::map<std::pair<std::string, std::string>, std::pair<std::vector<double>, std::vector<double>>> out;
  if (lines.empty()) return out;
  std::vector<std::string> header = testing::SplitCommas(lines[0]);
  auto col = [&](const std::string& n) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), n) - header.begin());
  };
  const size_t wl = col("workload"), pol = col("sc_policy"), c100 = col("100"), c130 = col("130");
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> f = testing::SplitCommas(lines[i]);
    std::string p = f[pol];
    // 06-FGD -> fgd etc., spelled out here rather than via PolicyFromArtifactName.
    static const std::map<std::string, std::string> names = {
        {"01-Random", "random"},     {"02-DotProd", "dotproduct"}, {"03-GpuClustering", "gpuclustering"},
        {"04-GpuPacking", "gpupacking"}, {"05-BestFit", "bestfit"}, {"06-FGD", "fgd"}};
    auto it = names.find(p);
    if (it == names.end()) continue;
    auto& e = out[{f[wl], it->second}];
    e.first.push_back(100.0 - std::stod(f[c100]));
    e.second.push_back(100.0 - std::stod(f[c130]));
  }
  return out;
}

TEST(ArtifactReferenceTest, LoadsTheBundledResults) {
  auto ref = LoadArtifactReference(BundledPath());
  ASSERT_TRUE(ref.ok()) << ref.status().ToString();
  EXPECT_EQ(ref->entries().size(), 17u * 6u);
  std::set<std::string> workloads;
  for (const auto& [key, e] : ref->entries()) {
    workloads.insert(key.first);
    EXPECT_EQ(e.workload, key.first);
    EXPECT_EQ(e.policy, key.second);
    EXPECT_EQ(e.unallocated_at_100.size(), 10u) << key.first << "/" << key.second;
    EXPECT_EQ(e.unallocated_at_130.size(), 10u) << key.first << "/" << key.second;
  }
  EXPECT_EQ(workloads.size(), 17u);
  EXPECT_TRUE(workloads.count("openb_pod_list_default"));
  EXPECT_TRUE(workloads.count("openb_pod_list_multigpu50"));

  const auto independent = Independent();
  ASSERT_EQ(independent.size(), ref->entries().size());
  for (const auto& [key, values] : independent) {
    const ArtifactEntry* e = ref->Find(key.first, key.second);
    ASSERT_NE(e, nullptr) << key.first << "/" << key.second;
    EXPECT_EQ(e->unallocated_at_100, values.first);
    EXPECT_EQ(e->unallocated_at_130, values.second);
    EXPECT_DOUBLE_EQ(e->MedianUnallocatedAt(100), Median(values.first));
    EXPECT_DOUBLE_EQ(e->MedianUnallocatedAt(130), Median(values.second));
    EXPECT_DOUBLE_EQ(e->MinUnallocatedAt100(), *std::min_element(values.first.begin(), values.first.end()));
    EXPECT_DOUBLE_EQ(e->MaxUnallocatedAt100(), *std::max_element(values.first.begin(), values.first.end()));
  }

  const ArtifactEntry* fgd = ref->Find("openb_pod_list_default", "fgd");
  ASSERT_NE(fgd, nullptr);
  EXPECT_NEAR(fgd->MedianUnallocatedAt(100), 4.77, 0.005);
  EXPECT_EQ(ref->Find("openb_pod_list_default", "firstfit"), nullptr);
  EXPECT_EQ(ref->Find("no_such_list", "fgd"), nullptr);
}

TEST(ArtifactReferenceTest, Tolerance) {
  ArtifactEntry narrow;
  narrow.unallocated_at_100 = {4.6, 4.8, 4.9};
  EXPECT_DOUBLE_EQ(ToleranceAt100(narrow), 0.3);
  ArtifactEntry wide;
  wide.unallocated_at_100 = {9.0, 9.5, 9.66};
  EXPECT_NEAR(ToleranceAt100(wide), 0.33, 1e-12);

  auto ref = LoadArtifactReference(BundledPath());
  ASSERT_TRUE(ref.ok());
  EXPECT_DOUBLE_EQ(ToleranceAt100(*ref->Find("openb_pod_list_default", "fgd")), 0.3);
  EXPECT_NEAR(ToleranceAt100(*ref->Find("openb_pod_list_default", "dotproduct")), 0.33, 1e-9);
}

TEST(ArtifactReferenceTest, BadFiles) {
  testing::TempDir dir;
  auto missing = LoadArtifactReference(dir.File("none.csv"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);

  const std::string no_cols = dir.File("cols.csv");
  testing::WriteTextFile(no_cols, "workload,sc_policy,100\nw,06-FGD,95\n");
  auto c = LoadArtifactReference(no_cols);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(), StartsWith(no_cols + ":1:1: "));

  const std::string nan = dir.File("nan.csv");
  testing::WriteTextFile(nan, "workload,sc_policy,100,130\nw,06-FGD,95,96\nw,06-FGD,9x,96\n");
  auto n = LoadArtifactReference(nan);
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(n.status().message(), StartsWith(nan + ":3:"));
  EXPECT_THAT(n.status().message(), HasSubstr("'9x'"));

  const std::string unknown = dir.File("unknown.csv");
  testing::WriteTextFile(unknown, "workload,sc_policy,100,130\nw,99-Other,95,96\n");
  auto u = LoadArtifactReference(unknown);
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), StatusCode::kInvalidArgument);

  const std::string good = dir.File("good.csv");
  testing::WriteTextFile(good, "workload,sc_policy,100,130\nw,06-FGD,95,96\nw,06-FGD,93,97\nw,99-Other,1,1\n");
  auto g = LoadArtifactReference(good);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->entries().size(), 1u);
  EXPECT_DOUBLE_EQ(g->Find("w", "fgd")->MedianUnallocatedAt(100), 6.0);
  EXPECT_DOUBLE_EQ(g->Find("w", "fgd")->MedianUnallocatedAt(130), 3.5);
}

}  // namespace
}  // namespace tessera::sim
