// Randomised invariants of the multi-tenant scheduler over combinations of its options: random
// clusters, tenant trees and job streams (Guaranteed / Burstable / BestEffort, fractional and
// whole-GPU pods, gangs), cycles at increasing times with completions in between. After every
// cycle:
//   * no preemption breaks a guarantee: Guaranteed jobs are never victims; a job started in a
//     cycle is not preempted in it; a victim ran at least min_runtime; the tenant of a
//     Guaranteed/Burstable victim (taken by another tenant's job) ends the cycle above its
//     guarantee less the largest job it lost and what its own Guaranteed jobs displaced of its
//     work (reclaim takes only from tenants over their guarantee, fair share never below it);
//   * usage equals the snapshot: each tenant's usage is the sum of its running jobs (and of its
//     children's), the cluster's allocated GPU milli the sum of all running pods;
//   * every running pod is placed feasibly: replaying every placement onto a fresh snapshot of
//     the nodes succeeds and gives the scheduler's free CPU, memory and GPU milli exactly;
//   * no preemption loop: with nothing submitted or completed, repeated cycles stop preempting;
//   * cordons hold: nodes are cordoned and uncordoned at random steps (Scheduler::SetCordoned),
//     and no started pod and no move's destination is on a node cordoned in that cycle;
//   * the scheduler never reports its own bookkeeping inconsistent (CycleResult::error).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tessera/core/rng.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/sched/scheduler.h"

namespace tessera::sched {
namespace {

using placement::ClusterSnapshot;
using placement::NodeSpec;
using placement::Placement;
using placement::TaskRequest;

struct World {
  std::vector<NodeSpec> nodes;
  std::optional<TenantTree> tree_storage;
  SchedulerOptions options;
  const TenantTree& tree() const { return *tree_storage; }
};

World RandomWorld(Rng& rng) {
  const auto& catalog = GpuModelCatalog::Builtin();
  const GpuModelId models[] = {*catalog.Find("V100M16"), *catalog.Find("A100-80GB")};
  World w;
  const int node_count = 2 + static_cast<int>(rng.Uniform(5));
  int64_t gpus = 0;
  for (int n = 0; n < node_count; ++n) {
    const int g = rng.Uniform(3) == 0 ? 8 : 1 + static_cast<int>(rng.Uniform(4));
    gpus += g;
    w.nodes.push_back({"n" + std::to_string(n), CpuMilli{8000 * g}, MiB{65536 * g}, g,
                       models[rng.Uniform(2)]});
  }
  // Two organisations with two teams each, or four flat teams; guarantees carve up to 90 % of
  // the GPUs, weights 1-3, a limit on some.
  std::vector<TenantSpec> specs;
  const bool orgs = rng.Uniform(2) == 0;
  int64_t left = gpus * 900;
  auto take = [&](int64_t most) {
    const int64_t g = std::min<int64_t>(left, static_cast<int64_t>(rng.Uniform(static_cast<uint64_t>(most) + 1)) / 250 * 250);
    left -= g;
    return g;
  };
  auto spec = [&](const std::string& name, const std::string& parent, int64_t guaranteed) {
    TenantSpec s;
    s.name = name;
    s.parent = parent;
    s.guaranteed[kGpuMilliDim] = guaranteed;
    s.weight = 1 + static_cast<double>(rng.Uniform(3));
    if (rng.Uniform(4) == 0) s.limit[kGpuMilliDim] = std::max<int64_t>(guaranteed, 1000) + 1000 * static_cast<int64_t>(rng.Uniform(4));
    specs.push_back(s);
  };
  if (orgs) {
    for (int o = 0; o < 2; ++o) {
      const int64_t og = take(gpus * 450);
      TenantSpec org;
      org.name = "org" + std::to_string(o);
      org.guaranteed[kGpuMilliDim] = og;
      org.weight = 1;
      specs.push_back(org);
      int64_t inner = og;
      for (int t = 0; t < 2; ++t) {
        const int64_t g = t == 0 ? inner / 2 / 250 * 250 : inner;
        inner -= g;
        spec("org" + std::to_string(o) + "/t" + std::to_string(t), org.name, g);
      }
    }
  } else {
    for (int t = 0; t < 4; ++t) spec("t" + std::to_string(t), "", take(gpus * 300));
  }
  auto tree = TenantTree::Create(specs, ResourceSpace());
  EXPECT_TRUE(tree.ok()) << tree.status().ToString();
  w.tree_storage.emplace(std::move(*tree));
  SchedulerOptions& o = w.options;
  o.preemption = rng.Uniform(4) != 0;
  o.fair_share_preemption = rng.Uniform(2) == 0;
  o.fair_share_rule = rng.Uniform(2) == 0 ? FairShareRule::kLexicographic : FairShareRule::kEqualize;
  o.consolidation = rng.Uniform(2) == 0;
  o.defragmentation = rng.Uniform(2) == 0;
  o.fair_share_defragmentation = rng.Uniform(2) == 0;
  o.keep_large_nodes_clearable = rng.Uniform(2) == 0;
  o.whole_gpus_only = rng.Uniform(6) == 0;
  o.min_runtime = Seconds{rng.Uniform(2) == 0 ? 0 : 60};
  o.fair_share_max_victim_runtime = Seconds{rng.Uniform(3) == 0 ? 300 : 0};
  o.placement_policy = rng.Uniform(2) == 0 ? "tessera" : "fgd";
  o.seed = rng.Next();
  return w;
}

Job RandomJob(Rng& rng, JobId id, const TenantTree& tree, Seconds now) {
  std::vector<TenantIndex> leaves;
  for (TenantIndex t = 0; t < tree.size(); ++t)
    if (tree.is_leaf(t)) leaves.push_back(t);
  Job j;
  j.id = id;
  j.tenant = leaves[rng.Uniform(leaves.size())];
  const uint64_t q = rng.Uniform(10);
  j.qos = q < 3 ? QosClass::kGuaranteed : (q < 8 ? QosClass::kBurstable : QosClass::kBestEffort);
  j.priority = static_cast<int32_t>(rng.Uniform(3));
  const uint64_t shape = rng.Uniform(10);
  int num_gpu = 1, milli = 1000;
  if (shape < 3) {
    milli = 250 * (1 + static_cast<int>(rng.Uniform(3)));
  } else if (shape < 8) {
    num_gpu = 1 << rng.Uniform(3);
  } else {
    num_gpu = 8;
  }
  j.pods = rng.Uniform(8) == 0 ? 2 : 1;
  j.pod = TaskRequest{.cpu = CpuMilli{1000 * num_gpu}, .memory = MiB{4096}, .num_gpu = num_gpu,
                      .gpu_milli = GpuMilli{milli}};
  j.submit = now;
  return j;
}

// GPU milli a job holds (whole_gpus_only: a fractional pod takes a whole GPU).
int64_t GpuMilliOf(const Job& j, bool whole_gpus_only = false) {
  const int64_t per_gpu = whole_gpus_only && j.pod.num_gpu > 0 ? kWholeGpu.value() : j.pod.gpu_milli.value();
  return static_cast<int64_t>(j.pods) * j.pod.num_gpu * per_gpu;
}

// Usage and the snapshot agree; every running pod is placed feasibly.
void CheckState(const World& w, const Scheduler& s, const std::string& where) {
  std::vector<int64_t> used(w.tree().size(), 0);
  auto fresh = ClusterSnapshot::Create(w.nodes);
  ASSERT_TRUE(fresh.ok());
  int64_t total = 0;
  for (JobId id : s.running_jobs()) {
    const Job* j = s.job(id);
    ASSERT_NE(j, nullptr) << where;
    const std::vector<Placement>* pods = s.placement_of(id);
    ASSERT_NE(pods, nullptr) << where;
    ASSERT_EQ(pods->size(), static_cast<size_t>(j->pods)) << where << " job " << id;
    TaskRequest pod = j->pod;
    if (w.options.whole_gpus_only && pod.num_gpu > 0) pod.gpu_milli = kWholeGpu;
    for (const Placement& p : *pods) {
      Status st = fresh->Apply(pod, p);
      ASSERT_TRUE(st.ok()) << where << " job " << id << ": " << st.ToString();
    }
    const int64_t milli = static_cast<int64_t>(j->pods) * pod.TotalGpu().value();
    total += milli;
    for (TenantIndex a : w.tree().path(j->tenant)) used[a] += milli;
  }
  for (TenantIndex t = 0; t < w.tree().size(); ++t)
    EXPECT_EQ(s.usage(t)[kGpuMilliDim], used[t]) << where << " tenant " << w.tree().name(t);
  EXPECT_EQ(s.cluster().allocated_gpu().value(), total) << where;
  for (size_t n = 0; n < w.nodes.size(); ++n) {
    const NodeIndex ni{static_cast<uint32_t>(n)};
    EXPECT_EQ(s.cluster().free_cpu(ni), fresh->free_cpu(ni)) << where << " node " << n;
    EXPECT_EQ(s.cluster().free_memory(ni), fresh->free_memory(ni)) << where << " node " << n;
    for (int g = 0; g < s.cluster().gpu_count(ni); ++g)
      EXPECT_EQ(s.cluster().gpu_free(ni, g), fresh->gpu_free(ni, g)) << where << " node " << n << " GPU " << g;
  }
}

std::string Describe(const World& w, const Scheduler& s, const CycleResult& r, const std::map<JobId, Job>& before) {
  std::string out = "\n options: preemption=" + std::to_string(w.options.preemption) + " fair=" + std::to_string(w.options.fair_share_preemption) +
      " rule=" + std::string(FairShareRuleName(w.options.fair_share_rule)) + " consolidation=" + std::to_string(w.options.consolidation) +
      " defrag=" + std::to_string(w.options.defragmentation) + " fsdefrag=" + std::to_string(w.options.fair_share_defragmentation) +
      " whole=" + std::to_string(w.options.whole_gpus_only) + " min_runtime=" + std::to_string(w.options.min_runtime.count());
  for (const PreemptEvent& p : r.preempted) {
    const Job& v = before.at(p.victim);
    const Job* by = s.job(p.by);
    out += "\n victim " + std::to_string(p.victim) + " tenant " + w.tree().name(v.tenant) + " qos " + std::string(QosName(v.qos)) +
        " milli " + std::to_string(GpuMilliOf(v)) + " by " + std::to_string(p.by) + " tenant " + w.tree().name(by->tenant) +
        " qos " + std::string(QosName(by->qos)) + " milli " + std::to_string(GpuMilliOf(*by)) + " fair_share=" + std::to_string(p.fair_share);
  }
  for (TenantIndex t = 0; t < w.tree().size(); ++t)
    out += "\n tenant " + w.tree().name(t) + " g=" + std::to_string(w.tree().spec(t).guaranteed[kGpuMilliDim]) +
        " usage=" + std::to_string(s.usage(t)[kGpuMilliDim]) + " protected=" + std::to_string(s.protected_usage(t)[kGpuMilliDim]);
  for (const StartEvent& e : r.started) out += "\n started " + std::to_string(e.job) + " tenant " + w.tree().name(s.job(e.job)->tenant) + " qos " + std::string(QosName(s.job(e.job)->qos)) + " milli " + std::to_string(GpuMilliOf(*s.job(e.job)));
  for (const MoveEvent& m : r.moves) out += "\n moved " + std::to_string(m.job) + " restart=" + std::to_string(m.restart);
  return out;
}

// No new pod on a cordoned node: neither a started job's pods nor a move's destination.
void CheckCordons(const Scheduler& s, const CycleResult& r, const std::vector<uint8_t>& cordoned,
                  const std::string& where) {
  for (size_t n = 0; n < cordoned.size(); ++n)
    EXPECT_EQ(s.cordoned(NodeIndex{static_cast<uint32_t>(n)}), cordoned[n] != 0) << where << " node " << n;
  for (const StartEvent& e : r.started)
    for (const Placement& p : e.pods)
      EXPECT_FALSE(cordoned[p.node.value()]) << where << ": job " << e.job << " started on cordoned node " << p.node.value();
  for (const MoveEvent& m : r.moves)
    EXPECT_FALSE(cordoned[m.to.node.value()]) << where << ": job " << m.job << " moved to cordoned node " << m.to.node.value();
}

// What a cycle's preemptions must respect (see the file comment).
void CheckPreemptions(const World& w, const Scheduler& s, const CycleResult& r,
                      const std::map<JobId, Job>& before_running, const std::map<JobId, Seconds>& started_at,
                      Seconds now, const std::string& where) {
  std::set<JobId> started;
  for (const StartEvent& e : r.started) started.insert(e.job);
  std::map<TenantIndex, int64_t> largest_loss;
  // What the tenant's own Guaranteed jobs displaced of its Burstable work in this cycle: that
  // may take it below its guarantee after another tenant reclaimed from it while it was above.
  std::map<TenantIndex, int64_t> own_loss;
  for (const PreemptEvent& p : r.preempted) {
    EXPECT_FALSE(started.count(p.victim)) << where << " job " << p.victim << " started and preempted";
    auto it = before_running.find(p.victim);
    ASSERT_NE(it, before_running.end()) << where << " victim " << p.victim << " was not running";
    const Job& v = it->second;
    EXPECT_NE(v.qos, QosClass::kGuaranteed) << where << " Guaranteed job " << p.victim << " preempted";
    EXPECT_GE(now - started_at.at(p.victim), w.options.min_runtime) << where << " victim " << p.victim;
    const Job* by = s.job(p.by);
    ASSERT_NE(by, nullptr) << where;
    // BestEffort work claims no guarantee (it runs on leftovers): it is always a victim first.
    if (v.qos == QosClass::kBestEffort) continue;
    if (by->tenant == v.tenant) {
      own_loss[v.tenant] += GpuMilliOf(v, w.options.whole_gpus_only);
      continue;
    }
    int64_t& l = largest_loss[v.tenant];
    l = std::max(l, GpuMilliOf(v, w.options.whole_gpus_only));
  }
  for (const auto& [t, loss] : largest_loss) {
    EXPECT_GT(s.protected_usage(t)[kGpuMilliDim] + loss + own_loss[t], w.tree().spec(t).guaranteed[kGpuMilliDim])
        << where << ": tenant " << w.tree().name(t) << " lost work while within its guarantee" << Describe(w, s, r, before_running);
  }
}

TEST(SchedulerInvariants, HoldOverRandomWorldsAndOptions) {
  constexpr int kWorlds = 400;
  constexpr int kSteps = 200;
  Rng rng(20261201);
  Rng cordon_rng(20261202);  // its own stream: the worlds and job streams stay as they were
  int preemptions = 0, moves = 0, refused = 0, cordon_changes = 0;
  for (int world = 0; world < kWorlds; ++world) {
    World w = RandomWorld(rng);
    auto made = Scheduler::Create(&w.tree(), w.nodes, w.options);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    Scheduler& s = **made;
    JobId next_id = 1;
    std::map<JobId, Seconds> started_at;
    Seconds now{0};
    // Cordon a random node (at most half of them at once) or uncordon one, at about one step
    // in six.
    std::vector<uint8_t> cordoned(w.nodes.size(), 0);
    for (int step = 0; step < kSteps; ++step) {
      const std::string where = "world " + std::to_string(world) + " step " + std::to_string(step);
      now += Seconds{static_cast<int64_t>(rng.Uniform(120))};
      const int submits = static_cast<int>(rng.Uniform(4));
      for (int k = 0; k < submits; ++k) {
        // Some can never run (over a limit or a guarantee, no node holds them): refused.
        if (!s.Submit(RandomJob(rng, next_id++, w.tree(), now)).ok()) ++refused;
      }
      std::vector<JobId> running = s.running_jobs();
      for (JobId id : running) {
        if (rng.Uniform(6) != 0) continue;
        ASSERT_TRUE(s.Complete(id, now).ok()) << where;
        started_at.erase(id);
      }
      if (cordon_rng.Uniform(6) == 0) {
        const size_t n = cordon_rng.Uniform(w.nodes.size());
        const int count = static_cast<int>(std::count(cordoned.begin(), cordoned.end(), 1));
        if (cordoned[n] || 2 * (count + 1) <= static_cast<int>(w.nodes.size())) {
          cordoned[n] ^= 1;
          ASSERT_TRUE(s.SetCordoned(NodeIndex{static_cast<uint32_t>(n)}, cordoned[n] != 0).ok()) << where;
          ++cordon_changes;
        }
      }
      std::map<JobId, Job> before;
      for (JobId id : s.running_jobs()) before[id] = *s.job(id);
      const CycleResult r = s.Cycle(now);
      ASSERT_TRUE(r.error.ok()) << where << ": " << r.error.ToString();
      CheckPreemptions(w, s, r, before, started_at, now, where);
      CheckCordons(s, r, cordoned, where);
      for (const PreemptEvent& p : r.preempted) started_at.erase(p.victim);
      for (const StartEvent& e : r.started) started_at[e.job] = now;
      for (const MoveEvent& m : r.moves)
        if (m.restart) started_at[m.job] = now;
      preemptions += static_cast<int>(r.preempted.size());
      moves += static_cast<int>(r.moves.size());
      CheckState(w, s, where);
      if (::testing::Test::HasFailure()) return;
    }
    // No loop: with nothing submitted or completed, the cycles settle.
    int quiet = 0;
    for (int c = 0; c < 40 && quiet < 5; ++c) {
      now += Seconds{3600};
      std::map<JobId, Job> before;
      for (JobId id : s.running_jobs()) before[id] = *s.job(id);
      const CycleResult r = s.Cycle(now);
      ASSERT_TRUE(r.error.ok()) << r.error.ToString();
      CheckPreemptions(w, s, r, before, started_at, now, "world " + std::to_string(world) + " settling");
      CheckCordons(s, r, cordoned, "world " + std::to_string(world) + " settling");
      for (const PreemptEvent& p : r.preempted) started_at.erase(p.victim);
      for (const StartEvent& e : r.started) started_at[e.job] = now;
      for (const MoveEvent& m : r.moves)
        if (m.restart) started_at[m.job] = now;
      quiet = r.preempted.empty() && r.moves.empty() ? quiet + 1 : 0;
    }
    EXPECT_EQ(quiet, 5) << "world " << world << ": preemptions or moves go on without new events";
    CheckState(w, s, "world " + std::to_string(world) + " settled");
    if (::testing::Test::HasFailure()) return;
  }
  // The worlds are busy enough to exercise what is checked.
  RecordProperty("preemptions", preemptions);
  RecordProperty("moves", moves);
  std::printf("%d worlds: %d preemptions, %d moves, %d submissions refused, %d cordon changes\n", kWorlds,
              preemptions, moves, refused, cordon_changes);
  EXPECT_GT(preemptions, 1000);
  EXPECT_GT(moves, 100);
  EXPECT_GT(refused, 0);
  EXPECT_GT(cordon_changes, 1000);
}

}  // namespace
}  // namespace tessera::sched
