#include "tessera/core/lifecycle_state.h"

#include <string>

namespace tessera {
namespace {

// The one parse of both kinds: the state of `all` whose name is `name`, or an error listing
// them ("'x' is not ready, cordoned or lost").
template <typename State, size_t N, typename NameFn>
StatusOr<State> ParseState(const State (&all)[N], NameFn name_of, std::string_view name) {
  std::string known;
  for (size_t i = 0; i < N; ++i) {
    if (name_of(all[i]) == name) return all[i];
    known += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(name_of(all[i]));
  }
  return InvalidArgumentError("'" + std::string(name) + "' is not " + known);
}

}  // namespace

StatusOr<WorkloadState> ParseWorkloadState(std::string_view name) {
  return ParseState(kWorkloadStates, WorkloadStateName, name);
}

StatusOr<NodeState> ParseNodeState(std::string_view name) {
  return ParseState(kNodeStates, NodeStateName, name);
}

}  // namespace tessera
