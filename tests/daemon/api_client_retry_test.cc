// ApiClient's retries of 429 and 503 answers against a local HttpServer whose handlers answer
// from a script: Retry-After (seconds and HTTP-dates), backoff without it, the retry budget, which
// requests are repeated at all. The client's clock and sleep are a FakeClock the sleep advances,
// so no test waits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "src/daemon/http_server.h"
#include "tessera/core/clock.h"
#include "tessera/daemon/api_client.h"

namespace tessera::daemon {
namespace {

using std::chrono::milliseconds;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One scripted answer: status and headers (a 2xx gets {"ok": true}).
struct Answer {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
};

class ApiClientRetryTest : public ::testing::Test {
 protected:
  // Every route answers the next scripted answer, then 200 once the script is used up.
  void Serve(std::vector<Answer> script) {
    server_.reset();
    script_ = std::move(script);
    requests_ = 0;
    server_ = std::make_unique<HttpServer>(HttpServerOptions{.listen_host = "127.0.0.1", .listen_port = 0});
    for (const char* method : {"GET", "POST", "PATCH", "DELETE"}) {
      ASSERT_TRUE(server_
                      ->Route(method, "/v1/things",
                              [this](const HttpRequest& r) {
                                std::lock_guard<std::mutex> lock(mu_);
                                keys_.push_back(r.Header("idempotency-key"));
                                const size_t n = requests_++;
                                if (n >= script_.size()) return HttpResponse::Json(200, R"({"ok": true})");
                                const Answer& a = script_[n];
                                HttpResponse resp =
                                    a.status < 300 ? HttpResponse::Json(a.status, R"({"ok": true})")
                                                   : HttpResponse::Error(a.status, "scripted",
                                                                         "scripted " + std::to_string(a.status));
                                resp.headers = a.headers;
                                return resp;
                              })
                      .ok());
    }
    ASSERT_TRUE(server_->Start().ok());
  }

  std::unique_ptr<ApiClient> Client(int64_t budget_ms = 60000) {
    ApiClientOptions o;
    o.token = "tok";
    o.timeout_ms = 10000;
    o.retry_budget_ms = budget_ms;
    o.clock = &clock_;
    o.sleep = [this](milliseconds d) {
      waits_.push_back(d);
      clock_.Advance(d);
      return true;
    };
    o.jitter_seed = 42;
    StatusOr<std::unique_ptr<ApiClient>> c =
        ApiClient::Create("http://127.0.0.1:" + std::to_string(server_->port()), std::move(o));
    EXPECT_TRUE(c.ok()) << c.status().message();
    return std::move(*c);
  }

  size_t requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

  FakeClock clock_;
  std::vector<milliseconds> waits_;
  std::mutex mu_;
  std::vector<Answer> script_;
  size_t requests_ = 0;
  std::vector<std::string> keys_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(ApiClientRetryTest, A429WithRetryAfterTwiceThenSuccessIsOneSuccessfulCall) {
  Serve({{429, {{"Retry-After", "2"}}}, {429, {{"Retry-After", "1"}}}});
  StatusOr<ApiResponse> r = Client()->Call("POST", "/v1/things", R"({"a": 1})");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(requests(), 3u);
  ASSERT_EQ(waits_.size(), 2u);
  // Retry-After, plus up to half again so that clients told the same second spread out.
  EXPECT_GE(waits_[0], milliseconds(2000));
  EXPECT_LE(waits_[0], milliseconds(3000));
  EXPECT_GE(waits_[1], milliseconds(1000));
  EXPECT_LE(waits_[1], milliseconds(1500));
}

TEST_F(ApiClientRetryTest, ARetryAfterDateIsCountedFromTheAnswersDate) {
  Serve({{429, {{"Retry-After", "Sun, 06 Nov 1994 08:49:40 GMT"}, {"Date", "Sun, 06 Nov 1994 08:49:37 GMT"}}}});
  StatusOr<ApiResponse> r = Client()->Call("GET", "/v1/things");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  ASSERT_EQ(waits_.size(), 1u);
  EXPECT_GE(waits_[0], milliseconds(3000));
  EXPECT_LE(waits_[0], milliseconds(4500));
}

TEST_F(ApiClientRetryTest, WithoutRetryAfterTheWaitsBackOffExponentiallyWithJitter) {
  Serve({{503, {}}, {503, {}}, {503, {}}, {429, {}}});
  StatusOr<ApiResponse> r = Client()->Call("GET", "/v1/things");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  ASSERT_EQ(waits_.size(), 4u);
  for (size_t i = 0; i < waits_.size(); ++i) {
    const int64_t base = int64_t{250} << i;  // 250, 500, 1000, 2000 ms, each 50..100 %
    EXPECT_GE(waits_[i].count(), base / 2) << i;
    EXPECT_LE(waits_[i].count(), base) << i;
  }
}

TEST_F(ApiClientRetryTest, TheSameSeedGivesTheSameWaits) {
  Serve({{503, {}}, {503, {}}, {503, {}}});
  ASSERT_TRUE(Client()->Call("GET", "/v1/things").ok());
  const std::vector<milliseconds> first = std::exchange(waits_, {});
  Serve({{503, {}}, {503, {}}, {503, {}}});
  ASSERT_TRUE(Client()->Call("GET", "/v1/things").ok());
  EXPECT_EQ(waits_, first);
}

TEST_F(ApiClientRetryTest, ASpentBudgetIsAnErrorSayingHowLongItRetriedAndTheLastAnswer) {
  Serve(std::vector<Answer>(100, Answer{429, {{"Retry-After", "4"}}}));
  StatusOr<ApiResponse> r = Client(/*budget_ms=*/10000)->Call("POST", "/v1/things", "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  // Waits of 4..6 s: one or two fit in 10 s, never three.
  ASSERT_GE(waits_.size(), 1u);
  ASSERT_LE(waits_.size(), 2u);
  milliseconds waited(0);
  for (milliseconds w : waits_) waited += w;
  EXPECT_LE(waited, milliseconds(10000));
  EXPECT_EQ(requests(), waits_.size() + 1);
  const std::string m(r.status().message());
  EXPECT_THAT(m, AllOf(HasSubstr("POST /v1/things: the control plane at 127.0.0.1:"),
                       HasSubstr("still answered HTTP 429 (scripted 429)"),
                       HasSubstr("after " + std::to_string(requests()) + " tries in "),
                       HasSubstr("(retry budget 10 s; the next wait")))
      << m;
}

TEST_F(ApiClientRetryTest, ARetryAfterLongerThanTheBudgetIsNotWaitedFor) {
  Serve({{429, {{"Retry-After", "120"}}}});
  StatusOr<ApiResponse> r = Client()->Call("GET", "/v1/things");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), AllOf(HasSubstr("after 1 try in 0 ms"), HasSubstr("retry budget 60 s")));
  EXPECT_TRUE(waits_.empty());
}

TEST_F(ApiClientRetryTest, ABudgetOfZeroReturnsTheFirstAnswer) {
  Serve({{429, {{"Retry-After", "1"}}}});
  StatusOr<ApiResponse> r = Client(/*budget_ms=*/0)->Call("GET", "/v1/things");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 429);
  EXPECT_EQ(r->headers.at("retry-after"), "1");
  EXPECT_EQ(requests(), 1u);
}

TEST_F(ApiClientRetryTest, OtherErrorAnswersAreNotRetried) {
  for (int status : {400, 401, 403, 404, 409, 413, 500, 502}) {
    waits_.clear();
    Serve({{status, {{"Retry-After", "1"}}}});
    StatusOr<ApiResponse> r = Client()->Call("GET", "/v1/things");
    ASSERT_TRUE(r.ok()) << status;
    EXPECT_EQ(r->status, status);
    EXPECT_EQ(requests(), 1u) << status;
    EXPECT_TRUE(waits_.empty()) << status;
  }
}

TEST_F(ApiClientRetryTest, A503ToAPostIsRetriedOnlyWithAnIdempotencyKey) {
  // Without a key the server may have acted before its store failed: the 503 is the answer.
  Serve({{503, {}}});
  StatusOr<ApiResponse> r = Client()->Call("POST", "/v1/things", "{}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(requests(), 1u);
  Serve({{503, {}}});
  r = Client()->Call("PATCH", "/v1/things", "{}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 503);
  // With one, a repeat gets the first answer: every try carries the same key.
  Serve({{503, {}}, {503, {}}});
  r = Client()->Call("POST", "/v1/things", "{}", {{"Idempotency-Key", "job-42"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(requests(), 3u);
  EXPECT_THAT(keys_, ElementsAre("", "", "job-42", "job-42", "job-42"));
  // A DELETE is safe to repeat.
  Serve({{503, {}}});
  r = Client()->Call("DELETE", "/v1/things");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 200);
}

TEST_F(ApiClientRetryTest, ASleepThatSaysStopEndsTheRetriesAsCancelled) {
  Serve({{429, {{"Retry-After", "1"}}}});
  ApiClientOptions o;
  o.retry_budget_ms = 60000;
  o.clock = &clock_;
  o.sleep = [](milliseconds) { return false; };  // e.g. Ctrl-C during the wait
  StatusOr<std::unique_ptr<ApiClient>> c = ApiClient::Create("http://127.0.0.1:" + std::to_string(server_->port()), o);
  ASSERT_TRUE(c.ok());
  StatusOr<ApiResponse> r = (*c)->Call("GET", "/v1/things");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("to retry HTTP 429"));
  EXPECT_EQ(requests(), 1u);
}

TEST(RetryDelay, ReadsSecondsAndAllThreeHttpDateForms) {
  const auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37 GMT
  auto after = [&](const std::string& v) {
    return RetryDelay(ApiResponse{.status = 429, .body = "", .headers = {{"retry-after", v}}}, 0, 0.0, now);
  };
  EXPECT_EQ(after("2"), milliseconds(2000));
  EXPECT_EQ(after(" 3 "), milliseconds(3000));
  EXPECT_EQ(after("Sun, 06 Nov 1994 08:49:47 GMT"), milliseconds(10000));
  EXPECT_EQ(after("Sunday, 06-Nov-94 08:49:47 GMT"), milliseconds(10000));
  EXPECT_EQ(after("Sun Nov  6 08:49:47 1994"), milliseconds(10000));
  // A date already past, or an unreadable value: the backoff (250 ms at try 0, jitter 0: 125 ms).
  EXPECT_EQ(after("Sun, 06 Nov 1994 08:49:30 GMT"), milliseconds(125));
  EXPECT_EQ(after("soon"), milliseconds(125));
  EXPECT_EQ(after("-1"), milliseconds(125));
  // The documented examples.
  EXPECT_EQ(RetryDelay({.status = 429, .body = "", .headers = {{"retry-after", "2"}}}, 0, 0.5, now), milliseconds(2500));
  EXPECT_EQ(RetryDelay({.status = 503, .body = "", .headers = {}}, 3, 0.0, now), milliseconds(1000));
  EXPECT_EQ(RetryDelay({.status = 503, .body = "", .headers = {}}, 30, 0.999, now), milliseconds(7996));
}

}  // namespace
}  // namespace tessera::daemon
