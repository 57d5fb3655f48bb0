// libFuzzer target: sacct's parsable output (tessera slurm reconcile --sacct) must never crash,
// hang or read out of bounds, whatever the bytes; what parses reconciles against nothing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tessera/integrations/slurm_reconcile.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto jobs = tessera::integrations::slurm::ParseSacct(text, "fuzz", 4);
  if (jobs.ok()) (void)tessera::integrations::slurm::Reconcile(*jobs, {});
  return 0;
}
