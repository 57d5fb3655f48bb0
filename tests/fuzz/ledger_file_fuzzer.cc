// libFuzzer target for the ledger file parser (metering/ledger_file.h): arbitrary bytes must give
// a ledger or an INVALID_ARGUMENT listing problems, never a crash, a hang or an exception. A parsed
// ledger's hourly records must stay inside their hours, and rendering its samples' records again
// must not change them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tessera/core/gpu_model.h"
#include "tessera/metering/civil_time.h"
#include "tessera/metering/ledger_file.h"

using namespace tessera::metering;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto f = ParseLedgerJsonl(text, "fuzz.jsonl", tessera::GpuModelCatalog::Builtin());
  if (!f.ok()) {
    if (f.status().message().empty()) std::abort();
    return 0;
  }
  int64_t samples = 0;
  for (const HourlyRecord& r : f->ledger.Records()) {
    if (r.seconds <= 0 || r.seconds > kSecondsPerHour || r.hour % kSecondsPerHour != 0) std::abort();
    if (r.gpu_milli_s_allocated > 1000 * r.seconds + r.samples || r.gpu_milli_s_allocated < 0) std::abort();
    if (r.source >= f->ledger.sources().size()) std::abort();
    samples += r.samples;
  }
  if (samples < f->ledger.counted()) std::abort();
  if (f->ledger.counted() + f->ledger.duplicates() + static_cast<int64_t>(f->sla.size()) != f->lines) std::abort();
  return 0;
}
