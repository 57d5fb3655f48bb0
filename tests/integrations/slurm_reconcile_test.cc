// sacct parsing (shards as GPU fractions, typed GPUs not counted twice, every problem with
// file:line and the field) and the reconciliation of the header's worked example.
#include "tessera/integrations/slurm_reconcile.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::integrations::slurm {
namespace {

using ::testing::HasSubstr;

constexpr char kSacct[] =
    "42|physics|120|billing=2,cpu=2,gres/gpu=1,gres/gpu:a100-40gb=1,mem=4G,node=1\n"
    "43|chem|60|billing=1,cpu=1,gres/shard=2,mem=1G,node=1\n"
    "\n"
    "44|geo|30|billing=1,cpu=1,mem=1G,node=1\n"
    "45|physics|10|billing=1,cpu=1,gres/gpu=2,node=1\r\n";

TEST(SlurmReconcile, SacctGivesEachJobItsGpus) {
  StatusOr<std::vector<SacctJob>> jobs = ParseSacct(kSacct, "jobs.txt", 4);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 4u);
  EXPECT_EQ((*jobs)[0].job_id, "42");
  EXPECT_EQ((*jobs)[0].account, "physics");
  EXPECT_EQ((*jobs)[0].elapsed_s, 120);
  EXPECT_DOUBLE_EQ((*jobs)[0].gpus, 1.0);  // the typed count is part of gres/gpu
  EXPECT_DOUBLE_EQ((*jobs)[1].gpus, 0.5);  // 2 of 4 shards
  EXPECT_DOUBLE_EQ((*jobs)[2].gpus, 0.0);
  EXPECT_DOUBLE_EQ((*jobs)[3].gpus, 2.0);
}

TEST(SlurmReconcile, EveryProblemIsNamedWithItsLineAndField) {
  const StatusOr<std::vector<SacctJob>> jobs = ParseSacct(
      "42|physics|abc|gres/gpu=1\n43|chem\n44|geo|5|gres/gpu=x\n42|physics|120|gres/gpu=1\n", "jobs.txt", 4);
  ASSERT_FALSE(jobs.ok());
  const std::string m(jobs.status().message());
  EXPECT_THAT(m, HasSubstr("jobs.txt:1: ElapsedRaw: 'abc' is not a number of seconds"));
  EXPECT_THAT(m, HasSubstr("jobs.txt:2: line: expected 4 '|'-separated fields"));
  EXPECT_THAT(m, HasSubstr("jobs.txt:3: AllocTRES: gres/gpu: 'x' is not a count"));
  EXPECT_THAT(m, HasSubstr("jobs.txt:4: JobIDRaw: job 42 also on line 1 (list allocations only: sacct -X)"));
  EXPECT_FALSE(ParseSacct("", "x", 0).ok());
}

TEST(SlurmReconcile, HeaderWorkedExample) {
  const std::vector<SacctJob> jobs = *ParseSacct(kSacct, "jobs.txt", 4);
  const Reconciliation r = Reconcile(
      jobs, {{"physics", "slurm-job-42", 60'000, 50'000},
             {"physics", "slurm-job-42", 58'000, 40'000},  // two samples of one job add up
             {"chem", "slurm-job-43", 29'000, 3'000},
             {"geo", "slurm-job-44", 5'000, 1'000},
             {"ops", "slurm-job-99", 2'000, 0},
             {"physics", "notebook-7", 1'000'000, 0}});  // not a Slurm job: ignored
  ASSERT_EQ(r.jobs.size(), 5u);
  EXPECT_EQ(r.jobs[0].job_id, "42");
  EXPECT_DOUBLE_EQ(r.jobs[0].slurm_gpu_s, 120);
  EXPECT_DOUBLE_EQ(r.jobs[0].metered_gpu_s, 118);
  EXPECT_DOUBLE_EQ(r.jobs[0].used_gpu_s, 90);
  EXPECT_EQ(r.jobs[0].note, "");
  EXPECT_DOUBLE_EQ(r.jobs[1].slurm_gpu_s, 30);
  EXPECT_EQ(r.jobs[2].job_id, "44");
  EXPECT_EQ(r.jobs[2].note, "metered, no GPU in sacct");
  EXPECT_EQ(r.jobs[3].job_id, "45");
  EXPECT_EQ(r.jobs[3].note, "not metered");
  EXPECT_DOUBLE_EQ(r.jobs[3].slurm_gpu_s, 20);
  EXPECT_EQ(r.jobs[4].job_id, "99");
  EXPECT_EQ(r.jobs[4].note, "metered, not in sacct");
  EXPECT_EQ(r.not_metered, 1);
  EXPECT_EQ(r.not_in_sacct, 2);
  ASSERT_EQ(r.accounts.size(), 4u);  // chem, geo, ops, physics
  EXPECT_EQ(r.accounts[3].account, "physics");
  EXPECT_DOUBLE_EQ(r.accounts[3].slurm_gpu_s, 140);
  EXPECT_DOUBLE_EQ(r.accounts[3].metered_gpu_s, 118);
}

TEST(SlurmReconcile, AJobMeteredUnderAnotherAccountIsNamed) {
  const Reconciliation r = Reconcile({{.job_id = "7", .account = "chem", .elapsed_s = 10, .gpus = 1}},
                                     {{"physics", "slurm-job-7", 10'000, 1'000}});
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.jobs[0].note, "metered as account physics");
}

}  // namespace
}  // namespace tessera::integrations::slurm
