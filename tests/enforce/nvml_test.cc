// DlopenNvml against the in-tree fake libnvidia-ml.so.1 (tests/testing/fake_nvml/): the real
// dlopen/dlsym path and C ABI, the driver's MIG refusals and their codes, error mapping,
// injected failures. Every test names the fake (or a library that is not NVML) by absolute
// path; none loads the real NVML, so none can touch a real GPU.
#include "tessera/enforce/nvml.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>  // getpid: temporary files per process (worktrees run tests at once)

#include "tessera/core/gpu_model.h"

namespace tessera::enforce {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

const char* const kFakePath = TESSERA_FAKE_NVML_PATH;

const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const StatusOr<T>& s) {
  return s.status();
}

#define ASSERT_OK(expr)                                  \
  do {                                                   \
    const auto& tessera_result_ = (expr);                \
    ASSERT_TRUE(StatusOf(tessera_result_).ok())          \
        << StatusOf(tessera_result_).ToString();         \
  } while (0)

// Expects `expr` to fail with `code` and exactly `message`.
#define EXPECT_STATUS(expr, want_code, want_message)              \
  do {                                                            \
    const auto& tessera_result_ = (expr);                         \
    EXPECT_EQ(StatusOf(tessera_result_).code(), (want_code))      \
        << StatusOf(tessera_result_).ToString();                  \
    EXPECT_EQ(StatusOf(tessera_result_).message(), (want_message)); \
  } while (0)

class NvmlTest : public ::testing::Test {
 protected:
  void TearDown() override {
    nvml_.reset();
    unsetenv("TESSERA_FAKE_NVML_CONFIG");
    unsetenv("TESSERA_FAKE_NVML_FAIL");
    unsetenv("TESSERA_FAKE_NVML_MUTATION_LOG");
  }

  // Configures the fake and initialises an adapter on it.
  Status Start(const std::string& config, const std::string& fail = "") {
    setenv("TESSERA_FAKE_NVML_CONFIG", config.c_str(), 1);
    if (fail.empty()) {
      unsetenv("TESSERA_FAKE_NVML_FAIL");
    } else {
      setenv("TESSERA_FAKE_NVML_FAIL", fail.c_str(), 1);
    }
    nvml_ = std::make_unique<DlopenNvml>(NvmlOptions{.library_path = kFakePath});
    return nvml_->Init();
  }

  NvmlApi& nvml() { return *nvml_; }

  std::unique_ptr<DlopenNvml> nvml_;
};

// --- loading -----------------------------------------------------------------------------------

TEST_F(NvmlTest, MissingLibraryIsUnavailableWithDlerror) {
  DlopenNvml nvml({.library_path = "/nonexistent/tessera/libnvidia-ml.so.1"});
  Status s = nvml.Init();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), StartsWith("/nonexistent/tessera/libnvidia-ml.so.1 not found: "));
  EXPECT_THAT(s.message(), HasSubstr("No such file or directory"));  // dlerror's text
  EXPECT_EQ(nvml.DeviceCount().status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(NvmlTest, LibraryWithoutNvmlFunctionsIsUnavailable) {
  DlopenNvml nvml({.library_path = "libm.so.6"});
  EXPECT_STATUS(nvml.Init(), StatusCode::kUnavailable,
                "libm.so.6 lacks the NVML function nvmlInit_v2");
}

TEST_F(NvmlTest, CallsOutsideInitAndShutdownFail) {
  DlopenNvml nvml({.library_path = kFakePath});
  EXPECT_STATUS(nvml.DeviceCount(), StatusCode::kFailedPrecondition,
                "NVML is not initialised: call Init() first");
  EXPECT_STATUS(nvml.Shutdown(), StatusCode::kFailedPrecondition,
                "NVML is not initialised: call Init() first");
  ASSERT_OK(nvml.Init());
  EXPECT_STATUS(nvml.Init(), StatusCode::kFailedPrecondition, "NVML is already initialised");
  ASSERT_OK(nvml.Shutdown());
  EXPECT_EQ(nvml.Memory(0).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(nvml.Init());  // and again after a shutdown
  EXPECT_EQ(*nvml.DeviceCount(), 0u);
}

TEST_F(NvmlTest, InitFailureCarriesNvmlErrorString) {
  EXPECT_STATUS(Start("A100-40GB", "nvmlInit_v2:9"), StatusCode::kUnavailable,
                "nvmlInit_v2(): Driver Not Loaded (NVML error 9)");
}

TEST_F(NvmlTest, BadFakeConfigurationFailsInit) {
  EXPECT_STATUS(Start("B300-288GB"), StatusCode::kUnknown,
                "nvmlInit_v2(): Unknown Error (NVML error 999)");
}

// --- discovery ---------------------------------------------------------------------------------

TEST_F(NvmlTest, DiscoversNamesAndUuids) {
  ASSERT_OK(Start("H100-80GB:mig=1,A100-40GB,V100M32"));
  ASSERT_OK(nvml().DeviceCount());
  EXPECT_EQ(*nvml().DeviceCount(), 3u);
  EXPECT_EQ(*nvml().DeviceName(0), "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(*nvml().DeviceName(1), "NVIDIA A100-SXM4-40GB");
  EXPECT_EQ(*nvml().DeviceName(2), "Tesla V100-SXM2-32GB");
  EXPECT_EQ(*nvml().DeviceUuid(0), "GPU-fa4e0000-0000-4000-8000-000000000000");
  EXPECT_EQ(*nvml().DeviceUuid(2), "GPU-fa4e0000-0000-4000-8000-000000000002");
  EXPECT_STATUS(nvml().DeviceName(3), StatusCode::kInvalidArgument,
                "nvmlDeviceGetHandleByIndex_v2(gpu 3): Invalid Argument (NVML error 2)");
}

// The device node's minor number (/dev/nvidia<minor>) is NVML's to say, not the index: here GPU 0
// is minor 3; GPU 1, configured with none, answers its index; a failing call is named.
TEST_F(NvmlTest, MinorNumbersAreNvmlsNotTheIndex) {
  ASSERT_OK(Start("A100-40GB:minor=3,A100-40GB"));
  EXPECT_EQ(*nvml().MinorNumber(0), 3u);
  EXPECT_EQ(*nvml().MinorNumber(1), 1u);
  ASSERT_OK(nvml().Shutdown());
  ASSERT_OK(Start("A100-40GB", "nvmlDeviceGetMinorNumber:3"));
  EXPECT_THAT(std::string(nvml().MinorNumber(0).status().message()),
              HasSubstr("nvmlDeviceGetMinorNumber(gpu 0): Not Supported"));
}

TEST_F(NvmlTest, MemoryIsReportedInMiB) {
  ASSERT_OK(Start("A100-40GB:used=1000,H100-80GB:procs=4242/1024;4343/2048"));
  StatusOr<DeviceMemory> a100 = nvml().Memory(0);
  ASSERT_OK(a100);
  EXPECT_EQ(a100->total, MiB(40537));
  EXPECT_EQ(a100->used, MiB(1000));
  EXPECT_EQ(a100->free, MiB(39537));
  StatusOr<DeviceMemory> h100 = nvml().Memory(1);
  ASSERT_OK(h100);
  EXPECT_EQ(h100->total, MiB(81559));
  EXPECT_EQ(h100->used, MiB(3072));  // the processes' memory
}

TEST_F(NvmlTest, MigModeCurrentAndPending) {
  ASSERT_OK(Start("H100-80GB:mig=1,A100-40GB:mig=0:pending=1,V100M32"));
  StatusOr<MigMode> h100 = nvml().GetMigMode(0);
  ASSERT_OK(h100);
  EXPECT_TRUE(h100->current_enabled);
  EXPECT_TRUE(h100->pending_enabled);
  StatusOr<MigMode> a100 = nvml().GetMigMode(1);
  ASSERT_OK(a100);
  EXPECT_FALSE(a100->current_enabled);
  EXPECT_TRUE(a100->pending_enabled);  // enabled at the next reset
  EXPECT_STATUS(nvml().GetMigMode(2), StatusCode::kUnimplemented,
                "nvmlDeviceGetMigMode(gpu 2): Not Supported (NVML error 3)");
}

// --- MIG profiles and placements --------------------------------------------------------------

// The fake's MIG rules are the catalog's (GPU model catalog, from mig-profiles.json): every
// profile, read back through NVML, has the catalog's id, slices, count, memory and starts.
TEST_F(NvmlTest, ProfilesAndPlacementsMatchTheCatalog) {
  ASSERT_OK(Start("A100-40GB:mig=1,H100-80GB:mig=1"));
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  const char* models[] = {"A100-40GB", "H100-80GB"};
  for (uint32_t gpu = 0; gpu < 2; ++gpu) {
    StatusOr<GpuModelId> id = catalog.Find(models[gpu]);
    ASSERT_OK(id);
    const GpuModelInfo& model = catalog.info(*id);
    ASSERT_TRUE(model.mig.has_value());
    for (const MigProfile& want : model.mig->profiles) {
      SCOPED_TRACE(std::string(models[gpu]) + " " + want.name);
      StatusOr<GpuInstanceProfile> got = nvml().GpuInstanceProfileInfo(
          gpu, static_cast<uint32_t>(want.nvml_profile_index));
      ASSERT_OK(got);
      EXPECT_EQ(got->profile_index, static_cast<uint32_t>(want.nvml_profile_index));
      EXPECT_EQ(static_cast<int>(got->id), want.profile_id);
      EXPECT_EQ(static_cast<int>(got->slice_count), want.compute_slices);
      EXPECT_EQ(static_cast<int>(got->instance_count), want.max_count);
      EXPECT_EQ(got->memory, want.memory);
      EXPECT_EQ(got->name, "MIG " + want.name);
      StatusOr<std::vector<GpuInstancePlacement>> placements =
          nvml().GpuInstancePossiblePlacements(gpu, got->id);
      ASSERT_OK(placements);
      std::vector<int> starts;
      for (const GpuInstancePlacement& p : *placements) {
        starts.push_back(static_cast<int>(p.start));
        EXPECT_EQ(static_cast<int>(p.size), want.size);
      }
      EXPECT_EQ(starts, want.starts);
    }
  }
}

TEST_F(NvmlTest, ProfileIndexesTheGpuLacksOrTheDriverDoesNotKnow) {
  ASSERT_OK(Start("H100-80GB:mig=1"));
  EXPECT_STATUS(nvml().GpuInstanceProfileInfo(0, 0x5), StatusCode::kUnimplemented,
                "nvmlDeviceGetGpuInstanceProfileInfoV(gpu 0, profile index 5): Not Supported "
                "(NVML error 3)");
  // 0x11 is in nvml.h (API 13) but R580 already refuses it; the adapter skips such indexes.
  EXPECT_STATUS(nvml().GpuInstanceProfileInfo(0, 0x11), StatusCode::kInvalidArgument,
                "nvmlDeviceGetGpuInstanceProfileInfoV(gpu 0, profile index 17): Invalid Argument "
                "(NVML error 2)");
  EXPECT_EQ(nvml().GpuInstanceProfileInfo(0, kGpuInstanceProfileIndexCount).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_STATUS(nvml().GpuInstancePossiblePlacements(0, 77), StatusCode::kUnimplemented,
                "nvmlDeviceGetGpuInstancePossiblePlacements_v2(gpu 0, profile id 77): Not "
                "Supported (NVML error 3)");
}

TEST_F(NvmlTest, VersionedProfileInfoFallsBackToTheUnversionedCall) {
  ASSERT_OK(Start("H100-80GB:mig=1", "nvmlDeviceGetGpuInstanceProfileInfoV:25"));
  StatusOr<GpuInstanceProfile> p = nvml().GpuInstanceProfileInfo(0, kGpuInstanceProfile3Slice);
  ASSERT_OK(p);
  EXPECT_EQ(p->id, 9u);
  EXPECT_EQ(p->slice_count, 3u);
  EXPECT_EQ(p->memory, MiB(40448));
  EXPECT_EQ(p->name, "");  // only the versioned struct carries the name
}

// R580 (seen on an H200 with MIG disabled) answers profile and placement queries whatever
// the MIG mode; instances can only be listed or made with MIG enabled.
TEST_F(NvmlTest, ProfilesAreReadableWithMigOffButInstancesNeedMig) {
  ASSERT_OK(Start("A100-40GB:mig=0:pending=1"));
  StatusOr<GpuInstanceProfile> p = nvml().GpuInstanceProfileInfo(0, kGpuInstanceProfile3Slice);
  ASSERT_OK(p);
  EXPECT_EQ(p->id, 9u);
  StatusOr<std::vector<GpuInstancePlacement>> placements =
      nvml().GpuInstancePossiblePlacements(0, 9);
  ASSERT_OK(placements);
  EXPECT_THAT(*placements, ElementsAre(GpuInstancePlacement{0, 4}, GpuInstancePlacement{4, 4}));
  StatusOr<std::vector<GpuInstance>> gis = nvml().GpuInstances(0);
  ASSERT_OK(gis);
  EXPECT_THAT(*gis, IsEmpty());
  EXPECT_STATUS(nvml().CreateGpuInstance(0, 9, {.start = 0, .size = 4}),
                StatusCode::kUnimplemented,
                "nvmlDeviceCreateGpuInstanceWithPlacement(gpu 0, profile id 9, placement 0:4): "
                "Not Supported (NVML error 3)");
  EXPECT_STATUS(nvml().DestroyGpuInstance(0, 1), StatusCode::kUnimplemented,
                "nvmlDeviceGetGpuInstanceById(gpu 0, gpu instance 1): Not Supported "
                "(NVML error 3)");
}

TEST_F(NvmlTest, GpusWithoutMigHaveNoProfiles) {
  ASSERT_OK(Start("V100M32"));
  EXPECT_STATUS(nvml().GpuInstanceProfileInfo(0, kGpuInstanceProfile1Slice),
                StatusCode::kUnimplemented,
                "nvmlDeviceGetGpuInstanceProfileInfoV(gpu 0, profile index 0): Not Supported "
                "(NVML error 3)");
  StatusOr<std::vector<GpuInstance>> gis = nvml().GpuInstances(0);
  ASSERT_OK(gis);
  EXPECT_THAT(*gis, IsEmpty());
}

// --- creating and destroying GPU instances ----------------------------------------------------

std::vector<GpuInstancePlacement> Placements(const std::vector<GpuInstance>& gis) {
  std::vector<GpuInstancePlacement> out;
  for (const GpuInstance& gi : gis) out.push_back(gi.placement);
  return out;
}

TEST_F(NvmlTest, CreatesListsAndDestroysAtExactPlacements) {
  ASSERT_OK(Start("H100-80GB:mig=1"));
  StatusOr<GpuInstance> three = nvml().CreateGpuInstance(0, 9, {.start = 4, .size = 4});
  ASSERT_OK(three);
  EXPECT_EQ(three->profile_id, 9u);
  EXPECT_EQ(three->placement, (GpuInstancePlacement{4, 4}));
  StatusOr<GpuInstance> four = nvml().CreateGpuInstance(0, 5, {.start = 0, .size = 4});
  ASSERT_OK(four);  // 4g + 3g uses all 7 compute slices
  EXPECT_NE(four->id, three->id);

  StatusOr<std::vector<GpuInstance>> gis = nvml().GpuInstances(0);
  ASSERT_OK(gis);
  EXPECT_THAT(Placements(*gis),
              ElementsAre(GpuInstancePlacement{0, 4}, GpuInstancePlacement{4, 4}));
  EXPECT_EQ((*gis)[0].id, four->id);
  EXPECT_EQ((*gis)[0].profile_id, 5u);

  ASSERT_OK(nvml().DestroyGpuInstance(0, four->id));
  ASSERT_OK(nvml().DestroyGpuInstance(0, three->id));
  gis = nvml().GpuInstances(0);
  ASSERT_OK(gis);
  EXPECT_THAT(*gis, IsEmpty());
}

TEST_F(NvmlTest, RefusesStartsAndSizesTheProfileDoesNotAllow) {
  ASSERT_OK(Start("A100-40GB:mig=1"));
  EXPECT_STATUS(nvml().CreateGpuInstance(0, 9, {.start = 2, .size = 4}),
                StatusCode::kInvalidArgument,
                "nvmlDeviceCreateGpuInstanceWithPlacement(gpu 0, profile id 9, placement 2:4): "
                "Invalid Argument (NVML error 2)");
  // A 2g cannot start at 6: slices 6-7 hold a single compute slice.
  EXPECT_EQ(nvml().CreateGpuInstance(0, 14, {.start = 6, .size = 2}).status().code(),
            StatusCode::kInvalidArgument);
  // The 4g has one start; a 1g cannot use memory slice 7.
  EXPECT_EQ(nvml().CreateGpuInstance(0, 5, {.start = 4, .size = 4}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(nvml().CreateGpuInstance(0, 19, {.start = 7, .size = 1}).status().code(),
            StatusCode::kInvalidArgument);
  // Right start, wrong size; unknown profile id.
  EXPECT_EQ(nvml().CreateGpuInstance(0, 9, {.start = 0, .size = 2}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(nvml().CreateGpuInstance(0, 42, {.start = 0, .size = 1}).status().code(),
            StatusCode::kInvalidArgument);
  StatusOr<std::vector<GpuInstance>> gis = nvml().GpuInstances(0);
  ASSERT_OK(gis);
  EXPECT_THAT(*gis, IsEmpty());  // nothing was created by the refused calls
}

TEST_F(NvmlTest, RefusesOverlappingMemorySlices) {
  ASSERT_OK(Start("A100-40GB:mig=1"));
  ASSERT_OK(nvml().CreateGpuInstance(0, 9, {.start = 0, .size = 4}));  // 3g.20gb on 0-3
  EXPECT_STATUS(nvml().CreateGpuInstance(0, 14, {.start = 2, .size = 2}),
                StatusCode::kResourceExhausted,
                "nvmlDeviceCreateGpuInstanceWithPlacement(gpu 0, profile id 14, placement 2:2): "
                "Insufficient Resources (NVML error 23)");
  EXPECT_EQ(nvml().CreateGpuInstance(0, 0, {.start = 0, .size = 8}).status().code(),
            StatusCode::kResourceExhausted);  // 7g needs the whole GPU
  ASSERT_OK(nvml().CreateGpuInstance(0, 15, {.start = 6, .size = 2}));  // 1g.10gb on 6-7
  ASSERT_OK(nvml().CreateGpuInstance(0, 14, {.start = 4, .size = 2}));  // 2g.10gb on 4-5
  StatusOr<std::vector<GpuInstance>> gis = nvml().GpuInstances(0);
  ASSERT_OK(gis);
  EXPECT_THAT(Placements(*gis), ElementsAre(GpuInstancePlacement{0, 4}, GpuInstancePlacement{4, 2},
                                            GpuInstancePlacement{6, 2}));
}

TEST_F(NvmlTest, RefusesMoreInstancesThanTheProfileAllows) {
  ASSERT_OK(Start("H100-80GB:mig=1"));
  ASSERT_OK(nvml().CreateGpuInstance(0, 20, {.start = 0, .size = 1}));  // 1g.10gb+me: max 1
  EXPECT_EQ(nvml().CreateGpuInstance(0, 20, {.start = 3, .size = 1}).status().code(),
            StatusCode::kResourceExhausted);  // free slices, but only one +me per GPU
}

TEST_F(NvmlTest, SevenSmallInstancesFillTheComputeSlices) {
  ASSERT_OK(Start("H100-80GB:mig=1"));
  for (uint32_t start = 0; start < 7; ++start) {
    ASSERT_OK(nvml().CreateGpuInstance(0, 19, {.start = start, .size = 1}));
  }
  // Memory slice 7 is free, but no profile can use it alone.
  EXPECT_EQ(nvml().CreateGpuInstance(0, 15, {.start = 6, .size = 2}).status().code(),
            StatusCode::kResourceExhausted);
  StatusOr<std::vector<GpuInstance>> gis = nvml().GpuInstances(0);
  ASSERT_OK(gis);
  ASSERT_EQ(gis->size(), 7u);
  for (uint32_t i = 0; i < 7; ++i) EXPECT_EQ((*gis)[i].placement, (GpuInstancePlacement{i, 1}));
}

TEST_F(NvmlTest, DestroyingAnUnknownInstanceIsNotFound) {
  ASSERT_OK(Start("H100-80GB:mig=1"));
  EXPECT_STATUS(nvml().DestroyGpuInstance(0, 42), StatusCode::kNotFound,
                "nvmlDeviceGetGpuInstanceById(gpu 0, gpu instance 42): Not Found (NVML error 6)");
}

// --- compute instances -------------------------------------------------------------------------

// The MIG devices CUDA sees: one per compute instance, in GPU instance order, each with a UUID of
// its own ("MIG-..."), the one CUDA_VISIBLE_DEVICES takes to select an instance.
TEST_F(NvmlTest, MigDevicesAreTheComputeInstancesWithUuidsOfTheirOwn) {
  ASSERT_OK(Start("H100-80GB:mig=1,A100-40GB:mig=0,V100M32"));
  StatusOr<std::vector<MigDevice>> none = nvml().MigDevices(0);
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
  StatusOr<GpuInstance> late = nvml().CreateGpuInstance(0, 9, {.start = 4, .size = 4});
  StatusOr<GpuInstance> early = nvml().CreateGpuInstance(0, 9, {.start = 0, .size = 4});
  ASSERT_OK(late);
  ASSERT_OK(early);
  ASSERT_OK(nvml().CreateComputeInstance(0, late->id, 2));
  ASSERT_OK(nvml().CreateComputeInstance(0, early->id, 2));
  StatusOr<std::vector<MigDevice>> two = nvml().MigDevices(0);
  ASSERT_OK(two);
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].gpu_instance_id, early->id);  // by placement, not by creation
  EXPECT_EQ((*two)[1].gpu_instance_id, late->id);
  EXPECT_THAT((*two)[0].uuid, ::testing::StartsWith("MIG-"));
  EXPECT_NE((*two)[0].uuid, (*two)[1].uuid);
  EXPECT_NE((*two)[0].uuid, *nvml().DeviceUuid(0));
  StatusOr<std::vector<MigDevice>> off = nvml().MigDevices(1);  // MIG capable, MIG off
  ASSERT_OK(off);
  EXPECT_TRUE(off->empty());
  EXPECT_EQ(nvml().MigDevices(2).status().code(), StatusCode::kUnimplemented);  // no MIG at all
}

TEST_F(NvmlTest, ComputeInstancesKeepTheirGpuInstanceInUse) {
  ASSERT_OK(Start("H100-80GB:mig=1"));
  StatusOr<GpuInstance> gi = nvml().CreateGpuInstance(0, 9, {.start = 0, .size = 4});
  ASSERT_OK(gi);
  StatusOr<ComputeInstance> ci = nvml().CreateComputeInstance(0, gi->id, 2);  // 3c fills a 3g
  ASSERT_OK(ci);
  EXPECT_EQ(ci->start, 0u);
  EXPECT_EQ(ci->size, 3u);
  StatusOr<std::vector<ComputeInstance>> cis = nvml().ComputeInstances(0, gi->id);
  ASSERT_OK(cis);
  ASSERT_EQ(cis->size(), 1u);
  EXPECT_EQ((*cis)[0].id, ci->id);

  EXPECT_STATUS(nvml().DestroyGpuInstance(0, gi->id), StatusCode::kFailedPrecondition,
                "nvmlGpuInstanceDestroy(gpu 0, gpu instance " + std::to_string(gi->id) +
                    "): In use by another client (NVML error 19)");
  ASSERT_OK(nvml().DestroyComputeInstance(0, gi->id, ci->id));
  ASSERT_OK(nvml().DestroyGpuInstance(0, gi->id));
}

TEST_F(NvmlTest, ComputeInstancesSplitAGpuInstance) {
  ASSERT_OK(Start("A100-40GB:mig=1"));
  StatusOr<GpuInstance> seven = nvml().CreateGpuInstance(0, 0, {.start = 0, .size = 8});
  ASSERT_OK(seven);
  for (int i = 0; i < 7; ++i) ASSERT_OK(nvml().CreateComputeInstance(0, seven->id, 0));
  EXPECT_EQ(nvml().CreateComputeInstance(0, seven->id, 0).status().code(),
            StatusCode::kResourceExhausted);
  StatusOr<std::vector<ComputeInstance>> cis = nvml().ComputeInstances(0, seven->id);
  ASSERT_OK(cis);
  ASSERT_EQ(cis->size(), 7u);
  for (uint32_t i = 0; i < 7; ++i) EXPECT_EQ((*cis)[i].start, i);

  ASSERT_OK(nvml().DestroyComputeInstance(0, seven->id, (*cis)[3].id));
  EXPECT_STATUS(nvml().DestroyComputeInstance(0, seven->id, 99), StatusCode::kNotFound,
                "nvmlGpuInstanceGetComputeInstanceById(gpu 0, gpu instance " +
                    std::to_string(seven->id) + ", compute instance 99): Not Found (NVML error 6)");
}

TEST_F(NvmlTest, AFourSliceInstanceOffersNoThreeSliceComputeInstance) {
  ASSERT_OK(Start("A100-40GB:mig=1"));
  StatusOr<GpuInstance> four = nvml().CreateGpuInstance(0, 5, {.start = 0, .size = 4});
  ASSERT_OK(four);
  EXPECT_EQ(nvml().CreateComputeInstance(0, four->id, 2).status().code(),
            StatusCode::kUnimplemented);
  StatusOr<ComputeInstance> two = nvml().CreateComputeInstance(0, four->id, 1);
  ASSERT_OK(two);
  EXPECT_EQ(two->size, 2u);
}

// --- processes and utilisation -----------------------------------------------------------------

TEST_F(NvmlTest, RunningProcessesWithTheirMemory) {
  ASSERT_OK(Start("A100-40GB:procs=4242/1024;4343/2048,A100-40GB"));
  StatusOr<std::vector<GpuProcess>> procs = nvml().RunningProcesses(0);
  ASSERT_OK(procs);
  ASSERT_EQ(procs->size(), 2u);
  EXPECT_EQ((*procs)[0].pid, 4242u);
  EXPECT_EQ((*procs)[0].used_memory, MiB(1024));
  EXPECT_FALSE((*procs)[0].gpu_instance_id.has_value());  // MIG off
  EXPECT_EQ((*procs)[1].pid, 4343u);
  EXPECT_EQ((*procs)[1].used_memory, MiB(2048));
  StatusOr<std::vector<GpuProcess>> none = nvml().RunningProcesses(1);
  ASSERT_OK(none);
  EXPECT_THAT(*none, IsEmpty());
}

// The processes the fake CUDA driver records (TESSERA_FAKE_GPU_STATE/<pid>: "<gpu> <bytes>" lines)
// follow the configured ones, with their context added; processes that are gone are not listed.
TEST_F(NvmlTest, RunningProcessesIncludeWhatTheFakeDriverRecorded) {
  const std::string dir = ::testing::TempDir() + "/fake_gpu_state." + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  const std::string mine = dir + "/" + std::to_string(::getpid()), theirs = dir + "/" + std::to_string(gone);
  std::ofstream(mine) << "0 1048576\n1 2097152\n";
  std::ofstream(theirs) << "0 4194304\n";
  setenv("TESSERA_FAKE_GPU_STATE", dir.c_str(), 1);
  setenv("TESSERA_FAKE_GPU_CONTEXT_MIB", "100", 1);
  ASSERT_OK(Start("A100-40GB:procs=4242/1024,A100-40GB"));
  StatusOr<std::vector<GpuProcess>> zero = nvml().RunningProcesses(0);
  StatusOr<std::vector<GpuProcess>> one = nvml().RunningProcesses(1);
  unsetenv("TESSERA_FAKE_GPU_STATE");
  unsetenv("TESSERA_FAKE_GPU_CONTEXT_MIB");
  std::remove(mine.c_str());
  std::remove(theirs.c_str());
  ::rmdir(dir.c_str());
  ASSERT_OK(zero);
  ASSERT_EQ(zero->size(), 2u);
  EXPECT_EQ((*zero)[0].pid, 4242u);
  EXPECT_EQ((*zero)[1].pid, static_cast<uint32_t>(::getpid()));
  EXPECT_EQ((*zero)[1].used_memory, MiB(101));
  ASSERT_OK(one);
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].used_memory, MiB(102));
}

// A process that loaded a second copy of the driver from another file name (a tenant getting round
// the shim, docs/security.md) has one record per copy (<pid>, <pid>.<file name>): NVML lists the
// process once with the sum, as the real one sees the process's memory whichever library
// allocated it.
TEST_F(NvmlTest, RunningProcessesAddUpTheCopiesOfTheDriverInOneProcess) {
  const std::string dir = ::testing::TempDir() + "/fake_gpu_state_copies." + std::to_string(::getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0) << dir;
  const std::string first = dir + "/" + std::to_string(::getpid()), copy = first + ".libcuda-copy.so";
  std::ofstream(first) << "0 1048576\n";
  std::ofstream(copy) << "0 4194304\n";
  setenv("TESSERA_FAKE_GPU_STATE", dir.c_str(), 1);
  setenv("TESSERA_FAKE_GPU_CONTEXT_MIB", "100", 1);
  ASSERT_OK(Start("A100-40GB"));
  StatusOr<std::vector<GpuProcess>> procs = nvml().RunningProcesses(0);
  unsetenv("TESSERA_FAKE_GPU_STATE");
  unsetenv("TESSERA_FAKE_GPU_CONTEXT_MIB");
  std::remove(first.c_str());
  std::remove(copy.c_str());
  ::rmdir(dir.c_str());
  ASSERT_OK(procs);
  ASSERT_EQ(procs->size(), 1u);
  EXPECT_EQ((*procs)[0].pid, static_cast<uint32_t>(::getpid()));
  EXPECT_EQ((*procs)[0].used_memory, MiB(105));  // 1 + 4 + one context
}

// Some R535 drivers wrote 32-byte entries through nvmlDeviceGetComputeRunningProcesses_v3.
TEST_F(NvmlTest, RunningProcessesDetectTheR535EntrySize) {
  ASSERT_OK(Start("A100-40GB:procstride=32:procs=10/100;11/200;12/300"));
  StatusOr<std::vector<GpuProcess>> procs = nvml().RunningProcesses(0);
  ASSERT_OK(procs);
  ASSERT_EQ(procs->size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*procs)[i].pid, 10 + i);
    EXPECT_EQ((*procs)[i].used_memory, MiB(100 * (i + 1)));
  }
}

TEST_F(NvmlTest, ProcessesUnderMigNameTheirInstances) {
  ASSERT_OK(Start("H100-80GB:mig=1:procs=77/512/1/0"));
  StatusOr<GpuInstance> gi = nvml().CreateGpuInstance(0, 0, {.start = 0, .size = 8});
  ASSERT_OK(gi);
  ASSERT_EQ(gi->id, 1u);  // the id the configured process runs in
  StatusOr<std::vector<GpuProcess>> procs = nvml().RunningProcesses(0);
  ASSERT_OK(procs);
  ASSERT_EQ(procs->size(), 1u);
  EXPECT_EQ((*procs)[0].gpu_instance_id, 1u);
  EXPECT_EQ((*procs)[0].compute_instance_id, 0u);
  EXPECT_EQ(nvml().DestroyGpuInstance(0, 1).code(), StatusCode::kFailedPrecondition);
}

TEST_F(NvmlTest, UtilisationRatesExceptUnderMig) {
  ASSERT_OK(Start("A100-40GB:util=37/12,H100-80GB:mig=1"));
  StatusOr<Utilization> u = nvml().UtilizationRates(0);
  ASSERT_OK(u);
  EXPECT_EQ(u->gpu_percent, 37u);
  EXPECT_EQ(u->memory_percent, 12u);
  EXPECT_STATUS(nvml().UtilizationRates(1), StatusCode::kUnimplemented,
                "nvmlDeviceGetUtilizationRates(gpu 1): Not Supported (NVML error 3)");
}

// --- injected failures and the code mapping ----------------------------------------------------

TEST_F(NvmlTest, InjectedFailuresCarryTheCallAndNvmlString) {
  ASSERT_OK(Start("A100-40GB:mig=1",
                  "nvmlDeviceGetMemoryInfo:999,nvmlDeviceGetUUID:15,"
                  "nvmlDeviceCreateGpuInstanceWithPlacement:4,nvmlDeviceGetGpuInstances:16"));
  EXPECT_STATUS(nvml().Memory(0), StatusCode::kUnknown,
                "nvmlDeviceGetMemoryInfo(gpu 0): Unknown Error (NVML error 999)");
  EXPECT_STATUS(nvml().DeviceUuid(0), StatusCode::kUnavailable,
                "nvmlDeviceGetUUID(gpu 0): GPU is lost (NVML error 15)");
  EXPECT_STATUS(nvml().CreateGpuInstance(0, 9, {.start = 0, .size = 4}),
                StatusCode::kPermissionDenied,
                "nvmlDeviceCreateGpuInstanceWithPlacement(gpu 0, profile id 9, placement 0:4): "
                "Insufficient Permissions (NVML error 4)");
  EXPECT_STATUS(nvml().GpuInstances(0), StatusCode::kFailedPrecondition,
                "nvmlDeviceGetGpuInstances(gpu 0, profile id 19): GPU requires restart "
                "(NVML error 16)");
  ASSERT_OK(nvml().DeviceName(0));  // other calls are unaffected
}

TEST(NvmlReturnToStatusCodeTest, MapsEveryDocumentedCode) {
  EXPECT_EQ(NvmlReturnToStatusCode(0), StatusCode::kOk);
  EXPECT_EQ(NvmlReturnToStatusCode(1), StatusCode::kFailedPrecondition);  // uninitialized
  EXPECT_EQ(NvmlReturnToStatusCode(2), StatusCode::kInvalidArgument);
  EXPECT_EQ(NvmlReturnToStatusCode(3), StatusCode::kUnimplemented);  // not supported
  EXPECT_EQ(NvmlReturnToStatusCode(4), StatusCode::kPermissionDenied);
  EXPECT_EQ(NvmlReturnToStatusCode(6), StatusCode::kNotFound);
  EXPECT_EQ(NvmlReturnToStatusCode(9), StatusCode::kUnavailable);  // driver not loaded
  EXPECT_EQ(NvmlReturnToStatusCode(10), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(NvmlReturnToStatusCode(14), StatusCode::kDataLoss);  // corrupted infoROM
  EXPECT_EQ(NvmlReturnToStatusCode(15), StatusCode::kUnavailable);  // GPU is lost
  EXPECT_EQ(NvmlReturnToStatusCode(16), StatusCode::kFailedPrecondition);  // reset required
  EXPECT_EQ(NvmlReturnToStatusCode(19), StatusCode::kFailedPrecondition);  // in use
  EXPECT_EQ(NvmlReturnToStatusCode(20), StatusCode::kResourceExhausted);  // memory
  EXPECT_EQ(NvmlReturnToStatusCode(23), StatusCode::kResourceExhausted);  // MIG resources
  EXPECT_EQ(NvmlReturnToStatusCode(25), StatusCode::kUnimplemented);  // struct version
  EXPECT_EQ(NvmlReturnToStatusCode(999), StatusCode::kUnknown);
  EXPECT_EQ(NvmlReturnToStatusCode(12345), StatusCode::kUnknown);
}

// --- the read-only probe -----------------------------------------------------------------------

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `command`, returning its stdout and setting *exit_code.
std::string RunCommand(const std::string& command, int* exit_code) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

TEST_F(NvmlTest, MutationLogRecordsInstanceChanges) {
  const std::string log = ::testing::TempDir() + "/nvml_mutations_direct." + std::to_string(::getpid()) + ".log";
  std::remove(log.c_str());
  setenv("TESSERA_FAKE_NVML_MUTATION_LOG", log.c_str(), 1);
  ASSERT_OK(Start("H100-80GB:mig=1"));
  StatusOr<GpuInstance> gi = nvml().CreateGpuInstance(0, 0, {.start = 0, .size = 8});
  ASSERT_OK(gi);
  ASSERT_OK(nvml().DestroyGpuInstance(0, gi->id));
  EXPECT_EQ(ReadFile(log), "nvmlDeviceCreateGpuInstanceWithPlacement\nnvmlGpuInstanceDestroy\n");
}

TEST_F(NvmlTest, ProbePrintsJsonAndChangesNothing) {
  const std::string log = ::testing::TempDir() + "/nvml_mutations_probe." + std::to_string(::getpid()) + ".log";
  std::remove(log.c_str());
  setenv("TESSERA_FAKE_NVML_MUTATION_LOG", log.c_str(), 1);
  setenv("TESSERA_FAKE_NVML_CONFIG", "H100-80GB:mig=1:procs=4242/100,V100M32", 1);
  int exit_code = -1;
  const std::string out =
      RunCommand(std::string(TESSERA_NVML_PROBE) + " --library " + kFakePath, &exit_code);
  ASSERT_EQ(exit_code, 0) << out;
  nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_EQ(j["library"], kFakePath);
  ASSERT_EQ(j["device_count"], 2);
  const nlohmann::json& h100 = j["gpus"][0];
  EXPECT_EQ(h100["name"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(h100["memory_mib"]["total"], 81559);
  EXPECT_EQ(h100["memory_mib"]["used"], 100);
  EXPECT_EQ(h100["mig_mode"]["current"], "enabled");
  ASSERT_EQ(h100["gpu_instance_profiles"].size(), kGpuInstanceProfileIndexCount);
  const nlohmann::json& three = h100["gpu_instance_profiles"][2];
  EXPECT_EQ(three["id"], 9);
  EXPECT_EQ(three["name"], "MIG 3g.40gb");
  EXPECT_EQ(three["slice_count"], 3);
  EXPECT_EQ(three["instance_count"], 2);
  EXPECT_EQ(three["placements"],
            nlohmann::json::parse(R"([{"start": 0, "size": 4}, {"start": 4, "size": 4}])"));
  EXPECT_THAT(h100["gpu_instance_profiles"][5]["error"].get<std::string>(),
              HasSubstr("Not Supported"));
  EXPECT_EQ(h100["processes"][0]["pid"], 4242);
  const nlohmann::json& v100 = j["gpus"][1];
  EXPECT_THAT(v100["mig_mode"]["error"].get<std::string>(),
              StartsWith("UNIMPLEMENTED: nvmlDeviceGetMigMode(gpu 1): Not Supported"));
  EXPECT_EQ(v100["gpu_instances"], nlohmann::json::array());
  // Read-only: the fake saw no call that could change MIG state.
  EXPECT_EQ(ReadFile(log), "");
}

TEST_F(NvmlTest, ProbeReportsAMissingLibrary) {
  int exit_code = -1;
  const std::string out =
      RunCommand(std::string(TESSERA_NVML_PROBE) + " --library /nonexistent/libnvidia-ml.so.1",
                 &exit_code);
  EXPECT_EQ(exit_code, 1);
  nlohmann::json j = nlohmann::json::parse(out);
  EXPECT_THAT(j["error"].get<std::string>(),
              StartsWith("UNAVAILABLE: /nonexistent/libnvidia-ml.so.1 not found: "));
}

}  // namespace
}  // namespace tessera::enforce
