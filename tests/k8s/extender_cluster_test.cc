// The extender's cluster view: the node CSV (the simulator's format plus per-GPU use), the
// quota CSV, the control plane's views, and the snapshot they build.
#include "tessera/integrations/k8s/extender_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::k8s {
namespace {

using ::testing::HasSubstr;

TEST(ExtenderCluster, NodeCsvWithUseBuildsTheSnapshot) {
  StatusOr<std::vector<ClusterNode>> nodes = ParseNodeCsv(
      "sn,cpu_milli,memory_mib,gpu,model,gpu_used_milli,gpu_used_mib\r\n"
      "a,64000,262144,2,A100-40GB,700|0,20480|0\r\n"
      "b,8000,32768,0,,,\r\n",
      "nodes.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  StatusOr<std::shared_ptr<const ExtenderCluster>> c =
      ExtenderCluster::Build({std::move(*nodes), {}}, GpuModelCatalog::Builtin());
  ASSERT_TRUE(c.ok()) << c.status().message();
  const NodeIndex a = *(*c)->Find("a");
  EXPECT_EQ((*c)->snapshot().gpu_free(a, 0), 300);
  EXPECT_EQ((*c)->snapshot().gpu_free(a, 1), 1000);
  EXPECT_EQ((*c)->gpu_free_mib(a, 0), (*c)->gpu_memory_mib(a, 0) - 20480);
  EXPECT_GT((*c)->gpu_memory_mib(a, 1), 40000);  // the catalog's A100-40GB
  EXPECT_EQ((*c)->snapshot().gpu_count(*(*c)->Find("b")), 0);
  EXPECT_FALSE((*c)->Find("c").has_value());
}

TEST(ExtenderCluster, SimulatorNodeListParses) {
  // The Alibaba trace's node list as the simulator reads it (no use columns).
  StatusOr<std::vector<ClusterNode>> nodes =
      ParseNodeCsv("sn,cpu_milli,memory_mib,gpu,model\nopenb-node-0000,64000,262144,2,P100\n", "openb.csv");
  ASSERT_TRUE(nodes.ok());
  EXPECT_EQ((*nodes)[0].gpu_count, 2);
  EXPECT_TRUE(ExtenderCluster::Build({std::move(*nodes), {}}, GpuModelCatalog::Builtin()).ok());
}

TEST(ExtenderCluster, BadInputNamesFileLineAndField) {
  EXPECT_THAT(ParseNodeCsv("sn,cpu_milli,memory_mib,gpu\n", "n.csv").status().message(), HasSubstr("no column 'model'"));
  EXPECT_EQ(ParseNodeCsv("sn,cpu_milli,memory_mib,gpu,model\na,1,1,x,T4\n", "n.csv").status().message(),
            "n.csv:2: gpu: 'x' is not an integer 0..16");
  EXPECT_THAT(ParseNodeCsv("sn,cpu_milli,memory_mib,gpu,model,gpu_used_milli\na,1,1,2,T4,5\n", "n.csv").status().message(),
              HasSubstr("n.csv:2: gpu_used_milli: 1 values for 2 GPUs"));
  EXPECT_THAT(ParseNodeCsv("sn,cpu_milli,memory_mib,gpu,model,gpu_used_milli\na,1,1,1,T4,1200\n", "n.csv").status().message(),
              HasSubstr("gpu_used_milli: '1200' is not an integer 0..1000"));
  StatusOr<std::vector<ClusterNode>> unknown = ParseNodeCsv("sn,cpu_milli,memory_mib,gpu,model\na,1,1,1,Z9\n", "n.csv");
  ASSERT_TRUE(unknown.ok());
  EXPECT_THAT(ExtenderCluster::Build({*unknown, {}}, GpuModelCatalog::Builtin()).status().message(),
              HasSubstr("node 'a': model: "));
  StatusOr<std::vector<ClusterNode>> twice = ParseNodeCsv("sn,cpu_milli,memory_mib,gpu,model\na,1,1,1,T4\na,1,1,1,T4\n", "n.csv");
  EXPECT_EQ(ExtenderCluster::Build({*twice, {}}, GpuModelCatalog::Builtin()).status().message(), "node 'a': listed twice");
}

TEST(ExtenderCluster, QuotaCsv) {
  StatusOr<std::vector<TenantQuota>> q =
      ParseQuotaCsv("tenant,limit_gpu_milli,used_gpu_milli\nteam-a,2000,500\nteam-b,-1,\nteam-c,,\n", "q.csv");
  ASSERT_TRUE(q.ok()) << q.status().message();
  ASSERT_EQ(q->size(), 3u);
  EXPECT_EQ((*q)[0].limit_gpu_milli, 2000);
  EXPECT_EQ((*q)[0].used_gpu_milli, 500);
  EXPECT_FALSE((*q)[1].limit_gpu_milli.has_value());
  EXPECT_FALSE((*q)[2].limit_gpu_milli.has_value());
  EXPECT_THAT(ParseQuotaCsv("tenant\nx\n", "q.csv").status().message(), HasSubstr("no column 'limit_gpu_milli'"));
}

TEST(ExtenderCluster, ControlPlaneViews) {
  // GET /v1/nodes as docs/api.md shows it (extra fields ignored), and tenant views.
  const char* nodes = R"({"nodes": [
    {"name": "n1", "state": "ready", "cpu_milli": 16000, "memory_mib": 65536, "workloads": 1,
     "last_heartbeat_ms": 12, "gpus": [
       {"index": 0, "uuid": "GPU-a", "model": "A100-40GB", "memory_mib": 40960, "mig_enabled": false, "allocated_milli": 500},
       {"index": 1, "uuid": "GPU-b", "model": "A100-40GB", "memory_mib": 40960, "mig_enabled": false, "allocated_milli": 0}]},
    {"name": "n2", "state": "cordoned", "cpu_milli": 16000, "memory_mib": 65536, "gpus": []}]})";
  std::map<std::string, std::pair<int, std::string>> answers = {
      {"/v1/nodes", {200, nodes}},
      {"/v1/tenants", {200, R"({"tenants": [{"name": "ml", "quota": {}}]})"}},
      {"/v1/tenants/ml", {200, R"({"name": "ml", "quota": {"guaranteed": {}, "limit": {"gpu_milli": 3000}, "weight": 1},
                                   "usage": {"gpu_milli": 500, "gpu_memory_mib": 2048}, "fair_share": {"rank": 1}})"}}};
  std::vector<std::string> asked;
  StatusOr<ClusterState> s = LoadControlPlaneState([&](const std::string& path) -> StatusOr<std::pair<int, std::string>> {
    asked.push_back(path);
    return answers.at(path);
  });
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(asked, (std::vector<std::string>{"/v1/nodes", "/v1/tenants", "/v1/tenants/ml"}));
  ASSERT_EQ(s->nodes.size(), 2u);
  EXPECT_EQ(s->nodes[0].gpu_used_milli, (std::vector<int32_t>{500, 0}));
  EXPECT_EQ(s->nodes[0].gpu_memory_mib, (std::vector<int64_t>{40960, 40960}));
  EXPECT_TRUE(s->nodes[0].schedulable);
  EXPECT_FALSE(s->nodes[1].schedulable);
  ASSERT_EQ(s->tenants.size(), 1u);
  EXPECT_EQ(s->tenants[0].limit_gpu_milli, 3000);
  EXPECT_EQ(s->tenants[0].used_gpu_milli, 500);
  StatusOr<std::shared_ptr<const ExtenderCluster>> c = ExtenderCluster::Build(*s, GpuModelCatalog::Builtin());
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)->snapshot().gpu_free(*(*c)->Find("n1"), 0), 500);

  answers["/v1/tenants"] = {403, R"({"error": {"message": "forbidden"}})"};
  EXPECT_THAT(LoadControlPlaneState([&](const std::string& p) -> StatusOr<std::pair<int, std::string>> { return answers.at(p); })
                  .status()
                  .message(),
              HasSubstr("GET /v1/tenants: HTTP 403"));
  EXPECT_THAT(ReadControlPlaneNodes(R"({"nodes": [{"name": 7}]})").status().message(), HasSubstr("nodes[0].name: wrong type"));
}

}  // namespace
}  // namespace tessera::k8s
