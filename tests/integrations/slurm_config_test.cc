// gres.conf / slurm.conf GPU lines: the rendering rules, and the node's GPUs read through the
// fake NVML (MIG instances created through its API).
#include "tessera/integrations/slurm_config.h"

#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::integrations::slurm {
namespace {

using ::testing::HasSubstr;

const char kMinors[] =
    "config 1\nmonitor 2\ngpu1/gi1/access 147\ngpu1/gi1/ci0/access 148\ngpu1/gi2/access 156\n"
    "gpu1/gi2/ci0/access 157\n";

TEST(SlurmConfig, TheWorkedExample) {
  const std::vector<NodeGpuView> gpus = {
      {.index = 0, .model = "H100-80GB"},
      {.index = 1, .model = "H100-80GB", .mig_enabled = true,
       .mig_instances = {{.gpu_instance_id = 1, .compute_instance_id = 0, .profile = "3g.40gb"},
                         {.gpu_instance_id = 2, .compute_instance_id = 0, .profile = "3g.40gb"}}}};
  StatusOr<SlurmConfigText> text =
      RenderSlurmConfig(gpus, {.node_name = "n1", .shards_per_gpu = 4, .mig_minors = kMinors});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->gres_conf,
            "# gres.conf GPU lines for node n1 (tessera slurm config)\n"
            "AutoDetect=off\n"
            "Name=gpu Type=h100-80gb File=/dev/nvidia0\n"
            "Name=shard Count=4 File=/dev/nvidia0\n"
            "Name=gpu Type=3g.40gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap147,"
            "/dev/nvidia-caps/nvidia-cap148\n"
            "Name=gpu Type=3g.40gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap156,"
            "/dev/nvidia-caps/nvidia-cap157\n");
  EXPECT_EQ(text->slurm_conf,
            "# slurm.conf GPU lines for node n1 (tessera slurm config)\n"
            "GresTypes=gpu,shard\n"
            "SelectType=select/cons_tres\n"
            "NodeName=n1 Gres=gpu:h100-80gb:1,gpu:3g.40gb:2,shard:4\n");
}

// Slurm numbers a node's GPUs type by type in the order of the node's Gres= list (slurmd 22.05:
// `slurmd -G`, SLURM_STEP_GPUS): the gpu lines come in that order, so the n-th line is Slurm's
// GPU n, whole GPUs of one model after a MIG GPU included.
TEST(SlurmConfig, TheGpuLinesComeInTheOrderSlurmNumbersThem) {
  const std::vector<NodeGpuView> gpus = {
      {.index = 0, .model = "A100-40GB"},
      {.index = 1, .model = "A100-40GB", .mig_enabled = true,
       .mig_instances = {{.gpu_instance_id = 1, .compute_instance_id = 0, .profile = "3g.20gb"},
                         {.gpu_instance_id = 2, .compute_instance_id = 0, .profile = "3g.20gb"}}},
      {.index = 2, .model = "A100-40GB"}};
  const char minors[] = "gpu1/gi1/access 11\ngpu1/gi1/ci0/access 12\ngpu1/gi2/access 21\ngpu1/gi2/ci0/access 22\n";
  StatusOr<SlurmConfigText> text = RenderSlurmConfig(gpus, {.node_name = "n1", .mig_minors = minors});
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(text->gres_conf,
            "# gres.conf GPU lines for node n1 (tessera slurm config)\n"
            "AutoDetect=off\n"
            "Name=gpu Type=a100-40gb File=/dev/nvidia0\n"
            "Name=gpu Type=a100-40gb File=/dev/nvidia2\n"
            "Name=gpu Type=3g.20gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap11,/dev/nvidia-caps/nvidia-cap12\n"
            "Name=gpu Type=3g.20gb MultipleFiles=/dev/nvidia1,/dev/nvidia-caps/nvidia-cap21,/dev/nvidia-caps/nvidia-cap22\n");
  EXPECT_THAT(text->slurm_conf, HasSubstr("NodeName=n1 Gres=gpu:a100-40gb:2,gpu:3g.20gb:2\n"));
  EXPECT_EQ(InSlurmOrder({{.gpu = 0, .type = "a100-40gb"}, {.gpu = 1, .mig = 0, .type = "3g.20gb"},
                          {.gpu = 1, .mig = 1, .type = "3g.20gb"}, {.gpu = 2, .type = "a100-40gb"}}),
            (std::vector<SlurmGpu>{{.gpu = 0, .type = "a100-40gb"}, {.gpu = 2, .type = "a100-40gb"},
                                   {.gpu = 1, .mig = 0, .type = "3g.20gb"}, {.gpu = 1, .mig = 1, .type = "3g.20gb"}}));
}

TEST(SlurmConfig, WithoutShardsAndWithFakeDevices) {
  StatusOr<SlurmConfigText> text = RenderSlurmConfig({{.index = 0, .model = "A100-40GB"}, {.index = 1, .model = "A100-40GB"}},
                                                     {.node_name = "n2", .device_prefix = "/tmp/fake/gpu"});
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(text->gres_conf, HasSubstr("Name=gpu Type=a100-40gb File=/tmp/fake/gpu1\n"));
  EXPECT_THAT(text->gres_conf, ::testing::Not(HasSubstr("shard")));
  EXPECT_THAT(text->slurm_conf, HasSubstr("GresTypes=gpu\n"));
  EXPECT_THAT(text->slurm_conf, HasSubstr("NodeName=n2 Gres=gpu:a100-40gb:2\n"));
}

TEST(SlurmConfig, ErrorsNameWhatIsMissing) {
  EXPECT_THAT(std::string(RenderSlurmConfig({}, {}).status().message()), HasSubstr("node name: empty"));
  const std::vector<NodeGpuView> mig = {
      {.index = 1, .model = "H100-80GB", .mig_enabled = true,
       .mig_instances = {{.gpu_instance_id = 3, .compute_instance_id = 0, .profile = "1g.10gb"}}}};
  EXPECT_EQ(RenderSlurmConfig(mig, {.node_name = "n1", .mig_minors = kMinors}).status().message(),
            "GPU 1 MIG instance gpu1/gi3/ci0: no 'gpu1/gi3/access' in the mig-minors text (--mig-minors, "
            "/proc/driver/nvidia-caps/mig-minors)");
}

TEST(SlurmConfig, ReadsTheNodesGpusThroughNvml) {
  ::setenv("TESSERA_FAKE_NVML_CONFIG", "A100-40GB,H100-80GB:mig=1", 1);
  enforce::DlopenNvml nvml({.library_path = TESSERA_FAKE_NVML_PATH});
  ASSERT_TRUE(nvml.Init().ok());
  StatusOr<enforce::GpuInstance> gi = nvml.CreateGpuInstance(1, 9, {.start = 4, .size = 4});  // 3g.40gb@4
  ASSERT_TRUE(gi.ok()) << gi.status().ToString();
  ASSERT_TRUE(nvml.CreateComputeInstance(1, gi->id, 2).ok());  // the 3-slice CI filling it
  StatusOr<std::vector<NodeGpuView>> gpus = ReadNodeGpus(nvml, GpuModelCatalog::Builtin());
  (void)nvml.Shutdown();
  ::unsetenv("TESSERA_FAKE_NVML_CONFIG");
  ASSERT_TRUE(gpus.ok()) << gpus.status().ToString();
  ASSERT_EQ(gpus->size(), 2u);
  EXPECT_EQ((*gpus)[0].model, "A100-40GB");
  EXPECT_FALSE((*gpus)[0].mig_enabled);
  EXPECT_TRUE((*gpus)[1].mig_enabled);
  ASSERT_EQ((*gpus)[1].mig_instances.size(), 1u);
  EXPECT_EQ((*gpus)[1].mig_instances[0].profile, "3g.40gb");
  EXPECT_EQ((*gpus)[1].mig_instances[0].gpu_instance_id, static_cast<int>(gi->id));
}

}  // namespace
}  // namespace tessera::integrations::slurm
