// What Slurm allocated against what tessera metered, per job and per account: `tessera slurm
// reconcile --usage LEDGER --sacct FILE` (docs/slurm.md, "Metering and reconciliation").
//
// Slurm's side is sacct's parsable listing of the allocations (one line per job, no steps):
//   sacct -a -X -P -n --format=JobIDRaw,Account,ElapsedRaw,AllocTRES -S 2026-12-01 -E 2026-12-02
//   42|physics|120|billing=2,cpu=2,gres/gpu=1,mem=4G,node=1
//   43|chem|60|billing=1,cpu=1,gres/shard=2,mem=1G,node=1
// A job's GPUs are gres/gpu plus gres/shard / shards_per_gpu (typed counts such as
// gres/gpu:a100-40gb=1 are part of gres/gpu and not counted twice); its Slurm GPU-seconds are
// GPUs x ElapsedRaw. tessera's side is the ledger's samples of workload "slurm-job-<JobIDRaw>"
// (what `tessera node arbiter --usage-ledger` writes): GPU-seconds allocated (its share of the
// GPU over the time it was joined) and used (measured).
//
// Worked example (4 shards per GPU): job 42 above, metered 118 GPU-s allocated and 90 used; job 43,
// 30 GPU-s for Slurm, metered 29 allocated and 3 used; job 44 of geo has no GPU in sacct but was
// metered 5 GPU-s ("not in sacct as a GPU job"):
//   JOB  ACCOUNT  SLURM GPU-S  METERED GPU-S  USED GPU-S  DIFF   NOTE
//   42   physics  120          118            90          -2
//   43   chem     30           29             3           -1
//   44   geo      0            5              1           +5     metered, no GPU in sacct
// and per account the sums. A job Slurm gave GPUs that was never metered is "not metered"; one
// metered under another account than sacct's is named. Metered time runs from the task's join to
// its release, Slurm's from the job's start to its end, so a few seconds less is normal.
//
// Thread-safety: pure functions. Callers: tools/tessera/commands/slurm.cc; the fuzzer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/core/status.h"

namespace tessera::integrations::slurm {

struct SacctJob {
  std::string job_id;   // JobIDRaw
  std::string account;
  int64_t elapsed_s = 0;
  double gpus = 0;      // gres/gpu + gres/shard / shards_per_gpu
};

// sacct -P -n --format=JobIDRaw,Account,ElapsedRaw,AllocTRES output. Every problem at once, one
// per line, as "<source>:<line>: <field>: <what>" (INVALID_ARGUMENT); blank lines are skipped.
// A job id listed twice (steps were not excluded with -X) is an error naming both lines.
StatusOr<std::vector<SacctJob>> ParseSacct(std::string_view text, std::string_view source, int shards_per_gpu);

// One ledger sample's share of a Slurm job (the caller reads the ledger).
struct MeteredSample {
  std::string tenant;    // the Slurm account
  std::string workload;  // "slurm-job-<id>"; others are ignored
  int64_t gpu_milli_s_allocated = 0;
  int64_t gpu_milli_s_used = 0;
};

struct ReconcileRow {
  std::string job_id;   // empty in an account's row
  std::string account;
  double slurm_gpu_s = 0;
  double metered_gpu_s = 0;  // allocated, as metered
  double used_gpu_s = 0;
  std::string note;
};

struct Reconciliation {
  std::vector<ReconcileRow> jobs;      // by job id (numeric order)
  std::vector<ReconcileRow> accounts;  // by account
  int not_metered = 0;                 // Slurm gave GPUs, nothing metered
  int not_in_sacct = 0;                // metered, no GPU job in sacct
};

Reconciliation Reconcile(const std::vector<SacctJob>& jobs, const std::vector<MeteredSample>& samples);

}  // namespace tessera::integrations::slurm
