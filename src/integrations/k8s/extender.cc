#include "tessera/integrations/k8s/extender.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <array>
#include <deque>
#include <cstdio>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "src/integrations/k8s/extender_args.h"
#include "tessera/integrations/k8s/gpu_ask.h"
#include "tessera/placement/mig.h"
#include "tessera/placement/scoring_policy.h"

namespace tessera::k8s {
namespace {

using nlohmann::json;
using placement::ClusterSnapshot;
using placement::GpuBit;
using placement::GpuSet;
using placement::TaskRequest;


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

// A node name as a JSON string: plain names (Args::names_plain) as they are.
inline void AppendName(std::string& out, std::string_view name, bool plain) {
  if (!plain) return AppendJsonString(out, name);
  out += '"';
  out.append(name);
  out += '"';
}

// A node refused by the filter: its name as given, its rank among the cluster's names (-1: not
// in the cluster) and the reason (owned by the request's Walk).
struct Refusal {
  std::string_view node;
  int64_t rank;
  const std::string* why;
};
using Reasons = std::vector<Refusal>;

// A JSON object of the reasons, keys sorted (a node named twice keeps its last reason, as a Go
// map decoding the object would). Nodes of the cluster compare by name_rank (the same order as
// their names, without comparing strings); a name the cluster does not have compares as text.
void AppendReasons(std::string& out, Reasons& reasons, bool plain_names) {
  std::stable_sort(reasons.begin(), reasons.end(), [](const Refusal& x, const Refusal& y) {
    if (x.rank >= 0 && y.rank >= 0) return x.rank < y.rank;
    return x.node < y.node;
  });
  out += '{';
  bool first = true;
  for (size_t i = 0; i < reasons.size(); ++i) {
    if (i + 1 < reasons.size() && reasons[i + 1].node == reasons[i].node) continue;
    if (!first) out += ',';
    first = false;
    AppendName(out, reasons[i].node, plain_names);
    out += ':';
    AppendJsonString(out, *reasons[i].why);
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
  // The loop's answer from the node's precomputed memory view, where that view decides it:
  // a stated share that every GPU has free (no GPU masked, every GPU capable), and whole GPUs
  // (the need is each GPU's capacity: every GPU capable; masked: all compute free, not all memory).
  if ((ask.mode == AskMode::kShare && ask.memory_mib > 0 && ask.memory_mib <= c.min_free_mib(n)) ||
      (ask.mode == AskMode::kWhole && ask.compute_milli == 1000)) {
    *capacity_ok = ask.count <= c.snapshot().gpu_count(n);
    return ask.mode == AskMode::kWhole ? usable & ~c.whole_short_gpus(n) : usable;
  }
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


// What the filter finds on one node for one kind of GPU ask, apart from the per-request
// refusals (cordoned, the node's shape, the tenant's quota): whether any GPU could ever hold it,
// the GPUs it may use and whether it fits them now.
struct NodeFit {
  enum Kind : uint8_t { kNotApplicable, kNoCapacity, kTooFull, kFits };
  GpuSet usable = 0;
  Kind kind = kNotApplicable;
};

// One kind of GPU ask on one cluster version (AskTables): every node's NodeFit, worked out once by
// the first request with this ask and read by every later one, and (ScoringPolicy policies) the
// policy's raw score of each node that fits, filled in as Prioritize asks for them.
//
//   5,000 nodes, 64 pods cycling through 8 asks: the first pod of each ask walks every node
//   (UsableGpus, Fits) and scores the fitting ones; every later pod with the same ask reads one
//   NodeFit and one score per node. A refresh (SetCluster) starts the tables over.
struct AskTable {
  static constexpr uint8_t kUnscored = 0, kNoScore = 1, kScored = 2;
  GpuAsk ask;                // whose table (for carrying it over a refresh)
  ModelMask allowed = 0;
  std::vector<NodeFit> fit;  // by node index; immutable once the table is shared
  // Guarded by Extender::policy_mu_.
  std::vector<double> raw;
  std::vector<uint8_t> raw_state;  // kUnscored, kNoScore (nullopt), kScored
};

// Asks the tables of one cluster keep before they start over (each about 17 bytes per node).
constexpr size_t kAskTableLimit = 256;

// The ask as far as the filter's node checks and the policy's task see it (not the tenant).
struct AskKey {
  AskMode mode;
  int32_t count, compute_milli;
  int64_t memory_mib;
  std::string mig_profile;
  ModelMask allowed;
  auto operator<=>(const AskKey&) const = default;
};

// The filter's decision for one pod, node by node. What makes the ask resolvable on a node
// depends only on the node's shape (GPU model, MIG mode, GPU count: ExtenderCluster::shape), so
// the task, the reason a shape can never take the pod and the quota refusal are worked out once
// per shape and GPU model, and every reason text is built once per request (nodes point to it).
// What is left per node is the name lookup and the node's NodeFit: read from the ask's table
// when the walk has one, else worked out (the memory mask and the fit).
//
//   5,000 nodes of shapes {A100 x8, H100 x8, T4 x4}, a pod asking for an A100: three
//   resolutions ("its GPUs are H100-80GB, the pod asks for A100-40GB" built once, 1,667 nodes
//   point to it), then the NodeFit of the 1,667 A100 nodes.
class Walk {
 public:
  enum class Outcome : uint8_t { kPass, kFailed, kUnresolvable };
  struct Decision {
    Outcome outcome = Outcome::kUnresolvable;
    NodeIndex node;                        // invalid for a name the cluster does not have
    const std::string* why = nullptr;      // kFailed, kUnresolvable
    const TaskRequest* task = nullptr;     // kPass, kFailed
    GpuSet usable = 0;                     // kPass, kFailed
  };

  // `table`: the ask's NodeFits on `c` (nullptr: work each one out).
  Walk(const PodDecision& d, const ExtenderCluster& c, const AskTable* table = nullptr)
      : d_(d), c_(c), table_(table), shapes_(c.shape_count()) {}

  Decision Decide(std::string_view name) {
    const std::optional<NodeIndex> found = c_.Find(name, hint_);
    if (!found) {
      Decision out;
      out.why = Text(kUnknown, "not in tessera's view of the cluster (no GPUs registered)");
      return out;
    }
    hint_ = found->value() + 1;  // kube-scheduler lists nodes in its snapshot's order: try the next one first
    return DecideNode(*found);
  }

  Decision DecideNode(NodeIndex n) {
    Decision out;
    out.node = n;
    if (!c_.schedulable(n)) {
      out.why = Text(kCordoned, "cordoned or lost in the tessera control plane");
      return out;
    }
    const Shape& shape = ShapeOf(n);
    if (shape.why != nullptr) {
      out.why = shape.why;
      return out;
    }
    out.task = &shape.model->task;
    const NodeFit fit = table_ != nullptr ? table_->fit[n.value()] : Fit(n, *out.task);
    out.usable = fit.usable;
    if (fit.kind == NodeFit::kNoCapacity) {
      out.why = Text(kCapacity, "no GPU of the node has " + std::to_string(d_.ask->memory_mib) + " MiB of memory");
      return out;
    }
    if (fit.kind == NodeFit::kFits) {
      out.outcome = Outcome::kPass;
      return out;
    }
    // One text per ask, not per node: kube-scheduler counts nodes by reason in the pod's
    // FailedScheduling event ("0/5000 nodes are available: 3120 no GPU with ... free now"), so
    // a per-node detail would turn that line into thousands of distinct reasons.
    if (shape.model->failed == nullptr) {
      shape.model->failed = &texts_.emplace_back("no " + AskText(*d_.ask, *out.task) + " now");
    }
    out.outcome = Outcome::kFailed;
    out.why = shape.model->failed;
    return out;
  }

  // The NodeFit of every node of the cluster, for the ask of `d` (whose quota must be nullptr:
  // a table serves every tenant). Nodes the ask never reaches are kNotApplicable. With `before`
  // (the ask's table on the previous cluster), nodes marked in `unchanged` keep its NodeFit.
  static std::shared_ptr<AskTable> Table(const PodDecision& d, const ExtenderCluster& c, bool with_scores,
                                         const AskTable* before, const std::vector<uint8_t>& unchanged) {
    auto table = std::make_shared<AskTable>();
    table->ask = *d.ask;
    table->allowed = d.allowed;
    table->fit.resize(c.node_count());
    Walk walk(d, c);
    for (uint32_t i = 0; i < c.node_count(); ++i) {
      if (before != nullptr && unchanged[i]) {
        table->fit[i] = before->fit[i];
        continue;
      }
      const Decision v = walk.DecideNode(NodeIndex{i});
      if (v.task == nullptr) continue;  // cordoned or refused by its shape
      NodeFit& f = table->fit[i];
      f.usable = v.usable;
      f.kind = v.outcome == Outcome::kPass ? NodeFit::kFits
               : v.outcome == Outcome::kFailed ? NodeFit::kTooFull
                                                : NodeFit::kNoCapacity;
    }
    if (with_scores) {
      table->raw.resize(c.node_count());
      table->raw_state.resize(c.node_count(), AskTable::kUnscored);
    }
    return table;
  }

 private:
  // The ask on one GPU model: its task (MIG profiles differ per model) and the texts of it.
  struct Model {
    TaskRequest task;
    const std::string* refused = nullptr;  // the task cannot be built, or the tenant's quota refuses it
    const std::string* failed = nullptr;   // "no ... free now"
  };
  struct Shape {
    bool done = false;
    const std::string* why = nullptr;  // unresolvable on this shape
    Model* model = nullptr;            // else
  };
  enum Fixed { kUnknown, kCordoned, kCapacity, kFixedCount };

  NodeFit Fit(NodeIndex n, const TaskRequest& task) const {
    bool capacity_ok = true;
    NodeFit f;
    f.usable = UsableGpus(*d_.ask, c_, n, &capacity_ok);
    f.kind = !capacity_ok                               ? NodeFit::kNoCapacity
             : c_.snapshot().Fits(n, task, f.usable) ? NodeFit::kFits
                                                       : NodeFit::kTooFull;
    return f;
  }

  const std::string* Text(Fixed which, std::string_view text) {
    if (fixed_[which] == nullptr) fixed_[which] = &texts_.emplace_back(text);
    return fixed_[which];
  }
  const std::string* Owned(std::string text) { return &texts_.emplace_back(std::move(text)); }

  // The checks in the order the filter makes them, for n's shape.
  Shape& ShapeOf(NodeIndex n) {
    Shape& shape = shapes_[c_.shape(n)];
    if (shape.done) return shape;
    shape.done = true;
    const ClusterSnapshot& s = c_.snapshot();
    const GpuAsk& ask = *d_.ask;
    if (s.gpu_count(n) == 0) {
      shape.why = Owned("the node has no GPUs");
      return shape;
    }
    const GpuModelId model = s.spec(n).model;
    if (d_.allowed != 0 && (d_.allowed & s.model_bit(n)) == 0) {
      // (a mixed-model node names each of its models once, in GPU order: "H100-80GB, A100-40GB")
      std::string names = c_.catalog().info(model).name;
      for (GpuModelId m : s.spec(n).gpu_models) {
        const std::string& name = c_.catalog().info(m).name;
        if (names.find(name) == std::string::npos) names += ", " + name;
      }
      shape.why = Owned("its GPUs are " + names + ", the pod asks for " + ask.model);
      return shape;
    }
    const bool mig_node = s.mig_mode(n);
    if (ask.mode == AskMode::kMig && !mig_node) {
      shape.why = Owned("its GPUs are not in MIG mode");
      return shape;
    }
    if (ask.mode != AskMode::kMig && mig_node) {
      shape.why = Owned("its GPUs are in MIG mode (the pod asks for " + std::string(AskModeName(ask.mode)) + ")");
      return shape;
    }
    if (ask.count > s.gpu_count(n)) {
      shape.why = Owned("it has " + std::to_string(s.gpu_count(n)) + " GPUs, the pod asks for " + std::to_string(ask.count));
      return shape;
    }
    Model& m = ModelOf(model, *s.mig_geometry(n));
    if (m.refused != nullptr) {
      shape.why = m.refused;
    } else {
      shape.model = &m;
    }
    return shape;
  }

  Model& ModelOf(GpuModelId model, const MigGeometry& geometry) {
    auto it = models_.find(model.value());
    if (it != models_.end()) return it->second;
    Model& m = models_[model.value()];
    const GpuAsk& ask = *d_.ask;
    if (ask.mode == AskMode::kMig) {
      StatusOr<TaskRequest> t = placement::MigRequest(model, geometry, ask.mig_profile);
      if (!t.ok()) {
        m.refused = Owned(std::string(t.status().message()));
        return m;
      }
      m.task = *t;
    } else {
      m.task = TaskRequest{.num_gpu = ask.count, .gpu_milli = GpuMilli{ask.compute_milli}, .allowed_models = d_.allowed};
    }
    if (std::string q = QuotaRefusal(d_, m.task.TotalGpu().value()); !q.empty()) m.refused = Owned(std::move(q));
    return m;
  }

  const PodDecision& d_;
  const ExtenderCluster& c_;
  const AskTable* table_;
  uint32_t hint_ = 0;
  std::vector<Shape> shapes_;
  std::map<uint32_t, Model> models_;  // by GPU model id (stable addresses)
  std::array<const std::string*, kFixedCount> fixed_{};
  std::deque<std::string> texts_;  // every reason handed out (stable addresses)
};


}  // namespace

// The AskTables of one cluster version, by ask. Started over by a new cluster (compared by
// address: the cluster is held, so its address is not reused while the tables live) and when
// kAskTableLimit asks are taken.
//
// A refresh is incremental (RefreshTables, from SetCluster, on the refreshing thread): when the
// new cluster has the same nodes with the same specs (names, models, GPU counts, MIG mode, CPU,
// memory: also what the policies read of the cluster as a whole, such as the tessera policy's
// model scarcity), every table is carried over: the NodeFit and the score of each node whose
// state did not change (its use, its cordon) are copied, the others' NodeFit is worked out anew
// and their score left for the next Prioritize to ask the policy.
//
//   5,000 nodes, 8 asks, a refresh in which 50 nodes' use changed: 8 x 50 NodeFits worked out
//   at the refresh, and the first pod of each ask after it scores 50 nodes, not the ~3,000 that
//   fit. A node added, removed, renamed or resized: the tables start over.
struct ExtenderAskTables {
  std::mutex mu;
  std::shared_ptr<const ExtenderCluster> cluster;
  std::map<AskKey, std::shared_ptr<AskTable>> tables;
};

namespace {

// Whether b has a's nodes with a's specs, in a's order; then in `unchanged` which nodes kept
// their state.
bool SameNodes(const ExtenderCluster& a, const ExtenderCluster& b, std::vector<uint8_t>& unchanged) {
  if (a.node_count() != b.node_count() || &a.catalog() != &b.catalog()) return false;
  unchanged.assign(b.node_count(), 0);
  for (uint32_t i = 0; i < b.node_count(); ++i) {
    const ClusterNode& x = a.node(NodeIndex{i});
    const ClusterNode& y = b.node(NodeIndex{i});
    if (x.name != y.name || x.cpu_milli != y.cpu_milli || x.memory_mib != y.memory_mib || x.model != y.model ||
        x.gpu_count != y.gpu_count || x.mig != y.mig || x.gpu_memory_mib != y.gpu_memory_mib ||
        x.gpu_models != y.gpu_models) {
      return false;
    }
    unchanged[i] = x.schedulable == y.schedulable && x.gpu_used_milli == y.gpu_used_milli &&
                   x.gpu_used_mib == y.gpu_used_mib;
  }
  return true;
}

// The tables for `new_cluster`, which replaces `old_cluster` (SetCluster). `policy_mu` guards
// the tables' scores.
void RefreshTables(ExtenderAskTables& t, std::mutex& policy_mu, const std::shared_ptr<const ExtenderCluster>& old_cluster,
                   const std::shared_ptr<const ExtenderCluster>& new_cluster) {
  if (old_cluster == new_cluster) return;  // the same version again: the tables stand
  std::vector<uint8_t> unchanged;
  const bool same = old_cluster != nullptr && new_cluster != nullptr && SameNodes(*old_cluster, *new_cluster, unchanged);
  std::map<AskKey, std::shared_ptr<AskTable>> old_tables;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    if (t.cluster == old_cluster) old_tables = std::move(t.tables);
    t.cluster = new_cluster;
    t.tables.clear();
  }
  if (!same || old_tables.empty()) return;
  std::map<AskKey, std::shared_ptr<AskTable>> carried;
  for (const auto& [key, before] : old_tables) {
    PodDecision d;
    d.ask = before->ask;
    d.allowed = before->allowed;
    carried.emplace(key, Walk::Table(d, *new_cluster, !before->raw_state.empty(), before.get(), unchanged));
  }
  {
    std::lock_guard<std::mutex> lock(policy_mu);  // the old tables' scores may still be being written
    for (auto& [key, table] : carried) {
      const AskTable& before = *old_tables.at(key);
      if (before.raw_state.empty()) continue;
      for (size_t i = 0; i < unchanged.size(); ++i) {
        if (!unchanged[i]) continue;
        table->raw[i] = before.raw[i];
        table->raw_state[i] = before.raw_state[i];
      }
    }
  }
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.cluster != new_cluster) return;  // another refresh came in between
  for (auto& [key, table] : carried) t.tables.emplace(key, std::move(table));  // a table built meanwhile stays
}

// The table of d's ask on c: the cached one, or a new one (built outside the lock: two requests
// may both build it, and one of the two equal tables is kept). `keep_scores`: the table keeps
// the policy's scores (ScoringPolicy).
std::shared_ptr<AskTable> TableFor(ExtenderAskTables& cache, bool keep_scores, const PodDecision& d,
                                   const std::shared_ptr<const ExtenderCluster>& c) {
  const GpuAsk& ask = *d.ask;
  AskKey key{ask.mode, ask.count, ask.compute_milli, ask.memory_mib, ask.mig_profile, d.allowed};
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    if (cache.cluster == c) {
      if (auto it = cache.tables.find(key); it != cache.tables.end()) return it->second;
    }
  }
  PodDecision any_tenant = d;
  any_tenant.quota = nullptr;
  std::shared_ptr<AskTable> table = Walk::Table(any_tenant, *c, keep_scores, nullptr, {});
  std::lock_guard<std::mutex> lock(cache.mu);
  if (cache.cluster != c) return table;  // a refresh came in between: not kept
  if (cache.tables.size() >= kAskTableLimit) cache.tables.clear();
  return cache.tables.emplace(std::move(key), std::move(table)).first->second;
}

}  // namespace

Extender::~Extender() = default;

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
  // ScoringPolicy::ScoreNodes is a pure function of the snapshot, the task, the node and its usable
  // GPUs (scoring_policy.h), so its scores may be kept in the ask tables.
  e->keep_scores_ = dynamic_cast<placement::ScoringPolicy*>(e->policy_.get()) != nullptr;
  e->ask_tables_ = std::make_unique<ExtenderAskTables>();
  return e;
}

void Extender::SetCluster(std::shared_ptr<const ExtenderCluster> cluster) {
  std::shared_ptr<const ExtenderCluster> old;
  {
    std::lock_guard<std::mutex> lock(cluster_mu_);
    old = std::exchange(cluster_, cluster);
  }
  RefreshTables(*ask_tables_, policy_mu_, old, cluster);
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
  pass.reserve(a.names.size());
  std::shared_ptr<const ExtenderCluster> c = cluster();
  StatusOr<PodDecision> d = UnavailableError("");
  std::shared_ptr<AskTable> table;
  std::optional<Walk> walk;  // owns the reasons' texts until the answer is written
  if (c == nullptr) {
    error = "tessera extender: no cluster state yet (the first refresh has not completed)";
  } else if (d = Prepare(a, *c, options_.tenant_label); !d.ok()) {
    error = std::string(d.status().message());
  } else if (!d->ask) {
    for (size_t i = 0; i < a.names.size(); ++i) pass.push_back(i);
  } else {
    table = TableFor(*ask_tables_, keep_scores_, *d, c);
    walk.emplace(*d, *c, table.get());
    for (size_t i = 0; i < a.names.size(); ++i) {
      const std::string_view name = a.names[i];
      const Walk::Decision v = walk->Decide(name);
      if (v.outcome == Walk::Outcome::kPass) {
        pass.push_back(i);
        continue;
      }
      const int64_t rank = v.node.valid() ? int64_t{c->name_rank(v.node)} : -1;
      (v.outcome == Walk::Outcome::kFailed ? failed : unresolvable).push_back(Refusal{name, rank, v.why});
    }
  }
  // Written by hand, keys in the order nlohmann's dump gives them (sorted): for 5,000 nodes this
  // is several times faster than building a json value and dumping it.
  std::string out;
  size_t size = 128 + error.size();
  for (size_t k : pass) size += a.names[k].size() + 3;
  for (const Reasons* r : {&failed, &unresolvable}) {
    for (const Refusal& f : *r) size += f.node.size() + f.why->size() + 6;
  }
  out.reserve(size);
  out += "{\"Error\":";
  AppendJsonString(out, error);
  out += ",\"FailedAndUnresolvableNodes\":";
  AppendReasons(out, unresolvable, a.names_plain);
  out += ",\"FailedNodes\":";
  AppendReasons(out, failed, a.names_plain);
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
        AppendName(out, a.names[pass[k]], a.names_plain);
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
    // The nodes that pass the filter, grouped by the task they take (one per GPU model for MIG
    // asks), scored by the policy group by group, then normalised all together. (A node that
    // fails the filter would score nullopt: it is not asked.) Scores the ask's table already
    // holds are read from it.
    const std::shared_ptr<AskTable> table = TableFor(*ask_tables_, keep_scores_, *d, c);
    Walk walk(*d, *c, table.get());
    struct Member {
      size_t at;           // in a.names
      NodeIndex node;
      bool masked;         // some of its GPUs are masked out (the policy does not memoise those)
    };
    std::vector<Member> passing;
    std::vector<const TaskRequest*> tasks;
    std::vector<GpuSet> usable;
    for (size_t i = 0; i < a.names.size(); ++i) {
      const Walk::Decision v = walk.Decide(a.names[i]);
      if (v.outcome != Walk::Outcome::kPass) continue;
      const NodeIndex n = v.node;
      passing.push_back(Member{i, n, v.usable != placement::GpusOfCount(c->snapshot().gpu_count(n))});
      tasks.push_back(v.task);
      usable.push_back(v.usable);
    }
    std::vector<std::optional<double>> raw(a.names.size());
    std::map<const TaskRequest*, std::vector<Member>> groups;
    placement::Eligibility eligibility;
    bool masked = false;
    std::lock_guard<std::mutex> lock(policy_mu_);  // the policy and the tables' scores: one decision at a time
    const bool kept = !table->raw_state.empty();
    for (size_t k = 0; k < passing.size(); ++k) {
      const Member& m = passing[k];
      if (kept) {
        const uint8_t state = table->raw_state[m.node.value()];
        if (state == AskTable::kScored) raw[m.at] = table->raw[m.node.value()];
        if (state != AskTable::kUnscored) continue;
      }
      if (m.masked) {
        if (!masked) eligibility.Reset(c->node_count());
        masked = true;
        eligibility.SetGpus(m.node, usable[k]);
      }
      groups[tasks[k]].push_back(m);
    }
    placement::PlacementContext ctx;
    if (masked) ctx.eligibility = &eligibility;
    std::vector<NodeIndex> nodes;
    for (const auto& [task, members] : groups) {
      nodes.clear();
      for (const Member& m : members) nodes.push_back(m.node);
      const std::vector<std::optional<double>> s = policy_->ScoreNodes(c->snapshot(), *task, nodes, ctx);
      for (size_t k = 0; k < members.size(); ++k) {
        raw[members[k].at] = s[k];
        if (kept) {
          const uint32_t n = members[k].node.value();
          table->raw_state[n] = s[k] ? AskTable::kScored : AskTable::kNoScore;
          table->raw[n] = s[k].value_or(0.0);
        }
      }
    }
    scores = placement::ExtenderScores(raw, kMaxExtenderScore);
  }
  std::string out;
  size_t size = 2;
  for (std::string_view name : a.names) size += name.size() + 48;
  if (a.names_plain) {
    // Plain names are their own JSON text: written straight into a buffer of the largest size.
    out.resize(size);
    char* p = out.data();
    *p++ = '[';
    for (size_t i = 0; i < a.names.size(); ++i) {
      constexpr std::string_view kHost = ",{\"Host\":\"";
      constexpr std::string_view kScore = "\",\"Score\":";
      const std::string_view host = i > 0 ? kHost : kHost.substr(1);
      std::memcpy(p, host.data(), host.size());
      p += host.size();
      std::memcpy(p, a.names[i].data(), a.names[i].size());
      p += a.names[i].size();
      std::memcpy(p, kScore.data(), kScore.size());
      p += kScore.size();
      p = std::to_chars(p, p + 20, scores[i]).ptr;
      *p++ = '}';
    }
    *p++ = ']';
    out.resize(static_cast<size_t>(p - out.data()));
    return {200, std::move(out)};
  }
  out.reserve(size);
  out += '[';
  char digits[24];
  for (size_t i = 0; i < a.names.size(); ++i) {
    out.append(i > 0 ? ",{\"Host\":" : "{\"Host\":");
    AppendName(out, a.names[i], a.names_plain);
    out += ",\"Score\":";
    out.append(digits, std::to_chars(digits, digits + sizeof(digits), scores[i]).ptr);
    out += '}';
  }
  out += ']';
  return {200, std::move(out)};
}

}  // namespace tessera::k8s
