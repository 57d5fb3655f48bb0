#include "tessera/daemon/api_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
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

}  // namespace tessera::daemon
