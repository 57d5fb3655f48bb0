// The usage batch of the wire contract (tessera/api/usage_wire.h).
#include "tessera/api/usage_wire.h"

#include <gtest/gtest.h>

namespace tessera::api {
namespace {

UsageSample Sample() {
  return {.tenant = "ml",
          .workload = "17",
          .gpu = "0",
          .model = "A100-80GB",
          .partition = "share",
          .seq = 4,
          .start_s = 1793491200,
          .end_s = 1793491260,
          .gpu_milli_s_allocated = 30000,
          .gpu_milli_s_used = 12000,
          .memory_mib_s = 491520,
          .peak_memory_mib = 8192,
          .kernel_launches = 911,
          .bytes_transferred = -1};
}

TEST(UsageWireTest, BatchRoundTrips) {
  UsageSample second = Sample();
  second.seq = 5;
  second.start_s = second.end_s;
  second.end_s += 60;
  second.bytes_transferred = 1 << 20;
  const std::string body = EncodeUsageBatch({EncodeUsageSample(Sample()), EncodeUsageSample(second)});
  StatusOr<std::vector<UsageItem>> items = DecodeUsageBatch(body, nullptr);
  ASSERT_TRUE(items.ok()) << items.status().message();
  ASSERT_EQ(items->size(), 2u);
  EXPECT_TRUE((*items)[0].error.ok()) << (*items)[0].error.message();
  EXPECT_EQ((*items)[0].sample, Sample());
  EXPECT_EQ((*items)[1].index, 1u);
  EXPECT_EQ((*items)[1].sample, second);
  EXPECT_EQ(EncodeUsageBatch({}), R"({"samples":[]})");
}

TEST(UsageWireTest, ABadSampleNamesItsFieldAndLeavesTheOthers) {
  UsageSample bad = Sample();
  bad.end_s = bad.start_s;
  const std::string body = EncodeUsageBatch({EncodeUsageSample(bad), EncodeUsageSample(Sample())});
  StatusOr<std::vector<UsageItem>> items = DecodeUsageBatch(body, nullptr);
  ASSERT_TRUE(items.ok());
  EXPECT_EQ((*items)[0].error.message(), "samples[0].end: 1793491200 is not after start 1793491200");
  EXPECT_EQ((*items)[0].field, "samples[0].end");
  EXPECT_TRUE((*items)[1].error.ok());
  items = DecodeUsageBatch(R"({"samples": [{"tenant": "ml"}]})", nullptr);
  ASSERT_TRUE(items.ok());
  EXPECT_EQ((*items)[0].field, "samples[0].workload");
}

// Documented: a sample's unknown fields are ignored (a newer agent's billed samples are not
// lost); the batch's own are not.
TEST(UsageWireTest, UnknownSampleFieldsAreIgnoredUnknownBatchFieldsAreNot) {
  std::string sample = EncodeUsageSample(Sample());
  sample.insert(1, R"("gpu_temperature_c":71,)");
  StatusOr<std::vector<UsageItem>> items = DecodeUsageBatch(EncodeUsageBatch({sample}), nullptr);
  ASSERT_TRUE(items.ok());
  EXPECT_TRUE((*items)[0].error.ok()) << (*items)[0].error.message();
  EXPECT_EQ((*items)[0].sample, Sample());
  std::string field;
  items = DecodeUsageBatch(R"({"samples": [], "node": "n1"})", &field);
  ASSERT_FALSE(items.ok());
  EXPECT_EQ(field, "node");
}

// NVML's figures (issue 32): carried when the agent has them, left out (not zero) when not.
TEST(UsageWireTest, TheNvmlFiguresRoundTripAndAreLeftOutWhenAbsent) {
  UsageSample with = Sample();
  with.nvml_used_milli = 550;
  with.nvml_memory_mib = 8706;
  StatusOr<std::vector<UsageItem>> items =
      DecodeUsageBatch(EncodeUsageBatch({EncodeUsageSample(with), EncodeUsageSample(Sample())}), nullptr);
  ASSERT_TRUE(items.ok()) << items.status().message();
  ASSERT_TRUE((*items)[0].error.ok()) << (*items)[0].error.message();
  EXPECT_EQ((*items)[0].sample, with);
  EXPECT_EQ((*items)[0].sample.nvml_used_milli, 550);
  EXPECT_EQ((*items)[1].sample, Sample());
  EXPECT_FALSE((*items)[1].sample.nvml_used_milli.has_value());
  EXPECT_FALSE((*items)[1].sample.nvml_memory_mib.has_value());
  EXPECT_EQ(EncodeUsageSample(Sample()).find("nvml"), std::string::npos);
  UsageSample zero = Sample();
  zero.nvml_used_milli = 0;  // observed idle: kept, and distinct from absent
  items = DecodeUsageBatch(EncodeUsageBatch({EncodeUsageSample(zero)}), nullptr);
  ASSERT_TRUE(items.ok());
  EXPECT_EQ((*items)[0].sample.nvml_used_milli, 0);
}

TEST(UsageWireTest, ABadNvmlFigureIsRefusedNamingItsField) {
  auto refusal = [](const std::string& field, const std::string& value) -> UsageItem {
    std::string sample = EncodeUsageSample(Sample());
    sample.insert(1, "\"" + field + "\":" + value + ",");
    StatusOr<std::vector<UsageItem>> items = DecodeUsageBatch(EncodeUsageBatch({sample}), nullptr);
    EXPECT_TRUE(items.ok());
    return items.ok() ? (*items)[0] : UsageItem{};
  };
  UsageItem bad = refusal("nvml_used_milli", "1001");
  EXPECT_EQ(bad.field, "samples[0].nvml_used_milli");
  EXPECT_EQ(bad.error.message(), "samples[0].nvml_used_milli: 1001 is out of range 0..1000");
  bad = refusal("nvml_used_milli", "\"410\"");
  EXPECT_EQ(bad.field, "samples[0].nvml_used_milli");
  EXPECT_EQ(bad.error.code(), StatusCode::kInvalidArgument);
  bad = refusal("nvml_memory_mib", "-1");
  EXPECT_EQ(bad.field, "samples[0].nvml_memory_mib");
  bad = refusal("nvml_memory_mib", "null");
  EXPECT_EQ(bad.field, "samples[0].nvml_memory_mib");
  EXPECT_EQ(bad.error.message(), "samples[0].nvml_memory_mib: expected an integer, got null");
}

TEST(UsageWireTest, TooManySamplesIsResourceExhausted) {
  std::string field;
  StatusOr<std::vector<UsageItem>> items =
      DecodeUsageBatch(EncodeUsageBatch({EncodeUsageSample(Sample()), EncodeUsageSample(Sample())}), &field, 1);
  ASSERT_FALSE(items.ok());
  EXPECT_EQ(items.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(field, "samples");
}

}  // namespace
}  // namespace tessera::api
