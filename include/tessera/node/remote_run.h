// RemoteRun: `tessera run --server`: submit one workload with its command to the control plane,
// follow it until it ends, and give back the command's exit code. The control plane places it
// (node, GPU, mode, limits); the node agent there runs the command under the shim and reports
// the exit code. When that node's agent shares this machine's node directory, the command's
// output (<run_dir>/agent/w<id>.log) is streamed back as it is written. When it does not (the
// workload runs on another machine, or under an agent with another --run-dir), one on_event line
// says where the output is instead: "the output of workload 12 is not streamed here (no
// /run/user/1000/tessera/agent/w12.log on this machine): it is in <run-dir>/agent/w12.log on node
// n1, <run-dir> being that agent's --run-dir (...)": once the workload ran output_grace_ms
// without the log appearing here, or when it ends (or is interrupted) if that came first.
//
// Worked example: RemoteRun(link, R"({"tenant": "vision", "gpus": 1, "gpu_milli": 500,
// "gpu_mem_mib": 2048, "qos": "Burstable", "command": ["./train"]})", options) posts it (201
// {"id": 12, "state": "pending"}), reports "workload 12 submitted", "workload 12 running on n1
// GPU [0] (fraction(500,2048MiB))", streams ./train's output, and returns {id 12, "completed",
// exit_code 0} once GET /v1/workloads/12 says completed with "exit_code": 0.
// A workload the control plane refuses (4xx) is INVALID_ARGUMENT / FAILED_PRECONDITION with its
// message; one cancelled by someone else ends with exit code 1 and state "cancelled".
// The link's client retries 429/503 answers itself (daemon::ApiClient); a call it stopped
// retrying because of an interrupt (CANCELLED) cancels the workload like `interrupted` does, and
// any other error after the submit names the workload that is left running.
//
// Thread-safety: one call at a time per link.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tessera/core/status.h"
#include "tessera/node/agent.h"

namespace tessera::node {

struct RemoteRunOptions {
  std::string local_run_dir;  // where to look for the output ("" = do not stream)
  int poll_ms = 200;
  int output_grace_ms = 2000;  // running this long with no log here: say where the output is
  std::function<void(const std::string&)> on_event;   // one line per state change
  std::function<void(const std::string&)> on_output;  // chunks of the command's output
  // true: cancel the workload and return (called once more, to take the interrupt, after a call
  // that came back CANCELLED).
  std::function<bool()> interrupted;
};

struct RemoteRunResult {
  int64_t id = 0;      // 0 when interrupted before the submit was accepted
  std::string state;  // completed, failed, cancelled, rejected
  int exit_code = 0;  // the command's; 1 when it never ran (cancelled, rejected); 130 interrupted
};

StatusOr<RemoteRunResult> RemoteRun(ControlPlaneLink& link, const std::string& request_json,
                                    const RemoteRunOptions& options);

}  // namespace tessera::node
