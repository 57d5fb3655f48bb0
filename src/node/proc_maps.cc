// /proc/<pid>/maps text (tessera/node/proc_maps.h).
#include "tessera/node/proc_maps.h"

namespace tessera::node {

std::optional<bool> MapsHoldTheShim(std::string_view maps) {
  // Each line: address perms offset dev inode [path]; the path is the rest after the fifth field.
  for (size_t start = 0; start < maps.size();) {
    const size_t nl = maps.find('\n', start);
    const std::string_view line = maps.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    start = nl == std::string_view::npos ? maps.size() : nl + 1;
    const size_t slash = line.find('/');
    if (slash == std::string_view::npos) continue;
    const std::string_view path = line.substr(slash);
    const size_t base = path.rfind('/');
    if (path.substr(base + 1).rfind("libtessera-shim", 0) == 0) return true;
  }
  return maps.empty() ? std::nullopt : std::optional<bool>(false);
}

}  // namespace tessera::node
