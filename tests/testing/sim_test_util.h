// Helpers for the simulator and CLI tests: temporary directories, whole-file I/O, a naive CSV
// line splitter (to compute expectations independently of tessera's parser), NaN-aware vector
// comparison and running a command line with its exit status and output captured.
//
//   TempDir dir;                                   // removed with everything in it at scope exit
//   WriteTextFile(dir.path() + "/p.csv", "name,cpu_milli,...\n");
//   CommandResult r = RunCommand(std::string(TESSERA_BINARY) + " simulate --help");
//   EXPECT_EQ(r.exit_code, 0);
#pragma once

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-test-XXXXXX").string();
    if (char* p = ::mkdtemp(tmpl.data()); p != nullptr) path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

inline std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// Splits text into lines (LF), dropping a trailing empty line.
inline std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::string cur;
  for (char c : text) {
    if (c == '\n') {
      lines.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  return lines;
}

// Splits a line on commas; no quoting (only for files known to contain no quotes).
inline std::vector<std::string> SplitCommas(const std::string& line) {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == ',') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// True if both vectors have the same size and equal elements, NaN equal to NaN.
inline bool SameDoubles(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] != b[i]) return false;
  }
  return true;
}

struct CommandResult {
  bool exited = false;    // false: killed by a signal (or could not be run)
  int exit_code = -1;
  int signal = 0;
  std::string out;
  std::string err;
  // A signal, seen directly or as the shell's 128+N exit status.
  bool Crashed() const { return !exited || exit_code >= 128; }
};

// Runs `command` through /bin/sh with stdout and stderr redirected to files in `dir`.
inline CommandResult RunCommand(const std::string& command, const TempDir& dir) {
  const std::string out_path = dir.File("cmd.stdout");
  const std::string err_path = dir.File("cmd.stderr");
  const std::string full = "(" + command + ") >'" + out_path + "' 2>'" + err_path + "' </dev/null";
  CommandResult r;
  const int status = std::system(full.c_str());
  if (status != -1 && WIFEXITED(status)) {
    r.exited = true;
    r.exit_code = WEXITSTATUS(status);
  } else if (status != -1 && WIFSIGNALED(status)) {
    r.signal = WTERMSIG(status);
  }
  r.out = ReadTextFile(out_path);
  r.err = ReadTextFile(err_path);
  return r;
}

}  // namespace tessera::testing
