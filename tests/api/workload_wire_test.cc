// The workload wire contract (tessera/api/workload_wire.h): every message survives its own codec
// (Decode(Encode(x)) == x, and the same bytes again), and each decoder refuses an unknown field,
// a wrong type or a value out of range or set with an error that names the field.
#include "tessera/api/workload_wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::api {
namespace {

using ::testing::HasSubstr;

template <typename Decode>
std::pair<std::string, std::string> Refusal(Decode decode, std::string_view body) {
  std::string field;
  auto got = decode(body, &field);
  if (got.ok()) return {"accepted", ""};
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument) << got.status().message();
  return {std::string(got.status().message()), field};
}

WorkloadRequest Everything() {
  WorkloadRequest r;
  r.tenant = "ml";
  r.name = "train";
  r.qos = "guaranteed";
  r.gpu_milli = 500;
  r.gpu_mem_mib = 2048;
  r.mode = "mps";
  r.isolation = "process";
  r.latency_slo_ms = 12.5;
  r.priority = -3;
  r.cpu_milli = 2000;
  r.memory_mib = 8192;
  r.model = "A100-80GB";
  r.workload_class = "infer";
  r.label = "a";
  r.command = {"python", "", "--lr=1e-3"};
  return r;
}

WorkloadView Placed() {
  WorkloadView v;
  v.id = 7;
  v.tenant = "ml";
  v.state = WorkloadState::kRunning;
  v.qos = "Burstable";
  v.priority = 2;
  v.request = {.tenant = "ml", .gpus = 2, .qos = "Burstable", .priority = 2};
  v.mode = "exclusive";
  v.mode_reason = "whole GPUs";
  v.created_ms = 10;
  v.updated_ms = 20;
  v.version = 3;
  v.start_ms = 15;
  v.pods = {{"n1", {0, 1}, -1}, {"n2", {3}, 4}};
  return v;
}

template <typename T, typename Encode, typename Decode>
void ExpectRoundTrip(const T& x, Encode encode, Decode decode) {
  const std::string body = encode(x);
  auto back = decode(body, nullptr);
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << body;
  EXPECT_EQ(*back, x) << body;
  EXPECT_EQ(encode(*back), body);  // canonical: the same bytes again
}

TEST(WorkloadWireTest, RequestRoundTrips) {
  ExpectRoundTrip(Everything(), EncodeWorkloadRequest, DecodeWorkloadRequest);
  ExpectRoundTrip(WorkloadRequest{.tenant = "a"}, EncodeWorkloadRequest, DecodeWorkloadRequest);
  EXPECT_EQ(EncodeWorkloadRequest({.tenant = "a"}), R"({"gpus":1,"tenant":"a"})");  // defaults left out
}

TEST(WorkloadWireTest, RequestRefusalsNameTheField) {
  const auto decode = DecodeWorkloadRequest;
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1,"gpu":2})").second, "gpu");
  EXPECT_THAT(Refusal(decode, R"({"tenant":"a","gpus":1,"gpu":2})").first, HasSubstr("gpu: unknown field"));
  EXPECT_EQ(Refusal(decode, R"({"gpus":1})"), (std::pair<std::string, std::string>{"tenant: missing", "tenant"}));
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1,"gpu_milli":1500})").first,
            "gpu_milli: 1500 is out of range 1..1000");
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1.5})").second, "gpus");
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1,"qos":"Gold"})").second, "qos");
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1,"mode":"half"})").second, "mode");
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1,"isolation":"strong"})").second, "isolation");
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1,"latency_slo_ms":0})").second, "latency_slo_ms");
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1,"command":["p",3]})").second, "command[1]");
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1,"command":[""]})").second, "command[0]");
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":2,"gpu_milli":500,"gpu_mem_mib":1})").second, "gpu_milli");
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1,"gpu_milli":500})").second, "gpu_mem_mib");
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1,"mode":"exclusive","gpu_milli":5,"gpu_mem_mib":1})").second,
            "mode");
  EXPECT_EQ(Refusal(decode, R"({"tenant":"a","gpus":1,"mig_profile":"1g.10gb","vgpu_profile":"x"})").second,
            "vgpu_profile");
  EXPECT_EQ(Refusal(decode, "[1]").first, "the body must be a JSON object");
}

TEST(WorkloadWireTest, CreatedRoundTripsAndIsStrict) {
  ExpectRoundTrip(WorkloadCreated{7, "pending"}, EncodeWorkloadCreated, DecodeWorkloadCreated);
  EXPECT_EQ(EncodeWorkloadCreated({7, "pending"}), R"({"id":7,"state":"pending"})");
  EXPECT_EQ(Refusal(DecodeWorkloadCreated, R"({"id":0,"state":"pending"})").second, "id");
  EXPECT_EQ(Refusal(DecodeWorkloadCreated, R"({"id":1,"state":"pending","x":1})").second, "x");
}

TEST(WorkloadWireTest, ViewRoundTrips) {
  ExpectRoundTrip(Placed(), EncodeWorkloadView, DecodeWorkloadView);
  WorkloadView ended = Placed();
  ended.state = WorkloadState::kFailed;
  ended.reason = "violated_limit";
  ended.exit_code = -1;
  ended.name = "train";
  ended.request.name = "train";
  ended.events = std::vector<WorkloadHistoryEntry>{{10, "submitted", ""}, {20, "failed", "exit code 3"}};
  ExpectRoundTrip(ended, EncodeWorkloadView, DecodeWorkloadView);
  WorkloadView pending = Placed();
  pending.state = WorkloadState::kPending;
  pending.pods.clear();
  pending.start_ms.reset();
  pending.wait_reason = "";  // present though empty
  pending.mode.clear();
  ExpectRoundTrip(pending, EncodeWorkloadView, DecodeWorkloadView);
  EXPECT_THAT(EncodeWorkloadView(pending), HasSubstr(R"("wait_reason":"")"));
  EXPECT_THAT(EncodeWorkloadView(Placed()), HasSubstr(R"("placement":{"gpus":[0,1],"node":"n1"})"));
}

TEST(WorkloadWireTest, ViewRefusalsNameTheField) {
  std::string body = EncodeWorkloadView(Placed());
  auto with = [&](std::string_view from, std::string_view to) {
    std::string b = body;
    const size_t at = b.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return b.replace(at, from.size(), to);
  };
  EXPECT_EQ(Refusal(DecodeWorkloadView, with(R"("gpus":2,)", R"("gpus":2,"gpu":1,)")).second, "request.gpu");
  EXPECT_EQ(Refusal(DecodeWorkloadView, with(R"("version":3)", R"("version":3,"extra":1)")).second, "extra");
  EXPECT_EQ(Refusal(DecodeWorkloadView, with(R"("mig_start":4)", R"("mig_start":"4")")).second, "pods[1].mig_start");
  EXPECT_EQ(Refusal(DecodeWorkloadView, with(R"("placement":{"gpus":[0,1])", R"("placement":{"gpus":[0])")).second,
            "placement");
  EXPECT_EQ(Refusal(DecodeWorkloadView, with(R"("id":7)", R"("id":"7")")).second, "id");
}

TEST(WorkloadWireTest, EveryStateHasOneNameAndOthersAreRefused) {
  for (WorkloadState s : kWorkloadStates) {
    EXPECT_EQ(ParseWorkloadState(WorkloadStateName(s)).value(), s);
    WorkloadView v = Placed();
    v.state = s;
    ExpectRoundTrip(v, EncodeWorkloadView, DecodeWorkloadView);
  }
  EXPECT_FALSE(ParseWorkloadState("Running").ok());
  EXPECT_TRUE(IsEnded(WorkloadState::kRejected));
  EXPECT_FALSE(IsEnded(WorkloadState::kRunning));
  const std::string body = EncodeWorkloadView(Placed());
  std::string bad = body;
  bad.replace(bad.find(R"("running")"), 9, R"("runing")");
  EXPECT_EQ(Refusal(DecodeWorkloadView, bad),
            (std::pair<std::string, std::string>{
                "state: 'runing' is not pending, running, completed, failed, cancelled or rejected", "state"}));
}

TEST(WorkloadWireTest, PageRoundTrips) {
  ExpectRoundTrip(WorkloadPage{"", {}}, EncodeWorkloadPage, DecodeWorkloadPage);
  ExpectRoundTrip(WorkloadPage{"abc", {Placed(), Placed()}}, EncodeWorkloadPage, DecodeWorkloadPage);
  EXPECT_EQ(EncodeWorkloadPage({}), R"({"continue":null,"workloads":[]})");
  EXPECT_EQ(Refusal(DecodeWorkloadPage, R"({"continue":null,"workloads":[{"id":1}]})").second, "workloads[0].tenant");
}

}  // namespace
}  // namespace tessera::api
