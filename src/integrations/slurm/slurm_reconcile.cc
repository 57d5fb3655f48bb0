#include "tessera/integrations/slurm_reconcile.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <map>

namespace tessera::integrations::slurm {
namespace {

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

bool ParseInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && *out >= 0;
}

// Job ids sort as numbers where they are numbers ("9" before "10").
bool JobBefore(const std::string& a, const std::string& b) {
  if (a.size() != b.size() && std::all_of(a.begin(), a.end(), ::isdigit) && std::all_of(b.begin(), b.end(), ::isdigit)) {
    return a.size() < b.size();
  }
  return a < b;
}

}  // namespace

StatusOr<std::vector<SacctJob>> ParseSacct(std::string_view text, std::string_view source, int shards_per_gpu) {
  if (shards_per_gpu < 1) return InvalidArgumentError("shards per GPU must be >= 1");
  std::vector<SacctJob> jobs;
  std::map<std::string, int> line_of;
  std::string problems;
  int problem_count = 0;
  auto problem = [&](int line, const std::string& field, const std::string& what) {
    if (++problem_count > 20) return;  // the first 20 say enough
    problems += (problems.empty() ? "" : "\n") + std::string(source) + ":" + std::to_string(line) + ": " + field +
                ": " + what;
  };
  int line_no = 0;
  for (std::string_view line : Split(text, '\n')) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const std::vector<std::string_view> f = Split(line, '|');
    if (f.size() < 4) {
      problem(line_no, "line",
              "expected 4 '|'-separated fields JobIDRaw|Account|ElapsedRaw|AllocTRES (sacct -P -n "
              "--format=JobIDRaw,Account,ElapsedRaw,AllocTRES), got " + std::to_string(f.size()));
      continue;
    }
    SacctJob job;
    job.job_id = std::string(f[0]);
    job.account = std::string(f[1]);
    if (job.job_id.empty()) problem(line_no, "JobIDRaw", "empty");
    if (!ParseInt(f[2], &job.elapsed_s)) problem(line_no, "ElapsedRaw", "'" + std::string(f[2]) + "' is not a number of seconds");
    double gpus = 0, shards = 0;
    bool tres_ok = true;
    if (!f[3].empty()) {
      for (std::string_view item : Split(f[3], ',')) {
        const size_t eq = item.find('=');
        if (eq == std::string_view::npos) {
          problem(line_no, "AllocTRES", "'" + std::string(item) + "' is not name=count");
          tres_ok = false;
          continue;
        }
        const std::string_view name = item.substr(0, eq);
        if (name != "gres/gpu" && name != "gres/shard") continue;  // typed gres/gpu:<type> is within gres/gpu
        int64_t count = 0;
        if (!ParseInt(item.substr(eq + 1), &count)) {
          problem(line_no, "AllocTRES", std::string(name) + ": '" + std::string(item.substr(eq + 1)) + "' is not a count");
          tres_ok = false;
          continue;
        }
        (name == "gres/gpu" ? gpus : shards) += static_cast<double>(count);
      }
    }
    job.gpus = gpus + shards / shards_per_gpu;
    if (auto [it, fresh] = line_of.emplace(job.job_id, line_no); !fresh && !job.job_id.empty()) {
      problem(line_no, "JobIDRaw", "job " + job.job_id + " also on line " + std::to_string(it->second) +
                                       " (list allocations only: sacct -X)");
      continue;
    }
    if (tres_ok) jobs.push_back(std::move(job));
  }
  if (problem_count > 0) {
    if (problem_count > 20) problems += "\n(" + std::to_string(problem_count - 20) + " more problems)";
    return InvalidArgumentError(problems);
  }
  return jobs;
}

Reconciliation Reconcile(const std::vector<SacctJob>& jobs, const std::vector<MeteredSample>& samples) {
  struct Metered {
    std::string account;
    int64_t allocated = 0, used = 0;
  };
  std::map<std::string, Metered> metered;  // by job id
  constexpr std::string_view kPrefix = "slurm-job-";
  for (const MeteredSample& s : samples) {
    if (s.workload.rfind(kPrefix, 0) != 0) continue;
    Metered& m = metered[s.workload.substr(kPrefix.size())];
    if (m.account.empty()) m.account = s.tenant;
    m.allocated += s.gpu_milli_s_allocated;
    m.used += s.gpu_milli_s_used;
  }
  Reconciliation r;
  std::map<std::string, ReconcileRow> by_account;
  auto add = [&](ReconcileRow row) {
    ReconcileRow& a = by_account[row.account];
    a.account = row.account;
    a.slurm_gpu_s += row.slurm_gpu_s;
    a.metered_gpu_s += row.metered_gpu_s;
    a.used_gpu_s += row.used_gpu_s;
    r.jobs.push_back(std::move(row));
  };
  for (const SacctJob& j : jobs) {
    auto m = metered.find(j.job_id);
    if (j.gpus <= 0 && m == metered.end()) continue;  // a CPU job
    ReconcileRow row{.job_id = j.job_id, .account = j.account, .slurm_gpu_s = j.gpus * static_cast<double>(j.elapsed_s)};
    if (m == metered.end()) {
      row.note = "not metered";
      ++r.not_metered;
    } else {
      row.metered_gpu_s = static_cast<double>(m->second.allocated) / 1000.0;
      row.used_gpu_s = static_cast<double>(m->second.used) / 1000.0;
      if (j.gpus <= 0) {
        row.note = "metered, no GPU in sacct";
        ++r.not_in_sacct;
      } else if (m->second.account != j.account) {
        row.note = "metered as account " + m->second.account;
      }
      metered.erase(m);
    }
    add(std::move(row));
  }
  for (const auto& [id, m] : metered) {
    add({.job_id = id,
         .account = m.account,
         .metered_gpu_s = static_cast<double>(m.allocated) / 1000.0,
         .used_gpu_s = static_cast<double>(m.used) / 1000.0,
         .note = "metered, not in sacct"});
    ++r.not_in_sacct;
  }
  std::sort(r.jobs.begin(), r.jobs.end(), [](const ReconcileRow& a, const ReconcileRow& b) { return JobBefore(a.job_id, b.job_id); });
  for (auto& [name, row] : by_account) r.accounts.push_back(std::move(row));
  return r;
}

}  // namespace tessera::integrations::slurm
