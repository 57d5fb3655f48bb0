// `tessera serve`: the control plane (tessera::daemon::ControlPlane) until SIGINT or SIGTERM.
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "tessera/daemon/control_plane.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {

namespace {

struct ServeFlags {
  std::string db = "sqlite:tessera.db";
  std::string listen = "127.0.0.1:8080";
  int node_timeout_s = 30;
  int threads = 2;
  int cycle_interval_ms = 1000;
  double rate = 200;
  double burst = 400;
};

// "HOST:PORT" ("[::1]:8080" for IPv6).
Status SplitListen(const std::string& listen, std::string* host, uint16_t* port) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size())
    return InvalidArgumentError("--listen: expected HOST:PORT (e.g. 127.0.0.1:8080), got '" + listen + "'");
  *host = listen.substr(0, colon);
  if (host->size() > 2 && host->front() == '[' && host->back() == ']') *host = host->substr(1, host->size() - 2);
  char* end = nullptr;
  const long p = std::strtol(listen.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || p < 0 || p > 65535) return InvalidArgumentError("--listen: port must be 0..65535");
  *port = static_cast<uint16_t>(p);
  return Status::Ok();
}

int RunServe(const ServeFlags& f) {
  daemon::ControlPlaneOptions o;
  o.db = f.db;
  if (Status st = SplitListen(f.listen, &o.listen_host, &o.listen_port); !st.ok()) return Fail("serve", st, kExitBadInput);
  o.node_timeout_s = f.node_timeout_s;
  o.http_threads = f.threads;
  o.cycle_interval_ms = f.cycle_interval_ms;
  o.rate_per_s = f.rate;
  o.rate_burst = f.burst;
  if (const char* t = std::getenv("TESSERA_BOOTSTRAP_TOKEN")) o.bootstrap_token = t;
  // The signals are waited for below; block them before any thread starts so none of the
  // server's threads takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  StatusOr<std::unique_ptr<daemon::ControlPlane>> cp = daemon::ControlPlane::Create(o);
  if (!cp.ok())
    return Fail("serve", cp.status(), cp.status().code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure);
  if (Status st = (*cp)->Start(); !st.ok()) return Fail("serve", st, kExitFailure);
  if (!(*cp)->generated_bootstrap_token().empty())
    std::printf("tessera serve: bootstrap admin token (shown once, store it now): %s\n",
                (*cp)->generated_bootstrap_token().c_str());
  std::printf("tessera serve: listening on http://%s:%u (store %s)\n", o.listen_host.c_str(), (*cp)->port(),
              o.db.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  std::printf("tessera serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  (*cp)->Stop();
  return kExitOk;
}

}  // namespace

void RegisterServe(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* serve = app.add_subcommand(
      "serve",
      "Run the control plane: the REST API (docs/api.md) over a store, and the scheduling loop.\n"
      "With an empty store the first admin token is $TESSERA_BOOTSTRAP_TOKEN when set (>= 16\n"
      "characters), else generated and printed once. Stops on SIGINT or SIGTERM.");
  serve->add_option("--db", flags->db,
                    "The store: sqlite:PATH (or a plain path; created if missing) or postgresql://... (libpq URI)")
      ->capture_default_str();
  serve->add_option("--listen", flags->listen, "HOST:PORT to serve HTTP on (port 0: any free port, printed)")
      ->capture_default_str();
  serve->add_option("--node-timeout", flags->node_timeout_s,
                    "Seconds without a heartbeat after which a node is lost and its workloads are requeued")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  serve->add_option("--threads", flags->threads, "HTTP server threads")->capture_default_str()->check(CLI::Range(1, 64));
  serve->add_option("--cycle-interval-ms", flags->cycle_interval_ms,
                    "Milliseconds between scheduling cycles when nothing wakes the loop earlier")
      ->capture_default_str()->check(CLI::Range(10, 600000));
  serve->add_option("--rate", flags->rate, "Requests per second per token before 429 (sustained)")
      ->capture_default_str()->check(CLI::PositiveNumber);
  serve->add_option("--burst", flags->burst, "Requests per token allowed at once before 429")
      ->capture_default_str()->check(CLI::Range(1.0, 1e9));
  serve->callback([flags, exit_code] { *exit_code = RunServe(*flags); });
}

}  // namespace tessera::cli
