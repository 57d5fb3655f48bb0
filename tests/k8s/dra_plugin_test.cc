// The DRA kubelet plugin end to end over real gRPC on unix sockets: a fake kubelet
// (DraKubeletClient) registers, prepares, unprepares and restarts the plugin; the slots' limits
// are read back from the node directory; the CDI spec is checked.
#include "tessera/integrations/k8s/dra_plugin.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tessera/enforce/segment.h"
#include "tessera/node/node_dir.h"
#include "tests/k8s/dra_plugin_fixture.h"
#include "tests/k8s/fake_kube_api.h"
#include "tests/k8s/node_tenants.h"

namespace tessera::k8s {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

TEST_F(DraPluginTest, RegistrationAnswersWhatTheKubeletExpects) {
  EXPECT_EQ(server_->registration_socket(), (root_ / "registry/gpu.tessera.io-reg.sock").string());
  auto info = kubelet_.GetInfo(server_->registration_socket());
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->type, "DRAPlugin");
  EXPECT_EQ(info->name, "gpu.tessera.io");
  EXPECT_EQ(info->endpoint, options_.plugin_dir + "/dra.sock");
  EXPECT_EQ(info->supported_versions, std::vector<std::string>{"v1.DRAPlugin"});
  EXPECT_FALSE(server_->registration().notified);
  ASSERT_TRUE(kubelet_.NotifyRegistrationStatus(server_->registration_socket(), true, "").ok());
  EXPECT_TRUE(server_->registration().notified);
  EXPECT_TRUE(server_->registration().registered);
}

TEST_F(DraPluginTest, PrepareMakesASlotWithTheClaimsLimitsAndACdiSpec) {
  claims_.Put("team-a", "infer", Claim("team-a", "infer", "U1", kShare0));
  auto answer = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  ASSERT_EQ(answer->count("U1"), 1u);
  const ClaimResult& r = answer->at("U1");
  EXPECT_EQ(r.error, "");
  ASSERT_EQ(r.devices.size(), 1u);
  EXPECT_EQ(r.devices[0].pool, "node-1");
  EXPECT_EQ(r.devices[0].device, "gpu-0");
  EXPECT_EQ(r.devices[0].requests, std::vector<std::string>{"gpu"});
  EXPECT_EQ(r.devices[0].cdi_ids, std::vector<std::string>{"gpu.tessera.io/gpu=U1-gpu-0"});

  std::vector<node::TenantStatus> tenants = Tenants();
  ASSERT_EQ(tenants.size(), 1u);
  EXPECT_EQ(tenants[0].name, "team-a/infer/gpu/gpu-0#2b0f33c1");
  EXPECT_EQ(tenants[0].limit_bytes, 1ull << 30);
  EXPECT_EQ(tenants[0].share, 300);
  EXPECT_EQ(tenants[0].account, "team-a");

  std::ifstream spec_file(root_ / "cdi/gpu.tessera.io-claim_U1.json");
  ASSERT_TRUE(spec_file.good());
  nlohmann::json spec = nlohmann::json::parse(spec_file);
  EXPECT_EQ(spec["cdiVersion"], "0.6.0");
  EXPECT_EQ(spec["kind"], "gpu.tessera.io/gpu");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], "U1-gpu-0");
  const auto env = spec["devices"][0]["containerEdits"]["env"].get<std::vector<std::string>>();
  EXPECT_THAT(env, ::testing::Contains("LD_PRELOAD=/run/tessera/libtessera-shim.so"));
  EXPECT_THAT(env, ::testing::Contains("TESSERA_SHIM_TENANT=" + std::to_string(tenants[0].index)));
  EXPECT_THAT(env, ::testing::Contains("TESSERA_SHIM_POLICY=/run/tessera/node/policy"));
  EXPECT_THAT(env, ::testing::Contains("CUDA_VISIBLE_DEVICES=0"));
  const auto& mounts = spec["devices"][0]["containerEdits"]["mounts"];
  ASSERT_EQ(mounts.size(), 5u);
  EXPECT_EQ(mounts[0]["hostPath"], TESSERA_SHIM_LIBRARY);
  EXPECT_EQ(mounts[1]["hostPath"], options_.node_dir + "/policy");
  // The tenant's own counters file only (not the folder: a container that changes
  // TESSERA_SHIM_TENANT finds no other tenant's file), and the lease file read-only.
  const std::string own = "/counters/" + std::to_string(tenants[0].index);
  EXPECT_EQ(mounts[2]["hostPath"], options_.node_dir + own);
  EXPECT_EQ(mounts[2]["containerPath"], "/run/tessera/node" + own);
  EXPECT_EQ(mounts[2]["options"][0], "rw");
  EXPECT_EQ(mounts[3]["hostPath"], options_.node_dir + "/leases");
  EXPECT_EQ(mounts[3]["options"][0], "ro");
  // The tenant, as the driver assigned it, read-only next to the policy: the shim's identity.
  EXPECT_EQ(mounts[4]["hostPath"], options_.plugin_dir + "/tenants/U1");
  EXPECT_EQ(mounts[4]["containerPath"], "/run/tessera/node/tenant");
  EXPECT_EQ(mounts[4]["options"][0], "ro");
  std::ifstream tenant_file(options_.plugin_dir + "/tenants/U1");
  std::string tenant_text((std::istreambuf_iterator<char>(tenant_file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(tenant_text, std::to_string(tenants[0].index) + "\n");
  // The GPU's device node on the device; the control and unified-memory nodes once for the spec.
  const std::string dev = options_.dev_dir;
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"],
            nlohmann::json::parse(R"([{"path": "/dev/nvidia0", "hostPath": ")" + dev + R"(/nvidia0"}])"));
  EXPECT_EQ(spec["containerEdits"]["deviceNodes"],
            nlohmann::json::parse(R"([{"path": "/dev/nvidiactl", "hostPath": ")" + dev +
                                  R"(/nvidiactl"}, {"path": "/dev/nvidia-uvm", "hostPath": ")" + dev +
                                  R"(/nvidia-uvm"}])"));
}

TEST_F(DraPluginTest, ClaimsAreReadFromTheApiServerAndTheirUidChecked) {
  testing::FakeKubeApi api;
  testing::FakeKubeTransport transport(api);
  KubeClient client(transport);
  KubeClaimSource source(client);
  source_ = &source;
  StartPlugin();
  api.Put("team-a/resourceclaims", nlohmann::json::parse(Claim("team-a", "infer", "U1", kShare0)));
  api.Put("team-a/resourceclaims", nlohmann::json::parse(Claim("team-a", "old", "U9", kShare0)));
  auto answer = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"},
                                         {.ns = "team-a", .uid = "U8", .name = "old"},
                                         {.ns = "team-a", .uid = "U4", .name = "missing"},
                                         {.ns = "team-a", .uid = "U5", .name = "../x"}});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->at("U1").error, "");
  EXPECT_EQ(answer->at("U1").devices.at(0).cdi_ids, std::vector<std::string>{"gpu.tessera.io/gpu=U1-gpu-0"});
  EXPECT_EQ(answer->at("U8").error,
            "ResourceClaim team-a/old (uid U8): metadata.uid: 'U9' is not the kubelet's 'U8' (the claim was deleted "
            "and created again under its name)");
  EXPECT_EQ(answer->at("U4").error,
            "ResourceClaim team-a/missing (uid U4): GET /apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/"
            "missing: HTTP 404: team-a/resourceclaims \"missing\" not found");
  EXPECT_EQ(answer->at("U5").error, "ResourceClaim team-a/../x (uid U5): name '../x' is not a DNS name");
  EXPECT_EQ(Tenants().size(), 1u);
  std::vector<std::string> claim_reads;
  for (const std::string& r : api.requests()) {
    if (r.find("resourceclaims") != std::string::npos) claim_reads.push_back(r);
  }
  EXPECT_EQ(claim_reads, (std::vector<std::string>{"GET /apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/infer",
                                                   "GET /apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/old",
                                                   "GET /apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/missing"}));
  // An API server that fails: the claim's error says so; the RPC succeeds.
  api.FailNext("GET", 503, "etcdserver: request timed out");
  answer = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U6", .name = "later"}});
  ASSERT_TRUE(answer.ok());
  EXPECT_THAT(answer->at("U6").error, HasSubstr("HTTP 503: etcdserver: request timed out"));
  server_.reset();  // before `source` goes
  driver_.reset();
}

TEST_F(DraPluginTest, AMissingDeviceNodeFailsTheClaimNamingIt) {
  fs::remove(root_ / "dev/nvidia-uvm");
  claims_.Put("team-a", "infer", Claim("team-a", "infer", "U1", kShare0));
  auto answer = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_THAT(answer->at("U1").error, HasSubstr("ResourceClaim team-a/infer (uid U1): device node " +
                                                options_.dev_dir + "/nvidia-uvm: No such file or directory"));
  EXPECT_TRUE(answer->at("U1").devices.empty());
  EXPECT_TRUE(Tenants().empty());  // the slot joined for it was left again
  EXPECT_FALSE(fs::exists(root_ / "cdi/gpu.tessera.io-claim_U1.json"));
}

// NVML numbers GPUs by PCI bus id, the kernel module its device nodes as it probed them: GPU 0 of
// this fake node is /dev/nvidia3 (nvmlDeviceGetMinorNumber). The spec names that node, not
// /dev/nvidia0 (which exists here too, and would have been another GPU's), and pins the GPU by
// its uuid. Before, the index was taken as the minor number.
TEST_F(DraPluginTest, TheDeviceNodeIsTheOneOfNvmlsMinorNumberNotOfTheIndex) {
  ::setenv("TESSERA_FAKE_NVML_CONFIG", "A100-40GB:minor=3,A100-40GB:minor=0", 1);
  std::ofstream(root_ / "dev" / "nvidia3");
  options_.nvml_library = TESSERA_FAKE_NVML_PATH;
  StartPlugin();
  claims_.Put("team-a", "infer", Claim("team-a", "infer", "U1", kShare0));
  auto answer = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
  ::unsetenv("TESSERA_FAKE_NVML_CONFIG");
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_EQ(answer->at("U1").error, "");
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(root_ / "cdi/gpu.tessera.io-claim_U1.json"));
  const std::string dev = options_.dev_dir;
  EXPECT_EQ(spec["devices"][0]["containerEdits"]["deviceNodes"],
            nlohmann::json::parse(R"([{"path": "/dev/nvidia3", "hostPath": ")" + dev + R"(/nvidia3"}])"));
  const auto env = spec["devices"][0]["containerEdits"]["env"].get<std::vector<std::string>>();
  EXPECT_THAT(env, ::testing::Contains("CUDA_VISIBLE_DEVICES=GPU-fa4e0000-0000-4000-8000-000000000000"));
}

// A claim of two whole GPUs is one tenant on both (the container is one process tree, charged
// once): one registry entry on GPUs 0 and 1, and both CDI devices carry the same tenant and both
// GPUs, each with its own device node. It is left once at Unprepare, and a restarted plugin adopts
// it as one tenant. Before, each device was a tenant of its own, and the container got two
// TESSERA_SHIM_TENANT values. Two devices of one GPU in a claim are refused, naming the GPU.
TEST_F(DraPluginTest, AClaimOfTwoGpusIsOneTenantOnBoth) {
  const std::string two = R"([{"request": "gpus", "driver": "gpu.tessera.io", "pool": "node-1", "device": "gpu-0"},
    {"request": "gpus", "driver": "gpu.tessera.io", "pool": "node-1", "device": "gpu-1"}])";
  claims_.Put("team-a", "train", Claim("team-a", "train", "7a11-0000-01", two));
  auto answer = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "7a11-0000-01", .name = "train"}});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  ASSERT_EQ(answer->at("7a11-0000-01").error, "");
  ASSERT_EQ(answer->at("7a11-0000-01").devices.size(), 2u);
  std::vector<node::TenantStatus> tenants = Tenants();  // one line per GPU of a tenant
  ASSERT_EQ(tenants.size(), 2u);
  EXPECT_EQ(tenants[0].name, "team-a/train#7a11-000");
  EXPECT_EQ(tenants[1].name, tenants[0].name);
  EXPECT_EQ(tenants[1].index, tenants[0].index);
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(root_ / "cdi/gpu.tessera.io-claim_7a11-0000-01.json"));
  ASSERT_EQ(spec["devices"].size(), 2u);
  for (int d = 0; d < 2; ++d) {
    const auto env = spec["devices"][d]["containerEdits"]["env"].get<std::vector<std::string>>();
    EXPECT_THAT(env, ::testing::Contains("TESSERA_SHIM_TENANT=" + std::to_string(tenants[0].index)));
    EXPECT_THAT(env, ::testing::Contains("TESSERA_SHIM_GPUS=0,1"));
    EXPECT_THAT(env, ::testing::Contains("CUDA_VISIBLE_DEVICES=0,1"));
    EXPECT_EQ(spec["devices"][d]["containerEdits"]["deviceNodes"][0]["path"], "/dev/nvidia" + std::to_string(d));
  }
  StartPlugin();  // a restart adopts it from the checkpoint: still one tenant
  EXPECT_EQ(Tenants().size(), 2u);
  auto gone = kubelet_.Unprepare(Dra(), {{.ns = "team-a", .uid = "7a11-0000-01", .name = "train"}});
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->at("7a11-0000-01"), "");
  EXPECT_TRUE(Tenants().empty());

  const std::string same_gpu = R"([{"request": "a", "driver": "gpu.tessera.io", "pool": "node-1", "device": "gpu-1",
      "shareID": "aaaa", "consumedCapacity": {"memory": "1Gi", "compute": "100"}},
    {"request": "b", "driver": "gpu.tessera.io", "pool": "node-1", "device": "gpu-1",
      "shareID": "bbbb", "consumedCapacity": {"memory": "1Gi", "compute": "100"}}])";
  claims_.Put("team-a", "twice", Claim("team-a", "twice", "7a11-0000-02", same_gpu));
  answer = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "7a11-0000-02", .name = "twice"}});
  ASSERT_TRUE(answer.ok());
  EXPECT_THAT(answer->at("7a11-0000-02").error, HasSubstr("two of them are on GPU 1"));
  EXPECT_TRUE(Tenants().empty());
}

TEST_F(DraPluginTest, WithoutADevDirTheSpecHasNoDeviceNodes) {
  options_.dev_dir = "";
  StartPlugin();
  claims_.Put("team-a", "infer", Claim("team-a", "infer", "U1", kShare0));
  auto answer = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->at("U1").error, "");
  nlohmann::json spec = nlohmann::json::parse(std::ifstream(root_ / "cdi/gpu.tessera.io-claim_U1.json"));
  EXPECT_FALSE(spec.contains("containerEdits"));
  EXPECT_FALSE(spec["devices"][0]["containerEdits"].contains("deviceNodes"));
}

TEST_F(DraPluginTest, PrepareTwiceGivesTheSameAnswerAndOneSlot) {
  claims_.Put("team-a", "infer", Claim("team-a", "infer", "U1", kShare0));
  auto first = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
  auto second = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->at("U1").devices[0].cdi_ids, second->at("U1").devices[0].cdi_ids);
  EXPECT_EQ(Tenants().size(), 1u);
  EXPECT_EQ(driver_->prepared_claims(), 1u);
}

TEST_F(DraPluginTest, UnprepareRemovesTheSlotAndTheSpecAndIsIdempotent) {
  claims_.Put("team-a", "infer", Claim("team-a", "infer", "U1", kShare0));
  ASSERT_TRUE(kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}}).ok());
  for (int i = 0; i < 2; ++i) {
    auto gone = kubelet_.Unprepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
    ASSERT_TRUE(gone.ok()) << gone.status().ToString();
    EXPECT_EQ(gone->at("U1"), "");
  }
  EXPECT_TRUE(Tenants().empty());
  EXPECT_FALSE(fs::exists(root_ / "cdi/gpu.tessera.io-claim_U1.json"));
  EXPECT_FALSE(fs::exists(fs::path(options_.plugin_dir) / "tenants/U1"));
  // Prepared again after the unprepare: a fresh slot.
  auto again = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->at("U1").error, "");
  EXPECT_EQ(Tenants().size(), 1u);
}

TEST_F(DraPluginTest, ARestartedPluginReadoptsPreparedClaimsFromItsCheckpoint) {
  claims_.Put("team-a", "infer", Claim("team-a", "infer", "U1", kShare0));
  auto before = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
  ASSERT_TRUE(before.ok());
  const int index = Tenants().at(0).index;
  StartPlugin();  // a new driver and server over the same folders
  EXPECT_EQ(driver_->prepared_claims(), 1u);
  EXPECT_TRUE(driver_->recovery_problems().empty());
  claims_.Remove("team-a", "infer");  // answered from the checkpoint, not the API server
  auto after = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->at("U1").error, "");
  EXPECT_EQ(after->at("U1").devices[0].cdi_ids, before->at("U1").devices[0].cdi_ids);
  ASSERT_EQ(Tenants().size(), 1u);
  EXPECT_EQ(Tenants()[0].index, index);
  auto gone = kubelet_.Unprepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(Tenants().empty());
}

TEST_F(DraPluginTest, AClaimForAnotherDriverIsIgnored) {
  claims_.Put("team-b", "cuda", Claim("team-b", "cuda", "U2", R"([{"request": "gpu", "driver": "gpu.nvidia.com",
    "pool": "node-1", "device": "gpu-7-mig-1g"}])"));
  auto answer = kubelet_.Prepare(Dra(), {{.ns = "team-b", .uid = "U2", .name = "cuda"}});
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->at("U2").error, "");
  EXPECT_TRUE(answer->at("U2").devices.empty());
  EXPECT_TRUE(Tenants().empty());
  EXPECT_FALSE(fs::exists(root_ / "cdi/gpu.tessera.io-claim_U2.json"));
}

TEST_F(DraPluginTest, ABadClaimIsAnsweredWithAnErrorNamingTheFieldAndOthersArePrepared) {
  claims_.Put("team-a", "bad", Claim("team-a", "bad", "U3", R"([{"request": "gpu", "driver": "gpu.tessera.io",
    "pool": "node-1", "device": "gpu-0", "consumedCapacity": {"memory": "1Gi"}}])"));
  claims_.Put("team-a", "infer", Claim("team-a", "infer", "U1", kShare0));
  auto answer = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U3", .name = "bad"},
                                         {.ns = "team-a", .uid = "U1", .name = "infer"},
                                         {.ns = "team-a", .uid = "U4", .name = "missing"}});
  ASSERT_TRUE(answer.ok());
  EXPECT_THAT(answer->at("U3").error, HasSubstr("status.allocation.devices.results[0].consumedCapacity.compute: missing"));
  EXPECT_THAT(answer->at("U3").error, HasSubstr("ResourceClaim team-a/bad (uid U3): "));
  EXPECT_EQ(answer->at("U4").error, "ResourceClaim team-a/missing (uid U4): not found");
  EXPECT_EQ(answer->at("U1").error, "");
  EXPECT_EQ(Tenants().size(), 1u);
}

TEST_F(DraPluginTest, AWholeGpuHasNoMemoryLimitAndTheWholeShare) {
  claims_.Put("team-c", "train", Claim("team-c", "train", "U5", R"([{"request": "gpu", "driver": "gpu.tessera.io",
    "pool": "node-1", "device": "gpu-1"}])", R"([{"source": "FromClaim", "requests": ["gpu"],
    "opaque": {"driver": "gpu.tessera.io", "parameters": {"apiVersion": "gpu.tessera.io/v1alpha1",
    "kind": "GpuShareConfig", "tenant": "research", "priority": 5}}}])"));
  auto answer = kubelet_.Prepare(Dra(), {{.ns = "team-c", .uid = "U5", .name = "train"}});
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->at("U5").error, "");
  std::vector<node::TenantStatus> tenants = Tenants();
  ASSERT_EQ(tenants.size(), 1u);
  EXPECT_EQ(tenants[0].limit_bytes, enforce::kUnlimited);
  EXPECT_EQ(tenants[0].share, 1000);
  EXPECT_EQ(tenants[0].priority, 5);
  EXPECT_EQ(tenants[0].account, "research");
}

TEST(ResourceClaimParse, ErrorsNameTheField) {
  auto no_alloc = ParseResourceClaim(R"({"metadata": {"namespace": "a", "name": "b", "uid": "u"}, "status": {}})");
  EXPECT_THAT(std::string(no_alloc.status().message()), HasSubstr("status.allocation: missing"));
  auto bad_device = ParseResourceClaim(Claim("a", "b", "u", R"([{"request": "r", "driver": "gpu.tessera.io",
    "pool": "p", "device": "mig-3"}])"));
  EXPECT_THAT(std::string(bad_device.status().message()), HasSubstr("results[0].device: 'mig-3'"));
  auto bad_param = ParseResourceClaim(Claim("a", "b", "u", kShare0, R"([{"opaque": {"driver": "gpu.tessera.io",
    "parameters": {"colour": "red"}}}])"));
  EXPECT_THAT(std::string(bad_param.status().message()), HasSubstr("config[0].opaque.parameters.colour: unknown field"));
  auto no_uid = ParseResourceClaim(R"({"metadata": {"namespace": "a", "name": "b"}})");
  EXPECT_THAT(std::string(no_uid.status().message()), HasSubstr("metadata.uid: missing"));
}

TEST(ResourceClaimParse, QuantitiesAndDeviceNames) {
  EXPECT_EQ(*ParseQuantity("10Gi"), 10ull << 30);
  EXPECT_EQ(*ParseQuantity("1.5Gi"), 3ull << 29);
  EXPECT_EQ(*ParseQuantity("300"), 300u);
  EXPECT_EQ(*ParseQuantity("2G"), 2'000'000'000u);
  EXPECT_FALSE(ParseQuantity("0.5").ok());
  EXPECT_FALSE(ParseQuantity("100m").ok());
  EXPECT_FALSE(ParseQuantity("-1").ok());
  EXPECT_FALSE(ParseQuantity("99999999999Ei").ok());
  EXPECT_EQ(*GpuIndexOfDevice("gpu-15"), 15);
  EXPECT_FALSE(GpuIndexOfDevice("gpu-16").ok());
  EXPECT_FALSE(GpuIndexOfDevice("gpu-01").ok());
  EXPECT_FALSE(GpuIndexOfDevice("gpu-").ok());
}

// The claim JSON with status.reservedFor naming these pods (and one consumer that is not a pod).
std::string Reserved(const std::string& claim, const std::vector<std::string>& pods) {
  nlohmann::json j = nlohmann::json::parse(claim);
  j["status"]["reservedFor"] = nlohmann::json::array();
  for (const std::string& uid : pods) j["status"]["reservedFor"].push_back({{"resource", "pods"}, {"name", "p"}, {"uid", uid}});
  j["status"]["reservedFor"].push_back({{"apiGroup", "batch"}, {"resource", "jobs"}, {"name", "j"}, {"uid", "J1"}});
  return j.dump();
}

TEST_F(DraPluginTest, TheBackstopSeesEachClaimWithItsPodsAndARefreshFindsAPodThatJoinedLater) {
  claims_.Put("team-a", "infer", Reserved(Claim("team-a", "infer", "U1", kShare0), {"P1"}));
  auto answer = kubelet_.Prepare(Dra(), {{.ns = "team-a", .uid = "U1", .name = "infer"}});
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  std::vector<ClaimUse> uses = driver_->ClaimUses();
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].claim, "team-a/infer");
  EXPECT_EQ(uses[0].uid, "U1");
  EXPECT_EQ(uses[0].pod_uids, std::vector<std::string>{"P1"});
  EXPECT_EQ(uses[0].gpus, std::vector<int>{0});
  EXPECT_EQ(uses[0].mem_bytes, std::optional<uint64_t>(1ull << 30));
  EXPECT_TRUE(uses[0].shared);
  EXPECT_EQ(uses[0].index, Tenants().at(0).index);

  // A second pod starts to use the prepared claim: the kubelet does not call Prepare again.
  claims_.Put("team-a", "infer", Reserved(Claim("team-a", "infer", "U1", kShare0), {"P1", "P2"}));
  EXPECT_EQ(driver_->ClaimUses()[0].pod_uids, std::vector<std::string>{"P1"});
  ASSERT_TRUE(driver_->RefreshPods().ok());
  EXPECT_EQ(driver_->ClaimUses()[0].pod_uids, (std::vector<std::string>{"P1", "P2"}));
  // Kept across a restart (the checkpoint).
  StartPlugin();
  EXPECT_EQ(driver_->ClaimUses()[0].pod_uids, (std::vector<std::string>{"P1", "P2"}));
  // A claim that cannot be read is named; what was known stays.
  claims_.Remove("team-a", "infer");
  Status refreshed = driver_->RefreshPods();
  EXPECT_EQ(refreshed.code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refreshed.message()), HasSubstr("team-a/infer: "));
  EXPECT_EQ(driver_->ClaimUses()[0].pod_uids, (std::vector<std::string>{"P1", "P2"}));
}

}  // namespace
}  // namespace tessera::k8s
