#include "tessera/integrations/k8s/extender.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/integrations/k8s/extender_args.h"
#include "tessera/integrations/k8s/gpu_ask.h"
#include "tessera/placement/mig.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using placement::ClusterSnapshot;
using placement::GpuBit;
using placement::GpuSet;
using placement::TaskRequest;


// node -> reason, as FailedNodes / FailedAndUnresolvableNodes hold them.
using Reasons = std::vector<std::pair<std::string_view, std::string>>;

// `s` as a JSON string (it came from a parsed body or from our own text, so it is valid UTF-8):
// quotes, backslashes and control characters escaped as nlohmann's dump escapes them.
void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  size_t run = 0;  // start of the pending run of characters that need no escape
  for (size_t i = 0; i < s.size(); ++i) {
    const auto u = static_cast<unsigned char>(s[i]);
    if (u >= 0x20 && u != '"' && u != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    static const char* const kShort[] = {"b", "t", "n", nullptr, "f", "r"};
    if (u == '"' || u == '\\') {
      out += '\\';
      out += static_cast<char>(u);
    } else if (u >= 8 && u <= 13 && kShort[u - 8] != nullptr) {
      out += '\\';
      out += kShort[u - 8];
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out += buf;
    }
  }
  out.append(s.data() + run, s.size() - run);
  out += '"';
}

// A JSON object of the reasons, keys sorted (a node named twice keeps its last reason, as a Go
// map decoding the object would).
void AppendReasons(std::string& out, Reasons& reasons) {
  std::stable_sort(reasons.begin(), reasons.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  out += '{';
  bool first = true;
  for (size_t i = 0; i < reasons.size(); ++i) {
    if (i + 1 < reasons.size() && reasons[i + 1].first == reasons[i].first) continue;
    if (!first) out += ',';
    first = false;
    AppendJsonString(out, reasons[i].first);
    out += ':';
    AppendJsonString(out, reasons[i].second);
  }
  out += '}';
}

ExtenderAnswer BadRequest(const std::string& message) { return {400, json{{"Error", message}}.dump()}; }

std::string PodName(const Args& a) { return "pod " + a.pod_namespace + "/" + a.pod_name; }

std::string TenantOf(const Args& a, const std::string& label) {
  if (!label.empty()) {
    if (auto it = a.labels.find(label); it != a.labels.end() && !it->second.empty()) return it->second;
  }
  return a.pod_namespace;
}

// The ask resolved against the cluster's models: one TaskRequest per node model (MIG profiles
// differ per model), built on first use.
class Resolved {
 public:
  Resolved(const GpuAsk& ask, const ExtenderCluster& cluster, ModelMask allowed)
      : ask_(ask), cluster_(cluster), allowed_(allowed) {}

  // The task for node n, or a reason it can never fit there (unresolvable).
  StatusOr<const TaskRequest*> TaskFor(NodeIndex n) {
    const ClusterSnapshot& s = cluster_.snapshot();
    if (s.gpu_count(n) == 0) return FailedPreconditionError("the node has no GPUs");
    const ModelMask bit = s.model_bit(n);
    const GpuModelId model = s.spec(n).model;
    if (allowed_ != 0 && (allowed_ & bit) == 0) {
      return FailedPreconditionError("its GPUs are " + cluster_.catalog().info(model).name + ", the pod asks for " + ask_.model);
    }
    const bool mig_node = s.mig_mode(n);
    if (ask_.mode == AskMode::kMig && !mig_node) return FailedPreconditionError("its GPUs are not in MIG mode");
    if (ask_.mode != AskMode::kMig && mig_node) return FailedPreconditionError("its GPUs are in MIG mode (the pod asks for " + std::string(AskModeName(ask_.mode)) + ")");
    if (ask_.count > s.gpu_count(n)) {
      return FailedPreconditionError("it has " + std::to_string(s.gpu_count(n)) + " GPUs, the pod asks for " + std::to_string(ask_.count));
    }
    auto it = tasks_.find(model.value());
    if (it == tasks_.end()) {
      StatusOr<TaskRequest> t = Build(model, *s.mig_geometry(n));
      it = tasks_.emplace(model.value(), std::move(t)).first;
    }
    if (!it->second.ok()) return it->second.status();
    return &*it->second;
  }

 private:
  StatusOr<TaskRequest> Build(GpuModelId model, const MigGeometry& geometry) const {
    if (ask_.mode == AskMode::kMig) {
      StatusOr<TaskRequest> t = placement::MigRequest(model, geometry, ask_.mig_profile);
      if (!t.ok()) return FailedPreconditionError(std::string(t.status().message()));
      return t;
    }
    return TaskRequest{.num_gpu = ask_.count, .gpu_milli = GpuMilli{ask_.compute_milli}, .allowed_models = allowed_};
  }
  const GpuAsk& ask_;
  const ExtenderCluster& cluster_;
  ModelMask allowed_;
  std::map<uint32_t, StatusOr<TaskRequest>> tasks_;
};

// Memory a share asks of one GPU of node n (MiB): stated, or the compute's share of the GPU.
int64_t NeedMib(const GpuAsk& ask, const ExtenderCluster& c, NodeIndex n, int g) {
  if (ask.mode != AskMode::kShare) return 0;
  if (ask.memory_mib > 0) return ask.memory_mib;
  return (c.gpu_memory_mib(n, g) * ask.compute_milli + 999) / 1000;
}

// The GPUs of node n the ask may use: not blocked, and (share) with the memory it needs free;
// (whole) with all their memory free (see the masking rule below). `capacity_ok` says whether any GPU could ever hold it.
GpuSet UsableGpus(const GpuAsk& ask, const ExtenderCluster& c, NodeIndex n, bool* capacity_ok) {
  GpuSet usable = ~c.blocked_gpus(n) & placement::GpusOfCount(c.snapshot().gpu_count(n));
  *capacity_ok = true;
  if (ask.mode == AskMode::kMig) return usable;
  int capable = 0;
  for (int g = 0; g < c.snapshot().gpu_count(n); ++g) {
    const int64_t cap = c.gpu_memory_mib(n, g);
    if (cap <= 0) {
      ++capable;
      continue;  // memory not known: not checked
    }
    const int64_t need = ask.mode == AskMode::kShare ? NeedMib(ask, c, n, g) : cap;
    if (need <= cap) ++capable;
    // Masked only where memory changes the answer (the GPU has the compute free but not the
    // memory): a GPU short of compute is ruled out by the fit check anyway, and a node whose
    // GPUs are all unmasked keeps the policy's memoised score.
    if (c.gpu_free_mib(n, g) < need && c.snapshot().gpu_free(n, g) >= ask.compute_milli) usable &= ~GpuBit(g);
  }
  *capacity_ok = capable >= ask.count;
  return usable;
}

std::string AskText(const GpuAsk& ask, const TaskRequest& t) {
  switch (ask.mode) {
    case AskMode::kWhole:
      return ask.count == 1 ? std::string("fully free GPU") : std::to_string(ask.count) + " fully free GPUs";
    case AskMode::kShare:
      return "GPU with " + std::to_string(ask.compute_milli) + " milli-GPU" +
             (ask.memory_mib > 0 ? " and " + std::to_string(ask.memory_mib) + " MiB" : std::string()) + " free";
    case AskMode::kMig:
      return "room for a " + ask.mig_profile + " MIG instance (" + std::to_string(t.gpu_milli.value()) + " milli)";
  }
  return "";
}

// Everything a decision about one pod needs, or the Error that ends it.
struct PodDecision {
  std::optional<GpuAsk> ask;
  ModelMask allowed = 0;
  std::string tenant;
  const TenantQuota* quota = nullptr;
};

StatusOr<PodDecision> Prepare(const Args& a, const ExtenderCluster& c, const std::string& tenant_label) {
  PodDecision d;
  StatusOr<std::optional<GpuAsk>> ask = ParseGpuAsk(a.annotations);
  if (!ask.ok()) return ask.status().WithPrefix(PodName(a));
  d.ask = std::move(*ask);
  if (d.ask && !d.ask->model.empty()) {
    StatusOr<GpuModelId> id = c.catalog().Find(d.ask->model);
    if (!id.ok()) return id.status().WithPrefix(PodName(a) + ": " + std::string(kModelAnnotation));
    d.allowed = ModelBit(*id);
  }
  d.tenant = TenantOf(a, tenant_label);
  d.quota = c.tenant(d.tenant);
  return d;
}

// The quota refusal for `milli` more of the tenant's GPU, or "".
std::string QuotaRefusal(const PodDecision& d, int64_t milli) {
  if (d.quota == nullptr || !d.quota->limit_gpu_milli) return "";
  if (d.quota->used_gpu_milli + milli <= *d.quota->limit_gpu_milli) return "";
  return "tenant '" + d.tenant + "' over its GPU quota: " + std::to_string(d.quota->used_gpu_milli) + " + " +
         std::to_string(milli) + " > " + std::to_string(*d.quota->limit_gpu_milli) + " milli-GPU";
}

}  // namespace

StatusOr<std::unique_ptr<Extender>> Extender::Create(ExtenderOptions options) {
  std::unique_ptr<Extender> e(new Extender());
  e->options_ = std::move(options);
  if (e->options_.target_workload == nullptr) {
    std::vector<placement::TaskType> types;
    for (int milli : {1000, 500, 250}) {
      types.push_back(placement::TaskType{.num_gpu = 1, .gpu_milli = GpuMilli{milli}, .weight = 1});
    }
    e->default_workload_ = placement::TargetWorkload::FromTypes(std::move(types));
  }
  placement::PolicyOptions po;
  po.target_workload = e->options_.target_workload ? e->options_.target_workload : &e->default_workload_;
  TESSERA_ASSIGN_OR_RETURN(e->policy_, placement::MakePolicy(e->options_.policy, po));
  return e;
}

void Extender::SetCluster(std::shared_ptr<const ExtenderCluster> cluster) {
  std::lock_guard<std::mutex> lock(cluster_mu_);
  cluster_ = std::move(cluster);
}

std::shared_ptr<const ExtenderCluster> Extender::cluster() const {
  std::lock_guard<std::mutex> lock(cluster_mu_);
  return cluster_;
}

ExtenderAnswer Extender::Health() const {
  std::shared_ptr<const ExtenderCluster> c = cluster();
  if (c == nullptr) return {503, json{{"status", "no cluster state"}}.dump()};
  return {200, json{{"status", "ok"}, {"nodes", c->node_count()}, {"policy", options_.policy}}.dump()};
}

ExtenderAnswer Extender::Filter(std::string_view body) {
  StatusOr<Args> args = DecodeArgs(body);
  if (!args.ok()) return BadRequest(std::string(args.status().message()));
  Args& a = *args;
  Reasons failed, unresolvable;
  std::string error;
  std::vector<size_t> pass;
  std::shared_ptr<const ExtenderCluster> c = cluster();
  if (c == nullptr) {
    error = "tessera extender: no cluster state yet (the first refresh has not completed)";
  } else if (StatusOr<PodDecision> d = Prepare(a, *c, options_.tenant_label); !d.ok()) {
    error = std::string(d.status().message());
  } else if (!d->ask) {
    for (size_t i = 0; i < a.names.size(); ++i) pass.push_back(i);
  } else {
    Resolved resolved(*d->ask, *c, d->allowed);
    uint32_t hint = 0;  // kube-scheduler lists nodes in its snapshot's order: try the next one first
    std::string ask_text;  // "no GPU with ... free now", per task
    const TaskRequest* ask_text_of = nullptr;
    for (size_t i = 0; i < a.names.size(); ++i) {
      const std::string_view name = a.names[i];
      const std::optional<NodeIndex> n = c->Find(name, hint);
      if (n) hint = n->value() + 1;
      if (!n) {
        unresolvable.emplace_back(name, "not in tessera's view of the cluster (no GPUs registered)");
        continue;
      }
      if (!c->node(*n).schedulable) {
        unresolvable.emplace_back(name, "cordoned or lost in the tessera control plane");
        continue;
      }
      StatusOr<const TaskRequest*> task = resolved.TaskFor(*n);
      if (!task.ok()) {
        unresolvable.emplace_back(name, std::string(task.status().message()));
        continue;
      }
      const TaskRequest& t = **task;
      if (std::string q = QuotaRefusal(*d, t.TotalGpu().value()); !q.empty()) {
        unresolvable.emplace_back(name, std::move(q));
        continue;
      }
      bool capacity_ok = true;
      const GpuSet usable = UsableGpus(*d->ask, *c, *n, &capacity_ok);
      if (!capacity_ok) {
        unresolvable.emplace_back(name, "no GPU of the node has " + std::to_string(d->ask->memory_mib) + " MiB of memory");
        continue;
      }
      if (c->snapshot().Fits(*n, t, usable)) {
        pass.push_back(i);
      } else {
        // One text per ask, not per node: kube-scheduler counts nodes by reason in the pod's
        // FailedScheduling event ("0/5000 nodes are available: 3120 no GPU with ..."), so a
        // per-node detail would turn that line into thousands of distinct reasons.
        if (&t != ask_text_of) {
          ask_text = "no " + AskText(*d->ask, t) + " now";
          ask_text_of = &t;
        }
        failed.emplace_back(name, ask_text);
      }
    }
  }
  // Written by hand, keys in the order nlohmann's dump gives them (sorted): for 5,000 nodes this
  // is several times faster than building a json value and dumping it.
  std::string out;
  size_t size = 128 + error.size();
  for (size_t k : pass) size += a.names[k].size() + 3;
  for (const Reasons* r : {&failed, &unresolvable}) {
    for (const auto& [node, why] : *r) size += node.size() + why.size() + 6;
  }
  out.reserve(size);
  out += "{\"Error\":";
  AppendJsonString(out, error);
  out += ",\"FailedAndUnresolvableNodes\":";
  AppendReasons(out, unresolvable);
  out += ",\"FailedNodes\":";
  AppendReasons(out, failed);
  if (a.nodes_mode) {
    out += ",\"NodeNames\":null,\"Nodes\":{\"items\":[";
    if (error.empty()) {
      for (size_t k = 0; k < pass.size(); ++k) {
        if (k > 0) out += ',';
        out += a.node_items[pass[k]].dump();
      }
    }
    out += "],\"metadata\":{}}}";
  } else {
    out += ",\"NodeNames\":[";
    if (error.empty()) {
      for (size_t k = 0; k < pass.size(); ++k) {
        if (k > 0) out += ',';
        AppendJsonString(out, a.names[pass[k]]);
      }
    }
    out += "],\"Nodes\":null}";
  }
  return {200, std::move(out)};
}

ExtenderAnswer Extender::Prioritize(std::string_view body) {
  StatusOr<Args> args = DecodeArgs(body);
  if (!args.ok()) return BadRequest(std::string(args.status().message()));
  const Args& a = *args;
  std::vector<int64_t> scores(a.names.size(), 0);
  std::shared_ptr<const ExtenderCluster> c = cluster();
  StatusOr<PodDecision> d = c ? Prepare(a, *c, options_.tenant_label) : StatusOr<PodDecision>(UnavailableError(""));
  if (d.ok() && d->ask) {
    // Group the fitting nodes by the task they take (one per GPU model for MIG asks), score each
    // group with the policy, then normalise all together.
    Resolved resolved(*d->ask, *c, d->allowed);
    std::map<const TaskRequest*, std::vector<std::pair<size_t, NodeIndex>>> groups;
    placement::Eligibility eligibility;
    bool masked = false;
    uint32_t hint = 0;
    for (size_t i = 0; i < a.names.size(); ++i) {
      const std::optional<NodeIndex> n = c->Find(a.names[i], hint);
      if (n) hint = n->value() + 1;
      if (!n || !c->node(*n).schedulable) continue;
      StatusOr<const TaskRequest*> task = resolved.TaskFor(*n);
      if (!task.ok() || !QuotaRefusal(*d, (*task)->TotalGpu().value()).empty()) continue;
      bool capacity_ok = true;
      const GpuSet usable = UsableGpus(*d->ask, *c, *n, &capacity_ok);
      if (!capacity_ok) continue;
      if (usable != placement::GpusOfCount(c->snapshot().gpu_count(*n))) {
        if (!masked) eligibility.Reset(c->node_count());
        masked = true;
        eligibility.SetGpus(*n, usable);
      }
      groups[*task].emplace_back(i, *n);
    }
    std::vector<std::optional<double>> raw(a.names.size());
    {
      std::lock_guard<std::mutex> lock(policy_mu_);
      placement::PlacementContext ctx;
      if (masked) ctx.eligibility = &eligibility;
      std::vector<NodeIndex> nodes;
      for (const auto& [task, members] : groups) {
        nodes.clear();
        for (const auto& m : members) nodes.push_back(m.second);
        const std::vector<std::optional<double>> s = policy_->ScoreNodes(c->snapshot(), *task, nodes, ctx);
        for (size_t k = 0; k < members.size(); ++k) raw[members[k].first] = s[k];
      }
    }
    scores = placement::ExtenderScores(raw, kMaxExtenderScore);
  }
  std::string out = "[";
  out.reserve(a.names.size() * 32);
  for (size_t i = 0; i < a.names.size(); ++i) {
    if (i > 0) out += ',';
    out += "{\"Host\":";
    AppendJsonString(out, a.names[i]);
    out += ",\"Score\":" + std::to_string(scores[i]) + "}";
  }
  out += ']';
  return {200, std::move(out)};
}

}  // namespace tessera::k8s
