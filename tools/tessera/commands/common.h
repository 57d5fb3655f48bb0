// Helpers shared by the CLI's commands: flag parsing, where the bundled data lives, and where
// output goes (`--json PATH`, `-` = stdout) and how errors are printed.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/status.h"

namespace CLI {
class App;
}

namespace tessera::cli {

// A file or folder the CLI needs at run time, and how it was found ("$TESSERA_DATA_DIR",
// "next to the executable", ...); `found` is false when nothing is there.
struct Located {
  std::string path;
  std::string how;
  bool found = false;
};

// The folder the running executable lies in (/proc/self/exe), "." when it cannot be read.
std::string ExecutableDir();

// Where the bundled data lives: $TESSERA_DATA_DIR, else ./data (when it holds the traces), else
// <executable>/../share/tessera (an install: bin/tessera, share/tessera/), else the source
// tree's data/ (a build tree).
Located LocateDataDir();
std::string DataDir();  // LocateDataDir().path

// The in-tree fake NVML for `tessera agent --fake-gpus`: $TESSERA_FAKE_NVML_LIBRARY, else the
// build tree's copy (<executable>/tests/fake_nvml/) or the install's (<executable>/../lib/tessera/fake/);
// NOT_FOUND names both places.
StatusOr<std::string> FindFakeNvml();
// `--fake-gpus MODEL:COUNT[:mig],...` of the node programs (agent, k8s slices/dra-driver/
// device-plugin): checks the list (node::FakeNvmlConfig), finds the fake NVML (FindFakeNvml), sets
// TESSERA_FAKE_NVML_CONFIG for it (this process and its children) and returns the library to load.
StatusOr<std::string> UseFakeGpus(const std::string& fake_gpus);

// "42-51" or "42,43,50-51" -> seeds (each 0 .. 2^63-1, at most 10000); INVALID_ARGUMENT names
// the bad item and the flag.
StatusOr<std::vector<uint64_t>> ParseSeeds(const std::string& text);

// The rows as left-aligned columns two spaces apart, one line each; the first row is the header.
// Rows may be shorter than others (their missing cells are left out).
//   TextTable({{"NAME", "GPUS"}, {"node-a", "8"}}) -> "NAME    GPUS\nnode-a  8\n"
std::string TextTable(const std::vector<std::vector<std::string>>& rows);
std::string TextTable(const std::vector<std::string>& header, std::vector<std::vector<std::string>> rows);

// Writes `text` to `path` ("-": stdout), creating the parent folders; UNAVAILABLE names the path.
Status WriteOutput(const std::string& path, const std::string& text);

// `-o table|json` and `--json PATH`, with one meaning in every command that prints a table and
// has a JSON form (bill, anomalies, forecast, plan capacity): -o json prints the JSON on stdout
// instead of the table; --json PATH also writes it to PATH (`--json -` is -o json).
struct OutputFlags {
  std::string format = "table";  // or "json", or a command's own (bill: csv, html)
  std::string json_path;
  // The JSON goes to stdout, not the table.
  bool JsonOnStdout() const { return format == "json" || json_path == "-"; }
};

// Adds -o,--output (table, json and `more_formats`) and --json PATH to `cmd`; `json_shape` says
// what the JSON holds (the end of --json's help).
void AddOutputFlags(CLI::App* cmd, OutputFlags* flags, const std::string& json_shape,
                    const std::vector<std::string>& more_formats = {});

// The NVML backstop's flags, one meaning in `tessera agent` and `tessera k8s dra-driver`:
// --backstop-ms (default 1000, 0: off), --context-allowance-mib (500), --enforce kill|report
// (kill). `what` names what the backstop checks ("workload" or "claim").
struct BackstopFlags {
  int period_ms = 1000;
  int64_t context_allowance_mib = 500;
  std::string enforce = "kill";
};
void AddBackstopFlags(CLI::App* cmd, BackstopFlags* flags, const std::string& what);

// Prints `table` (the JSON instead where JsonOnStdout()) and writes `json` to --json PATH when
// one is given; UNAVAILABLE names the path that could not be written.
Status EmitOutput(const OutputFlags& flags, const std::string& table, const std::string& json);

// The first line of --token-file `path` without surrounding whitespace. INVALID_ARGUMENT names
// the flag and the path when the file cannot be read or holds no token (an empty file must not
// fall back to $TESSERA_TOKEN, which may be an admin's).
StatusOr<std::string> ReadTokenFile(const std::string& path);

// The API token of `ctl` and `run --server`: --token, else --token-file's, else $TESSERA_TOKEN
// (else ""). INVALID_ARGUMENT when both flags are given (which one was meant?) or for a
// --token-file that ReadTokenFile refuses.
StatusOr<std::string> ApiToken(const std::string& token, const std::string& token_file);

// The wait between an API client's retries (ApiClientOptions::sleep) in a command that blocks
// `signals` and waits for them itself: sleeps `wait`, or less when one of them arrives, and then
// returns false (the client stops retrying) leaving the signal pending for the command to take.
bool SleepUnlessSignalled(const sigset_t& signals, std::chrono::milliseconds wait);

// Prints "tessera <command>: <message>" on stderr (never the status code's name) and returns
// `exit_code`.
int Fail(const std::string& command, const Status& status, int exit_code);
int Fail(const std::string& command, const std::string& message, int exit_code);

}  // namespace tessera::cli
