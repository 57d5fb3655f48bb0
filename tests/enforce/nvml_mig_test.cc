// The fake NVML's MIG rules against the catalog and the MIG planner's layout rules, for every
// MIG model of the catalog; the adapter's GPU- and compute-instance creation with placement,
// per-process utilisation; and MIG plans applied through the adapter (ApplyMigSteps). Every
// test loads the in-tree fake by absolute path; none can touch a real GPU.
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>  // getpid: temporary files per process (worktrees run tests at once)

#include "tessera/core/gpu_model.h"
#include "tessera/enforce/mig_apply.h"
#include "tessera/enforce/nvml.h"
#include "tessera/partition/mig_layout.h"
#include "tessera/partition/mig_planner.h"

namespace tessera::enforce {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const char* const kFakePath = TESSERA_FAKE_NVML_PATH;

const Status& StatusOf(const Status& s) { return s; }
template <typename T>
const Status& StatusOf(const StatusOr<T>& s) {
  return s.status();
}

#define ASSERT_OK(expr)                                                                         \
  do {                                                                                          \
    const auto& tessera_result_ = (expr);                                                       \
    ASSERT_TRUE(StatusOf(tessera_result_).ok()) << StatusOf(tessera_result_).ToString();        \
  } while (0)

#define EXPECT_STATUS(expr, want_code, want_message)                \
  do {                                                              \
    const auto& tessera_result_ = (expr);                           \
    EXPECT_EQ(StatusOf(tessera_result_).code(), (want_code))        \
        << StatusOf(tessera_result_).ToString();                    \
    EXPECT_EQ(StatusOf(tessera_result_).message(), (want_message)); \
  } while (0)

// Every catalog model with MIG.
// Nothing was changed: the fake's mutation log is absent or empty.
#define EXPECT_OK_OR_EMPTY(log_path)                                        \
  do {                                                                      \
    std::ifstream tessera_log_(log_path);                                   \
    std::stringstream tessera_text_;                                        \
    if (tessera_log_) tessera_text_ << tessera_log_.rdbuf();                \
    EXPECT_EQ(tessera_text_.str(), "") << "the check changed MIG instances"; \
  } while (0)

std::vector<const GpuModelInfo*> MigModels() {
  std::vector<const GpuModelInfo*> out;
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  for (size_t i = 0; i < catalog.size(); ++i) {
    const GpuModelInfo& m = catalog.info(GpuModelId(static_cast<uint32_t>(i)));
    if (m.mig) out.push_back(&m);
  }
  return out;
}

const MigGeometry& Geometry(const std::string& model) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  return *catalog.info(*catalog.Find(model)).mig;
}

class NvmlMigTest : public ::testing::Test {
 protected:
  void TearDown() override {
    nvml_.reset();
    unsetenv("TESSERA_FAKE_NVML_CONFIG");
    unsetenv("TESSERA_FAKE_NVML_FAIL");
    unsetenv("TESSERA_FAKE_NVML_MUTATION_LOG");
  }

  Status Start(const std::string& config, const std::string& fail = "") {
    nvml_.reset();
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

// --- configuration -----------------------------------------------------------------------------

TEST_F(NvmlMigTest, ExposesAnyCatalogModelAndGpuCount) {
  ASSERT_OK(Start("H200-141GB*3:mig=1,A30-24GB,T4*2"));
  EXPECT_EQ(*nvml().DeviceCount(), 6u);
  EXPECT_EQ(*nvml().DeviceName(0), "NVIDIA H200");
  EXPECT_EQ(*nvml().DeviceName(2), "NVIDIA H200");
  EXPECT_EQ(*nvml().DeviceName(3), "NVIDIA A30");
  EXPECT_EQ(*nvml().DeviceName(5), "Tesla T4");
  EXPECT_EQ(nvml().Memory(1)->total, MiB(143771));  // the catalog's H200 memory
  EXPECT_TRUE(nvml().GetMigMode(2)->current_enabled);
  EXPECT_FALSE(nvml().GetMigMode(3)->current_enabled);
  EXPECT_EQ(nvml().GetMigMode(4).status().code(), StatusCode::kUnimplemented);  // T4: no MIG
  EXPECT_EQ(*nvml().DeviceUuid(5), "GPU-fa4e0000-0000-4000-8000-000000000005");
}

TEST_F(NvmlMigTest, BadGpuCountsAndMigOnModelsWithoutMigFailInit) {
  for (const char* config : {"H100-80GB*0", "H100-80GB*65", "H100-80GB*x", "T4:mig=1"}) {
    SCOPED_TRACE(config);
    EXPECT_EQ(Start(config).code(), StatusCode::kUnknown);
  }
}

// --- GPU instances: the catalog's placement rules, every model ---------------------------------

// On an empty GPU a GI is created exactly at the profile's catalog starts; every other start,
// and a wrong size, is INVALID_ARGUMENT; and a destroy frees the slot again.
TEST_F(NvmlMigTest, EveryModelAcceptsExactlyTheCatalogStarts) {
  for (const GpuModelInfo* model : MigModels()) {
    ASSERT_OK(Start(model->name + ":mig=1"));
    const MigGeometry& g = *model->mig;
    for (const MigProfile& p : g.profiles) {
      SCOPED_TRACE(model->name + " " + p.name);
      const auto id = static_cast<uint32_t>(p.profile_id);
      StatusOr<std::vector<GpuInstancePlacement>> possible =
          nvml().GpuInstancePossiblePlacements(0, id);
      ASSERT_OK(possible);
      ASSERT_EQ(possible->size(), p.starts.size());
      for (uint32_t start = 0; start < static_cast<uint32_t>(g.memory_slices); ++start) {
        const bool legal = std::find(p.starts.begin(), p.starts.end(), static_cast<int>(start)) !=
                           p.starts.end();
        const GpuInstancePlacement at{start, static_cast<uint32_t>(p.size)};
        StatusOr<GpuInstance> gi = nvml().CreateGpuInstance(0, id, at);
        if (!legal) {
          EXPECT_STATUS(gi, StatusCode::kInvalidArgument,
                        "nvmlDeviceCreateGpuInstanceWithPlacement(gpu 0, profile id " +
                            std::to_string(id) + ", placement " + std::to_string(start) + ":" +
                            std::to_string(p.size) + "): Invalid Argument (NVML error 2)");
          continue;
        }
        ASSERT_OK(gi);
        EXPECT_EQ(gi->placement, at);
        ASSERT_OK(nvml().DestroyGpuInstance(0, gi->id));
        // A wrong size at a legal start.
        EXPECT_EQ(nvml().CreateGpuInstance(0, id, {start, at.size + 1}).status().code(),
                  StatusCode::kInvalidArgument);
      }
      EXPECT_THAT(*nvml().GpuInstances(0), IsEmpty());
    }
  }
}

// Random create/destroy sequences: the fake creates a GI at a legal start exactly when the MIG
// planner's layout rules (partition::CanAdd) allow it, refuses it with INSUFFICIENT_RESOURCES
// otherwise, and lists what the layout holds.
TEST_F(NvmlMigTest, RandomSequencesAgreeWithThePlannersLayoutRules) {
  std::mt19937 rng(20261130);
  for (const GpuModelInfo* model : MigModels()) {
    SCOPED_TRACE(model->name);
    ASSERT_OK(Start(model->name + ":mig=1"));
    const MigGeometry& g = *model->mig;
    partition::MigLayout layout;
    std::vector<uint32_t> ids;  // GI id per layout entry
    int created = 0;
    int refused = 0;
    for (int op = 0; op < 300; ++op) {
      if (!layout.empty() && rng() % 4 == 0) {
        const size_t k = rng() % layout.size();
        ASSERT_OK(nvml().DestroyGpuInstance(0, ids[k]));
        layout.erase(layout.begin() + static_cast<std::ptrdiff_t>(k));
        ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(k));
        continue;
      }
      const int pi = static_cast<int>(rng() % g.profiles.size());
      const MigProfile& p = g.profiles[static_cast<size_t>(pi)];
      const int start = p.starts[rng() % p.starts.size()];
      const partition::MigInstance inst{pi, start};
      const bool allowed = partition::CanAdd(g, layout, inst);
      StatusOr<GpuInstance> gi =
          nvml().CreateGpuInstance(0, static_cast<uint32_t>(p.profile_id),
                                   {static_cast<uint32_t>(start), static_cast<uint32_t>(p.size)});
      if (allowed) {
        ASSERT_OK(gi);
        layout.push_back(inst);
        ids.push_back(gi->id);
        ++created;
      } else {
        ASSERT_EQ(gi.status().code(), StatusCode::kResourceExhausted)
            << p.name << "@" << start << " next to "
            << partition::FormatLayout(g, layout) << ": " << gi.status().ToString();
        EXPECT_THAT(gi.status().message(), HasSubstr("Insufficient Resources (NVML error 23)"));
        ++refused;
      }
      ASSERT_OK(partition::ValidateLayout(g, layout));
    }
    EXPECT_GT(created, 20);
    EXPECT_GT(refused, 20);
    StatusOr<std::vector<GpuInstance>> gis = nvml().GpuInstances(0);
    ASSERT_OK(gis);
    ASSERT_EQ(gis->size(), layout.size());
    std::sort(layout.begin(), layout.end(),
              [](const auto& a, const auto& b) { return a.start < b.start; });
    for (size_t k = 0; k < layout.size(); ++k) {
      const MigProfile& p = g.profiles[static_cast<size_t>(layout[k].profile)];
      EXPECT_EQ((*gis)[k].profile_id, static_cast<uint32_t>(p.profile_id));
      EXPECT_EQ((*gis)[k].placement.start, static_cast<uint32_t>(layout[k].start));
    }
  }
}

TEST_F(NvmlMigTest, RefusalsOnA30AndH200) {
  ASSERT_OK(Start("A30-24GB:mig=1,H200-141GB:mig=1,H200-141GB:mig=0"));
  // A30: 2g.12gb (id 5) at 0 and 2; a 1g.6gb (id 14) at 2 overlaps, 4g.24gb (id 0) needs all.
  ASSERT_OK(nvml().CreateGpuInstance(0, 5, {.start = 2, .size = 2}));
  EXPECT_STATUS(nvml().CreateGpuInstance(0, 14, {.start = 3, .size = 1}),
                StatusCode::kResourceExhausted,
                "nvmlDeviceCreateGpuInstanceWithPlacement(gpu 0, profile id 14, placement 3:1): "
                "Insufficient Resources (NVML error 23)");
  EXPECT_EQ(nvml().CreateGpuInstance(0, 0, {.start = 0, .size = 4}).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(nvml().CreateGpuInstance(0, 5, {.start = 1, .size = 2}).status().code(),
            StatusCode::kInvalidArgument);  // 2g starts at 0 or 2 only
  // The +me 2g shares the 2g placements but is one per GPU.
  ASSERT_OK(nvml().CreateGpuInstance(0, 6, {.start = 0, .size = 2}));
  EXPECT_THAT(*nvml().GpuInstanceRemainingCapacity(0, 14), 0u);

  // H200 (ids as confirmed on hardware): 3g.71gb is id 9 at 0 and 4.
  ASSERT_OK(nvml().CreateGpuInstance(1, 9, {.start = 4, .size = 4}));
  EXPECT_EQ(*nvml().GpuInstanceRemainingCapacity(1, 9), 1u);
  EXPECT_EQ(*nvml().GpuInstanceRemainingCapacity(1, 19), 4u);  // 1g at 0..3
  EXPECT_EQ(*nvml().GpuInstanceRemainingCapacity(1, 0), 0u);   // 7g
  // MIG mode off: creation is not supported, whatever the placement.
  EXPECT_STATUS(nvml().CreateGpuInstance(2, 9, {.start = 0, .size = 4}),
                StatusCode::kUnimplemented,
                "nvmlDeviceCreateGpuInstanceWithPlacement(gpu 2, profile id 9, placement 0:4): "
                "Not Supported (NVML error 3)");
  EXPECT_EQ(nvml().GpuInstanceRemainingCapacity(2, 9).status().code(), StatusCode::kUnimplemented);
}

TEST_F(NvmlMigTest, DestroyFreesTheSlotForAnotherProfile) {
  ASSERT_OK(Start("H100-80GB:mig=1"));
  StatusOr<GpuInstance> seven = nvml().CreateGpuInstance(0, 0, {.start = 0, .size = 8});
  ASSERT_OK(seven);
  EXPECT_EQ(nvml().CreateGpuInstance(0, 19, {.start = 6, .size = 1}).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(*nvml().GpuInstanceRemainingCapacity(0, 19), 0u);
  ASSERT_OK(nvml().DestroyGpuInstance(0, seven->id));
  EXPECT_EQ(*nvml().GpuInstanceRemainingCapacity(0, 19), 7u);
  ASSERT_OK(nvml().CreateGpuInstance(0, 19, {.start = 6, .size = 1}));
  ASSERT_OK(nvml().CreateGpuInstance(0, 9, {.start = 0, .size = 4}));
  EXPECT_EQ(*nvml().GpuInstanceRemainingCapacity(0, 19), 2u);  // 4 and 5
}

// --- compute instances -------------------------------------------------------------------------

// In every GI of every model: the CI profiles and placements the driver offers are the
// catalog's, a CI is created exactly at its legal starts, overlaps and counts are refused.
TEST_F(NvmlMigTest, ComputeInstancePlacementsFollowTheCatalog) {
  for (const GpuModelInfo* model : MigModels()) {
    ASSERT_OK(Start(model->name + ":mig=1"));
    for (const MigProfile& p : model->mig->profiles) {
      SCOPED_TRACE(model->name + " " + p.name);
      StatusOr<GpuInstance> gi = nvml().CreateGpuInstance(
          0, static_cast<uint32_t>(p.profile_id),
          {static_cast<uint32_t>(p.starts[0]), static_cast<uint32_t>(p.size)});
      ASSERT_OK(gi);
      std::vector<uint32_t> offered;
      for (uint32_t index = 0; index < kComputeInstanceProfileIndexCount; ++index) {
        if (nvml().ComputeInstancePossiblePlacements(0, gi->id, index).ok()) offered.push_back(index);
      }
      std::vector<uint32_t> want;
      for (const MigComputeProfile& c : p.compute_profiles) {
        want.push_back(static_cast<uint32_t>(c.nvml_profile_index));
      }
      EXPECT_EQ(offered, want);
      for (const MigComputeProfile& c : p.compute_profiles) {
        SCOPED_TRACE(c.name);
        const auto index = static_cast<uint32_t>(c.nvml_profile_index);
        const auto size = static_cast<uint32_t>(c.compute_slices);
        StatusOr<std::vector<ComputeInstancePlacement>> pl =
            nvml().ComputeInstancePossiblePlacements(0, gi->id, index);
        ASSERT_OK(pl);
        std::vector<int> starts;
        for (const ComputeInstancePlacement& x : *pl) {
          starts.push_back(static_cast<int>(x.start));
          EXPECT_EQ(x.size, size);
        }
        EXPECT_EQ(starts, c.starts);
        for (uint32_t start = 0; start < static_cast<uint32_t>(p.compute_slices); ++start) {
          const bool legal = std::find(c.starts.begin(), c.starts.end(),
                                       static_cast<int>(start)) != c.starts.end();
          StatusOr<ComputeInstance> ci = nvml().CreateComputeInstanceAt(0, gi->id, index,
                                                                        {start, size});
          if (!legal) {
            EXPECT_EQ(ci.status().code(), StatusCode::kInvalidArgument) << start;
            continue;
          }
          ASSERT_OK(ci);
          EXPECT_EQ(ci->start, start);
          EXPECT_EQ(ci->size, size);
          EXPECT_EQ(ci->profile_id, index);
          // The same slices again: overlap.
          EXPECT_EQ(nvml().CreateComputeInstanceAt(0, gi->id, index, {start, size}).status().code(),
                    StatusCode::kResourceExhausted);
          ASSERT_OK(nvml().DestroyComputeInstance(0, gi->id, ci->id));
        }
        // Filling the GI with this CI profile reaches its max count, then stops.
        for (int k = 0; k < c.max_count; ++k) ASSERT_OK(nvml().CreateComputeInstance(0, gi->id, index));
        EXPECT_EQ(nvml().CreateComputeInstance(0, gi->id, index).status().code(),
                  StatusCode::kResourceExhausted);
        StatusOr<std::vector<ComputeInstance>> cis = nvml().ComputeInstances(0, gi->id);
        ASSERT_OK(cis);
        ASSERT_EQ(cis->size(), static_cast<size_t>(c.max_count));
        for (const ComputeInstance& ci : *cis) ASSERT_OK(nvml().DestroyComputeInstance(0, gi->id, ci.id));
      }
      ASSERT_OK(nvml().DestroyGpuInstance(0, gi->id));
    }
  }
}

TEST_F(NvmlMigTest, ComputeInstanceRefusalsCarryTheCallAndNvmlString) {
  ASSERT_OK(Start("H100-80GB:mig=1"));
  StatusOr<GpuInstance> four = nvml().CreateGpuInstance(0, 5, {.start = 0, .size = 4});
  ASSERT_OK(four);
  const std::string gi = std::to_string(four->id);
  EXPECT_STATUS(nvml().CreateComputeInstanceAt(0, four->id, 2, {0, 3}), StatusCode::kUnimplemented,
                "nvmlGpuInstanceGetComputeInstanceProfileInfo(gpu 0, gpu instance " + gi +
                    ", profile index 2, placement 0:3): Not Supported (NVML error 3)");
  EXPECT_STATUS(nvml().CreateComputeInstanceAt(0, four->id, 1, {1, 2}),
                StatusCode::kInvalidArgument,
                "nvmlGpuInstanceCreateComputeInstanceWithPlacement(gpu 0, gpu instance " + gi +
                    ", profile index 1, placement 1:2): Invalid Argument (NVML error 2)");
  ASSERT_OK(nvml().CreateComputeInstanceAt(0, four->id, 1, {2, 2}));  // 2c at 2
  EXPECT_STATUS(nvml().CreateComputeInstanceAt(0, four->id, 0, {3, 1}),
                StatusCode::kResourceExhausted,
                "nvmlGpuInstanceCreateComputeInstanceWithPlacement(gpu 0, gpu instance " + gi +
                    ", profile index 0, placement 3:1): Insufficient Resources (NVML error 23)");
  ASSERT_OK(nvml().CreateComputeInstanceAt(0, four->id, 0, {1, 1}));  // 1c at 1
  StatusOr<std::vector<ComputeInstance>> cis = nvml().ComputeInstances(0, four->id);
  ASSERT_OK(cis);
  ASSERT_EQ(cis->size(), 2u);
  EXPECT_EQ((*cis)[0].start, 1u);
  EXPECT_EQ((*cis)[1].start, 2u);
}

TEST_F(NvmlMigTest, AComputeInstanceWithAProcessIsInUse) {
  ASSERT_OK(Start("H100-80GB:mig=1:procs=77/512/1/0"));
  StatusOr<GpuInstance> gi = nvml().CreateGpuInstance(0, 9, {.start = 4, .size = 4});
  ASSERT_OK(gi);
  ASSERT_EQ(gi->id, 1u);
  StatusOr<ComputeInstance> ci = nvml().CreateComputeInstanceAt(0, 1, 2, {0, 3});
  ASSERT_OK(ci);
  ASSERT_EQ(ci->id, 0u);  // process 77 runs on GI 1 / CI 0
  EXPECT_STATUS(nvml().DestroyComputeInstance(0, 1, 0), StatusCode::kFailedPrecondition,
                "nvmlComputeInstanceDestroy(gpu 0, gpu instance 1, compute instance 0): In use by "
                "another client (NVML error 19)");
}

// --- per-process utilisation --------------------------------------------------------------------

TEST_F(NvmlMigTest, ProcessUtilizationSamplesExceptUnderMig) {
  ASSERT_OK(Start("A100-80GB:putil=4242/55/20;4343/7/3,A100-80GB,H100-80GB:mig=1:putil=1/2/3"));
  StatusOr<std::vector<ProcessUtilization>> u = nvml().ProcessUtilizations(0, 0);
  ASSERT_OK(u);
  ASSERT_EQ(u->size(), 2u);
  EXPECT_EQ((*u)[0].pid, 4242u);
  EXPECT_EQ((*u)[0].sm_percent, 55u);
  EXPECT_EQ((*u)[0].memory_percent, 20u);
  EXPECT_EQ((*u)[1].pid, 4343u);
  EXPECT_EQ((*u)[1].sm_percent, 7u);
  EXPECT_EQ((*u)[1].timestamp_us, 1000000u);
  // Nothing newer than the last sample seen, and a GPU without samples: empty, not an error.
  EXPECT_THAT(*nvml().ProcessUtilizations(0, (*u)[0].timestamp_us), IsEmpty());
  EXPECT_THAT(*nvml().ProcessUtilizations(1, 0), IsEmpty());
  EXPECT_STATUS(nvml().ProcessUtilizations(2, 0), StatusCode::kUnimplemented,
                "nvmlDeviceGetProcessUtilization(gpu 2): Not Supported (NVML error 3)");
}

// --- applying MIG plans --------------------------------------------------------------------------

// The planner's steps as MigSteps (catalog terms -> NVML terms).
std::vector<MigStep> ToSteps(const MigGeometry& g, const partition::MigPlan& plan) {
  std::vector<MigStep> out;
  for (const partition::MigPlanStep& s : plan.steps) {
    StatusOr<MigStep> step = CatalogMigStep(
        g, s.kind == partition::MigPlanStep::Kind::kCreate ? MigStep::Kind::kCreate
                                                           : MigStep::Kind::kDestroy,
        static_cast<uint32_t>(s.gpu), s.instance.profile, s.instance.start);
    EXPECT_TRUE(step.ok()) << step.status().ToString();
    if (step.ok()) out.push_back(*step);
  }
  return out;
}

// The layout the driver holds on `gpu`, in catalog terms, sorted by start.
partition::MigLayout DriverLayout(const NvmlApi& nvml, const MigGeometry& g, uint32_t gpu) {
  partition::MigLayout out;
  StatusOr<std::vector<MigInstanceState>> state = ReadMigInstances(nvml, gpu);
  EXPECT_TRUE(state.ok()) << state.status().ToString();
  if (!state.ok()) return out;
  for (const MigInstanceState& s : *state) {
    for (size_t p = 0; p < g.profiles.size(); ++p) {
      if (static_cast<uint32_t>(g.profiles[p].profile_id) == s.gpu_instance.profile_id) {
        out.push_back({static_cast<int>(p), static_cast<int>(s.gpu_instance.placement.start)});
      }
    }
  }
  return out;
}

partition::MigLayout Sorted(partition::MigLayout l) {
  std::sort(l.begin(), l.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  return l;
}

TEST_F(NvmlMigTest, CatalogMigStepCarriesNvmlTerms) {
  const MigGeometry& g = Geometry("H100-80GB");
  StatusOr<int> three = partition::FindProfileIndex(g, "3g.40gb");
  ASSERT_OK(three);
  StatusOr<MigStep> step = CatalogMigStep(g, MigStep::Kind::kCreate, 1, *three, 4);
  ASSERT_OK(step);
  EXPECT_EQ(step->profile, "3g.40gb");
  EXPECT_EQ(step->profile_index, 2u);
  EXPECT_EQ(step->compute_slices, 3u);
  EXPECT_EQ(step->placement, (GpuInstancePlacement{4, 4}));
  EXPECT_EQ(step->ci_profile_index, 2);  // 3c fills a 3g
  EXPECT_EQ(step->Describe(), "create 3g.40gb@4 on GPU 1");
  EXPECT_STATUS(CatalogMigStep(g, MigStep::Kind::kCreate, 0, *three, 2),
                StatusCode::kInvalidArgument, "MIG profile 3g.40gb cannot start at memory slice 2");
  EXPECT_EQ(CatalogMigStep(g, MigStep::Kind::kCreate, 0, 99, 0).status().code(),
            StatusCode::kInvalidArgument);
}

// A plan made for one model is refused on GPUs of another, by the names NVML reports, before
// anything changes (the bug: an H100 plan was "applied" to A100s).
TEST_F(NvmlMigTest, StepsForAnotherModelAreRefusedByTheGpusNvmlName) {
  const std::string log = ::testing::TempDir() + "/model_check_mutations." + std::to_string(::getpid()) + ".log";
  std::remove(log.c_str());
  ASSERT_OK(Start("A100-40GB:mig=1,A100-40GB:mig=1"));
  setenv("TESSERA_FAKE_NVML_MUTATION_LOG", log.c_str(), 1);
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  const MigGeometry& h100 = Geometry("H100-80GB");
  StatusOr<MigStep> step = CatalogMigStep(h100, MigStep::Kind::kCreate, 1, *partition::FindProfileIndex(h100, "7g.80gb"), 0);
  ASSERT_OK(step);
  EXPECT_STATUS(CheckMigStepsModel(nvml(), cat, *cat.Find("H100-80GB"), {*step}), StatusCode::kFailedPrecondition,
                "GPU 1 is an NVIDIA A100-SXM4-40GB (A100-40GB), not a H100-80GB: the plan was made for H100-80GB");
  EXPECT_OK_OR_EMPTY(log);
  const MigGeometry& a100 = Geometry("A100-40GB");
  StatusOr<MigStep> ok = CatalogMigStep(a100, MigStep::Kind::kCreate, 0, *partition::FindProfileIndex(a100, "7g.40gb"), 0);
  ASSERT_OK(ok);
  ASSERT_OK(CheckMigStepsModel(nvml(), cat, *cat.Find("A100-40GB"), {*ok}));
  // The NVML name is a model name too.
  ASSERT_OK(CheckMigStepsModel(nvml(), cat, *cat.Find("NVIDIA A100-SXM4-40GB"), {*ok}));
}

// The issue's example: 4 x H100, demand 1g.10gb=9, 3g.40gb=2, applied through the adapter,
// leaves exactly the planned layouts, each GI with the compute instance that fills it.
TEST_F(NvmlMigTest, AppliedPlanEndsInThePlannedLayout) {
  const MigGeometry& g = Geometry("H100-80GB");
  StatusOr<partition::MigPlan> plan = partition::PlanMig(
      g, std::vector<partition::MigGpuState>(4), {{"1g.10gb", 9}, {"3g.40gb", 2}});
  ASSERT_OK(plan);
  ASSERT_TRUE(plan->unsatisfied.empty());
  const std::string log = ::testing::TempDir() + "/nvml_mig_apply." + std::to_string(::getpid()) + ".log";
  std::remove(log.c_str());
  setenv("TESSERA_FAKE_NVML_MUTATION_LOG", log.c_str(), 1);
  ASSERT_OK(Start("H100-80GB*4:mig=1"));
  StatusOr<std::vector<MigStepResult>> done = ApplyMigSteps(nvml(), ToSteps(g, *plan));
  ASSERT_OK(done);
  ASSERT_EQ(done->size(), plan->steps.size());
  for (uint32_t gpu = 0; gpu < 4; ++gpu) {
    EXPECT_EQ(DriverLayout(nvml(), g, gpu), Sorted(plan->layouts[gpu])) << "GPU " << gpu;
    StatusOr<std::vector<MigInstanceState>> state = ReadMigInstances(nvml(), gpu);
    ASSERT_OK(state);
    for (const MigInstanceState& s : *state) {
      ASSERT_EQ(s.compute_instances.size(), 1u);
      EXPECT_EQ(s.compute_instances[0].start, 0u);
      // The CI fills the GI: as many compute slices as its profile.
      for (const MigProfile& p : g.profiles) {
        if (static_cast<uint32_t>(p.profile_id) == s.gpu_instance.profile_id) {
          EXPECT_EQ(s.compute_instances[0].size, static_cast<uint32_t>(p.compute_slices));
        }
      }
    }
  }
  // One GI and one CI creation per step, nothing else.
  std::ifstream in(log);
  std::string line;
  std::map<std::string, size_t> calls;
  while (std::getline(in, line)) ++calls[line];
  EXPECT_EQ(calls["nvmlDeviceCreateGpuInstanceWithPlacement"], plan->steps.size());
  EXPECT_EQ(calls["nvmlGpuInstanceCreateComputeInstance"], plan->steps.size());
  EXPECT_EQ(calls.size(), 2u);
}

// Reconfiguration: free instances are destroyed (with their compute instances), in-use ones
// are kept, and the GPU ends in the planned layout.
TEST_F(NvmlMigTest, AppliedReconfigurationKeepsInUseInstances) {
  const MigGeometry& g = Geometry("A100-40GB");
  ASSERT_OK(Start("A100-40GB*2:mig=1"));
  // Now: GPU 0 holds 7g.40gb (free); GPU 1 holds 3g.20gb@0 (in use) and 2g.10gb@4 (free).
  std::vector<partition::MigGpuState> state(2);
  const auto setup = [&](uint32_t gpu, const std::string& profile, int start, bool in_use) {
    const int p = *partition::FindProfileIndex(g, profile);
    StatusOr<MigStep> s = CatalogMigStep(g, MigStep::Kind::kCreate, gpu, p, start);
    ASSERT_OK(s);
    ASSERT_OK(ApplyMigSteps(nvml(), {*s}));
    state[gpu].current.push_back({p, start});
    state[gpu].in_use.push_back(in_use);
  };
  setup(0, "7g.40gb", 0, false);
  setup(1, "3g.20gb", 0, true);
  setup(1, "2g.10gb", 4, false);
  StatusOr<partition::MigPlan> plan = partition::PlanMig(g, state, {{"1g.5gb", 6}, {"3g.20gb", 2}});
  ASSERT_OK(plan);
  StatusOr<std::vector<MigStepResult>> done = ApplyMigSteps(nvml(), ToSteps(g, *plan));
  ASSERT_OK(done);
  bool destroyed_with_ci = false;
  for (const MigStepResult& r : *done) {
    if (r.step.kind == MigStep::Kind::kDestroy && r.compute_instance_ids.size() == 1) {
      destroyed_with_ci = true;
    }
  }
  EXPECT_TRUE(destroyed_with_ci);
  for (uint32_t gpu = 0; gpu < 2; ++gpu) {
    EXPECT_EQ(DriverLayout(nvml(), g, gpu), Sorted(plan->layouts[gpu])) << "GPU " << gpu;
  }
  const partition::MigLayout gpu1 = DriverLayout(nvml(), g, 1);
  EXPECT_NE(std::find(gpu1.begin(), gpu1.end(),
                      partition::MigInstance{*partition::FindProfileIndex(g, "3g.20gb"), 0}),
            gpu1.end());
}

TEST_F(NvmlMigTest, PreflightRefusesBeforeChangingAnything) {
  const MigGeometry& h100 = Geometry("H100-80GB");
  const int three = *partition::FindProfileIndex(h100, "3g.40gb");
  const int one = *partition::FindProfileIndex(h100, "1g.10gb");
  const std::string log = ::testing::TempDir() + "/nvml_mig_preflight." + std::to_string(::getpid()) + ".log";
  setenv("TESSERA_FAKE_NVML_MUTATION_LOG", log.c_str(), 1);
  ASSERT_OK(Start("H100-80GB:mig=1:procs=77/512/1/0,H100-80GB:mig=0,A30-24GB:mig=1"));
  const MigStep create0 = *CatalogMigStep(h100, MigStep::Kind::kCreate, 0, three, 0);
  const MigStep create4 = *CatalogMigStep(h100, MigStep::Kind::kCreate, 0, three, 4);
  ASSERT_OK(ApplyMigSteps(nvml(), {create0}));  // GI 1, where process 77 runs
  std::remove(log.c_str());                     // from here on, nothing may change

  // The second step overlaps what the first one (or the GPU) holds.
  EXPECT_STATUS(ApplyMigSteps(nvml(), {create4, create0}), StatusCode::kFailedPrecondition,
                "step 2 (create 3g.40gb@0 on GPU 0): memory slices 0:4 overlap GPU instance 1 "
                "at 0:4");
  // Destroying the GI a process runs on.
  MigStep destroy0 = create0;
  destroy0.kind = MigStep::Kind::kDestroy;
  EXPECT_STATUS(ApplyMigSteps(nvml(), {destroy0}), StatusCode::kFailedPrecondition,
                "step 1 (destroy 3g.40gb@0 on GPU 0): process 77 runs on GPU instance 1");
  // Destroying what is not there.
  MigStep destroy4 = create4;
  destroy4.kind = MigStep::Kind::kDestroy;
  EXPECT_STATUS(ApplyMigSteps(nvml(), {destroy4}), StatusCode::kNotFound,
                "step 1 (destroy 3g.40gb@4 on GPU 0): no GPU instance of this profile at 4:4");
  // MIG off; a GPU the node lacks.
  MigStep on1 = create4;
  on1.gpu = 1;
  EXPECT_STATUS(ApplyMigSteps(nvml(), {on1}), StatusCode::kFailedPrecondition,
                "step 1 (create 3g.40gb@4 on GPU 1): MIG mode is disabled on GPU 1");
  MigStep on9 = create4;
  on9.gpu = 9;
  EXPECT_STATUS(ApplyMigSteps(nvml(), {on9}), StatusCode::kInvalidArgument,
                "step 1 (create 3g.40gb@4 on GPU 9): the node has 3 GPU(s)");
  // A plan for the wrong model: the A30 has no 3-slice profile, and its 1g has 1 slice but
  // other placements (1g.10gb@6 is not an A30 placement).
  MigStep on_a30 = create4;
  on_a30.gpu = 2;
  EXPECT_EQ(ApplyMigSteps(nvml(), {on_a30}).status().code(), StatusCode::kUnimplemented);
  MigStep one_at6 = *CatalogMigStep(h100, MigStep::Kind::kCreate, 2, one, 6);
  EXPECT_STATUS(ApplyMigSteps(nvml(), {one_at6}), StatusCode::kInvalidArgument,
                "step 1 (create 1g.10gb@6 on GPU 2): placement 6:1 is not one the driver allows "
                "(0:1, 1:1, 2:1, 3:1)");
  // None of these changed anything.
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), "");
  EXPECT_EQ(DriverLayout(nvml(), h100, 0), (partition::MigLayout{{three, 0}}));
}

TEST_F(NvmlMigTest, AFailingStepNamesItselfAndWhatWasDone) {
  const MigGeometry& g = Geometry("H100-80GB");
  const int one = *partition::FindProfileIndex(g, "1g.10gb");
  ASSERT_OK(Start("H100-80GB:mig=1", "nvmlGpuInstanceCreateComputeInstance:23"));
  std::vector<MigStep> steps = {*CatalogMigStep(g, MigStep::Kind::kCreate, 0, one, 0)};
  EXPECT_STATUS(ApplyMigSteps(nvml(), steps), StatusCode::kResourceExhausted,
                "step 1 (create 1g.10gb@0 on GPU 0): nvmlGpuInstanceCreateComputeInstance(gpu 0, "
                "gpu instance 1, profile index 0): Insufficient Resources (NVML error 23); 0 "
                "earlier step(s) were applied and GPU instance 1 was created without a compute "
                "instance");
  ASSERT_OK(Start("H100-80GB:mig=1", "nvmlDeviceCreateGpuInstanceWithPlacement:4"));
  steps.push_back(*CatalogMigStep(g, MigStep::Kind::kCreate, 0, one, 1));
  EXPECT_STATUS(ApplyMigSteps(nvml(), steps), StatusCode::kPermissionDenied,
                "step 1 (create 1g.10gb@0 on GPU 0): nvmlDeviceCreateGpuInstanceWithPlacement(gpu "
                "0, profile id 19, placement 0:1): Insufficient Permissions (NVML error 4); 0 "
                "earlier step(s) were applied");
}

}  // namespace
}  // namespace tessera::enforce
