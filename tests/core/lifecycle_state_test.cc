// The lifecycle states' one string mapping: every state round-trips through its name, and a name
// that is none of them is an error naming it and the known ones.
#include "tessera/core/lifecycle_state.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(LifecycleStateTest, EveryWorkloadStateRoundTripsThroughItsName) {
  for (WorkloadState s : kWorkloadStates) {
    StatusOr<WorkloadState> back = ParseWorkloadState(WorkloadStateName(s));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(WorkloadStateName(WorkloadState::kRunning), "running");
}

TEST(LifecycleStateTest, EveryNodeStateRoundTripsThroughItsName) {
  for (NodeState s : kNodeStates) {
    StatusOr<NodeState> back = ParseNodeState(NodeStateName(s));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(NodeStateName(NodeState::kLost), "lost");
}

TEST(LifecycleStateTest, AnUnknownNameIsAnErrorNamingItAndTheKnownOnes) {
  EXPECT_EQ(ParseWorkloadState("runing").status(),
            InvalidArgumentError("'runing' is not pending, running, completed, failed, cancelled or rejected"));
  EXPECT_EQ(ParseNodeState("Ready").status(),
            InvalidArgumentError("'Ready' is not ready, cordoned or lost"));
  EXPECT_FALSE(ParseWorkloadState("").ok());
}

TEST(LifecycleStateTest, OnlyPendingAndRunningAreNotEnded) {
  for (WorkloadState s : kWorkloadStates)
    EXPECT_EQ(IsEnded(s), s != WorkloadState::kPending && s != WorkloadState::kRunning) << WorkloadStateName(s);
}

}  // namespace
}  // namespace tessera
