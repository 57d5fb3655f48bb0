// `tessera simulate --mig-model M --gpus N`: the MIG mode of the simulator. The pod list's
// fractional GPU tasks become MIG requests (nearest profile) on N GPUs of model M, placed by the
// placement engine per policy, next to partition/mig_sim's standalone dynamic placer and the
// static layouts (sim/mig_replay.h); text table on stdout, JSON with --json FILE.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace tessera::cli {

struct MigModeFlags {
  std::string model;       // set: run the MIG mode instead of the placement replay
  int gpus = -1;           // -1: not given (100)
  int gpus_per_node = -1;  // -1: not given (8)
  bool Given() const { return !model.empty() || gpus != -1 || gpus_per_node != -1; }
};

// The `simulate` flags the MIG mode shares with the replay.
struct MigModeShared {
  std::vector<std::string> pods;  // at most one; default: the bundled default list
  std::string nodes;              // must be empty (the cluster is --gpus GPUs)
  std::string policies;           // default: tessera,fgd,bestfit,firstfit
  std::string seeds;
  std::string json_out;
  bool all_lists = false;
};

// Adds --mig-model, --gpus, --gpus-per-node to `simulate`.
void AddMigModeFlags(CLI::App* simulate, MigModeFlags* flags);
// Exit 0, or 2 with one line naming the bad flag.
int RunMigMode(const MigModeFlags& flags, const MigModeShared& shared);

}  // namespace tessera::cli
