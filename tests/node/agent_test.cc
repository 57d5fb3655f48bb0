// node::Agent against a scripted control plane: registration, slots and live limit changes,
// commands run through the real `tessera run`, finished reports, stops, re-adoption after a
// restart, usage samples with their sequence numbers and resends, refusals.
#include "tessera/node/agent.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <dirent.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "tessera/enforce/lease_file.h"
#include "tessera/enforce/nvml.h"
#include "tessera/api/node_wire.h"
#include "tessera/enforce/segment.h"
#include "tessera/node/launcher.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::node {
namespace {

using nlohmann::json;
using tessera::testing::ReadTextFile;
using tessera::testing::TempDir;

// Answers the agent's calls as docs/api.md says the control plane does; `desired` is what GET
// desired returns, `status_for` overrides the status of a path.
class ScriptedControlPlane : public ControlPlaneLink {
 public:
  StatusOr<LinkResponse> Call(std::string_view method, std::string_view path, std::string_view body) override {
    calls.push_back(std::string(method) + " " + std::string(path));
    bodies.push_back(std::string(body));
    if (unreachable) return UnavailableError("connection refused");
    for (const auto& [p, status] : status_for)
      if (path.find(p) != std::string_view::npos)
        return LinkResponse{status, R"({"error": {"code": "x", "message": "scripted refusal"}})"};
    if (path.ends_with("/register")) {
      registered_body = std::string(body);
      return LinkResponse{200, R"({"node": "n1", "state": "ready"})"};
    }
    if (path.ends_with("/heartbeat")) {
      if (refuse_recharged && body.find("gpu_time_recharged") != std::string_view::npos) {
        ++recharged_refused;  // as a control plane before the event kind answers
        return LinkResponse{400, "{\"error\": {\"code\": \"invalid_argument\", \"message\": \"events[0].kind: "
                                 "'gpu_time_recharged' is not an agent event (violated_limit, mps_unavailable, "
                                 "no_tenant_uid)\"}}"};
      }
      if (refuse_local_slots && body.find("\"local_slots\"") != std::string_view::npos) {
        ++local_slots_refused;  // as a control plane before the field answers (strict decoding)
        return LinkResponse{400, "{\"error\": {\"code\": \"invalid_argument\", \"message\": \"local_slots: unknown "
                                 "field (known: finished, events, conditions)\"}}"};
      }
      if (!body.empty()) {
        const json j = json::parse(body);
        if (j.contains("finished"))
          for (const json& f : j["finished"]) {
            finished.push_back({f["id"], f["exit_code"]});
            reasons[f["id"].get<int64_t>()] = f.value("reason", "");
          }
        if (j.contains("events"))
          for (const json& e : j["events"]) events.push_back(e);
        if (j.contains("local_slots")) local_slots.push_back(j["local_slots"]);
      }
      if (!versioned) return LinkResponse{200, R"({"node": "n1", "state": "ready", "ignored": []})"};
      return LinkResponse{200, json{{"node", "n1"}, {"state", "ready"}, {"ignored", json::array()},
                                    {"desired_version", api::DesiredVersion(DesiredBody())}}.dump()};
    }
    if (path.ends_with("/desired")) return LinkResponse{200, DesiredBody()};
    if (path.ends_with("/usage")) {
      const json j = json::parse(body);
      for (const json& s : j["samples"]) samples.push_back(s);
      return LinkResponse{200, R"({"counted": 1, "duplicates": 0, "rejected": []})"};
    }
    return LinkResponse{404, "{}"};
  }
  std::string DesiredBody() const {
    json state = {{"node", "n1"}, {"workloads", desired}};
    if (!desired_gpus.empty()) state["gpus"] = desired_gpus;
    return state.dump();
  }
  int Count(const std::string& suffix) const {
    int n = 0;
    for (const std::string& c : calls) n += c.ends_with(suffix);
    return n;
  }

  json desired = json::array();
  json desired_gpus = json::array();  // MIG layouts ("gpus"), left out when empty
  std::map<std::string, int> status_for;
  bool unreachable = false;
  // The heartbeat's answer names the desired state's version (issue 32); false: an older
  // control plane that names none.
  bool versioned = false;
  std::vector<std::string> calls, bodies;
  std::string registered_body;
  std::vector<std::pair<int64_t, int>> finished;
  std::map<int64_t, std::string> reasons;  // of the finished reports
  std::vector<json> events;
  std::vector<json> samples;
  std::vector<json> local_slots;  // each heartbeat's "local_slots", where it had one
  bool refuse_local_slots = false;  // answer a heartbeat with "local_slots" 400, as an older version
  int local_slots_refused = 0;
  bool refuse_recharged = false;  // answer a heartbeat with a gpu_time_recharged event 400 (older version)
  int recharged_refused = 0;
};

json Workload(int64_t id, int gpu, int64_t mem_mib, int milli, std::vector<std::string> command = {}) {
  json w = {{"id", id},
            {"tenant", "vision"},
            {"mode", "fraction(" + std::to_string(milli) + "," + std::to_string(mem_mib) + "MiB)"},
            {"gpu_milli", milli},
            {"gpu_mem_mib", mem_mib},
            {"priority", 0},
            {"pods", json::array({{{"gpus", {gpu}}}})}};
  if (!command.empty()) w["command"] = command;
  return w;
}

Inventory TwoGpus() {
  Inventory inv;
  inv.cpu_milli = 8000;
  inv.memory_mib = 32768;
  for (int g = 0; g < 2; ++g) inv.gpus.push_back({g, "GPU-fake-" + std::to_string(g), "A100-40GB", 40960, false});
  return inv;
}

class AgentTest : public ::testing::Test {
 protected:
  AgentOptions Options() {
    AgentOptions o;
    o.name = "n1";
    o.run_dir = dir.File("node");
    o.supervisor = TESSERA_CLI;
    o.nvml_library = "/nonexistent/libnvidia-ml.so.1";  // GPUs pinned by index
    o.usage_interval_s = 1;
    o.stop_grace_ms = 2000;
    return o;
  }
  const TenantStatus* Slot(const std::string& name) {
    status = NodeDir(dir.File("node")).ReadStatus();
    if (!status.ok()) return nullptr;
    for (const GpuStatus& g : status->gpus)
      for (const TenantStatus& t : g.tenants)
        if (t.name == name) return &t;
    return nullptr;
  }
  // Rounds (1 s of agent time apart) until `done` or 20 s of wall time.
  template <typename Done>
  bool RoundsUntil(Agent& agent, Done done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      now_ms += 1000;
      Status st = agent.Round(now_ms);
      if (!st.ok()) ADD_FAILURE() << st.message();
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

  TempDir dir;
  ScriptedControlPlane cp;
  StatusOr<NodeStatus> status = NodeStatus{};
  int64_t now_ms = 1'800'000'000'000;
};

TEST_F(AgentTest, RegistersTheInventoryAndAgainWhenTheControlPlaneForgetsTheNode) {
  Agent agent(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  ASSERT_TRUE(agent.Round(now_ms).ok());
  json inv = json::parse(cp.registered_body);
  EXPECT_EQ(inv["gpus"].size(), 2u);
  EXPECT_EQ(inv["gpus"][1]["uuid"], "GPU-fake-1");
  EXPECT_EQ(inv["gpus"][0]["model"], "A100-40GB");
  ASSERT_TRUE(agent.Round(now_ms + 1000).ok());
  EXPECT_EQ(cp.Count("/register"), 1);
  cp.status_for["/heartbeat"] = 404;  // e.g. the node was declared lost
  ASSERT_TRUE(agent.Round(now_ms + 2000).ok());
  cp.status_for.clear();
  ASSERT_TRUE(agent.Round(now_ms + 3000).ok());
  EXPECT_EQ(cp.Count("/register"), 2);
  EXPECT_EQ(agent.stats().registrations, 2);
}

// Issue 34: a tenant that another program joined in the node directory (a DRA claim here) is in
// the next heartbeat, once; the agent's own slots never are; its leaving is sent once too; a
// registration sends the list again; a list the control plane holds is resent only after
// kLocalSlotsResendMs.
TEST_F(AgentTest, ATenantJoinedByAnotherProgramIsReportedOnceAndSoIsItsLeaving) {
  AgentOptions o = Options();
  o.usage_interval_s = 3600;
  Agent agent(o, TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({Workload(11, 0, 4096, 300)});
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  ASSERT_EQ(agent.held().count(11), 1u);
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());  // w11 joined: the agent's own, not sent
  EXPECT_TRUE(cp.local_slots.empty());  // none, and the control plane holds none after a registration

  const NodeDir node(dir.File("node"));
  const TenantRequest claim{.name = "k8s-dra/ns/c", .gpus = {0}, .mem_bytes = 10ull << 30, .share = 600};
  ASSERT_TRUE(node.Join(claim, ::getpid()).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  ASSERT_EQ(cp.local_slots.size(), 1u);
  EXPECT_EQ(cp.local_slots[0], json::parse(R"([{"gpus": [0], "mem_mib": 10240, "milli": 600, "tenant": "k8s-dra/ns/c"}])"));

  now_ms += kLocalSlotsResendMs;  // held for a while: sent again for a control plane that restarted
  ASSERT_TRUE(agent.Round(now_ms).ok());
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  ASSERT_EQ(cp.local_slots.size(), 2u);
  EXPECT_EQ(cp.local_slots[1], cp.local_slots[0]);

  ASSERT_TRUE(node.LeaveTenant("k8s-dra/ns/c", ::getpid()).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  ASSERT_EQ(cp.local_slots.size(), 3u);
  EXPECT_EQ(cp.local_slots[2], json::array());

  ASSERT_TRUE(node.Join(claim, ::getpid()).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  ASSERT_EQ(cp.local_slots.size(), 4u);
  cp.status_for["/heartbeat"] = 404;  // the node was lost: it registers again and sends the list
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  cp.status_for.clear();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  ASSERT_EQ(cp.local_slots.size(), 5u);
  EXPECT_EQ(cp.local_slots[4], cp.local_slots[0]);
  EXPECT_EQ(agent.stats().local_slot_reports, 5);
}

// A tenant another program joined (a DRA claim) on a GPU the agent holds no work on: the agent
// drives that GPU's lease board too, so the claim's compute share is enforced (on a Kubernetes
// node no other process runs an arbiter; without one the shim launches ungated).
TEST_F(AgentTest, TheBoardOfAGpuOnlyAnotherProgramsTenantIsOnIsDriven) {
  AgentOptions o = Options();
  o.usage_interval_s = 3600;
  Agent agent(o, TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  const NodeDir node(dir.File("node"));
  ASSERT_TRUE(node.Join(TenantRequest{.name = "k8s-dra/ns/c", .gpus = {1}, .mem_bytes = 1ull << 30, .share = 300},
                        ::getpid())
                  .ok());
  bool driven = false;
  for (int i = 0; i < 100 && !driven; ++i) {
    ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
    StatusOr<NodeStatus> st = node.ReadStatus();
    ASSERT_TRUE(st.ok()) << st.status().message();
    for (const GpuStatus& g : st->gpus) driven |= g.gpu == 1 && g.arbiter_alive;
    if (!driven) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(driven) << "no arbiter drives GPU 1's board";
}

// With --meter-local-slots (the Kubernetes DaemonSet) the node directory's other tenants are
// metered as the node arbiter's UsageMeter meters them, billed to their account (the namespace)
// at their share in milli, and sent with the agent's own samples; its own workloads are not
// metered twice. Without the flag (a Slurm node, whose node arbiter meters them) nothing is sent.
TEST_F(AgentTest, WithMeterLocalSlotsAClaimIsMeteredToItsNamespace) {
  for (const bool meter : {false, true}) {
    SCOPED_TRACE(meter ? "--meter-local-slots" : "without the flag");
    TempDir run;
    ScriptedControlPlane link;
    AgentOptions o = Options();
    o.run_dir = run.File("node");
    o.usage_interval_s = 10;
    o.meter_local_slots = meter;
    Agent agent(o, TwoGpus(), &link);
    ASSERT_TRUE(agent.Start().ok());
    const NodeDir node(run.File("node"));
    ASSERT_TRUE(node.Join(TenantRequest{.name = "team-a/c/gpu/gpu-0", .gpus = {0}, .mem_bytes = 1ull << 30,
                                        .share = 300, .account = "team-a", .workload = "team-a/c"},
                          ::getpid())
                    .ok());
    const int64_t start_ms = now_ms;
    for (int i = 0; i < 25; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
    std::vector<json> claims;
    for (const json& s : link.samples)
      if (s.value("tenant", "") == "team-a") claims.push_back(s);
    if (!meter) {
      EXPECT_TRUE(claims.empty());
      continue;
    }
    ASSERT_GE(claims.size(), 2u) << link.samples.size() << " samples";
    int64_t span = 0;
    for (const json& s : claims) {
      EXPECT_EQ(s["workload"], "team-a/c");
      EXPECT_EQ(s["gpu"], "0");
      const int64_t seconds = s["end"].get<int64_t>() - s["start"].get<int64_t>();
      EXPECT_EQ(s["gpu_milli_s_allocated"], 300 * seconds) << s.dump();
      span += seconds;
    }
    EXPECT_GE(span, 20);
    EXPECT_LE(span, (now_ms - start_ms) / 1000);
  }
}

// An agent upgraded before its control plane: the older version refuses a heartbeat with
// "local_slots" (400 naming it). The heartbeat goes again at once without the list, so the node
// stays alive and its ended workloads are reported; the list is tried again kLocalSlotsRetryMs later.
TEST_F(AgentTest, AControlPlaneThatRefusesLocalSlotsStillGetsEveryHeartbeatAndItsReports) {
  AgentOptions o = Options();
  o.usage_interval_s = 3600;
  Agent agent(o, TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.refuse_local_slots = true;
  ASSERT_TRUE(NodeDir(dir.File("node"))
                  .Join(TenantRequest{.name = "slurm/chem.7", .gpus = {1}, .mem_bytes = 1ull << 30, .share = 250},
                        ::getpid())
                  .ok());
  cp.desired = json::array({Workload(12, 0, 1024, 300, {"/bin/true"})});
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !cp.finished.empty(); }));
  EXPECT_THAT(cp.finished, ::testing::ElementsAre(std::pair<int64_t, int>{12, 0}));
  EXPECT_EQ(cp.local_slots_refused, 1);  // once, then not again for kLocalSlotsRetryMs
  EXPECT_TRUE(cp.local_slots.empty());
  bool said = false;
  for (const std::string& line : agent.TakeLog()) said |= line.find("refused the heartbeat's local_slots") != std::string::npos;
  EXPECT_TRUE(said);

  cp.refuse_local_slots = false;  // upgraded meanwhile
  ASSERT_TRUE(agent.Round(now_ms += kLocalSlotsRetryMs).ok());
  ASSERT_EQ(cp.local_slots.size(), 1u);
  EXPECT_EQ(cp.local_slots[0][0]["tenant"], "slurm/chem.7");
}

// Issue 32: while the heartbeat's answer names the version of the desired state the agent holds,
// the agent acts on its copy and does not GET it again; a new version is fetched and acted on
// in the round whose heartbeat named it; after kDesiredRefetchMs it is fetched anyway. From a
// control plane that names no version it is fetched every round, as before.
TEST_F(AgentTest, TheAgentFetchesTheDesiredStateOnlyWhenTheHeartbeatNamesANewVersion) {
  AgentOptions o = Options();
  o.usage_interval_s = 3600;
  Agent agent(o, TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.versioned = true;
  for (int r = 0; r < 5; ++r) ASSERT_TRUE(agent.Round(now_ms + 1000 * r).ok());
  EXPECT_EQ(cp.Count("/heartbeat"), 5);
  EXPECT_EQ(cp.Count("/desired"), 1);
  EXPECT_EQ(agent.stats().desired_fetches, 1);
  EXPECT_TRUE(agent.held().empty());

  cp.desired = json::array({Workload(11, 0, 4096, 500)});  // placed: the next heartbeat names it
  ASSERT_TRUE(agent.Round(now_ms + 5000).ok());
  EXPECT_EQ(cp.Count("/desired"), 2);
  ASSERT_EQ(agent.held().count(11), 1u);
  ASSERT_NE(Slot("w11"), nullptr);
  EXPECT_EQ(Slot("w11")->limit_bytes, 4096ull << 20);
  for (int r = 6; r < 10; ++r) ASSERT_TRUE(agent.Round(now_ms + 1000 * r).ok());
  EXPECT_EQ(cp.Count("/desired"), 2);
  EXPECT_EQ(agent.held().count(11), 1u);  // acted on from the held copy: still held, not stopped

  ASSERT_TRUE(agent.Round(now_ms + 5000 + kDesiredRefetchMs).ok());  // the safety net
  EXPECT_EQ(cp.Count("/desired"), 3);

  cp.versioned = false;  // an older control plane
  ASSERT_TRUE(agent.Round(now_ms + 6000 + kDesiredRefetchMs).ok());
  ASSERT_TRUE(agent.Round(now_ms + 7000 + kDesiredRefetchMs).ok());
  EXPECT_EQ(cp.Count("/desired"), 5);
}

// The register body carries the agent's instance id; a restarted agent (same run directory)
// sends the same one, an agent with another run directory (another machine) another.
TEST_F(AgentTest, ARestartedAgentRegistersWithTheSameAgentIdAndAnotherAgentWithAnother) {
  std::string first;
  {
    Agent agent(Options(), TwoGpus(), &cp);
    ASSERT_TRUE(agent.Start().ok());
    ASSERT_TRUE(agent.Round(now_ms).ok());
    first = json::parse(cp.registered_body).value("agent_id", std::string());
  }
  EXPECT_THAT(first, ::testing::MatchesRegex("[0-9a-f]{32}"));
  {
    Agent restarted(Options(), TwoGpus(), &cp);
    ASSERT_TRUE(restarted.Start().ok());
    ASSERT_TRUE(restarted.Round(now_ms + 1000).ok());
    EXPECT_EQ(json::parse(cp.registered_body).value("agent_id", std::string()), first);
  }
  AgentOptions other = Options();
  other.run_dir = dir.File("other-node");
  Agent second(other, TwoGpus(), &cp);
  ASSERT_TRUE(second.Start().ok());
  ASSERT_TRUE(second.Round(now_ms + 2000).ok());
  const std::string second_id = json::parse(cp.registered_body).value("agent_id", std::string());
  EXPECT_THAT(second_id, ::testing::MatchesRegex("[0-9a-f]{32}"));
  EXPECT_NE(second_id, first);
  // A 409 (another agent holds the name) is retried with the control plane's message.
  AgentOptions third = Options();
  third.run_dir = dir.File("third-node");
  Agent refused(third, TwoGpus(), &cp);
  ASSERT_TRUE(refused.Start().ok());
  cp.status_for["/register"] = 409;
  EXPECT_EQ(refused.Round(now_ms + 3000).code(), StatusCode::kUnavailable);
  EXPECT_FALSE(refused.registered());
}

TEST_F(AgentTest, HoldsASlotWithTheLimitAndChangesItLiveAndLeavesIt) {
  Agent agent(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({Workload(7, 1, 2048, 500)});
  ASSERT_TRUE(agent.Round(now_ms).ok());
  const TenantStatus* t = Slot("w7");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->limit_bytes, uint64_t{2048} << 20);
  EXPECT_EQ(t->share, 500);
  const int index = t->index;
  // A PATCHed limit and share: the same slot, the new values in the policy page.
  cp.desired = json::array({Workload(7, 1, 1024, 300)});
  ASSERT_TRUE(agent.Round(now_ms + 1000).ok());
  t = Slot("w7");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->index, index);
  EXPECT_EQ(t->limit_bytes, uint64_t{1024} << 20);
  EXPECT_EQ(t->share, 300);
  EXPECT_EQ(agent.stats().limit_changes, 1);
  // No longer desired (cancelled): the slot goes, nothing is reported as finished.
  cp.desired = json::array();
  ASSERT_TRUE(agent.Round(now_ms + 2000).ok());
  ASSERT_TRUE(agent.Round(now_ms + 3000).ok());
  EXPECT_EQ(Slot("w7"), nullptr);
  EXPECT_TRUE(agent.held().empty());
  EXPECT_TRUE(cp.finished.empty());
}

// The agent's arbiter threads wake for a doorbell, the arbiter's lease ends, the node's reconcile
// (one of them, every 100 ms) and its sync (1 s), else every 200 ms: an idle GPU's arbiter steps
// (its heartbeat, which tenants hold stale after 1 s) about 5 times a second, not 20 (a wait of
// 50 ms: 8 GPUs with 64 idle tenants cost the agent 160 futex waits a second).
TEST_F(AgentTest, AnIdleGpusArbiterStepsAboutFiveTimesASecond) {
  Agent agent(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({Workload(7, 0, 512, 500), Workload(8, 1, 512, 500)});
  ASSERT_TRUE(agent.Round(now_ms).ok());
  StatusOr<enforce::LeaseFile> leases = enforce::LeaseFile::OpenNodeLines(NodeDir(dir.File("node")).paths().leases);
  ASSERT_TRUE(leases.ok()) << leases.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // both arbiters run
  uint64_t last[2] = {leases->board(0).arbiter.heartbeat_ns.load(), leases->board(1).arbiter.heartbeat_ns.load()};
  ASSERT_TRUE(last[0] != 0 && last[1] != 0);
  int steps = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < end) {
    for (int g = 0; g < 2; ++g) {
      const uint64_t beat = leases->board(g).arbiter.heartbeat_ns.load();
      steps += beat != last[g];
      last[g] = beat;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  // One GPU's duty reconciles the node every 100 ms (10 steps), the other steps every 200 ms (5),
  // and each syncs once: about 17 (the 50 ms wait: about 40).
  EXPECT_GE(steps, 8) << steps;
  EXPECT_LE(steps, 26) << steps;
  cp.desired = json::array();
  EXPECT_TRUE(RoundsUntil(agent, [&] { return agent.held().empty(); }));
}

// A workload whose supervisor cannot be started is not held, and its slot is left again: the
// registry has no entry of it after any number of rounds. Before, the agent's pid stayed in the
// entry (once more at every round), keeping its index and limit while the agent lived.
TEST_F(AgentTest, AWorkloadThatCannotStartLeavesItsSlotEachRound) {
  AgentOptions o = Options();
  o.supervisor = "/nonexistent/tessera";
  Agent agent(o, TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({Workload(9, 0, 512, 1000, {"/bin/true"})});
  for (int i = 0; i < 3; ++i) (void)agent.Round(now_ms += 1000);  // each round: "cannot start"
  EXPECT_TRUE(agent.held().empty());
  StatusOr<std::vector<TenantEntry>> entries = NodeDir(dir.File("node")).RegistryEntries();
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  for (const TenantEntry& e : *entries) EXPECT_NE(e.name, "w9") << "pids: " << e.pids.size();
}

TEST_F(AgentTest, ACommandRunsUnderTessera_RunAndItsExitCodeIsReportedOnce) {
  Agent agent(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({Workload(9, 0, 512, 1000, {"/bin/sh", "-c", "echo \"limit=$TESSERA_SHIM_TENANT\"; exit 3"})});
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !cp.finished.empty(); }));
  EXPECT_THAT(cp.finished, ::testing::ElementsAre(std::pair<int64_t, int>{9, 3}));
  std::ifstream log(dir.File("node/agent/w9.log"));
  std::string line;
  std::getline(log, line);
  EXPECT_THAT(line, ::testing::StartsWith("limit="));  // it ran under the shim's variables
  cp.desired = json::array();  // the control plane took the report
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(cp.finished.size(), 1u);
  EXPECT_EQ(Slot("w9"), nullptr);
}

// A pod of two GPUs with a command: one slot on both GPUs (the limit on each), the command runs
// under `tessera run --gpu 0,1` seeing both, ends normally (not 126 as before), and its usage is
// sampled per GPU (a sample for GPU "0" and one for GPU "1", each with the pod's share).
TEST_F(AgentTest, APodOfTwoGpusRunsItsCommandOnBothAndIsMeteredPerGpu) {
  Agent agent(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  json pod = Workload(21, 0, 512, 1000, {"/bin/sh", "-c", "echo \"gpus=$TESSERA_SHIM_GPUS cvd=$CUDA_VISIBLE_DEVICES\"; sleep 0.5"});
  pod["pods"] = json::array({{{"gpus", {1, 0}}}});
  cp.desired = json::array({pod});
  ASSERT_TRUE(agent.Round(now_ms).ok());
  StatusOr<NodeStatus> st = NodeDir(dir.File("node")).ReadStatus();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st->gpus.size(), 2u);
  for (const GpuStatus& g : st->gpus) {
    ASSERT_EQ(g.tenants.size(), 1u) << "GPU " << g.gpu;
    EXPECT_EQ(g.tenants[0].name, "w21");
    EXPECT_EQ(g.tenants[0].limit_bytes, uint64_t{512} << 20);
  }
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !cp.finished.empty(); }));
  EXPECT_THAT(cp.finished, ::testing::ElementsAre(std::pair<int64_t, int>{21, 0}));
  std::ifstream log(dir.File("node/agent/w21.log"));
  std::string line;
  std::getline(log, line);
  EXPECT_EQ(line, "gpus=0,1 cvd=0,1");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  std::set<std::string> gpus;
  for (const json& sample : cp.samples) {
    ASSERT_EQ(sample["workload"], "21");
    gpus.insert(sample["gpu"].get<std::string>());
    EXPECT_EQ(sample["gpu_milli_s_allocated"].get<int64_t>() % 1000, 0) << sample.dump();
  }
  EXPECT_EQ(gpus, (std::set<std::string>{"0", "1"}));
  cp.desired = json::array();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(Slot("w21"), nullptr);
}

TEST_F(AgentTest, ARestartedAgentAdoptsTheRunningWorkloadWithItsSlotAndStopsItWhenNoLongerDesired) {
  cp.desired = json::array({Workload(11, 0, 256, 400, {"/bin/sleep", "60"})});
  long pid = 0;
  int index = -1;
  {
    Agent first(Options(), TwoGpus(), &cp);
    ASSERT_TRUE(first.Start().ok());
    ASSERT_TRUE(first.Round(now_ms).ok());
    ASSERT_EQ(first.held().size(), 1u);
    pid = first.held().at(11).pid;
    ASSERT_GT(pid, 0);
    ASSERT_TRUE(RoundsUntil(first, [&] {
      const TenantStatus* t = Slot("w11");
      return t != nullptr && t->pids.size() >= 2;  // the agent and its `tessera run`
    }));
    index = Slot("w11")->index;
  }  // the agent is gone; its workload runs on
  ASSERT_EQ(::kill(static_cast<pid_t>(pid), 0), 0);
  Agent second(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(second.Start().ok());
  ASSERT_EQ(second.held().size(), 1u);
  EXPECT_EQ(second.held().at(11).pid, pid);
  ASSERT_TRUE(second.Round(now_ms += 1000).ok());
  const TenantStatus* t = Slot("w11");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->index, index);
  EXPECT_EQ(t->limit_bytes, uint64_t{256} << 20);
  cp.desired = json::array();  // preempted: stop it
  ASSERT_TRUE(RoundsUntil(second, [&] { return second.held().empty(); }));
  EXPECT_NE(::kill(static_cast<pid_t>(pid), 0), 0);
  // The slot goes when the segment's reconcile sees its processes gone: the round that reaps the
  // workload or a later one (under load, `tessera run` can still be exiting in the first).
  EXPECT_TRUE(RoundsUntil(second, [&] { return Slot("w11") == nullptr; })) << "the slot was never released";
  EXPECT_TRUE(cp.finished.empty());
}

// A usage sample moves every held workload's seq and span: they go to one file (usage_cursors.json,
// one atomic write), not to each w<id>.json (64 workloads: 64 fsyncs every usage interval). A
// restarted agent continues from that file.
TEST_F(AgentTest, AUsageSampleWritesOneCursorsFileNotEachWorkloadsFile) {
  Agent agent(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({Workload(5, 0, 1024, 250), Workload(6, 1, 1024, 250)});
  ASSERT_TRUE(agent.Round(now_ms).ok());
  const std::string w5 = ReadTextFile(dir.File("node/agent/w5.json"));
  ASSERT_TRUE(agent.Round(now_ms + 2000).ok());
  ASSERT_EQ(cp.samples.size(), 2u);
  EXPECT_EQ(ReadTextFile(dir.File("node/agent/w5.json")), w5);  // not rewritten by the sample
  const json cursors = json::parse(ReadTextFile(dir.File("node/agent/usage_cursors.json")));
  EXPECT_EQ(cursors["5"]["next_seq"], now_ms + 1);
  EXPECT_EQ(cursors["6"]["usage_from_s"], now_ms / 1000 + 2);
  Agent again(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(again.Start().ok());
  EXPECT_EQ(again.held().at(5).next_seq, now_ms + 1);
  EXPECT_EQ(again.held().at(6).usage_from_s, now_ms / 1000 + 2);
}

TEST_F(AgentTest, UsageSamplesCarryIncreasingSeqAndAreResentUnchangedUntilAcknowledged) {
  Agent agent(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({Workload(5, 0, 1024, 250)});
  ASSERT_TRUE(agent.Round(now_ms).ok());
  ASSERT_TRUE(agent.Round(now_ms + 2000).ok());
  ASSERT_EQ(cp.samples.size(), 1u);
  EXPECT_EQ(cp.samples[0]["seq"], now_ms);  // the first seq is the placement's time in ms
  EXPECT_EQ(cp.samples[0]["workload"], "5");
  EXPECT_EQ(cp.samples[0]["partition"], "share");
  EXPECT_EQ(cp.samples[0]["end"].get<int64_t>() - cp.samples[0]["start"].get<int64_t>(), 2);
  EXPECT_EQ(cp.samples[0]["gpu_milli_s_allocated"], 500);  // 250 milli x 2 s
  cp.status_for["/usage"] = 503;
  ASSERT_FALSE(agent.Round(now_ms + 4000).ok());  // UNAVAILABLE: kept for the next round
  const json kept = json::parse(cp.bodies.back())["samples"][0];
  cp.status_for.clear();
  cp.samples.clear();
  ASSERT_TRUE(agent.Round(now_ms + 4500).ok());
  ASSERT_GE(cp.samples.size(), 1u);
  EXPECT_EQ(cp.samples[0], kept);  // the same seq and values
  EXPECT_EQ(kept["seq"], now_ms + 1);
  // A restarted agent continues the seq where the first left it.
  const int64_t last_end = cp.samples.back()["end"];
  Agent again(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(again.Start().ok());
  cp.samples.clear();
  ASSERT_TRUE(again.Round(now_ms + 7000).ok());
  ASSERT_EQ(cp.samples.size(), 1u);
  EXPECT_EQ(cp.samples[0]["seq"], kept["seq"].get<int64_t>() + 1);
  EXPECT_EQ(cp.samples[0]["start"], last_end);
}

// Work that starts and ends within one second still gets its (final) sample: 1 s, billed.
TEST_F(AgentTest, AWorkloadShorterThanASecondGetsAOneSecondFinalSample) {
  Agent agent(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  const int64_t t0 = now_ms - now_ms % 1000;  // at the start of a second
  cp.desired = json::array({Workload(12, 1, 1024, 400)});
  ASSERT_TRUE(agent.Round(t0 + 100).ok());
  ASSERT_EQ(agent.held().size(), 1u);
  cp.desired = json::array();  // stopped 0.5 s later
  for (int i = 0; i < 100 && !agent.held().empty(); ++i) {
    ASSERT_TRUE(agent.Round(t0 + 600).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(agent.held().empty());
  std::vector<json> mine;
  for (const json& s : cp.samples)
    if (s["workload"] == "12") mine.push_back(s);
  ASSERT_EQ(mine.size(), 1u) << json(mine).dump();
  EXPECT_EQ(mine[0]["start"], t0 / 1000);
  EXPECT_EQ(mine[0]["end"], t0 / 1000 + 1);
  EXPECT_EQ(mine[0]["gpu_milli_s_allocated"], 400);

  // Placed here again in the same second (after a preemption): its usage starts where the last
  // sample ended and its seq is higher, so the control plane takes both (same source).
  cp.desired = json::array({Workload(12, 1, 1024, 400)});
  ASSERT_TRUE(agent.Round(t0 + 800).ok());
  ASSERT_EQ(agent.held().size(), 1u);
  cp.desired = json::array();
  for (int i = 0; i < 100 && !agent.held().empty(); ++i) {
    ASSERT_TRUE(agent.Round(t0 + 900).ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  mine.clear();
  for (const json& s : cp.samples)
    if (s["workload"] == "12") mine.push_back(s);
  ASSERT_EQ(mine.size(), 2u) << json(mine).dump();
  EXPECT_EQ(mine[1]["start"], mine[0]["end"]);
  EXPECT_GT(mine[1]["end"].get<int64_t>(), mine[1]["start"].get<int64_t>());
  EXPECT_GT(mine[1]["seq"].get<int64_t>(), mine[0]["seq"].get<int64_t>());
}

TEST_F(AgentTest, ARefusedTokenStopsTheAgentAndAnUnreachableServerIsRetried) {
  Agent agent(Options(), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.unreachable = true;
  EXPECT_EQ(agent.Round(now_ms).code(), StatusCode::kUnavailable);
  cp.unreachable = false;
  cp.status_for["/register"] = 401;
  Status st = agent.Round(now_ms + 1000);
  EXPECT_EQ(st.code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("refused the token"));
  cp.status_for["/register"] = 400;
  EXPECT_EQ(agent.Round(now_ms + 2000).code(), StatusCode::kInvalidArgument);
}

TEST_F(AgentTest, ACorruptWorkloadFileIsAnErrorNamingIt) {
  ASSERT_EQ(::mkdir(dir.File("node").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(dir.File("node/agent").c_str(), 0755), 0);
  std::ofstream(dir.File("node/agent/w3.json")) << "{\"id\": 3, \"tenant\": 7}";
  Agent agent(Options(), TwoGpus(), &cp);
  Status st = agent.Start();
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("w3.json"));
}

// Tenant uids (docs/security.md, "Separate uids"): the workloads of two tenants run under uids of
// their own from the range; a process of nlp cannot open vision's counters file (EACCES), opens
// its own, and its own limit holds to the byte. A restarted agent adopts the running workload with
// its uid and gives nlp the uid it had, a new tenant the next one (tenant_uids.json).
TEST_F(AgentTest, EachTenantsWorkloadsRunUnderAUidOfItsOwnThatCannotOpenAnotherTenantsCountersAndARestartKeepsIt) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run workloads under other uids (CI runs as root)";
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);  // mkdtemp's 0700 would keep the tenants out
  constexpr long kFirst = 2000000000;
  constexpr uint64_t kLimit = uint64_t{256} << 20;
  AgentOptions o = Options();
  o.tenant_uids = {.enabled = true, .first = kFirst, .last = kFirst + 9, .fixed = {}};
  std::optional<Agent> agent(std::in_place, o, TwoGpus(), &cp);
  ASSERT_TRUE(agent->Start().ok());
  cp.desired = json::array({Workload(1, 0, 256, 500, {"/bin/sh", "-c", "id -u; echo \"home=$HOME\"; exec sleep 60"})});
  ASSERT_TRUE(agent->Round(now_ms).ok());
  const TenantStatus* vision = Slot("w1");
  ASSERT_NE(vision, nullptr);
  const int vision_index = vision->index;
  json nlp = Workload(2, 0, 256, 500,
                      {"/bin/sh", "-c",
                       "id -u; exec " + std::string(TESSERA_SHIM_PROBE) + " init alloc:mem:" + std::to_string(kLimit) +
                           " alloc:mem:1 counter:" + std::to_string(vision_index) + ":0:" + std::to_string(kLimit) +
                           " counter:self:0:" + std::to_string(kLimit)});
  nlp["tenant"] = "nlp";
  cp.desired.push_back(nlp);
  ASSERT_TRUE(RoundsUntil(*agent, [&] { return !cp.finished.empty(); }));
  EXPECT_THAT(cp.finished, ::testing::ElementsAre(std::pair<int64_t, int>{2, 0}));
  EXPECT_EQ(agent->held().at(1).uid, kFirst);
  const std::string log = ReadTextFile(dir.File("node/agent/w2.log"));
  EXPECT_THAT(log, ::testing::StartsWith(std::to_string(kFirst + 1) + "\n"));
  EXPECT_THAT(log, ::testing::HasSubstr("alloc family=mem rc=0"));
  EXPECT_THAT(log, ::testing::HasSubstr("alloc family=mem rc=2")) << "one byte over its limit";
  EXPECT_THAT(log, ::testing::HasSubstr("counter rc=1 errno=" + std::to_string(EACCES) + "\n"))
      << "vision's counters file must not open for nlp";
  EXPECT_THAT(log, ::testing::HasSubstr("counter rc=0 was=" + std::to_string(kLimit))) << "its own file opens";
  EXPECT_THAT(ReadTextFile(dir.File("node/agent/w1.log")),
              ::testing::StartsWith(std::to_string(kFirst) + "\nhome=" + dir.File("node/agent/home/") +
                                    std::to_string(kFirst) + "\n"));
  struct stat st {};
  ASSERT_EQ(::stat(dir.File("node/counters/" + std::to_string(vision_index)).c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, static_cast<uid_t>(kFirst));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_NE(Slot("w1"), nullptr);
  EXPECT_EQ(Slot("w1")->used_bytes, 0u) << "nlp's write did not reach vision's counter";
  const long vision_pid = agent->held().at(1).pid;

  agent.reset();  // the agent stops; vision's workload runs on
  ASSERT_EQ(::kill(static_cast<pid_t>(vision_pid), 0), 0);
  agent.emplace(o, TwoGpus(), &cp);
  ASSERT_TRUE(agent->Start().ok());
  ASSERT_EQ(agent->held().count(1), 1u);
  EXPECT_EQ(agent->held().at(1).uid, kFirst);
  json audio = Workload(4, 1, 128, 200);
  audio["tenant"] = "audio";
  json nlp_again = Workload(3, 1, 128, 200);
  nlp_again["tenant"] = "nlp";
  cp.desired = json::array({Workload(1, 0, 256, 500, {"/bin/sh", "-c", "exec sleep 60"}), audio, nlp_again});
  ASSERT_TRUE(agent->Round(now_ms += 1000).ok());
  ASSERT_EQ(agent->held().count(3), 1u);
  ASSERT_EQ(agent->held().count(4), 1u);
  EXPECT_EQ(agent->held().at(3).uid, kFirst + 1) << "nlp keeps its uid across the restart";
  EXPECT_EQ(agent->held().at(4).uid, kFirst + 2);
  EXPECT_EQ(json::parse(ReadTextFile(dir.File("node/agent/tenant_uids.json"))),
            (json{{"audio", kFirst + 2}, {"nlp", kFirst + 1}, {"vision", kFirst}}));
  cp.desired = json::array();
  EXPECT_TRUE(RoundsUntil(*agent, [&] { return agent->held().empty(); }));
}

// A fixed uid (--tenant-uid) wins over the range and is never allotted to another tenant; with
// the range used up a tenant's workload is not held (logged), never run under the agent's uid.
TEST_F(AgentTest, AFixedTenantUidWinsAndATenantWithNoUidLeftIsNotRun) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown counters files to other uids (CI runs as root)";
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  constexpr long kFirst = 2000000100;
  AgentOptions o = Options();
  o.tenant_uids = {.enabled = true, .first = kFirst, .last = kFirst + 1, .fixed = {{"audio", kFirst}}};
  Agent agent(o, TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  json audio = Workload(1, 0, 128, 100), nlp = Workload(2, 0, 128, 100), speech = Workload(3, 0, 128, 100);
  audio["tenant"] = "audio";
  nlp["tenant"] = "nlp";
  speech["tenant"] = "speech";
  cp.desired = json::array({audio, Workload(4, 0, 128, 100), nlp, speech});
  ASSERT_TRUE(agent.Round(now_ms).ok());
  ASSERT_EQ(agent.held().count(1), 1u);
  EXPECT_EQ(agent.held().at(1).uid, kFirst);
  EXPECT_EQ(agent.held().at(4).uid, kFirst + 1) << "vision: the range's first uid is audio's";
  // nlp and speech: no uid left. Each ends at once (126, reason no_tenant_uid, an event naming the
  // range) instead of waiting, unrun, at every round; neither holds a slot.
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_THAT(cp.finished, ::testing::UnorderedElementsAre(std::pair<int64_t, int>{2, 126}, std::pair<int64_t, int>{3, 126}));
  EXPECT_EQ(cp.reasons[2], "no_tenant_uid");
  bool event = false;
  for (const json& e : cp.events)
    event |= e["id"] == 2 && e["kind"] == "no_tenant_uid" &&
             e["detail"].get<std::string>().find("no uid left in --tenant-uids") != std::string::npos;
  EXPECT_TRUE(event);
  EXPECT_EQ(Slot("w2"), nullptr);
  EXPECT_EQ(Slot("w3"), nullptr);
  const std::vector<std::string> log = agent.TakeLog();
  EXPECT_THAT(log, ::testing::Contains(::testing::HasSubstr("tenant 'nlp': no uid left in --tenant-uids")));
  // A node directory other uids cannot reach is refused at the start.
  AgentOptions closed = o;
  closed.run_dir = dir.File("closed/node");
  ASSERT_EQ(::mkdir(dir.File("closed").c_str(), 0700), 0);
  Agent refused(closed, TwoGpus(), &cp);
  Status st = refused.Start();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr(dir.File("closed") + "' (of the node directory"));
}

// The NVML backstop on the fakes: the fake CUDA driver records each process's device bytes in
// `state`, the fake NVML lists them (plus a 100 MiB context each); the allowance is 128 MiB.
class BackstopTest : public AgentTest {
 protected:
  void SetUp() override {
    ASSERT_EQ(::mkdir(dir.File("gpu-state").c_str(), 0755), 0);
    ::setenv("TESSERA_FAKE_NVML_CONFIG", "A100-40GB*2", 1);
    ::setenv("TESSERA_FAKE_GPU_STATE", dir.File("gpu-state").c_str(), 1);  // the test's and its children's
    ::setenv("TESSERA_FAKE_GPU_CONTEXT_MIB", "100", 1);
    ASSERT_TRUE(nvml.Init().ok());
  }
  void TearDown() override {
    for (pid_t g : groups) ::kill(-g, SIGKILL);
    for (pid_t g : groups) ::waitpid(g, nullptr, 0);
    (void)nvml.Shutdown();
    ::unsetenv("TESSERA_FAKE_NVML_CONFIG");
    ::unsetenv("TESSERA_FAKE_GPU_STATE");
    ::unsetenv("TESSERA_FAKE_GPU_CONTEXT_MIB");
  }
  AgentOptions BackstopOptions(bool kill) {
    AgentOptions o = Options();
    o.nvml = &nvml;
    o.backstop_period_ms = 1000;  // one round of RoundsUntil
    o.context_allowance_mib = 128;
    o.backstop_kill = kill;
    return o;
  }
  // A command that allocates `bytes` through the fake driver and holds them for 30 s; `hostile`
  // re-execs it without LD_PRELOAD first, so the shim never sees the allocation.
  static std::vector<std::string> Holder(uint64_t bytes, bool hostile,
                                         const std::string& program = TESSERA_SHIM_PROBE) {
    return {"/bin/sh", "-c",
            std::string("sleep 30 | ") + (hostile ? "exec env -u LD_PRELOAD " : "exec ") + program +
                " init alloc:mem:" + std::to_string(bytes) + " wait"};
  }
  // A process group of no workload running Holder (its own group, killed in TearDown).
  void StartForeign(uint64_t bytes, const std::string& program = TESSERA_SHIM_PROBE) {
    const std::vector<std::string> cmd = Holder(bytes, true, program);
    const pid_t child = ::fork();
    if (child == 0) {
      ::setpgid(0, 0);
      ::execl(cmd[0].c_str(), cmd[0].c_str(), cmd[1].c_str(), cmd[2].c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::setpgid(child, child);
    groups.push_back(child);
  }
  // The pids the fake driver recorded holding exactly `bytes` on a GPU.
  std::vector<long> Holding(uint64_t bytes) {
    std::vector<long> out;
    DIR* d = ::opendir(dir.File("gpu-state").c_str());
    if (d == nullptr) return out;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
      std::ifstream in(dir.File("gpu-state/" + std::string(e->d_name)));
      int gpu = 0;
      uint64_t b = 0;
      while (in >> gpu >> b)
        if (b == bytes) out.push_back(std::atol(e->d_name));
    }
    ::closedir(d);
    return out;
  }
  static bool Alive(long pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
  }
  static int Count(const std::vector<json>& events, int64_t id, const std::string& kind) {
    int n = 0;
    for (const json& e : events) n += e["id"] == id && e["kind"] == kind;
    return n;
  }

  enforce::DlopenNvml nvml{{.library_path = TESSERA_FAKE_NVML_PATH}};
  std::vector<pid_t> groups;
};

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST_F(BackstopTest, AWorkloadThatDropsTheShimAndAllocatesOverItsLimitIsKilledWithinTwoPeriods) {
  Agent agent(BackstopOptions(true), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  // Both on GPU 0 with 256 MiB: 3 hostile allocates 1 GiB unseen by the shim (1124 MiB in NVML,
  // 996 over the allowance); 4 honest holds 64 MiB under the shim (164 MiB, 36 over).
  cp.desired = json::array(
      {Workload(3, 0, 256, 500, Holder(kGiB, true)), Workload(4, 0, 256, 500, Holder(64 * kMiB, false))});
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !Holding(kGiB).empty() && !Holding(64 * kMiB).empty(); }));
  const long hostile = Holding(kGiB).front();
  int periods = 0;
  while (periods < 2 && agent.stats().backstop_violations == 0) {
    ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
    ++periods;
  }
  EXPECT_EQ(agent.stats().backstop_violations, 1) << "not detected within two periods";
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !cp.finished.empty(); }));
  EXPECT_FALSE(Alive(hostile));
  EXPECT_EQ(cp.finished.front().first, 3);
  EXPECT_EQ(cp.reasons[3], "violated_limit");
  EXPECT_EQ(Count(cp.events, 3, "violated_limit"), 1);
  EXPECT_GE(agent.stats().backstop_kills, 1);
  // The other tenant's workload runs on, untouched, and is never reported.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  ASSERT_EQ(agent.held().count(4), 1u);
  EXPECT_FALSE(agent.held().at(4).ended);
  for (long pid : Holding(64 * kMiB)) EXPECT_TRUE(Alive(pid));
  EXPECT_EQ(Count(cp.events, 4, "violated_limit"), 0);
  EXPECT_EQ(cp.finished.size(), 1u);
  EXPECT_EQ(agent.stats().backstop_unknown, 0);
  cp.desired = json::array();
  EXPECT_TRUE(RoundsUntil(agent, [&] { return agent.held().empty(); }));
}

// Under its memory limit, a process that dropped the shim still launches outside the GPU's time
// slices (issue 29 §3): on a time-sliced GPU it is a violation as soon as NVML lists it.
TEST_F(BackstopTest, AProcessWithoutTheShimOnATimeSlicedGpuIsKilledEvenUnderItsMemoryLimit) {
  Agent agent(BackstopOptions(true), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array(
      {Workload(3, 0, 256, 500, Holder(64 * kMiB, true)), Workload(4, 0, 256, 500, Holder(32 * kMiB, false))});
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !Holding(64 * kMiB).empty() && !Holding(32 * kMiB).empty(); }));
  const long hostile = Holding(64 * kMiB).front();
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !cp.finished.empty(); }));
  EXPECT_FALSE(Alive(hostile));
  EXPECT_EQ(cp.finished.front().first, 3);
  EXPECT_EQ(cp.reasons[3], "violated_limit");
  ASSERT_EQ(Count(cp.events, 3, "violated_limit"), 1);
  for (const json& e : cp.events) {
    if (e["id"] == 3) {
      EXPECT_THAT(e["detail"].get<std::string>(),
                  ::testing::HasSubstr("pid " + std::to_string(hostile) + " on GPU 0 runs without the shim"));
    }
  }
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_FALSE(agent.held().at(4).ended);
  for (long pid : Holding(32 * kMiB)) EXPECT_TRUE(Alive(pid));
  EXPECT_EQ(Count(cp.events, 4, "violated_limit"), 0);
  cp.desired = json::array();
  EXPECT_TRUE(RoundsUntil(agent, [&] { return agent.held().empty(); }));
}

TEST(MapsHoldTheShim, FindsTheShimByItsFileNameWhereverItLies) {
  const std::string shim = "7f1c2a000000-7f1c2a020000 r-xp 00000000 fd:01 4242 /opt/x/lib/libtessera-shim.so\n";
  const std::string other = "55d0c0000000-55d0c0001000 r--p 00000000 fd:01 17   /usr/bin/python3.11\n"
                            "7ffd1000-7ffd2000 rw-p 00000000 00:00 0      [stack]\n"
                            "7f00-7f01 r--p 0 fd:01 9 /tmp/not-libtessera-shim.so (deleted)\n";
  EXPECT_EQ(MapsHoldTheShim(other + shim), true);
  EXPECT_EQ(MapsHoldTheShim(other), false);
  EXPECT_EQ(MapsHoldTheShim(""), std::nullopt);
  // A shim file replaced since it was mapped, with a version suffix, still counts.
  EXPECT_EQ(MapsHoldTheShim("7f00-7f01 r--p 0 fd:01 9 /lib/libtessera-shim.so.1 (deleted)\n"), true);
  // Under another name (TESSERA_SHIM_PATH=/opt/t/shim.so), by the inode the agent resolved.
  const std::string renamed = "7f1c2a000000-7f1c2a020000 r-xp 00000000 fd:01 4242      /opt/t/shim.so\n";
  EXPECT_EQ(MapsHoldTheShim(other + renamed, 4242), true);
  EXPECT_EQ(MapsHoldTheShim(other + renamed, 4243), false);
  EXPECT_EQ(MapsHoldTheShim(other + renamed), false);
}

// A tenant may truncate its own counters file (the file is its uid's). The agent's arbiter threads
// map it and reconcile it every 100 ms, so before FaultGuard the next pass ended the agent with
// SIGBUS (this test binary with it). Now the agent lives, the workload ends as violated_limit with
// the file named (its memory is no longer accounted: fail closed), and the other tenant runs on.
TEST_F(BackstopTest, ATenantThatTruncatesItsCountersFileEndsItsOwnWorkloadNotTheAgent) {
  Agent agent(BackstopOptions(true), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array(
      {Workload(5, 0, 256, 500, Holder(64 * kMiB, false)), Workload(6, 0, 256, 500, Holder(32 * kMiB, false))});
  ASSERT_TRUE(RoundsUntil(agent, [&] { return Holding(64 * kMiB).size() == 1 && Holding(32 * kMiB).size() == 1; }));
  const TenantStatus* slot = Slot("w5");
  ASSERT_NE(slot, nullptr);
  const std::string file = enforce::CountersFilePath(NodeDir(dir.File("node")).paths().counters, slot->index);
  ASSERT_EQ(::truncate(file.c_str(), 0), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the arbiter's reconciles touch it
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !cp.finished.empty(); }));
  EXPECT_EQ(cp.finished.front().first, 5);
  EXPECT_EQ(cp.reasons[5], "violated_limit");
  ASSERT_EQ(Count(cp.events, 5, "violated_limit"), 1);
  for (const json& e : cp.events) {
    if (e["id"] == 5) {
      EXPECT_THAT(e["detail"].get<std::string>(), ::testing::HasSubstr("'" + file + "': size 0"));
    }
  }
  EXPECT_EQ(agent.stats().counters_broken, 1);
  EXPECT_TRUE(Holding(64 * kMiB).empty() || !Alive(Holding(64 * kMiB).front()));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  ASSERT_EQ(agent.held().count(6), 1u);
  EXPECT_FALSE(agent.held().at(6).ended);
  for (long pid : Holding(32 * kMiB)) EXPECT_TRUE(Alive(pid));
  EXPECT_EQ(cp.finished.size(), 1u);
  cp.desired = json::array();
  EXPECT_TRUE(RoundsUntil(agent, [&] { return agent.held().empty(); }));
}

TEST_F(BackstopTest, AnAgentRestartedRightAfterTheKillStillReportsViolatedLimit) {
  cp.desired = json::array({Workload(8, 0, 256, 500, Holder(kGiB, true))});
  {
    AgentOptions o = BackstopOptions(true);
    o.backstop_period_ms = 3'600'000;  // the rounds' checks see nothing: only the first, before the start
    Agent first(o, TwoGpus(), &cp);
    ASSERT_TRUE(first.Start().ok());
    ASSERT_TRUE(RoundsUntil(first, [&] { return !Holding(kGiB).empty(); }));
    ASSERT_EQ(first.stats().backstop_checks, 1);
    first.Backstop(now_ms += 3'600'000);  // kills; no round reports it before the agent is gone
    ASSERT_EQ(first.stats().backstop_violations, 1);
  }
  EXPECT_TRUE(cp.finished.empty());
  Agent second(BackstopOptions(true), TwoGpus(), &cp);
  ASSERT_TRUE(second.Start().ok());
  ASSERT_TRUE(RoundsUntil(second, [&] { return !cp.finished.empty(); }));
  EXPECT_EQ(cp.finished.front().first, 8);
  EXPECT_EQ(cp.reasons[8], "violated_limit");
}

TEST_F(BackstopTest, AProcessOfNoWorkloadOnASharedGpuIsReportedAndKilled) {
  Agent agent(BackstopOptions(true), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({Workload(5, 0, 1024, 500)});  // GPU 0 is shared (a slot of 500)
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  StartForeign(32 * kMiB);
  ASSERT_TRUE(RoundsUntil(agent, [&] { return agent.stats().backstop_unknown > 0; }));
  ASSERT_EQ(Holding(32 * kMiB).size(), 1u);
  const long foreign = Holding(32 * kMiB).front();
  EXPECT_TRUE(RoundsUntil(agent, [&] { return !Alive(foreign); }));
  EXPECT_EQ(agent.stats().backstop_unknown, 1);
  EXPECT_EQ(agent.stats().backstop_kills, 1);
  EXPECT_TRUE(cp.finished.empty());  // the slot's workload is not blamed
}

TEST_F(BackstopTest, TheMpsServerIsNeverCountedOrKilled) {
  Agent agent(BackstopOptions(true), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({Workload(7, 0, 1024, 500)});  // GPU 0 is shared
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  const std::string mps = dir.File("nvidia-cuda-mps-server");  // its /proc comm: nvidia-cuda-mps
  ASSERT_EQ(::symlink(TESSERA_SHIM_PROBE, mps.c_str()), 0);
  StartForeign(32 * kMiB, mps);
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !Holding(32 * kMiB).empty(); }));
  const int64_t checks = agent.stats().backstop_checks;
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(agent.stats().backstop_checks, checks + 2);
  EXPECT_TRUE(Alive(Holding(32 * kMiB).front()));
  EXPECT_EQ(agent.stats().backstop_unknown, 0);
  EXPECT_EQ(agent.stats().backstop_kills, 0);
}

// The "nvml" condition: ok while NVML lists every GPU's processes, not ok (naming the GPUs and
// NVML's error) while it cannot, sent with every heartbeat.
TEST_F(BackstopTest, EveryHeartbeatCarriesTheNvmlConditionOfTheLastPass) {
  Agent agent(BackstopOptions(true), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  const auto nvml_condition = [&]() -> json {
    for (auto b = cp.bodies.rbegin(); b != cp.bodies.rend(); ++b) {
      if (b->empty()) continue;
      const json j = json::parse(*b, nullptr, false);
      if (j.is_object() && j.contains("conditions")) return j["conditions"];
    }
    return nullptr;
  };
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(nvml_condition(), json::parse(R"([{"ok": true, "type": "nvml"}])"));
  (void)nvml.Shutdown();
  ::setenv("TESSERA_FAKE_NVML_FAIL", "nvmlDeviceGetComputeRunningProcesses_v3:15", 1);  // GPU_IS_LOST
  ASSERT_TRUE(nvml.Init().ok());
  ::unsetenv("TESSERA_FAKE_NVML_FAIL");
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  const json lost = nvml_condition();
  ASSERT_TRUE(lost.is_array() && lost.size() == 1u) << lost.dump();
  EXPECT_EQ(lost[0]["ok"], false);
  EXPECT_THAT(lost[0]["detail"].get<std::string>(), ::testing::StartsWith("GPU 0: "));
  EXPECT_THAT(lost[0]["detail"].get<std::string>(), ::testing::HasSubstr("; GPU 1: "));
  (void)nvml.Shutdown();
  ASSERT_TRUE(nvml.Init().ok());
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(nvml_condition(), json::parse(R"([{"ok": true, "type": "nvml"}])"));
}

// NVML's view rides on the usage samples (issue 32): the driver's per-process utilisation and
// memory, summed over the workload's processes, beside what the shim counted.
class NvmlUsageTest : public BackstopTest {
 protected:
  // NVML again with `config` (and `fail`, TESSERA_FAKE_NVML_FAIL, for its Init only).
  void Reinit(const std::string& config, const std::string& fail = "") {
    (void)nvml.Shutdown();
    ::setenv("TESSERA_FAKE_NVML_CONFIG", config.c_str(), 1);
    if (!fail.empty()) ::setenv("TESSERA_FAKE_NVML_FAIL", fail.c_str(), 1);
    ASSERT_TRUE(nvml.Init().ok());
    ::unsetenv("TESSERA_FAKE_NVML_FAIL");
  }
  // The newest sample of workload `id` (null when none).
  json LastSample(int64_t id) const {
    for (auto it = cp.samples.rbegin(); it != cp.samples.rend(); ++it)
      if ((*it)["workload"] == std::to_string(id)) return *it;
    return nullptr;
  }
  // Workloads 5 (64 MiB) and 6 (32 MiB) running on GPU 0; their command pids in `command5/6`.
  void StartTwo(Agent& agent) {
    ASSERT_TRUE(agent.Start().ok());
    cp.desired = json::array({Workload(5, 0, 1024, 500, Holder(64 * kMiB, false)),
                              Workload(6, 0, 1024, 500, Holder(32 * kMiB, false))});
    ASSERT_TRUE(RoundsUntil(agent, [&] { return Holding(64 * kMiB).size() == 1 && Holding(32 * kMiB).size() == 1; }));
    command5 = Holding(64 * kMiB).front();
    command6 = Holding(32 * kMiB).front();
  }
  long command5 = 0, command6 = 0;
};

TEST_F(NvmlUsageTest, ASampleCarriesTheSumOverTheWorkloadsProcessesOfNvmlsUtilisationAndMemory) {
  Agent agent(BackstopOptions(true), TwoGpus(), &cp);
  StartTwo(agent);
  const long supervisor5 = agent.held().at(5).pid;
  // The driver samples workload 5's supervisor at 30 % and its command at 25 %, and pid 1 (no
  // workload's) at 90 %; workload 6's processes have no sample (idle).
  Reinit("A100-40GB:plive=1:putil=" + std::to_string(supervisor5) + "/30/0;" + std::to_string(command5) +
         "/25/0;1/90/0,A100-40GB");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  const json five = LastSample(5), six = LastSample(6);
  ASSERT_TRUE(five.is_object() && six.is_object());
  EXPECT_EQ(five["nvml_used_milli"], 550) << five.dump();
  EXPECT_EQ(five["nvml_memory_mib"], 164) << five.dump();  // 64 MiB + the fake's 100 MiB context
  EXPECT_EQ(six["nvml_used_milli"], 0) << six.dump();      // the GPU was sampled: observed idle
  EXPECT_EQ(six["nvml_memory_mib"], 132) << six.dump();
  // A workload without a command: the agent knows none of its pids, so NVML's figures are absent.
  cp.desired.push_back(Workload(7, 0, 512, 500));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  const json seven = LastSample(7);
  ASSERT_TRUE(seven.is_object());
  EXPECT_FALSE(seven.contains("nvml_used_milli")) << seven.dump();
  EXPECT_FALSE(seven.contains("nvml_memory_mib")) << seven.dump();
  EXPECT_EQ(LastSample(5)["nvml_used_milli"], 550);
  cp.desired = json::array();
  EXPECT_TRUE(RoundsUntil(agent, [&] { return agent.held().empty(); }));
}

// NVML's view charged to the arbiter (issue 29): no arbiter runs here, so the board charges both
// workloads nothing; NVML samples workload 5's command at 60 % (600 ms of each 1 s pass: clearly
// more than its charge, as a tenant that zeroed its measured time shows) and workload 6's at 4 %
// (40 ms: below the margin). Workload 5's slot gets 600 ms of observed_extra_ns per pass from the second
// pass on, and one gpu_time_recharged event; workload 6 gets nothing.
TEST_F(NvmlUsageTest, TimeNvmlSawBeyondAWorkloadsChargeIsAddedToItsSlotOnTheBoard) {
  Agent agent(BackstopOptions(true), TwoGpus(), &cp);
  StartTwo(agent);
  Reinit("A100-40GB:plive=1:putil=" + std::to_string(command5) + "/60/0;" + std::to_string(command6) + "/4/0,A100-40GB");
  StatusOr<std::vector<TenantEntry>> entries = NodeDir(dir.File("node")).RegistryEntries();
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  int slot5 = -1, slot6 = -1;
  for (const TenantEntry& e : *entries) {
    if (e.name == "w5") slot5 = e.index;
    if (e.name == "w6") slot6 = e.index;
  }
  ASSERT_GE(slot5, 0);
  ASSERT_GE(slot6, 0);
  // Read-write, as the arbiter maps it: the second half charges workload 5 as an arbiter would.
  StatusOr<enforce::LeaseFile> leases = enforce::LeaseFile::Open(dir.File("node/leases"));
  ASSERT_TRUE(leases.ok()) << leases.status().ToString();
  const auto extra = [&](int slot) { return leases->board(0).node[slot].observed_extra_ns.load(); };
  const uint64_t before5 = extra(slot5), before6 = extra(slot6);
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  // Nine passes after the figures changed: the first may still set the baseline, five are within
  // the 5 s lag, then about 600 ms each (decay shaves a little off).
  EXPECT_GE(extra(slot5) - before5, 2 * 580'000'000ull);
  EXPECT_LE(extra(slot5) - before5, 4 * 600'000'000ull);
  EXPECT_EQ(extra(slot6), before6);
  EXPECT_EQ(agent.stats().gpu_time_recharged_ns, static_cast<int64_t>(extra(slot5) - before5));
  EXPECT_EQ(Count(cp.events, 5, "gpu_time_recharged"), 1);
  EXPECT_EQ(Count(cp.events, 6, "gpu_time_recharged"), 0);
  // Now an arbiter charges workload 5 what it ran (600 ms a pass) and the extra added before it:
  // nothing more is added, and a later episode would send a new event.
  // Each pass the board grows by exactly 600 ms plus the extra the previous pass added (what an
  // arbiter charges), so the agent must not count its own extra as the tenant's: once the lagged
  // passes of the under-reporting are through, nothing more is added.
  uint64_t last = extra(slot5), previous_add = 0;
  std::vector<uint64_t> adds;
  for (int i = 0; i < 10; ++i) {
    leases->board(0).node[slot5].charged_ns.fetch_add(600'000'000ull + previous_add);
    ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
    previous_add = extra(slot5) - last;
    last = extra(slot5);
    adds.push_back(previous_add);
  }
  for (size_t i = 6; i < adds.size(); ++i) EXPECT_EQ(adds[i], 0u) << "pass " << i << ": charged again";
  EXPECT_EQ(Count(cp.events, 5, "gpu_time_recharged"), 1);
  cp.desired = json::array();
  EXPECT_TRUE(RoundsUntil(agent, [&] { return agent.held().empty(); }));
}

// A control plane older than the event kind refuses a heartbeat that carries it: the heartbeat goes
// again without it (the node stays alive, the other reports arrive), and the charge still stands.
TEST_F(NvmlUsageTest, AControlPlaneThatRefusesTheRechargedEventStillGetsEveryHeartbeat) {
  cp.refuse_recharged = true;
  Agent agent(BackstopOptions(true), TwoGpus(), &cp);
  StartTwo(agent);
  Reinit("A100-40GB:plive=1:putil=" + std::to_string(command5) + "/60/0,A100-40GB");
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok()) << "round " << i;
  EXPECT_EQ(cp.recharged_refused, 1);
  EXPECT_GT(agent.stats().gpu_time_recharged_ns, 0);
  EXPECT_EQ(Count(cp.events, 5, "gpu_time_recharged"), 0);
  cp.desired = json::array();
  EXPECT_TRUE(RoundsUntil(agent, [&] { return agent.held().empty(); }));
}

TEST_F(NvmlUsageTest, WhereTheDriverGivesNoFigureTheSampleLeavesItOutRatherThanSendingZero) {
  Agent agent(BackstopOptions(true), TwoGpus(), &cp);
  StartTwo(agent);
  // No utilisation sample of any process on the GPU: utilisation unknown, memory listed.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  json five = LastSample(5);
  ASSERT_TRUE(five.is_object());
  EXPECT_FALSE(five.contains("nvml_used_milli")) << five.dump();
  EXPECT_EQ(five["nvml_memory_mib"], 164) << five.dump();
  // Per-process utilisation and the process list NOT_SUPPORTED (3): both left out.
  Reinit("A100-40GB:plive=1:putil=" + std::to_string(command5) + "/25/0,A100-40GB",
         "nvmlDeviceGetProcessUtilization:3,nvmlDeviceGetComputeRunningProcesses_v3:3");
  cp.samples.clear();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  five = LastSample(5);
  ASSERT_TRUE(five.is_object());
  EXPECT_FALSE(five.contains("nvml_used_milli")) << five.dump();
  EXPECT_FALSE(five.contains("nvml_memory_mib")) << five.dump();
  EXPECT_FALSE(LastSample(6).contains("nvml_used_milli"));
  // Readable again: the figures come back.
  Reinit("A100-40GB:plive=1:putil=" + std::to_string(command5) + "/25/0,A100-40GB");
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(LastSample(5)["nvml_used_milli"], 250);
  cp.desired = json::array();
  EXPECT_TRUE(RoundsUntil(agent, [&] { return agent.held().empty(); }));
}

TEST_F(BackstopTest, ReportModeReportsOnceAndKillsNothing) {
  Agent agent(BackstopOptions(false), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({Workload(6, 0, 256, 500, Holder(kGiB, true))});
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !Holding(kGiB).empty(); }));
  const long hostile = Holding(kGiB).front();
  StartForeign(32 * kMiB);
  ASSERT_TRUE(RoundsUntil(agent, [&] {
    return agent.stats().backstop_violations > 0 && agent.stats().backstop_unknown > 0 && !cp.events.empty();
  }));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_TRUE(Alive(hostile));
  for (long pid : Holding(32 * kMiB)) EXPECT_TRUE(Alive(pid));
  EXPECT_EQ(agent.stats().backstop_kills, 0);
  EXPECT_EQ(agent.stats().backstop_violations, 1);  // once, not every period
  EXPECT_EQ(agent.stats().backstop_unknown, 1);
  EXPECT_EQ(Count(cp.events, 6, "violated_limit"), 1);
  EXPECT_THAT(cp.events.front()["detail"].get<std::string>(), ::testing::HasSubstr("limit 256 MiB"));
  EXPECT_TRUE(cp.finished.empty());
  EXPECT_FALSE(agent.held().at(6).ended);
  cp.desired = json::array();
  EXPECT_TRUE(RoundsUntil(agent, [&] { return agent.held().empty(); }));
}

// MPS workloads on the fake nvidia-cuda-mps-control (tests/testing/fake_mps): it records in each
// GPU's <run_dir>/mps/gpu<N>/log/control.log what it was started with and told.
class MpsAgentTest : public AgentTest {
 protected:
  void TearDown() override {
    for (int gpu = 0; gpu < 2; ++gpu) {
      std::ifstream in(dir.File("node/mps/gpu" + std::to_string(gpu) + "/pipe/nvidia-cuda-mps-control.pid"));
      long pid = 0;
      if (in >> pid && pid > 0) ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
  }
  AgentOptions MpsOptions() {
    AgentOptions o = Options();
    o.mps_control = TESSERA_FAKE_MPS_CONTROL;
    o.context_allowance_mib = 500;
    return o;
  }
  static json MpsWorkload(int64_t id, int gpu, int64_t mem_mib, int milli, std::vector<std::string> command) {
    json w = Workload(id, gpu, mem_mib, milli, std::move(command));
    w["mode"] = "mps(" + std::to_string((milli + 9) / 10) + "," + std::to_string(mem_mib) + "MiB)";
    return w;
  }
  // What the command printed of its environment (the Client command's lines).
  std::string ClientLog(int64_t id) {
    std::ifstream in(dir.File("node/agent/w" + std::to_string(id) + ".log"));
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // Prints the MPS variables and the shim's, then runs until stopped.
  static std::vector<std::string> Client() {
    return {"/bin/sh", "-c", "env | grep -E '^(CUDA_MPS_|TESSERA_SHIM_TENANT=)' | sort; echo printed; exec sleep 60"};
  }
  // The control.log lines of GPU `gpu`, without the start line's pid and variables.
  std::vector<std::string> Recorded(int gpu) {
    std::ifstream in(dir.File("node/mps/gpu" + std::to_string(gpu) + "/log/control.log"));
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line.substr(0, line.find(" pid=")));
    return lines;
  }
  std::string StartLine(int gpu) {
    std::ifstream in(dir.File("node/mps/gpu" + std::to_string(gpu) + "/log/control.log"));
    std::string line;
    std::getline(in, line);
    return line;
  }
  long DaemonPid(int gpu) {
    return MpsControl({.run_dir = dir.File("node"), .control_binary = TESSERA_FAKE_MPS_CONTROL}).DaemonPid(gpu);
  }
};

TEST_F(MpsAgentTest, AnMpsWorkloadStartsItsGpusDaemonOnceAndItsClientGetsShareLimitAndPipeDirectory) {
  // An agent started from a shell with MPS variables set passes none of them to a non-MPS workload.
  ::setenv("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps", 1);
  {
    Agent agent(MpsOptions(), TwoGpus(), &cp);
    ASSERT_TRUE(agent.Start().ok());
    // Two MPS clients on GPU 0, one on GPU 1, and a fraction on GPU 1 (no MPS for it).
    cp.desired = json::array({MpsWorkload(1, 0, 1024, 300, Client()), MpsWorkload(2, 0, 2048, 700, Client()),
                              MpsWorkload(3, 1, 512, 250, Client()), Workload(4, 1, 512, 250, Client())});
    ASSERT_TRUE(RoundsUntil(agent, [&] {
      for (int64_t id : {1, 2, 3, 4})
        if (ClientLog(id).find("printed") == std::string::npos) return false;
      return true;
    }));
    EXPECT_EQ(agent.stats().mps_starts, 2);
    EXPECT_THAT(Recorded(0), ::testing::ElementsAre("start"));  // once for its two clients
    EXPECT_THAT(Recorded(1), ::testing::ElementsAre("start"));
    EXPECT_THAT(StartLine(0), ::testing::HasSubstr("CUDA_VISIBLE_DEVICES=GPU-fake-0"));
    EXPECT_THAT(StartLine(1), ::testing::HasSubstr("CUDA_VISIBLE_DEVICES=GPU-fake-1"));
    const std::string pipe0 = dir.File("node/mps/gpu0/pipe"), pipe1 = dir.File("node/mps/gpu1/pipe");
    EXPECT_EQ(ClientLog(1), "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30\nCUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1524M\n"
                            "CUDA_MPS_PIPE_DIRECTORY=" + pipe0 + "\nTESSERA_SHIM_TENANT=" +
                                std::to_string(Slot("w1")->index) + "\nprinted\n");
    EXPECT_THAT(ClientLog(2), ::testing::HasSubstr("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=70\n"
                                                   "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=2548M\n"));
    EXPECT_THAT(ClientLog(3), ::testing::HasSubstr("CUDA_MPS_PIPE_DIRECTORY=" + pipe1 + "\n"));
    EXPECT_THAT(ClientLog(4), ::testing::Not(::testing::HasSubstr("CUDA_MPS_")));
    // The shim's limit stays in force under MPS (defence in depth).
    ASSERT_NE(Slot("w1"), nullptr);
    EXPECT_EQ(Slot("w1")->limit_bytes, uint64_t{1024} << 20);
  }
  ::unsetenv("CUDA_MPS_PIPE_DIRECTORY");
  // A restarted agent finds the daemons running and starts none.
  Agent again(MpsOptions(), TwoGpus(), &cp);
  ASSERT_TRUE(again.Start().ok());
  ASSERT_TRUE(again.Round(now_ms += 1000).ok());
  EXPECT_EQ(again.stats().mps_starts, 0);
  EXPECT_EQ(again.stats().mps_restarts, 0);
  EXPECT_THAT(Recorded(0), ::testing::ElementsAre("start"));
  cp.desired = json::array();
  EXPECT_TRUE(RoundsUntil(again, [&] { return again.held().empty() && DaemonPid(0) == 0 && DaemonPid(1) == 0; }));
}

TEST_F(MpsAgentTest, AKilledDaemonIsStartedAgainAndTheLastClientsEndStopsIt) {
  Agent agent(MpsOptions(), TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({MpsWorkload(5, 0, 1024, 500, {"/bin/sleep", "60"}),
                            MpsWorkload(6, 0, 1024, 500, {"/bin/sh", "-c", "read x"})});  // ends at once
  ASSERT_TRUE(RoundsUntil(agent, [&] { return DaemonPid(0) > 0 && !cp.finished.empty(); }));
  // One client ended, the other runs: the daemon stays.
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  const long first = DaemonPid(0);
  ASSERT_GT(first, 0);
  EXPECT_EQ(agent.stats().mps_stops, 0);
  ASSERT_EQ(::kill(static_cast<pid_t>(first), SIGKILL), 0);
  ASSERT_TRUE(RoundsUntil(agent, [&] { return agent.stats().mps_restarts == 1; }));
  EXPECT_GT(DaemonPid(0), 0);
  EXPECT_NE(DaemonPid(0), first);
  EXPECT_THAT(Recorded(0), ::testing::ElementsAre("start", "start"));
  // The last client is no longer desired: once it is gone, the daemon is told to quit.
  cp.desired = json::array();
  ASSERT_TRUE(RoundsUntil(agent, [&] { return agent.held().empty() && agent.stats().mps_stops == 1; }));
  EXPECT_EQ(DaemonPid(0), 0);
  EXPECT_THAT(Recorded(0), ::testing::ElementsAre("start", "start", "command quit", "quit"));
  EXPECT_EQ(agent.stats().mps_starts, 1);
}

TEST_F(MpsAgentTest, WithoutTheControlProgramAnMpsWorkloadFailsWithAReasonThatSaysSo) {
  AgentOptions o = MpsOptions();
  o.mps_control = dir.File("missing/nvidia-cuda-mps-control");
  Agent agent(o, TwoGpus(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({MpsWorkload(8, 1, 1024, 300, Client())});
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !cp.finished.empty(); }));
  EXPECT_THAT(cp.finished, ::testing::ElementsAre(std::pair<int64_t, int>{8, 126}));
  EXPECT_EQ(cp.reasons[8], "mps_unavailable");
  ASSERT_EQ(cp.events.size(), 1u);
  EXPECT_EQ(cp.events[0]["kind"], "mps_unavailable");
  EXPECT_THAT(cp.events[0]["detail"].get<std::string>(), ::testing::HasSubstr("missing/nvidia-cuda-mps-control"));
  EXPECT_THAT(cp.events[0]["detail"].get<std::string>(), ::testing::HasSubstr("--mps-control"));
  EXPECT_EQ(ClientLog(8), "");  // never run, not even without MPS
  EXPECT_EQ(agent.stats().mps_starts, 0);
}

// MIG layouts from the control plane (issue 32) on the fake NVML: one H100-80GB in MIG mode.
class MigAgentTest : public AgentTest {
 protected:
  void Init(const std::string& config) {
    ::setenv("TESSERA_FAKE_NVML_CONFIG", config.c_str(), 1);
    ASSERT_TRUE(nvml.Init().ok());
  }
  void TearDown() override {
    (void)nvml.Shutdown();
    ::unsetenv("TESSERA_FAKE_NVML_CONFIG");
  }
  AgentOptions MigOptions(bool allow) {
    AgentOptions o = Options();
    o.mig_nvml = &nvml;
    o.allow_mig_reconfigure = allow;
    return o;
  }
  Inventory Discovered() {
    StatusOr<Inventory> inv = DiscoverInventory(nvml, GpuModelCatalog::Builtin());
    EXPECT_TRUE(inv.ok()) << inv.status().message();
    return inv.ok() ? *inv : Inventory{};
  }
  static json MigWorkload(int64_t id, const std::string& profile, int start) {
    return {{"id", id},           {"tenant", "vision"},   {"mode", "mig:" + profile}, {"gpu_milli", 500},
            {"gpu_mem_mib", 0},   {"priority", 0},        {"mig_profile", profile},
            {"pods", json::array({{{"gpus", {0}}, {"mig_start", start}}})}};
  }
  std::string Layout() {  // what the fake driver has on GPU 0
    StatusOr<std::vector<api::InventoryMigInstance>> m =
        DiscoverMigInstances(nvml, 0, *GpuModelCatalog::Builtin().info(*GpuModelCatalog::Builtin().Find("H100-80GB")).mig);
    std::string out;
    for (const auto& i : m.ok() ? *m : std::vector<api::InventoryMigInstance>{})
      out += (out.empty() ? "" : ",") + i.profile + "@" + std::to_string(i.start) + (i.in_use ? "*" : "");
    return out;
  }
  json MigCondition() {  // the last heartbeat's mig_layout condition
    for (auto b = cp.bodies.rbegin(); b != cp.bodies.rend(); ++b) {
      const json j = json::parse(*b, nullptr, false);
      if (!j.is_object() || !j.contains("conditions")) continue;
      for (const json& c : j["conditions"])
        if (c["type"] == "mig_layout") return c;
    }
    return nullptr;
  }
  uint32_t CreateGi(uint32_t index, uint32_t start, uint32_t size) {
    StatusOr<enforce::GpuInstanceProfile> p = nvml.GpuInstanceProfileInfo(0, index);
    EXPECT_TRUE(p.ok());
    StatusOr<enforce::GpuInstance> gi = nvml.CreateGpuInstance(0, p->id, {start, size});
    EXPECT_TRUE(gi.ok()) << gi.status().message();
    return gi.ok() ? gi->id : 0;
  }

  enforce::DlopenNvml nvml{{.library_path = TESSERA_FAKE_NVML_PATH}};
};

TEST_F(MigAgentTest, AMigWorkloadThatNeedsALayoutChangeGetsItAppliedAndStarts) {
  Init("H100-80GB:mig=1");
  Agent agent(MigOptions(true), Discovered(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({MigWorkload(5, "3g.40gb", 4)});
  cp.desired_gpus = json::parse(R"([{"index": 0, "mig_layout": "3g.40gb@4"}])");
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(Layout(), "3g.40gb@4");
  EXPECT_EQ(agent.stats().mig_reconfigurations, 1);
  // The new inventory was registered at once, and the workload started in the same round.
  EXPECT_EQ(cp.Count("/register"), 2);
  const json registered = json::parse(cp.registered_body);
  EXPECT_EQ(registered["mig_reconfigure"], true);
  EXPECT_EQ(registered["gpus"][0]["mig_instances"], json::parse(R"([{"profile": "3g.40gb", "start": 4}])"));
  EXPECT_EQ(agent.held().count(5), 1u);
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(MigCondition(), json::parse(R"({"ok": true, "type": "mig_layout"})"));
  EXPECT_EQ(agent.stats().mig_reconfigurations, 1);  // nothing more to do
  EXPECT_EQ(cp.Count("/register"), 2);
}

// A MIG workload's command sees its own instance only: CUDA_VISIBLE_DEVICES is the MIG device
// UUID of the instance at its pod's mig_start (NVML), not the GPU's index or UUID (with those
// CUDA would hand the command whichever instance it enumerates first: here the one at slice 0).
TEST_F(MigAgentTest, AMigWorkloadsCommandSeesOnlyItsInstanceByItsMigDeviceUuid) {
  Init("H100-80GB:mig=1");
  Agent agent(MigOptions(true), Discovered(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  json w = MigWorkload(6, "3g.40gb", 4);
  w["command"] = {"/bin/sh", "-c", "echo \"cvd=$CUDA_VISIBLE_DEVICES\""};
  cp.desired = json::array({w});
  cp.desired_gpus = json::parse(R"([{"index": 0, "mig_layout": "3g.40gb@0,3g.40gb@4"}])");
  ASSERT_TRUE(RoundsUntil(agent, [&] { return !cp.finished.empty(); }));
  EXPECT_THAT(cp.finished, ::testing::ElementsAre(std::pair<int64_t, int>{6, 0}));
  StatusOr<std::vector<enforce::GpuInstance>> gis = nvml.GpuInstances(0);
  StatusOr<std::vector<enforce::MigDevice>> devices = nvml.MigDevices(0);
  ASSERT_TRUE(gis.ok() && devices.ok());
  std::string at4;
  for (const enforce::GpuInstance& gi : *gis)
    for (const enforce::MigDevice& d : *devices)
      if (gi.placement.start == 4 && d.gpu_instance_id == gi.id) at4 = d.uuid;
  ASSERT_THAT(at4, ::testing::StartsWith("MIG-"));
  std::ifstream log(dir.File("node/agent/w6.log"));
  std::string line;
  std::getline(log, line);
  EXPECT_EQ(line, "cvd=" + at4);
}

// Two MIG workloads on one GPU run side by side, each on its instance: neither is on the GPU's
// lease board (no TESSERA_SHIM_LEASES: the hardware isolates them, node_dir.h), each command waits
// for the other to have started, and both are billed their whole instance as partition "mig".
TEST_F(MigAgentTest, TwoMigWorkloadsOnOneGpuAreNotTimeSlicedAgainstEachOther) {
  Init("H100-80GB:mig=1");
  Agent agent(MigOptions(true), Discovered(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  const std::string flags = dir.File("started");
  json a = MigWorkload(7, "3g.40gb", 0);
  json b = MigWorkload(8, "3g.40gb", 4);
  for (auto [w, me, other] : {std::tuple{&a, "a", "b"}, std::tuple{&b, "b", "a"}}) {
    (*w)["command"] = {"/bin/sh", "-c",
                       "echo \"leases=${TESSERA_SHIM_LEASES-none}\"; touch " + flags + "." + me + "; i=0; while [ ! -e " +
                           flags + "." + other + " ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; [ -e " +
                           flags + "." + other + " ]"};
  }
  cp.desired = json::array({a, b});
  cp.desired_gpus = json::parse(R"([{"index": 0, "mig_layout": "3g.40gb@0,3g.40gb@4"}])");
  ASSERT_TRUE(RoundsUntil(agent, [&] { return cp.finished.size() == 2; }));
  EXPECT_THAT(cp.finished, ::testing::UnorderedElementsAre(std::pair<int64_t, int>{7, 0}, std::pair<int64_t, int>{8, 0}));
  for (int id : {7, 8}) {
    std::ifstream log(dir.File("node/agent/w" + std::to_string(id) + ".log"));
    std::string line;
    std::getline(log, line);
    EXPECT_EQ(line, "leases=none") << "workload " << id;
  }
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());  // the final samples go out
  bool mig_sample = false;
  for (const json& s : cp.samples) {
    if (s.value("partition", "") != "3g.40gb") continue;
    mig_sample = true;
    EXPECT_EQ(s["gpu_milli_s_used"], s["gpu_milli_s_allocated"]) << s.dump();
  }
  EXPECT_TRUE(mig_sample);
}

TEST_F(MigAgentTest, AnInstanceInUseIsNeverDestroyedAndAFreeOneIs) {
  Init("H100-80GB:mig=1:procs=4242/1024/1/0");  // a process in GPU instance 1
  CreateGi(enforce::kGpuInstanceProfile1Slice, 0, 1);  // id 1: in use
  CreateGi(enforce::kGpuInstanceProfile1Slice, 1, 1);  // id 2: free
  ASSERT_EQ(Layout(), "1g.10gb@0*,1g.10gb@1");
  Agent agent(MigOptions(true), Discovered(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired_gpus = json::parse(R"([{"index": 0, "mig_layout": "7g.80gb@0"}])");
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(Layout(), "1g.10gb@0*,1g.10gb@1");  // nothing destroyed: 1g.10gb@0 runs a process
  const json refused = MigCondition();
  EXPECT_EQ(refused["ok"], false);
  EXPECT_EQ(refused["detail"], "GPU 0: layout differs, not applied: has '1g.10gb@0,1g.10gb@1', desired '7g.80gb@0' "
                               "(1g.10gb@0 in use: never destroyed)");
  EXPECT_EQ(agent.stats().mig_reconfigurations, 0);
  // A target that keeps the busy instance: the free one goes, the new one comes.
  cp.desired_gpus = json::parse(R"([{"index": 0, "mig_layout": "1g.10gb@0,3g.40gb@4"}])");
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(Layout(), "1g.10gb@0*,3g.40gb@4");
  EXPECT_EQ(agent.stats().mig_steps, 2);
  EXPECT_EQ(MigCondition()["ok"], true);
}

// An instance no process runs in yet but that another program's tenant holds in the node
// directory (a DRA claim prepared for a container that has not started, a Slurm task) is in use
// too: the agent keeps it, and applies the layout once that tenant has left.
TEST_F(MigAgentTest, AnInstanceATenantOfTheNodeDirectoryHoldsIsNeverDestroyed) {
  Init("H100-80GB:mig=1");
  Agent agent(MigOptions(true), Discovered(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired_gpus = json::parse(R"([{"index": 0, "mig_layout": "3g.40gb@0,3g.40gb@4"}])");
  ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  ASSERT_EQ(Layout(), "3g.40gb@0,3g.40gb@4");
  StatusOr<std::string> at4 = MigInstanceUuid(nvml, 0, 4);
  ASSERT_TRUE(at4.ok()) << at4.status().message();
  const NodeDir node(dir.File("node"));
  ASSERT_TRUE(node.Join(TenantRequest{.name = "k8s/claim-1", .gpus = {0}, .mem_bytes = 1 << 30, .share = 1000,
                                      .mig_instance = *at4},
                        ::getpid())
                  .ok());
  cp.desired_gpus = json::parse(R"([{"index": 0, "mig_layout": "7g.80gb@0"}])");
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(Layout(), "3g.40gb@0,3g.40gb@4");  // neither destroyed: the target needs both gone
  EXPECT_EQ(MigCondition()["detail"], "GPU 0: layout differs, not applied: has '3g.40gb@0,3g.40gb@4', desired "
                                      "'7g.80gb@0' (3g.40gb@4 in use: never destroyed)");
  ASSERT_TRUE(node.LeaveTenant("k8s/claim-1", ::getpid()).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(Layout(), "7g.80gb@0");
  EXPECT_EQ(MigCondition()["ok"], true);
}

TEST_F(MigAgentTest, WithoutTheFlagTheAgentReportsTheLayoutDiffersAndTheWorkWaits) {
  Init("H100-80GB:mig=1");
  Agent agent(MigOptions(false), Discovered(), &cp);
  ASSERT_TRUE(agent.Start().ok());
  cp.desired = json::array({MigWorkload(5, "3g.40gb", 0)});
  cp.desired_gpus = json::parse(R"([{"index": 0, "mig_layout": "3g.40gb@0"}])");
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(agent.Round(now_ms += 1000).ok());
  EXPECT_EQ(Layout(), "");
  EXPECT_TRUE(agent.held().empty());
  const json condition = MigCondition();
  EXPECT_EQ(condition["ok"], false) << condition.dump();
  EXPECT_EQ(condition["detail"], "GPU 0: layout differs, not applied: has '', desired '3g.40gb@0' (the agent runs "
                                 "without --allow-mig-reconfigure)");
  EXPECT_EQ(json::parse(cp.registered_body).count("mig_reconfigure"), 0u);
  EXPECT_EQ(cp.Count("/register"), 1);
  bool waits = false;
  for (const std::string& line : agent.TakeLog()) waits |= line.find("waiting for MIG instance 3g.40gb@0") != std::string::npos;
  EXPECT_TRUE(waits);
}

TEST(FakeNvmlConfigTest, TranslatesTheFlagAndNamesBadItems) {
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  EXPECT_EQ(*FakeNvmlConfig("H100-80GB:2:mig", cat), "H100-80GB*2:mig=1");
  EXPECT_EQ(*FakeNvmlConfig("A100-40GB:4", cat), "A100-40GB*4");
  EXPECT_THAT(std::string(FakeNvmlConfig("H100-80GB:0", cat).status().message()), ::testing::HasSubstr("H100-80GB:0"));
  EXPECT_FALSE(FakeNvmlConfig("Z99:1", cat).ok());
  EXPECT_FALSE(FakeNvmlConfig("T4:1:mig", cat).ok());
  EXPECT_FALSE(FakeNvmlConfig("A100-40GB:9,H100-80GB:8", cat).ok());
}

}  // namespace
}  // namespace tessera::node
