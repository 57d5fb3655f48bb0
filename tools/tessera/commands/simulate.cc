// `tessera simulate`: replay a pod list through placement policies (the FGD artifact's protocol)
// and report how much GPU capacity each policy leaves unallocated.
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <climits>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "tessera/core/gpu_model.h"
#include "tessera/placement/policy.h"
#include "tessera/sim/artifact_reference.h"
#include "tessera/sim/report.h"
#include "tessera/sim/sweep.h"
#include "tessera/sim/trace.h"
#include "tools/tessera/commands/scenario.h"
#include "tools/tessera/commands/simulate_mig.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

// The wall clock lives at the edge; libraries get it injected.
class SteadyClock final : public Clock {
 public:
  TimePoint Now() const override {
    return TimePoint(std::chrono::duration_cast<Duration>(
        std::chrono::steady_clock::now().time_since_epoch()));
  }
};

const char* const kArtifactLists[] = {
    "default",    "cpu050",     "cpu100",     "cpu200",     "cpu250",     "gpushare40",
    "gpushare60", "gpushare80", "gpushare100", "gpuspec10", "gpuspec20",  "gpuspec25",
    "gpuspec33",  "multigpu20", "multigpu30", "multigpu40", "multigpu50"};


struct SimulateFlags {
  std::string nodes;
  std::vector<std::string> pods;
  bool all_lists = false;
  std::string policies;
  std::string seeds = "42-51";
  int jobs = 0;
  double tune = 1.3;
  std::string json_out;
  std::string html_out = "tessera-report.html";
  std::string reference;
  bool no_reference = false;
  bool check = false;
  bool quiet = false;
  bool progress = false;
  MigModeFlags mig;  // --mig-model set: the MIG mode (simulate_mig.cc)
  ScenarioFlags scenario;  // set: the multi-tenant scenario (scenario.cc)
};

Status BadFlag(const std::string& m) { return InvalidArgumentError(m); }

StatusOr<std::vector<std::string>> ParsePolicies(const std::string& text) {
  if (text.empty()) return placement::PolicyNames();
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (part == "all") {
      for (const auto& p : placement::PolicyNames()) out.push_back(p);
      continue;
    }
    if (part == "artifact") {
      for (const auto& p : placement::ArtifactPolicyNames()) out.push_back(p);
      continue;
    }
    bool known = false;
    for (const auto& p : placement::PolicyNames()) known |= p == part;
    if (!known) {
      std::string names;
      for (const auto& p : placement::PolicyNames()) names += (names.empty() ? "" : ", ") + p;
      return BadFlag("--policies: unknown policy '" + part + "' (known: " + names + ", or all, artifact)");
    }
    out.push_back(part);
  }
  if (out.empty()) return BadFlag("--policies: no policy given");
  return out;
}

// A one-line progress bar on stderr, shown only once the run has taken more than a second.
class ProgressBar {
 public:
  ProgressBar(bool enabled, const Clock& clock) : enabled_(enabled), clock_(clock), start_(clock.Now()) {}
  void Update(double fraction, int done, int total) {
    if (!enabled_) return;
    const auto now = clock_.Now();
    if (SecondsBetween(start_, now) < 1.0) return;
    if (SecondsBetween(last_, now) < 0.1 && done < total) return;
    last_ = now;
    const int width = 40;
    const int filled = static_cast<int>(fraction * width);
    std::string bar(static_cast<size_t>(filled), '#');
    bar += std::string(static_cast<size_t>(width - filled), '.');
    const double elapsed = SecondsBetween(start_, now);
    const double eta = fraction > 0.01 ? elapsed * (1 - fraction) / fraction : 0;
    std::fprintf(stderr, "\r[%s] %3.0f%%  %d/%d runs  %.0fs elapsed, ~%.0fs left ", bar.c_str(),
                 fraction * 100, done, total, elapsed, eta);
    std::fflush(stderr);
    shown_ = true;
  }
  void Finish() {
    if (shown_) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_;
  const Clock& clock_;
  Clock::TimePoint start_;
  Clock::TimePoint last_{};
  bool shown_ = false;
};

Status WriteFile(const std::string& path, const std::string& text) {
  std::error_code ec;
  const fs::path p(path);
  if (p.has_parent_path()) fs::create_directories(p.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return UnavailableError("cannot write '" + path + "'");
  out << text;
  out.close();
  if (!out) return UnavailableError("error writing '" + path + "'");
  return Status::Ok();
}

int RunSimulate(const SimulateFlags& f, const std::string& command_line) {
  if (f.mig.Given()) {
    return RunMigMode(f.mig, {.pods = f.pods, .nodes = f.nodes, .policies = f.policies, .seeds = f.seeds,
                              .json_out = f.json_out, .all_lists = f.all_lists});
  }
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  const std::string data = DataDir();
  const std::string csv_dir = data + "/alibaba-gpu-2023/csv";
  auto fail = [](const Status& s, int code) {
    std::fprintf(stderr, "tessera simulate: %s\n", s.message().c_str());
    return code;
  };

  auto seeds = ParseSeeds(f.seeds);
  if (!seeds.ok()) return fail(seeds.status(), kExitBadInput);
  auto policies = ParsePolicies(f.policies);
  if (!policies.ok()) return fail(policies.status(), kExitBadInput);
  if (!(f.tune > 0 && f.tune <= 10)) return fail(BadFlag("--tune: must be in (0, 10]"), kExitBadInput);
  if (f.jobs < 0 || f.jobs > 256) return fail(BadFlag("--jobs: must be 0 (auto) .. 256"), kExitBadInput);

  const std::string nodes_path = f.nodes.empty() ? csv_dir + "/openb_node_list_gpu_node.csv" : f.nodes;
  std::vector<std::string> pods_paths = f.pods;
  if (f.all_lists) {
    for (const char* l : kArtifactLists) pods_paths.push_back(csv_dir + "/openb_pod_list_" + l + ".csv");
  }
  if (pods_paths.empty()) pods_paths.push_back(csv_dir + "/openb_pod_list_default.csv");

  auto nodes = sim::ReadNodeList(nodes_path, catalog);
  if (!nodes.ok()) return fail(nodes.status(), kExitBadInput);
  std::vector<std::vector<sim::PodRecord>> pod_lists;
  pod_lists.reserve(pods_paths.size());
  for (const std::string& p : pods_paths) {
    auto pods = sim::ReadPodList(p, catalog);
    if (!pods.ok()) return fail(pods.status(), kExitBadInput);
    pod_lists.push_back(std::move(pods).value());
  }

  std::optional<sim::ArtifactReference> reference;
  std::string ref_path = f.reference;
  if (ref_path.empty() && !f.no_reference) {
    const std::string bundled = data + "/alibaba-gpu-2023/expected/analysis_allo_discrete.csv";
    if (fs::exists(bundled)) ref_path = bundled;
  }
  if (!ref_path.empty() && !f.no_reference) {
    auto ref = sim::LoadArtifactReference(ref_path);
    if (!ref.ok()) return fail(ref.status(), kExitBadInput);
    reference = std::move(ref).value();
  }

  sim::SweepSpec spec;
  for (size_t i = 0; i < pods_paths.size(); ++i) {
    spec.inputs.push_back({&*nodes, &pod_lists[i], sim::FileStem(pods_paths[i])});
  }
  spec.policies = *policies;
  spec.seeds = *seeds;
  spec.options.tune_ratio = f.tune;
  spec.jobs = f.jobs > 0 ? f.jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  SteadyClock clock;
  const bool show_progress = !f.quiet && (f.progress || isatty(STDERR_FILENO));
  ProgressBar bar(show_progress, clock);
  const int total_runs = static_cast<int>(spec.inputs.size() * spec.policies.size() * spec.seeds.size());
  if (!f.quiet) {
    std::fprintf(stderr, "tessera simulate: %zu pod list(s) x %zu policies x %zu seeds = %d runs on %d thread(s)\n",
                 spec.inputs.size(), spec.policies.size(), spec.seeds.size(), total_runs, spec.jobs);
  }
  const auto t0 = clock.Now();
  auto runs = sim::RunSweep(spec, clock, [&](double fr, int done, int total) { bar.Update(fr, done, total); });
  bar.Finish();
  if (!runs.ok()) return fail(runs.status(), kExitBadInput);
  const double elapsed = SecondsBetween(t0, clock.Now());

  const std::vector<sim::RunSummary> summaries = sim::Summarize(*runs);
  const sim::ArtifactReference* ref = reference ? &*reference : nullptr;
  std::printf("%s", sim::RenderSummaryTable(summaries, ref).c_str());
  if (const std::string h = sim::RenderHeadline(summaries, placement::DefaultPolicyName()); !h.empty()) {
    std::printf("\nDefault policy: %s", h.c_str());
  }

  if (!f.json_out.empty()) {
    if (Status s = WriteFile(f.json_out, sim::RenderJson(*runs, summaries, ref)); !s.ok()) {
      return fail(s, kExitFailure);
    }
  }
  sim::ReportInputs inputs;
  inputs.command = command_line;
  inputs.nodes_path = nodes_path;
  inputs.pods_paths = pods_paths;
  inputs.seeds = f.seeds;
  inputs.tune_ratio = f.tune;
  inputs.node_count = nodes->size();
  for (const auto& n : *nodes) inputs.gpu_count += n.gpu_count;
  if (!f.html_out.empty()) {
    if (Status s = WriteFile(f.html_out, sim::RenderHtmlReport(summaries, inputs, ref)); !s.ok()) {
      return fail(s, kExitFailure);
    }
  }
  std::printf("\n%d runs in %.1f s.", total_runs, elapsed);
  if (!f.html_out.empty()) std::printf(" HTML report: %s", fs::absolute(f.html_out).c_str());
  if (!f.json_out.empty()) std::printf(" JSON: %s", f.json_out.c_str());
  std::printf("\n");

  if (f.check && ref != nullptr) {
    int misses = 0, compared = 0;
    for (const auto& s : summaries) {
      const sim::ArtifactEntry* e = ref->Find(s.pods_name, s.policy);
      if (e == nullptr) continue;
      ++compared;
      if (!sim::WithinToleranceAt100(*e, s.unallocated_pct_at_100)) ++misses;
    }
    std::printf("reproduction check: %d of %d (pod list, policy) medians within tolerance\n", compared - misses,
                compared);
    if (misses > 0 || compared == 0) return kExitFailure;
  }
  return kExitOk;
}

}  // namespace

void RegisterSimulate(CLI::App& app, const std::string* command_line, int* exit_code) {
  auto flags = std::make_shared<SimulateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "Replay a pod list through placement policies and report stranded GPU capacity");
  cmd->footer(
      "\nFollows the FGD (ATC'23) artifact's protocol: tasks arrive in random order until the GPU\n"
      "request reaches --tune x the cluster's GPU capacity, each is placed once or dropped, and\n"
      "the GPU allocation ratio is recorded per percent of arrived request. With no options it\n"
      "runs every policy on the bundled Alibaba default pod list for seeds 42-51, prints a table\n"
      "(with the artifact's published medians for comparison) and writes an HTML report.\n"
      "The default placement policy is tessera; exit codes: 0 ok, 1 --check failed, 2 bad input.\n\n"
      "Examples:\n"
      "  tessera simulate\n"
      "  tessera simulate --pods my_pods.csv --policies fgd,bestfit --seeds 42-51 --json out.json\n"
      "  tessera simulate --all-lists --policies artifact --check   # reproduce the paper\n"
      "  tessera simulate --mig-model H100-80GB --gpus 100 --seeds 42-51   # MIG: engine vs static\n"
      "  tessera simulate --scenario dedicated-vs-shared --json out.json    # multi-tenancy\n"
      "With --scenario, the week-long multi-tenant simulation runs instead (docs/multitenancy.md);\n"
      "its --check exits 1 unless the multi-tenancy issue's outcome targets hold.");
  cmd->add_option("--nodes", flags->nodes, "Node list CSV (sn,cpu_milli,memory_mib,gpu,model); default: the bundled 1213-node Alibaba cluster");
  cmd->add_option("--pods", flags->pods, "Pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec]); repeatable; default: the bundled default list")->delimiter(',');
  cmd->add_flag("--all-lists", flags->all_lists, "Replay all 17 bundled pod lists of the FGD paper");
  cmd->add_option("--policies", flags->policies, "Comma-separated policies: random,dotproduct,gpuclustering,gpupacking,bestfit,fgd,firstfit,nextfit,worstfit, or 'all' / 'artifact' (default: all)");
  cmd->add_option("--seeds", flags->seeds, "Seeds, e.g. 42-51 or 42,43 (default: 42-51, the artifact's)");
  cmd->add_option("--jobs,-j", flags->jobs, "Runs in parallel (default: one per CPU core)");
  cmd->add_option("--tune", flags->tune, "Inflate the GPU request to this multiple of capacity (default 1.3)");
  cmd->add_option("--json", flags->json_out, "Write per-run and summary results as JSON to this file");
  cmd->add_option("--html", flags->html_out, "Write the HTML report here (default: tessera-report.html; empty to skip)");
  cmd->add_option("--reference", flags->reference, "Artifact results CSV to compare with (default: the bundled analysis_allo_discrete.csv)");
  cmd->add_flag("--no-reference", flags->no_reference, "Do not compare with the artifact's results");
  cmd->add_flag("--check", flags->check, "Exit 1 unless every (pod list, policy) median is within the reproduction tolerance of the artifact's");
  cmd->add_flag("--progress", flags->progress, "Show the progress bar even when stderr is not a terminal");
  cmd->add_flag("--quiet,-q", flags->quiet, "No progress output on stderr");
  AddMigModeFlags(cmd, &flags->mig);
  AddScenarioFlags(cmd, &flags->scenario);
  cmd->callback([flags, exit_code, command_line] {
    *exit_code = !flags->scenario.name.empty()
                     ? RunScenario(flags->scenario, flags->json_out,
                                   flags->html_out == "tessera-report.html" ? "" : flags->html_out,
                                   flags->check, flags->quiet)
                     : RunSimulate(*flags, *command_line);
  });
}

}  // namespace tessera::cli
