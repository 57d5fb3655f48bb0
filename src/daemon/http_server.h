// The control plane's HTTP/1.1 server: Boost.Beast, asynchronous, a fixed number of threads
// (docs/decisions/0003-http-library.md), and a router from (method, path pattern) to handlers.
// `tessera serve` builds its API on it; nothing here knows about tenants or the store.
//
// What the server guarantees every client, whatever the handler does:
//   - a body over `max_body_bytes` (default 1 MiB) is refused with 413 before it is read whole;
//   - a malformed request gets 400 and the connection is closed;
//   - an unknown path 404, a known path with another method 405 with an `Allow` header;
//   - every error body is JSON: {"error": {"code": "not_found", "message": "..."}};
//   - a handler that throws gets its request a 500 ("internal", the detail on stderr); the
//     process and every other connection go on;
//   - idle keep-alive connections cost no thread (they are closed after `idle_timeout`).
//
// TLS (`tls_cert_file` and `tls_key_file` set): every connection does a TLS handshake (TLS 1.2
// or later, no compression, no renegotiation) before the same HTTP handling; a client that
// fails it, stalls in it or speaks plain HTTP is closed (after `tls_handshake_timeout_s` at
// most) without taking a thread. Connections end with close_notify, so a streamed response's
// reader sees a clean end, but a peer that never answers it is not waited for.
//
// Routes: literal segments and `{name}` parameters, e.g. "/v1/workloads/{id}". A request for
// "/v1/workloads/42?tenant=a" matches it with path_params {"id": "42"} and query {"tenant": "a"}
// (percent-decoded). A last segment "{name...}" takes the rest of the path, one segment or more:
// "/ui/{file...}" matches "/ui/assets/app.js" with {"file": "assets/app.js"} (each segment
// percent-decoded on its own; "/ui/" gives ""), never "/ui". The first route added that matches
// wins.
//
//   HttpServer server({.listen_host = "127.0.0.1", .listen_port = 0, .threads = 2});
//   server.Route("GET", "/v1/workloads/{id}", [](const HttpRequest& r) {
//     return HttpResponse::Json(200, "{\"id\": " + r.path_params.at("id") + "}");
//   });
//   TESSERA_RETURN_IF_ERROR(server.Start());   // binds; server.port() is the bound port
//   ...
//   server.Stop();                            // closes the listener and every connection
//
// Streamed responses (server-sent events): a handler that sets `HttpResponse::open_stream` gets
// the head written (its status, content type and headers, no Content-Length, `Connection:
// close`), and then open_stream(stream) once, on a server thread. Whoever holds the stream may
// Send() bytes from any thread until it reports the client gone; the connection closes then or
// on Close(). A client that reads slower than `max_stream_backlog_bytes` accumulate is cut off,
// and so is one whose write has not completed in `stream_write_timeout_s`.
//
//   server.Route("GET", "/v1/events", [&](const HttpRequest&) {
//     HttpResponse r;  r.content_type = "text/event-stream";
//     r.open_stream = [&](std::shared_ptr<HttpStream> s) { feed.Add(std::move(s)); };
//     return r;
//   });
//
// Deferred responses (an answer made later, e.g. once a group commit is durable): a handler that
// sets `HttpResponse::defer` returns at once; the server calls defer(answer) on the same thread,
// and the connection then waits holding no thread. Whoever holds `answer` calls Finish(make)
// once, from any thread: make runs on a server thread (a throw is a 500, as for handlers) and its
// response is written; the connection goes on with its next request. An answer dropped without
// Finish is a 500. Copy what the later answer needs from the request inside the handler.
//
//   server.Route("POST", "/v1/workloads", [&](const HttpRequest& r) {
//     HttpResponse later;
//     later.defer = [&, body = r.body](std::shared_ptr<HttpAnswer> answer) {
//       writer.Queue(body, [answer](Status st) {  // on the writer's thread, once durable
//         answer->Finish([st] { return HttpResponse::Json(st.ok() ? 201 : 503, "{}"); });
//       });
//     };
//     return later;
//   });
//
// Thread-safety: Route before Start; handlers run on the server's threads, concurrently (a
// handler must be safe to call from several threads at once). Start/Stop from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::daemon {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;      // without the query, percent-decoded
  std::string raw_path;  // as sent (what routes match, segment by segment, before decoding)
  std::map<std::string, std::string> path_params;
  std::map<std::string, std::string> query;
  // Header names in lower case.
  std::map<std::string, std::string> headers;
  std::string body;
  std::string peer;  // "127.0.0.1:53412"
  // The header's value, or "" (name in any case).
  std::string Header(std::string_view name) const;
};

// The open end of a streamed response. Thread-safe.
class HttpStream {
 public:
  virtual ~HttpStream() = default;
  // Queues bytes for the client; false once the client is gone (closed, cut off, server stopped):
  // the bytes are dropped then, and every later Send is false too.
  virtual bool Send(std::string bytes) = 0;
  virtual bool open() const = 0;
  // Ends the response (what was queued is written first) and closes the connection.
  virtual void Close() = 0;
};

struct HttpResponse;

// The later end of a deferred response (see the header comment). Thread-safe.
class HttpAnswer {
 public:
  virtual ~HttpAnswer() = default;
  // Has make run on a server thread and its response written; the first call counts. After the
  // server stopped, or once the client is gone, make is dropped unrun.
  virtual void Finish(std::function<HttpResponse()> make) = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Set: a streamed response (see the header comment); `body`, when not empty, is written first.
  std::function<void(std::shared_ptr<HttpStream>)> open_stream;
  // Set: a deferred response (see the header comment); the other fields are not used.
  std::function<void(std::shared_ptr<HttpAnswer>)> defer;

  static HttpResponse Json(int status, std::string body);
  // {"error": {"code": code, "message": message[, "field": field]}}
  static HttpResponse Error(int status, std::string_view code, std::string_view message,
                            std::string_view field = "");
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string listen_host = "127.0.0.1";
  uint16_t listen_port = 8080;  // 0: any free port (see port())
  int threads = 2;
  size_t max_body_bytes = size_t{1} << 20;
  size_t max_header_bytes = 16 * 1024;
  int idle_timeout_s = 60;  // a keep-alive connection silent this long is closed
  size_t max_stream_backlog_bytes = size_t{1} << 20;  // per streamed response, not yet written
  int stream_write_timeout_s = 30;
  // Both set: HTTPS. PEM files; the certificate file may hold the chain after the leaf.
  std::string tls_cert_file;
  std::string tls_key_file;
  // A TLS handshake not done in this many seconds is dropped; closing a TLS connection
  // (close_notify both ways) waits at most this long too.
  int tls_handshake_timeout_s = 10;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();  // Stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // INVALID_ARGUMENT for a pattern that does not start with '/' or has an empty `{}`.
  Status Route(std::string method, std::string pattern, HttpHandler handler);
  // Binds and starts the threads. UNAVAILABLE (naming host:port and the reason) when the
  // address cannot be bound; INVALID_ARGUMENT naming the file when the TLS certificate or key
  // cannot be read, is not PEM, or the two do not match.
  Status Start();
  void Stop();
  uint16_t port() const;
  // What the server answers for a parsed request (routing and the 400/404/405 rules), without a
  // socket: for tests and the request fuzzer. Safe to call concurrently, like the handlers. A
  // deferred answer is waited for; its make runs on the calling thread.
  HttpResponse Handle(HttpRequest request) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A deferred response whose answer, once made, is shown to `seen` before it is written (the
// control plane's request metrics); any other response is returned unchanged.
HttpResponse ObserveDeferred(HttpResponse r, std::function<void(const HttpResponse&)> seen);

// Parses one HTTP/1.1 request from `raw` with the server's limits, as a connection would
// (INVALID_ARGUMENT: malformed or incomplete; RESOURCE_EXHAUSTED: over a limit).
StatusOr<HttpRequest> ParseHttpRequest(std::string_view raw, const HttpServerOptions& options);

// Splits "a=1&b=x%20y+z" into {"a": "1", "b": "x y z"} ('+' is a space in a query). A key
// without '=' maps to "". Malformed escapes ("%zz", a '%' at the end) are kept as they are.
std::map<std::string, std::string> ParseQuery(std::string_view query);
// "%2Fa%20b" -> "/a b"; with plus_is_space, '+' -> ' ' too.
std::string PercentDecode(std::string_view s, bool plus_is_space = false);

}  // namespace tessera::daemon
