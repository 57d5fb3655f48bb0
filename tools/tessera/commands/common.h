// Helpers shared by the CLI's commands (flag parsing and where the bundled data lives).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::cli {

// Where the bundled data lives: $TESSERA_DATA_DIR, else ./data, else the source tree's data/.
std::string DataDir();

// "42-51" or "42,43,50-51" -> seeds (each 0 .. 2^63-1, at most 10000); INVALID_ARGUMENT names
// the bad item and the flag.
StatusOr<std::vector<uint64_t>> ParseSeeds(const std::string& text);

}  // namespace tessera::cli
