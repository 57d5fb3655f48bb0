// libFuzzer target: the backstop's reading of /proc/<pid>/maps (node/proc_maps.h) must never crash
// or read out of bounds, whatever the bytes; it says "shim" only where some line's file name starts
// with libtessera-shim, and "unknown" only for an empty text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "tessera/node/proc_maps.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::optional<bool> shim = tessera::node::MapsHoldTheShim(text);
  if (shim.has_value() == text.empty()) std::abort();
  if (shim == true && text.find("/libtessera-shim") == std::string_view::npos) std::abort();
  // Appending a shim line to any text makes it hold the shim.
  const std::string more = std::string(text) + "\n7f00-7f01 r-xp 0 fd:01 1 /usr/lib/libtessera-shim.so\n";
  if (tessera::node::MapsHoldTheShim(more) != true) std::abort();
  return 0;
}
