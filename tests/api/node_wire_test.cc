// The node-agent wire contract (tessera/api/node_wire.h): every message survives its own codec,
// and each decoder refuses an unknown field, a wrong type or a value out of range with an error
// that names the field.
#include "tessera/api/node_wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::api {
namespace {

using ::testing::HasSubstr;

// The refusal of `decode(body)`: its code, message and the field it names.
template <typename Decode>
std::pair<std::string, std::string> Refusal(Decode decode, std::string_view body) {
  std::string field;
  auto got = decode(body, &field);
  if (got.ok()) return {"accepted", ""};
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status().message();
  return {std::string(got.status().message()), field};
}

NodeInventory TwoGpus() {
  return {16000, 131072,
          {{0, "GPU-a", "A100-40GB", 40960, false}, {1, "GPU-b", "A100-40GB", 40960, true}},
          "0123456789abcdef0123456789abcdef", "0.1.0"};
}

TEST(NodeWireTest, InventoryRoundTrips) {
  const NodeInventory inv = TwoGpus();
  const std::string body = EncodeNodeInventory(inv);
  StatusOr<NodeInventory> back = DecodeNodeInventory(body, nullptr);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, inv);
  EXPECT_EQ(EncodeNodeInventory(*back), body);  // canonical: the same bytes again
  NodeInventory bare = inv;
  bare.agent_id.clear();
  bare.agent_version.clear();
  EXPECT_EQ(EncodeNodeInventory(bare).find("agent_"), std::string::npos);  // optional fields left out
}

// Found by the fuzzer's round trip: what a decoder defaults to "" (it refuses an empty string)
// is left out by its encoder, so every decoded message encodes to one that decodes again.
TEST(NodeWireTest, DefaultedFieldsAreLeftOutSoEveryDecodedMessageDecodesAgain) {
  StatusOr<NodeInventory> inv = DecodeNodeInventory(R"({"cpu_milli": 1, "memory_mib": 1, "gpus": [{"model": "A"}]})",
                                                    nullptr);
  ASSERT_TRUE(inv.ok());
  StatusOr<NodeInventory> again = DecodeNodeInventory(EncodeNodeInventory(*inv), nullptr);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(*again, *inv);
  StatusOr<DesiredState> desired = DecodeDesiredState(R"({"workloads": []})", nullptr);
  ASSERT_TRUE(desired.ok());
  EXPECT_EQ(EncodeDesiredState(*desired), R"({"workloads":[]})");
  EXPECT_EQ(DecodeRegisterAnswer("{}", nullptr).status().message(), "node: missing");
  EXPECT_EQ(DecodeHeartbeatAnswer(R"({"node": "n1"})", nullptr).status().message(), "state: missing");
}

TEST(NodeWireTest, InventoryEncodingIsTheDocumentedOne) {
  EXPECT_EQ(EncodeNodeInventory({8000, 32768, {{0, "GPU-x", "A100-40GB", 40960, false}}, "", ""}),
            R"({"cpu_milli":8000,"gpus":[{"index":0,"memory_mib":40960,"mig_enabled":false,"model":"A100-40GB",)"
            R"("uuid":"GPU-x"}],"memory_mib":32768})");
}

TEST(NodeWireTest, InventoryRefusalsNameTheField) {
  auto decode = [](std::string_view b, std::string* f) { return DecodeNodeInventory(b, f); };
  EXPECT_EQ(Refusal(decode, R"({"cpu_milli": 1, "memory_mib": 1, "gpu": []})"),
            std::make_pair(std::string("gpu: unknown field (known: cpu_milli, memory_mib, gpus, agent_version, "
                                       "agent_id, mig_reconfigure)"),
                           std::string("gpu")));
  EXPECT_EQ(Refusal(decode, R"({"memory_mib": 1})").second, "cpu_milli");
  EXPECT_EQ(Refusal(decode, R"({"cpu_milli": 1, "memory_mib": 1, "gpus": [{"model": "A", "mig": true}]})").second,
            "gpus[0].mig");
  EXPECT_EQ(Refusal(decode, R"({"cpu_milli": 1, "memory_mib": 1, "gpus": [{"index": 1, "model": "A"}]})").first,
            "gpus[0].index: GPUs are listed by index from 0 (expected 0)");
  EXPECT_EQ(Refusal(decode, R"({"cpu_milli": 1, "memory_mib": 1, "gpus": [7]})").first,
            "gpus[0]: expected an object, got an integer");
  EXPECT_EQ(Refusal(decode, R"({"cpu_milli": "1", "memory_mib": 1})").first,
            "cpu_milli: expected an integer, got a string");
  std::string many = R"({"cpu_milli": 1, "memory_mib": 1, "gpus": [)";
  for (int i = 0; i < 17; ++i) many += std::string(i ? "," : "") + R"({"model": "A"})";
  EXPECT_EQ(Refusal(decode, many + "]}").first, "gpus: 17 GPUs; a node has at most 16");
  EXPECT_THAT(Refusal(decode, "[1]").first, HasSubstr("must be a JSON object"));
}

// Issue 32: a MIG node registers the instances that exist (and whether its agent may change them),
// and its desired state carries each MIG GPU's target layout.
TEST(NodeWireTest, MigInstancesAndTheReconfigureFlagRoundTrip) {
  NodeInventory inv{8000, 32768, {{0, "", "H100-80GB", 81559, true}}, "", ""};
  inv.gpus[0].mig_instances = {{"3g.40gb", 0, true}, {"1g.10gb", 4, false}};
  inv.mig_reconfigure = true;
  const std::string body = EncodeNodeInventory(inv);
  EXPECT_EQ(body,
            R"({"cpu_milli":8000,"gpus":[{"index":0,"memory_mib":81559,"mig_enabled":true,"mig_instances":[)"
            R"({"in_use":true,"profile":"3g.40gb","start":0},{"profile":"1g.10gb","start":4}],"model":"H100-80GB"}],)"
            R"("memory_mib":32768,"mig_reconfigure":true})");
  StatusOr<NodeInventory> back = DecodeNodeInventory(body, nullptr);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, inv);
  EXPECT_EQ(EncodeNodeInventory(*back), body);
  // An older agent's inventory (no instances, no flag) still decodes: neither is required.
  StatusOr<NodeInventory> old = DecodeNodeInventory(EncodeNodeInventory(TwoGpus()), nullptr);
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->mig_reconfigure);
  EXPECT_TRUE(old->gpus[1].mig_instances.empty());
}

TEST(NodeWireTest, MigInstanceRefusalsNameTheField) {
  auto decode = [](std::string_view b, std::string* f) { return DecodeNodeInventory(b, f); };
  const std::string head = R"({"cpu_milli": 1, "memory_mib": 1, "gpus": [{"model": "H100-80GB", "mig_enabled": true, )";
  EXPECT_EQ(Refusal(decode, head + R"("mig_instances": [{"profile": "3g.40gb", "start": 8}]}]})").first,
            "gpus[0].mig_instances[0].start: 8 is out of range 0..7");
  EXPECT_EQ(Refusal(decode, head + R"("mig_instances": [{"start": 0}]}]})").second, "gpus[0].mig_instances[0].profile");
  EXPECT_EQ(Refusal(decode, head + R"("mig_instances": [{"profile": "1g.10gb", "start": 0, "busy": 1}]}]})").second,
            "gpus[0].mig_instances[0].busy");
  EXPECT_EQ(Refusal(decode, R"({"cpu_milli": 1, "memory_mib": 1, "gpus": [{"model": "A", "mig_instances": )"
                            R"([{"profile": "1g.10gb", "start": 0}]}]})")
                .first,
            "gpus[0].mig_instances: MIG instances on a GPU without MIG");
  EXPECT_EQ(Refusal(decode, R"({"cpu_milli": 1, "memory_mib": 1, "mig_reconfigure": 1})").first,
            "mig_reconfigure: expected a boolean, got an integer");
}

TEST(NodeWireTest, DesiredMigLayoutsRoundTripAndAreLeftOutWhenNone) {
  DesiredState s{"n1", NodeState::kReady, {}};
  s.gpus = {{0, "3g.40gb@0,3g.40gb@4"}, {1, ""}};
  const std::string body = EncodeDesiredState(s);
  EXPECT_EQ(body, R"({"gpus":[{"index":0,"mig_layout":"3g.40gb@0,3g.40gb@4"},{"index":1,"mig_layout":""}],)"
                  R"("node":"n1","state":"ready","workloads":[]})");
  StatusOr<DesiredState> back = DecodeDesiredState(body, nullptr);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(EncodeDesiredState({"n1", NodeState::kReady, {}}).find("gpus"), std::string::npos);
  auto decode = [](std::string_view b, std::string* f) { return DecodeDesiredState(b, f); };
  EXPECT_EQ(Refusal(decode, R"({"workloads": [], "gpus": [{"index": 0}]})").second, "gpus[0].mig_layout");
  EXPECT_EQ(Refusal(decode, R"({"workloads": [], "gpus": [{"index": 0, "mig_layout": ""}, )"
                            R"({"index": 0, "mig_layout": ""}]})")
                .first,
            "gpus[1].index: GPU 0 is given twice");
  EXPECT_EQ(Refusal(decode, R"({"workloads": [], "gpus": [{"index": 16, "mig_layout": ""}]})").second, "gpus[0].index");
}

TEST(NodeWireTest, RegisterAnswerRoundTrips) {
  const RegisterAnswer a{"n1", NodeState::kCordoned};
  StatusOr<RegisterAnswer> back = DecodeRegisterAnswer(EncodeRegisterAnswer(a), nullptr);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, a);
  auto decode = [](std::string_view b, std::string* f) { return DecodeRegisterAnswer(b, f); };
  EXPECT_EQ(Refusal(decode, R"({"node": "n1", "state": "ready", "x": 1})").second, "x");
}

TEST(NodeWireTest, HeartbeatRoundTrips) {
  const Heartbeat h{{{7, 3, ""}, {8, -1, std::string(kViolatedLimit)}},
                    {{8, std::string(kViolatedLimit), "GPU 0: 1400 MiB used, limit 1024 MiB + 500 MiB"}},
                    {}};
  const std::string body = EncodeHeartbeat(h);
  StatusOr<Heartbeat> back = DecodeHeartbeat(body, nullptr);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, h);
  EXPECT_EQ(EncodeHeartbeat({{{7, 3, ""}}, {}, {}}), R"({"finished":[{"exit_code":3,"id":7}]})");
}

TEST(NodeWireTest, AnEmptyHeartbeatIsAnEmptyBody) {
  EXPECT_EQ(EncodeHeartbeat({}), "");
  StatusOr<Heartbeat> back = DecodeHeartbeat("", nullptr);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->empty());
  back = DecodeHeartbeat("{}", nullptr);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->empty());
}

TEST(NodeWireTest, HeartbeatRefusalsNameTheField) {
  auto decode = [](std::string_view b, std::string* f) { return DecodeHeartbeat(b, f); };
  EXPECT_EQ(Refusal(decode, R"({"finished": [{"id": 7, "exit_kode": 1}]})"),
            std::make_pair(std::string("finished[0].exit_kode: unknown field (known: id, exit_code, reason)"),
                           std::string("finished[0].exit_kode")));
  EXPECT_EQ(Refusal(decode, R"({"finished": [{"id": 7, "reason": "oom"}]})"),
            std::make_pair(std::string("finished[0].reason: 'oom' is not an end reason (violated_limit, mps_unavailable, no_tenant_uid)"),
                           std::string("finished[0].reason")));
  // Both end reasons are also event kinds.
  StatusOr<Heartbeat> mps = DecodeHeartbeat(
      R"({"finished": [{"id": 7, "exit_code": 126, "reason": "mps_unavailable"}], "events": [{"id": 7, "kind": "mps_unavailable"}]})",
      nullptr);
  ASSERT_TRUE(mps.ok()) << mps.status().message();
  EXPECT_EQ(mps->finished.at(0).reason, kMpsUnavailable);
  EXPECT_EQ(mps->events.at(0).kind, kMpsUnavailable);
  EXPECT_EQ(Refusal(decode, R"({"finished": [{"exit_code": 1}]})").first, "finished[0].id: missing");
  EXPECT_EQ(Refusal(decode, R"({"finished": [{"id": 7, "exit_code": 256}]})").first,
            "finished[0].exit_code: 256 is out of range -255..255");
  EXPECT_EQ(Refusal(decode, R"({"events": [{"id": 7, "kind": "oom"}]})").second, "events[0].kind");
  // gpu_time_recharged is an event kind only, not an end reason.
  StatusOr<Heartbeat> recharged =
      DecodeHeartbeat(R"({"events": [{"id": 7, "kind": "gpu_time_recharged", "detail": "GPU 0: ..."}]})", nullptr);
  ASSERT_TRUE(recharged.ok()) << recharged.status().message();
  EXPECT_EQ(recharged->events.at(0).kind, kGpuTimeRecharged);
  EXPECT_EQ(Refusal(decode, R"({"finished": [{"id": 7, "reason": "gpu_time_recharged"}]})").second,
            "finished[0].reason");
  EXPECT_EQ(Refusal(decode, R"({"events": [{"id": 0, "kind": "violated_limit"}]})").second, "events[0].id");
  EXPECT_EQ(Refusal(decode, R"({"events": ["x"]})").second, "events[0]");
  EXPECT_EQ(Refusal(decode, R"({"finished": {}})").first, "finished: expected an array, got an object");
  EXPECT_EQ(Refusal(decode, R"({"finish": []})").second, "finish");
}

TEST(NodeWireTest, NodeConditionsRoundTripAndRefusalsNameTheField) {
  const Heartbeat h{{}, {}, {{std::string(kConditionNvml), false, "GPU 1: GPU is lost"}, {"future.thing", true, ""}}};
  const std::string body = EncodeHeartbeat(h);
  EXPECT_EQ(body, R"({"conditions":[{"detail":"GPU 1: GPU is lost","ok":false,"type":"nvml"},)"
                  R"({"ok":true,"type":"future.thing"}]})");
  StatusOr<Heartbeat> back = DecodeHeartbeat(body, nullptr);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, h);
  EXPECT_FALSE(back->empty());
  auto decode = [](std::string_view b, std::string* f) { return DecodeHeartbeat(b, f); };
  EXPECT_EQ(Refusal(decode, R"({"conditions": [{"type": "nvml"}]})").first, "conditions[0].ok: missing");
  EXPECT_EQ(Refusal(decode, R"({"conditions": [{"type": "nvml", "ok": "no"}]})").second, "conditions[0].ok");
  EXPECT_EQ(Refusal(decode, R"({"conditions": [{"type": "NVML!", "ok": true}]})").first,
            "conditions[0].type: 'NVML!' is not a condition type (1..64 of a-z, 0-9, '_', '.', '-')");
  EXPECT_EQ(Refusal(decode, R"({"conditions": [{"type": "nvml", "ok": true}, {"type": "nvml", "ok": false}]})"),
            std::make_pair(std::string("conditions[1].type: 'nvml' is given twice"),
                           std::string("conditions[1].type")));
  EXPECT_EQ(Refusal(decode, R"({"conditions": [{"type": "nvml", "ok": true, "why": "x"}]})").second,
            "conditions[0].why");
  std::string many = R"({"conditions": [)";
  for (int i = 0; i < 17; ++i) many += (i ? "," : "") + std::string(R"({"ok": true, "type": "c)") + std::to_string(i) + R"("})";
  EXPECT_EQ(Refusal(decode, many + "]}").first, "conditions: at most 16 conditions");
}

// Issue 34: the node directory's other tenants travel as the whole list, only when it changed:
// absent is "unchanged", [] is "none any more", and an agent that sends none still decodes.
TEST(NodeWireTest, LocalSlotsRoundTripAndAnEmptyListIsNotLeftOut) {
  Heartbeat h;
  h.local_slots = std::vector<LocalSlot>{{"k8s-dra/ns/c", {0}, 600, 10240, ""}, {"p", {1, 3}, 1000, 0, "MIG-1"}};
  const std::string body = EncodeHeartbeat(h);
  EXPECT_EQ(body, R"({"local_slots":[{"gpus":[0],"mem_mib":10240,"milli":600,"tenant":"k8s-dra/ns/c"},)"
                  R"({"gpus":[1,3],"mem_mib":0,"mig_instance":"MIG-1","milli":1000,"tenant":"p"}]})");
  StatusOr<Heartbeat> back = DecodeHeartbeat(body, nullptr);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, h);
  Heartbeat none_left;
  none_left.local_slots = std::vector<LocalSlot>{};
  EXPECT_FALSE(none_left.empty());
  EXPECT_EQ(EncodeHeartbeat(none_left), R"({"local_slots":[]})");
  StatusOr<Heartbeat> left = DecodeHeartbeat(R"({"local_slots":[]})", nullptr);
  ASSERT_TRUE(left.ok()) << left.status().message();
  ASSERT_TRUE(left->local_slots.has_value());
  EXPECT_TRUE(left->local_slots->empty());
  StatusOr<Heartbeat> unchanged = DecodeHeartbeat(R"({"finished": [{"id": 7}]})", nullptr);
  ASSERT_TRUE(unchanged.ok());
  EXPECT_FALSE(unchanged->local_slots.has_value());
  EXPECT_EQ(EncodeHeartbeat(Heartbeat{}), "");
}

TEST(NodeWireTest, LocalSlotRefusalsNameTheField) {
  auto decode = [](std::string_view b, std::string* f) { return DecodeHeartbeat(b, f); };
  EXPECT_EQ(Refusal(decode, R"({"local_slots": [{"tenant": "a", "gpus": [0]}]})").first, "local_slots[0].milli: missing");
  EXPECT_EQ(Refusal(decode, R"({"local_slots": [{"tenant": "a", "gpus": [0], "milli": 1001}]})").second,
            "local_slots[0].milli");
  EXPECT_EQ(Refusal(decode, R"({"local_slots": [{"tenant": "a", "gpus": [16], "milli": 1}]})").first,
            "local_slots[0].gpus[0]: expected a GPU index 0..15, got 16");
  EXPECT_EQ(Refusal(decode, R"({"local_slots": [{"tenant": "a", "gpus": [1, 1], "milli": 1}]})").second,
            "local_slots[0].gpus[1]");
  EXPECT_EQ(Refusal(decode, R"({"local_slots": [{"tenant": "a", "gpus": [], "milli": 1}]})").second,
            "local_slots[0].gpus");
  EXPECT_EQ(Refusal(decode, R"({"local_slots": [{"tenant": "a", "gpus": [0], "milli": 1, "pid": 4}]})").second,
            "local_slots[0].pid");
  EXPECT_EQ(Refusal(decode, R"({"local_slots": [{"tenant": "a", "gpus": [0], "milli": 1},)"
                            R"({"tenant": "a", "gpus": [1], "milli": 1}]})").first,
            "local_slots[1].tenant: 'a' is given twice");
  EXPECT_EQ(Refusal(decode, R"({"local_slots": {}})").second, "local_slots");
  std::string many = R"({"local_slots": [)";
  for (int i = 0; i < 65; ++i) many += (i ? "," : "") + std::string(R"({"gpus":[0],"milli":1,"tenant":"t)") + std::to_string(i) + R"("})";
  EXPECT_EQ(Refusal(decode, many + "]}").first, "local_slots: at most 64 local slots");
}

TEST(NodeWireTest, HeartbeatAnswerRoundTrips) {
  const HeartbeatAnswer a{"n1", NodeState::kReady, {4, 9}};
  StatusOr<HeartbeatAnswer> back = DecodeHeartbeatAnswer(EncodeHeartbeatAnswer(a), nullptr);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, a);
  EXPECT_EQ(EncodeHeartbeatAnswer({"n1", NodeState::kReady, {}}), R"({"ignored":[],"node":"n1","state":"ready"})");
  auto decode = [](std::string_view b, std::string* f) { return DecodeHeartbeatAnswer(b, f); };
  EXPECT_EQ(Refusal(decode, R"({"node": "n1", "state": "Ready", "ignored": []})"),
            (std::pair<std::string, std::string>{"state: 'Ready' is not ready, cordoned or lost", "state"}));
  EXPECT_EQ(Refusal(decode, R"({"node": "n1", "state": "ready", "ignored": ["4"]})").second, "ignored[0]");
}

// Issue 32: the answer may name the desired state's version; an answer without one (an older
// control plane) still decodes, with none.
TEST(NodeWireTest, AHeartbeatAnswerCarriesTheDesiredVersionWhenItHasOne) {
  const HeartbeatAnswer a{"n1", NodeState::kReady, {}, "00ff00ff00ff00ff"};
  EXPECT_EQ(EncodeHeartbeatAnswer(a),
            R"({"desired_version":"00ff00ff00ff00ff","ignored":[],"node":"n1","state":"ready"})");
  StatusOr<HeartbeatAnswer> back = DecodeHeartbeatAnswer(EncodeHeartbeatAnswer(a), nullptr);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, a);
  StatusOr<HeartbeatAnswer> old = DecodeHeartbeatAnswer(R"({"node": "n1", "state": "ready", "ignored": []})", nullptr);
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->desired_version, "");
  auto decode = [](std::string_view b, std::string* f) { return DecodeHeartbeatAnswer(b, f); };
  EXPECT_EQ(Refusal(decode, R"({"node": "n1", "state": "ready", "ignored": [], "desired_version": "ABC"})"),
            (std::pair<std::string, std::string>{"desired_version: expected 16 lowercase hex digits, got 'ABC'",
                                                 "desired_version"}));
}

// The header's worked examples (FNV-1a 64), and a desired state's version is its body's.
TEST(NodeWireTest, TheDesiredVersionIsTheFnvHashOfTheBodyAndChangesWithIt) {
  EXPECT_EQ(DesiredVersion(""), "cbf29ce484222325");
  EXPECT_EQ(DesiredVersion("a"), "af63dc4c8601ec8c");
  DesiredState s{"n1", NodeState::kReady, {}};
  const std::string idle = DesiredVersion(EncodeDesiredState(s));
  EXPECT_EQ(idle, DesiredVersion(R"({"node":"n1","state":"ready","workloads":[]})"));
  s.state = NodeState::kCordoned;
  EXPECT_NE(DesiredVersion(EncodeDesiredState(s)), idle);
}

DesiredState TwoWorkloads() {
  DesiredState s{"n1", NodeState::kReady, {}};
  s.workloads.push_back({.id = 7,
                         .tenant = "ml",
                         .mode = "fraction(500,2048MiB)",
                         .gpu_milli = 500,
                         .gpu_mem_mib = 2048,
                         .priority = -3,
                         .mig_profile = "",
                         .command = {"/bin/sh", "-c", "", "exit 3"},
                         .pods = {{{1}, -1}}});
  s.workloads.push_back({.id = 8,
                         .tenant = "vision",
                         .mode = "mig:3g.40gb",
                         .gpu_milli = 1000,
                         .gpu_mem_mib = 0,
                         .priority = 0,
                         .mig_profile = "3g.40gb",
                         .command = {},
                         .pods = {{{0}, 4}, {{2, 3}, -1}}});
  return s;
}

TEST(NodeWireTest, DesiredStateRoundTrips) {
  const DesiredState s = TwoWorkloads();
  const std::string body = EncodeDesiredState(s);
  StatusOr<DesiredState> back = DecodeDesiredState(body, nullptr);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, s);
  EXPECT_EQ(EncodeDesiredState(*back), body);
  EXPECT_EQ(EncodeDesiredState({"n1", NodeState::kReady, {}}), R"({"node":"n1","state":"ready","workloads":[]})");
  for (NodeState st : {NodeState::kReady, NodeState::kCordoned, NodeState::kLost})
    EXPECT_EQ(ParseNodeState(NodeStateName(st)).value(), st);
}

TEST(NodeWireTest, DesiredStateDefaultsWhatTheControlPlaneMayLeaveOut) {
  StatusOr<DesiredState> s = DecodeDesiredState(
      R"({"workloads": [{"id": 5, "tenant": "t", "mode": "exclusive", "pods": [{"gpus": [0]}]}]})", nullptr);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->workloads.size(), 1u);
  EXPECT_EQ(s->workloads[0].gpu_milli, 1000);
  EXPECT_EQ(s->workloads[0].gpu_mem_mib, 0);
  EXPECT_EQ(s->workloads[0].pods[0].mig_start, -1);
  EXPECT_TRUE(s->workloads[0].command.empty());
}

TEST(NodeWireTest, DesiredStateRefusalsNameTheField) {
  auto decode = [](std::string_view b, std::string* f) { return DecodeDesiredState(b, f); };
  const std::string w = R"({"id": 5, "tenant": "t", "mode": "exclusive", "pods": [{"gpus": [0]}])";
  EXPECT_EQ(Refusal(decode, R"({"workloads": [)" + w + R"(, "gpu_share": 3}]})"),
            std::make_pair(std::string("workloads[0].gpu_share: unknown field (known: id, tenant, mode, gpu_milli, "
                                       "gpu_mem_mib, priority, mig_profile, command, pods)"),
                           std::string("workloads[0].gpu_share")));
  EXPECT_EQ(Refusal(decode, R"({"node": "n1"})").first, "workloads: missing");
  EXPECT_EQ(Refusal(decode, R"({"workloads": [{"id": 5, "tenant": "t", "mode": "x", "pods": []}]})").second,
            "workloads[0].pods");
  EXPECT_EQ(Refusal(decode, R"({"workloads": [{"id": 5, "tenant": "t", "mode": "x", "pods": [{"gpus": [16]}]}]})")
                .second,
            "workloads[0].pods[0].gpus[0]");
  EXPECT_EQ(
      Refusal(decode, R"({"workloads": [{"id": 5, "tenant": "t", "mode": "x", "pods": [{"gpus": [0], "x": 1}]}]})")
          .second,
      "workloads[0].pods[0].x");
  EXPECT_EQ(Refusal(decode, R"({"workloads": [)" + w + R"(, "command": ["a", 1]}]})").second,
            "workloads[0].command[1]");
  EXPECT_EQ(Refusal(decode, R"({"workloads": [)" + w + R"(, "gpu_milli": 0}]})").first,
            "workloads[0].gpu_milli: 0 is out of range 1..1000");
  EXPECT_EQ(Refusal(decode, R"({"workloads": [{"tenant": "t", "mode": "x", "pods": [{"gpus": [0]}]}]})").first,
            "workloads[0].id: missing");
}

}  // namespace
}  // namespace tessera::api
