// The contract every policy in PolicyNames() keeps, checked on random small heterogeneous
// clusters and random task streams with arrivals and departures:
//   - every decision is feasible (ClusterSnapshot::Apply accepts it);
//   - a task is reported as not placed only when no node Fits it;
//   - feasible_nodes counts the nodes that pass the filter (nextfit: 1 when it places);
//   - the same seed gives the same decision sequence;
//   - memoisation is transparent: a fresh policy on a copy of the snapshot decides the same;
//   - capacity is conserved: allocated GPU = sum of the placed tasks' TotalGpu.
// and, with random eligibility masks (PlacementContext::eligibility) on clusters that also hold
// MIG nodes and MIG requests:
//   - no placement uses an ineligible node or GPU, and a task is rejected only when no eligible
//     node fits it with its eligible GPUs (an oracle written here, not ClusterSnapshot::Fits);
//   - an all-eligible mask decides exactly as no mask, and masked decisions leave the memo
//     clean (a fresh policy on a copy decides the same, masked or not);
//   - when every node that fits is masked out (the node, or just enough of its GPUs) the task
//     fits nowhere;
// and ScoreNodes: a score exactly where the task fits (eligibly), the node Place picks has the
// best score (ties: lowest rank; random: any scored node), the context is not advanced.
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tessera/core/gpu_model.h"
#include "tessera/core/rng.h"
#include "tessera/placement/mig.h"
#include "tessera/placement/fragmentation.h"
#include "tessera/placement/policy.h"
#include "tests/testing/builders.h"
#include "tests/testing/snapshot_checks.h"

namespace tessera::placement {
namespace {

using ::tessera::testing::CheckInvariants;
using ::tessera::testing::FreeState;
using ::tessera::testing::MakeCluster;
using ::tessera::testing::RandomNodeArgs;
using ::tessera::testing::RandomTask;

struct Live {
  TaskRequest task;
  Placement where;
};

struct RunResult {
  std::vector<std::optional<Placement>> decisions;
  int placed = 0;
  int rejected = 0;
};

class PolicyContractTest : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr int kNodes = 10;
  static constexpr int kTasks = 300;

  // Runs a random stream on a random cluster. With `check_fresh`, every decision is also made
  // by a fresh policy object on a copy of the snapshot (and a copy of the context).
  RunResult Run(uint64_t seed, bool check_fresh) {
    RunResult result;
    Rng rng(seed);
    ClusterSnapshot c = MakeCluster(RandomNodeArgs(rng, kNodes));
    const std::vector<int64_t> initial = FreeState(c);
    std::vector<TaskRequest> tasks;
    for (int i = 0; i < kTasks; ++i) tasks.push_back(RandomTask(rng));
    const TargetWorkload workload = TargetWorkload::FromTasks(tasks);

    std::vector<uint32_t> permutation(c.node_count());
    std::iota(permutation.begin(), permutation.end(), 0u);
    rng.Shuffle(permutation);
    std::vector<uint32_t> rank(c.node_count());
    for (uint32_t pos = 0; pos < permutation.size(); ++pos) rank[permutation[pos]] = pos;

    auto made = MakePolicy(GetParam(), {.target_workload = &workload});
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    if (!made.ok()) return result;
    std::unique_ptr<PlacementPolicy> policy = std::move(made).value();
    Rng policy_rng = rng.Fork(1);
    PlacementContext ctx{.rng = &policy_rng, .node_rank = rank};

    std::vector<Live> live;
    int64_t live_gpu = 0;
    for (int i = 0; i < kTasks; ++i) {
      const TaskRequest& t = tasks[static_cast<size_t>(i)];
      // What a fresh policy decides on a copy, from the same context.
      std::optional<PlacementDecision> fresh;
      Rng fresh_rng = policy_rng;
      PlacementContext fresh_ctx = ctx;
      fresh_ctx.rng = &fresh_rng;
      if (check_fresh) {
        const ClusterSnapshot copy = c;
        auto other = MakePolicy(GetParam(), {.target_workload = &workload});
        EXPECT_TRUE(other.ok());
        if (other.ok()) fresh = (*other)->Place(copy, t, fresh_ctx);
      }

      const PlacementDecision d = policy->Place(c, t, ctx);
      uint32_t feasible = 0;
      for (uint32_t n = 0; n < c.node_count(); ++n) feasible += c.Fits(NodeIndex{n}, t);

      if (fresh) {
        EXPECT_EQ(fresh->placement, d.placement) << GetParam() << " task " << i;
        EXPECT_EQ(fresh->feasible_nodes, d.feasible_nodes) << "task " << i;
        EXPECT_EQ(fresh_ctx.next_fit_cursor, ctx.next_fit_cursor) << "task " << i;
        Rng a = fresh_rng, b = policy_rng;
        EXPECT_EQ(a.Next(), b.Next()) << "same randomness consumed, task " << i;
      }

      result.decisions.push_back(d.placement);
      if (!d.placement) {
        EXPECT_EQ(feasible, 0u) << GetParam() << " rejected task " << i << " that fits somewhere";
        EXPECT_EQ(d.feasible_nodes, 0u);
        ++result.rejected;
      } else {
        EXPECT_TRUE(c.Fits(d.placement->node, t)) << "task " << i;
        if (GetParam() == "nextfit") {
          EXPECT_EQ(d.feasible_nodes, 1u);
        } else {
          EXPECT_EQ(d.feasible_nodes, feasible) << "task " << i;
        }
        const Status s = c.Apply(t, *d.placement);
        EXPECT_TRUE(s.ok()) << GetParam() << " task " << i << ": " << s.ToString();
        if (s.ok()) {
          live.push_back({t, *d.placement});
          live_gpu += t.TotalGpu().value();
          ++result.placed;
        }
      }
      // Departures keep the cluster from only filling up (and move node versions back and forth).
      if (!live.empty() && rng.Uniform(3) == 0) {
        const size_t k = static_cast<size_t>(rng.Uniform(live.size()));
        EXPECT_TRUE(c.Undo(live[k].task, live[k].where).ok());
        live_gpu -= live[k].task.TotalGpu().value();
        live[k] = live.back();
        live.pop_back();
      }
      EXPECT_EQ(c.allocated_gpu().value(), live_gpu) << "task " << i;
      EXPECT_TRUE(CheckInvariants(c)) << "task " << i;
      if (::testing::Test::HasFailure()) break;  // one broken step is enough to report
    }
    for (const Live& l : live) EXPECT_TRUE(c.Undo(l.task, l.where).ok());
    EXPECT_EQ(FreeState(c), initial);
    return result;
  }
};

TEST_P(PolicyContractTest, DecisionsAreFeasibleAndRejectionsAreReal) {
  for (uint64_t seed : {1, 2, 3}) {
    const RunResult r = Run(seed, /*check_fresh=*/false);
    ASSERT_FALSE(HasFailure()) << "seed " << seed;
    EXPECT_EQ(r.decisions.size(), static_cast<size_t>(kTasks));
    EXPECT_GT(r.placed, kTasks / 3) << "seed " << seed;  // the stream exercises placement
  }
}

TEST_P(PolicyContractTest, SomeTasksAreRejected) {
  // The random streams are big enough that both outcomes are exercised.
  int rejected = 0;
  for (uint64_t seed : {1, 2, 3}) rejected += Run(seed, false).rejected;
  EXPECT_GT(rejected, 0);
}

TEST_P(PolicyContractTest, SameSeedSameDecisions) {
  const RunResult a = Run(7, false);
  const RunResult b = Run(7, false);
  EXPECT_EQ(a.decisions, b.decisions);
  const RunResult other = Run(8, false);
  EXPECT_NE(a.decisions, other.decisions);  // different cluster and stream
}

TEST_P(PolicyContractTest, MemoisationIsTransparent) {
  for (uint64_t seed : {11, 12}) {
    Run(seed, /*check_fresh=*/true);
    ASSERT_FALSE(HasFailure()) << "seed " << seed;
  }
}

TEST_P(PolicyContractTest, OnePolicyAcrossTwoDivergingSnapshots) {
  // A long-lived policy alternating between two snapshots (a copy that diverges) decides as a
  // fresh policy would on each: caches keyed by snapshot must not leak between them.
  Rng rng(21);
  ClusterSnapshot a = MakeCluster(RandomNodeArgs(rng, kNodes));
  ClusterSnapshot b = a;
  std::vector<TaskRequest> tasks;
  for (int i = 0; i < 200; ++i) tasks.push_back(RandomTask(rng));
  const TargetWorkload workload = TargetWorkload::FromTasks(tasks);
  auto policy = MakePolicy(GetParam(), {.target_workload = &workload});
  ASSERT_TRUE(policy.ok());
  Rng prng(5);
  PlacementContext ctx{.rng = &prng};
  for (size_t i = 0; i < tasks.size(); ++i) {
    ClusterSnapshot& snap = (i % 2 == 0 || i % 7 == 0) ? a : b;
    Rng fresh_rng = prng;
    PlacementContext fresh_ctx = ctx;
    fresh_ctx.rng = &fresh_rng;
    auto fresh = MakePolicy(GetParam(), {.target_workload = &workload});
    ASSERT_TRUE(fresh.ok());
    const PlacementDecision expected = (*fresh)->Place(snap, tasks[i], fresh_ctx);
    const PlacementDecision d = (*policy)->Place(snap, tasks[i], ctx);
    ASSERT_EQ(d.placement, expected.placement) << GetParam() << " task " << i;
    if (d.placement) {
      ASSERT_TRUE(snap.Apply(tasks[i], *d.placement).ok());
    }
  }
}

TEST_P(PolicyContractTest, EmptyClusterPlacesNothing) {
  StatusOr<ClusterSnapshot> empty = ClusterSnapshot::Create({});
  ASSERT_TRUE(empty.ok());
  const TargetWorkload workload = TargetWorkload::FromTasks(std::vector<TaskRequest>{testing::Share(500)});
  auto policy = MakePolicy(GetParam(), {.target_workload = &workload});
  ASSERT_TRUE(policy.ok());
  Rng rng(1);
  PlacementContext ctx{.rng = &rng};
  for (const TaskRequest& t : {testing::Share(500), testing::Whole(2), testing::CpuOnly(1)}) {
    const PlacementDecision d = (*policy)->Place(*empty, t, ctx);
    EXPECT_FALSE(d.placement);
    EXPECT_EQ(d.feasible_nodes, 0u);
  }
}

// --- eligibility masks and ScoreNodes ---------------------------------------------------------

// Independent of ClusterSnapshot::Fits: node n is eligible and `t` fits there with its eligible
// GPUs only.
bool OracleFits(const ClusterSnapshot& c, NodeIndex n, const TaskRequest& t, const Eligibility* e) {
  if (e != nullptr && !e->node(n)) return false;
  if (c.free_cpu(n) < t.cpu || c.free_memory(n) < t.memory) return false;
  if (t.num_gpu == 0) return true;
  if (c.gpu_count(n) == 0 || !t.AllowsModel(c.model_bit(n))) return false;
  int usable = 0;
  for (int g = 0; g < c.gpu_count(n); ++g) {
    if (e != nullptr && (e->gpus(n) & GpuBit(g)) == 0) continue;
    if (c.mig_mode(n) || t.IsMig()) {
      usable += c.mig_mode(n) && t.IsMig() && c.mig_valid_starts(n, g, t.mig_profile) != 0;
    } else {
      usable += c.gpu_free(n, g) >= t.gpu_milli.value();
    }
  }
  return usable >= t.num_gpu;
}

// Random regular nodes plus a few MIG nodes (A100-40GB, H100-80GB).
ClusterSnapshot MixedCluster(Rng& rng, int nodes) {
  std::vector<NodeSpec> specs = testing::MakeNodes(RandomNodeArgs(rng, nodes));
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  for (const char* model : {"A100-40GB", "H100-80GB", "H100-80GB"}) {
    const GpuModelId id = *catalog.Find(model);
    const int gpus = 1 + static_cast<int>(rng.Uniform(4));
    specs.push_back({std::string("mig-") + model + "-" + std::to_string(specs.size()), CpuMilli{64000},
                     MiB{1 << 20}, gpus, id, std::make_shared<const MigGeometry>(*catalog.info(id).mig), {}});
  }
  return *ClusterSnapshot::Create(std::move(specs));
}

// RandomTask, or (one in five) a MIG request of a random profile of a MIG node's model.
TaskRequest MixedTask(Rng& rng, const ClusterSnapshot& c) {
  if (rng.Uniform(5) != 0) return RandomTask(rng);
  std::vector<NodeIndex> mig_nodes;
  for (uint32_t i = 0; i < c.node_count(); ++i)
    if (c.mig_mode(NodeIndex{i})) mig_nodes.push_back(NodeIndex{i});
  const NodeIndex n = mig_nodes[rng.Uniform(mig_nodes.size())];
  const MigGeometry& g = *c.mig_geometry(n);
  const std::string& profile = g.profiles[rng.Uniform(g.profiles.size())].name;
  return *MigRequest(c.spec(n).model, g, profile, CpuMilli{1000 * static_cast<int64_t>(rng.Uniform(8))});
}

// A random mask: some nodes out, some nodes with a random subset of their GPUs.
void RandomMask(Rng& rng, const ClusterSnapshot& c, Eligibility& e) {
  e.Reset(c.node_count());
  for (uint32_t i = 0; i < c.node_count(); ++i) {
    const NodeIndex n{i};
    switch (rng.Uniform(4)) {
      case 0: e.ExcludeNode(n); break;
      case 1: e.SetGpus(n, static_cast<GpuSet>(rng.Next())); break;
      default: break;
    }
  }
}

// Masks out every node where `t` fits: the node itself, or just enough of its GPUs.
void MaskOutFits(Rng& rng, const ClusterSnapshot& c, const TaskRequest& t, Eligibility& e) {
  e.Reset(c.node_count());
  for (uint32_t i = 0; i < c.node_count(); ++i) {
    const NodeIndex n{i};
    if (!OracleFits(c, n, t, nullptr)) continue;
    if (t.num_gpu == 0 || rng.Uniform(3) == 0) {
      e.ExcludeNode(n);
      continue;
    }
    std::vector<int> serving;
    for (int g = 0; g < c.gpu_count(n); ++g) {
      const bool serves = t.IsMig() ? c.mig_valid_starts(n, g, t.mig_profile) != 0
                                    : c.gpu_free(n, g) >= t.gpu_milli.value();
      if (serves) serving.push_back(g);
    }
    rng.Shuffle(serving);
    const size_t drop = serving.size() - static_cast<size_t>(t.num_gpu) + 1;
    for (size_t k = 0; k < drop; ++k) e.ExcludeGpus(n, GpuBit(serving[k]));
  }
}

std::vector<NodeIndex> AllNodes(const ClusterSnapshot& c) {
  std::vector<NodeIndex> out;
  for (uint32_t i = 0; i < c.node_count(); ++i) out.push_back(NodeIndex{i});
  return out;
}

class PolicyMaskTest : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr int kNodes = 10;
  static constexpr int kTasks = 250;

  struct Stream {
    ClusterSnapshot cluster;
    std::vector<TaskRequest> tasks;
    TargetWorkload workload;
    std::vector<uint32_t> rank;
  };
  static Stream MakeStream(Rng& rng) {
    ClusterSnapshot c = MixedCluster(rng, kNodes);
    std::vector<TaskRequest> tasks;
    for (int i = 0; i < kTasks; ++i) tasks.push_back(MixedTask(rng, c));
    TargetWorkload w = TargetWorkload::FromTasks(tasks);
    std::vector<uint32_t> rank(c.node_count());
    std::iota(rank.begin(), rank.end(), 0u);
    rng.Shuffle(rank);
    return {std::move(c), std::move(tasks), std::move(w), std::move(rank)};
  }
  std::unique_ptr<PlacementPolicy> Make(const TargetWorkload& w) {
    auto made = MakePolicy(GetParam(), {.target_workload = &w});
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    return made.ok() ? std::move(made).value() : nullptr;
  }
  // A decision of `policy` on `c` from copies of ctx and its Rng (the originals stay as they were).
  static PlacementDecision Probe(PlacementPolicy& policy, const ClusterSnapshot& c, const TaskRequest& t,
                                 const PlacementContext& ctx, const Eligibility* e) {
    Rng rng = *ctx.rng;
    PlacementContext probe = ctx;
    probe.rng = &rng;
    probe.eligibility = e;
    return policy.Place(c, t, probe);
  }
  // Commits a decision and lets an earlier task leave now and then.
  static void Step(Rng& rng, ClusterSnapshot& c, const TaskRequest& t, const std::optional<Placement>& p,
                   std::vector<Live>& live) {
    if (p) {
      const Status s = c.Apply(t, *p);
      EXPECT_TRUE(s.ok()) << s.ToString();
      if (s.ok()) live.push_back({t, *p});
    }
    if (!live.empty() && rng.Uniform(3) == 0) {
      const size_t k = static_cast<size_t>(rng.Uniform(live.size()));
      EXPECT_TRUE(c.Undo(live[k].task, live[k].where).ok());
      live[k] = live.back();
      live.pop_back();
    }
  }
};

TEST_P(PolicyMaskTest, NeverUsesAnIneligibleNodeOrGpu) {
  int masked_placed = 0;
  int masked_rejected = 0;
  int gpu_masked_placed = 0;  // placed on a node whose GPU mask was restricted
  for (uint64_t seed : {31, 32, 33}) {
    Rng rng(seed);
    Stream st = MakeStream(rng);
    ClusterSnapshot& c = st.cluster;
    std::unique_ptr<PlacementPolicy> policy = Make(st.workload);
    ASSERT_NE(policy, nullptr);
    Rng policy_rng = rng.Fork(1);
    PlacementContext ctx{.rng = &policy_rng, .node_rank = st.rank};
    Eligibility mask;
    Eligibility all;
    std::vector<Live> live;
    for (int i = 0; i < kTasks; ++i) {
      const TaskRequest& t = st.tasks[static_cast<size_t>(i)];
      RandomMask(rng, c, mask);
      uint32_t feasible = 0;
      for (uint32_t n = 0; n < c.node_count(); ++n) {
        ASSERT_EQ(OracleFits(c, NodeIndex{n}, t, nullptr), c.Fits(NodeIndex{n}, t)) << "oracle, node " << n;
        feasible += OracleFits(c, NodeIndex{n}, t, &mask);
      }
      const PlacementDecision dm = Probe(*policy, c, t, ctx, &mask);
      if (dm.placement) {
        const NodeIndex n = dm.placement->node;
        ASSERT_TRUE(mask.node(n)) << GetParam() << " seed " << seed << " task " << i << ": ineligible node";
        ASSERT_EQ(dm.placement->gpus & ~mask.gpus(n), 0u)
            << GetParam() << " seed " << seed << " task " << i << ": ineligible GPU";
        ClusterSnapshot copy = c;
        ASSERT_TRUE(copy.Apply(t, *dm.placement).ok()) << "task " << i;
        EXPECT_EQ(dm.feasible_nodes, GetParam() == "nextfit" ? 1u : feasible) << "task " << i;
        ++masked_placed;
        if (t.num_gpu > 0 && (mask.gpus(n) & GpusOfCount(c.gpu_count(n))) != GpusOfCount(c.gpu_count(n)))
          ++gpu_masked_placed;
      } else {
        ASSERT_EQ(feasible, 0u) << GetParam() << " seed " << seed << " task " << i << " rejected under a mask";
        EXPECT_EQ(dm.feasible_nodes, 0u);
        ++masked_rejected;
      }
      // The masked decision did not leave the memo dirty, and a fresh policy decides the same.
      {
        const ClusterSnapshot copy = c;
        std::unique_ptr<PlacementPolicy> fresh = Make(st.workload);
        ASSERT_EQ(Probe(*fresh, copy, t, ctx, &mask).placement, dm.placement) << "fresh, masked, task " << i;
      }
      // Every node that fits masked out: fits nowhere.
      Eligibility none;
      MaskOutFits(rng, c, t, none);
      for (uint32_t n = 0; n < c.node_count(); ++n) ASSERT_FALSE(OracleFits(c, NodeIndex{n}, t, &none));
      const PlacementDecision dn = Probe(*policy, c, t, ctx, &none);
      ASSERT_FALSE(dn.placement) << GetParam() << " seed " << seed << " task " << i
                                 << ": placed although every fitting node is masked out";
      EXPECT_EQ(dn.feasible_nodes, 0u);
      // An all-eligible mask decides as no mask, consuming the same randomness.
      all.Reset(c.node_count());
      Rng all_rng = policy_rng;
      PlacementContext all_ctx = ctx;
      all_ctx.rng = &all_rng;
      all_ctx.eligibility = &all;
      const PlacementDecision da = policy->Place(c, t, all_ctx);
      std::optional<PlacementDecision> fresh_plain;
      {
        const ClusterSnapshot copy = c;
        std::unique_ptr<PlacementPolicy> fresh = Make(st.workload);
        fresh_plain = Probe(*fresh, copy, t, ctx, nullptr);
      }
      const PlacementDecision d = policy->Place(c, t, ctx);
      ASSERT_EQ(da.placement, d.placement) << GetParam() << " task " << i << ": all-eligible mask differs";
      EXPECT_EQ(da.feasible_nodes, d.feasible_nodes);
      EXPECT_EQ(all_ctx.next_fit_cursor, ctx.next_fit_cursor);
      EXPECT_EQ(all_rng.Next(), Rng(policy_rng).Next()) << "same randomness, task " << i;
      ASSERT_EQ(fresh_plain->placement, d.placement) << GetParam() << " task " << i << ": memo served a masked score";
      // Commit the masked decision half of the time, so masked placements shape the cluster too.
      Step(rng, c, t, (i % 2 == 0 && dm.placement) ? dm.placement : d.placement, live);
      ASSERT_TRUE(CheckInvariants(c));
    }
  }
  EXPECT_GT(masked_placed, 50);
  EXPECT_GT(masked_rejected, 0);
  EXPECT_GT(gpu_masked_placed, 10);  // the GPU masks were exercised, not only node masks
}

TEST_P(PolicyMaskTest, ScoreNodesAgreesWithPlace) {
  int placed = 0;
  for (uint64_t seed : {41, 42}) {
    Rng rng(seed);
    Stream st = MakeStream(rng);
    ClusterSnapshot& c = st.cluster;
    std::unique_ptr<PlacementPolicy> policy = Make(st.workload);
    ASSERT_NE(policy, nullptr);
    Rng policy_rng = rng.Fork(1);
    PlacementContext ctx{.rng = &policy_rng, .node_rank = st.rank};
    Eligibility mask;
    std::vector<Live> live;
    const std::vector<NodeIndex> nodes = AllNodes(c);
    for (int i = 0; i < kTasks; ++i) {
      const TaskRequest& t = st.tasks[static_cast<size_t>(i)];
      const bool masked = i % 3 == 0;
      RandomMask(rng, c, mask);
      PlacementContext sctx = ctx;
      sctx.eligibility = masked ? &mask : nullptr;
      const Rng rng_before = policy_rng;
      const NodeIndex cursor_before = ctx.next_fit_cursor;
      const std::vector<std::optional<double>> scores = policy->ScoreNodes(c, t, nodes, sctx);
      ASSERT_EQ(scores.size(), nodes.size());
      EXPECT_EQ(Rng(policy_rng).Next(), Rng(rng_before).Next()) << "ScoreNodes consumed randomness";
      EXPECT_EQ(sctx.next_fit_cursor, cursor_before);
      for (uint32_t n = 0; n < c.node_count(); ++n) {
        ASSERT_EQ(scores[n].has_value(), OracleFits(c, NodeIndex{n}, t, sctx.eligibility))
            << GetParam() << " task " << i << " node " << n;
      }
      // A fresh policy scores the same (the memo is transparent), also for a partial list with a
      // node outside the cluster.
      {
        std::unique_ptr<PlacementPolicy> fresh = Make(st.workload);
        EXPECT_EQ(fresh->ScoreNodes(c, t, nodes, sctx), scores) << "task " << i;
        const std::vector<NodeIndex> some = {NodeIndex{3}, NodeIndex{static_cast<uint32_t>(c.node_count())},
                                             NodeIndex{0}};
        const std::vector<std::optional<double>> part = policy->ScoreNodes(c, t, some, sctx);
        EXPECT_EQ(part, (std::vector<std::optional<double>>{scores[3], std::nullopt, scores[0]}));
      }
      const PlacementDecision d = policy->Place(c, t, sctx);
      ctx.next_fit_cursor = sctx.next_fit_cursor;
      if (!d.placement) {
        for (const auto& s : scores) ASSERT_FALSE(s.has_value()) << "task " << i;
      } else {
        ++placed;
        const uint32_t chosen = d.placement->node.value();
        ASSERT_TRUE(scores[chosen].has_value());
        if (GetParam() != "random") {
          for (uint32_t n = 0; n < c.node_count(); ++n) {
            if (!scores[n]) continue;
            ASSERT_LE(*scores[n], *scores[chosen]) << GetParam() << " task " << i << ": node " << n
                                                   << " scores better than the chosen " << chosen;
            if (*scores[n] == *scores[chosen] && n != chosen) {
              ASSERT_GT(st.rank[n], st.rank[chosen]) << GetParam() << " task " << i << ": tie not to the lowest rank";
            }
          }
        }
      }
      Step(rng, c, t, d.placement, live);
    }
  }
  EXPECT_GT(placed, 100);
}

TEST(ExtenderScoresTest, MinMaxToZeroToMax) {
  const std::vector<std::optional<double>> scores = {40.0, std::nullopt, 25.0, 30.0};
  EXPECT_EQ(ExtenderScores(scores), (std::vector<int64_t>{10, 0, 0, 3}));
  EXPECT_EQ(ExtenderScores(scores, 100), (std::vector<int64_t>{100, 0, 0, 33}));
  const std::vector<std::optional<double>> equal = {-3.0, -3.0, std::nullopt};
  EXPECT_EQ(ExtenderScores(equal), (std::vector<int64_t>{10, 10, 0}));
  EXPECT_EQ(ExtenderScores(std::vector<std::optional<double>>{std::nullopt}), (std::vector<int64_t>{0}));
}

TEST(EligibilityTest, PolicyHeaderWorkedExample) {
  ClusterSnapshot c = MakeCluster({{8000, 32768, 2, "T4"}, {8000, 32768, 2, "T4"}});
  ASSERT_TRUE(c.Apply(testing::Share(600), Placement{NodeIndex{0}, GpuBit(1)}).ok());  // GPU1 400 free
  const TargetWorkload w;
  auto policy = MakePolicy("bestfit", {.target_workload = &w});
  ASSERT_TRUE(policy.ok());
  Eligibility e(2);
  PlacementContext ctx;
  const TaskRequest t = testing::Share(300);
  EXPECT_EQ((*policy)->Place(c, t, ctx).placement, (Placement{NodeIndex{0}, GpuBit(1)}));
  ctx.eligibility = &e;
  e.ExcludeGpus(NodeIndex{0}, GpuBit(1));
  EXPECT_EQ((*policy)->Place(c, t, ctx).placement, (Placement{NodeIndex{0}, GpuBit(0)}));
  e.ExcludeNode(NodeIndex{0});
  EXPECT_EQ((*policy)->Place(c, t, ctx).placement, (Placement{NodeIndex{1}, GpuBit(0)}));
  e.ExcludeNode(NodeIndex{1});
  const PlacementDecision none = (*policy)->Place(c, t, ctx);
  EXPECT_FALSE(none.placement);
  EXPECT_EQ(none.feasible_nodes, 0u);
  // A CPU-only task needs only an eligible node, whatever its GPU mask.
  Eligibility no_gpus(2);
  no_gpus.SetGpus(NodeIndex{0}, 0);
  no_gpus.SetGpus(NodeIndex{1}, 0);
  ctx.eligibility = &no_gpus;
  EXPECT_TRUE((*policy)->Place(c, testing::CpuOnly(1000), ctx).placement);
  EXPECT_FALSE((*policy)->Place(c, t, ctx).placement);
}

INSTANTIATE_TEST_SUITE_P(AllPolicies, PolicyMaskTest, ::testing::ValuesIn(PolicyNames()),
                         [](const auto& param_info) { return param_info.param; });

INSTANTIATE_TEST_SUITE_P(AllPolicies, PolicyContractTest, ::testing::ValuesIn(PolicyNames()),
                         [](const auto& param_info) { return param_info.param; });

}  // namespace
}  // namespace tessera::placement
