// Nodes without HTTP: what admins do with nodes (list, get, cordon, uncordon, drain, remove) and
// what node agents do (register, heartbeat, read their desired state), each taking a typed request
// (the api:: node wire types) and the caller's identity and returning StatusOr of a typed value.
// The HTTP handlers (control_plane_nodes.cc) are decode -> service call -> render;
// tests/daemon/node_service_test.cc drives it directly against a real store and a stand-in
// scheduler (NodeWorld).
//
// The node registry (the ready and cordoned nodes with their agents' conditions, the lost names)
// and the scheduler (its nodes, jobs and placements, the loop) are the world's: the scheduling
// loop reads and changes them too (node timeouts, restores). The service reaches them through
// NodeWorld, under the world lock (the control plane's `mu`), and writes the store through the
// TransactFn it is given, in the same transaction as each change's event and audit record.
//
// Who may register a node: a live node (ready or cordoned) is its agent's. The agent is known by
// its instance id when both sides have one (it survives restarts and a new token; a fleet shares
// one token), else by its token; a node registered before identities were kept is anyone's, and
// a lost node is anyone's to take over. Registering the same inventory again (an agent restarted)
// only notes the agent; a new inventory replaces the node (its work requeued), except when only
// the MIG instances of an agent that may reconfigure them changed (a `node.mig_layout` event).
//
// Errors are what the API answers (ErrorResponse): NOT_FOUND "node 'n1' not found" (an agent's
// calls: "node 'n1' is not registered (register it again)"), FAILED_PRECONDITION for a conflict
// (another agent holds the name; removing a ready node or one that runs work), INVALID_ARGUMENT
// naming the field in *bad_field ("node", an inventory field, "gpus"), PERMISSION_DENIED for a
// caller whose role may not (caller.check) or whose token is bound to another node.
//
// Worked example (an empty cluster; agent A's token tok_a, instance id "a1"):
//   Register(A, "n1", {16000 mCPU, 1 A100})  -> {n1, ready}; event node.registered; audit
//     node.register; the world's add_node(n1), unpark, gauges, wake
//   Register(B, "n1", same, agent id "b1")   -> FAILED_PRECONDITION "node 'n1' is held by another
//                                               agent (registered with token tok_a): ..."
//   (the loop places workload 7 on n1)
//   Heartbeat(A, "n1", {.finished = {{7, 0, ""}, {9, 1, ""}}}) -> {n1, ready, ignored [9]};
//     workload 7 completed ("exit code 0"); the world's complete(7)
//   Heartbeat(A, "n1", {.local_slots = {{{"k8s-dra/ns/c", {0}, 600, 0, ""}}}}) -> the node's GPU 0
//     shows allocated_milli 600 (its placements' milli + 600) and a share {tenant k8s-dra/ns/c,
//     milli 600, mode "local"}; later heartbeats without "local_slots" keep it (issue 34)
//   Desired(A, "n1")                         -> {n1, ready, workloads []}; the heartbeat's answer
//     carried its version: desired_version == api::DesiredVersion(EncodeDesiredState(that))
//   Apply(admin, "n1", kCordon)              -> {n1, cordoned, requeued []}; event node.cordoned
//   Remove(admin, "n1")                      -> {n1, was cordoned}; event node.removed
//   Heartbeat(A, "n1", {})                   -> NOT_FOUND "node 'n1' is not registered (register it again)"
//   Register(viewer, "n1", ...)              -> PERMISSION_DENIED (caller.check(kNodeAgent))
//
// Thread-safety: all methods may be called from any thread; each holds the world lock for its
// whole call (the store's writes included, as the handlers did: a node's change and its record
// are seen together).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "src/daemon/api_codec.h"
#include "src/daemon/authz.h"
#include "src/daemon/usage_service.h"
#include "src/daemon/workload_shape.h"
#include "tessera/core/clock.h"
#include "tessera/api/node_wire.h"
#include "tessera/core/gpu_model.h"
#include "tessera/core/status.h"
#include "tessera/sched/live_scheduler.h"
#include "tessera/store/store.h"

namespace tessera::daemon {

// A node the scheduler holds (ready or cordoned), with what the store says of it.
struct KnownNode {
  store::NodeRecord record;
  placement::NodeSpec spec;
  int64_t last_heartbeat_ms = 0;  // in memory only: a restart gives every node a fresh timeout
  // The agent's conditions as its last heartbeat said, by type (in memory only: after a restart,
  // a re-registration or a restore, a condition that is not ok is an event again once).
  std::map<std::string, api::NodeCondition> conditions;
  // The desired state the last heartbeat's answer was about and its version (in memory only):
  // a heartbeat encodes and hashes the state again only when it differs, so an idle node's costs
  // a comparison (issue 32). Empty version: none yet.
  api::DesiredState desired;
  std::string desired_version;
  // The node directory's other tenants (DRA claims, device-plugin slots, Slurm tasks, `tessera
  // run` by hand) as the agent's last heartbeat that carried them said (issue 34; in memory only:
  // a registration, a lost node or a restart clears them, and the agent sends them again after
  // a registration and every 30 s while it has any). They count as used in GET /v1/nodes.
  std::vector<api::LocalSlot> local_slots = {};
};

struct NodeCaller {
  std::string actor;  // the caller's token id: the audit record's actor, an agent's token
  std::string node;   // a token bound to one node: that node ("" for any)
  // OK, or PERMISSION_DENIED when the caller's role may not do `action` (kReadNodes,
  // kManageNodes, kNodeAgent; none is about a tenant).
  std::function<Status(Action action)> check;
};

// What the service needs of the control plane. Every callback is called with *mu held.
struct NodeWorld {
  std::mutex* mu = nullptr;  // the world lock
  std::map<std::string, KnownNode>* nodes = nullptr;  // ready and cordoned
  std::set<std::string>* lost = nullptr;              // lost (in the store; back when they register)
  int64_t node_timeout_s = 0;                         // named in the refusal of a second agent

  // The scheduler's view of one node (nullopt: it holds none of that name), and of all, in the
  // order they joined.
  std::function<std::optional<sched::LiveScheduler::NodeView>(const std::string& name)> node_view;
  std::function<std::vector<sched::LiveScheduler::NodeView>()> node_views;
  // Where a running job's pods are (empty: not running).
  std::function<std::vector<sched::PodPlacement>(int64_t id)> placement_of;
  // The shape of a job the scheduler knows (nullptr: none).
  std::function<const WorkloadShape*(int64_t id)> job_shape;
  // The scheduler's node changes (LiveScheduler's answers).
  std::function<Status(const placement::NodeSpec& spec)> add_node;
  std::function<StatusOr<std::vector<int64_t>>(const std::string& name)> remove_node;  // the jobs it ran
  std::function<Status(const std::string& name)> cordon;
  std::function<Status(const std::string& name)> uncordon;
  std::function<StatusOr<std::vector<int64_t>>(const std::string& name)> drain;  // the jobs requeued
  // A durable end of a running job: the scheduler lets it go and forgets its shape.
  std::function<void(int64_t id, int64_t now_ms)> complete;
  // Jobs requeued by a durable change (their records pending again): the scheduler queues them.
  std::function<void(const std::vector<int64_t>& ids)> queue;
  // A node joined or came back: the parked jobs are offered again.
  std::function<void()> unpark;
  // The scheduler changed but the store did not: rebuild it from the store (a failure stops the
  // loop until a restore succeeds: the world records it).
  std::function<void()> restore;
  // The node gauges (their count changed), and the scheduling loop to wake.
  std::function<void()> gauges;
  std::function<void()> wake;
  // A MIG node's target layout per GPU (its desired state's "gpus"; empty for other nodes).
  std::function<std::vector<api::DesiredGpu>(const std::string& name, const KnownNode& node)> mig_layouts;
  // The newest usage sample of a workload's share of a GPU (nullopt: none sampled); may be null.
  std::function<std::optional<ShareUse>(const std::string& node, int gpu, int64_t id)> last_use;
};

// One running workload's share of one GPU (GET /v1/nodes/{name}'s gpus[i].shares).
struct NodeShare {
  int64_t workload = 0;  // 0 for a local slot
  std::string tenant;
  int64_t milli = 0;
  int64_t mem_mib = 0;
  std::string mode;
  std::string mig_profile;  // MIG pods only (mig_start >= 0)
  int mig_start = -1;
  std::optional<ShareUse> use;  // its newest sample, where the agent sent one
  // A tenant of the node directory that the control plane did not place (KnownNode::local_slots):
  // shown with mode "local", its tenant name and MIG instance, no workload.
  bool local = false;
  std::string mig_instance;
};

// A node as GET /v1/nodes and GET /v1/nodes/{name} show it.
struct NodeView {
  store::NodeRecord record;  // last_heartbeat_ms: the control plane's (in memory) for a live node
  api::NodeState state = api::NodeState::kReady;
  // Per GPU, as the scheduler holds it plus the node's local slots, at most 1000 (empty: lost).
  std::vector<int32_t> allocated_milli;
  int64_t workloads = 0;                 // running with a pod here
  std::map<std::string, api::NodeCondition> conditions;  // the agent's, as its last heartbeat said
  std::optional<std::vector<std::vector<NodeShare>>> shares;  // per GPU index (Get only)
};

enum class NodeOp { kCordon, kUncordon, kDrain };
// "cordon", "uncordon", "drain" (the path's last segment, the event's and audit's names).
std::string_view NodeOpName(NodeOp op);

struct NodeOpResult {
  std::string node;
  api::NodeState state = api::NodeState::kReady;
  std::vector<int64_t> requeued;  // drain: the workloads it requeued (ascending)
};

struct RemovedNode {
  std::string node;
  api::NodeState was = api::NodeState::kLost;  // lost or cordoned
};

// Workloads lost with a node (or drained) are pending again: their records say so, each with a
// "requeued" event (call inside the transaction; queue them once it committed).
Status PersistRequeue(const std::vector<int64_t>& ids, std::string_view why, store::Transaction& tx, int64_t now);
// One workload back to pending (no placement, wait reason "queued") with an event `kind`.
Status PersistPending(int64_t id, std::string_view kind, std::string_view detail, store::Transaction& tx, int64_t now);

class NodeService {
 public:
  using TransactFn = std::function<Status(std::string_view operation, const std::function<Status(store::Transaction&)>& fn)>;

  NodeService(TransactFn transact, const Clock& clock, NodeWorld world, const GpuModelCatalog& catalog);

  // Every stored node (lost ones too), in the store's order.
  StatusOr<std::vector<NodeView>> List(const NodeCaller& caller);
  // One node with the shares of its GPUs.
  StatusOr<NodeView> Get(const NodeCaller& caller, const std::string& name);
  // Cordon, uncordon or drain a live node.
  StatusOr<NodeOpResult> Apply(const NodeCaller& caller, const std::string& name, NodeOp op);
  // Forget a lost node, or a cordoned one that runs nothing.
  StatusOr<RemovedNode> Remove(const NodeCaller& caller, const std::string& name);
  // An agent registers its node (see the header comment).
  StatusOr<api::RegisterAnswer> Register(const NodeCaller& caller, const std::string& name,
                                         const api::NodeInventory& inventory, std::string* bad_field = nullptr);
  // An agent's round: the workloads that ended and its events (those not running here are
  // ignored, and listed), its conditions (a change is a `node.condition` event). The answer's
  // desired_version is api::DesiredVersion of what Desired would answer now (after this
  // heartbeat's ends), so that an agent holding that version need not ask (issue 32).
  StatusOr<api::HeartbeatAnswer> Heartbeat(const NodeCaller& caller, const std::string& name,
                                           const api::Heartbeat& beat);
  // What should run on the node (and, MIG nodes, each GPU's layout).
  StatusOr<api::DesiredState> Desired(const NodeCaller& caller, const std::string& name);

 private:
  // caller.check(action), then a token bound to another node refused (as the route wrapper does).
  Status Authorize(const NodeCaller& caller, Action action, const std::string& name) const;
  // The node's desired state (*mu held; `node` is a live one of world_.nodes).
  api::DesiredState DesiredOf(const std::string& name, const KnownNode& node) const;
  NodeView ViewOf(store::NodeRecord rec, const sched::LiveScheduler::NodeView* view, const KnownNode* known) const;
  // A registration whose only change is the MIG instances of an agent that may reconfigure them
  // (the scheduler's view is the same): the record and a `node.mig_layout` event; nullopt when
  // the registration is not one.
  std::optional<StatusOr<api::RegisterAnswer>> RegisterMigChange(const NodeCaller& caller, const std::string& name,
                                                                 const NodeInventory& inv, int64_t now);

  const TransactFn transact_;
  const Clock& clock_;
  const NodeWorld world_;
  const GpuModelCatalog& catalog_;
};

}  // namespace tessera::daemon
