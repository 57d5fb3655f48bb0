// The tenant registry file (tenants.json) of a node directory: read with every field checked,
// written atomically. Private to the node module; JSON stays an implementation detail here.
//   {"version": 1, "tenants": [{"name": "a", "index": 0, "gpu": 0, "gpus": [0], "mem_bytes": 67108864,
//     "share": 30, "priority": 0, "kernel_estimate_us": 1000, "scrub": false, "uid": -1,
//     "pids": [1234], "pgids": [1240]}]}
// kernel_estimate_us, scrub, uid, gpus and pgids may be absent (files of earlier versions; uid -1:
// the tenant runs under the node side's uid; no gpus: [gpu]). "gpu" is the first of "gpus" (a
// pod's tenant is on several GPUs, NodeDir's header).
#pragma once

#include <string>
#include <vector>

#include "tessera/core/status.h"
#include "tessera/node/node_dir.h"

namespace tessera::node::internal {

// A missing file is an empty registry. DATA_LOSS "<path>: <what is wrong>" otherwise.
StatusOr<std::vector<TenantEntry>> ReadRegistry(const std::string& path);
Status WriteRegistry(const std::string& path, const std::vector<TenantEntry>& tenants);

}  // namespace tessera::node::internal
