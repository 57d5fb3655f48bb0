#include "tools/tessera/commands/common.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <thread>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include <CLI/CLI.hpp>

#include "tessera/core/gpu_model.h"
#include "tessera/node/inventory.h"

namespace tessera::cli {
namespace {

// A seed is a decimal integer in 0 .. 2^63-1 (no sign, no spaces).
std::optional<uint64_t> ParseSeed(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  return v;
}

}  // namespace

std::string ExecutableDir() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  const std::string path(buf, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

Located LocateDataDir() {
  namespace fs = std::filesystem;
  if (const char* env = std::getenv("TESSERA_DATA_DIR"); env != nullptr && *env)
    return {.path = env, .how = "$TESSERA_DATA_DIR", .found = fs::is_directory(env)};
  if (fs::exists("data/alibaba-gpu-2023/csv")) return {.path = "data", .how = "the working directory", .found = true};
  // An install keeps the data in share/tessera/ beside bin/ (cmake/TesseraInstall.cmake).
  const fs::path installed = (fs::path(ExecutableDir()) / "../share/tessera").lexically_normal();
  if (fs::exists(installed / "alibaba-gpu-2023/csv"))
    return {.path = installed.string(), .how = "next to the executable", .found = true};
  const std::string source = std::string(TESSERA_SOURCE_DIR) + "/data";
  return {.path = source, .how = "the source tree", .found = fs::exists(source + "/alibaba-gpu-2023/csv")};
}

std::string DataDir() { return LocateDataDir().path; }

StatusOr<std::string> FindFakeNvml() {
  if (const char* p = std::getenv("TESSERA_FAKE_NVML_LIBRARY"); p != nullptr && *p) return std::string(p);
  const std::string dir = ExecutableDir();
  for (const std::string& candidate :
       {dir + "/tests/fake_nvml/libnvidia-ml.so.1", dir + "/../lib/tessera/fake/libnvidia-ml.so.1"}) {
    if (::access(candidate.c_str(), R_OK) == 0) return std::filesystem::path(candidate).lexically_normal().string();
  }
  return NotFoundError("--fake-gpus needs the in-tree fake NVML: set TESSERA_FAKE_NVML_LIBRARY (not found in " + dir +
                       "/tests/fake_nvml/ or " + dir + "/../lib/tessera/fake/)");
}

StatusOr<std::string> UseFakeGpus(const std::string& fake_gpus) {
  TESSERA_ASSIGN_OR_RETURN(const std::string config, node::FakeNvmlConfig(fake_gpus, GpuModelCatalog::Builtin()));
  TESSERA_ASSIGN_OR_RETURN(std::string library, FindFakeNvml());
  ::setenv("TESSERA_FAKE_NVML_CONFIG", config.c_str(), 1);
  return library;
}

StatusOr<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  constexpr uint64_t kMaxSeeds = 10000;
  std::vector<uint64_t> seeds;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (part.empty()) return InvalidArgumentError("--seeds: empty item in '" + text + "' (use e.g. 42-51 or 42,43)");
    const size_t dash = part.find('-');
    if (dash == std::string::npos) {
      auto v = ParseSeed(part);
      if (!v) return InvalidArgumentError("--seeds: '" + part + "' is not a seed (an integer 0 .. 2^63-1)");
      seeds.push_back(*v);
    } else {
      auto lo = ParseSeed(part.substr(0, dash));
      auto hi = ParseSeed(part.substr(dash + 1));
      if (!lo || !hi || *hi < *lo) return InvalidArgumentError("--seeds: '" + part + "' is not a range like 42-51");
      if (*hi - *lo >= kMaxSeeds) return InvalidArgumentError("--seeds: range '" + part + "' is too long (max 10000 seeds)");
      for (uint64_t s = *lo; s <= *hi; ++s) seeds.push_back(s);  // hi <= 2^63-1: no wrap-around
    }
    if (seeds.size() > kMaxSeeds) return InvalidArgumentError("--seeds: more than 10000 seeds");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return seeds;
}

std::string TextTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], r[c].size());
    }
  std::string out;
  for (const auto& r : rows) {
    for (size_t c = 0; c < r.size(); ++c) {
      out += r[c];
      if (c + 1 < r.size()) out += std::string(width[c] - r[c].size() + 2, ' ');
    }
    out += "\n";
  }
  return out;
}

std::string TextTable(const std::vector<std::string>& header, std::vector<std::vector<std::string>> rows) {
  rows.insert(rows.begin(), header);
  return TextTable(rows);
}

Status WriteOutput(const std::string& path, const std::string& text) {
  if (path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0) {
      return UnavailableError("error writing to stdout");
    }
    return Status::Ok();
  }
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return UnavailableError("cannot write '" + path + "'");
  out << text;
  out.close();
  if (!out) return UnavailableError("error writing '" + path + "'");
  return Status::Ok();
}

void AddBackstopFlags(CLI::App* cmd, BackstopFlags* flags, const std::string& what) {
  cmd->add_option("--backstop-ms", flags->period_ms,
                  "Milliseconds between two NVML checks of the GPUs' processes against each " + what +
                      "'s memory limit (the backstop for processes the shim does not see; default 1000, 0: off)")
      ->check(CLI::Range(0, 60000));
  cmd->add_option("--context-allowance-mib", flags->context_allowance_mib,
                  "MiB of each process's GPU memory not counted against its " + what +
                      "'s limit: the CUDA context the driver charges every process (default 500, measured ~500 MiB "
                      "on an H200)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  cmd->add_option("--enforce", flags->enforce,
                  "What the backstop does to a " + what + " over its limit, or to a process of no " + what +
                      " on a shared GPU: kill (SIGKILL; a workload fails with reason violated_limit) or report "
                      "(log, events and counters only); default kill")
      ->check(CLI::IsMember({"kill", "report"}));
}

void AddOutputFlags(CLI::App* cmd, OutputFlags* flags, const std::string& json_shape,
                    const std::vector<std::string>& more_formats) {
  std::vector<std::string> formats = {"table", "json"};
  formats.insert(formats.end(), more_formats.begin(), more_formats.end());
  std::string list;
  for (const std::string& f : formats) list += (list.empty() ? "" : ", ") + f;
  cmd->add_option("-o,--output", flags->format,
                  "What stdout gets: " + list + " (default table); json: the JSON instead of the table")
      ->check(CLI::IsMember(formats));
  cmd->add_option("--json", flags->json_path,
                  "Also write the JSON to this file ('-': to stdout instead of the table, as -o json): " + json_shape);
}

Status EmitOutput(const OutputFlags& flags, const std::string& table, const std::string& json) {
  TESSERA_RETURN_IF_ERROR(WriteOutput("-", flags.JsonOnStdout() ? json : table));
  if (!flags.json_path.empty() && flags.json_path != "-") return WriteOutput(flags.json_path, json);
  return Status::Ok();
}

StatusOr<std::string> ReadTokenFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return InvalidArgumentError("--token-file '" + path + "': cannot read it");
  std::string token;
  std::getline(in, token);
  const size_t first = token.find_first_not_of(" \t\r\n");
  token = first == std::string::npos ? "" : token.substr(first, token.find_last_not_of(" \t\r\n") - first + 1);
  if (token.empty()) return InvalidArgumentError("--token-file '" + path + "' is empty (the token is its first line)");
  return token;
}

StatusOr<std::string> ApiToken(const std::string& token, const std::string& token_file) {
  if (!token.empty() && !token_file.empty())
    return InvalidArgumentError("--token and --token-file: give one of them, not both");
  if (!token_file.empty()) return ReadTokenFile(token_file);
  if (!token.empty()) return token;
  const char* env = std::getenv("TESSERA_TOKEN");
  return std::string(env != nullptr ? env : "");
}

int Fail(const std::string& command, const std::string& message, int exit_code) {
  std::fprintf(stderr, "tessera %s: %s\n", command.c_str(), message.c_str());
  return exit_code;
}

int Fail(const std::string& command, const Status& status, int exit_code) {
  return Fail(command, status.message(), exit_code);
}

}  // namespace tessera::cli

namespace tessera::cli {

bool SleepUnlessSignalled(const sigset_t& signals, std::chrono::milliseconds wait) {
  const auto end = std::chrono::steady_clock::now() + wait;
  for (;;) {
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) == 0) {
      for (int sig = 1; sig < NSIG; ++sig)
        if (sigismember(&signals, sig) == 1 && sigismember(&pending, sig) == 1) return false;
    }
    const auto left = end - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return true;
    // Slices of 50 ms: a pending signal is seen that soon (sigtimedwait would take it).
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(50)));
  }
}

}  // namespace tessera::cli
