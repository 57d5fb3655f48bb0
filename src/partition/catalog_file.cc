#include "tessera/partition/catalog_file.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace tessera::partition {
namespace {

using nlohmann::json;

// NVML_GPU_INSTANCE_PROFILE_* values (nvml.h, API v13).
constexpr std::pair<const char*, int> kNvmlProfiles[] = {
    {"NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1", 7}, {"NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1", 8},
    {"NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2", 9}, {"NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX", 10},
    {"NVML_GPU_INSTANCE_PROFILE_2_SLICE_GFX", 11},  {"NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX", 12},
    {"NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME", 13}, {"NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME", 14},
    {"NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME", 15}, {"NVML_GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME", 16},
    {"NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX", 17},  {"NVML_GPU_INSTANCE_PROFILE_1_SLICE", 0},
    {"NVML_GPU_INSTANCE_PROFILE_2_SLICE", 1},       {"NVML_GPU_INSTANCE_PROFILE_3_SLICE", 2},
    {"NVML_GPU_INSTANCE_PROFILE_4_SLICE", 3},       {"NVML_GPU_INSTANCE_PROFILE_7_SLICE", 4},
    {"NVML_GPU_INSTANCE_PROFILE_8_SLICE", 5},       {"NVML_GPU_INSTANCE_PROFILE_6_SLICE", 6},
};

class Reader {
 public:
  explicit Reader(std::string_view path) : path_(path) {}

  Status Error(const std::string& where, const std::string& what) const {
    return InvalidArgumentError(path_ + ": " + where + ": " + what);
  }
  StatusOr<int64_t> Int(const json& obj, const std::string& where, const char* key, int64_t lo, int64_t hi,
                        bool required = true, int64_t fallback = 0) const {
    const std::string at = where + "." + key;
    if (!obj.contains(key)) {
      if (required) return Error(at, "missing");
      return fallback;
    }
    const json& v = obj.at(key);
    if (!v.is_number_integer()) return Error(at, "expected an integer, got " + v.dump());
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) return Error(at, std::to_string(x) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
    return x;
  }
  double Number(const json& obj, const char* key) const {
    if (!obj.is_object() || !obj.contains(key)) return 0;
    const json& v = obj.at(key);
    if (v.is_number()) return v.get<double>();
    if (v.is_object()) {  // per-variant values: take the first number
      for (const auto& [k, x] : v.items()) {
        if (x.is_number()) return x.get<double>();
      }
    }
    return 0;
  }

 private:
  std::string path_;
};

// NVML_COMPUTE_INSTANCE_PROFILE_* index of an <n>c compute instance (nvml.h, API v13).
int CiProfileIndex(int slices) {
  switch (slices) {
    case 1: return 0;
    case 2: return 1;
    case 3: return 2;
    case 4: return 3;
    case 7: return 4;
    case 8: return 5;
    case 6: return 6;
    default: return -1;
  }
}

struct CiRow {
  int slices = 0;
  int max = 0;
  bool fills = false;
};

// compute_instance_profiles_within_gi.by_gi_compute_slices: {"3": [{"ci": "1c", "max": 3},
// ..., {"ci": "3c", "max": 1, "default": true}], ...}.
StatusOr<std::map<int, std::vector<CiRow>>> ParseCiTable(const Reader& rd, const json& doc) {
  std::map<int, std::vector<CiRow>> out;
  const std::string at = "compute_instance_profiles_within_gi";
  const json& top = doc[at];
  if (!top.is_object() || !top.contains("by_gi_compute_slices") ||
      !top["by_gi_compute_slices"].is_object()) {
    return rd.Error(at + ".by_gi_compute_slices", "missing or not an object");
  }
  for (const auto& [key, rows] : top["by_gi_compute_slices"].items()) {
    const std::string kat = at + ".by_gi_compute_slices." + key;
    int gi_slices = 0;
    if (key.empty() || key.size() > 1 || key[0] < '1' || key[0] > '8') {
      return rd.Error(kat, "expected a GPU instance's compute slices 1..8 as the key");
    }
    gi_slices = key[0] - '0';
    if (!rows.is_array() || rows.empty()) return rd.Error(kat, "expected a non-empty array");
    std::vector<CiRow> list;
    int fills = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const json& r = rows[i];
      const std::string rat = kat + "[" + std::to_string(i) + "]";
      if (!r.is_object()) return rd.Error(rat, "expected an object");
      if (!r.contains("ci") || !r["ci"].is_string()) return rd.Error(rat + ".ci", "missing or not a string like \"2c\"");
      const std::string ci = r["ci"].get<std::string>();
      if (ci.size() != 2 || ci[1] != 'c' || ci[0] < '1' || ci[0] > '8') {
        return rd.Error(rat + ".ci", "'" + ci + "' is not <n>c with n = 1..8");
      }
      CiRow row;
      row.slices = ci[0] - '0';
      if (row.slices > gi_slices) {
        return rd.Error(rat + ".ci", ci + " is larger than the " + key + "-slice GPU instance");
      }
      if (CiProfileIndex(row.slices) < 0) {
        return rd.Error(rat + ".ci", "NVML has no " + ci + " compute instance profile");
      }
      TESSERA_ASSIGN_OR_RETURN(int64_t mx, rd.Int(r, rat, "max", 1, 8));
      const int placements = static_cast<int>(MigComputeInstanceStarts(gi_slices, row.slices).size());
      if (mx > placements) {
        return rd.Error(rat + ".max", std::to_string(mx) + " exceeds the " + std::to_string(placements) +
                                          " placement(s) of a " + ci + " in a " + key +
                                          "-slice GPU instance");
      }
      row.max = static_cast<int>(mx);
      if (r.contains("default")) {
        if (!r["default"].is_boolean()) return rd.Error(rat + ".default", "expected true or false");
        row.fills = r["default"].get<bool>();
        if (row.fills && row.slices != gi_slices) {
          return rd.Error(rat + ".default", "only the " + key + "c compute instance fills the GPU instance");
        }
      } else {
        row.fills = row.slices == gi_slices;
      }
      fills += row.fills ? 1 : 0;
      for (const CiRow& other : list) {
        if (other.slices == row.slices) return rd.Error(rat + ".ci", "duplicate " + ci);
      }
      list.push_back(row);
    }
    if (fills != 1) return rd.Error(kat, "needs exactly one compute instance of " + key + "c filling the GPU instance");
    std::sort(list.begin(), list.end(), [](const CiRow& a, const CiRow& b) { return a.slices < b.slices; });
    out[gi_slices] = std::move(list);
  }
  return out;
}

// The built-in catalog's compute-instance table (the same for every built-in MIG model), by GI
// compute slices.
std::map<int, std::vector<CiRow>> BuiltinCiTable() {
  std::map<int, std::vector<CiRow>> out;
  const GpuModelCatalog& cat = GpuModelCatalog::Builtin();
  for (size_t i = 0; i < cat.size(); ++i) {
    const GpuModelInfo& m = cat.info(GpuModelId(static_cast<uint32_t>(i)));
    if (!m.mig) continue;
    for (const MigProfile& p : m.mig->profiles) {
      if (out.count(p.compute_slices)) continue;
      std::vector<CiRow> rows;
      for (const MigComputeProfile& c : p.compute_profiles) {
        rows.push_back({c.compute_slices, c.max_count, c.fills_gpu_instance});
      }
      out[p.compute_slices] = std::move(rows);
    }
  }
  return out;
}

std::vector<MigComputeProfile> ComputeProfilesFor(const MigProfile& gi, const std::vector<CiRow>& rows) {
  std::vector<MigComputeProfile> out;
  for (const CiRow& r : rows) {
    MigComputeProfile c;
    c.name = std::to_string(r.slices) + "c." + gi.name;
    c.compute_slices = r.slices;
    c.nvml_profile_index = CiProfileIndex(r.slices);
    c.max_count = r.max;
    c.starts = MigComputeInstanceStarts(gi.compute_slices, r.slices);
    c.fills_gpu_instance = r.fills;
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

StatusOr<std::vector<GpuModelInfo>> ParseGpuModelsJson(std::string_view text, std::string_view path) {
  const Reader rd(path);
  json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return rd.Error("(document)", "not valid JSON");
  if (!doc.is_object() || !doc.contains("gpus") || !doc["gpus"].is_array()) {
    return rd.Error("(document)", "expected an object with a \"gpus\" array");
  }
  std::map<int, std::vector<CiRow>> ci_table;
  std::string ci_status;
  if (doc.contains("compute_instance_profiles_within_gi")) {
    TESSERA_ASSIGN_OR_RETURN(ci_table, ParseCiTable(rd, doc));
    ci_status = "from " + std::string(path);
  } else {
    ci_table = BuiltinCiTable();
    ci_status = "the built-in catalog's table (the file has no compute_instance_profiles_within_gi)";
  }
  std::vector<GpuModelInfo> out;
  std::set<std::string> names;
  for (size_t gi = 0; gi < doc["gpus"].size(); ++gi) {
    const json& g = doc["gpus"][gi];
    const std::string at = "gpus[" + std::to_string(gi) + "]";
    if (!g.is_object()) return rd.Error(at, "expected an object");
    if (!g.contains("model") || !g["model"].is_string() || g["model"].get<std::string>().empty()) {
      return rd.Error(at + ".model", "missing or not a non-empty string");
    }
    GpuModelInfo m;
    m.name = g["model"].get<std::string>();
    if (!names.insert(m.name).second) return rd.Error(at + ".model", "duplicate model '" + m.name + "'");
    m.note = "from " + std::string(path);
    const json specs = g.contains("specs") && g["specs"].is_object() ? g["specs"] : json::object();
    const double total_mib = rd.Number(specs, "nvidia_smi_total_mib");
    const double gb = rd.Number(specs, "memory_gb");
    if (!(total_mib > 0) && !(gb > 0)) return rd.Error(at + ".specs", "needs memory_gb or nvidia_smi_total_mib > 0");
    if (total_mib > 1e9 || gb > 1e6) return rd.Error(at + ".specs", "absurd memory size");
    m.memory = MiB{static_cast<int64_t>(total_mib > 0 ? total_mib : std::round(gb * 1024))};
    m.sm_count = static_cast<int>(std::clamp(rd.Number(specs, "sm_count"), 0.0, 1e6));
    m.memory_bandwidth_gbps = std::clamp(rd.Number(specs, "memory_bandwidth_gbps"), 0.0, 1e9);
    m.bf16_dense_tflops = std::clamp(rd.Number(specs, "bf16_dense_tflops"), 0.0, 1e9);
    if (g.contains("gpu_instance_profiles")) {
      MigGeometry geo;
      TESSERA_ASSIGN_OR_RETURN(int64_t cs, rd.Int(g, at, "compute_slices", 1, 8));
      TESSERA_ASSIGN_OR_RETURN(int64_t ms, rd.Int(g, at, "memory_slices", 1, 31));
      TESSERA_ASSIGN_OR_RETURN(int64_t mx, rd.Int(g, at, "max_gpu_instances", 1, 31));
      geo.compute_slices = static_cast<int>(cs);
      geo.memory_slices = static_cast<int>(ms);
      geo.max_gpu_instances = static_cast<int>(mx);
      geo.placement_status = "from " + std::string(path);
      geo.compute_profile_status = ci_status;
      const json& profiles = g["gpu_instance_profiles"];
      if (!profiles.is_array() || profiles.empty()) {
        return rd.Error(at + ".gpu_instance_profiles", "expected a non-empty array");
      }
      std::set<std::string> profile_names;
      for (size_t pi = 0; pi < profiles.size(); ++pi) {
        const json& p = profiles[pi];
        const std::string pat = at + ".gpu_instance_profiles[" + std::to_string(pi) + "]";
        if (!p.is_object()) return rd.Error(pat, "expected an object");
        MigProfile prof;
        if (!p.contains("name") || !p["name"].is_string() || p["name"].get<std::string>().empty()) {
          return rd.Error(pat + ".name", "missing or not a non-empty string");
        }
        prof.name = p["name"].get<std::string>();
        if (!profile_names.insert(prof.name).second) return rd.Error(pat + ".name", "duplicate profile '" + prof.name + "'");
        TESSERA_ASSIGN_OR_RETURN(int64_t pcs, rd.Int(p, pat, "compute_slices", 1, geo.compute_slices));
        TESSERA_ASSIGN_OR_RETURN(int64_t pms, rd.Int(p, pat, "memory_slices", 1, geo.memory_slices));
        TESSERA_ASSIGN_OR_RETURN(int64_t pmx, rd.Int(p, pat, "max_count", 1, geo.max_gpu_instances));
        TESSERA_ASSIGN_OR_RETURN(int64_t pid, rd.Int(p, pat, "profile_id", -1, 1000, false, -1));
        prof.compute_slices = static_cast<int>(pcs);
        prof.memory_slices = static_cast<int>(pms);
        prof.max_count = static_cast<int>(pmx);
        prof.profile_id = static_cast<int>(pid);
        if (!p.contains("nvml_profile_index")) return rd.Error(pat + ".nvml_profile_index", "missing");
        const json& idx = p["nvml_profile_index"];
        if (idx.is_number_integer()) {
          const int64_t v = idx.get<int64_t>();
          if (v < 0 || v > 17) return rd.Error(pat + ".nvml_profile_index", std::to_string(v) + " is outside 0..17");
          prof.nvml_profile_index = static_cast<int>(v);
        } else if (idx.is_string()) {
          const std::string s = idx.get<std::string>();
          int found = -1;
          for (const auto& [name, value] : kNvmlProfiles) {
            const std::string n(name);
            // The name may be followed by a space and a comment, as in the shipped file.
            if (s == n || s.rfind(n + " ", 0) == 0) {
              found = value;
              break;
            }
          }
          if (found < 0) return rd.Error(pat + ".nvml_profile_index", "unknown NVML profile constant '" + s + "'");
          prof.nvml_profile_index = found;
        } else {
          return rd.Error(pat + ".nvml_profile_index", "expected an NVML constant name or a number");
        }
        const std::string plat = pat + ".placements";
        if (!p.contains("placements") || !p["placements"].is_object()) return rd.Error(plat, "missing or not an object");
        const json& pl = p["placements"];
        TESSERA_ASSIGN_OR_RETURN(int64_t size, rd.Int(pl, plat, "size", 1, geo.memory_slices));
        if (size != prof.memory_slices) {
          return rd.Error(plat + ".size", std::to_string(size) + " differs from memory_slices " +
                                              std::to_string(prof.memory_slices));
        }
        prof.size = static_cast<int>(size);
        if (!pl.contains("starts") || !pl["starts"].is_array() || pl["starts"].empty()) {
          return rd.Error(plat + ".starts", "expected a non-empty array");
        }
        for (size_t si = 0; si < pl["starts"].size(); ++si) {
          const json& st = pl["starts"][si];
          const std::string sat = plat + ".starts[" + std::to_string(si) + "]";
          if (!st.is_number_integer()) return rd.Error(sat, "expected an integer");
          const int64_t start = st.get<int64_t>();
          if (start < 0 || start + size > geo.memory_slices) {
            return rd.Error(sat, "start " + std::to_string(start) + " + size " + std::to_string(size) + " passes the " +
                                     std::to_string(geo.memory_slices) + " memory slices");
          }
          prof.starts.push_back(static_cast<int>(start));
        }
        double mib = 0;
        if (p.contains("observed_lgip") && p["observed_lgip"].is_array()) {
          for (const json& o : p["observed_lgip"]) {
            if (o.is_object() && o.contains("memory_mib") && o["memory_mib"].is_number()) {
              mib = o["memory_mib"].get<double>();
              if (o.contains("sm") && o["sm"].is_number_integer()) {
                prof.multiprocessors = static_cast<int>(std::clamp<int64_t>(o["sm"].get<int64_t>(), 0, 100000));
              }
              break;
            }
          }
        }
        if (!(mib > 0)) mib = std::round(rd.Number(p, "memory_gb_nominal") * 1024);
        if (mib < 0 || mib > 1e9) return rd.Error(pat, "absurd memory size");
        prof.memory = MiB{static_cast<int64_t>(mib)};
        prof.media_extensions = p.contains("media_extensions") && p["media_extensions"].is_boolean() &&
                                p["media_extensions"].get<bool>();
        auto rows = ci_table.find(prof.compute_slices);
        if (rows != ci_table.end()) {
          prof.compute_profiles = ComputeProfilesFor(prof, rows->second);
        } else if (CiProfileIndex(prof.compute_slices) >= 0) {
          // No row for this size: only the compute instance that fills the GPU instance.
          prof.compute_profiles = ComputeProfilesFor(prof, {{prof.compute_slices, 1, true}});
        } else {
          return rd.Error(pat + ".compute_slices", "no compute-instance profiles for a " +
                                                       std::to_string(prof.compute_slices) +
                                                       "-slice GPU instance (NVML has none of that size)");
        }
        geo.profiles.push_back(std::move(prof));
      }
      m.mig = std::move(geo);
    }
    out.push_back(std::move(m));
  }
  if (out.empty()) return rd.Error("gpus", "no models");
  return out;
}

StatusOr<GpuModelCatalog> CatalogWithModels(const std::vector<GpuModelInfo>& extra) {
  GpuModelCatalog catalog = GpuModelCatalog::Builtin();
  for (const GpuModelInfo& m : extra) TESSERA_RETURN_IF_ERROR(catalog.Add(m));
  return catalog;
}

}  // namespace tessera::partition
