#include "tessera/config/quota_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::config {
namespace {

using ::testing::HasSubstr;
using sched::kNoTenant;
using sched::TenantIndex;
using sched::TenantTree;
using sched::kGpuMemoryDim;
using sched::kGpuMilliDim;
using sched::kUnlimited;

const GpuModelCatalog& Cat() { return GpuModelCatalog::Builtin(); }

TEST(QuotaFile, ParsesHierarchyAndDefaults) {
  const char* yaml = R"(
capacity: {gpu_milli: 16000}
tenants:
  - name: acme
    weight: 2
    guaranteed: {gpu_milli: 8000, gpus: {V100M16: 4}}
    limit: {gpu_milli: 12000}
  - name: vision
    parent: acme
    guaranteed: {gpu_milli: 4000}
  - name: solo
)";
  auto q = ParseQuotaYaml(yaml, "q.yaml", Cat());
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  const TenantTree& t = q->tenants;
  ASSERT_EQ(t.size(), 3);
  const TenantIndex acme = *t.Find("acme"), vision = *t.Find("vision"), solo = *t.Find("solo");
  EXPECT_EQ(t.parent(vision), acme);
  EXPECT_EQ(t.parent(acme), kNoTenant);
  EXPECT_EQ(t.path(vision), (std::vector<TenantIndex>{acme, vision}));
  EXPECT_DOUBLE_EQ(t.spec(acme).weight, 2.0);
  EXPECT_EQ(t.spec(acme).guaranteed[kGpuMilliDim], 8000);
  EXPECT_EQ(t.spec(acme).limit[kGpuMilliDim], 12000);
  EXPECT_EQ(t.spec(acme).limit[kGpuMemoryDim], kUnlimited);  // not given: unlimited
  EXPECT_EQ(t.spec(solo).guaranteed[kGpuMilliDim], 0);       // not given: nothing guaranteed
  ASSERT_EQ(t.space().models(), std::vector<std::string>{"V100M16"});
  EXPECT_EQ(t.spec(acme).guaranteed[*t.space().ModelDim("V100M16")], 4);
  ASSERT_TRUE(q->capacity.has_value());
  EXPECT_EQ((*q->capacity)[kGpuMilliDim], 16000);
  EXPECT_TRUE(t.is_leaf(vision));
  EXPECT_FALSE(t.is_leaf(acme));
}

TEST(QuotaFile, ListsEveryProblemWithFileAndLine) {
  const char* yaml = R"(tenants:
  - name: a
    parent: c
  - name: b
    guaranteed: {gpu_milli: -5}
  - name: c
    parent: a
  - name: d
    parent: nobody
  - name: e
    guaranteed: {gpu_milli: 9000}
    limit: {gpu_milli: 1000}
)";
  auto q = ParseQuotaYaml(yaml, "bad.yaml", Cat());
  ASSERT_FALSE(q.ok());
  const std::string msg(q.status().message());
  EXPECT_THAT(msg, HasSubstr("4 problem(s)"));
  EXPECT_THAT(msg, HasSubstr("bad.yaml:5: tenant 'b' guaranteed.gpu_milli: negative quantity -5"));
  EXPECT_THAT(msg, HasSubstr("cycle: a -> c -> a"));
  EXPECT_THAT(msg, HasSubstr("bad.yaml:8: tenant 'd': unknown parent 'nobody'"));
  EXPECT_THAT(msg, HasSubstr("bad.yaml:10: tenant 'e': guaranteed gpu_milli 9000 exceeds its limit 1000"));
}

TEST(QuotaFile, GuaranteeOverCapacityAndOverParent) {
  auto q = ParseQuotaYaml(R"(capacity: {gpu_milli: 10000}
tenants:
  - name: org
    guaranteed: {gpu_milli: 8000}
  - name: t1
    parent: org
    guaranteed: {gpu_milli: 6000}
  - name: t2
    parent: org
    guaranteed: {gpu_milli: 4000}
  - name: other
    guaranteed: {gpu_milli: 4000}
)", "cap.yaml", Cat());
  ASSERT_FALSE(q.ok());
  const std::string msg(q.status().message());
  EXPECT_THAT(msg, HasSubstr("tenant 'org': its children's guarantees add up to gpu_milli 10000, "
                             "more than its own guarantee 8000"));
  EXPECT_THAT(msg, HasSubstr("guarantees over capacity: the top-level tenants are guaranteed "
                             "gpu_milli 12000 but the cluster has 10000"));
}

TEST(QuotaFile, RejectsUnknownKeysModelsAndBadYaml) {
  auto a = ParseQuotaYaml("tenants:\n  - name: a\n    gurantee: {gpu_milli: 1}\n", "k.yaml", Cat());
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(std::string(a.status().message()), HasSubstr("k.yaml:3: tenant 'a': unknown key 'gurantee'"));
  auto b = ParseQuotaYaml("tenants:\n  - name: a\n    limit: {gpus: {Z9000: 1}}\n", "m.yaml", Cat());
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("unknown GPU model 'Z9000'"));
  auto c = ParseQuotaYaml("tenants: [\n", "y.yaml", Cat());
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("y.yaml:"));
  auto d = ParseQuotaYaml("tenants:\n  - name: a\n    weight: 0\n", "w.yaml", Cat());
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("weight must be a number in (0, 1e6]"));
  auto e = ParseQuotaYaml("tenants:\n  - name: a\n  - name: a\n", "dup.yaml", Cat());
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("dup.yaml:3: tenant 'a': defined twice"));
  auto f = ParseQuotaYaml("tenants:\n  - name: a\n    guaranteed: {gpu_milli: 1.5}\n", "f.yaml", Cat());
  ASSERT_FALSE(f.ok());
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("expected an integer, got '1.5'"));
  EXPECT_FALSE(ParseQuotaYaml("", "e.yaml", Cat()).ok());
  EXPECT_FALSE(ParseQuotaYaml("- 1\n- 2\n", "l.yaml", Cat()).ok());
}

}  // namespace
}  // namespace tessera::config
