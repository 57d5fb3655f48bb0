#include "src/daemon/http_server.h"

#include "tessera/api/event_wire.h"

#include <utility>  // boost/asio/awaitable.hpp (1.74) uses std::exchange without it

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast.hpp>
#include <boost/beast/ssl.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>

#include <nlohmann/json.hpp>

namespace tessera::daemon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

std::string HttpRequest::Header(std::string_view name) const {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto it = headers.find(lower);
  return it == headers.end() ? "" : it->second;
}

HttpResponse HttpResponse::Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::Error(int status, std::string_view code, std::string_view message,
                                 std::string_view field) {
  // Messages may quote what the client sent, which need not be UTF-8: the encoder replaces it.
  return Json(status, api::EncodeErrorEnvelope({std::string(code), std::string(message), std::string(field)}));
}

std::string PercentDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      const int hi = hex(s[i + 1]), lo = hex(s[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += plus_is_space && s[i] == '+' ? ' ' : s[i];
  }
  return out;
}

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    out[PercentDecode(pair.substr(0, eq), true)] =
        eq == std::string_view::npos ? "" : PercentDecode(pair.substr(eq + 1), true);
  }
  return out;
}

namespace {

struct RouteEntry {
  std::string method;
  std::vector<std::string> segments;  // "{name}" marks a parameter
  HttpHandler handler;
};

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> out;
  size_t at = 1;  // past the leading '/'
  while (at <= path.size()) {
    const size_t slash = path.find('/', at);
    const size_t end = slash == std::string_view::npos ? path.size() : slash;
    out.push_back(path.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

// "{rest...}": the last segment of a pattern that takes the rest of the path.
bool IsRestParameter(const std::string& seg) {
  return seg.size() > 5 && seg.front() == '{' && seg.ends_with("...}");
}

bool Match(const RouteEntry& r, const std::vector<std::string_view>& parts,
           std::map<std::string, std::string>& params) {
  const bool rest = !r.segments.empty() && IsRestParameter(r.segments.back());
  if (rest ? parts.size() < r.segments.size() : r.segments.size() != parts.size()) return false;
  std::map<std::string, std::string> got;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& seg = r.segments[std::min(i, r.segments.size() - 1)];
    if (rest && i + 1 >= r.segments.size()) {  // each segment decoded on its own, joined by '/'
      std::string& value = got[seg.substr(1, seg.size() - 5)];
      value += (i + 1 == r.segments.size() ? "" : "/") + PercentDecode(parts[i]);
      continue;
    }
    if (seg.size() > 2 && seg.front() == '{' && seg.back() == '}') {
      if (parts[i].empty()) return false;
      got[seg.substr(1, seg.size() - 2)] = PercentDecode(parts[i]);
    } else if (seg != parts[i]) {
      return false;
    }
  }
  params = std::move(got);
  return true;
}

// The exception barrier: whatever `make` (a handler, a deferred answer) throws ends as a logged
// 500 for this request, never as the end of the process (a throw would otherwise unwind through
// the io thread).
template <class Make>
HttpResponse Guarded(Make&& make, const std::string& method, const std::string& path) noexcept {
  std::string what;
  try {
    return make();
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  std::fprintf(stderr, "tessera serve: internal error in %s %s: %s\n", method.c_str(), path.c_str(), what.c_str());
  try {
    return HttpResponse::Error(500, "internal", "internal error while handling " + method + " " + path +
                                                    "; the server's log has the details");
  } catch (...) {
    HttpResponse bare;  // out of memory while building the answer: a bodiless 500
    bare.status = 500;
    return bare;
  }
}

// Hands a deferred response its answer; a throw is logged (the answer, dropped, is a 500).
void CallDefer(const HttpResponse& r, std::shared_ptr<HttpAnswer> answer, const std::string& method,
               const std::string& path) noexcept {
  try {
    r.defer(std::move(answer));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera serve: internal error deferring %s %s: %s\n", method.c_str(), path.c_str(), e.what());
  } catch (...) {
    std::fprintf(stderr, "tessera serve: internal error deferring %s %s\n", method.c_str(), path.c_str());
  }
}

// What an answer dropped without Finish makes.
std::function<HttpResponse()> DroppedAnswer(const std::string& method, const std::string& path) {
  return [method, path]() -> HttpResponse { throw std::runtime_error("the deferred answer was dropped unmade"); };
}

// Deferred answers reach their connections through this: once the server stops, none is posted.
struct AnswerGate {
  std::mutex mu;
  bool open = true;
};

// HttpServer::Handle's answer: the waiting caller makes it.
class WaitedAnswer final : public HttpAnswer {
 public:
  WaitedAnswer(std::string method, std::string path) : method_(std::move(method)), path_(std::move(path)) {}
  ~WaitedAnswer() override { Finish(DroppedAnswer(method_, path_)); }
  void Finish(std::function<HttpResponse()> make) override {
    if (finished_.exchange(true)) return;
    made_.set_value(std::move(make));
  }
  std::future<std::function<HttpResponse()>> Made() { return made_.get_future(); }

 private:
  std::string method_, path_;
  std::atomic<bool> finished_{false};
  std::promise<std::function<HttpResponse()>> made_;
};

// ObserveDeferred's answer: shows the made response to `seen`, then passes it on.
class SeenAnswer final : public HttpAnswer {
 public:
  SeenAnswer(std::shared_ptr<HttpAnswer> inner, std::function<void(const HttpResponse&)> seen)
      : inner_(std::move(inner)), seen_(std::move(seen)) {}
  void Finish(std::function<HttpResponse()> make) override {
    inner_->Finish([make = std::move(make), seen = seen_] {
      HttpResponse r = make();
      seen(r);
      return r;
    });
  }

 private:
  std::shared_ptr<HttpAnswer> inner_;
  std::function<void(const HttpResponse&)> seen_;
};

}  // namespace

HttpResponse ObserveDeferred(HttpResponse r, std::function<void(const HttpResponse&)> seen) {
  if (!r.defer) return r;
  r.defer = [inner = std::move(r.defer), seen = std::move(seen)](std::shared_ptr<HttpAnswer> answer) {
    inner(std::make_shared<SeenAnswer>(std::move(answer), seen));
  };
  return r;
}

struct HttpServer::Impl {
  HttpServerOptions options;
  std::vector<RouteEntry> routes;
  // One io_context per thread, each run by its thread alone; the acceptor (on the first) deals
  // connections out in turn. A connection lives on one thread: no io_context shared by several
  // threads, whose every ready socket woke another thread (with 1,000 agents polling, those
  // wake-ups were a third of the daemon's CPU: bench/serve/fleet.sh).
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> keep_running;
  size_t next_io = 0;  // the acceptor's handler only (it runs on the first io_context)
  std::unique_ptr<ssl::context> tls;  // set: every connection is TLS
  std::unique_ptr<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  std::atomic<uint16_t> bound_port{0};
  bool started = false;

  std::shared_ptr<AnswerGate> answers = std::make_shared<AnswerGate>();

  static HttpResponse CallHandler(const RouteEntry& route, const HttpRequest& req) noexcept {
    return Guarded([&] { return route.handler(req); }, req.method, req.path);
  }

  HttpResponse Dispatch(HttpRequest& req) const {
    // Split before decoding: an escaped '/' ("a%2Fb") stays inside one parameter.
    const std::vector<std::string_view> parts = SplitPath(req.raw_path);
    std::string allow;
    for (const RouteEntry& r : routes) {
      std::map<std::string, std::string> params;
      if (!Match(r, parts, params)) continue;
      if (r.method != req.method) {
        if (allow.find(r.method) == std::string::npos) allow += (allow.empty() ? "" : ", ") + r.method;
        continue;
      }
      req.path_params = std::move(params);
      return CallHandler(r, req);
    }
    if (!allow.empty()) {
      HttpResponse res = HttpResponse::Error(405, "method_not_allowed",
                                             req.method + " is not allowed on " + req.path);
      res.headers.push_back({"Allow", allow});
      return res;
    }
    return HttpResponse::Error(404, "not_found", "no such path: " + req.path);
  }

  void Accept();
};

namespace {

// The handler's view of a parsed request (shared by the server and ParseHttpRequest).
HttpRequest FromMessage(const http::request<http::string_body>& msg) {
  HttpRequest req;
  req.method = std::string(msg.method_string());
  const std::string_view target(msg.target().data(), msg.target().size());
  const size_t q = target.find('?');
  req.raw_path = std::string(target.substr(0, q));
  req.path = PercentDecode(req.raw_path);
  if (q != std::string_view::npos) req.query = ParseQuery(target.substr(q + 1));
  for (const auto& field : msg) {
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    req.headers[name] = std::string(field.value());
  }
  req.body = msg.body();
  return req;
}

template <class Stream>
class Session;

// What a streaming handler holds: a weak reference to its connection. Send posts the bytes to
// the connection's strand, where they are queued and written in order.
template <class Stream>
class SessionStream final : public HttpStream {
 public:
  explicit SessionStream(std::weak_ptr<Session<Stream>> session) : session_(std::move(session)) {}
  bool Send(std::string bytes) override;
  bool open() const override { return open_.load(); }
  void Close() override;
  void MarkClosed() { open_ = false; }

 private:
  std::weak_ptr<Session<Stream>> session_;
  std::atomic<bool> open_{true};
};

// Errors of the connection itself (the peer left, a timeout, a broken TLS record): the
// connection is closed without an answer.
bool IsTransportError(const beast::error_code& ec) {
  return ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::operation_aborted ||
         ec == asio::error::connection_reset || ec == ssl::error::stream_truncated ||
         ec.category() == asio::error::get_ssl_category();
}

// One connection, over plain TCP (beast::tcp_stream) or TLS (TlsStream): the same HTTP handling,
// only the start (a handshake) and the end (close_notify, bounded by a timer) differ.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  template <class... Args>
  Session(const HttpServer::Impl& server, Args&&... args)
      : stream_(std::forward<Args>(args)...),
        server_(server),
        close_timer_(stream_.get_executor()),
        answer_timer_(stream_.get_executor()) {}
  ~Session() {
    if (out_) out_->MarkClosed();
  }

  void Start() {
    if constexpr (kTls) {
      // A client that never completes the handshake (or speaks plain HTTP) is closed by the
      // timeout; it holds a socket, never a thread.
      Tcp().expires_after(std::chrono::seconds(server_.options.tls_handshake_timeout_s));
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        if (ec) {
          self->CloseSocket();
          return;
        }
        self->Read();
      });
    } else {
      Read();
    }
  }

  // Stream mode, on the strand.
  void Enqueue(std::string bytes) {
    if (!streaming_) return;
    backlog_ += bytes.size();
    if (backlog_ > server_.options.max_stream_backlog_bytes) {
      EndStream();  // a client this far behind would only fall further
      return;
    }
    queue_.push_back(std::move(bytes));
    if (!writing_) WriteNext();
  }
  void RequestClose() {
    closing_ = true;
    if (streaming_ && !writing_) EndStream();
  }
  asio::any_io_executor executor() { return stream_.get_executor(); }

 private:
  beast::tcp_stream& Tcp() { return beast::get_lowest_layer(stream_); }

  void Read() {
    parser_.emplace();
    parser_->body_limit(server_.options.max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(server_.options.max_header_bytes));
    Tcp().expires_after(std::chrono::seconds(server_.options.idle_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (IsTransportError(ec)) {
      Close();
      return;
    }
    if (ec == http::error::body_limit) {
      Write(HttpResponse::Error(413, "body_too_large",
                                "the request body is over " +
                                    std::to_string(server_.options.max_body_bytes) + " bytes"),
            false, 11);
      return;
    }
    if (ec == http::error::header_limit) {
      Write(HttpResponse::Error(431, "headers_too_large", "the request headers are too large"), false, 11);
      return;
    }
    if (ec) {
      Write(HttpResponse::Error(400, "bad_request", "malformed HTTP request: " + ec.message()), false, 11);
      return;
    }
    HttpRequest req = FromMessage(parser_->get());
    const bool keep_alive = parser_->get().keep_alive();
    const unsigned version = parser_->get().version();
    // The peer is the connection's: asked of the socket once, not per request (a getpeername
    // and a formatted address per request were measurable with a fleet of keep-alive agents).
    if (peer_.empty()) {
      beast::error_code peer_ec;
      const auto ep = Tcp().socket().remote_endpoint(peer_ec);
      if (!peer_ec) peer_ = ep.address().to_string() + ":" + std::to_string(ep.port());
    }
    req.peer = peer_;
    if (req.raw_path.empty() || req.raw_path[0] != '/') {
      Write(HttpResponse::Error(400, "bad_request", "the request target must be an absolute path"), false, version);
      return;
    }
    HttpResponse res = server_.Dispatch(req);
    if (res.defer) {
      StartDeferred(res, req, keep_alive, version);
      return;
    }
    if (res.open_stream) {
      StartStream(std::move(res), version);
      return;
    }
    Write(std::move(res), keep_alive, version);
  }

 public:
  // A deferred response: nothing is pending on the connection while the answer is made
  // elsewhere, so a timer that never fires keeps the session alive until the answer cancels it
  // (or the server's end destroys it).
  void StartDeferred(const HttpResponse& r, const HttpRequest& req, bool keep_alive, unsigned version);

  // On the strand: the deferred answer, made.
  void WriteDeferred(HttpResponse r, bool keep_alive, unsigned version) {
    answer_timer_.cancel();
    Write(std::move(r), keep_alive, version);
  }

 private:
  void StartStream(HttpResponse r, unsigned version) {
    const auto status = static_cast<unsigned>(r.status);
    std::string head = (version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ") + std::to_string(status) + " " +
                       std::string(http::obsolete_reason(http::int_to_status(status))) +
                       "\r\nServer: tessera\r\n";
    if (!r.content_type.empty()) head += "Content-Type: " + r.content_type + "\r\n";
    for (const auto& [name, value] : r.headers) head += name + ": " + value + "\r\n";
    head += "Connection: close\r\n\r\n";
    streaming_ = true;
    out_ = std::make_shared<SessionStream<Stream>>(this->weak_from_this());
    Enqueue(std::move(head));
    if (!r.body.empty()) Enqueue(std::move(r.body));
    // Nothing more is read but the end of the connection: the client going away ends the stream.
    DiscardInput();
    try {
      r.open_stream(out_);
    } catch (const std::exception& e) {  // the head is out: all that is left is to end the stream
      std::fprintf(stderr, "tessera serve: internal error opening a stream: %s\n", e.what());
      out_->Close();
    } catch (...) {
      std::fprintf(stderr, "tessera serve: internal error opening a stream\n");
      out_->Close();
    }
  }

  void DiscardInput() {
    // Through the stream (TLS records need decrypting), but without the tcp_stream's timer: the
    // read waits as long as the stream lasts, and a write's timeout must not end it. A write
    // in flight keeps its own timer (expires_never only touches the idle side then).
    Tcp().expires_never();
    stream_.async_read_some(asio::buffer(discard_), [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (ec) {
        self->EndStream();
      } else {
        self->DiscardInput();
      }
    });
  }

  void WriteNext() {
    if (queue_.empty() || !streaming_) {
      writing_ = false;
      if (closing_) EndStream();
      return;
    }
    writing_ = true;
    Tcp().expires_after(std::chrono::seconds(server_.options.stream_write_timeout_s));
    asio::async_write(stream_, asio::buffer(queue_.front()), [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (ec || !self->streaming_) {
        self->writing_ = false;
        self->EndStream();
        self->queue_.clear();  // only now: the write that ended was reading queue_.front()
        return;
      }
      self->backlog_ -= self->queue_.front().size();
      self->queue_.pop_front();
      self->WriteNext();
    });
  }

  void EndStream() {
    if (out_) out_->MarkClosed();
    if (!streaming_) return;
    streaming_ = false;
    const bool cut_off = writing_;  // a write in flight: no close_notify can follow it cleanly
    if (!writing_) queue_.clear();  // else the write in flight still reads its front
    backlog_ = 0;
    if (kTls && !cut_off) {
      Close();  // the SSE client sees a clean end (close_notify), not a truncated stream
      return;
    }
    beast::error_code ec;
    Tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    CloseSocket();
  }

  void Write(HttpResponse r, bool keep_alive, unsigned version) {
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(version);
    res->result(static_cast<unsigned>(r.status));
    res->set(http::field::server, "tessera");
    if (!r.content_type.empty()) res->set(http::field::content_type, r.content_type);
    for (const auto& [name, value] : r.headers) res->set(name, value);
    res->body() = std::move(r.body);
    res->keep_alive(keep_alive);
    res->prepare_payload();
    http::async_write(stream_, *res, [self = this->shared_from_this(), res](beast::error_code ec, size_t) {
      if (!ec && res->keep_alive()) {
        self->Read();
      } else {
        self->Close();
      }
    });
  }

  // The end of a connection: a TCP half-close, or TLS close_notify both ways. The exchange is
  // bounded by its own timer (the tcp_stream's may be off while a read is pending): a peer that
  // never answers costs a socket for tls_handshake_timeout_s, never a thread.
  void Close() {
    if constexpr (kTls) {
      if (shutting_down_) return;
      shutting_down_ = true;
      close_timer_.expires_after(std::chrono::seconds(server_.options.tls_handshake_timeout_s));
      close_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
        if (!ec) self->CloseSocket();
      });
      Tcp().expires_after(std::chrono::seconds(server_.options.tls_handshake_timeout_s));
      stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {
        self->close_timer_.cancel();
        self->CloseSocket();
      });
    } else {
      beast::error_code ec;
      Tcp().socket().shutdown(tcp::socket::shutdown_send, ec);
    }
  }

  void CloseSocket() {
    beast::error_code ec;
    Tcp().socket().close(ec);
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::string peer_;  // "address:port", once known
  std::optional<http::request_parser<http::string_body>> parser_;
  const HttpServer::Impl& server_;
  asio::steady_timer close_timer_;
  asio::steady_timer answer_timer_;  // pending while a deferred answer is being made
  bool shutting_down_ = false;
  // Stream mode.
  std::shared_ptr<SessionStream<Stream>> out_;
  bool streaming_ = false;
  bool writing_ = false;
  bool closing_ = false;
  std::deque<std::string> queue_;
  size_t backlog_ = 0;
  char discard_[256];
};

// A connection's deferred answer: Finish posts make to the connection's strand (through the
// server's gate, so that nothing is posted once the server stops).
template <class Stream>
class SessionAnswer final : public HttpAnswer {
 public:
  SessionAnswer(std::weak_ptr<Session<Stream>> session, std::shared_ptr<AnswerGate> gate, bool keep_alive,
                unsigned version, std::string method, std::string path)
      : session_(std::move(session)),
        gate_(std::move(gate)),
        keep_alive_(keep_alive),
        version_(version),
        method_(std::move(method)),
        path_(std::move(path)) {}
  ~SessionAnswer() override { Finish(DroppedAnswer(method_, path_)); }
  void Finish(std::function<HttpResponse()> make) override {
    if (finished_.exchange(true)) return;
    std::lock_guard<std::mutex> lock(gate_->mu);
    if (!gate_->open) return;
    std::shared_ptr<Session<Stream>> s = session_.lock();
    if (!s) return;
    asio::post(s->executor(), [s, make = std::move(make), keep_alive = keep_alive_, version = version_,
                               method = method_, path = path_] {
      s->WriteDeferred(Guarded(make, method, path), keep_alive, version);
    });
  }

 private:
  std::weak_ptr<Session<Stream>> session_;
  std::shared_ptr<AnswerGate> gate_;
  const bool keep_alive_;
  const unsigned version_;
  const std::string method_, path_;
  std::atomic<bool> finished_{false};
};

template <class Stream>
void Session<Stream>::StartDeferred(const HttpResponse& r, const HttpRequest& req, bool keep_alive, unsigned version) {
  answer_timer_.expires_at(asio::steady_timer::time_point::max());
  answer_timer_.async_wait([self = this->shared_from_this()](beast::error_code) {});
  CallDefer(r,
            std::make_shared<SessionAnswer<Stream>>(this->weak_from_this(), server_.answers, keep_alive, version,
                                                    req.method, req.path),
            req.method, req.path);
}

template <class Stream>
bool SessionStream<Stream>::Send(std::string bytes) {
  if (!open_) return false;
  std::shared_ptr<Session<Stream>> s = session_.lock();
  if (!s) {
    open_ = false;
    return false;
  }
  asio::post(s->executor(), [s, b = std::move(bytes)]() mutable { s->Enqueue(std::move(b)); });
  return true;
}

template <class Stream>
void SessionStream<Stream>::Close() {
  if (std::shared_ptr<Session<Stream>> s = session_.lock()) asio::post(s->executor(), [s] { s->RequestClose(); });
}

// The server's TLS context from PEM files (the certificate file may hold the chain after the
// leaf). INVALID_ARGUMENT names the file that cannot be read or does not fit.
StatusOr<std::unique_ptr<ssl::context>> TlsServerContext(const std::string& cert_file, const std::string& key_file) {
  for (const std::string* f : {&cert_file, &key_file})
    if (!std::ifstream(*f))
      return InvalidArgumentError(std::string(f == &cert_file ? "TLS certificate" : "TLS key") + " file '" + *f +
                                  "': cannot be read");
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                   ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::no_compression |
                   ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx->native_handle(), SSL_OP_NO_RENEGOTIATION);
  beast::error_code ec;
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) return InvalidArgumentError("TLS certificate file '" + cert_file + "': not a PEM certificate (" + ec.message() + ")");
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec)  // not PEM, or OpenSSL's "key values mismatch" for another certificate's key
    return InvalidArgumentError("TLS key file '" + key_file + "': not the PEM private key of the certificate in '" +
                                cert_file + "' (" + ec.message() + ")");
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return InvalidArgumentError("TLS key file '" + key_file + "' does not match the certificate in '" + cert_file + "'");
  return ctx;
}

}  // namespace

void HttpServer::Impl::Accept() {
  // Each connection on its own strand: a stream's Send posts to it from other threads.
  asio::io_context& home = *ios[next_io++ % ios.size()];
  acceptor->async_accept(asio::make_strand(home), [this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
    if (!ec) {
      beast::error_code opt_ec;
      socket.set_option(tcp::no_delay(true), opt_ec);
      if (tls)
        std::make_shared<Session<TlsStream>>(*this, std::move(socket), *tls)->Start();
      else
        std::make_shared<Session<beast::tcp_stream>>(*this, std::move(socket))->Start();
    }
    Accept();
  });
}

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Route(std::string method, std::string pattern, HttpHandler handler) {
  if (pattern.empty() || pattern[0] != '/')
    return InvalidArgumentError("route '" + pattern + "': a pattern starts with '/'");
  RouteEntry r{std::move(method), {}, std::move(handler)};
  for (std::string_view seg : SplitPath(pattern)) {
    if (seg == "{}" || seg == "{...}")
      return InvalidArgumentError("route '" + pattern + "': a parameter needs a name");
    if (!r.segments.empty() && IsRestParameter(r.segments.back()))
      return InvalidArgumentError("route '" + pattern + "': '" + r.segments.back() + "' must be the last segment");
    r.segments.emplace_back(seg);
  }
  impl_->routes.push_back(std::move(r));
  return Status::Ok();
}

Status HttpServer::Start() {
  Impl& m = *impl_;
  if (m.started) return FailedPreconditionError("the HTTP server is already started");
  if (m.options.threads < 1) return InvalidArgumentError("HTTP server: threads must be >= 1");
  const std::string where = m.options.listen_host + ":" + std::to_string(m.options.listen_port);
  if (m.options.tls_cert_file.empty() != m.options.tls_key_file.empty())
    return InvalidArgumentError("HTTP server: TLS needs both a certificate file and a key file");
  m.tls.reset();
  if (!m.options.tls_cert_file.empty()) {
    TESSERA_ASSIGN_OR_RETURN(m.tls, TlsServerContext(m.options.tls_cert_file, m.options.tls_key_file));
  }
  m.answers = std::make_shared<AnswerGate>();
  m.keep_running.clear();
  m.ios.clear();
  for (int t = 0; t < m.options.threads; ++t) {
    m.ios.push_back(std::make_unique<asio::io_context>(1));
    m.keep_running.push_back(asio::make_work_guard(*m.ios.back()));
  }
  beast::error_code ec;
  const asio::ip::address address = asio::ip::make_address(m.options.listen_host, ec);
  if (ec) return InvalidArgumentError("cannot listen on " + where + ": '" + m.options.listen_host + "' is not an IP address");
  m.acceptor = std::make_unique<tcp::acceptor>(*m.ios.front());
  const tcp::endpoint endpoint(address, m.options.listen_port);
  if (m.acceptor->open(endpoint.protocol(), ec); !ec) {
    m.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    m.acceptor->bind(endpoint, ec);
  }
  if (!ec) m.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    m.acceptor.reset();
    m.keep_running.clear();
    m.ios.clear();
    return UnavailableError("cannot listen on " + where + ": " + ec.message());
  }
  m.bound_port = m.acceptor->local_endpoint().port();
  m.Accept();
  for (auto& io : m.ios) m.threads.emplace_back([io = io.get()] { io->run(); });
  m.started = true;
  return Status::Ok();
}

void HttpServer::Stop() {
  Impl& m = *impl_;
  if (!m.started) return;
  {
    std::lock_guard<std::mutex> lock(m.answers->mu);  // no deferred answer is posted from now on
    m.answers->open = false;
  }
  asio::post(*m.ios.front(), [&m] {
    beast::error_code ec;
    m.acceptor->close(ec);
  });
  m.keep_running.clear();
  for (auto& io : m.ios) io->stop();
  for (std::thread& t : m.threads) t.join();
  m.threads.clear();
  m.acceptor.reset();
  m.ios.clear();  // destroys the sessions still waiting, closing their sockets
  m.started = false;
}

uint16_t HttpServer::port() const { return impl_->bound_port; }

HttpResponse HttpServer::Handle(HttpRequest request) const {
  if (request.raw_path.empty() || request.raw_path[0] != '/')
    return HttpResponse::Error(400, "bad_request", "the request target must be an absolute path");
  HttpResponse res = impl_->Dispatch(request);
  if (!res.defer) return res;
  auto answer = std::make_shared<WaitedAnswer>(request.method, request.path);
  std::future<std::function<HttpResponse()>> made = answer->Made();
  CallDefer(res, std::move(answer), request.method, request.path);
  return Guarded(made.get(), request.method, request.path);
}

StatusOr<HttpRequest> ParseHttpRequest(std::string_view raw, const HttpServerOptions& options) {
  http::request_parser<http::string_body> parser;
  parser.body_limit(options.max_body_bytes);
  parser.header_limit(static_cast<uint32_t>(options.max_header_bytes));
  parser.eager(true);
  beast::error_code ec;
  size_t used = 0;
  while (!ec && used < raw.size() && !parser.is_done()) {
    const size_t n = parser.put(asio::buffer(raw.data() + used, raw.size() - used), ec);
    if (n == 0 && !ec) break;
    used += n;
  }
  if (!ec && !parser.is_done()) parser.put_eof(ec);
  if (ec == http::error::body_limit) return ResourceExhaustedError("the request body is over the limit");
  if (ec == http::error::header_limit) return ResourceExhaustedError("the request headers are too large");
  if (ec) return InvalidArgumentError("malformed HTTP request: " + ec.message());
  if (!parser.is_done()) return InvalidArgumentError("malformed HTTP request: incomplete");
  return FromMessage(parser.get());
}

}  // namespace tessera::daemon
