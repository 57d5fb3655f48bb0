// libFuzzer target for the quota file parser (config/quota_file.h): arbitrary bytes must give a
// QuotaFile or an INVALID_ARGUMENT, never a crash, a hang or an exception. A parsed file must
// satisfy the tree's invariants.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tessera/core/gpu_model.h"
#include "tessera/config/quota_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto q = tessera::config::ParseQuotaYaml(text, "fuzz.yaml", tessera::GpuModelCatalog::Builtin());
  if (!q.ok()) {
    if (q.status().message().empty()) std::abort();
    return 0;
  }
  const auto& t = q->tenants;
  for (int i = 0; i < t.size(); ++i) {
    if (t.path(i).empty() || t.path(i).back() != i) std::abort();
    if (!t.spec(i).guaranteed.AllLessEqual(t.spec(i).limit)) std::abort();
    if (t.spec(i).guaranteed.AnyNegative()) std::abort();
  }
  return 0;
}
