// UsageMeter: the header's worked example, counters that go back, a tenant joined before the
// meter started, a GPU without a model, departures (including a job shorter than a look), and
// the flush at shutdown.
#include "tessera/node/usage_meter.h"

#include <gtest/gtest.h>

namespace tessera::node {
namespace {

constexpr uint64_t kSecondNs = 1'000'000'000;

NodeStatus OneTenant(const TenantStatus& t, int gpu = 0) {
  NodeStatus s;
  s.exists = true;
  s.gpus.push_back(GpuStatus{.gpu = gpu, .arbiter_alive = true, .tenants = {t}});
  return s;
}

TenantStatus Job42() {
  return TenantStatus{.name = "physics.42", .index = 0, .used_bytes = 2ULL << 30, .peak_bytes = 3ULL << 30,
                      .share = 500, .account = "physics", .workload = "slurm-job-42", .joined_s = 1000};
}

TEST(UsageMeterTest, HeaderWorkedExample) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 60, .start_s = 900});
  TenantStatus t = Job42();
  std::vector<api::UsageSample> due;
  for (int64_t now = 1000; now <= 1060; ++now) {
    t.charged_ns = static_cast<uint64_t>(now - 1000) * kSecondNs / 5;  // 12 s of GPU time by 1060
    t.launches = static_cast<uint64_t>(now - 1000) * 10;
    auto got = meter.Observe(OneTenant(t), now);
    due.insert(due.end(), got.begin(), got.end());
  }
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].tenant, "physics");
  EXPECT_EQ(due[0].workload, "slurm-job-42");
  EXPECT_EQ(due[0].model, "A100-40GB");
  EXPECT_EQ(due[0].gpu, "0");
  EXPECT_EQ(due[0].partition, "share");
  EXPECT_EQ(due[0].start_s, 1000);
  EXPECT_EQ(due[0].end_s, 1060);
  EXPECT_EQ(due[0].seq, 1000);
  EXPECT_EQ(due[0].gpu_milli_s_allocated, 30000);
  EXPECT_EQ(due[0].gpu_milli_s_used, 12000);
  EXPECT_EQ(due[0].memory_mib_s, 2048 * 60);
  EXPECT_EQ(due[0].peak_memory_mib, 3072);
  EXPECT_EQ(due[0].kernel_launches, 600);
  // It leaves at 1075, last seen at 1074.
  for (int64_t now = 1061; now <= 1074; ++now) ASSERT_TRUE(meter.Observe(OneTenant(t), now).empty());
  const auto last = meter.Observe(NodeStatus{.exists = true}, 1075);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].start_s, 1060);
  EXPECT_EQ(last[0].end_s, 1074);
  EXPECT_EQ(last[0].gpu_milli_s_allocated, 500 * 14);
  EXPECT_EQ(last[0].gpu_milli_s_used, 0);  // its charge did not grow after 1060
  EXPECT_TRUE(meter.Observe(NodeStatus{.exists = true}, 1076).empty());
}

// A tenant on a MIG instance is not on the lease board (no charge grows): its instance is its
// alone, billed as partition "mig" with used = allocated, while it runs and when it departs.
TEST(UsageMeterTest, ATenantOnAMigInstanceIsBilledTheWholeInstanceAsUsed) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 60, .start_s = 900});
  TenantStatus t = Job42();
  t.mig = true;
  t.share = 140;  // 1g.5gb: 1 of 7 slices
  std::vector<api::UsageSample> due;
  for (int64_t now = 1000; now <= 1060; ++now) {
    auto got = meter.Observe(OneTenant(t), now);
    due.insert(due.end(), got.begin(), got.end());
  }
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].partition, "mig");
  EXPECT_EQ(due[0].gpu_milli_s_allocated, 140 * 60);
  EXPECT_EQ(due[0].gpu_milli_s_used, 140 * 60);
  const auto last = meter.Depart({Departure{.name = t.name, .account = t.account, .workload = t.workload, .gpu = 0,
                                            .share = 140, .joined_s = 1000, .left_s = 1070, .mig = true}});
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].partition, "mig");
  EXPECT_EQ(last[0].start_s, 1060);
  EXPECT_EQ(last[0].gpu_milli_s_used, 140 * 10);
}

// The node directory's share is milli of the GPU for every joiner (node_dir.h): a DRA claim of
// 0.3 GPU (share 300) is billed 300 milli-GPU-s a second allocated, not a whole GPU.
TEST(UsageMeterTest, AShareIsBilledAsMilliOfTheGpu) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 60, .start_s = 900});
  TenantStatus t{.name = "team-a/c/gpu/gpu-0", .index = 0, .share = 300, .account = "team-a",
                 .workload = "team-a/c", .joined_s = 1000};
  std::vector<api::UsageSample> due;
  for (int64_t now = 1000; now <= 1060; ++now) {
    auto got = meter.Observe(OneTenant(t), now);
    due.insert(due.end(), got.begin(), got.end());
  }
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].tenant, "team-a");
  EXPECT_EQ(due[0].gpu_milli_s_allocated, 300 * 60);
}

// The header's relabel example: a device-plugin slot named by its devices until the kubelet's
// PodResources says whose it is (NodeDir::Relabel).
TEST(UsageMeterTest, ARelabelledTenantBillsWhatCameBeforeUnderTheOldLabels) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 60, .start_s = 900});
  TenantStatus t{.name = "k8s-dp/U::0", .index = 0, .share = 500, .account = "kubernetes",
                 .workload = "k8s-device-plugin", .joined_s = 1000};
  ASSERT_TRUE(meter.Observe(OneTenant(t), 1000).empty());
  ASSERT_TRUE(meter.Observe(OneTenant(t), 1001).empty());
  t.account = "team-a";
  t.workload = "team-a/web-0/server";
  const auto before = meter.Observe(OneTenant(t), 1002);
  ASSERT_EQ(before.size(), 1u);
  EXPECT_EQ(before[0].tenant, "kubernetes");
  EXPECT_EQ(before[0].workload, "k8s-device-plugin");
  EXPECT_EQ(before[0].start_s, 1000);
  EXPECT_EQ(before[0].end_s, 1001);
  const auto after = meter.Flush(1010);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].tenant, "team-a");
  EXPECT_EQ(after[0].workload, "team-a/web-0/server");
  EXPECT_EQ(after[0].start_s, 1001);
}

// A job on two GPUs (a multi-GPU Slurm step: one tenant under both GPUs in the status) is a source
// per GPU: one sample for each GPU per period, never an interval closed and reopened at every look
// (which gave conflicting samples of one seq: `tessera bill` refused the ledger).
TEST(UsageMeterTest, ATenantOnTwoGpusIsMeteredOnEachOnce) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}, {1, "A100-40GB"}}, .period_s = 60, .start_s = 900});
  std::vector<api::UsageSample> due;
  for (int64_t now = 1000; now <= 1060; ++now) {
    NodeStatus s = OneTenant(Job42(), 0);
    s.gpus.push_back(GpuStatus{.gpu = 1, .arbiter_alive = true, .tenants = {Job42()}});
    auto got = meter.Observe(s, now);
    due.insert(due.end(), got.begin(), got.end());
  }
  ASSERT_EQ(due.size(), 2u);
  EXPECT_EQ(due[0].gpu, "0");
  EXPECT_EQ(due[1].gpu, "1");
  for (const api::UsageSample& x : due) {
    EXPECT_EQ(x.seq, 1000);
    EXPECT_EQ(x.start_s, 1000);
    EXPECT_EQ(x.end_s, 1060);
    EXPECT_EQ(x.gpu_milli_s_allocated, 30000);
  }
}

TEST(UsageMeterTest, ACounterThatGoesBackCountsFromZero) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 10, .start_s = 0});
  TenantStatus t = Job42();
  t.charged_ns = 4 * kSecondNs;
  (void)meter.Observe(OneTenant(t), 1000);  // joined at 1000 with 4 s already charged: its own
  t.charged_ns = 1 * kSecondNs;              // a new arbiter re-added the slot: 1 s since
  const auto due = meter.Observe(OneTenant(t), 1010);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].gpu_milli_s_used, 5000);
}

TEST(UsageMeterTest, ATenantJoinedBeforeTheMeterStartedIsMeteredFromTheStart) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 10, .start_s = 2000});
  TenantStatus t = Job42();  // joined at 1000
  t.charged_ns = 100 * kSecondNs;
  EXPECT_TRUE(meter.Observe(OneTenant(t), 2000).empty());
  t.charged_ns += 3 * kSecondNs;
  const auto due = meter.Observe(OneTenant(t), 2010);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].start_s, 2000);  // not 1000: that time is not this meter's to bill
  EXPECT_EQ(due[0].gpu_milli_s_used, 3000);
}

TEST(UsageMeterTest, UsedIsNeverMoreThanOneGpuAndAllocatedNeverMoreThanTheGpu) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 10, .start_s = 0});
  TenantStatus t = Job42();
  t.share = 4000;  // a weight above 1000 milli is still one GPU at most
  (void)meter.Observe(OneTenant(t), 1000);
  t.charged_ns = 50 * kSecondNs;
  const auto due = meter.Observe(OneTenant(t), 1010);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].gpu_milli_s_allocated, 10000);
  EXPECT_EQ(due[0].gpu_milli_s_used, 10000);
}

TEST(UsageMeterTest, AGpuWithoutAModelIsNamedNotMetered) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 1, .start_s = 0});
  EXPECT_TRUE(meter.Observe(OneTenant(Job42(), 1), 1000).empty());
  EXPECT_TRUE(meter.Observe(OneTenant(Job42(), 1), 1005).empty());
  EXPECT_EQ(meter.unmetered(), std::vector<std::string>{"physics.42"});
}

TEST(UsageMeterTest, FlushClosesEveryOpenInterval) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 60, .start_s = 0});
  TenantStatus t = Job42();
  t.account.clear();
  t.workload.clear();
  (void)meter.Observe(OneTenant(t), 1000);
  const auto due = meter.Flush(1003);
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].tenant, "physics.42");  // no labels: the registry name
  EXPECT_EQ(due[0].workload, "physics.42");
  EXPECT_EQ(due[0].end_s, 1003);
  EXPECT_TRUE(meter.Flush(1004).empty());
}

TEST(UsageMeterTest, ADepartureClosesTheIntervalWithTheSlotsLastCounters) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 60, .start_s = 0});
  TenantStatus t = Job42();
  t.charged_ns = 1 * kSecondNs;
  (void)meter.Observe(OneTenant(t), 1000);
  t.charged_ns = 2 * kSecondNs;
  (void)meter.Observe(OneTenant(t), 1005);
  const auto due = meter.Depart({{.name = "physics.42", .account = "physics", .workload = "slurm-job-42", .gpu = 0,
                                  .share = 500, .joined_s = 1000, .left_s = 1007, .launches = 9,
                                  .charged_ns = 7 * kSecondNs / 2}});
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].start_s, 1000);
  EXPECT_EQ(due[0].end_s, 1007);
  EXPECT_EQ(due[0].gpu_milli_s_used, 3500);  // all of it: 1 s before the first look counts too
  EXPECT_EQ(due[0].kernel_launches, 9);
  EXPECT_TRUE(meter.Observe(NodeStatus{.exists = true}, 1008).empty()) << "closed twice";
}

// A departure recorded while the entry is still listed (a copy that lingers, e.g. a member the
// node could not judge dead): the entry's next interval starts where the departure's sample
// ended, so the ledger never gets one seq twice with different spans (`tessera bill` refuses that
// as a conflicting resend; seen in the Slurm suite with a SIGKILLed slurmstepd).
TEST(UsageMeterTest, AnEntryListedAgainAfterItsDepartureStartsWhereItsLastSampleEnded) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 60, .start_s = 0});
  TenantStatus t = Job42();
  (void)meter.Observe(OneTenant(t), 1000);
  const auto departed = meter.Depart({{.name = "physics.42", .account = "physics", .workload = "slurm-job-42",
                                       .gpu = 0, .share = 500, .joined_s = 1000, .left_s = 1000}});
  ASSERT_EQ(departed.size(), 1u);
  EXPECT_EQ(departed[0].start_s, 1000);
  EXPECT_EQ(departed[0].end_s, 1001);
  (void)meter.Observe(OneTenant(t), 1002);
  (void)meter.Observe(OneTenant(t), 1030);
  const auto flushed = meter.Flush(1031);
  ASSERT_EQ(flushed.size(), 1u);
  EXPECT_EQ(flushed[0].start_s, 1001);
  EXPECT_NE(flushed[0].seq, departed[0].seq);
  EXPECT_EQ(flushed[0].end_s, 1031);
}

// The entry went between TakeDepartures and ReadStatus: a look no longer sees it and closes its
// interval, and its departure comes at the next round. Only what came after that sample is
// billed, from where it ended (seen in the Slurm suite with three held jobs ending at once: the
// departure was billed again from the job's start, a second sample of one seq).
TEST(UsageMeterTest, ADepartureAfterALookThatNoLongerSawTheEntryBillsOnlyWhatCameAfter) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 2, .start_s = 0});
  TenantStatus t = Job42();
  t.joined_s = 52;
  t.launches = 4;
  (void)meter.Observe(OneTenant(t), 52);
  t.launches = 6;
  const auto periodic = meter.Observe(OneTenant(t), 54);
  ASSERT_EQ(periodic.size(), 1u);
  EXPECT_EQ(periodic[0].start_s, 52);
  EXPECT_EQ(periodic[0].kernel_launches, 6);
  const auto vanished = meter.Observe(NodeStatus{.exists = true}, 55);
  ASSERT_EQ(vanished.size(), 0u);  // nothing since 54 that the look saw: last seen at 54
  const auto departed = meter.Depart({{.name = "physics.42", .account = "physics", .workload = "slurm-job-42",
                                       .gpu = 0, .share = 500, .joined_s = 52, .left_s = 56, .launches = 9}});
  ASSERT_EQ(departed.size(), 1u);
  EXPECT_EQ(departed[0].start_s, 54);
  EXPECT_NE(departed[0].seq, periodic[0].seq);
  EXPECT_EQ(departed[0].end_s, 56);
  EXPECT_EQ(departed[0].kernel_launches, 3);  // 9 in all, 6 billed before
  EXPECT_TRUE(meter.Depart({{.name = "physics.42", .account = "physics", .workload = "slurm-job-42", .gpu = 0,
                             .share = 500, .joined_s = 52, .left_s = 56, .launches = 9}})
                  .empty())
      << "a departure taken twice is billed once";
}

TEST(UsageMeterTest, AJobThatCameAndWentBetweenTwoLooksIsBilled) {
  UsageMeter meter({.gpu_models = {{0, "A100-40GB"}}, .period_s = 60, .start_s = 0});
  const auto due = meter.Depart({{.name = "chem.7", .account = "chem", .workload = "slurm-job-7", .gpu = 0,
                                  .share = 250, .joined_s = 2000, .left_s = 2000, .launches = 3,
                                  .charged_ns = kSecondNs / 10}});
  ASSERT_EQ(due.size(), 1u);
  EXPECT_EQ(due[0].tenant, "chem");
  EXPECT_EQ(due[0].workload, "slurm-job-7");
  EXPECT_EQ(due[0].start_s, 2000);
  EXPECT_EQ(due[0].end_s, 2001);  // its started second
  EXPECT_EQ(due[0].gpu_milli_s_allocated, 250);
  EXPECT_EQ(due[0].gpu_milli_s_used, 100);
  EXPECT_EQ(due[0].kernel_launches, 3);
}

}  // namespace
}  // namespace tessera::node
