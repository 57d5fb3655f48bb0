// MpsControl: one NVIDIA MPS control daemon (`nvidia-cuda-mps-control -d`) per GPU, for the
// agent's workloads in MPS mode (desired mode "mps(P,MMiB)"). Each GPU's daemon has its own pipe
// and log directories under the node directory, so daemons of different GPUs (and of other
// users' MPS setups in /tmp/nvidia-mps) never share a control socket:
//
//   <run_dir>/mps/gpu<N>/pipe   CUDA_MPS_PIPE_DIRECTORY of the daemon and of its clients
//                               (the daemon's control socket and nvidia-cuda-mps-control.pid)
//   <run_dir>/mps/gpu<N>/log    CUDA_MPS_LOG_DIRECTORY (control.log, server.log)
//
// The daemon is started with CUDA_VISIBLE_DEVICES = the GPU's UUID (its index when there is no
// UUID), so its servers open that GPU only; a client pinned to the same GPU (the launcher's
// CUDA_VISIBLE_DEVICES) sees it as its device 0. Commands go to a daemon the way NVIDIA's tools
// send them: the control binary is run again, without -d, with the command on its stdin and the
// daemon's CUDA_MPS_PIPE_DIRECTORY in its environment (`echo quit | nvidia-cuda-mps-control`).
//
// A daemon is alive when the pid in its pid file names a live process (not a zombie) whose
// command name is the control binary's file name (so a reused pid is not taken for it). Nothing
// else is kept: a restarted agent finds its daemons again through their pid files.
//
// Callers: the agent (src/node/agent_mps.cc): Ensure before it starts an MPS workload and every
// round for each GPU with an MPS workload (a daemon that died is started again), Stop when the
// GPU's last MPS workload has ended. Tests: tests/node/mps_control_test.cc and agent_test.cc on
// the in-tree fake (tests/testing/fake_mps).
//
// Worked example: MpsClientEnvironment(Paths(1), 30, 1024 MiB, 500) for a workload "mps(30,1024MiB)"
// on GPU 1 with a 500 MiB context allowance gives
//   CUDA_MPS_PIPE_DIRECTORY=<run_dir>/mps/gpu1/pipe
//   CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30
//   CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1524M
// (the client's CUDA context counts against the pinned limit: on an H200, 0=1024M let a client
// allocate only 256 MiB, so the allowance is added; the shim's own limit, 1024 MiB, still holds
// the allocations to the byte).
//
// Errors: FAILED_PRECONDITION when the control binary is not found (the message names it and the
// flag, `tessera agent --mps-control PATH`); INTERNAL when it cannot be run, exits non-zero or
// writes no pid file (with what it printed). Thread-safety: none (the agent's round thread).
// Ownership: the daemons outlive the object (a restarted agent adopts them).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::node {

struct MpsControlOptions {
  std::string run_dir;  // the node directory; daemons under <run_dir>/mps/gpu<N>/
  // The control binary: a path, or a name looked up on PATH.
  std::string control_binary = "nvidia-cuda-mps-control";
  int64_t start_timeout_ms = 5000;  // for `-d` to return and the pid file to appear
  int64_t stop_timeout_ms = 5000;   // for the daemon to exit after quit (then SIGKILL)
};

struct MpsPaths {
  std::string pipe_dir;
  std::string log_dir;
};

// True for the desired state's MPS modes ("mps" or "mps(P,MMiB)").
bool IsMpsMode(std::string_view mode);
// The active-thread percentage of an MPS mode: P of "mps(P,MMiB)", else ceil(gpu_milli / 10);
// always within 1..100.
int MpsThreadPercentage(std::string_view mode, int gpu_milli);
// The client's variables (see the worked example): the limit is `limit_bytes` rounded up to MiB
// plus `context_allowance_mib`, for device 0 (the one GPU the client sees).
std::vector<std::pair<std::string, std::string>> MpsClientEnvironment(const MpsPaths& paths, int thread_percentage,
                                                                      uint64_t limit_bytes,
                                                                      int64_t context_allowance_mib);

class MpsControl {
 public:
  explicit MpsControl(MpsControlOptions options);

  MpsPaths Paths(int gpu) const;
  // The control binary's path (PATH searched for a bare name); FAILED_PRECONDITION when missing.
  StatusOr<std::string> ResolveBinary() const;
  // The daemon's pid when it runs, else 0.
  long DaemonPid(int gpu) const;
  // Starts GPU `gpu`'s daemon unless it runs; `visible_device` is its CUDA_VISIBLE_DEVICES.
  // Returns true when it started one.
  StatusOr<bool> Ensure(int gpu, const std::string& visible_device);
  // Runs the control binary with `command` on its stdin against GPU `gpu`'s daemon; returns what
  // it printed. INTERNAL when it exits non-zero or takes longer than start_timeout_ms.
  StatusOr<std::string> Command(int gpu, std::string_view command) const;
  // Sends quit and waits for the daemon to exit (SIGKILL after stop_timeout_ms). OK when none runs.
  Status Stop(int gpu);

 private:
  MpsControlOptions options_;
};

}  // namespace tessera::node
