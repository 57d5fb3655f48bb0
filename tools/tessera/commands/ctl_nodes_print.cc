// `ctl nodes`: the MODEL column and the GPU map of `ctl nodes get` (CtlTable, ctl_print.cc).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tools/tessera/commands/ctl.h"

namespace tessera::cli {

using json = nlohmann::json;

namespace {

// " (NVML: 6600 MiB and 410 milli)" of a share or GPU, with the figures it has ("" for none).
std::string NvmlUse(const json& j) {
  std::string figures;
  if (j.contains("nvml_used_mem_mib")) figures = CtlText(j["nvml_used_mem_mib"]) + " MiB";
  if (j.contains("nvml_used_milli"))
    figures += (figures.empty() ? "" : " and ") + CtlText(j["nvml_used_milli"]) + " milli";
  return figures.empty() ? std::string() : " (NVML: " + figures + ")";
}

}  // namespace

std::string CtlModels(const json& gpus) {
  std::vector<std::pair<std::string, int>> models;
  for (const json& g : gpus) {
    const std::string m = CtlText(g["model"]);
    auto it = std::find_if(models.begin(), models.end(), [&](const auto& x) { return x.first == m; });
    if (it == models.end()) models.emplace_back(m, 1);
    else ++it->second;
  }
  if (models.size() <= 1) return models.empty() ? "-" : models[0].first;
  std::string out;
  for (const auto& [m, count] : models) out += (out.empty() ? "" : ",") + std::to_string(count) + "x" + m;
  return out;
}

// `ctl nodes get`: one line per GPU with a bar of its 1000 milli, one character per 50 milli,
// each share drawn with its own mark (the marks cycle through kMarks), then the shares beneath
// it. A GPU of 300 milli for workload 7 and 400 for workload 9:
//   GPU 0 A100-40GB [######========......] 700/1000 milli
//     # workload 7, tenant ml, 300 milli, memory limit 20480 MiB, fraction(300,20480MiB)
//     = workload 9, tenant cv, 400 milli, memory limit whole GPU, fraction(400,0MiB)
// and, where the agent sampled a share, ", using 6144 MiB and 150 milli" after it and its GPU,
// then NVML's figures where the sample carried them (NvmlUse). A local slot (a DRA claim, mode
// "local") reads "    % local slot, tenant k8s-dra/ns/c, 600 milli, memory limit 10240 MiB, local".
// A share's mark spans its milli rounded at the cumulative edges, so the marks add up to the sum.
std::string CtlGpuMap(const json& node) {
  constexpr int kCells = 20;
  constexpr std::string_view kMarks = "#=%*+@";
  std::string out;
  for (const json& g : node.value("gpus", json::array())) {
    const json shares = g.value("shares", json::array());
    std::string bar, below;
    int64_t cum = 0;
    size_t mark = 0;
    for (const json& sh : shares) {
      const int64_t milli = sh.value("milli", int64_t{0});
      const int64_t from = std::min<int64_t>(kCells, (cum * kCells + 500) / 1000);
      cum += milli;
      const int64_t to = std::min<int64_t>(kCells, (cum * kCells + 500) / 1000);
      const char c = kMarks[mark++ % kMarks.size()];
      bar.append(static_cast<size_t>(std::max<int64_t>(0, to - from)), c);
      const int64_t mem = sh.value("mem_mib", int64_t{0});
      // A local slot (a tenant of the node directory the control plane did not place, issue 34)
      // has no workload.
      const std::string who = sh.contains("workload") ? "workload " + CtlText(sh["workload"]) : std::string("local slot");
      below += "    " + std::string(1, c) + " " + who + ", tenant " + CtlText(sh.value("tenant", json())) +
               ", " + std::to_string(milli) +
               " milli, memory limit " + (mem > 0 ? std::to_string(mem) + " MiB" : std::string("whole GPU")) + ", " +
               CtlText(sh.value("mode", json()));
      if (sh.contains("used_mem_mib"))
        below += ", using " + CtlText(sh["used_mem_mib"]) + " MiB and " + CtlText(sh.value("used_milli", json())) + " milli" + NvmlUse(sh);
      if (sh.contains("mig_profile"))
        below += ", MIG " + CtlText(sh.value("mig_profile", json())) + " at slice " + CtlText(sh.value("mig_start", json()));
      below += "\n";
    }
    if (bar.size() < static_cast<size_t>(kCells)) bar.append(static_cast<size_t>(kCells) - bar.size(), '.');
    out += "GPU " + CtlText(g.value("index", json())) + " " + CtlText(g.value("model", json())) + " [" + bar + "] " +
           std::to_string(g.value("allocated_milli", int64_t{0})) + "/1000 milli" +
           (g.contains("used_mem_mib") ? ", using " + CtlText(g["used_mem_mib"]) + " MiB and " +
                                              CtlText(g.value("used_milli", json())) + " milli" + NvmlUse(g)
                                        : std::string()) +
           "\n" + below;
  }
  return out;
}


}  // namespace tessera::cli
