// DraDriver (tessera/integrations/k8s/dra_driver.h): claims -> node slots, CDI specs, checkpoint.
#include "tessera/integrations/k8s/dra_driver.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "src/integrations/k8s/checkpoint.h"
#include "src/integrations/k8s/dra_mig.h"
#include "tessera/enforce/segment.h"
#include "tessera/integrations/k8s/container_edits.h"
#include "tessera/integrations/k8s/names.h"
#include "tessera/node/launcher.h"
#include "tessera/node/node_dir.h"

namespace tessera::k8s {

using nlohmann::json;

namespace {

constexpr int kCheckpointVersion = 1;

// One device of a prepared claim: what was joined, and what the kubelet was told. The devices of
// a claim of several GPUs share one tenant (on all of their GPUs); `gpu` is the device's own.
struct Slot {
  std::string request, pool, device;
  std::string cdi_name;  // "<uid>-<device>"
  node::TenantRequest tenant;
  int index = -1;
  int gpu = -1;  // the device's GPU (its device node); tenant.gpus holds every GPU of the tenant
  std::optional<MigInstanceUse> mig;  // a MIG device: its instance (tenant.mig_instance = mig->uuid)
};

// Each tenant of `slots` once (a claim of several devices has one tenant for all of them).
std::vector<const Slot*> DistinctTenants(const std::vector<Slot>& slots) {
  std::vector<const Slot*> out;
  for (const Slot& s : slots) {
    bool seen = false;
    for (const Slot* o : out) seen = seen || o->tenant.name == s.tenant.name;
    if (!seen) out.push_back(&s);
  }
  return out;
}

struct Prepared {
  ClaimRef ref;
  std::vector<Slot> slots;
  std::vector<std::string> pods;  // status.reservedFor's pod uids, as last read
};

std::string CdiId(const std::string& cdi_name) { return std::string(kDriverName) + "/gpu=" + cdi_name; }

json SlotToJson(const Slot& s) {
  json j = {{"request", s.request},        {"pool", s.pool},
            {"device", s.device},          {"cdi_name", s.cdi_name},
            {"tenant", s.tenant.name},     {"account", s.tenant.account},
            {"workload", s.tenant.workload}, {"gpu", s.gpu}, {"gpus", s.tenant.gpus},
            {"mem_bytes", s.tenant.mem_bytes}, {"share", s.tenant.share},
            {"priority", s.tenant.priority}, {"scrub", s.tenant.scrub},
            {"index", s.index}};
  if (s.mig) {
    const MigInstanceUse& m = *s.mig;
    j["mig"] = {{"profile", m.profile}, {"start", m.start}, {"uuid", m.uuid}, {"gi", m.gpu_instance_id},
                {"ci", m.compute_instance_id}, {"minor", m.parent_minor}, {"created", m.created}};
  }
  return j;
}

// A slot's MIG instance from its checkpoint entry (SlotToJson); throws json::exception.
MigInstanceUse MigFromJson(const json& m) {
  return {.profile = m.at("profile"), .start = m.at("start"), .uuid = m.at("uuid"), .gpu_instance_id = m.at("gi"),
          .compute_instance_id = m.at("ci"), .parent_minor = m.at("minor"), .mem_bytes = 0,
          .created = m.at("created")};
}

}  // namespace

struct DraDriver::State {
  DraDriverOptions options;
  ClaimSource* source = nullptr;
  node::NodeDir node{""};
  std::string shim;
  std::string checkpoint_path;
  mutable std::mutex mu;
  std::map<std::string, Prepared> prepared;     // by uid
  std::map<int, node::GpuPin> pins;             // by GPU, found once
  std::unique_ptr<MigInstances> mig;            // the MIG devices' instances (NVML opened when first needed)
  std::vector<std::string> recovery_problems;

  std::string SpecPath(const std::string& uid) const {
    return options.cdi_dir + "/" + std::string(kDriverName) + "-claim_" + uid + ".json";
  }
  // The claim's tenant index, "<index>\n": mounted read-only next to the policy in its containers,
  // where the shim takes its tenant from it (not from TESSERA_SHIM_TENANT, which a container may
  // change). A claim is one tenant (ClaimTenant).
  std::string TenantFilePath(const std::string& uid) const { return options.plugin_dir + "/tenants/" + uid; }
  void RemoveClaimFiles(const std::string& uid) const {
    std::remove(SpecPath(uid).c_str());
    std::remove(TenantFilePath(uid).c_str());
  }

  StatusOr<node::GpuPin> Pin(int gpu) {
    if (auto it = pins.find(gpu); it != pins.end()) return it->second;
    TESSERA_ASSIGN_OR_RETURN(node::GpuPin pin, node::PinGpu(gpu, options.nvml_library, std::nullopt));
    pins[gpu] = pin;
    return pin;
  }

  // The pin of a tenant of several GPUs from each GPU's cached pin (node::JoinPins).
  StatusOr<node::GpuPin> PinAll(const std::vector<int>& gpus) {
    std::vector<node::GpuPin> each;
    for (int gpu : gpus) {
      TESSERA_ASSIGN_OR_RETURN(node::GpuPin one, Pin(gpu));
      each.push_back(std::move(one));
    }
    return node::JoinPins(each);
  }

  // A MIG device's pin: CUDA sees the instance alone, by its UUID; no lease board (node::GpuPin::mig).
  static node::GpuPin MigPin(const MigInstanceUse& m) {
    node::GpuPin pin{.visible_devices = m.uuid, .uuid = m.uuid, .minor = m.parent_minor};
    pin.mig = true;
    return pin;
  }

  static json DeviceNodeJson(const ContainerDeviceNode& n) {
    return json{{"path", n.container_path}, {"hostPath", n.host_path}};
  }

  // The CDI spec of a prepared claim (see the header: one device per slot; container_edits.h).
  StatusOr<std::string> RenderSpec(const Prepared& p) {
    json devices = json::array();
    for (const Slot& s : p.slots) {
      // Every device of a tenant of several GPUs carries the same variables (all of its GPUs), so
      // that whichever device's edits a runtime applies last, the container is that one tenant.
      TESSERA_ASSIGN_OR_RETURN(node::GpuPin pin,
                               s.mig ? StatusOr<node::GpuPin>(MigPin(*s.mig)) : PinAll(s.tenant.gpus));
      const SlotEdits slot = MakeSlotEdits({.host = node.paths(), .shim = shim, .container_dir = options.container_dir,
                                            .tenant_file = TenantFilePath(p.ref.uid), .pin = pin,
                                            .gpus = s.tenant.gpus, .index = s.index});
      json env = json::array();
      for (const auto& [key, value] : slot.env) env.push_back(key + "=" + value);
      json mounts = json::array();
      for (const ContainerMount& m : slot.mounts) {
        mounts.push_back({{"hostPath", m.host_path},
                          {"containerPath", m.container_path},
                          {"options", {m.read_only ? "ro" : "rw", "nosuid", "nodev", "bind"}}});
      }
      json edits = {{"env", env}, {"mounts", mounts}};
      if (!options.dev_dir.empty()) {
        TESSERA_ASSIGN_OR_RETURN(node::GpuPin own, s.mig ? StatusOr<node::GpuPin>(pin) : Pin(s.gpu));
        TESSERA_ASSIGN_OR_RETURN(ContainerDeviceNode device_node, GpuDeviceNode(options.dev_dir, own, s.gpu));
        edits["deviceNodes"] = json::array({DeviceNodeJson(device_node)});
        if (s.mig) {  // the parent GPU's node and the instance's capabilities
          const int minor = own.minor >= 0 ? own.minor : s.gpu;
          TESSERA_ASSIGN_OR_RETURN(std::vector<ContainerDeviceNode> caps,
                                   MigCapNodes(options.dev_dir, options.mig_minors_file, minor, s.mig->gpu_instance_id,
                                               s.mig->compute_instance_id));
          for (const ContainerDeviceNode& n : caps) edits["deviceNodes"].push_back(DeviceNodeJson(n));
        }
      }
      devices.push_back({{"name", s.cdi_name}, {"containerEdits", edits}});
    }
    // The claim-wide edits: the driver's control and unified-memory nodes, once a spec.
    TESSERA_ASSIGN_OR_RETURN(std::vector<ContainerDeviceNode> common, NvidiaControlNodes(options.dev_dir));
    json spec = {{"cdiVersion", "0.6.0"},
                 {"kind", std::string(kDriverName) + "/gpu"},
                 {"annotations", {{"gpu.tessera.io/claim", p.ref.ns + "/" + p.ref.name}}},
                 {"devices", devices}};
    if (!common.empty()) {
      json nodes = json::array();
      for (const ContainerDeviceNode& n : common) nodes.push_back(DeviceNodeJson(n));
      spec["containerEdits"] = {{"deviceNodes", nodes}};
    }
    return spec.dump(2) + "\n";
  }

  Status WriteSpec(const Prepared& p) {
    if (p.slots.empty()) return Status::Ok();  // nothing of ours: no file
    TESSERA_RETURN_IF_ERROR(MakeDirs(options.plugin_dir + "/tenants"));
    TESSERA_RETURN_IF_ERROR(WriteFileAtomically(TenantFilePath(p.ref.uid), std::to_string(p.slots.front().index) + "\n"));
    TESSERA_ASSIGN_OR_RETURN(std::string text, RenderSpec(p));
    return WriteFileAtomically(SpecPath(p.ref.uid), text);
  }

  Status WriteCheckpoint() const {
    json claims = json::array();
    for (const auto& [uid, p] : prepared) {
      json slots = json::array();
      for (const Slot& s : p.slots) slots.push_back(SlotToJson(s));
      claims.push_back(
          {{"uid", uid}, {"namespace", p.ref.ns}, {"name", p.ref.name}, {"slots", slots}, {"pods", p.pods}});
    }
    return k8s::WriteCheckpoint(checkpoint_path, kCheckpointVersion, {{"driver", kDriverName}, {"claims", claims}});
  }

  long Member() const { return options.member_pid > 0 ? options.member_pid : static_cast<long>(::getpid()); }

  // Leaves the slots' tenants and destroys the MIG instances the driver created for them (a
  // prepare that failed half-way: the GPU goes back to what it had).
  void LeaveSlots(const std::vector<Slot>& slots) const {
    for (const Slot* s : DistinctTenants(slots)) (void)node.LeaveTenant(s->tenant.name, Member());
    for (const Slot& s : slots) {
      if (s.mig) (void)mig->Release(s.gpu, *s.mig);
    }
  }

  // The MIG devices of the prepared claims: UUID -> "<namespace>/<claim>".
  std::map<std::string, std::string> HeldMigInstances() const {
    std::map<std::string, std::string> held;
    for (const auto& [uid, p] : prepared) {
      for (const Slot& s : p.slots) {
        if (s.mig) held[s.mig->uuid] = p.ref.ns + "/" + p.ref.name;
      }
    }
    return held;
  }

  // The slots of one claim (results of other drivers skipped), joined.
  StatusOr<Prepared> Join(const ClaimRef& ref) {
    TESSERA_ASSIGN_OR_RETURN(std::string text, source->ResourceClaimJson(ref.ns, ref.name));
    TESSERA_ASSIGN_OR_RETURN(AllocatedClaim claim, ParseResourceClaim(text));
    if (claim.uid != ref.uid) {
      return FailedPreconditionError("metadata.uid: '" + claim.uid + "' is not the kubelet's '" + ref.uid +
                                     "' (the claim was deleted and created again under its name)");
    }
    if (claim.ns != ref.ns) {
      return FailedPreconditionError("metadata.namespace: '" + claim.ns + "' is not the kubelet's '" + ref.ns + "'");
    }
    Prepared p{.ref = ref, .slots = {}, .pods = claim.pod_uids};
    std::vector<const AllocatedDevice*> ours;
    for (const AllocatedDevice& d : claim.devices) {
      if (d.driver == kDriverName) ours.push_back(&d);
    }
    // A claim of several devices is one tenant on all of their GPUs (a container that uses the
    // claim is one process tree, charged once: ClaimTenant); one device, a tenant of its GPU.
    StatusOr<node::TenantRequest> joint = ClaimTenant(ref, ours);
    if (!joint.ok()) return joint.status();
    std::map<std::string, int> names;
    for (const AllocatedDevice* d : ours) {
      Slot s{.request = d->request, .pool = d->pool, .device = d->device, .cdi_name = ref.uid + "-" + d->device};
      if (int n = names[s.cdi_name]++; n > 0) s.cdi_name += "-" + std::to_string(n);
      s.tenant = *joint;
      s.gpu = d->gpu;
      if (!p.slots.empty()) {  // the tenant joined for the first device
        s.index = p.slots.front().index;
        p.slots.push_back(std::move(s));
        continue;
      }
      if (d->mig_start >= 0) {  // ClaimTenant: the claim's only device
        StatusOr<MigInstanceUse> use = mig->Acquire(*d, HeldMigInstances());
        if (!use.ok()) {
          return Status(use.status().code(), "results device " + d->device + ": " + std::string(use.status().message()));
        }
        s.mig = *use;
        s.tenant.mem_bytes = use->mem_bytes;
        s.tenant.mig_instance = use->uuid;
      }
      StatusOr<int> index = node.Join(s.tenant, Member());
      if (!index.ok()) {
        if (s.mig) (void)mig->Release(s.gpu, *s.mig);
        return Status(index.status().code(), "results device " + d->device + ": " + std::string(index.status().message()));
      }
      s.index = *index;
      p.slots.push_back(std::move(s));
    }
    return p;
  }

  // The tenant of a claim's devices. One device: the device's share (or the whole GPU), named
  // "<ns>/<claim>/<request>/<device>[#<share id>]". Several: one tenant named "<ns>/<claim>#<uid>"
  // on each of their GPUs with the smallest memory and compute of them on each (a tenant has one
  // limit and one share per GPU: the smallest keeps every device within what it was allocated).
  // Two devices of one GPU in a claim are refused (one tenant cannot hold two shares of a GPU).
  // Example: devices gpu-0 and gpu-1, whole -> tenant "team-a/train#7a11-00" on GPUs 0 and 1,
  // no memory limit, share 1000 on each.
  static StatusOr<node::TenantRequest> ClaimTenant(const ClaimRef& ref, const std::vector<const AllocatedDevice*>& devices) {
    node::TenantRequest t;
    if (devices.empty()) return t;
    const AllocatedDevice& first = *devices.front();
    t.name = ref.ns + "/" + ref.name + "/" + first.request + "/" + first.device +
             (first.share_id.empty() ? "" : "#" + first.share_id.substr(0, 8));
    t.gpus = {first.gpu};
    t.mem_bytes = first.shared ? first.memory_bytes : enforce::kUnlimited;
    t.share = first.shared ? static_cast<int>(first.compute_milli) : 1000;
    t.priority = first.config.priority;
    t.scrub = first.config.scrub;
    t.account = first.config.tenant.empty() ? ref.ns : first.config.tenant;
    t.workload = "k8s-claim/" + ref.ns + "/" + ref.name;
    if (devices.size() == 1) return t;
    for (const AllocatedDevice* d : devices) {
      if (d->mig_start >= 0) {
        return InvalidArgumentError("results devices: " + d->device + " is a MIG device, which must be the claim's " +
                                    "only device of " + std::string(kDriverName) +
                                    " (its tenant runs on that instance alone)");
      }
    }
    t.name = ref.ns + "/" + ref.name + "#" + ref.uid.substr(0, 8);
    t.gpus.clear();
    for (const AllocatedDevice* d : devices) {
      for (int g : t.gpus) {
        if (g == d->gpu) {
          return InvalidArgumentError("results devices: two of them are on GPU " + std::to_string(g) + " (device " +
                                      d->device + "): a claim of several devices takes one share of each GPU");
        }
      }
      t.gpus.push_back(d->gpu);
      t.mem_bytes = std::min<uint64_t>(t.mem_bytes, d->shared ? d->memory_bytes : enforce::kUnlimited);
      t.share = std::min(t.share, d->shared ? static_cast<int>(d->compute_milli) : 1000);
      t.priority = std::max(t.priority, d->config.priority);
      t.scrub = t.scrub || d->config.scrub;
    }
    std::sort(t.gpus.begin(), t.gpus.end());
    return t;
  }

  ClaimResult Answer(const Prepared& p) const {
    ClaimResult r;
    for (const Slot& s : p.slots) {
      r.devices.push_back({.requests = {s.request}, .pool = s.pool, .device = s.device, .cdi_ids = {CdiId(s.cdi_name)}});
    }
    return r;
  }

  static std::string ClaimName(const ClaimRef& ref) {
    return "ResourceClaim " + ref.ns + "/" + ref.name + " (uid " + ref.uid + "): ";
  }

  ClaimResult PrepareOne(const ClaimRef& ref) {
    if (ref.uid.empty() || ref.ns.empty() || ref.name.empty()) {
      return {.devices = {}, .error = ClaimName(ref) + "namespace, uid and name are required"};
    }
    if (auto it = prepared.find(ref.uid); it != prepared.end()) return Answer(it->second);
    StatusOr<Prepared> p = Join(ref);
    if (!p.ok()) return {.devices = {}, .error = ClaimName(ref) + std::string(p.status().message())};
    prepared[ref.uid] = *p;
    Status done = WriteSpec(*p);
    if (done.ok()) done = WriteCheckpoint();
    if (!done.ok()) {  // not prepared: undo, so that the kubelet's retry starts clean
      prepared.erase(ref.uid);
      LeaveSlots(p->slots);
      RemoveClaimFiles(ref.uid);
      return {.devices = {}, .error = ClaimName(ref) + std::string(done.message())};
    }
    return Answer(*p);
  }

  std::string UnprepareOne(const ClaimRef& ref) {
    auto it = prepared.find(ref.uid);
    if (it == prepared.end()) return "";
    for (const Slot* s : DistinctTenants(it->second.slots)) {
      if (Status left = node.LeaveTenant(s->tenant.name, Member()); !left.ok()) {
        return "leaving slot " + s->tenant.name + ": " + std::string(left.message());
      }
    }
    if (std::remove(SpecPath(ref.uid).c_str()) != 0 && errno != ENOENT) {
      return "removing " + SpecPath(ref.uid) + ": " + std::strerror(errno);
    }
    std::remove(TenantFilePath(ref.uid).c_str());
    // A MIG instance the driver created goes with its claim, so that the slices the scheduler now
    // counts as free are free (a later claim may want them in another profile); one a process
    // still runs in stays (Release's preflight), as does one the driver found.
    for (const Slot& s : it->second.slots) {
      if (s.mig) (void)mig->Release(s.gpu, *s.mig);
    }
    prepared.erase(it);
    Status saved = WriteCheckpoint();
    return saved.ok() ? "" : std::string(saved.message());
  }

  // Reads the checkpoint (none: nothing to adopt) and joins its slots again.
  Status Recover() {
    TESSERA_ASSIGN_OR_RETURN(std::optional<json> read, ReadCheckpoint(checkpoint_path, kCheckpointVersion, "claims"));
    if (!read) return Status::Ok();
    const json& doc = *read;
    const std::string bad = "checkpoint '" + checkpoint_path + "': ";
    for (const json& c : doc["claims"]) {
      Prepared p;
      try {
        p.ref = {.ns = c.at("namespace").get<std::string>(), .uid = c.at("uid").get<std::string>(),
                 .name = c.at("name").get<std::string>()};
        if (c.contains("pods")) p.pods = c.at("pods").get<std::vector<std::string>>();  // older: none
        for (const json& j : c.at("slots")) {
          Slot s{.request = j.at("request"), .pool = j.at("pool"), .device = j.at("device"),
                 .cdi_name = j.at("cdi_name")};
          s.gpu = j.at("gpu").get<int>();
          // "gpus": every GPU of the slot's tenant (a claim of several devices); older checkpoints
          // have one GPU per slot.
          std::vector<int> gpus = j.contains("gpus") ? j.at("gpus").get<std::vector<int>>() : std::vector<int>{s.gpu};
          s.tenant = {.name = j.at("tenant"), .gpus = std::move(gpus), .mem_bytes = j.at("mem_bytes"),
                      .share = j.at("share"), .priority = j.at("priority"), .scrub = j.at("scrub"),
                      .account = j.at("account"), .workload = j.at("workload")};
          s.index = j.at("index");
          if (j.contains("mig")) {  // a MIG device (older checkpoints have none)
            s.mig = MigFromJson(j.at("mig"));
            s.mig->mem_bytes = s.tenant.mem_bytes;
            s.tenant.mig_instance = s.mig->uuid;
          }
          p.slots.push_back(std::move(s));
        }
      } catch (const json::exception& e) {
        return DataLossError(bad + e.what());
      }
      Adopt(std::move(p));
    }
    return WriteCheckpoint();
  }

  void Adopt(Prepared p) {
    bool moved = false;
    std::map<std::string, int> joined;  // tenant -> index: one join per tenant of the claim
    for (Slot& s : p.slots) {
      if (auto j = joined.find(s.tenant.name); j != joined.end()) {
        moved |= j->second != s.index;
        s.index = j->second;
        continue;
      }
      StatusOr<int> index = node.Join(s.tenant, Member());
      if (!index.ok()) {
        recovery_problems.push_back("claim " + p.ref.ns + "/" + p.ref.name + " (" + p.ref.uid + "), slot " +
                                    s.tenant.name + ": " + std::string(index.status().message()));
        LeaveSlots(p.slots);
        RemoveClaimFiles(p.ref.uid);
        return;
      }
      moved |= *index != s.index;
      s.index = *index;
      joined[s.tenant.name] = *index;
    }
    if (Status written = moved ? WriteSpec(p) : Status::Ok(); !written.ok()) {
      recovery_problems.push_back("claim " + p.ref.uid + ": " + std::string(written.message()));
    }
    prepared[p.ref.uid] = std::move(p);
  }
};

DraDriver::DraDriver(std::unique_ptr<State> state) : state_(std::move(state)) {}
DraDriver::~DraDriver() = default;

StatusOr<std::unique_ptr<DraDriver>> DraDriver::Open(const DraDriverOptions& options, ClaimSource* source) {
  if (source == nullptr) return InvalidArgumentError("no claim source");
  if (options.node_dir.empty()) return InvalidArgumentError("node_dir: empty");
  auto state = std::make_unique<State>();
  state->options = options;
  state->source = source;
  state->node = node::NodeDir(options.node_dir);
  TESSERA_ASSIGN_OR_RETURN(state->shim, node::ResolveShim(options.shim_path));
  TESSERA_RETURN_IF_ERROR(MakeDirs(options.plugin_dir));
  TESSERA_RETURN_IF_ERROR(MakeDirs(options.cdi_dir));
  state->checkpoint_path = options.plugin_dir + "/checkpoint.json";
  state->mig = std::make_unique<MigInstances>(options.nvml_library, options.allow_mig_reconfigure);
  TESSERA_RETURN_IF_ERROR(state->Recover());
  return std::unique_ptr<DraDriver>(new DraDriver(std::move(state)));
}

std::map<std::string, ClaimResult> DraDriver::Prepare(const std::vector<ClaimRef>& claims) {
  std::lock_guard lock(state_->mu);
  std::map<std::string, ClaimResult> out;
  for (const ClaimRef& ref : claims) out[ref.uid] = state_->PrepareOne(ref);
  return out;
}

std::map<std::string, std::string> DraDriver::Unprepare(const std::vector<ClaimRef>& claims) {
  std::lock_guard lock(state_->mu);
  std::map<std::string, std::string> out;
  for (const ClaimRef& ref : claims) out[ref.uid] = state_->UnprepareOne(ref);
  return out;
}

size_t DraDriver::prepared_claims() const {
  std::lock_guard lock(state_->mu);
  return state_->prepared.size();
}

const std::vector<std::string>& DraDriver::recovery_problems() const { return state_->recovery_problems; }

std::vector<ClaimUse> DraDriver::ClaimUses() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<ClaimUse> out;
  for (const auto& [uid, p] : state_->prepared) {
    for (const Slot* s : DistinctTenants(p.slots)) {
      const bool whole = s->tenant.mem_bytes == enforce::kUnlimited && s->tenant.share >= 1000;
      out.push_back({.claim = p.ref.ns + "/" + p.ref.name,
                     .uid = uid,
                     .pod_uids = p.pods,
                     .gpus = s->tenant.gpus,
                     .mem_bytes = s->tenant.mem_bytes == enforce::kUnlimited ? std::nullopt
                                                                             : std::optional<uint64_t>(s->tenant.mem_bytes),
                     .shared = !whole,
                     .index = s->index});
    }
  }
  return out;
}

Status DraDriver::RefreshPods() {
  std::vector<ClaimRef> refs;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    for (const auto& [uid, p] : state_->prepared) refs.push_back(p.ref);
  }
  // The reads without the lock: the API server may be slow, and Prepare must not wait for it.
  std::map<std::string, std::vector<std::string>> pods;
  std::string failed;
  for (const ClaimRef& ref : refs) {
    StatusOr<std::string> text = state_->source->ResourceClaimJson(ref.ns, ref.name);
    StatusOr<AllocatedClaim> claim = text.ok() ? ParseResourceClaim(*text) : StatusOr<AllocatedClaim>(text.status());
    if (!claim.ok() || claim->uid != ref.uid) {
      failed += (failed.empty() ? "" : "; ") + ref.ns + "/" + ref.name + ": " +
                (claim.ok() ? "metadata.uid is now '" + claim->uid + "'" : std::string(claim.status().message()));
      continue;
    }
    pods[ref.uid] = claim->pod_uids;
  }
  std::lock_guard<std::mutex> lock(state_->mu);
  bool changed = false;
  for (auto& [uid, list] : pods) {
    auto it = state_->prepared.find(uid);
    if (it == state_->prepared.end() || it->second.pods == list) continue;
    it->second.pods = std::move(list);
    changed = true;
  }
  Status saved = changed ? state_->WriteCheckpoint() : Status::Ok();
  if (!failed.empty()) return UnavailableError("reading ResourceClaims: " + failed);
  return saved;
}

}  // namespace tessera::k8s
