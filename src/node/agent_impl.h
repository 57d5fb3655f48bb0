// Private to the agent (src/node/agent*.cc): the desired-state decoder and the agent's files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/api/node_wire.h"
#include "tessera/core/status.h"
#include "tessera/node/agent.h"

namespace tessera::node::internal {

// One workload of GET /v1/nodes/{name}/desired (docs/api.md; the wire message is the api
// module's): the agent runs its first pod on this node (pods.front(), never empty).
using DesiredWorkload = api::DesiredWorkload;

// The whole desired state (workloads and MIG layouts); api::DecodeDesiredState's INVALID_ARGUMENT
// (naming the field) prefixed with "desired state: ".
StatusOr<api::DesiredState> ParseDesiredState(std::string_view body);

// "whole", "share" or the MIG profile: the ledger's partition of a mode.
std::string PartitionOf(const DesiredWorkload& d);

std::string WorkloadFile(const std::string& agent_dir, int64_t id);  // <dir>/w<id>.json
std::string ExitFile(const std::string& agent_dir, int64_t id);      // <dir>/w<id>.exit
std::string LogFile(const std::string& agent_dir, int64_t id);       // <dir>/w<id>.log
std::string SlotName(int64_t id);                                    // "w<id>"

// Writes `text` to `path` atomically (a temporary file in the same folder, fsync, rename).
Status WriteFileAtomically(const std::string& path, const std::string& text);
// NOT_FOUND when absent; INTERNAL naming the file when unreadable.
StatusOr<std::string> ReadWholeFile(const std::string& path);

// /proc/<pid>/stat's start time (field 22), 0 when the process does not exist.
uint64_t ProcessStartTicks(long pid);

std::string ResponseMessage(const LinkResponse& r);
Status RefusedToken(const LinkResponse& r, std::string_view what);

}  // namespace tessera::node::internal
