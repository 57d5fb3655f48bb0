// ChooseMode's decision table, case by case (include/tessera/partition/sharing_mode.h).
#include "tessera/partition/sharing_mode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::partition {
namespace {

using std::chrono::milliseconds;

const GpuModelInfo& Model(const char* name) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  return cat.info(*cat.Find(name));
}

std::string Choose(const char* model, int64_t mib, int64_t milli, Isolation iso,
                   std::optional<milliseconds> slo = std::nullopt) {
  auto c = ChooseMode(Model(model), {MiB{mib}, GpuMilli{milli}, iso, slo});
  if (!c.ok()) return "error: " + c.status().message();
  EXPECT_FALSE(c->reason.empty());
  return c->mode.ToString();
}

TEST(ChooseModeTest, NoIsolationIsTheCheapestFraction) {
  EXPECT_EQ(Choose("H100-80GB", 8192, 300, Isolation::kNone), "fraction(300,8192MiB)");
  EXPECT_EQ(Choose("T4", 4096, 250, Isolation::kNone), "fraction(250,4096MiB)");
}

TEST(ChooseModeTest, ProcessIsolationIsATimeSliceWithAMemoryLimit) {
  EXPECT_EQ(Choose("H100-80GB", 8192, 300, Isolation::kProcess), "timeslice(300,8192MiB)");
  EXPECT_EQ(Choose("T4", 8192, 500, Isolation::kProcess), "timeslice(500,8192MiB)");
}

TEST(ChooseModeTest, HardwareIsolationIsTheSmallestFittingMigInstance) {
  EXPECT_EQ(Choose("H100-80GB", 8192, 100, Isolation::kHardware), "mig:1g.10gb");
  EXPECT_EQ(Choose("H100-80GB", 12000, 100, Isolation::kHardware), "mig:1g.20gb");  // memory decides
  EXPECT_EQ(Choose("H100-80GB", 8192, 200, Isolation::kHardware), "mig:2g.20gb");   // 2/7 >= 200
  EXPECT_EQ(Choose("H100-80GB", 30720, 400, Isolation::kHardware), "mig:3g.40gb");
  EXPECT_EQ(Choose("H100-80GB", 8192, 500, Isolation::kHardware), "mig:4g.40gb");   // 4/7 >= 500
  EXPECT_EQ(Choose("A30-24GB", 5000, 250, Isolation::kHardware), "mig:1g.6gb");
  EXPECT_EQ(Choose("H100-80GB", 60000, 300, Isolation::kHardware), "mig:7g.80gb");
}

TEST(ChooseModeTest, HardwareIsolationWithoutMigIsExclusive) {
  EXPECT_EQ(Choose("T4", 4096, 100, Isolation::kHardware), "exclusive");
  EXPECT_EQ(Choose("V100M32", 4096, 100, Isolation::kHardware), "exclusive");
}

TEST(ChooseModeTest, WholeGpuRequestsAreExclusive) {
  EXPECT_EQ(Choose("H100-80GB", 8192, 1000, Isolation::kNone), "exclusive");
  EXPECT_EQ(Choose("T4", 15360, 100, Isolation::kNone), "exclusive");  // all of its memory
}

TEST(ChooseModeTest, LatencySloAvoidsTimeSlicing) {
  EXPECT_EQ(Choose("H100-80GB", 8192, 300, Isolation::kNone, milliseconds(50)), "mig:3g.40gb");
  EXPECT_EQ(Choose("T4", 8192, 300, Isolation::kNone, milliseconds(50)), "mps(30,8192MiB)");
  EXPECT_EQ(Choose("T4", 8192, 301, Isolation::kNone, milliseconds(50)), "mps(31,8192MiB)");  // rounds up
  // MPS shares faults between clients: with process isolation only a whole GPU meets both.
  EXPECT_EQ(Choose("T4", 8192, 300, Isolation::kProcess, milliseconds(50)), "exclusive");
  EXPECT_EQ(Choose("H100-80GB", 8192, 300, Isolation::kProcess, milliseconds(50)), "mig:3g.40gb");
}

TEST(ChooseModeTest, BadRequestsNameTheField) {
  EXPECT_EQ(Choose("T4", 20000, 100, Isolation::kNone).rfind("error: memory:", 0), 0u);
  EXPECT_EQ(Choose("T4", 1024, 0, Isolation::kNone).rfind("error: compute:", 0), 0u);
  EXPECT_EQ(Choose("T4", 1024, 1500, Isolation::kNone).rfind("error: compute:", 0), 0u);
  EXPECT_EQ(Choose("T4", -1, 100, Isolation::kNone).rfind("error: memory:", 0), 0u);
  EXPECT_EQ(Choose("T4", 1024, 100, Isolation::kNone, milliseconds(0)).rfind("error: latency_slo:", 0), 0u);
}

TEST(ChooseModeTest, ModeStrings) {
  SharingMode v;
  v.kind = SharingModeKind::kVgpu;
  v.profile = "H100-20C";
  EXPECT_EQ(v.ToString(), "vgpu:H100-20C");
  EXPECT_EQ(SharingMode{}.ToString(), "exclusive");
}

}  // namespace
// Before any model is known: whole GPUs by compute, process isolation time-sliced, else the
// fractional share; what needs a model's MIG profiles (hardware isolation, an SLO) asks for one.
TEST(ChooseModeTest, WithoutAModelOnlyTheRulesThatNeedNoneDecide) {
  auto whole = ChooseModeWithoutModel({MiB{0}, GpuMilli{1000}, Isolation::kNone, std::nullopt});
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->mode.ToString(), "exclusive");
  auto process = ChooseModeWithoutModel({MiB{8192}, GpuMilli{300}, Isolation::kProcess, std::nullopt});
  ASSERT_TRUE(process.ok());
  EXPECT_EQ(process->mode.ToString(), "timeslice(300,8192MiB)");
  auto none = ChooseModeWithoutModel({MiB{8192}, GpuMilli{300}, Isolation::kNone, std::nullopt});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->mode.ToString(), "fraction(300,8192MiB)");
  // The same as on a model for these three (H100-80GB).
  for (const auto& [request, choice] : {std::pair{ModeRequest{MiB{8192}, GpuMilli{300}, Isolation::kProcess, std::nullopt}, process},
                                        std::pair{ModeRequest{MiB{8192}, GpuMilli{300}, Isolation::kNone, std::nullopt}, none}}) {
    auto on_model = ChooseMode(Model("H100-80GB"), request);
    ASSERT_TRUE(on_model.ok());
    EXPECT_EQ(on_model->mode.ToString(), choice->mode.ToString());
  }
  auto hardware = ChooseModeWithoutModel({MiB{8192}, GpuMilli{300}, Isolation::kHardware, std::nullopt});
  EXPECT_EQ(hardware.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(hardware.status().message()), ::testing::HasSubstr("name the model"));
  auto slo = ChooseModeWithoutModel({MiB{8192}, GpuMilli{300}, Isolation::kNone, std::chrono::milliseconds(50)});
  EXPECT_EQ(slo.status().code(), StatusCode::kFailedPrecondition);
}

}  // namespace tessera::partition
