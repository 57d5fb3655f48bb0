#include "tessera/integrations/k8s/extender_server.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <cstdio>
#include <exception>
#include <list>
#include <mutex>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace tessera::k8s {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

std::string ErrorBody(const std::string& message) {
  std::string escaped;
  for (char ch : message) {
    if (ch == '"' || ch == '\\') escaped += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) continue;
    escaped += ch;
  }
  return "{\"Error\":\"" + escaped + "\"}";
}

}  // namespace

struct ExtenderServer::Impl {
  struct Session {
    std::thread thread;
    int fd = -1;
    std::atomic<bool> done{false};
  };

  Extender* extender;
  ExtenderServerOptions options;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread accept_thread;
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::list<std::unique_ptr<Session>> sessions;

  ExtenderAnswer Route(const http::request<http::string_body>& req) {
    std::string path(req.target());
    if (size_t q = path.find('?'); q != std::string::npos) path.resize(q);
    const std::string& p = options.url_prefix;
    std::string verb;
    if (path.size() > p.size() && path.compare(0, p.size(), p) == 0 && path[p.size()] == '/') verb = path.substr(p.size() + 1);
    if (path == "/healthz") verb = "healthz";
    const bool is_post = req.method() == http::verb::post;
    const bool is_get = req.method() == http::verb::get || req.method() == http::verb::head;
    try {
      if (verb == "filter" || verb == "prioritize") {
        if (!is_post) return {405, ErrorBody(req.method_string().to_string() + " " + path + ": use POST")};
        return verb == "filter" ? extender->Filter(req.body()) : extender->Prioritize(req.body());
      }
      if (verb == "healthz") {
        if (!is_get) return {405, ErrorBody(req.method_string().to_string() + " " + path + ": use GET")};
        return extender->Health();
      }
    } catch (const std::exception& e) {
      // The extender returns errors as values; this is only a barrier (e.g. out of memory).
      std::fprintf(stderr, "tessera k8s extender: %s %s: %s\n", req.method_string().to_string().c_str(), path.c_str(), e.what());
      return {503, ErrorBody(std::string("the extender failed: ") + e.what())};
    }
    return {404, ErrorBody("no route " + path + " (POST " + p + "/filter, POST " + p + "/prioritize, GET " + p + "/healthz)")};
  }

  void Serve(tcp::socket& socket) {
    beast::error_code ec;
    beast::flat_buffer buffer;
    while (!stopping) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(options.max_body_bytes);
      http::read(socket, buffer, parser, ec);
      if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset) break;
      http::response<http::string_body> res;
      bool keep = false;
      if (ec) {
        if (ec == asio::error::would_block || ec == asio::error::try_again || ec == asio::error::timed_out ||
            stopping) {
          break;  // idle past the timeout, or stopping
        }
        const bool too_big = ec == http::error::body_limit;
        res.result(too_big ? http::status::payload_too_large : http::status::bad_request);
        res.body() = ErrorBody(too_big ? "the body is over " + std::to_string(options.max_body_bytes) + " bytes"
                                       : "not an HTTP request: " + ec.message());
      } else {
        const auto& req = parser.get();
        ExtenderAnswer a = Route(req);
        res.result(static_cast<http::status>(a.status));
        res.version(req.version());
        res.body() = std::move(a.body);
        keep = req.keep_alive();
        if (req.method() == http::verb::head) res.body().clear();
      }
      res.set(http::field::content_type, "application/json");
      res.keep_alive(keep);
      res.prepare_payload();
      http::write(socket, res, ec);
      if (ec || !keep) break;
    }
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }

  void Reap() {  // under mu
    for (auto it = sessions.begin(); it != sessions.end();) {
      if ((*it)->done) {
        (*it)->thread.join();
        it = sessions.erase(it);
      } else {
        ++it;
      }
    }
  }

  void AcceptLoop() {
    while (!stopping) {
      beast::error_code ec;
      tcp::socket socket(io);
      acceptor.accept(socket, ec);
      if (ec) {
        if (stopping) break;
        continue;
      }
      timeval tv{options.idle_timeout_s, 0};
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      std::lock_guard<std::mutex> lock(mu);
      Reap();
      if (static_cast<int>(sessions.size()) >= options.max_connections) {
        http::response<http::string_body> res{http::status::service_unavailable, 11};
        res.set(http::field::content_type, "application/json");
        res.body() = ErrorBody("too many connections (" + std::to_string(options.max_connections) + ")");
        res.keep_alive(false);
        res.prepare_payload();
        http::write(socket, res, ec);
        socket.close(ec);
        continue;
      }
      auto s = std::make_unique<Session>();
      Session* raw = s.get();
      raw->fd = socket.native_handle();
      raw->thread = std::thread([this, raw, sock = std::move(socket)]() mutable {
        Serve(sock);
        std::lock_guard<std::mutex> done_lock(mu);  // Stop shuts fds of live sessions under mu
        raw->done = true;
        beast::error_code close_ec;
        sock.close(close_ec);
      });
      sessions.push_back(std::move(s));
    }
  }
};

ExtenderServer::ExtenderServer(Extender* extender, ExtenderServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->extender = extender;
  impl_->options = std::move(options);
}

ExtenderServer::~ExtenderServer() { Stop(); }

Status ExtenderServer::Start() {
  beast::error_code ec;
  const std::string where = impl_->options.host + ":" + std::to_string(impl_->options.port);
  const asio::ip::address address = asio::ip::make_address(impl_->options.host, ec);
  if (ec) return InvalidArgumentError("listen address '" + impl_->options.host + "': " + ec.message());
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(impl_->options.port));
  tcp::acceptor& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return UnavailableError("cannot listen on " + where + ": " + ec.message());
  port_ = a.local_endpoint().port();
  impl_->accept_thread = std::thread([this] { impl_->AcceptLoop(); });
  return Status::Ok();
}

void ExtenderServer::Stop() {
  if (!impl_ || !impl_->accept_thread.joinable()) return;
  impl_->stopping = true;
  ::shutdown(impl_->acceptor.native_handle(), SHUT_RDWR);  // wakes the blocked accept
  impl_->accept_thread.join();
  beast::error_code ec;
  impl_->acceptor.close(ec);
  std::list<std::unique_ptr<Impl::Session>> sessions;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (auto& s : impl_->sessions) {
      if (!s->done) ::shutdown(s->fd, SHUT_RDWR);
    }
    sessions.swap(impl_->sessions);
  }
  for (auto& s : sessions) s->thread.join();
}

}  // namespace tessera::k8s
