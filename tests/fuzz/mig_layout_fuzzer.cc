// libFuzzer target for the MIG layout parser and rules: any text must parse or fail with
// INVALID_ARGUMENT, validation must never crash, and a valid layout must survive enumeration and
// planning with a small demand taken from the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

#include "tessera/core/gpu_model.h"
#include "tessera/partition/mig_layout.h"
#include "tessera/partition/mig_planner.h"

using namespace tessera;
using namespace tessera::partition;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  for (const char* model : {"H100-80GB", "A30-24GB"}) {
    const MigGeometry& g = *cat.info(*cat.Find(model)).mig;
    auto layout = ParseLayout(g, text);
    if (!layout.ok()) {
      if (layout.status().code() != StatusCode::kInvalidArgument) std::abort();
      continue;
    }
    const Status valid = ValidateLayout(g, *layout);
    if (!valid.ok()) {
      if (valid.code() != StatusCode::kFailedPrecondition) std::abort();
      continue;
    }
    (void)SlotDiagram(g, *layout);
    if (ParseLayout(g, FormatLayout(g, *layout)).value().size() != layout->size()) std::abort();
    MigGpuState state;
    state.current = *layout;
    for (size_t i = 0; i < layout->size(); ++i) state.in_use.push_back(i % 2 == 0);
    std::map<std::string, int> demand;
    for (size_t i = 0; i < g.profiles.size() && i < size; ++i) demand[g.profiles[i].name] = data[i] % 4;
    auto plan = PlanMig(g, {state, MigGpuState{}}, demand);
    if (!plan.ok()) std::abort();
    for (const MigLayout& l : plan->layouts) {
      if (!ValidateLayout(g, l).ok()) std::abort();
    }
  }
  return 0;
}
