#include "tessera/sim/multitenant.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace tessera::sim {
namespace {

using placement::NodeSpec;
using sched::Job;
using sched::QosClass;
using sched::Seconds;

GpuModelId Model(const char* name) { return *GpuModelCatalog::Builtin().Find(name); }

sched::TenantTree Tree(std::vector<std::pair<std::string, int64_t>> leaves) {
  std::vector<sched::TenantSpec> specs;
  for (auto& [name, gpus] : leaves) {
    sched::TenantSpec s;
    s.name = name;
    s.guaranteed[sched::kGpuMilliDim] = gpus * 1000;
    s.weight = static_cast<double>(std::max<int64_t>(1, gpus));
    specs.push_back(s);
  }
  return std::move(*sched::TenantTree::Create(specs, sched::ResourceSpace()));
}

// A whole-GPU job of the scenario's workload: ids count from 1 in the order jobs are listed.
WorkloadJob WholeGpuJob(sched::JobId id, sched::TenantIndex tenant, QosClass qos, int gpus,
                        int64_t submit, int64_t duration) {
  WorkloadJob w;
  w.job.id = id;
  w.job.tenant = tenant;
  w.job.qos = qos;
  w.job.pod = placement::TaskRequest{.cpu = CpuMilli{1000}, .memory = MiB{1024}, .num_gpu = gpus,
                                     .gpu_milli = kWholeGpu};
  w.job.submit = Seconds{submit};
  w.duration = Seconds{duration};
  return w;
}

TimedPod Pod(const std::string& name, int64_t creation, int64_t deletion, int gpus, int milli,
             const std::string& qos = "LS") {
  TimedPod p;
  p.pod.name = name;
  p.pod.request = placement::TaskRequest{.cpu = CpuMilli{1000}, .memory = MiB{1024}, .num_gpu = gpus,
                                         .gpu_milli = GpuMilli{milli}};
  p.creation = creation;
  p.scheduled = creation;
  p.deletion = deletion;
  p.qos = qos;
  return p;
}

TEST(TenantWorkload, IsSeededAndKeepsSubmissionsTogether) {
  std::vector<TimedPod> pods;
  for (int i = 0; i < 400; ++i)  // 100 submissions of 4 identical replicas each
    pods.push_back(Pod("p" + std::to_string(i), (i / 4) * 7200, (i / 4) * 7200 + 600 + i, 1, 100 + (i / 4) % 9 * 100, i % 2 ? "BE" : "LS"));
  pods.push_back(Pod("last", 800 * 7200, -1, 1, 1000));  // censored: draws a finished lifetime
  auto tree = Tree({{"big", 6}, {"small", 2}});
  WorkloadOptions opt;
  opt.horizon = Seconds{10 * 86400};
  auto a = BuildTenantWorkload(pods, tree, {0.75, 0.25}, opt);
  auto b = BuildTenantWorkload(pods, tree, {0.75, 0.25}, opt);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->size(), b->size());
  std::map<int, int> per_tenant;
  for (size_t i = 0; i < a->size(); ++i) {
    EXPECT_EQ((*a)[i].job.tenant, (*b)[i].job.tenant);
    EXPECT_EQ((*a)[i].job.id, static_cast<sched::JobId>(i + 1));
    if (i > 0) {
      EXPECT_LE((*a)[i - 1].job.submit, (*a)[i].job.submit);
    }
    EXPECT_LT((*a)[i].job.submit, opt.horizon);
    per_tenant[(*a)[i].job.tenant]++;
  }
  // Replicas of one submission (same shape, same hour) share a tenant.
  for (size_t i = 0; i + 1 < a->size(); ++i)
    if ((*a)[i].job.submit == (*a)[i + 1].job.submit && (*a)[i].job.pod == (*a)[i + 1].job.pod) {
      EXPECT_EQ((*a)[i].job.tenant, (*a)[i + 1].job.tenant);
    }
  // The larger guarantee takes the larger share (0.75) of the draws.
  EXPECT_GT(per_tenant[*tree.Find("big")], per_tenant[*tree.Find("small")]);
  // The censored pod drew the lifetime of a finished one (600 + i seconds).
  const WorkloadJob& last = a->back();
  EXPECT_GE(last.duration.count(), 600);
  EXPECT_LE(last.duration.count(), 1000);
  opt.seed = 43;
  auto c = BuildTenantWorkload(pods, tree, {0.75, 0.25}, opt);
  int differ = 0;
  for (size_t i = 0; i < c->size(); ++i) differ += (*c)[i].job.tenant != (*a)[i].job.tenant;
  EXPECT_GT(differ, 0);
}

TEST(TenantWorkload, AppArrivalProfilesMoveTheDrawDayByDay) {
  // Two applications over a 2-day DLRM trace: the first created GPUs only on day 0, the second
  // only on day 1. The openb busy window maps onto those days: every submission in its first
  // half goes to the first leaf (rank 1), every one in its second half to the second, whatever
  // the skew says. Without profiles both leaves draw on both days.
  std::vector<TimedPod> pods;
  for (int i = 0; i < 200; ++i) pods.push_back(Pod("p" + std::to_string(i), i * 3600, i * 3600 + 600, 1, 100 + i % 9 * 100));
  auto tree = Tree({{"first", 6}, {"second", 2}});
  WorkloadOptions opt;
  opt.horizon = Seconds{10 * 86400};
  opt.time_compression = 1;
  const std::vector<std::vector<double>> arrivals = {{5, 0}, {0, 3}};
  opt.app_arrivals = &arrivals;
  auto w = BuildTenantWorkload(pods, tree, {0.5, 0.5}, opt);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const int64_t t0 = 2 * 3600, t1 = 199 * 3600;  // 1st percentile and last creation
  int checked = 0;
  for (const WorkloadJob& j : *w) {
    const double x = static_cast<double>(j.job.submit.count()) / static_cast<double>(t1 - t0);
    if (x == 0.5) continue;
    EXPECT_EQ(tree.name(j.job.tenant), x < 0.5 ? "first" : "second") << "submitted at " << j.job.submit.count();
    ++checked;
  }
  EXPECT_GT(checked, 190);
  opt.app_arrivals = nullptr;
  auto flat = BuildTenantWorkload(pods, tree, {0.5, 0.5}, opt);
  ASSERT_TRUE(flat.ok());
  int second_early = 0;
  for (const WorkloadJob& j : *flat)
    second_early += tree.name(j.job.tenant) == "second" && j.job.submit.count() < (t1 - t0) / 2;
  EXPECT_GT(second_early, 10);
}

TEST(TenantWorkload, AppArrivalsParseEveryRankAndDayOrSayWhatIsWrong) {
  auto ok = ParseAppArrivals("rank,app_name,day,gpus_created\n1,a,0,2\n1,a,1,0\n2,b,1,4\n2,b,0,1\n", "a.csv");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_THAT(*ok, ::testing::ElementsAre(::testing::ElementsAre(2, 0), ::testing::ElementsAre(1, 4)));
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {"rank,gpus_created\n1,2\n", "a.csv:1:1: missing column 'day'"},
           {"rank,day,gpus_created\n", "a.csv:1:1: no rows"},
           {"rank,day,gpus_created\n0,0,1\n", "a.csv:2:1: rank: expected an integer in [1, 1e+06]"},
           {"rank,day,gpus_created\n1,0.5,1\n", "a.csv:2:3: day: expected an integer in [0, 1e+06]"},
           {"rank,day,gpus_created\n1,0,-1\n", "a.csv:2:5: gpus_created: expected a number in [0, 1e+12]"},
           {"rank,day,gpus_created\n1,0,x\n", "a.csv:2:5: gpus_created: expected a number"},
           {"rank,day,gpus_created\n1,0,1\n1,0,2\n", "a.csv:3:1: rank 1 day 0 appears twice"},
           {"rank,day,gpus_created\n1,0,1\n2,1,2\n", "a.csv:1:1: expected every rank 1..2 on every day 0..1, got 2 rows"},
           {"rank,day,gpus_created\n1000000,1000000,1\n", "expected every rank 1..1000000 on every day 0..1000000, got 1 rows"}}) {
    auto r = ParseAppArrivals(c.text, "a.csv");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr(c.error)) << c.text;
  }
  EXPECT_EQ(ReadAppArrivals("/nonexistent/arrivals.csv").status().code(), StatusCode::kNotFound);
}

TEST(DedicatedSlices, ApportionEachModelByGuarantee) {
  std::vector<NodeSpec> nodes = {{"a", CpuMilli{8000}, MiB{8192}, 4, Model("V100M16")},
                                 {"b", CpuMilli{8000}, MiB{8192}, 4, Model("V100M16")},
                                 {"c", CpuMilli{4000}, MiB{4096}, 2, Model("T4")}};
  auto tree = Tree({{"x", 6}, {"y", 4}});
  auto slices = CarveDedicatedSlices(tree, nodes);
  ASSERT_TRUE(slices.ok()) << slices.status().ToString();
  auto gpus = [&](sched::TenantIndex t, const char* model) {
    int n = 0;
    for (const NodeSpec& s : (*slices)[t])
      if (s.model == Model(model)) n += s.gpu_count;
    return n;
  };
  EXPECT_EQ(gpus(0, "V100M16") + gpus(0, "T4"), 6);
  EXPECT_EQ(gpus(1, "V100M16") + gpus(1, "T4"), 4);
  EXPECT_EQ(gpus(0, "T4"), 1);  // 2 T4 split 60/40 -> 1.2 / 0.8 -> 1 / 1
  EXPECT_EQ(gpus(1, "T4"), 1);
  for (const NodeSpec& s : (*slices)[0]) {
    if (s.name == "a/x") {
      EXPECT_EQ(s.cpu.value(), 8000);  // a whole node keeps all its CPU
    }
  }
  auto over = Tree({{"x", 8}, {"y", 4}});
  EXPECT_FALSE(CarveDedicatedSlices(over, nodes).ok());
}

// A tenant with more demand than its slice next to an idle one: dedicated runs half the work,
// shared all of it (borrowing the idle slice), with the same jobs.
TEST(DedicatedVsShared, SharingUsesTheIdleSlice) {
  std::vector<NodeSpec> nodes = {{"n", CpuMilli{64000}, MiB{65536}, 4, Model("V100M16")}};
  auto tree = Tree({{"busy", 2}, {"idle", 2}});
  std::vector<WorkloadJob> jobs;
  for (int i = 0; i < 8; ++i) {
    WorkloadJob w;
    w.job.id = i + 1;
    w.job.tenant = 0;
    w.job.qos = QosClass::kBurstable;
    w.job.pod = placement::TaskRequest{.cpu = CpuMilli{1000}, .memory = MiB{1024}, .num_gpu = 1,
                                       .gpu_milli = GpuMilli{500}};
    w.job.submit = Seconds{0};
    w.duration = Seconds{1000};
    jobs.push_back(w);
  }
  ScenarioOptions opt;
  opt.horizon = Seconds{1000};
  opt.scheduler.min_runtime = Seconds{0};
  auto d = RunDedicated(tree, nodes, jobs, opt);
  auto s = RunShared(tree, nodes, jobs, opt);
  ASSERT_TRUE(d.ok() && s.ok());
  // Dedicated: busy's 2 GPUs hold two half-GPU jobs at a time (whole GPUs only): 1 GPU of 4
  // requested, 2 held. Shared: all 8 halves fit on the 4 GPUs.
  EXPECT_DOUBLE_EQ(d->gpu_allocation_pct, 25.0);
  EXPECT_DOUBLE_EQ(d->gpu_held_pct, 50.0);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_pct, 100.0);
  EXPECT_EQ(s->jobs_completed, 0);  // they end exactly at the horizon
  EXPECT_DOUBLE_EQ(s->wait_seconds_p99, 0.0);
  EXPECT_DOUBLE_EQ(d->wait_seconds_p99, 1000.0);  // still waiting at the horizon
  EXPECT_DOUBLE_EQ(s->guarantee_violations, 0.0);
  EXPECT_EQ(d->preemptions + s->preemptions, 0);
}

TEST(DedicatedVsShared, CountsGuaranteeViolations) {
  // One GPU; "lender" is guaranteed it but "borrower" holds it with a Guaranteed... no: with a
  // Burstable job, and preemption off, the lender's entitled job waits: a violation for the
  // whole time it waits.
  std::vector<NodeSpec> nodes = {{"n", CpuMilli{64000}, MiB{65536}, 1, Model("V100M16")}};
  auto tree = Tree({{"lender", 1}, {"borrower", 0}});
  std::vector<WorkloadJob> jobs = {WholeGpuJob(1, 1, QosClass::kBurstable, 1, 0, 500),
                                   WholeGpuJob(2, 0, QosClass::kBurstable, 1, 100, 500)};
  ScenarioOptions opt;
  opt.horizon = Seconds{2000};
  opt.scheduler.preemption = false;
  auto off = RunShared(tree, nodes, jobs, opt);
  ASSERT_TRUE(off.ok());
  EXPECT_DOUBLE_EQ(off->guarantee_violations, 400.0);  // 100 -> 500
  opt.scheduler.preemption = true;
  opt.scheduler.min_runtime = Seconds{0};
  auto on = RunShared(tree, nodes, jobs, opt);
  ASSERT_TRUE(on.ok());
  EXPECT_DOUBLE_EQ(on->guarantee_violations, 0.0);
  EXPECT_EQ(on->preemptions, 1);
  // The borrower ran 100 s of its 500 before the preemption threw them away: 100 of the
  // 2000 GPU-seconds (5 %); it then runs 500 s again after the lender's job (600 -> 1100).
  EXPECT_DOUBLE_EQ(on->gpu_allocation_wasted_pct, 5.0);
  EXPECT_DOUBLE_EQ(on->gpu_allocation_pct, 100.0 * (100 + 500 + 500) / 2000);
  // The lender took back its guarantee: a reclaim, not fair share.
  EXPECT_THAT(on->preemptions_by_cause, ::testing::ElementsAre(::testing::Pair("fair_share", 0), ::testing::Pair("reclaim", 1),
                                                               ::testing::Pair("restart_move", 0)));
  EXPECT_DOUBLE_EQ(on->gpu_allocation_wasted_pct_by_cause.at("reclaim"), 5.0);
  EXPECT_DOUBLE_EQ(on->gpu_allocation_wasted_pct_by_cause.at("fair_share"), 0.0);
  // With a checkpoint every 60 s it keeps 60 s of work and loses 40; it needs 440 more.
  opt.checkpoint_interval = Seconds{60};
  auto ckpt = RunShared(tree, nodes, jobs, opt);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_DOUBLE_EQ(ckpt->gpu_allocation_wasted_pct, 100.0 * 40 / 2000);
  EXPECT_DOUBLE_EQ(ckpt->gpu_allocation_pct, 100.0 * (100 + 500 + 440) / 2000);
  EXPECT_EQ(ckpt->jobs_completed, 2);
}

// One GPU; "lender" is guaranteed it, "borrower" holds it with a 500 s job submitted at 0;
// the lender's `lender_duration` job arrives at 100 and reclaims the GPU.
StatusOr<ModeMetrics> ReclaimOnce(sched::JobKind borrower_kind, int64_t lender_duration) {
  std::vector<NodeSpec> nodes = {{"n", CpuMilli{64000}, MiB{65536}, 1, Model("V100M16")}};
  static const auto tree = Tree({{"lender", 1}, {"borrower", 0}});
  std::vector<WorkloadJob> jobs = {WholeGpuJob(1, 1, QosClass::kBurstable, 1, 0, 500),
                                   WholeGpuJob(2, 0, QosClass::kBurstable, 1, 100, lender_duration)};
  jobs[0].job.kind = borrower_kind;
  jobs[0].job.startup = Seconds{60};
  ScenarioOptions opt;
  opt.horizon = Seconds{2000};
  opt.scheduler.min_runtime = Seconds{0};
  return RunShared(tree, nodes, jobs, opt);
}

TEST(DedicatedVsShared, APreemptedServiceLosesItsStartUpNotWhatItServed) {
  // The borrower is a service replica (start-up 60 s, deletion time 0 + 500): preempted at 100,
  // re-created at 300 when the lender's 200 s job ends, it holds the GPU from 300 and serves
  // from 360 until its deletion time 500. Waste: the 60 s start-up, not the 100 s it served.
  auto s = ReclaimOnce(sched::JobKind::kService, 200);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->preemptions, 1);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_pct, 100.0 * (100 + 200 + 200) / 2000);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_wasted_pct, 100.0 * 60 / 2000);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_useful_pct, 100.0 * (100 + 200 + 140) / 2000);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_wasted_pct_by_cause.at("reclaim"), 100.0 * 60 / 2000);
  EXPECT_THAT(s->preemptions_by_kind, ::testing::ElementsAre(::testing::Pair("batch", 0), ::testing::Pair("service", 1)));
  EXPECT_DOUBLE_EQ(s->gpu_allocation_wasted_pct_by_kind.at("service"), 100.0 * 60 / 2000);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_wasted_pct_by_kind.at("batch"), 0.0);
  EXPECT_EQ(s->jobs_completed, 2);
  // The same job as batch starts over: its first 100 s are waste and it ends at 300 + 500.
  auto b = ReclaimOnce(sched::JobKind::kBatch, 200);
  ASSERT_TRUE(b.ok());
  EXPECT_DOUBLE_EQ(b->gpu_allocation_wasted_pct, 100.0 * 100 / 2000);
  EXPECT_DOUBLE_EQ(b->gpu_allocation_pct, 100.0 * (100 + 200 + 500) / 2000);
  EXPECT_THAT(b->preemptions_by_kind, ::testing::ElementsAre(::testing::Pair("batch", 1), ::testing::Pair("service", 0)));
}

TEST(DedicatedVsShared, AServiceReplicaWaitingPastItsDeletionTimeIsWithdrawn) {
  // The lender's job runs 100 -> 700: the preempted replica's deletion time (500) comes while
  // it waits, so it is never re-created: no start-up, nothing runs after 700.
  auto s = ReclaimOnce(sched::JobKind::kService, 600);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_DOUBLE_EQ(s->gpu_allocation_pct, 100.0 * (100 + 600) / 2000);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_wasted_pct, 0.0);
  EXPECT_EQ(s->jobs_completed, 2);
  EXPECT_EQ(s->preemptions_by_kind.at("service"), 1);
}

TEST(DedicatedVsShared, WasteAndPreemptionsByKindAddUpToTheTotals) {
  // Two 2-GPU nodes, spread placement; B runs a batch job and a service replica, C two service
  // replicas (1 GPU each; start-up 1000 s, so a replica costs more to preempt than the batch
  // job's first 100 s). A is guaranteed everything: its 1-GPU job at 100 takes the batch job
  // (reclaim), its 1-GPU job at 200 (until 500) one of C's replicas (C is the more served).
  // At 500 B's batch job restarts on the freed GPU and fair share re-creates C's replica in
  // the place of B's (a third preemption); C's replica spends the rest of the horizon (500 s)
  // starting up, B's waits to the end: no start-up spent, no waste.
  std::vector<NodeSpec> nodes = {{"n0", CpuMilli{64000}, MiB{65536}, 2, Model("V100M16")},
                                 {"n1", CpuMilli{64000}, MiB{65536}, 2, Model("V100M16")}};
  auto tree = Tree({{"A", 4}, {"B", 0}, {"C", 0}});
  std::vector<WorkloadJob> jobs = {WholeGpuJob(1, 1, QosClass::kBurstable, 1, 0, 5000),
                                   WholeGpuJob(2, 1, QosClass::kBurstable, 1, 0, 5000),
                                   WholeGpuJob(3, 2, QosClass::kBurstable, 1, 0, 5000),
                                   WholeGpuJob(4, 2, QosClass::kBurstable, 1, 0, 5000),
                                   WholeGpuJob(5, 0, QosClass::kBurstable, 1, 100, 5000),
                                   WholeGpuJob(6, 0, QosClass::kBurstable, 1, 200, 300)};
  for (int i : {1, 2, 3}) {
    jobs[i].job.kind = sched::JobKind::kService;
    jobs[i].job.startup = Seconds{1000};
  }
  ScenarioOptions opt;
  opt.horizon = Seconds{1000};
  opt.scheduler.min_runtime = Seconds{0};
  opt.scheduler.placement_policy = "worstfit";
  auto s = RunShared(tree, nodes, jobs, opt);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_THAT(s->preemptions_by_kind, ::testing::ElementsAre(::testing::Pair("batch", 1), ::testing::Pair("service", 2)));
  EXPECT_EQ(s->preemptions, 3);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_wasted_pct_by_kind.at("batch"), 100.0 * 100 / 4000);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_wasted_pct_by_kind.at("service"), 100.0 * 500 / 4000);
  double by_kind = 0, by_cause = 0;
  for (const auto& [kind, w] : s->gpu_allocation_wasted_pct_by_kind) by_kind += w;
  for (const auto& [cause, w] : s->gpu_allocation_wasted_pct_by_cause) by_cause += w;
  EXPECT_DOUBLE_EQ(by_kind, s->gpu_allocation_wasted_pct);
  EXPECT_DOUBLE_EQ(by_cause, s->gpu_allocation_wasted_pct);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_useful_pct, s->gpu_allocation_pct - s->gpu_allocation_wasted_pct);
}

TEST(TenantWorkload, LsPodsAreServicesUnlessTheOptionsSayOtherwise) {
  std::vector<TimedPod> pods;
  for (int i = 0; i < 40; ++i)
    pods.push_back(Pod("p" + std::to_string(i), i * 3600, i * 3600 + 600, 1, 1000, i % 2 ? "BE" : "LS"));
  auto tree = Tree({{"a", 1}});
  WorkloadOptions opt;
  opt.horizon = Seconds{86400};
  opt.time_compression = 1;
  opt.service_startup = Seconds{45};
  auto w = BuildTenantWorkload(pods, tree, {1.0}, opt);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_FALSE(w->empty());
  for (const WorkloadJob& j : *w) {
    const bool ls = (j.job.submit.count() / 3600) % 2 == 0;
    EXPECT_EQ(j.job.kind, ls ? sched::JobKind::kService : sched::JobKind::kBatch) << j.job.id;
    EXPECT_EQ(j.job.startup, ls ? Seconds{45} : Seconds{0});
  }
  opt.service_qos = {"LS", "BE"};
  w = BuildTenantWorkload(pods, tree, {1.0}, opt);
  for (const WorkloadJob& j : *w) EXPECT_EQ(j.job.kind, sched::JobKind::kService);
  opt.service_qos = {};
  w = BuildTenantWorkload(pods, tree, {1.0}, opt);
  for (const WorkloadJob& j : *w) EXPECT_EQ(j.job.kind, sched::JobKind::kBatch);
}

TEST(DedicatedVsShared, JainCountsTenantsWaitingWithAClaim) {
  // Two GPUs. "a" (guaranteed 1) runs two 1-GPU Burstable jobs and waits with a third; "b"
  // (guaranteed 1) waits with a BestEffort job only, which claims no share: the fairness index
  // has one claimant (1.0 by definition), the variant with BestEffort waiters sees shares 1
  // and 0 (Jain 0.5) all the time.
  std::vector<NodeSpec> nodes = {{"n", CpuMilli{64000}, MiB{65536}, 2, Model("V100M16")}};
  auto tree = Tree({{"a", 1}, {"b", 1}});
  std::vector<WorkloadJob> jobs;
  for (int i = 0; i < 4; ++i)
    jobs.push_back(WholeGpuJob(i + 1, i < 3 ? 0 : 1, i < 3 ? QosClass::kBurstable : QosClass::kBestEffort,
                               1, 0, 5000));
  ScenarioOptions opt;
  opt.horizon = Seconds{1000};
  auto s = RunShared(tree, nodes, jobs, opt);
  ASSERT_TRUE(s.ok());
  EXPECT_DOUBLE_EQ(s->gpu_allocation_pct, 100.0);
  EXPECT_DOUBLE_EQ(s->jain_fairness, 1.0);
  EXPECT_DOUBLE_EQ(s->jain_fairness_with_best_effort, 0.5);
  EXPECT_DOUBLE_EQ(s->guarantee_violations, 0.0);  // b waits with BestEffort work only
}

TEST(DedicatedVsShared, AVictimThatFitsElsewhereRestartsAtTheSameInstant) {
  // Two 2-GPU nodes, spread placement: B's two 1-GPU jobs take one GPU of each node. At t = 100
  // A's 2-GPU job fits on no node; fair-share preemption takes one of B's jobs (B keeps 1 GPU,
  // more than A's 0). The cycle that took it may not restart it, but the scheduler runs once
  // more at the same instant and it starts on the other node's free GPU: the cluster is full
  // from t = 100 to the horizon. Without that cycle it would wait for the next event (none).
  std::vector<NodeSpec> nodes = {{"n0", CpuMilli{64000}, MiB{65536}, 2, Model("V100M16")},
                                 {"n1", CpuMilli{64000}, MiB{65536}, 2, Model("V100M16")}};
  auto tree = Tree({{"A", 0}, {"B", 0}});
  std::vector<WorkloadJob> jobs = {WholeGpuJob(1, 1, QosClass::kBurstable, 1, 0, 5000),
                                   WholeGpuJob(2, 1, QosClass::kBurstable, 1, 0, 5000),
                                   WholeGpuJob(3, 0, QosClass::kBurstable, 2, 100, 5000)};
  ScenarioOptions opt;
  opt.horizon = Seconds{1000};
  opt.scheduler.placement_policy = "worstfit";
  auto s = RunShared(tree, nodes, jobs, opt);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->preemptions, 1);
  // 2 GPUs x 100 s, then 4 GPUs x 900 s, of 4 GPUs x 1000 s; the victim's first 100 s are lost.
  EXPECT_DOUBLE_EQ(s->gpu_allocation_pct, 100.0 * (2 * 100 + 4 * 900) / 4000);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_wasted_pct, 100.0 * 100 / 4000);
  // Neither tenant is guaranteed anything: the preemption is fair share.
  EXPECT_EQ(s->preemptions_by_cause.at("fair_share"), 1);
  EXPECT_EQ(s->preemptions_by_cause.at("reclaim"), 0);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_wasted_pct_by_cause.at("fair_share"), 100.0 * 100 / 4000);
  EXPECT_DOUBLE_EQ(s->gpu_allocation_wasted_pct_by_cause.at("reclaim"), 0.0);
}

TEST(DedicatedVsShared, BreaksTheJainLossDownByTenantAndWaitingJobSize) {
  // Four GPUs on one node; a and b are guaranteed 2 each. a runs three 1-GPU jobs (borrowing
  // one of b's) and waits with a fourth; b runs one and waits with a 4-GPU job that fits
  // nowhere (its own job holds a GPU of the only node, and a job above the guarantee may not
  // reclaim). Weighted shares 3/8 and 1/8: Jain 0.8 all the time; the loss is b's, and its
  // smallest waiting job asks 4 GPUs. The same whether the jobs are batch or services (a
  // service that is never preempted runs like a batch job).
  std::vector<NodeSpec> nodes = {{"n", CpuMilli{64000}, MiB{65536}, 4, Model("V100M16")}};
  auto tree = Tree({{"a", 2}, {"b", 2}});
  for (sched::JobKind kind : {sched::JobKind::kBatch, sched::JobKind::kService}) {
  SCOPED_TRACE(std::string(sched::JobKindName(kind)));
  std::vector<WorkloadJob> jobs;
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(WholeGpuJob(i + 1, i < 4 ? 0 : 1, QosClass::kBurstable, i == 5 ? 4 : 1, 0, 5000));
    jobs.back().job.kind = kind;
    jobs.back().job.startup = Seconds{60};
  }
  ScenarioOptions opt;
  opt.horizon = Seconds{3600};
  auto s = RunShared(tree, nodes, jobs, opt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->preemptions, 0);
  EXPECT_NEAR(s->jain_fairness, 0.8, 1e-12);
  EXPECT_NEAR(s->jain_loss_by_smallest_waiting_job.at("4-7.9 GPUs"), 100.0, 1e-9);
  EXPECT_DOUBLE_EQ(s->jain_loss_by_smallest_waiting_job.at("1-1.9 GPUs"), 0.0);
  ASSERT_EQ(s->fairness_by_tenant.size(), 2u);
  const TenantFairness& a = s->fairness_by_tenant[0];
  const TenantFairness& b = s->fairness_by_tenant[1];
  EXPECT_EQ(b.tenant, "b");
  EXPECT_DOUBLE_EQ(a.hours_waiting, 1.0);
  EXPECT_DOUBLE_EQ(b.hours_waiting, 1.0);
  EXPECT_NEAR(a.relative_share_while_waiting, 1.5, 1e-12);
  EXPECT_NEAR(b.relative_share_while_waiting, 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(a.jain_loss_pct, 0.0);
  EXPECT_NEAR(b.jain_loss_pct, 100.0, 1e-9);
  }
}

TEST(DedicatedVsShared, ARejectedJobCountsAsWaitingUntilTheEnd) {
  // x owns 1 GPU in the dedicated mode, so its 2-GPU job can never run there (rejected); in
  // the shared pool it borrows y's idle GPU and starts at once. The dedicated wait counts the
  // rejected job as never started (horizon - submit); the admitted-only figures leave it out.
  std::vector<NodeSpec> nodes = {{"n", CpuMilli{64000}, MiB{65536}, 2, Model("V100M16")}};
  auto tree = Tree({{"x", 1}, {"y", 1}});
  std::vector<WorkloadJob> jobs = {WholeGpuJob(1, 0, QosClass::kBurstable, 2, 100, 500)};
  ScenarioOptions opt;
  opt.horizon = Seconds{1000};
  auto d = RunDedicated(tree, nodes, jobs, opt);
  auto s = RunShared(tree, nodes, jobs, opt);
  ASSERT_TRUE(d.ok() && s.ok());
  EXPECT_EQ(d->jobs_rejected, 1);
  EXPECT_DOUBLE_EQ(d->wait_by_qos.at("Burstable").second, 900.0);
  EXPECT_EQ(d->wait_by_qos_admitted.count("Burstable"), 0u);
  EXPECT_EQ(s->jobs_rejected, 0);
  EXPECT_DOUBLE_EQ(s->wait_by_qos.at("Burstable").second, 0.0);
  EXPECT_DOUBLE_EQ(s->wait_by_qos_admitted.at("Burstable").second, 0.0);
}

TEST(AllocationUpperBound, IsTheTighterOfCapacityAndDemand) {
  std::vector<WorkloadJob> jobs(1);
  jobs[0].job.pod = placement::TaskRequest{.num_gpu = 1, .gpu_milli = kWholeGpu};
  jobs[0].job.submit = Seconds{0};
  jobs[0].duration = Seconds{3600};
  // The header's example: 2 GPUs, 2 hours, one 1-GPU hour of work: 25 %.
  EXPECT_DOUBLE_EQ(AllocationUpperBoundPct(jobs, 2000, Seconds{7200}), 25.0);
  // Plenty of work submitted late: the first hour can hold none of it.
  jobs[0].job.submit = Seconds{3600};
  jobs[0].duration = Seconds{100000};
  jobs[0].job.pods = 4;
  EXPECT_DOUBLE_EQ(AllocationUpperBoundPct(jobs, 2000, Seconds{7200}), 50.0);
  EXPECT_DOUBLE_EQ(AllocationUpperBoundPct({}, 2000, Seconds{7200}), 0.0);
}

}  // namespace
}  // namespace tessera::sim
