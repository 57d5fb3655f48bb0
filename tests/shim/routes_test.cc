// Every route to a driver entry point hands out the shim's wrapper for exactly the variant the
// real driver would have handed out: direct binding, dlsym/dlvsym on libcuda's handle,
// RTLD_DEFAULT, RTLD_NEXT, and cuGetProcAddress v1/v2 for CUDA versions before 12.0, 12.x and 13.x
// with legacy, per-thread and default stream flags. The same requests without the shim give the
// driver's own function of the same name, so the shim changes nothing but the owner. Driver errors
// (SYMBOL_NOT_FOUND, VERSION_NOT_SUFFICIENT, invalid flags, injected failures) pass through.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/shim/expected_entry_points.h"
#include "tests/shim/shim_test_util.h"

namespace tessera::enforce {
namespace {

using testing::ExpectedHook;
using testing::kExpectedHooks;
using testing::ProbeOptions;
using testing::RunProbe;

constexpr int kVersions[] = {11080, 12080, 13000};          // pre-12.0, 12.x, 13.x
constexpr unsigned kFlags[] = {0, 1, 2};                    // default, legacy, per-thread
constexpr const char* kNameRoutes[] = {"direct", "dlsym", "dlvsym", "dlsym_default", "dlsym_next"};

// What the driver returns for (base, version, flags): the newest variant not newer than `version`,
// the _ptsz one when per-thread was asked for and exists. "" when none (VERSION_NOT_SUFFICIENT).
std::string ExpectedVariant(const std::string& base, int version, unsigned flags, int driver_version = 13000) {
  const ExpectedHook* legacy = nullptr;
  const ExpectedHook* per_thread = nullptr;
  for (const ExpectedHook& h : kExpectedHooks) {
    if (base != h.base || h.version > version || h.version > driver_version) continue;
    const ExpectedHook*& best = h.per_thread ? per_thread : legacy;
    if (best == nullptr || h.version > best->version) best = &h;
  }
  const ExpectedHook* chosen = flags == 2 && per_thread != nullptr ? per_thread : legacy;
  return chosen == nullptr ? "" : chosen->symbol;
}

std::set<std::string> Bases() {
  std::set<std::string> out;
  for (const ExpectedHook& h : kExpectedHooks) out.insert(h.base);
  return out;
}

struct Query {
  std::string arg;       // probe argument
  std::string expected;  // expected tail of the output line after "-> " (with "OWNER" placeholder)
  std::string rc_status;  // expected "rc=.. status=.."
};

std::vector<Query> ResolverMatrix() {
  std::vector<Query> q;
  for (const std::string& base : Bases()) {
    for (int v : kVersions) {
      for (unsigned f : kFlags) {
        std::string variant = ExpectedVariant(base, v, f);
        for (const char* route : {"gpa1", "gpa2"}) {
          Query one;
          one.arg = std::string("route:") + route + ":" + base + ":" + std::to_string(v) + ":" + std::to_string(f);
          bool v2 = std::string(route) == "gpa2";
          if (variant.empty()) {
            one.expected = "null";
            one.rc_status = std::string("rc=500 status=") + (v2 ? "2" : "-1");
          } else {
            one.expected = "OWNER:" + variant;
            one.rc_status = std::string("rc=0 status=") + (v2 ? "0" : "-1");
          }
          q.push_back(one);
        }
      }
    }
  }
  return q;
}

std::string Tail(const std::string& line) {
  auto p = line.find("-> ");
  return p == std::string::npos ? "<no result: " + line + ">" : line.substr(p + 3);
}

void CheckMatrix(const std::vector<Query>& queries, bool with_shim) {
  std::vector<std::string> args{"init"};
  for (const Query& q : queries) args.push_back(q.arg);
  ProbeOptions o;
  o.preload = with_shim;
  testing::ProbeRun run = RunProbe(o, args);
  ASSERT_EQ(run.exit_code, 0);
  ASSERT_EQ(run.lines.size(), queries.size() + 1) << "probe output was cut short";
  const std::string owner = with_shim ? "shim" : "driver";
  for (std::size_t i = 0; i < queries.size(); ++i) {
    const std::string& line = run.lines[i + 1];
    std::string expected = queries[i].expected;
    if (expected.rfind("OWNER:", 0) == 0) expected = owner + expected.substr(5);
    EXPECT_EQ(Tail(line), expected) << queries[i].arg;
    EXPECT_NE(line.find(queries[i].rc_status), std::string::npos) << line;
  }
}

TEST(Routes, EveryNamedVariantThroughEveryLookupRoute) {
  std::vector<Query> q;
  for (const ExpectedHook& h : kExpectedHooks) {
    for (const char* route : kNameRoutes) {
      q.push_back({std::string("route:") + route + ":" + h.symbol, std::string("OWNER:") + h.symbol, "rc=0"});
    }
  }
  CheckMatrix(q, /*with_shim=*/true);
  CheckMatrix(q, /*with_shim=*/false);
}

TEST(Routes, ResolverReturnsTheWrapperOfTheVariantTheDriverChose) {
  std::vector<Query> q = ResolverMatrix();
  ASSERT_GT(q.size(), 500u);
  CheckMatrix(q, /*with_shim=*/true);
  CheckMatrix(q, /*with_shim=*/false);
}

TEST(Routes, ResolverForItselfGivesThe4Or5ArgumentWrapper) {
  testing::ProbeRun run = RunProbe(ProbeOptions{}, {"route:gpa2:cuGetProcAddress:11080:0",
                                                    "route:gpa2:cuGetProcAddress:12000:0",
                                                    "route:gpa1:cuGetProcAddress:13000:2",
                                                    "route:gpa2:cuGetProcAddress:11020:0"});
  ASSERT_EQ(run.lines.size(), 4u);
  EXPECT_EQ(Tail(run.lines[0]), "shim:cuGetProcAddress");
  EXPECT_EQ(Tail(run.lines[1]), "shim:cuGetProcAddress_v2");
  EXPECT_EQ(Tail(run.lines[2]), "shim:cuGetProcAddress_v2");
  EXPECT_EQ(Tail(run.lines[3]), "null");  // older than the resolver itself
  EXPECT_NE(run.lines[3].find("rc=500 status=2"), std::string::npos);
}

TEST(Routes, DriverErrorsPassThroughUnchanged) {
  testing::ProbeRun run = RunProbe(
      ProbeOptions{}, {"route:gpa2:cuNoSuchFunction:13000:0", "route:gpa2:cuLaunchKernel:13000:3",
                       "route:gpa2:cuInit:13000:0", "inject:cuGetProcAddress_v2:999:1",
                       "route:gpa2:cuLaunchKernel:13000:0", "route:gpa2:cuLaunchKernel:13000:0",
                       "route:dlsym:cuNoSuchFunction"});
  ASSERT_EQ(run.lines.size(), 7u);
  EXPECT_NE(run.lines[0].find("rc=500 status=1 -> null"), std::string::npos) << run.lines[0];
  EXPECT_NE(run.lines[1].find("rc=1 "), std::string::npos) << run.lines[1];  // both flags: invalid
  EXPECT_EQ(Tail(run.lines[2]), "driver:cuInit");  // not hooked: the driver's own
  EXPECT_NE(run.lines[4].find("rc=999"), std::string::npos) << run.lines[4];  // injected, unchanged
  EXPECT_EQ(Tail(run.lines[5]), "shim:cuLaunchKernel");
  EXPECT_EQ(Tail(run.lines[6]), "null");
}

TEST(Routes, OlderDriverVersionNotSufficientPassesThrough) {
  ProbeOptions o;
  o.env = {"TESSERA_FAKE_CUDA_DRIVER_VERSION=11080"};
  testing::ProbeRun run = RunProbe(o, {"route:gpa1:cuGetProcAddress:12080:0",
                                       "route:gpa1:cuStreamBeginCaptureToGraph:13000:0",
                                       "route:gpa1:cuMemAllocAsync:13000:2"});
  ASSERT_EQ(run.lines.size(), 3u);
  EXPECT_EQ(Tail(run.lines[0]), "shim:cuGetProcAddress");  // the driver has only the 4-arg one
  EXPECT_NE(run.lines[1].find("rc=500"), std::string::npos);
  EXPECT_EQ(Tail(run.lines[1]), "null");
  EXPECT_EQ(Tail(run.lines[2]), "shim:cuMemAllocAsync_ptsz");
}

// Calling the resolved pointer reaches exactly the driver variant of the same name.
TEST(Routes, ResolvedWrappersForwardToTheSameVariant) {
  const char* bases[] = {"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel",
                         "cuGraphLaunch", "cuMemAllocAsync", "cuStreamBeginCapture", "cuMemAlloc"};
  std::vector<std::string> args{"init"};
  std::vector<std::string> expected;
  for (const char* base : bases) {
    for (int v : kVersions) {
      for (unsigned f : kFlags) {
        for (const char* route : {"gpa1", "gpa2"}) {
          args.push_back(std::string("invoke:") + route + ":" + base + ":" + std::to_string(v) + ":" +
                         std::to_string(f));
          expected.push_back(ExpectedVariant(base, v, f));
        }
      }
    }
  }
  testing::ProbeRun run = RunProbe(ProbeOptions{}, args);
  ASSERT_EQ(run.lines.size(), args.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const std::string& line = run.lines[i + 1];
    EXPECT_NE(line.find("rc=0 reached=" + expected[i] + " via=shim:" + expected[i]), std::string::npos)
        << args[i + 1] << " => " << line;
  }
}

TEST(Routes, LaunchesAndCapturesPassTheGateAndAreCounted) {
  testing::TestSegment t;
  ASSERT_TRUE(t.seg().SetLimit(0, 0, 64 * testing::kMiB).ok());
  ProbeOptions o;
  o.segment = &t;
  testing::Probe p(o, {"init", "launches", "wait"});
  EXPECT_EQ(p.ReadLine(), "init rc=0,0");
  EXPECT_EQ(p.ReadLine(), "launches failures=0");
  EXPECT_EQ(p.ReadLine(), "wait ready");
  const ProcessSlot* slot = nullptr;
  for (const ProcessSlot& s : t.seg().counters(0)->slots) {
    SlotStateWord st = UnpackSlotState(s.state.load());
    if (st.state == SlotState::kActive && st.pid == static_cast<std::uint32_t>(p.pid())) slot = &s;
  }
  ASSERT_NE(slot, nullptr);
  EXPECT_EQ(slot->launches[static_cast<int>(CountedLaunch::kKernel)].load(), 5u);  // 4 + 1 captured
  EXPECT_EQ(slot->launches[static_cast<int>(CountedLaunch::kCooperative)].load(), 2u);
  EXPECT_EQ(slot->launches[static_cast<int>(CountedLaunch::kGraph)].load(), 2u);
  EXPECT_EQ(slot->launches[static_cast<int>(CountedLaunch::kCaptureBegin)].load(), 1u);
  EXPECT_EQ(p.Finish(), 0);
  EXPECT_EQ(t.seg().ActiveSlots(), 0);  // released at exit
}

}  // namespace
}  // namespace tessera::enforce
