// The query parameters the read endpoints share, parsed in one place and strictly: ?tenant=,
// ?from=, ?to=, ?after=, ?limit= (GET /v1/usage, /v1/history, /v1/audit, /v1/events,
// /v1/workloads). Which parameters a route takes at all is the route table's (ApiRoutes: any
// other is a 400 before the handler runs); this parses the shared ones that are present, and
// leaves a route's own (state, step, continue, workload, ...) to its handler.
//
// A value that is not what its parameter takes is INVALID_ARGUMENT whose message starts with the
// parameter's name, which `bad_field` (may be null) receives; nothing is silently read as 0:
//
//   ?tenant=vision&from=2026-11-01T00:00:00Z&to=1796083200&after=17&limit=50
//     -> {.tenant = "vision", .from_s = 1793491200, .to_s = 1796083200, .after = 17, .limit = 50}
//   ?after=abc -> "after: 'abc' is not an integer >= 0", field "after"
//   ?limit=0   -> "limit: '0' is not an integer 1..1000", field "limit"
//   ?from=     -> "from: '' is empty (unix seconds or RFC 3339, e.g. 2026-11-01T00:00:00Z)"
//   ?from=1793491200&to=1793491200 -> "from: must be before to", field "from"
//   ?tenant=   -> {.tenant = ""}: no tenant named (the caller's whole view), as when absent
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/core/status.h"

namespace tessera::daemon {

inline constexpr int kMaxReadLimit = 1000;

struct ReadQuery {
  std::string tenant;                // ?tenant=: "" when absent or empty
  std::optional<int64_t> from_s;     // ?from=: unix seconds or RFC 3339
  std::optional<int64_t> to_s;       // ?to=: likewise; from < to when both are given
  std::optional<int64_t> after;      // ?after=: an id or sequence number >= 0
  std::optional<int> limit;          // ?limit=: 1..kMaxReadLimit
};

StatusOr<ReadQuery> ParseReadQuery(const std::map<std::string, std::string>& query, std::string* bad_field);

// One `after`-like value ("17" -> 17, "0" -> 0): INVALID_ARGUMENT "<field>: '<text>' is not an
// integer >= 0" (also used for the Last-Event-ID header).
StatusOr<int64_t> ParseAfter(std::string_view text, std::string_view field);

// An object id (a workload's, in a path or ?workload=): "42" -> 42; nullopt for anything but a
// positive decimal integer ("0", "-1", "4x", "").
std::optional<int64_t> ParseId(std::string_view s);

}  // namespace tessera::daemon
