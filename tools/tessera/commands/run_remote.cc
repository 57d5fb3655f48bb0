// `tessera run --server URL ...`: flags and printing; the submit-and-follow is
// tessera::node::RemoteRun (include/tessera/node/remote_run.h).
#include "tools/tessera/commands/run_remote.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tessera/api/workload_wire.h"
#include "tessera/daemon/api_client.h"
#include "tessera/node/memory_size.h"
#include "tessera/node/node_dir.h"
#include "tessera/node/remote_run.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"
#include "tools/tessera/commands/http_link.h"

namespace tessera::cli {
namespace {

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "tessera run: %s\n", message.c_str());
  return code;
}

}  // namespace

int RunRemote(const RemoteRunFlags& f) {
  if (f.command.empty()) return Fail("no command given (after --)", kExitBadInput);
  StatusOr<std::string> token = ApiToken(f.token, f.token_file);
  if (!token.ok()) return Fail(std::string(token.status().message()), kExitBadInput);
  if (token->empty()) return Fail("--server needs --token, --token-file or $TESSERA_TOKEN", kExitBadInput);
  api::WorkloadRequest body{.tenant = f.tenant, .qos = f.qos, .mode = f.mode, .model = f.model, .command = f.command};
  // qos "" leaves it to the server: the tenant's default_qos.
  if (!f.mem.empty()) {
    StatusOr<uint64_t> mem = node::ParseMemorySize(f.mem);
    if (!mem.ok()) return Fail("--mem " + mem.status().message(), kExitBadInput);
    body.gpu_mem_mib = static_cast<int64_t>((*mem + (1 << 20) - 1) >> 20);
  }
  if (f.share > 0) body.gpu_milli = static_cast<int32_t>(f.share);
  body.priority = static_cast<int32_t>(f.priority);
  sigset_t signals;  // Ctrl-C cancels the workload, also while a request waits to be retried
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  daemon::ApiClientOptions client_options{.token = *token, .timeout_ms = 30000, .ca_file = f.ca_file};
  client_options.retry_budget_ms = int64_t{f.retry_budget_s} * 1000;
  client_options.sleep = [&signals](std::chrono::milliseconds wait) { return SleepUnlessSignalled(signals, wait); };
  StatusOr<std::unique_ptr<daemon::ApiClient>> client = daemon::ApiClient::Create(f.server, std::move(client_options));
  if (!client.ok()) {
    const std::string& m = client.status().message();
    return Fail((m.rfind("CA file", 0) == 0 ? "--ca-file: " : "--server: ") + m, kExitBadInput);
  }
  HttpLink link(std::move(*client));
  node::RemoteRunOptions options;
  options.local_run_dir = node::DefaultNodeDir();
  options.on_event = [](const std::string& line) { std::fprintf(stderr, "tessera run: %s\n", line.c_str()); };
  options.on_output = [](const std::string& chunk) {
    std::fwrite(chunk.data(), 1, chunk.size(), stdout);
    std::fflush(stdout);
  };
  options.interrupted = [&signals] {
    timespec zero{0, 0};
    return sigtimedwait(&signals, nullptr, &zero) > 0;
  };
  StatusOr<node::RemoteRunResult> r = node::RemoteRun(link, api::EncodeWorkloadRequest(body), options);
  if (!r.ok()) {
    return Fail(r.status().message(),
                r.status().code() == StatusCode::kInvalidArgument ? kExitBadInput : kExitFailure);
  }
  return r->exit_code;
}

}  // namespace tessera::cli
