// MIG claims through the DRA kubelet plugin, over real gRPC, on the fake NVML's H100-80GB in MIG
// mode: the claim's MIG device (gpu-0-mig-3g-40gb-4) is prepared on the instance of that profile
// at that start, pinned by its MIG device UUID with the instance's memory as the limit and no
// lease board; a missing instance fails the claim without --allow-mig-reconfigure and is created
// (and destroyed at unprepare) with it; an instance in the way or another claim's is never
// touched. The test keeps its own NVML handle open, so that the fake driver's instances outlive
// the plugin's restarts, as a real driver's do.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/api/node_wire.h"
#include "tessera/core/gpu_model.h"
#include "tessera/enforce/nvml.h"
#include "tessera/node/inventory.h"
#include "tests/k8s/dra_plugin_fixture.h"

namespace tessera::k8s {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using nlohmann::json;

constexpr char kMigDevice[] = "gpu-0-mig-3g-40gb-4";
constexpr uint32_t k3SliceProfile = 2;  // NVML_GPU_INSTANCE_PROFILE_3_SLICE, and its 3c CI

std::string MigResult(const std::string& device = kMigDevice) {
  return R"([{"request": "mig", "driver": "gpu.tessera.io", "pool": "node-1", "device": ")" + device + R"("}])";
}

// The nvidia-caps minor of a GI / CI access file in the test's mig-minors: 3 + 16 * gi (+ 1 + ci).
int GiMinor(uint32_t gi) { return 3 + 16 * static_cast<int>(gi); }
int CiMinor(uint32_t gi, uint32_t ci) { return GiMinor(gi) + 1 + static_cast<int>(ci); }

class DraMigTest : public DraPluginTest {
 protected:
  void SetUp() override {
    ::setenv("TESSERA_FAKE_NVML_CONFIG", "H100-80GB:mig=1", 1);
    ASSERT_TRUE(nvml_.Init().ok());
    DraPluginTest::SetUp();
    options_.nvml_library = TESSERA_FAKE_NVML_PATH;
    options_.mig_minors_file = (root_ / "mig-minors").string();
    // The driver's list of MIG capability minors for GPU 0, and their device nodes.
    std::ofstream minors(options_.mig_minors_file);
    std::filesystem::create_directories(root_ / "dev/nvidia-caps");
    minors << "config 1\nmonitor 2\n";
    for (uint32_t gi = 0; gi < 15; ++gi) {
      minors << "gpu0/gi" << gi << "/access " << GiMinor(gi) << "\n";
      std::ofstream(root_ / "dev/nvidia-caps" / ("nvidia-cap" + std::to_string(GiMinor(gi))));
      for (uint32_t ci = 0; ci < 8; ++ci) {
        minors << "gpu0/gi" << gi << "/ci" << ci << "/access " << CiMinor(gi, ci) << "\n";
        std::ofstream(root_ / "dev/nvidia-caps" / ("nvidia-cap" + std::to_string(CiMinor(gi, ci))));
      }
    }
    StartPlugin();
  }
  void TearDown() override {
    DraPluginTest::TearDown();  // the plugin's NVML first
    (void)nvml_.Shutdown();
    ::unsetenv("TESSERA_FAKE_NVML_CONFIG");
  }
  void StartWith(bool allow) {
    options_.allow_mig_reconfigure = allow;
    StartPlugin();
  }
  // A GPU instance of NVML profile index `index` at `start` (with its filling CI when `ci`).
  void CreateInstance(uint32_t index, uint32_t start, uint32_t size, bool ci) {
    StatusOr<enforce::GpuInstanceProfile> p = nvml_.GpuInstanceProfileInfo(0, index);
    ASSERT_TRUE(p.ok());
    StatusOr<enforce::GpuInstance> gi = nvml_.CreateGpuInstance(0, p->id, {start, size});
    ASSERT_TRUE(gi.ok()) << gi.status().ToString();
    if (ci) {
      ASSERT_TRUE(nvml_.CreateComputeInstance(0, gi->id, index).ok());
    }
  }
  std::string Layout() {  // the fake driver's instances on GPU 0
    const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
    StatusOr<std::vector<api::InventoryMigInstance>> m =
        node::DiscoverMigInstances(nvml_, 0, *catalog.info(*catalog.Find("H100-80GB")).mig);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    std::string out;
    for (const auto& i : m.ok() ? *m : std::vector<api::InventoryMigInstance>{})
      out += (out.empty() ? "" : ",") + i.profile + "@" + std::to_string(i.start);
    return out;
  }
  enforce::MigDevice OnlyMigDevice() {
    StatusOr<std::vector<enforce::MigDevice>> devices = nvml_.MigDevices(0);
    EXPECT_TRUE(devices.ok() && devices->size() == 1u);
    return devices.ok() && devices->size() == 1u ? devices->front() : enforce::MigDevice{};
  }
  uint64_t ThreeSliceBytes() {
    StatusOr<enforce::GpuInstanceProfile> p = nvml_.GpuInstanceProfileInfo(0, k3SliceProfile);
    EXPECT_TRUE(p.ok());
    return p.ok() ? static_cast<uint64_t>(p->memory.value()) << 20 : 0;
  }
  ClaimResult Prepare(const std::string& name, const std::string& uid) {
    auto answer = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = uid, .name = name}});
    EXPECT_TRUE(answer.ok()) << answer.status().ToString();
    return answer.ok() ? answer->at(uid) : ClaimResult{.devices = {}, .error = "no answer"};
  }
  std::string Unprepare(const std::string& name, const std::string& uid) {
    auto gone = kubelet_.Unprepare(Dra(), {{.ns = "team-a", .uid = uid, .name = name}});
    EXPECT_TRUE(gone.ok()) << gone.status().ToString();
    return gone.ok() ? gone->at(uid) : "no answer";
  }
  json Spec(const std::string& uid) {
    return json::parse(std::ifstream(root_ / ("cdi/gpu.tessera.io-claim_" + uid + ".json")));
  }

  enforce::DlopenNvml nvml_{{.library_path = TESSERA_FAKE_NVML_PATH}};
};

TEST_F(DraMigTest, AMigClaimRunsOnItsInstanceByUuidWithTheInstancesMemoryAndNoLeaseBoard) {
  CreateInstance(k3SliceProfile, 4, 4, /*ci=*/true);
  const enforce::MigDevice mig = OnlyMigDevice();
  ASSERT_THAT(mig.uuid, ::testing::StartsWith("MIG-"));
  claims_.Put("team-a", "vision", Claim("team-a", "vision", "M1", MigResult()));
  ClaimResult r = Prepare("vision", "M1");
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].device, kMigDevice);
  EXPECT_EQ(r.devices[0].cdi_ids, std::vector<std::string>{"gpu.tessera.io/gpu=M1-gpu-0-mig-3g-40gb-4"});

  std::vector<node::TenantStatus> tenants = Tenants();
  ASSERT_EQ(tenants.size(), 1u);
  EXPECT_EQ(tenants[0].name, "team-a/vision/mig/gpu-0-mig-3g-40gb-4");
  EXPECT_EQ(tenants[0].account, "team-a");
  EXPECT_EQ(tenants[0].limit_bytes, ThreeSliceBytes());
  EXPECT_GT(tenants[0].limit_bytes, 30ull << 30);
  EXPECT_TRUE(tenants[0].mig);  // on its instance: not on the GPU's lease board

  json spec = Spec("M1");
  const auto env = spec["devices"][0]["containerEdits"]["env"].get<std::vector<std::string>>();
  EXPECT_THAT(env, Contains("CUDA_VISIBLE_DEVICES=" + mig.uuid));
  EXPECT_THAT(env, Contains("TESSERA_SHIM_TENANT=" + std::to_string(tenants[0].index)));
  EXPECT_THAT(env, Not(Contains(::testing::StartsWith("TESSERA_SHIM_LEASES="))));
  // The parent GPU's node and the instance's two capabilities.
  const std::string dev = options_.dev_dir;
  const std::string gi_cap = "nvidia-caps/nvidia-cap" + std::to_string(GiMinor(mig.gpu_instance_id));
  const std::string ci_cap =
      "nvidia-caps/nvidia-cap" + std::to_string(CiMinor(mig.gpu_instance_id, mig.compute_instance_id));
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"],
            json::parse(R"([{"path": "/dev/nvidia0", "hostPath": ")" + dev + R"(/nvidia0"},
              {"path": "/dev/)" + gi_cap + R"(", "hostPath": ")" + dev + "/" + gi_cap + R"("},
              {"path": "/dev/)" + ci_cap + R"(", "hostPath": ")" + dev + "/" + ci_cap + R"("}])"));

  // Idempotent, across a restart too; unprepared: the slot goes, the instance (not the driver's) stays.
  EXPECT_EQ(Prepare("vision", "M1").devices[0].cdi_ids, r.devices[0].cdi_ids);
  StartPlugin();
  EXPECT_EQ(driver_->prepared_claims(), 1u);
  EXPECT_TRUE(driver_->recovery_problems().empty());
  EXPECT_EQ(Prepare("vision", "M1").devices[0].cdi_ids, r.devices[0].cdi_ids);
  ASSERT_EQ(Tenants().size(), 1u);
  EXPECT_EQ(Tenants()[0].index, tenants[0].index);
  EXPECT_EQ(Unprepare("vision", "M1"), "");
  EXPECT_TRUE(Tenants().empty());
  EXPECT_FALSE(std::filesystem::exists(root_ / "cdi/gpu.tessera.io-claim_M1.json"));
  EXPECT_EQ(Layout(), "3g.40gb@4");
}

TEST_F(DraMigTest, WithoutTheFlagAMissingInstanceFailsTheClaimNamingItAndTheFlag) {
  CreateInstance(0, 0, 1, /*ci=*/true);  // 1g.10gb@0: the GPU is in MIG mode, with another instance
  claims_.Put("team-a", "vision", Claim("team-a", "vision", "M2", MigResult()));
  ClaimResult r = Prepare("vision", "M2");
  EXPECT_EQ(r.error,
            "ResourceClaim team-a/vision (uid M2): results device gpu-0-mig-3g-40gb-4: MIG instance 3g.40gb@4 on GPU 0 "
            "does not exist (the GPU has '1g.10gb@0'), and the driver runs without --allow-mig-reconfigure: create it "
            "(the agent's MIG layout, nvidia-smi mig -cgi) or let the driver do it");
  EXPECT_TRUE(r.devices.empty());
  EXPECT_TRUE(Tenants().empty());
  EXPECT_FALSE(std::filesystem::exists(root_ / "cdi/gpu.tessera.io-claim_M2.json"));
  EXPECT_EQ(Layout(), "1g.10gb@0");  // nothing created
}

TEST_F(DraMigTest, WithTheFlagAMissingInstanceIsCreatedPreparedAndDestroyedAtUnprepare) {
  StartWith(/*allow=*/true);
  claims_.Put("team-a", "vision", Claim("team-a", "vision", "M3", MigResult()));
  ClaimResult r = Prepare("vision", "M3");
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(Layout(), "3g.40gb@4");
  const enforce::MigDevice mig = OnlyMigDevice();
  const auto env = Spec("M3")["devices"][0]["containerEdits"]["env"].get<std::vector<std::string>>();
  EXPECT_THAT(env, Contains("CUDA_VISIBLE_DEVICES=" + mig.uuid));
  ASSERT_EQ(Tenants().size(), 1u);
  EXPECT_EQ(Tenants()[0].limit_bytes, ThreeSliceBytes());
  // Idempotent: the same instance, one slot.
  EXPECT_EQ(Prepare("vision", "M3").devices[0].cdi_ids, r.devices[0].cdi_ids);
  EXPECT_EQ(Tenants().size(), 1u);
  EXPECT_EQ(Layout(), "3g.40gb@4");
  // A restarted plugin still knows it made the instance: unprepared, the instance goes too.
  StartWith(/*allow=*/true);
  EXPECT_EQ(driver_->prepared_claims(), 1u);
  EXPECT_EQ(Unprepare("vision", "M3"), "");
  EXPECT_TRUE(Tenants().empty());
  EXPECT_EQ(Layout(), "");
}

TEST_F(DraMigTest, AnInstanceInTheWayOrAnotherClaimsIsNeverTouched) {
  StartWith(/*allow=*/true);
  CreateInstance(0, 5, 1, /*ci=*/true);  // 1g.10gb@5: inside 3g.40gb@4's slices
  claims_.Put("team-a", "vision", Claim("team-a", "vision", "M4", MigResult()));
  ClaimResult r = Prepare("vision", "M4");
  EXPECT_THAT(r.error, HasSubstr("results device gpu-0-mig-3g-40gb-4: MIG instance 3g.40gb@4 on GPU 0 could not be "
                                 "created: "));
  EXPECT_THAT(r.error, HasSubstr("overlap"));
  EXPECT_TRUE(Tenants().empty());
  EXPECT_EQ(Layout(), "1g.10gb@5");

  // Another profile at the same start: never changed.
  claims_.Put("team-a", "small", Claim("team-a", "small", "M5", MigResult("gpu-0-mig-1g-20gb-4")));
  CreateInstance(0, 4, 1, /*ci=*/true);  // 1g.10gb@4
  EXPECT_THAT(Prepare("small", "M5").error,
              HasSubstr("MIG instance 1g.20gb@4 on GPU 0: the GPU has a 1g.10gb instance at memory slice 4 (never "
                        "changed for a claim)"));

  // The instance of a prepared claim is not handed to a second claim.
  claims_.Put("team-a", "one", Claim("team-a", "one", "M6", MigResult("gpu-0-mig-1g-10gb-4")));
  claims_.Put("team-b", "two", Claim("team-b", "two", "M7", MigResult("gpu-0-mig-1g-10gb-4")));
  ASSERT_EQ(Prepare("one", "M6").error, "");
  auto second = kubelet_.Prepare(Dra(), {{.ns = "team-b", .uid = "M7", .name = "two"}});
  ASSERT_TRUE(second.ok());
  EXPECT_THAT(second->at("M7").error, HasSubstr("is prepared for claim team-a/one: a MIG instance is never shared"));
  EXPECT_EQ(Tenants().size(), 1u);
  EXPECT_EQ(Layout(), "1g.10gb@4,1g.10gb@5");
}

TEST_F(DraMigTest, ABadMigDeviceFailsTheClaimNamingIt) {
  claims_.Put("team-a", "bad", Claim("team-a", "bad", "M8", MigResult("gpu-0-mig-3g-40gb")));
  EXPECT_THAT(Prepare("bad", "M8").error,
              HasSubstr("status.allocation.devices.results[0].device: 'gpu-0-mig-3g-40gb' is not one of tessera's MIG "
                        "devices (gpu-<index>-mig-<profile>-<start>, e.g. gpu-1-mig-3g-40gb-4)"));
  claims_.Put("team-a", "odd", Claim("team-a", "odd", "M9", MigResult("gpu-0-mig-3g-40gb-2")));
  EXPECT_THAT(Prepare("odd", "M9").error,
              HasSubstr("results device gpu-0-mig-3g-40gb-2: GPU 0 (H100-80GB) has no MIG profile '3g-40gb' that "
                        "starts at memory slice 2"));
  EXPECT_TRUE(Tenants().empty());
}

TEST_F(DraMigTest, AMigDeviceWithAnotherDeviceInOneClaimFailsTheClaimNamingIt) {
  CreateInstance(k3SliceProfile, 4, 4, /*ci=*/true);
  claims_.Put("team-a", "pair", Claim("team-a", "pair", "M10", R"([
    {"request": "mig", "driver": "gpu.tessera.io", "pool": "node-1", "device": "gpu-0-mig-3g-40gb-4"},
    {"request": "gpu", "driver": "gpu.tessera.io", "pool": "node-1", "device": "gpu-1"}])"));
  EXPECT_EQ(Prepare("pair", "M10").error,
            "ResourceClaim team-a/pair (uid M10): results devices: gpu-0-mig-3g-40gb-4 is a MIG device, which must be "
            "the claim's only device of gpu.tessera.io (its tenant runs on that instance alone)");
  EXPECT_TRUE(Tenants().empty());
  EXPECT_EQ(Layout(), "3g.40gb@4");
}

TEST_F(DraMigTest, WithoutTheMigMinorsFileTheClaimGetsNoCapsNodesAndALineMissingFailsItNamingTheFile) {
  CreateInstance(k3SliceProfile, 4, 4, /*ci=*/true);
  const enforce::MigDevice mig = OnlyMigDevice();
  options_.mig_minors_file = (root_ / "no-such-mig-minors").string();
  StartPlugin();
  claims_.Put("team-a", "vision", Claim("team-a", "vision", "M11", MigResult()));
  ASSERT_EQ(Prepare("vision", "M11").error, "");
  EXPECT_EQ(Spec("M11")["devices"][0]["containerEdits"]["deviceNodes"],
            json::parse(R"([{"path": "/dev/nvidia0", "hostPath": ")" + options_.dev_dir + R"(/nvidia0"}])"));
  EXPECT_EQ(Unprepare("vision", "M11"), "");

  // The driver lists the instance's GPU-instance capability but not its compute instance's.
  options_.mig_minors_file = (root_ / "short-mig-minors").string();
  std::ofstream(options_.mig_minors_file) << "config 1\nmonitor 2\ngpu0/gi" << mig.gpu_instance_id << "/access "
                                          << GiMinor(mig.gpu_instance_id) << "\n";
  StartPlugin();
  const std::string ci_cap = "gpu0/gi" + std::to_string(mig.gpu_instance_id) + "/ci" +
                             std::to_string(mig.compute_instance_id) + "/access";
  EXPECT_THAT(Prepare("vision", "M11").error,
              HasSubstr(options_.mig_minors_file + ": no line '" + ci_cap + " <minor>' (the MIG device's capability)"));
  EXPECT_FALSE(std::filesystem::exists(root_ / "cdi/gpu.tessera.io-claim_M11.json"));
  EXPECT_TRUE(Tenants().empty());  // the slot joined before the spec was written is left again
  EXPECT_EQ(Layout(), "3g.40gb@4");
}

}  // namespace
}  // namespace tessera::k8s
