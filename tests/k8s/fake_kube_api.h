// A fake Kubernetes API server for the DRA driver's tests: the REST paths the driver uses
// (resourceslices list/get/create/update/delete, resourceclaims get, nodes get), deviceclasses and
// resourceclaimtemplates for kubectl, and the discovery documents kubectl reads (/api, /apis,
// /apis/resource.k8s.io/v1). Objects live in memory; every write bumps the server's
// resourceVersion; an update whose metadata.resourceVersion is stale is 409 Conflict, a create of
// an existing name 409 AlreadyExists, as the real server answers (metav1.Status bodies).
//
// In memory: FakeKubeApi::Handle(method, path, query, body) (and FakeKubeTransport over it);
// over HTTP: ServeFakeKubeApi mounts it on a daemon::HttpServer (port 0). Tests inject faults with
// `before` (runs before each request is handled: bump an object to provoke a conflict) and
// FailNext (the next request of a method answers an error).
//
// Thread-safety: one mutex around everything (the HTTP server's threads and the test's).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/daemon/http_server.h"
#include "tessera/integrations/k8s/kube_client.h"

namespace tessera::k8s::testing {

struct FakeAnswer {
  int status = 200;
  std::string body;
};

class FakeKubeApi {
 public:
  using json = nlohmann::json;

  // Runs (under the lock) before each request; may change the store.
  std::function<void(FakeKubeApi&, const std::string& method, const std::string& path)> before;

  FakeAnswer Handle(const std::string& method, const std::string& path, const std::map<std::string, std::string>& query,
                    const std::string& body) {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(method + " " + path);
    if (before) before(*this, method, path);
    if (auto it = fail_next_.find(method); it != fail_next_.end()) {
      FakeAnswer a = it->second;
      fail_next_.erase(it);
      return a;
    }
    if (method == "GET") {
      if (path == "/api") return {200, json{{"kind", "APIVersions"}, {"versions", {"v1"}}}.dump()};
      if (path == "/apis") return {200, GroupList().dump()};
      if (path == "/api/v1") return {200, ResourceList("v1", kCoreResources).dump()};
      if (path == "/apis/resource.k8s.io/v1") return {200, ResourceList("resource.k8s.io/v1", kResources).dump()};
      if (path == "/apis/apps/v1") return {200, ResourceList("apps/v1", kAppsResources).dump()};
      if (path == "/apis/rbac.authorization.k8s.io/v1")
        return {200, ResourceList("rbac.authorization.k8s.io/v1", kRbacResources).dump()};
      if (path == "/version") return {200, json{{"major", "1"}, {"minor", "34"}, {"gitVersion", "v1.34.0-fake"}}.dump()};
    }
    std::string collection, name;
    if (!Split(path, &collection, &name)) return Error(404, "NotFound", "the server could not find the requested resource");
    if (name.empty()) {
      if (method == "GET") return {200, List(collection, query).dump()};
      if (method == "POST") return Create(collection, body);
      return Error(405, "MethodNotAllowed", "method not allowed");
    }
    if (method == "GET") {
      auto it = store_[collection].find(name);
      if (it == store_[collection].end()) return NotFound(collection, name);
      return {200, it->second.dump()};
    }
    if (method == "PUT") return Update(collection, name, body);
    if (method == "DELETE") {
      if (store_[collection].erase(name) == 0) return NotFound(collection, name);
      ++writes_;
      return {200, json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Success"}}.dump()};
    }
    return Error(405, "MethodNotAllowed", "method not allowed");
  }

  // Test side (call without the lock held by a handler, or from `before`, which holds it).
  void Put(const std::string& collection, json object) {
    object["metadata"]["resourceVersion"] = std::to_string(++version_);
    const std::string name = object["metadata"]["name"].get<std::string>();
    store_[collection][name] = std::move(object);
  }
  // Bumps an object's resourceVersion as another writer would.
  void Touch(const std::string& collection, const std::string& name) {
    auto it = store_[collection].find(name);
    if (it != store_[collection].end()) it->second["metadata"]["resourceVersion"] = std::to_string(++version_);
  }
  void FailNext(const std::string& method, int status, const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_[method] = Error(status, status >= 500 ? "InternalError" : "BadRequest", message);
  }
  std::map<std::string, json> Objects(const std::string& collection) {
    std::lock_guard<std::mutex> lock(mu_);
    return store_[collection];
  }
  int writes() {
    std::lock_guard<std::mutex> lock(mu_);
    return writes_;
  }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

  static constexpr char kSlices[] = "resourceslices";

 private:
  struct Resource {
    const char* name;
    const char* kind;
    bool namespaced;
  };
  static constexpr Resource kResources[] = {{"resourceslices", "ResourceSlice", false},
                                            {"deviceclasses", "DeviceClass", false},
                                            {"resourceclaims", "ResourceClaim", true},
                                            {"resourceclaimtemplates", "ResourceClaimTemplate", true}};

  // Discovery of the other groups deploy/k8s/ uses, so that kubectl can map its objects (only
  // resource.k8s.io's are stored).
  static constexpr Resource kCoreResources[] = {{"nodes", "Node", false},
                                                {"namespaces", "Namespace", false},
                                                {"serviceaccounts", "ServiceAccount", true}};
  static constexpr Resource kAppsResources[] = {{"daemonsets", "DaemonSet", true}, {"deployments", "Deployment", true}};
  static constexpr Resource kRbacResources[] = {{"clusterroles", "ClusterRole", false},
                                                {"clusterrolebindings", "ClusterRoleBinding", false}};

  static json GroupList() {
    json groups = json::array();
    for (const char* group : {"resource.k8s.io", "apps", "rbac.authorization.k8s.io"}) {
      json version = {{"groupVersion", std::string(group) + "/v1"}, {"version", "v1"}};
      groups.push_back({{"name", group}, {"versions", json::array({version})}, {"preferredVersion", version}});
    }
    return {{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", groups}};
  }
  template <typename List>
  static json ResourceList(const std::string& group_version, const List& resources) {
    json items = json::array();
    for (const Resource& r : resources) {
      std::string singular = r.kind;
      for (char& c : singular) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      items.push_back({{"name", r.name}, {"singularName", singular}, {"namespaced", r.namespaced}, {"kind", r.kind},
                       {"verbs", {"create", "delete", "get", "list", "update", "watch"}}});
    }
    return {{"kind", "APIResourceList"}, {"apiVersion", "v1"}, {"groupVersion", group_version}, {"resources", items}};
  }

  // "/apis/resource.k8s.io/v1/resourceslices/x" -> ("resourceslices", "x");
  // "/apis/resource.k8s.io/v1/namespaces/ns/resourceclaims/c" -> ("ns/resourceclaims", "c");
  // "/api/v1/nodes/n1" -> ("nodes", "n1").
  static bool Split(const std::string& path, std::string* collection, std::string* name) {
    std::vector<std::string> parts;
    for (size_t p = 1; p <= path.size();) {
      size_t q = path.find('/', p);
      if (q == std::string::npos) q = path.size();
      parts.push_back(path.substr(p, q - p));
      p = q + 1;
    }
    size_t at = 0;
    if (parts.size() >= 2 && parts[0] == "api" && parts[1] == "v1") at = 2;
    else if (parts.size() >= 3 && parts[0] == "apis" && parts[1] == "resource.k8s.io" && parts[2] == "v1") at = 3;
    else return false;
    std::string ns;
    if (parts.size() > at + 1 && parts[at] == "namespaces") {
      ns = parts[at + 1] + "/";
      at += 2;
    }
    if (parts.size() == at + 1) {
      *collection = ns + parts[at];
      name->clear();
      return !parts[at].empty();
    }
    if (parts.size() == at + 2) {
      *collection = ns + parts[at];
      *name = parts[at + 1];
      return !name->empty();
    }
    return false;
  }

  static FakeAnswer Error(int code, const std::string& reason, const std::string& message) {
    return {code, json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"}, {"message", message},
                       {"reason", reason}, {"code", code}}
                      .dump()};
  }
  static FakeAnswer NotFound(const std::string& collection, const std::string& name) {
    return Error(404, "NotFound", collection + " \"" + name + "\" not found");
  }

  // Field selectors "spec.nodeName=n1,spec.driver=d" on the object's fields.
  static bool Matches(const json& o, const std::string& selector) {
    for (size_t p = 0; p < selector.size();) {
      size_t q = selector.find(',', p);
      if (q == std::string::npos) q = selector.size();
      const std::string term = selector.substr(p, q - p);
      p = q + 1;
      const size_t eq = term.find('=');
      if (eq == std::string::npos) return false;
      const json* at = &o;
      std::string field = term.substr(0, eq);
      for (size_t a = 0; a <= field.size();) {
        size_t b = field.find('.', a);
        if (b == std::string::npos) b = field.size();
        const std::string key = field.substr(a, b - a);
        if (!at->is_object() || !at->contains(key)) return false;
        at = &(*at)[key];
        a = b + 1;
      }
      if (!at->is_string() || at->get<std::string>() != term.substr(eq + 1)) return false;
    }
    return true;
  }

  json List(const std::string& collection, const std::map<std::string, std::string>& query) {
    json items = json::array();
    auto sel = query.find("fieldSelector");
    for (const auto& [name, o] : store_[collection]) {
      if (sel == query.end() || Matches(o, sel->second)) items.push_back(o);
    }
    return {{"kind", "List"}, {"apiVersion", "v1"}, {"metadata", {{"resourceVersion", std::to_string(version_)}}},
            {"items", items}};
  }

  FakeAnswer Create(const std::string& collection, const std::string& body) {
    json o = json::parse(body, nullptr, false);
    if (!o.is_object() || !o.contains("metadata") || !o["metadata"].contains("name"))
      return Error(422, "Invalid", "metadata.name: Required value");
    const std::string name = o["metadata"]["name"].get<std::string>();
    if (store_[collection].count(name))
      return Error(409, "AlreadyExists", collection + " \"" + name + "\" already exists");
    if (o["metadata"].contains("resourceVersion"))
      return Error(500, "InternalError", "resourceVersion should not be set on objects to be created");
    o["metadata"]["uid"] = "uid-" + std::to_string(version_ + 1);
    Put(collection, o);
    ++writes_;
    return {201, store_[collection][name].dump()};
  }

  FakeAnswer Update(const std::string& collection, const std::string& name, const std::string& body) {
    json o = json::parse(body, nullptr, false);
    auto it = store_[collection].find(name);
    if (it == store_[collection].end()) return NotFound(collection, name);
    if (!o.is_object() || !o.contains("metadata")) return Error(400, "BadRequest", "no metadata");
    const std::string rv = o["metadata"].value("resourceVersion", "");
    if (!rv.empty() && rv != it->second["metadata"]["resourceVersion"].get<std::string>())
      return Error(409, "Conflict",
                   "Operation cannot be fulfilled on " + collection + ".resource.k8s.io \"" + name +
                       "\": the object has been modified; please apply your changes to the latest version and try again");
    o["metadata"]["uid"] = it->second["metadata"]["uid"];
    Put(collection, o);
    ++writes_;
    return {200, store_[collection][name].dump()};
  }

  std::mutex mu_;
  std::map<std::string, std::map<std::string, json>> store_;  // collection -> name -> object
  std::map<std::string, FakeAnswer> fail_next_;
  int64_t version_ = 100;
  int writes_ = 0;
  std::vector<std::string> requests_;
};

// KubeTransport straight into a FakeKubeApi (no sockets): splits the target's query.
class FakeKubeTransport final : public KubeTransport {
 public:
  explicit FakeKubeTransport(FakeKubeApi& api) : api_(api) {}
  StatusOr<KubeResponse> Call(std::string_view method, std::string_view target, std::string_view body) override {
    const std::string t(target);
    const size_t q = t.find('?');
    std::map<std::string, std::string> query;
    if (q != std::string::npos) query = daemon::ParseQuery(t.substr(q + 1));
    FakeAnswer a = api_.Handle(std::string(method), t.substr(0, q), query, std::string(body));
    return KubeResponse{a.status, a.body};
  }

 private:
  FakeKubeApi& api_;
};

// Mounts `api` on `server` (before Start).
inline Status ServeFakeKubeApi(FakeKubeApi& api, daemon::HttpServer& server) {
  auto handler = [&api](const daemon::HttpRequest& r) {
    FakeAnswer a = api.Handle(r.method, r.path, r.query, r.body);
    return daemon::HttpResponse::Json(a.status, a.body);
  };
  const std::vector<std::string> gets = {"/api", "/api/v1", "/apis", "/apis/resource.k8s.io/v1", "/apis/apps/v1",
                                         "/apis/rbac.authorization.k8s.io/v1", "/version", "/api/v1/nodes/{name}"};
  for (const std::string& p : gets) TESSERA_RETURN_IF_ERROR(server.Route("GET", p, handler));
  const std::string base = "/apis/resource.k8s.io/v1";
  for (const std::string& collection : {base + "/{resource}", base + "/namespaces/{ns}/{resource}"}) {
    for (const char* m : {"GET", "POST"}) TESSERA_RETURN_IF_ERROR(server.Route(m, collection, handler));
    for (const char* m : {"GET", "PUT", "DELETE"}) TESSERA_RETURN_IF_ERROR(server.Route(m, collection + "/{name}", handler));
  }
  return Status::Ok();
}

}  // namespace tessera::k8s::testing
