// The GPU table's text: format and parse (gpu_table_io.cc reads, writes and publishes it).
#include "tessera/node/gpu_table.h"

#include <charconv>

namespace tessera::node {
namespace {

constexpr std::string_view kHeader = "# tessera gpu table 3";

template <typename T>
bool ParseNumber(std::string_view text, T& out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// A name field (uuid, model, MIG profile) is printable text: a control byte (a stray '\r' of a
// CRLF file in the middle of a line, a NUL) would not format and parse back as itself.
Status CheckNameField(std::string_view value, const std::string& at, const char* field) {
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      return InvalidArgumentError(at + field + " has a control character (byte " + std::to_string(byte) + ")");
    }
  }
  return Status::Ok();
}

// A "mig" line (gpu_table.h): appended to its parent GPU's instances, which the table listed above
// it with MIG on.
Status ParseMigLine(const std::vector<std::string_view>& fields, const std::string& at, std::vector<NodeGpuFacts>& out) {
  if (fields.size() != 7) {
    return InvalidArgumentError(at + "expected 7 tab-separated fields for a MIG instance (mig, gpu, gpu_instance, "
                                "compute_instance, uuid, profile, memory_mib), got " + std::to_string(fields.size()));
  }
  int gpu = 0;
  MigInstanceFacts m;
  if (!ParseNumber(fields[1], gpu)) {
    return InvalidArgumentError(at + "gpu '" + std::string(fields[1]) + "' is not a GPU index");
  }
  if (!ParseNumber(fields[2], m.gpu_instance_id) || m.gpu_instance_id < 0) {
    return InvalidArgumentError(at + "gpu_instance '" + std::string(fields[2]) + "' is not a GPU instance id");
  }
  if (!ParseNumber(fields[3], m.compute_instance_id) || m.compute_instance_id < 0) {
    return InvalidArgumentError(at + "compute_instance '" + std::string(fields[3]) + "' is not a compute instance id");
  }
  if (fields[4].empty()) return InvalidArgumentError(at + "uuid is empty (write - for none)");
  TESSERA_RETURN_IF_ERROR(CheckNameField(fields[4], at, "uuid"));
  if (fields[4] != "-") m.uuid = std::string(fields[4]);
  if (fields[5].empty()) return InvalidArgumentError(at + "profile is empty");
  TESSERA_RETURN_IF_ERROR(CheckNameField(fields[5], at, "profile"));
  m.profile = std::string(fields[5]);
  if (!ParseNumber(fields[6], m.memory_mib)) {
    return InvalidArgumentError(at + "memory_mib '" + std::string(fields[6]) + "' is not a count of MiB");
  }
  for (NodeGpuFacts& g : out) {
    if (g.index != gpu) continue;
    if (!g.mig_enabled) {
      return InvalidArgumentError(at + "gpu " + std::to_string(gpu) + " is not in MIG mode (its line's mig field is '-')");
    }
    g.mig_instances.push_back(std::move(m));
    return Status::Ok();
  }
  return InvalidArgumentError(at + "gpu " + std::to_string(gpu) + " is not listed above its MIG instance");
}

}  // namespace

std::string GpuTablePath(const std::string& node_dir) { return node_dir + "/gpus.tsv"; }

std::string FormatGpuTable(const std::vector<NodeGpuFacts>& gpus) {
  std::string out = std::string(kHeader) +
                    "\n# index\tuuid\tminor\tmemory_mib\tmig\tmodel\n"
                    "# mig\tgpu\tgpu_instance\tcompute_instance\tuuid\tprofile\tmemory_mib (in Slurm's order)\n";
  for (const NodeGpuFacts& g : gpus) {
    out += std::to_string(g.index) + "\t" + (g.uuid.empty() ? "-" : g.uuid) + "\t" + std::to_string(g.minor) + "\t" +
           std::to_string(g.memory_mib) + "\t" + (g.mig_enabled ? "mig" : "-") + "\t" + (g.model.empty() ? "-" : g.model) +
           "\n";
    for (const MigInstanceFacts& m : g.mig_instances) {
      out += "mig\t" + std::to_string(g.index) + "\t" + std::to_string(m.gpu_instance_id) + "\t" +
             std::to_string(m.compute_instance_id) + "\t" + (m.uuid.empty() ? "-" : m.uuid) + "\t" + m.profile +
             "\t" + std::to_string(m.memory_mib) + "\n";
    }
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
    if (fields[0] == "mig") {
      TESSERA_RETURN_IF_ERROR(ParseMigLine(fields, at, out));
      continue;
    }
    if (fields.size() < 4 || fields.size() > 6) {
      return InvalidArgumentError(at + "expected 6 tab-separated fields (index, uuid, minor, memory_mib, mig, model), got " +
                                  std::to_string(fields.size()));
    }
    NodeGpuFacts g;
    if (!ParseNumber(fields[0], g.index) || g.index < 0 || g.index > 1023) {
      return InvalidArgumentError(at + "index '" + std::string(fields[0]) + "' is not a GPU index (0..1023)");
    }
    if (fields[1].empty()) return InvalidArgumentError(at + "uuid is empty (write - for none)");
    TESSERA_RETURN_IF_ERROR(CheckNameField(fields[1], at, "uuid"));
    if (fields[1] != "-") g.uuid = std::string(fields[1]);
    if (!ParseNumber(fields[2], g.minor) || g.minor < -1) {
      return InvalidArgumentError(at + "minor '" + std::string(fields[2]) + "' is not a device minor (-1 for none)");
    }
    if (!ParseNumber(fields[3], g.memory_mib)) {
      return InvalidArgumentError(at + "memory_mib '" + std::string(fields[3]) + "' is not a count of MiB");
    }
    if (fields.size() >= 5) {
      if (fields[4] != "mig" && fields[4] != "-") {
        return InvalidArgumentError(at + "mig '" + std::string(fields[4]) + "' is neither 'mig' nor '-'");
      }
      g.mig_enabled = fields[4] == "mig";
    }
    if (fields.size() == 6) {
      if (fields[5].empty()) return InvalidArgumentError(at + "model is empty (write - for unknown)");
      TESSERA_RETURN_IF_ERROR(CheckNameField(fields[5], at, "model"));
      if (fields[5] != "-") g.model = std::string(fields[5]);
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
