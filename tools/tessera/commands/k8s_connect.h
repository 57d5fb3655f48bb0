// The API server connection of the `tessera k8s` programs (`slices --publish`, `dra-driver`):
// --server URL with --token-file and --ca-file, or in a pod the in-cluster connection
// (KUBERNETES_SERVICE_HOST/PORT and the service account's token and CA). Wiring only: the requests
// are tessera/integrations/k8s/kube_client.h's, the HTTP(S) client the control plane's.
#pragma once

#include <memory>
#include <string>

#include "tessera/core/status.h"
#include "tessera/integrations/k8s/kube_client.h"

namespace tessera::cli {

struct KubeConnectFlags {
  std::string server;      // "" = in-cluster
  std::string token_file;  // "" = the service account's (in-cluster) or none (--server)
  std::string ca_file;     // "" = the service account's (in-cluster) or the system's store
};

// A transport with its own connection (one per thread that uses it). The token file is read at
// every request, so that a projected service-account token the kubelet rotates stays valid for a
// driver that runs for days. INVALID_ARGUMENT (naming the flag) or FAILED_PRECONDITION ("not
// running in a pod: ...") when no connection can be made.
StatusOr<std::unique_ptr<k8s::KubeTransport>> ConnectKube(const KubeConnectFlags& flags);

}  // namespace tessera::cli
