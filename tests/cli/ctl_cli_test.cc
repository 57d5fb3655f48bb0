// `tessera ctl` and `tessera run --server` against a canned HTTP server (one fixed answer to every
// request, and a record of what came): the flags that must be refused before anything is sent
// (issue 31), the retries of 429 and 503 answers (issue 31, item 3), and the exception barrier (an answer of an unexpected shape is an internal error
// with exit 1, not an abort).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/testing/cli_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::CommandResult;
using testing::ExpectOneLineBadInput;
using testing::RunTessera;
using testing::TempDir;

// Answers every request on 127.0.0.1:port() with `status` and the JSON `body`, one request per
// connection; requests() is what arrived (head and body). The first `refuse_first` requests get
// `refusal` (429 or 503) with `Retry-After: 1` instead. AnswerGetsWith(b): GETs get `b` (200) instead
// (a submit's answer and the workload's view differ).
class CannedServer {
 public:
  CannedServer(int status, std::string body, int refuse_first = 0, int refusal = 429)
      : status_(status), body_(std::move(body)), refuse_first_(refuse_first), refusal_(refusal) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CannedServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }
  void AnswerGetsWith(std::string body) {
    std::lock_guard<std::mutex> lock(mu_);
    get_body_ = std::move(body);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string req;
      size_t need = std::string::npos;  // head + body, once the head is in
      char buf[4096];
      while (need == std::string::npos || req.size() < need) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 5000) <= 0) break;
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
        const size_t head = req.find("\r\n\r\n");
        if (need == std::string::npos && head != std::string::npos) {
          size_t length = 0;
          std::string lower = req.substr(0, head);
          for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          if (size_t at = lower.find("content-length:"); at != std::string::npos)
            length = static_cast<size_t>(std::atoll(lower.c_str() + at + 15));
          need = head + 4 + length;
        }
      }
      bool refuse = false;
      std::string get_body;
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(req);
        refuse = static_cast<int>(requests_.size()) <= refuse_first_;
        if (req.starts_with("GET ")) get_body = get_body_;
      }
      const bool get = !get_body.empty() && !refuse;
      const std::string body =
          refuse ? R"({"error": {"code": "x", "message": "over this token's rate limit; retry after 1 s"}})"
                 : get ? get_body : body_;
      const std::string answer = "HTTP/1.1 " + std::to_string(refuse ? refusal_ : get ? 200 : status_) +
                                 " X\r\nContent-Type: application/json\r\nContent-Length: " +
                                 std::to_string(body.size()) + "\r\nConnection: close\r\n" +
                                 (refuse ? "Retry-After: 1\r\n" : "") + "\r\n" + body;
      (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  int status_;
  std::string body_;
  std::string get_body_;  // under mu_
  int refuse_first_, refusal_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

// The environment of every call: the canned server, and an admin's token in $TESSERA_TOKEN (what
// an empty --token-file used to fall back to).
std::string Env(const CannedServer& s) { return "TESSERA_SERVER=" + s.url() + " TESSERA_TOKEN=the-admins-token"; }

// An answer the tables do not expect ("tokens" is no list) used to end ctl with an uncaught
// nlohmann exception: abort(), exit 134, after the server had done the work.
TEST(CtlCli, AnExceptionInAVerbIsAnInternalErrorWithExit1) {
  TempDir dir;
  CannedServer server(200, R"({"tokens": 5})");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl tokens list", Env(server));
  EXPECT_FALSE(r.Crashed()) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tessera ctl: internal error: "));
  EXPECT_THAT(r.err, HasSubstr("type_error"));
  EXPECT_EQ(server.requests().size(), 1u);
}

// --expires-in 0 or less was dropped: the token never expired. Now exit 2, nothing sent.
TEST(CtlCli, ExpiresInMustBePositiveAndNothingIsSent) {
  TempDir dir;
  CannedServer server(201, R"({"id": "tok_1", "role": "admin", "tenant": null, "revoked": false, "expires_ms": null})");
  ASSERT_GT(server.port(), 0);
  for (const std::string v : {"-5", "0", "=-5"}) {
    CommandResult r = RunTessera(dir, "ctl tokens create --role admin --expires-in" + (v[0] == '=' ? v : " " + v),
                                 Env(server));
    ExpectOneLineBadInput(r, "tessera ctl tokens create: --expires-in must be > 0 seconds, got ");
  }
  EXPECT_TRUE(server.requests().empty());
  CommandResult ok = RunTessera(dir, "ctl tokens create --role admin --expires-in 60", Env(server));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("\"expires_in_s\":60"));
}

// Issue 31: `ctl workloads list` showed no names (the one thing a user recognises a workload by)
// and had no way to ask for one state. Now a NAME column ("-" without one), and --state is sent as
// ?state= (checked here first: a typo is exit 2 and nothing is sent).
TEST(CtlCli, WorkloadsListShowsNamesAndFiltersByState) {
  TempDir dir;
  CannedServer server(200, R"({"continue": null, "workloads": [
      {"id": 7, "name": "bert-finetune", "tenant": "ml", "state": "running", "qos": "Burstable", "mode": "exclusive",
       "request": {"tenant": "ml", "gpus": 1, "name": "bert-finetune"},
       "placement": {"node": "gpu-1", "gpus": [0]}, "pods": [{"node": "gpu-1", "gpus": [0]}]},
      {"id": 8, "tenant": "ml", "state": "pending", "wait_reason": "capacity", "qos": "BestEffort", "mode": "",
       "request": {"tenant": "ml", "gpus": 1, "qos": "BestEffort"}}]})");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl workloads list --state running", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The columns, with runs of spaces made one.
  std::string table;
  for (size_t k = 0; k < r.out.size(); ++k)
    if (r.out[k] != ' ' || (k > 0 && r.out[k - 1] != ' ')) table += r.out[k];
  EXPECT_EQ(table,
            "ID NAME TENANT STATE QOS MODE PLACEMENT WAITING_FOR\n"
            "7 bert-finetune ml running Burstable exclusive gpu-1:[0] \n"
            "8 - ml pending BestEffort - capacity\n")
      << r.out;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("GET /v1/workloads?limit=100&state=running "));
  r = RunTessera(dir, "ctl workloads list --state Running", Env(server));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--state"));
  EXPECT_EQ(server.requests().size(), 1u);
}

// Issue 31: --qos was required, so the tenant's default_qos could not apply. Without it the body
// has no qos (the server uses the tenant's); with it, the qos is sent.
TEST(CtlCli, WorkloadsSubmitWithoutQosLeavesItToTheTenant) {
  TempDir dir;
  CannedServer server(201, R"({"id": 1, "state": "pending"})");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl workloads submit --tenant ml --gpus 1", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunTessera(dir, "ctl workloads submit --tenant ml --gpus 1 --qos BestEffort", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_THAT(server.requests()[0], HasSubstr(R"({"gpus":1,"tenant":"ml"})"));
  EXPECT_THAT(server.requests()[1], HasSubstr(R"("qos":"BestEffort")"));
  r = RunTessera(dir, "ctl workloads submit --gpus 1", Env(server));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tenant is required (or --file)"));
}

// ... and `tessera run --server` sent "Burstable" whatever the tenant's default_qos said.
TEST(CtlCli, RunServerWithoutQosLeavesItToTheTenant) {
  TempDir dir;
  CannedServer server(200, R"({"id": 1, "state": "pending"})");  // the POST takes 200 too
  server.AnswerGetsWith(R"({"id": 1, "tenant": "ml", "state": "completed", "exit_code": 0,
                            "request": {"tenant": "ml", "gpus": 1}})");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "run --tenant ml --server " + server.url() + " -- true", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunTessera(dir, "run --tenant ml --qos Guaranteed --server " + server.url() + " -- true", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_GE(server.requests().size(), 2u);
  std::vector<std::string> posts;
  for (const std::string& req : server.requests())
    if (req.starts_with("POST ")) posts.push_back(req);
  ASSERT_EQ(posts.size(), 2u);
  EXPECT_THAT(posts[0], Not(HasSubstr("qos")));
  EXPECT_THAT(posts[1], HasSubstr(R"("qos":"Guaranteed")"));
}

// --node binds a node-agent token to one node: sent as "node", shown in the NODE column.
TEST(CtlCli, TokensCreateSendsTheNodeAndTheTableShowsIt) {
  TempDir dir;
  CannedServer server(201, R"({"id": "tok_1", "role": "node-agent", "tenant": null, "node": "gpu-07",
                               "revoked": false, "expires_ms": null, "token": "tsr_x"})");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl tokens create --role node-agent --node gpu-07", Env(server));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("\"node\":\"gpu-07\""));
  EXPECT_THAT(r.out, HasSubstr("NODE"));
  EXPECT_THAT(r.out, HasSubstr("gpu-07"));
}

// An empty --token-file fell back to $TESSERA_TOKEN (the admin's); --token with --token-file
// silently used --token. Both are bad flags now, for ctl and for `tessera run --server`.
// Issue 31: a node gone for good could not be taken out of the list. `ctl nodes remove` sends the
// DELETE and says what it removed; the server's refusal (a node with work) is its message, exit 1.
TEST(CtlCli, NodesRemoveDeletesTheNodeAndShowsTheServersRefusal) {
  TempDir dir;
  CannedServer server(200, R"({"node": "n2", "removed": true, "was": "cordoned"})");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl nodes remove n2", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "node 'n2' removed (was cordoned)\n");
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("DELETE /v1/nodes/n2 "));
  CannedServer refusing(409, R"({"error": {"code": "conflict", "message": "node 'n1' still runs workload 7: drain it (requeues them) or wait until they end"}})");
  ASSERT_GT(refusing.port(), 0);
  r = RunTessera(dir, "ctl nodes remove n1", Env(refusing));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tessera ctl nodes remove: HTTP 409: node 'n1' still runs workload 7: drain it"));
}

// NVML's view beside the shim's (issue 32): each figure the sample carried, nothing where none.
TEST(CtlCli, NodesGetPrintsNvmlsFiguresBesideTheSampledUse) {
  TempDir dir;
  const std::string body = R"js({"name": "n1", "state": "ready", "cpu_milli": 64000, "memory_mib": 262144,
    "workloads": 2, "last_heartbeat_ms": 0, "conditions": [],
    "gpus": [{"index": 0, "model": "A100-40GB", "allocated_milli": 700, "used_mem_mib": 6144, "used_milli": 150,
              "nvml_used_mem_mib": 6600, "nvml_used_milli": 410, "shares": [
               {"workload": 7, "tenant": "ml", "milli": 300, "mem_mib": 20480, "mode": "fraction(300,20480MiB)",
                "used_mem_mib": 6144, "used_milli": 150, "sampled_end": 1790000000,
                "nvml_used_mem_mib": 6600, "nvml_used_milli": 410},
               {"workload": 9, "tenant": "cv", "milli": 400, "mem_mib": 0, "mode": "fraction(400,0MiB)",
                "used_mem_mib": 0, "used_milli": 0, "sampled_end": 1790000000, "nvml_used_mem_mib": 0}]}]})js";
  CannedServer server(200, body);
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl nodes get n1", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("700/1000 milli, using 6144 MiB and 150 milli (NVML: 6600 MiB and 410 milli)\n"
                               "    # workload 7, tenant ml, 300 milli, memory limit 20480 MiB, fraction(300,20480MiB), "
                               "using 6144 MiB and 150 milli (NVML: 6600 MiB and 410 milli)\n"
                               "    = workload 9, tenant cv, 400 milli, memory limit whole GPU, fraction(400,0MiB), "
                               "using 0 MiB and 0 milli (NVML: 0 MiB)\n"))
      << r.out;
}

// Issue 34: a local slot (a tenant of the node directory the control plane did not place) is a
// share with no workload; the map says so rather than "workload -".
TEST(CtlCli, NodesGetPrintsALocalSlotAsSuch) {
  TempDir dir;
  CannedServer server(200, R"js({"name": "n1", "state": "ready", "cpu_milli": 1, "memory_mib": 1, "workloads": 0,
    "last_heartbeat_ms": 0, "conditions": [], "gpus": [{"index": 0, "model": "A100-40GB", "allocated_milli": 600,
    "shares": [{"tenant": "k8s-dra/ns/c", "milli": 600, "mem_mib": 10240, "mode": "local"}]}]})js");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl nodes get n1", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("GPU 0 A100-40GB [############........] 600/1000 milli\n"
                               "    # local slot, tenant k8s-dra/ns/c, 600 milli, memory limit 10240 MiB, local\n"))
      << r.out;
}

// Issue 32: `ctl nodes get` printed one row with the node's total milli; now, beneath it, a GPU
// map: a bar of each GPU's 1000 milli split by share (one mark per share, 50 milli a cell) and the
// shares under it. -o json stays the server's JSON.
TEST(CtlCli, NodesGetPrintsAGpuMapWithTheSharesOfEachGpu) {
  TempDir dir;
  const std::string body = R"js({"name": "n1", "state": "ready", "cpu_milli": 64000, "memory_mib": 262144,
    "workloads": 3, "last_heartbeat_ms": 0, "conditions": [],
    "gpus": [{"index": 0, "model": "A100-40GB", "allocated_milli": 700, "used_mem_mib": 6144, "used_milli": 150,
              "shares": [
               {"workload": 7, "tenant": "ml", "milli": 300, "mem_mib": 20480, "mode": "fraction(300,20480MiB)",
                "used_mem_mib": 6144, "used_milli": 150, "sampled_end": 1790000000},
               {"workload": 9, "tenant": "cv", "milli": 400, "mem_mib": 0, "mode": "fraction(400,0MiB)"}]},
             {"index": 1, "model": "A100-40GB", "allocated_milli": 1000, "shares": [
               {"workload": 12, "tenant": "ml", "milli": 1000, "mem_mib": 0, "mode": "exclusive"}]},
             {"index": 2, "model": "A100-40GB", "allocated_milli": 0, "shares": []}]})js";
  CannedServer server(200, body);
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl nodes get n1", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\n"
                               "GPU 0 A100-40GB [######========......] 700/1000 milli, using 6144 MiB and 150 milli\n"
                               "    # workload 7, tenant ml, 300 milli, memory limit 20480 MiB, fraction(300,20480MiB), "
                               "using 6144 MiB and 150 milli\n"
                               "    = workload 9, tenant cv, 400 milli, memory limit whole GPU, fraction(400,0MiB)\n"
                               "GPU 1 A100-40GB [####################] 1000/1000 milli\n"
                               "    # workload 12, tenant ml, 1000 milli, memory limit whole GPU, exclusive\n"
                               "GPU 2 A100-40GB [....................] 0/1000 milli\n"))
      << r.out;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("GET /v1/nodes/n1 "));
  r = RunTessera(dir, "ctl nodes get n1 -o json", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::parse(body));
  // The list keeps its one row per node (no map).
  CannedServer list(200, R"({"nodes": [)" + body + "]}");
  ASSERT_GT(list.port(), 0);
  r = RunTessera(dir, "ctl nodes list", Env(list));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("GPU 0"))) << r.out;
}

// Issue 32: a node of several GPU models printed the last GPU's model as the node's; MODEL now
// counts each model in GPU order, and the GPU map names each GPU's own.
TEST(CtlCli, NodesListCountsEachModelOfAMixedNode) {
  TempDir dir;
  nlohmann::json node = {{"name", "mix"}, {"state", "ready"}, {"workloads", 1}, {"gpus", nlohmann::json::array()}};
  for (int g = 0; g < 6; ++g)
    node["gpus"].push_back({{"index", g}, {"model", g < 2 ? "H100-80GB" : "A100-40GB"}, {"allocated_milli", g == 3 ? 1000 : 0}});
  CannedServer list(200, nlohmann::json{{"nodes", {node}}}.dump());
  ASSERT_GT(list.port(), 0);
  CommandResult r = RunTessera(dir, "ctl nodes list", Env(list));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("2xH100-80GB,4xA100-40GB")) << r.out;
  CannedServer get(200, node.dump());
  ASSERT_GT(get.port(), 0);
  r = RunTessera(dir, "ctl nodes get mix", Env(get));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("GPU 1 H100-80GB [")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("GPU 3 A100-40GB [")) << r.out;
}

// Issue 31: `ctl workloads submit` could not give the command the agent runs, so the README's
// submit made a workload with no process that held half a GPU and was billed. --command PROG
// ARGS..., or everything after -- (arguments that start with '-'), is the body's "command".
TEST(CtlCli, WorkloadsSubmitSendsTheCommand) {
  TempDir dir;
  CannedServer server(201, R"({"id": 1, "state": "pending"})");
  ASSERT_GT(server.port(), 0);
  // The README's example, as written there.
  CommandResult r = RunTessera(
      dir,
      "ctl workloads submit --tenant ml --gpus 1 --gpu-milli 500 --gpu-mem-mib 20480 --qos Burstable --name demo "
      "--command sleep 300",
      Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = RunTessera(dir, "ctl workloads submit --tenant ml -- python3 -c 'print(1)' --lr 1e-3", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_THAT(server.requests()[0], HasSubstr(R"({"command":["sleep","300"],"gpu_mem_mib":20480,"gpu_milli":500,)"));
  EXPECT_THAT(server.requests()[1], HasSubstr(R"x({"command":["python3","-c","print(1)","--lr","1e-3"],"gpus":1,)x"));
}

// Issue 31: PATCH /v1/workloads/{id} had no verb. `ctl workloads update ID` sends --mem (a size with
// a unit, as MiB), --share (milli-GPU) and --priority as the PATCH body; nothing to change or a
// size without a unit is exit 2 with nothing sent; what the server refuses is its message, exit 1.
TEST(CtlCli, WorkloadsUpdatePatchesMemShareAndPriority) {
  TempDir dir;
  CannedServer server(200, R"x({"id": 7, "name": "bert", "tenant": "ml", "state": "running", "qos": "Burstable",
                                "mode": "fraction(400,8192MiB)", "placement": {"node": "gpu-1", "gpus": [0]},
                                "pods": [{"node": "gpu-1", "gpus": [0]}],
                                "request": {"tenant": "ml", "gpus": 1, "name": "bert", "gpu_milli": 400,
                                            "gpu_mem_mib": 8192}})x");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl workloads update 7 --mem 8GiB --share 400 --priority 5", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("fraction(400,8192MiB)"));
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("PATCH /v1/workloads/7 "));
  EXPECT_THAT(server.requests()[0], HasSubstr(R"({"gpu_mem_mib":8192,"gpu_milli":400,"priority":5})"));
  r = RunTessera(dir, "ctl workloads update 7 --mem 1.5MiB", Env(server));  // rounded up to whole MiB
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(server.requests().size(), 2u);
  EXPECT_THAT(server.requests()[1], HasSubstr(R"({"gpu_mem_mib":2})"));
  ExpectOneLineBadInput(RunTessera(dir, "ctl workloads update 7", Env(server)),
                        "tessera ctl workloads update: nothing to change: give --mem, --share or --priority");
  ExpectOneLineBadInput(RunTessera(dir, "ctl workloads update 7 --mem 4096", Env(server)), "--mem '4096': no unit");
  EXPECT_EQ(RunTessera(dir, "ctl workloads update 7 --share 0", Env(server)).exit_code, 2);
  EXPECT_EQ(server.requests().size(), 2u);
  CannedServer refusing(409, R"({"error": {"code": "conflict", "message": "GPU 0 of gpu-1 has 100 milli free, the change needs 200"}})");
  ASSERT_GT(refusing.port(), 0);
  r = RunTessera(dir, "ctl workloads update 7 --share 600", Env(refusing));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tessera ctl workloads update: HTTP 409: GPU 0 of gpu-1 has 100 milli free"));
}

TEST(CtlCli, AnEmptyTokenFileOrBothTokenFlagsAreRefused) {
  TempDir dir;
  CannedServer server(200, R"({"tenants": []})");
  ASSERT_GT(server.port(), 0);
  testing::WriteTextFile(dir.File("empty.token"), "");
  testing::WriteTextFile(dir.File("blank.token"), "  \n");
  testing::WriteTextFile(dir.File("good.token"), "from-the-file\n");
  for (const std::string file : {"empty.token", "blank.token"}) {
    CommandResult r = RunTessera(dir, "ctl tenants list --token-file " + dir.File(file), Env(server));
    ExpectOneLineBadInput(r, "tessera ctl tenants list: --token-file '" + dir.File(file) + "' is empty");
    r = RunTessera(dir, "run --tenant t --server " + server.url() + " --token-file " + dir.File(file) + " -- true",
                   Env(server));
    ExpectOneLineBadInput(r, "tessera run: --token-file '" + dir.File(file) + "' is empty");
  }
  CommandResult r = RunTessera(dir, "ctl tenants list --token x --token-file " + dir.File("good.token"), Env(server));
  ExpectOneLineBadInput(r, "--token and --token-file: give one of them, not both");
  r = RunTessera(dir, "run --tenant t --server " + server.url() + " --token x --token-file " + dir.File("good.token") +
                          " -- true",
                 Env(server));
  ExpectOneLineBadInput(r, "tessera run: --token and --token-file: give one of them, not both");
  r = RunTessera(dir, "ctl events --token x --token-file " + dir.File("good.token"), Env(server));
  ExpectOneLineBadInput(r, "--token and --token-file");
  r = RunTessera(dir, "agent --server " + server.url() + " --token-file " + dir.File("blank.token"), Env(server));
  ExpectOneLineBadInput(r, "tessera agent: --token-file '" + dir.File("blank.token") + "' is empty");
  EXPECT_TRUE(server.requests().empty());
  // A good file wins over $TESSERA_TOKEN.
  r = RunTessera(dir, "ctl tenants list --token-file " + dir.File("good.token"), Env(server));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("Bearer from-the-file\r\n"));
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// A 429 used to end ctl at once (exit 1) and `tessera run --server` too, leaving its workload
// pending with nobody following it. Now they wait Retry-After (1 s, plus up to half) and ask again.
TEST(CtlCli, A429IsWaitedOutWithinTheRetryBudget) {
  TempDir dir;
  CannedServer server(200, R"({"tenants": []})", /*refuse_first=*/2);
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl tenants list", Env(server));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(server.requests().size(), 3u);
  // --retry-budget 0: the first answer, as before.
  CannedServer once(200, R"({"tenants": []})", /*refuse_first=*/1);
  r = RunTessera(dir, "ctl tenants list --retry-budget 0", Env(once));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("HTTP 429: over this token's rate limit; retry after 1 s"));
  EXPECT_EQ(once.requests().size(), 1u);
}

TEST(CtlCli, ASpentRetryBudgetSaysHowLongItTriedAndTheLastAnswer) {
  TempDir dir;
  CannedServer server(200, R"({"tenants": []})", /*refuse_first=*/1000);
  ASSERT_GT(server.port(), 0);
  // Waits of 1..1.5 s: the budget of 2 s holds one, not the next. The time tried prints as "1 s"
  // or "1.2 s" (one decimal, a whole second without it).
  CommandResult r = RunTessera(dir, "run --tenant t --server " + server.url() + " --retry-budget 2 -- true", Env(server));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tessera run: POST /v1/workloads: the control plane at 127.0.0.1:" +
                               std::to_string(server.port()) +
                               " still answered HTTP 429 (over this token's rate limit; retry after 1 s) after 2 "
                               "tries in 1"));
  EXPECT_THAT(r.err, HasSubstr("(retry budget 2 s; the next wait, 1"));
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(CtlCli, A503IsRetriedOnlyWhereARepeatIsSafe) {
  TempDir dir;
  // A POST without an Idempotency-Key may have been done: its 503 is the answer.
  CannedServer keyless(201, R"({"id": 1, "state": "pending"})", /*refuse_first=*/1, /*refusal=*/503);
  CommandResult r = RunTessera(dir, "ctl workloads submit --tenant a --qos Burstable", Env(keyless));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(keyless.requests().size(), 1u);
  // With one, a repeat gets the first answer.
  CannedServer keyed(201, R"({"id": 1, "state": "pending"})", /*refuse_first=*/1, /*refusal=*/503);
  r = RunTessera(dir, "ctl workloads submit --tenant a --qos Burstable --idempotency-key job-1", Env(keyed));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(keyed.requests().size(), 2u);
  EXPECT_THAT(keyed.requests()[1], HasSubstr("Idempotency-Key: job-1"));
  // A probe answers for now: `ctl health` does not wait for readiness.
  CannedServer standby(503, R"({"status": "not ready"})");
  r = RunTessera(dir, "ctl health", Env(standby));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(standby.requests().size(), 1u);
}

// Ctrl-C used to wait for nothing (there were no retries); now it must not wait out the budget.
TEST(CtlCli, CtrlCDuringARetryWaitEndsTesseraRunAtOnce) {
  TempDir dir;
  CannedServer server(201, R"({"id": 1, "state": "pending"})", /*refuse_first=*/1000);
  ASSERT_GT(server.port(), 0);
  const std::string err = dir.File("run.err");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::setenv("TESSERA_TOKEN", "t", 1);
    ::execl(TESSERA_BINARY, "tessera", "run", "--tenant", "t", "--server", server.url().c_str(), "--", "true",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Once the first 429 came back, tessera run is waiting to retry.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server.requests().empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_FALSE(server.requests().empty());
  ::kill(pid, SIGINT);
  const auto interrupted = std::chrono::steady_clock::now();
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() - interrupted > std::chrono::seconds(10)) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      FAIL() << "tessera run did not end within 10 s of SIGINT";
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // Well under one wait of 1..1.5 s after the signal (the sleep looks every 50 ms).
  EXPECT_LT(std::chrono::steady_clock::now() - interrupted, std::chrono::milliseconds(900));
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  std::ifstream in(err);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("tessera run: interrupted before the workload was submitted"));
  EXPECT_LE(server.requests().size(), 2u);
}

// Runs of spaces made one: a table's cells, whatever the column widths.
std::string Squeezed(const std::string& text) {
  std::string out;
  for (size_t k = 0; k < text.size(); ++k)
    if (text[k] != ' ' || (k > 0 && text[k - 1] != ' ')) out += text[k];
  return out;
}

// Issue 31, item 10: table mode printed the server's JSON for `workloads submit`, `nodes
// cordon/uncordon/drain` and `health`. Now one line (or a short table) each; -o json keeps the JSON.
TEST(CtlCli, ActionsPrintALineOrATableAndJsonOnlyWithDashOJson) {
  TempDir dir;
  {
    CannedServer server(201, R"({"id": 17, "state": "pending"})");
    ASSERT_GT(server.port(), 0);
    CommandResult r = RunTessera(dir, "ctl workloads submit --tenant ml", Env(server));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "workload 17 submitted: pending\n");
    r = RunTessera(dir, "ctl workloads submit --tenant ml -o json", Env(server));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out), nlohmann::json::parse(R"({"id": 17, "state": "pending"})"));
  }
  {
    CannedServer server(200, R"({"node": "gpu-1", "state": "cordoned", "requeued": [7, 9]})");
    ASSERT_GT(server.port(), 0);
    CommandResult r = RunTessera(dir, "ctl nodes drain gpu-1", Env(server));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "node 'gpu-1' cordoned, workloads requeued: 7, 9\n");
    r = RunTessera(dir, "ctl nodes cordon gpu-1", Env(server));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "node 'gpu-1' cordoned\n");
    r = RunTessera(dir, "ctl nodes drain gpu-1 -o json", Env(server));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["requeued"], nlohmann::json::parse("[7, 9]"));
  }
  {
    CannedServer server(200, R"({"node": "gpu-1", "state": "ready", "requeued": []})");
    ASSERT_GT(server.port(), 0);
    CommandResult r = RunTessera(dir, "ctl nodes uncordon gpu-1", Env(server));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, "node 'gpu-1' ready\n");
  }
  {
    CannedServer server(200, R"({"status": "ready", "store": "ok", "scheduler": "ok"})");
    ASSERT_GT(server.port(), 0);
    CommandResult r = RunTessera(dir, "ctl health", Env(server));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(Squeezed(r.out), "STATUS STORE SCHEDULER\nready ok ok\n");
    r = RunTessera(dir, "ctl health -o json", Env(server));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["scheduler"], "ok");
  }
}

// Issue 31, item 10: times in tables were epoch milliseconds (workloads get, tokens list, audit
// list); now RFC 3339 in UTC. -o json keeps the API's *_ms numbers.
TEST(CtlCli, TablesShowTimesAsRfc3339AndJsonKeepsMilliseconds) {
  TempDir dir;
  {
    CannedServer server(200, R"({"id": 7, "tenant": "ml", "state": "running", "qos": "Burstable", "mode": "exclusive",
        "placement": {"node": "gpu-1", "gpus": [0]}, "pods": [{"node": "gpu-1", "gpus": [0]}],
        "request": {"tenant": "ml", "gpus": 1},
        "events": [{"time_ms": 1764590000123, "kind": "placed", "detail": "gpu-1 [0]"}]})");
    ASSERT_GT(server.port(), 0);
    CommandResult r = RunTessera(dir, "ctl workloads get 7", Env(server));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("  event 2025-12-01T11:53:20Z placed: gpu-1 [0]\n"));
    r = RunTessera(dir, "ctl workloads get 7 -o json", Env(server));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["events"][0]["time_ms"], 1764590000123);
  }
  {
    CannedServer server(200, R"({"records": [{"seq": 3, "time_ms": 1764590000000, "actor": "tok_1",
        "action": "workload.create", "target": "workloads/7", "result": "201"}]})");
    ASSERT_GT(server.port(), 0);
    CommandResult r = RunTessera(dir, "ctl audit list", Env(server));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(Squeezed(r.out),
              "SEQ TIME ACTOR ACTION TARGET RESULT\n3 2025-12-01T11:53:20Z tok_1 workload.create workloads/7 201\n");
  }
}

// Issue 31, item 10: `tokens list` showed an expired token like a live one (EXPIRES_MS, REVOKED
// no). Now a STATE column, active, revoked or expired, and the times as RFC 3339.
TEST(CtlCli, TokensListSaysWhichTokensExpired) {
  TempDir dir;
  CannedServer server(200, R"({"tokens": [
      {"id": "tok_live", "role": "admin", "tenant": null, "revoked": false, "expires_ms": null, "created_ms": 1764590000000},
      {"id": "tok_later", "role": "tenant-user", "tenant": "ml", "revoked": false, "expires_ms": 4102444800000, "created_ms": 1764590000000},
      {"id": "tok_old", "role": "tenant-user", "tenant": "ml", "revoked": false, "expires_ms": 1000, "created_ms": 0},
      {"id": "tok_gone", "role": "tenant-user", "tenant": "ml", "revoked": true, "expires_ms": 1000, "created_ms": 0}]})");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl tokens list", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Squeezed(r.out),
            "ID ROLE TENANT NODE STATE EXPIRES CREATED\n"
            "tok_live admin - - active never 2025-12-01T11:53:20Z\n"
            "tok_later tenant-user ml - active 2100-01-01T00:00:00Z 2025-12-01T11:53:20Z\n"
            "tok_old tenant-user ml - expired 1970-01-01T00:00:01Z 1970-01-01T00:00:00Z\n"
            "tok_gone tenant-user ml - revoked 1970-01-01T00:00:01Z 1970-01-01T00:00:00Z\n")
      << r.out;
}

// Issue 31, item 10: a mistyped verb said "A subcommand is required"; now it names the word and
// lists the verbs (exit 2, nothing sent).
TEST(CtlCli, AnUnknownVerbIsNamedWithTheVerbsThereAre) {
  TempDir dir;
  CannedServer server(200, R"({"tenants": []})");
  ASSERT_GT(server.port(), 0);
  ExpectOneLineBadInput(RunTessera(dir, "ctl tenants lst", Env(server)),
                        "tessera ctl tenants: unknown verb 'lst' for 'ctl tenants'; verbs: create, delete, get, list, update\n");
  ExpectOneLineBadInput(RunTessera(dir, "ctl --server " + server.url() + " tenant list", Env(server)),
                        "tessera ctl: unknown verb 'tenant' for 'ctl'; verbs: anomalies, audit, events, health, invoices, nodes, ");
  ExpectOneLineBadInput(RunTessera(dir, "ctl tokens", Env(server)),
                        "tessera ctl tokens: a verb is needed; verbs: create, list, revoke\n");
  EXPECT_TRUE(server.requests().empty());
}

// Issue 31, item 10: `ctl tenants update --help` showed create's texts (and a retry key PATCH
// ignores). Each verb's help now says what its flags do for it.
TEST(CtlCli, TenantsUpdateHelpIsUpdates) {
  TempDir dir;
  CommandResult r = RunTessera(dir, "ctl tenants update --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Move it under this tenant"));
  EXPECT_THAT(r.out, HasSubstr("The new quota, replacing the old"));
  EXPECT_THAT(r.out, Not(HasSubstr("create")));
  EXPECT_THAT(r.out, Not(HasSubstr("--idempotency-key")));
  r = RunTessera(dir, "ctl tenants create --help");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Parent tenant (default: none, a root)"));
  EXPECT_THAT(r.out, HasSubstr("--idempotency-key"));
}

// `ctl anomalies`: the query carries --tenant and --from, the table has one row per flag with the
// value against the expected range, -o json the server's answer, an HTTP error exits 1.
TEST(CtlCli, AnomaliesSendsTheWindowAndPrintsValueAgainstTheExpectedRange) {
  TempDir dir;
  CannedServer server(200, R"({"anomalies": [{"id": 1, "tenant": "vision", "series": "usage_gpu_seconds",
      "hour": "2026-11-02T16:00:00Z", "hour_s": 1793635200, "value": 1260, "expected": 126,
      "expected_low": 0, "expected_high": 410.5, "score": 0.83, "reason": "GPU-seconds used 1260 ..."}]})");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl anomalies --tenant vision --from 2026-11-02T00:00:00Z", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string table;
  for (size_t k = 0; k < r.out.size(); ++k)
    if (r.out[k] != ' ' || (k > 0 && r.out[k - 1] != ' ')) table += r.out[k];
  EXPECT_EQ(table,
            "HOUR TENANT SERIES VALUE EXPECTED RANGE SCORE\n"
            "2026-11-02T16:00:00Z vision usage_gpu_seconds 1260 126 0..410 0.83\n")
      << r.out;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("GET /v1/anomalies?tenant=vision&from=2026-11-02T00%3A00%3A00Z "));
  r = RunTessera(dir, "ctl anomalies -o json", Env(server));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["anomalies"][0]["series"], "usage_gpu_seconds");
  EXPECT_THAT(server.requests()[1], HasSubstr("GET /v1/anomalies "));
  CannedServer refusing(404, R"({"error": {"code": "not_found", "message": "tenant 'nobody' not found"}})");
  r = RunTessera(dir, "ctl anomalies --tenant nobody", Env(refusing));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tenant 'nobody' not found"));
}

}  // namespace
}  // namespace tessera
