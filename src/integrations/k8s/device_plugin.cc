// SharePlugin (tessera/integrations/k8s/device_plugin.h): GPUs cut into share devices, packed
// preferred allocations, Allocate -> a slot of the node's segment and the shim's edits.
#include "tessera/integrations/k8s/device_plugin.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <mutex>
#include <set>

#include <nlohmann/json.hpp>

#include "src/integrations/k8s/checkpoint.h"
#include "tessera/enforce/nvml.h"
#include "tessera/enforce/segment.h"
#include "tessera/node/launcher.h"
#include "tessera/node/node_dir.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/gpu_choice.h"

namespace tessera::k8s {
namespace {

using json = nlohmann::json;

constexpr char kSeparator[] = "::";
// The workload label of a slot whose pod is not known yet.
constexpr char kUnnamedWorkload[] = "k8s-device-plugin";
constexpr int kCheckpointVersion = 1;

struct Gpu {
  std::string uuid;
  uint64_t memory_bytes = 0;
  node::GpuPin pin;
  bool healthy = true;
};

// The GPUs as NVML says now (opened and closed each time, so that a driver reloaded meanwhile is
// seen); a GPU NVML does not answer for is unhealthy.
StatusOr<std::vector<Gpu>> ReadGpus(const std::string& library) {
  enforce::DlopenNvml nvml({.library_path = library});
  if (Status st = nvml.Init(); !st.ok()) {
    return FailedPreconditionError("NVML (" + library + "): " + std::string(st.message()) +
                                   " (the shares' memory limits come from it)");
  }
  std::vector<Gpu> gpus;
  StatusOr<uint32_t> count = nvml.DeviceCount();
  if (!count.ok()) {
    (void)nvml.Shutdown();
    return FailedPreconditionError("NVML: " + std::string(count.status().message()));
  }
  for (uint32_t g = 0; g < *count; ++g) {
    Gpu gpu;
    StatusOr<std::string> uuid = nvml.DeviceUuid(g);
    StatusOr<enforce::DeviceMemory> memory = nvml.Memory(g);
    StatusOr<uint32_t> minor = nvml.MinorNumber(g);
    gpu.healthy = uuid.ok() && memory.ok();
    gpu.uuid = uuid.ok() ? *uuid : "gpu-" + std::to_string(g);
    gpu.memory_bytes = memory.ok() ? static_cast<uint64_t>(memory->total.value()) << 20 : 0;
    gpu.pin = {.visible_devices = uuid.ok() ? *uuid : std::to_string(g), .uuid = uuid.ok() ? *uuid : "",
               .minor = minor.ok() ? static_cast<int>(*minor) : -1};
    gpus.push_back(std::move(gpu));
  }
  (void)nvml.Shutdown();
  return gpus;
}

}  // namespace

struct SharePlugin::State {
  SharePluginOptions options;
  node::NodeDir node{""};
  std::string shim;
  mutable std::mutex mu;
  std::vector<Gpu> gpus;
  std::map<std::string, std::pair<int, int>> devices;  // id -> (gpu, k)
  std::map<std::string, std::string> holder;           // device id -> tenant of its slot
  struct Slot {
    std::vector<std::string> ids;
    node::TenantRequest tenant;
    int index = -1;
    std::chrono::steady_clock::time_point made;
  };
  std::map<std::string, Slot> slots;  // by tenant
  std::string checkpoint_path;
  std::vector<std::string> not_adopted;  // Recover's slots left behind, one line each

  std::string Id(int gpu, int k) const { return gpus[gpu].uuid + kSeparator + std::to_string(k); }

  Status Unknown(const std::string& id) const {
    const int n = options.shares_per_gpu;
    std::string known = gpus.empty() ? "none (no GPU)"
                                     : Id(0, 0) + ".." + Id(0, n - 1) + " of " + std::to_string(gpus.size()) + " GPUs";
    return InvalidArgumentError("device '" + id + "': not a device of this plugin (" + options.resource_name + ": " +
                                known + ")");
  }

  long Member() const { return options.member_pid > 0 ? options.member_pid : static_cast<long>(::getpid()); }

  std::string TenantFile(const std::string& tenant) const {
    std::string name = tenant.substr(tenant.find('/') + 1);
    std::replace(name.begin(), name.end(), ':', '_');
    return options.state_dir + "/tenants/" + name;
  }

  // Leaves the slot; the checkpoint is the caller's (one write per change).
  void Leave(const std::string& tenant) {
    (void)node.LeaveTenant(tenant, Member());
    std::remove(TenantFile(tenant).c_str());
    for (const std::string& id : slots[tenant].ids) holder.erase(id);
    slots.erase(tenant);
  }

  Status WriteCheckpoint() const {
    json list = json::array();
    for (const auto& [name, slot] : slots) {
      const node::TenantRequest& t = slot.tenant;
      list.push_back({{"tenant", name}, {"devices", slot.ids}, {"index", slot.index}, {"gpus", t.gpus},
                      {"mem_bytes", t.mem_bytes}, {"share", t.share}, {"account", t.account},
                      {"workload", t.workload}});
    }
    return k8s::WriteCheckpoint(checkpoint_path, kCheckpointVersion,
                                {{"resource_name", options.resource_name}, {"slots", list}});
  }

  // Reads the checkpoint (none: nothing to adopt) and joins its slots again (see the header).
  Status Recover() {
    TESSERA_ASSIGN_OR_RETURN(std::optional<json> doc, ReadCheckpoint(checkpoint_path, kCheckpointVersion, "slots"));
    if (!doc) return Status::Ok();
    const std::string& path = checkpoint_path;
    for (size_t i = 0; i < (*doc)["slots"].size(); ++i) {
      const json& j = (*doc)["slots"][i];
      const std::string at = "slots[" + std::to_string(i) + "]";
      Slot slot;
      TESSERA_ASSIGN_OR_RETURN(slot.tenant.name, CheckpointField<std::string>(path, j, at, "tenant"));
      TESSERA_ASSIGN_OR_RETURN(slot.ids, CheckpointField<std::vector<std::string>>(path, j, at, "devices"));
      TESSERA_ASSIGN_OR_RETURN(slot.index, CheckpointField<int>(path, j, at, "index"));
      TESSERA_ASSIGN_OR_RETURN(slot.tenant.gpus, CheckpointField<std::vector<int>>(path, j, at, "gpus"));
      TESSERA_ASSIGN_OR_RETURN(slot.tenant.mem_bytes, CheckpointField<uint64_t>(path, j, at, "mem_bytes"));
      TESSERA_ASSIGN_OR_RETURN(slot.tenant.share, CheckpointField<int>(path, j, at, "share"));
      TESSERA_ASSIGN_OR_RETURN(slot.tenant.account, CheckpointField<std::string>(path, j, at, "account"));
      TESSERA_ASSIGN_OR_RETURN(slot.tenant.workload, CheckpointField<std::string>(path, j, at, "workload"));
      if (slot.ids.empty()) return CheckpointError(path, at + ".devices", "empty");
      // A slot that cannot be taken up again (its GPU is gone, the node refuses the join) is left
      // behind, said so, and the plugin starts without it: refusing to start would leave every
      // later pod of the node without its GPUs. Its container, if it still runs, holds no slot of
      // this plugin's (the shim of a container whose slot went refuses its allocations).
      std::string why;
      for (int g : slot.tenant.gpus) {
        if (g < 0 || g >= static_cast<int>(gpus.size())) {
          why = "GPU " + std::to_string(g) + " is not one of the " + std::to_string(gpus.size()) + " GPUs NVML lists";
        }
      }
      StatusOr<int> index = why.empty() ? node.Join(slot.tenant, Member()) : StatusOr<int>(NotFoundError(why));
      if (!index.ok()) {
        not_adopted.push_back("checkpoint '" + path + "': " + at + " (" + slot.tenant.name +
                              "): not taken up again: " + std::string(index.status().message()));
        continue;
      }
      slot.index = *index;
      TESSERA_RETURN_IF_ERROR(WriteFileAtomically(TenantFile(slot.tenant.name), std::to_string(*index) + "\n"));
      slot.made = std::chrono::steady_clock::now();
      for (const std::string& id : slot.ids) holder[id] = slot.tenant.name;
      slots[slot.tenant.name] = std::move(slot);
    }
    return WriteCheckpoint();
  }
};

SharePlugin::SharePlugin(std::unique_ptr<State> state) : state_(std::move(state)) {}
SharePlugin::~SharePlugin() = default;

StatusOr<std::unique_ptr<SharePlugin>> SharePlugin::Open(const SharePluginOptions& options) {
  if (options.node_dir.empty()) return InvalidArgumentError("node_dir: empty");
  if (options.shares_per_gpu < 1 || options.shares_per_gpu > 100) {
    return InvalidArgumentError("shares_per_gpu: " + std::to_string(options.shares_per_gpu) + " is not in 1..100");
  }
  auto state = std::make_unique<State>();
  state->options = options;
  state->node = node::NodeDir(options.node_dir);
  TESSERA_ASSIGN_OR_RETURN(state->shim, node::ResolveShim(options.shim_path));
  TESSERA_ASSIGN_OR_RETURN(state->gpus, ReadGpus(options.nvml_library));
  if (state->gpus.size() > static_cast<size_t>(enforce::kMaxGpus)) {
    return InvalidArgumentError("NVML lists " + std::to_string(state->gpus.size()) + " GPUs; the node segment covers " +
                                std::to_string(enforce::kMaxGpus));
  }
  for (int g = 0; g < static_cast<int>(state->gpus.size()); ++g) {
    for (int k = 0; k < options.shares_per_gpu; ++k) state->devices[state->Id(g, k)] = {g, k};
  }
  TESSERA_RETURN_IF_ERROR(MakeDirs(options.state_dir + "/tenants"));
  state->checkpoint_path = options.state_dir + "/checkpoint.json";
  TESSERA_RETURN_IF_ERROR(state->Recover());
  return std::unique_ptr<SharePlugin>(new SharePlugin(std::move(state)));
}

const SharePluginOptions& SharePlugin::options() const { return state_->options; }

std::vector<ShareDevice> SharePlugin::Devices() const {
  std::lock_guard lock(state_->mu);
  std::vector<ShareDevice> out;
  for (int g = 0; g < static_cast<int>(state_->gpus.size()); ++g) {
    for (int k = 0; k < state_->options.shares_per_gpu; ++k) {
      out.push_back({.id = state_->Id(g, k), .gpu = g, .healthy = state_->gpus[g].healthy});
    }
  }
  return out;
}

bool SharePlugin::RefreshHealth() {
  StatusOr<std::vector<Gpu>> now = ReadGpus(state_->options.nvml_library);
  std::lock_guard lock(state_->mu);
  bool changed = false;
  for (size_t g = 0; g < state_->gpus.size(); ++g) {
    // Unhealthy when NVML cannot be read, or the GPU at this index is another one now.
    const bool healthy = now.ok() && g < now->size() && (*now)[g].healthy && (*now)[g].uuid == state_->gpus[g].uuid;
    changed |= healthy != state_->gpus[g].healthy;
    state_->gpus[g].healthy = healthy;
  }
  return changed;
}

StatusOr<std::vector<std::string>> SharePlugin::PreferredShares(const std::vector<std::string>& available,
                                                                const std::vector<std::string>& must_include,
                                                                int size) const {
  std::lock_guard lock(state_->mu);
  const int n = state_->options.shares_per_gpu;
  const int gpu_count = static_cast<int>(state_->gpus.size());
  // Per GPU, its available shares by k (the lowest first).
  std::vector<std::set<int>> free(gpu_count);
  for (const std::string& id : available) {
    auto it = state_->devices.find(id);
    if (it == state_->devices.end()) return state_->Unknown(id);
    free[it->second.first].insert(it->second.second);
  }
  std::vector<std::string> chosen;
  for (const std::string& id : must_include) {
    auto it = state_->devices.find(id);
    if (it == state_->devices.end()) return state_->Unknown(id);
    if (free[it->second.first].erase(it->second.second) == 0) {
      return InvalidArgumentError("must_include device '" + id + "': not among the available devices");
    }
    chosen.push_back(id);
  }
  if (gpu_count == 0 || static_cast<int>(chosen.size()) >= size) return chosen;
  // The node as the placement engine sees it: each GPU's free milli is its free shares' part.
  StatusOr<placement::ClusterSnapshot> node = placement::ClusterSnapshot::Create(
      {{.name = "node", .cpu = CpuMilli{1}, .memory = MiB{1}, .gpu_count = gpu_count, .model = GpuModelId{0}}});
  if (!node.ok()) return node.status();
  const NodeIndex n0{0};
  const int32_t share_milli = 1000 / n;
  auto take = [&](int g, int32_t milli) -> Status {
    if (milli <= 0) return Status::Ok();
    placement::TaskRequest used{.num_gpu = 1, .gpu_milli = GpuMilli{std::min<int32_t>(milli, 1000)}};
    return node->Apply(used, {n0, placement::GpuBit(g)});
  };
  for (int g = 0; g < gpu_count; ++g) {
    TESSERA_RETURN_IF_ERROR(take(g, 1000 - static_cast<int32_t>(free[g].size()) * share_milli));
  }
  const placement::TaskRequest one_share{.num_gpu = 1, .gpu_milli = GpuMilli{share_milli}};
  while (static_cast<int>(chosen.size()) < size) {
    const placement::GpuSet g =
        placement::ChooseGpus(*node, n0, one_share, placement::SharingGpuRule::kBest, /*rng=*/nullptr);
    if (g == 0) {
      return InvalidArgumentError("allocation_size " + std::to_string(size) + ": only " +
                                  std::to_string(chosen.size()) + " devices can be chosen from the available ones");
    }
    const int gpu = std::countr_zero(g);
    const int k = *free[gpu].begin();
    free[gpu].erase(free[gpu].begin());
    chosen.push_back(state_->Id(gpu, k));
    TESSERA_RETURN_IF_ERROR(take(gpu, share_milli));
  }
  return chosen;
}

StatusOr<ShareAllocation> SharePlugin::Allocate(const std::vector<std::string>& device_ids) {
  std::lock_guard lock(state_->mu);
  State& s = *state_;
  const int n = s.options.shares_per_gpu;
  if (device_ids.empty()) return InvalidArgumentError("devices_ids: empty");
  std::map<int, int> per_gpu;  // gpu -> devices asked on it
  std::vector<std::string> ids = device_ids;
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  for (const std::string& id : ids) {
    auto it = s.devices.find(id);
    if (it == s.devices.end()) return s.Unknown(id);
    if (!s.gpus[it->second.first].healthy) {
      return FailedPreconditionError("device '" + id + "': its GPU is unhealthy (NVML does not answer for it)");
    }
    ++per_gpu[it->second.first];
  }
  node::TenantRequest t{.name = "k8s-dp/" + ids.front(), .gpus = {}, .mem_bytes = enforce::kUnlimited, .share = 1000};
  for (const auto& [gpu, count] : per_gpu) {
    t.gpus.push_back(gpu);
    if (count < n) {
      t.mem_bytes = std::min<uint64_t>(t.mem_bytes, s.gpus[gpu].memory_bytes / static_cast<uint64_t>(n) * count);
      t.share = std::min(t.share, 1000 * count / n);
    }
  }
  t.share = std::max(t.share, 1);
  t.account = s.options.account;
  t.workload = kUnnamedWorkload;  // until PodResources names the pod (NameOwners)
  // A device of an earlier slot: that container is gone (the kubelet gives a device to one at a time).
  std::set<std::string> earlier;
  for (const std::string& id : ids) {
    if (auto h = s.holder.find(id); h != s.holder.end()) earlier.insert(h->second);
  }
  for (const std::string& tenant : earlier) s.Leave(tenant);
  if (!earlier.empty()) (void)s.WriteCheckpoint();  // rewritten below too, once the new slot is made
  TESSERA_ASSIGN_OR_RETURN(int index, s.node.Join(t, s.Member()));
  auto fail = [&](const Status& st) -> Status {
    (void)s.node.LeaveTenant(t.name, s.Member());
    std::remove(s.TenantFile(t.name).c_str());
    return st;
  };
  std::vector<node::GpuPin> pins;
  for (int g : t.gpus) pins.push_back(s.gpus[g].pin);
  const std::string tenant_file = s.TenantFile(t.name);
  if (Status st = WriteFileAtomically(tenant_file, std::to_string(index) + "\n"); !st.ok()) return fail(st);
  const SlotEdits edits = MakeSlotEdits({.host = s.node.paths(), .shim = s.shim, .container_dir = s.options.container_dir,
                                         .tenant_file = tenant_file, .pin = node::JoinPins(pins), .gpus = t.gpus,
                                         .index = index});
  ShareAllocation out{.env = {}, .mounts = edits.mounts, .devices = {}, .index = index, .tenant = t.name};
  for (const auto& [key, value] : edits.env) out.env[key] = value;
  out.env["TESSERA_SHARE_MEMORY_BYTES"] =
      t.mem_bytes == enforce::kUnlimited ? "unlimited" : std::to_string(t.mem_bytes);
  out.env["TESSERA_SHARE_MILLI"] = std::to_string(t.share);
  if (!s.options.dev_dir.empty()) {
    StatusOr<std::vector<ContainerDeviceNode>> control = NvidiaControlNodes(s.options.dev_dir);
    if (!control.ok()) return fail(control.status());
    out.devices = *control;
    for (int g : t.gpus) {
      StatusOr<ContainerDeviceNode> own = GpuDeviceNode(s.options.dev_dir, s.gpus[g].pin, g);
      if (!own.ok()) return fail(own.status());
      out.devices.push_back(*own);
    }
  }
  s.slots[t.name] = {.ids = ids, .tenant = t, .index = index, .made = std::chrono::steady_clock::now()};
  for (const std::string& id : ids) s.holder[id] = t.name;
  // Fail closed: a slot the checkpoint does not name would be forgotten by a restarted plugin.
  if (Status st = s.WriteCheckpoint(); !st.ok()) {
    s.slots.erase(t.name);
    for (const std::string& id : ids) s.holder.erase(id);
    return fail(st);
  }
  return out;
}

std::vector<std::string> SharePlugin::NameOwners(const std::map<std::string, DeviceOwner>& owners) {
  std::lock_guard lock(state_->mu);
  State& s = *state_;
  std::vector<std::string> named;
  for (auto& [tenant, slot] : s.slots) {
    const DeviceOwner* owner = nullptr;
    for (const std::string& id : slot.ids) {
      if (auto o = owners.find(id); o != owners.end()) {
        owner = &o->second;
        break;
      }
    }
    if (owner == nullptr || owner->pod_namespace.empty()) continue;
    const std::string workload = owner->pod_namespace + "/" + owner->pod + "/" + owner->container;
    if (slot.tenant.account == owner->pod_namespace && slot.tenant.workload == workload) continue;
    if (Status st = s.node.Relabel(tenant, owner->pod_namespace, workload); !st.ok()) continue;  // next List
    slot.tenant.account = owner->pod_namespace;
    slot.tenant.workload = workload;
    named.push_back(tenant);
  }
  if (!named.empty()) (void)s.WriteCheckpoint();  // a failed write: the next change writes again
  return named;
}

bool SharePlugin::AwaitsOwner(std::chrono::milliseconds younger_than) const {
  std::lock_guard lock(state_->mu);
  const auto now = std::chrono::steady_clock::now();
  return std::any_of(state_->slots.begin(), state_->slots.end(), [&](const auto& entry) {
    return entry.second.tenant.workload == kUnnamedWorkload && now - entry.second.made < younger_than;
  });
}

std::vector<std::string> SharePlugin::Slots() const {
  std::lock_guard lock(state_->mu);
  std::vector<std::string> out;
  for (const auto& [tenant, slot] : state_->slots) out.push_back(tenant);
  return out;
}

std::vector<ClaimUse> SharePlugin::BackstopUses() const {
  std::lock_guard lock(state_->mu);
  std::vector<ClaimUse> out;
  for (const auto& [tenant, slot] : state_->slots) {
    const std::string file = state_->TenantFile(tenant);
    const bool whole = slot.tenant.mem_bytes == enforce::kUnlimited;
    out.push_back({.claim = tenant, .uid = tenant, .pod_uids = {}, .gpus = slot.tenant.gpus,
                   .mem_bytes = whole ? std::nullopt : std::optional<uint64_t>(slot.tenant.mem_bytes),
                   .shared = !whole, .index = slot.index, .slot_file = file.substr(file.find_last_of('/') + 1)});
  }
  return out;
}

std::vector<std::string> SharePlugin::Release(const std::set<std::string>& live, std::chrono::milliseconds grace) {
  std::lock_guard lock(state_->mu);
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::string> gone;
  for (const auto& [tenant, slot] : state_->slots) {
    if (now - slot.made < grace) continue;
    const bool held = std::any_of(slot.ids.begin(), slot.ids.end(), [&](const std::string& id) { return live.count(id); });
    if (!held) gone.push_back(tenant);
  }
  for (const std::string& tenant : gone) state_->Leave(tenant);
  if (!gone.empty()) (void)state_->WriteCheckpoint();  // a failed write: the next change writes again
  return gone;
}

std::string SharePlugin::checkpoint_path() const { return state_->checkpoint_path; }

std::vector<std::string> SharePlugin::NotAdopted() const {
  std::lock_guard lock(state_->mu);
  return state_->not_adopted;
}

}  // namespace tessera::k8s
