// libFuzzer target for the MIG plan decoder (partition/mig_plan_json.h), the reader of
// `tessera mig apply --plan FILE`: any bytes must decode or fail with INVALID_ARGUMENT naming the
// source, never crash; a decoded plan's steps must be valid for the model, and a plan encoded by
// EncodeMigPlanJson must decode to the same steps.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tessera/core/gpu_model.h"
#include "tessera/partition/mig_layout.h"
#include "tessera/partition/mig_plan_json.h"
#include "tessera/partition/mig_planner.h"

using namespace tessera;
using namespace tessera::partition;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  for (const char* name : {"H100-80GB", "A30-24GB"}) {
    const GpuModelId model = *cat.Find(name);
    const MigGeometry& g = *cat.info(model).mig;
    StatusOr<DecodedMigPlan> plan = DecodeMigPlanJson(cat, model, text, "fuzz.json");
    if (!plan.ok()) {
      if (plan.status().code() != StatusCode::kInvalidArgument) std::abort();
      if (plan.status().message().rfind("fuzz.json", 0) != 0) std::abort();
      continue;
    }
    MigPlan again;
    for (const MigPlanStep& s : plan->steps) {
      if (s.instance.profile < 0 || static_cast<size_t>(s.instance.profile) >= g.profiles.size()) std::abort();
      if (s.gpu < 0 || s.gpu > 100000) std::abort();
      again.steps.push_back(s);
    }
    StatusOr<DecodedMigPlan> round = DecodeMigPlanJson(cat, model, EncodeMigPlanJson(g, name, again), "round.json");
    if (!round.ok() || round->steps.size() != plan->steps.size()) std::abort();
    for (size_t i = 0; i < round->steps.size(); ++i) {
      const MigPlanStep& a = round->steps[i];
      const MigPlanStep& b = plan->steps[i];
      if (a.kind != b.kind || a.gpu != b.gpu || !(a.instance == b.instance)) std::abort();
    }
  }
  return 0;
}
