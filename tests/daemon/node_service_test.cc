// NodeService without HTTP (src/daemon/node_service.h): typed requests and a caller in, typed
// answers out, against a real SQLite store and a stand-in scheduler (NodeWorld): the header's
// worked example; registration by the same agent (restarted, a new token) and a second agent
// refused; a heartbeat from an unknown node and one that ends workloads; cordon, uncordon and
// drain with their events and audit records; a removal refused while the node holds work; the
// desired state of a node; callers whose role may not, or whose token is bound to another node.
#include "src/daemon/node_service.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "src/daemon/api_codec.h"
#include "src/daemon/workload_request.h"
#include "tests/daemon/service_test_store.h"

namespace tessera::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// The stand-in scheduler: nodes by name (in join order), the running jobs' pods and shapes.
struct FakeScheduler {
  std::vector<sched::LiveScheduler::NodeView> nodes;
  std::map<int64_t, std::vector<sched::PodPlacement>> pods;
  std::map<int64_t, WorkloadShape> shapes;
  std::vector<int64_t> completed, queued;
  int restores = 0, unparks = 0, gauges = 0, wakes = 0;

  sched::LiveScheduler::NodeView* Find(const std::string& name) {
    for (auto& n : nodes)
      if (n.name == name) return &n;
    return nullptr;
  }
  // Workload `id` runs on GPU `gpu` of node `name` with `milli`.
  void Run(int64_t id, const std::string& name, int gpu, int32_t milli) {
    sched::LiveScheduler::NodeView* n = Find(name);
    n->jobs.push_back(id);
    n->gpu_free_milli[static_cast<size_t>(gpu)] -= milli;
    pods[id] = {{name, static_cast<placement::GpuSet>(1u << gpu), -1}};
    std::string field;
    StatusOr<WorkloadRequest> req = DecodeWorkloadRequest(
        R"({"tenant":"ml","gpus":1,"gpu_milli":)" + std::to_string(milli) + R"(,"gpu_mem_mib":4096,"command":["train"]})",
        GpuModelCatalog::Builtin(), &field);
    EXPECT_TRUE(req.ok()) << req.status().message();
    StatusOr<WorkloadShape> shape =
        ResolveWorkload(*req, GpuModelCatalog::Builtin().Find("A100-40GB").value(), GpuModelCatalog::Builtin(), &field);
    EXPECT_TRUE(shape.ok()) << shape.status().message();
    shapes[id] = *shape;
  }
  std::vector<int64_t> Leave(const std::string& name) {
    std::vector<int64_t> out;
    if (sched::LiveScheduler::NodeView* n = Find(name)) out = n->jobs;
    for (int64_t id : out) pods.erase(id);
    std::erase_if(nodes, [&](const auto& n) { return n.name == name; });
    return out;
  }
};

class NodeServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenServiceTestStore("tessera-node-service", dir_, db_);
    ASSERT_NE(db_, nullptr);
    ASSERT_TRUE(db_->Transact([&](store::Transaction& tx) { return tx.CreateTenant({"ml", "", "{}"}); }).ok());
    NodeWorld w;
    w.mu = &mu_;
    w.nodes = &nodes_;
    w.lost = &lost_;
    w.node_timeout_s = 30;
    w.node_view = [this](const std::string& name) -> std::optional<sched::LiveScheduler::NodeView> {
      EXPECT_FALSE(mu_.try_lock()) << "the world is asked with its lock held";
      if (const auto* n = sched_.Find(name)) return *n;
      return std::nullopt;
    };
    w.node_views = [this] { return sched_.nodes; };
    w.placement_of = [this](int64_t id) {
      auto it = sched_.pods.find(id);
      return it == sched_.pods.end() ? std::vector<sched::PodPlacement>{} : it->second;
    };
    w.job_shape = [this](int64_t id) -> const WorkloadShape* {
      auto it = sched_.shapes.find(id);
      return it == sched_.shapes.end() ? nullptr : &it->second;
    };
    w.add_node = [this](const placement::NodeSpec& spec) -> Status {
      if (sched_.Find(spec.name)) return InvalidArgumentError("node '" + spec.name + "' is already in use");
      sched_.nodes.push_back({spec.name, sched::NodeState::kReady, spec.gpu_count,
                              std::vector<int32_t>(static_cast<size_t>(spec.gpu_count), 1000), {}});
      return Status::Ok();
    };
    w.remove_node = [this](const std::string& name) -> StatusOr<std::vector<int64_t>> {
      if (!sched_.Find(name)) return NotFoundError("node '" + name + "' not found");
      return sched_.Leave(name);
    };
    w.cordon = [this](const std::string& name) {
      sched_.Find(name)->state = sched::NodeState::kCordoned;
      return Status::Ok();
    };
    w.uncordon = [this](const std::string& name) {
      sched_.Find(name)->state = sched::NodeState::kReady;
      return Status::Ok();
    };
    w.drain = [this](const std::string& name) -> StatusOr<std::vector<int64_t>> {
      sched::LiveScheduler::NodeView* n = sched_.Find(name);
      n->state = sched::NodeState::kCordoned;
      std::vector<int64_t> ids = n->jobs;
      n->jobs.clear();
      for (int64_t id : ids) sched_.pods.erase(id);
      return ids;
    };
    w.complete = [this](int64_t id, int64_t) {
      sched_.completed.push_back(id);
      sched_.pods.erase(id);
      for (auto& n : sched_.nodes) std::erase(n.jobs, id);
    };
    w.queue = [this](const std::vector<int64_t>& ids) {
      sched_.queued.insert(sched_.queued.end(), ids.begin(), ids.end());
    };
    w.unpark = [this] { ++sched_.unparks; };
    w.restore = [this] { ++sched_.restores; };
    w.gauges = [this] { ++sched_.gauges; };
    w.wake = [this] { ++sched_.wakes; };
    w.mig_layouts = [](const std::string&, const KnownNode&) { return std::vector<api::DesiredGpu>{}; };
    service_ = std::make_unique<NodeService>(
        [this](std::string_view, const std::function<Status(store::Transaction&)>& fn) { return db_->Transact(fn); },
        clock_, std::move(w), GpuModelCatalog::Builtin());
  }
  void TearDown() override {
    service_.reset();
    db_.reset();
    std::filesystem::remove_all(dir_);
  }

  // The control plane's check (Impl::Check) for a role: the actions are about no tenant.
  static NodeCaller As(Role role, std::string token, std::string bound = "") {
    return {std::move(token), std::move(bound), [role](Action action) -> Status {
              const Decision d = Authorize({role, ""}, action, "", [](std::string_view) { return std::nullopt; });
              if (d == Decision::kAllow) return Status::Ok();
              return Status(StatusCode::kPermissionDenied, "this token's role may not " + std::string(ActionText(action)));
            }};
  }
  static NodeCaller Agent(std::string token = "tok_a") { return As(Role::kNodeAgent, std::move(token)); }
  static NodeCaller Admin() { return As(Role::kAdmin, "tok_admin"); }
  // A node of `gpus` A100-40GB, registered by agent instance `agent_id`.
  static api::NodeInventory Inventory(int gpus = 2, std::string agent_id = "a1") {
    api::NodeInventory inv{16000, 131072, {}, std::move(agent_id), "", false};
    for (int g = 0; g < gpus; ++g) inv.gpus.push_back({g, "GPU-" + std::to_string(g), "A100-40GB", 40960, false});
    return inv;
  }
  // A running workload of tenant ml, stored (the heartbeat ends it in the store).
  int64_t StoreRunning() {
    int64_t id = 0;
    EXPECT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      store::WorkloadRecord w;
      w.tenant = "ml";
      w.spec_json = "{}";
      w.state = api::WorkloadState::kRunning;
      TESSERA_ASSIGN_OR_RETURN(id, tx.InsertWorkload(w));
      return Status::Ok();
    }).ok());
    return id;
  }
  // The object events' "kind: detail" and the audit records' "action target actor", in order.
  std::vector<std::string> Events() {
    std::vector<std::string> out;
    EXPECT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      TESSERA_ASSIGN_OR_RETURN(auto all, tx.ListEventsAfter(0, 1000));
      for (const auto& e : all)
        if (e.subject == "node") out.push_back(e.event.kind + ": " + e.event.detail);
      return Status::Ok();
    }).ok());
    return out;
  }
  std::vector<std::string> Audit() {
    std::vector<std::string> out;
    EXPECT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      TESSERA_ASSIGN_OR_RETURN(auto all, tx.ListAudit(0, 1000));
      for (const auto& a : all) out.push_back(a.action + " " + a.target + " " + a.actor);
      return Status::Ok();
    }).ok());
    return out;
  }
  StatusOr<store::WorkloadRecord> Workload(int64_t id) {
    StatusOr<store::WorkloadRecord> w = store::WorkloadRecord{};
    EXPECT_TRUE(db_->Transact([&](store::Transaction& tx) -> Status {
      w = tx.GetWorkload(id);
      return Status::Ok();
    }).ok());
    return w;
  }

  std::filesystem::path dir_;
  std::unique_ptr<store::Store> db_;
  std::mutex mu_;
  std::map<std::string, KnownNode> nodes_;
  std::set<std::string> lost_;
  FakeScheduler sched_;
  FakeClock clock_{FromUnixMillis(1'000'000)};
  std::unique_ptr<NodeService> service_;
};

TEST_F(NodeServiceTest, HeaderExample) {
  StatusOr<api::RegisterAnswer> reg = service_->Register(Agent(), "n1", Inventory(1));
  ASSERT_TRUE(reg.ok()) << reg.status().message();
  EXPECT_EQ(*reg, (api::RegisterAnswer{"n1", api::NodeState::kReady}));
  ASSERT_NE(sched_.Find("n1"), nullptr);
  EXPECT_EQ(sched_.unparks, 1);
  EXPECT_EQ(sched_.gauges, 1);

  const Status second = service_->Register(Agent("tok_b"), "n1", Inventory(1, "b1")).status();
  EXPECT_EQ(second.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.message(), HasSubstr("node 'n1' is held by another agent (registered with token tok_a)"));
  EXPECT_THAT(second.message(), HasSubstr("no heartbeat for 30 s"));

  const int64_t id = StoreRunning();
  sched_.Run(id, "n1", 0, 500);
  clock_.Advance(std::chrono::milliseconds(1000));
  StatusOr<api::HeartbeatAnswer> beat = service_->Heartbeat(Agent(), "n1", {.finished = {{id, 0, ""}, {9, 1, ""}}});
  ASSERT_TRUE(beat.ok()) << beat.status().message();
  EXPECT_EQ(*beat, (api::HeartbeatAnswer{"n1", api::NodeState::kReady, {9},
                                         api::DesiredVersion(R"({"node":"n1","state":"ready","workloads":[]})")}));
  EXPECT_THAT(sched_.completed, ElementsAre(id));
  EXPECT_EQ(Workload(id)->state, api::WorkloadState::kCompleted);

  StatusOr<api::DesiredState> desired = service_->Desired(Agent(), "n1");
  ASSERT_TRUE(desired.ok()) << desired.status().message();
  EXPECT_EQ(*desired, (api::DesiredState{"n1", api::NodeState::kReady, {}, {}}));

  StatusOr<NodeOpResult> cordoned = service_->Apply(Admin(), "n1", NodeOp::kCordon);
  ASSERT_TRUE(cordoned.ok()) << cordoned.status().message();
  EXPECT_EQ(cordoned->state, api::NodeState::kCordoned);
  EXPECT_TRUE(cordoned->requeued.empty());

  StatusOr<RemovedNode> removed = service_->Remove(Admin(), "n1");
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(removed->was, api::NodeState::kCordoned);
  EXPECT_EQ(nodes_.count("n1"), 0u);
  EXPECT_EQ(sched_.Find("n1"), nullptr);

  const Status gone = service_->Heartbeat(Agent(), "n1", {}).status();
  EXPECT_EQ(gone.code(), StatusCode::kNotFound);
  EXPECT_EQ(gone.message(), "node 'n1' is not registered (register it again)");
  EXPECT_EQ(service_->Register(As(Role::kViewer, "tok_v"), "n1", Inventory(1)).status().code(),
            StatusCode::kPermissionDenied);

  EXPECT_THAT(Events(), ElementsAre("node.registered: ", "node.cordoned: ", "node.removed: was cordoned"));
  EXPECT_THAT(Audit(), ElementsAre("node.register nodes/n1 tok_a", "node.cordon nodes/n1 tok_admin",
                                   "node.remove nodes/n1 tok_admin"));
}

// Issue 32: the heartbeat's answer names the version of the desired state GET desired would
// answer, the same until something of it changes (here: a workload placed, then the node cordoned).
TEST_F(NodeServiceTest, TheHeartbeatsAnswerCarriesTheVersionOfTheDesiredStateAsItIsNow) {
  ASSERT_TRUE(service_->Register(Agent(), "n1", Inventory(1)).ok());
  auto version_now = [&] {
    StatusOr<api::DesiredState> desired = service_->Desired(Agent(), "n1");
    EXPECT_TRUE(desired.ok()) << desired.status().message();
    return desired.ok() ? api::DesiredVersion(api::EncodeDesiredState(*desired)) : "";
  };
  auto heard = [&] {
    StatusOr<api::HeartbeatAnswer> beat = service_->Heartbeat(Agent(), "n1", {});
    EXPECT_TRUE(beat.ok()) << beat.status().message();
    return beat.ok() ? beat->desired_version : "";
  };
  const std::string idle = heard();
  EXPECT_THAT(idle, ::testing::MatchesRegex("[0-9a-f]{16}"));
  EXPECT_EQ(idle, version_now());
  EXPECT_EQ(heard(), idle);
  sched_.Run(StoreRunning(), "n1", 0, 500);
  const std::string placed = heard();
  EXPECT_NE(placed, idle);
  EXPECT_EQ(placed, version_now());
  ASSERT_TRUE(service_->Apply(Admin(), "n1", NodeOp::kCordon).ok());
  EXPECT_NE(heard(), placed);
  EXPECT_EQ(heard(), version_now());
}

TEST_F(NodeServiceTest, TheSameAgentRegisteringAgainKeepsItsNodeAndNotesANewToken) {
  ASSERT_TRUE(service_->Register(Agent(), "n1", Inventory()).ok());
  const int64_t id = StoreRunning();
  sched_.Run(id, "n1", 1, 300);
  clock_.Advance(std::chrono::milliseconds(5000));
  // The agent restarted with another token: the same inventory keeps the node and its work.
  StatusOr<api::RegisterAnswer> again = service_->Register(Agent("tok_new"), "n1", Inventory());
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->state, api::NodeState::kReady);
  EXPECT_EQ(nodes_.at("n1").record.agent_token, "tok_new");
  EXPECT_EQ(nodes_.at("n1").last_heartbeat_ms, UnixMillis(clock_));
  EXPECT_THAT(sched_.Find("n1")->jobs, ElementsAre(id));
  EXPECT_EQ(Audit().size(), 1u);  // only the first registration is audited
}

TEST_F(NodeServiceTest, ANewInventoryReplacesTheNodeAndRequeuesItsWork) {
  ASSERT_TRUE(service_->Register(Agent(), "n1", Inventory(2)).ok());
  const int64_t id = StoreRunning();
  sched_.Run(id, "n1", 1, 300);
  ASSERT_TRUE(service_->Register(Agent(), "n1", Inventory(1)).ok());
  EXPECT_THAT(sched_.queued, ElementsAre(id));
  EXPECT_EQ(Workload(id)->state, api::WorkloadState::kPending);
  EXPECT_EQ(sched_.Find("n1")->gpu_count, 1);
  EXPECT_THAT(Events(), ElementsAre("node.registered: ", "node.registered: a new inventory; 1 workload requeued"));
}

TEST_F(NodeServiceTest, ADifferentAgentIsRefusedWhileTheNodeLivesAndWritesNothing) {
  ASSERT_TRUE(service_->Register(Agent(), "n1", Inventory()).ok());
  const Status st = service_->Register(Agent(), "n1", Inventory(2, "other")).status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(nodes_.at("n1").record.agent_id, "a1");
  EXPECT_EQ(Events().size(), 1u);
  // Once lost, the node is anyone's to take over.
  nodes_.erase("n1");
  sched_.Leave("n1");
  lost_.insert("n1");
  ASSERT_TRUE(service_->Register(Agent("tok_b"), "n1", Inventory(2, "other")).ok());
  EXPECT_EQ(lost_.count("n1"), 0u);
  EXPECT_EQ(Events().back(), "node.registered: back after it was lost");
}

TEST_F(NodeServiceTest, ABadInventoryIsRefusedNamingTheField) {
  std::string field;
  api::NodeInventory inv = Inventory(2);
  inv.gpus[1].model = "Z9000";  // not in the catalog (a second model is fine: issue 32)
  const Status st = service_->Register(Agent(), "n1", inv, &field).status();
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "gpus[1].model");
  field.clear();
  EXPECT_EQ(service_->Register(Agent(), "N 1", Inventory(), &field).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "node");
  EXPECT_TRUE(nodes_.empty());
}

// Issue 32: a node of two models registers; each GPU keeps its model for the scheduler, and the
// stored inventory lists them. Such a node cannot be in MIG mode (400 naming the GPU's field).
TEST_F(NodeServiceTest, AMixedModelInventoryRegistersWithEachGpusModel) {
  api::NodeInventory inv = Inventory(6);
  for (int g = 0; g < 2; ++g) inv.gpus[static_cast<size_t>(g)].model = "H100-80GB";
  std::string field;
  const auto& catalog = GpuModelCatalog::Builtin();
  const StatusOr<NodeInventory> resolved = ResolveNodeInventory("mix", inv, catalog, &field);
  ASSERT_TRUE(resolved.ok()) << resolved.status().ToString();
  const GpuModelId h100 = *catalog.Find("H100-80GB");
  const GpuModelId a100 = *catalog.Find("A100-40GB");
  EXPECT_EQ(resolved->spec.model, h100);
  EXPECT_EQ(resolved->spec.gpu_models, (std::vector<GpuModelId>{h100, h100, a100, a100, a100, a100}));
  EXPECT_NE(resolved->canonical_json.find("\"model\":\"A100-40GB\""), std::string::npos);
  ASSERT_TRUE(service_->Register(Agent(), "mix", inv, &field).ok()) << field;
  ASSERT_EQ(nodes_.count("mix"), 1u);
  EXPECT_EQ(nodes_.at("mix").spec.gpu_models.size(), 6u);
  // One model: no per-GPU list (the node is what it always was).
  EXPECT_TRUE(ResolveNodeInventory("one", Inventory(2), catalog, &field)->spec.gpu_models.empty());
  for (api::InventoryGpu& g : inv.gpus) g.mig_enabled = true;
  const Status mig = ResolveNodeInventory("mix", inv, catalog, &field).status();
  EXPECT_EQ(mig.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(field, "gpus[2].mig_enabled");
  EXPECT_THAT(std::string(mig.message()), ::testing::HasSubstr("several models (H100-80GB, A100-40GB)"));
}

TEST_F(NodeServiceTest, AHeartbeatEndsItsNodesWorkloadsAndNotesConditionChanges) {
  ASSERT_TRUE(service_->Register(Agent(), "n1", Inventory()).ok());
  const int64_t ok_id = StoreRunning(), bad_id = StoreRunning();
  sched_.Run(ok_id, "n1", 0, 500);
  sched_.Run(bad_id, "n1", 1, 500);
  api::Heartbeat beat;
  beat.finished = {{ok_id, 0, ""}, {bad_id, -1, std::string(api::kViolatedLimit)}};
  beat.events = {{bad_id, std::string(api::kViolatedLimit), "used 9000 MiB of 4096"}};
  beat.conditions = {{"nvml", false, "GPU 1: GPU is lost"}};
  StatusOr<api::HeartbeatAnswer> answer = service_->Heartbeat(Agent(), "n1", beat);
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_TRUE(answer->ignored.empty());
  EXPECT_EQ(Workload(ok_id)->state, api::WorkloadState::kCompleted);
  EXPECT_EQ(Workload(bad_id)->state, api::WorkloadState::kFailed);
  EXPECT_EQ(Workload(bad_id)->wait_reason, "violated_limit");
  EXPECT_THAT(sched_.completed, ElementsAre(ok_id, bad_id));
  EXPECT_EQ(nodes_.at("n1").conditions.at("nvml").detail, "GPU 1: GPU is lost");
  // The same condition again is no event; its flip back is.
  ASSERT_TRUE(service_->Heartbeat(Agent(), "n1", {.conditions = {{"nvml", false, "other"}}}).ok());
  ASSERT_TRUE(service_->Heartbeat(Agent(), "n1", {.conditions = {{"nvml", true, ""}}}).ok());
  EXPECT_THAT(Events(), ElementsAre("node.registered: ", "node.condition: nvml: not ok (GPU 1: GPU is lost)",
                                    "node.condition: nvml: ok"));
}

TEST_F(NodeServiceTest, AHeartbeatFromAnUnknownNodeIsNotFound) {
  const Status st = service_->Heartbeat(Agent(), "ghost", {}).status();
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), "node 'ghost' is not registered (register it again)");
  EXPECT_EQ(service_->Desired(Agent(), "ghost").status().message(), "node 'ghost' is not registered (register it again)");
}

TEST_F(NodeServiceTest, CordonUncordonAndDrainChangeTheNodeAndRequeueItsWork) {
  ASSERT_TRUE(service_->Register(Agent(), "n1", Inventory()).ok());
  const int64_t id = StoreRunning();
  sched_.Run(id, "n1", 0, 1000);
  ASSERT_TRUE(service_->Apply(Admin(), "n1", NodeOp::kCordon).ok());
  EXPECT_EQ(nodes_.at("n1").record.state, api::NodeState::kCordoned);
  EXPECT_EQ(service_->Heartbeat(Agent(), "n1", {})->state, api::NodeState::kCordoned);
  const int unparks = sched_.unparks;
  StatusOr<NodeOpResult> back = service_->Apply(Admin(), "n1", NodeOp::kUncordon);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->state, api::NodeState::kReady);
  EXPECT_EQ(sched_.unparks, unparks + 1);
  StatusOr<NodeOpResult> drained = service_->Apply(Admin(), "n1", NodeOp::kDrain);
  ASSERT_TRUE(drained.ok()) << drained.status().message();
  EXPECT_EQ(drained->state, api::NodeState::kCordoned);
  EXPECT_THAT(drained->requeued, ElementsAre(id));
  EXPECT_EQ(Workload(id)->state, api::WorkloadState::kPending);
  EXPECT_THAT(Events(), ElementsAre("node.registered: ", "node.cordoned: ", "node.uncordoned: ",
                                    "node.drained: 1 workload requeued"));
  EXPECT_EQ(service_->Apply(Admin(), "n2", NodeOp::kCordon).status().message(),
            "node 'n2' (registered and not lost) not found");
}

TEST_F(NodeServiceTest, RemovingANodeIsRefusedWhileItIsReadyOrHoldsWork) {
  ASSERT_TRUE(service_->Register(Agent(), "n1", Inventory()).ok());
  const int64_t id = StoreRunning();
  sched_.Run(id, "n1", 0, 500);
  Status st = service_->Remove(Admin(), "n1").status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(st.message(), HasSubstr("node 'n1' is ready: cordon it"));
  ASSERT_TRUE(service_->Apply(Admin(), "n1", NodeOp::kCordon).ok());
  st = service_->Remove(Admin(), "n1").status();
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(), "node 'n1' still runs workload " + std::to_string(id) +
                              ": drain it (requeues them) or wait until they end");
  EXPECT_EQ(nodes_.count("n1"), 1u);
  EXPECT_EQ(service_->Remove(Admin(), "n9").status().message(), "node 'n9' not found");
  // A lost node (stored; its work was requeued when it was lost) goes at once.
  ASSERT_TRUE(service_->Register(Agent("tok_7"), "n7", Inventory(1, "a7")).ok());
  nodes_.erase("n7");
  sched_.Leave("n7");
  lost_.insert("n7");
  StatusOr<RemovedNode> removed = service_->Remove(Admin(), "n7");
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(removed->was, api::NodeState::kLost);
  EXPECT_TRUE(lost_.empty());
}

TEST_F(NodeServiceTest, TheDesiredStateListsTheWorkloadsPlacedOnTheNode) {
  ASSERT_TRUE(service_->Register(Agent(), "n1", Inventory()).ok());
  ASSERT_TRUE(service_->Register(Agent("tok_2"), "n2", Inventory(2, "a2")).ok());
  sched_.Run(7, "n1", 1, 500);
  sched_.Run(8, "n2", 0, 500);
  StatusOr<api::DesiredState> desired = service_->Desired(Agent(), "n1");
  ASSERT_TRUE(desired.ok()) << desired.status().message();
  ASSERT_EQ(desired->workloads.size(), 1u);
  const api::DesiredWorkload& w = desired->workloads[0];
  EXPECT_EQ(w.id, 7);
  EXPECT_EQ(w.tenant, "ml");
  EXPECT_EQ(w.gpu_milli, 500);
  EXPECT_EQ(w.gpu_mem_mib, 4096);
  EXPECT_THAT(w.command, ElementsAre("train"));
  ASSERT_EQ(w.pods.size(), 1u);
  EXPECT_THAT(w.pods[0].gpus, ElementsAre(1));
  // The views: allocation per GPU and, for one node, its shares.
  StatusOr<NodeView> view = service_->Get(As(Role::kViewer, "tok_v"), "n1");
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_THAT(view->allocated_milli, ElementsAre(0, 500));
  ASSERT_TRUE(view->shares);
  ASSERT_EQ((*view->shares)[1].size(), 1u);
  EXPECT_EQ((*view->shares)[1][0].workload, 7);
  StatusOr<std::vector<NodeView>> all = service_->List(Admin());
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_FALSE((*all)[0].shares);
}

TEST_F(NodeServiceTest, ACallerWhoseRoleMayNotOrWhoseTokenIsBoundElsewhereIsRefused) {
  const NodeCaller tenant = As(Role::kTenantUser, "tok_t");
  EXPECT_EQ(service_->Register(tenant, "n1", Inventory()).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->Register(Admin(), "n1", Inventory()).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->List(tenant).status().code(), StatusCode::kPermissionDenied);
  ASSERT_TRUE(service_->Register(Agent(), "n1", Inventory()).ok());
  EXPECT_EQ(service_->Apply(Agent(), "n1", NodeOp::kDrain).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(service_->Remove(Agent(), "n1").status().code(), StatusCode::kPermissionDenied);
  const Status bound = service_->Heartbeat(As(Role::kNodeAgent, "tok_b", "n2"), "n1", {}).status();
  EXPECT_EQ(bound.code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(bound.message(), "this token is bound to node 'n2'; it may not act for node 'n1'");
  EXPECT_TRUE(nodes_.at("n1").record.state == api::NodeState::kReady);
  EXPECT_EQ(Audit().size(), 1u);
}

}  // namespace
}  // namespace tessera::daemon
