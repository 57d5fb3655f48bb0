// Candidate 1 for the control plane's HTTP library: cpp-httplib (Debian's libcpp-httplib-dev),
// its thread pool of blocking workers. Usage: httplib_server PORT THREADS
#include <httplib.h>

#include <cstdio>
#include <cstdlib>

#include "bench/http/common.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: httplib_server PORT THREADS\n");
    return 2;
  }
  const int port = std::atoi(argv[1]);
  const size_t threads = static_cast<size_t>(std::atoi(argv[2]));
  static const tessera::bench_http::Catalogue catalogue;
  httplib::Server server;
  server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server.set_keep_alive_max_count(1000000);
  server.set_tcp_nodelay(true);  // without it Nagle and delayed ACKs cap a connection at ~25 req/s
  auto handle = [](const httplib::Request& req, httplib::Response& res) {
    if (req.get_header_value("Authorization") != tessera::bench_http::kToken) {
      res.status = 401;
      return;
    }
    std::string body = catalogue.Answer(req.target);
    if (body.empty()) {
      res.status = 404;
      return;
    }
    res.set_content(std::move(body), "application/json");
  };
  server.Get(R"(/v1/workloads.*)", handle);
  std::printf("listening on %d\n", port);
  std::fflush(stdout);
  return server.listen("127.0.0.1", port) ? 0 : 1;
}
