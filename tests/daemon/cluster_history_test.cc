// ClusterHistory: the header's worked example, the day it keeps, a clock that steps back, and the
// tenants a reader may see.
#include "src/daemon/cluster_history.h"

#include <gtest/gtest.h>

namespace tessera::daemon {
namespace {

auto All() {
  return [](const std::string&) { return true; };
}

TEST(ClusterHistory, HeaderWorkedExample) {
  ClusterHistory h(5);
  h.Record({.t_s = 100, .held_milli = {{"a", 900}}, .idle_gpus = 9});
  h.Record({.t_s = 103, .held_milli = {{"a", 500}}, .idle_gpus = 3});  // same step: replaces t=100
  h.Record({.t_s = 105, .held_milli = {{"a", 500}, {"b", 1000}}, .pending = {{"b", 2}}, .idle_gpus = 2});
  h.Record({.t_s = 110, .held_milli = {{"b", 1000}}, .idle_gpus = 2});
  const HistoryWindow w = h.Read(100, 10, All());
  EXPECT_EQ(w.step_s, 10);
  EXPECT_EQ(w.t_s, (std::vector<int64_t>{105, 110}));
  EXPECT_EQ(w.held_milli.at("a"), (std::vector<int64_t>{500, 0}));
  EXPECT_EQ(w.held_milli.at("b"), (std::vector<int64_t>{1000, 1000}));
  EXPECT_EQ(w.pending.at("b"), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(w.idle_gpus, (std::vector<int64_t>{2, 2}));
  // At the recording step every point is there; a step below it is the recording step.
  EXPECT_EQ(h.Read(0, 1, All()).t_s, (std::vector<int64_t>{103, 105, 110}));
  EXPECT_EQ(h.Read(0, 1, All()).held_milli.at("a").front(), 500);
  EXPECT_EQ(h.Read(106, 5, All()).t_s, (std::vector<int64_t>{110}));
}

TEST(ClusterHistory, KeepsItsWindowAndStartsAgainAfterAClockStepBack) {
  ClusterHistory h(5, 60);
  for (int64_t t = 0; t <= 100; t += 5) h.Record({.t_s = t, .idle_gpus = t});
  const HistoryWindow w = h.Read(0, 5, All());
  ASSERT_FALSE(w.t_s.empty());
  EXPECT_EQ(w.t_s.front(), 40);  // 100 - 60
  EXPECT_EQ(w.t_s.back(), 100);
  h.Record({.t_s = 50, .idle_gpus = 7});  // the clock went back: the old points no longer line up
  EXPECT_EQ(h.Read(0, 5, All()).t_s, (std::vector<int64_t>{50}));
}

TEST(ClusterHistory, AReaderSeesOnlyTheTenantsItMay) {
  ClusterHistory h(5);
  h.Record({.t_s = 0, .held_milli = {{"mine", 100}, {"theirs", 900}}, .pending = {{"theirs", 4}}});
  const HistoryWindow w = h.Read(0, 5, [](const std::string& t) { return t == "mine"; });
  EXPECT_EQ(w.held_milli.size(), 1u);
  EXPECT_EQ(w.held_milli.count("mine"), 1u);
  EXPECT_TRUE(w.pending.empty());
}

}  // namespace
}  // namespace tessera::daemon
