// The node side's link to the control plane (node::ControlPlaneLink) over daemon::ApiClient:
// what `tessera agent` and `tessera run --server` give the node module.
#pragma once

#include <memory>
#include <string_view>
#include <utility>

#include "tessera/daemon/api_client.h"
#include "tessera/node/agent.h"

namespace tessera::cli {

class HttpLink final : public node::ControlPlaneLink {
 public:
  explicit HttpLink(std::unique_ptr<daemon::ApiClient> client) : client_(std::move(client)) {}
  StatusOr<node::LinkResponse> Call(std::string_view method, std::string_view path, std::string_view body) override {
    TESSERA_ASSIGN_OR_RETURN(daemon::ApiResponse r, client_->Call(method, path, body));
    return node::LinkResponse{r.status, std::move(r.body)};
  }

 private:
  std::unique_ptr<daemon::ApiClient> client_;
};

}  // namespace tessera::cli
