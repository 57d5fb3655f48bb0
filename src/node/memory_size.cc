#include "tessera/node/memory_size.h"

#include <cctype>
#include <cstdlib>
#include <map>

#include "tessera/enforce/segment.h"

namespace tessera::node {

StatusOr<uint64_t> ParseMemorySize(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i), unit = text.substr(i);
  static const std::map<std::string, double> kUnits = {
      {"B", 1.0},   {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},  {"MB", 1e6},     {"GB", 1e9},        {"TB", 1e12}};
  char* end = nullptr;
  const double v = number.empty() ? -1 : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || v <= 0) {
    return InvalidArgumentError("'" + text + "': not a positive size like 8GiB or 512MiB");
  }
  if (unit.empty()) return InvalidArgumentError("'" + text + "': no unit (use " + std::string(kMemoryUnits) + ")");
  auto it = kUnits.find(unit);
  if (it == kUnits.end()) {
    return InvalidArgumentError("'" + text + "': unknown unit '" + unit + "' (use " + std::string(kMemoryUnits) + ")");
  }
  const double bytes = v * it->second;
  if (bytes >= static_cast<double>(enforce::kMaxCountedBytes)) {
    return InvalidArgumentError("'" + text + "': above the segment's 1 TiB per tenant and GPU");
  }
  return static_cast<uint64_t>(bytes);
}

}  // namespace tessera::node
