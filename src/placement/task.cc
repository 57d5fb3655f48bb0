#include "tessera/placement/task.h"

#include <bit>
#include <string>

#include "tessera/placement/cluster_snapshot.h"

namespace tessera::placement {

Status ValidateTask(const TaskRequest& t) {
  if (t.cpu.value() < 0) return InvalidArgumentError("cpu_milli: negative value " + std::to_string(t.cpu.value()));
  if (t.memory.value() < 0) {
    return InvalidArgumentError("memory_mib: negative value " + std::to_string(t.memory.value()));
  }
  if (t.num_gpu < 0 || t.num_gpu > kMaxGpusPerNode) {
    return InvalidArgumentError("num_gpu: " + std::to_string(t.num_gpu) + " is outside 0.." +
                                std::to_string(kMaxGpusPerNode));
  }
  if (t.mig_profile < -1) {
    return InvalidArgumentError("mig_profile: " + std::to_string(t.mig_profile) + " is not a profile index (or -1)");
  }
  if (t.IsMig()) {
    if (t.num_gpu != 1) {
      return InvalidArgumentError("num_gpu: a MIG request asks for one instance on one GPU, got " +
                                  std::to_string(t.num_gpu));
    }
    if (std::popcount(t.allowed_models) != 1) {
      return InvalidArgumentError("allowed_models: a MIG request must name exactly one GPU model (its profile "
                                  "index is that model's), got " +
                                  std::to_string(std::popcount(t.allowed_models)));
    }
  }
  const int64_t d = t.gpu_milli.value();
  if (t.num_gpu == 0) {
    if (d != 0) return InvalidArgumentError("gpu_milli: must be 0 when num_gpu is 0, got " + std::to_string(d));
    return Status::Ok();
  }
  if (d <= 0 || d > 1000) {
    return InvalidArgumentError("gpu_milli: " + std::to_string(d) + " is outside 1..1000");
  }
  if (t.num_gpu > 1 && d != 1000) {
    return InvalidArgumentError("gpu_milli: a multi-GPU task must ask for whole GPUs (1000), got " +
                                std::to_string(d));
  }
  return Status::Ok();
}

}  // namespace tessera::placement
