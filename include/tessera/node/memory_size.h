// ParseMemorySize: a device memory size as people write it ("8GiB", "512MiB", "1.5GB"), for the
// node side's tenant requests (`tessera run --mem`, the SPANK plugin's option, the device
// plugin's annotation). A unit is required: B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB,
// GB, TB (powers of 1000); "4096" is an error, not 4096 bytes. At most the segment's 1 TiB per
// tenant and GPU. Errors name the text: "'4096': no unit (use B, KiB, ... or TB)".
//
//   ParseMemorySize("1.5GiB") -> 1610612736;  ParseMemorySize("64MiB") -> 67108864
//
// Pure; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "tessera/core/status.h"

namespace tessera::node {

inline constexpr const char* kMemoryUnits = "B, KiB, MiB, GiB, TiB, KB, MB, GB or TB";

StatusOr<uint64_t> ParseMemorySize(const std::string& text);

}  // namespace tessera::node
