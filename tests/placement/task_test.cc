#include "tessera/placement/task.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/placement/cluster_snapshot.h"
#include "tests/testing/builders.h"

namespace tessera::placement {
namespace {

using ::tessera::testing::CpuOnly;
using ::tessera::testing::Models;
using ::tessera::testing::Share;
using ::tessera::testing::Whole;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(TaskRequestTest, Kinds) {
  const TaskRequest cpu = CpuOnly(4000, 1024);
  EXPECT_TRUE(cpu.IsCpuOnly());
  EXPECT_FALSE(cpu.IsSharing());
  EXPECT_FALSE(cpu.IsWholeGpu());
  EXPECT_EQ(cpu.TotalGpu(), GpuMilli{0});

  const TaskRequest half = Share(500, 4000);
  EXPECT_FALSE(half.IsCpuOnly());
  EXPECT_TRUE(half.IsSharing());
  EXPECT_FALSE(half.IsWholeGpu());
  EXPECT_EQ(half.TotalGpu(), GpuMilli{500});

  const TaskRequest one = Whole(1);
  EXPECT_FALSE(one.IsSharing());  // a whole GPU is not sharing
  EXPECT_TRUE(one.IsWholeGpu());
  EXPECT_EQ(one.TotalGpu(), GpuMilli{1000});

  const TaskRequest four = Whole(4, 8000);
  EXPECT_TRUE(four.IsWholeGpu());
  EXPECT_EQ(four.TotalGpu(), GpuMilli{4000});
}

TEST(TaskRequestTest, AllowsModel) {
  const ModelMask t4 = Models("T4");
  const ModelMask v100 = Models("V100M16|V100M32");
  TaskRequest any = Share(100);
  EXPECT_TRUE(any.AllowsModel(t4));
  EXPECT_TRUE(any.AllowsModel(v100));
  TaskRequest restricted = Share(100);
  restricted.allowed_models = v100;
  EXPECT_FALSE(restricted.AllowsModel(t4));
  EXPECT_TRUE(restricted.AllowsModel(Models("V100M32")));
  EXPECT_TRUE(restricted.AllowsModel(Models("V100M16")));
}

TEST(TaskRequestTest, TaskTag) {
  EXPECT_EQ(TaskTag(Share(500)), kShareTag);
  EXPECT_EQ(TaskTag(Share(999)), kShareTag);
  EXPECT_EQ(TaskTag(Whole(1)), 1);
  EXPECT_EQ(TaskTag(Whole(8)), 8);
  EXPECT_EQ(kTagCount, 17);
}

TEST(ValidateTaskTest, AcceptsValidTasks) {
  EXPECT_TRUE(ValidateTask(CpuOnly(0)).ok());
  EXPECT_TRUE(ValidateTask(CpuOnly(96000, 1 << 20)).ok());
  EXPECT_TRUE(ValidateTask(Share(1)).ok());
  EXPECT_TRUE(ValidateTask(Share(999)).ok());
  EXPECT_TRUE(ValidateTask(Whole(1)).ok());
  EXPECT_TRUE(ValidateTask(Whole(16)).ok());
  TaskRequest restricted = Share(300);
  restricted.allowed_models = Models("T4");
  EXPECT_TRUE(ValidateTask(restricted).ok());
}

TEST(ValidateTaskTest, NegativeCpu) {
  const Status s = ValidateTask(CpuOnly(-5));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "cpu_milli: negative value -5");
}

TEST(ValidateTaskTest, NegativeMemory) {
  const Status s = ValidateTask(Share(500, 1000, -1));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), StartsWith("memory_mib:"));
}

TEST(ValidateTaskTest, GpuCountOutOfRange) {
  Status s = ValidateTask(Whole(17));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "num_gpu: 17 is outside 0..16");
  TaskRequest negative = CpuOnly(0);
  negative.num_gpu = -1;
  s = ValidateTask(negative);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), StartsWith("num_gpu:"));
}

TEST(ValidateTaskTest, GpuMilliOutOfRange) {
  Status s = ValidateTask(Share(0));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "gpu_milli: 0 is outside 1..1000");
  s = ValidateTask(Share(1001));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), StartsWith("gpu_milli:"));
  EXPECT_EQ(ValidateTask(Share(-3)).code(), StatusCode::kInvalidArgument);
}

TEST(ValidateTaskTest, MultiGpuMustBeWhole) {
  TaskRequest t = Whole(2);
  t.gpu_milli = GpuMilli{500};
  const Status s = ValidateTask(t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), StartsWith("gpu_milli:"));
  EXPECT_THAT(s.message(), HasSubstr("500"));
}

TEST(ValidateTaskTest, CpuOnlyWithGpuMilli) {
  TaskRequest t = CpuOnly(1000);
  t.gpu_milli = GpuMilli{200};
  const Status s = ValidateTask(t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), StartsWith("gpu_milli:"));
  EXPECT_THAT(s.message(), HasSubstr("200"));
}

TEST(ValidateTaskTest, FirstOffendingFieldIsNamed) {
  TaskRequest t = Whole(17, -1);
  EXPECT_THAT(ValidateTask(t).message(), StartsWith("cpu_milli:"));
}

}  // namespace
}  // namespace tessera::placement
