// Sub-commands of the tessera CLI. Each Register* adds its sub-command to `app` and sets
// `*exit_code` when it runs. The CLI layer only parses flags, reads files and prints; the work
// happens in the libraries.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tessera::cli {

// Exit codes shared by all commands.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // the command ran but failed (or a check did not pass)
inline constexpr int kExitBadInput = 2;  // bad flags or bad input files

// `command_line` (the full invocation, for reports) must outlive parsing.
void RegisterSimulate(CLI::App& app, const std::string* command_line, int* exit_code);
void RegisterMig(CLI::App& app, int* exit_code);
// `tessera run` (a command under libtessera-shim.so) and `tessera node status` (commands/node.cc).
void RegisterNode(CLI::App& app, int* exit_code);
// `tessera node arbiter` under RegisterNode's `node` (commands/node_arbiter.cc).
void AddNodeArbiter(CLI::App* node, int* exit_code);
// `tessera serve`: the control plane (commands/serve.cc).
void RegisterServe(CLI::App& app, int* exit_code);
// `tessera ctl`: the API from the shell (commands/ctl.cc).
void RegisterCtl(CLI::App& app, int* exit_code);
// `tessera audit verify --db URL`: the control plane's audit chain (commands/audit.cc).
void RegisterAudit(CLI::App& app, int* exit_code);
// `tessera anomalies` (commands/anomalies.cc).
void RegisterAnomalies(CLI::App& app, int* exit_code);
// `tessera bill` (commands/bill.cc): invoices from a ledger and a price plan.
void RegisterBill(CLI::App& app, int* exit_code);
// `tessera agent` (commands/agent.cc): the node agent.
void RegisterAgent(CLI::App& app, int* exit_code);
// `tessera forecast` (commands/forecast.cc): hourly series forecasts and their backtest.
void RegisterForecast(CLI::App& app, int* exit_code);
// `tessera plan capacity` (commands/plan.cc): when GPU demand exceeds capacity, per model.
void RegisterPlan(CLI::App& app, int* exit_code);
// `tessera slurm config` (commands/slurm.cc): the node's gres.conf / slurm.conf GPU lines.
void RegisterSlurm(CLI::App& app, int* exit_code);
// `tessera k8s ...` (commands/k8s.cc): the Kubernetes integration's programs.
void RegisterK8s(CLI::App& app, int* exit_code);
// `tessera k8s slices` under RegisterK8s's `k8s` (commands/k8s_objects.cc): the node's ResourceSlices
// and the DeviceClasses, printed or published.
void RegisterK8sObjects(CLI::App& k8s, int* exit_code);
// `tessera k8s extender` under RegisterK8s's `k8s` (commands/k8s_extender.cc).
void RegisterK8sExtender(CLI::App& k8s, int* exit_code);
// `tessera k8s dra-driver` (commands/k8s_dra.cc): the DRA kubelet plugin.
void RegisterK8sDraDriver(CLI::App& k8s, int* exit_code);
// `tessera k8s device-plugin` (commands/k8s_device_plugin.cc): the kubelet device plugin (v1beta1).
void RegisterK8sDevicePlugin(CLI::App& k8s, int* exit_code);
// `tessera version [--paths]` (commands/version.cc); `version` is the line it prints.
void RegisterVersion(CLI::App& app, const std::string& version, int* exit_code);

}  // namespace tessera::cli
