// Scrub-on-free (the tenant's kTenantScrubOnFree flag in the read-only policy page): with the flag
// on, libtessera-shim.so zeroes an allocation through the driver's own memset before it frees it,
// and the fake driver's free audit (which counts the nonzero bytes of every block at the moment it
// is freed) sees only zeros; with the flag off nothing is memset and the audit sees the data.
//   - cuMemFree_v2 of plain, managed and pitched memory: one cuMemsetD8_v2 of exactly the
//     allocation's size (not the granule-rounded charge) on that pointer, before the free;
//   - cuMemFreeAsync / cuMemFreeAsync_ptsz: cuMemsetD8Async / cuMemsetD8Async_ptsz on the free's
//     own stream;
//   - the flag is read at every free (a running process picks up `tessera run --scrub`);
//   - a failed scrub fails the free: the memory stays allocated and charged;
//   - VMM handles and arrays are not scrubbed (documented in docs/enforcement.md).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/shim/shim_test_util.h"

namespace tessera::enforce {
namespace {

using testing::FieldInt;
using testing::Fields;
using testing::kMiB;
using testing::Probe;
using testing::ProbeOptions;
using testing::ProbeRun;
using testing::RunProbe;
using testing::TestSegment;

struct ScrubSetup {
  TestSegment t;
  explicit ScrubSetup(bool scrub) {
    EXPECT_TRUE(t.seg().SetLimit(0, 0, 256 * kMiB).ok());
    EXPECT_TRUE(t.seg().SetTenantFlags(0, scrub ? kTenantScrubOnFree : 0).ok());
  }
  ProbeOptions Options() {
    ProbeOptions o;
    o.segment = &t;
    return o;
  }
};

// The scrubinfo lines of a run, in order.
std::vector<std::map<std::string, std::string>> ScrubInfos(const ProbeRun& r) {
  std::vector<std::map<std::string, std::string>> out;
  for (const std::string& l : r.lines) {
    if (l.rfind("scrubinfo ", 0) == 0) out.push_back(Fields(l));
  }
  return out;
}

// alloc, fill with 0xA5, free, report: for each family that cuMemFree_v2 frees.
const std::vector<std::string> kSyncFamilies = {
    "init",          "audit:1",
    "alloc:mem:5000", "poke:0:5000", "free:0", "scrubinfo",              // id 0: 5000 B, charge 5120
    "alloc:managed:70000", "poke:1:70000", "free:1", "scrubinfo",       // id 1
    "alloc:pitch:1000:3", "poke:2:3072", "free:2", "scrubinfo",         // id 2: pitch 1024 x 3
};

TEST(ShimScrub, OnZeroesExactlyTheAllocationBeforeTheSynchronousFree) {
  ScrubSetup s(/*scrub=*/true);
  ProbeRun r = RunProbe(s.Options(), kSyncFamilies);
  ASSERT_EQ(r.exit_code, 0);
  auto infos = ScrubInfos(r);
  ASSERT_EQ(infos.size(), 3u);
  const char* ids[] = {"0", "1", "2"};
  const char* sizes[] = {"5000", "70000", "3072"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(infos[i]["dirty"], "0") << i;  // the audit saw only zeros at the free
    EXPECT_EQ(infos[i]["memset"], "cuMemsetD8_v2") << i;
    EXPECT_EQ(infos[i]["id"], ids[i]) << i;
    EXPECT_EQ(infos[i]["bytes"], sizes[i]) << i;  // the allocation's size, not the charge
    EXPECT_EQ(infos[i]["sync"], std::to_string(i + 1)) << i;
    EXPECT_EQ(infos[i]["async"], "0");
  }
  EXPECT_EQ(s.t.seg().ReservedBytes(0, 0), 0u);  // the frees went through and released
}

TEST(ShimScrub, OffLeavesTheDataAndCallsNoMemset) {
  ScrubSetup s(/*scrub=*/false);
  ProbeRun r = RunProbe(s.Options(), kSyncFamilies);
  ASSERT_EQ(r.exit_code, 0);
  auto infos = ScrubInfos(r);
  ASSERT_EQ(infos.size(), 3u);
  EXPECT_EQ(infos[0]["dirty"], "5000");  // the audit does see unscrubbed data
  EXPECT_EQ(infos[2]["dirty"], std::to_string(5000 + 70000 + 3072));
  for (auto& i : infos) {
    EXPECT_EQ(i["memset"], "none");
    EXPECT_EQ(i["sync"], "0");
  }
}

TEST(ShimScrub, AsyncFreesAreScrubbedOnTheirOwnStream) {
  ScrubSetup s(/*scrub=*/true);
  ProbeRun r = RunProbe(s.Options(), {"init", "audit:1",
                                      "alloc:async:4096", "poke:0:4096", "freeon:0:4660", "scrubinfo",
                                      "alloc:async_ptsz:8192", "poke:1:8192", "freeon:1:153", "scrubinfo",
                                      "alloc:pool:1000", "poke:2:1000", "freeon:2:77", "scrubinfo"});
  ASSERT_EQ(r.exit_code, 0);
  auto infos = ScrubInfos(r);
  ASSERT_EQ(infos.size(), 3u);
  EXPECT_EQ(infos[0]["memset"], "cuMemsetD8Async");
  EXPECT_EQ(infos[0]["stream"], "4660");
  EXPECT_EQ(infos[0]["bytes"], "4096");
  EXPECT_EQ(infos[0]["id"], "0");
  EXPECT_EQ(infos[1]["memset"], "cuMemsetD8Async_ptsz");  // per-thread free -> per-thread memset
  EXPECT_EQ(infos[1]["stream"], "153");
  EXPECT_EQ(infos[1]["bytes"], "8192");
  EXPECT_EQ(infos[2]["memset"], "cuMemsetD8Async");
  EXPECT_EQ(infos[2]["stream"], "77");
  EXPECT_EQ(infos[2]["bytes"], "1000");
  EXPECT_EQ(infos[2]["dirty"], "0");
  EXPECT_EQ(infos[2]["sync"], "0");  // never the synchronous memset on this path
  EXPECT_EQ(infos[2]["async"], "2");
  EXPECT_EQ(infos[2]["async_ptsz"], "1");
  EXPECT_EQ(s.t.seg().ReservedBytes(0, 0), 0u);
}

TEST(ShimScrub, TheFlagIsReadAtEveryFree) {
  ScrubSetup s(/*scrub=*/false);
  Probe p(s.Options(), {"init", "audit:1", "alloc:mem:4096", "poke:0:4096", "wait", "free:0", "scrubinfo"});
  for (int i = 0; i < 4; ++i) p.ReadLine();
  ASSERT_EQ(p.ReadLine(), "wait ready");
  ASSERT_TRUE(s.t.seg().SetTenantFlags(0, kTenantScrubOnFree).ok());  // `tessera run --scrub` joins
  ASSERT_EQ(p.Finish(), 0);
  const std::string info = p.lines().back();
  EXPECT_EQ(Fields(info)["dirty"], "0") << info;
  EXPECT_EQ(Fields(info)["memset"], "cuMemsetD8_v2") << info;
}

TEST(ShimScrub, AFailedScrubFailsTheFreeAndKeepsTheCharge) {
  ScrubSetup s(/*scrub=*/true);
  Probe p(s.Options(), {"init", "audit:1", "alloc:mem:4096", "poke:0:4096", "inject:cuMemsetD8_v2:999:1",
                        "free:0", "wait", "free:0", "scrubinfo"});
  std::vector<std::string> lines;
  for (std::string l = p.ReadLine(); !l.empty() && l != "wait ready"; l = p.ReadLine()) lines.push_back(l);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(FieldInt(lines[5], "rc"), 999);             // the memset's error, unchanged
  EXPECT_EQ(s.t.seg().ReservedBytes(0, 0), 4096u);     // still allocated and charged
  ASSERT_EQ(p.Finish(), 0);
  ASSERT_GE(p.lines().size(), 2u);
  const auto& all = p.lines();
  EXPECT_EQ(FieldInt(all[all.size() - 2], "rc"), 0);   // the retry scrubs and frees
  EXPECT_EQ(Fields(all.back())["dirty"], "0");
  EXPECT_EQ(Fields(all.back())["sync"], "2");
}

TEST(ShimScrub, VmmAndArraysAreNotScrubbed) {
  ScrubSetup s(/*scrub=*/true);
  ProbeRun r = RunProbe(s.Options(), {"init", "alloc:vmm:2097152", "alloc:array:64:64", "freeall", "scrubinfo"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_EQ(FieldInt(r.Find("freeall"), "failures"), 0);
  EXPECT_EQ(Fields(r.Find("scrubinfo"))["memset"], "none");
}

TEST(ShimScrub, TenantFlagsAreValidated) {
  TestSegment t;
  EXPECT_EQ(t.seg().TenantFlags(3), 0u);  // a new segment: no flags (the old reserved word was 0)
  ASSERT_TRUE(t.seg().SetTenantFlags(3, kTenantScrubOnFree).ok());
  EXPECT_EQ(t.seg().TenantFlags(3), kTenantScrubOnFree);
  EXPECT_EQ(t.seg().policy().tenants[3].flags.load(), kTenantScrubOnFree);
  Status bad = t.seg().SetTenantFlags(3, 1ULL << 7);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.ToString().find("unknown bits 0x80"), std::string::npos) << bad.ToString();
  EXPECT_FALSE(t.seg().SetTenantFlags(kMaxTenants, 0).ok());
  EXPECT_EQ(t.seg().TenantFlags(3), kTenantScrubOnFree);  // unchanged by the refused calls
}

}  // namespace
}  // namespace tessera::enforce
