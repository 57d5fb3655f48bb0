#include "tessera/core/gpu_model.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace tessera {

std::vector<int> MigComputeInstanceStarts(int gi_slices, int ci_slices) {
  std::vector<int> starts;
  if (ci_slices <= 0 || ci_slices > gi_slices) return starts;
  if (ci_slices == 3) {  // like the 3g GPU instance: at 0, and at 4 when there are 7 slices
    starts.push_back(0);
    if (gi_slices >= 7) starts.push_back(4);
    return starts;
  }
  for (int s = 0; s + ci_slices <= gi_slices; s += ci_slices) starts.push_back(s);
  return starts;
}

std::string_view VgpuSchedulerName(VgpuScheduler s) {
  switch (s) {
    case VgpuScheduler::kBestEffort: return "best_effort";
    case VgpuScheduler::kEqualShare: return "equal_share";
    case VgpuScheduler::kFixedShare: return "fixed_share";
  }
  return "unknown";
}

const GpuModelCatalog& GpuModelCatalog::Builtin() {
  static const GpuModelCatalog* catalog = [] {
    std::vector<GpuModelInfo> models;
    // Models of the Alibaba GPU trace (cluster-trace-gpu-v2023). G1/G2/G3 are undisclosed
    // internal codes; their memory is unknown. No MIG.
    models.push_back({"G1", MiB{0}, "Alibaba trace internal code (undisclosed)"});
    models.push_back({"G2", MiB{0}, "Alibaba trace internal code (undisclosed)"});
    models.push_back({"G3", MiB{0}, "Alibaba trace internal code (undisclosed)"});
    models.push_back({"T4", MiB{15360}, "NVIDIA T4 16GB (no MIG)", 40, 320, 65});
    models.push_back({"P100", MiB{16384}, "NVIDIA Tesla P100 16GB (no MIG, no bf16)", 56, 732, 0});
    models.push_back({"V100M16", MiB{16384}, "NVIDIA V100 16GB (no MIG, no bf16)", 80, 900, 0});
    models.push_back({"V100M32", MiB{32768}, "NVIDIA V100 32GB (no MIG, no bf16)", 80, 900, 0});
    models.push_back({"V100", MiB{32768}, "NVIDIA V100 (32GB variant; no MIG, no bf16)", 80, 900, 0});
    models.push_back({"A10", MiB{24576}, "NVIDIA A10 24GB (no MIG)", 72, 600, 125});
    // MIG-capable data-centre models, generated from data/gpu-models/mig-profiles.json.
#include "src/core/gpu_catalog_data.inc"
    auto* c = new GpuModelCatalog();
    for (auto& m : models) {
      Status s = c->Add(std::move(m));
      (void)s;  // the built-in list has no duplicates (checked by a unit test)
    }
    return c;
  }();
  return *catalog;
}

Status GpuModelCatalog::Add(GpuModelInfo info) {
  if (info.name.empty()) return InvalidArgumentError("GPU model name is empty");
  for (const GpuModelInfo& m : models_) {
    if (m.name == info.name) return AlreadyExistsError("GPU model '" + info.name + "' already exists");
  }
  if (models_.size() >= kMaxModels) {
    return ResourceExhaustedError("GPU model catalog is full (64 models)");
  }
  models_.push_back(std::move(info));
  return Status::Ok();
}

namespace {

// nvmlDeviceGetName -> catalog name, for the boards whose NVML name is not "NVIDIA <name>".
// (Product names from NVIDIA's nvidia-smi output and go-nvml's mocks; the variants share the
// catalog model's MIG table, see data/gpu-models/mig-profiles.json.)
constexpr std::pair<std::string_view, std::string_view> kNvmlNames[] = {
    {"NVIDIA A100-SXM4-40GB", "A100-40GB"},   {"NVIDIA A100-PCIE-40GB", "A100-40GB"},
    {"NVIDIA A100-SXM4-80GB", "A100-80GB"},   {"NVIDIA A100-PCIE-80GB", "A100-80GB"},
    {"NVIDIA A100 80GB PCIe", "A100-80GB"},   {"NVIDIA H100 80GB HBM3", "H100-80GB"},
    {"NVIDIA H100 PCIe", "H100-80GB"},        {"NVIDIA H100 NVL", "H100-NVL-94GB"},
    {"NVIDIA H200", "H200-141GB"},            {"NVIDIA H200 NVL", "H200-141GB"},
    {"NVIDIA B200", "B200-180GB"},            {"NVIDIA GH200 96GB HBM3", "GH200-96GB"},
    {"NVIDIA A30", "A30-24GB"},
    {"Tesla V100-SXM2-32GB", "V100M32"},      {"Tesla V100-SXM2-16GB", "V100M16"},
    {"Tesla V100-PCIE-32GB", "V100M32"},      {"Tesla V100-PCIE-16GB", "V100M16"},
    {"Tesla P100-PCIE-16GB", "P100"},         {"Tesla P100-SXM2-16GB", "P100"},
};

}  // namespace

StatusOr<GpuModelId> GpuModelCatalog::FindByNvmlName(std::string_view nvml_name) const {
  auto exact = [this](std::string_view name) -> std::optional<GpuModelId> {
    for (size_t i = 0; i < models_.size(); ++i) {
      if (models_[i].name == name) return GpuModelId(static_cast<uint32_t>(i));
    }
    return std::nullopt;
  };
  for (const auto& [nvml, model] : kNvmlNames) {
    if (nvml == nvml_name) {
      if (auto id = exact(model)) return *id;
    }
  }
  for (std::string_view prefix : {std::string_view("NVIDIA "), std::string_view("Tesla ")}) {
    if (nvml_name.substr(0, prefix.size()) == prefix) {
      if (auto id = exact(nvml_name.substr(prefix.size()))) return *id;
    }
  }
  return NotFoundError("no GPU model of the catalog is called '" + std::string(nvml_name) + "' by NVML");
}

StatusOr<GpuModelId> GpuModelCatalog::Find(std::string_view name) const {
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i].name == name) return GpuModelId(static_cast<uint32_t>(i));
  }
  if (StatusOr<GpuModelId> id = FindByNvmlName(name); id.ok()) return id;
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
