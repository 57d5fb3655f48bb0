// Running real daemons in tests: `tessera serve` (or any command that prints a line with
// "http://HOST:PORT" or "https://HOST:PORT" when it listens) as a child process, and a small blocking HTTP/1.1 client.
//
//   ServeProcess serve({TESSERA_BINARY, "serve", "--db", db, "--listen", "127.0.0.1:0"},
//                      {"TESSERA_BOOTSTRAP_TOKEN=..."});
//   ASSERT_TRUE(serve.WaitListening());          // reads stdout up to the "http://..." line
//   HttpResult r = HttpCall(serve.port(), "GET", "/healthz");
//   serve.Kill(SIGKILL);                         // or Stop() (SIGTERM and wait)
//
// Thread-safety: a ServeProcess from one thread, except Signal (any thread). HttpCall is
// reentrant.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::testing {

class ServeProcess {
 public:
  ServeProcess(std::vector<std::string> argv, std::vector<std::string> env = {}) {
    int out[2];
    if (::pipe(out) != 0) return;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::close(out[1]);
      for (std::string& e : env) ::putenv(e.data());
      std::vector<char*> args;
      for (std::string& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = out[0];
    pid_.store(pid);
  }
  ~ServeProcess() {
    if (pid_.load() > 0) Kill(SIGKILL);
    if (out_ >= 0) ::close(out_);
  }
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  // Reads stdout until a line with "http://HOST:PORT" or "https://HOST:PORT" (false on EOF or
  // after `timeout_ms`).
  bool WaitListening(int timeout_ms = 20000) {
    std::string line;
    while (true) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, timeout_ms) <= 0) return false;
      char c;
      if (::read(out_, &c, 1) != 1) return false;
      output_ += c;
      if (c != '\n') {
        line += c;
        continue;
      }
      size_t at = line.find("http://");
      if (at == std::string::npos && (at = line.find("https://")) != std::string::npos) ++at;
      if (at != std::string::npos) {
        const size_t colon = line.find(':', at + 7);
        if (colon != std::string::npos) {
          port_ = std::atoi(line.c_str() + colon + 1);
          return port_ > 0;
        }
      }
      line.clear();
    }
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_.load(); }
  const std::string& output() const { return output_; }
  // Sends `sig` (from any thread); the process is reaped by Wait.
  void Signal(int sig) {
    const pid_t p = pid_.load();
    if (p > 0) ::kill(p, sig);
  }
  // Waits for the process to end; its exit code, or 128 + signal.
  int Wait() {
    const pid_t p = pid_.exchange(0);
    if (p <= 0) return -1;
    int status = 0;
    ::waitpid(p, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  int Kill(int sig) {
    Signal(sig);
    return Wait();
  }

 private:
  std::atomic<pid_t> pid_{0};
  int out_ = -1;
  int port_ = 0;
  std::string output_;
};

struct HttpResult {
  int status = 0;  // 0: no answer (refused, reset, cut short)
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

// One request on a fresh connection (Connection: close) to 127.0.0.1:port.
inline HttpResult HttpCall(int port, const std::string& method, const std::string& target,
                           const std::string& body = "", const std::vector<std::string>& headers = {},
                           int timeout_ms = 10000) {
  HttpResult out;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return out;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return out;
  }
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  for (const std::string& h : headers) req += h + "\r\n";
  if (!body.empty() || method == "POST" || method == "PATCH")
    req += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n" + body;
  size_t sent = 0;
  while (sent < req.size()) {
    const ssize_t n = ::send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      ::close(fd);
      return out;
    }
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buf[8192];
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) break;
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos || raw.compare(0, 9, "HTTP/1.1 ") != 0) return out;
  size_t line_end = raw.find("\r\n");
  const int status = std::atoi(raw.c_str() + 9);
  size_t pos = line_end + 2;
  while (pos < head_end) {
    line_end = raw.find("\r\n", pos);
    const std::string line = raw.substr(pos, line_end - pos);
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      out.headers[name] = line.substr(v);
    }
    pos = line_end + 2;
  }
  out.body = raw.substr(head_end + 4);
  if (auto it = out.headers.find("content-length"); it != out.headers.end() &&
                                                    out.body.size() != static_cast<size_t>(std::atoll(it->second.c_str())))
    return HttpResult{};  // cut short: the server died while answering
  out.status = status;
  return out;
}

// A streamed response read as it comes (server-sent events): the request is sent on a fresh
// connection; ReadUntil waits for text to appear, Eof for the server to close.
//
//   EventStreamReader events(port, "/v1/events", {"Authorization: Bearer " + token});
//   ASSERT_TRUE(events.ReadUntil("\"kind\":\"placed\""));
class EventStreamReader {
 public:
  EventStreamReader(int port, const std::string& target, const std::vector<std::string>& headers = {}) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return;
    std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n";
    for (const std::string& h : headers) req += h + "\r\n";
    req += "\r\n";
    ok_ = ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  }
  ~EventStreamReader() {
    if (fd_ >= 0) ::close(fd_);
  }
  EventStreamReader(const EventStreamReader&) = delete;
  EventStreamReader& operator=(const EventStreamReader&) = delete;
  bool ok() const { return ok_; }
  // Whether `needle` arrived within timeout_ms (what came so far is text()).
  bool ReadUntil(const std::string& needle, int timeout_ms = 10000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (text_.find(needle) == std::string::npos) {
      if (eof_ || !Fill(deadline)) return false;
    }
    return true;
  }
  // Whether the server closed the stream within timeout_ms.
  bool Eof(int timeout_ms = 10000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (!eof_)
      if (!Fill(deadline)) return eof_;
    return true;
  }
  const std::string& text() const { return text_; }

 private:
  bool Fill(std::chrono::steady_clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    char buf[8192];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    text_.append(buf, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  bool ok_ = false;
  bool eof_ = false;
  std::string text_;
};

}  // namespace tessera::testing
