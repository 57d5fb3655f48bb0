#include "tessera/integrations/k8s/kube_client.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "tessera/integrations/k8s/names.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;

// The message of a Kubernetes Status answer ({"kind": "Status", "message": ...}), else the body
// (cut to 200 characters), else nothing.
std::string ServerMessage(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
  if (body.size() > 200) return body.substr(0, 200) + "...";
  return body;
}

Status HttpError(std::string_view method, const std::string& target, const KubeResponse& r, bool creating) {
  std::string message = std::string(method) + " " + target + ": HTTP " + std::to_string(r.status);
  const std::string server = ServerMessage(r.body);
  if (!server.empty()) message += ": " + server;
  switch (r.status) {
    case 404:
      return NotFoundError(std::move(message));
    case 409:
      return creating ? AlreadyExistsError(std::move(message)) : Status(StatusCode::kAborted, std::move(message));
    case 401:
    case 403:
      return Status(StatusCode::kPermissionDenied, std::move(message));
    case 429:
      return UnavailableError(std::move(message));
    default:
      if (r.status >= 500) return UnavailableError(std::move(message));
      return InvalidArgumentError(std::move(message));
  }
}

std::string ReadTrimmed(const std::string& path, bool* ok) {
  std::ifstream in(path, std::ios::binary);
  *ok = static_cast<bool>(in);
  std::ostringstream text;
  if (in) text << in.rdbuf();
  std::string s = text.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string SlicePath(std::string_view name) { return std::string(kResourceSlicesPath) + "/" + std::string(name); }

StatusOr<std::string> NameOf(const json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].contains("name") ||
      !object["metadata"]["name"].is_string())
    return InvalidArgumentError("the object has no metadata.name");
  return object["metadata"]["name"].get<std::string>();
}

}  // namespace

std::string QueryEscape(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

StatusOr<json> KubeClient::Request(std::string_view method, const std::string& target, const std::string& body,
                                   bool creating) {
  StatusOr<KubeResponse> r = transport_.Call(method, target, body);
  if (!r.ok()) return Status(r.status().code(), std::string(method) + " " + target + ": " + r.status().message());
  if (r->status < 200 || r->status > 299) return HttpError(method, target, *r, creating);
  json j = json::parse(r->body, nullptr, false);
  if (!j.is_object())
    return InternalError(std::string(method) + " " + target + ": HTTP " + std::to_string(r->status) +
                         " with a body that is not a JSON object");
  return j;
}

StatusOr<std::vector<json>> KubeClient::ListResourceSlices(std::string_view node_name) {
  const std::string selector = "spec.nodeName=" + std::string(node_name) + ",spec.driver=" + std::string(kDriverName);
  const std::string target = std::string(kResourceSlicesPath) + "?fieldSelector=" + QueryEscape(selector);
  TESSERA_ASSIGN_OR_RETURN(json list, Request("GET", target, "", false));
  if (!list.contains("items") || !list["items"].is_array())
    return InternalError("GET " + target + ": the answer has no items[]");
  std::vector<json> out;
  for (json& item : list["items"]) out.push_back(std::move(item));
  return out;
}

StatusOr<json> KubeClient::GetResourceSlice(std::string_view name) { return Request("GET", SlicePath(name), "", false); }

StatusOr<json> KubeClient::CreateResourceSlice(const json& slice) {
  TESSERA_RETURN_IF_ERROR(NameOf(slice).status());
  return Request("POST", kResourceSlicesPath, slice.dump(), true);
}

StatusOr<json> KubeClient::UpdateResourceSlice(const json& slice) {
  TESSERA_ASSIGN_OR_RETURN(const std::string name, NameOf(slice));
  return Request("PUT", SlicePath(name), slice.dump(), false);
}

Status KubeClient::DeleteResourceSlice(std::string_view name) {
  StatusOr<json> r = Request("DELETE", SlicePath(name), "", false);
  if (!r.ok() && r.status().code() != StatusCode::kNotFound) return r.status();
  return Status::Ok();
}

StatusOr<json> KubeClient::GetResourceClaim(std::string_view namespace_name, std::string_view name) {
  return Request("GET",
                 "/apis/resource.k8s.io/v1/namespaces/" + std::string(namespace_name) + "/resourceclaims/" +
                     std::string(name),
                 "", false);
}

StatusOr<std::string> KubeClient::GetNodeUid(std::string_view node_name) {
  const std::string target = "/api/v1/nodes/" + std::string(node_name);
  TESSERA_ASSIGN_OR_RETURN(json node, Request("GET", target, "", false));
  if (!node.contains("metadata") || !node["metadata"].contains("uid") || !node["metadata"]["uid"].is_string())
    return InternalError("GET " + target + ": the answer has no metadata.uid");
  return node["metadata"]["uid"].get<std::string>();
}

StatusOr<KubeConnection> InClusterConnection(const std::function<const char*(const char*)>& getenv,
                                             const std::string& dir) {
  const char* host = getenv("KUBERNETES_SERVICE_HOST");
  const char* port = getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0')
    return FailedPreconditionError("not running in a pod: KUBERNETES_SERVICE_HOST is not set");
  if (port == nullptr || *port == '\0')
    return FailedPreconditionError("not running in a pod: KUBERNETES_SERVICE_PORT is not set");
  KubeConnection c;
  const std::string h = host;
  c.url = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  bool ok = false;
  c.token = ReadTrimmed(dir + "/token", &ok);
  if (!ok || c.token.empty()) return FailedPreconditionError(dir + "/token: cannot be read (or is empty)");
  c.ca_file = dir + "/ca.crt";
  if (!std::ifstream(c.ca_file)) return FailedPreconditionError(c.ca_file + ": cannot be read");
  c.namespace_name = ReadTrimmed(dir + "/namespace", &ok);
  return c;
}

}  // namespace tessera::k8s
