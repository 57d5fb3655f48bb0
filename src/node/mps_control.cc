// MPS control daemons per GPU (tessera/node/mps_control.h).
#include "tessera/node/mps_control.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

extern char** environ;

namespace tessera::node {
namespace {

constexpr const char* kPidFile = "nvidia-cuda-mps-control.pid";

int64_t MonotonicMs() {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1000 + t.tv_nsec / 1'000'000;
}

void SleepMs(int ms) {
  timespec t{ms / 1000, static_cast<long>(ms % 1000) * 1'000'000};
  while (::nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

Status MakeDirs(const std::string& path) {
  std::string at;
  std::istringstream parts(path);
  std::string part;
  if (!path.empty() && path[0] == '/') at = "/";
  while (std::getline(parts, part, '/')) {
    if (part.empty()) continue;
    at += part;
    if (::mkdir(at.c_str(), 0755) != 0 && errno != EEXIST)
      return InternalError("cannot create '" + at + "': " + std::strerror(errno));
    at += "/";
  }
  return Status::Ok();
}

// The command name and state of a live process (/proc/<pid>/stat); empty name when none.
std::pair<std::string, char> ProcNameAndState(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t open = stat.find('('), close = stat.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close + 2 >= stat.size()) return {"", '?'};
  return {stat.substr(open + 1, close - open - 1), stat[close + 2]};
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

struct Ran {
  int exit_code = -1;  // 128 + signal when killed
  std::string output;  // stdout and stderr
};

// Runs `argv` with `env` added to (and replacing) the environment, `input` on its stdin; kills
// it after `timeout_ms`. Output beyond 64 KiB is dropped.
StatusOr<Ran> RunProgram(const std::vector<std::string>& args,
                         const std::vector<std::pair<std::string, std::string>>& env_add, const std::string& input,
                         int64_t timeout_ms) {
  std::set<std::string> replaced;
  for (const auto& [k, v] : env_add) replaced.insert(k);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (!replaced.count(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  for (const auto& [k, v] : env_add) env.push_back(k + "=" + v);
  std::vector<std::string> argv_s = args;
  std::vector<char*> argv, envp;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) return InternalError(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    return InternalError(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
  // The daemon outlives the agent: none of the agent's descriptors (a lock, a socket to the
  // control plane) may stay open in it.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#endif
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, args[0].c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  if (rc != 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    return InternalError("cannot run '" + args[0] + "': " + std::strerror(rc));
  }
  // The input is a few short lines: it fits the pipe's buffer, so writing cannot block.
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  if (!input.empty()) (void)!::write(in_pipe[1], input.data(), input.size());
  ::close(in_pipe[1]);
  timespec zero{0, 0};
  (void)sigtimedwait(&pipe_only, nullptr, &zero);  // a SIGPIPE the write raised, if any
  pthread_sigmask(SIG_SETMASK, &old, nullptr);

  // Read until the program exits (not until EOF: a daemon it left behind may hold the pipe).
  Ran ran;
  const int64_t deadline = MonotonicMs() + timeout_ms;
  int status = 0;
  bool exited = false, eof = false;
  while (!exited) {
    const int64_t left = deadline - MonotonicMs();
    if (left <= 0) break;
    pollfd p{out_pipe[0], POLLIN, 0};
    const int n = eof ? 0 : ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 10)));
    if (n > 0) {
      char buf[4096];
      const ssize_t got = ::read(out_pipe[0], buf, sizeof(buf));
      if (got > 0 && ran.output.size() < 65536) ran.output.append(buf, static_cast<size_t>(got));
      if (got == 0) eof = true;
      if (got > 0) continue;  // drain before looking at the exit
    } else if (eof) {
      SleepMs(2);
    }
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
  }
  if (exited) {  // what it wrote just before it exited
    ::fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
    char buf[4096];
    ssize_t got;
    while ((got = ::read(out_pipe[0], buf, sizeof(buf))) > 0)
      if (ran.output.size() < 65536) ran.output.append(buf, static_cast<size_t>(got));
  }
  ::close(out_pipe[0]);
  if (!exited) {
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return InternalError("'" + args[0] + "' did not finish within " + std::to_string(timeout_ms) + " ms");
  }
  ran.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return ran;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

bool IsMpsMode(std::string_view mode) { return mode == "mps" || mode.rfind("mps(", 0) == 0; }

int MpsThreadPercentage(std::string_view mode, int gpu_milli) {
  int pct = (gpu_milli + 9) / 10;
  if (mode.rfind("mps(", 0) == 0) {
    const std::string digits(mode.substr(4, mode.find(',') == std::string_view::npos ? 0 : mode.find(',') - 4));
    char* end = nullptr;
    const long p = std::strtol(digits.c_str(), &end, 10);
    if (!digits.empty() && end != nullptr && *end == '\0') pct = static_cast<int>(std::min<long>(p, 1000));
  }
  return std::max(1, std::min(100, pct));
}

std::vector<std::pair<std::string, std::string>> MpsClientEnvironment(const MpsPaths& paths, int thread_percentage,
                                                                      uint64_t limit_bytes,
                                                                      int64_t context_allowance_mib) {
  const uint64_t limit_mib = (limit_bytes + (uint64_t{1} << 20) - 1) >> 20;
  const uint64_t pinned = limit_mib + static_cast<uint64_t>(std::max<int64_t>(0, context_allowance_mib));
  return {{"CUDA_MPS_PIPE_DIRECTORY", paths.pipe_dir},
          {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(thread_percentage)},
          {"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=" + std::to_string(pinned) + "M"}};
}

MpsControl::MpsControl(MpsControlOptions options) : options_(std::move(options)) {}

MpsPaths MpsControl::Paths(int gpu) const {
  const std::string base = options_.run_dir + "/mps/gpu" + std::to_string(gpu);
  return {base + "/pipe", base + "/log"};
}

StatusOr<std::string> MpsControl::ResolveBinary() const {
  const std::string& b = options_.control_binary;
  const std::string how = " (install the NVIDIA driver's MPS tools, or give its path with `tessera agent --mps-control PATH`)";
  if (b.empty()) return FailedPreconditionError("no MPS control binary" + how);
  if (b.find('/') != std::string::npos) {
    if (::access(b.c_str(), X_OK) != 0)
      return FailedPreconditionError("MPS control binary '" + b + "' not found or not executable" + how);
    return b;
  }
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + b;
    struct stat st{};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
  }
  return FailedPreconditionError("MPS control binary '" + b + "' not found on PATH" + how);
}

long MpsControl::DaemonPid(int gpu) const {
  std::ifstream in(Paths(gpu).pipe_dir + "/" + kPidFile);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return 0;
  const auto [name, state] = ProcNameAndState(pid);
  if (name.empty() || state == 'Z' || state == 'X') return 0;
  // The kernel keeps 15 characters of the name.
  if (name != BaseName(options_.control_binary).substr(0, 15)) return 0;
  return pid;
}

StatusOr<bool> MpsControl::Ensure(int gpu, const std::string& visible_device) {
  if (DaemonPid(gpu) > 0) return false;
  TESSERA_ASSIGN_OR_RETURN(const std::string binary, ResolveBinary());
  const MpsPaths paths = Paths(gpu);
  TESSERA_RETURN_IF_ERROR(MakeDirs(paths.pipe_dir));
  TESSERA_RETURN_IF_ERROR(MakeDirs(paths.log_dir));
  (void)::unlink((paths.pipe_dir + "/" + kPidFile).c_str());  // a dead daemon's
  TESSERA_ASSIGN_OR_RETURN(Ran ran, RunProgram({binary, "-d"},
                                               {{"CUDA_MPS_PIPE_DIRECTORY", paths.pipe_dir},
                                                {"CUDA_MPS_LOG_DIRECTORY", paths.log_dir},
                                                {"CUDA_VISIBLE_DEVICES", visible_device}},
                                               "", options_.start_timeout_ms));
  if (ran.exit_code != 0)
    return InternalError("'" + binary + " -d' for GPU " + std::to_string(gpu) + " exited with code " +
                         std::to_string(ran.exit_code) + ": " + Trimmed(ran.output));
  // -d returns once the daemon is in the background; its pid file may follow a moment later.
  const int64_t deadline = MonotonicMs() + options_.start_timeout_ms;
  while (DaemonPid(gpu) == 0) {
    if (MonotonicMs() >= deadline)
      return InternalError("'" + binary + " -d' for GPU " + std::to_string(gpu) + " left no running daemon (no " +
                           paths.pipe_dir + "/" + kPidFile + ")");
    SleepMs(5);
  }
  return true;
}

StatusOr<std::string> MpsControl::Command(int gpu, std::string_view command) const {
  TESSERA_ASSIGN_OR_RETURN(const std::string binary, ResolveBinary());
  TESSERA_ASSIGN_OR_RETURN(Ran ran, RunProgram({binary}, {{"CUDA_MPS_PIPE_DIRECTORY", Paths(gpu).pipe_dir}},
                                               std::string(command) + "\n", options_.start_timeout_ms));
  if (ran.exit_code != 0)
    return InternalError("'" + std::string(command) + "' to the MPS daemon of GPU " + std::to_string(gpu) +
                         ": exit code " + std::to_string(ran.exit_code) + ": " + Trimmed(ran.output));
  return ran.output;
}

Status MpsControl::Stop(int gpu) {
  const long pid = DaemonPid(gpu);
  if (pid == 0) return Status::Ok();
  Status sent = Command(gpu, "quit").status();
  const int64_t deadline = MonotonicMs() + options_.stop_timeout_ms;
  while (DaemonPid(gpu) == pid && MonotonicMs() < deadline) SleepMs(5);
  if (DaemonPid(gpu) == pid) {
    ::kill(static_cast<pid_t>(pid), SIGKILL);
    (void)::unlink((Paths(gpu).pipe_dir + "/" + kPidFile).c_str());
    return InternalError("the MPS daemon of GPU " + std::to_string(gpu) + " (pid " + std::to_string(pid) +
                         ") did not exit after quit" + (sent.ok() ? "" : " (" + std::string(sent.message()) + ")") +
                         "; killed");
  }
  return Status::Ok();
}

}  // namespace tessera::node
