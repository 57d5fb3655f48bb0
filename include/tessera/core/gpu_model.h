// The GPU model catalog: which GPU models tessera knows, by the names traces and users use.
//
// Placement only needs a model's identity (a task may be restricted to some models, and the
// catalog turns "V100M16|V100M32" into a bit mask). The catalog holds up to 64 models so that a
// set of models is one uint64_t. The partitioning issue extends each entry with SMs,
// bandwidth, MIG and vGPU profiles; today an entry is a name, memory and a one-line note.
//
//   const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
//   StatusOr<ModelMask> m = cat.ParseModelList("V100M16|V100M32");   // two bits set
//   cat.Find("H100") -> NOT_FOUND error naming the known models
//
// Thread-safety: immutable after construction; Builtin() is safe to call from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/ids.h"
#include "tessera/core/quantity.h"
#include "tessera/core/status.h"

namespace tessera {

// A set of GPU models, bit i = GpuModelId{i}. 0 means "no restriction" where a task's
// allowed models are meant.
using ModelMask = uint64_t;

struct GpuModelInfo {
  std::string name;      // as written in traces and flags, e.g. "V100M32", "H100-80GB"
  MiB memory{0};         // device memory; 0 where undisclosed (the trace's G1/G2/G3)
  std::string note;      // where the facts come from / what the code means
};

class GpuModelCatalog {
 public:
  static constexpr size_t kMaxModels = 64;

  // The models tessera ships with: the Alibaba trace's models and the common data-centre GPUs.
  static const GpuModelCatalog& Builtin();

  // Fails with ALREADY_EXISTS for a duplicate name, RESOURCE_EXHAUSTED past kMaxModels.
  Status Add(GpuModelInfo info);

  // NOT_FOUND (message lists the known names) for an unknown model.
  StatusOr<GpuModelId> Find(std::string_view name) const;
  // Parses a '|'-separated list of model names; the empty string gives 0 (any model).
  StatusOr<ModelMask> ParseModelList(std::string_view list) const;

  const GpuModelInfo& info(GpuModelId id) const { return models_[id.value()]; }
  size_t size() const { return models_.size(); }
  std::string KnownNames() const;  // "A10, G1, ..." for error messages

 private:
  std::vector<GpuModelInfo> models_;
};

inline constexpr ModelMask ModelBit(GpuModelId id) { return ModelMask{1} << id.value(); }

}  // namespace tessera
