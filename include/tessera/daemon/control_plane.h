// `tessera serve`: the control plane. It holds the truth about tenants, tokens, nodes and
// workloads in a store (SQLite file or PostgreSQL), serves the REST API (docs/api.md) on the
// HTTP server, and runs the open-world scheduler (sched::LiveScheduler) in one loop over that
// state. Who calls it: the CLI's `serve` command and the daemon tests.
//
// What it promises:
//   - a 2xx means the change is durable (the store's Transact returned); a POST retried with the
//     same Idempotency-Key returns the first answer and changes nothing;
//   - every scheduling decision (start, preemption, move, a changed wait reason, a rejection) is
//     persisted in one transaction before anyone can read it; after a restart the loop adopts
//     what was running and queues what was pending, as the store says;
//   - a tenant token sees and changes only its subtree: anything else is 404;
//   - a node silent for `node_timeout_s` is lost and its workloads are queued again; a live node
//     belongs to the agent that registered it (its agent id, else its token): another agent's
//     register is 409 and changes nothing, until the node is lost;
//   - node-agent calls are rate-limited per node, every other call per token; a node-agent token
//     bound to a node acts for that node only (403);
//   - with a price plan, GET /v1/invoices bills the metering ledger with it (metering/invoice.h);
//   - one control plane per store (store.h, Ownership): Create claims the store right after
//     opening it, before the bootstrap token and the restore. A SQLite store owned by another process fails Create with
//     ALREADY_EXISTS naming the holder ("the store /var/lib/t.db is owned by another tessera
//     serve (pid 1234 on host h1, since 2026-12-05T05:50:01Z); only one control plane may own
//     a store"). On PostgreSQL, Create waits as a standby instead: it says so once on stderr
//     ("tessera serve: standby: store owned by pid 1234 on host h1 since ...; waiting"), tries
//     again every standby_poll_ms, and continues once the leader is gone. A leader checks its
//     lease before each cycle of the loop; when it is lost, the loop stops scheduling and calls
//     on_ownership_lost (tessera serve then exits 1, and a standby takes over).
//
//   ControlPlaneOptions o;  o.db = "sqlite:/var/lib/tessera/tessera.db";  o.listen_port = 8080;
//   auto cp = ControlPlane::Create(o);        // opens + migrates the store, restores the world
//   if (!(*cp)->generated_bootstrap_token().empty()) print it once
//   (*cp)->Start();                           // the API and the scheduling loop
//   ... (*cp)->Stop();
//
// Thread-safety: Create/Start/Stop from one thread; the API is served from the server's threads.
// Ownership: Create returns the only owner.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tessera/core/clock.h"
#include "tessera/core/status.h"
#include "tessera/metering/anomaly.h"
#include "tessera/sched/scheduler.h"

namespace tessera::daemon {

struct HttpRequest;
struct HttpResponse;

struct ControlPlaneOptions {
  std::string db = "sqlite:tessera.db";  // "sqlite:PATH", a path, or "postgresql://..."
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 8080;            // 0: any free port (see port())
  int http_threads = 2;
  // Both set: the API is served over HTTPS (PEM files; the certificate file may hold a chain).
  std::string tls_cert_file;
  std::string tls_key_file;
  int node_timeout_s = 30;                // a node silent this long is lost
  int cycle_interval_ms = 1000;           // the loop also runs this often without a wake-up
  // GET /metrics asks for a token (any role; 401 without one) instead of being open. The
  // metrics name tenants and show their queues, allocations and usage (docs/api.md).
  bool metrics_auth = false;
  // Per token (429 with Retry-After beyond it); node-agent calls on /v1/nodes/{name}/... per
  // node instead, so that a fleet sharing one token is not limited by its size.
  double rate_per_s = 200;
  double rate_burst = 400;
  // GET /v1/events: a ": ping" comment this often on every open stream; the store is polled for
  // new events this often besides the wake-up every committed change gives.
  int events_ping_interval_ms = 15000;
  int events_poll_interval_ms = 1000;
  // A price plan file (YAML, tessera/metering/price_plan.h) for GET /v1/invoices, read and
  // parsed by Create (a bad plan: INVALID_ARGUMENT with the parser's file:line messages); ""
  // none: GET /v1/invoices answers 404 no_price_plan.
  std::string price_plan;
  // The dashboard's built bundle (index.html and assets/), served under /ui/ (docs/dashboard.md);
  // read once by Create (INVALID_ARGUMENT naming the folder when it is not one or lacks
  // index.html). "": no dashboard, /ui answers 404 no_dashboard.
  std::string ui_dir;
  // The first admin token when the store has none: this value, or generated when empty.
  std::string bootstrap_token;
  sched::SchedulerOptions scheduler;
  // The anomaly detector run per tenant over each hour's usage, waits, refusals and preemptions
  // (src/daemon/anomaly_service.h); the library's defaults (tests shorten the warm-up).
  metering::AnomalyOptions anomaly;
  // Where every stored instant comes from (created_ms, event times, token expiry, node silence,
  // the hour usage and anomalies count in), read as milliseconds since the Unix epoch
  // (UnixMillis). Read from the HTTP threads and the loop at once: it must be safe to read from
  // any thread (SystemClock and FakeClock are). Tests pass a FakeClock they advance.
  std::shared_ptr<const Clock> clock = SystemClock::Shared();
  // false: no loop thread; the caller runs cycles with RunCycle (tests).
  bool run_loop = true;
  // Claim the store at Create (see the header comment); false only for tools and tests that run
  // two planes over one store on purpose.
  bool own_store = true;
  // PostgreSQL standby: how often Create tries again for the lease, and whether to keep waiting
  // (asked about every 100 ms; false: Create returns CANCELLED; empty: wait until the lease
  // comes). tessera serve stops waiting on SIGINT or SIGTERM.
  int standby_poll_ms = 2000;
  std::function<bool()> keep_waiting;
  // Called once from the loop thread, with no lock held, after the loop found the lease lost
  // and stopped scheduling (PostgreSQL; a SQLite owner cannot lose it). It must not call into
  // the ControlPlane; tessera serve signals its main thread, which stops and exits 1.
  std::function<void(const Status&)> on_ownership_lost;
};

// The price plan file `path` read and parsed as Create does (OK for ""): INVALID_ARGUMENT with
// every problem of the plan, "plan.yaml:12: ...", or naming a file that cannot be read.
// `tessera serve --check` calls it.
Status CheckPricePlan(const std::string& path);

class ControlPlane {
 public:
  // Opens and migrates the store, claims it (own_store), creates the bootstrap token for an
  // empty store, and rebuilds the scheduler from what the store holds. INVALID_ARGUMENT for bad
  // options, UNAVAILABLE when the store cannot be opened, ALREADY_EXISTS when another process
  // owns the (SQLite) store, CANCELLED when keep_waiting ended a standby's wait.
  static StatusOr<std::unique_ptr<ControlPlane>> Create(ControlPlaneOptions options);
  ~ControlPlane();  // Stop()s

  // The admin token generated for an empty store (shown once), or "" (none generated: the
  // store had tokens, or the token came from the options).
  const std::string& generated_bootstrap_token() const;

  // `tessera serve --issue-admin-token`, the way back in when no admin token works any more: a
  // new admin token that never expires, made by whoever can open (and claim) the store rather
  // than by a caller of the API. Stored with a "token.create" audit record whose actor is
  // `actor`; the secret is returned once, like POST /v1/tokens's. INTERNAL/UNAVAILABLE when the
  // store fails (nothing is stored then).
  struct IssuedToken {
    std::string id;     // "tok_..."
    std::string token;  // the secret, "tsr_..."
  };
  StatusOr<IssuedToken> IssueAdminToken(const std::string& actor);

  // Binds the HTTP server and starts the loop. UNAVAILABLE when the address cannot be bound.
  Status Start();
  void Stop();
  uint16_t port() const;

  // What the API answers for a request, without a socket (tests, the fuzzer).
  HttpResponse Handle(HttpRequest request) const;
  // One scheduling pass now: node timeouts, a cycle, its decisions persisted (tests).
  Status RunCycle();

  struct Impl;

 private:
  explicit ControlPlane(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::daemon
