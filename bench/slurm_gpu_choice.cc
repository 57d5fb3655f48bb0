// Which GPU of a node a shard job should take: Slurm's own rule against the placement engine's
// fragmentation-aware one, on one node under a mixed load (docs/slurm.md "Which GPU").
//
// Slurm gives a `--gres=shard:N` job the N shards of ONE GPU (control-plane.md §4.5) and picks
// that GPU itself: 22.05 (Debian 12) takes the lowest-index GPU with room (first fit; the Slurm
// suite's check 2c shows it on a real slurmctld), and from 23.02 `SelectTypeParameters=
// LL_SHARED_GRES` takes the least loaded one (worst fit). tessera's rule (placement/gpu_choice.h
// kBest) takes the GPU with the least room that still fits, which keeps room together for the
// larger requests; the fourth row is the placement engine's own policy ("tessera", the
// fragmentation gradient, given the job mix as its expected workload), which on this mix chose as
// best fit did in every decision compared. Whole-GPU jobs take the lowest fully free GPUs under
// every rule.
//
// The experiment: a loss system (a job that finds no room is counted and dropped, as `srun
// --immediate` would be), Poisson arrivals, exponential holding times of mean 1, the same job
// sequence for every rule. Reported per rule, median over the seeds:
//   blocked   the share of arrivals that found no room;
//   stranded  the share of arrivals that found no room although the node had as many free
//             shards as they asked for in total (blocked by fragmentation alone);
//   busy      the node's mean busy share (GPU time in use / GPU time).
//
// Worked example: 8 GPUs x 4 shards, GPU 0 with 2 shards taken, GPU 1 with 3, the rest free. A
// shard:1 job takes GPU 0 under first fit (the lowest index with room), GPU 1 under best fit (1
// free: the least room that fits) and GPU 2 under least loaded (4 free). Best fit leaves GPU 0
// two shards for a later shard:2 job and GPUs 2-7 whole for gpu:1 jobs; least loaded has broken
// a whole GPU. Which rule strands less over time is what the table measures.
//
// Usage: tessera_slurm_gpu_choice [JOBS [SEEDS]]  (defaults 200000 jobs, 5 seeds; ~5 s in all).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/core/rng.h"
#include "tessera/placement/cluster_snapshot.h"
#include "tessera/placement/fragmentation.h"
#include "tessera/placement/gpu_choice.h"
#include "tessera/placement/policy.h"

namespace {

using namespace tessera;
using namespace tessera::placement;

constexpr int kGpus = 8;

struct JobClass {
  const char* name;
  int shards;      // of the GPU's shards_per_gpu; 0 for whole GPUs
  int whole_gpus;  // whole-GPU jobs: how many GPUs
  double weight;   // share of arrivals
};

struct Job {
  double arrival;
  double duration;
  int cls;
};

struct Outcome {
  double blocked = 0, stranded = 0, busy = 0;
  std::vector<double> blocked_by_class;
};

double Exponential(Rng& rng, double mean) { return -mean * std::log1p(-rng.UniformDouble()); }

std::vector<Job> MakeJobs(uint64_t seed, int count, const std::vector<JobClass>& mix, double rate) {
  Rng rng(seed);
  double total = 0;
  for (const JobClass& c : mix) total += c.weight;
  std::vector<Job> jobs;
  jobs.reserve(static_cast<size_t>(count));
  double t = 0;
  for (int i = 0; i < count; ++i) {
    t += Exponential(rng, 1.0 / rate);
    double pick = rng.UniformDouble() * total;
    int cls = 0;
    while (cls + 1 < static_cast<int>(mix.size()) && pick >= mix[static_cast<size_t>(cls)].weight) {
      pick -= mix[static_cast<size_t>(cls)].weight;
      ++cls;
    }
    jobs.push_back({t, Exponential(rng, 1.0), cls});
  }
  return jobs;
}

TaskRequest RequestOf(const JobClass& c, int shards_per_gpu) {
  if (c.whole_gpus > 0) return {.num_gpu = c.whole_gpus, .gpu_milli = GpuMilli{kWholeGpu}};
  return {.num_gpu = 1, .gpu_milli = GpuMilli{1000 * c.shards / shards_per_gpu}};
}

// Where a job that fits goes on the node.
using Chooser = std::function<Placement(const ClusterSnapshot&, const TaskRequest&)>;

Outcome Run(const std::vector<Job>& jobs, const std::vector<JobClass>& mix, int shards_per_gpu,
            const Chooser& choose) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  StatusOr<ClusterSnapshot> made =
      ClusterSnapshot::Create({{"n", CpuMilli{1'000'000}, MiB{1 << 30}, kGpus, *catalog.Find("A100-40GB")}});
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    std::exit(1);
  }
  ClusterSnapshot& node = *made;
  const NodeIndex n{0};
  struct Running {
    double end;
    size_t job;
    Placement where;
    bool operator>(const Running& o) const { return end > o.end; }
  };
  std::priority_queue<Running, std::vector<Running>, std::greater<>> running;
  std::vector<long> arrivals(mix.size(), 0), blocked(mix.size(), 0);
  long stranded = 0, blocked_total = 0;
  double busy_area = 0, last = 0;  // GPU milli in use x time
  int64_t in_use = 0;
  auto advance = [&](double t) {
    busy_area += static_cast<double>(in_use) * (t - last);
    last = t;
  };
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = jobs[i];
    while (!running.empty() && running.top().end <= job.arrival) {
      const Running r = running.top();
      running.pop();
      advance(r.end);
      const TaskRequest req = RequestOf(mix[static_cast<size_t>(jobs[r.job].cls)], shards_per_gpu);
      (void)node.Undo(req, r.where);
      in_use -= req.TotalGpu().value();
    }
    advance(job.arrival);
    const size_t cls = static_cast<size_t>(job.cls);
    const TaskRequest req = RequestOf(mix[cls], shards_per_gpu);
    ++arrivals[cls];
    if (!node.Fits(n, req)) {
      ++blocked[cls];
      ++blocked_total;
      if (node.node_gpu_free(n) >= req.TotalGpu().value()) ++stranded;
      continue;
    }
    const Placement where = choose(node, req);
    if (Status s = node.Apply(req, where); !s.ok()) {
      std::fprintf(stderr, "apply: %s\n", s.ToString().c_str());
      std::exit(1);
    }
    in_use += req.TotalGpu().value();
    running.push({job.arrival + job.duration, i, where});
  }
  Outcome out;
  const double count = static_cast<double>(jobs.size());
  out.blocked = 100.0 * static_cast<double>(blocked_total) / count;
  out.stranded = 100.0 * static_cast<double>(stranded) / count;
  out.busy = 100.0 * busy_area / (last * kGpus * static_cast<double>(kWholeGpu.value()));
  for (size_t c = 0; c < mix.size(); ++c) {
    out.blocked_by_class.push_back(arrivals[c] ? 100.0 * static_cast<double>(blocked[c]) / static_cast<double>(arrivals[c]) : 0);
  }
  return out;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  const int job_count = argc > 1 ? std::atoi(argv[1]) : 200'000;
  const int seeds = argc > 2 ? std::atoi(argv[2]) : 5;
  if (job_count <= 0 || seeds <= 0) {
    std::fprintf(stderr, "usage: %s [JOBS (> 0, default 200000) [SEEDS (> 0, default 5)]]\n", argv[0]);
    return 2;
  }
  const int shards_per_gpu = 4;
  // Mixed load: most jobs are fractions (1-3 of 4 shards), some take whole GPUs.
  const std::vector<JobClass> mix = {{"shard:1", 1, 0, 0.35}, {"shard:2", 2, 0, 0.25}, {"shard:3", 3, 0, 0.15},
                                     {"gpu:1", 0, 1, 0.20},   {"gpu:2", 0, 2, 0.05}};
  double mean_gpu = 0, total_w = 0;
  for (const JobClass& c : mix) {
    mean_gpu += c.weight * (c.whole_gpus > 0 ? c.whole_gpus : static_cast<double>(c.shards) / shards_per_gpu);
    total_w += c.weight;
  }
  mean_gpu /= total_w;
  // The placement engine's own policy sees the job mix as its expected workload.
  std::vector<TaskType> types;
  for (const JobClass& c : mix) {
    const TaskRequest r = RequestOf(c, shards_per_gpu);
    types.push_back({.num_gpu = r.num_gpu, .gpu_milli = r.gpu_milli, .weight = c.weight});
  }
  const TargetWorkload workload = TargetWorkload::FromTypes(types);
  auto by_rule = [](SharingGpuRule rule) -> Chooser {
    return [rule](const ClusterSnapshot& node, const TaskRequest& req) {
      return ChoosePlacement(node, NodeIndex{0}, req, rule, nullptr);
    };
  };
  auto by_policy = [&workload]() -> Chooser {
    std::shared_ptr<PlacementPolicy> policy = *MakePolicy("tessera", {.target_workload = &workload});
    return [policy](const ClusterSnapshot& node, const TaskRequest& req) {
      Rng rng(1);
      PlacementContext ctx{.rng = &rng};
      return *policy->Place(node, req, ctx).placement;
    };
  };
  const struct {
    std::function<Chooser()> make;
    const char* name;
  } rules[] = {{[&] { return by_rule(SharingGpuRule::kFirst); }, "first fit (Slurm 22.05)"},
               {[&] { return by_rule(SharingGpuRule::kWorst); }, "least loaded (Slurm >= 23.02, LL_SHARED_GRES)"},
               {[&] { return by_rule(SharingGpuRule::kBest); }, "best fit (placement/gpu_choice.h)"},
               {by_policy, "fragmentation gradient (placement policy \"tessera\")"}};
  std::printf("# %d GPUs x %d shards; jobs: shard:1 35%%, shard:2 25%%, shard:3 15%%, gpu:1 20%%, gpu:2 5%%;\n",
              kGpus, shards_per_gpu);
  std::printf("# %d jobs per run, median of %d seeds; percentages of arrivals\n", job_count, seeds);
  std::printf("| offered load | rule | blocked | stranded | busy | blocked shard:1 / :2 / :3 / gpu:1 / gpu:2 |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (double load : {0.70, 0.85, 1.00}) {
    const double rate = load * kGpus / mean_gpu;  // arrivals per mean holding time
    for (const auto& r : rules) {
      std::vector<double> blocked, stranded, busy;
      std::vector<std::vector<double>> by_class(mix.size());
      for (int s = 0; s < seeds; ++s) {
        const std::vector<Job> jobs = MakeJobs(1000 + static_cast<uint64_t>(s), job_count, mix, rate);
        const Outcome o = Run(jobs, mix, shards_per_gpu, r.make());
        blocked.push_back(o.blocked);
        stranded.push_back(o.stranded);
        busy.push_back(o.busy);
        for (size_t c = 0; c < mix.size(); ++c) by_class[c].push_back(o.blocked_by_class[c]);
      }
      std::string classes;
      for (size_t c = 0; c < mix.size(); ++c) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.1f", c ? " / " : "", Median(by_class[c]));
        classes += buf;
      }
      std::printf("| %.0f %% | %s | %.2f %% | %.2f %% | %.1f %% | %s |\n", 100 * load, r.name, Median(blocked),
                  Median(stranded), Median(busy), classes.c_str());
    }
  }
  return 0;
}
