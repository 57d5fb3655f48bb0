// `tessera run --server ...` (commands/run_remote.cc), called by `tessera run` (commands/node.cc).
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

struct RemoteRunFlags {
  std::string server, token, token_file, ca_file;
  std::string tenant, mem, qos, mode, model;  // qos "": the tenant's default_qos
  int share = 0;  // gpu_milli; 0 = a whole GPU
  int priority = 0;
  int retry_budget_s = 60;  // how long each request keeps retrying 429/503 answers; 0: never
  std::vector<std::string> command;
};

int RunRemote(const RemoteRunFlags& flags);

}  // namespace tessera::cli
