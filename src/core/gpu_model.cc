#include "tessera/core/gpu_model.h"

#include <algorithm>

namespace tessera {

const GpuModelCatalog& GpuModelCatalog::Builtin() {
  static const GpuModelCatalog* catalog = [] {
    auto* c = new GpuModelCatalog();
    const GpuModelInfo models[] = {
        // Models of the Alibaba GPU trace (cluster-trace-gpu-v2023). G1/G2/G3 are undisclosed
        // internal codes; their memory is unknown.
        {"G1", MiB{0}, "Alibaba trace internal code (undisclosed)"},
        {"G2", MiB{0}, "Alibaba trace internal code (undisclosed)"},
        {"G3", MiB{0}, "Alibaba trace internal code (undisclosed)"},
        {"T4", MiB{16 * 1024}, "NVIDIA T4 16GB"},
        {"P100", MiB{16 * 1024}, "NVIDIA Tesla P100 16GB"},
        {"V100M16", MiB{16 * 1024}, "NVIDIA V100 16GB"},
        {"V100M32", MiB{32 * 1024}, "NVIDIA V100 32GB"},
        {"A10", MiB{24 * 1024}, "NVIDIA A10 24GB"},
        // Data-centre models (memory from NVIDIA data sheets; MIG facts arrive with the
        // partitioning work).
        {"V100", MiB{32 * 1024}, "NVIDIA V100 (32GB variant)"},
        {"A30-24GB", MiB{24 * 1024}, "NVIDIA A30 24GB"},
        {"A100-40GB", MiB{40 * 1024}, "NVIDIA A100 40GB"},
        {"A100-80GB", MiB{80 * 1024}, "NVIDIA A100 80GB"},
        {"H100-80GB", MiB{80 * 1024}, "NVIDIA H100 80GB"},
        {"H100-NVL-94GB", MiB{94 * 1024}, "NVIDIA H100 NVL 94GB"},
        {"H200-141GB", MiB{141 * 1024}, "NVIDIA H200 141GB"},
        {"B200-180GB", MiB{180 * 1024}, "NVIDIA B200 180GB"},
        {"GH200-96GB", MiB{96 * 1024}, "NVIDIA GH200 96GB"},
    };
    for (const auto& m : models) {
      Status s = c->Add(m);
      (void)s;  // the built-in list has no duplicates (checked by a unit test)
    }
    return c;
  }();
  return *catalog;
}

Status GpuModelCatalog::Add(GpuModelInfo info) {
  if (info.name.empty()) return InvalidArgumentError("GPU model name is empty");
  if (Find(info.name).ok()) return AlreadyExistsError("GPU model '" + info.name + "' already exists");
  if (models_.size() >= kMaxModels) {
    return ResourceExhaustedError("GPU model catalog is full (64 models)");
  }
  models_.push_back(std::move(info));
  return Status::Ok();
}

StatusOr<GpuModelId> GpuModelCatalog::Find(std::string_view name) const {
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i].name == name) return GpuModelId(static_cast<uint32_t>(i));
  }
  return NotFoundError("unknown GPU model '" + std::string(name) + "' (known: " + KnownNames() +
                       ")");
}

StatusOr<ModelMask> GpuModelCatalog::ParseModelList(std::string_view list) const {
  ModelMask mask = 0;
  if (list.empty()) return mask;
  size_t start = 0;
  while (true) {
    size_t bar = list.find('|', start);
    std::string_view part = list.substr(start, bar == std::string_view::npos ? bar : bar - start);
    if (part.empty()) return InvalidArgumentError("empty model name in list '" + std::string(list) + "'");
    TESSERA_ASSIGN_OR_RETURN(GpuModelId id, Find(part));
    mask |= ModelBit(id);
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return mask;
}

std::string GpuModelCatalog::KnownNames() const {
  std::vector<std::string> names;
  for (const auto& m : models_) names.push_back(m.name);
  std::sort(names.begin(), names.end());
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += names[i];
  }
  return out;
}

}  // namespace tessera
