// `tessera serve --config serve.yaml`: the control plane's options in a file. Every key is
// optional; a flag given on the command line wins over the file.
//
//   # serve.yaml
//   db: postgresql://tessera@db.internal/tessera   # or sqlite:/var/lib/tessera/tessera.db
//   listen: 0.0.0.0:8080
//   node_timeout_s: 30          # a node silent this long is lost
//   http_threads: 4
//   cycle_interval_ms: 1000
//   rate_per_s: 200             # per token; node-agent calls per node
//   rate_burst: 400
//   price_plan: /etc/tessera/price-plan.yaml  # GET /v1/invoices bills usage with it (path as given)
//   tls_cert: /etc/tessera/tls/cert.pem  # with tls_key: HTTPS (PEM; the file may hold a chain)
//   tls_key: /etc/tessera/tls/key.pem
//   metrics_auth: true  # GET /metrics needs a token (any role); default false: open
//   scheduler:
//     placement_policy: tessera # placement::PolicyNames()
//     fair_order: hdrf          # or flat-drf
//     min_runtime_s: 60         # before a job may be preempted
//     preemption: true
//     fair_share_preemption: true
//     fair_share_half_life_s: 0 # > 0: DRF on decayed usage
//
// Every problem is reported at once with file:line (unknown keys, wrong types, values out of
// range). Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "tessera/core/status.h"
#include "tessera/daemon/control_plane.h"

namespace tessera::daemon {

// The options `base` with what the file sets. INVALID_ARGUMENT lists every problem, one per
// line, each "serve.yaml:7: rate_per_s: expected a number > 0".
StatusOr<ControlPlaneOptions> ParseServeConfig(std::string_view text, std::string_view source,
                                               ControlPlaneOptions base);
// Reads the file first (NOT_FOUND names it).
StatusOr<ControlPlaneOptions> LoadServeConfig(const std::string& path, ControlPlaneOptions base);

// "HOST:PORT" ("[::1]:8080" for IPv6) into host and port.
Status SplitListenAddress(std::string_view listen, std::string* host, uint16_t* port);

}  // namespace tessera::daemon
