#include "tessera/sim/sweep.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

namespace tessera::sim {

double Median(std::vector<double> v) {
  std::erase_if(v, [](double x) { return std::isnan(x); });
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

StatusOr<std::vector<ReplayResult>> RunSweep(const SweepSpec& spec, const Clock& clock,
                                             const SweepProgress& progress) {
  struct Job {
    size_t input;
    size_t policy;
    uint64_t seed;
  };
  std::vector<Job> jobs;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    for (size_t p = 0; p < spec.policies.size(); ++p) {
      for (uint64_t s : spec.seeds) jobs.push_back({i, p, s});
    }
  }
  if (jobs.empty()) return InvalidArgumentError("sweep: nothing to run (no inputs, policies or seeds)");

  std::vector<StatusOr<ReplayResult>> results(jobs.size(), InternalError("not run"));
  std::vector<double> fraction(jobs.size(), 0.0);
  std::mutex mu;
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  int finished = 0;
  const int total = static_cast<int>(jobs.size());

  auto report = [&](size_t j, double f, bool done) {
    if (!progress) return;
    std::lock_guard<std::mutex> lock(mu);
    fraction[j] = f;
    if (done) ++finished;
    double sum = 0;
    for (double x : fraction) sum += x;
    progress(sum / total, finished, total);
  };

  auto worker = [&] {
    while (!failed.load()) {
      const size_t j = next.fetch_add(1);
      if (j >= jobs.size()) return;
      const Job& job = jobs[j];
      ReplayOptions opts = spec.options;
      opts.seed = job.seed;
      results[j] = RunReplay(spec.inputs[job.input], spec.policies[job.policy], opts, clock,
                             [&](int64_t done, int64_t all) {
                               report(j, all > 0 ? static_cast<double>(done) / all : 1.0, false);
                             });
      if (!results[j].ok()) failed.store(true);
      report(j, 1.0, true);
    }
  };
  const int threads = std::clamp(spec.jobs, 1, std::max(1, total));
  if (threads == 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (auto& th : pool) th.join();
  }
  std::vector<ReplayResult> out;
  out.reserve(results.size());
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(std::move(r).value());
  }
  return out;
}

std::vector<RunSummary> Summarize(const std::vector<ReplayResult>& runs) {
  std::vector<RunSummary> out;
  std::map<std::pair<std::string, std::string>, std::vector<const ReplayResult*>> groups;
  for (const ReplayResult& r : runs) {
    auto key = std::make_pair(r.pods_name, r.policy);
    if (groups.find(key) == groups.end()) {
      RunSummary s;
      s.pods_name = r.pods_name;
      s.policy = r.policy;
      out.push_back(s);
    }
    groups[key].push_back(&r);
  }
  for (RunSummary& s : out) {
    const auto& g = groups[{s.pods_name, s.policy}];
    s.runs = static_cast<int>(g.size());
    std::vector<double> u100, u130, rate, amount, wall;
    size_t buckets = 0;
    for (const ReplayResult* r : g) {
      u100.push_back(r->UnallocatedPctAt(100));
      u130.push_back(r->UnallocatedPctAt(130));
      rate.push_back(r->FragRatePctAt(100));
      amount.push_back(r->FragAmountPctAt(100));
      wall.push_back(r->wall_seconds);
      buckets = std::max(buckets, r->buckets.alloc_pct.size());
    }
    s.unallocated_pct_at_100 = Median(u100);
    std::vector<double> clean = u100;
    std::erase_if(clean, [](double x) { return std::isnan(x); });
    s.unallocated_pct_at_100_min = clean.empty() ? NAN : *std::min_element(clean.begin(), clean.end());
    s.unallocated_pct_at_100_max = clean.empty() ? NAN : *std::max_element(clean.begin(), clean.end());
    s.unallocated_pct_at_130 = Median(u130);
    s.frag_rate_pct_at_100 = Median(rate);
    s.frag_amount_pct_at_100 = Median(amount);
    s.wall_seconds = Median(wall);
    s.alloc_pct_curve.resize(buckets);
    s.frag_rate_pct_curve.resize(buckets);
    for (size_t b = 0; b < buckets; ++b) {
      std::vector<double> a, f;
      for (const ReplayResult* r : g) {
        a.push_back(b < r->buckets.alloc_pct.size() ? r->buckets.alloc_pct[b] : NAN);
        f.push_back(b < r->buckets.frag_rate_pct.size() ? r->buckets.frag_rate_pct[b] : NAN);
      }
      s.alloc_pct_curve[b] = Median(a);
      s.frag_rate_pct_curve[b] = Median(f);
    }
  }
  return out;
}

}  // namespace tessera::sim
