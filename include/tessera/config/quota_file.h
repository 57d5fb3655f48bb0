// The quota file: tenants, their hierarchy and quotas, in YAML.
//
//   # quotas.yaml
//   capacity:                      # optional: the cluster the top-level guarantees must fit
//     gpu_milli: 512000
//   tenants:
//     - name: acme                 # unique
//       weight: 2                  # over-quota weight (default 1)
//       guaranteed: {gpu_milli: 64000, gpu_memory_mib: 1048576, gpus: {A100-80GB: 8}}
//       limit: {gpu_milli: 128000} # a dimension not given is unlimited (limit) or 0 (guaranteed)
//     - name: vision
//       parent: acme               # any depth; a parent is defined anywhere in the list
//       guaranteed: {gpu_milli: 32000}
//
// Every problem is reported at once, each with file:line and the tenant or field: bad YAML,
// unknown keys, non-integer or negative quantities, unknown GPU models (the catalog's names),
// unknown parents, cycles, guaranteed > limit, children over their parent, guarantees over the
// capacity. The config layer: the only place that reads this file (sched does no I/O); callers
// are the CLI, the simulator's scenario and, later, `tessera serve`. Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/sched/tenant.h"

namespace tessera::config {

struct QuotaFile {
  sched::TenantTree tenants;
  std::optional<sched::Resources> capacity;
};

// `source` names the file in messages. GPU model names are checked against `catalog`.
StatusOr<QuotaFile> ParseQuotaYaml(std::string_view text, std::string_view source,
                                   const GpuModelCatalog& catalog);
// Reads and parses a file (NOT_FOUND if it cannot be read).
StatusOr<QuotaFile> LoadQuotaFile(const std::string& path, const GpuModelCatalog& catalog);

}  // namespace tessera::config
