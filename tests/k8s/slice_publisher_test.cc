// The API-server side of the DRA driver against the fake API server (tests/k8s/fake_kube_api.h),
// in memory: the publisher creates, re-publishes on change with a new pool generation, writes
// nothing when nothing changed, deletes stale slices (and only this node's), retries a 409
// Conflict with the slice's new resourceVersion, and reports server errors naming the request.
// The client's other paths (resourceclaims, nodes) and the in-cluster connection.
#include "tessera/integrations/k8s/slice_publisher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/k8s/fake_kube_api.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using testing::FakeKubeApi;
using testing::FakeKubeTransport;
using ::testing::HasSubstr;

constexpr char kSlices[] = "resourceslices";

std::vector<api::InventoryGpu> A100s(int count, bool second_in_mig = false) {
  std::vector<api::InventoryGpu> out;
  for (int i = 0; i < count; ++i) {
    out.push_back({.index = i, .uuid = "GPU-" + std::to_string(i), .model = "A100-40GB", .memory_mib = 40537,
                   .mig_enabled = second_in_mig && i == 1});
  }
  return out;
}

struct Fixture {
  FakeKubeApi api;
  FakeKubeTransport transport{api};
  KubeClient client{transport};
  SlicePublisher publisher{client, GpuModelCatalog::Builtin(), {.slices = {.node_name = "n1"}}};
};

TEST(K8sSlicePublisher, FirstPublishCreatesTheNodesSlices) {
  Fixture f;
  StatusOr<PublishResult> r = f.publisher.Publish(A100s(2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (PublishResult{.created = 1, .generation = 1}));
  auto slices = f.api.Objects(kSlices);
  ASSERT_EQ(slices.size(), 1u);
  const json& s = slices["n1-gpu.tessera.io-0"];
  EXPECT_EQ(s["spec"]["devices"].size(), 2u);
  EXPECT_FALSE(s["metadata"]["resourceVersion"].get<std::string>().empty());
}

TEST(K8sSlicePublisher, RepublishingAnUnchangedInventoryWritesNothing) {
  Fixture f;
  ASSERT_TRUE(f.publisher.Publish(A100s(2)).ok());
  const int writes = f.api.writes();
  StatusOr<PublishResult> r = f.publisher.Publish(A100s(2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (PublishResult{.unchanged = 1, .generation = 1}));
  EXPECT_EQ(f.api.writes(), writes);
}

TEST(K8sSlicePublisher, AnInventoryChangeIsRepublishedAtTheNextGeneration) {
  Fixture f;
  ASSERT_TRUE(f.publisher.Publish(A100s(2)).ok());
  StatusOr<PublishResult> r = f.publisher.Publish(A100s(2, /*second_in_mig=*/true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (PublishResult{.created = 1, .updated = 1, .generation = 2}));
  auto slices = f.api.Objects(kSlices);
  ASSERT_EQ(slices.size(), 2u);
  for (const auto& [name, s] : slices) {
    EXPECT_EQ(s["spec"]["pool"]["generation"], 2) << name;
    EXPECT_EQ(s["spec"]["pool"]["resourceSliceCount"], 2) << name;
  }
  EXPECT_EQ(slices["n1-gpu.tessera.io-0"]["spec"]["sharedCounters"][0]["name"], "gpu-1");
  EXPECT_EQ(slices["n1-gpu.tessera.io-1"]["spec"]["devices"].size(), 26u);  // gpu-0 and 25 MIG placements

  // And back: the counter slice goes away.
  r = f.publisher.Publish(A100s(2));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (PublishResult{.updated = 1, .deleted = 1, .generation = 3}));
  EXPECT_EQ(f.api.Objects(kSlices).size(), 1u);
}

TEST(K8sSlicePublisher, StaleSlicesOfThisNodeAreDeletedAndOtherNodesKept) {
  Fixture f;
  json stale = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceSlice"},
                {"metadata", {{"name", "n1-gpu.tessera.io-5"}}},
                {"spec", {{"driver", "gpu.tessera.io"}, {"nodeName", "n1"},
                          {"pool", {{"name", "n1"}, {"generation", 4}, {"resourceSliceCount", 6}}}}}};
  json other = stale;
  other["metadata"]["name"] = "n2-gpu.tessera.io-0";
  other["spec"]["nodeName"] = "n2";
  json other_driver = stale;
  other_driver["metadata"]["name"] = "n1-gpu.nvidia.com-0";
  other_driver["spec"]["driver"] = "gpu.nvidia.com";
  f.api.Put(kSlices, stale);
  f.api.Put(kSlices, other);
  f.api.Put(kSlices, other_driver);
  StatusOr<PublishResult> r = f.publisher.Publish(A100s(1));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (PublishResult{.created = 1, .deleted = 1, .generation = 5}));
  auto slices = f.api.Objects(kSlices);
  EXPECT_EQ(slices.count("n1-gpu.tessera.io-5"), 0u);
  EXPECT_EQ(slices.count("n2-gpu.tessera.io-0"), 1u);
  EXPECT_EQ(slices.count("n1-gpu.nvidia.com-0"), 1u);
  EXPECT_EQ(slices["n1-gpu.tessera.io-0"]["spec"]["pool"]["generation"], 5);
}

TEST(K8sSlicePublisher, AConflictIsRetriedWithTheNewResourceVersion) {
  Fixture f;
  ASSERT_TRUE(f.publisher.Publish(A100s(2)).ok());
  int touched = 0;
  f.api.before = [&touched](FakeKubeApi& api, const std::string& method, const std::string& path) {
    if (method == "PUT" && touched == 0) {
      ++touched;  // someone else writes the slice between our LIST and our PUT
      api.Touch(kSlices, path.substr(path.rfind('/') + 1));
    }
  };
  StatusOr<PublishResult> r = f.publisher.Publish(A100s(2, true));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->conflicts, 1);
  EXPECT_EQ(r->updated, 1);
  EXPECT_EQ(f.api.Objects(kSlices)["n1-gpu.tessera.io-0"]["spec"]["pool"]["generation"], 2);
  std::vector<std::string> requests = f.api.requests();
  EXPECT_THAT(requests, ::testing::Contains("GET /apis/resource.k8s.io/v1/resourceslices/n1-gpu.tessera.io-0"));
}

TEST(K8sSlicePublisher, AConflictThatNeverEndsIsAnErrorNamingTheRequest) {
  Fixture f;
  ASSERT_TRUE(f.publisher.Publish(A100s(1)).ok());
  f.api.before = [](FakeKubeApi& api, const std::string& method, const std::string& path) {
    if (method == "PUT") api.Touch(kSlices, path.substr(path.rfind('/') + 1));
  };
  StatusOr<PublishResult> r = f.publisher.Publish(A100s(2));
  EXPECT_EQ(r.status().code(), StatusCode::kAborted);
  EXPECT_THAT(r.status().message(),
              HasSubstr("PUT /apis/resource.k8s.io/v1/resourceslices/n1-gpu.tessera.io-0: HTTP 409: Operation cannot be "
                        "fulfilled"));
  EXPECT_THAT(r.status().message(), HasSubstr("after 6 tries"));
}

TEST(K8sSlicePublisher, ACreateThatFindsTheSliceUpdatesIt) {
  Fixture f;
  // Another writer creates it between our LIST and our POST.
  f.api.before = [](FakeKubeApi& api, const std::string& method, const std::string&) {
    if (method == "POST") {
      api.Put(kSlices, {{"metadata", {{"name", "n1-gpu.tessera.io-0"}}},
                        {"spec", {{"driver", "gpu.tessera.io"}, {"nodeName", "n1"}}}});
    }
  };
  StatusOr<PublishResult> r = f.publisher.Publish(A100s(1));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->updated, 1);
  EXPECT_EQ(r->conflicts, 1);
  EXPECT_EQ(f.api.Objects(kSlices)["n1-gpu.tessera.io-0"]["spec"]["devices"].size(), 1u);
}

TEST(K8sSlicePublisher, ServerErrorsAreReportedWithTheRequest) {
  Fixture f;
  f.api.FailNext("POST", 500, "etcdserver: request timed out");
  StatusOr<PublishResult> r = f.publisher.Publish(A100s(1));
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(),
            "POST /apis/resource.k8s.io/v1/resourceslices: HTTP 500: etcdserver: request timed out");

  f.api.FailNext("GET", 403, "resourceslices.resource.k8s.io is forbidden: User \"system:serviceaccount:x:y\" cannot list");
  r = f.publisher.Publish(A100s(1));
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(r.status().message(),
              HasSubstr("GET /apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dn1%2Cspec.driver%3Dgpu.tessera.io: "
                        "HTTP 403: resourceslices.resource.k8s.io is forbidden"));
}

TEST(K8sSlicePublisher, PublishIfChangedSkipsAnUnchangedInventory) {
  Fixture f;
  auto first = f.publisher.PublishIfChanged(A100s(1));
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->has_value());
  const int writes = f.api.writes();
  auto again = f.publisher.PublishIfChanged(A100s(1));
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  EXPECT_EQ(f.api.writes(), writes);
  auto changed = f.publisher.PublishIfChanged(A100s(2));
  ASSERT_TRUE(changed.ok());
  ASSERT_TRUE(changed->has_value());
  EXPECT_EQ((*changed)->generation, 2);
}

TEST(K8sKubeClient, ReadsClaimsAndNodesAndNamesTheMissingOnes) {
  FakeKubeApi api;
  FakeKubeTransport transport(api);
  KubeClient client(transport);
  api.Put("team-a/resourceclaims", {{"metadata", {{"name", "c1"}, {"namespace", "team-a"}}},
                                    {"status", {{"allocation", {{"devices", {{"results", json::array()}}}}}}}});
  api.Put("nodes", {{"metadata", {{"name", "n1"}, {"uid", "0b5f-node"}}}});
  StatusOr<json> claim = client.GetResourceClaim("team-a", "c1");
  ASSERT_TRUE(claim.ok()) << claim.status().ToString();
  EXPECT_EQ((*claim)["metadata"]["name"], "c1");
  StatusOr<json> missing = client.GetResourceClaim("team-a", "c2");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("GET /apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/c2: HTTP 404"));
  StatusOr<std::string> uid = client.GetNodeUid("n1");
  ASSERT_TRUE(uid.ok());
  EXPECT_EQ(*uid, "0b5f-node");
  EXPECT_TRUE(client.DeleteResourceSlice("never-there").ok());
}

TEST(K8sKubeClient, InClusterConnectionReadsTheServiceAccount) {
  const std::string dir = ::testing::TempDir() + "/sa-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/token") << "eyJhbGciOi.token\n";
  std::ofstream(dir + "/ca.crt") << "-----BEGIN CERTIFICATE-----\n";
  std::ofstream(dir + "/namespace") << "tessera-system";
  std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                            {"KUBERNETES_SERVICE_PORT", "443"}};
  auto getenv = [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  StatusOr<KubeConnection> c = InClusterConnection(getenv, dir);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->url, "https://10.96.0.1:443");
  EXPECT_EQ(c->token, "eyJhbGciOi.token");
  EXPECT_EQ(c->ca_file, dir + "/ca.crt");
  EXPECT_EQ(c->namespace_name, "tessera-system");

  env["KUBERNETES_SERVICE_HOST"] = "fd00::1";
  EXPECT_EQ(InClusterConnection(getenv, dir)->url, "https://[fd00::1]:443");

  std::filesystem::remove(dir + "/token");
  EXPECT_THAT(InClusterConnection(getenv, dir).status().message(), HasSubstr(dir + "/token: cannot be read"));
  env.erase("KUBERNETES_SERVICE_HOST");
  EXPECT_EQ(InClusterConnection(getenv, dir).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(InClusterConnection(getenv, dir).status().message(), HasSubstr("KUBERNETES_SERVICE_HOST is not set"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::k8s
