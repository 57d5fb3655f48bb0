// Launcher: the shim is checked before anything runs, --gpu pins to the GPU's UUID (fake NVML)
// or index, a caller's CUDA_VISIBLE_DEVICES only narrows, and the environment the SPANK plugin
// and the device plugin would set.
#include "tessera/node/launcher.h"

#include <cstdlib>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/testing/sim_test_util.h"

namespace tessera::node {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::StartsWith;
using tessera::testing::TempDir;
using tessera::testing::WriteTextFile;

const char* const kFakeNvml = TESSERA_FAKE_NVML_PATH;
const char kUuid1[] = "GPU-fa4e0000-0000-4000-8000-000000000001";

class FakeNvmlConfig {
 public:
  explicit FakeNvmlConfig(const char* gpus) { ::setenv("TESSERA_FAKE_NVML_CONFIG", gpus, 1); }
  ~FakeNvmlConfig() { ::unsetenv("TESSERA_FAKE_NVML_CONFIG"); }
};

TEST(ResolveShim, NamesThePathOfAShimThatCannotBeLoaded) {
  TempDir dir;
  StatusOr<std::string> missing = ResolveShim("/nonexistent/libtessera-shim.so");
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(), StartsWith("/nonexistent/libtessera-shim.so: cannot load the shim"));
  EXPECT_THAT(ResolveShim(dir.path()).status().message(), HasSubstr("not a regular file"));
  WriteTextFile(dir.File("text.so"), "hello");
  EXPECT_THAT(ResolveShim(dir.File("text.so")).status().message(), HasSubstr("not an ELF shared object"));
  EXPECT_EQ(ResolveShim(kFakeNvml).value(), kFakeNvml);  // any ELF file passes the check
}

TEST(PinGpu, UsesTheUuidWhereNvmlKnowsIt) {
  FakeNvmlConfig config("H100-80GB*2");
  StatusOr<GpuPin> pin = PinGpu(1, kFakeNvml, std::nullopt);
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_EQ(pin->visible_devices, kUuid1);
  EXPECT_EQ(pin->uuid, kUuid1);
  StatusOr<GpuPin> beyond = PinGpu(2, kFakeNvml, std::nullopt);
  EXPECT_EQ(beyond.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(beyond.status().message(), "GPU 2: the node has 2 GPU(s) (NVML)");
}

TEST(PinGpu, FallsBackToTheIndexWithoutNvml) {
  StatusOr<GpuPin> pin = PinGpu(5, "/nonexistent/libnvidia-ml.so.1", std::nullopt);
  ASSERT_TRUE(pin.ok());
  EXPECT_EQ(pin->visible_devices, "5");
  EXPECT_EQ(pin->uuid, "");
}

TEST(PinGpu, ACallersListNarrowsButNeverWidens) {
  FakeNvmlConfig config("H100-80GB*2");
  EXPECT_EQ(PinGpu(1, kFakeNvml, "0,1").value().visible_devices, kUuid1);
  EXPECT_EQ(PinGpu(1, kFakeNvml, std::string(" ") + kUuid1).value().visible_devices, kUuid1);
  EXPECT_EQ(PinGpu(3, "/nonexistent", "2,3").value().visible_devices, "3");
  for (const char* list : {"0", "", "GPU-fa4e0000-0000-4000-8000-000000000000", "10"}) {
    SCOPED_TRACE(list);
    StatusOr<GpuPin> refused = PinGpu(1, kFakeNvml, std::string(list));
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(refused.status().message(),
                StartsWith("GPU 1 is not in CUDA_VISIBLE_DEVICES='" + std::string(list) + "'"));
  }
}

// A MIG instance is pinned by its MIG device's UUID, found by its GPU instance's first slice
// (the test keeps the fake NVML open, so that PinMigInstance's own NVML sees the same instances).
TEST(PinMigInstance, PinsTheInstanceAtItsFirstSliceByItsMigDeviceUuid) {
  FakeNvmlConfig config("H100-80GB:mig=1");
  enforce::DlopenNvml nvml({.library_path = kFakeNvml});
  ASSERT_TRUE(nvml.Init().ok());
  StatusOr<enforce::GpuInstance> first = nvml.CreateGpuInstance(0, 9, {.start = 0, .size = 4});
  StatusOr<enforce::GpuInstance> second = nvml.CreateGpuInstance(0, 9, {.start = 4, .size = 4});
  ASSERT_TRUE(first.ok() && second.ok());
  ASSERT_TRUE(nvml.CreateComputeInstance(0, first->id, 2).ok());
  StatusOr<std::vector<enforce::MigDevice>> devices = nvml.MigDevices(0);
  ASSERT_TRUE(devices.ok() && devices->size() == 1u);
  StatusOr<GpuPin> pin = PinMigInstance(0, 0, kFakeNvml);
  ASSERT_TRUE(pin.ok()) << pin.status().ToString();
  EXPECT_EQ(pin->visible_devices, devices->front().uuid);
  EXPECT_EQ(pin->uuid, devices->front().uuid);
  EXPECT_EQ(pin->minor, 0);
  EXPECT_EQ(MigInstanceUuid(nvml, 0, 0).value(), devices->front().uuid);
  StatusOr<GpuPin> no_ci = PinMigInstance(0, 4, kFakeNvml);
  EXPECT_EQ(no_ci.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(no_ci.status().message(), "MIG instance at slice 4 of GPU 0: GPU instance " + std::to_string(second->id) +
                                          " has no compute instance");
  StatusOr<GpuPin> nowhere = PinMigInstance(0, 2, kFakeNvml);
  EXPECT_EQ(nowhere.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(nowhere.status().message(),
            "MIG instance at slice 2 of GPU 0: no GPU instance starts there (the GPU's instances start at: 0, 4)");
  (void)nvml.Shutdown();
  StatusOr<GpuPin> without = PinMigInstance(0, 0, "/nonexistent/libnvidia-ml.so.1");
  EXPECT_EQ(without.status().code(), StatusCode::kFailedPrecondition);  // never by index: fail closed
  EXPECT_THAT(without.status().message(), HasSubstr("a MIG instance is selected by its UUID, which only NVML gives"));
}

TEST(LaunchEnvironment, PreloadsTheShimAndPinsTheGpu) {
  LaunchOptions o{.paths = NodePaths("/run/t"), .shim_path = "/lib/libtessera-shim.so",
                  .pin = {.visible_devices = kUuid1, .uuid = kUuid1}, .gpus = {1}, .tenant_index = 4,
                  .caller_ld_preload = "libother.so"};
  EXPECT_THAT(LaunchEnvironment(o),
              ::testing::UnorderedElementsAre(Pair("LD_PRELOAD", "/lib/libtessera-shim.so libother.so"),
                                              Pair("TESSERA_SHIM_POLICY", "/run/t/policy"),
                                              Pair("TESSERA_SHIM_COUNTERS", "/run/t/counters"),
                                              Pair("TESSERA_SHIM_LEASES", "/run/t/leases"),
                                              Pair("TESSERA_SHIM_TENANT", "4"), Pair("TESSERA_SHIM_GPUS", "1"),
                                              Pair("CUDA_VISIBLE_DEVICES", kUuid1)));
}

// A MIG instance is isolated by the hardware: its processes' launches are not gated on the GPU's
// lease board (node_dir.h, TenantRequest::mig_instance); the memory limit stays.
TEST(LaunchEnvironment, AMigPinIsNotGatedOnTheLeaseBoard) {
  LaunchOptions o{.paths = NodePaths("/run/t"), .shim_path = "/lib/libtessera-shim.so",
                  .pin = {.visible_devices = "MIG-aaaa", .uuid = "MIG-aaaa", .mig = true}, .gpus = {1},
                  .tenant_index = 4};
  EXPECT_THAT(LaunchEnvironment(o),
              ::testing::UnorderedElementsAre(Pair("LD_PRELOAD", "/lib/libtessera-shim.so"),
                                              Pair("TESSERA_SHIM_POLICY", "/run/t/policy"),
                                              Pair("TESSERA_SHIM_COUNTERS", "/run/t/counters"),
                                              Pair("TESSERA_SHIM_TENANT", "4"), Pair("TESSERA_SHIM_GPUS", "1"),
                                              Pair("CUDA_VISIBLE_DEVICES", "MIG-aaaa")));
}

}  // namespace
}  // namespace tessera::node
