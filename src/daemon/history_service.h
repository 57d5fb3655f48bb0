// The cluster's history without HTTP: GET /v1/history?tenant=&from=&step= (control_plane_history.cc:
// decode -> HistoryService::Read -> render) reads the ClusterHistory the scheduling loop samples
// (cluster_history.h), filtered like every read. tests/daemon/history_service_test.cc drives it
// directly.
//
// What a caller may see (Action::kReadUsage through the caller's check): an admin or viewer every
// tenant and the idle GPUs; a tenant token its subtree's tenants (no idle GPUs: the nodes are the
// cluster's). ?tenant= narrows it to that subtree (and leaves the idle GPUs out).
//
// Errors: NOT_FOUND "tenant 'x' not found" (another subtree's, or none of that name);
// PERMISSION_DENIED (the caller's check); INVALID_ARGUMENT "step: '0' is not a number of seconds
// 1..86400" naming "step" in *bad_field.
//
// Worked example (points every 5 s for the last hour; tenants ml, cv; the clock at t):
//   Read(admin, {})                           -> from t - 3600, step 5, ml's and cv's series, idle GPUs
//   Read(ml's tenant-user, {.step = "60"})    -> one point a minute, ml's series only, no idle GPUs
//   Read(ml's tenant-user, {.tenant = "cv"})  -> NOT_FOUND "tenant 'cv' not found"
//
// Thread-safety: all methods may be called from any thread (no state of its own; ClusterHistory
// has its own lock).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "src/daemon/authz.h"
#include "src/daemon/cluster_history.h"
#include "tessera/core/clock.h"
#include "tessera/core/status.h"

namespace tessera::daemon {

// GET /v1/history's query: tenant and from decoded (ParseReadQuery), step as given.
struct HistoryQuery {
  std::string tenant;                // "": the caller's whole view
  std::optional<int64_t> from_s;     // nullopt: the last hour
  std::optional<std::string> step;   // seconds 1..86400; nullopt: the recording step
};

struct HistoryAnswer {
  int64_t from_s = 0;
  HistoryWindow window;
  int64_t recorded_every_s = 0;
  int64_t kept_s = 0;
  bool idle_gpus = false;  // whether window.idle_gpus is shown (the whole cluster's view)
};

class HistoryService {
 public:
  HistoryService(const ClusterHistory& history, ParentOf parents, const Clock& clock);

  StatusOr<HistoryAnswer> Read(const ReadCaller& caller, const HistoryQuery& query, std::string* bad_field = nullptr);

 private:
  const ClusterHistory& history_;
  const ParentOf parents_;
  const Clock& clock_;
};

}  // namespace tessera::daemon
