// Candidate 2 for the control plane's HTTP library: Boost.Beast 1.74 (Debian's libboost-dev),
// asynchronous sessions on THREADS threads running one io_context. Usage: beast_server PORT THREADS
#include <utility>  // boost/asio/awaitable.hpp uses std::exchange without it (1.74)

#include <boost/asio.hpp>
#include <boost/beast.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "bench/http/common.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

const tessera::bench_http::Catalogue& TheCatalogue() {
  static const tessera::bench_http::Catalogue catalogue;
  return catalogue;
}

class Session : public std::enable_shared_from_this<Session> {
 public:
  explicit Session(tcp::socket socket) : stream_(std::move(socket)) {}
  void Start() { Read(); }

 private:
  void Read() {
    req_ = {};
    http::async_read(stream_, buffer_, req_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (!ec) self->Answer();
                     });
  }
  void Answer() {
    auto res = std::make_shared<http::response<http::string_body>>();
    res->version(req_.version());
    res->keep_alive(req_.keep_alive());
    const auto auth = req_[http::field::authorization];
    if (std::string_view(auth.data(), auth.size()) != tessera::bench_http::kToken) {
      res->result(http::status::unauthorized);
    } else {
      std::string body = TheCatalogue().Answer(std::string_view(req_.target().data(), req_.target().size()));
      if (body.empty()) {
        res->result(http::status::not_found);
      } else {
        res->result(http::status::ok);
        res->set(http::field::content_type, "application/json");
        res->body() = std::move(body);
      }
    }
    res->prepare_payload();
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, size_t) {
      if (!ec && res->keep_alive()) self->Read();
    });
  }
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
};

void Accept(tcp::acceptor& acceptor) {
  acceptor.async_accept([&acceptor](beast::error_code ec, tcp::socket socket) {
    if (!ec) {
      socket.set_option(tcp::no_delay(true));
      std::make_shared<Session>(std::move(socket))->Start();
    }
    Accept(acceptor);
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: beast_server PORT THREADS\n");
    return 2;
  }
  const auto port = static_cast<unsigned short>(std::atoi(argv[1]));
  const int threads = std::atoi(argv[2]);
  TheCatalogue();
  asio::io_context io(threads);
  tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), port});
  Accept(acceptor);
  std::printf("listening on %d\n", port);
  std::fflush(stdout);
  std::vector<std::thread> pool;
  for (int k = 1; k < threads; ++k) pool.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& t : pool) t.join();
  return 0;
}
