// kill -9 stress: 1000 SIGKILLs of processes that allocate and free through every family as fast as
// they can, at random moments (seeded). After each batch, Reconcile() must leave every tenant
// counter exactly equal to what the live processes hold, with no underflow, and the limit must
// never have been exceeded.
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/shim/shim_test_util.h"

namespace tessera::enforce {
namespace {

using testing::kMiB;
using testing::Probe;
using testing::ProbeOptions;
using testing::TestSegment;

int Kills() {
  const char* v = std::getenv("TESSERA_SHIM_TEST_KILLS");  // sanitizer runs use fewer
  return v != nullptr ? std::max(16, std::atoi(v)) : 1000;
}

void SleepMicros(long us) {
  timespec ts{us / 1000000, (us % 1000000) * 1000};
  ::nanosleep(&ts, nullptr);
}

TEST(CrashSafety, ThousandRandomSigkillsLeaveCountersExact) {
  TestSegment t;
  const std::uint64_t limit = 256 * kMiB;
  ASSERT_TRUE(t.seg().SetLimit(0, 0, limit).ok());
  ProbeOptions o;
  o.segment = &t;
  // Each process has its own fake device memory: a real driver frees a killed process's memory,
  // the fake's shared usage file would not.
  o.env = {"TESSERA_FAKE_CUDA_SHARED="};
  // Processes that stay alive throughout, holding a known amount.
  std::vector<std::unique_ptr<Probe>> live;
  for (int i = 0; i < 2; ++i) {
    live.push_back(std::make_unique<Probe>(
        o, std::vector<std::string>{"init", "alloc:mem:3000000", "alloc:vmm:4194304", "alloc:array:128:2048", "wait"}));
    for (int k = 0; k < 5; ++k) live.back()->ReadLine();
    ASSERT_EQ(live.back()->lines().back(), "wait ready");
  }
  const std::uint64_t live_bytes = 2 * (3000320 + 4 * kMiB + kMiB);  // 3,000,000 rounded to 512
  ASSERT_EQ(t.seg().ReservedBytes(0, 0), live_bytes);

  std::mt19937 rng(20261130);
  const int total = Kills();
  const int batch = 2;
  int killed = 0, reclaimed = 0;
  std::uint64_t released = 0;
  while (killed < total) {
    int n = std::min(batch, total - killed);
    std::vector<std::unique_ptr<Probe>> victims;
    for (int i = 0; i < n; ++i) {
      victims.push_back(std::make_unique<Probe>(
          o, std::vector<std::string>{"init", "stress:" + std::to_string(rng()) + ":8388608"}));
    }
    std::shuffle(victims.begin(), victims.end(), rng);
    for (auto& v : victims) {
      ASSERT_EQ(v->ReadLine(), "init rc=0,0");
      ASSERT_EQ(v->ReadLine(), "stress started");
      SleepMicros(static_cast<long>(rng() % 400));
      v->Kill();
      ++killed;
    }
    ReconcileReport r = t.seg().Reconcile();
    reclaimed += r.slots_reclaimed;
    released += r.bytes_released;
    ASSERT_EQ(t.seg().ReservedBytes(0, 0), live_bytes) << "after " << killed << " kills";
    ASSERT_EQ(t.seg().HeldByLiveSlots(0, 0), live_bytes);
  }
  EXPECT_EQ(reclaimed, total);  // every killed process had claimed a slot
  EXPECT_GT(released, 0u);
  EXPECT_LE(t.seg().PeakBytes(0, 0), limit);
  EXPECT_EQ(t.seg().counters(0)->counters[0].underflows_prevented.load(), 0u);
  EXPECT_EQ(t.seg().ActiveSlots(), 2);
  for (auto& p : live) EXPECT_EQ(p->Finish(), 0);
  EXPECT_EQ(t.seg().ReservedBytes(0, 0), 0u);
  EXPECT_EQ(t.seg().ActiveSlots(), 0);
}

}  // namespace
}  // namespace tessera::enforce
