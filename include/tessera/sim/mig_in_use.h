// Reading the MIG instances that exist now from a CSV file (`tessera mig plan --in-use FILE`):
//   gpu,profile,start,in_use
//   0,3g.40gb,0,1          GPU 0 has a 3g.40gb at slice 0 that runs work
//   0,1g.10gb,4,0          and a free 1g.10gb at slice 4
// Every GPU's instances must form a valid layout. Errors name the file, line and column of the
// bad field (csv.h), or the GPU whose layout breaks the model's rules.
//
// Callers: the CLI. Thread-safety: pure function (reads the file).
#pragma once

#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/partition/mig_planner.h"

namespace tessera::sim {

// One state per GPU 0 .. gpus-1 (GPUs the file does not name have no instances); an empty
// `path` gives all-empty GPUs.
StatusOr<std::vector<partition::MigGpuState>> ReadMigInUse(const MigGeometry& geometry, const std::string& path,
                                                           int gpus);

}  // namespace tessera::sim
