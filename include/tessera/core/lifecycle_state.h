// The lifecycle states of the control plane's two kinds of record, workloads and nodes, and
// their one string mapping: the names the store keeps in its `state` columns, the API shows and
// `?state=` takes. Defined here, in core, so that the store (which may use only core), the wire
// contract (api, re-exporting these as api::WorkloadState / api::NodeState) and the daemon share
// one definition; nothing else may spell these names.
//
// Workloads: pending -> running -> completed | failed; pending or running -> cancelled;
// pending -> rejected (admission refused it); running -> pending (preempted or its node lost:
// requeued). Nodes: ready <-> cordoned (an admin's cordon/uncordon/drain); either -> lost (no
// heartbeat within the node timeout); lost -> ready (it registers again).
//
// Worked example:
//   WorkloadStateName(WorkloadState::kRunning)  -> "running"
//   ParseWorkloadState("running")               -> WorkloadState::kRunning
//   ParseWorkloadState("runing")                -> INVALID_ARGUMENT "'runing' is not pending, running,
//                                                  completed, failed, cancelled or rejected"
//   ParseNodeState("lost")                      -> NodeState::kLost
// A caller that read the name somewhere puts where in front of the message (the wire decoders:
// "state: 'runing' is not ...", the store: "store: workloads row 7: state 'runing' is not ...").
//
// Thread-safety: constants and pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "tessera/core/status.h"

namespace tessera {

enum class WorkloadState : uint8_t { kPending, kRunning, kCompleted, kFailed, kCancelled, kRejected };
inline constexpr WorkloadState kWorkloadStates[] = {WorkloadState::kPending,   WorkloadState::kRunning,
                                                    WorkloadState::kCompleted, WorkloadState::kFailed,
                                                    WorkloadState::kCancelled, WorkloadState::kRejected};
constexpr std::string_view WorkloadStateName(WorkloadState s) {
  switch (s) {
    case WorkloadState::kPending: return "pending";
    case WorkloadState::kRunning: return "running";
    case WorkloadState::kCompleted: return "completed";
    case WorkloadState::kFailed: return "failed";
    case WorkloadState::kCancelled: return "cancelled";
    case WorkloadState::kRejected: return "rejected";
  }
  return "?";
}
// INVALID_ARGUMENT naming `name` and the six names for any other text (the header's example).
StatusOr<WorkloadState> ParseWorkloadState(std::string_view name);
// completed, failed, cancelled, rejected: it will not run (again).
constexpr bool IsEnded(WorkloadState s) { return s != WorkloadState::kPending && s != WorkloadState::kRunning; }

enum class NodeState : uint8_t { kReady, kCordoned, kLost };
inline constexpr NodeState kNodeStates[] = {NodeState::kReady, NodeState::kCordoned, NodeState::kLost};
constexpr std::string_view NodeStateName(NodeState s) {
  switch (s) {
    case NodeState::kReady: return "ready";
    case NodeState::kCordoned: return "cordoned";
    case NodeState::kLost: return "lost";
  }
  return "?";
}
// INVALID_ARGUMENT naming `name` and the three names for any other text.
StatusOr<NodeState> ParseNodeState(std::string_view name);

}  // namespace tessera
