#include "tessera/sched/scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tessera/core/rng.h"

namespace tessera::sched {
namespace {

using placement::NodeSpec;
using placement::TaskRequest;
using ::testing::HasSubstr;

GpuModelId V100() { return *GpuModelCatalog::Builtin().Find("V100M16"); }

std::vector<NodeSpec> Nodes(int count, int gpus) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < count; ++i)
    nodes.push_back({"n" + std::to_string(i), CpuMilli{64000}, MiB{262144}, gpus, V100()});
  return nodes;
}

struct T {
  std::string name, parent;
  int64_t guaranteed = 0;
  int64_t limit = kUnlimited;
  double weight = 1;
};

TenantTree Tree(const std::vector<T>& ts) {
  std::vector<TenantSpec> specs;
  for (const T& t : ts) {
    TenantSpec s;
    s.name = t.name;
    s.parent = t.parent;
    s.guaranteed[kGpuMilliDim] = t.guaranteed;
    s.limit[kGpuMilliDim] = t.limit;
    s.weight = t.weight;
    specs.push_back(s);
  }
  auto tree = TenantTree::Create(specs, ResourceSpace());
  EXPECT_TRUE(tree.ok()) << tree.status().ToString();
  return std::move(*tree);
}

Job MakeJob(JobId id, TenantIndex tenant, QosClass qos, int num_gpu, int milli = 1000, int pods = 1,
            int64_t submit = 0) {
  Job j;
  j.id = id;
  j.tenant = tenant;
  j.qos = qos;
  j.pods = pods;
  j.pod = TaskRequest{.cpu = CpuMilli{1000}, .memory = MiB{1024}, .num_gpu = num_gpu,
                      .gpu_milli = GpuMilli{milli}};
  j.submit = Seconds{submit};
  return j;
}

std::unique_ptr<Scheduler> Make(const TenantTree& tree, std::vector<NodeSpec> nodes,
                                SchedulerOptions opt = {}) {
  opt.min_runtime = opt.min_runtime.count() == 60 ? Seconds{0} : opt.min_runtime;
  auto s = Scheduler::Create(&tree, std::move(nodes), opt);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

TEST(Scheduler, AdmissionRejectsWhatCanNeverRun) {
  TenantTree tree = Tree({{"org", "", 2000, 3000}, {"a", "org", 1000, 2000}});
  auto s = Make(tree, Nodes(1, 4));
  const TenantIndex org = *tree.Find("org"), a = *tree.Find("a");
  Status st = s->Submit(MakeJob(1, org, QosClass::kBurstable, 1));
  EXPECT_THAT(st.message(), HasSubstr("has sub-tenants"));
  st = s->Submit(MakeJob(2, a, QosClass::kBurstable, 3));
  EXPECT_THAT(st.message(), HasSubstr("over the limit of tenant 'a'"));
  st = s->Submit(MakeJob(3, a, QosClass::kGuaranteed, 2));
  EXPECT_THAT(st.message(), HasSubstr("can never run as Guaranteed"));
  st = s->Submit(MakeJob(4, a, QosClass::kBurstable, 1, 1000, 1));
  EXPECT_TRUE(st.ok());
  EXPECT_THAT(s->Submit(MakeJob(4, a, QosClass::kBurstable, 1)).message(), HasSubstr("duplicate"));
  TenantTree big = Tree({{"x"}});
  auto s2 = Make(big, Nodes(1, 4));
  EXPECT_THAT(s2->Submit(MakeJob(5, 0, QosClass::kBurstable, 8)).message(),
              HasSubstr("no node of the cluster can hold one pod"));
  EXPECT_EQ(s->pending_count(), 1u);
}

TEST(Scheduler, BorrowThenReclaimTheWorkedExample) {
  TenantTree tree = Tree({{"A", "", 1000}, {"B", "", 1000}});
  auto s = Make(tree, Nodes(1, 2));
  const TenantIndex A = 0, B = 1;
  ASSERT_TRUE(s->Submit(MakeJob(1, B, QosClass::kBurstable, 1)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(2, B, QosClass::kBurstable, 1, 1000, 1, 1)).ok());
  CycleResult r = s->Cycle(Seconds{10});
  EXPECT_EQ(r.started.size(), 2u);  // B borrows A's idle GPU
  ASSERT_TRUE(s->Submit(MakeJob(3, A, QosClass::kGuaranteed, 1)).ok());
  r = s->Cycle(Seconds{20});
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].victim, 2);  // B's newest job
  EXPECT_EQ(r.preempted[0].by, 3);
  EXPECT_FALSE(r.preempted[0].fair_share);  // A takes back its guarantee
  EXPECT_TRUE(s->is_running(3));
  EXPECT_TRUE(s->is_pending(2));
  for (int c = 0; c < 20; ++c) {  // nothing moves again
    r = s->Cycle(Seconds{30 + c});
    EXPECT_TRUE(r.preempted.empty());
    EXPECT_TRUE(r.started.empty());
  }
  EXPECT_EQ(s->usage(A)[kGpuMilliDim], 1000);
  EXPECT_EQ(s->usage(B)[kGpuMilliDim], 1000);
  ASSERT_TRUE(s->Complete(3, Seconds{100}).ok());
  r = s->Cycle(Seconds{100});
  ASSERT_EQ(r.started.size(), 1u);  // the requeued job borrows again
  EXPECT_EQ(r.started[0].job, 2);
}

TEST(Scheduler, NoReclaimBelowALendersGuaranteeOrBeforeMinRuntime) {
  TenantTree tree = Tree({{"A", "", 1000}, {"B", "", 1000}, {"C", "", 0}});
  SchedulerOptions opt;
  opt.min_runtime = Seconds{100};
  auto s = Make(tree, Nodes(1, 2), opt);
  // B runs within its guarantee, C borrows the other GPU.
  ASSERT_TRUE(s->Submit(MakeJob(1, 1, QosClass::kBurstable, 1)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(2, 2, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{0});
  ASSERT_EQ(s->running_count(), 2u);
  ASSERT_TRUE(s->Submit(MakeJob(3, 0, QosClass::kGuaranteed, 1)).ok());
  CycleResult r = s->Cycle(Seconds{50});  // C's job has run 50 s < 100 s
  EXPECT_TRUE(r.preempted.empty());
  EXPECT_EQ(s->wait_reason(3), WaitReason::kCapacity);
  r = s->Cycle(Seconds{150});
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].victim, 2);  // never B's: B is at its guarantee
  EXPECT_TRUE(s->is_running(1));
}

TEST(Scheduler, GuaranteedAndBurstableWithinGuaranteeAreNeverVictims) {
  TenantTree tree = Tree({{"A", "", 2000}, {"B", "", 2000}});
  auto s = Make(tree, Nodes(1, 4));
  ASSERT_TRUE(s->Submit(MakeJob(1, 1, QosClass::kGuaranteed, 2)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(2, 1, QosClass::kBurstable, 2)).ok());
  s->Cycle(Seconds{0});
  ASSERT_EQ(s->running_count(), 2u);  // B: 2 guaranteed + 2 borrowed
  ASSERT_TRUE(s->Submit(MakeJob(3, 0, QosClass::kGuaranteed, 2)).ok());
  CycleResult r = s->Cycle(Seconds{1});
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].victim, 2);
  EXPECT_TRUE(s->is_running(1));
}

TEST(Scheduler, BestEffortTakesLeftoversAndGoesFirst) {
  TenantTree tree = Tree({{"A", "", 2000}, {"B", "", 0}});
  auto s = Make(tree, Nodes(1, 2));
  ASSERT_TRUE(s->Submit(MakeJob(1, 1, QosClass::kBestEffort, 1)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(2, 1, QosClass::kBurstable, 1)).ok());
  CycleResult r = s->Cycle(Seconds{0});
  EXPECT_EQ(r.started.size(), 2u);
  ASSERT_TRUE(s->Submit(MakeJob(3, 0, QosClass::kGuaranteed, 1)).ok());
  r = s->Cycle(Seconds{1});
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].victim, 1);  // the BestEffort job, not the Burstable one
}

TEST(Scheduler, TwoJobsNeverPreemptEachOtherBackAndForth) {
  // Random arrivals and completions among 3 tenants on 8 GPUs; every preemption is recorded;
  // no (victim, preemptor) pair may ever appear reversed, and no job is preempted more often
  // than the jobs that could legitimately reclaim it.
  // Under both fair-share rules.
  TenantTree tree = Tree({{"A", "", 3000}, {"B", "", 3000}, {"C", "", 2000}});
  for (uint64_t run = 0; run < 40; ++run) {
    const uint64_t seed = 1 + run % 20;
    SchedulerOptions opt;
    opt.fair_share_rule = run < 20 ? FairShareRule::kEqualize : FairShareRule::kLexicographic;
    auto s = Make(tree, Nodes(2, 4), opt);
    Rng rng(seed);
    std::set<std::pair<JobId, JobId>> preempted_by;
    std::map<JobId, int64_t> ends;
    std::map<TenantIndex, int64_t> largest_victim;  // in this cycle
    JobId next = 1;
    for (int step = 0; step < 200; ++step) {
      const Seconds now{step * 10};
      for (auto it = ends.begin(); it != ends.end();) {
        if (it->second <= now.count() && s->is_running(it->first)) {
          ASSERT_TRUE(s->Complete(it->first, now).ok());
          it = ends.erase(it);
        } else {
          ++it;
        }
      }
      for (int k = 0; k < 2; ++k) {
        const auto tenant = static_cast<TenantIndex>(rng.Uniform(3));
        const auto qos = static_cast<QosClass>(rng.Uniform(3));
        const int gpus = static_cast<int>(1 + rng.Uniform(2));
        Job j = MakeJob(next++, tenant, qos, gpus, 1000, 1, now.count());
        if (s->Submit(j).ok()) ends[j.id] = now.count() + static_cast<int64_t>(20 + rng.Uniform(381));
      }
      CycleResult r = s->Cycle(now);
      for (const PreemptEvent& p : r.preempted) {
        EXPECT_EQ(preempted_by.count({p.by, p.victim}), 0u)
            << FairShareRuleName(opt.fair_share_rule) << " seed " << seed << ": job " << p.by << " and " << p.victim << " preempted each other";
        preempted_by.insert({p.victim, p.by});
        const Job* v = s->job(p.victim);
        ASSERT_NE(v, nullptr);
        EXPECT_NE(v->qos, QosClass::kGuaranteed);
        // Another tenant's victim leaves it at or above its guarantee (BestEffort aside); inside
        // a tenant, only Guaranteed work displaces the tenant's own Burstable work.
        const Job* by = s->job(p.by);
        ASSERT_NE(by, nullptr);
        if (v->tenant == by->tenant && v->qos != QosClass::kBestEffort) {
          EXPECT_EQ(by->qos, QosClass::kGuaranteed);
        }
        if (v->qos == QosClass::kBurstable && v->tenant != by->tenant) {
          largest_victim[v->tenant] = std::max(largest_victim[v->tenant], int64_t{v->pod.TotalGpu().value()});
        }
      }
      // Another tenant's Burstable victims come from a tenant that was borrowing: what it keeps
      // plus its largest victim is above its guarantee, so that victim is not entitled to take
      // its place back.
      for (const auto& [t, largest] : largest_victim) {
        EXPECT_GT(s->protected_usage(t)[kGpuMilliDim] + largest, tree.spec(t).guaranteed[kGpuMilliDim])
            << FairShareRuleName(opt.fair_share_rule) << " seed " << seed << " step " << step << ": tenant " << t << " was not borrowing";
      }
      largest_victim.clear();
      for (const StartEvent& st : r.started) ends.try_emplace(st.job, now.count() + 100);
      // Usage never exceeds the cluster.
      int64_t used = 0;
      for (TenantIndex t = 0; t < 3; ++t) used += s->usage(t)[kGpuMilliDim];
      EXPECT_LE(used, 8000);
      EXPECT_EQ(used, s->cluster().allocated_gpu().value());
    }
  }
}

TEST(Scheduler, GuaranteedWorkDisplacesTheTenantsOwnBorrowedWork) {
  // A is guaranteed 1 GPU of 2 and fills both with Burstable work (one borrowed); its
  // Guaranteed job then takes back a GPU from A's own Burstable job (B has nothing running).
  TenantTree tree = Tree({{"A", "", 1000}, {"B", "", 1000}});
  auto s = Make(tree, Nodes(1, 2));
  ASSERT_TRUE(s->Submit(MakeJob(1, 0, QosClass::kBurstable, 1)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(2, 0, QosClass::kBurstable, 1, 1000, 1, 1)).ok());
  s->Cycle(Seconds{0});
  ASSERT_EQ(s->running_count(), 2u);
  ASSERT_TRUE(s->Submit(MakeJob(3, 0, QosClass::kGuaranteed, 1)).ok());
  CycleResult r = s->Cycle(Seconds{10});
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].victim, 2);
  EXPECT_TRUE(s->is_running(3));
  // A Burstable job never displaces its own tenant's work.
  ASSERT_TRUE(s->Submit(MakeJob(4, 0, QosClass::kBurstable, 1)).ok());
  r = s->Cycle(Seconds{20});
  EXPECT_TRUE(r.preempted.empty());
}

TEST(Scheduler, FairSharePreemptionTakesFromTheMoreServed) {
  // No guarantees: A borrowed all 4 GPUs; B (same weight) arrives. Fair share moves GPUs from A
  // to B until neither side would be strictly better served by another swap: 2 and 2.
  TenantTree tree = Tree({{"A"}, {"B"}});
  auto s = Make(tree, Nodes(1, 4));
  for (JobId id = 1; id <= 4; ++id) ASSERT_TRUE(s->Submit(MakeJob(id, 0, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{0});
  for (JobId id = 5; id <= 8; ++id) ASSERT_TRUE(s->Submit(MakeJob(id, 1, QosClass::kBurstable, 1, 1000, 1, 1)).ok());
  int preempted = 0;
  for (int c = 1; c <= 10; ++c) {
    for (const PreemptEvent& p : s->Cycle(Seconds{c}).preempted) {
      EXPECT_TRUE(p.fair_share) << "victim " << p.victim;  // B borrows: not a reclaim
      ++preempted;
    }
  }
  EXPECT_EQ(s->usage(0)[kGpuMilliDim], 2000);
  EXPECT_EQ(s->usage(1)[kGpuMilliDim], 2000);
  EXPECT_EQ(preempted, 2);  // and then it stops
  SchedulerOptions off;
  off.fair_share_preemption = false;
  auto s2 = Make(tree, Nodes(1, 4), off);
  for (JobId id = 1; id <= 4; ++id) ASSERT_TRUE(s2->Submit(MakeJob(id, 0, QosClass::kBurstable, 1)).ok());
  s2->Cycle(Seconds{0});
  ASSERT_TRUE(s2->Submit(MakeJob(5, 1, QosClass::kBurstable, 1)).ok());
  EXPECT_TRUE(s2->Cycle(Seconds{1}).preempted.empty());
}

TEST(Scheduler, TheLexicographicRuleLetsALargeJobOfAnUnderServedTenantStart) {
  // 8 GPUs on two nodes; A (weight 1, guaranteed 1) and B (weight 7, guaranteed 5). B holds all
  // 8 GPUs with 2-GPU jobs (borrowing 3). A's 2-GPU job is above its guarantee: no reclaim.
  // Equalize: A would end at 2/8 = 0.25, B at 6/8/7 = 0.107: it waits. Lexicographic: B ends
  // above A's 0 now (and at or above its guarantee), so one of B's jobs goes; B cannot take it
  // back (A would end at 0, below B's 0.107), so nothing moves in later cycles.
  TenantTree tree = Tree({{"A", "", 1000, kUnlimited, 1}, {"B", "", 5000, kUnlimited, 7}});
  for (FairShareRule rule : {FairShareRule::kEqualize, FairShareRule::kLexicographic}) {
    SchedulerOptions opt;
    opt.fair_share_rule = rule;
    auto s = Make(tree, Nodes(2, 4), opt);
    for (JobId id = 1; id <= 4; ++id) ASSERT_TRUE(s->Submit(MakeJob(id, 1, QosClass::kBurstable, 2)).ok());
    s->Cycle(Seconds{0});
    ASSERT_EQ(s->usage(1)[kGpuMilliDim], 8000);
    ASSERT_TRUE(s->Submit(MakeJob(5, 0, QosClass::kBurstable, 2, 1000, 1, 10)).ok());
    int preempted = 0;
    for (int c = 10; c <= 20; ++c) preempted += static_cast<int>(s->Cycle(Seconds{c}).preempted.size());
    const bool lex = rule == FairShareRule::kLexicographic;
    EXPECT_EQ(s->is_running(5), lex) << FairShareRuleName(rule);
    EXPECT_EQ(preempted, lex ? 1 : 0) << FairShareRuleName(rule);
    EXPECT_EQ(s->usage(1)[kGpuMilliDim], lex ? 6000 : 8000) << FairShareRuleName(rule);
  }
  EXPECT_EQ(*ParseFairShareRule("lexicographic"), FairShareRule::kLexicographic);
  EXPECT_THAT(ParseFairShareRule("fifo").status().message(), HasSubstr("equalize, lexicographic"));
}

TEST(Scheduler, FairSharePreemptionNeverTakesALenderBelowItsGuarantee) {
  // As above, but B is guaranteed 7: it borrows 1 GPU, and taking a 2-GPU job would leave it
  // at 6, below its guarantee. A's 2-GPU job is a borrowing job (A is guaranteed 1) with no
  // claim on B's guarantee: it waits under both rules. A's 1-GPU job is entitled and reclaims
  // (a reclaim may take the job that crosses B's guarantee).
  TenantTree tree = Tree({{"A", "", 1000, kUnlimited, 1}, {"B", "", 7000, kUnlimited, 7}});
  auto s = Make(tree, Nodes(2, 4));
  for (JobId id = 1; id <= 4; ++id) ASSERT_TRUE(s->Submit(MakeJob(id, 1, QosClass::kBurstable, 2)).ok());
  s->Cycle(Seconds{0});
  ASSERT_EQ(s->usage(1)[kGpuMilliDim], 8000);
  ASSERT_TRUE(s->Submit(MakeJob(5, 0, QosClass::kBurstable, 2, 1000, 1, 10)).ok());
  for (int c = 10; c <= 20; ++c) EXPECT_TRUE(s->Cycle(Seconds{c}).preempted.empty()) << "cycle " << c;
  EXPECT_FALSE(s->is_running(5));
  ASSERT_TRUE(s->Cancel(5).ok());
  ASSERT_TRUE(s->Submit(MakeJob(6, 0, QosClass::kBurstable, 1, 1000, 1, 30)).ok());
  CycleResult r = s->Cycle(Seconds{30});
  EXPECT_EQ(r.preempted.size(), 1u);
  EXPECT_TRUE(s->is_running(6));
}

TEST(Scheduler, FairSharePreemptionCanLeaveOldWorkAlone) {
  // As above, but A's jobs have run 1000 s when B arrives: with a 600 s limit on the victims
  // of fair-share preemption nothing is taken; with 2000 s, two jobs are.
  TenantTree tree = Tree({{"A"}, {"B"}});
  for (int64_t limit : {600, 2000}) {
    SchedulerOptions opt;
    opt.fair_share_max_victim_runtime = Seconds{limit};
    auto s = Make(tree, Nodes(1, 4), opt);
    for (JobId id = 1; id <= 4; ++id) ASSERT_TRUE(s->Submit(MakeJob(id, 0, QosClass::kBurstable, 1)).ok());
    s->Cycle(Seconds{0});
    for (JobId id = 5; id <= 8; ++id)
      ASSERT_TRUE(s->Submit(MakeJob(id, 1, QosClass::kBurstable, 1, 1000, 1, 1000)).ok());
    int preempted = 0;
    for (int c = 1000; c <= 1010; ++c) preempted += static_cast<int>(s->Cycle(Seconds{c}).preempted.size());
    EXPECT_EQ(preempted, limit < 1000 ? 0 : 2) << "limit " << limit;
  }
}

TEST(Scheduler, WeightedDrfSharesTheSurplus) {
  TenantTree tree = Tree({{"A", "", 0, kUnlimited, 1}, {"B", "", 0, kUnlimited, 3}});
  auto s = Make(tree, Nodes(1, 8));
  JobId id = 1;
  for (TenantIndex t : {0, 1})
    for (int k = 0; k < 10; ++k) ASSERT_TRUE(s->Submit(MakeJob(id++, t, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{0});
  EXPECT_EQ(s->usage(0)[kGpuMilliDim], 2000);
  EXPECT_EQ(s->usage(1)[kGpuMilliDim], 6000);
}

TEST(Scheduler, HierarchicalDrfServesOrganisationsFirst) {
  // org1 has two teams, org2 one: with 4 GPUs each organisation gets 2.
  TenantTree tree = Tree({{"org1"}, {"a", "org1"}, {"b", "org1"}, {"org2"}, {"c", "org2"}});
  auto s = Make(tree, Nodes(1, 4));
  JobId id = 1;
  for (const char* name : {"a", "b", "c"})
    for (int k = 0; k < 6; ++k)
      ASSERT_TRUE(s->Submit(MakeJob(id++, *tree.Find(name), QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{0});
  EXPECT_EQ(s->usage(*tree.Find("org1"))[kGpuMilliDim], 2000);
  EXPECT_EQ(s->usage(*tree.Find("a"))[kGpuMilliDim], 1000);
  EXPECT_EQ(s->usage(*tree.Find("b"))[kGpuMilliDim], 1000);
  EXPECT_EQ(s->usage(*tree.Find("c"))[kGpuMilliDim], 2000);
}

TEST(Scheduler, LimitsHoldAndAreTheWaitReason) {
  TenantTree tree = Tree({{"A", "", 0, 2000}});
  auto s = Make(tree, Nodes(1, 8));
  for (JobId id = 1; id <= 3; ++id) ASSERT_TRUE(s->Submit(MakeJob(id, 0, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{0});
  EXPECT_EQ(s->running_count(), 2u);
  EXPECT_EQ(s->wait_reason(3), WaitReason::kLimit);
}

TEST(Scheduler, GangIsAllOrNothing) {
  TenantTree tree = Tree({{"A"}});
  auto s = Make(tree, Nodes(2, 4));
  ASSERT_TRUE(s->Submit(MakeJob(1, 0, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{0});
  ASSERT_TRUE(s->Submit(MakeJob(2, 0, QosClass::kBurstable, 4, 1000, 2)).ok());
  CycleResult r = s->Cycle(Seconds{1});
  EXPECT_TRUE(r.started.empty());
  EXPECT_EQ(s->cluster().allocated_gpu().value(), 1000);  // nothing half-placed
  ASSERT_TRUE(s->Complete(1, Seconds{2}).ok());
  r = s->Cycle(Seconds{2});
  ASSERT_EQ(r.started.size(), 1u);
  ASSERT_EQ(r.started[0].pods.size(), 2u);
  EXPECT_NE(r.started[0].pods[0].node, r.started[0].pods[1].node);
  EXPECT_EQ(s->cluster().allocated_gpu().value(), 8000);
}

TEST(Scheduler, ReclaimNeverMakesAConflictingGpuUsable) {
  // One GPU: B's latency job (class 0) and B's borrowed job fill it. A's entitled batch job
  // (class 1, never on a GPU with class 0) could fit only by evicting the borrowed job and
  // sitting next to the latency job: it must wait, and nothing is evicted for it.
  TenantTree tree = Tree({{"A", "", 500}, {"B", "", 500}});
  SchedulerOptions opt;
  opt.affinity.classes_apart = {{0, 1}};
  opt.consolidation = false;
  auto s = Make(tree, Nodes(1, 1), opt);
  const TenantIndex A = 0, B = 1;
  Job lat = MakeJob(1, B, QosClass::kBurstable, 1, 500);
  lat.workload_class = 0;
  Job borrowed = MakeJob(2, B, QosClass::kBurstable, 1, 500);
  borrowed.workload_class = 2;
  ASSERT_TRUE(s->Submit(lat).ok());
  ASSERT_TRUE(s->Submit(borrowed).ok());
  CycleResult r = s->Cycle(Seconds{10});
  ASSERT_EQ(r.started.size(), 2u);
  Job batch = MakeJob(3, A, QosClass::kGuaranteed, 1, 500);
  batch.workload_class = 1;
  ASSERT_TRUE(s->Submit(batch).ok());
  r = s->Cycle(Seconds{20});
  EXPECT_TRUE(r.preempted.empty());
  EXPECT_FALSE(s->is_running(3));
  EXPECT_TRUE(s->is_running(1) && s->is_running(2));
  ASSERT_TRUE(s->Complete(1, Seconds{30}).ok());  // the latency job leaves: the batch job fits
  r = s->Cycle(Seconds{30});
  EXPECT_TRUE(s->is_running(3));
  EXPECT_EQ(s->usage(A)[kGpuMilliDim], 500);
}

TEST(Scheduler, AffinityKeepsClassesTenantsAndLabelsApart) {
  TenantTree tree = Tree({{"A"}, {"B"}});
  {
    SchedulerOptions opt;
    opt.affinity.classes_apart = {{0, 1}};  // latency (0) never shares a GPU with batch (1)
    opt.consolidation = false;
    auto s = Make(tree, Nodes(1, 1), opt);
    Job lat = MakeJob(1, 0, QosClass::kBurstable, 1, 500);
    lat.workload_class = 0;
    Job batch = MakeJob(2, 0, QosClass::kBurstable, 1, 500);
    batch.workload_class = 1;
    Job lat2 = MakeJob(3, 0, QosClass::kBurstable, 1, 250);
    lat2.workload_class = 0;
    ASSERT_TRUE(s->Submit(lat).ok());
    ASSERT_TRUE(s->Submit(batch).ok());
    ASSERT_TRUE(s->Submit(lat2).ok());
    s->Cycle(Seconds{0});
    EXPECT_TRUE(s->is_running(1));
    EXPECT_FALSE(s->is_running(2));
    EXPECT_EQ(s->wait_reason(2), WaitReason::kAffinity);
    EXPECT_TRUE(s->is_running(3));  // same class shares
    EXPECT_EQ(s->cluster().allocated_gpu().value(), 750);  // nothing stays reserved
  }
  {
    SchedulerOptions opt;
    opt.affinity.tenants_apart = {{0, 1}};
    auto s = Make(tree, Nodes(1, 2), opt);
    ASSERT_TRUE(s->Submit(MakeJob(1, 0, QosClass::kBurstable, 1, 300)).ok());
    ASSERT_TRUE(s->Submit(MakeJob(2, 1, QosClass::kBurstable, 1, 300)).ok());
    s->Cycle(Seconds{0});
    ASSERT_TRUE(s->is_running(1) && s->is_running(2));
    EXPECT_NE(s->placement_of(1)->at(0).gpus, s->placement_of(2)->at(0).gpus);
  }
  {
    SchedulerOptions opt;
    opt.affinity.labels_apart = true;
    auto s = Make(tree, Nodes(2, 4), opt);
    Job dev = MakeJob(1, 0, QosClass::kBurstable, 1);
    dev.label = 0;
    Job prod = MakeJob(2, 0, QosClass::kBurstable, 1);
    prod.label = 1;
    ASSERT_TRUE(s->Submit(dev).ok());
    ASSERT_TRUE(s->Submit(prod).ok());
    s->Cycle(Seconds{0});
    ASSERT_TRUE(s->is_running(1) && s->is_running(2));
    EXPECT_NE(s->placement_of(1)->at(0).node, s->placement_of(2)->at(0).node);
  }
}

TEST(Scheduler, ConsolidationMovesFractionalPodsToFreeWholeGpus) {
  TenantTree tree = Tree({{"A"}});
  SchedulerOptions opt;
  opt.placement_policy = "worstfit";  // spreads the fractional pods over both GPUs
  auto s = Make(tree, Nodes(1, 2), opt);
  ASSERT_TRUE(s->Submit(MakeJob(1, 0, QosClass::kBurstable, 1, 400)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(2, 0, QosClass::kBurstable, 1, 400)).ok());
  s->Cycle(Seconds{0});
  ASSERT_NE(s->placement_of(1)->at(0).gpus, s->placement_of(2)->at(0).gpus);
  ASSERT_TRUE(s->Submit(MakeJob(3, 0, QosClass::kBurstable, 1, 1000)).ok());
  CycleResult r = s->Cycle(Seconds{1});
  ASSERT_EQ(r.moves.size(), 1u);
  EXPECT_EQ(r.moves[0].for_job, 3);
  EXPECT_TRUE(s->is_running(3));
  EXPECT_EQ(s->placement_of(1)->at(0).gpus, s->placement_of(2)->at(0).gpus);
  EXPECT_EQ(s->cluster().allocated_gpu().value(), 1800);
}

// Two 4-GPU nodes; B's four 1-GPU jobs (at its guarantee, so not preemptible) are spread two
// and two; A's entitled 4-GPU job fits nowhere and reclaim finds no victim.
struct SpreadFixture {
  TenantTree tree = Tree({{"A", "", 4000}, {"B", "", 4000}});
  std::unique_ptr<Scheduler> s;
  explicit SpreadFixture(QosClass b_class, bool defragmentation = true) {
    SchedulerOptions opt;
    opt.placement_policy = "worstfit";  // spreads B's jobs over both nodes
    opt.keep_large_nodes_clearable = false;  // ... Guaranteed ones too
    opt.defragmentation = defragmentation;
    s = Make(tree, Nodes(2, 4), opt);
    for (JobId id = 1; id <= 4; ++id) EXPECT_TRUE(s->Submit(MakeJob(id, 1, b_class, 1)).ok());
    s->Cycle(Seconds{0});
    int on_first = 0;
    for (JobId id = 1; id <= 4; ++id) on_first += s->placement_of(id)->at(0).node.value() == 0;
    EXPECT_EQ(on_first, 2);
    EXPECT_TRUE(s->Submit(MakeJob(10, 0, QosClass::kBurstable, 4)).ok());
  }
};

TEST(Scheduler, DefragmentationMovesProtectedWorkForAnEntitledJob) {
  SpreadFixture f(QosClass::kBurstable);
  CycleResult r = f.s->Cycle(Seconds{100});
  EXPECT_TRUE(f.s->is_running(10));
  EXPECT_TRUE(r.preempted.empty());
  ASSERT_EQ(r.moves.size(), 2u);
  for (const MoveEvent& m : r.moves) {
    EXPECT_EQ(m.for_job, 10);
    EXPECT_TRUE(m.restart);  // whole-GPU pods restart where they go
    EXPECT_NE(m.from.node, m.to.node);
  }
  for (JobId id = 1; id <= 4; ++id) {
    EXPECT_TRUE(f.s->is_running(id));
    EXPECT_NE(f.s->placement_of(id)->at(0).node, f.s->placement_of(10)->at(0).node);
  }
  EXPECT_EQ(f.s->cluster().allocated_gpu().value(), 8000);
}

TEST(Scheduler, DefragmentationNeverMovesWholeGpuGuaranteedPods) {
  SpreadFixture f(QosClass::kGuaranteed);
  CycleResult r = f.s->Cycle(Seconds{100});
  EXPECT_FALSE(f.s->is_running(10));
  EXPECT_TRUE(r.moves.empty());
  EXPECT_TRUE(r.preempted.empty());
}

TEST(Scheduler, ImmovableWorkKeepsALargeNodeClearable) {
  // The same four Guaranteed 1-GPU jobs of B with keep_large_nodes_clearable (the default):
  // they share one node although the policy spreads, so A's 4-GPU job starts on the other
  // with nothing moved.
  TenantTree tree = Tree({{"A", "", 4000}, {"B", "", 4000}});
  SchedulerOptions opt;
  opt.placement_policy = "worstfit";
  auto s = Make(tree, Nodes(2, 4), opt);
  for (JobId id = 1; id <= 4; ++id) ASSERT_TRUE(s->Submit(MakeJob(id, 1, QosClass::kGuaranteed, 1)).ok());
  s->Cycle(Seconds{0});
  for (JobId id = 2; id <= 4; ++id) EXPECT_EQ(s->placement_of(id)->at(0).node, s->placement_of(1)->at(0).node);
  ASSERT_TRUE(s->Submit(MakeJob(10, 0, QosClass::kBurstable, 4)).ok());
  CycleResult r = s->Cycle(Seconds{100});
  EXPECT_TRUE(s->is_running(10));
  EXPECT_TRUE(r.moves.empty());
  EXPECT_TRUE(r.preempted.empty());
}

TEST(Scheduler, MovableWorkIsPlacedByThePolicyAsBefore) {
  // Burstable 1-GPU jobs are movable: the option leaves them to the policy (spread).
  TenantTree tree = Tree({{"A", "", 4000}, {"B", "", 4000}});
  SchedulerOptions opt;
  opt.placement_policy = "worstfit";
  auto s = Make(tree, Nodes(2, 4), opt);
  for (JobId id = 1; id <= 2; ++id) ASSERT_TRUE(s->Submit(MakeJob(id, 1, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{0});
  EXPECT_NE(s->placement_of(1)->at(0).node, s->placement_of(2)->at(0).node);
}

TEST(Scheduler, ReclaimTakesTheJobThatCrossedTheGuarantee) {
  // One node of 2 GPUs; A and B are guaranteed 1 GPU each. B runs two 0.8-GPU jobs, one per
  // GPU (1.6, over its guarantee by 0.6, which no single job of B is). A's 1-GPU job is
  // entitled: either job of B is borrowed work although taking it leaves B at 0.8, and the
  // taken job cannot come back (0.8 + 0.8 > 1).
  TenantTree tree = Tree({{"A", "", 1000}, {"B", "", 1000}});
  SchedulerOptions opt;
  opt.placement_policy = "worstfit";
  auto s = Make(tree, Nodes(1, 2), opt);
  ASSERT_TRUE(s->Submit(MakeJob(1, 1, QosClass::kBurstable, 1, 800)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(2, 1, QosClass::kBurstable, 1, 800, 1, 1)).ok());
  s->Cycle(Seconds{0});
  ASSERT_TRUE(s->is_running(1) && s->is_running(2));
  ASSERT_NE(s->placement_of(1)->at(0).gpus, s->placement_of(2)->at(0).gpus);
  ASSERT_TRUE(s->Submit(MakeJob(3, 0, QosClass::kBurstable, 1, 1000, 1, 2)).ok());
  CycleResult r = s->Cycle(Seconds{10});
  ASSERT_EQ(r.preempted.size(), 1u);
  const JobId victim = r.preempted[0].victim;
  EXPECT_TRUE(victim == 1 || victim == 2);
  EXPECT_TRUE(s->is_running(3));
  EXPECT_EQ(s->protected_usage(1)[kGpuMilliDim], 800);
  // Nothing moves back: B's job is not entitled, A's job is within A's guarantee.
  r = s->Cycle(Seconds{20});
  EXPECT_TRUE(r.preempted.empty());
  EXPECT_FALSE(s->is_running(victim));
  EXPECT_FALSE(s->BelowGuaranteeWithWaiting(1));  // B's waiting job does not fit in its 0.2
}

TEST(Scheduler, ReclaimTakesTheVictimsThatLoseTheLeastWork) {
  // B borrows with two 1-GPU jobs on two 1-GPU nodes: the one on the first node has run
  // 1000 s, the other 10 s. Either frees a node for A's entitled job; the younger one is taken
  // (a stopped job starts over, so it loses 10 GPU-seconds instead of 1000).
  TenantTree tree = Tree({{"A", "", 1000}, {"B", "", 1000}});
  SchedulerOptions opt;
  opt.placement_policy = "firstfit";
  auto s = Make(tree, Nodes(2, 1), opt);
  ASSERT_TRUE(s->Submit(MakeJob(1, 1, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{0});
  ASSERT_EQ(s->placement_of(1)->at(0).node.value(), 0u);
  ASSERT_TRUE(s->Submit(MakeJob(2, 1, QosClass::kBurstable, 1, 1000, 1, 990)).ok());
  s->Cycle(Seconds{990});
  ASSERT_TRUE(s->is_running(1) && s->is_running(2));
  ASSERT_TRUE(s->Submit(MakeJob(3, 0, QosClass::kBurstable, 1, 1000, 1, 1000)).ok());
  CycleResult r = s->Cycle(Seconds{1000});
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].victim, 2);
  EXPECT_TRUE(s->is_running(1));
}

// The same two B jobs (1000 s and 10 s old) with kinds and checkpoints: reclaim frees a node
// for A's job at t = 1000 and takes the one whose stop throws the least away.
JobId ReclaimVictimOf(const Job& old_job, const Job& young_job) {
  TenantTree tree = Tree({{"A", "", 1000}, {"B", "", 1000}});
  SchedulerOptions opt;
  opt.placement_policy = "firstfit";
  auto s = Make(tree, Nodes(2, 1), opt);
  EXPECT_TRUE(s->Submit(old_job).ok());
  s->Cycle(Seconds{0});
  EXPECT_TRUE(s->Submit(young_job).ok());
  s->Cycle(Seconds{990});
  EXPECT_TRUE(s->is_running(old_job.id) && s->is_running(young_job.id));
  EXPECT_TRUE(s->Submit(MakeJob(3, 0, QosClass::kBurstable, 1, 1000, 1, 1000)).ok());
  CycleResult r = s->Cycle(Seconds{1000});
  EXPECT_EQ(r.preempted.size(), 1u);
  return r.preempted.empty() ? 0 : r.preempted[0].victim;
}

TEST(Scheduler, AServiceReplicaCostsItsStartUpToPreempt) {
  // The 1000 s old job is a service replica with a 5 s start-up: taking it loses 5 GPU-seconds,
  // less than the young batch job's 10, however long the replica has served.
  Job service = MakeJob(1, 1, QosClass::kBurstable, 1);
  service.kind = JobKind::kService;
  service.startup = Seconds{5};
  EXPECT_EQ(ReclaimVictimOf(service, MakeJob(2, 1, QosClass::kBurstable, 1, 1000, 1, 990)), 1);
  // A start-up longer than the young job's run: the young batch job goes, as without kinds.
  service.startup = Seconds{60};
  EXPECT_EQ(ReclaimVictimOf(service, MakeJob(2, 1, QosClass::kBurstable, 1, 1000, 1, 990)), 2);
}

TEST(Scheduler, ABatchJobWithCheckpointsLosesOnlyItsRunSinceTheLast) {
  // The 1000 s old batch job checkpoints every 333 s: it would lose 1000 - 999 = 1 s, less
  // than the young job's 10 s without checkpoints.
  Job old_job = MakeJob(1, 1, QosClass::kBurstable, 1);
  old_job.checkpoint_interval = Seconds{333};
  EXPECT_EQ(ReclaimVictimOf(old_job, MakeJob(2, 1, QosClass::kBurstable, 1, 1000, 1, 990)), 1);
  old_job.checkpoint_interval = Seconds{300};  // 100 s since the last: the young one goes
  EXPECT_EQ(ReclaimVictimOf(old_job, MakeJob(2, 1, QosClass::kBurstable, 1, 1000, 1, 990)), 2);
}

TEST(Scheduler, ReclaimReprievesVictimsThePodDoesNotNeed) {
  // One 2-GPU node. A (guaranteed 1.8) runs a Guaranteed 0.8 on GPU 0; B (guaranteed 0.2)
  // borrows GPU 1 with a 1.0 job and, later, the rest of GPU 0 with a 0.2 job. A's 1-GPU job
  // is entitled: the search takes the cheap 0.2 first (it does not free a GPU), then the 1.0;
  // the 0.2 is then put back, since the 1.0 alone makes room.
  TenantTree tree = Tree({{"A", "", 1800}, {"B", "", 200}});
  SchedulerOptions opt;
  opt.placement_policy = "firstfit";
  auto s = Make(tree, Nodes(1, 2), opt);
  ASSERT_TRUE(s->Submit(MakeJob(1, 0, QosClass::kGuaranteed, 1, 800)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(2, 1, QosClass::kBurstable, 1, 1000)).ok());
  s->Cycle(Seconds{0});
  ASSERT_TRUE(s->Submit(MakeJob(3, 1, QosClass::kBurstable, 1, 200, 1, 500)).ok());
  s->Cycle(Seconds{500});
  ASSERT_TRUE(s->is_running(1) && s->is_running(2) && s->is_running(3));
  ASSERT_EQ(s->placement_of(3)->at(0).gpus, s->placement_of(1)->at(0).gpus);
  ASSERT_TRUE(s->Submit(MakeJob(4, 0, QosClass::kBurstable, 1, 1000, 1, 600)).ok());
  CycleResult r = s->Cycle(Seconds{600});
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].victim, 2);
  EXPECT_TRUE(s->is_running(3));
  EXPECT_TRUE(s->is_running(4));
}

TEST(Scheduler, ATenantAtItsGuaranteeLendsNothing) {
  // B runs exactly its guarantee (two 0.5-GPU jobs, both GPUs' halves): nothing of it is
  // borrowed, so A's entitled 1-GPU job waits (no free whole GPU) instead of preempting.
  TenantTree tree = Tree({{"A", "", 1000}, {"B", "", 1000}});
  SchedulerOptions opt;
  opt.placement_policy = "worstfit";
  opt.defragmentation = false;
  opt.consolidation = false;
  auto s = Make(tree, Nodes(1, 2), opt);
  ASSERT_TRUE(s->Submit(MakeJob(1, 1, QosClass::kBurstable, 1, 500)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(2, 1, QosClass::kBurstable, 1, 500, 1, 1)).ok());
  s->Cycle(Seconds{0});
  ASSERT_NE(s->placement_of(1)->at(0).gpus, s->placement_of(2)->at(0).gpus);
  ASSERT_TRUE(s->Submit(MakeJob(3, 0, QosClass::kBurstable, 1, 1000, 1, 2)).ok());
  CycleResult r = s->Cycle(Seconds{10});
  EXPECT_TRUE(r.preempted.empty());
  EXPECT_FALSE(s->is_running(3));
}

TEST(Scheduler, FairShareDefragmentationClearsANodeForTheLeastServedTenant) {
  // Two 2-GPU nodes. C (weight 1) runs two 1-GPU jobs, one per node (worstfit), borrowing
  // all its 2 GPUs (guarantee 0). B (weight 1, guarantee 0) wants a 2-GPU job: it fits on no
  // node and is not entitled. Under the equalize rule, fair-share preemption may not take one
  // of C's jobs (C would end with 1 GPU, B with 2); with fair_share_defragmentation, C is as
  // served as B will be (2 GPUs vs 2 GPUs: equal, allowed), so one of C's jobs moves and B
  // starts. (The lexicographic rule lets plain fair-share preemption take one of C's jobs.)
  TenantTree tree = Tree({{"A", "", 4000}, {"B", "", 0}, {"C", "", 0}});
  for (bool on : {false, true}) {
    SchedulerOptions opt;
    opt.fair_share_rule = FairShareRule::kEqualize;
    opt.placement_policy = "worstfit";
    opt.keep_large_nodes_clearable = false;
    opt.fair_share_defragmentation = on;
    auto s = Make(tree, Nodes(2, 2), opt);
    ASSERT_TRUE(s->Submit(MakeJob(1, 2, QosClass::kBurstable, 1)).ok());
    ASSERT_TRUE(s->Submit(MakeJob(2, 2, QosClass::kBurstable, 1)).ok());
    s->Cycle(Seconds{0});
    ASSERT_NE(s->placement_of(1)->at(0).node, s->placement_of(2)->at(0).node);
    ASSERT_TRUE(s->Submit(MakeJob(3, 1, QosClass::kBurstable, 2, 1000, 1, 1)).ok());
    CycleResult r = s->Cycle(Seconds{100});
    EXPECT_EQ(s->is_running(3), on) << "fair_share_defragmentation " << on;
    if (on) {
      // C's two jobs share the other node now (a restart), nothing was evicted.
      EXPECT_TRUE(r.preempted.empty());
      ASSERT_EQ(r.moves.size(), 1u);
      EXPECT_TRUE(r.moves[0].restart);
      EXPECT_EQ(s->placement_of(1)->at(0).node, s->placement_of(2)->at(0).node);
    }
  }
}

TEST(Scheduler, DefragmentationMovesEvictableFractionalWorkInsteadOfEvictingIt) {
  // Two 4-GPU nodes. A (guaranteed 5) runs a whole-GPU Guaranteed job, which never moves; B
  // (guaranteed 2) runs two 1-GPU jobs and C (guaranteed 1) borrows with a 0.5-GPU job and a
  // 1-GPU one, all on the other node. A's entitled 4-GPU job needs that node: B's jobs, at B's
  // guarantee, must move (whole GPUs: restarts); C's fractional pod, which A may evict, moves
  // live to the first node instead, losing nothing.
  TenantTree tree = Tree({{"A", "", 5000}, {"B", "", 2000}, {"C", "", 1000}});
  SchedulerOptions opt;
  opt.placement_policy = "bestfit";
  opt.keep_large_nodes_clearable = false;
  opt.consolidation = false;
  auto s = Make(tree, Nodes(2, 4), opt);
  ASSERT_TRUE(s->Submit(MakeJob(1, 0, QosClass::kGuaranteed, 1)).ok());
  s->Cycle(Seconds{0});
  const NodeIndex fixed = s->placement_of(1)->at(0).node;
  ASSERT_TRUE(s->Submit(MakeJob(2, 1, QosClass::kBurstable, 3)).ok());  // fills `fixed`
  s->Cycle(Seconds{1});
  ASSERT_EQ(s->placement_of(2)->at(0).node, fixed);
  ASSERT_TRUE(s->Submit(MakeJob(3, 1, QosClass::kBurstable, 1)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(4, 1, QosClass::kBurstable, 1)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(5, 2, QosClass::kBurstable, 1, 500)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(6, 2, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{2});
  for (JobId id = 3; id <= 6; ++id) ASSERT_NE(s->placement_of(id)->at(0).node, fixed) << id;
  ASSERT_TRUE(s->Complete(2, Seconds{50}).ok());  // frees 3 GPUs on `fixed`
  ASSERT_TRUE(s->Submit(MakeJob(7, 0, QosClass::kBurstable, 4, 1000, 1, 100)).ok());
  CycleResult r = s->Cycle(Seconds{100});
  ASSERT_TRUE(s->is_running(7));
  bool fractional_moved_live = false;
  for (const MoveEvent& mv : r.moves) fractional_moved_live |= mv.job == 5 && !mv.restart && mv.to.node == fixed;
  EXPECT_TRUE(fractional_moved_live);
  for (const PreemptEvent& p : r.preempted) EXPECT_NE(p.victim, 5);
  EXPECT_TRUE(s->is_running(5));
}

TEST(Scheduler, WithoutDefragmentationTheEntitledJobWaits) {
  SpreadFixture f(QosClass::kBurstable, /*defragmentation=*/false);
  CycleResult r = f.s->Cycle(Seconds{100});
  EXPECT_FALSE(f.s->is_running(10));
  EXPECT_EQ(f.s->wait_reason(10), WaitReason::kCapacity);
  EXPECT_TRUE(r.moves.empty());
}

// A swap: the protected pod in the way moves to where borrowed work was, which is preempted.
TEST(Scheduler, DefragmentationSwapsProtectedWorkWithBorrowedWork) {
  TenantTree tree = Tree({{"A", "", 4000}, {"B", "", 2000}, {"C", "", 2000}});
  SchedulerOptions opt;
  opt.placement_policy = "worstfit";
  auto s = Make(tree, Nodes(2, 4), opt);
  ASSERT_TRUE(s->Submit(MakeJob(1, 1, QosClass::kBurstable, 1)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(2, 1, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{0});
  ASSERT_NE(s->placement_of(1)->at(0).node, s->placement_of(2)->at(0).node);
  for (JobId id = 3; id <= 8; ++id) ASSERT_TRUE(s->Submit(MakeJob(id, 2, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{1});
  ASSERT_EQ(s->cluster().allocated_gpu().value(), 8000);  // C borrows 4 GPUs
  ASSERT_TRUE(s->Submit(MakeJob(10, 0, QosClass::kBurstable, 4)).ok());
  CycleResult r = s->Cycle(Seconds{100});
  ASSERT_TRUE(s->is_running(10));
  ASSERT_EQ(r.moves.size(), 1u);  // one of B's pods changes node
  EXPECT_LE(r.moves[0].job, 2);
  EXPECT_EQ(r.preempted.size(), 4u);  // C's borrowed GPUs, C keeps its guarantee
  for (const PreemptEvent& p : r.preempted) EXPECT_GE(p.victim, 3);
  EXPECT_GE(s->protected_usage(2)[kGpuMilliDim], 2000);
  EXPECT_TRUE(s->is_running(1) && s->is_running(2));
  EXPECT_EQ(s->placement_of(1)->at(0).node, s->placement_of(2)->at(0).node);
}

// The violation test of the scenario metrics: below the guarantee (Guaranteed + Burstable work
// counted) with a waiting job that fits in the unused part.
TEST(Scheduler, BelowGuaranteeWithWaitingCountsGuaranteedAndBurstableWork) {
  TenantTree tree = Tree({{"a", "", 2000}, {"b", "", 2000}});
  const TenantIndex a = *tree.Find("a"), b = *tree.Find("b");
  // b fills the cluster: 2 GPUs within its guarantee, 2 borrowed (min runtime 1 h: no reclaim).
  SchedulerOptions opt;
  opt.min_runtime = Seconds{3600};
  auto s = Make(tree, Nodes(1, 4), opt);
  for (JobId id = 1; id <= 4; ++id) ASSERT_TRUE(s->Submit(MakeJob(id, b, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{0});
  EXPECT_FALSE(s->BelowGuaranteeWithWaiting(a));
  // a waits with a 1-GPU job while using nothing: a violation.
  ASSERT_TRUE(s->Submit(MakeJob(5, a, QosClass::kBurstable, 1)).ok());
  s->Cycle(Seconds{1});
  EXPECT_TRUE(s->is_pending(5));
  EXPECT_TRUE(s->BelowGuaranteeWithWaiting(a));
  EXPECT_FALSE(s->BelowGuaranteeWithWaiting(b));  // b has nothing waiting
  // A waiting job larger than the unused guarantee is not one.
  ASSERT_TRUE(s->Cancel(5).ok());
  ASSERT_TRUE(s->Submit(MakeJob(6, a, QosClass::kBurstable, 3)).ok());
  s->Cycle(Seconds{2});
  EXPECT_FALSE(s->BelowGuaranteeWithWaiting(a));
  // b at its guarantee through Burstable work, with a Guaranteed job waiting (entitled to
  // displace b's own borrowed work once it may be preempted): b is not below its guarantee.
  ASSERT_TRUE(s->Submit(MakeJob(7, b, QosClass::kGuaranteed, 1)).ok());
  s->Cycle(Seconds{3});
  EXPECT_TRUE(s->is_pending(7));
  EXPECT_FALSE(s->BelowGuaranteeWithWaiting(b));
}

TEST(Scheduler, DecayedUsageRemembersHistory) {
  TenantTree tree = Tree({{"A"}, {"B"}});
  SchedulerOptions opt;
  opt.fair_share_half_life_s = 3600;
  auto s = Make(tree, Nodes(1, 2), opt);
  ASSERT_TRUE(s->Submit(MakeJob(1, 0, QosClass::kBurstable, 2)).ok());
  s->Cycle(Seconds{0});
  s->Cycle(Seconds{7200});  // A used the whole cluster for two half-lives
  ASSERT_TRUE(s->Complete(1, Seconds{7200}).ok());
  s->Cycle(Seconds{7200});
  EXPECT_GT(s->dominant_share(0), 0.5);  // remembered although A runs nothing now
  ASSERT_TRUE(s->Submit(MakeJob(2, 0, QosClass::kBurstable, 2, 1000, 1, 7201)).ok());
  ASSERT_TRUE(s->Submit(MakeJob(3, 1, QosClass::kBurstable, 2, 1000, 1, 7202)).ok());
  s->Cycle(Seconds{7203});
  EXPECT_TRUE(s->is_running(3));  // B, with no history, goes first
  EXPECT_FALSE(s->is_running(2));
}

}  // namespace
}  // namespace tessera::sched

namespace tessera::sched {
namespace {

using placement::Placement;

// Adopt rebuilds state after a restart: what runs, runs where it ran; a placement that cannot
// be (wrong pod count, a full GPU, a node outside the cluster) is refused with the job named.
TEST(SchedulerAdopt, RebuildsUsageAndPlacementsOrSaysWhatCannotBe) {
  TenantTree tree = Tree({{"a", "", 1000}, {"b", "", 1000}});
  auto s = Make(tree, Nodes(1, 2));
  const Placement gpu0{NodeIndex{0}, placement::GpuBit(0)};
  const Placement gpu1{NodeIndex{0}, placement::GpuBit(1)};
  ASSERT_TRUE(s->Adopt(MakeJob(7, 1, QosClass::kBurstable, 1), {gpu0}, Seconds{100}, 5).ok());
  EXPECT_TRUE(s->is_running(7));
  EXPECT_EQ(s->usage(1)[kGpuMilliDim], 1000);
  EXPECT_EQ(s->cluster().gpu_free(NodeIndex{0}, 0), 0);
  EXPECT_EQ(s->start_time(7), Seconds{100});
  EXPECT_EQ(s->placed_seq(7), 5u);

  EXPECT_THAT(s->Adopt(MakeJob(8, 0, QosClass::kBurstable, 1), {gpu0}, Seconds{0}, 6).message(),
              HasSubstr("job 8: pod 0 cannot run where it was"));
  EXPECT_THAT(s->Adopt(MakeJob(9, 0, QosClass::kBurstable, 1, 1000, 2), {gpu1}, Seconds{0}, 6).message(),
              HasSubstr("job 9: 1 placements for 2 pods"));
  EXPECT_THAT(s->Adopt(MakeJob(7, 0, QosClass::kBurstable, 1), {gpu1}, Seconds{0}, 6).message(),
              HasSubstr("duplicate job id"));
  EXPECT_THAT(s->Adopt(MakeJob(10, 0, QosClass::kBurstable, 1), {{NodeIndex{3}, placement::GpuBit(0)}},
                       Seconds{0}, 6).message(),
              HasSubstr("outside the cluster"));
  // A refused adoption leaves nothing behind: GPU 1 is still free.
  EXPECT_EQ(s->cluster().gpu_free(NodeIndex{0}, 1), 1000);
  EXPECT_EQ(s->running_count(), 1u);

  // The adopted borrower is reclaimed like any other: a's entitled job takes GPU 1 first, then
  // b's second job waits (b is at its guarantee) and a's next Guaranteed job waits on capacity.
  ASSERT_TRUE(s->Submit(MakeJob(11, 0, QosClass::kGuaranteed, 1)).ok());
  CycleResult r = s->Cycle(Seconds{200});
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_EQ(r.started[0].job, 11);
  EXPECT_GT(r.started[0].seq, 5u);  // the sequence continues after the adopted one
}

// The restored queue keeps the last wait reasons until the next cycle decides again.
TEST(SchedulerAdopt, RestoredPendingJobsKeepTheirWaitReason) {
  TenantTree tree = Tree({{"a", "", 1000}});
  auto s = Make(tree, Nodes(1, 1));
  ASSERT_TRUE(s->SubmitRestored(MakeJob(3, 0, QosClass::kBurstable, 1), WaitReason::kLimit).ok());
  EXPECT_EQ(s->wait_reason(3), WaitReason::kLimit);
  EXPECT_EQ(s->pending_jobs(), std::vector<JobId>{3});
  s->Cycle(Seconds{0});
  EXPECT_TRUE(s->is_running(3));
}

// Cordon: a cordoned node takes no new pod, by placement or by reclaim; its work stays.
TEST(SchedulerCordon, NoNewPodOnACordonedNodeUntilUncordoned) {
  TenantTree tree = Tree({{"a"}});
  auto s = Make(tree, Nodes(2, 1));
  ASSERT_TRUE(s->Adopt(MakeJob(1, 0, QosClass::kBurstable, 1), {{NodeIndex{1}, placement::GpuBit(0)}},
                       Seconds{0}, 1).ok());
  ASSERT_TRUE(s->SetCordoned(NodeIndex{0}, true).ok());
  EXPECT_TRUE(s->cordoned(NodeIndex{0}));
  EXPECT_FALSE(s->cordoned(NodeIndex{1}));
  EXPECT_FALSE(s->SetCordoned(NodeIndex{2}, true).ok());
  ASSERT_TRUE(s->Submit(MakeJob(2, 0, QosClass::kBurstable, 1)).ok());
  CycleResult r = s->Cycle(Seconds{10});
  EXPECT_TRUE(r.started.empty());
  EXPECT_EQ(s->wait_reason(2), WaitReason::kCapacity);
  ASSERT_TRUE(s->SetCordoned(NodeIndex{0}, true).ok());  // twice: still one cordoned node
  ASSERT_TRUE(s->SetCordoned(NodeIndex{0}, false).ok());
  r = s->Cycle(Seconds{20});
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_EQ(r.started[0].pods[0].node, NodeIndex{0});
  EXPECT_TRUE(s->is_running(1));
}

TEST(SchedulerCordon, ReclaimTakesNoVictimOnACordonedNode) {
  // a is guaranteed 1 GPU; b borrows both GPUs, one per node; node 0 is cordoned.
  TenantTree tree = Tree({{"a", "", 1000}, {"b"}});
  auto s = Make(tree, Nodes(2, 1));
  ASSERT_TRUE(s->Adopt(MakeJob(1, 1, QosClass::kBurstable, 1), {{NodeIndex{0}, placement::GpuBit(0)}},
                       Seconds{0}, 1).ok());
  ASSERT_TRUE(s->Adopt(MakeJob(2, 1, QosClass::kBurstable, 1), {{NodeIndex{1}, placement::GpuBit(0)}},
                       Seconds{5}, 2).ok());
  ASSERT_TRUE(s->SetCordoned(NodeIndex{1}, true).ok());
  ASSERT_TRUE(s->Submit(MakeJob(3, 0, QosClass::kGuaranteed, 1)).ok());
  // Job 2 has run least (the first victim without the cordon); node 1 is cordoned, so job 1 goes.
  const CycleResult r = s->Cycle(Seconds{100});
  ASSERT_EQ(r.preempted.size(), 1u);
  EXPECT_EQ(r.preempted[0].victim, 1);
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_EQ(r.started[0].pods[0].node, NodeIndex{0});
}

TEST(SchedulerCordon, ConsolidationMovesNothingOntoACordonedNode) {
  TenantTree tree = Tree({{"a"}});
  // Node 0 holds two half-GPU pods (one per GPU); node 1 is empty and cordoned. A 2-GPU job
  // could start on node 0 only if both pods moved to node 1.
  auto s = Make(tree, Nodes(2, 2));
  ASSERT_TRUE(s->Adopt(MakeJob(1, 0, QosClass::kBurstable, 1, 500), {{NodeIndex{0}, placement::GpuBit(0)}},
                       Seconds{0}, 1).ok());
  ASSERT_TRUE(s->Adopt(MakeJob(2, 0, QosClass::kBurstable, 1, 500), {{NodeIndex{0}, placement::GpuBit(1)}},
                       Seconds{0}, 2).ok());
  ASSERT_TRUE(s->SetCordoned(NodeIndex{1}, true).ok());
  ASSERT_TRUE(s->Submit(MakeJob(3, 0, QosClass::kBurstable, 2)).ok());
  CycleResult r = s->Cycle(Seconds{100});
  EXPECT_TRUE(r.moves.empty());
  EXPECT_TRUE(r.started.empty());
  ASSERT_TRUE(s->SetCordoned(NodeIndex{1}, false).ok());
  r = s->Cycle(Seconds{110});
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_EQ(r.started[0].pods[0].node, NodeIndex{1});
}

TEST(SchedulerCordon, DefragmentationClearsNoCordonedNodeAndMovesNothingThere) {
  // a and b are guaranteed 4 GPUs each; b runs four 1-GPU jobs, two on each of nodes 0 and 1
  // (b is at its guarantee: no victim). Node 2 is empty and cordoned. a's 4-GPU job needs a
  // node cleared: b's two jobs on one node restart on the other, never on node 2.
  TenantTree tree = Tree({{"a", "", 4000}, {"b", "", 4000}});
  auto s = Make(tree, Nodes(3, 4));
  for (int k = 0; k < 4; ++k)
    ASSERT_TRUE(s->Adopt(MakeJob(k + 1, 1, QosClass::kBurstable, 1),
                         {{NodeIndex{static_cast<uint32_t>(k / 2)}, placement::GpuBit(k % 2)}},
                         Seconds{0}, k + 1).ok());
  ASSERT_TRUE(s->SetCordoned(NodeIndex{2}, true).ok());
  ASSERT_TRUE(s->Submit(MakeJob(9, 0, QosClass::kGuaranteed, 4)).ok());
  const CycleResult r = s->Cycle(Seconds{100});
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_NE(r.started[0].pods[0].node, NodeIndex{2});
  EXPECT_EQ(r.moves.size(), 2u);
  for (const MoveEvent& m : r.moves) EXPECT_NE(m.to.node, NodeIndex{2});
  EXPECT_TRUE(r.preempted.empty());
}

}  // namespace
}  // namespace tessera::sched
