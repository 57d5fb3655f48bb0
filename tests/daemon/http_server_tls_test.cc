// The HTTP server over TLS with the API client on the other end: requests and keep-alive,
// reconnecting after the server went away, a server-sent event stream that ends cleanly, the
// certificate checks (wrong CA, wrong name), a plain-HTTP or silent client on the TLS port
// (no answer, no thread taken, others served), and certificate files that cannot be used.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/daemon/http_server.h"
#include "tessera/daemon/api_client.h"
#include "tests/testing/tls_certs.h"

namespace tessera::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing::MakeSelfSignedCert;
using testing::TempDir;
using testing::TlsFiles;

// A raw TCP connection (what a plain-HTTP client or a stalled TLS client looks like).
class RawClient {
 public:
  explicit RawClient(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval tv{10, 0};  // a hang fails the test instead of the suite
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~RawClient() { close(fd_); }
  bool ok() const { return ok_; }
  bool Send(const std::string& raw) { return send(fd_, raw.data(), raw.size(), MSG_NOSIGNAL) == ssize_t(raw.size()); }
  // Reads until the server closes: true then, with what came in *all (false: the 10 s timeout).
  bool ReadToEof(std::string* all) {
    char tmp[4096];
    for (;;) {
      const ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
      all->append(tmp, static_cast<size_t>(n));
    }
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
};

class TlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tls_ = MakeSelfSignedCert(dir_, "server");
    ASSERT_TRUE(tls_.ok()) << tls_.error;
  }
  void Start(HttpServerOptions o = {}, uint16_t port = 0) {
    o.listen_host = "127.0.0.1";
    o.listen_port = port;
    o.tls_cert_file = tls_.cert;
    o.tls_key_file = tls_.key;
    server_ = std::make_unique<HttpServer>(o);
    ASSERT_TRUE(server_->Route("GET", "/v1/peer", [](const HttpRequest& r) {
      return HttpResponse::Json(200, nlohmann::json{{"peer", r.peer}}.dump());
    }).ok());
    ASSERT_TRUE(server_->Route("POST", "/v1/echo", [](const HttpRequest& r) {
      return HttpResponse::Json(201, nlohmann::json{{"body", r.body}, {"auth", r.Header("authorization")}}.dump());
    }).ok());
    ASSERT_TRUE(server_->Route("GET", "/events", [this](const HttpRequest&) {
      HttpResponse r;
      r.content_type = "text/event-stream";
      r.body = "retry: 3000\n\n";
      r.open_stream = [this](std::shared_ptr<HttpStream> s) {
        std::lock_guard<std::mutex> lock(mu_);
        streams_.push_back(std::move(s));
      };
      return r;
    }).ok());
    Status st = server_->Start();
    ASSERT_TRUE(st.ok()) << st.message();
  }
  std::string Url(const std::string& host = "127.0.0.1") const {
    return "https://" + host + ":" + std::to_string(server_->port());
  }
  std::unique_ptr<ApiClient> Client(const std::string& ca_file, const std::string& host = "127.0.0.1") {
    StatusOr<std::unique_ptr<ApiClient>> c = ApiClient::Create(Url(host), {.token = "tok", .timeout_ms = 10000, .ca_file = ca_file});
    EXPECT_TRUE(c.ok()) << c.status().message();
    return c.ok() ? std::move(*c) : nullptr;
  }
  std::shared_ptr<HttpStream> WaitStream() {
    for (int i = 0; i < 1000; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!streams_.empty()) return streams_.front();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return nullptr;
  }

  TempDir dir_;
  TlsFiles tls_;
  std::mutex mu_;
  std::vector<std::shared_ptr<HttpStream>> streams_;
  std::unique_ptr<HttpServer> server_;
};

std::string Peer(const ApiResponse& r) { return nlohmann::json::parse(r.body, nullptr, false).value("peer", ""); }

TEST_F(TlsServerTest, RequestsAndAnswersOverOneKeptAliveConnection) {
  Start();
  std::unique_ptr<ApiClient> c = Client(tls_.cert);
  ASSERT_NE(c, nullptr);
  StatusOr<ApiResponse> a = c->Call("GET", "/v1/peer");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->status, 200);
  StatusOr<ApiResponse> echo = c->Call("POST", "/v1/echo", R"({"x":1})");
  ASSERT_TRUE(echo.ok()) << echo.status().message();
  EXPECT_EQ(echo->status, 201);
  EXPECT_EQ(echo->body, R"({"auth":"Bearer tok","body":"{\"x\":1}"})");
  StatusOr<ApiResponse> b = c->Call("GET", "/v1/peer");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_FALSE(Peer(*a).empty());
  EXPECT_EQ(Peer(*a), Peer(*b));  // the same client port: the connection was kept
}

TEST_F(TlsServerTest, AHostNameIsVerifiedAndSentAsSni) {
  Start();
  std::unique_ptr<ApiClient> c = Client(tls_.cert, "localhost");
  ASSERT_NE(c, nullptr);
  StatusOr<ApiResponse> r = c->Call("GET", "/v1/peer");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
}

TEST_F(TlsServerTest, TheClientReconnectsOnceWhenTheServerWentAway) {
  Start();
  std::unique_ptr<ApiClient> c = Client(tls_.cert);
  ASSERT_NE(c, nullptr);
  StatusOr<ApiResponse> a = c->Call("GET", "/v1/peer");
  ASSERT_TRUE(a.ok()) << a.status().message();
  const uint16_t port = server_->port();
  server_->Stop();  // closes the kept connection
  server_.reset();
  Start({}, port);
  StatusOr<ApiResponse> b = c->Call("GET", "/v1/peer");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->status, 200);
  EXPECT_NE(Peer(*a), Peer(*b));
}

TEST_F(TlsServerTest, AnEventStreamArrivesInOrderAndEndsCleanly) {
  Start();
  std::unique_ptr<ApiClient> c = Client(tls_.cert);
  ASSERT_NE(c, nullptr);
  std::mutex got_mu;
  std::string got;
  StatusOr<ApiResponse> result = InternalError("not run");
  std::thread reader([&] {
    result = c->Stream("/events", {}, [&](std::string_view piece) {
      std::lock_guard<std::mutex> lock(got_mu);
      got += piece;
      return true;
    });
  });
  const std::shared_ptr<HttpStream> s = WaitStream();
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->Send("id: 1\ndata: {\"a\":1}\n\n"));
  EXPECT_TRUE(s->Send("id: 2\ndata: {\"a\":2}\n\n"));
  s->Close();
  reader.join();
  // A clean end (close_notify): a truncated TLS stream would be UNAVAILABLE "broke".
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->headers["content-type"], "text/event-stream");
  EXPECT_EQ(got, "retry: 3000\n\nid: 1\ndata: {\"a\":1}\n\nid: 2\ndata: {\"a\":2}\n\n");
}

TEST_F(TlsServerTest, AStreamReaderThatLeavesClosesTheStream) {
  Start();
  std::unique_ptr<ApiClient> c = Client(tls_.cert);
  ASSERT_NE(c, nullptr);
  std::thread reader([&] {
    StatusOr<ApiResponse> r = c->Stream("/events", {}, [](std::string_view piece) {
      return piece.find("bye") == std::string_view::npos;
    });
    EXPECT_TRUE(r.ok()) << r.status().message();
  });
  const std::shared_ptr<HttpStream> s = WaitStream();
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->Send("data: bye\n\n"));
  reader.join();
  bool closed = false;
  for (int i = 0; i < 1000 && !closed; ++i) {
    closed = !s->Send(": ping\n\n");
    if (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(closed);
}

TEST_F(TlsServerTest, AClientThatDoesNotTrustTheCertificateIsRefusedWithTheReason) {
  Start();
  const TlsFiles other = MakeSelfSignedCert(dir_, "other");
  ASSERT_TRUE(other.ok()) << other.error;
  std::unique_ptr<ApiClient> c = Client(other.cert);
  ASSERT_NE(c, nullptr);
  StatusOr<ApiResponse> r = c->Call("GET", "/v1/peer");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("127.0.0.1:" + std::to_string(server_->port())));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("certificate verify failed"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("self-signed certificate"));
  // The system's store does not know it either.
  std::unique_ptr<ApiClient> system = Client("");
  ASSERT_NE(system, nullptr);
  r = system->Call("GET", "/v1/peer");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("certificate verify failed"));
  // Nor does a stream get through.
  r = c->Stream("/events", {}, [](std::string_view) { return true; });
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("certificate verify failed"));
}

TEST_F(TlsServerTest, ACertificateForAnotherNameIsRefused) {
  tls_ = MakeSelfSignedCert(dir_, "elsewhere", "DNS:elsewhere.example");
  ASSERT_TRUE(tls_.ok()) << tls_.error;
  Start();
  std::unique_ptr<ApiClient> c = Client(tls_.cert);
  ASSERT_NE(c, nullptr);
  StatusOr<ApiResponse> r = c->Call("GET", "/v1/peer");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("certificate verify failed"));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not for 127.0.0.1"));
}

TEST_F(TlsServerTest, PlainHttpAndSilentClientsGetNoAnswerAndTakeNoThread) {
  HttpServerOptions o;
  o.threads = 1;
  o.tls_handshake_timeout_s = 1;
  Start(o);
  RawClient silent(server_->port());  // never starts the handshake
  ASSERT_TRUE(silent.ok());
  RawClient plain(server_->port());
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(plain.Send("GET /v1/peer HTTP/1.1\r\nHost: t\r\n\r\n"));
  std::string answer;
  EXPECT_TRUE(plain.ReadToEof(&answer));
  EXPECT_THAT(answer, Not(HasSubstr("HTTP/1.1")));  // at most a TLS alert
  // The one server thread is free: a TLS client is served while the silent one waits.
  std::unique_ptr<ApiClient> c = Client(tls_.cert);
  ASSERT_NE(c, nullptr);
  StatusOr<ApiResponse> r = c->Call("GET", "/v1/peer");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  // Our plain-HTTP client on the TLS port: no answer, a clear error.
  StatusOr<std::unique_ptr<ApiClient>> http = ApiClient::Create("http://127.0.0.1:" + std::to_string(server_->port()), "");
  ASSERT_TRUE(http.ok());
  StatusOr<ApiResponse> h = (*http)->Call("GET", "/v1/peer");
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), StatusCode::kUnavailable);
  // The handshake timeout closes the silent one.
  std::string nothing;
  EXPECT_TRUE(silent.ReadToEof(&nothing));
  EXPECT_EQ(nothing, "");
  r = c->Call("GET", "/v1/peer");
  ASSERT_TRUE(r.ok()) << r.status().message();
}

TEST(TlsServer, CertificateFilesThatCannotBeUsedAreInvalidArguments) {
  TempDir dir;
  const TlsFiles a = MakeSelfSignedCert(dir, "a");
  const TlsFiles b = MakeSelfSignedCert(dir, "b");
  ASSERT_TRUE(a.ok() && b.ok()) << a.error << b.error;
  const auto start = [](std::string cert, std::string key) {
    HttpServer s({.listen_host = "127.0.0.1", .listen_port = 0, .tls_cert_file = cert, .tls_key_file = key});
    return s.Start();
  };
  const std::string missing = dir.File("missing.pem");
  Status st = start(missing, a.key);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("certificate file '" + missing + "'"));
  st = start(a.cert, missing);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("key file '" + missing + "'"));
  st = start(a.key, a.key);  // a key is not a certificate
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("certificate file '" + a.key + "'"));
  st = start(a.cert, b.key);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("key file '" + b.key + "'"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("mismatch"));
  st = start(a.cert, "");
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("both"));
  EXPECT_TRUE(start(a.cert, a.key).ok());
}

TEST(TlsClient, UrlsAndCaFilesAreCheckedAtCreate) {
  TempDir dir;
  StatusOr<std::unique_ptr<ApiClient>> c = ApiClient::Create("https://cp.example", ApiClientOptions{});
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)->host(), "cp.example");
  EXPECT_EQ((*c)->port(), "443");
  c = ApiClient::Create("ftp://cp.example", ApiClientOptions{});
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  const std::string missing = dir.File("ca.pem");
  c = ApiClient::Create("https://cp.example:8443", ApiClientOptions{.ca_file = missing});
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("CA file '" + missing + "'"));
  testing::WriteTextFile(missing, "not a certificate\n");
  c = ApiClient::Create("https://cp.example:8443", ApiClientOptions{.ca_file = missing});
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("CA file '" + missing + "'"));
}

}  // namespace
}  // namespace tessera::daemon
