// The fair-order contract (include/tessera/sched/fair_order.h), run over every name in
// FairOrderNames() on random trees, shares and active sets; then each order's own rule and its
// worked example, and the scheduler's use of SchedulerOptions::fair_order.
#include "tessera/sched/fair_order.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tessera/sched/scheduler.h"

namespace tessera::sched {
namespace {

using ::testing::HasSubstr;

// A random tree of 1-4 roots, up to 3 levels, 1-3 children per inner node (index order: a
// parent before its children). Weights 0.5-2.
TenantTree RandomTree(std::mt19937_64& rng) {
  std::vector<TenantSpec> specs;
  std::uniform_int_distribution<int> roots(1, 4), kids(1, 3), coin(0, 1);
  std::uniform_real_distribution<double> weight(0.5, 2.0);
  struct Todo {
    std::string name;
    std::string parent;
    int depth;
  };
  std::vector<Todo> todo;
  for (int r = roots(rng); r > 0; --r) todo.push_back({"r" + std::to_string(r), "", 0});
  for (size_t k = 0; k < todo.size(); ++k) {
    const Todo t = todo[k];
    TenantSpec s;
    s.name = t.name;
    s.parent = t.parent;
    s.weight = weight(rng);
    specs.push_back(s);
    if (t.depth < 2 && coin(rng))
      for (int c = kids(rng); c > 0; --c) todo.push_back({t.name + "." + std::to_string(c), t.name, t.depth + 1});
  }
  auto tree = TenantTree::Create(specs, ResourceSpace());
  EXPECT_TRUE(tree.ok()) << tree.status().ToString();
  return std::move(*tree);
}

// Shares on a grid of tenths (so that ties occur).
std::vector<double> RandomShares(const TenantTree& tree, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> tenths(0, 10);
  std::vector<double> share(tree.size());
  for (double& s : share) s = tenths(rng) / 10.0;
  return share;
}

// Each leaf active with probability `p`; active[a] counts the active leaves under a.
std::vector<int> RandomActive(const TenantTree& tree, std::mt19937_64& rng, double p) {
  std::bernoulli_distribution on(p);
  std::vector<int> active(tree.size(), 0);
  for (TenantIndex t = 0; t < tree.size(); ++t)
    if (tree.is_leaf(t) && on(rng))
      for (TenantIndex a : tree.path(t)) active[a]++;
  return active;
}

std::unique_ptr<FairOrder> Make(const std::string& name) {
  auto order = MakeFairOrder(name);
  EXPECT_TRUE(order.ok()) << order.status().ToString();
  return std::move(*order);
}

class FairOrderContract : public ::testing::TestWithParam<std::string> {};

TEST_P(FairOrderContract, PicksAnActiveLeafIffOneIsActiveAndDeterministically) {
  const auto order = Make(GetParam());
  const auto again = Make(GetParam());
  EXPECT_EQ(order->name(), GetParam());
  std::mt19937_64 rng(7);
  int none = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const TenantTree tree = RandomTree(rng);
    const std::vector<double> share = RandomShares(tree, rng);
    const std::vector<int> active = RandomActive(tree, rng, trial % 5 == 0 ? 0.1 : 0.5);
    bool any = false;
    for (TenantIndex t = 0; t < tree.size(); ++t) any = any || (tree.is_leaf(t) && active[t] > 0);
    const TenantIndex pick = order->Next(tree, share, active);
    if (!any) {
      ++none;
      EXPECT_EQ(pick, kNoTenant) << "trial " << trial;
      continue;
    }
    ASSERT_NE(pick, kNoTenant) << "trial " << trial;
    ASSERT_GE(pick, 0);
    ASSERT_LT(pick, tree.size());
    EXPECT_TRUE(tree.is_leaf(pick)) << "trial " << trial;
    EXPECT_GT(active[pick], 0) << "trial " << trial;
    EXPECT_EQ(order->Next(tree, share, active), pick) << "trial " << trial;
    EXPECT_EQ(again->Next(tree, share, active), pick) << "trial " << trial;
  }
  EXPECT_GT(none, 10);  // the generator does make empty active sets
}

// Every pick raises the picked leaf's share and its ancestors' (as a started job raises its
// tenant's usage up the tree): every active leaf is picked within a bounded number of picks.
// Bound: a tenant that keeps being picked while a sibling waits passes that sibling's share
// (at most 1) after 1/step + 1 picks, at every level, so tree.size()^2 * (1/step + 1) is
// generous (the orders here need far fewer).
TEST_P(FairOrderContract, NoActiveLeafStarvesWhenPicksRaiseShares) {
  const auto order = Make(GetParam());
  std::mt19937_64 rng(11);
  constexpr double kStep = 0.05;
  int most = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const TenantTree tree = RandomTree(rng);
    std::vector<double> share = RandomShares(tree, rng);
    const std::vector<int> active = RandomActive(tree, rng, 0.7);
    std::vector<char> waiting(tree.size(), 0);
    int left = 0;
    for (TenantIndex t = 0; t < tree.size(); ++t)
      if (tree.is_leaf(t) && active[t] > 0) waiting[t] = 1, ++left;
    const int bound = tree.size() * tree.size() * static_cast<int>(1 / kStep + 1);
    int picks = 0;
    while (left > 0 && picks < bound) {
      const TenantIndex pick = order->Next(tree, share, active);
      ASSERT_NE(pick, kNoTenant);
      ++picks;
      if (waiting[pick]) waiting[pick] = 0, --left;
      for (TenantIndex a : tree.path(pick)) share[a] += kStep / tree.spec(a).weight;
    }
    EXPECT_EQ(left, 0) << "trial " << trial << ": " << left << " active leaves never picked in "
                       << picks << " picks";
    most = std::max(most, picks);
  }
  EXPECT_GT(most, 0);
}

INSTANTIATE_TEST_SUITE_P(EveryOrder, FairOrderContract, ::testing::ValuesIn(FairOrderNames()),
                         [](const auto& param_info) {
                           std::string n = param_info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(FairOrder, NamesAndUnknownName) {
  ASSERT_FALSE(FairOrderNames().empty());
  EXPECT_EQ(FairOrderNames().front(), "hdrf");
  auto bad = MakeFairOrder("lottery");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown fair order 'lottery' (known: hdrf, flat-drf)"));
}

// hdrf: at every level of the pick's path, the tenant on the path is the least served of its
// active siblings, and on a tie the one listed first.
TEST(HdrfOrder, ThePathIsLeastServedAtEachLevel) {
  const auto order = Make("hdrf");
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 2000; ++trial) {
    const TenantTree tree = RandomTree(rng);
    const std::vector<double> share = RandomShares(tree, rng);
    const std::vector<int> active = RandomActive(tree, rng, 0.5);
    const TenantIndex pick = order->Next(tree, share, active);
    if (pick == kNoTenant) continue;
    const std::vector<TenantIndex>& path = tree.path(pick);
    for (size_t k = 0; k < path.size(); ++k) {
      const std::vector<TenantIndex>& level = k == 0 ? tree.roots() : tree.children(path[k - 1]);
      const auto at = std::find(level.begin(), level.end(), path[k]);
      ASSERT_NE(at, level.end());
      for (auto it = level.begin(); it != level.end(); ++it) {
        if (*it == path[k] || active[*it] == 0) continue;
        if (it < at) EXPECT_LT(share[path[k]], share[*it]) << "trial " << trial << " level " << k;
        else EXPECT_LE(share[path[k]], share[*it]) << "trial " << trial << " level " << k;
      }
    }
  }
}

// flat-drf: the least-served active leaf of the whole tree, ties by index.
TEST(FlatDrfOrder, TheLeastServedActiveLeafTiesByIndex) {
  const auto order = Make("flat-drf");
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 2000; ++trial) {
    const TenantTree tree = RandomTree(rng);
    const std::vector<double> share = RandomShares(tree, rng);
    const std::vector<int> active = RandomActive(tree, rng, 0.5);
    TenantIndex want = kNoTenant;
    for (TenantIndex t = 0; t < tree.size(); ++t)
      if (tree.is_leaf(t) && active[t] > 0 && (want == kNoTenant || share[t] < share[want])) want = t;
    EXPECT_EQ(order->Next(tree, share, active), want) << "trial " << trial;
  }
}

// The header's worked example: A, a1 under A, B, b1 and b2 under B, in that index order.
struct Example {
  TenantTree tree;
  std::vector<int> active;
};
Example WorkedExample() {
  std::vector<TenantSpec> specs(5);
  const char* names[] = {"A", "a1", "B", "b1", "b2"};
  const char* parents[] = {"", "A", "", "B", "B"};
  for (int i = 0; i < 5; ++i) {
    specs[i].name = names[i];
    specs[i].parent = parents[i];
  }
  auto tree = TenantTree::Create(specs, ResourceSpace());
  EXPECT_TRUE(tree.ok());
  return {std::move(*tree), {1, 1, 2, 1, 1}};
}

TEST(HdrfOrder, WorkedExample) {
  const Example ex = WorkedExample();
  const auto order = Make("hdrf");
  std::vector<double> share = {0.2, 0.2, 0.1, 0.1, 0.0};  // A a1 B b1 b2
  EXPECT_EQ(ex.tree.name(order->Next(ex.tree, share, ex.active)), "b2");
  share[2] = 0.2;  // b2's job starts: B 0.2, b2 0.1
  share[4] = 0.1;
  EXPECT_EQ(ex.tree.name(order->Next(ex.tree, share, ex.active)), "a1");
}

TEST(FlatDrfOrder, WorkedExample) {
  const Example ex = WorkedExample();
  const auto order = Make("flat-drf");
  std::vector<double> share = {0.2, 0.2, 0.1, 0.1, 0.0};
  EXPECT_EQ(ex.tree.name(order->Next(ex.tree, share, ex.active)), "b2");
  share[2] = 0.2;
  share[4] = 0.1;
  EXPECT_EQ(ex.tree.name(order->Next(ex.tree, share, ex.active)), "b1");
}

// Through the scheduler: three free GPUs, every tenant with 1-GPU borrowing jobs waiting, one
// cycle. hdrf shares between the organisations (a1 2, b1 1); flat-drf between the projects
// (one each).
std::map<std::string, int> StartsByTenant(const std::string& fair_order) {
  const Example ex = WorkedExample();
  SchedulerOptions opt;
  opt.fair_order = fair_order;
  std::vector<placement::NodeSpec> nodes = {
      {"n0", CpuMilli{64000}, MiB{262144}, 3, *GpuModelCatalog::Builtin().Find("V100M16")}};
  auto s = Scheduler::Create(&ex.tree, std::move(nodes), opt);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  JobId id = 1;
  for (TenantIndex t : {1, 3, 4})
    for (int k = 0; k < 3; ++k) {
      Job j;
      j.id = id++;
      j.tenant = t;
      j.qos = QosClass::kBurstable;
      j.pod = placement::TaskRequest{.cpu = CpuMilli{1000}, .memory = MiB{1024}, .num_gpu = 1,
                                     .gpu_milli = GpuMilli{1000}};
      EXPECT_TRUE((*s)->Submit(j).ok());
    }
  std::map<std::string, int> starts;
  for (const StartEvent& e : (*s)->Cycle(Seconds{0}).started)
    starts[ex.tree.name((*s)->job(e.job)->tenant)]++;
  return starts;
}

TEST(SchedulerFairOrder, HdrfSharesByOrganisationFlatDrfByProject) {
  EXPECT_EQ(StartsByTenant("hdrf"), (std::map<std::string, int>{{"a1", 2}, {"b1", 1}}));
  EXPECT_EQ(StartsByTenant("flat-drf"), (std::map<std::string, int>{{"a1", 1}, {"b1", 1}, {"b2", 1}}));
}

TEST(SchedulerFairOrder, UnknownOrderIsRejectedByCreate) {
  const Example ex = WorkedExample();
  SchedulerOptions opt;
  opt.fair_order = "round-robin";
  std::vector<placement::NodeSpec> nodes = {
      {"n0", CpuMilli{64000}, MiB{262144}, 3, *GpuModelCatalog::Builtin().Find("V100M16")}};
  auto s = Scheduler::Create(&ex.tree, std::move(nodes), opt);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("fair_order"));
  EXPECT_THAT(s.status().message(), HasSubstr("known: hdrf, flat-drf"));
}

}  // namespace
}  // namespace tessera::sched
