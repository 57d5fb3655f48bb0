// A blocking client of the control plane's API (docs/api.md): what `tessera ctl` and the node
// agent use. One keep-alive connection, re-opened when the server closed it; HTTP/1.1 with
// Boost.Beast. A POST that got no answer is retried by the caller with its Idempotency-Key (the
// answer is then the first one).
//
// Retries (ApiClientOptions::retry_budget_ms, 60 s by default, 0: none): a 429 (the server did
// not act: over the token's rate limit) is tried again, whatever the method; a 503 (the server
// could not act: its store failed, it is not ready) only when the request is safe to repeat: GET,
// HEAD, PUT, DELETE, OPTIONS, or a POST/PATCH that carries an Idempotency-Key (a repeat then
// gets the first answer). The wait is the answer's Retry-After (seconds, or an HTTP-date read
// against the answer's Date) plus up to half as much again, else an exponential backoff with
// jitter (250 ms, 500 ms, 1 s, ... at most 8 s, each 50..100 %); the same headers (and so the
// same Idempotency-Key) go with every try. A wait that would end past the budget is not begun:
// Call returns UNAVAILABLE "POST /v1/workloads: the control plane at H:P still answered HTTP 429
// (over this token's rate limit; retry after 1 s) after 41 tries in 58.2 s (retry budget 60 s;
// the next wait, 1.9 s, would pass it)". Other answers are never retried.
//
//   auto c = ApiClient::Create("http://127.0.0.1:8080", token);
//   StatusOr<ApiResponse> r = c->Call("POST", "/v1/workloads", R"({"tenant":"a","gpus":1,"qos":"Burstable"})",
//                                     {{"Idempotency-Key", "job-42"}});
//   r->status == 201, r->body == {"id": 7, "state": "pending"}
//   ApiError(*r) -> "tenant: unknown tenant 'a'" for {"error": {"message": ...}} answers
//
// HTTPS: "https://HOST[:PORT]" (port 443 by default). The server's certificate is verified
// against `ca_file` (PEM) when given, else the system's trust store, and must name HOST (a DNS
// name, sent as SNI, or an IP address):
//
//   auto c = ApiClient::Create("https://cp.internal:8443", {.token = token, .ca_file = "/etc/tessera/ca.pem"});
//
// Errors: INVALID_ARGUMENT for a URL that is not http(s)://HOST[:PORT] or a CA file that cannot
// be read; UNAVAILABLE (naming the server) when it cannot be reached, the TLS handshake failed
// ("certificate verify failed (self-signed certificate)"), or the connection broke before the
// whole answer came.
// An HTTP error status is NOT an error of Call: the caller reads status and body.
// Thread-safety: one ApiClient per thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/clock.h"
#include "tessera/core/status.h"

namespace tessera {
class Rng;
}

namespace tessera::daemon {

struct ApiResponse {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case
};

// The message of an {"error": {"message"}} body, else the body itself (or "HTTP <status>").
std::string ApiError(const ApiResponse& response);

// Splits a server-sent-event stream into its events' data, whatever the pieces it arrives in:
// "id: 4\ndata: {...}\n\n" gives {"{...}"}; comments (": ping") and records without data give
// nothing; several data lines of one event are joined with "\n". Lines end in \n, \r\n or \r.
//
//   EventStreamParser p;
//   p.Feed("id: 1\nda");          // {}
//   p.Feed("ta: {\"a\":1}\n\n");   // {"{\"a\":1}"}; p.last_event_id() == "1"
class EventStreamParser {
 public:
  std::vector<std::string> Feed(std::string_view chunk);
  const std::string& last_event_id() const { return last_id_; }

 private:
  void Line(std::string_view line, std::vector<std::string>& out);
  std::string pending_;  // an unfinished line
  bool saw_cr_ = false;  // the last piece ended in \r (a \n next belongs to it)
  std::string data_;
  bool has_data_ = false;
  std::string id_, last_id_;
};

// The wait before the next try after a 429/503 answer (see the retries above): Retry-After plus
// up to half again (jitter_0_1 in [0, 1)); without a usable Retry-After, min(8 s, 250 ms * 2^try)
// * (0.5 + jitter_0_1 / 2). `try_index` counts from 0 (the first retry). Retry-After is seconds
// ("2") or an HTTP-date ("Sun, 06 Nov 1994 08:49:37 GMT"), whose delay is counted from the
// answer's Date header, else from `now`; a date in the past is a wait of 0.
//
//   RetryDelay({.status = 429, .headers = {{"retry-after", "2"}}}, 0, 0.5, now) == 2500 ms
//   RetryDelay({.status = 503}, 3, 0.0, now) == 1000 ms
std::chrono::milliseconds RetryDelay(const ApiResponse& response, int try_index, double jitter_0_1,
                                     std::chrono::system_clock::time_point now);

struct ApiClientOptions {
  std::string token;        // sent as "Authorization: Bearer ..." when not empty
  int timeout_ms = 30000;
  std::string ca_file;      // https: PEM certificates to trust; empty: the system's store
  // How long, in all, one Call or Stream keeps retrying 429/503 answers (above); 0: never.
  int64_t retry_budget_ms = 60000;
  // Tests: the clock the budget is measured on (null: a steady clock), the wait between tries
  // (null: sleep; returning false stops retrying, e.g. on Ctrl-C, and Call returns CANCELLED), and
  // the seed of the jitter (0: a random one).
  const Clock* clock = nullptr;
  std::function<bool(std::chrono::milliseconds)> sleep;
  uint64_t jitter_seed = 0;
};

class ApiClient {
 public:
  static StatusOr<std::unique_ptr<ApiClient>> Create(std::string_view url, ApiClientOptions options);
  static StatusOr<std::unique_ptr<ApiClient>> Create(std::string_view url, std::string token,
                                                     int timeout_ms = 30000);
  ~ApiClient();
  // One request, retried on 429/503 as above. CANCELLED when options.sleep stopped the retries.
  StatusOr<ApiResponse> Call(std::string_view method, std::string_view target, std::string_view body = "",
                             const std::map<std::string, std::string>& headers = {});
  // A streamed GET (server-sent events, GET /v1/events): on_data gets each piece of the body as
  // it arrives, until the server ends the stream or on_data returns false. The returned response
  // has the status and headers (and, for a non-2xx answer, the whole body, which on_data does
  // not see). A 429/503 answer is retried as Call's are (before any data). UNAVAILABLE when the server cannot be reached or went silent for the timeout
  // (the server pings every 15 s).
  StatusOr<ApiResponse> Stream(std::string_view target, const std::map<std::string, std::string>& headers,
                               const std::function<bool(std::string_view)>& on_data);
  const std::string& host() const { return host_; }
  const std::string& port() const { return port_; }

  struct Conn;

 private:
  ApiClient() = default;
  // Sends `attempt` until its answer is not one to retry, or the budget is spent.
  StatusOr<ApiResponse> WithRetries(std::string_view method, std::string_view target, bool repeatable,
                                    const std::function<StatusOr<ApiResponse>()>& attempt);
  std::string host_, port_, token_;
  int timeout_ms_ = 30000;
  int64_t retry_budget_ms_ = 60000;
  const Clock* clock_ = nullptr;
  std::function<bool(std::chrono::milliseconds)> sleep_;
  std::unique_ptr<Rng> jitter_;
  std::unique_ptr<Conn> conn_;  // holds the TLS settings too (https)
};

}  // namespace tessera::daemon
