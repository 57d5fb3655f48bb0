// `tessera serve --config serve.yaml`: the control plane's options in a file. Every key is
// optional; a flag given on the command line wins over the file. A key is its flag's name
// without the dashes in front (`--node-timeout` -> node_timeout; '-' and '_' are the same in a
// key); the older keys node_timeout_s, http_threads, rate_per_s and rate_burst are aliases of
// node_timeout, threads, rate and burst (one option set twice is a problem).
//
//   # serve.yaml
//   db: postgresql://tessera@db.internal/tessera   # or sqlite:/var/lib/tessera/tessera.db
//   listen: 0.0.0.0:8080
//   node_timeout: 30            # seconds; a node silent this long is lost
//   threads: 4                  # HTTP server threads
//   cycle_interval_ms: 1000
//   rate: 200                   # requests per second per token; node-agent calls per node
//   burst: 400
//   price_plan: /etc/tessera/price-plan.yaml  # GET /v1/invoices bills usage with it (path as given)
//   tls_cert: /etc/tessera/tls/cert.pem  # with tls_key: HTTPS (PEM; the file may hold a chain)
//   tls_key: /etc/tessera/tls/key.pem
//   metrics_auth: true  # GET /metrics needs a token (any role); default false: open
//   ui_dir: /usr/share/tessera/ui  # the dashboard's bundle (default: the install's; none: no /ui)
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
// line, each "serve.yaml:7: rate: expected a number in 0.001..1e+09" (the key as written).
StatusOr<ControlPlaneOptions> ParseServeConfig(std::string_view text, std::string_view source,
                                               ControlPlaneOptions base);
// Reads the file first (NOT_FOUND names it).
StatusOr<ControlPlaneOptions> LoadServeConfig(const std::string& path, ControlPlaneOptions base);

// "HOST:PORT" ("[::1]:8080" for IPv6) into host and port.
Status SplitListenAddress(std::string_view listen, std::string* host, uint16_t* port);

}  // namespace tessera::daemon
