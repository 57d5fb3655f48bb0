// SharePluginServer (tessera/integrations/k8s/device_plugin_server.h): the v1beta1 device plugin
// over gRPC, its registration with the kubelet and the watcher that registers again.
#include "tessera/integrations/k8s/device_plugin_server.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "podresources/v1/api.grpc.pb.h"
#include "src/integrations/k8s/grpc_unix.h"

namespace dppb = ::v1beta1;
namespace prpb = ::v1;

namespace tessera::k8s {
namespace {

constexpr char kApiVersion[] = "v1beta1";

grpc::Status ToGrpc(const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, std::string(s.message()));
    case StatusCode::kFailedPrecondition:
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, std::string(s.message()));
    case StatusCode::kResourceExhausted:
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, std::string(s.message()));
    default:
      return grpc::Status(grpc::StatusCode::INTERNAL, std::string(s.message()));
  }
}

// The device list's version: bumped when it changes, so that the ListAndWatch streams send again.
struct Changes {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t generation = 0;
  bool stopping = false;

  void Bump() {
    { std::lock_guard lock(mu); ++generation; }
    cv.notify_all();
  }
  void Stop() {
    { std::lock_guard lock(mu); stopping = true; }
    cv.notify_all();
  }
};

class DevicePluginService final : public dppb::DevicePlugin::Service {
 public:
  DevicePluginService(SharePlugin* plugin, std::shared_ptr<Changes> changes)
      : plugin_(plugin), changes_(std::move(changes)) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const dppb::Empty*,
                                      dppb::DevicePluginOptions* options) override {
    options->set_get_preferred_allocation_available(true);
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(grpc::ServerContext* context, const dppb::Empty*,
                            grpc::ServerWriter<dppb::ListAndWatchResponse>* writer) override {
    return Guarded("tessera device-plugin", [&] {
      uint64_t sent = 0;
      for (bool first = true;; first = false) {
        {
          std::unique_lock lock(changes_->mu);
          // Woken by a change or a stop; the timeout notices a kubelet that went away.
          while (!first && changes_->generation == sent && !changes_->stopping && !context->IsCancelled()) {
            changes_->cv.wait_for(lock, std::chrono::milliseconds(200));
          }
          if (changes_->stopping || context->IsCancelled()) return grpc::Status::OK;
          sent = changes_->generation;
        }
        dppb::ListAndWatchResponse response;
        for (const ShareDevice& d : plugin_->Devices()) {
          dppb::Device* device = response.add_devices();
          device->set_id(d.id);
          device->set_health(d.healthy ? "Healthy" : "Unhealthy");
        }
        if (!writer->Write(response)) return grpc::Status::OK;  // the kubelet hung up
      }
    });
  }

  grpc::Status GetPreferredAllocation(grpc::ServerContext*, const dppb::PreferredAllocationRequest* request,
                                      dppb::PreferredAllocationResponse* response) override {
    return Guarded("tessera device-plugin", [&] {
      for (const dppb::ContainerPreferredAllocationRequest& c : request->container_requests()) {
        std::vector<std::string> available(c.available_deviceids().begin(), c.available_deviceids().end());
        std::vector<std::string> must(c.must_include_deviceids().begin(), c.must_include_deviceids().end());
        StatusOr<std::vector<std::string>> chosen = plugin_->PreferredShares(available, must, c.allocation_size());
        if (!chosen.ok()) return ToGrpc(chosen.status());
        dppb::ContainerPreferredAllocationResponse* out = response->add_container_responses();
        for (const std::string& id : *chosen) out->add_deviceids(id);
      }
      return grpc::Status::OK;
    });
  }

  grpc::Status Allocate(grpc::ServerContext*, const dppb::AllocateRequest* request,
                        dppb::AllocateResponse* response) override {
    return Guarded("tessera device-plugin", [&] {
      for (const dppb::ContainerAllocateRequest& c : request->container_requests()) {
        StatusOr<ShareAllocation> a = plugin_->Allocate({c.devices_ids().begin(), c.devices_ids().end()});
        if (!a.ok()) return ToGrpc(a.status());
        dppb::ContainerAllocateResponse* out = response->add_container_responses();
        for (const auto& [key, value] : a->env) (*out->mutable_envs())[key] = value;
        for (const ContainerMount& m : a->mounts) {
          dppb::Mount* mount = out->add_mounts();
          mount->set_host_path(m.host_path);
          mount->set_container_path(m.container_path);
          mount->set_read_only(m.read_only);
        }
        for (const ContainerDeviceNode& d : a->devices) {
          dppb::DeviceSpec* device = out->add_devices();
          device->set_host_path(d.host_path);
          device->set_container_path(d.container_path);
          device->set_permissions("rw");
        }
      }
      return grpc::Status::OK;
    });
  }

  grpc::Status PreStartContainer(grpc::ServerContext*, const dppb::PreStartContainerRequest*,
                                 dppb::PreStartContainerResponse*) override {
    return grpc::Status::OK;  // not asked for (pre_start_required false)
  }

 private:
  SharePlugin* plugin_;
  std::shared_ptr<Changes> changes_;
};

// The file's identity, 0 when there is none.
ino_t Inode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

}  // namespace

struct SharePluginServer::Impl {
  SharePlugin* plugin = nullptr;
  SharePluginServerOptions options;
  std::string socket, kubelet_socket;
  std::shared_ptr<Changes> changes;
  std::unique_ptr<DevicePluginService> service;
  std::unique_ptr<grpc::Server> server;
  ino_t own_inode = 0, kubelet_inode = 0;
  bool registered = false;
  bool failing = false;  // the last Register failed, and it was logged
  std::atomic<int> registrations{0};
  std::atomic<int> reconciles{0}, failed_reconciles{0};
  std::mutex mu;  // the watcher's stop flag
  std::condition_variable cv;
  bool stop = false;
  std::thread watcher;
  std::once_flag stopped;

  void Log(const std::string& line) const {
    if (options.log) {
      options.log(line);
    } else {
      std::fprintf(stderr, "tessera k8s device-plugin: %s\n", line.c_str());
    }
  }

  void StopServing() {
    if (changes) changes->Stop();
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    server.reset();
    service.reset();
  }

  Status Listen() {
    changes = std::make_shared<Changes>();
    service = std::make_unique<DevicePluginService>(plugin, changes);
    TESSERA_ASSIGN_OR_RETURN(server, ListenUnix(socket, service.get()));
    own_inode = Inode(socket);
    return Status::Ok();
  }

  void Register() {
    kubelet_inode = Inode(kubelet_socket);
    auto channel = grpc::CreateChannel("unix:" + kubelet_socket, grpc::InsecureChannelCredentials());
    auto stub = dppb::Registration::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + options.register_timeout);
    dppb::RegisterRequest request;
    request.set_version(kApiVersion);
    request.set_endpoint(options.socket_name);
    request.set_resource_name(plugin->options().resource_name);
    request.mutable_options()->set_get_preferred_allocation_available(true);
    dppb::Empty response;
    grpc::Status s = stub->Register(&context, request, &response);
    registered = s.ok();
    if (registered) {
      ++registrations;
      Log("registered " + plugin->options().resource_name + " with the kubelet (" + kubelet_socket + "), endpoint " +
          options.socket_name);
      failing = false;
    } else if (!failing) {  // once per run of failures: the kubelet may be away for long
      Log("Register on " + kubelet_socket + ": " + s.error_message() + " (tried again when kubelet.sock is there)");
      failing = true;
    }
  }

  // PodResources List -> SharePlugin::Release; a failed List releases nothing.
  void Reconcile() {
    auto channel = grpc::CreateChannel("unix:" + options.pod_resources_socket, grpc::InsecureChannelCredentials());
    auto stub = prpb::PodResourcesLister::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + options.register_timeout);
    prpb::ListPodResourcesResponse response;
    grpc::Status s = stub->List(&context, prpb::ListPodResourcesRequest(), &response);
    if (!s.ok()) {
      ++failed_reconciles;
      const std::string line = "PodResources List on " + options.pod_resources_socket + ": " + s.error_message() +
                               " (no slot released; tried again in the next period)";
      if (options.error_log) {
        options.error_log(line);
      } else {
        std::fprintf(stderr, "tessera k8s device-plugin: %s\n", line.c_str());
      }
      return;
    }
    std::set<std::string> live;
    std::map<std::string, SharePlugin::DeviceOwner> owners;
    const std::string& resource = plugin->options().resource_name;
    for (const prpb::PodResources& pod : response.pod_resources()) {
      for (const prpb::ContainerResources& c : pod.containers()) {
        for (const prpb::ContainerDevices& d : c.devices()) {
          if (d.resource_name() != resource) continue;
          for (const std::string& id : d.device_ids()) {
            live.insert(id);
            owners[id] = {.pod_namespace = pod.namespace_(), .pod = pod.name(), .container = c.name()};
          }
        }
      }
    }
    for (const std::string& tenant : plugin->NameOwners(owners)) {
      Log("slot " + tenant + " is billed to its pod's namespace from now on (PodResources List)");
    }
    for (const std::string& tenant : plugin->Release(live, options.release_grace)) {
      Log("released slot " + tenant + ": no live container holds its devices (PodResources List)");
    }
    ++reconciles;
  }

  void Watch() {
    auto last_health = std::chrono::steady_clock::now();
    auto last_reconcile = std::chrono::steady_clock::now();
    std::unique_lock lock(mu);
    while (!cv.wait_for(lock, options.watch_period, [this] { return stop; })) {
      lock.unlock();
      const ino_t own = Inode(socket), kubelet = Inode(kubelet_socket);
      if (own == 0 || own != own_inode || (kubelet != 0 && kubelet_inode != 0 && kubelet != kubelet_inode)) {
        // The kubelet restarted (it removes the plugins' sockets, and makes kubelet.sock anew).
        Log(own == 0 || own != own_inode ? socket + " is gone: the kubelet restarted; serving and registering again"
                                         : kubelet_socket + " was created again; serving and registering again");
        StopServing();
        if (Status st = Listen(); !st.ok()) {
          Log(std::string(st.message()));
        } else {
          Register();
        }
      } else if (!registered && kubelet != 0) {
        Register();
      }
      if (std::chrono::steady_clock::now() - last_health >= options.health_period) {
        last_health = std::chrono::steady_clock::now();
        if (plugin->RefreshHealth() && changes) {
          Log("GPU health changed; sending the device list again");
          changes->Bump();
        }
      }
      // A slot just allocated is named after its pod at the next watch, not a period later.
      const auto since = std::chrono::steady_clock::now() - last_reconcile;
      if (options.reconcile_period.count() > 0 &&
          (since >= options.reconcile_period ||
           (since >= options.watch_period && plugin->AwaitsOwner(options.naming_window)))) {
        last_reconcile = std::chrono::steady_clock::now();
        Reconcile();
      }
      lock.lock();
    }
  }
};

SharePluginServer::SharePluginServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SharePluginServer::~SharePluginServer() { Shutdown(); }

StatusOr<std::unique_ptr<SharePluginServer>> SharePluginServer::Start(SharePlugin* plugin,
                                                                      const SharePluginServerOptions& options) {
  if (plugin == nullptr) return InvalidArgumentError("no plugin");
  if (options.socket_name.empty() || options.socket_name.find('/') != std::string::npos) {
    return InvalidArgumentError("socket name '" + options.socket_name + "': a file name, without '/'");
  }
  TESSERA_RETURN_IF_ERROR(MakeDirs(options.socket_dir));
  auto impl = std::make_unique<Impl>();
  impl->plugin = plugin;
  impl->options = options;
  impl->socket = options.socket_dir + "/" + options.socket_name;
  impl->kubelet_socket = options.socket_dir + "/kubelet.sock";
  TESSERA_RETURN_IF_ERROR(impl->Listen());
  impl->Register();
  Impl* raw = impl.get();
  impl->watcher = std::thread([raw] { raw->Watch(); });
  return std::unique_ptr<SharePluginServer>(new SharePluginServer(std::move(impl)));
}

void SharePluginServer::Shutdown() {
  std::call_once(impl_->stopped, [this] {
    {
      std::lock_guard lock(impl_->mu);
      impl_->stop = true;
    }
    impl_->cv.notify_all();
    if (impl_->watcher.joinable()) impl_->watcher.join();
    impl_->StopServing();
    std::remove(impl_->socket.c_str());
  });
}

std::string SharePluginServer::socket() const { return impl_->socket; }
int SharePluginServer::registrations() const { return impl_->registrations.load(); }
int SharePluginServer::reconciles() const { return impl_->reconciles.load(); }
int SharePluginServer::failed_reconciles() const { return impl_->failed_reconciles.load(); }

}  // namespace tessera::k8s
