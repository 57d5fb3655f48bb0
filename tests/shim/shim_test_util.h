// Helpers for the shim tests: a node segment in a temporary directory, and running
// tessera_shim_probe under LD_PRELOAD=libtessera-shim.so with the fake libcuda.so.1.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tessera/enforce/lease_file.h"
#include "tessera/enforce/segment.h"

extern char** environ;

namespace tessera::enforce::testing {

inline constexpr std::uint64_t kMiB = 1ULL << 20;

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/tessera_shim_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = ::mkdtemp(buf.data()) ? buf.data() : "";
  }
  ~TempDir() {
    if (!path_.empty()) {
      std::string cmd = "rm -rf '" + path_ + "'";
      int ignored = std::system(cmd.c_str());
      (void)ignored;
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A node segment with one GPU (or more) and limits set per tenant on GPU 0.
struct TestSegment {
  TempDir dir;
  std::string policy;
  std::string counters;  // the counters folder: one file per tenant (CountersFile)
  std::string fake_shared;  // the fake driver's cross-process usage file
  std::optional<NodeSegment> node;

  explicit TestSegment(std::uint64_t granule = 512, int num_gpus = 1) {
    policy = dir.path() + "/policy";
    counters = dir.path() + "/counters";
    fake_shared = dir.path() + "/fake_device";
    SegmentOptions options;
    options.policy_path = policy;
    options.counters_dir = counters;
    options.granule_bytes = granule;
    options.num_gpus = num_gpus;
    StatusOr<NodeSegment> s = NodeSegment::Create(options);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) node.emplace(std::move(*s));
  }
  NodeSegment& seg() { return *node; }
  std::string CountersFile(int tenant) const { return CountersFilePath(counters, tenant); }
};

// A node segment plus a one-GPU lease file beside it (TESSERA_SHIM_LEASES=leases_path).
struct TestLeaseNode {
  TestSegment segment;
  std::string leases_path;
  std::optional<LeaseFile> leases;

  TestLeaseNode() {
    leases_path = segment.dir.path() + "/leases";
    StatusOr<LeaseFile> f = LeaseFile::Create(leases_path, 1, segment.counters);
    EXPECT_TRUE(f.ok()) << f.status().ToString();
    if (f.ok()) leases.emplace(std::move(*f));
  }
  LeaseBoard& board() { return leases->board(0); }
};

struct ProbeOptions {
  const TestSegment* segment = nullptr;  // nullptr: unmanaged
  int tenant = 0;
  bool preload = true;
  std::vector<std::string> env;  // extra KEY=VALUE
  std::string program;           // "" = tessera_shim_probe
  std::string stderr_path;       // "" = the test's stderr; else the probe's stderr goes to this file
  long uid = -1;                 // >= 0: the probe runs under this uid and gid (the test must be root)
};

inline std::vector<std::string> BuildEnv(const ProbeOptions& o) {
  std::vector<std::string> overrides;
  std::string preload;
#ifdef TESSERA_SANITIZER_RUNTIME
  preload = TESSERA_SANITIZER_RUNTIME;
  if (o.preload) preload += " ";
#endif
  if (o.preload) preload += TESSERA_SHIM_LIBRARY;
  overrides.push_back("LD_PRELOAD=" + preload);
  overrides.push_back(std::string("LD_LIBRARY_PATH=") + TESSERA_FAKE_CUDA_DIR);
  overrides.push_back("ASAN_OPTIONS=detect_leaks=0");
  if (o.segment != nullptr) {
    overrides.push_back("TESSERA_SHIM_POLICY=" + o.segment->policy);
    overrides.push_back("TESSERA_SHIM_COUNTERS=" + o.segment->counters);
    overrides.push_back("TESSERA_SHIM_TENANT=" + std::to_string(o.tenant));
    overrides.push_back("TESSERA_FAKE_CUDA_SHARED=" + o.segment->fake_shared);
  }
  for (const std::string& e : o.env) {  // later settings replace earlier ones
    std::string key = e.substr(0, e.find('='));
    for (std::string& prev : overrides) {
      if (prev.substr(0, prev.find('=')) == key) prev.clear();
    }
    overrides.push_back(e);
  }
  std::erase(overrides, std::string());
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    std::string key = kv.substr(0, kv.find('='));
    bool replaced = key == "LD_PRELOAD" || key.rfind("TESSERA_SHIM_", 0) == 0 ||
                    key.rfind("TESSERA_FAKE_CUDA_", 0) == 0;
    for (const std::string& o2 : overrides) replaced |= o2.substr(0, o2.find('=')) == key;
    if (!replaced) env.push_back(kv);
  }
  for (const std::string& e : overrides) env.push_back(e);
  return env;
}

// A running probe: its stdin stays open until Finish() (so "wait" blocks), stdout is read by line.
class Probe {
 public:
  Probe(const ProbeOptions& o, const std::vector<std::string>& args) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return;
    std::vector<std::string> env = BuildEnv(o);
    std::vector<char*> envp, argv;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string prog = o.program.empty() ? std::string(TESSERA_SHIM_PROBE) : o.program;
    const std::string err_path = o.stderr_path;
    const long uid = o.uid;
    argv.push_back(prog.data());
    std::vector<std::string> a = args;
    for (std::string& s : a) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      if (!err_path.empty()) {
        int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (err >= 0) ::dup2(err, 2);
      }
      if (uid >= 0) {
        const auto id = static_cast<uid_t>(uid);
        if (::setgroups(0, nullptr) != 0 || ::setresgid(id, id, id) != 0 || ::setresuid(id, id, id) != 0) ::_exit(125);
      }
      ::execve(prog.c_str(), argv.data(), envp.data());
      ::_exit(126);
    }
    ::close(in[0]);
    ::close(out[1]);
    stdin_fd_ = in[1];
    out_ = ::fdopen(out[0], "r");
  }
  ~Probe() {
    if (pid_ > 0 && !reaped_) Kill();
    if (out_ != nullptr) std::fclose(out_);
    if (stdin_fd_ >= 0) ::close(stdin_fd_);
  }
  pid_t pid() const { return pid_; }

  // Next output line ("" at EOF).
  std::string ReadLine() {
    if (out_ == nullptr) return "";
    char buf[4096];
    if (std::fgets(buf, sizeof(buf), out_) == nullptr) return "";
    std::string s(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    lines_.push_back(s);
    return s;
  }
  // Closes stdin, reads the rest, waits. Returns the exit status (or 128 + signal).
  int Finish() {
    if (stdin_fd_ >= 0) {
      ::close(stdin_fd_);
      stdin_fd_ = -1;
    }
    while (!ReadLine().empty()) {
    }
    return Wait();
  }
  // Waits for the process to exit without closing its stdin (its children may still read it).
  int WaitExit() { return Wait(); }
  void Kill() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      Wait();
    }
  }
  const std::vector<std::string>& lines() const { return lines_; }

 private:
  int Wait() {
    if (reaped_) return status_;
    int st = 0;
    ::waitpid(pid_, &st, 0);
    reaped_ = true;
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return status_;
  }
  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  FILE* out_ = nullptr;
  bool reaped_ = false;
  int status_ = -1;
  std::vector<std::string> lines_;
};

struct ProbeRun {
  int exit_code = -1;
  std::vector<std::string> lines;
  // The first line starting with `prefix`, or "".
  std::string Find(const std::string& prefix) const {
    for (const std::string& l : lines) {
      if (l.rfind(prefix, 0) == 0) return l;
    }
    return "";
  }
};

inline ProbeRun RunProbe(const ProbeOptions& o, const std::vector<std::string>& args) {
  Probe p(o, args);
  ProbeRun r;
  r.exit_code = p.Finish();
  r.lines = p.lines();
  return r;
}

// "alloc family=mem rc=0 id=3" -> {family: mem, rc: 0, id: 3}
inline std::map<std::string, std::string> Fields(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) {
    auto eq = tok.find('=');
    if (eq != std::string::npos) out[tok.substr(0, eq)] = tok.substr(eq + 1);
  }
  return out;
}

inline long FieldInt(const std::string& line, const std::string& key) {
  auto f = Fields(line);
  auto it = f.find(key);
  return it == f.end() ? -999999 : std::strtol(it->second.c_str(), nullptr, 10);
}

}  // namespace tessera::enforce::testing
