// The kube-scheduler extender (`tessera k8s extender`, docs/kubernetes.md "Scheduler extender"):
// HTTP-free. It takes the bodies kube-scheduler POSTs to <urlPrefix>/filter and
// <urlPrefix>/prioritize and answers the bodies to send back, in the extender API's wire format
// (k8s.io/kube-scheduler/extender/v1, types.go). Those Go types have no json tags, so the keys are
// the Go field names:
//
//   ExtenderArgs          {"Pod": v1.Pod, "Nodes": v1.NodeList | null, "NodeNames": [..] | null}
//   ExtenderFilterResult  {"Nodes", "NodeNames", "FailedNodes": {node: reason},
//                          "FailedAndUnresolvableNodes": {node: reason}, "Error": ""}
//   HostPriorityList      [{"Host": "node-b", "Score": 7}, ...]   (Score 0..10)
//
// Both nodeCacheCapable modes: with `nodeCacheCapable: true` the scheduler sends NodeNames only
// and gets NodeNames back; otherwise it sends the whole v1.NodeList in Nodes and gets the passing
// Node objects back as they came (the extender keeps its own GPU view either way: the
// ExtenderCluster). Unknown fields anywhere are ignored, as Go's decoder does.
//
// Filter (quota, then GPU fit), per node:
//   - the pod asks for no GPU (no gpu.tessera.io/* annotation, gpu_ask.h): every node passes;
//   - a bad annotation or an unknown model: Error names it (the pod is unschedulable until fixed);
//   - the tenant (the pod's namespace, or the value of ExtenderOptions::tenant_label when the pod
//     has that label) would pass its GPU limit: FailedAndUnresolvableNodes (preemption on the
//     node cannot help), "tenant 'team-a' over its GPU quota: 1800 + 500 > 2000 milli-GPU";
//   - the node is not in the extender's view, cordoned, has no GPU of the asked model, too few
//     GPUs, or GPUs with too little memory in all: FailedAndUnresolvableNodes;
//   - the GPUs are there but too full now (milli or memory): FailedNodes (preemption may help),
//     "no GPU with 300 milli-GPU and 10240 MiB free now". One text per ask, not per node:
//     kube-scheduler counts nodes by reason in the pod's FailedScheduling event.
// Prioritize: the placement policy's score (ExtenderOptions::policy, "tessera" by default: the
// fragmentation gradient of FGD plus stranding and scarcity, src/placement/tessera_policy.cc) of
// each fitting node, min-max normalised to 0..10 (placement::ExtenderScores); nodes where the pod
// does not fit and pods without a GPU ask score 0.
//
// Worked example (tessera policy, its default mix of 1000/500/250-milli tasks): a pod asking
// 500 milli. node-a has GPU free {500, 0} (half used), node-b {1000, 1000}.
//   node-a: the pod fills GPU0 exactly, fragmentation 167 -> 0 milli: raw score 54 -> 10
//   node-b: half a GPU left that 1000-milli tasks cannot use: 0 -> 167: raw 45        -> 0
// so kube-scheduler (score x weight x 10 added to its own) prefers node-a, and node-b keeps two
// whole GPUs for whole-GPU pods.
//
// Transport answers (ExtenderAnswer): 200 with the protocol body for every decision and for
// errors the protocol can carry (Error / FailedNodes); 400 with {"Error": "..."} only for a body
// that is not a JSON object or whose Pod / Nodes / NodeNames have the wrong JSON type. Never 500.
//
// Cost: per cluster version and kind of GPU ask the extender keeps each node's fit and (policies
// built on ScoringPolicy) its score, so a pod whose ask was seen before reads them instead of
// deciding 5,000 nodes again; SetCluster carries them over the nodes a refresh left alone when
// the node list and specs are the same (extender.cc, "AskTable"; docs/kubernetes.md "Speed").
//
// Thread-safety: Filter, Prioritize, Health and SetCluster may be called from many threads at
// once; decisions read one cluster version each (SetCluster swaps it atomically for later calls).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "tessera/core/status.h"
#include "tessera/integrations/k8s/extender_cluster.h"
#include "tessera/placement/fragmentation.h"
#include "tessera/placement/policy.h"

namespace tessera::k8s {

// MaxExtenderPriority of the extender API.
inline constexpr int64_t kMaxExtenderScore = 10;

struct ExtenderOptions {
  std::string policy = "tessera";  // placement::PolicyNames()
  // A pod label naming the tenant; "" or a pod without the label: the pod's namespace.
  std::string tenant_label;
  // The expected task mix the fragmentation-aware policies score against; nullptr: a neutral
  // mix of 1000, 500 and 250 milli one-GPU tasks (the control plane's default too). Not owned.
  const placement::TargetWorkload* target_workload = nullptr;
};

// Per cluster version, per kind of GPU ask: what every node's check found (extender.cc).
struct ExtenderAskTables;

struct ExtenderAnswer {
  int status = 200;
  std::string body;
};

class Extender {
 public:
  // INVALID_ARGUMENT for an unknown policy.
  static StatusOr<std::unique_ptr<Extender>> Create(ExtenderOptions options);

  void SetCluster(std::shared_ptr<const ExtenderCluster> cluster);
  std::shared_ptr<const ExtenderCluster> cluster() const;

  ExtenderAnswer Filter(std::string_view body);
  ExtenderAnswer Prioritize(std::string_view body);
  // 200 {"status": "ok", "nodes": N, "policy": "tessera"}, or 503 {"status": "no cluster state"}
  // before the first SetCluster.
  ExtenderAnswer Health() const;

  ~Extender();

 private:
  Extender() = default;
  ExtenderOptions options_;
  placement::TargetWorkload default_workload_;
  mutable std::mutex cluster_mu_;
  std::shared_ptr<const ExtenderCluster> cluster_;
  std::mutex policy_mu_;  // the policy memoises, the ask tables keep its scores: one decision at a time
  std::unique_ptr<placement::PlacementPolicy> policy_;
  bool keep_scores_ = false;  // the tables keep the policy's scores (ScoringPolicy policies)
  std::unique_ptr<ExtenderAskTables> ask_tables_;
};

}  // namespace tessera::k8s
