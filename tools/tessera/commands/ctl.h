// `tessera ctl`: the control plane's API from the shell (commands/ctl.cc builds the requests,
// commands/ctl_print.cc prints the answers as tables).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tessera::cli {

// What `-o table` prints for the answer of `area verb` (e.g. "workloads", "list"); the JSON
// itself for answers without a table.
std::string CtlTable(const std::string& area, const std::string& verb, const nlohmann::json& answer);

}  // namespace tessera::cli
