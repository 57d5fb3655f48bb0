// The platform end to end (ctest label e2e): a real `tessera serve` on SQLite, two real
// `tessera agent` processes with fake GPUs (the in-tree fake NVML and libcuda), tenants and
// workloads through the API, commands under the shim. What issue 16's "Done when" asks:
//   - a Guaranteed workload preempts a borrower and starts;
//   - `tessera run --server` runs a command under the shim and its memory limit holds to the
//     byte; a PATCHed limit is seen by the running process;
//   - a SIGKILLed agent's workloads are requeued and placed on the other node;
//   - a SIGKILLed and restarted serve adopts what runs: nothing lost or duplicated, no limit
//     changed on the node;
//   - an agent with a wrong token is refused and exits 1;
//   - the agents' usage samples reach GET /v1/usage;
//   - 60 concurrent `tessera run --server` with one token against a low rate limit all finish
//     (issue 31: a third of them used to exit on their first 429);
//   - a MIG workload waits, with a reason that says so, while the only MIG node's agent may not
//     reconfigure, and runs once an agent with --allow-mig-reconfigure has cut its GPU (issue 32).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "tests/testing/cli_test_util.h"
#include "tests/testing/serve_process.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::testing {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kAdmin = "admin-token-for-the-e2e-tests";
const std::string kAuth = std::string("Authorization: Bearer ") + kAdmin;
const std::string kProbe = TESSERA_SHIM_PROBE;

json Body(const HttpResult& r) {
  json j = json::parse(r.body, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

bool WaitFor(const std::function<bool()>& done, int timeout_ms = 30000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A `tessera agent` process, its output in a file.
class AgentProcess {
 public:
  AgentProcess(const TempDir& dir, const std::string& name, int port, const std::string& token_file,
               const std::string& gpus, const std::string& cpu_milli = "",
               const std::vector<std::pair<std::string, std::string>>& env = {},
               // More flags. As root the agent runs each tenant under a uid of its own by default;
               // the tests' directories (mkdtemp, 0700) are closed to those uids, so "--tenant-uids
               // off" is added unless `extra` names --tenant-uids.
               const std::vector<std::string>& extra = {})
      : log_(dir.File(name + ".log")), run_dir_(dir.File(name)) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::setenv("TESSERA_FAKE_NVML_LIBRARY", TESSERA_FAKE_NVML_PATH, 1);
      ::setenv("TESSERA_FAKE_CUDA_MEM_BYTES", std::to_string(uint64_t{40} << 30).c_str(), 1);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      const std::string server = "http://127.0.0.1:" + std::to_string(port);
      std::vector<std::string> argv = {"tessera", "agent", "--server", server, "--token-file", token_file, "--name",
                                       name, "--run-dir", run_dir_, "--fake-gpus", gpus, "--interval-ms", "200",
                                       "--usage-interval", "1", "--stop-grace", "1"};
      if (!cpu_milli.empty()) argv.insert(argv.end(), {"--cpu-milli", cpu_milli});
      argv.insert(argv.end(), extra.begin(), extra.end());
      if (std::find(extra.begin(), extra.end(), "--tenant-uids") == extra.end()) {
        argv.insert(argv.end(), {"--tenant-uids", "off"});
      }
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(TESSERA_BINARY, args.data());
      ::_exit(127);
    }
  }
  ~AgentProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  int Kill(int sig) {
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  int WaitExit(int timeout_ms) {
    int status = 0;
    if (!WaitFor([&] { return ::waitpid(pid_, &status, WNOHANG) == pid_; }, timeout_ms)) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  std::string output() const { return ReadFile(log_); }
  const std::string& run_dir() const { return run_dir_; }

 private:
  std::string log_, run_dir_;
  pid_t pid_ = -1;
};

class Platform : public ::testing::Test {
 protected:
  void SetUp() override {
    StartServe(0);
    ASSERT_GT(port_, 0);
    ASSERT_EQ(Call("POST", "/v1/tenants", R"({"name": "prod", "quota": {"guaranteed": {"gpu_milli": 2000}}})").status,
              201);
    ASSERT_EQ(Call("POST", "/v1/tenants", R"({"name": "research", "quota": {}})").status, 201);
    ASSERT_EQ(Call("POST", "/v1/tenants", R"({"name": "batch", "quota": {}})").status, 201);
    HttpResult t = Call("POST", "/v1/tokens", R"({"role": "node-agent"})");
    ASSERT_EQ(t.status, 201) << t.body;
    std::ofstream(dir_.File("agent.token")) << Body(t)["token"].get<std::string>() << "\n";
    HttpResult u = Call("POST", "/v1/tokens", R"({"role": "tenant-user", "tenant": "batch"})");
    ASSERT_EQ(u.status, 201) << u.body;
    user_token_ = Body(u)["token"].get<std::string>();
  }

  void StartServe(int port) {
    // Borrowed work may be preempted at once (the default protects it for its first minute).
    std::ofstream(dir_.File("serve.yaml")) << "scheduler:\n  min_runtime_s: 0\n";
    serve_ = std::make_unique<ServeProcess>(
        std::vector<std::string>{TESSERA_BINARY, "serve", "--config", dir_.File("serve.yaml"), "--db",
                                 "sqlite:" + dir_.File("t.db"), "--listen",
                                 "127.0.0.1:" + std::to_string(port), "--node-timeout", std::to_string(node_timeout_s_), "--rate",
                                 std::to_string(rate_), "--burst", std::to_string(rate_)},
        std::vector<std::string>{std::string("TESSERA_BOOTSTRAP_TOKEN=") + kAdmin});
    ASSERT_TRUE(serve_->WaitListening()) << serve_->output();
    port_ = serve_->port();
  }
  HttpResult Call(const std::string& method, const std::string& target, const std::string& body = "") {
    return HttpCall(port_, method, target, body, {kAuth});
  }
  // cpu_milli: what the node offers (each pod asks 1000 milli-CPUs); "": 1000 per online CPU.
  // env: set in the agent's environment (and so its workloads').
  std::unique_ptr<AgentProcess> Agent(const std::string& name, const std::string& gpus = "A100-40GB:2",
                                      const std::string& cpu_milli = "",
                                      const std::vector<std::pair<std::string, std::string>>& env = {},
                                      const std::vector<std::string>& flags = {}) {
    auto a = std::make_unique<AgentProcess>(dir_, name, port_, dir_.File("agent.token"), gpus, cpu_milli, env, flags);
    EXPECT_TRUE(WaitFor([&] { return Call("GET", "/v1/nodes/" + name).status == 200; })) << a->output();
    return a;
  }
  int64_t Submit(const json& body) {
    HttpResult r = Call("POST", "/v1/workloads", body.dump());
    EXPECT_EQ(r.status, 201) << r.body;
    return Body(r).value("id", int64_t{0});
  }
  json Get(int64_t id) { return Body(Call("GET", "/v1/workloads/" + std::to_string(id))); }
  bool WaitState(int64_t id, const std::string& state, int timeout_ms = 30000) {
    return WaitFor([&] { return Get(id).value("state", "") == state; }, timeout_ms);
  }
  // `tessera run` with the test's control plane and a tenant-user token of "batch".
  CommandResult TesseraRun(const std::string& node_dir, const std::string& args) {
    return RunCommand("TESSERA_RUN_DIR='" + node_dir + "' '" + std::string(TESSERA_BINARY) +
                          "' run --server http://127.0.0.1:" + std::to_string(port_) + " --token " + user_token_ +
                          " --tenant batch " + args,
                      dir_);
  }

  TempDir dir_;
  std::unique_ptr<ServeProcess> serve_;
  int rate_ = 100000;  // --rate and --burst: requests per second and at once, per token
  int node_timeout_s_ = 2;  // --node-timeout: short, so that the lost-node tests end quickly
  int port_ = 0;
  std::string user_token_;
};

json Whole(const std::string& tenant, const std::string& qos) {
  return json{{"tenant", tenant}, {"gpus", 1}, {"qos", qos}};
}

TEST_F(Platform, AGuaranteedWorkloadPreemptsABorrowerAndStarts) {
  auto a = Agent("n1");
  auto b = Agent("n2");
  std::vector<int64_t> borrowed;
  for (int i = 0; i < 4; ++i) borrowed.push_back(Submit(Whole("research", "Burstable")));
  for (int64_t id : borrowed) ASSERT_TRUE(WaitState(id, "running")) << Get(id).dump();
  const int64_t guaranteed = Submit(Whole("prod", "Guaranteed"));
  ASSERT_TRUE(WaitState(guaranteed, "running", 10000)) << Get(guaranteed).dump();
  int preempted = 0;
  int64_t preempted_ms = 0;
  for (int64_t id : borrowed) {
    const json w = Get(id);
    for (const json& e : w["events"])
      if (e["kind"] == "preempted") {
        ++preempted;
        preempted_ms = e["time_ms"];
      }
  }
  EXPECT_EQ(preempted, 1) << Get(borrowed[0]).dump() << Get(guaranteed).dump();
  int64_t placed_ms = 0;
  const json g = Get(guaranteed);
  for (const json& e : g["events"])
    if (e["kind"] == "placed") placed_ms = e["time_ms"];
  EXPECT_EQ(placed_ms, preempted_ms) << "the preemption and the start are one scheduling cycle";
  // The agents made it true: the guaranteed workload holds a slot on its node.
  const std::string node = Get(guaranteed)["placement"]["node"];
  const std::string run_dir = node == "n1" ? a->run_dir() : b->run_dir();
  EXPECT_TRUE(WaitFor([&] {
    return RunCommand("TESSERA_RUN_DIR='" + run_dir + "' '" + std::string(TESSERA_BINARY) + "' node status --json -",
                      dir_)
               .out.find("\"w" + std::to_string(guaranteed) + "\"") != std::string::npos;
  }));
  // The agents' usage samples reach the control plane's ledger, none refused.
  EXPECT_TRUE(WaitFor([&] {
    const json u = Body(Call("GET", "/v1/usage?tenant=prod"));
    return !u.value("tenants", json::array()).empty() && u["tenants"][0].value("gpu_milli_s_allocated", 0) > 0;
  })) << Body(Call("GET", "/v1/usage")).dump();
  EXPECT_THAT(a->output() + b->output(), ::testing::Not(HasSubstr("usage sample refused")));
}

TEST_F(Platform, TesseraRunServerHoldsTheMemoryLimitToTheByte) {
  auto a = Agent("n1");
  CommandResult r = TesseraRun(a->run_dir(), "--mem 64MiB --share 500 -- '" + kProbe +
                                                 "' init alloc:mem:67108864 alloc:mem:1 freeall alloc:mem:67108865");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << a->output();
  EXPECT_THAT(r.err, HasSubstr("running on n1"));
  EXPECT_THAT(r.out, HasSubstr("alloc family=mem rc=0 id=0"));  // exactly the limit fits
  EXPECT_THAT(r.out, HasSubstr("alloc family=mem rc=2 id=1"));  // one byte more does not
  EXPECT_THAT(r.out, HasSubstr("alloc family=mem rc=2 id=2"));  // nor the limit + 1 at once
  // The command's exit code is tessera run's.
  CommandResult failing = TesseraRun(a->run_dir(), "--mem 64MiB --share 500 -- sh -c 'exit 7'");
  EXPECT_EQ(failing.exit_code, 7) << failing.err;
}

TEST_F(Platform, APatchedLimitIsSeenByTheRunningProcess) {
  auto a = Agent("n1");
  const std::string go = dir_.File("go");
  json body = {{"tenant", "batch"},
               {"gpus", 1},
               {"qos", "Burstable"},
               {"gpu_milli", 500},
               {"gpu_mem_mib", 512},
               {"command", {"/bin/sh", "-c", "while [ ! -e '" + go + "' ]; do sleep 0.05; done; exec '" + kProbe +
                                                  "' init fill:mem:1048576"}}};
  const int64_t id = Submit(body);
  ASSERT_TRUE(WaitState(id, "running")) << Get(id).dump();
  HttpResult patched = Call("PATCH", "/v1/workloads/" + std::to_string(id), R"({"gpu_mem_mib": 128})");
  ASSERT_EQ(patched.status, 200) << patched.body;
  ASSERT_TRUE(WaitFor([&] { return a->output().find("limit 128 MiB") != std::string::npos; })) << a->output();
  std::ofstream(go) << "go\n";
  ASSERT_TRUE(WaitState(id, "completed")) << Get(id).dump() << a->output();
  const std::string log = ReadFile(a->run_dir() + "/agent/w" + std::to_string(id) + ".log");
  EXPECT_THAT(log, HasSubstr("fill family=mem count=128 rc=2")) << log;
}

// Tenant uids through the whole platform (docs/security.md, "Separate uids"): `tessera agent`
// as root runs research's and batch's workloads under uids of their own (here from a range the
// test gives); batch's process cannot open research's counters file (EACCES) and its own limit
// holds to the byte. Before, every workload ran under the agent's uid and the write went through.
TEST_F(Platform, TheAgentRunsEachTenantUnderAUidOfItsOwnAndNoTenantOpensAnothersCounters) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run workloads under other uids (CI runs as root)";
  ASSERT_EQ(::chmod(dir_.path().c_str(), 0755), 0);  // mkdtemp's 0700 would keep the tenants out
  AgentProcess a(dir_, "n1", port_, dir_.File("agent.token"), "A100-40GB:1", "", {},
                 {"--tenant-uids", "2000000200-2000000209"});
  ASSERT_TRUE(WaitFor([&] { return Call("GET", "/v1/nodes/n1").status == 200; })) << a.output();
  auto fraction = [](const std::string& tenant, const std::string& command) {
    return json{{"tenant", tenant}, {"gpus", 1}, {"qos", "Burstable"}, {"gpu_milli", 300}, {"gpu_mem_mib", 64},
                {"command", {"/bin/sh", "-c", command}}};
  };
  const int64_t victim = Submit(fraction("research", "id -u; exec sleep 60"));
  ASSERT_TRUE(WaitState(victim, "running")) << Get(victim).dump() << a.output();
  int index = -1;  // research's counters file: counters/<index>
  ASSERT_TRUE(WaitFor([&] {
    const json reg = json::parse(ReadFile(a.run_dir() + "/tenants.json"), nullptr, false);
    if (reg.is_discarded()) return false;
    for (const json& t : reg["tenants"])
      if (t["name"] == "w" + std::to_string(victim)) index = t["index"];
    return index >= 0;
  }));
  const int64_t attacker = Submit(fraction("batch", "id -u; exec '" + kProbe + "' init alloc:mem:67108864 alloc:mem:1 counter:" +
                                                        std::to_string(index) + ":0:67108864"));
  ASSERT_TRUE(WaitState(attacker, "completed")) << Get(attacker).dump() << a.output();
  const std::string log = ReadFile(a.run_dir() + "/agent/w" + std::to_string(attacker) + ".log");
  const std::string victim_log = ReadFile(a.run_dir() + "/agent/w" + std::to_string(victim) + ".log");
  EXPECT_EQ(victim_log, "2000000200\n");
  EXPECT_THAT(log, ::testing::StartsWith("2000000201\n"));
  EXPECT_THAT(log, HasSubstr("alloc family=mem rc=0 id=0"));
  EXPECT_THAT(log, HasSubstr("alloc family=mem rc=2 id=1"));
  EXPECT_THAT(log, HasSubstr("counter rc=1 errno=" + std::to_string(EACCES))) << "research's counters opened for batch";
  EXPECT_THAT(a.output(), HasSubstr("tenant 'batch': runs under uid 2000000201"));
  EXPECT_EQ(Call("DELETE", "/v1/workloads/" + std::to_string(victim)).status, 200);
  EXPECT_TRUE(WaitState(victim, "cancelled")) << Get(victim).dump();
}

// A pod of two GPUs end to end: placed on both GPUs of n1, its command runs once with both
// visible under the shim, the limit holds on each (64 x 1 MiB on ordinal 0, again on ordinal 1),
// it completes (it failed with exit code 126 before), and the usage the control plane keeps
// covers both GPUs: twice the allocated GPU time of a one-GPU pod of the same length.
TEST_F(Platform, APodOfTwoGpusRunsOnBothWithTheLimitOnEachAndIsMeteredOnBoth) {
  auto a = Agent("n1", "A100-40GB:2", "", {{"TESSERA_FAKE_CUDA_DEVICES", "2"}});
  const int64_t id = Submit({{"tenant", "batch"},
                             {"gpus", 2},
                             {"qos", "Burstable"},
                             {"gpu_mem_mib", 64},
                             {"command", {"/bin/sh", "-c", "echo \"gpus=$TESSERA_SHIM_GPUS\"; exec '" + kProbe +
                                                                "' init fill:mem:1048576 ctx:1 fill:mem:1048576"}}});
  ASSERT_TRUE(WaitState(id, "completed")) << Get(id).dump() << a->output();
  const std::string log = ReadFile(a->run_dir() + "/agent/w" + std::to_string(id) + ".log");
  EXPECT_THAT(log, HasSubstr("gpus=0,1\n")) << log;
  const size_t first = log.find("fill family=mem count=64 rc=2");
  ASSERT_NE(first, std::string::npos) << log;
  EXPECT_NE(log.find("fill family=mem count=64 rc=2", first + 1), std::string::npos) << log;
  // Samples of both GPUs reach the ledger: per GPU, the allocated milli-GPU-seconds are 1000 x the span.
  json usage;
  ASSERT_TRUE(WaitFor([&] {
    usage = Body(Call("GET", "/v1/usage?tenant=batch"));
    const json tenants = usage.value("tenants", json::array());
    return !tenants.empty() && tenants[0].value("gpu_milli_s_allocated", int64_t{0}) >= 2000;
  })) << usage.dump() << a->output();
  std::set<std::string> gpus;
  for (const json& h : usage["hours"])
    if (h["workload"] == std::to_string(id)) gpus.insert(h["gpu"].get<std::string>());
  EXPECT_EQ(gpus, (std::set<std::string>{"0", "1"})) << usage.dump();
  EXPECT_THAT(a->output(), ::testing::Not(HasSubstr("usage sample refused")));
}

// A node of two GPU models (issue 32): `tessera agent --fake-gpus H100-80GB:2,A100-40GB:4` (as its
// --help says) registers GPUs 0-1 as H100 and 2-5 as A100 under one node; an A100 workload runs on
// an A100 (its command sees that GPU's index), a two-GPU H100 workload on both H100s.
TEST_F(Platform, AnAgentWithTwoGpuModelsRegistersOneNodeAndRunsEachWorkloadOnGpusOfItsModel) {
  auto a = Agent("mix", "H100-80GB:2,A100-40GB:4", "", {{"TESSERA_FAKE_CUDA_DEVICES", "6"}});
  const json node = Body(Call("GET", "/v1/nodes/mix"));
  ASSERT_EQ(node["gpus"].size(), 6u) << node.dump();
  for (int g = 0; g < 6; ++g) EXPECT_EQ(node["gpus"][g]["model"], g < 2 ? "H100-80GB" : "A100-40GB") << g;
  const json echo = {"/bin/sh", "-c", "echo \"gpus=$TESSERA_SHIM_GPUS\""};
  const int64_t a100 = Submit({{"tenant", "batch"}, {"gpus", 1}, {"qos", "Burstable"}, {"model", "A100-40GB"},
                               {"command", echo}});
  const int64_t h100 = Submit({{"tenant", "batch"}, {"gpus", 2}, {"qos", "Burstable"}, {"model", "H100-80GB"},
                               {"command", echo}});
  ASSERT_TRUE(WaitState(a100, "completed")) << Get(a100).dump() << a->output();
  ASSERT_TRUE(WaitState(h100, "completed")) << Get(h100).dump() << a->output();
  const json placed = Get(a100)["placement"];
  EXPECT_EQ(placed["node"], "mix");
  ASSERT_EQ(placed["gpus"].size(), 1u) << placed.dump();
  const int gpu = placed["gpus"][0].get<int>();
  EXPECT_GE(gpu, 2) << placed.dump();
  EXPECT_EQ(ReadFile(a->run_dir() + "/agent/w" + std::to_string(a100) + ".log"), "gpus=" + std::to_string(gpu) + "\n");
  EXPECT_EQ(ReadFile(a->run_dir() + "/agent/w" + std::to_string(h100) + ".log"), "gpus=0,1\n");
}

// An MPS workload end to end: the agent finds the (fake) nvidia-cuda-mps-control on PATH, starts
// GPU 0's daemon with the node's own pipe directory, runs the command as its client with the
// thread percentage and pinned limit from the workload's share and limit (and the shim's limit),
// and stops the daemon once the workload completed.
TEST_F(Platform, AnMpsWorkloadRunsAsAClientOfItsGpusDaemonWhichStopsAfterIt) {
  const std::string fake = TESSERA_FAKE_MPS_CONTROL;
  const char* path = std::getenv("PATH");
  auto a = Agent("n1", "A100-40GB:1", "",
                 {{"PATH", fake.substr(0, fake.rfind('/')) + ":" + (path != nullptr ? path : "/usr/bin:/bin")}});
  const int64_t id = Submit({{"tenant", "batch"},
                             {"gpus", 1},
                             {"qos", "Burstable"},
                             {"mode", "mps"},
                             {"gpu_milli", 300},
                             {"gpu_mem_mib", 1024},
                             {"command", {"/bin/sh", "-c", "env | grep -E '^(CUDA_MPS_|TESSERA_SHIM_TENANT=)' | sort"}}});
  ASSERT_TRUE(WaitState(id, "completed")) << Get(id).dump() << a->output();
  const std::string log = ReadFile(a->run_dir() + "/agent/w" + std::to_string(id) + ".log");
  EXPECT_THAT(log, HasSubstr("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30\n"));
  EXPECT_THAT(log, HasSubstr("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1524M\n"));  // + the 500 MiB context allowance
  EXPECT_THAT(log, HasSubstr("CUDA_MPS_PIPE_DIRECTORY=" + a->run_dir() + "/mps/gpu0/pipe\n"));
  EXPECT_THAT(log, HasSubstr("TESSERA_SHIM_TENANT="));
  const std::string control = a->run_dir() + "/mps/gpu0/log/control.log";
  EXPECT_TRUE(WaitFor([&] { return ReadFile(control).find("\nquit\n") != std::string::npos; }))
      << ReadFile(control) << a->output();
  EXPECT_THAT(ReadFile(control), HasSubstr("start pid="));
  EXPECT_THAT(a->output(), HasSubstr("MPS control daemon of GPU 0 started"));
}

// MIG from the control plane (issue 32): h2's agent runs without --allow-mig-reconfigure, so a
// 3g.40gb workload waits (no instance exists) and h2 reports the layout it was asked for as not
// applied; h1's agent has the flag: the control plane places the workload there, the agent creates
// the instance through the fake NVML, registers its new inventory and runs the command.
TEST_F(Platform, AMigLayoutIsAppliedOnlyByAnAgentAllowedToAndTheWorkWaitsUntilThen) {
  EventStreamReader events(port_, "/v1/events?after=0", {kAuth});
  auto fixed = Agent("h2", "H100-80GB:1:mig");
  const int64_t id = Submit({{"tenant", "batch"}, {"gpus", 1}, {"qos", "Burstable"}, {"mig_profile", "3g.40gb"},
                             {"model", "H100-80GB"}, {"command", {"/bin/true"}}});
  ASSERT_TRUE(WaitFor([&] { return Get(id).dump().find("--allow-mig-reconfigure") != std::string::npos; }))
      << Get(id).dump();
  EXPECT_EQ(Get(id)["state"], "pending");
  ASSERT_TRUE(WaitFor([&] {
    return Body(Call("GET", "/v1/nodes/h2")).dump().find("layout differs, not applied") != std::string::npos;
  })) << Body(Call("GET", "/v1/nodes/h2")).dump() << fixed->output();
  auto allowed = Agent("h1", "H100-80GB:1:mig", "", {}, {"--allow-mig-reconfigure"});
  ASSERT_TRUE(WaitState(id, "completed")) << Get(id).dump() << allowed->output();
  EXPECT_THAT(allowed->output(), HasSubstr("GPU 0: MIG layout '3g.40gb@"));
  // The new instance reached the control plane as an event of h1; h2's condition was one of h2.
  EXPECT_TRUE(events.ReadUntil(R"("kind":"node.mig_layout","node":"h1")")) << events.text();
  EXPECT_THAT(events.text(), HasSubstr("mig_layout: not ok (GPU 0: layout differs, not applied"));
  EXPECT_THAT(fixed->output(), Not(HasSubstr("applied (was")));
}

// The NVML backstop end to end: a workload that re-execs itself without LD_PRELOAD escapes the shim
// and allocates 1 GiB under a 256 MiB limit; the fake NVML sees it (the fake driver records each
// process's bytes in TESSERA_FAKE_GPU_STATE) and the agent kills it: failed, violated_limit. The
// other tenant's workload on the same GPU runs on.
TEST_F(Platform, AWorkloadThatEscapesTheShimIsKilledByTheBackstopAndFailsWithViolatedLimit) {
  ASSERT_EQ(::mkdir(dir_.File("gpu-state").c_str(), 0755), 0);
  auto a = Agent("n1", "A100-40GB:1", "", {{"TESSERA_FAKE_GPU_STATE", dir_.File("gpu-state")}});
  auto holder = [&](const std::string& tenant, uint64_t bytes, bool hostile) {
    return json{{"tenant", tenant},
                {"gpus", 1},
                {"qos", "Burstable"},
                {"gpu_milli", 400},
                {"gpu_mem_mib", 256},
                {"command", {"/bin/sh", "-c",
                             std::string("sleep 60 | exec ") + (hostile ? "env -u LD_PRELOAD '" : "'") + kProbe +
                                 "' init alloc:mem:" + std::to_string(bytes) + " wait"}}};
  };
  const int64_t honest = Submit(holder("research", uint64_t{64} << 20, false));
  const int64_t hostile = Submit(holder("batch", uint64_t{1} << 30, true));
  ASSERT_TRUE(WaitState(hostile, "failed", 20000)) << Get(hostile).dump() << a->output();
  const json w = Get(hostile);
  EXPECT_EQ(w["reason"], "violated_limit") << w.dump();
  bool event = false;
  for (const json& e : w["events"]) event |= e["kind"] == "violated_limit";
  EXPECT_TRUE(event) << w.dump();
  EXPECT_TRUE(WaitFor([&] { return a->output().find("violated_limit") != std::string::npos; })) << a->output();
  EXPECT_EQ(Get(honest)["state"], "running") << Get(honest).dump();
  EXPECT_EQ(Call("DELETE", "/v1/workloads/" + std::to_string(honest)).status, 200);
}

// Issue 29 §3, the hostile tenant end to end (docs/security.md): on one shared GPU, next to an
// honest workload, three workloads (256 MiB limit each) get round the shim in three ways:
//   zeroer   allocates 200 MiB under the shim, sets its own counter in the counters file to 0
//            (the file is writable by every tenant) and allocates 200 MiB more: the shim agrees;
//   reexec   re-execs without LD_PRELOAD and allocates 1 GiB;
//   driver2  loads a second copy of libcuda from another file name (the shim hooks the first only)
//            and allocates 1 GiB through it.
// The driver sees all of it (the fake NVML follows the fake driver's allocations, copies added up,
// with a 500 MiB context per process as on an H200): each is killed within two backstop periods
// of the moment its violation was complete (the probe's `clock` line), fails with violated_limit;
// the honest workload runs on with its limit and its 64 MiB reservation unchanged.
TEST_F(Platform, HostileWorkloadsAreEachKilledWithinTwoBackstopPeriodsAndTheOthersAreUntouched) {
  constexpr int64_t kBackstopMs = 1000;  // the agent's default --backstop-ms
  ASSERT_EQ(::mkdir(dir_.File("gpu-state").c_str(), 0755), 0);
  const std::string copy = dir_.File("libcuda-copy.so");
  {
    std::ifstream in(std::string(TESSERA_FAKE_CUDA_DIR) + "/libcuda.so.1", std::ios::binary);
    std::ofstream out(copy, std::ios::binary);
    out << in.rdbuf();
    ASSERT_TRUE(in.good() && out.good()) << "cannot copy the fake driver to " << copy;
  }
  // cpu_milli 8000: four pods of 1000 milli-CPUs each fit whatever the test machine's CPU count.
  auto a = Agent("n1", "A100-40GB:1", "8000",
                 {{"TESSERA_FAKE_GPU_STATE", dir_.File("gpu-state")}, {"TESSERA_FAKE_GPU_CONTEXT_MIB", "500"}});
  auto workload = [&](const std::string& tenant, const std::string& prefix, const std::string& commands) {
    return json{{"tenant", tenant},
                {"gpus", 1},
                {"qos", "Burstable"},
                {"gpu_milli", 250},
                {"gpu_mem_mib", 256},
                {"command", {"/bin/sh", "-c", "sleep 60 | exec " + prefix + "'" + kProbe + "' pid init " + commands}}};
  };
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  const int64_t honest = Submit(workload("research", "", "alloc:mem:" + std::to_string(64 * kMiB) + " wait"));
  ASSERT_TRUE(WaitState(honest, "running")) << Get(honest).dump();
  struct Hostile {
    std::string name;
    int64_t id = 0;
    std::string expect;  // the line that shows the shim did not stop it
    long pid = 0;
    int64_t violated_ns = 0;
    int64_t dead_ns = 0;
  };
  std::vector<Hostile> hostile = {
      {"zeroer",
       Submit(workload("batch", "",
                       "alloc:mem:" + std::to_string(200 * kMiB) + " counter:self:0:0 alloc:mem:" + std::to_string(200 * kMiB) +
                           " clock wait")),
       "alloc family=mem rc=0 id=1"},
      {"reexec", Submit(workload("batch", "env -u LD_PRELOAD ", "alloc:mem:" + std::to_string(1024 * kMiB) + " clock wait")),
       "alloc family=mem rc=0 id=0"},
      {"driver2",
       Submit(workload("prod", "", "driver2:" + copy + ":" + std::to_string(1024 * kMiB) + " clock wait")),
       "driver2 rc=0"},
  };
  auto log_of = [&](int64_t id) { return ReadFile(a->run_dir() + "/agent/w" + std::to_string(id) + ".log"); };
  auto field = [](const std::string& log, const std::string& key) -> int64_t {
    const size_t at = log.find(key);
    return at == std::string::npos ? 0 : std::stoll(log.substr(at + key.size()));
  };
  auto now_ns = [] {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  };
  // Gone, or a zombie: its memory is the driver's again either way.
  auto dead = [](long pid) {
    const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    return stat.empty() || (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z');
  };
  ASSERT_TRUE(WaitFor([&] {
    const int64_t now = now_ns();
    bool all = true;
    for (Hostile& h : hostile) {
      if (h.dead_ns != 0) continue;
      const std::string log = log_of(h.id);
      if (h.violated_ns == 0) {
        h.pid = field(log, "pid value=");
        h.violated_ns = field(log, "clock ns=");
      }
      if (h.violated_ns != 0 && h.pid > 0 && dead(h.pid)) h.dead_ns = now;
      all = all && h.dead_ns != 0;
    }
    return all;
  }, 20000)) << a->output() << log_of(hostile[0].id) << log_of(hostile[1].id) << log_of(hostile[2].id);
  for (const Hostile& h : hostile) {
    SCOPED_TRACE(h.name);
    const std::string log = log_of(h.id);
    EXPECT_THAT(log, HasSubstr(h.expect)) << "the shim stopped it: the test proves nothing about the backstop";
    EXPECT_LE(h.dead_ns - h.violated_ns, 2 * kBackstopMs * 1'000'000) << a->output();
    ASSERT_TRUE(WaitState(h.id, "failed", 10000)) << Get(h.id).dump() << a->output();
    EXPECT_EQ(Get(h.id)["reason"], "violated_limit") << Get(h.id).dump();
  }
  EXPECT_THAT(log_of(hostile[0].id), HasSubstr("counter rc=0 was=" + std::to_string(200 * kMiB)));
  // The honest workload: still running, its limit and reservation as they were.
  EXPECT_EQ(Get(honest)["state"], "running") << Get(honest).dump();
  const CommandResult status = RunCommand(
      "TESSERA_RUN_DIR='" + a->run_dir() + "' '" + std::string(TESSERA_BINARY) + "' node status --json -", dir_);
  const json node = json::parse(status.out, nullptr, false);
  ASSERT_FALSE(node.is_discarded()) << status.out << status.err;
  bool seen = false;
  for (const json& g : node["gpus"])
    for (const json& t : g["tenants"])
      if (t["name"] == "w" + std::to_string(honest)) {
        seen = true;
        EXPECT_EQ(t["limit_bytes"], 256 * kMiB) << t.dump();
        EXPECT_EQ(t["used_bytes"], 64 * kMiB) << t.dump();
      }
  EXPECT_TRUE(seen) << node.dump();
  EXPECT_EQ(Call("DELETE", "/v1/workloads/" + std::to_string(honest)).status, 200);
}

TEST_F(Platform, AKilledAgentsWorkIsRequeuedOntoTheOtherNode) {
  auto a = Agent("n1");
  const int64_t first = Submit(Whole("research", "Burstable"));
  ASSERT_TRUE(WaitState(first, "running"));
  const std::string was_on = Get(first)["placement"]["node"];
  ASSERT_EQ(was_on, "n1");
  auto b = Agent("n2");
  EXPECT_EQ(a->Kill(SIGKILL), 128 + SIGKILL);
  ASSERT_TRUE(WaitFor([&] {
    json w = Get(first);
    return w.value("state", "") == "running" && w["placement"]["node"] == "n2";
  })) << Get(first).dump();
  bool requeued = false;
  const json moved = Get(first);
  for (const json& e : moved["events"]) requeued |= e["kind"] == "requeued";
  EXPECT_TRUE(requeued) << Get(first).dump();
  EXPECT_TRUE(WaitFor([&] {
    return RunCommand("TESSERA_RUN_DIR='" + b->run_dir() + "' '" + std::string(TESSERA_BINARY) +
                          "' node status --json -",
                      dir_)
               .out.find("\"w" + std::to_string(first) + "\"") != std::string::npos;
  }));
}

TEST_F(Platform, ARestartedServeAdoptsWhatRunsAndChangesNoLimit) {
  auto a = Agent("n1");
  std::vector<int64_t> ids;
  for (int milli : {250, 500}) {
    json body = {{"tenant", "batch"}, {"gpus", 1}, {"qos", "Burstable"}, {"gpu_milli", milli}, {"gpu_mem_mib", 1024}};
    ids.push_back(Submit(body));
  }
  for (int64_t id : ids) ASSERT_TRUE(WaitState(id, "running"));
  auto status = [&] {
    json s = json::parse(RunCommand("TESSERA_RUN_DIR='" + a->run_dir() + "' '" + std::string(TESSERA_BINARY) +
                                        "' node status --json -",
                                    dir_)
                             .out,
                         nullptr, false);
    json out = json::array();
    for (const json& g : s.value("gpus", json::array()))
      for (const json& t : g["tenants"]) out.push_back({t["name"], t["index"], t["limit_bytes"], t["share"]});
    return out;
  };
  ASSERT_TRUE(WaitFor([&] { return status().size() == 2; })) << status().dump();  // the agent made both slots
  const json before = status();
  const json list_before = Body(Call("GET", "/v1/workloads"));
  EXPECT_EQ(serve_->Kill(SIGKILL), 128 + SIGKILL);
  StartServe(port_);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // past the node timeout: the agent kept it alive
  const json list_after = Body(Call("GET", "/v1/workloads"));
  ASSERT_EQ(list_after["workloads"].size(), list_before["workloads"].size()) << list_after.dump();
  for (size_t i = 0; i < list_after["workloads"].size(); ++i) {
    EXPECT_EQ(list_after["workloads"][i]["id"], list_before["workloads"][i]["id"]);
    EXPECT_EQ(list_after["workloads"][i]["state"], "running");
    EXPECT_EQ(list_after["workloads"][i]["placement"], list_before["workloads"][i]["placement"]);
  }
  EXPECT_EQ(status(), before);
}

// A second agent with a live node's name (another machine: another run directory, so another
// agent id) is refused and changes nothing; the node's own agent, restarted (same run directory),
// registers again and keeps its work.
TEST_F(Platform, ASecondAgentWithANodesNameIsRefusedAndARestartedAgentKeepsItsNode) {
  auto a = Agent("n1");
  const int64_t id = Submit(Whole("research", "Burstable"));
  ASSERT_TRUE(WaitState(id, "running"));
  auto requeued = [&] {
    const json w = Get(id);
    for (const json& e : w["events"])
      if (e["kind"] == "requeued") return true;
    return false;
  };
  {
    TempDir elsewhere;
    AgentProcess second(elsewhere, "n1", port_, dir_.File("agent.token"), "A100-40GB:1");
    EXPECT_TRUE(WaitFor([&] { return second.output().find("is held by another agent") != std::string::npos; }))
        << second.output();
    EXPECT_THAT(second.output(), HasSubstr("node 'n1'"));
    EXPECT_EQ(Body(Call("GET", "/v1/nodes/n1"))["gpus"].size(), 2u);  // the first agent's inventory
    EXPECT_EQ(second.Kill(SIGTERM), 0);
  }
  EXPECT_EQ(a->Kill(SIGKILL), 128 + SIGKILL);
  AgentProcess restarted(dir_, "n1", port_, dir_.File("agent.token"), "A100-40GB:2");
  auto registrations = [&] {
    const std::string out = restarted.output();  // both runs' lines (the log is appended to)
    int n = 0;
    for (size_t at = out.find("registered node 'n1'"); at != std::string::npos;
         at = out.find("registered node 'n1'", at + 1))
      ++n;
    return n;
  };
  EXPECT_TRUE(WaitFor([&] { return registrations() == 2; })) << restarted.output();
  EXPECT_EQ(Get(id)["state"], "running");
  EXPECT_EQ(Get(id)["placement"]["node"], "n1");
  EXPECT_FALSE(requeued()) << Get(id).dump();
}

TEST_F(Platform, AnAgentWithAWrongTokenIsRefused) {
  std::ofstream(dir_.File("wrong.token")) << "tsr_not-a-token-at-all\n";
  AgentProcess agent(dir_, "n9", port_, dir_.File("wrong.token"), "A100-40GB:1");
  EXPECT_EQ(agent.WaitExit(20000), 1) << agent.output();
  EXPECT_THAT(agent.output(), HasSubstr("refused the token (HTTP 401)"));
  EXPECT_EQ(Call("GET", "/v1/nodes/n9").status, 404);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// The user token may make 30 requests a second (and 30 at once); the admin's and the agent's
// tokens have buckets of their own.
class PlatformUnderARateLimit : public Platform {
 protected:
  void SetUp() override {
    rate_ = 30;
    // 61 processes start at once on a 2-core machine: a heartbeat may well be late by 2 s, and a
    // node declared lost would requeue the runs (not what this test is about).
    node_timeout_s_ = 15;
    Platform::SetUp();
  }
};

TEST_F(PlatformUnderARateLimit, SixtyConcurrentRunsAllFinishThroughTheir429s) {
  auto a = Agent("n1", "A100-40GB:8", "60000");  // 8 GPUs x 10 shares of 100 and 60 CPUs: all 60 at once
  const std::string server = "http://127.0.0.1:" + std::to_string(port_);
  constexpr int kRuns = 60;
  std::vector<pid_t> runs;
  for (int i = 0; i < kRuns; ++i) {
    const std::string log = dir_.File("run" + std::to_string(i) + ".log");
    const pid_t pid = ::fork();
    if (pid == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::setenv("TESSERA_RUN_DIR", a->run_dir().c_str(), 1);
      ::execl(TESSERA_BINARY, "tessera", "run", "--server", server.c_str(), "--token", user_token_.c_str(),
              "--tenant", "batch", "--mem", "16MiB", "--share", "100", "--", "true", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    runs.push_back(pid);
  }
  std::vector<int> codes(kRuns, -1);
  int ended = 0;
  WaitFor(
      [&] {
        for (int i = 0; i < kRuns; ++i) {
          int status = 0;
          if (codes[i] == -1 && ::waitpid(runs[i], &status, WNOHANG) == runs[i]) {
            codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            ++ended;
          }
        }
        return ended == kRuns;
      },
      60000);
  std::string failures;
  for (int i = 0; i < kRuns; ++i) {
    if (codes[i] == -1) {
      ::kill(runs[i], SIGKILL);
      ::waitpid(runs[i], nullptr, 0);
    }
    if (codes[i] != 0)
      failures += "run " + std::to_string(i) + ": exit " + std::to_string(codes[i]) + ": " +
                  ReadFile(dir_.File("run" + std::to_string(i) + ".log")) + "\n";
  }
  EXPECT_EQ(failures, "") << a->output();
  // The limit did bite: the runs were told 429 and waited it out.
  const std::string metrics = HttpCall(port_, "GET", "/metrics", "", {kAuth}).body;
  EXPECT_THAT(metrics, HasSubstr("route=\"POST /v1/workloads\",code=\"429\""));
  // Each was submitted once: 60 workloads, all completed.
  const json list = Body(Call("GET", "/v1/workloads?limit=1000&tenant=batch"));
  int completed = 0;
  for (const json& w : list.value("workloads", json::array())) completed += w.value("state", "") == "completed";
  EXPECT_EQ(completed, kRuns) << list.dump();
}

}  // namespace
}  // namespace tessera::testing
