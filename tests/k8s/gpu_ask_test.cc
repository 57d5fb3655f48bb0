// The pod's GPU ask (gpu.tessera.io/* annotations) and Kubernetes quantities: every mode, the
// defaults, and each refusal naming its annotation.
#include "tessera/integrations/k8s/gpu_ask.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::k8s {
namespace {

using ::testing::HasSubstr;
using Annotations = std::map<std::string, std::string, std::less<>>;

GpuAsk Ask(const Annotations& a) {
  StatusOr<std::optional<GpuAsk>> r = ParseGpuAsk(a);
  EXPECT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r.ok() && r->has_value());
  return r.ok() && r->has_value() ? **r : GpuAsk{};
}

std::string Refusal(const Annotations& a) {
  StatusOr<std::optional<GpuAsk>> r = ParseGpuAsk(a);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : std::string(r.status().message());
}

TEST(GpuAsk, NoAnnotationIsNoAsk) {
  StatusOr<std::optional<GpuAsk>> r = ParseGpuAsk({{"app", "x"}});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
}

TEST(GpuAsk, ShareWithMemory) {
  EXPECT_EQ(Ask({{"gpu.tessera.io/compute", "300"}, {"gpu.tessera.io/memory", "10Gi"}}),
            (GpuAsk{.mode = AskMode::kShare, .count = 1, .compute_milli = 300, .memory_mib = 10240}));
}

TEST(GpuAsk, WholeGpusByCountAndDefaults) {
  EXPECT_EQ(Ask({{"gpu.tessera.io/count", "2"}}), (GpuAsk{.mode = AskMode::kWhole, .count = 2, .compute_milli = 1000}));
  EXPECT_EQ(Ask({{"gpu.tessera.io/mode", "whole"}}), (GpuAsk{.mode = AskMode::kWhole, .count = 1, .compute_milli = 1000}));
  EXPECT_EQ(Ask({{"gpu.tessera.io/compute", "1000"}}).mode, AskMode::kWhole);
  EXPECT_EQ(Ask({{"gpu.tessera.io/count", "1"}, {"gpu.tessera.io/model", "H100-80GB"}}).model, "H100-80GB");
}

TEST(GpuAsk, MigByProfile) {
  GpuAsk a = Ask({{"gpu.tessera.io/mig-profile", "3g.40gb"}});
  EXPECT_EQ(a.mode, AskMode::kMig);
  EXPECT_EQ(a.mig_profile, "3g.40gb");
}

TEST(GpuAsk, RefusalsNameTheAnnotation) {
  EXPECT_EQ(Refusal({{"gpu.tessera.io/compute", "1500"}}),
            "gpu.tessera.io/compute: 1500 is out of range 1..1000 (milli-GPU)");
  EXPECT_THAT(Refusal({{"gpu.tessera.io/compute", "half"}}), HasSubstr("gpu.tessera.io/compute: 'half' is not an integer"));
  EXPECT_THAT(Refusal({{"gpu.tessera.io/mode", "mps"}}), HasSubstr("gpu.tessera.io/mode: 'mps' is not whole, share or mig"));
  EXPECT_THAT(Refusal({{"gpu.tessera.io/mode", "share"}}), HasSubstr("gpu.tessera.io/compute: required with mode share"));
  EXPECT_THAT(Refusal({{"gpu.tessera.io/mode", "mig"}}), HasSubstr("gpu.tessera.io/mig-profile: required"));
  EXPECT_THAT(Refusal({{"gpu.tessera.io/compute", "300"}, {"gpu.tessera.io/count", "2"}}),
              HasSubstr("gpu.tessera.io/count: 2 GPUs: only whole GPUs"));
  EXPECT_THAT(Refusal({{"gpu.tessera.io/compute", "300"}, {"gpu.tessera.io/memory", "10GB"}}),
              HasSubstr("gpu.tessera.io/memory: '10GB': unknown suffix 'GB'"));
  EXPECT_THAT(Refusal({{"gpu.tessera.io/mig-profile", "1g.10gb"}, {"gpu.tessera.io/compute", "100"}}),
              HasSubstr("not with mode mig"));
}

TEST(Quantity, KubernetesForms) {
  EXPECT_EQ(*ParseQuantityBytes("10Gi"), int64_t{10} << 30);
  EXPECT_EQ(*ParseQuantityBytes("512Mi"), int64_t{512} << 20);
  EXPECT_EQ(*ParseQuantityBytes("1.5G"), 1'500'000'000);
  EXPECT_EQ(*ParseQuantityBytes("128974848"), 128974848);
  EXPECT_EQ(*ParseQuantityBytes("129e6"), 129'000'000);
  EXPECT_EQ(*ParseQuantityBytes("16k"), 16'000);
  for (const char* bad : {"", "Gi", "-1Gi", "1..5G", "10m", "1e99", "99999999999E"}) {
    EXPECT_FALSE(ParseQuantityBytes(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace tessera::k8s
