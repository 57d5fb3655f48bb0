// The MIG plan codec: what EncodeMigPlanJson writes DecodeMigPlanJson reads back, and every bad
// field is named (with line:column for text that is not JSON).
#include "tessera/partition/mig_plan_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::partition {
namespace {

using ::testing::HasSubstr;

const GpuModelCatalog& Cat() { return GpuModelCatalog::Builtin(); }
GpuModelId Id(const char* name) { return *Cat().Find(name); }
const MigGeometry& H100() { return *Cat().info(Id("H100-80GB")).mig; }

TEST(MigPlanJsonTest, PlannedStepsRoundTrip) {
  StatusOr<MigPlan> plan = PlanMig(H100(), {MigGpuState{}}, {{"1g.10gb", 2}, {"3g.40gb", 2}});
  ASSERT_TRUE(plan.ok());
  const std::string json = EncodeMigPlanJson(H100(), "H100-80GB", *plan);
  EXPECT_THAT(json, HasSubstr("\"satisfied_memory_slices\": 8"));
  StatusOr<DecodedMigPlan> back = DecodeMigPlanJson(Cat(), Id("H100-80GB"), json, "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->model, "H100-80GB");
  ASSERT_EQ(back->steps.size(), plan->steps.size());
  for (size_t i = 0; i < back->steps.size(); ++i) {
    EXPECT_EQ(back->steps[i].gpu, plan->steps[i].gpu);
    EXPECT_EQ(back->steps[i].instance, plan->steps[i].instance);
  }
  // The NVML name of the model is the same model.
  EXPECT_TRUE(DecodeMigPlanJson(Cat(), Id("NVIDIA H100 80GB HBM3"), json, "plan.json").ok());
}

TEST(MigPlanJsonTest, ErrorsNameTheField) {
  auto decode = [](const std::string& text) {
    return DecodeMigPlanJson(Cat(), Id("H100-80GB"), text, "p.json").status();
  };
  EXPECT_EQ(decode("{\n  \"steps\": [\n    {\"action\": }\n]}").message().substr(0, 11), "p.json:3:16");
  EXPECT_EQ(decode("[]").message(), "p.json: not a JSON object");
  EXPECT_EQ(decode(R"({"model":"A100-40GB","steps":[]})").message(),
            "p.json: model: the plan is for \"A100-40GB\", not H100-80GB");
  EXPECT_THAT(decode(R"({"steps":{}})").message(), HasSubstr("p.json: steps: missing or not an array"));
  EXPECT_EQ(decode(R"({"steps":[{"action":"create","gpu":0,"profile":"3g.40gb","start":2}]})").message(),
            "p.json: steps[0]: MIG profile 3g.40gb cannot start at memory slice 2");
  EXPECT_EQ(decode(R"({"steps":[{"action":"create","gpu":18446744073709551615,"profile":"3g.40gb","start":0}]})")
                .message(),
            "p.json: steps[0].gpu: expected an integer 0..100000");
  EXPECT_EQ(decode(R"({"steps":[{"action":"create","gpu":0,"start":0}]})").message(),
            "p.json: steps[0].profile: missing or not a string");
  EXPECT_EQ(decode(R"({"steps":[{"action":"create","gpu":0,"start":0}]})").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::partition
