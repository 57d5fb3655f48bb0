// A fake `nvidia-cuda-mps-control` for the agent's tests (built as tests/fake_mps/
// nvidia-cuda-mps-control, so that its process name is the real one's). It behaves as the real
// control program does on the outside and records what it was told:
//
//   nvidia-cuda-mps-control -d     starts the control daemon in the background and returns once
//                                  it listens (exit 1, "An instance of this daemon is already
//                                  running", when the pipe directory's daemon lives);
//   nvidia-cuda-mps-control -f     the daemon in the foreground;
//   nvidia-cuda-mps-control        a client: sends the commands on its stdin (one a line) to the
//                                  daemon of $CUDA_MPS_PIPE_DIRECTORY and prints the answers (exit
//                                  1 when no daemon listens there).
//
// The daemon uses $CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps) for its control socket
// ("control", a Unix socket) and nvidia-cuda-mps-control.pid, and $CUDA_MPS_LOG_DIRECTORY (default
// /var/log/nvidia-mps) for control.log, where it appends one line per event:
//   start pid=<pid> CUDA_VISIBLE_DEVICES=<value or ->
//   command <the command as received>
//   quit
// Commands it understands (answers as the real daemon's): get_server_list (no servers: nothing),
// get_server_status PID, get_client_list PID, start_server -uid N, shutdown_server PID,
// set_default_active_thread_percentage P (prints P), get_default_active_thread_percentage,
// set_default_device_pinned_mem_limit DEV VALUE, get_default_device_pinned_mem_limit DEV,
// quit (the daemon exits). Anything else is recorded and answered with an error line.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

namespace {

std::string Env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

std::string PipeDir() { return Env("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"); }
std::string LogDir() { return Env("CUDA_MPS_LOG_DIRECTORY", "/var/log/nvidia-mps"); }
std::string SocketPath() { return PipeDir() + "/control"; }
std::string PidPath() { return PipeDir() + "/nvidia-cuda-mps-control.pid"; }

void Record(const std::string& line) {
  std::ofstream(LogDir() + "/control.log", std::ios::app) << line << "\n";
}

bool DaemonAlive() {
  std::ifstream in(PidPath());
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const size_t close = s.rfind(')');
  return close != std::string::npos && close + 2 < s.size() && s[close + 2] != 'Z';
}

int Listen() {
  const std::string path = SocketPath();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return -1;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  ::unlink(path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

struct State {
  std::string default_thread_pct = "100.0";
  std::map<std::string, std::string> default_pinned;  // device -> value
};

// The answer to one command; sets `quit`.
std::string Answer(State& st, const std::string& line, bool& quit) {
  std::istringstream in(line);
  std::string cmd, a, b;
  in >> cmd >> a >> b;
  if (cmd == "quit") {
    quit = true;
    return "";
  }
  if (cmd == "get_server_list") return "";
  if (cmd == "get_server_status" || cmd == "get_client_list" || cmd == "shutdown_server")
    return "Server " + a + " not found";
  if (cmd == "start_server") return a == "-uid" && !b.empty() ? "" : "Usage: start_server -uid <uid>";
  if (cmd == "set_default_active_thread_percentage") {
    char* end = nullptr;
    const double p = std::strtod(a.c_str(), &end);
    if (a.empty() || *end != '\0' || p <= 0 || p > 100) return "Invalid active thread percentage";
    st.default_thread_pct = a;
    return a;
  }
  if (cmd == "get_default_active_thread_percentage") return st.default_thread_pct;
  if (cmd == "set_default_device_pinned_mem_limit") {
    if (a.empty() || b.empty()) return "Usage: set_default_device_pinned_mem_limit <dev> <value>";
    st.default_pinned[a] = b;
    return "";
  }
  if (cmd == "get_default_device_pinned_mem_limit") {
    auto it = st.default_pinned.find(a);
    return it == st.default_pinned.end() ? "0" : it->second;
  }
  return "Unrecognized command: " + line;
}

// The daemon's loop: one connection at a time, each a batch of command lines.
int Serve(int listener) {
  State st;
  for (;;) {
    const int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    std::string input;
    char buf[1024];
    ssize_t n;
    while ((n = ::read(c, buf, sizeof(buf))) > 0) input.append(buf, static_cast<size_t>(n));
    std::istringstream lines(input);
    std::string line, out;
    bool quit = false;
    while (!quit && std::getline(lines, line)) {
      if (line.empty()) continue;
      Record("command " + line);
      const std::string a = Answer(st, line, quit);
      if (!a.empty()) out += a + "\n";
    }
    if (quit) {
      Record("quit");
      ::unlink(PidPath().c_str());
      ::unlink(SocketPath().c_str());
    }
    (void)!::write(c, out.data(), out.size());
    ::close(c);
    if (quit) return 0;
  }
}

// Starts listening and writes the pid file; false (with a message) when it cannot.
bool BecomeDaemon(int* listener) {
  ::mkdir(PipeDir().c_str(), 0755);
  ::mkdir(LogDir().c_str(), 0755);
  *listener = Listen();
  if (*listener < 0) {
    std::fprintf(stderr, "cannot listen on %s: %s\n", SocketPath().c_str(), std::strerror(errno));
    return false;
  }
  std::ofstream(PidPath()) << ::getpid() << "\n";
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  Record("start pid=" + std::to_string(::getpid()) + " CUDA_VISIBLE_DEVICES=" + (visible ? visible : "-"));
  return true;
}

int Daemon(bool background) {
  if (DaemonAlive()) {
    std::fprintf(stderr, "An instance of this daemon is already running\n");
    return 1;
  }
  if (!background) {
    int listener = -1;
    return BecomeDaemon(&listener) ? Serve(listener) : 1;
  }
  int ready[2];
  if (::pipe(ready) != 0) return 1;
  const pid_t child = ::fork();
  if (child < 0) return 1;
  if (child == 0) {
    ::close(ready[0]);
    ::setsid();
    const int null = ::open("/dev/null", O_RDWR);
    int listener = -1;
    const bool ok = BecomeDaemon(&listener);
    const char byte = ok ? 1 : 0;
    (void)!::write(ready[1], &byte, 1);
    ::close(ready[1]);
    if (!ok) ::_exit(1);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::_exit(Serve(listener));
  }
  ::close(ready[1]);
  char byte = 0;
  const bool ok = ::read(ready[0], &byte, 1) == 1 && byte == 1;
  return ok ? 0 : 1;
}

int Client() {
  const std::string path = SocketPath();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), std::min(path.size() + 1, sizeof(addr.sun_path) - 1));
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    std::fprintf(stderr, "Cannot find MPS control daemon process\n");
    return 1;
  }
  std::string input;
  char buf[1024];
  ssize_t n;
  while ((n = ::read(0, buf, sizeof(buf))) > 0) input.append(buf, static_cast<size_t>(n));
  (void)!::write(fd, input.data(), input.size());
  ::shutdown(fd, SHUT_WR);
  while ((n = ::read(fd, buf, sizeof(buf))) > 0) (void)!::write(1, buf, static_cast<size_t>(n));
  ::close(fd);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  if (argc == 2 && std::strcmp(argv[1], "-d") == 0) return Daemon(true);
  if (argc == 2 && std::strcmp(argv[1], "-f") == 0) return Daemon(false);
  if (argc == 1) return Client();
  std::fprintf(stderr, "usage: nvidia-cuda-mps-control [-d | -f]\n");
  return 1;
}
