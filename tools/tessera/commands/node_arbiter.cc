// tessera node arbiter --gpus 0,1 [--run-dir DIR]
// The node side for tenants that have no supervisor of their own (Slurm tasks started by
// spank_tessera.so): runs the lease arbiter duty (tessera/node/arbiter_duty.h) of each listed GPU
// on a thread until SIGINT or SIGTERM. Several arbiters of one GPU (this, `tessera run`, the
// agent) elect one holder by flock, so it is safe beside them. Flags and signals only.
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tessera/enforce/segment.h"
#include "tessera/node/arbiter_duty.h"
#include "tessera/node/node_dir.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

constexpr char kCommand[] = "node arbiter";

struct ArbiterFlags {
  std::vector<int> gpus;
  std::string run_dir;
};

int RunArbiter(const ArbiterFlags& f) {
  const std::string dir = f.run_dir.empty() ? node::DefaultNodeDir() : f.run_dir;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Fail(kCommand, "--run-dir " + dir + ": " + std::strerror(errno), kExitBadInput);
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // the threads inherit the mask; sigwait takes them
  std::atomic<bool> stopping{false};
  std::vector<std::thread> threads;
  for (int gpu : f.gpus) {
    threads.emplace_back([&stopping, dir, gpu] {
      node::ArbiterDuty duty(node::NodeDir(dir), gpu);
      while (!stopping.load(std::memory_order_relaxed)) duty.Round();
    });
  }
  std::string list;
  for (int gpu : f.gpus) list += (list.empty() ? "" : ",") + std::to_string(gpu);
  std::printf("tessera node arbiter: driving GPU(s) %s of %s\n", list.c_str(), dir.c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  stopping = true;
  for (std::thread& t : threads) t.join();
  return kExitOk;
}

}  // namespace

void AddNodeArbiter(CLI::App* node, int* exit_code) {
  auto flags = std::make_shared<ArbiterFlags>();
  CLI::App* arbiter = node->add_subcommand(
      "arbiter", "Drive the GPUs' compute leases for tenants without a supervisor (Slurm tasks); runs until stopped");
  arbiter->add_option("--gpus", flags->gpus, "Node GPU indexes, e.g. 0,1")
      ->required()
      ->delimiter(',')
      ->check(CLI::Range(0, enforce::kMaxGpus - 1));
  arbiter->add_option("--run-dir", flags->run_dir,
                      "Node directory (default: $TESSERA_RUN_DIR, else $XDG_RUNTIME_DIR/tessera, else "
                      "/tmp/tessera-<uid>); created when missing; spank_tessera.so's node_dir=");
  arbiter->callback([flags, exit_code] { *exit_code = RunArbiter(*flags); });
}

}  // namespace tessera::cli
