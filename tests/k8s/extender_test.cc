// The scheduler extender in kube-scheduler's wire format (k8s.io/kube-scheduler/extender/v1):
// golden round trips of realistic payloads (a Deployment's pod, full v1.Node objects) in both
// nodeCacheCapable modes, quota refusals, fit and no fit, the score order, malformed bodies.
#include "tessera/integrations/k8s/extender.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace tessera::k8s {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string TestData(const std::string& name) {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/k8s/testdata/" + name);
  EXPECT_TRUE(in) << name;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::shared_ptr<const ExtenderCluster> Cluster(const std::string& nodes_csv, const std::string& quotas_csv = "") {
  ClusterState state;
  StatusOr<std::vector<ClusterNode>> nodes = ParseNodeCsv(nodes_csv, "nodes.csv");
  EXPECT_TRUE(nodes.ok()) << nodes.status().message();
  state.nodes = *nodes;
  if (!quotas_csv.empty()) state.tenants = *ParseQuotaCsv(quotas_csv, "quotas.csv");
  StatusOr<std::shared_ptr<const ExtenderCluster>> c = ExtenderCluster::Build(std::move(state), GpuModelCatalog::Builtin());
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : nullptr;
}

std::unique_ptr<Extender> Make(std::shared_ptr<const ExtenderCluster> cluster, ExtenderOptions options = {}) {
  StatusOr<std::unique_ptr<Extender>> e = Extender::Create(std::move(options));
  EXPECT_TRUE(e.ok());
  (*e)->SetCluster(std::move(cluster));
  return std::move(*e);
}

std::unique_ptr<Extender> TestDataExtender() {
  return Make(Cluster(TestData("cluster.csv"), TestData("quotas.csv")));
}

// ExtenderArgs in NodeNames mode for a pod with these annotations (and labels).
std::string Args(const json& annotations, const std::vector<std::string>& nodes, const std::string& ns = "team-a",
                 const json& labels = json::object()) {
  return json{{"Pod", {{"metadata", {{"name", "p"}, {"namespace", ns}, {"annotations", annotations}, {"labels", labels}}}}},
              {"Nodes", nullptr},
              {"NodeNames", nodes}}
      .dump();
}

json Body(const ExtenderAnswer& a) {
  EXPECT_EQ(a.status, 200) << a.body;
  return json::parse(a.body);
}

TEST(Extender, FilterNodeNamesModeGolden) {
  auto e = TestDataExtender();
  const ExtenderAnswer a = e->Filter(TestData("filter_args_nodenames.json"));
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body + "\n", TestData("filter_result_nodenames.golden.json"));
}

TEST(Extender, PrioritizeGolden) {
  auto e = TestDataExtender();
  const ExtenderAnswer a = e->Prioritize(TestData("filter_args_nodenames.json"));
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body + "\n", TestData("prioritize_result.golden.json"));
}

TEST(Extender, FilterNodesModeEchoesTheNodeObjects) {
  auto e = TestDataExtender();
  const std::string args = TestData("filter_args_nodes.json");
  const json in = json::parse(args);
  const json out = Body(e->Filter(args));
  EXPECT_TRUE(out["NodeNames"].is_null());
  ASSERT_TRUE(out["Nodes"].is_object());
  ASSERT_EQ(out["Nodes"]["items"].size(), 2u);
  // The passing nodes come back whole, as the scheduler sent them (it looks them up by name).
  EXPECT_EQ(out["Nodes"]["items"][0], in["Nodes"]["items"][0]);
  EXPECT_EQ(out["Nodes"]["items"][1], in["Nodes"]["items"][1]);
  // The failures are those of NodeNames mode.
  const json names = Body(e->Filter(TestData("filter_args_nodenames.json")));
  EXPECT_EQ(out["FailedNodes"], names["FailedNodes"]);
  EXPECT_EQ(out["FailedAndUnresolvableNodes"], names["FailedAndUnresolvableNodes"]);
  EXPECT_EQ(out["Error"], "");
  // prioritize reads the Node objects' names the same way.
  EXPECT_EQ(e->Prioritize(args).body + "\n", TestData("prioritize_result.golden.json"));
}

TEST(Extender, FillingAPartlyUsedGpuBeatsAnEmptyOne) {
  // The header's worked example: node-a's GPU0 is half used, node-b is empty.
  auto e = Make(Cluster("sn,cpu_milli,memory_mib,gpu,model,gpu_used_milli\n"
                        "node-b,64000,262144,2,A100-40GB,0|0\n"
                        "node-a,64000,262144,2,A100-40GB,500|1000\n"));
  const json half = {{"gpu.tessera.io/compute", "500"}, {"gpu.tessera.io/memory", "10Gi"}};
  EXPECT_EQ(e->Prioritize(Args(half, {"node-b", "node-a"})).body,
            R"([{"Host":"node-b","Score":0},{"Host":"node-a","Score":10}])");
  // Under bestfit too.
  EXPECT_EQ(Make(e->cluster(), {.policy = "bestfit"})->Prioritize(Args(half, {"node-b", "node-a"})).body,
            R"([{"Host":"node-b","Score":0},{"Host":"node-a","Score":10}])");
  // The order is the policy's, not an accident of the input: worstfit prefers the empty node.
  EXPECT_EQ(Make(e->cluster(), {.policy = "worstfit"})->Prioritize(Args(half, {"node-b", "node-a"})).body,
            R"([{"Host":"node-b","Score":10},{"Host":"node-a","Score":0}])");
  // A whole GPU fits only node-b: node-a scores 0 as a node where the pod does not fit.
  const json whole = {{"gpu.tessera.io/count", "1"}};
  EXPECT_EQ(e->Prioritize(Args(whole, {"node-a", "node-b"})).body, R"([{"Host":"node-a","Score":0},{"Host":"node-b","Score":10}])");
}

TEST(Extender, QuotaRefusedPodFailsEveryNodeUnresolvably) {
  auto e = TestDataExtender();  // team-b: 1900 of 2000 milli used
  const json out = Body(e->Filter(Args({{"gpu.tessera.io/compute", "300"}}, {"gpu-node-1", "gpu-node-2"}, "team-b")));
  EXPECT_EQ(out["NodeNames"], json::array());
  EXPECT_EQ(out["FailedNodes"], json::object());
  EXPECT_EQ(out["FailedAndUnresolvableNodes"]["gpu-node-1"], "tenant 'team-b' over its GPU quota: 1900 + 300 > 2000 milli-GPU");
  EXPECT_EQ(out["FailedAndUnresolvableNodes"].size(), 2u);
  // 100 milli still fits the quota.
  EXPECT_EQ(Body(e->Filter(Args({{"gpu.tessera.io/compute", "100"}}, {"gpu-node-1"}, "team-b")))["NodeNames"],
            json::array({"gpu-node-1"}));
  // Tenant by label: a team-a pod labelled as team-b is held to team-b's quota.
  auto by_label = Make(e->cluster(), {.tenant_label = "tessera.io/tenant"});
  const json labelled = Body(by_label->Filter(
      Args({{"gpu.tessera.io/compute", "300"}}, {"gpu-node-1"}, "team-a", {{"tessera.io/tenant", "team-b"}})));
  EXPECT_THAT(labelled["FailedAndUnresolvableNodes"]["gpu-node-1"].get<std::string>(), HasSubstr("tenant 'team-b'"));
  // A tenant without a quota is unlimited.
  EXPECT_EQ(Body(e->Filter(Args({{"gpu.tessera.io/count", "2"}}, {"gpu-node-2"}, "other")))["NodeNames"],
            json::array({"gpu-node-2"}));
  // Prioritize scores a quota-refused pod 0 everywhere.
  EXPECT_EQ(e->Prioritize(Args({{"gpu.tessera.io/compute", "300"}}, {"gpu-node-1", "gpu-node-2"}, "team-b")).body,
            R"([{"Host":"gpu-node-1","Score":0},{"Host":"gpu-node-2","Score":0}])");
}

TEST(Extender, FitNoFitAndWhyNot) {
  auto e = TestDataExtender();
  const std::vector<std::string> all = {"gpu-node-1", "gpu-node-2", "gpu-node-3"};
  // Two whole GPUs: only gpu-node-2 has both free; gpu-node-1 could after preemption.
  json out = Body(e->Filter(Args({{"gpu.tessera.io/count", "2"}}, all)));
  EXPECT_EQ(out["NodeNames"], json::array({"gpu-node-2"}));
  EXPECT_EQ(out["FailedNodes"]["gpu-node-1"], "no 2 fully free GPUs now");
  EXPECT_TRUE(out["FailedNodes"].contains("gpu-node-3"));
  // Four GPUs: no node has that many.
  out = Body(e->Filter(Args({{"gpu.tessera.io/count", "4"}}, all)));
  EXPECT_EQ(out["FailedAndUnresolvableNodes"]["gpu-node-2"], "it has 2 GPUs, the pod asks for 4");
  // Another model.
  out = Body(e->Filter(Args({{"gpu.tessera.io/model", "H100-80GB"}}, all)));
  EXPECT_EQ(out["FailedAndUnresolvableNodes"]["gpu-node-2"], "its GPUs are A100-40GB, the pod asks for H100-80GB");
  // More memory than any GPU has.
  out = Body(e->Filter(Args({{"gpu.tessera.io/compute", "100"}, {"gpu.tessera.io/memory", "50Gi"}}, all)));
  EXPECT_EQ(out["FailedAndUnresolvableNodes"]["gpu-node-2"], "no GPU of the node has 51200 MiB of memory");
  // Memory decides where compute would fit: 300 milli fits gpu-node-1's GPU0 only with <= 20057 MiB.
  out = Body(e->Filter(Args({{"gpu.tessera.io/compute", "300"}, {"gpu.tessera.io/memory", "30Gi"}}, {"gpu-node-1"})));
  EXPECT_EQ(out["NodeNames"], json::array({"gpu-node-1"}));  // GPU1 (empty) holds it
  out = Body(e->Filter(Args({{"gpu.tessera.io/compute", "100"}, {"gpu.tessera.io/memory", "6Gi"}}, {"gpu-node-3"})));
  // gpu-node-3's GPU1 has the 100 milli but 5537 MiB.
  EXPECT_EQ(out["FailedNodes"]["gpu-node-3"], "no GPU with 100 milli-GPU and 6144 MiB free now");
}

TEST(Extender, MemoryMaskedGpusDecideAsThePerGpuCheckAndScoreAlikeEveryTime) {
  // T4: 15360 MiB. node-c's GPU0 has 750 milli but 3360 MiB free; node-d's GPU0 all its compute
  // but not all its memory; node-e one GPU like node-c's GPU0.
  auto cluster = Cluster(
      "sn,cpu_milli,memory_mib,gpu,model,gpu_used_milli,gpu_used_mib\n"
      "node-b,64000,262144,2,T4,0|0,0|0\n"
      "node-c,64000,262144,2,T4,250|0,12000|0\n"
      "node-d,64000,262144,2,T4,0|500,1000|7500\n"
      "node-e,64000,262144,1,T4,250,12000\n");
  auto e = Make(cluster);
  const std::vector<std::string> all = {"node-b", "node-c", "node-d", "node-e"};
  const json share = {{"gpu.tessera.io/compute", "250"}, {"gpu.tessera.io/memory", "5Gi"}};
  json out = Body(e->Filter(Args(share, all)));
  EXPECT_EQ(out["NodeNames"], json::array({"node-b", "node-c", "node-d"}));  // node-c on GPU1
  EXPECT_EQ(out["FailedNodes"], json({{"node-e", "no GPU with 250 milli-GPU and 5120 MiB free now"}}));
  // A 3 GiB share fits node-e's GPU (3360 MiB free).
  out = Body(e->Filter(Args({{"gpu.tessera.io/compute", "250"}, {"gpu.tessera.io/memory", "3Gi"}}, all)));
  EXPECT_EQ(out["NodeNames"].size(), 4u);
  // A whole GPU: node-d's GPU0 has its compute free but 1000 MiB in use.
  out = Body(e->Filter(Args({{"gpu.tessera.io/count", "1"}}, all)));
  EXPECT_EQ(out["NodeNames"], json::array({"node-b", "node-c"}));
  EXPECT_EQ(out["FailedNodes"], json({{"node-d", "no fully free GPU now"}, {"node-e", "no fully free GPU now"}}));
  // More memory than a T4 has: the per-GPU check, on every node.
  out = Body(e->Filter(Args({{"gpu.tessera.io/compute", "250"}, {"gpu.tessera.io/memory", "16Gi"}}, all)));
  EXPECT_EQ(out["FailedAndUnresolvableNodes"].size(), 4u);
  EXPECT_EQ(out["FailedAndUnresolvableNodes"]["node-c"], "no GPU of the node has 16384 MiB of memory");

  // node-c is scored with GPU0 masked out; the second answer (its score memoised) is the first,
  // and a fresh extender's.
  const std::string body = Args(share, all);
  const ExtenderAnswer first = e->Prioritize(body);
  EXPECT_EQ(e->Prioritize(body).body, first.body);
  EXPECT_EQ(Make(cluster)->Prioritize(body).body, first.body);
  const json scores = Body(first);
  ASSERT_EQ(scores.size(), 4u);
  EXPECT_EQ(scores[3], json({{"Host", "node-e"}, {"Score", 0}}));
}

TEST(Extender, ARefreshAnswersAsAFreshExtenderOnTheNewStateAndBack) {
  // The ask tables carry over the nodes a refresh left alone: node-a fills up, node-b's GPU0 goes
  // from half to a quarter used (a new score), node-c frees half a GPU (now fits); node-d stays.
  const std::string header = "sn,cpu_milli,memory_mib,gpu,model,gpu_used_milli\n";
  auto before = Cluster(header + "node-a,64000,262144,2,A100-40GB,0|0\nnode-b,64000,262144,2,A100-40GB,500|0\n"
                                 "node-c,64000,262144,2,A100-40GB,1000|1000\nnode-d,64000,262144,2,A100-40GB,750|0\n");
  auto after = Cluster(header + "node-a,64000,262144,2,A100-40GB,1000|1000\nnode-b,64000,262144,2,A100-40GB,250|0\n"
                                "node-c,64000,262144,2,A100-40GB,500|1000\nnode-d,64000,262144,2,A100-40GB,750|0\n");
  // node-e added: nothing carried over.
  auto grown = Cluster(header + "node-a,64000,262144,2,A100-40GB,1000|1000\nnode-b,64000,262144,2,A100-40GB,250|0\n"
                                "node-c,64000,262144,2,A100-40GB,500|1000\nnode-d,64000,262144,2,A100-40GB,750|0\n"
                                "node-e,64000,262144,2,A100-40GB,0|0\n");
  const std::vector<std::string> all = {"node-a", "node-b", "node-c", "node-d", "node-e"};
  const std::string share = Args({{"gpu.tessera.io/compute", "500"}}, all);
  const std::string whole = Args({{"gpu.tessera.io/count", "1"}}, all);
  auto e = Make(before);
  const ExtenderAnswer filter_before = e->Filter(share);
  const ExtenderAnswer scores_before = e->Prioritize(share);
  (void)e->Prioritize(whole);
  EXPECT_EQ(Body(filter_before)["NodeNames"], json::array({"node-a", "node-b", "node-d"}));

  e->SetCluster(after);
  EXPECT_EQ(Body(e->Filter(share))["NodeNames"], json::array({"node-b", "node-c", "node-d"}));
  EXPECT_EQ(e->Filter(share).body, Make(after)->Filter(share).body);
  const ExtenderAnswer scores_after = e->Prioritize(share);
  EXPECT_EQ(scores_after.body, Make(after)->Prioritize(share).body);
  EXPECT_NE(scores_after.body, scores_before.body);
  EXPECT_EQ(e->Prioritize(whole).body, Make(after)->Prioritize(whole).body);
  EXPECT_EQ(e->Filter(whole).body, Make(after)->Filter(whole).body);

  e->SetCluster(before);
  EXPECT_EQ(e->Filter(share).body, filter_before.body);
  EXPECT_EQ(e->Prioritize(share).body, scores_before.body);

  e->SetCluster(grown);
  EXPECT_EQ(e->Filter(share).body, Make(grown)->Filter(share).body);
  EXPECT_EQ(e->Prioritize(share).body, Make(grown)->Prioritize(share).body);
  EXPECT_EQ(e->Prioritize(whole).body, Make(grown)->Prioritize(whole).body);
}

TEST(Extender, RefusedNodesAreKeyedInNameOrderKnownOrNot) {
  auto e = TestDataExtender();
  // Unknown names around the cluster's, one of the cluster's escaped (\u002d is '-').
  const std::string body = json{{"Pod", {{"metadata", {{"name", "p"}, {"namespace", "team-a"},
                                                       {"annotations", {{"gpu.tessera.io/count", "4"}}}}}}},
                                {"NodeNames", {"zz-node", "gpu-node-3", "a-node", "gpu-node-1", "gpu-node-2"}}}
                               .dump();
  std::string escaped = body;
  escaped.replace(escaped.find("gpu-node-1"), 10, "gpu\\u002dnode-1");
  for (const std::string& b : {body, escaped}) {
    const ExtenderAnswer a = e->Filter(b);
    ASSERT_EQ(a.status, 200) << a.body;
    std::vector<size_t> at;
    for (const char* name : {"\"a-node\"", "\"gpu-node-1\"", "\"gpu-node-2\"", "\"gpu-node-3\"", "\"zz-node\""}) {
      at.push_back(a.body.find(name));
      EXPECT_NE(at.back(), std::string::npos) << name << " in " << a.body;
    }
    EXPECT_TRUE(std::is_sorted(at.begin(), at.end())) << a.body;
    EXPECT_EQ(Body(a)["FailedAndUnresolvableNodes"]["gpu-node-1"], "it has 2 GPUs, the pod asks for 4");
  }
}

TEST(Extender, MigAsksGoToMigNodesOfAModelWithTheProfile) {
  ClusterState state;
  state.nodes = *ParseNodeCsv("sn,cpu_milli,memory_mib,gpu,model\nmig-1,64000,262144,2,H100-80GB\nplain,64000,262144,2,H100-80GB\n",
                              "n.csv");
  state.nodes[0].mig = true;
  auto e = Make(*ExtenderCluster::Build(state, GpuModelCatalog::Builtin()));
  json out = Body(e->Filter(Args({{"gpu.tessera.io/mig-profile", "3g.40gb"}}, {"mig-1", "plain"})));
  EXPECT_EQ(out["NodeNames"], json::array({"mig-1"}));
  EXPECT_EQ(out["FailedAndUnresolvableNodes"]["plain"], "its GPUs are not in MIG mode");
  out = Body(e->Filter(Args({{"gpu.tessera.io/mig-profile", "9g.99gb"}}, {"mig-1"})));
  EXPECT_THAT(out["FailedAndUnresolvableNodes"]["mig-1"].get<std::string>(), HasSubstr("9g.99gb"));
  out = Body(e->Filter(Args({{"gpu.tessera.io/compute", "300"}}, {"mig-1"})));
  EXPECT_THAT(out["FailedAndUnresolvableNodes"]["mig-1"].get<std::string>(), HasSubstr("in MIG mode"));
  EXPECT_EQ(e->Prioritize(Args({{"gpu.tessera.io/mig-profile", "3g.40gb"}}, {"mig-1", "plain"})).body,
            R"([{"Host":"mig-1","Score":10},{"Host":"plain","Score":0}])");
}

// A node of two GPU models (the control plane lists a model per GPU): a pod asking for the model
// of its later GPUs fits there, on those GPUs only; one asking for a model it lacks is refused
// naming both of its models. (Taking GPU 0's model for the node refused the A100 pod.)
TEST(Extender, AMixedModelNodeTakesAPodAskingForTheModelOfAnyOfItsGpus) {
  StatusOr<std::vector<ClusterNode>> nodes = ReadControlPlaneNodes(R"({"nodes": [
    {"name": "mix", "state": "ready", "cpu_milli": 64000, "memory_mib": 262144, "gpus": [
      {"index": 0, "model": "H100-80GB", "allocated_milli": 1000},
      {"index": 1, "model": "A100-40GB", "allocated_milli": 0},
      {"index": 2, "model": "A100-40GB", "allocated_milli": 0}]},
    {"name": "h100s", "state": "ready", "cpu_milli": 64000, "memory_mib": 262144, "gpus": [
      {"index": 0, "model": "H100-80GB"}, {"index": 1, "model": "H100-80GB"}]}]})");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  EXPECT_EQ((*nodes)[0].gpu_models, (std::vector<std::string>{"H100-80GB", "A100-40GB", "A100-40GB"}));
  EXPECT_TRUE((*nodes)[1].gpu_models.empty());  // one model: an ordinary node
  StatusOr<std::shared_ptr<const ExtenderCluster>> c = ExtenderCluster::Build({.nodes = *nodes}, GpuModelCatalog::Builtin());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)->gpu_memory_mib(*(*c)->Find("mix"), 1), 40537);  // the A100-40GB's, not the H100's
  auto e = Make(*c);
  json out = Body(e->Filter(Args({{"gpu.tessera.io/model", "A100-40GB"}, {"gpu.tessera.io/count", "2"}},
                                 {"mix", "h100s"})));
  EXPECT_EQ(out["NodeNames"], json::array({"mix"}));
  EXPECT_THAT(out["FailedAndUnresolvableNodes"]["h100s"].get<std::string>(), HasSubstr("its GPUs are H100-80GB"));
  out = Body(e->Filter(Args({{"gpu.tessera.io/model", "T4"}, {"gpu.tessera.io/compute", "500"}}, {"mix"})));
  EXPECT_THAT(out["FailedAndUnresolvableNodes"]["mix"].get<std::string>(),
              HasSubstr("its GPUs are H100-80GB, A100-40GB, the pod asks for T4"));
  // A mixed node in MIG mode is refused when the cluster is built, naming it.
  nodes->front().mig = true;
  EXPECT_THAT(std::string(ExtenderCluster::Build({.nodes = *nodes}, GpuModelCatalog::Builtin()).status().message()),
              HasSubstr("node 'mix': a node of several GPU models cannot be in MIG mode"));
}

// A refresh in which a node's GPU models changed (GPU 0's did not) is a new node, not the same one
// with its answers carried over: H100, A100 (used), A100 holds no two free GPUs of one model; as
// three H100s with the same use it does.
TEST(Extender, ARefreshThatChangesTheModelsOfANodesLaterGpusDecidesItAgain) {
  auto node = [](const char* later) {
    ClusterNode n{.name = "mix", .cpu_milli = 64000, .memory_mib = 262144, .model = "H100-80GB", .gpu_count = 3,
                  .gpu_used_milli = {0, 1000, 0}};
    if (std::string(later) != "H100-80GB") n.gpu_models = {"H100-80GB", later, later};
    return n;
  };
  auto e = Make(*ExtenderCluster::Build({.nodes = {node("A100-40GB")}}, GpuModelCatalog::Builtin()));
  const std::string two = Args({{"gpu.tessera.io/count", "2"}}, {"mix"});
  EXPECT_EQ(Body(e->Filter(two))["NodeNames"], json::array());
  e->SetCluster(*ExtenderCluster::Build({.nodes = {node("H100-80GB")}}, GpuModelCatalog::Builtin()));
  EXPECT_EQ(Body(e->Filter(two))["NodeNames"], json::array({"mix"}));
}

TEST(Extender, PodWithoutAGpuAskPassesEverywhere) {
  auto e = TestDataExtender();
  const json out = Body(e->Filter(Args(json::object(), {"gpu-node-3", "cpu-node-1"})));
  EXPECT_EQ(out["NodeNames"], json::array({"gpu-node-3", "cpu-node-1"}));
  EXPECT_EQ(e->Prioritize(Args(json::object(), {"gpu-node-3", "cpu-node-1"})).body,
            R"([{"Host":"gpu-node-3","Score":0},{"Host":"cpu-node-1","Score":0}])");
}

TEST(Extender, ProtocolErrorsGoInErrorNeverA500) {
  auto e = TestDataExtender();
  // A bad annotation: Error names it, no node passes.
  json out = Body(e->Filter(Args({{"gpu.tessera.io/compute", "1500"}}, {"gpu-node-1"})));
  EXPECT_EQ(out["Error"], "pod team-a/p: gpu.tessera.io/compute: 1500 is out of range 1..1000 (milli-GPU)");
  EXPECT_EQ(out["NodeNames"], json::array());
  out = Body(e->Filter(Args({{"gpu.tessera.io/model", "Z9"}}, {"gpu-node-1"})));
  EXPECT_THAT(out["Error"].get<std::string>(), HasSubstr("pod team-a/p: gpu.tessera.io/model: "));
  // Prioritize cannot carry an error: neutral scores.
  EXPECT_EQ(e->Prioritize(Args({{"gpu.tessera.io/compute", "1500"}}, {"gpu-node-1"})).body,
            R"([{"Host":"gpu-node-1","Score":0}])");
  // No cluster state yet.
  auto empty = Extender::Create({});
  out = Body((*empty)->Filter(Args({{"gpu.tessera.io/count", "1"}}, {"gpu-node-1"})));
  EXPECT_THAT(out["Error"].get<std::string>(), HasSubstr("no cluster state yet"));
  EXPECT_EQ((*empty)->Health().status, 503);
  EXPECT_EQ(e->Health().body, R"({"nodes":3,"policy":"tessera","status":"ok"})");
}

TEST(Extender, MalformedBodiesAre400WithAMessage) {
  auto e = TestDataExtender();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "the body is not JSON"},
      {"", "the body is not JSON"},
      {"[1, 2]", "the body must be a JSON object"},
      {R"({"Pod": 5, "NodeNames": []})", "Pod: not an object"},
      {R"({"Pod": {}})", "neither Nodes nor NodeNames is given"},
      {R"({"Pod": {}, "NodeNames": "a"})", "NodeNames: not an array"},
      {R"({"Pod": {}, "NodeNames": [1]})", "NodeNames[0]: not a string"},
      {R"({"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}})", "Nodes.items[0].metadata.name: missing"},
      {R"({"Pod": {"metadata": {"annotations": {"a": 1}}}, "NodeNames": []})", "Pod.metadata.annotations.a: not a string"},
  };
  for (const auto& [body, message] : cases) {
    for (const ExtenderAnswer& a : {e->Filter(body), e->Prioritize(body)}) {
      EXPECT_EQ(a.status, 400) << body;
      EXPECT_THAT(json::parse(a.body)["Error"].get<std::string>(), HasSubstr(message)) << body;
    }
  }
  // Unknown fields are ignored, and null Nodes / NodeNames are absent ones.
  const json out = Body(e->Filter(
      R"({"Pod": {"metadata": {"name": "p"}, "future": 1}, "Nodes": null, "NodeNames": ["gpu-node-1"], "Extra": {}})"));
  EXPECT_EQ(out["NodeNames"], json::array({"gpu-node-1"}));
}

TEST(Extender, UnknownPolicyIsRefused) {
  EXPECT_THAT(Extender::Create({.policy = "nope"}).status().message(), HasSubstr("unknown policy 'nope'"));
}

}  // namespace
}  // namespace tessera::k8s
