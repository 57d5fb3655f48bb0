// ClusterHistory: the header's worked example, the day it keeps, a clock that steps back, the
// tenants a reader may see, the closed points it hands out to be stored, their stored body and a
// preload of an earlier run's points.
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

TEST(ClusterHistory, RecordReturnsThePointANewStepClosed) {
  ClusterHistory h(5);
  EXPECT_FALSE(h.Record({.t_s = 100, .idle_gpus = 9}).has_value());  // nothing before it
  EXPECT_FALSE(h.Record({.t_s = 103, .idle_gpus = 3}).has_value());  // same step: replaces t=100
  std::optional<HistoryPoint> closed = h.Record({.t_s = 105, .idle_gpus = 2});
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->t_s, 103);
  EXPECT_EQ(closed->idle_gpus, 3);
  EXPECT_FALSE(h.Record({.t_s = 50}).has_value());  // the clock went back: afresh
}

TEST(ClusterHistory, BodyWorkedExampleRoundTripsAndBadBodiesAreNamed) {
  const HistoryPoint p{.t_s = 105, .held_milli = {{"b", 1000}}, .pending = {{"b", 2}}, .idle_gpus = 2};
  const std::string body = ClusterHistory::EncodeBody(p);
  EXPECT_EQ(body, R"({"held_milli":{"b":1000},"idle_gpus":2,"pending":{"b":2}})");
  StatusOr<HistoryPoint> back = ClusterHistory::DecodeBody(105, body);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->t_s, 105);
  EXPECT_EQ(back->held_milli, p.held_milli);
  EXPECT_EQ(back->pending, p.pending);
  EXPECT_EQ(back->idle_gpus, 2);
  for (const char* bad : {"", "[]", R"({"held_milli":{},"pending":{}})",
                          R"({"held_milli":{"a":"x"},"pending":{},"idle_gpus":0})", R"({"pending":{},"idle_gpus":0})"}) {
    StatusOr<HistoryPoint> d = ClusterHistory::DecodeBody(7, bad);
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(d.status().message().find("t_s 7"), std::string_view::npos) << d.status().ToString();
  }
}

TEST(ClusterHistory, PreloadPutsTheStoredPointsBeforeThisRunsAndKeepsTheWindow) {
  ClusterHistory h(5, 60);
  h.Record({.t_s = 202, .idle_gpus = 1});  // this run's first point, before the preload
  h.Preload({{.t_s = 100, .idle_gpus = 9},    // older than 202 - 60: dropped
             {.t_s = 150, .idle_gpus = 8},
             {.t_s = 195, .idle_gpus = 7},
             {.t_s = 200, .idle_gpus = 6}});  // the step of 202: this run's point wins
  const HistoryWindow w = h.Read(0, 5, All());
  EXPECT_EQ(w.t_s, (std::vector<int64_t>{150, 195, 202}));
  EXPECT_EQ(w.idle_gpus, (std::vector<int64_t>{8, 7, 1}));
  ClusterHistory empty(5, 60);
  empty.Preload({{.t_s = 10, .idle_gpus = 1}, {.t_s = 12, .idle_gpus = 2}, {.t_s = 15, .idle_gpus = 3}});
  EXPECT_EQ(empty.Read(0, 5, All()).idle_gpus, (std::vector<int64_t>{2, 3}));  // one per step, the last
}

}  // namespace
}  // namespace tessera::daemon
