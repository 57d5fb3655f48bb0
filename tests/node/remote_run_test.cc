// RemoteRun (`tessera run --server`) over a scripted link: what it does when its client stopped
// retrying because of an interrupt (CANCELLED), when it gives up following a submitted workload,
// and with a 429 that was not retried.
#include "tessera/node/remote_run.h"

#include "tessera/api/workload_wire.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <vector>

namespace tessera::node {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Workload 5's view in `state` as the control plane writes it (api::EncodeWorkloadView), after `edit`.
LinkResponse View(api::WorkloadState state, const std::function<void(api::WorkloadView&)>& edit = {}) {
  api::WorkloadView v{.id = 5, .tenant = "ml", .state = state, .qos = "Burstable", .request = {.tenant = "ml"}};
  if (edit) edit(v);
  return {200, api::EncodeWorkloadView(v)};
}

// Answers each call with the next scripted result; records "METHOD path".
class ScriptedLink : public ControlPlaneLink {
 public:
  StatusOr<LinkResponse> Call(std::string_view method, std::string_view path, std::string_view) override {
    calls.push_back(std::string(method) + " " + std::string(path));
    if (script.empty()) return View(api::WorkloadState::kCancelled);
    StatusOr<LinkResponse> next = script.front();
    script.pop_front();
    return next;
  }
  std::deque<StatusOr<LinkResponse>> script;
  std::vector<std::string> calls;
};

const LinkResponse kCreated{201, R"({"id": 5, "state": "pending"})"};
const LinkResponse kPending = View(api::WorkloadState::kPending, [](api::WorkloadView& v) { v.wait_reason = "capacity"; });

// The interrupt the client saw first (a pending signal it left for RemoteRun to take).
RemoteRunOptions Interruptible(int* asked) {
  RemoteRunOptions o;
  o.poll_ms = 1;
  o.interrupted = [asked] {
    ++*asked;
    return false;  // the poll between calls sees nothing: the interrupt came during a call
  };
  return o;
}

TEST(RemoteRun, AnInterruptDuringAPollsRetryWaitCancelsTheWorkload) {
  ScriptedLink link;
  link.script = {kCreated, kPending, Status(StatusCode::kCancelled, "GET /v1/workloads/5: stopped while waiting")};
  int asked = 0;
  StatusOr<RemoteRunResult> r = RemoteRun(link, "{}", Interruptible(&asked));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->id, 5);
  EXPECT_EQ(r->state, "cancelled");
  EXPECT_EQ(r->exit_code, 130);
  EXPECT_THAT(link.calls, ElementsAre("POST /v1/workloads", "GET /v1/workloads/5", "GET /v1/workloads/5",
                                      "DELETE /v1/workloads/5"));
  EXPECT_EQ(asked, 3);  // before each poll, and once more to take the interrupt before the DELETE
}

TEST(RemoteRun, AnInterruptDuringTheSubmitsRetryWaitSubmitsNothing) {
  ScriptedLink link;
  link.script = {Status(StatusCode::kCancelled, "POST /v1/workloads: stopped while waiting")};
  int asked = 0;
  StatusOr<RemoteRunResult> r = RemoteRun(link, "{}", Interruptible(&asked));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->id, 0);
  EXPECT_EQ(r->state, "cancelled");
  EXPECT_EQ(r->exit_code, 130);
  EXPECT_THAT(link.calls, ElementsAre("POST /v1/workloads"));
}

TEST(RemoteRun, GivingUpOnASubmittedWorkloadNamesItAndHowToCancelIt) {
  ScriptedLink link;
  link.script = {kCreated, UnavailableError("GET /v1/workloads/5: the control plane ... still answered HTTP 429")};
  StatusOr<RemoteRunResult> r = RemoteRun(link, "{}", RemoteRunOptions{.poll_ms = 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("workload 5 (still there; `tessera ctl workloads cancel 5` cancels it): GET /v1/workloads/5: "
                        "the control plane ... still answered HTTP 429"));
}

TEST(RemoteRun, A429ToTheSubmitIsUnavailableNotABadRequest) {
  ScriptedLink link;  // retries off: the 429 comes back as the answer
  link.script = {LinkResponse{429, R"({"error": {"message": "over this token's rate limit; retry after 1 s"}})"}};
  StatusOr<RemoteRunResult> r = RemoteRun(link, "{}", RemoteRunOptions{.poll_ms = 1});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);  // exit 1, not 2 (bad flags)
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("retry after 1 s"));
}

const LinkResponse kRunning = View(api::WorkloadState::kRunning, [](api::WorkloadView& v) {
  v.mode = "exclusive";
  v.pods = {{"gpu-7", {0}, -1}};
});
const LinkResponse kCompleted = View(api::WorkloadState::kCompleted, [](api::WorkloadView& v) {
  v.pods = {{"gpu-7", {0}, -1}};
  v.exit_code = 0;
  v.events = std::vector<api::WorkloadHistoryEntry>{{0, "finished", "exit code 0"}};
});

// A run directory of its own, removed afterwards.
struct RunDir {
  RunDir() {
    path = (std::filesystem::temp_directory_path() /
            ("tessera-remote-run-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name())))
               .string();
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path + "/agent");
  }
  ~RunDir() { std::filesystem::remove_all(path); }
  std::string path;
};

// Issue 31: when the command ran on another machine, `tessera run --server` printed no output and
// no word of where it was. Now one line names the node and the log's path there, once the
// workload has run output_grace_ms without the log appearing here.
TEST(RemoteRun, OutputThatIsNotHereIsNamedWithItsNodeAndPath) {
  RunDir dir;
  ScriptedLink link;
  link.script = {kCreated, kRunning, kRunning, kRunning, kCompleted};
  std::vector<std::string> events;
  RemoteRunOptions o{.local_run_dir = dir.path, .poll_ms = 1, .output_grace_ms = 1};
  o.on_event = [&](const std::string& line) { events.push_back(line); };
  o.on_output = [](const std::string& chunk) { ADD_FAILURE() << "no output expected: " << chunk; };
  StatusOr<RemoteRunResult> r = RemoteRun(link, "{}", o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 0);
  const std::string where = "the output of workload 5 is not streamed here (no " + dir.path +
                            "/agent/w5.log on this machine): it is in <run-dir>/agent/w5.log on node gpu-7, "
                            "<run-dir> being that agent's --run-dir (default $TESSERA_RUN_DIR, else "
                            "$XDG_RUNTIME_DIR/tessera, else /tmp/tessera-<uid>)";
  EXPECT_THAT(events, ElementsAre("workload 5 submitted", "workload 5 running on gpu-7 GPU [0] (exclusive)", where,
                                  "workload 5 completed (exit code 0)"));
}

// A command that ends before the grace is over: the line comes with the end. Nothing is said when
// the workload never ran (cancelled while pending).
TEST(RemoteRun, AWorkloadThatEndsWithinTheGraceStillSaysWhereItsOutputIs) {
  RunDir dir;
  ScriptedLink link;
  link.script = {kCreated, kCompleted};
  std::vector<std::string> events;
  RemoteRunOptions o{.local_run_dir = dir.path, .poll_ms = 1, .output_grace_ms = 60000};
  o.on_event = [&](const std::string& line) { events.push_back(line); };
  ASSERT_TRUE(RemoteRun(link, "{}", o).ok());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_THAT(events[1], HasSubstr("it is in <run-dir>/agent/w5.log on node gpu-7"));
  events.clear();
  link.script = {kCreated, kPending, View(api::WorkloadState::kCancelled)};
  ASSERT_TRUE(RemoteRun(link, "{}", o).ok());
  for (const std::string& e : events) EXPECT_THAT(e, ::testing::Not(HasSubstr("output")));
}

// The agent shares this node directory: its log is streamed and nothing more is said.
TEST(RemoteRun, OutputThatIsHereIsStreamedWithoutANote) {
  RunDir dir;
  std::ofstream(dir.path + "/agent/w5.log") << "epoch 1\n";
  ScriptedLink link;
  link.script = {kCreated, kRunning, kRunning, kCompleted};
  std::vector<std::string> events;
  std::string output;
  RemoteRunOptions o{.local_run_dir = dir.path, .poll_ms = 1, .output_grace_ms = 0};
  o.on_event = [&](const std::string& line) { events.push_back(line); };
  o.on_output = [&](const std::string& chunk) { output += chunk; };
  ASSERT_TRUE(RemoteRun(link, "{}", o).ok());
  EXPECT_EQ(output, "epoch 1\n");
  EXPECT_THAT(events, ElementsAre("workload 5 submitted", "workload 5 running on gpu-7 GPU [0] (exclusive)",
                                  "workload 5 completed (exit code 0)"));
}

// The exit code is the view's "exit_code" field, not a number read out of an event's text (the
// text here says 9 on purpose: the code before this field returned 9).
TEST(RemoteRun, TheExitCodeIsTheViewsField) {
  ScriptedLink link;
  link.script = {kCreated, View(api::WorkloadState::kFailed, [](api::WorkloadView& v) {
                   v.exit_code = 3;
                   v.events = std::vector<api::WorkloadHistoryEntry>{{0, "finished", "exit code 9"}};
                 })};
  StatusOr<RemoteRunResult> r = RemoteRun(link, "{}", RemoteRunOptions{.poll_ms = 1});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->state, "failed");
  EXPECT_EQ(r->exit_code, 3);
  // Without the field (a control plane that never heard the end): 1 for failed.
  link.script = {kCreated, View(api::WorkloadState::kFailed)};
  r = RemoteRun(link, "{}", RemoteRunOptions{.poll_ms = 1});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 1);
}

}  // namespace
}  // namespace tessera::node
