// POST /v1/workloads bodies: the minimum body, every optional field, and one refusal per rule,
// each naming its field.
#include "src/daemon/workload_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::daemon {
namespace {

using ::testing::HasSubstr;

StatusOr<WorkloadRequest> Decode(std::string_view body, std::string* field) {
  return DecodeWorkloadRequest(body, GpuModelCatalog::Builtin(), field);
}

TEST(WorkloadRequest, TheMinimumBody) {
  std::string field = "x";
  auto r = Decode(R"({"tenant":"vision","gpus":1,"gpu_milli":500,"gpu_mem_mib":20480,"qos":"Burstable"})", &field);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(field, "");
  EXPECT_EQ(r->tenant, "vision");
  EXPECT_EQ(r->gpus, 1);
  EXPECT_EQ(r->gpu_milli, 500);
  EXPECT_EQ(r->gpu_mem_mib, 20480);
  EXPECT_EQ(r->qos, sched::QosClass::kBurstable);
  EXPECT_EQ(r->pods, 1);
  EXPECT_FALSE(r->mode.has_value());
  EXPECT_EQ(r->isolation, partition::Isolation::kNone);
}

// Issue 31: qos was required, so a tenant's default_qos never applied. Without it the request
// says the tenant's default is to be used, and encodes back without a qos (the round trip holds).
TEST(WorkloadRequest, WithoutQosTheTenantsDefaultIsToBeUsed) {
  auto r = Decode(R"({"tenant":"a","gpus":1})", nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->qos_from_tenant);
  const std::string encoded = EncodeWorkloadRequest(*r, GpuModelCatalog::Builtin());
  EXPECT_THAT(encoded, ::testing::Not(HasSubstr("qos")));
  auto again = Decode(encoded, nullptr);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *r);
  auto given = Decode(R"({"tenant":"a","gpus":1,"qos":"BestEffort"})", nullptr);
  ASSERT_TRUE(given.ok());
  EXPECT_FALSE(given->qos_from_tenant);
  EXPECT_EQ(given->qos, sched::QosClass::kBestEffort);
}

TEST(WorkloadRequest, EveryOptionalField) {
  auto r = Decode(R"({"tenant":"a","gpus":2,"qos":"guaranteed","priority":-5,"pods":4,"cpu_milli":8000,
                      "memory_mib":65536,"model":"NVIDIA H100 80GB HBM3","mig_profile":"3g.40gb","mode":"mig",
                      "isolation":"hardware","latency_slo_ms":12.5,"workload_class":"latency","label":"prod",
                      "name":"ranker"})", nullptr);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->qos, sched::QosClass::kGuaranteed);
  EXPECT_EQ(r->priority, -5);
  EXPECT_EQ(r->pods, 4);
  EXPECT_EQ(GpuModelCatalog::Builtin().info(*r->model).name, "H100-80GB");
  EXPECT_EQ(r->mig_profile, "3g.40gb");
  EXPECT_EQ(*r->mode, partition::SharingModeKind::kMig);
  EXPECT_EQ(r->isolation, partition::Isolation::kHardware);
  EXPECT_DOUBLE_EQ(*r->latency_slo_ms, 12.5);
  EXPECT_EQ(r->label, "prod");
  EXPECT_EQ(r->gpu_milli, 1000);
}

TEST(WorkloadRequest, EachRefusalNamesItsField) {
  struct Case {
    const char* body;
    const char* field;
    const char* says;
  };
  const Case cases[] = {
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","gpu_mili":5})", "gpu_mili", "unknown field"},
      {R"({"gpus":1,"qos":"Burstable"})", "tenant", "missing"},
      {R"({"tenant":"a","qos":"Burstable"})", "gpus", "missing"},
      {R"({"tenant":"a","gpus":1,"qos":null})", "qos", "expected a string"},
      {R"({"tenant":"","gpus":1,"qos":"Burstable"})", "tenant", "must not be empty"},
      {R"({"tenant":7,"gpus":1,"qos":"Burstable"})", "tenant", "expected a string, got an integer"},
      {R"({"tenant":"a","gpus":1.5,"qos":"Burstable"})", "gpus", "expected an integer, got a number"},
      {R"({"tenant":"a","gpus":"1","qos":"Burstable"})", "gpus", "expected an integer, got a string"},
      {R"({"tenant":"a","gpus":0,"qos":"Burstable"})", "gpus", "out of range 1..16"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","gpu_milli":-3})", "gpu_milli", "out of range"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","gpu_milli":1500})", "gpu_milli", "1500 is out of range 1..1000"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","gpu_mem_mib":18446744073709551615})", "gpu_mem_mib", "out of range"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","gpu_mem_mib":-1})", "gpu_mem_mib", "out of range"},
      {R"({"tenant":"a","gpus":2,"qos":"Burstable","gpu_milli":500,"gpu_mem_mib":1})", "gpu_milli", "needs gpus = 1"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","gpu_milli":500})", "gpu_mem_mib", "memory limit"},
      {R"({"tenant":"a","gpus":1,"qos":"Gold"})", "qos", "not Guaranteed, Burstable or BestEffort"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","model":"H900"})", "model", "unknown GPU model 'H900'"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","mig_profile":"9g.99gb"})", "mig_profile", "not a MIG profile"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","model":"T4","mig_profile":"1g.10gb"})", "mig_profile", "not a MIG profile of T4"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","vgpu_profile":"Z-1C"})", "vgpu_profile", "not a vGPU type"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","mig_profile":"1g.10gb","vgpu_profile":"H100-20C"})", "vgpu_profile", "not both"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","mode":"magic"})", "mode", "not exclusive, mig"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","mode":"mig"})", "mode", "needs mig_profile"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","mode":"exclusive","gpu_milli":300,"gpu_mem_mib":5})", "mode", "whole GPUs"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","isolation":"total"})", "isolation", "not none, process or hardware"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","latency_slo_ms":0})", "latency_slo_ms", "> 0"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","latency_slo_ms":"fast"})", "latency_slo_ms", "expected a number"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","pods":0})", "pods", "out of range 1..1024"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","priority":5000})", "priority", "out of range -1000..1000"},
      {R"({"tenant":"a","gpus":1,"qos":"Burstable","label":""})", "label", "must not be empty"},
  };
  for (const Case& c : cases) {
    std::string field;
    auto r = Decode(c.body, &field);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.body;
    EXPECT_EQ(field, c.field) << c.body;
    EXPECT_THAT(r.status().message(), HasSubstr(c.says)) << c.body;
    EXPECT_THAT(r.status().message(), HasSubstr(std::string(c.field) + ": ")) << c.body;
  }
}

TEST(WorkloadRequest, BodiesThatAreNotAnObject) {
  std::string field = "x";
  EXPECT_THAT(Decode("{\"tenant\": ", &field).status().message(), HasSubstr("not JSON (error at character 12, counting from 1)"));
  EXPECT_EQ(field, "");
  EXPECT_THAT(Decode("[1,2]", &field).status().message(), HasSubstr("must be a JSON object"));
  EXPECT_THAT(Decode("", &field).status().message(), HasSubstr("not JSON"));
}

}  // namespace
}  // namespace tessera::daemon
