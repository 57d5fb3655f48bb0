// A live control plane's usage history as hourly GPU demand per model, read over its API (GET
// /v1/usage, docs/api.md): what `tessera plan capacity --server` plans from instead of a ledger
// file. Demand of a model in an hour = the sum of gpu_milli_s_allocated of the answer's hourly
// records of that model / 3'600'000, in GPUs (GPU-hours per hour; metering::HourlyDemandByModel
// does the same over a ledger). A model's series runs from its first record in [from_s, to_s)
// to the hour before to_s; hours without a record count 0 (demand that stopped is demand of 0).
//
// The usage is asked for a day at a time (?from=&to=, whole hours, oldest first), so that no
// answer grows past the client's body limit however many workloads ran; what the token may see
// is what is summed (an admin or viewer token: the whole cluster; a tenant token: its subtree).
//
// Worked example: records {A100-80GB, 10:00, 1'800'000}, {A100-80GB, 10:00, 3'600'000},
// {H100-80GB, 11:00, 900'000}, from 10:00 to 13:00 -> A100-80GB from 10:00: 1.5 0 0;
// H100-80GB from 11:00: 0.25 0.
//
// Errors: INVALID_ARGUMENT when from_s/to_s are not whole hours with from_s < to_s; the client's
// (UNAVAILABLE: not reachable); an error answer as its code ("GET /v1/usage?...: HTTP 403: ..."
// PERMISSION_DENIED, 401 UNAUTHENTICATED, 404 NOT_FOUND, 400 INVALID_ARGUMENT, else UNAVAILABLE);
// DATA_LOSS naming the field for an answer of another shape ("hours[3].model: ...").
// Thread-safety: as the ApiClient's (one thread).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/daemon/api_client.h"
#include "tessera/metering/capacity_plan.h"

namespace tessera::daemon {

StatusOr<std::vector<metering::ModelDemand>> FetchDemandByModel(ApiClient& client, int64_t from_s, int64_t to_s);

}  // namespace tessera::daemon
