// ArbiterDuty: a tenant that joins is put on the board at the arbiter's next round, not at the
// next 100 ms registry sync (what lets a Slurm task start a millisecond after it joined).
#include "tessera/node/arbiter_duty.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tests/testing/sim_test_util.h"

namespace tessera::node {
namespace {

bool Active(const NodeDir& node, int index) {
  StatusOr<enforce::LeaseFile> leases = enforce::LeaseFile::OpenNodeLines(node.paths().leases);
  return leases.ok() && leases->board(0).node[index].state.load() ==
                            static_cast<uint32_t>(enforce::LeaseSlotState::kActive);
}

TEST(ArbiterDuty, AJoinIsOnTheBoardAtTheNextRound) {
  tessera::testing::TempDir dir;
  const NodeDir node(dir.File("node"));
  const long self = ::getpid();
  ASSERT_EQ(node.Join({.name = "a", .gpus = {0}, .mem_bytes = 1 << 20, .share = 30}, self).value(), 0);
  ArbiterDuty duty(node, 0);
  // The round that takes over syncs (a) and then waits at most 50 ms: the next periodic sync is
  // still about 50 ms away when the round after the join below starts.
  for (int i = 0; i < 100 && !duty.holds(); ++i) duty.Round();
  ASSERT_TRUE(duty.holds());
  ASSERT_TRUE(Active(node, 0));
  ASSERT_EQ(node.Join({.name = "b", .gpus = {0}, .mem_bytes = 1 << 20, .share = 70}, self).value(), 1);
  duty.Round();  // one round: the registry was replaced, so it syncs now
  EXPECT_TRUE(Active(node, 1));
}

// A tenant on a MIG instance is isolated by the hardware: never on its GPU's board, so it is not
// time-sliced against a tenant on another instance of the same GPU (node_dir.h).
TEST(ArbiterDuty, ATenantOnAMigInstanceIsNeverOnTheBoard) {
  tessera::testing::TempDir dir;
  const NodeDir node(dir.File("node"));
  const long self = ::getpid();
  ASSERT_EQ(node.Join({.name = "a", .gpus = {0}, .mem_bytes = 1 << 20, .share = 30, .mig_instance = "MIG-aaaa"}, self)
                .value(),
            0);
  ASSERT_EQ(node.Join({.name = "b", .gpus = {0}, .mem_bytes = 1 << 20, .share = 70, .mig_instance = "MIG-bbbb"}, self)
                .value(),
            1);
  ASSERT_EQ(node.Join({.name = "c", .gpus = {0}, .mem_bytes = 1 << 20, .share = 10}, self).value(), 2);
  ArbiterDuty duty(node, 0);
  for (int i = 0; i < 100 && !duty.holds(); ++i) duty.Round();
  ASSERT_TRUE(duty.holds());
  for (int i = 0; i < 5; ++i) duty.Round();
  EXPECT_FALSE(Active(node, 0));
  EXPECT_FALSE(Active(node, 1));
  EXPECT_TRUE(Active(node, 2));  // the GPU's other tenant is still driven
}

}  // namespace
}  // namespace tessera::node
