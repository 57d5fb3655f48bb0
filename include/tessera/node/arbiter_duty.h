// ArbiterDuty: arbiter election for one GPU of a node directory (tessera/node/node_dir.h). The
// lease arbiter of a GPU (tessera/node/lease_arbiter.h) runs inside the supervising processes of
// that GPU's tenants (`tessera run`, the agent), guarded by an flock on `arbiter-gpu<N>.lock`:
// whoever holds it drives the GPU's board (weights = shares) and re-reads the registry every
// 100 ms (reconciliation: tenants added, changed or gone), and at once in the first round after
// the registry file was replaced (a join or leave; a joiner that rings the board's doorbell gets
// that round immediately: admission in about a millisecond); the others try the lock every 50 ms,
// so when the holder exits (or is killed: the kernel drops the flock) another takes over within
// 50 ms and resumes from the board. No daemon to start, nothing left running afterwards.
//
// Callers: node::RunTenantCommand (`tessera run`) calls Round() in its supervision loop; the
// agent would call it from a thread of its own per GPU.
//
// Worked example: supervisors P and Q of GPU 0 both call Round() in a loop. P takes the lock,
// syncs tenants {0: share 30, 1: share 70} onto the board and steps the arbiter; Q's rounds
// sleep 50 ms each. P is SIGKILLed: Q's next round takes the lock and continues granting 30/70.
//
// Thread-safety: one ArbiterDuty is used by one thread. Several ArbiterDuty objects (threads or
// processes) for the same GPU elect one holder through the flock. Ownership: it owns the lock
// fd, its mapping of the lease file and the arbiter; the destructor stops the arbiter and drops
// the lock.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "tessera/enforce/lease_file.h"
#include "tessera/node/lease_arbiter.h"
#include "tessera/node/node_dir.h"

namespace tessera::node {

class ArbiterDuty {
 public:
  ArbiterDuty(NodeDir node, int gpu, LeaseArbiterOptions options = {});
  ~ArbiterDuty();
  ArbiterDuty(const ArbiterDuty&) = delete;
  ArbiterDuty& operator=(const ArbiterDuty&) = delete;

  // One round: try to become the arbiter (else sleep 50 ms), or sync and step. Returns after
  // at most ~50 ms.
  void Round();
  bool holds() const { return arbiter_ != nullptr; }

 private:
  bool TryTakeOver();
  void Sync();
  bool RegistryChanged();

  struct RegistryStamp {
    uint64_t inode = 0, mtime_ns = 0;
    bool operator==(const RegistryStamp&) const = default;
  };

  NodeDir node_;
  int gpu_;
  LeaseArbiterOptions options_;
  int fd_ = -1;
  std::optional<enforce::LeaseFile> leases_;
  std::unique_ptr<LeaseArbiter> arbiter_;
  std::map<uint32_t, LeaseTenantConfig> have_;
  uint64_t next_sync_ns_ = 0;
  RegistryStamp registry_stamp_;
};

}  // namespace tessera::node
