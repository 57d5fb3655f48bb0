// ConnectKube (k8s_connect.h).
#include "tools/tessera/commands/k8s_connect.h"

#include <cstdlib>
#include <map>

#include "tessera/daemon/api_client.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

// The k8s module's transport over the control plane's HTTP client (Bearer token, HTTPS with a CA).
class ApiClientTransport final : public k8s::KubeTransport {
 public:
  ApiClientTransport(std::unique_ptr<daemon::ApiClient> client, std::string token_file)
      : client_(std::move(client)), token_file_(std::move(token_file)) {}
  StatusOr<k8s::KubeResponse> Call(std::string_view method, std::string_view target, std::string_view body) override {
    std::map<std::string, std::string> headers;
    if (!token_file_.empty()) {
      TESSERA_ASSIGN_OR_RETURN(const std::string token, ReadTokenFile(token_file_));
      headers["Authorization"] = "Bearer " + token;
    }
    TESSERA_ASSIGN_OR_RETURN(daemon::ApiResponse r, client_->Call(method, target, body, headers));
    return k8s::KubeResponse{r.status, std::move(r.body)};
  }

 private:
  std::unique_ptr<daemon::ApiClient> client_;
  std::string token_file_;
};

}  // namespace

StatusOr<std::unique_ptr<k8s::KubeTransport>> ConnectKube(const KubeConnectFlags& flags) {
  std::string url = flags.server, token_file = flags.token_file, ca_file = flags.ca_file;
  if (url.empty()) {
    StatusOr<k8s::KubeConnection> c = k8s::InClusterConnection([](const char* name) { return std::getenv(name); });
    if (!c.ok()) return Status(c.status().code(), std::string(c.status().message()) + " (give --server)");
    url = c->url;
    if (token_file.empty()) token_file = std::string(k8s::kServiceAccountDir) + "/token";
    if (ca_file.empty()) ca_file = c->ca_file;
  }
  if (!token_file.empty()) TESSERA_RETURN_IF_ERROR(ReadTokenFile(token_file).status());
  StatusOr<std::unique_ptr<daemon::ApiClient>> client =
      daemon::ApiClient::Create(url, {.token = "", .ca_file = ca_file, .retry_budget_ms = 10000});
  if (!client.ok()) return InvalidArgumentError("--server: " + std::string(client.status().message()));
  return std::unique_ptr<k8s::KubeTransport>(new ApiClientTransport(std::move(*client), token_file));
}

}  // namespace tessera::cli
