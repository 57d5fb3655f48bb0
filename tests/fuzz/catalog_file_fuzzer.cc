// libFuzzer target for the GPU-model file parser: any bytes must give models or an
// INVALID_ARGUMENT, never a crash, an exception or a hang; parsed models must be usable.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tessera/partition/catalog_file.h"
#include "tessera/partition/mig_layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto models = partition::ParseGpuModelsJson(text, "fuzz.json");
  if (!models.ok()) {
    if (models.status().code() != StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  for (const GpuModelInfo& m : *models) {
    if (m.mig) (void)partition::EnumerateMaximalLayouts(*m.mig);
  }
  (void)partition::CatalogWithModels(*models);
  return 0;
}
