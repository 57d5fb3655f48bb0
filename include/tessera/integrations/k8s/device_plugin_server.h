// SharePluginServer: serves a SharePlugin (device_plugin.h) as a kubelet device plugin over the
// v1beta1 gRPC (src/integrations/k8s/proto/deviceplugin/v1beta1/api.proto, generated at build
// time; no gRPC type appears here).
//
// Flow (the kubelet's device manager, Kubernetes before DRA):
//   1. Listen on <socket dir>/<socket name> (default /var/lib/kubelet/device-plugins/
//      tessera-gpu-share.sock; a stale file is replaced) and serve service v1beta1.DevicePlugin.
//   2. Register with the kubelet: Registration.Register on <socket dir>/kubelet.sock with
//      {version "v1beta1", endpoint "<socket name>" (relative, as the kubelet wants),
//       resource_name, options {get_preferred_allocation_available true}}.
//   3. The kubelet calls ListAndWatch (a stream: the devices now, then again whenever their health
//      changes: SharePlugin::RefreshHealth every health_period), GetPreferredAllocation
//      (SharePlugin::PreferredShares) and Allocate (SharePlugin::Allocate, per container).
//   4. A kubelet that restarts deletes every socket in its folder and creates kubelet.sock anew. A
//      watcher (every watch_period) sees the plugin's socket gone, or kubelet.sock replaced (another
//      inode), or the last Register failed, and starts over at 1 (a new server: the old streams end).
//   5. Every reconcile_period the watcher calls the kubelet's PodResourcesLister.List
//      (podresources/v1, on pod_resources_socket) and releases the slots none of whose devices a
//      live container holds (SharePlugin::Release, slots younger than release_grace kept). A List
//      that fails (no socket, an error, the deadline) releases nothing, so that the limits of
//      running pods are never dropped on a guess; it is reported through `error_log`. The same
//      answer names each slot's pod (SharePlugin::NameOwners: account = the pod's namespace);
//      while a slot younger than naming_window waits for its name, List runs every watch_period.
// Errors: an Allocate that fails answers INVALID_ARGUMENT / FAILED_PRECONDITION with
// SharePlugin's message (the kubelet then fails the pod: fail closed); a handler never lets an
// exception out (INTERNAL). Register's failure is reported through `log` and retried.
//
// Worked example: Start(plugin, {socket_dir "/k"}) listens on /k/tessera-gpu-share.sock and calls
// Register on /k/kubelet.sock; registrations() == 1. The test's fake kubelet then removes
// /k/tessera-gpu-share.sock and recreates /k/kubelet.sock: within a watch period the plugin
// listens again and registrations() == 2.
//
// Thread-safety: gRPC's threads call the plugin (thread-safe); the watcher is one thread of its
// own. Shutdown from any thread (the destructor calls it).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "tessera/core/status.h"
#include "tessera/integrations/k8s/device_plugin.h"

namespace tessera::k8s {

struct SharePluginServerOptions {
  std::string socket_dir = "/var/lib/kubelet/device-plugins";
  std::string socket_name = "tessera-gpu-share.sock";
  std::chrono::milliseconds watch_period{1000};
  std::chrono::milliseconds health_period{10000};
  std::chrono::milliseconds register_timeout{5000};  // and List's deadline
  std::string pod_resources_socket = "/var/lib/kubelet/pod-resources/kubelet.sock";
  std::chrono::milliseconds reconcile_period{30000};  // 0: never call List (slots left only by Allocate)
  std::chrono::milliseconds release_grace{30000};     // a slot this young is not released
  // A slot this young whose pod PodResources has not named yet makes List run every watch_period.
  std::chrono::milliseconds naming_window{30000};
  std::function<void(const std::string&)> log;        // one line per event; null: stderr
  std::function<void(const std::string&)> error_log;  // one line per failed List; null: stderr
};

class SharePluginServer {
 public:
  // Listens and registers once (a failed Register is logged and retried by the watcher; only a
  // socket that cannot be listened on is an error here). `plugin` must outlive the server.
  static StatusOr<std::unique_ptr<SharePluginServer>> Start(SharePlugin* plugin, const SharePluginServerOptions& options);
  ~SharePluginServer();
  SharePluginServer(const SharePluginServer&) = delete;
  SharePluginServer& operator=(const SharePluginServer&) = delete;

  // Stops the watcher and the server, removes the socket.
  void Shutdown();
  std::string socket() const;
  // Successful Register calls so far.
  int registrations() const;
  // PodResources List calls so far that answered, and that failed.
  int reconciles() const;
  int failed_reconciles() const;

  struct Impl;

 private:
  explicit SharePluginServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::k8s
