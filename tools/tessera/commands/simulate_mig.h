// `tessera simulate --mig-model M --gpus N`: the flags of the simulator's MIG mode. The pod list's
// fractional GPU tasks become MIG requests (nearest profile) on N GPUs of model M, placed by the
// placement engine per policy, next to partition/mig_sim's standalone dynamic placer and the
// static layouts (sim/mig_replay.h runs it and renders the table and JSON).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::cli {

struct MigModeFlags {
  std::string model;       // set: run the MIG mode instead of the placement replay
  int gpus = 100;
  int gpus_per_node = 8;
};

// The `simulate` flags the MIG mode shares with the replay.
struct MigModeShared {
  std::vector<std::string> pods;  // at most one; default: the bundled default list
  std::string policies;           // default: tessera,fgd,bestfit,firstfit
  std::string seeds;
  std::string json_out;           // "" = none, "-" = stdout
  std::string html_out;           // "" = none: the HTML report (sim::RenderMigComparisonHtml)
};

// Adds --mig-model, --gpus, --gpus-per-node to `simulate` (their names: kMigOnlyFlags).
void AddMigModeFlags(CLI::App* simulate, MigModeFlags* flags);
inline const char* const kMigOnlyFlags[] = {"--mig-model", "--gpus", "--gpus-per-node"};
// Exit 0, or 2 with one line naming the bad flag.
int RunMigMode(const MigModeFlags& flags, const MigModeShared& shared);

// "fgd,tessera", "all" or "artifact" -> policy names; INVALID_ARGUMENT names an unknown one
// and lists the known ones. Shared with the replay.
tessera::StatusOr<std::vector<std::string>> ParsePolicies(const std::string& text);

}  // namespace tessera::cli
