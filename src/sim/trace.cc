#include "tessera/sim/trace.h"

#include <charconv>
#include <map>
#include <unordered_set>

#include "tessera/sim/csv.h"

namespace tessera::sim {
namespace {

using placement::NodeSpec;
using placement::TaskRequest;

// Column indexes of the required columns; INVALID_ARGUMENT names the first one missing.
StatusOr<std::vector<size_t>> RequireColumns(const CsvTable& t, const std::vector<std::string>& names) {
  std::vector<size_t> idx;
  for (const std::string& n : names) {
    auto i = t.ColumnIndex(n);
    if (!i) {
      std::string have;
      for (const auto& h : t.header) have += (have.empty() ? "" : ",") + h;
      return InvalidArgumentError(t.path + ":1:1: missing column '" + n + "' (header has: " + have + ")");
    }
    idx.push_back(*i);
  }
  return idx;
}

StatusOr<int64_t> ParseInt(const CsvTable& t, const CsvRow& row, size_t col, int64_t lo, int64_t hi) {
  const std::string& s = row.fields[col];
  const std::string where = t.Where(row, col) + ": " + t.header[col];
  if (s.empty()) return InvalidArgumentError(where + ": empty value, expected an integer");
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) {
    return InvalidArgumentError(where + ": value '" + s + "' is out of range");
  }
  if (ec != std::errc() || ptr != s.data() + s.size()) {
    return InvalidArgumentError(where + ": expected an integer, got '" + s + "'");
  }
  if (v < lo) {
    return InvalidArgumentError(where + ": value " + s + (v < 0 ? " is negative" : " is too small") +
                                " (minimum " + std::to_string(lo) + ")");
  }
  if (v > hi) {
    return InvalidArgumentError(where + ": value " + s + " is absurd (maximum " + std::to_string(hi) + ")");
  }
  return v;
}

StatusOr<std::vector<NodeSpec>> NodesFromTable(const CsvTable& t, const GpuModelCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<size_t> c,
                           RequireColumns(t, {"sn", "cpu_milli", "memory_mib", "gpu", "model"}));
  if (t.rows.empty()) return InvalidArgumentError(t.path + ":2:1: node list is empty");
  std::vector<NodeSpec> nodes;
  nodes.reserve(t.rows.size());
  std::unordered_set<std::string> names;
  for (const CsvRow& row : t.rows) {
    NodeSpec n;
    n.name = row.fields[c[0]];
    if (n.name.empty()) return InvalidArgumentError(t.Where(row, c[0]) + ": sn: empty node name");
    if (!names.insert(n.name).second) {
      return InvalidArgumentError(t.Where(row, c[0]) + ": sn: duplicate node name '" + n.name + "'");
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t cpu, ParseInt(t, row, c[1], 0, kMaxCpuMilli));
    TESSERA_ASSIGN_OR_RETURN(int64_t mem, ParseInt(t, row, c[2], 0, kMaxMemoryMib));
    TESSERA_ASSIGN_OR_RETURN(int64_t gpus, ParseInt(t, row, c[3], 0, placement::kMaxGpusPerNode));
    n.cpu = CpuMilli{cpu};
    n.memory = MiB{mem};
    n.gpu_count = static_cast<int32_t>(gpus);
    const std::string& model = row.fields[c[4]];
    if (gpus > 0) {
      if (model.empty()) {
        return InvalidArgumentError(t.Where(row, c[4]) + ": model: node has " + std::to_string(gpus) +
                                    " GPUs but no model");
      }
      auto id = catalog.Find(model);
      if (!id.ok()) return InvalidArgumentError(t.Where(row, c[4]) + ": model: " + id.status().message());
      n.model = *id;
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

StatusOr<std::vector<PodRecord>> PodsFromTable(const CsvTable& t, const GpuModelCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<size_t> c,
                           RequireColumns(t, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}));
  const std::optional<size_t> spec_col = t.ColumnIndex("gpu_spec");
  if (t.rows.empty()) return InvalidArgumentError(t.path + ":2:1: pod list is empty");
  std::vector<PodRecord> pods;
  pods.reserve(t.rows.size());
  std::unordered_set<std::string> names;
  for (const CsvRow& row : t.rows) {
    PodRecord p;
    p.name = row.fields[c[0]];
    if (p.name.empty()) return InvalidArgumentError(t.Where(row, c[0]) + ": name: empty pod name");
    if (!names.insert(p.name).second) {
      return InvalidArgumentError(t.Where(row, c[0]) + ": name: duplicate pod name '" + p.name + "'");
    }
    TESSERA_ASSIGN_OR_RETURN(int64_t cpu, ParseInt(t, row, c[1], 0, kMaxCpuMilli));
    TESSERA_ASSIGN_OR_RETURN(int64_t mem, ParseInt(t, row, c[2], 0, kMaxMemoryMib));
    TESSERA_ASSIGN_OR_RETURN(int64_t num_gpu, ParseInt(t, row, c[3], 0, placement::kMaxGpusPerNode));
    TESSERA_ASSIGN_OR_RETURN(int64_t gpu_milli, ParseInt(t, row, c[4], 0, 1000));
    TaskRequest& r = p.request;
    r.cpu = CpuMilli{cpu};
    r.memory = MiB{mem};
    r.num_gpu = static_cast<int32_t>(num_gpu);
    r.gpu_milli = GpuMilli{gpu_milli};
    if (num_gpu == 0 && gpu_milli != 0) {
      return InvalidArgumentError(t.Where(row, c[4]) + ": gpu_milli: must be 0 when num_gpu is 0, got " +
                                  std::to_string(gpu_milli));
    }
    if (num_gpu > 0 && gpu_milli == 0) {
      return InvalidArgumentError(t.Where(row, c[4]) + ": gpu_milli: must be 1..1000 when num_gpu is " +
                                  std::to_string(num_gpu) + ", got 0");
    }
    if (num_gpu > 1 && gpu_milli != 1000) {
      return InvalidArgumentError(t.Where(row, c[4]) + ": gpu_milli: a " + std::to_string(num_gpu) +
                                  "-GPU task must ask for whole GPUs (1000), got " + std::to_string(gpu_milli));
    }
    if (spec_col) {
      auto mask = catalog.ParseModelList(row.fields[*spec_col]);
      if (!mask.ok()) {
        return InvalidArgumentError(t.Where(row, *spec_col) + ": gpu_spec: " + mask.status().message());
      }
      r.allowed_models = *mask;
    }
    if (Status s = placement::ValidateTask(r); !s.ok()) {
      return InvalidArgumentError(t.Where(row, 0) + ": " + s.message());
    }
    pods.push_back(std::move(p));
  }
  return pods;
}

}  // namespace

std::string FileStem(std::string_view path) {
  size_t slash = path.find_last_of('/');
  std::string_view base = slash == std::string_view::npos ? path : path.substr(slash + 1);
  size_t dot = base.find_last_of('.');
  if (dot != std::string_view::npos && dot > 0) base = base.substr(0, dot);
  return std::string(base);
}

std::vector<std::string> PodListNames(const std::vector<std::string>& paths) {
  std::map<std::string, int> stems;
  for (const std::string& p : paths) ++stems[FileStem(p)];
  std::vector<std::string> names;
  names.reserve(paths.size());
  for (const std::string& p : paths) names.push_back(stems[FileStem(p)] > 1 ? p : FileStem(p));
  return names;
}

StatusOr<std::vector<NodeSpec>> ParseNodeList(std::string_view text, std::string_view path,
                                              const GpuModelCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable t, ParseCsv(text, path));
  return NodesFromTable(t, catalog);
}

StatusOr<std::vector<NodeSpec>> ReadNodeList(const std::string& path, const GpuModelCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable t, ReadCsvFile(path));
  return NodesFromTable(t, catalog);
}

StatusOr<std::vector<PodRecord>> ParsePodList(std::string_view text, std::string_view path,
                                              const GpuModelCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable t, ParseCsv(text, path));
  return PodsFromTable(t, catalog);
}

StatusOr<std::vector<PodRecord>> ReadPodList(const std::string& path, const GpuModelCatalog& catalog) {
  TESSERA_ASSIGN_OR_RETURN(CsvTable t, ReadCsvFile(path));
  return PodsFromTable(t, catalog);
}

}  // namespace tessera::sim
