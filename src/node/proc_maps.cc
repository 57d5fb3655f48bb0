// /proc/<pid>/maps text (tessera/node/proc_maps.h).
#include "tessera/node/proc_maps.h"

#include <charconv>

namespace tessera::node {

std::optional<bool> MapsHoldTheShim(std::string_view maps, uint64_t shim_inode) {
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
    if (shim_inode == 0) continue;
    // The inode: the fifth space-separated field.
    size_t at = 0;
    for (int field = 0; field < 4 && at != std::string_view::npos; ++field) {
      at = line.find(' ', at);
      if (at != std::string_view::npos) at = line.find_first_not_of(' ', at);
    }
    if (at == std::string_view::npos || at >= slash) continue;
    uint64_t inode = 0;
    const auto [end, ec] = std::from_chars(line.data() + at, line.data() + slash, inode);
    if (ec == std::errc() && end != line.data() + at && inode == shim_inode) return true;
  }
  return maps.empty() ? std::nullopt : std::optional<bool>(false);
}

}  // namespace tessera::node
