// The node-agent half of the wire contract (docs/api.md, "Nodes"): what `tessera agent` sends to
// `tessera serve` and what it gets back, one typed message and one strict codec each. The
// control plane (src/daemon/control_plane_nodes.cc) and the agent (src/node/agent*.cc) both use
// these, so the format is written once. Decoders refuse what the contract does not have: an
// unknown field, a wrong type or a value out of range is INVALID_ARGUMENT whose message starts
// with the field's path, which `bad_field` (may be null) also receives:
//
//   DecodeHeartbeat(R"({"finished": [{"id": 7, "exit_kode": 1}]})", &f)
//     -> "finished[0].exit_kode: unknown field (known: id, exit_code, reason)", f == "finished[0].exit_kode"
//
// Worked example (a round of one agent with one workload on GPU 1 that ends with code 3):
//   register  EncodeNodeInventory({16000, 131072, {{0, "GPU-a", "A100-40GB", 40960, false},
//                                                  {1, "GPU-b", "A100-40GB", 40960, false}}, "9f…"})
//     = {"agent_id":"9f…","cpu_milli":16000,"gpus":[{"index":0,"memory_mib":40960,"mig_enabled":false,
//        "model":"A100-40GB","uuid":"GPU-a"},…],"memory_mib":131072}
//   desired   {"node":"n1","state":"ready","workloads":[{"gpu_mem_mib":2048,"gpu_milli":500,"id":7,
//              "mode":"fraction(500,2048MiB)","pods":[{"gpus":[1]}],"priority":0,"tenant":"ml"}]}
//             -> DesiredState{.workloads = {{.id = 7, .gpu_milli = 500, .pods = {{.gpus = {1}}}, ...}}}
//   heartbeat EncodeHeartbeat({.finished = {{7, 3, ""}}}) = {"finished":[{"exit_code":3,"id":7}]}
//   answer    {"desired_version":"5c0ec5b3a8f2e1d4","ignored":[],"node":"n1","state":"ready"}
//             (the agent fetches the desired state again only when that version is not the one
//             it holds, or 30 s after its last fetch)
// Encoders write keys in sorted order (nlohmann's objects), so Decode(Encode(x)) == x and
// Encode(Decode(Encode(x))) is the same bytes: the control plane stores the canonical inventory
// and compares it byte for byte when an agent registers again.
//
// What the wire itself cannot check stays with the caller: whether a GPU model is in the catalog
// and a node in MIG mode holds one model (the daemon), whether a GPU index exists on this node (the agent).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/lifecycle_state.h"
#include "tessera/core/status.h"

namespace tessera::api {

inline constexpr int kMaxGpusPerNode = 16;
// The end reasons, each also an agent event kind: the NVML backstop killed or found a workload
// over its memory limit; an MPS workload could not be run because the node has no MPS control
// daemon (`nvidia-cuda-mps-control` missing: the event's detail says what to install or pass).
// no_tenant_uid: the agent runs each tenant under a uid of its own and its range
// (--tenant-uids) has none left for this one (the event's detail names the range).
inline constexpr std::string_view kViolatedLimit = "violated_limit";
inline constexpr std::string_view kMpsUnavailable = "mps_unavailable";
inline constexpr std::string_view kNoTenantUid = "no_tenant_uid";
// An agent event only (not an end reason): NVML saw a time-sliced workload's processes take clearly
// more GPU time than the lease arbiter charged it, and the agent charged it the difference
// (node/lease_arbiter.h, UnderChargedNs); once per episode, the detail gives both figures.
inline constexpr std::string_view kGpuTimeRecharged = "gpu_time_recharged";

// A node's state and its one string mapping (what the store keeps, the API shows, the node
// answers carry) are core's (tessera/core/lifecycle_state.h), used here under the wire's names.
using ::tessera::kNodeStates;
using ::tessera::NodeState;
using ::tessera::NodeStateName;
using ::tessera::ParseNodeState;

// --- POST /v1/nodes/{name}/register ---------------------------------------------------------
// One MIG GPU instance that exists on a GPU, as the agent's discovery found it: the catalog
// profile, its first memory slice, and whether a process runs in it. {"profile": "3g.40gb",
// "start": 4, "in_use": true} ("in_use" left out when false).
inline constexpr size_t kMaxMigInstancesPerGpu = 8;
struct InventoryMigInstance {
  std::string profile;  // required, 1..64 characters (the daemon checks it against the model)
  int start = 0;        // required, 0..7
  bool in_use = false;
  friend bool operator==(const InventoryMigInstance&, const InventoryMigInstance&) = default;
};

struct InventoryGpu {
  int index = 0;  // NVML index; gpus[i].index == i
  std::string uuid;   // optional (left out when empty)
  std::string model;  // a catalog name or an NVML device name (the daemon canonicalises it)
  int64_t memory_mib = 0;
  bool mig_enabled = false;
  // MIG GPUs: the instances that exist, by start (left out when empty; at most 8).
  std::vector<InventoryMigInstance> mig_instances = {};
  friend bool operator==(const InventoryGpu&, const InventoryGpu&) = default;
};

struct NodeInventory {
  int64_t cpu_milli = 0;   // required, 0..2^40
  int64_t memory_mib = 0;  // required, 0..2^40
  std::vector<InventoryGpu> gpus;  // at most 16
  std::string agent_id;       // optional (1..64 characters): the agent's instance id
  std::string agent_version;  // optional (1..64 characters)
  // The agent applies the desired MIG layouts (`tessera agent --allow-mig-reconfigure`); false:
  // the control plane places MIG work only on the instances that exist (left out when false).
  bool mig_reconfigure = false;
  friend bool operator==(const NodeInventory&, const NodeInventory&) = default;
};

std::string EncodeNodeInventory(const NodeInventory& inventory);
StatusOr<NodeInventory> DecodeNodeInventory(std::string_view body, std::string* bad_field);

// The answer to register: {"node", "state"}.
struct RegisterAnswer {
  std::string node;
  NodeState state = NodeState::kReady;  // ready or cordoned
  friend bool operator==(const RegisterAnswer&, const RegisterAnswer&) = default;
};
std::string EncodeRegisterAnswer(const RegisterAnswer& answer);
StatusOr<RegisterAnswer> DecodeRegisterAnswer(std::string_view body, std::string* bad_field);

// --- POST /v1/nodes/{name}/heartbeat --------------------------------------------------------
struct FinishedWorkload {
  int64_t id = 0;         // >= 1
  int64_t exit_code = 0;  // -255..255; -1: unknown (the agent lost the process)
  std::string reason;     // "", kViolatedLimit, kMpsUnavailable or kNoTenantUid
  friend bool operator==(const FinishedWorkload&, const FinishedWorkload&) = default;
};

struct AgentEvent {
  int64_t id = 0;      // the workload, >= 1
  std::string kind;    // kViolatedLimit, kMpsUnavailable or kNoTenantUid
  std::string detail;  // up to 1,000 characters
  friend bool operator==(const AgentEvent&, const AgentEvent&) = default;
};

// A condition of the node as its agent sees it, sent with every heartbeat (all of them, each
// time: the list is the agent's current view, not a change). Today the agent reports
//   kConditionNvml  "nvml": the NVML backstop could read every GPU's processes in its last pass
//                   (ok false: the detail names the GPUs and NVML's error, e.g. a GPU that fell
//                   off the bus: "GPU 1: GPU is lost"); only an agent with NVML reports it.
// The control plane turns each change into a `node.condition` event (docs/api.md, "Events").
// `type` is open (1..64 of a-z, 0-9, '_', '.', '-'), so a newer agent's condition does not make an
// older control plane refuse its heartbeats; at most kMaxNodeConditions of them, types unique.
//   kConditionMigLayout  "mig_layout": every MIG GPU's instances are the desired layout (ok false:
//                   "layout differs, not applied" by an agent without --allow-mig-reconfigure,
//                   or the reconfiguration failed; the detail names the GPU, both layouts and
//                   why); only an agent whose desired state carries MIG layouts reports it.
inline constexpr std::string_view kConditionNvml = "nvml";
inline constexpr std::string_view kConditionMigLayout = "mig_layout";
inline constexpr size_t kMaxNodeConditions = 16;
struct NodeCondition {
  std::string type;
  bool ok = true;
  std::string detail;  // up to 1,000 characters (left out when empty)
  friend bool operator==(const NodeCondition&, const NodeCondition&) = default;
};

// A tenant of the node directory (tessera/node/node_dir.h) that the agent did not place: a DRA
// claim (`tessera k8s dra-driver`), a device-plugin slot, a Slurm task, a `tessera run` by hand.
// The control plane counts it as used on its GPUs (issue 34), so that GET /v1/nodes and the
// scheduler see the node as it is. {"tenant": "k8s-dra/ns/claim", "gpus": [0], "milli": 600,
// "mem_mib": 10240} ("mig_instance" left out when empty).
inline constexpr size_t kMaxLocalSlots = 64;  // the node directory's tenant indexes
struct LocalSlot {
  std::string tenant;        // required, 1..253 characters: the node directory's tenant name
  std::vector<int> gpus;     // required, 1..16 distinct indexes 0..15
  int64_t milli = 0;         // required, 0..1000: its compute share of each of those GPUs
  int64_t mem_mib = 0;       // 0..2^31: its memory limit on each GPU (0: none, the whole GPU)
  std::string mig_instance;  // optional, up to 96 characters: the MIG device UUID it runs on
  friend bool operator==(const LocalSlot&, const LocalSlot&) = default;
};

struct Heartbeat {
  std::vector<FinishedWorkload> finished;
  std::vector<AgentEvent> events;
  std::vector<NodeCondition> conditions;  // left out when empty (an agent that reports none)
  // The node directory's other tenants, the whole list, sent only when it changed since the list
  // the control plane last acknowledged (nullopt: left out, "unchanged"; an empty list: "none any
  // more", sent as []). At most kMaxLocalSlots, tenant names unique. Example: a DRA claim joins
  // -> {"local_slots": [{"gpus": [0], "mem_mib": 0, "milli": 600, "tenant": "c"}]} once; it
  // leaves -> {"local_slots": []} once; rounds in between carry no "local_slots".
  std::optional<std::vector<LocalSlot>> local_slots = std::nullopt;
  bool empty() const { return finished.empty() && events.empty() && conditions.empty() && !local_slots; }
  friend bool operator==(const Heartbeat&, const Heartbeat&) = default;
};

// The body is optional: an empty heartbeat encodes as "" and "" decodes as an empty one.
std::string EncodeHeartbeat(const Heartbeat& heartbeat);
StatusOr<Heartbeat> DecodeHeartbeat(std::string_view body, std::string* bad_field);

// The answer: {"node", "state", "ignored": [ids reported that do not run on the node],
// "desired_version": the version (DesiredVersion) of the node's desired state as GET desired
// would return it now}. An agent that holds the desired state of that version skips GET desired
// this round (issue 32: half the requests of a fleet); one that ignores the field still works.
// desired_version is optional on decode (an older control plane sends none: fetch every round).
struct HeartbeatAnswer {
  std::string node;
  NodeState state = NodeState::kReady;
  std::vector<int64_t> ignored;
  std::string desired_version = {};  // 16 lowercase hex digits, or "" (left out when empty)
  friend bool operator==(const HeartbeatAnswer&, const HeartbeatAnswer&) = default;
};
std::string EncodeHeartbeatAnswer(const HeartbeatAnswer& answer);
StatusOr<HeartbeatAnswer> DecodeHeartbeatAnswer(std::string_view body, std::string* bad_field);

// --- GET /v1/nodes/{name}/desired -----------------------------------------------------------
struct DesiredPod {
  std::vector<int> gpus;  // 1..16 indexes, each 0..15
  int mig_start = -1;     // the MIG instance's first slice, -1 for none (omitted then)
  friend bool operator==(const DesiredPod&, const DesiredPod&) = default;
};

struct DesiredWorkload {
  int64_t id = 0;  // >= 1
  std::string tenant;
  std::string mode;  // "exclusive", "mig:3g.40gb", "fraction(500,2048MiB)", "mps(...)", ...
  int gpu_milli = 1000;     // 1..1000
  int64_t gpu_mem_mib = 0;  // 0: the whole GPU's memory
  int priority = 0;         // -1000..1000
  std::string mig_profile;  // omitted when empty
  std::vector<std::string> command;  // omitted when empty (a slot with no process)
  std::vector<DesiredPod> pods;      // this node's pods, at least one
  friend bool operator==(const DesiredWorkload&, const DesiredWorkload&) = default;
};

// The target MIG layout of one MIG GPU: {"index": 0, "mig_layout": "3g.40gb@0,1g.10gb@4"} (the
// partition module's text; "" for no instance). The control plane chooses it with the MIG planner
// from the placed and the pending MIG work, keeping every instance in use.
struct DesiredGpu {
  int index = 0;           // required, 0..15, each index once
  std::string mig_layout;  // required, up to 256 characters (the agent parses it for its model)
  friend bool operator==(const DesiredGpu&, const DesiredGpu&) = default;
};

struct DesiredState {
  std::string node;   // optional (left out when empty)
  std::optional<NodeState> state;  // optional (left out when absent)
  std::vector<DesiredWorkload> workloads;  // required (may be empty)
  std::vector<DesiredGpu> gpus = {};  // MIG nodes only (left out when empty: older agents read the rest)
  friend bool operator==(const DesiredState&, const DesiredState&) = default;
};

std::string EncodeDesiredState(const DesiredState& state);
StatusOr<DesiredState> DecodeDesiredState(std::string_view body, std::string* bad_field);

// The version of a desired state: FNV-1a 64 of its body as GET desired sends it (the bytes of
// EncodeDesiredState), 16 lowercase hex digits. Equal bodies, equal versions; any change to the
// state (a workload placed, stopped, its limit patched, a MIG layout, the node's state) is
// another body and so, but for a 2^-64 chance, another version. The heartbeat's answer carries
// it, GET desired sends it as its ETag ("\"<version>\"", If-None-Match -> 304), and the agent
// hashes the body it fetched to know which version it holds.
//   DesiredVersion("")   == "cbf29ce484222325"  (the FNV-1a 64 offset basis)
//   DesiredVersion("a")  == "af63dc4c8601ec8c"
std::string DesiredVersion(std::string_view encoded_desired_state);

}  // namespace tessera::api
