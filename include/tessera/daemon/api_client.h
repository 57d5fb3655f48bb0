// A blocking client of the control plane's API (docs/api.md): what `tessera ctl` and the node
// agent use. One keep-alive connection, re-opened when the server closed it; HTTP/1.1 with
// Boost.Beast. No retries of its own: a POST that got no answer is retried by the caller with
// its Idempotency-Key (the answer is then the first one).
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

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

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

struct ApiClientOptions {
  std::string token;        // sent as "Authorization: Bearer ..." when not empty
  int timeout_ms = 30000;
  std::string ca_file;      // https: PEM certificates to trust; empty: the system's store
};

class ApiClient {
 public:
  static StatusOr<std::unique_ptr<ApiClient>> Create(std::string_view url, ApiClientOptions options);
  static StatusOr<std::unique_ptr<ApiClient>> Create(std::string_view url, std::string token,
                                                     int timeout_ms = 30000);
  ~ApiClient();
  StatusOr<ApiResponse> Call(std::string_view method, std::string_view target, std::string_view body = "",
                             const std::map<std::string, std::string>& headers = {});
  // A streamed GET (server-sent events, GET /v1/events): on_data gets each piece of the body as
  // it arrives, until the server ends the stream or on_data returns false. The returned response
  // has the status and headers (and, for a non-2xx answer, the whole body, which on_data does
  // not see). UNAVAILABLE when the server cannot be reached or went silent for the timeout
  // (the server pings every 15 s).
  StatusOr<ApiResponse> Stream(std::string_view target, const std::map<std::string, std::string>& headers,
                               const std::function<bool(std::string_view)>& on_data);
  const std::string& host() const { return host_; }
  const std::string& port() const { return port_; }

  struct Conn;

 private:
  ApiClient() = default;
  std::string host_, port_, token_;
  int timeout_ms_ = 30000;
  std::unique_ptr<Conn> conn_;  // holds the TLS settings too (https)
};

}  // namespace tessera::daemon
