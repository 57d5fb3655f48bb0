// DraPluginServer and DraKubeletClient (tessera/integrations/k8s/dra_plugin.h) over gRPC.
#include "tessera/integrations/k8s/dra_plugin.h"

#include <grpcpp/grpcpp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>

#include "dra/v1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "src/integrations/k8s/grpc_unix.h"
#include "tessera/integrations/k8s/container_edits.h"
#include "tessera/integrations/k8s/names.h"

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace regpb = ::pluginregistration;

namespace tessera::k8s {
namespace {

// The service name the kubelet looks for in supported_versions for the v1 DRA service
// (k8s.io/kubelet/pkg/apis/dra/v1: DRAPluginService).
constexpr char kDraV1Service[] = "v1.DRAPlugin";

std::vector<ClaimRef> Refs(const google::protobuf::RepeatedPtrField<drapb::Claim>& claims) {
  std::vector<ClaimRef> refs;
  refs.reserve(claims.size());
  for (const drapb::Claim& c : claims) refs.push_back({.ns = c.namespace_(), .uid = c.uid(), .name = c.name()});
  return refs;
}

class DraService final : public drapb::DRAPlugin::Service {
 public:
  explicit DraService(DraDriver* driver) : driver_(driver) {}

  grpc::Status NodePrepareResources(grpc::ServerContext*, const drapb::NodePrepareResourcesRequest* request,
                                    drapb::NodePrepareResourcesResponse* response) override {
    return Guarded("tessera dra-driver", [&] {
      for (auto& [uid, result] : driver_->Prepare(Refs(request->claims()))) {
        drapb::NodePrepareResourceResponse& out = (*response->mutable_claims())[uid];
        out.set_error(result.error);
        for (const PreparedDevice& d : result.devices) {
          drapb::Device* device = out.add_devices();
          for (const std::string& r : d.requests) device->add_request_names(r);
          device->set_pool_name(d.pool);
          device->set_device_name(d.device);
          for (const std::string& id : d.cdi_ids) device->add_cdi_device_ids(id);
        }
      }
      return grpc::Status::OK;
    });
  }

  grpc::Status NodeUnprepareResources(grpc::ServerContext*, const drapb::NodeUnprepareResourcesRequest* request,
                                      drapb::NodeUnprepareResourcesResponse* response) override {
    return Guarded("tessera dra-driver", [&] {
      for (auto& [uid, error] : driver_->Unprepare(Refs(request->claims()))) {
        (*response->mutable_claims())[uid].set_error(error);
      }
      return grpc::Status::OK;
    });
  }

 private:
  DraDriver* driver_;
};

class RegistrationService final : public regpb::Registration::Service {
 public:
  explicit RegistrationService(std::string endpoint) : endpoint_(std::move(endpoint)) {}

  grpc::Status GetInfo(grpc::ServerContext*, const regpb::InfoRequest*, regpb::PluginInfo* info) override {
    return Guarded("tessera dra-driver", [&] {
      info->set_type("DRAPlugin");
      info->set_name(std::string(kDriverName));
      info->set_endpoint(endpoint_);
      info->add_supported_versions(kDraV1Service);
      return grpc::Status::OK;
    });
  }

  grpc::Status NotifyRegistrationStatus(grpc::ServerContext*, const regpb::RegistrationStatus* status,
                                        regpb::RegistrationStatusResponse*) override {
    return Guarded("tessera dra-driver", [&] {
      std::lock_guard lock(mu_);
      state_ = {.notified = true, .registered = status->plugin_registered(), .error = status->error()};
      if (!status->plugin_registered()) {
        std::fprintf(stderr, "tessera dra-driver: the kubelet did not register the plugin: %s\n",
                     status->error().c_str());
      }
      return grpc::Status::OK;
    });
  }

  RegistrationState state() const {
    std::lock_guard lock(mu_);
    return state_;
  }

 private:
  std::string endpoint_;
  mutable std::mutex mu_;
  RegistrationState state_;
};

Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return Status::Ok();
  const std::string message = what + ": " + s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return UnavailableError(message);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return UnavailableError(message + " (deadline exceeded)");
    case grpc::StatusCode::INVALID_ARGUMENT:
      return InvalidArgumentError(message);
    default:
      return InternalError(message);
  }
}

}  // namespace

struct DraPluginServer::Impl {
  std::string registration_socket, dra_socket;
  std::unique_ptr<DraService> dra;
  std::unique_ptr<RegistrationService> registration;
  std::unique_ptr<grpc::Server> dra_server, registration_server;
  std::once_flag stopped;
};

DraPluginServer::DraPluginServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DraPluginServer::~DraPluginServer() { Shutdown(); }

StatusOr<std::unique_ptr<DraPluginServer>> DraPluginServer::Start(DraDriver* driver, const DraPluginOptions& options) {
  if (driver == nullptr) return InvalidArgumentError("no driver");
  TESSERA_RETURN_IF_ERROR(MakeDirs(options.registry_dir));
  TESSERA_RETURN_IF_ERROR(MakeDirs(options.plugin_dir));
  auto impl = std::make_unique<Impl>();
  impl->registration_socket = options.registry_dir + "/" + std::string(kDriverName) + "-reg.sock";
  impl->dra_socket = options.plugin_dir + "/dra.sock";
  impl->dra = std::make_unique<DraService>(driver);
  impl->registration = std::make_unique<RegistrationService>(impl->dra_socket);
  // The DRA service first: the kubelet connects to it as soon as registration answers.
  TESSERA_ASSIGN_OR_RETURN(impl->dra_server, ListenUnix(impl->dra_socket, impl->dra.get()));
  StatusOr<std::unique_ptr<grpc::Server>> reg = ListenUnix(impl->registration_socket, impl->registration.get());
  if (!reg.ok()) {
    impl->dra_server->Shutdown();
    std::remove(impl->dra_socket.c_str());
    return reg.status();
  }
  impl->registration_server = std::move(*reg);
  return std::unique_ptr<DraPluginServer>(new DraPluginServer(std::move(impl)));
}

void DraPluginServer::Shutdown() {
  std::call_once(impl_->stopped, [this] {
    // Registration first, so that the kubelet's watcher sees the plugin go before its service does.
    impl_->registration_server->Shutdown();
    std::remove(impl_->registration_socket.c_str());
    impl_->dra_server->Shutdown();
    std::remove(impl_->dra_socket.c_str());
  });
}

const std::string& DraPluginServer::registration_socket() const { return impl_->registration_socket; }
const std::string& DraPluginServer::dra_socket() const { return impl_->dra_socket; }
RegistrationState DraPluginServer::registration() const { return impl_->registration->state(); }

// --- the kubelet's side ------------------------------------------------------------------------

struct DraKubeletClient::Impl {
  std::chrono::milliseconds timeout;
  std::mutex mu;
  std::map<std::string, std::shared_ptr<grpc::Channel>> channels;  // by socket

  std::shared_ptr<grpc::Channel> Channel(const std::string& socket) {
    std::lock_guard lock(mu);
    auto& channel = channels[socket];
    if (!channel) channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
    return channel;
  }
  void Deadline(grpc::ClientContext* context) const {
    context->set_deadline(std::chrono::system_clock::now() + timeout);
  }
};

DraKubeletClient::DraKubeletClient(std::chrono::milliseconds timeout) : impl_(std::make_unique<Impl>()) {
  impl_->timeout = timeout;
}
DraKubeletClient::~DraKubeletClient() = default;

StatusOr<PluginInfo> DraKubeletClient::GetInfo(const std::string& socket) {
  auto stub = regpb::Registration::NewStub(impl_->Channel(socket));
  grpc::ClientContext context;
  impl_->Deadline(&context);
  regpb::PluginInfo info;
  TESSERA_RETURN_IF_ERROR(FromGrpc(stub->GetInfo(&context, regpb::InfoRequest(), &info), "GetInfo on " + socket));
  PluginInfo out{.type = info.type(), .name = info.name(), .endpoint = info.endpoint(), .supported_versions = {}};
  for (const std::string& v : info.supported_versions()) out.supported_versions.push_back(v);
  return out;
}

Status DraKubeletClient::NotifyRegistrationStatus(const std::string& socket, bool registered, const std::string& error) {
  auto stub = regpb::Registration::NewStub(impl_->Channel(socket));
  grpc::ClientContext context;
  impl_->Deadline(&context);
  regpb::RegistrationStatus status;
  status.set_plugin_registered(registered);
  status.set_error(error);
  regpb::RegistrationStatusResponse response;
  return FromGrpc(stub->NotifyRegistrationStatus(&context, status, &response), "NotifyRegistrationStatus on " + socket);
}

StatusOr<std::map<std::string, ClaimResult>> DraKubeletClient::Prepare(const std::string& socket,
                                                                       const std::vector<ClaimRef>& claims) {
  auto stub = drapb::DRAPlugin::NewStub(impl_->Channel(socket));
  grpc::ClientContext context;
  impl_->Deadline(&context);
  drapb::NodePrepareResourcesRequest request;
  for (const ClaimRef& c : claims) {
    drapb::Claim* claim = request.add_claims();
    claim->set_namespace_(c.ns);
    claim->set_uid(c.uid);
    claim->set_name(c.name);
  }
  drapb::NodePrepareResourcesResponse response;
  TESSERA_RETURN_IF_ERROR(FromGrpc(stub->NodePrepareResources(&context, request, &response),
                                   "NodePrepareResources on " + socket));
  std::map<std::string, ClaimResult> out;
  for (const auto& [uid, claim] : response.claims()) {
    ClaimResult& r = out[uid];
    r.error = claim.error();
    for (const drapb::Device& d : claim.devices()) {
      PreparedDevice device{.requests = {}, .pool = d.pool_name(), .device = d.device_name(), .cdi_ids = {}};
      for (const std::string& n : d.request_names()) device.requests.push_back(n);
      for (const std::string& id : d.cdi_device_ids()) device.cdi_ids.push_back(id);
      r.devices.push_back(std::move(device));
    }
  }
  return out;
}

StatusOr<std::map<std::string, std::string>> DraKubeletClient::Unprepare(const std::string& socket,
                                                                         const std::vector<ClaimRef>& claims) {
  auto stub = drapb::DRAPlugin::NewStub(impl_->Channel(socket));
  grpc::ClientContext context;
  impl_->Deadline(&context);
  drapb::NodeUnprepareResourcesRequest request;
  for (const ClaimRef& c : claims) {
    drapb::Claim* claim = request.add_claims();
    claim->set_namespace_(c.ns);
    claim->set_uid(c.uid);
    claim->set_name(c.name);
  }
  drapb::NodeUnprepareResourcesResponse response;
  TESSERA_RETURN_IF_ERROR(FromGrpc(stub->NodeUnprepareResources(&context, request, &response),
                                   "NodeUnprepareResources on " + socket));
  std::map<std::string, std::string> out;
  for (const auto& [uid, claim] : response.claims()) out[uid] = claim.error();
  return out;
}

}  // namespace tessera::k8s
