// DraBackstop against the fake NVML (the real adapter over the C ABI) with processes that are
// real children of the test, placed in pods by a /proc stand-in whose <pid>/cgroup files say
// which pod each belongs to (the kubelet's cgroup paths; tests/k8s/backstop_fixture.h).
#include "tessera/integrations/k8s/dra_backstop.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tests/k8s/backstop_fixture.h"

namespace tessera::k8s {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr char kPodA[] = "1b2c3d4e-0000-4000-8000-00000000000a";
constexpr char kPodB[] = "1b2c3d4e-0000-4000-8000-00000000000b";
constexpr char kPodC[] = "1b2c3d4e-0000-4000-8000-00000000000c";
constexpr char kPodD[] = "1b2c3d4e-0000-4000-8000-00000000000d";
constexpr char kOwnPod[] = "1b2c3d4e-0000-4000-8000-0000000000ff";

TEST(PodUidOfCgroup, ReadsTheSystemdAndTheCgroupfsDriversPathsAndNoPod) {
  EXPECT_EQ(PodUidOfCgroup(SystemdCgroup(kPodA)), kPodA);
  EXPECT_EQ(PodUidOfCgroup("12:memory:/kubepods/besteffort/pod" + std::string(kPodB) + "/0123abcd\n"
                           "11:cpu:/kubepods/besteffort/pod" + std::string(kPodB) + "/0123abcd\n"),
            kPodB);
  EXPECT_EQ(PodUidOfCgroup("0::/user.slice/user-1000.slice/session-2.scope\n"), std::nullopt);
  EXPECT_EQ(PodUidOfCgroup("0::/kubepods.slice/kubepods-pod1b2c3d4e.slice\n"), std::nullopt);  // cut short
  EXPECT_EQ(PodUidOfCgroup(""), std::nullopt);
}

class DraBackstopTest : public BackstopFixture {
 protected:
  void SetUp() override {
    BackstopFixture::SetUp();
    own_ = Spawn(kOwnPod);  // stands for the driver's own process (options.own_pid)
  }
  DraBackstop Backstop(bool kill = true) {
    return DraBackstop({.proc_dir = (root_ / "proc").string(),
                        .counters_dir = (root_ / "counters").string(),
                        .context_allowance_mib = 500,
                        .kill = kill,
                        .own_pid = own_},
                       *nvml_);
  }
  pid_t own_ = 0;
  const ClaimUse infer_{.claim = "team-a/infer", .uid = "U1", .pod_uids = {kPodA}, .gpus = {0},
                        .mem_bytes = 1ull << 30, .shared = true, .index = 0};
  const ClaimUse other_{.claim = "team-b/other", .uid = "U2", .pod_uids = {kPodB}, .gpus = {0},
                        .mem_bytes = 4ull << 30, .shared = true, .index = 1};
  const ClaimUse train_{.claim = "team-c/train", .uid = "U3", .pod_uids = {kPodC}, .gpus = {1},
                        .mem_bytes = std::nullopt, .shared = false, .index = 2};
};

TEST_F(DraBackstopTest, AClaimOverItsLimitHasItsGpuProcessesKilledAndNoOtherProcessIsTouched) {
  const pid_t a1 = Spawn(kPodA), a2 = Spawn(kPodA), b1 = Spawn(kPodB), c1 = Spawn(kPodC);
  const pid_t host = Spawn(""), own_work = Spawn(kOwnPod);
  // infer: (1300 - 500) + (2100 - 500) = 2400 MiB > 1024; other: 1000 - 500 < 4096; train: no limit.
  Nvml({"H100-80GB:" + Procs({{a1, 1300}, {a2, 2100}, {b1, 1000}, {host, 9000}, {own_work, 9000}}),
        "H100-80GB:" + Procs({{c1, 30000}})});
  DraBackstop backstop = Backstop();
  DraBackstop::Pass pass = backstop.Check([&] { return std::vector<ClaimUse>{infer_, other_, train_}; }, nullptr);
  EXPECT_THAT(pass.problems, ::testing::IsEmpty());
  ASSERT_EQ(pass.findings.size(), 1u);
  EXPECT_EQ(pass.findings[0].claim, "team-a/infer");
  EXPECT_THAT(pass.findings[0].detail, HasSubstr("2400 MiB on GPU 0 over its limit of 1024 MiB"));
  EXPECT_THAT(pass.findings[0].pids, ::testing::UnorderedElementsAre(a1, a2));
  EXPECT_TRUE(pass.findings[0].killed);
  EXPECT_TRUE(Killed(a1));
  EXPECT_TRUE(Killed(a2));
  for (pid_t untouched : {b1, c1, host, own_work}) EXPECT_EQ(::kill(untouched, 0), 0) << untouched;
  EXPECT_EQ(backstop.stats().violations, 1);
  EXPECT_EQ(backstop.stats().kills, 2);
}

TEST_F(DraBackstopTest, AProcessOfAClaimOnAGpuNotItsOwnIsAViolation) {
  const pid_t a1 = Spawn(kPodA);
  Nvml({"H100-80GB", "H100-80GB:" + Procs({{a1, 600}})});  // infer holds GPU 0, runs on GPU 1
  DraBackstop backstop = Backstop();
  DraBackstop::Pass pass = backstop.Check([&] { return std::vector<ClaimUse>{infer_}; }, nullptr);
  ASSERT_EQ(pass.findings.size(), 1u);
  EXPECT_THAT(pass.findings[0].detail, HasSubstr("pid " + std::to_string(a1) + " on GPU 1 (600 MiB), a GPU not its own"));
  EXPECT_TRUE(Killed(a1));
}

TEST_F(DraBackstopTest, APodWithoutAClaimOnASharedGpuIsKilledOnlyOnceTheClaimsWereReadAgain) {
  const pid_t d1 = Spawn(kPodD);
  Nvml({"H100-80GB:" + Procs({{d1, 700}})});
  DraBackstop backstop = Backstop();
  std::vector<ClaimUse> claims{infer_};
  // The read fails: reported, judged at the next pass; nothing killed.
  DraBackstop::Pass pass = backstop.Check([&] { return claims; }, [] { return UnavailableError("API server down"); });
  EXPECT_THAT(pass.findings, ::testing::IsEmpty());
  ASSERT_EQ(pass.problems.size(), 1u);
  EXPECT_THAT(pass.problems[0], HasSubstr("pod " + std::string(kPodD) + "): API server down; judged at the next pass"));
  EXPECT_EQ(::kill(d1, 0), 0);
  // The read finds that pod D now uses claim infer (700 - 500 = 200 MiB, within 1 GiB): no finding.
  int reads = 0;
  pass = backstop.Check([&] { return claims; }, [&] {
    ++reads;
    claims[0].pod_uids.push_back(kPodD);
    return Status::Ok();
  });
  EXPECT_EQ(reads, 1);
  EXPECT_THAT(pass.findings, ::testing::IsEmpty());
  EXPECT_EQ(::kill(d1, 0), 0);
  // The read succeeds and no claim names the pod: killed.
  claims = {infer_};
  pass = backstop.Check([&] { return claims; }, [] { return Status::Ok(); });
  ASSERT_EQ(pass.findings.size(), 1u);
  EXPECT_EQ(pass.findings[0].claim, "");
  EXPECT_THAT(pass.findings[0].detail, HasSubstr("of pod " + std::string(kPodD) +
                                                 " uses 700 MiB on shared GPU 0 and the pod holds no claim of it"));
  EXPECT_TRUE(Killed(d1));
  EXPECT_EQ(backstop.stats().unclaimed, 1);
  EXPECT_EQ(backstop.stats().refresh_errors, 1);
}

TEST_F(DraBackstopTest, APodWithoutAClaimOnAWholeGpuClaimsGpuIsLeftAlone) {
  const pid_t d1 = Spawn(kPodD);
  Nvml({"H100-80GB", "H100-80GB:" + Procs({{d1, 700}})});  // GPU 1 is train's, whole: no limits to protect
  DraBackstop backstop = Backstop();
  int reads = 0;
  DraBackstop::Pass pass = backstop.Check([&] { return std::vector<ClaimUse>{train_}; }, [&] {
    ++reads;
    return Status::Ok();
  });
  EXPECT_THAT(pass.findings, ::testing::IsEmpty());
  EXPECT_EQ(reads, 0);
  EXPECT_EQ(::kill(d1, 0), 0);
}

TEST_F(DraBackstopTest, ReportModeReportsAClaimOncePerEpisodeAndKillsNothing) {
  const pid_t a1 = Spawn(kPodA);
  Nvml({"H100-80GB:" + Procs({{a1, 2000}})});
  DraBackstop backstop = Backstop(/*kill=*/false);
  auto claims = [&] { return std::vector<ClaimUse>{infer_}; };
  DraBackstop::Pass first = backstop.Check(claims, nullptr);
  ASSERT_EQ(first.findings.size(), 1u);
  EXPECT_FALSE(first.findings[0].killed);
  EXPECT_THAT(backstop.Check(claims, nullptr).findings, ::testing::IsEmpty());  // the same episode
  EXPECT_EQ(::kill(a1, 0), 0);
  EXPECT_EQ(backstop.stats().violations, 1);
  EXPECT_EQ(backstop.stats().kills, 0);
}

TEST_F(DraBackstopTest, AClaimWhoseCountersFileWasTruncatedIsAViolationEvenWithinItsLimit) {
  const pid_t a1 = Spawn(kPodA), b1 = Spawn(kPodB);
  Nvml({"H100-80GB:" + Procs({{a1, 600}, {b1, 600}})});
  fs::create_directories(root_ / "counters");
  std::ofstream(root_ / "counters" / "0") << "";  // infer's file: truncated by its tenant; other's: none
  DraBackstop backstop = Backstop();
  DraBackstop::Pass pass = backstop.Check([&] { return std::vector<ClaimUse>{infer_, other_}; }, nullptr);
  ASSERT_EQ(pass.findings.size(), 1u);
  EXPECT_EQ(pass.findings[0].claim, "team-a/infer");
  EXPECT_THAT(pass.findings[0].detail, HasSubstr("size 0"));
  EXPECT_THAT(pass.findings[0].detail, HasSubstr("its memory is no longer accounted"));
  EXPECT_TRUE(Killed(a1));
  EXPECT_EQ(::kill(b1, 0), 0);
  EXPECT_EQ(backstop.stats().counters_broken, 1);
}

TEST_F(DraBackstopTest, AGpuNvmlCannotListIsReportedAsAProblemNotAsAViolation) {
  const pid_t c1 = Spawn(kPodA);
  ::setenv("TESSERA_FAKE_NVML_FAIL", "nvmlDeviceGetComputeRunningProcesses_v3:999", 1);
  Nvml({"H100-80GB:" + Procs({{c1, 9000}})});
  DraBackstop backstop = Backstop();
  DraBackstop::Pass pass = backstop.Check([&] { return std::vector<ClaimUse>{infer_}; }, nullptr);
  ::unsetenv("TESSERA_FAKE_NVML_FAIL");
  ASSERT_EQ(pass.problems.size(), 1u);
  EXPECT_THAT(pass.problems[0], HasSubstr("GPU 0: "));
  EXPECT_THAT(pass.findings, ::testing::IsEmpty());
  EXPECT_EQ(::kill(c1, 0), 0);
  EXPECT_EQ(backstop.stats().nvml_errors, 1);
}

}  // namespace
}  // namespace tessera::k8s
