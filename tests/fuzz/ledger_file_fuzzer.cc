// libFuzzer target for the ledger file parser (metering/ledger_file.h) behind the gzip decoder
// that reads it (core/input_bytes.h, as `tessera bill --usage` does): arbitrary bytes, gzip or
// not, must give a ledger or an error with a message, never a crash, a hang or an exception.
// Bytes that are not gzip pass the decoder unchanged; a decoder error names the file. A parsed
// ledger's hourly records must stay inside their hours, and its counts must add up.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tessera/core/gpu_model.h"
#include "tessera/core/input_bytes.h"
#include "tessera/metering/civil_time.h"
#include "tessera/metering/ledger_file.h"

using namespace tessera::metering;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // A small bound: a few KiB of gzip can expand a thousandfold.
  auto text = tessera::DecompressIfGzip(bytes, "fuzz.jsonl.gz", {.max_output_bytes = 1 << 20});
  if (!tessera::IsGzip(bytes) && !(text.ok() && *text == bytes)) std::abort();  // plain text passes through
  if (!text.ok()) {
    if (text.status().message().rfind("fuzz.jsonl.gz: ", 0) != 0) std::abort();
    return 0;
  }
  auto f = ParseLedgerJsonl(*text, "fuzz.jsonl", tessera::GpuModelCatalog::Builtin());
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
