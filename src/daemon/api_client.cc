#include "tessera/daemon/api_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>

namespace tessera::daemon {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct ApiClient::Conn {
  asio::io_context io;
  beast::tcp_stream stream{io};
  bool open = false;
};

std::string ApiError(const ApiResponse& r) {
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (!j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string())
    return j["error"]["message"].get<std::string>();
  if (!r.body.empty()) return r.body;
  return "HTTP " + std::to_string(r.status);
}

StatusOr<std::unique_ptr<ApiClient>> ApiClient::Create(std::string_view url, std::string token, int timeout_ms) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme)
    return InvalidArgumentError("server URL '" + std::string(url) + "': expected http://HOST[:PORT]");
  std::string_view rest = url.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.empty() || rest.find('/') != std::string_view::npos)
    return InvalidArgumentError("server URL '" + std::string(url) + "': expected http://HOST[:PORT] (no path)");
  auto c = std::unique_ptr<ApiClient>(new ApiClient());
  const size_t colon = rest.rfind(':');
  if (colon != std::string_view::npos && rest.find(']') == std::string_view::npos) {
    c->host_ = std::string(rest.substr(0, colon));
    c->port_ = std::string(rest.substr(colon + 1));
  } else {
    c->host_ = std::string(rest);
    c->port_ = "80";
  }
  if (c->port_.empty() || c->port_.find_first_not_of("0123456789") != std::string::npos)
    return InvalidArgumentError("server URL '" + std::string(url) + "': the port must be a number");
  c->token_ = std::move(token);
  c->timeout_ms_ = timeout_ms;
  c->conn_ = std::make_unique<Conn>();
  return c;
}

ApiClient::~ApiClient() {
  if (conn_ && conn_->open) {
    beast::error_code ec;
    conn_->stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  }
}

StatusOr<ApiResponse> ApiClient::Call(std::string_view method, std::string_view target, std::string_view body,
                                      const std::map<std::string, std::string>& headers) {
  const std::string where = host_ + ":" + port_;
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
  // A kept-alive connection the server closed fails at the first write or read: one new
  // connection is tried then (nothing of the request was processed if nothing was read back).
  for (int attempt = 0; attempt < 2; ++attempt) {
    beast::error_code ec;
    Conn& c = *conn_;
    const bool reused = c.open;
    if (!c.open) {
      tcp::resolver resolver(c.io);
      auto endpoints = resolver.resolve(host_, port_, ec);
      if (ec) return UnavailableError("cannot resolve " + where + ": " + ec.message());
      c.stream.expires_after(std::chrono::milliseconds(timeout_ms_));
      c.stream.connect(endpoints, ec);
      if (ec) return UnavailableError("cannot reach the control plane at " + where + ": " + ec.message());
      c.stream.socket().set_option(tcp::no_delay(true), ec);
      c.open = true;
    }
    c.stream.expires_after(std::chrono::milliseconds(timeout_ms_));
    http::write(c.stream, req, ec);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64u << 20);
    if (!ec) http::read(c.stream, buffer, parser, ec);
    if (ec) {
      beast::error_code ignored;
      c.stream.socket().close(ignored);
      c.open = false;
      if (reused && attempt == 0 && (ec == http::error::end_of_stream || ec == asio::error::connection_reset ||
                                     ec == asio::error::broken_pipe || ec == asio::error::eof))
        continue;
      return UnavailableError("the control plane at " + where + " did not answer: " + ec.message());
    }
    http::response<http::string_body> res = parser.release();
    ApiResponse out;
    out.status = static_cast<int>(res.result_int());
    out.body = std::move(res.body());
    for (const auto& f : res) {
      std::string name(f.name_string());
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      out.headers[name] = std::string(f.value());
    }
    if (!res.keep_alive()) {
      beast::error_code ignored;
      c.stream.socket().close(ignored);
      c.open = false;
    }
    return out;
  }
  return UnavailableError("the control plane at " + where + " closed the connection");
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

StatusOr<ApiResponse> ApiClient::Stream(std::string_view target, const std::map<std::string, std::string>& headers,
                                        const std::function<bool(std::string_view)>& on_data) {
  const std::string where = host_ + ":" + port_;
  // Its own connection: the stream holds it until the end.
  asio::io_context io;
  beast::tcp_stream stream(io);
  beast::error_code ec;
  tcp::resolver resolver(io);
  auto endpoints = resolver.resolve(host_, port_, ec);
  if (ec) return UnavailableError("cannot resolve " + where + ": " + ec.message());
  stream.expires_after(std::chrono::milliseconds(timeout_ms_));
  stream.connect(endpoints, ec);
  if (ec) return UnavailableError("cannot reach the control plane at " + where + ": " + ec.message());
  http::request<http::empty_body> req{http::verb::get, std::string(target), 11};
  req.set(http::field::host, host_);
  req.set(http::field::user_agent, "tessera");
  req.set(http::field::accept, "text/event-stream");
  if (!token_.empty()) req.set(http::field::authorization, "Bearer " + token_);
  for (const auto& [k, v] : headers) req.set(k, v);
  http::write(stream, req, ec);
  beast::flat_buffer buffer;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());  // a stream has no end the client knows of
  if (!ec) http::read_header(stream, buffer, parser, ec);
  if (ec) return UnavailableError("the control plane at " + where + " did not answer: " + ec.message());
  ApiResponse out;
  out.status = static_cast<int>(parser.get().result_int());
  for (const auto& f : parser.get()) {
    std::string name(f.name_string());
    for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    out.headers[name] = std::string(f.value());
  }
  const bool ok = out.status >= 200 && out.status <= 299;
  char buf[8192];
  while (!parser.is_done()) {
    parser.get().body().data = buf;
    parser.get().body().size = sizeof buf;
    stream.expires_after(std::chrono::milliseconds(timeout_ms_));
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
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return out;
}

}  // namespace tessera::daemon
