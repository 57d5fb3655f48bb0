// A client of the Kubernetes API server for the few REST paths the DRA driver uses
// (docs/kubernetes.md): resourceslices (list by node and driver, get, create, update, delete),
// resourceclaims (get) and the node (get, for its uid). HTTP-free: requests go through a
// KubeTransport, which the CLI gives over HTTP(S) (daemon::ApiClient: plain HTTP for tests, HTTPS
// with the pod's service-account token and CA in a cluster) and tests give in memory.
//
//   KubeClient c(transport);
//   c.ListResourceSlices("n1")   GET /apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dn1%2Cspec.driver%3Dgpu.tessera.io
//   c.UpdateResourceSlice(obj)   PUT /apis/resource.k8s.io/v1/resourceslices/<metadata.name> (metadata.resourceVersion
//                                must be the one read: a stale one is 409 Conflict -> ABORTED)
//   c.GetResourceClaim("ns", "c") GET /apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c
//
// Errors name the request and carry the server's Status message: NOT_FOUND for 404, ABORTED for a
// 409 Conflict on update (stale resourceVersion), ALREADY_EXISTS for a 409 on create,
// PERMISSION_DENIED for 401/403, UNAVAILABLE for 429/5xx and an unreachable server, INTERNAL for
// an answer that is not the JSON object expected; e.g. "PUT
// /apis/resource.k8s.io/v1/resourceslices/n1-gpu.tessera.io-0: HTTP 500: etcdserver: request timed out".
//
// Thread-safety: as the transport (the CLI's is one connection: one client per thread).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/core/status.h"

namespace tessera::k8s {

struct KubeResponse {
  int status = 0;
  std::string body;
};

// One HTTP request to the API server; an HTTP error status is an answer, not an error (UNAVAILABLE
// only when there was no answer). `target` is the path with its query.
class KubeTransport {
 public:
  virtual ~KubeTransport() = default;
  virtual StatusOr<KubeResponse> Call(std::string_view method, std::string_view target, std::string_view body) = 0;
};

inline constexpr char kResourceSlicesPath[] = "/apis/resource.k8s.io/v1/resourceslices";

class KubeClient {
 public:
  explicit KubeClient(KubeTransport& transport) : transport_(transport) {}

  // This node's slices of this driver (field selector spec.nodeName and spec.driver).
  StatusOr<std::vector<nlohmann::json>> ListResourceSlices(std::string_view node_name);
  StatusOr<nlohmann::json> GetResourceSlice(std::string_view name);
  // The created / updated object as the server returns it (with its new resourceVersion).
  StatusOr<nlohmann::json> CreateResourceSlice(const nlohmann::json& slice);
  StatusOr<nlohmann::json> UpdateResourceSlice(const nlohmann::json& slice);
  // OK when the slice is gone, also when it was already gone (404).
  Status DeleteResourceSlice(std::string_view name);
  StatusOr<nlohmann::json> GetResourceClaim(std::string_view namespace_name, std::string_view name);
  // The Node's metadata.uid (GET /api/v1/nodes/<name>).
  StatusOr<std::string> GetNodeUid(std::string_view node_name);

 private:
  StatusOr<nlohmann::json> Request(std::string_view method, const std::string& target, const std::string& body,
                                   bool creating);
  KubeTransport& transport_;
};

// "a=b,c=d" percent-encoded for a query ("a%3Db%2Cc%3Dd").
std::string QueryEscape(std::string_view s);

// Where the API server is and how to authenticate to it from inside a pod
// (https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/).
struct KubeConnection {
  std::string url;        // "https://10.96.0.1:443" ("https://[fd00::1]:443" for IPv6)
  std::string token;      // the service account's bearer token
  std::string ca_file;    // the cluster's CA bundle (PEM)
  std::string namespace_name;  // the pod's namespace ("" when the file is missing)
};

inline constexpr char kServiceAccountDir[] = "/var/run/secrets/kubernetes.io/serviceaccount";

// The in-cluster connection: $KUBERNETES_SERVICE_HOST and $KUBERNETES_SERVICE_PORT (read through
// `getenv`), and token, ca.crt and namespace under `dir`. FAILED_PRECONDITION naming what is
// missing ("not running in a pod: KUBERNETES_SERVICE_HOST is not set"; "<dir>/token: cannot be
// read"). The token is read at each call: kubelet rotates projected tokens, so a long-running
// driver calls this again before each publish pass.
StatusOr<KubeConnection> InClusterConnection(const std::function<const char*(const char*)>& getenv,
                                             const std::string& dir = kServiceAccountDir);

}  // namespace tessera::k8s
