// The DRA kubelet plugin's transport: DraPluginServer serves a DraDriver over the kubelet's gRPC
// on unix sockets, and DraKubeletClient is the kubelet's side of the same calls (the fake kubelet
// of the tests, the benchmark, and `tessera_k8s_fake_kubelet`). No gRPC type appears here; the
// messages are those of src/integrations/k8s/proto/ (k8s.io/kubelet/pkg/apis/dra/v1 and
// pluginregistration/v1, generated at build time).
//
// Sockets (defaults; `tessera k8s dra-driver` flags change the folders):
//   /var/lib/kubelet/plugins_registry/gpu.tessera.io-reg.sock   service pluginregistration.Registration
//   /var/lib/kubelet/plugins/gpu.tessera.io/dra.sock            service k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin
// The kubelet's plugin watcher sees the registration socket appear, calls GetInfo, which answers
// {type "DRAPlugin", name "gpu.tessera.io", endpoint <dra.sock>, supported_versions
// ["v1.DRAPlugin"]} (the kubelet's DRAPluginService name for the v1 service), connects to the
// endpoint and reports with NotifyRegistrationStatus. A stale socket file left by a killed plugin
// is replaced at Start.
//
// Worked example: Start(driver, {registry_dir "/r", plugin_dir "/p"}) listens on
// /r/gpu.tessera.io-reg.sock and /p/dra.sock; DraKubeletClient(5 s).GetInfo("/r/gpu.tessera.io-reg.sock")
// -> {"DRAPlugin", "gpu.tessera.io", "/p/dra.sock", {"v1.DRAPlugin"}}; Prepare("/p/dra.sock",
// {{"team-a", "U", "infer"}}) -> {U: devices [...]}.
//
// Errors: a claim's failure is its entry's error (the RPC succeeds); a handler never lets an
// exception out (INTERNAL instead). Thread-safety: the server runs gRPC's threads and calls the
// driver from them (DraDriver is thread-safe); Shutdown may be called from any thread, once the
// server is not needed (the destructor calls it). A DraKubeletClient is safe from several threads.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/integrations/k8s/dra_claim.h"
#include "tessera/integrations/k8s/dra_driver.h"

namespace tessera::k8s {

struct DraPluginOptions {
  std::string registry_dir = "/var/lib/kubelet/plugins_registry";     // the kubelet's plugin watcher
  std::string plugin_dir = "/var/lib/kubelet/plugins/gpu.tessera.io";  // dra.sock
};

// What the kubelet said last in NotifyRegistrationStatus.
struct RegistrationState {
  bool notified = false;
  bool registered = false;
  std::string error;
};

class DraPluginServer {
 public:
  // Listens on both sockets (the folders are created); `driver` must outlive the server.
  static StatusOr<std::unique_ptr<DraPluginServer>> Start(DraDriver* driver, const DraPluginOptions& options);
  ~DraPluginServer();
  DraPluginServer(const DraPluginServer&) = delete;
  DraPluginServer& operator=(const DraPluginServer&) = delete;

  // Stops serving (calls in progress finish) and removes the socket files.
  void Shutdown();
  const std::string& registration_socket() const;
  const std::string& dra_socket() const;
  RegistrationState registration() const;

  struct Impl;

 private:
  explicit DraPluginServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct PluginInfo {
  std::string type, name, endpoint;
  std::vector<std::string> supported_versions;
};

// The kubelet's side: one call per method, over "unix:<socket>", each with `timeout`.
class DraKubeletClient {
 public:
  explicit DraKubeletClient(std::chrono::milliseconds timeout = std::chrono::seconds(5));
  ~DraKubeletClient();
  DraKubeletClient(const DraKubeletClient&) = delete;
  DraKubeletClient& operator=(const DraKubeletClient&) = delete;

  // UNAVAILABLE (with gRPC's message) when nothing answers on the socket.
  StatusOr<PluginInfo> GetInfo(const std::string& registration_socket);
  Status NotifyRegistrationStatus(const std::string& registration_socket, bool registered, const std::string& error);
  StatusOr<std::map<std::string, ClaimResult>> Prepare(const std::string& dra_socket, const std::vector<ClaimRef>& claims);
  StatusOr<std::map<std::string, std::string>> Unprepare(const std::string& dra_socket,
                                                         const std::vector<ClaimRef>& claims);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::k8s
