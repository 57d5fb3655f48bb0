// `tessera simulate`: replay a pod list through placement policies (the FGD artifact's protocol)
// and report how much GPU capacity each policy leaves unallocated.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
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
#include "tools/tessera/commands/progress.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

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

// Which flag belongs to which mode: the replay (default), the MIG mode (--mig-model) and the
// multi-tenant scenario (--scenario). A flag given in a mode it does not belong to is an error.
struct FlagModes {
  const char* flag;
  bool replay, mig, scenario;
  const char* why = "";  // appended to "not with ..."
};
constexpr FlagModes kSharedFlags[] = {
    {"--nodes", true, false, true, " (the cluster is --gpus GPUs of the model)"},
    {"--pods", true, true, true},
    {"--all-lists", true, false, false, " (give one --pods list)"},
    {"--policies", true, true, false, " (the scenario's placement policy is --placement)"},
    {"--seeds", true, true, false, " (the scenario's seed is --seed)"},
    {"--jobs", true, false, false},
    {"--tune", true, false, false},
    {"--json", true, true, true},
    {"--html", true, true, true},
    {"--reference", true, false, false},
    {"--no-reference", true, false, false},
    {"--check", true, false, true},
    {"--progress", true, false, false},
    {"--quiet", true, true, true},
};

// The first flag given that does not belong to the chosen mode, as an error.
Status CheckFlagModes(const CLI::App& cmd, bool mig, bool scenario) {
  auto given = [&](const char* flag) { return cmd.get_option(flag)->count() > 0; };
  const char* mode = scenario ? "--scenario" : "--mig-model";
  for (const FlagModes& f : kSharedFlags) {
    const bool ok = scenario ? f.scenario : mig ? f.mig : f.replay;
    if (!ok && given(f.flag)) return BadFlag(std::string(f.flag) + ": not with " + mode + f.why);
  }
  for (const char* flag : kMigOnlyFlags) {
    if (given(flag) && scenario) return BadFlag(std::string(flag) + ": not with --scenario");
    if (given(flag) && !mig) return BadFlag(std::string(flag) + ": only with --mig-model");
  }
  for (const char* flag : kScenarioOnlyFlags) {
    if (given(flag) && !scenario) return BadFlag(std::string(flag) + ": only with --scenario");
  }
  return Status::Ok();
}

int RunSimulate(const SimulateFlags& f, const std::string& command_line) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  const std::string data = DataDir();
  const std::string csv_dir = data + "/alibaba-gpu-2023/csv";
  auto fail = [](const Status& s, int code) { return Fail("simulate", s, code); };

  auto seeds = ParseSeeds(f.seeds);
  if (!seeds.ok()) return fail(seeds.status(), kExitBadInput);
  auto policies = ParsePolicies(f.policies.empty() ? "all" : f.policies);
  if (!policies.ok()) return fail(policies.status(), kExitBadInput);
  if (!(f.tune > 0 && f.tune <= 10)) return fail(BadFlag("--tune: must be in (0, 10]"), kExitBadInput);
  if (f.jobs < 0 || f.jobs > 256) return fail(BadFlag("--jobs: must be 0 (auto) .. 256"), kExitBadInput);

  // The artifact's results are for its own cluster: comparing a run on another one is meaningless.
  if (f.check && !f.nodes.empty()) {
    return fail(BadFlag("--check: the paper's results are for the bundled cluster; not with --nodes"), kExitBadInput);
  }
  if (f.check && f.no_reference) return fail(BadFlag("--check: needs the paper's results; not with --no-reference"), kExitBadInput);
  const std::string nodes_path = f.nodes.empty() ? csv_dir + "/openb_node_list_gpu_node.csv" : f.nodes;
  std::vector<std::string> pods_paths = f.pods;
  for (size_t i = 0; i < pods_paths.size(); ++i) {
    if (std::find(pods_paths.begin(), pods_paths.begin() + static_cast<std::ptrdiff_t>(i), pods_paths[i]) !=
        pods_paths.begin() + static_cast<std::ptrdiff_t>(i)) {
      return fail(BadFlag("--pods: '" + pods_paths[i] + "' given twice"), kExitBadInput);
    }
  }
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
  const std::vector<std::string> names = sim::PodListNames(pods_paths);  // one row per list
  for (size_t i = 0; i < pods_paths.size(); ++i) spec.inputs.push_back({&*nodes, &pod_lists[i], names[i]});
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
  const bool text = f.json_out != "-";  // `--json -`: stdout is the JSON document only
  if (text) std::printf("%s", sim::RenderSummaryTable(summaries, ref).c_str());
  if (const std::string h = sim::RenderHeadline(summaries, placement::DefaultPolicyName()); text && !h.empty()) {
    std::printf("\nDefault policy: %s", h.c_str());
  }
  std::fflush(stdout);
  if (!f.json_out.empty()) {
    if (Status s = WriteOutput(f.json_out, sim::RenderJson(*runs, summaries, ref)); !s.ok()) {
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
    if (Status s = WriteOutput(f.html_out, sim::RenderHtmlReport(summaries, inputs, ref)); !s.ok()) {
      return fail(s, kExitFailure);
    }
  }
  if (text) {
    std::printf("\n%d runs in %.1f s.", total_runs, elapsed);
    if (!f.html_out.empty()) std::printf(" HTML report: %s", fs::absolute(f.html_out).c_str());
    if (!f.json_out.empty()) std::printf(" JSON: %s", f.json_out.c_str());
    std::printf("\n");
  }

  if (f.check && ref != nullptr) {
    int misses = 0, compared = 0;
    for (const auto& s : summaries) {
      const sim::ArtifactEntry* e = ref->Find(s.pods_name, s.policy);
      if (e == nullptr) continue;
      ++compared;
      if (!sim::WithinToleranceAt100(*e, s.unallocated_pct_at_100)) ++misses;
    }
    std::fprintf(text ? stdout : stderr, "reproduction check: %d of %d (pod list, policy) medians within tolerance\n",
                 compared - misses, compared);
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
      "its --check exits 1 unless the multi-tenancy issue's outcome targets hold. A flag of another\n"
      "mode (e.g. --policies with --scenario, --quotas without it) is an error. --json - writes the\n"
      "JSON to stdout instead of the table.");
  cmd->add_option("--nodes", flags->nodes, "Node list CSV (sn,cpu_milli,memory_mib,gpu,model); default: the bundled 1213-node Alibaba cluster");
  cmd->add_option("--pods", flags->pods, "Pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec]); repeatable; default: the bundled default list")->delimiter(',');
  cmd->add_flag("--all-lists", flags->all_lists, "Replay all 17 bundled pod lists of the FGD paper");
  cmd->add_option("--policies", flags->policies, "Comma-separated policies: random,dotproduct,gpuclustering,gpupacking,bestfit,fgd,firstfit,nextfit,worstfit, or 'all' / 'artifact' (default: all)");
  cmd->add_option("--seeds", flags->seeds, "Seeds, e.g. 42-51 or 42,43 (default: 42-51, the artifact's)");
  cmd->add_option("--jobs,-j", flags->jobs, "Runs in parallel (default: one per CPU core)");
  cmd->add_option("--tune", flags->tune, "Inflate the GPU request to this multiple of capacity (default 1.3)");
  cmd->add_option("--json", flags->json_out, "Write the results as JSON to this file ('-': to stdout, instead of the table)");
  cmd->add_option("--html", flags->html_out, "Write the HTML report here (default: tessera-report.html; empty to skip; with --scenario or --mig-model only when given)");
  cmd->add_option("--reference", flags->reference, "Artifact results CSV to compare with (default: the bundled analysis_allo_discrete.csv)");
  cmd->add_flag("--no-reference", flags->no_reference, "Do not compare with the artifact's results");
  cmd->add_flag("--check", flags->check, "Exit 1 unless every (pod list, policy) median is within the reproduction tolerance of the artifact's");
  cmd->add_flag("--progress", flags->progress, "Show the progress bar even when stderr is not a terminal");
  cmd->add_flag("--quiet,-q", flags->quiet, "No progress output on stderr");
  AddMigModeFlags(cmd, &flags->mig);
  AddScenarioFlags(cmd, &flags->scenario);
  cmd->callback([cmd, flags, exit_code, command_line] {
    const bool scenario = cmd->get_option("--scenario")->count() > 0;
    const bool mig = !scenario && cmd->get_option("--mig-model")->count() > 0;
    if (Status s = CheckFlagModes(*cmd, mig, scenario); !s.ok()) {
      *exit_code = Fail("simulate", s, kExitBadInput);
    } else if (scenario) {
      const bool html = cmd->get_option("--html")->count() > 0;
      *exit_code = RunScenario(flags->scenario, {.nodes = flags->nodes, .pods = flags->pods, .json_out = flags->json_out,
                                                 .html_out = html ? flags->html_out : "", .check = flags->check,
                                                 .quiet = flags->quiet});
    } else if (mig) {
      const bool html = cmd->get_option("--html")->count() > 0;
      *exit_code = RunMigMode(flags->mig, {.pods = flags->pods, .policies = flags->policies, .seeds = flags->seeds,
                                           .json_out = flags->json_out, .html_out = html ? flags->html_out : ""});
    } else {
      *exit_code = RunSimulate(*flags, *command_line);
    }
  });
}

}  // namespace tessera::cli
