// The DRA driver's objects over real HTTP: the fake API server (tests/k8s/fake_kube_api.h) on a
// daemon::HttpServer at port 0, the publisher through daemon::ApiClient (the transport the CLI
// uses), `tessera k8s slices` printing and publishing, and kubectl parsing the rendered objects
// (`kubectl apply --dry-run=client --validate=false`, discovery served by the fake; skipped only
// where no kubectl is installed).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>

#include <yaml-cpp/yaml.h>

#include "tessera/daemon/api_client.h"
#include "tessera/integrations/k8s/resource_slices.h"
#include "tessera/integrations/k8s/slice_publisher.h"
#include "tests/k8s/fake_kube_api.h"
#include "tests/k8s/schema_check.h"
#include "tests/testing/cli_test_util.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

class ApiClientTransport final : public KubeTransport {
 public:
  explicit ApiClientTransport(std::unique_ptr<daemon::ApiClient> c) : c_(std::move(c)) {}
  StatusOr<KubeResponse> Call(std::string_view method, std::string_view target, std::string_view body) override {
    TESSERA_ASSIGN_OR_RETURN(daemon::ApiResponse r, c_->Call(method, target, body));
    return KubeResponse{r.status, std::move(r.body)};
  }

 private:
  std::unique_ptr<daemon::ApiClient> c_;
};

class K8sOverHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::ServeFakeKubeApi(api_, server_).ok());
    Status st = server_.Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    url_ = "http://127.0.0.1:" + std::to_string(server_.port());
  }

  testing::FakeKubeApi api_;
  daemon::HttpServer server_{{.listen_port = 0}};
  std::string url_;
};

const testing::SchemaSet& Schemas() {
  static const testing::SchemaSet s =
      testing::SchemaSet::Load(std::string(TESSERA_SOURCE_DIR) + "/tests/k8s/schema/resource.k8s.io_v1.json");
  return s;
}

std::string FakeNvmlEnv() { return std::string("TESSERA_FAKE_NVML_LIBRARY='") + TESSERA_FAKE_NVML_PATH + "'"; }

TEST_F(K8sOverHttp, ThePublisherWorksThroughTheHttpClient) {
  auto client = daemon::ApiClient::Create(url_, daemon::ApiClientOptions{.token = "t0ken", .retry_budget_ms = 0});
  ASSERT_TRUE(client.ok());
  ApiClientTransport transport(std::move(*client));
  KubeClient kube(transport);
  SlicePublisher publisher(kube, GpuModelCatalog::Builtin(), {.slices = {.node_name = "n1"}});
  std::vector<api::InventoryGpu> gpus = {{.index = 0, .uuid = "GPU-0", .model = "H100-80GB", .memory_mib = 81559}};
  StatusOr<PublishResult> r = publisher.Publish(gpus);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->created, 1);
  gpus[0].mig_enabled = true;
  r = publisher.Publish(gpus);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, (PublishResult{.created = 1, .updated = 1, .generation = 2}));
  api_.FailNext("PUT", 503, "the server is currently unable to handle the request");
  gpus[0].mig_enabled = false;
  r = publisher.Publish(gpus);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("PUT /apis/resource.k8s.io/v1/resourceslices/n1-gpu.tessera.io-0: HTTP "
                                              "503: the server is currently unable to handle the request"));
}

TEST_F(K8sOverHttp, TheCliPrintsValidObjectsAndPublishesThem) {
  tessera::testing::TempDir dir;
  tessera::testing::CommandResult r = tessera::testing::RunTessera(
      dir, "k8s slices --fake-gpus A100-40GB:1,A100-40GB:1:mig --node-name n1 -o json", FakeNvmlEnv());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json list = json::parse(r.out);
  ASSERT_EQ(list["kind"], "List");
  ASSERT_EQ(list["items"].size(), 2u);
  for (const json& s : list["items"]) EXPECT_THAT(Schemas().Check(s, "io.k8s.api.resource.v1.ResourceSlice"), IsEmpty());
  EXPECT_EQ(list["items"][1]["spec"]["devices"][0]["attributes"]["model"]["string"], "A100-40GB");

  r = tessera::testing::RunTessera(dir, "k8s slices --device-classes -o json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["items"], json(RenderDeviceClasses()));

  r = tessera::testing::RunTessera(dir, "k8s slices --fake-gpus T4:2 --node-name n7 --publish --server " + url_,
                                   FakeNvmlEnv());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "node n7: generation 1, 1 created, 0 updated, 0 deleted, 0 unchanged\n");
  EXPECT_EQ(api_.Objects("resourceslices")["n7-gpu.tessera.io-0"]["spec"]["devices"].size(), 2u);

  r = tessera::testing::RunTessera(dir, "k8s slices --fake-gpus T4:1 --node-name n7 --publish --server " + url_,
                                   FakeNvmlEnv());
  EXPECT_EQ(r.out, "node n7: generation 2, 0 created, 1 updated, 0 deleted, 0 unchanged\n") << r.err;

  r = tessera::testing::RunTessera(dir, "k8s slices --fake-gpus H999:1");
  tessera::testing::ExpectOneLineBadInput(r, "unknown GPU model");
  r = tessera::testing::RunTessera(dir, "k8s slices --fake-gpus T4:1 --node-name Bad_Name", FakeNvmlEnv());
  tessera::testing::ExpectOneLineBadInput(r, "node name 'Bad_Name'");
}

TEST_F(K8sOverHttp, KubectlParsesTheRenderedObjects) {
  if (std::system("command -v kubectl > /dev/null 2>&1") != 0) GTEST_SKIP() << "no kubectl installed";
  tessera::testing::TempDir dir;
  tessera::testing::CommandResult r = tessera::testing::RunTessera(
      dir, "k8s slices --fake-gpus A100-40GB:1,A100-40GB:1:mig --node-name n1 > objects.yaml", FakeNvmlEnv());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = tessera::testing::RunTessera(dir, "k8s slices --device-classes > classes.yaml");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ofstream(dir.path() + "/kubeconfig") << "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n"
                                            << "    server: " << url_ << "\ncontexts:\n- name: fake\n  context:\n"
                                            << "    cluster: fake\n    user: fake\ncurrent-context: fake\nusers:\n"
                                            << "- name: fake\n  user:\n    token: t0ken\n";
  const std::string kubectl = "cd '" + dir.path() + "' && HOME='" + dir.path() +
                              "' kubectl --kubeconfig kubeconfig apply --dry-run=client --validate=false -o name -f ";
  for (const std::string file : {"objects.yaml", "classes.yaml"}) {
    tessera::testing::CommandResult k = tessera::testing::RunCommand(kubectl + file, dir);
    EXPECT_EQ(k.exit_code, 0) << k.out << k.err;
    if (file == "objects.yaml") {
      EXPECT_EQ(k.out, "resourceslice.resource.k8s.io/n1-gpu.tessera.io-0\nresourceslice.resource.k8s.io/"
                       "n1-gpu.tessera.io-1\n")
          << k.err;
    } else {
      EXPECT_THAT(k.out, HasSubstr("deviceclass.resource.k8s.io/share.gpu.tessera.io"));
    }
  }
  // The deployment files too (DaemonSet, RBAC, classes, the example claim template and Deployment).
  tessera::testing::CommandResult k =
      tessera::testing::RunCommand(kubectl + "'" + std::string(TESSERA_SOURCE_DIR) + "/deploy/k8s/'", dir);
  EXPECT_EQ(k.exit_code, 0) << k.out << k.err;
  EXPECT_THAT(k.out, HasSubstr("resourceclaimtemplate.resource.k8s.io/share-0-3-gpu-10gi"));
  EXPECT_THAT(k.out, HasSubstr("daemonset.apps/tessera-node"));
  // Nothing was written: a client-side dry run only reads.
  EXPECT_EQ(api_.writes(), 0);
}

// deploy/k8s/ says what the driver does: every flag the DaemonSet gives `tessera k8s dra-driver`
// is one of its flags, the node directory is the agent's, and the ClusterRole grants exactly the
// requests the driver makes (docs/kubernetes.md, "The API server side").
TEST(K8sDeploy, TheDaemonSetAndRbacMatchTheDriver) {
  const std::string deploy = std::string(TESSERA_SOURCE_DIR) + "/deploy/k8s/";
  const YAML::Node ds = YAML::LoadFile(deploy + "daemonset.yaml");
  std::map<std::string, std::vector<std::string>> commands;
  for (const YAML::Node& c : ds["spec"]["template"]["spec"]["containers"]) {
    commands[c["name"].as<std::string>()] = c["command"].as<std::vector<std::string>>();
  }
  const std::vector<std::string>& driver = commands.at("dra-driver");
  ASSERT_GE(driver.size(), 3u);
  EXPECT_EQ(std::vector<std::string>(driver.begin(), driver.begin() + 3),
            (std::vector<std::string>{"tessera", "k8s", "dra-driver"}));
  tessera::testing::TempDir dir;
  tessera::testing::CommandResult help = tessera::testing::RunTessera(dir, "k8s dra-driver --help");
  ASSERT_EQ(help.exit_code, 0) << help.err;
  std::map<std::string, std::string> flags;
  for (size_t i = 3; i < driver.size(); ++i) {
    if (!driver[i].starts_with("--")) continue;
    EXPECT_THAT(help.out, HasSubstr("  " + driver[i] + " ")) << "not a flag of tessera k8s dra-driver";
    if (i + 1 < driver.size()) flags[driver[i]] = driver[i + 1];
  }
  EXPECT_EQ(flags["--node-name"], "$(NODE_NAME)");
  const std::vector<std::string>& agent = commands.at("agent");
  auto run_dir = std::find(agent.begin(), agent.end(), "--run-dir");
  ASSERT_NE(run_dir, agent.end());
  EXPECT_EQ(flags["--node-dir"], *(run_dir + 1));  // the slots go where the agent's arbiter is
  // The backstop (on unless --backstop-ms 0) finds NVML's host pids in /proc: the host's pid namespace.
  EXPECT_NE(flags["--backstop-ms"], "0");
  ASSERT_TRUE(ds["spec"]["template"]["spec"]["hostPID"]);
  EXPECT_TRUE(ds["spec"]["template"]["spec"]["hostPID"].as<bool>());

  std::map<std::string, std::set<std::string>> verbs;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(deploy + "rbac.yaml")) {
    if (doc["kind"].as<std::string>() != "ClusterRole") continue;
    for (const YAML::Node& rule : doc["rules"]) {
      for (const YAML::Node& r : rule["resources"]) {
        for (const YAML::Node& v : rule["verbs"]) verbs[r.as<std::string>()].insert(v.as<std::string>());
      }
    }
  }
  EXPECT_EQ(verbs, (std::map<std::string, std::set<std::string>>{
                       {"resourceslices", {"list", "get", "create", "update", "delete"}},
                       {"resourceclaims", {"get"}},
                       {"nodes", {"get"}}}));
}

// The image every DaemonSet of deploy/k8s runs is the one deploy/k8s/Dockerfile's build line tags,
// at the project's version (CMakeLists.txt), so `make deb` + that line make what the YAML pulls.
TEST(K8sDeploy, EveryTesseraImageIsTheOneTheDockerfileBuildsAtTheProjectsVersion) {
  const std::string root = std::string(TESSERA_SOURCE_DIR) + "/";
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::smatch m;
  const std::string cmake = read(root + "CMakeLists.txt");
  ASSERT_TRUE(std::regex_search(cmake, m, std::regex(R"(project\(tessera VERSION ([0-9.]+))")));
  const std::string version = m[1];
  const std::string dockerfile = read(root + "deploy/k8s/Dockerfile");
  ASSERT_TRUE(std::regex_search(dockerfile, m, std::regex(R"(docker build -f deploy/k8s/Dockerfile -t (\S+) build)")));
  const std::string tag = m[1];
  EXPECT_EQ(tag, "tessera:" + version);
  EXPECT_THAT(dockerfile, HasSubstr("FROM debian:12"));
  EXPECT_THAT(dockerfile, HasSubstr("apt-get install -y --no-install-recommends /tmp/tessera_*.deb"));
  int images = 0;
  for (const char* file : {"daemonset.yaml", "device-plugin.yaml"}) {
    for (const YAML::Node& doc : YAML::LoadAllFromFile(root + "deploy/k8s/" + file)) {
      if (!doc["kind"] || doc["kind"].as<std::string>() != "DaemonSet") continue;
      const YAML::Node spec = doc["spec"]["template"]["spec"];
      for (const char* list : {"initContainers", "containers"}) {
        for (const YAML::Node& c : spec[list]) {
          EXPECT_EQ(c["image"].as<std::string>(), tag) << file << ": " << c["name"].as<std::string>();
          ++images;
        }
      }
    }
  }
  EXPECT_GE(images, 6);  // install-shim, dra-driver, agent; and the device plugin's three
}

}  // namespace
}  // namespace tessera::k8s
