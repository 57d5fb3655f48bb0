// The control plane's HTTP server over real sockets: routing, path and query parameters, the
// errors every client gets whatever the handler does (404, 405 with Allow, 413, 400), keep-alive,
// idle connections that hold no thread, and concurrent clients.
#include "src/daemon/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <stdexcept>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::daemon {
namespace {

using ::testing::HasSubstr;

// A blocking client connection on loopback.
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    timeval tv{10, 0};  // a hang fails the test instead of the suite
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~Client() { close(fd_); }
  bool ok() const { return ok_; }
  bool Send(const std::string& raw) {
    size_t sent = 0;
    while (sent < raw.size()) {
      const ssize_t n = send(fd_, raw.data() + sent, raw.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }
  // One response: the status code and the body (by Content-Length); status 0 on EOF/timeout.
  std::pair<int, std::string> Read(std::string* headers = nullptr) {
    while (buf_.find("\r\n\r\n") == std::string::npos)
      if (!Fill()) return {0, ""};
    const size_t end = buf_.find("\r\n\r\n");
    const std::string head = buf_.substr(0, end);
    size_t length = 0;
    const size_t cl = head.find("Content-Length: ");
    if (cl != std::string::npos) length = std::stoul(head.substr(cl + 16));
    while (buf_.size() < end + 4 + length)
      if (!Fill()) return {0, ""};
    const int status = std::stoi(head.substr(9, 3));
    std::string body = buf_.substr(end + 4, length);
    buf_.erase(0, end + 4 + length);
    if (headers) *headers = head;
    return {status, body};
  }
  std::pair<int, std::string> Get(const std::string& target, std::string* headers = nullptr) {
    if (!Send("GET " + target + " HTTP/1.1\r\nHost: t\r\n\r\n")) return {0, ""};
    return Read(headers);
  }
  // Everything read so far once it holds `needle` ("" on EOF or the 10 s timeout first).
  std::string ReadUntil(const std::string& needle) {
    while (buf_.find(needle) == std::string::npos)
      if (!Fill()) return "";
    return buf_;
  }
  // Reads to the end of the stream: true when the server closed it (false: timeout).
  bool ReadToEof(std::string* all = nullptr) {
    char tmp[4096];
    for (;;) {
      const ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
      if (n == 0) break;
      if (n < 0) return false;
      buf_.append(tmp, static_cast<size_t>(n));
    }
    if (all) *all = buf_;
    return true;
  }
  // Whether the server closed the connection (reads EOF).
  bool Closed() {
    char c;
    return recv(fd_, &c, 1, 0) == 0;
  }

 private:
  bool Fill() {
    char tmp[65536];
    const ssize_t n = recv(fd_, tmp, sizeof tmp, 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  bool ok_ = false;
  std::string buf_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions o;
    o.listen_port = 0;
    o.max_body_bytes = 1 << 20;
    server_ = std::make_unique<HttpServer>(o);
    ASSERT_TRUE(server_->Route("GET", "/v1/workloads/{id}", [](const HttpRequest& r) {
      nlohmann::json j = {{"id", r.path_params.at("id")}, {"query", r.query}};
      return HttpResponse::Json(200, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }).ok());
    ASSERT_TRUE(server_->Route("DELETE", "/v1/workloads/{id}", [](const HttpRequest&) {
      return HttpResponse::Json(204, "");
    }).ok());
    ASSERT_TRUE(server_->Route("POST", "/v1/echo", [](const HttpRequest& r) {
      return HttpResponse::Json(200, nlohmann::json{{"size", r.body.size()},
                                                    {"auth", r.Header("AUTHORIZATION")}}.dump());
    }).ok());
    ASSERT_TRUE(server_->Route("GET", "/v1/throws", [](const HttpRequest& r) -> HttpResponse {
      if (r.query.count("json") != 0) return HttpResponse::Json(200, nlohmann::json::parse("{").dump());
      if (r.query.count("int") != 0) throw 42;
      throw std::runtime_error("handler bug");
    }).ok());
    ASSERT_TRUE(server_->Start().ok());
  }
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, RoutesWithPathAndQueryParameters) {
  Client c(server_->port());
  ASSERT_TRUE(c.ok());
  auto [status, body] = c.Get("/v1/workloads/42?tenant=team%20a&limit=100&flag");
  EXPECT_EQ(status, 200);
  const auto j = nlohmann::json::parse(body);
  EXPECT_EQ(j["id"], "42");
  EXPECT_EQ(j["query"]["tenant"], "team a");
  EXPECT_EQ(j["query"]["limit"], "100");
  EXPECT_EQ(j["query"]["flag"], "");
  // Keep-alive: a second request on the same connection.
  auto second = c.Get("/v1/workloads/a%2Fb");
  EXPECT_EQ(second.first, 200);
  EXPECT_EQ(nlohmann::json::parse(second.second)["id"], "a/b");
}

TEST_F(HttpServerTest, AHandlerThatThrowsGetsA500AndTheServerKeepsServing) {
  Client c(server_->port());
  ASSERT_TRUE(c.ok());
  for (const char* target : {"/v1/throws", "/v1/throws?json", "/v1/throws?int"}) {
    auto [status, body] = c.Get(target);
    EXPECT_EQ(status, 500) << target;
    const auto j = nlohmann::json::parse(body);
    EXPECT_EQ(j["error"]["code"], "internal") << target;
    EXPECT_NE(j["error"]["message"].get<std::string>().find("GET /v1/throws"), std::string::npos) << body;
  }
  // The same connection and a new one are still served.
  EXPECT_EQ(c.Get("/v1/workloads/1").first, 200);
  Client again(server_->port());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.Get("/v1/workloads/2").first, 200);
}

TEST_F(HttpServerTest, UnknownPathIs404AndWrongMethodIs405WithAllow) {
  Client c(server_->port());
  auto [status, body] = c.Get("/v1/nothing");
  EXPECT_EQ(status, 404);
  EXPECT_EQ(nlohmann::json::parse(body)["error"]["code"], "not_found");
  EXPECT_EQ(c.Get("/v1/workloads").first, 404);  // no id: the pattern needs one
  EXPECT_EQ(c.Get("/v1/workloads/").first, 404);
  std::string headers;
  ASSERT_TRUE(c.Send("PUT /v1/workloads/7 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"));
  auto put = c.Read(&headers);
  EXPECT_EQ(put.first, 405);
  EXPECT_THAT(headers, HasSubstr("Allow: GET, DELETE"));
  EXPECT_EQ(nlohmann::json::parse(put.second)["error"]["code"], "method_not_allowed");
}

TEST_F(HttpServerTest, BodyOverTheLimitIs413AndTheConnectionCloses) {
  Client c(server_->port());
  const std::string big(2 << 20, 'x');
  ASSERT_TRUE(c.Send("POST /v1/echo HTTP/1.1\r\nHost: t\r\nContent-Length: " +
                     std::to_string(big.size()) + "\r\n\r\n"));
  c.Send(big);  // the server may close before all of it is sent
  auto [status, body] = c.Read();
  EXPECT_EQ(status, 413);
  EXPECT_EQ(nlohmann::json::parse(body)["error"]["code"], "body_too_large");
  // Just under the limit is fine.
  Client d(server_->port());
  const std::string fits((1 << 20) - 1, 'y');
  ASSERT_TRUE(d.Send("POST /v1/echo HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer abc\r\nContent-Length: " +
                     std::to_string(fits.size()) + "\r\n\r\n" + fits));
  auto ok = d.Read();
  EXPECT_EQ(ok.first, 200);
  EXPECT_EQ(nlohmann::json::parse(ok.second)["size"], fits.size());
  EXPECT_EQ(nlohmann::json::parse(ok.second)["auth"], "Bearer abc");
}

// Found by http_request_fuzzer: a 404 quoting a path that is not UTF-8 threw from the JSON
// encoder and ended the process.
TEST_F(HttpServerTest, APathThatIsNotUtf8GetsA404NotACrash) {
  Client c(server_->port());
  auto [status, body] = c.Get("/v1/work%A6%A6loads");
  EXPECT_EQ(status, 404);
  EXPECT_TRUE(nlohmann::json::accept(body)) << body;
  EXPECT_EQ(c.Get("/v1/workloads/%FF").first, 200);  // a parameter need not be UTF-8 either
}

TEST_F(HttpServerTest, MalformedRequestsGet400AndAreClosed) {
  for (const char* raw : {"NOT HTTP AT ALL\r\n\r\n", "GET /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n",
                          "GET /x HTTP/1.1\r\nBad Header Line\r\n\r\n",
                          "GET x HTTP/1.1\r\nHost: t\r\n\r\n"}) {
    Client c(server_->port());
    ASSERT_TRUE(c.Send(raw));
    auto [status, body] = c.Read();
    EXPECT_EQ(status, 400) << raw;
    EXPECT_EQ(nlohmann::json::parse(body)["error"]["code"], "bad_request") << raw;
    EXPECT_TRUE(c.Closed()) << raw;
  }
}

TEST_F(HttpServerTest, IdleConnectionsHoldNoThread) {
  // 200 idle keep-alive clients on a 2-thread server: a new client is still answered at once.
  std::vector<std::unique_ptr<Client>> idle;
  for (int k = 0; k < 200; ++k) {
    idle.push_back(std::make_unique<Client>(server_->port()));
    ASSERT_EQ(idle.back()->Get("/v1/workloads/1").first, 200);
  }
  Client fresh(server_->port());
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(fresh.Get("/v1/workloads/2").first, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST_F(HttpServerTest, ConcurrentClientsAllGetTheirOwnAnswers) {
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      Client c(server_->port());
      for (int k = 0; k < 200; ++k) {
        const std::string id = std::to_string(t * 1000 + k);
        auto [status, body] = c.Get("/v1/workloads/" + id);
        if (status != 200 || nlohmann::json::parse(body)["id"] != id) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(HttpServer, BadRoutesAndAddressesAreClearErrors) {
  HttpServer s({.listen_host = "127.0.0.1", .listen_port = 0});
  EXPECT_THAT(s.Route("GET", "v1/x", nullptr).message(), HasSubstr("starts with '/'"));
  EXPECT_THAT(s.Route("GET", "/v1/{}", nullptr).message(), HasSubstr("needs a name"));
  HttpServer bad({.listen_host = "not-an-ip", .listen_port = 0});
  EXPECT_THAT(bad.Start().message(), HasSubstr("not an IP address"));
  // A port that is taken.
  HttpServer first({.listen_host = "127.0.0.1", .listen_port = 0});
  ASSERT_TRUE(first.Start().ok());
  HttpServer second({.listen_host = "127.0.0.1", .listen_port = first.port()});
  const Status st = second.Start();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable);
  EXPECT_THAT(st.message(), HasSubstr("127.0.0.1:" + std::to_string(first.port())));
}

TEST(HttpServer, StopClosesIdleConnectionsAndCanBeRepeated) {
  HttpServer s({.listen_host = "127.0.0.1", .listen_port = 0});
  ASSERT_TRUE(s.Route("GET", "/x", [](const HttpRequest&) { return HttpResponse::Json(200, "{}"); }).ok());
  ASSERT_TRUE(s.Start().ok());
  Client c(s.port());
  ASSERT_EQ(c.Get("/x").first, 200);
  s.Stop();
  EXPECT_TRUE(c.Closed());
  s.Stop();
}

// A deferred response: the handler returns at once and the connection waits holding no thread
// (a one-thread server answers another client meanwhile); Finish from another thread writes the
// answer and the connection goes on; a make that throws is a 500, a dropped answer too, and a
// Finish after Stop is dropped quietly. Handle (no socket) waits for the answer.
TEST(HttpServer, ADeferredAnswerIsWrittenWhenFinishedAndHoldsNoThreadMeanwhile) {
  HttpServer s({.listen_host = "127.0.0.1", .listen_port = 0, .threads = 1});
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::shared_ptr<HttpAnswer>> answers;
  ASSERT_TRUE(s.Route("POST", "/later", [&](const HttpRequest& r) {
    HttpResponse later;
    later.defer = [&, body = r.body](std::shared_ptr<HttpAnswer> a) {
      if (body == "drop") return;  // dropped: a 500
      std::lock_guard<std::mutex> lock(mu);
      answers.push_back(std::move(a));
      cv.notify_all();
    };
    return later;
  }).ok());
  ASSERT_TRUE(s.Route("GET", "/now", [](const HttpRequest&) { return HttpResponse::Json(200, "{\"now\":1}"); }).ok());
  ASSERT_TRUE(s.Start().ok());
  auto next_answer = [&](size_t n) {
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return answers.size() >= n; }));
    return answers.size() >= n ? answers[n - 1] : nullptr;
  };
  const std::string post = "POST /later HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\n\r\nx";
  Client a(s.port());
  ASSERT_TRUE(a.Send(post));
  std::shared_ptr<HttpAnswer> first = next_answer(1);
  ASSERT_NE(first, nullptr);
  Client b(s.port());  // the only server thread is free while `first` waits
  EXPECT_EQ(b.Get("/now").first, 200);
  std::thread([first] {
    first->Finish([] { return HttpResponse::Json(201, "{\"made\":true}"); });
    first->Finish([] { return HttpResponse::Json(500, "{}"); });  // only the first call counts
  }).join();
  auto [status, body] = a.Read();
  EXPECT_EQ(status, 201);
  EXPECT_EQ(body, "{\"made\":true}");
  EXPECT_EQ(a.Get("/now").first, 200);  // keep-alive goes on
  // A make that throws.
  ASSERT_TRUE(a.Send(post));
  next_answer(2)->Finish([]() -> HttpResponse { throw std::runtime_error("make bug"); });
  auto thrown = a.Read();
  EXPECT_EQ(thrown.first, 500);
  EXPECT_THAT(thrown.second, HasSubstr("POST /later"));
  // An answer dropped unfinished.
  ASSERT_TRUE(a.Send("POST /later HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\ndrop"));
  EXPECT_EQ(a.Read().first, 500);
  // Handle waits for the answer, made on the calling thread.
  std::thread finisher([&] { next_answer(3)->Finish([] { return HttpResponse::Json(202, "{}"); }); });
  HttpRequest req;
  req.method = "POST";
  req.raw_path = req.path = "/later";
  req.body = "x";
  EXPECT_EQ(s.Handle(req).status, 202);
  finisher.join();
  // After Stop a Finish goes nowhere.
  ASSERT_TRUE(a.Send(post));
  std::shared_ptr<HttpAnswer> late = next_answer(4);
  s.Stop();
  late->Finish([] { return HttpResponse::Json(201, "{}"); });
  EXPECT_TRUE(a.Closed());
}

// A streamed response: the head without a length, then whatever the holder sends, from any
// thread, until it closes; a client that leaves is noticed; one that does not read is cut off.
class StreamTest : public ::testing::Test {
 protected:
  void Start(HttpServerOptions o = {}) {
    o.listen_host = "127.0.0.1";
    o.listen_port = 0;
    server_ = std::make_unique<HttpServer>(o);
    ASSERT_TRUE(server_->Route("GET", "/events", [this](const HttpRequest&) {
      HttpResponse r;
      r.content_type = "text/event-stream";
      r.headers = {{"Cache-Control", "no-cache"}};
      r.body = "retry: 3000\n\n";
      r.open_stream = [this](std::shared_ptr<HttpStream> s) {
        std::lock_guard<std::mutex> lock(mu_);
        streams_.push_back(std::move(s));
      };
      return r;
    }).ok());
    ASSERT_TRUE(server_->Start().ok());
  }
  std::shared_ptr<HttpStream> WaitStream(size_t n = 1) {
    for (int i = 0; i < 500; ++i) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (streams_.size() >= n) return streams_[n - 1];
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return nullptr;
  }
  std::mutex mu_;
  std::vector<std::shared_ptr<HttpStream>> streams_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(StreamTest, TheHeadHasNoLengthAndWhatIsSentArrivesInOrderUntilClose) {
  Start();
  Client c(server_->port());
  ASSERT_TRUE(c.Send("GET /events HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::shared_ptr<HttpStream> s = WaitStream();
  ASSERT_NE(s, nullptr);
  const std::string head = c.ReadUntil("retry: 3000\n\n");
  EXPECT_THAT(head, ::testing::StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(head, HasSubstr("Content-Type: text/event-stream\r\n"));
  EXPECT_THAT(head, HasSubstr("Cache-Control: no-cache\r\n"));
  EXPECT_THAT(head, HasSubstr("Connection: close\r\n"));
  EXPECT_THAT(head, ::testing::Not(HasSubstr("Content-Length")));
  std::vector<std::thread> senders;
  for (int t = 0; t < 4; ++t)
    senders.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) EXPECT_TRUE(s->Send("t" + std::to_string(t) + "-" + std::to_string(i) + "\n"));
    });
  for (std::thread& t : senders) t.join();
  s->Close();
  std::string all;
  ASSERT_TRUE(c.ReadToEof(&all));
  // Each sender's lines in its order, none lost.
  for (int t = 0; t < 4; ++t) {
    size_t at = 0;
    for (int i = 0; i < 50; ++i) {
      const size_t next = all.find("t" + std::to_string(t) + "-" + std::to_string(i) + "\n", at);
      ASSERT_NE(next, std::string::npos) << t << " " << i;
      at = next;
    }
  }
  EXPECT_FALSE(s->open());
  EXPECT_FALSE(s->Send("late"));
}

TEST_F(StreamTest, AClientThatLeavesClosesTheStream) {
  Start();
  auto c = std::make_unique<Client>(server_->port());
  ASSERT_TRUE(c->Send("GET /events HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::shared_ptr<HttpStream> s = WaitStream();
  ASSERT_NE(s, nullptr);
  ASSERT_NE(c->ReadUntil("retry"), "");
  c.reset();  // the client closes its socket
  bool closed = false;
  for (int i = 0; i < 300 && !closed; ++i) {
    (void)s->Send(": ping\n\n");
    closed = !s->open();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(closed);
}

TEST_F(StreamTest, AClientThatDoesNotReadIsCutOffAtTheBacklogLimit) {
  Start({.max_stream_backlog_bytes = 64 * 1024});
  Client c(server_->port());  // sends the request and then never reads
  ASSERT_TRUE(c.Send("GET /events HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::shared_ptr<HttpStream> s = WaitStream();
  ASSERT_NE(s, nullptr);
  const std::string chunk(16 * 1024, 'x');
  bool cut = false;
  // The kernel's socket buffers take a few MiB first; then the backlog grows past the limit.
  for (int i = 0; i < 4000 && !cut; ++i) {
    cut = !s->Send(chunk);
    if (i % 64 == 63) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(cut);
}

TEST_F(StreamTest, StoppingTheServerClosesOpenStreams) {
  Start();
  Client c(server_->port());
  ASSERT_TRUE(c.Send("GET /events HTTP/1.1\r\nHost: t\r\n\r\n"));
  const std::shared_ptr<HttpStream> s = WaitStream();
  ASSERT_NE(s, nullptr);
  server_->Stop();
  EXPECT_TRUE(c.ReadToEof());
  EXPECT_FALSE(s->Send("after stop"));
}

TEST(Query, DecodesPercentAndPlusAndKeepsMalformedEscapes) {
  const auto q = ParseQuery("a=1&b=x%20y+z&&c&d=%zz&e=%4");
  EXPECT_EQ(q.at("a"), "1");
  EXPECT_EQ(q.at("b"), "x y z");
  EXPECT_EQ(q.at("c"), "");
  EXPECT_EQ(q.at("d"), "%zz");
  EXPECT_EQ(q.at("e"), "%4");
  EXPECT_EQ(PercentDecode("a+b%2F"), "a+b/");
}

}  // namespace
}  // namespace tessera::daemon
