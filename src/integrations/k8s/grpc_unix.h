// Private: what the two kubelet plugins (dra_plugin.cc, device_plugin_server.cc) do alike with
// gRPC: serve one service on a unix socket, and keep exceptions out of the handlers.
//
//   auto server = ListenUnix("/var/lib/kubelet/device-plugins/tessera.sock", &service);
//   // a stale socket file (a killed plugin's) is replaced; 108+ characters: INVALID_ARGUMENT
//   return Guarded("tessera device-plugin", [&] { ...; return grpc::Status::OK; });
//   // an exception "boom" -> INTERNAL "tessera device-plugin: boom"
#pragma once

#include <grpcpp/grpcpp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "tessera/core/status.h"

namespace tessera::k8s {

template <typename F>
grpc::Status Guarded(const char* who, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string(who) + ": " + e.what());
  } catch (...) {
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string(who) + ": unknown exception");
  }
}

inline StatusOr<std::unique_ptr<grpc::Server>> ListenUnix(const std::string& socket, grpc::Service* service) {
  if (socket.size() > 107) {  // sockaddr_un.sun_path
    return InvalidArgumentError("'" + socket + "' is longer than a unix socket's 107 characters");
  }
  if (std::remove(socket.c_str()) != 0 && errno != ENOENT) {
    return InternalError("cannot replace '" + socket + "': " + std::strerror(errno));
  }
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) return UnavailableError("cannot listen on '" + socket + "'");
  return server;
}

}  // namespace tessera::k8s
