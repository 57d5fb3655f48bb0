// `tessera ctl` against a canned HTTP server (one fixed answer to every request, and a record of
// what came): the exception barrier (issue 31: an answer of an unexpected shape is an internal
// error with exit 1, not an abort).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/cli_test_util.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using testing::CommandResult;
using testing::RunTessera;
using testing::TempDir;

// Answers every request on 127.0.0.1:port() with `status` and the JSON `body`, one request per
// connection; requests() is what arrived (head and body).
class CannedServer {
 public:
  CannedServer(int status, std::string body) : status_(status), body_(std::move(body)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 16) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~CannedServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (fd_ >= 0) ::close(fd_);
  }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  void Serve() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) continue;
      std::string req;
      size_t need = std::string::npos;  // head + body, once the head is in
      char buf[4096];
      while (need == std::string::npos || req.size() < need) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 5000) <= 0) break;
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
        const size_t head = req.find("\r\n\r\n");
        if (need == std::string::npos && head != std::string::npos) {
          size_t length = 0;
          std::string lower = req.substr(0, head);
          for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          if (size_t at = lower.find("content-length:"); at != std::string::npos)
            length = static_cast<size_t>(std::atoll(lower.c_str() + at + 15));
          need = head + 4 + length;
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(req);
      }
      const std::string answer = "HTTP/1.1 " + std::to_string(status_) +
                                 " X\r\nContent-Type: application/json\r\nContent-Length: " +
                                 std::to_string(body_.size()) + "\r\nConnection: close\r\n\r\n" + body_;
      (void)::send(c, answer.data(), answer.size(), MSG_NOSIGNAL);
      ::close(c);
    }
  }

  int status_;
  std::string body_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

// The environment of every call: the canned server, and an admin's token in $TESSERA_TOKEN (what
// an empty --token-file used to fall back to).
std::string Env(const CannedServer& s) { return "TESSERA_SERVER=" + s.url() + " TESSERA_TOKEN=the-admins-token"; }

// An answer the tables do not expect ("tokens" is no list) used to end ctl with an uncaught
// nlohmann exception: abort(), exit 134, after the server had done the work.
TEST(CtlCli, AnExceptionInAVerbIsAnInternalErrorWithExit1) {
  TempDir dir;
  CannedServer server(200, R"({"tokens": 5})");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl tokens list", Env(server));
  EXPECT_FALSE(r.Crashed()) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("tessera ctl: internal error: "));
  EXPECT_THAT(r.err, HasSubstr("type_error"));
  EXPECT_EQ(server.requests().size(), 1u);
}

}  // namespace
}  // namespace tessera
