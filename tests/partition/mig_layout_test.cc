// MIG layout rules and enumeration on the catalog's real models.
#include "tessera/partition/mig_layout.h"

#include <gtest/gtest.h>

namespace tessera::partition {
namespace {

const MigGeometry& Geometry(const char* model) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  return *cat.info(*cat.Find(model)).mig;
}

Status Check(const char* model, const char* text) {
  const MigGeometry& g = Geometry(model);
  auto layout = ParseLayout(g, text);
  if (!layout.ok()) return layout.status();
  return ValidateLayout(g, *layout);
}

TEST(MigLayoutTest, HeaderWorkedExamples) {
  EXPECT_TRUE(Check("H100-80GB", "3g.40gb@0,3g.40gb@4").ok());
  EXPECT_TRUE(Check("H100-80GB", "4g.40gb@0,3g.40gb@4").ok());
  EXPECT_TRUE(Check("H100-80GB", "2g.20gb@0,2g.20gb@2,2g.20gb@4,1g.10gb@6").ok());
  Status s = Check("H100-80GB", "3g.40gb@0,4g.40gb@4");
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("rule 2"), std::string::npos) << s.message();
  s = Check("H100-80GB", "1g.10gb@0,1g.20gb@0");
  EXPECT_NE(s.message().find("rule 3"), std::string::npos) << s.message();
}

TEST(MigLayoutTest, MaxCountAndInstancesAndComputeSlices) {
  // 4 x 1g.20gb is the max; a 5th cannot be placed anyway (only 4 starts), so use 2g.20gb x 4.
  Status s = Check("H100-80GB", "2g.20gb@0,2g.20gb@2,2g.20gb@4,2g.20gb@6");
  EXPECT_NE(s.message().find("rule 2"), std::string::npos) << s.message();  // 2g may not start at 6
  s = Check("H100-80GB", "3g.40gb@0,3g.40gb@4,1g.10gb@4");
  EXPECT_NE(s.message().find("rule 3"), std::string::npos) << s.message();
  // 8 x 1g.10gb would need start 7, which 1g.10gb does not have -> rule 2.
  s = Check("H100-80GB", "1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6,1g.10gb@7");
  EXPECT_NE(s.message().find("rule 2"), std::string::npos) << s.message();
  // 4g + 2g + 1g = 7 compute slices is fine; 4g + 3g@4 fine; 4g + 2g@4 + 2g@6? 2g cannot start 6.
  EXPECT_TRUE(Check("H100-80GB", "4g.40gb@0,2g.20gb@4,1g.10gb@6").ok());
  // Compute: 3g + 2g + 2g + ... A30 4 slices: 2g.12gb@0 + 2g.12gb@2 = 4 ok.
  EXPECT_TRUE(Check("A30-24GB", "2g.12gb@0,2g.12gb@2").ok());
  s = Check("A30-24GB", "4g.24gb@0,1g.6gb@3");
  EXPECT_NE(s.message().find("rule 3"), std::string::npos) << s.message();
}

TEST(MigLayoutTest, ParseErrorsNameTheItem) {
  const MigGeometry& g = Geometry("H100-80GB");
  auto bad = ParseLayout(g, "5g.50gb@0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("unknown MIG profile '5g.50gb'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("3g.40gb"), std::string::npos);  // lists the model's profiles
  EXPECT_FALSE(ParseLayout(g, "3g.40gb").ok());
  EXPECT_FALSE(ParseLayout(g, "3g.40gb@x").ok());
  EXPECT_FALSE(ParseLayout(g, "3g.40gb@0,").ok());
  EXPECT_TRUE(ParseLayout(g, "").ok());
}

TEST(MigLayoutTest, FormatAndDiagram) {
  const MigGeometry& g = Geometry("H100-80GB");
  auto l = ParseLayout(g, "1g.10gb@4,3g.40gb@0");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(FormatLayout(g, *l), "3g.40gb@0,1g.10gb@4");
  EXPECT_EQ(SlotDiagram(g, *l), "[0-3 3g.40gb][4 1g.10gb][5 -][6 -][7 -]");
}

TEST(MigLayoutTest, MaximalLayoutsAreValidMaximalAndDistinct) {
  for (const char* model : {"A30-24GB", "A100-40GB", "H100-80GB", "H200-141GB"}) {
    const MigGeometry& g = Geometry(model);
    const auto layouts = EnumerateMaximalLayouts(g);
    ASSERT_FALSE(layouts.empty()) << model;
    for (const MigLayout& l : layouts) {
      EXPECT_TRUE(ValidateLayout(g, l).ok()) << model << " " << FormatLayout(g, l);
      for (int p = 0; p < static_cast<int>(g.profiles.size()); ++p) {
        if (g.profiles[static_cast<size_t>(p)].name.find("+me") != std::string::npos) continue;
        for (int s : g.profiles[static_cast<size_t>(p)].starts) {
          EXPECT_FALSE(CanAdd(g, l, {p, s})) << model << " " << FormatLayout(g, l) << " + " << p << "@" << s;
        }
      }
    }
    for (size_t i = 1; i < layouts.size(); ++i) EXPECT_NE(layouts[i - 1], layouts[i]);
  }
}

TEST(MigLayoutTest, KnownH100LayoutsAreEnumerated) {
  const MigGeometry& g = Geometry("H100-80GB");
  std::vector<std::string> text;
  for (const MigLayout& l : EnumerateMaximalLayouts(g)) text.push_back(FormatLayout(g, l));
  auto has = [&](const std::string& s) { return std::find(text.begin(), text.end(), s) != text.end(); };
  EXPECT_TRUE(has("7g.80gb@0"));
  EXPECT_TRUE(has("3g.40gb@0,3g.40gb@4"));
  EXPECT_TRUE(has("4g.40gb@0,3g.40gb@4"));
  EXPECT_TRUE(has("1g.10gb@0,1g.10gb@1,1g.10gb@2,1g.10gb@3,1g.10gb@4,1g.10gb@5,1g.10gb@6"));
  EXPECT_FALSE(has("3g.40gb@0"));  // not maximal
}

TEST(MigLayoutTest, LayoutsContainingKeepTheFixedInstances) {
  const MigGeometry& g = Geometry("H100-80GB");
  auto fixed = ParseLayout(g, "3g.40gb@4");
  ASSERT_TRUE(fixed.ok());
  const auto all = EnumerateLayoutsContaining(g, *fixed);
  ASSERT_FALSE(all.empty());
  for (const MigLayout& l : all) {
    EXPECT_TRUE(ValidateLayout(g, l).ok());
    EXPECT_NE(std::find(l.begin(), l.end(), (*fixed)[0]), l.end());
  }
  EXPECT_NE(std::find(all.begin(), all.end(), *fixed), all.end());  // the fixed layout itself
}

}  // namespace
}  // namespace tessera::partition
