// The GPU table's text: format and parse (gpu_table_io.cc reads, writes and publishes it).
#include "tessera/node/gpu_table.h"

#include <charconv>

namespace tessera::node {
namespace {

constexpr std::string_view kHeader = "# tessera gpu table 2";

template <typename T>
bool ParseNumber(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

std::string GpuTablePath(const std::string& node_dir) { return node_dir + "/gpus.tsv"; }

std::string FormatGpuTable(const std::vector<NodeGpuFacts>& gpus) {
  std::string out = std::string(kHeader) + "\n# index\tuuid\tminor\tmemory_mib\tmig\n";
  for (const NodeGpuFacts& g : gpus) {
    out += std::to_string(g.index) + "\t" + (g.uuid.empty() ? "-" : g.uuid) + "\t" + std::to_string(g.minor) + "\t" +
           std::to_string(g.memory_mib) + "\t" + (g.mig_enabled ? "mig" : "-") + "\n";
  }
  return out;
}

StatusOr<std::vector<NodeGpuFacts>> ParseGpuTable(std::string_view text, const std::string& where) {
  std::vector<NodeGpuFacts> out;
  size_t line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    const std::string at = where + ":" + std::to_string(line_no) + ": ";
    std::vector<std::string_view> fields;
    for (size_t start = 0;;) {
      const size_t tab = line.find('\t', start);
      fields.push_back(line.substr(start, tab == std::string_view::npos ? std::string_view::npos : tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
    if (fields.size() != 4 && fields.size() != 5) {
      return InvalidArgumentError(at + "expected 5 tab-separated fields (index, uuid, minor, memory_mib, mig), got " +
                                  std::to_string(fields.size()));
    }
    NodeGpuFacts g;
    if (!ParseNumber(fields[0], g.index) || g.index < 0 || g.index > 1023) {
      return InvalidArgumentError(at + "index '" + std::string(fields[0]) + "' is not a GPU index (0..1023)");
    }
    if (fields[1].empty()) return InvalidArgumentError(at + "uuid is empty (write - for none)");
    if (fields[1] != "-") g.uuid = std::string(fields[1]);
    if (!ParseNumber(fields[2], g.minor) || g.minor < -1) {
      return InvalidArgumentError(at + "minor '" + std::string(fields[2]) + "' is not a device minor (-1 for none)");
    }
    if (!ParseNumber(fields[3], g.memory_mib)) {
      return InvalidArgumentError(at + "memory_mib '" + std::string(fields[3]) + "' is not a count of MiB");
    }
    if (fields.size() == 5) {
      if (fields[4] != "mig" && fields[4] != "-") {
        return InvalidArgumentError(at + "mig '" + std::string(fields[4]) + "' is neither 'mig' nor '-'");
      }
      g.mig_enabled = fields[4] == "mig";
    }
    if (GpuFactsOf(out, g.index)) {
      return InvalidArgumentError(at + "GPU " + std::to_string(g.index) + " is listed twice");
    }
    out.push_back(std::move(g));
  }
  return out;
}

std::optional<NodeGpuFacts> GpuFactsOf(const std::vector<NodeGpuFacts>& table, int index) {
  for (const NodeGpuFacts& g : table)
    if (g.index == index) return g;
  return std::nullopt;
}

}  // namespace tessera::node
