// tessera slurm config [--node-name NAME] [--shards-per-gpu N] [--device-prefix P]
//                      [--mig-minors FILE] [--fake-gpus MODEL:COUNT[:mig],...] [--nvml LIB]
// Prints the gres.conf and slurm.conf GPU lines of this node (docs/slurm.md).
// tessera slurm reconcile --usage LEDGER --sacct FILE [--shards-per-gpu N] [-o table|json]
// Compares what sacct says Slurm allocated with what tessera metered, per job and account.
// Parsing and printing only: the rules are in tessera/integrations/slurm_config.h and
// slurm_reconcile.h.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "tessera/core/gpu_model.h"
#include "tessera/enforce/nvml.h"
#include "tessera/core/input_bytes.h"
#include "tessera/integrations/slurm_config.h"
#include "tessera/integrations/slurm_reconcile.h"
#include "tessera/metering/ledger_file.h"
#include "tessera/node/inventory.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

constexpr char kCommand[] = "slurm config";
constexpr char kMigMinors[] = "/proc/driver/nvidia-caps/mig-minors";

struct SlurmConfigFlags {
  std::string node_name, device_prefix = "/dev/nvidia", mig_minors, fake_gpus, nvml = "libnvidia-ml.so.1";
  int shards_per_gpu = 0;
};

int RunSlurmConfig(SlurmConfigFlags f) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  if (f.node_name.empty()) {
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) f.node_name = std::string(host).substr(0, std::string(host).find('.'));
  }
  if (!f.fake_gpus.empty()) {
    StatusOr<std::string> config = node::FakeNvmlConfig(f.fake_gpus, catalog);
    if (!config.ok()) return Fail(kCommand, config.status(), kExitBadInput);
    StatusOr<std::string> library = FindFakeNvml();
    if (!library.ok()) return Fail(kCommand, library.status(), kExitBadInput);
    ::setenv("TESSERA_FAKE_NVML_CONFIG", config->c_str(), 1);
    f.nvml = *library;
  }
  std::string minors;
  const bool minors_given = !f.mig_minors.empty();
  if (std::ifstream in(minors_given ? f.mig_minors : kMigMinors); in) {
    std::ostringstream text;
    text << in.rdbuf();
    minors = text.str();
  } else if (minors_given) {
    return Fail(kCommand, "--mig-minors " + f.mig_minors + ": cannot be read", kExitBadInput);
  }
  enforce::DlopenNvml nvml({.library_path = f.nvml});
  if (Status st = nvml.Init(); !st.ok()) return Fail(kCommand, "NVML: " + std::string(st.message()), kExitFailure);
  StatusOr<std::vector<integrations::slurm::NodeGpuView>> gpus = integrations::slurm::ReadNodeGpus(nvml, catalog);
  (void)nvml.Shutdown();  // read-only use
  if (!gpus.ok()) return Fail(kCommand, gpus.status(), kExitFailure);
  StatusOr<integrations::slurm::SlurmConfigText> text = integrations::slurm::RenderSlurmConfig(
      *gpus, {.node_name = f.node_name, .shards_per_gpu = f.shards_per_gpu, .device_prefix = f.device_prefix,
              .mig_minors = minors});
  if (!text.ok()) return Fail(kCommand, text.status(), kExitBadInput);
  std::cout << text->gres_conf << "\n" << text->slurm_conf;
  return kExitOk;
}

struct ReconcileFlags {
  std::string usage, sacct, output = "table", json_path;
  int shards_per_gpu = 1;
};

StatusOr<std::string> ReadAll(const std::string& path, const std::string& flag) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
  } else {
    std::ifstream in(path, std::ios::binary);
    if (!in) return NotFoundError(flag + ": cannot read '" + path + "'");
    ss << in.rdbuf();
  }
  return DecompressIfGzip(ss.str(), path == "-" ? "<stdin>" : path);
}

std::string GpuSeconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", s);
  return buf;
}

std::string Diff(const integrations::slurm::ReconcileRow& r) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%+.1f", r.metered_gpu_s - r.slurm_gpu_s);
  return buf;
}

int RunSlurmReconcile(const ReconcileFlags& f) {
  constexpr char kReconcile[] = "slurm reconcile";
  if (f.usage == "-" && f.sacct == "-") return Fail(kReconcile, "--usage and --sacct cannot both be '-'", kExitBadInput);
  StatusOr<std::string> ledger_text = ReadAll(f.usage, "--usage");
  if (!ledger_text.ok()) return Fail(kReconcile, ledger_text.status(), kExitBadInput);
  StatusOr<std::string> sacct_text = ReadAll(f.sacct, "--sacct");
  if (!sacct_text.ok()) return Fail(kReconcile, sacct_text.status(), kExitBadInput);
  auto ledger = metering::ParseLedgerJsonl(*ledger_text, f.usage == "-" ? "<stdin>" : f.usage, GpuModelCatalog::Builtin());
  auto jobs = integrations::slurm::ParseSacct(*sacct_text, f.sacct == "-" ? "<stdin>" : f.sacct, f.shards_per_gpu);
  std::string problems;
  if (!ledger.ok()) problems += ledger.status().message();
  if (!jobs.ok()) problems += (problems.empty() ? "" : "\n") + jobs.status().message();
  if (!problems.empty()) return Fail(kReconcile, problems, kExitBadInput);
  std::vector<integrations::slurm::MeteredSample> samples;
  for (const metering::HourlyRecord& r : ledger->ledger.Records()) {
    const metering::SourceKey& key = ledger->ledger.source(r.source);
    samples.push_back({.tenant = key.tenant, .workload = key.workload,
                       .gpu_milli_s_allocated = r.gpu_milli_s_allocated, .gpu_milli_s_used = r.gpu_milli_s_used});
  }
  const integrations::slurm::Reconciliation rec = integrations::slurm::Reconcile(*jobs, samples);
  nlohmann::json j = {{"jobs", nlohmann::json::array()}, {"accounts", nlohmann::json::array()},
                      {"not_metered", rec.not_metered}, {"not_in_sacct", rec.not_in_sacct}};
  for (const auto* list : {&rec.jobs, &rec.accounts}) {
    for (const integrations::slurm::ReconcileRow& r : *list) {
      nlohmann::json row = {{"account", r.account}, {"slurm_gpu_s", r.slurm_gpu_s}, {"metered_gpu_s", r.metered_gpu_s},
                            {"used_gpu_s", r.used_gpu_s}};
      if (!r.job_id.empty()) row["job_id"] = r.job_id;
      if (!r.note.empty()) row["note"] = r.note;
      j[list == &rec.jobs ? "jobs" : "accounts"].push_back(row);
    }
  }
  if (!f.json_path.empty()) {
    if (Status st = WriteOutput(f.json_path, j.dump(2) + "\n"); !st.ok()) return Fail(kReconcile, st, kExitFailure);
  }
  if (f.output == "json") {
    std::cout << j.dump(2) << "\n";
  } else if (f.json_path != "-") {
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : rec.jobs) {
      rows.push_back({r.job_id, r.account, GpuSeconds(r.slurm_gpu_s), GpuSeconds(r.metered_gpu_s), GpuSeconds(r.used_gpu_s),
                      Diff(r), r.note});
    }
    std::cout << TextTable({"JOB", "ACCOUNT", "SLURM GPU-S", "METERED GPU-S", "USED GPU-S", "DIFF", "NOTE"}, rows) << "\n";
    rows.clear();
    for (const auto& r : rec.accounts) {
      rows.push_back({r.account, GpuSeconds(r.slurm_gpu_s), GpuSeconds(r.metered_gpu_s), GpuSeconds(r.used_gpu_s), Diff(r)});
    }
    std::cout << TextTable({"ACCOUNT", "SLURM GPU-S", "METERED GPU-S", "USED GPU-S", "DIFF"}, rows);
    std::cout << rec.not_metered << " GPU job(s) not metered, " << rec.not_in_sacct
              << " metered job(s) without a GPU allocation in sacct\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterSlurm(CLI::App& app, int* exit_code) {
  CLI::App* slurm = app.add_subcommand(
      "slurm", "Slurm integration: the node's gres.conf / slurm.conf GPU lines; reconciling sacct with the metered usage");
  slurm->require_subcommand(1);
  auto flags = std::make_shared<SlurmConfigFlags>();
  CLI::App* config = slurm->add_subcommand(
      "config", "Print this node's gres.conf and slurm.conf GPU lines (gpu, shard, MIG instances as typed GPUs)");
  config->add_option("--node-name", flags->node_name, "NodeName= in slurm.conf (default: the short host name)");
  config->add_option("--shards-per-gpu", flags->shards_per_gpu,
                     "Shards per GPU (gres/shard lines; default 0: none); the SPANK plugin's shards_per_gpu=")
      ->check(CLI::Range(0, 1000));
  config->add_option("--device-prefix", flags->device_prefix,
                     "Device files are <prefix><index> (default /dev/nvidia; tests use fake device files)");
  config->add_option("--mig-minors", flags->mig_minors,
                     std::string("The driver's MIG capability minors (default ") + kMigMinors + " when present)");
  config->add_option("--fake-gpus", flags->fake_gpus,
                     "Use the in-tree fake NVML with these GPUs: MODEL:COUNT[:mig],... (e.g. A100-40GB:2)");
  config->add_option("--nvml", flags->nvml, "NVML library to load (default libnvidia-ml.so.1, the driver's)");
  config->callback([flags, exit_code] { *exit_code = RunSlurmConfig(*flags); });

  auto rf = std::make_shared<ReconcileFlags>();
  CLI::App* reconcile = slurm->add_subcommand(
      "reconcile",
      "Compare what Slurm allocated (sacct) with what tessera metered (the ledger), per job and account, in "
      "GPU-seconds.\n  sacct -a -X -P -n --format=JobIDRaw,Account,ElapsedRaw,AllocTRES -S 2026-12-01 > jobs.txt\n"
      "  tessera slurm reconcile --usage usage.jsonl --sacct jobs.txt --shards-per-gpu 4");
  reconcile->add_option("--usage", rf->usage,
                        "Ledger file (JSON lines, plain or gzip; '-': stdin) as `tessera node arbiter --usage-ledger` "
                        "writes it; samples of workload slurm-job-<id> are compared")
      ->required();
  reconcile->add_option("--sacct", rf->sacct,
                        "sacct -X -P -n --format=JobIDRaw,Account,ElapsedRaw,AllocTRES output ('-': stdin)")
      ->required();
  reconcile->add_option("--shards-per-gpu", rf->shards_per_gpu,
                        "Shards per GPU, to turn gres/shard into GPUs (default 1; the SPANK plugin's shards_per_gpu=)")
      ->check(CLI::Range(1, 1000));
  reconcile->add_option("-o,--output", rf->output, "What stdout gets: table or json (default table)")
      ->check(CLI::IsMember({"table", "json"}));
  reconcile->add_option("--json", rf->json_path, "Also write the JSON to this file ('-': to stdout instead of the table)");
  reconcile->callback([rf, exit_code] { *exit_code = RunSlurmReconcile(*rf); });
}

}  // namespace tessera::cli
