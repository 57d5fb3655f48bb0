#include "tessera/sim/replay.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "tessera/placement/policy.h"

namespace tessera::sim {
namespace {

using placement::ClusterSnapshot;
using placement::FragmentationMemo;
using placement::TargetWorkload;
using placement::TaskRequest;

constexpr size_t kMaxArrivals = 5'000'000;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct BucketSums {
  std::vector<double> alloc, frag, rate;
  std::vector<int64_t> count;
  void Add(size_t b, double a, double f, double r) {
    if (b >= count.size()) {
      alloc.resize(b + 1, 0.0);
      frag.resize(b + 1, 0.0);
      rate.resize(b + 1, 0.0);
      count.resize(b + 1, 0);
    }
    alloc[b] += a;
    frag[b] += f;
    rate[b] += r;
    ++count[b];
  }
};

// Per-bucket means; an empty bucket takes the mean of the events of buckets b-1..b+1.
BucketSeries Finish(const BucketSums& s) {
  BucketSeries out;
  const size_t n = s.count.size();
  out.alloc_pct.assign(n, kNaN);
  out.frag_amount_pct.assign(n, kNaN);
  out.frag_rate_pct.assign(n, kNaN);
  for (size_t b = 0; b < n; ++b) {
    double a = s.alloc[b], f = s.frag[b], r = s.rate[b];
    int64_t c = s.count[b];
    if (c == 0) {
      for (size_t nb : {b - 1, b + 1}) {
        if (nb < n) {  // b - 1 wraps to a huge value when b == 0
          a += s.alloc[nb];
          f += s.frag[nb];
          r += s.rate[nb];
          c += s.count[nb];
        }
      }
    }
    if (c == 0) continue;
    out.alloc_pct[b] = a / static_cast<double>(c);
    out.frag_amount_pct[b] = f / static_cast<double>(c);
    out.frag_rate_pct[b] = r / static_cast<double>(c);
  }
  return out;
}

// Round half to even (Python's round(), which the artifact's analysis uses), independent of the
// floating-point environment.
double RoundHalfEven(double x) {
  const double r = std::floor(x);
  const double frac = x - r;
  if (frac > 0.5) return r + 1;
  if (frac < 0.5) return r;
  return std::fmod(r, 2.0) == 0.0 ? r : r + 1;
}

double At(const std::vector<double>& v, int bucket) {
  if (bucket < 0 || static_cast<size_t>(bucket) >= v.size()) return kNaN;
  return v[static_cast<size_t>(bucket)];
}

}  // namespace

double ReplayResult::UnallocatedPctAt(int bucket) const { return 100.0 - At(buckets.alloc_pct, bucket); }
double ReplayResult::FragRatePctAt(int bucket) const { return At(buckets.frag_rate_pct, bucket); }
double ReplayResult::FragAmountPctAt(int bucket) const { return At(buckets.frag_amount_pct, bucket); }

std::vector<uint32_t> BuildArrivalOrder(const std::vector<PodRecord>& pods, int64_t gpu_capacity_milli,
                                        double tune_ratio, Rng& rng) {
  std::vector<uint32_t> order(pods.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(),
            [&](uint32_t a, uint32_t b) { return pods[a].name < pods[b].name; });
  rng.Shuffle(order);
  if (tune_ratio <= 0 || pods.empty()) return order;

  int64_t total = 0;
  for (const PodRecord& p : pods) total += p.request.TotalGpu().value();
  if (total <= 0) return order;  // nothing to scale (the artifact refuses such lists)
  const double target = tune_ratio * static_cast<double>(gpu_capacity_milli);
  if (static_cast<double>(total) < target) {
    while (order.size() < kMaxArrivals) {
      const uint32_t idx = static_cast<uint32_t>(rng.Uniform(pods.size()));
      const TaskRequest& r = pods[idx].request;
      // The artifact's stop test adds the per-GPU milli, not the pod's total.
      if (static_cast<double>(total + r.gpu_milli.value()) > target) break;
      total += r.TotalGpu().value();
      order.push_back(idx);
    }
  } else {
    // Remove uniformly chosen pods (by position among those left, as the artifact does) until
    // the total fits. A Fenwick tree over "still present" finds the k-th remaining pod in
    // O(log n), so large lists do not cost O(n^2).
    const size_t n = order.size();
    std::vector<int64_t> tree(n + 1, 0);
    for (size_t i = 1; i <= n; ++i) {
      tree[i] += 1;
      if (size_t j = i + (i & (~i + 1)); j <= n) tree[j] += tree[i];
    }
    std::vector<bool> removed(n, false);
    size_t left = n;
    size_t top = 1;
    while (top * 2 <= n) top *= 2;
    while (static_cast<double>(total) > target && left > 0) {
      uint64_t k = rng.Uniform(left);  // 0-based rank among the remaining
      size_t pos = 0;
      for (size_t step = top; step > 0; step /= 2) {
        if (pos + step <= n && static_cast<uint64_t>(tree[pos + step]) <= k) {
          pos += step;
          k -= static_cast<uint64_t>(tree[pos]);
        }
      }
      // pos is the count of positions before the chosen one; the chosen index is pos (0-based).
      removed[pos] = true;
      total -= pods[order[pos]].request.TotalGpu().value();
      for (size_t i = pos + 1; i <= n; i += i & (~i + 1)) tree[i] -= 1;
      --left;
    }
    std::vector<uint32_t> kept;
    kept.reserve(left);
    for (size_t i = 0; i < n; ++i) {
      if (!removed[i]) kept.push_back(order[i]);
    }
    order = std::move(kept);
  }
  return order;
}

StatusOr<ReplayResult> RunReplay(const ReplayInput& input, const std::string& policy_name,
                                 const ReplayOptions& options, const Clock& clock,
                                 const std::function<void(int64_t, int64_t)>& progress) {
  if (input.nodes == nullptr || input.nodes->empty()) return InvalidArgumentError("replay: no nodes");
  if (input.pods == nullptr || input.pods->empty()) return InvalidArgumentError("replay: no pods");
  const Clock::TimePoint start = clock.Now();

  TESSERA_ASSIGN_OR_RETURN(ClusterSnapshot cluster, ClusterSnapshot::Create(*input.nodes));
  const int64_t capacity = cluster.total_gpu_capacity().value();
  if (capacity <= 0) return InvalidArgumentError("replay: the cluster has no GPUs");

  std::vector<TaskRequest> requests;
  requests.reserve(input.pods->size());
  for (const PodRecord& p : *input.pods) requests.push_back(p.request);
  const TargetWorkload workload = TargetWorkload::FromTasks(requests, options.workload_coverage);
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<placement::PlacementPolicy> policy,
                           placement::MakePolicy(policy_name, {.target_workload = &workload}));

  const Rng root(options.seed);
  Rng order_rng = root.Fork(1);
  Rng rank_rng = root.Fork(2);
  Rng policy_rng = root.Fork(3);
  const std::vector<uint32_t> order = BuildArrivalOrder(*input.pods, capacity, options.tune_ratio, order_rng);
  if (order.size() >= kMaxArrivals) {
    return InvalidArgumentError("replay: tuning the pod list to " + std::to_string(options.tune_ratio) +
                                "x capacity needs more than 5,000,000 tasks");
  }

  // Random but fixed tie-break rank per node.
  std::vector<uint32_t> permutation(cluster.node_count());
  std::iota(permutation.begin(), permutation.end(), 0u);
  rank_rng.Shuffle(permutation);
  std::vector<uint32_t> rank(cluster.node_count());
  for (uint32_t pos = 0; pos < permutation.size(); ++pos) rank[permutation[pos]] = pos;

  placement::PlacementContext ctx{.rng = &policy_rng, .node_rank = rank};
  FragmentationMemo memo(&workload);
  std::vector<double> node_frag(cluster.node_count());
  double total_frag = 0.0;
  for (uint32_t i = 0; i < cluster.node_count(); ++i) {
    node_frag[i] = memo.OfNode(cluster, NodeIndex{i});
    total_frag += node_frag[i];
  }

  ReplayResult result;
  result.policy = policy_name;
  result.seed = options.seed;
  result.pods_name = input.pods_name;
  result.gpu_capacity_milli = capacity;
  result.target_workload_types = workload.types().size();

  BucketSums sums;
  int64_t arrived = 0;
  const int64_t total_tasks = static_cast<int64_t>(order.size());
  for (int64_t k = 0; k < total_tasks; ++k) {
    const TaskRequest& task = (*input.pods)[order[static_cast<size_t>(k)]].request;
    placement::PlacementDecision d = policy->Place(cluster, task, ctx);
    if (d.placement) {
      if (Status s = cluster.Apply(task, *d.placement); !s.ok()) {
        return InternalError("policy '" + policy_name + "' chose an invalid placement: " + s.message());
      }
      const uint32_t n = d.placement->node.value();
      const double f = memo.OfNode(cluster, d.placement->node);
      total_frag += f - node_frag[n];
      node_frag[n] = f;
      ++result.tasks_placed;
    } else {
      ++result.tasks_failed;
      result.tasks_failed_gpu += task.num_gpu > 0;
    }
    arrived += task.TotalGpu().value();
    const double cap = static_cast<double>(capacity);
    const double arrived_pct = static_cast<double>(arrived) / cap * 100.0;
    const double bucket = RoundHalfEven(arrived_pct);
    const double allocated = static_cast<double>(cluster.allocated_gpu().value());
    const double free_milli = cap - allocated;
    // F(M) <= free GPU milli holds exactly (a node's fragment never exceeds its free GPU);
    // clamp away the rounding drift of the running sum.
    total_frag = std::clamp(total_frag, 0.0, free_milli);
    const double rate = free_milli > 0 ? total_frag / free_milli * 100.0 : 0.0;
    sums.Add(static_cast<size_t>(std::max(0.0, bucket)), allocated / cap * 100.0, total_frag / cap * 100.0,
             rate);
    if (progress && (k + 1) % 256 == 0) progress(k + 1, total_tasks);
  }
  if (progress) progress(total_tasks, total_tasks);

  result.tasks_arrived = total_tasks;
  result.arrived_gpu_milli = arrived;
  result.allocated_gpu_milli = cluster.allocated_gpu().value();
  result.buckets = Finish(sums);
  result.wall_seconds = SecondsBetween(start, clock.Now());
  return result;
}

}  // namespace tessera::sim
