// ArbiterDuty: arbiter election for one GPU of a node directory (tessera/node/node_dir.h). The
// lease arbiter of a GPU (tessera/node/lease_arbiter.h) runs inside the supervising processes of
// that GPU's tenants (`tessera run`, the agent), guarded by an flock on `arbiter-gpu<N>.lock`:
// whoever holds it drives the GPU's board (weights = shares): it syncs the board with the registry
// (tenants added, changed or gone) at once in the first round after the registry file was
// replaced (a join or leave; a joiner that rings the board's doorbell gets that round immediately:
// admission in about a millisecond), and every second otherwise (tenants whose members all died
// without leaving go then); every 100 ms it reconciles the node's memory segment (what SIGKILLed
// processes held is released; one duty per process does it: an agent drives every GPU's duty from
// threads of one process; the tenants with bytes charged, every tenant's slots once a second); the others try the lock every 50 ms,
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

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>

#include "tessera/enforce/lease_file.h"
#include "tessera/enforce/segment.h"
#include "tessera/node/lease_arbiter.h"
#include "tessera/node/node_dir.h"

namespace tessera::node {

class ArbiterDuty {
 public:
  ArbiterDuty(NodeDir node, int gpu, LeaseArbiterOptions options = {});
  ~ArbiterDuty();
  ArbiterDuty(const ArbiterDuty&) = delete;
  ArbiterDuty& operator=(const ArbiterDuty&) = delete;

  // One round: try to become the arbiter (else sleep 50 ms), or sync and step, then sleep until a
  // doorbell rings or the arbiter's step, this duty's sync (1 s) or its reconcile (100 ms) is due.
  // Returns after at most ~`max_wait`: a caller that must notice something else (its command's
  // exit, a stop flag) within that time says so; the agent's arbiter threads wait 200 ms.
  void Round(std::chrono::milliseconds max_wait = std::chrono::milliseconds(50));
  bool holds() const { return arbiter_ != nullptr; }

 private:
  bool TryTakeOver();
  void Sync(const enforce::NodeSegment* segment);
  bool RegistryChanged();
  // The node's memory segment, kept mapped between rounds (mapping its files, a counters file per
  // tenant index, at every sync cost an agent driving 8 GPUs most of a core in munmap's TLB
  // shootdowns); mapped again when the registry changed: a new tenant's counters file is made by
  // the join that commits it to the registry (a join that fails before its commit leaves a file
  // no member uses). Null when the segment cannot be opened.
  enforce::NodeSegment* Segment(bool registry_changed);

  NodeDir node_;
  int gpu_;
  LeaseArbiterOptions options_;
  int fd_ = -1;
  std::optional<enforce::LeaseFile> leases_;
  std::unique_ptr<LeaseArbiter> arbiter_;
  std::map<uint32_t, LeaseTenantConfig> have_;
  uint64_t next_sync_ns_ = 0;
  uint64_t next_reconcile_ns_ = 0;
  std::optional<FileStamp> registry_stamp_;
  std::optional<enforce::NodeSegment> segment_;
  // The registry's entries on this GPU as last read (dead members included); reset when the file
  // changes. Parsing the registry at every 100 ms sync of each GPU cost an agent of 64 tenants on
  // 8 GPUs a fifth of a core.
  std::optional<std::vector<TenantEntry>> registry_;
};

}  // namespace tessera::node
