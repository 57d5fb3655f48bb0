#include "tessera/integrations/slurm_step.h"

#include <algorithm>
#include <charconv>

#include "tessera/node/memory_size.h"

namespace tessera::integrations::slurm {
namespace {

std::optional<long> ParseInt(const std::string& text) {
  long v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || text.empty()) return std::nullopt;
  return v;
}

std::vector<std::string> Split(const std::string& list, char sep) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= list.size();) {
    size_t at = list.find(sep, start);
    if (at == std::string::npos) at = list.size();
    out.push_back(list.substr(start, at - start));
    start = at + 1;
  }
  return out;
}

}  // namespace

const char* IsolationName(Isolation isolation) {
  switch (isolation) {
    case Isolation::kHardware: return "hardware";
    case Isolation::kProcess: return "process";
    case Isolation::kNone: return "none";
  }
  return "?";
}

StatusOr<uint64_t> ParseGpuMem(const std::string& text) {
  StatusOr<uint64_t> bytes = node::ParseMemorySize(text);
  if (!bytes.ok()) return InvalidArgumentError("--gpu-mem: " + std::string(bytes.status().message()));
  return *bytes;
}

StatusOr<int> ParseGpuShare(const std::string& text) {
  std::optional<long> v = ParseInt(text);
  if (!v || *v < 1 || *v > 100) return InvalidArgumentError("--gpu-share: '" + text + "' is not a percentage 1..100");
  return static_cast<int>(*v);
}

StatusOr<Isolation> ParseIsolation(const std::string& text) {
  for (Isolation i : {Isolation::kHardware, Isolation::kProcess, Isolation::kNone}) {
    if (text == IsolationName(i)) return i;
  }
  return InvalidArgumentError("--gpu-isolation: '" + text + "' is not one of hardware, process, none");
}

StatusOr<PluginArgs> ParsePluginArgs(const std::vector<std::string>& args) {
  PluginArgs out;
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    const std::string key = eq == std::string::npos ? a : a.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : a.substr(eq + 1);
    const std::string fail = "plugstack.conf argument '" + a + "': ";
    if (eq == std::string::npos || value.empty()) {
      return InvalidArgumentError(fail + "expected KEY=VALUE (node_dir=, shim=, nvml=, shards_per_gpu=)");
    }
    if (key == "node_dir") {
      out.node_dir = value;
    } else if (key == "shim") {
      out.shim = value;
    } else if (key == "nvml") {
      out.nvml = value;
    } else if (key == "shards_per_gpu") {
      std::optional<long> n = ParseInt(value);
      if (!n || *n < 1 || *n > 1000) return InvalidArgumentError(fail + "not a count 1..1000");
      out.shards_per_gpu = static_cast<int>(*n);
    } else {
      return InvalidArgumentError(fail + "unknown (use node_dir=, shim=, nvml=, shards_per_gpu=)");
    }
  }
  return out;
}

StatusOr<std::string> NodeDirOf(const std::string& node_dir, const std::optional<std::string>& node_name) {
  if (node_dir.find("%n") == std::string::npos) return node_dir;
  if (!node_name || node_name->empty() || node_name->find('/') != std::string::npos || *node_name == "." ||
      *node_name == "..") {
    return InvalidArgumentError("plugstack.conf node_dir=" + node_dir + ": %n needs the node's name, and SLURMD_NODENAME " +
                                (node_name ? "is '" + *node_name + "', not a plain name" : std::string("is not set")));
  }
  std::string out;
  for (size_t i = 0; i < node_dir.size(); ++i) {
    if (node_dir.compare(i, 2, "%n") == 0) {
      out += *node_name;
      ++i;
    } else {
      out += node_dir[i];
    }
  }
  return out;
}

StatusOr<std::vector<int>> StepGpus(const EnvLookup& env) {
  for (const char* var : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"}) {
    std::optional<std::string> value = env(var);
    if (!value) continue;
    std::vector<int> gpus;
    if (value->empty() || *value == "NoDevFiles") return gpus;  // Slurm's "no GPU" markers
    for (const std::string& item : Split(*value, ',')) {
      std::optional<long> i = ParseInt(item);
      if (!i || *i < 0 || *i > 1023) {
        return InvalidArgumentError(std::string(var) + "='" + *value + "': '" + item + "' is not a GPU index");
      }
      gpus.push_back(static_cast<int>(*i));
    }
    return gpus;
  }
  return std::vector<int>{};
}

StatusOr<std::vector<SlurmGpu>> MapSlurmGpus(const std::vector<node::NodeGpuFacts>& node_gpus,
                                             const std::vector<int>& slurm_indexes, bool shards) {
  std::vector<const node::NodeGpuFacts*> by_index;
  for (const node::NodeGpuFacts& g : node_gpus) by_index.push_back(&g);
  std::sort(by_index.begin(), by_index.end(), [](const auto* a, const auto* b) { return a->index < b->index; });
  std::vector<SlurmGpu> walk;
  for (const node::NodeGpuFacts* g : by_index) {
    if (!g->mig_enabled) walk.push_back({.gpu = g->index, .type = SlurmGpuType(g->model)});
    for (size_t m = 0; g->mig_enabled && !shards && m < g->mig_instances.size(); ++m) {
      walk.push_back({.gpu = g->index, .mig = static_cast<int>(m), .type = g->mig_instances[m].profile});
    }
  }
  const std::vector<SlurmGpu> slurm = InSlurmOrder(std::move(walk));
  std::vector<SlurmGpu> out;
  for (int i : slurm_indexes) {
    if (i < 0 || static_cast<size_t>(i) >= slurm.size()) {
      return InvalidArgumentError("Slurm's GPU " + std::to_string(i) + ": this node has " + std::to_string(slurm.size()) +
                                  (shards ? " GPU(s) with shards" : " GPU(s) and MIG instance(s)") +
                                  " as Slurm counts them (the node's GPU table or NVML; its gres.conf should be "
                                  "`tessera slurm config`'s)");
    }
    out.push_back(slurm[static_cast<size_t>(i)]);
  }
  return out;
}

StatusOr<int> ShardsOnNode(const EnvLookup& env) {
  std::optional<std::string> value = env("SLURM_SHARDS_ON_NODE");
  if (!value) return 0;
  std::optional<long> n = ParseInt(*value);
  if (!n || *n < 0 || *n > 100000) return InvalidArgumentError("SLURM_SHARDS_ON_NODE='" + *value + "': not a count");
  return static_cast<int>(*n);
}

StatusOr<TenantLimits> DeriveLimits(const JobOptions& options, int gpu, int shards_on_node, int shards_per_gpu,
                                    uint64_t gpu_memory_bytes) {
  TenantLimits limits{.gpu = gpu};
  if (shards_on_node > 0 && shards_per_gpu <= 0) {
    return InvalidArgumentError("the job holds " + std::to_string(shards_on_node) +
                                " shard(s) but plugstack.conf gives no shards_per_gpu= to size them");
  }
  // A shard request is served from one GPU (control-plane.md §4.5), so shards_on_node <= per GPU.
  const bool by_shards = shards_on_node > 0 && shards_on_node <= shards_per_gpu;
  const int shard_share = by_shards ? std::max(1, 100 * shards_on_node / shards_per_gpu) : 100;
  // Slurm places a shard job on a GPU by counting shards (docs/slurm.md "Which GPU"): its choice
  // keeps the tenants of a GPU inside it only if no job's limit is larger than its shards' part.
  const std::string shards_text = std::to_string(shards_on_node) + " of GPU " + std::to_string(gpu) + "'s " +
                                  std::to_string(shards_per_gpu) + " shards";
  if (options.mem_bytes) {
    if (gpu_memory_bytes > 0 && *options.mem_bytes > gpu_memory_bytes) {
      return InvalidArgumentError("--gpu-mem: " + std::to_string(*options.mem_bytes) + " bytes is more than GPU " +
                                  std::to_string(gpu) + "'s " + std::to_string(gpu_memory_bytes));
    }
    if (by_shards && gpu_memory_bytes == 0) {
      return FailedPreconditionError("--gpu-mem with " + shards_text +
                                     ": the GPU's memory is unknown (not in the node's GPU table, and NVML not "
                                     "loaded), so the limit cannot be checked against the shards' part");
    }
    if (by_shards) {
      const uint64_t per_shard = gpu_memory_bytes / static_cast<uint64_t>(shards_per_gpu);
      const uint64_t part = per_shard * static_cast<uint64_t>(shards_on_node);
      if (*options.mem_bytes > part) {
        const uint64_t needed = (*options.mem_bytes + per_shard - 1) / per_shard;
        return InvalidArgumentError("--gpu-mem: " + std::to_string(*options.mem_bytes) + " bytes is more than the " +
                                    shards_text + " give (" + std::to_string(part) +
                                    " bytes); ask for --gres=shard:" + std::to_string(needed) + " or less memory");
      }
    }
    limits.mem_bytes = *options.mem_bytes;
  } else if (gpu_memory_bytes == 0) {
    return FailedPreconditionError("GPU " + std::to_string(gpu) +
                                   "'s memory is unknown (not in the node's GPU table, and NVML not loaded): give --gpu-mem=SIZE");
  } else if (by_shards) {
    limits.mem_bytes = gpu_memory_bytes / static_cast<uint64_t>(shards_per_gpu) * static_cast<uint64_t>(shards_on_node);
  } else {
    limits.mem_bytes = gpu_memory_bytes;
  }
  if (options.share_percent) {
    if (by_shards && *options.share_percent > shard_share) {
      const int needed = (*options.share_percent * shards_per_gpu + 99) / 100;
      return InvalidArgumentError("--gpu-share: " + std::to_string(*options.share_percent) + " % is more than the " +
                                  shards_text + " give (" + std::to_string(shard_share) +
                                  " %); ask for --gres=shard:" + std::to_string(needed) + " or a smaller share");
    }
    limits.share = *options.share_percent;
  } else if (by_shards) {
    limits.share = shard_share;
  }
  return limits;
}

std::string TenantName(const std::string& account, const std::string& job_id) {
  return (account.empty() ? std::string("default") : account) + "." + job_id;
}

}  // namespace tessera::integrations::slurm
