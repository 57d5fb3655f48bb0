// `tessera ctl`: the control plane's API from the shell (commands/ctl.cc builds the requests,
// commands/ctl_print.cc prints the answers as tables).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include <nlohmann/json.hpp>

#include "tessera/daemon/api_client.h"

namespace tessera::cli {

// The flags every `ctl` verb shares.
struct CtlConnection {
  std::string server;
  std::string token;
  std::string token_file;
  std::string ca_file;
  std::string output = "table";
  int retry_budget_s = 60;  // how long a request keeps retrying 429/503 answers; 0: never
};

// The client for these flags: --server, else $TESSERA_SERVER, else http://127.0.0.1:8080;
// --token, else the first line of --token-file, else $TESSERA_TOKEN (ApiToken, common.h); for
// https, --ca-file, else $TESSERA_CA_FILE, else the system's trusted certificates.
// INVALID_ARGUMENT for a bad URL, --token with --token-file, an unreadable or empty token file,
// or an unreadable CA file. 429 and 503 answers are retried for --retry-budget s (ApiClient).
StatusOr<std::unique_ptr<daemon::ApiClient>> CtlClient(const CtlConnection& c, int timeout_ms = 30000);

// Runs one `ctl` verb behind the same barrier the server has: an exception that escapes it (a
// server answer of an unexpected shape, ...) is printed as "tessera ctl: internal error: <what>"
// and the exit code is 1, instead of ending the process with abort() (exit 134).
int CtlGuard(const std::function<int()>& run);

// "a b" -> "a%20b" (a query value or path segment).
std::string QueryEscape(const std::string& s);

// The query of the non-empty values, escaped: {{"tenant", "a b"}, {"from", ""}, {"to", "5"}} ->
// "?tenant=a%20b&to=5"; "" when every value is empty.
std::string QueryString(std::initializer_list<std::pair<std::string_view, std::string>> params);

// One request of `ctl <area> <verb>` (method, target, JSON body; an Idempotency-Key header when
// the key is not empty); the answer printed as a table (CtlTable) or JSON (-o json). Exit 0 for
// a 2xx, 1 for an error answer or no answer, 2 for bad connection flags.
int CtlCall(const CtlConnection& c, const std::string& idempotency_key, const std::string& area,
            const std::string& verb, const std::string& method, const std::string& target,
            const std::string& body = "");

// `ctl workloads` (commands/ctl_workloads.cc), under `ctl`; `connection` holds the parsed `ctl` flags.
void RegisterCtlWorkloads(CLI::App* ctl, std::shared_ptr<const CtlConnection> connection, int* exit_code);
// `ctl events` (commands/ctl_events.cc), under `ctl`.
void RegisterCtlEvents(CLI::App* ctl, std::shared_ptr<const CtlConnection> connection, int* exit_code);
// `ctl invoices` (commands/ctl_invoices.cc), under `ctl`.
void RegisterCtlInvoices(CLI::App* ctl, std::shared_ptr<const CtlConnection> connection, int* exit_code);
// `ctl anomalies` (commands/ctl_anomalies.cc), under `ctl`.
void RegisterCtlAnomalies(CLI::App* ctl, std::shared_ptr<const CtlConnection> connection, int* exit_code);

// Milliseconds since the epoch as RFC 3339 in UTC, to the second: 1764590000123 ->
// "2025-12-01T11:53:20Z" (every time in a `ctl` table; -o json keeps the API's *_ms numbers).
std::string Rfc3339(int64_t ms);

// What `-o table` prints for the answer of `area verb` (e.g. "workloads", "list"); the JSON
// itself for answers without a table.
std::string CtlTable(const std::string& area, const std::string& verb, const nlohmann::json& answer);
// A JSON value as a table cell: a string as it is, null as "-", anything else as JSON.
std::string CtlText(const nlohmann::json& v);
// The MODEL column of `ctl nodes` (commands/ctl_nodes_print.cc): the node's one model, or on a
// node of several each with its count, in GPU order: "2xH100-80GB,4xA100-40GB"; "-" for none.
std::string CtlModels(const nlohmann::json& gpus);
// The GPU map of `ctl nodes get` (commands/ctl_nodes_print.cc).
std::string CtlGpuMap(const nlohmann::json& node);

}  // namespace tessera::cli
