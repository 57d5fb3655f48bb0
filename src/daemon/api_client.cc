#include "tessera/daemon/api_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "tessera/api/event_wire.h"
#include "tessera/core/rng.h"

namespace tessera::daemon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One connection, plain or TLS (a new stream each time: a TLS session does not survive its
// socket).
struct ApiClient::Conn {
  asio::io_context io;
  std::shared_ptr<ssl::context> tls;  // https only
  std::optional<beast::tcp_stream> plain;
  std::optional<TlsStream> secure;
  bool open = false;

  beast::tcp_stream& Tcp() { return secure ? beast::get_lowest_layer(*secure) : *plain; }
  template <class F>
  auto Visit(F&& f) {
    if (secure) return f(*secure);
    return f(*plain);
  }
  void Close() {
    beast::error_code ignored;
    if (secure || plain) Tcp().socket().close(ignored);
    open = false;
  }
  Status Open(const std::string& host, const std::string& port, int timeout_ms);
};

Status ApiClient::Conn::Open(const std::string& host, const std::string& port, int timeout_ms) {
  const std::string where = host + ":" + port;
  beast::error_code ec;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return UnavailableError("cannot resolve " + where + ": " + ec.message());
  if (tls) {
    secure.emplace(io, *tls);
  } else {
    plain.emplace(io);
  }
  Tcp().expires_after(std::chrono::milliseconds(timeout_ms));
  Tcp().connect(endpoints, ec);
  if (ec) return UnavailableError("cannot reach the control plane at " + where + ": " + ec.message());
  Tcp().socket().set_option(tcp::no_delay(true), ec);
  if (secure) {
    beast::error_code not_ip;
    (void)asio::ip::make_address(host, not_ip);
    if (not_ip) SSL_set_tlsext_host_name(secure->native_handle(), host.c_str());  // SNI: names only
    bool wrong_name = false;
    secure->set_verify_callback([&wrong_name, check = ssl::host_name_verification(host)](
                                    bool preverified, ssl::verify_context& vc) mutable {
      const bool ok = check(preverified, vc);
      if (preverified && !ok) wrong_name = true;  // only the leaf's name is checked
      return ok;
    });
    secure->handshake(ssl::stream_base::client, ec);
    if (ec) {
      std::string reason = ec.message();
      const long verify = SSL_get_verify_result(secure->native_handle());
      if (wrong_name) reason += " (the certificate is not for " + host + ")";
      else if (verify != X509_V_OK) reason += " (" + std::string(X509_verify_cert_error_string(verify)) + ")";
      Close();
      return UnavailableError("TLS handshake with the control plane at " + where + " failed: " + reason);
    }
  }
  open = true;
  return Status::Ok();
}

std::string ApiError(const ApiResponse& r) {
  if (StatusOr<api::ErrorEnvelope> e = api::DecodeErrorEnvelope(r.body, nullptr); e.ok() && !e->message.empty())
    return e->message;
  if (!r.body.empty()) return r.body;
  return "HTTP " + std::to_string(r.status);
}

StatusOr<std::unique_ptr<ApiClient>> ApiClient::Create(std::string_view url, std::string token, int timeout_ms) {
  return Create(url, ApiClientOptions{.token = std::move(token), .timeout_ms = timeout_ms, .ca_file = ""});
}

namespace {

StatusOr<std::shared_ptr<ssl::context>> TlsClientContext(const std::string& ca_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
  ctx->set_options(ssl::context::no_compression);
  ctx->set_verify_mode(ssl::verify_peer);
  beast::error_code ec;
  if (ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) return InvalidArgumentError("cannot load the system's trusted certificates: " + ec.message());
    return ctx;
  }
  if (!std::ifstream(ca_file)) return InvalidArgumentError("CA file '" + ca_file + "': cannot be read");
  ctx->load_verify_file(ca_file, ec);
  if (ec) return InvalidArgumentError("CA file '" + ca_file + "': not PEM certificates (" + ec.message() + ")");
  return ctx;
}

}  // namespace

StatusOr<std::unique_ptr<ApiClient>> ApiClient::Create(std::string_view url, ApiClientOptions options) {
  constexpr std::string_view kHttp = "http://", kHttps = "https://";
  const bool https = url.substr(0, kHttps.size()) == kHttps;
  if (!https && url.substr(0, kHttp.size()) != kHttp)
    return InvalidArgumentError("server URL '" + std::string(url) + "': expected http://HOST[:PORT] or https://HOST[:PORT]");
  std::string_view rest = url.substr(https ? kHttps.size() : kHttp.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty() || rest.find('/') != std::string_view::npos)
    return InvalidArgumentError("server URL '" + std::string(url) + "': expected http(s)://HOST[:PORT] (no path)");
  auto c = std::unique_ptr<ApiClient>(new ApiClient());
  const size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && rest.find(']') == std::string_view::npos) {
    c->host_ = std::string(rest.substr(0, colon));
    c->port_ = std::string(rest.substr(colon + 1));
  } else {
    c->host_ = std::string(rest);
    c->port_ = https ? "443" : "80";
  }
  if (c->port_.empty() || c->port_.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgumentError("server URL '" + std::string(url) + "': the port must be a number");
  c->token_ = std::move(options.token);
  c->timeout_ms_ = options.timeout_ms;
  c->retry_budget_ms_ = std::max<int64_t>(0, options.retry_budget_ms);
  c->clock_ = options.clock;
  c->sleep_ = std::move(options.sleep);
  c->jitter_ = std::make_unique<Rng>(options.jitter_seed != 0 ? options.jitter_seed
                                                               : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}());
  c->conn_ = std::make_unique<Conn>();
  if (https) {
    TESSERA_ASSIGN_OR_RETURN(c->conn_->tls, TlsClientContext(options.ca_file));
  }
  return c;
}

// A TLS connection is closed without close_notify: waiting for the server's would block on a
// server that went away (the server takes the bare close as the end too).
ApiClient::~ApiClient() {
  if (conn_ && conn_->open) {
    beast::error_code ec;
    conn_->Tcp().socket().shutdown(tcp::socket::shutdown_both, ec);
    conn_->Close();
  }
}

namespace {

std::string LowerCase(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// An HTTP-date (RFC 9110 5.6.7): IMF-fixdate, or the obsolete RFC 850 and asctime forms.
std::optional<std::chrono::system_clock::time_point> ParseHttpDate(const std::string& text) {
  for (const char* format : {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"}) {
    std::tm tm{};
    const char* end = ::strptime(text.c_str(), format, &tm);
    if (end == nullptr || *end != '\0') continue;
    const std::time_t t = ::timegm(&tm);
    if (t == static_cast<std::time_t>(-1)) continue;
    return std::chrono::system_clock::from_time_t(t);
  }
  return std::nullopt;
}

// Retry-After as a wait, or nothing when absent or neither seconds nor an HTTP-date.
std::optional<std::chrono::milliseconds> RetryAfter(const ApiResponse& r, std::chrono::system_clock::time_point now) {
  auto it = r.headers.find("retry-after");
  if (it == r.headers.end()) return std::nullopt;
  std::string v = it->second;
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.pop_back();
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.erase(0, 1);
  if (!v.empty() && v.size() <= 9 && v.find_first_not_of("0123456789") == std::string::npos)
    return std::chrono::seconds(std::stoll(v));
  std::optional<std::chrono::system_clock::time_point> at = ParseHttpDate(v);
  if (!at) return std::nullopt;
  if (auto date = r.headers.find("date"); date != r.headers.end()) {
    if (std::optional<std::chrono::system_clock::time_point> sent = ParseHttpDate(date->second)) now = *sent;
  }
  if (*at <= now) return std::chrono::milliseconds(0);
  return std::chrono::ceil<std::chrono::milliseconds>(*at - now);
}

// "2 s", "250 ms", "1.5 s".
std::string Seconds(std::chrono::milliseconds d) {
  if (d.count() < 1000) return std::to_string(d.count()) + " ms";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(d.count()) / 1000.0);
  std::string out = buf;
  if (out.size() > 4 && out.compare(out.size() - 4, 4, ".0 s") == 0) out.erase(out.size() - 4, 2);
  return out;
}

class SteadyClock final : public Clock {
 public:
  TimePoint Now() const override { return TimePoint(std::chrono::steady_clock::now().time_since_epoch()); }
};

}  // namespace

std::chrono::milliseconds RetryDelay(const ApiResponse& response, int try_index, double jitter_0_1,
                                     std::chrono::system_clock::time_point now) {
  jitter_0_1 = std::clamp(jitter_0_1, 0.0, 1.0);
  if (std::optional<std::chrono::milliseconds> after = RetryAfter(response, now); after && after->count() > 0) {
    const auto capped = std::min(*after, std::chrono::milliseconds(std::chrono::hours(24)));
    return capped + std::chrono::milliseconds(static_cast<int64_t>(std::floor(capped.count() * jitter_0_1 / 2)));
  }
  constexpr int64_t kFirstMs = 250, kMostMs = 8000;
  const int64_t base = try_index >= 5 ? kMostMs : std::min(kMostMs, kFirstMs << std::max(0, try_index));
  return std::chrono::milliseconds(static_cast<int64_t>(std::floor(base * (0.5 + jitter_0_1 / 2))));
}

StatusOr<ApiResponse> ApiClient::WithRetries(std::string_view method, std::string_view target, bool repeatable,
                                             const std::function<StatusOr<ApiResponse>()>& attempt) {
  static const SteadyClock kSteady;
  const Clock& clock = clock_ != nullptr ? *clock_ : kSteady;
  const Clock::TimePoint start = clock.Now();
  const auto budget = std::chrono::milliseconds(retry_budget_ms_);
  for (int tries = 1;; ++tries) {
    TESSERA_ASSIGN_OR_RETURN(ApiResponse r, attempt());
    const bool retryable = r.status == 429 || (r.status == 503 && repeatable);
    if (!retryable || budget.count() == 0) return r;
    // The wall clock only turns a Retry-After date into a wait when the answer has no Date.
    const std::chrono::milliseconds wait =
        RetryDelay(r, tries - 1, jitter_->UniformDouble(), std::chrono::system_clock::now());
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(clock.Now() - start);
    if (spent + wait > budget) {
      return UnavailableError(std::string(method) + " " + std::string(target) + ": the control plane at " + host_ +
                              ":" + port_ + " still answered HTTP " + std::to_string(r.status) + " (" + ApiError(r) +
                              ") after " + std::to_string(tries) + (tries == 1 ? " try" : " tries") + " in " +
                              Seconds(spent) + " (retry budget " + Seconds(budget) + "; the next wait, " +
                              Seconds(wait) + ", would pass it)");
    }
    if (!sleep_) {
      std::this_thread::sleep_for(wait);
    } else if (!sleep_(wait)) {
      return Status(StatusCode::kCancelled, std::string(method) + " " + std::string(target) +
                                                ": stopped while waiting " + Seconds(wait) + " to retry HTTP " +
                                                std::to_string(r.status) + " (" + ApiError(r) + ")");
    }
  }
}

namespace {

// One request and its answer on the kept-alive connection `c` (re-opened once when the server
// had closed it).
StatusOr<ApiResponse> Exchange(ApiClient::Conn& c, const std::string& host, const std::string& port,
                               int timeout_ms, const http::request<http::string_body>& req) {
  const std::string where = host + ":" + port;
  // A kept-alive connection the server closed fails at the first write or read: one new
  // connection is tried then (nothing of the request was processed if nothing was read back).
  for (int attempt = 0; attempt < 2; ++attempt) {
    beast::error_code ec;
    const bool reused = c.open;
    if (!c.open) TESSERA_RETURN_IF_ERROR(c.Open(host, port, timeout_ms));
    c.Tcp().expires_after(std::chrono::milliseconds(timeout_ms));
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    ec = c.Visit([&](auto& stream) {
      beast::error_code e;
      http::write(stream, req, e);
      if (!e) http::read(stream, buffer, parser, e);
      return e;
    });
    if (ec) {
      c.Close();
      // Over TLS a server that closed the idle connection shows as eof (close_notify) or a
      // truncated stream (none).
      if (reused && attempt == 0 && (ec == http::error::end_of_stream || ec == asio::error::connection_reset ||
                                     ec == asio::error::broken_pipe || ec == asio::error::eof ||
                                     ec == ssl::error::stream_truncated))
        continue;
      return UnavailableError("the control plane at " + where + " did not answer: " + ec.message());
    }
    http::response<http::string_body> res = parser.release();
    ApiResponse out;
    out.status = static_cast<int>(res.result_int());
    out.body = std::move(res.body());
    for (const auto& f : res) out.headers[LowerCase(std::string(f.name_string()))] = std::string(f.value());
    if (!res.keep_alive()) c.Close();
    return out;
  }
  return UnavailableError("the control plane at " + where + " closed the connection");
}

}  // namespace

StatusOr<ApiResponse> ApiClient::Call(std::string_view method, std::string_view target, std::string_view body,
                                      const std::map<std::string, std::string>& headers) {
  http::request<http::string_body> req;
  req.method(http::string_to_verb(std::string(method)));
  if (req.method() == http::verb::unknown) return InvalidArgumentError("unknown HTTP method '" + std::string(method) + "'");
  req.target(std::string(target));
  req.version(11);
  req.set(http::field::host, host_);
  req.set(http::field::user_agent, "tessera");
  if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
  for (const auto& [k, v] : headers) req.set(k, v);
  if (!body.empty() || method == "POST" || method == "PATCH") {
    req.set(http::field::content_type, "application/json");
    req.body() = std::string(body);
  }
  req.prepare_payload();
  bool keyed = false;
  for (const auto& [k, v] : headers) keyed = keyed || (!v.empty() && LowerCase(k) == "idempotency-key");
  const bool repeatable = keyed || !(method == "POST" || method == "PATCH");
  return WithRetries(method, target, repeatable,
                     [&] { return Exchange(*conn_, host_, port_, timeout_ms_, req); });
}

std::vector<std::string> EventStreamParser::Feed(std::string_view chunk) {
  std::vector<std::string> out;
  for (char c : chunk) {
    if (c == '\n' && saw_cr_) {  // the \n of a \r\n whose \r ended the last piece or line
      saw_cr_ = false;
      continue;
    }
    saw_cr_ = false;
    if (c == '\r' || c == '\n') {
      saw_cr_ = c == '\r';
      Line(pending_, out);
      pending_.clear();
    } else if (pending_.size() < (size_t{1} << 20)) {  // a line is at most 1 MiB; the rest is dropped
      pending_ += c;
    }
  }
  return out;
}

void EventStreamParser::Line(std::string_view line, std::vector<std::string>& out) {
  if (line.empty()) {  // the end of an event
    if (has_data_) out.push_back(data_);
    if (!id_.empty()) last_id_ = id_;
    data_.clear();
    has_data_ = false;
    id_.clear();
    return;
  }
  if (line.front() == ':') return;  // a comment
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) data_ += '\n';
    data_ += value;
    has_data_ = true;
  } else if (field == "id") {
    id_ = std::string(value);
  }
}

namespace {

// The rest of ApiClient::Stream, over a plain or a TLS stream.
template <class S>
StatusOr<ApiResponse> ReadEventStream(S& stream, const http::request<http::empty_body>& req, const std::string& where,
                                      int timeout_ms, const std::function<bool(std::string_view)>& on_data) {
  beast::tcp_stream& tcp_layer = beast::get_lowest_layer(stream);
  beast::error_code ec;
  http::write(stream, req, ec);
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // a stream has no end the client knows of
  if (!ec) http::read_header(stream, buffer, parser, ec);
  if (ec) return UnavailableError("the control plane at " + where + " did not answer: " + ec.message());
  ApiResponse out;
  out.status = static_cast<int>(parser.get().result_int());
  for (const auto& f : parser.get()) out.headers[LowerCase(std::string(f.name_string()))] = std::string(f.value());
  const bool ok = out.status >= 200 && out.status <= 299;
  char buf[8192];
  while (!parser.is_done()) {
    parser.get().body().data = buf;
    parser.get().body().size = sizeof buf;
    tcp_layer.expires_after(std::chrono::milliseconds(timeout_ms));
    http::read_some(stream, buffer, parser, ec);  // what has come, not a full buffer
    if (ec == http::error::need_buffer) ec = {};
    const size_t n = sizeof buf - parser.get().body().size;
    if (ok) {
      if (n > 0 && !on_data(std::string_view(buf, n))) break;
    } else if (out.body.size() < (size_t{1} << 20)) {
      out.body.append(buf, n);
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof) break;
    if (ec) return UnavailableError("the event stream from " + where + " broke: " + ec.message());
  }
  beast::error_code ignored;
  tcp_layer.socket().shutdown(tcp::socket::shutdown_both, ignored);
  tcp_layer.socket().close(ignored);
  return out;
}

}  // namespace

StatusOr<ApiResponse> ApiClient::Stream(std::string_view target, const std::map<std::string, std::string>& headers,
                                        const std::function<bool(std::string_view)>& on_data) {
  const std::string where = host_ + ":" + port_;
  http::request<http::empty_body> req{http::verb::get, std::string(target), 11};
  req.set(http::field::host, host_);
  req.set(http::field::user_agent, "tessera");
  req.set(http::field::accept, "text/event-stream");
  if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
  for (const auto& [k, v] : headers) req.set(k, v);
  return WithRetries("GET", target, true, [&]() -> StatusOr<ApiResponse> {
    // Its own connection: the stream holds it until the end.
    Conn conn;
    conn.tls = conn_->tls;
    TESSERA_RETURN_IF_ERROR(conn.Open(host_, port_, timeout_ms_));
    return conn.Visit([&](auto& stream) { return ReadEventStream(stream, req, where, timeout_ms_, on_data); });
  });
}

}  // namespace tessera::daemon
