// The device plugin end to end over real gRPC on unix sockets: a fake kubelet (a Registration
// server on a temporary kubelet.sock, and a DevicePlugin client of the plugin's socket) receives
// Register, reads ListAndWatch, asks GetPreferredAllocation and Allocate, and restarts. The GPUs
// come from the fake NVML; the slots' limits are read back from the node directory.
#include "tessera/integrations/k8s/device_plugin_server.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "podresources/v1/api.grpc.pb.h"
#include "tessera/node/node_dir.h"
#include "tests/k8s/node_tenants.h"

namespace tessera::k8s {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
namespace dppb = ::v1beta1;
namespace prpb = ::v1;

constexpr char kUuid0[] = "GPU-fa4e0000-0000-4000-8000-000000000000";
constexpr char kUuid1[] = "GPU-fa4e0000-0000-4000-8000-000000000001";
constexpr uint64_t kA100Bytes = 40537ull << 20;  // A100-40GB as NVML reports it (and the fake NVML)

std::string Share(const char* uuid, int k) { return std::string(uuid) + "::" + std::to_string(k); }

// The kubelet's Registration service: records each Register.
class FakeKubelet final : public dppb::Registration::Service {
 public:
  grpc::Status Register(grpc::ServerContext*, const dppb::RegisterRequest* request, dppb::Empty*) override {
    std::lock_guard lock(mu_);
    requests_.push_back(*request);
    cv_.notify_all();
    return grpc::Status::OK;
  }
  // Waits (up to 10 s) until `n` Register calls have come.
  bool WaitFor(size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return requests_.size() >= n; });
  }
  std::vector<dppb::RegisterRequest> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<dppb::RegisterRequest> requests_;
};

// The kubelet's PodResourcesLister: answers List with the containers' devices set by the test, or
// fails (UNAVAILABLE) while `failing`.
class FakePodResources final : public prpb::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext*, const prpb::ListPodResourcesRequest*,
                    prpb::ListPodResourcesResponse* response) override {
    std::lock_guard lock(mu_);
    if (failing_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the kubelet is busy");
    *response = response_;
    return grpc::Status::OK;
  }
  // One pod "team-a/pod-<n>" (n from 1) with one container, "main", holding `ids` of `resource`.
  void Set(const std::vector<std::pair<std::string, std::vector<std::string>>>& holdings) {
    std::lock_guard lock(mu_);
    response_.Clear();
    for (const auto& [resource, ids] : holdings) {
      prpb::PodResources* pod = response_.add_pod_resources();
      pod->set_name("pod-" + std::to_string(response_.pod_resources_size()));
      pod->set_namespace_("team-a");
      prpb::ContainerResources* container = pod->add_containers();
      container->set_name("main");
      prpb::ContainerDevices* d = container->add_devices();
      d->set_resource_name(resource);
      for (const std::string& id : ids) d->add_device_ids(id);
    }
  }
  void Fail(bool failing) {
    std::lock_guard lock(mu_);
    failing_ = failing;
  }

 private:
  std::mutex mu_;
  bool failing_ = false;
  prpb::ListPodResourcesResponse response_;
};

class DevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::temp_directory_path() / "tdp-XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    root_ = dir;
    fs::create_directories(root_ / "dev");
    for (const char* node : {"nvidiactl", "nvidia-uvm", "nvidia0", "nvidia1"}) std::ofstream(root_ / "dev" / node);
    ::setenv("TESSERA_FAKE_NVML_CONFIG", "A100-40GB*2", 1);
    // Present and empty (no failure): the health test sets it while the plugin's watcher reads the
    // environment, and replacing a variable's value does not move glibc's environ array, adding one does.
    ::setenv("TESSERA_FAKE_NVML_FAIL", "", 1);
    options_ = {.node_dir = (root_ / "node").string(),
                .shares_per_gpu = 4,
                .account = "team-k8s",
                .state_dir = (root_ / "state").string(),
                .shim_path = TESSERA_SHIM_LIBRARY,
                .nvml_library = TESSERA_FAKE_NVML_PATH,
                .dev_dir = (root_ / "dev").string()};
    StartKubelet();
  }
  void TearDown() override {
    server_.reset();
    plugin_.reset();
    if (kubelet_server_) kubelet_server_->Shutdown();
    if (pod_resources_server_) pod_resources_server_->Shutdown();
    ::unsetenv("TESSERA_FAKE_NVML_CONFIG");
    ::unsetenv("TESSERA_FAKE_NVML_FAIL");
    fs::remove_all(root_);
  }
  std::string Dir() const { return (root_ / "dp").string(); }
  void StartKubelet() {
    if (kubelet_server_) kubelet_server_->Shutdown();
    fs::create_directories(Dir());
    fs::remove(Dir() + "/kubelet.sock");
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + Dir() + "/kubelet.sock", grpc::InsecureServerCredentials());
    builder.RegisterService(&kubelet_);
    kubelet_server_ = builder.BuildAndStart();
    ASSERT_NE(kubelet_server_, nullptr);
  }
  std::string PodResourcesSocket() const { return (root_ / "pod-resources" / "kubelet.sock").string(); }
  void StartPodResources() {
    fs::create_directories(root_ / "pod-resources");
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + PodResourcesSocket(), grpc::InsecureServerCredentials());
    builder.RegisterService(&pod_resources_);
    pod_resources_server_ = builder.BuildAndStart();
    ASSERT_NE(pod_resources_server_, nullptr);
  }
  // Waits (up to 10 s) until `n` more List calls have answered (or failed) after now.
  bool WaitForLists(int n, bool failed = false) {
    auto count = [&] { return failed ? server_->failed_reconciles() : server_->reconciles(); };
    const int target = count() + n;
    for (int i = 0; i < 1000 && count() < target; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return count() >= target;
  }
  std::vector<std::string> TenantNames() {
    std::vector<std::string> names;
    for (const node::TenantStatus& t : Tenants()) names.push_back(t.name);
    return names;
  }
  void StartPlugin(std::chrono::milliseconds health = std::chrono::seconds(10),
                   std::chrono::milliseconds reconcile = std::chrono::milliseconds(0)) {
    auto plugin = SharePlugin::Open(options_);
    ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
    plugin_ = std::move(*plugin);
    auto server = SharePluginServer::Start(plugin_.get(), {.socket_dir = Dir(),
                                                           .socket_name = "tessera.sock",
                                                           .watch_period = std::chrono::milliseconds(50),
                                                           .health_period = health,
                                                           .register_timeout = std::chrono::seconds(5),
                                                           .pod_resources_socket = PodResourcesSocket(),
                                                           .reconcile_period = reconcile,
                                                           .release_grace = std::chrono::milliseconds(0),
                                                           .log = [](const std::string&) {},
                                                           .error_log = [this](const std::string& line) {
                                                             std::lock_guard lock(errors_mu_);
                                                             errors_.push_back(line);
                                                           }});
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
  }
  std::unique_ptr<dppb::DevicePlugin::Stub> Plugin() {
    return dppb::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + Dir() + "/tessera.sock", grpc::InsecureChannelCredentials()));
  }
  static void Deadline(grpc::ClientContext* c) {
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  }
  grpc::Status Allocate(const std::vector<std::string>& ids, dppb::AllocateResponse* response) {
    dppb::AllocateRequest request;
    dppb::ContainerAllocateRequest* c = request.add_container_requests();
    for (const std::string& id : ids) c->add_devices_ids(id);
    grpc::ClientContext context;
    Deadline(&context);
    return Plugin()->Allocate(&context, request, response);
  }
  std::vector<node::TenantStatus> Tenants() { return NodeTenants(options_.node_dir); }
  // The node's tenant of that name; one named "(none)" when there is none.
  node::TenantStatus TenantNamed(const std::string& name) {
    for (const node::TenantStatus& t : Tenants()) {
      if (t.name == name) return t;
    }
    return node::TenantStatus{.name = "(none)"};
  }
  // The node holds one tenant, the slot of `first_device`, at `share` milli.
  void ExpectOnlySlot(const std::string& first_device, int share) {
    std::vector<node::TenantStatus> tenants = Tenants();
    ASSERT_EQ(tenants.size(), 1u);
    EXPECT_EQ(tenants[0].name, "k8s-dp/" + first_device);
    EXPECT_EQ(tenants[0].share, share);
  }

  fs::path root_;
  SharePluginOptions options_;
  FakeKubelet kubelet_;
  std::unique_ptr<grpc::Server> kubelet_server_;
  std::unique_ptr<SharePlugin> plugin_;
  std::unique_ptr<SharePluginServer> server_;
  FakePodResources pod_resources_;
  std::unique_ptr<grpc::Server> pod_resources_server_;
  std::mutex errors_mu_;
  std::vector<std::string> errors_;
};

TEST_F(DevicePluginTest, RegistersAndListsSharesPerGpuInListAndWatch) {
  StartPlugin();
  ASSERT_TRUE(kubelet_.WaitFor(1));
  const dppb::RegisterRequest r = kubelet_.requests()[0];
  EXPECT_EQ(r.version(), "v1beta1");
  EXPECT_EQ(r.endpoint(), "tessera.sock");
  EXPECT_EQ(r.resource_name(), "tessera.io/gpu-share");
  EXPECT_TRUE(r.options().get_preferred_allocation_available());
  EXPECT_FALSE(r.options().pre_start_required());

  grpc::ClientContext context;
  Deadline(&context);
  auto stream = Plugin()->ListAndWatch(&context, dppb::Empty());
  dppb::ListAndWatchResponse first;
  ASSERT_TRUE(stream->Read(&first));
  ASSERT_EQ(first.devices_size(), 8);  // 2 GPUs x 4 shares
  EXPECT_EQ(first.devices(0).id(), Share(kUuid0, 0));
  EXPECT_EQ(first.devices(7).id(), Share(kUuid1, 3));
  for (const dppb::Device& d : first.devices()) EXPECT_EQ(d.health(), "Healthy") << d.id();
  context.TryCancel();
}

// NVML stops answering for the GPUs' memory: the next health pass marks every share Unhealthy and
// the open ListAndWatch stream gets the list again.
TEST_F(DevicePluginTest, ListAndWatchSendsTheListAgainWhenNvmlStopsAnswering) {
  StartPlugin(std::chrono::milliseconds(50));
  grpc::ClientContext context;
  Deadline(&context);
  auto stream = Plugin()->ListAndWatch(&context, dppb::Empty());
  dppb::ListAndWatchResponse first, second;
  ASSERT_TRUE(stream->Read(&first));
  ::setenv("TESSERA_FAKE_NVML_FAIL", "nvmlDeviceGetMemoryInfo:999", 1);
  ASSERT_TRUE(stream->Read(&second));
  ASSERT_EQ(second.devices_size(), 8);
  for (const dppb::Device& d : second.devices()) EXPECT_EQ(d.health(), "Unhealthy") << d.id();
  context.TryCancel();
}

// The placement rule: each share goes to the GPU with the fewest free shares that still has one.
TEST_F(DevicePluginTest, GetPreferredAllocationPacksOntoTheMostUsedGpu) {
  StartPlugin();
  auto ask = [&](const std::vector<std::string>& available, const std::vector<std::string>& must, int size,
                 std::vector<std::string>* out) {
    dppb::PreferredAllocationRequest request;
    dppb::ContainerPreferredAllocationRequest* c = request.add_container_requests();
    for (const std::string& id : available) c->add_available_deviceids(id);
    for (const std::string& id : must) c->add_must_include_deviceids(id);
    c->set_allocation_size(size);
    grpc::ClientContext context;
    Deadline(&context);
    dppb::PreferredAllocationResponse response;
    grpc::Status s = Plugin()->GetPreferredAllocation(&context, request, &response);
    if (s.ok()) out->assign(response.container_responses(0).deviceids().begin(),
                            response.container_responses(0).deviceids().end());
    return s;
  };
  // GPU 1 has one share taken (GPU 0 none): both go to GPU 1, though GPU 0 is listed first.
  std::vector<std::string> available = {Share(kUuid0, 0), Share(kUuid0, 1), Share(kUuid0, 2), Share(kUuid0, 3),
                                        Share(kUuid1, 1), Share(kUuid1, 2), Share(kUuid1, 3)};
  std::vector<std::string> chosen;
  ASSERT_TRUE(ask(available, {}, 2, &chosen).ok());
  EXPECT_EQ(chosen, (std::vector<std::string>{Share(kUuid1, 1), Share(kUuid1, 2)}));
  // Five: GPU 1's three, then GPU 0's lowest two.
  ASSERT_TRUE(ask(available, {}, 5, &chosen).ok());
  EXPECT_EQ(chosen, (std::vector<std::string>{Share(kUuid1, 1), Share(kUuid1, 2), Share(kUuid1, 3), Share(kUuid0, 0),
                                              Share(kUuid0, 1)}));
  // Must-include devices come first and count: with GPU 0's shares 0 and 1 in, GPU 0 has 2 free
  // against GPU 1's 3, so the third share is GPU 0's too (not GPU 1's, the more used before).
  ASSERT_TRUE(ask(available, {Share(kUuid0, 1), Share(kUuid0, 0)}, 3, &chosen).ok());
  EXPECT_EQ(chosen, (std::vector<std::string>{Share(kUuid0, 1), Share(kUuid0, 0), Share(kUuid0, 2)}));
  grpc::Status absent = ask(available, {Share(kUuid1, 0)}, 1, &chosen);
  EXPECT_EQ(absent.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(absent.error_message(), HasSubstr("must_include device '" + Share(kUuid1, 0) + "'"));
  grpc::Status bad = ask({"GPU-nope::0"}, {}, 1, &chosen);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(), HasSubstr("device 'GPU-nope::0'"));
}

TEST_F(DevicePluginTest, AllocateMakesASlotAndReturnsTheShimsEnvironmentMountsAndDevices) {
  StartPlugin();
  dppb::AllocateResponse response;
  grpc::Status s = Allocate({Share(kUuid0, 2), Share(kUuid0, 3)}, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(response.container_responses_size(), 1);
  const dppb::ContainerAllocateResponse& c = response.container_responses(0);

  std::vector<node::TenantStatus> tenants = Tenants();
  ASSERT_EQ(tenants.size(), 1u);
  EXPECT_EQ(tenants[0].name, "k8s-dp/" + Share(kUuid0, 2));
  EXPECT_EQ(tenants[0].limit_bytes, kA100Bytes / 4 * 2);  // GPU memory / N per share asked
  EXPECT_EQ(tenants[0].share, 500);                        // 2 of 4 shares, in milli
  EXPECT_EQ(tenants[0].account, "team-k8s");
  const std::string index = std::to_string(tenants[0].index);

  const auto& env = c.envs();
  EXPECT_EQ(env.at("LD_PRELOAD"), "/run/tessera/libtessera-shim.so");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), kUuid0);
  EXPECT_EQ(env.at("TESSERA_SHIM_TENANT"), index);
  EXPECT_EQ(env.at("TESSERA_SHIM_GPUS"), "0");
  EXPECT_EQ(env.at("TESSERA_SHARE_MILLI"), "500");
  EXPECT_EQ(env.at("TESSERA_SHARE_MEMORY_BYTES"), std::to_string(kA100Bytes / 2));

  std::map<std::string, std::pair<std::string, bool>> mounts;  // container path -> (host, read-only)
  for (const dppb::Mount& m : c.mounts()) mounts[m.container_path()] = {m.host_path(), m.read_only()};
  const std::string node = options_.node_dir;
  EXPECT_EQ(mounts.at("/run/tessera/libtessera-shim.so").second, true);
  EXPECT_EQ(mounts.at("/run/tessera/node/counters/" + index),
            std::make_pair(node + "/counters/" + index, false));
  EXPECT_TRUE(mounts.at("/run/tessera/node/leases").second);
  EXPECT_TRUE(mounts.at("/run/tessera/node/policy").second);
  const auto& tenant = mounts.at("/run/tessera/node/tenant");
  EXPECT_TRUE(tenant.second);
  std::ifstream tenant_file(tenant.first);
  std::string written;
  std::getline(tenant_file, written);
  EXPECT_EQ(written, index);

  std::vector<std::string> devices;
  for (const dppb::DeviceSpec& d : c.devices()) {
    devices.push_back(d.container_path() + "<-" + d.host_path());
    EXPECT_EQ(d.permissions(), "rw");
  }
  const std::string dev = options_.dev_dir;
  EXPECT_EQ(devices, (std::vector<std::string>{"/dev/nvidiactl<-" + dev + "/nvidiactl",
                                               "/dev/nvidia-uvm<-" + dev + "/nvidia-uvm",
                                               "/dev/nvidia0<-" + dev + "/nvidia0"}));
}

// An id the plugin never listed fails the whole Allocate (no slot: the container never starts
// without its limit), naming the id.
TEST_F(DevicePluginTest, AllocateOfAnUnknownDeviceIsAnErrorNamingIt) {
  StartPlugin();
  dppb::AllocateResponse response;
  grpc::Status s = Allocate({Share(kUuid0, 0), "GPU-bogus::7"}, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("device 'GPU-bogus::7': not a device of this plugin"));
  EXPECT_TRUE(Tenants().empty());
}

// A device handed out again belongs to a new container (the kubelet gives a device to one at a
// time): the earlier slot is left, and the new one made.
TEST_F(DevicePluginTest, AllocateOfADeviceOfAnEarlierSlotLeavesThatSlot) {
  StartPlugin();
  dppb::AllocateResponse response;
  ASSERT_TRUE(Allocate({Share(kUuid1, 0), Share(kUuid1, 1)}, &response).ok());
  ASSERT_TRUE(Allocate({Share(kUuid1, 1)}, &response).ok());
  ExpectOnlySlot(Share(kUuid1, 1), 250);
}

// The kubelet restarts: it removes the plugins' sockets and serves kubelet.sock anew. The plugin
// notices, listens again and registers a second time; the new socket answers.
TEST_F(DevicePluginTest, AKubeletRestartLeadsToASecondRegister) {
  StartPlugin();
  ASSERT_TRUE(kubelet_.WaitFor(1));
  fs::remove(Dir() + "/tessera.sock");
  StartKubelet();
  ASSERT_TRUE(kubelet_.WaitFor(2));
  EXPECT_EQ(kubelet_.requests()[1].endpoint(), "tessera.sock");
  // The kubelet has answered; the plugin counts the registration when the answer is back.
  for (int i = 0; i < 200 && server_->registrations() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(server_->registrations(), 2);
  grpc::ClientContext context;
  Deadline(&context);
  dppb::DevicePluginOptions options;
  for (int i = 0; i < 100 && !fs::exists(Dir() + "/tessera.sock"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(Plugin()->GetDevicePluginOptions(&context, dppb::Empty(), &options).ok());
  EXPECT_TRUE(options.get_preferred_allocation_available());
}

}  // namespace
}  // namespace tessera::k8s

namespace tessera::k8s {
namespace {

// PodResources List names the devices live containers hold: a slot none of whose devices is
// listed (for this resource; the same id under another resource does not count) is released,
// its tenant leaves the node registry and the checkpoint; a slot with one device still listed stays.
TEST_F(DevicePluginTest, ASlotWhoseDevicesLeavePodResourcesListIsReleasedAndOneStillListedStays) {
  StartPodResources();
  pod_resources_.Set({{"tessera.io/gpu-share", {Share(kUuid0, 0), Share(kUuid0, 1), Share(kUuid1, 0)}}});
  StartPlugin(std::chrono::seconds(10), std::chrono::milliseconds(50));
  dppb::AllocateResponse response;
  ASSERT_TRUE(Allocate({Share(kUuid0, 0), Share(kUuid0, 1)}, &response).ok());
  ASSERT_TRUE(Allocate({Share(kUuid1, 0)}, &response).ok());
  ASSERT_TRUE(WaitForLists(2));
  EXPECT_EQ(TenantNames().size(), 2u);
  // The first pod's container keeps one of its two devices; the second pod is gone (its id is
  // still listed, but as another resource's).
  pod_resources_.Set({{"tessera.io/gpu-share", {Share(kUuid0, 1)}}, {"example.com/other", {Share(kUuid1, 0)}}});
  ASSERT_TRUE(WaitForLists(2));
  EXPECT_THAT(TenantNames(), ::testing::ElementsAre("k8s-dp/" + Share(kUuid0, 0)));
  EXPECT_THAT(plugin_->Slots(), ::testing::ElementsAre("k8s-dp/" + Share(kUuid0, 0)));
  std::ifstream in(plugin_->checkpoint_path());
  const std::string checkpoint((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(checkpoint, HasSubstr(Share(kUuid0, 1)));
  EXPECT_THAT(checkpoint, ::testing::Not(HasSubstr(Share(kUuid1, 0))));
  EXPECT_FALSE(fs::exists(options_.state_dir + "/tenants/" + std::string(kUuid1) + "__0"));
}

// Tenancy follows Kubernetes': once PodResources names the pod that holds a slot's devices, the
// slot is billed to the pod's namespace, within a watch period of the Allocate (the reconcile
// period here is a minute), and a restarted plugin keeps the name.
TEST_F(DevicePluginTest, ASlotIsBilledToItsPodsNamespaceOnceTheKubeletNamesThePod) {
  StartPodResources();
  pod_resources_.Set({{"tessera.io/gpu-share", {Share(kUuid0, 0), Share(kUuid0, 1)}}});
  StartPlugin(std::chrono::seconds(10), std::chrono::seconds(60));
  dppb::AllocateResponse response;
  ASSERT_TRUE(Allocate({Share(kUuid0, 0), Share(kUuid0, 1)}, &response).ok());
  ASSERT_TRUE(WaitForLists(1));
  const std::string slot = "k8s-dp/" + Share(kUuid0, 0);
  for (int i = 0; i < 200 && TenantNamed(slot).account != "team-a"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(TenantNamed(slot).account, "team-a");
  EXPECT_EQ(TenantNamed(slot).workload, "team-a/pod-1/main");
  server_.reset();
  plugin_.reset();
  StartPlugin();
  EXPECT_EQ(TenantNamed(slot).workload, "team-a/pod-1/main");
  EXPECT_EQ(plugin_->NameOwners({{Share(kUuid0, 1), {"team-a", "pod-1", "main"}}}).size(), 0u);  // already so
  // A slot is --account's until its pod is named.
  ASSERT_TRUE(Allocate({Share(kUuid1, 0)}, &response).ok());
  const std::string later = "k8s-dp/" + Share(kUuid1, 0);
  EXPECT_EQ(TenantNamed(later).account, "team-k8s");
  EXPECT_THAT(plugin_->NameOwners({{Share(kUuid1, 0), {"team-b", "pod-9", "main"}}}), ::testing::ElementsAre(later));
  EXPECT_EQ(TenantNamed(later).account, "team-b");
}

// Fail safe: a List that fails says nothing about the pods, so no slot is released (their
// limits stay); the failure is reported.
TEST_F(DevicePluginTest, AFailingPodResourcesListReleasesNothing) {
  StartPodResources();
  pod_resources_.Fail(true);
  StartPlugin(std::chrono::seconds(10), std::chrono::milliseconds(50));
  dppb::AllocateResponse response;
  ASSERT_TRUE(Allocate({Share(kUuid0, 0)}, &response).ok());
  ASSERT_TRUE(Allocate({Share(kUuid1, 2)}, &response).ok());
  ASSERT_TRUE(WaitForLists(2, /*failed=*/true));
  EXPECT_EQ(TenantNames().size(), 2u);
  EXPECT_EQ(server_->reconciles(), 0);
  std::lock_guard lock(errors_mu_);
  ASSERT_FALSE(errors_.empty());
  EXPECT_THAT(errors_[0], HasSubstr("PodResources List on " + PodResourcesSocket()));
  EXPECT_THAT(errors_[0], HasSubstr("no slot released"));
}

// A restarted plugin adopts the slots of its checkpoint: they stay in the node registry, and an
// Allocate of an adopted device leaves the adopted slot first, as it did before the restart.
TEST_F(DevicePluginTest, ARestartedPluginAdoptsItsSlotsFromTheCheckpoint) {
  StartPlugin();
  dppb::AllocateResponse response;
  ASSERT_TRUE(Allocate({Share(kUuid1, 0), Share(kUuid1, 1)}, &response).ok());
  server_.reset();
  plugin_.reset();
  StartPlugin();
  EXPECT_THAT(plugin_->Slots(), ::testing::ElementsAre("k8s-dp/" + Share(kUuid1, 0)));
  std::ifstream tenant_file(options_.state_dir + "/tenants/" + std::string(kUuid1) + "__0");
  int index = -1;
  tenant_file >> index;
  EXPECT_EQ(index, 0);
  ASSERT_TRUE(Allocate({Share(kUuid1, 1)}, &response).ok());
  ExpectOnlySlot(Share(kUuid1, 1), 250);
}

// A slot the checkpoint names on a GPU NVML no longer lists is left behind, said so, and the
// plugin starts with the others: not starting would leave every later pod of the node without GPUs.
TEST_F(DevicePluginTest, ACheckpointedSlotThatCannotBeTakenUpAgainIsLeftBehindAndThePluginStarts) {
  StartPlugin();
  dppb::AllocateResponse response;
  ASSERT_TRUE(Allocate({Share(kUuid0, 0)}, &response).ok());
  ASSERT_TRUE(Allocate({Share(kUuid1, 0)}, &response).ok());
  server_.reset();
  plugin_.reset();
  ::setenv("TESSERA_FAKE_NVML_CONFIG", "A100-40GB", 1);  // GPU 1 is gone
  auto plugin = SharePlugin::Open(options_);
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  EXPECT_THAT((*plugin)->Slots(), ::testing::ElementsAre("k8s-dp/" + Share(kUuid0, 0)));
  ASSERT_EQ((*plugin)->NotAdopted().size(), 1u);
  EXPECT_THAT((*plugin)->NotAdopted()[0],
              HasSubstr("(k8s-dp/" + Share(kUuid1, 0) + "): not taken up again: GPU 1 is not one of the 1 GPUs NVML lists"));
  std::ifstream in((*plugin)->checkpoint_path());
  const std::string checkpoint((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(checkpoint, ::testing::Not(HasSubstr(Share(kUuid1, 0))));
}

TEST_F(DevicePluginTest, ACorruptCheckpointIsAnErrorNamingTheFileAndField) {
  fs::create_directories(options_.state_dir);
  const std::string path = options_.state_dir + "/checkpoint.json";
  std::ofstream(path) << R"({"version": 1, "slots": [{"tenant": "k8s-dp/x", "devices": ["x"], "gpus": [0],
                             "mem_bytes": 1, "share": 250, "account": "a", "workload": "w"}]})";
  auto plugin = SharePlugin::Open(options_);
  ASSERT_FALSE(plugin.ok());
  EXPECT_EQ(plugin.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(plugin.status().message(), HasSubstr("checkpoint '" + path + "': slots[0].index: missing"));
  std::ofstream(path) << "{not json";
  plugin = SharePlugin::Open(options_);
  ASSERT_FALSE(plugin.ok());
  EXPECT_THAT(plugin.status().message(), HasSubstr("checkpoint '" + path + "': not a version 1 checkpoint"));
  EXPECT_TRUE(Tenants().empty());
}

}  // namespace
}  // namespace tessera::k8s
