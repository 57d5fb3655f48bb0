// `tessera serve`: the control plane (tessera::daemon::ControlPlane) until SIGINT or SIGTERM.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>
#include <mutex>
#include <string>

#include "tessera/daemon/control_plane.h"
#include "tessera/daemon/serve_config.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {

namespace {

struct ServeFlags {
  std::string config;
  std::string db = "sqlite:tessera.db";
  std::string listen = "127.0.0.1:8080";
  std::string price_plan;
  std::string ui_dir;
  int node_timeout_s = 30;
  int threads = 2;
  int cycle_interval_ms = 1000;
  double rate = 200;
  double burst = 400;
  std::string tls_cert, tls_key;
  bool check = false;
  bool metrics_auth = false;
  std::string issue_admin_token;  // FILE or "-"
};

// The actor of the audit record of a token made by --issue-admin-token.
constexpr const char* kRecoveryActor = "local-recovery";

// --issue-admin-token: claims the store as a serve would (so not while one runs), adds an admin
// token that never expires, writes it to `path` ("-": stdout) and exits without serving. The file
// is created first (mode 0600, never overwritten), so no token is made that could not be written.
int IssueAdminToken(daemon::ControlPlaneOptions o, const std::string& path) {
  const bool to_stdout = path == "-";
  FILE* info = to_stdout ? stderr : stdout;  // stdout carries only the token then
  int fd = -1;
  if (!to_stdout) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
      return Fail("serve", "--issue-admin-token: " + path + ": " +
                               (errno == EEXIST ? std::string("exists; a token file is never overwritten (remove it "
                                                              "or name another)")
                                                : std::string(std::strerror(errno))),
                  kExitBadInput);
  }
  auto give_up = [&](const std::string& why, int code) {
    if (fd >= 0) {
      ::close(fd);
      ::unlink(path.c_str());
    }
    return Fail("serve", "--issue-admin-token: " + why, code);
  };
  o.keep_waiting = [] { return false; };  // PostgreSQL: a leader runs; do not wait as a standby
  StatusOr<std::unique_ptr<daemon::ControlPlane>> cp = daemon::ControlPlane::Create(o);
  if (!cp.ok() && cp.status().code() == StatusCode::kCancelled)
    return give_up("the store " + o.db + " is owned by a running tessera serve; stop it first", kExitBadInput);
  if (!cp.ok())
    return give_up(std::string(cp.status().message()),
                   cp.status().code() == StatusCode::kInvalidArgument ||
                           cp.status().code() == StatusCode::kAlreadyExists
                       ? kExitBadInput
                       : kExitFailure);
  if (!(*cp)->generated_bootstrap_token().empty())  // the store was empty
    std::fprintf(info, "tessera serve: bootstrap admin token (shown once, store it now): %s\n",
                 (*cp)->generated_bootstrap_token().c_str());
  StatusOr<daemon::ControlPlane::IssuedToken> issued = (*cp)->IssueAdminToken(kRecoveryActor);
  if (!issued.ok()) return give_up(std::string(issued.status().message()), kExitFailure);
  const std::string line = issued->token + "\n";
  if (to_stdout) {
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  } else {
    const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                         ::fsync(fd) == 0;
    const int err = errno;
    ::close(fd);
    if (!written) {
      ::unlink(path.c_str());
      return Fail("serve",
                  "--issue-admin-token: " + path + ": " + std::strerror(err) + "; the token " + issued->id +
                      " was made but not written (no one has its secret): run --issue-admin-token again, then "
                      "revoke " + issued->id + " with the new one",
                  kExitFailure);
    }
  }
  std::fprintf(info,
               "tessera serve: issued admin token %s (never expires; audit actor %s)%s; not serving: start "
               "tessera serve without --issue-admin-token\n",
               issued->id.c_str(), kRecoveryActor, to_stdout ? "" : (" to " + path + " (mode 0600)").c_str());
  return kExitOk;
}

// The dashboard's bundle when neither --ui-dir nor ui_dir names one: an install's
// <exe>/../share/tessera/ui (cmake/TesseraInstall.cmake), else a build tree's <exe>/ui (the ui
// target's output); "" (no dashboard) when neither holds an index.html.
std::string DefaultUiDir() {
  namespace fs = std::filesystem;
  const fs::path exe(ExecutableDir());
  for (const fs::path& dir : {exe / "../share/tessera/ui", exe / "ui"}) {
    std::error_code ec;
    if (fs::is_regular_file(dir / "index.html", ec)) return dir.lexically_normal().string();
  }
  return "";
}

// The defaults, then the file (--config), then the flags given on the command line.
int RunServe(const ServeFlags& f, const CLI::App& cmd) {
  daemon::ControlPlaneOptions o;  // 127.0.0.1:8080, the flags' defaults
  o.db = f.db;
  if (!f.config.empty()) {
    StatusOr<daemon::ControlPlaneOptions> c = daemon::LoadServeConfig(f.config, o);
    if (!c.ok()) return Fail("serve", c.status(), kExitBadInput);
    o = std::move(*c);
  }
  auto given = [&](const char* flag) { return cmd.count(flag) > 0; };
  if (given("--db")) o.db = f.db;
  if (given("--listen"))
    if (Status st = daemon::SplitListenAddress(f.listen, &o.listen_host, &o.listen_port); !st.ok())
      return Fail("serve", std::string("--") + std::string(st.message()), kExitBadInput);
  if (given("--node-timeout")) o.node_timeout_s = f.node_timeout_s;
  if (given("--threads")) o.http_threads = f.threads;
  if (given("--cycle-interval-ms")) o.cycle_interval_ms = f.cycle_interval_ms;
  if (given("--rate")) o.rate_per_s = f.rate;
  if (given("--burst")) o.rate_burst = f.burst;
  if (given("--price-plan")) o.price_plan = f.price_plan;
  if (given("--ui-dir")) o.ui_dir = f.ui_dir;
  else if (o.ui_dir.empty()) o.ui_dir = DefaultUiDir();
  if (o.ui_dir == "none") o.ui_dir.clear();
  if (given("--tls-cert")) o.tls_cert_file = f.tls_cert;
  if (given("--tls-key")) o.tls_key_file = f.tls_key;
  if (given("--metrics-auth")) o.metrics_auth = f.metrics_auth;
  if (o.tls_cert_file.empty() != o.tls_key_file.empty())
    return Fail("serve", o.tls_key_file.empty() ? "--tls-cert needs --tls-key (or tls_key in --config)"
                                                : "--tls-key needs --tls-cert (or tls_cert in --config)",
                kExitBadInput);
  if (const char* t = std::getenv("TESSERA_BOOTSTRAP_TOKEN")) o.bootstrap_token = t;
  if (given("--issue-admin-token")) return IssueAdminToken(std::move(o), f.issue_admin_token);
  if (f.check) {  // the file and the flags only: the store is not opened, no port is bound
    if (Status st = daemon::CheckPricePlan(o.price_plan); !st.ok()) return Fail("serve", st, kExitBadInput);
    std::error_code ec;
    if (!o.ui_dir.empty() && !std::filesystem::is_regular_file(std::filesystem::path(o.ui_dir) / "index.html", ec))
      return Fail("serve", "dashboard folder '" + o.ui_dir + "': no index.html (--ui-dir or ui_dir)", kExitBadInput);
    std::printf("tessera serve: configuration %s: valid (listen %s:%u, store %s)\n",
                f.config.empty() ? "(no --config)" : f.config.c_str(), o.listen_host.c_str(), o.listen_port,
                o.db.c_str());
    std::printf("tessera serve: dashboard: %s\n", o.ui_dir.empty() ? "none" : o.ui_dir.c_str());
    return kExitOk;
  }
  // The signals are waited for below; block them before any thread starts so none of the
  // server's threads takes them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A PostgreSQL standby waits inside Create: a pending SIGINT/SIGTERM ends the wait.
  o.keep_waiting = [] {
    sigset_t pending;
    sigpending(&pending);
    return !sigismember(&pending, SIGINT) && !sigismember(&pending, SIGTERM);
  };
  // A leader that lost its lease: the loop has stopped; wake the sigwait below and exit 1.
  std::mutex lost_mu;
  Status lost;
  o.on_ownership_lost = [&lost_mu, &lost](const Status& why) {
    {
      std::lock_guard<std::mutex> lock(lost_mu);
      lost = why;
    }
    kill(getpid(), SIGTERM);
  };
  StatusOr<std::unique_ptr<daemon::ControlPlane>> cp = daemon::ControlPlane::Create(o);
  if (!cp.ok() && cp.status().code() == StatusCode::kCancelled) {
    std::printf("tessera serve: %s\n", std::string(cp.status().message()).c_str());
    return kExitOk;
  }
  // Bad options and a store another serve owns are the caller's to fix: exit 2.
  if (!cp.ok())
    return Fail("serve", cp.status(),
                cp.status().code() == StatusCode::kInvalidArgument || cp.status().code() == StatusCode::kAlreadyExists
                    ? kExitBadInput
                    : kExitFailure);
  if (Status st = (*cp)->Start(); !st.ok())  // INVALID_ARGUMENT: a TLS file that cannot be used
    return Fail("serve", st, st.code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure);
  if (!(*cp)->generated_bootstrap_token().empty())
    std::printf("tessera serve: bootstrap admin token (shown once, store it now): %s\n",
                (*cp)->generated_bootstrap_token().c_str());
  std::printf("tessera serve: listening on %s://%s:%u (store %s)\n", o.tls_cert_file.empty() ? "http" : "https",
              o.listen_host.c_str(), (*cp)->port(), o.db.c_str());
  if (o.ui_dir.empty())
    std::printf("tessera serve: no dashboard (--ui-dir DIR names a built one)\n");
  else
    std::printf("tessera serve: dashboard at %s://%s:%u/ui/ (from %s)\n", o.tls_cert_file.empty() ? "http" : "https",
                o.listen_host.c_str(), (*cp)->port(), o.ui_dir.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&signals, &sig);
  std::printf("tessera serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  (*cp)->Stop();
  std::lock_guard<std::mutex> lock(lost_mu);
  return lost.ok() ? kExitOk : Fail("serve", lost, kExitFailure);
}

}  // namespace

void RegisterServe(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* serve = app.add_subcommand(
      "serve",
      "Run the control plane: the REST API (docs/api.md) over a store, and the scheduling loop.\n"
      "With an empty store the first admin token is $TESSERA_BOOTSTRAP_TOKEN when set (>= 16\n"
      "characters), else generated and printed once; later, --issue-admin-token makes a new one\n"
      "from the store when none works any more. Stops on SIGINT or SIGTERM.\n"
      "One serve per store: a SQLite store already owned by another serve is refused (exit 2,\n"
      "naming its pid and host; the lock is <db>.owner, freed when that process ends); on\n"
      "PostgreSQL a second serve waits as a standby and takes over when the leader is gone.");
  serve->add_option("--config", flags->config,
                    "YAML file with these options and the scheduler's (docs/api.md); flags given here win");
  serve->add_option("--db", flags->db,
                    "The store: sqlite:PATH (or a plain path; created if missing) or postgresql://... (libpq URI)")
      ->capture_default_str();
  serve->add_option("--listen", flags->listen, "HOST:PORT to serve HTTP (HTTPS with --tls-cert) on (port 0: any free port, printed)")
      ->capture_default_str();
  serve->add_option("--tls-cert", flags->tls_cert,
                    "PEM certificate (chain) to serve HTTPS with, TLS 1.2+; needs --tls-key (default: plain HTTP)");
  serve->add_option("--tls-key", flags->tls_key, "PEM private key of --tls-cert");
  serve->add_option("--node-timeout", flags->node_timeout_s,
                    "Seconds without a heartbeat after which a node is lost and its workloads are requeued")
      ->capture_default_str()->check(CLI::Range(1, 86400));
  serve->add_option("--threads", flags->threads, "HTTP server threads")->capture_default_str()->check(CLI::Range(1, 64));
  serve->add_option("--cycle-interval-ms", flags->cycle_interval_ms,
                    "Milliseconds between scheduling cycles when nothing wakes the loop earlier")
      ->capture_default_str()->check(CLI::Range(10, 600000));
  serve->add_option("--rate", flags->rate,
                    "Requests per second before 429 (sustained), per token; node-agent calls per node")
      ->capture_default_str()->check(CLI::PositiveNumber);
  serve->add_option("--burst", flags->burst,
                    "Requests allowed at once before 429, per token; node-agent calls per node")
      ->capture_default_str()->check(CLI::Range(1.0, 1e9));
  serve->add_option("--ui-dir", flags->ui_dir,
                    "The dashboard's built bundle, served at /ui/ (default: share/tessera/ui of the install, or "
                    "the build tree's ui/; 'none': no dashboard). A folder without index.html exits 2");
  serve->add_option("--price-plan", flags->price_plan,
                    "Price plan (YAML, as `tessera bill --plan`) for GET /v1/invoices; a bad plan fails the start "
                    "(exit 2, file:line), and so does one without prices for a GPU model of the cluster's nodes "
                    "or stored usage (naming the model and the plan file)");
  serve->add_flag("--metrics-auth", flags->metrics_auth,
                  "GET /metrics needs a token (any role; 401 without). Default: open to anyone who can reach "
                  "the port; the metrics name tenants and show their queues, allocations and usage");
  serve->add_flag("--check", flags->check,
                  "Check the configuration (--config and the flags: every problem at once, with file:line) "
                  "and exit: 0 valid, 2 not; opens no store, binds no port (packaging/systemd runs it first)");
  serve->add_option("--issue-admin-token", flags->issue_admin_token,
                    "Recovery when no admin token works: with the store (not while another serve owns it), add "
                    "an admin token that never expires, write it to FILE (created with mode 0600, never "
                    "overwritten; - for stdout), audit it as actor local-recovery, and exit without serving")
      ->type_name("FILE")
      ->excludes("--check");
  serve->callback([flags, exit_code, serve] { *exit_code = RunServe(*flags, *serve); });
}

}  // namespace tessera::cli
