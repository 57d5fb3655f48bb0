// `tessera ctl` and `tessera run --server` against a canned HTTP server (one fixed answer to every
// request, and a record of what came): the flags that must be refused before anything is sent
// (issue 31), and the exception barrier (an answer of an unexpected shape is an internal error
// with exit 1, not an abort).
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
using testing::ExpectOneLineBadInput;
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

// --expires-in 0 or less was dropped: the token never expired. Now exit 2, nothing sent.
TEST(CtlCli, ExpiresInMustBePositiveAndNothingIsSent) {
  TempDir dir;
  CannedServer server(201, R"({"id": "tok_1", "role": "admin", "tenant": null, "revoked": false, "expires_ms": null})");
  ASSERT_GT(server.port(), 0);
  for (const std::string v : {"-5", "0", "=-5"}) {
    CommandResult r = RunTessera(dir, "ctl tokens create --role admin --expires-in" + (v[0] == '=' ? v : " " + v),
                                 Env(server));
    ExpectOneLineBadInput(r, "tessera ctl tokens create: --expires-in must be > 0 seconds, got ");
  }
  EXPECT_TRUE(server.requests().empty());
  CommandResult ok = RunTessera(dir, "ctl tokens create --role admin --expires-in 60", Env(server));
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("\"expires_in_s\":60"));
}

// --node binds a node-agent token to one node: sent as "node", shown in the NODE column.
TEST(CtlCli, TokensCreateSendsTheNodeAndTheTableShowsIt) {
  TempDir dir;
  CannedServer server(201, R"({"id": "tok_1", "role": "node-agent", "tenant": null, "node": "gpu-07",
                               "revoked": false, "expires_ms": null, "token": "tsr_x"})");
  ASSERT_GT(server.port(), 0);
  CommandResult r = RunTessera(dir, "ctl tokens create --role node-agent --node gpu-07", Env(server));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("\"node\":\"gpu-07\""));
  EXPECT_THAT(r.out, HasSubstr("NODE"));
  EXPECT_THAT(r.out, HasSubstr("gpu-07"));
}

// An empty --token-file fell back to $TESSERA_TOKEN (the admin's); --token with --token-file
// silently used --token. Both are bad flags now, for ctl and for `tessera run --server`.
TEST(CtlCli, AnEmptyTokenFileOrBothTokenFlagsAreRefused) {
  TempDir dir;
  CannedServer server(200, R"({"tenants": []})");
  ASSERT_GT(server.port(), 0);
  testing::WriteTextFile(dir.File("empty.token"), "");
  testing::WriteTextFile(dir.File("blank.token"), "  \n");
  testing::WriteTextFile(dir.File("good.token"), "from-the-file\n");
  for (const std::string file : {"empty.token", "blank.token"}) {
    CommandResult r = RunTessera(dir, "ctl tenants list --token-file " + dir.File(file), Env(server));
    ExpectOneLineBadInput(r, "tessera ctl tenants list: --token-file '" + dir.File(file) + "' is empty");
    r = RunTessera(dir, "run --tenant t --server " + server.url() + " --token-file " + dir.File(file) + " -- true",
                   Env(server));
    ExpectOneLineBadInput(r, "tessera run: --token-file '" + dir.File(file) + "' is empty");
  }
  CommandResult r = RunTessera(dir, "ctl tenants list --token x --token-file " + dir.File("good.token"), Env(server));
  ExpectOneLineBadInput(r, "--token and --token-file: give one of them, not both");
  r = RunTessera(dir, "run --tenant t --server " + server.url() + " --token x --token-file " + dir.File("good.token") +
                          " -- true",
                 Env(server));
  ExpectOneLineBadInput(r, "tessera run: --token and --token-file: give one of them, not both");
  r = RunTessera(dir, "ctl events --token x --token-file " + dir.File("good.token"), Env(server));
  ExpectOneLineBadInput(r, "--token and --token-file");
  r = RunTessera(dir, "agent --server " + server.url() + " --token-file " + dir.File("blank.token"), Env(server));
  ExpectOneLineBadInput(r, "tessera agent: --token-file '" + dir.File("blank.token") + "' is empty");
  EXPECT_TRUE(server.requests().empty());
  // A good file wins over $TESSERA_TOKEN.
  r = RunTessera(dir, "ctl tenants list --token-file " + dir.File("good.token"), Env(server));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(server.requests().size(), 1u);
  EXPECT_THAT(server.requests()[0], HasSubstr("Bearer from-the-file\r\n"));
}

}  // namespace
}  // namespace tessera
