// RemoteRun (`tessera run --server`) over a scripted link: what it does when its client stopped
// retrying because of an interrupt (CANCELLED), when it gives up following a submitted workload,
// and with a 429 that was not retried.
#include "tessera/node/remote_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <string>
#include <vector>

namespace tessera::node {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Answers each call with the next scripted result; records "METHOD path".
class ScriptedLink : public ControlPlaneLink {
 public:
  StatusOr<LinkResponse> Call(std::string_view method, std::string_view path, std::string_view) override {
    calls.push_back(std::string(method) + " " + std::string(path));
    if (script.empty()) return LinkResponse{200, R"({"id": 5, "state": "cancelled"})"};
    StatusOr<LinkResponse> next = script.front();
    script.pop_front();
    return next;
  }
  std::deque<StatusOr<LinkResponse>> script;
  std::vector<std::string> calls;
};

const LinkResponse kCreated{201, R"({"id": 5, "state": "pending"})"};
const LinkResponse kPending{200, R"({"id": 5, "state": "pending", "wait_reason": "capacity"})"};

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

}  // namespace
}  // namespace tessera::node
