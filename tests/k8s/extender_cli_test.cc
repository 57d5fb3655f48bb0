// `tessera k8s extender` end to end: the real binary on a free port, called over HTTP as
// kube-scheduler calls it (POST <urlPrefix>/filter and /prioritize with keep-alive off), then
// stopped with SIGTERM.
#include <signal.h>

#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/serve_process.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::HttpCall;
using testing::ServeProcess;

std::string TestDataPath(const std::string& name) { return std::string(TESSERA_SOURCE_DIR) + "/tests/k8s/testdata/" + name; }

std::string TestData(const std::string& name) {
  std::ifstream in(TestDataPath(name));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ExtenderCli, ServesFilterPrioritizeAndHealthOverHttp) {
  ServeProcess p({TESSERA_BINARY, "k8s", "extender", "--cluster", TestDataPath("cluster.csv"), "--quotas",
                  TestDataPath("quotas.csv"), "--listen", "127.0.0.1:0", "--url-prefix", "/tessera"});
  ASSERT_TRUE(p.WaitListening()) << p.output();
  const std::vector<std::string> json_type = {"Content-Type: application/json"};

  testing::HttpResult r = HttpCall(p.port(), "POST", "/tessera/filter", TestData("filter_args_nodenames.json"), json_type);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "application/json");
  EXPECT_EQ(r.body + "\n", TestData("filter_result_nodenames.golden.json"));

  r = HttpCall(p.port(), "POST", "/tessera/filter", TestData("filter_args_nodes.json"), json_type);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["Nodes"]["items"].size(), 2u);

  r = HttpCall(p.port(), "POST", "/tessera/prioritize", TestData("filter_args_nodenames.json"), json_type);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body + "\n", TestData("prioritize_result.golden.json"));

  r = HttpCall(p.port(), "GET", "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["nodes"], 3);
  EXPECT_EQ(HttpCall(p.port(), "GET", "/tessera/healthz").status, 200);

  r = HttpCall(p.port(), "POST", "/tessera/filter", "{not json", json_type);
  EXPECT_EQ(r.status, 400);
  EXPECT_THAT(r.body, HasSubstr("the body is not JSON"));
  EXPECT_EQ(HttpCall(p.port(), "GET", "/tessera/filter").status, 405);
  EXPECT_EQ(HttpCall(p.port(), "POST", "/filter", "{}").status, 404);  // outside the prefix

  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(), 0);
}

TEST(ExtenderCli, BadFlagsExit2) {
  ServeProcess none({TESSERA_BINARY, "k8s", "extender", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(none.Wait(), 2);
  ServeProcess missing({TESSERA_BINARY, "k8s", "extender", "--cluster", "/nonexistent.csv", "--listen", "127.0.0.1:0"});
  EXPECT_EQ(missing.Wait(), 2);
  ServeProcess policy({TESSERA_BINARY, "k8s", "extender", "--cluster", TestDataPath("cluster.csv"), "--policy", "nope"});
  EXPECT_EQ(policy.Wait(), 2);
}

}  // namespace
}  // namespace tessera::k8s
