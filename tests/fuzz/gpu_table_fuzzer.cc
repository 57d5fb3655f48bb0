// libFuzzer target: the node's GPU table (gpus.tsv, read by every Slurm task; its MIG instance
// lines included) must never crash, hang or read out of bounds, whatever the bytes; what parses
// formats and parses back the same, every GPU's MIG instances in their order.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tessera/node/gpu_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto gpus = tessera::node::ParseGpuTable(text, "fuzz");
  if (!gpus.ok()) return 0;
  auto again = tessera::node::ParseGpuTable(tessera::node::FormatGpuTable(*gpus), "fuzz");
  if (!again.ok() || *again != *gpus) std::abort();
  return 0;
}
