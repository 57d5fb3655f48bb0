// The agent's MPS control daemons (tessera/node/agent.h, "MPS"; tessera/node/mps_control.h): one
// per GPU while the GPU has an MPS workload that has not ended.
#include <set>
#include <string>

#include "src/node/agent_impl.h"
#include "tessera/node/agent.h"

namespace tessera::node {

namespace {

// The daemon's CUDA_VISIBLE_DEVICES: the GPU's UUID (what the launcher pins clients by when NVML
// gives it), else its index.
std::string VisibleDevice(const Inventory& inventory, int gpu) {
  if (gpu < static_cast<int>(inventory.gpus.size()) && !inventory.gpus[gpu].uuid.empty())
    return inventory.gpus[gpu].uuid;
  return std::to_string(gpu);
}

}  // namespace

Status Agent::EnsureMps(int gpu) {
  const bool known = mps_gpus_.count(gpu) > 0;
  TESSERA_ASSIGN_OR_RETURN(const bool started, mps_.Ensure(gpu, VisibleDevice(inventory_, gpu)));
  mps_gpus_.insert(gpu);
  if (!started) return Status::Ok();
  if (known) {
    ++stats_.mps_restarts;
    Log("MPS control daemon of GPU " + std::to_string(gpu) + " was gone; started it again (pid " +
        std::to_string(mps_.DaemonPid(gpu)) + ")");
  } else {
    ++stats_.mps_starts;
    Log("MPS control daemon of GPU " + std::to_string(gpu) + " started (pid " + std::to_string(mps_.DaemonPid(gpu)) +
        ", pipe directory " + mps_.Paths(gpu).pipe_dir + ")");
  }
  return Status::Ok();
}

void Agent::ReconcileMps() {
  std::set<int> wanted;  // GPUs with an MPS workload that has not ended
  for (const auto& [id, w] : held_)
    if (w.mps_thread_pct > 0 && !w.ended) wanted.insert(w.gpus.front());  // one GPU (Hold)
  for (const int gpu : wanted) {
    if (Status st = EnsureMps(gpu); !st.ok())
      Log("MPS control daemon of GPU " + std::to_string(gpu) + ": " + std::string(st.message()));
  }
  for (auto it = mps_gpus_.begin(); it != mps_gpus_.end();) {
    const int gpu = *it;
    if (wanted.count(gpu)) {
      ++it;
      continue;
    }
    Status st = mps_.Stop(gpu);
    ++stats_.mps_stops;
    Log("MPS control daemon of GPU " + std::to_string(gpu) + ": its last MPS workload ended; stopped" +
        (st.ok() ? "" : " (" + std::string(st.message()) + ")"));
    it = mps_gpus_.erase(it);
  }
}

void Agent::AdoptMps() {
  for (const InventoryGpu& g : inventory_.gpus)
    if (mps_.DaemonPid(g.index) > 0) mps_gpus_.insert(g.index);
}

}  // namespace tessera::node
