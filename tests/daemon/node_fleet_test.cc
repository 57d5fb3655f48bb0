// A fleet of node agents against one control plane over HTTP (issue 31, item 2): 300 simulated
// agents share one node-agent token, register, and then run the agent's real round (heartbeat,
// then GET desired) every second, tessera agent's default --interval-ms, under the default rate
// limits. When node agents were limited per token, the fleet's 600 requests a second went over
// the token's 200/s (400 at once) within two seconds: heartbeats got 429 and nodes were lost.
// Node-agent calls are limited per node now, so none may be refused and no node lost.
//
// The agents are spread over the second (agent i starts i/300 s in) and driven by a few worker
// threads, each with one keep-alive ApiClient per agent, as real agents each hold a connection.
// The node timeout is 3 s (the default is 30 s) so that a node missing its heartbeats for three
// rounds is lost within the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/daemon/http_server.h"
#include "tessera/daemon/api_client.h"
#include "tessera/daemon/control_plane.h"

namespace tessera::daemon {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kAdmin = "admin-token-for-the-fleet-test";

#if defined(__SANITIZE_THREAD__)
constexpr int kAgents = 60;  // ThreadSanitizer looks for races here, not for throughput
#else
constexpr int kAgents = 300;
#endif
constexpr int kWorkers = 6;
constexpr int kRounds = 4;
constexpr auto kInterval = std::chrono::milliseconds(1000);  // tessera agent --interval-ms

std::string Inventory(int agent) {
  json gpus = json::array();
  for (int g = 0; g < 2; ++g)
    gpus.push_back({{"index", g}, {"uuid", "GPU-" + std::to_string(agent) + "-" + std::to_string(g)},
                    {"model", "A100-80GB"}});
  char id[33];
  std::snprintf(id, sizeof id, "%032x", agent + 1);
  return json{{"cpu_milli", 64000}, {"memory_mib", 262144}, {"gpus", gpus}, {"agent_id", id}}.dump();
}

HttpResponse Call(ControlPlane& cp, const std::string& method, const std::string& path, const std::string& body) {
  HttpRequest r;
  r.method = method;
  r.raw_path = r.path = path;
  r.body = body;
  r.headers["authorization"] = std::string("Bearer ") + kAdmin;
  return cp.Handle(std::move(r));
}

TEST(NodeFleetTest, ThreeHundredAgentsOnOneTokenAreNeverRateLimitedOrLost) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessera-fleet-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  ControlPlaneOptions o;  // the default rate limits (200/s, 400 at once)
  o.db = "sqlite:" + (dir / "tessera.db").string();
  o.listen_port = 0;
  o.bootstrap_token = kAdmin;
  o.node_timeout_s = 3;
  o.cycle_interval_ms = 200;  // the loop looks for silent nodes often
  auto created = ControlPlane::Create(o);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  std::unique_ptr<ControlPlane> cp = std::move(*created);
  ASSERT_TRUE(cp->Start().ok());
  HttpResponse tok = Call(*cp, "POST", "/v1/tokens", R"({"role": "node-agent"})");
  ASSERT_EQ(tok.status, 201) << tok.body;
  const std::string token = json::parse(tok.body)["token"].get<std::string>();
  const std::string url = "http://127.0.0.1:" + std::to_string(cp->port());

  std::mutex mu;
  std::map<std::string, int> answers;  // "POST heartbeat 429" -> count
  std::vector<std::string> problems;   // the first few answers that were not 200
  std::atomic<int> calls{0};
  const Clock::time_point t0 = Clock::now() + std::chrono::milliseconds(100);
  auto worker = [&](int w) {
    std::vector<int> mine;
    std::vector<std::unique_ptr<ApiClient>> clients;
    for (int a = w; a < kAgents; a += kWorkers) {
      auto c = ApiClient::Create(url, token);
      if (!c.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        problems.push_back(std::string(c.status().message()));
        return;
      }
      mine.push_back(a);
      clients.push_back(std::move(*c));
    }
    auto call = [&](size_t i, const std::string& method, const std::string& verb, const std::string& body) {
      const std::string node = "node-" + std::to_string(mine[i]);
      StatusOr<ApiResponse> r = clients[i]->Call(method, "/v1/nodes/" + node + "/" + verb, body);
      calls++;
      const int status = r.ok() ? r->status : 0;
      std::lock_guard<std::mutex> lock(mu);
      answers[method + " " + verb + " " + std::to_string(status)]++;
      if (status != 200 && problems.size() < 5)
        problems.push_back(node + " " + verb + ": " + (r.ok() ? std::to_string(status) + " " + r->body
                                                                : std::string(r.status().message())));
    };
    // Round 0 registers (and heartbeats, as the agent's first round does); every round after
    // heartbeats and reads the desired state. Agent a's rounds fall at t0 + a/kAgents s + r s.
    for (int round = 0; round <= kRounds; ++round)
      for (size_t i = 0; i < mine.size(); ++i) {
        std::this_thread::sleep_until(t0 + round * kInterval + kInterval * mine[i] / kAgents);
        if (round == 0) call(i, "POST", "register", Inventory(mine[i]));
        call(i, "POST", "heartbeat", "");
        call(i, "GET", "desired", "");
      }
  };
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) workers.emplace_back(worker, w);
  for (std::thread& t : workers) t.join();

  std::string summary;
  for (const auto& [what, n] : answers) summary += what + ": " + std::to_string(n) + "\n";
  for (const std::string& p : problems) summary += "  " + p + "\n";
  EXPECT_EQ(calls.load(), kAgents * (1 + 2 * (kRounds + 1))) << summary;
  EXPECT_EQ(answers["POST register 200"], kAgents) << summary;
  EXPECT_EQ(answers["POST heartbeat 200"], kAgents * (kRounds + 1)) << summary;
  EXPECT_EQ(answers["GET desired 200"], kAgents * (kRounds + 1)) << summary;
  EXPECT_EQ(answers["POST heartbeat 429"], 0) << summary;
  EXPECT_TRUE(problems.empty()) << summary;
  // Every node is there and ready; none was ever lost.
  HttpResponse nodes = Call(*cp, "GET", "/v1/nodes", "");
  ASSERT_EQ(nodes.status, 200);
  std::map<std::string, int> states;
  const json listed = json::parse(nodes.body);
  for (const json& n : listed["nodes"]) states[n["state"].get<std::string>()]++;
  EXPECT_EQ(states["ready"], kAgents);
  EXPECT_EQ(states["lost"], 0);
  cp->Stop();
  cp.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessera::daemon
