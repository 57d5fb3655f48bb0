// The DRA driver's own publishing (SliceSync) against the fake API server, in memory, on a
// fake clock: the slices at start (a stale one of an earlier run deleted), nothing sent while the
// inventory stays the same, a new generation when it changes, the periodic repair of a slice
// someone deleted, a failed pass retried at the next step, an inventory error; and the thread of
// Start, waited on by a handshake.
#include "tessera/integrations/k8s/slice_sync.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>

#include "tests/k8s/fake_kube_api.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using testing::FakeKubeApi;
using testing::FakeKubeTransport;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr char kSlices[] = "resourceslices";

std::vector<api::InventoryGpu> A100s(int count, bool second_in_mig = false) {
  std::vector<api::InventoryGpu> out;
  for (int i = 0; i < count; ++i) {
    out.push_back({.index = i, .uuid = "GPU-" + std::to_string(i), .model = "A100-40GB", .memory_mib = 40537,
                   .mig_enabled = second_in_mig && i == 1});
  }
  return out;
}

struct Fixture {
  FakeKubeApi api;
  FakeKubeTransport transport{api};
  KubeClient client{transport};
  SlicePublisher publisher{client, GpuModelCatalog::Builtin(), {.slices = {.node_name = "n1"}}};
  StatusOr<std::vector<api::InventoryGpu>> gpus = A100s(2);
  SliceSync sync{publisher, [this] { return gpus; }, {.inventory_interval = 30s, .repair_interval = 600s}};
  SliceSync::Clock::time_point t0 = SliceSync::Clock::time_point() + 1000h;
};

TEST(K8sSliceSync, PublishesAtStartOnChangeAndRepairsPeriodically) {
  Fixture f;
  f.api.Put(kSlices, {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceSlice"},
                      {"metadata", {{"name", "n1-gpu.tessera.io-3"}}},
                      {"spec", {{"driver", "gpu.tessera.io"}, {"nodeName", "n1"},
                                {"pool", {{"name", "n1"}, {"generation", 7}, {"resourceSliceCount", 4}}}}}});
  SliceSync::Outcome r = f.sync.Step(f.t0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ(**r, (PublishResult{.created = 1, .deleted = 1, .generation = 8}));
  EXPECT_EQ(f.api.Objects(kSlices).size(), 1u);
  EXPECT_EQ(f.api.Objects(kSlices).count("n1-gpu.tessera.io-0"), 1u);

  // The same GPUs 30 s later: no request at all.
  const size_t requests = f.api.requests().size();
  r = f.sync.Step(f.t0 + 30s);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  EXPECT_EQ(f.api.requests().size(), requests);

  // GPU 1 put into MIG mode: the next generation.
  f.gpus = A100s(2, /*second_in_mig=*/true);
  r = f.sync.Step(f.t0 + 60s);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ(**r, (PublishResult{.created = 1, .updated = 1, .generation = 9}));

  // Someone deletes a slice; unchanged GPUs are not re-read from the server until the repair.
  ASSERT_EQ(f.api.Handle("DELETE", "/apis/resource.k8s.io/v1/resourceslices/n1-gpu.tessera.io-1", {}, "").status, 200);
  r = f.sync.Step(f.t0 + 90s);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_value());
  r = f.sync.Step(f.t0 + 60s + 600s);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ(**r, (PublishResult{.created = 1, .updated = 1, .generation = 10}));
  EXPECT_EQ(f.api.Objects(kSlices).size(), 2u);

  // The repair of an untouched pool writes nothing.
  const int writes = f.api.writes();
  r = f.sync.Step(f.t0 + 60s + 1200s);
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ(**r, (PublishResult{.unchanged = 2, .generation = 10}));
  EXPECT_EQ(f.api.writes(), writes);
}

TEST(K8sSliceSync, AFailedPassIsRetriedAtTheNextStep) {
  Fixture f;
  f.api.FailNext("GET", 503, "etcdserver: request timed out");
  SliceSync::Outcome r = f.sync.Step(f.t0);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(r.status().message(), HasSubstr("HTTP 503: etcdserver: request timed out"));
  EXPECT_TRUE(f.api.Objects(kSlices).empty());
  r = f.sync.Step(f.t0 + 30s);
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
  EXPECT_EQ((*r)->created, 1);

  // A change whose pass fails is published at the next step, though the GPUs are the same then.
  f.gpus = A100s(1);
  f.api.FailNext("PUT", 500, "boom");
  r = f.sync.Step(f.t0 + 60s);
  EXPECT_FALSE(r.ok());
  r = f.sync.Step(f.t0 + 90s);
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
  EXPECT_EQ((*r)->updated, 1);
  EXPECT_EQ(f.api.Objects(kSlices).at("n1-gpu.tessera.io-0")["spec"]["devices"].size(), 1u);
}

TEST(K8sSliceSync, AnInventoryErrorIsNamedAndNothingIsSent) {
  Fixture f;
  f.gpus = UnavailableError("nvmlDeviceGetCount: Driver Not Loaded");
  SliceSync::Outcome r = f.sync.Step(f.t0);
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.status().message(), "GPU inventory: nvmlDeviceGetCount: Driver Not Loaded");
  EXPECT_TRUE(f.api.requests().empty());
}

TEST(K8sSliceSync, StartStepsOnItsThreadUntilStop) {
  Fixture f;
  SliceSync sync(f.publisher, [&f] { return f.gpus; }, {.inventory_interval = 1ms, .repair_interval = 600s});
  std::promise<PublishResult> first;
  bool reported = false;
  sync.Start([&](const SliceSync::Outcome& o) {
    if (!reported && o.ok() && o->has_value()) {
      reported = true;
      first.set_value(**o);
    }
  });
  EXPECT_EQ(first.get_future().get(), (PublishResult{.created = 1, .generation = 1}));
  sync.Stop();
  sync.Stop();  // twice is fine
  EXPECT_EQ(f.api.Objects(kSlices).size(), 1u);
}

}  // namespace
}  // namespace tessera::k8s
