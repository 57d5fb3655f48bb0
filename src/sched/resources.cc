#include "tessera/sched/resources.h"

namespace tessera::sched {

std::optional<int> ResourceSpace::ModelDim(std::string_view model) const {
  for (size_t i = 0; i < models_.size(); ++i)
    if (models_[i] == model) return kFirstModelDim + static_cast<int>(i);
  return std::nullopt;
}

std::string ResourceSpace::DimName(int d) const {
  if (d == kGpuMilliDim) return "gpu_milli";
  if (d == kGpuMemoryDim) return "gpu_memory_mib";
  return "gpus:" + models_[d - kFirstModelDim];
}

std::string ResourceSpace::Format(const Resources& r) const {
  std::string out;
  for (int d = 0; d < dims(); ++d) {
    if (!out.empty()) out += ' ';
    out += DimName(d) + '=' + (r[d] >= kUnlimited ? std::string("inf") : std::to_string(r[d]));
  }
  return out;
}

}  // namespace tessera::sched
