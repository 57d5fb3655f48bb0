#include "tessera/node/remote_run.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "src/node/agent_impl.h"
#include "tessera/api/workload_wire.h"

namespace tessera::node {

using nlohmann::json;

namespace {

// Appends what `path` gained since `*offset` to on_output; false when there is no such file here.
bool Follow(const std::string& path, std::streamoff* offset, const RemoteRunOptions& o) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  if (!o.on_output) return true;
  in.seekg(*offset);
  std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (chunk.empty()) return true;
  *offset += static_cast<std::streamoff>(chunk.size());
  o.on_output(chunk);
  return true;
}

}  // namespace

StatusOr<RemoteRunResult> RemoteRun(ControlPlaneLink& link, const std::string& request_json,
                                    const RemoteRunOptions& o) {
  auto event = [&](const std::string& line) {
    if (o.on_event) o.on_event(line);
  };
  StatusOr<LinkResponse> submitted = link.Call("POST", "/v1/workloads", request_json);
  if (!submitted.ok() && submitted.status().code() == StatusCode::kCancelled && o.interrupted) {
    // Interrupted while the submit waited to be retried: the control plane has nothing to cancel.
    (void)o.interrupted();  // takes the signal
    event("interrupted before the workload was submitted");
    return RemoteRunResult{.id = 0, .state = "cancelled", .exit_code = 130};
  }
  TESSERA_ASSIGN_OR_RETURN(LinkResponse posted, std::move(submitted));
  if (posted.status == 401 || posted.status == 403) return internal::RefusedToken(posted, "submit");
  if (posted.status != 201 && posted.status != 200) {
    const std::string m = "the control plane refused the workload: " + internal::ResponseMessage(posted);
    return posted.status >= 500 || posted.status == 429 ? UnavailableError(m) : InvalidArgumentError(m);
  }
  StatusOr<api::WorkloadCreated> created = api::DecodeWorkloadCreated(posted.body, nullptr);
  if (!created.ok())
    return InternalError("the control plane's answer is not a submitted workload (" + created.status().message() +
                         "): " + posted.body.substr(0, 200));
  RemoteRunResult result;
  result.id = created->id;
  const std::string path = "/v1/workloads/" + std::to_string(result.id);
  event("workload " + std::to_string(result.id) + " submitted");
  std::string last_state, last_reason;
  std::streamoff offset = 0;
  const std::string log =
      o.local_run_dir.empty() ? "" : internal::LogFile(o.local_run_dir + "/agent", result.id);
  // The output is streamed only when the agent that runs the command writes its log where this
  // machine looks (it shares the node directory). Otherwise say once where the log is: on the
  // node that ran it, in that agent's run directory, which this side cannot know.
  std::string node;                    // where it runs (or ran), from its placement
  bool log_seen = false, told = false;
  int polls_without_log = 0;
  auto tell_where = [&] {
    if (told || log_seen || node.empty()) return;
    told = true;
    event("the output of workload " + std::to_string(result.id) + " is not streamed here (" +
          (log.empty() ? std::string("no local run directory") : "no " + log + " on this machine") +
          "): it is in " + internal::LogFile("<run-dir>/agent", result.id) + " on node " + node +
          ", <run-dir> being that agent's --run-dir (default $TESSERA_RUN_DIR, else $XDG_RUNTIME_DIR/tessera, "
          "else /tmp/tessera-<uid>)");
  };
  auto cancel = [&] {
    tell_where();
    (void)link.Call("DELETE", path, "");
    event("interrupted: workload " + std::to_string(result.id) + " cancelled");
    result.state = "cancelled";
    result.exit_code = 130;
    return result;
  };
  // Giving up on following leaves the workload to run: say which one and how to cancel it.
  const std::string left = "workload " + std::to_string(result.id) + " (still there; `tessera ctl workloads cancel " +
                           std::to_string(result.id) + "` cancels it)";
  for (;;) {
    if (o.interrupted && o.interrupted()) return cancel();
    StatusOr<LinkResponse> polled = link.Call("GET", path, "");
    if (!polled.ok() && polled.status().code() == StatusCode::kCancelled && o.interrupted) {
      (void)o.interrupted();  // interrupted while the GET waited to be retried; takes the signal
      return cancel();
    }
    if (!polled.ok()) return polled.status().WithPrefix(left);
    const LinkResponse& got = *polled;
    if (got.status != 200) return UnavailableError(left + ": GET " + path + ": " + internal::ResponseMessage(got));
    StatusOr<api::WorkloadView> view = api::DecodeWorkloadView(got.body, nullptr);
    if (!view.ok()) return InternalError("GET " + path + ": not a workload: " + view.status().message());
    using api::WorkloadState;
    const WorkloadState state = view->state;
    const std::string state_name(api::WorkloadStateName(state));
    const std::string reason = view->wait_reason.value_or("");
    if (!view->pods.empty()) node = view->pods[0].node;
    if (state_name != last_state || reason != last_reason) {
      if (state == WorkloadState::kRunning && !view->pods.empty()) {
        const api::WorkloadPod& p = view->pods[0];
        event("workload " + std::to_string(result.id) + " running on " + p.node + " GPU " + json(p.gpus).dump() +
              " (" + view->mode + ")");
      } else if (state == WorkloadState::kPending) {
        event("workload " + std::to_string(result.id) + " pending" + (reason.empty() ? "" : ": " + reason));
      }
      last_state = state_name;
      last_reason = reason;
    }
    if (!log.empty() && Follow(log, &offset, o)) log_seen = true;
    // The agent opens the log when it starts the command, a little after the placement.
    if (state == WorkloadState::kRunning && !log_seen && ++polls_without_log * int64_t{o.poll_ms} > o.output_grace_ms) tell_where();
    if (api::IsEnded(state)) {
      if (!log.empty() && Follow(log, &offset, o)) log_seen = true;
      tell_where();
      result.state = state_name;
      // The view's exit_code is there once the node reported the end.
      result.exit_code = static_cast<int>(view->exit_code.value_or(state == WorkloadState::kCompleted ? 0 : 1));
      const bool finished = state == WorkloadState::kCompleted || state == WorkloadState::kFailed;
      event("workload " + std::to_string(result.id) + " " + state_name +
            (finished ? " (exit code " + std::to_string(result.exit_code) + ")"
                                                       : reason.empty() ? "" : ": " + reason));
      return result;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms));
  }
}

}  // namespace tessera::node
