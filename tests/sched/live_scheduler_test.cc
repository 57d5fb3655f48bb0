// The open-world scheduler core: external ids, a live world (nodes joining, leaving, cordoned,
// drained; tenants replaced), decisions as values, and the rebuild that applies world changes
// without changing any decision the world does not force.
#include "tessera/sched/live_scheduler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "tessera/core/rng.h"

namespace tessera::sched {
namespace {

using placement::NodeSpec;
using placement::TaskRequest;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

GpuModelId V100() { return *GpuModelCatalog::Builtin().Find("V100M16"); }

NodeSpec Node(const std::string& name, int gpus) {
  return {name, CpuMilli{8000 * gpus}, MiB{65536 * gpus}, gpus, V100()};
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

LiveJob J(JobId id, const std::string& tenant, QosClass qos, int gpus, int milli = 1000, int pods = 1,
          int64_t submit = 0) {
  LiveJob j;
  j.id = id;
  j.tenant = tenant;
  j.qos = qos;
  j.pods = pods;
  j.pod = TaskRequest{.cpu = CpuMilli{1000}, .memory = MiB{1024}, .num_gpu = gpus,
                      .gpu_milli = GpuMilli{milli}};
  j.submit = Seconds{submit};
  return j;
}

SchedulerOptions Opts() {
  SchedulerOptions o;
  o.min_runtime = Seconds{0};
  return o;
}

std::unique_ptr<LiveScheduler> Make(TenantTree tree, std::vector<NodeSpec> nodes,
                                    SchedulerOptions o = Opts(), LiveAffinity a = {}) {
  auto s = LiveScheduler::Create(std::move(tree), std::move(nodes), o, std::move(a));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

std::string Describe(const LiveCycleResult& r, bool with_seq = true) {
  std::ostringstream o;
  auto pod = [&](const PodPlacement& p) { o << p.node << ":" << p.gpus << ":" << p.mig_start << " "; };
  for (const LiveStart& s : r.started) {
    o << "start " << s.job << " ";
    for (const PodPlacement& p : s.pods) pod(p);
    if (with_seq) o << "seq " << s.seq;
    o << "\n";
  }
  for (const PreemptEvent& p : r.preempted) o << "preempt " << p.victim << " by " << p.by << " " << p.fair_share << "\n";
  for (const LiveMove& m : r.moves) {
    o << "move " << m.job << " ";
    pod(m.from);
    pod(m.to);
    o << m.for_job << " " << m.restart;
    if (with_seq) o << " seq " << m.seq;
    o << "\n";
  }
  for (const LiveWait& w : r.waits) o << "wait " << w.job << " " << WaitReasonName(w.reason) << "\n";
  for (const LiveRejection& x : r.rejected) o << "reject " << x.job << " " << x.reason << "\n";
  if (!r.error.ok()) o << "error " << r.error.ToString() << "\n";
  return o.str();
}

// The header's worked example, step by step.
TEST(LiveScheduler, HeaderExample) {
  auto s = Make(Tree({{"a", "", 1000}, {"b"}}), {Node("n1", 1), Node("n2", 1)});
  ASSERT_TRUE(s->Submit(J(7, "b", QosClass::kBurstable, 1)).ok());
  ASSERT_TRUE(s->Submit(J(8, "b", QosClass::kBurstable, 1)).ok());
  LiveCycleResult r = s->Cycle(Seconds{10});
  ASSERT_EQ(r.started.size(), 2u) << Describe(r);
  EXPECT_EQ(r.started[0].job, 7);
  EXPECT_EQ(r.started[0].pods, std::vector<PodPlacement>({{"n1", 1, -1}}));
  EXPECT_EQ(r.started[0].seq, 1u);
  EXPECT_EQ(r.started[1].pods, std::vector<PodPlacement>({{"n2", 1, -1}}));
  EXPECT_TRUE(r.waits.empty()) << Describe(r);

  auto drained = s->Drain("n2");
  ASSERT_TRUE(drained.ok());
  EXPECT_THAT(*drained, ElementsAre(8));
  EXPECT_TRUE(s->is_pending(8));
  r = s->Cycle(Seconds{20});
  EXPECT_TRUE(r.started.empty()) << Describe(r);
  ASSERT_EQ(r.waits.size(), 1u);
  EXPECT_EQ(r.waits[0].job, 8);
  EXPECT_EQ(r.waits[0].reason, WaitReason::kCapacity);
  EXPECT_EQ(s->nodes()[1].state, NodeState::kCordoned);

  auto lost = s->RemoveNode("n2");
  ASSERT_TRUE(lost.ok());
  EXPECT_TRUE(lost->empty());
  ASSERT_TRUE(s->AddNode(Node("n3", 1)).ok());
  r = s->Cycle(Seconds{30});
  ASSERT_EQ(r.started.size(), 1u) << Describe(r);
  EXPECT_EQ(r.started[0].job, 8);
  EXPECT_EQ(r.started[0].pods[0].node, "n3");

  lost = s->RemoveNode("n1");
  ASSERT_TRUE(lost.ok());
  EXPECT_THAT(*lost, ElementsAre(7));
  EXPECT_FALSE(s->is_running(7));
  EXPECT_FALSE(s->is_pending(7));
  EXPECT_EQ((*s->usage("b"))[kGpuMilliDim], 1000);  // job 8 only
  // Requeue the lost job by submitting it again: it waits (n3 is busy).
  ASSERT_TRUE(s->Submit(J(7, "b", QosClass::kBurstable, 1)).ok());
  r = s->Cycle(Seconds{40});
  EXPECT_TRUE(r.started.empty());
  ASSERT_EQ(s->nodes().size(), 1u);
  EXPECT_EQ(s->nodes()[0].name, "n3");
  EXPECT_THAT(s->nodes()[0].jobs, ElementsAre(8));
}

TEST(LiveScheduler, ExternalIdsAndBadInputNameWhatIsWrong) {
  auto tree = Tree({{"org"}, {"a", "org"}});
  SchedulerOptions by_index = Opts();
  by_index.affinity.tenants_apart = {{0, 1}};
  EXPECT_THAT(LiveScheduler::Create(tree, {Node("n1", 1)}, by_index).status().message(),
              HasSubstr("by name"));
  LiveAffinity bad;
  bad.tenants_apart = {{"a", "nobody"}};
  EXPECT_THAT(LiveScheduler::Create(tree, {Node("n1", 1)}, Opts(), bad).status().message(),
              HasSubstr("unknown tenant 'nobody'"));
  EXPECT_THAT(LiveScheduler::Create(tree, {Node("n1", 1), Node("n1", 2)}, Opts()).status().message(),
              HasSubstr("node 'n1' is listed twice"));
  EXPECT_THAT(LiveScheduler::Create(Tree({{"a", "", 4000}}), {Node("n1", 1)}, Opts()).status().message(),
              HasSubstr("gpu_milli"));

  auto s = Make(tree, {Node("n1", 1)});
  Status st = s->Submit(J(1, "nobody", QosClass::kBurstable, 1));
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("unknown tenant 'nobody'"));
  EXPECT_THAT(s->Submit(J(1, "org", QosClass::kBurstable, 1)).message(), HasSubstr("sub-tenants"));
  EXPECT_EQ(s->Cordon("n9").code(), StatusCode::kNotFound);
  EXPECT_EQ(s->Uncordon("n9").code(), StatusCode::kNotFound);
  EXPECT_EQ(s->RemoveNode("n9").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s->Drain("n9").status().code(), StatusCode::kNotFound);
  EXPECT_THAT(s->AddNode(Node("n1", 2)).message(), HasSubstr("already exists"));
  NodeSpec broken = Node("n2", 1);
  broken.gpu_count = 99;
  EXPECT_THAT(s->AddNode(broken).message(), HasSubstr("node 'n2'"));
  EXPECT_EQ(s->usage("nobody").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(s->Complete(5, Seconds{0}).code(), StatusCode::kNotFound);
  EXPECT_EQ(s->Cancel(5).code(), StatusCode::kNotFound);
  EXPECT_EQ(s->Adopt(J(3, "a", QosClass::kBurstable, 1), {{"n9", 1, -1}}, Seconds{0}, 1).code(),
            StatusCode::kNotFound);
}

TEST(LiveScheduler, RemovingANodeLosesTheWholeGangAndFreesItsOtherPods) {
  auto s = Make(Tree({{"a"}}), {Node("n1", 2), Node("n2", 2)});
  ASSERT_TRUE(s->Submit(J(1, "a", QosClass::kBurstable, 2, 1000, 2)).ok());  // 2 nodes x 2 GPUs
  LiveCycleResult r = s->Cycle(Seconds{1});
  ASSERT_EQ(r.started.size(), 1u);
  auto lost = s->RemoveNode("n1");
  ASSERT_TRUE(lost.ok());
  EXPECT_THAT(*lost, ElementsAre(1));
  EXPECT_FALSE(s->is_running(1));
  EXPECT_EQ((*s->usage("a"))[kGpuMilliDim], 0);
  const auto nodes = s->nodes();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_THAT(nodes[0].gpu_free_milli, ElementsAre(1000, 1000));
  EXPECT_TRUE(nodes[0].jobs.empty());
  // Requeued by the caller, the gang waits: one node cannot hold both pods.
  ASSERT_TRUE(s->Submit(J(1, "a", QosClass::kBurstable, 2, 1000, 2)).ok());
  EXPECT_TRUE(s->Cycle(Seconds{2}).started.empty());
  EXPECT_EQ(s->wait_reason(1), WaitReason::kCapacity);
}

TEST(LiveScheduler, DrainedWorkStartsElsewhereNeverOnTheDrainedNode) {
  auto s = Make(Tree({{"a"}}), {Node("n1", 2), Node("n2", 2)});
  ASSERT_TRUE(s->Submit(J(1, "a", QosClass::kBurstable, 1, 500)).ok());
  ASSERT_TRUE(s->Submit(J(2, "a", QosClass::kBurstable, 1, 500)).ok());
  LiveCycleResult r = s->Cycle(Seconds{1});
  ASSERT_EQ(r.started.size(), 2u);
  const std::string busy = r.started[0].pods[0].node;
  auto drained = s->Drain(busy);
  ASSERT_TRUE(drained.ok());
  EXPECT_FALSE(drained->empty());
  r = s->Cycle(Seconds{2});
  ASSERT_EQ(r.started.size(), drained->size()) << Describe(r);
  for (const LiveStart& st : r.started) EXPECT_NE(st.pods[0].node, busy);
  ASSERT_TRUE(s->Uncordon(busy).ok());
  EXPECT_EQ(s->nodes()[busy == "n1" ? 0 : 1].state, NodeState::kReady);
}

TEST(LiveScheduler, CordonWhileAWorldChangeIsRecordedSurvivesTheRebuild) {
  auto s = Make(Tree({{"a"}}), {Node("n1", 1)});
  ASSERT_TRUE(s->AddNode(Node("n2", 1)).ok());  // recorded: the next read rebuilds
  ASSERT_TRUE(s->Cordon("n1").ok());
  ASSERT_TRUE(s->Submit(J(1, "a", QosClass::kBurstable, 1)).ok());
  ASSERT_TRUE(s->Submit(J(2, "a", QosClass::kBurstable, 1)).ok());
  const LiveCycleResult r = s->Cycle(Seconds{1});
  ASSERT_EQ(r.started.size(), 1u) << Describe(r);
  EXPECT_EQ(r.started[0].pods[0].node, "n2");
}

TEST(LiveScheduler, TenantChangesApplyNextCycleAndNeverTouchRunningWork) {
  auto s = Make(Tree({{"a"}, {"b"}}), {Node("n1", 4)});
  ASSERT_TRUE(s->Submit(J(1, "a", QosClass::kBurstable, 2)).ok());
  ASSERT_TRUE(s->Cycle(Seconds{1}).started.size() == 1);
  ASSERT_TRUE(s->Submit(J(2, "a", QosClass::kBurstable, 2)).ok());
  ASSERT_TRUE(s->Submit(J(3, "b", QosClass::kBurstable, 1)).ok());
  // Refused: b has a job and would be gone; a would get a sub-tenant; guarantees over capacity.
  EXPECT_EQ(s->SetTenants(Tree({{"a"}})).code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s->SetTenants(Tree({{"a"}, {"b"}, {"a1", "a"}})).message(), HasSubstr("sub-tenants"));
  EXPECT_EQ(s->SetTenants(Tree({{"a", "", 3000}, {"b", "", 2000}})).code(), StatusCode::kInvalidArgument);
  // a's limit drops to 1 GPU: job 1 (2 GPUs) keeps running, job 2 can never run now; a new
  // tenant c can submit at once.
  ASSERT_TRUE(s->SetTenants(Tree({{"a", "", 0, 1000}, {"b"}, {"c"}})).ok());
  EXPECT_EQ(s->tenants().size(), 3);
  ASSERT_TRUE(s->Submit(J(4, "c", QosClass::kBurstable, 1)).ok());
  const LiveCycleResult r = s->Cycle(Seconds{2});
  EXPECT_TRUE(s->is_running(1));
  EXPECT_EQ(*s->start_time(1), Seconds{1});
  ASSERT_EQ(r.rejected.size(), 1u) << Describe(r);
  EXPECT_EQ(r.rejected[0].job, 2);
  EXPECT_THAT(r.rejected[0].reason, HasSubstr("over the limit of tenant 'a'"));
  EXPECT_FALSE(s->is_pending(2));
  EXPECT_EQ(r.started.size(), 2u) << Describe(r);  // b's and c's jobs
  EXPECT_TRUE(s->Cycle(Seconds{3}).rejected.empty());
}

TEST(LiveScheduler, ARaisedGuaranteeReclaimsInTheNextCycle) {
  // a has no guarantee and waits behind b's borrowed work; once a is guaranteed 1 GPU, its
  // Guaranteed job is entitled and reclaims.
  auto s = Make(Tree({{"a"}, {"b"}}), {Node("n1", 1)});
  ASSERT_TRUE(s->Submit(J(1, "b", QosClass::kBurstable, 1)).ok());
  ASSERT_EQ(s->Cycle(Seconds{1}).started.size(), 1u);
  LiveJob g = J(2, "a", QosClass::kGuaranteed, 1);
  EXPECT_THAT(s->Submit(g).message(), HasSubstr("as Guaranteed"));
  ASSERT_TRUE(s->SetTenants(Tree({{"a", "", 1000}, {"b"}})).ok());
  ASSERT_TRUE(s->Submit(g).ok());
  const LiveCycleResult r = s->Cycle(Seconds{100});
  ASSERT_EQ(r.preempted.size(), 1u) << Describe(r);
  EXPECT_EQ(r.preempted[0].victim, 1);
  ASSERT_EQ(r.started.size(), 1u);
  EXPECT_EQ(r.started[0].job, 2);
  // The victim waits again, and says so once.
  ASSERT_EQ(r.waits.size(), 1u);
  EXPECT_EQ(r.waits[0].job, 1);
  EXPECT_TRUE(s->Cycle(Seconds{101}).waits.empty());
}

TEST(LiveScheduler, WaitReasonsAreReportedWhenTheyChange) {
  auto s = Make(Tree({{"a", "", 0, 1000}}), {Node("n1", 2)});
  ASSERT_TRUE(s->Submit(J(1, "a", QosClass::kBurstable, 1)).ok());
  ASSERT_TRUE(s->Submit(J(2, "a", QosClass::kBurstable, 1)).ok());
  LiveCycleResult r = s->Cycle(Seconds{1});
  ASSERT_EQ(r.started.size(), 1u);
  ASSERT_EQ(r.waits.size(), 1u) << Describe(r);
  EXPECT_EQ(r.waits[0].job, 2);
  EXPECT_EQ(r.waits[0].reason, WaitReason::kLimit);
  EXPECT_TRUE(s->Cycle(Seconds{2}).waits.empty());
  EXPECT_EQ(s->wait_reason(2), WaitReason::kLimit);
  EXPECT_EQ(s->wait_reason(1), WaitReason::kNone);
}

// A rebuild keeps each pending job's wait reason, also for jobs no cycle visits again (a full
// cluster stops the cycle early): nothing is reported as changed.
TEST(LiveScheduler, ARebuildKeepsWaitReasonsTheCycleDoesNotRevisit) {
  SchedulerOptions o = Opts();
  o.preemption = false;
  const TenantTree tree = Tree({{"a", "", 0, 1000}, {"b"}});
  auto s = Make(tree, {Node("n1", 2)}, o);
  ASSERT_TRUE(s->Submit(J(1, "a", QosClass::kBurstable, 1)).ok());
  ASSERT_TRUE(s->Submit(J(2, "a", QosClass::kBurstable, 1)).ok());
  ASSERT_EQ(s->Cycle(Seconds{1}).started.size(), 1u);
  ASSERT_EQ(s->wait_reason(2), WaitReason::kLimit);
  ASSERT_TRUE(s->Submit(J(3, "b", QosClass::kBurstable, 1)).ok());
  ASSERT_EQ(s->Cycle(Seconds{2}).started.size(), 1u);  // the node is full now
  ASSERT_TRUE(s->SetTenants(tree).ok());
  const LiveCycleResult r = s->Cycle(Seconds{3});
  EXPECT_TRUE(r.waits.empty()) << Describe(r);
  EXPECT_EQ(s->wait_reason(2), WaitReason::kLimit);
}

// --- the same decisions as the core, and rebuilds that change none -------------------------

struct Script {
  std::vector<NodeSpec> nodes;
  TenantTree tree;
  std::vector<LiveJob> jobs;  // submitted in order, a few per step
};

Script RandomScript(uint64_t seed) {
  Rng rng(seed);
  Script sc{{}, Tree({{"org", "", 5000}, {"a", "org", 3000, kUnlimited, 2}, {"b", "org", 2000}, {"c", "", 1000}}), {}};
  for (int n = 0; n < 4; ++n) sc.nodes.push_back(Node("node-" + std::to_string(n), 2 + static_cast<int>(rng.Uniform(3))));
  const char* tenants[] = {"a", "b", "c"};
  for (JobId id = 1; id <= 120; ++id) {
    const QosClass q = static_cast<QosClass>(rng.Uniform(3));
    const bool frac = rng.Uniform(2) == 0;
    const int gpus = frac ? 1 : 1 + static_cast<int>(rng.Uniform(2));
    LiveJob j = J(id * 10 + 3, tenants[rng.Uniform(3)], q, gpus, frac ? 250 * (1 + static_cast<int>(rng.Uniform(3))) : 1000);
    if (q == QosClass::kGuaranteed && j.tenant == "c") j.qos = QosClass::kBurstable;  // within c's 1 GPU
    j.priority = static_cast<int32_t>(rng.Uniform(3));
    j.submit = Seconds{static_cast<int64_t>(id)};
    sc.jobs.push_back(j);
  }
  return sc;
}

// Drives `s` through the script: each step submits 3 jobs, completes the longest-running job
// every other step, and runs a cycle. `between` runs before each cycle. Returns the cycle log.
template <typename F>
std::string Drive(LiveScheduler& s, const Script& sc, F between) {
  std::string log;
  size_t next = 0;
  for (int step = 0; step < 40; ++step) {
    for (int k = 0; k < 3 && next < sc.jobs.size(); ++k) {
      Status st = s.Submit(sc.jobs[next++]);
      log += st.ok() ? "" : "submit refused: " + st.message() + "\n";
    }
    if (step % 2 == 1) {
      const std::vector<JobId> running = s.running_jobs();
      if (!running.empty()) {
        EXPECT_TRUE(s.Complete(running.front(), Seconds{step * 100}).ok());
      }
    }
    between(step);
    log += "cycle " + std::to_string(step) + "\n" + Describe(s.Cycle(Seconds{step * 100 + 50}), false);
  }
  return log;
}

TEST(LiveScheduler, MakesTheCoresDecisions) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const Script sc = RandomScript(seed);
    auto live = Make(sc.tree, sc.nodes, SchedulerOptions{});
    auto core = Scheduler::Create(&sc.tree, sc.nodes, SchedulerOptions{});
    ASSERT_TRUE(core.ok());
    size_t next = 0;
    for (int step = 0; step < 40; ++step) {
      for (int k = 0; k < 3 && next < sc.jobs.size(); ++k, ++next) {
        const LiveJob& j = sc.jobs[next];
        Job c;
        c.id = j.id;
        c.tenant = *sc.tree.Find(j.tenant);
        c.qos = j.qos;
        c.priority = j.priority;
        c.pod = j.pod;
        c.submit = j.submit;
        EXPECT_EQ(live->Submit(j).ok(), (*core)->Submit(c).ok());
      }
      const LiveCycleResult a = live->Cycle(Seconds{step * 100});
      const CycleResult b = (*core)->Cycle(Seconds{step * 100});
      ASSERT_EQ(a.started.size(), b.started.size()) << "seed " << seed << " step " << step;
      for (size_t i = 0; i < a.started.size(); ++i) {
        EXPECT_EQ(a.started[i].job, b.started[i].job);
        EXPECT_EQ(a.started[i].seq, b.started[i].seq);
        ASSERT_EQ(a.started[i].pods.size(), b.started[i].pods.size());
        for (size_t p = 0; p < a.started[i].pods.size(); ++p) {
          EXPECT_EQ(a.started[i].pods[p].node, sc.nodes[b.started[i].pods[p].node.value()].name);
          EXPECT_EQ(a.started[i].pods[p].gpus, b.started[i].pods[p].gpus);
        }
      }
      ASSERT_EQ(a.preempted.size(), b.preempted.size());
      for (size_t i = 0; i < a.preempted.size(); ++i) EXPECT_EQ(a.preempted[i].victim, b.preempted[i].victim);
      ASSERT_EQ(a.moves.size(), b.moves.size());
      for (JobId id : (*core)->pending_jobs()) EXPECT_EQ(live->wait_reason(id), (*core)->wait_reason(id));
    }
  }
}

// Rebuilding in an unchanged world (a tenant tree equal to the old one; a node that joins and
// leaves again before anything runs on it) changes no decision and no wait report.
// Also with fair share on decayed usage: the rebuild carries the decayed usage over.
TEST(LiveScheduler, RebuildInAnUnchangedWorldChangesNoDecision) {
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const Script sc = RandomScript(seed);
    SchedulerOptions o;
    if (seed > 5) o.fair_share_half_life_s = 300;
    auto plain = Make(sc.tree, sc.nodes, o);
    auto rebuilt = Make(sc.tree, sc.nodes, o);
    const std::string want = Drive(*plain, sc, [](int) {});
    int rebuilds = 0;
    const std::string got = Drive(*rebuilt, sc, [&](int step) {
      if (step % 3 == 0) {
        ASSERT_TRUE(rebuilt->SetTenants(sc.tree).ok());
        ++rebuilds;
      } else if (step % 3 == 1) {
        ASSERT_TRUE(rebuilt->AddNode(Node("spare", 2)).ok());
        ASSERT_TRUE(rebuilt->RemoveNode("spare").ok());
        ++rebuilds;
      }
    });
    EXPECT_GT(rebuilds, 20);
    EXPECT_EQ(got, want) << "seed " << seed;
    EXPECT_NE(want.find("preempt"), std::string::npos) << "the script should exercise preemption";
  }
}

// A changed tree keeps each tenant's decayed usage where its leaves are the same, and a new
// tenant starts at zero.
TEST(LiveScheduler, ANewTreeKeepsDecayedUsageByName) {
  SchedulerOptions o = Opts();
  o.fair_share_half_life_s = 600;
  auto s = Make(Tree({{"org", "", 2000}, {"a", "org", 1000}, {"b", "org", 1000}}), {Node("n1", 4)}, o);
  ASSERT_TRUE(s->Submit(J(1, "a", QosClass::kBurstable, 2)).ok());
  ASSERT_TRUE(s->Submit(J(2, "b", QosClass::kBurstable, 1)).ok());
  for (int t = 0; t <= 1200; t += 300) s->Cycle(Seconds{t});
  ASSERT_TRUE(s->Complete(1, Seconds{1200}).ok());
  s->Cycle(Seconds{1500});
  const double a = *s->dominant_share("a"), b = *s->dominant_share("b"), org = *s->dominant_share("org");
  ASSERT_GT(a, 0);
  ASSERT_GT(a, b);  // a ran twice as much, and its decayed usage remembers it
  ASSERT_TRUE(s->SetTenants(Tree({{"org", "", 2000}, {"a", "org", 1000}, {"b", "org", 1000}, {"new"}})).ok());
  EXPECT_EQ(*s->dominant_share("a"), a);
  EXPECT_EQ(*s->dominant_share("b"), b);
  EXPECT_EQ(*s->dominant_share("org"), org);
  EXPECT_EQ(*s->dominant_share("new"), 0);
  // b moves to its own organisation: b keeps its value, org now holds only a's.
  ASSERT_TRUE(s->SetTenants(Tree({{"org", "", 1000}, {"a", "org", 1000}, {"o2", "", 1000}, {"b", "o2", 1000}, {"new"}})).ok());
  EXPECT_EQ(*s->dominant_share("b"), b);
  EXPECT_EQ(*s->dominant_share("a"), a);
  EXPECT_DOUBLE_EQ(*s->dominant_share("org"), a);
  EXPECT_DOUBLE_EQ(*s->dominant_share("o2"), b);
}

// A fresh LiveScheduler given what the first persisted (running jobs with pods, start and seq;
// pending jobs with their last wait reason) decides as the first would have.
TEST(LiveScheduler, RestartFromPersistedStateDecidesTheSame) {
  const Script sc = RandomScript(7);
  auto first = Make(sc.tree, sc.nodes, SchedulerOptions{});
  auto reference = Make(sc.tree, sc.nodes, SchedulerOptions{});
  std::unique_ptr<LiveScheduler> second;
  std::map<JobId, LiveJob> by_id;
  for (const LiveJob& j : sc.jobs) by_id[j.id] = j;
  const std::string want = Drive(*reference, sc, [](int) {});
  LiveScheduler* current = first.get();
  std::string got;
  size_t next = 0;
  for (int step = 0; step < 40; ++step) {
    if (step == 20) {
      second = Make(sc.tree, sc.nodes, SchedulerOptions{});
      for (JobId id : first->running_jobs())
        ASSERT_TRUE(second->Adopt(by_id[id], first->placement_of(id), *first->start_time(id),
                                  first->placed_seq(id)).ok());
      for (JobId id : first->pending_jobs())
        ASSERT_TRUE(second->SubmitRestored(by_id[id], first->wait_reason(id)).ok());
      current = second.get();
    }
    for (int k = 0; k < 3 && next < sc.jobs.size(); ++k) {
      Status st = current->Submit(sc.jobs[next++]);
      got += st.ok() ? "" : "submit refused: " + st.message() + "\n";
    }
    if (step % 2 == 1) {
      const std::vector<JobId> running = current->running_jobs();
      if (!running.empty()) {
        EXPECT_TRUE(current->Complete(running.front(), Seconds{step * 100}).ok());
      }
    }
    got += "cycle " + std::to_string(step) + "\n" + Describe(current->Cycle(Seconds{step * 100 + 50}), false);
  }
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace tessera::sched
