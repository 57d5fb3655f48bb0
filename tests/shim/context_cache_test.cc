// The shim's picture of the current context (src/enforce/shim/context_cache.h), without a driver:
// the mirror follows create/push/pop/set as the driver's context stack does, and says "unknown"
// (never a guess) wherever it cannot know. End to end through the shim: launch_path_test.cc.
#include "src/enforce/shim/context_cache.h"

#include "gtest/gtest.h"

namespace tessera::enforce::shim {
namespace {

cuabi::CUcontext Ctx(int i) { return reinterpret_cast<cuabi::CUcontext>(static_cast<std::uintptr_t>(0x1000 + i)); }

TEST(ContextStackMirror, FollowsTheWorkedExampleOfTheHeader) {
  ContextStackMirror m;
  EXPECT_EQ(m.CurrentOrdinal(), kUnknownOrdinal);
  m.Push(Ctx(0), 0);  // cuCtxCreate_v2 on 0
  m.Push(Ctx(1), 1);  // cuCtxCreate_v2 on 1
  EXPECT_EQ(m.CurrentOrdinal(), 1);
  m.Pop();
  EXPECT_EQ(m.CurrentOrdinal(), 0);
  m.Set(Ctx(1), 1);  // replaces the top
  EXPECT_EQ(m.CurrentOrdinal(), 1);
  EXPECT_EQ(m.depth(), 1);
  m.Set(Ctx(7), kUnknownOrdinal);  // a context never seen made
  EXPECT_EQ(m.CurrentOrdinal(), kUnknownOrdinal);
  m.Learn(1);  // the driver said so
  EXPECT_EQ(m.CurrentOrdinal(), 1);
  EXPECT_EQ(m.CurrentContext(), Ctx(7));
}

TEST(ContextStackMirror, SetNullPopsAndAnEmptyMirrorKnowsNothing) {
  ContextStackMirror m;
  m.Push(Ctx(0), 0);
  m.Push(Ctx(1), 1);
  m.Set(nullptr, kUnknownOrdinal);
  EXPECT_EQ(m.CurrentOrdinal(), 0);
  m.Pop();
  m.Pop();  // more pops than pushes: still unknown, never negative
  EXPECT_EQ(m.depth(), 0);
  EXPECT_EQ(m.CurrentOrdinal(), kUnknownOrdinal);
  m.Set(Ctx(2), 2);  // set on an empty stack pushes
  EXPECT_EQ(m.CurrentOrdinal(), 2);
  m.Learn(3);
  EXPECT_EQ(m.CurrentOrdinal(), 3);
  m.Pop();
  m.Learn(1);  // learned with nothing mirrored: an entry of unknown handle
  EXPECT_EQ(m.CurrentOrdinal(), 1);
  EXPECT_EQ(m.CurrentContext(), nullptr);
}

TEST(ContextStackMirror, ForgetMakesEveryEntryUnknownAtAnyDepth) {
  ContextStackMirror m;
  m.Push(Ctx(0), 0);
  m.Push(Ctx(1), 1);
  m.Forget();
  EXPECT_EQ(m.CurrentOrdinal(), kUnknownOrdinal);
  m.Push(Ctx(2), 0);  // pushed after the reset: known
  EXPECT_EQ(m.CurrentOrdinal(), 0);
  m.Pop();
  EXPECT_EQ(m.CurrentOrdinal(), kUnknownOrdinal);  // below it: unknown, whatever it was before
  m.Pop();
  EXPECT_EQ(m.CurrentOrdinal(), kUnknownOrdinal);
}

TEST(ContextStackMirror, DeeperThanTheMirrorReadsUnknownAtTheBottom) {
  ContextStackMirror m;
  for (int i = 0; i < ContextStackMirror::kDepth + 3; ++i) m.Push(Ctx(i), i % 2);
  EXPECT_EQ(m.depth(), ContextStackMirror::kDepth);
  for (int i = ContextStackMirror::kDepth + 2; i >= 3; --i) {
    EXPECT_EQ(m.CurrentOrdinal(), i % 2) << i;
    m.Pop();
  }
  EXPECT_EQ(m.CurrentOrdinal(), kUnknownOrdinal);  // the 3 oldest were dropped: not guessed
}

TEST(ContextTable, KnowsCreatedAndRetainedContextsUntilTheyGo) {
  ContextTable t;
  t.Put(Ctx(0), 0, /*primary=*/true);
  t.Put(Ctx(1), 1, /*primary=*/false);
  t.Put(Ctx(2), 1, /*primary=*/true);
  EXPECT_EQ(t.Get(Ctx(0)), 0);
  EXPECT_EQ(t.Get(Ctx(1)), 1);
  EXPECT_EQ(t.Get(nullptr), kUnknownOrdinal);
  EXPECT_EQ(t.Get(Ctx(9)), kUnknownOrdinal);
  t.Erase(Ctx(1));  // destroyed
  EXPECT_EQ(t.Get(Ctx(1)), kUnknownOrdinal);
  t.Put(Ctx(1), 0, false);  // the handle reused on another device
  EXPECT_EQ(t.Get(Ctx(1)), 0);
  t.ErasePrimary(1);  // primary context of 1 released: only that entry goes
  EXPECT_EQ(t.Get(Ctx(2)), kUnknownOrdinal);
  EXPECT_EQ(t.Get(Ctx(0)), 0);
  EXPECT_EQ(t.Get(Ctx(1)), 0);
}

TEST(ContextTable, AFullTableForgetsNewContextsInsteadOfGuessing) {
  ContextTable t;
  for (int i = 0; i < ContextTable::kSlots; ++i) t.Put(Ctx(i), 1, false);
  t.Put(Ctx(ContextTable::kSlots), 0, false);
  EXPECT_EQ(t.Get(Ctx(ContextTable::kSlots)), kUnknownOrdinal);
  EXPECT_EQ(t.Get(Ctx(ContextTable::kSlots - 1)), 1);
  t.Erase(Ctx(3));
  t.Put(Ctx(ContextTable::kSlots), 0, false);  // room again
  EXPECT_EQ(t.Get(Ctx(ContextTable::kSlots)), 0);
}

}  // namespace
}  // namespace tessera::enforce::shim
