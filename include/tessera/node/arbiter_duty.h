// ArbiterDuty: arbiter election for one GPU of a node directory (tessera/node/node_dir.h). The
// lease arbiter of a GPU (tessera/node/lease_arbiter.h) runs inside the supervising processes of
// that GPU's tenants (`tessera run`, the agent), guarded by an flock on `arbiter-gpu<N>.lock`:
// whoever holds it drives the GPU's board (weights = shares): it syncs the board with the registry
// (tenants added, changed or gone) at once in the first round after the registry file was
// replaced (a join or leave; a joiner that rings the board's doorbell gets that round immediately:
// admission in about a millisecond), and every second otherwise (tenants whose members all died
// without leaving go then); every 100 ms it reconciles the node's memory segment (what SIGKILLed
// processes held is released; one duty per process does it: an agent drives every GPU's duty from
// threads of one process; the tenants with bytes charged, every tenant's slots once a second).
//
// A standby (the lock is held elsewhere) costs nothing while it waits: its first round starts a
// waiter, a thread blocked in flock(LOCK_EX) on the duty's own lock fd, which the kernel wakes when
// the holder unlocks, closes the file or dies (the kernel drops the flock of a killed process).
// The waiter then writes an eventfd; a standby round sleeps in poll() on that eventfd and on the
// caller's `wake_fd` (`tessera run`: a pidfd of its command) for at most its standby wait (the
// supervisor's 1 s counters-file check), and the round the eventfd wakes takes over and drives.
// Take-over is as prompt as the kernel's wake-up (about a millisecond, where a 50 ms poll of
// LOCK_NB used to cost 64 standby supervisors ~1,300 wake-ups a second). At destruction the waiter
// is interrupted by kWaiterSignal (a no-op handler without SA_RESTART: flock returns EINTR), sent
// again every millisecond until the thread has seen its stop flag (a signal that lands between the
// flag check and the flock call is not lost that way), and joined. No daemon to start, nothing
// left running afterwards.
//
// Callers: node::RunTenantCommand (`tessera run`) calls Round() in its supervision loop and its
// extra GPUs' threads; the agent calls it from a thread of its own per GPU.
//
// Worked example: supervisors P and Q of GPU 0 both call Round({.holder = 50 ms, .standby = 1 s,
// .wake_fd = pidfd}) in a loop. P takes the lock (LOCK_NB), syncs tenants {0: share 30, 1: share
// 70} onto the board and steps the arbiter, waiting on the board's doorbell 50 ms at most per
// round. Q's first LOCK_NB fails: Q starts its waiter and its rounds sleep in poll(), returning once
// a second (Q's counters check) or when Q's command exits. P is SIGKILLed at t: the kernel drops
// its flock and wakes Q's waiter, which now holds the lock; Q's poll returns at about t + 1 ms, and
// that round maps the board and continues granting 30/70.
//
// Thread-safety: one ArbiterDuty is used by one thread (its waiter is internal). Several
// ArbiterDuty objects (threads or processes) for the same GPU elect one holder through the flock.
// Ownership: it owns the lock fd, the waiter and its eventfd, its mapping of the lease file and the
// arbiter; the destructor stops the waiter, stops the arbiter and drops the lock. A fork while a
// waiter waits is safe (the waiter holds no lock of the process: it sits in the flock syscall);
// the lock fd is O_CLOEXEC.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <thread>

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

  // How long a round may wait.
  struct Wait {
    // The holder's longest wait on its board's doorbell: what a caller that must notice something
    // else (its command's exit, a stop flag) within that time says; the agent's threads: 200 ms.
    std::chrono::milliseconds holder{50};
    // A standby's longest wait for the lock; it also returns as soon as `wake_fd` (when >= 0) is
    // readable (poll: POLLIN, POLLHUP or POLLERR), e.g. a pidfd of the caller's command.
    std::chrono::milliseconds standby{50};
    int wake_fd = -1;
  };

  // One round: the holder syncs and steps, then sleeps until a doorbell rings or the arbiter's
  // step, this duty's sync (1 s) or its reconcile (100 ms) is due, `wait.holder` at most. A standby
  // tries the lock (the first time, LOCK_NB; then its waiter's word) and sleeps in poll() until the
  // waiter has the lock, `wait.wake_fd` is readable or `wait.standby` passed; a round that gets the
  // lock takes over and drives at once.
  void Round(const Wait& wait);
  // Round with `max_wait` for both the holder and a standby, no wake fd.
  void Round(std::chrono::milliseconds max_wait = std::chrono::milliseconds(50)) {
    Round(Wait{.holder = max_wait, .standby = max_wait});
  }
  bool holds() const { return arbiter_ != nullptr; }

 private:
  enum class Lock { kTaken, kBusy, kError };
  // Whether this standby got the lock and took over (its first attempt LOCK_NB, after that its
  // waiter's), after waiting as `wait` says when it did not.
  bool TakeOverOrWait(const Wait& wait);
  Lock TryLock();
  // With the lock held: maps the board and creates the arbiter (on failure the lock is dropped).
  bool TakeOver();
  // Starts the waiter (false without an eventfd for it to write).
  bool StartWaiter();
  void StopWaiter();
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
  // The waiter (StartWaiter): its thread, its stop flag, what it ended with (WaiterState), and the
  // eventfd it writes when it ends (kept for the duty's life).
  std::thread waiter_;
  std::atomic<bool> waiter_stop_{false};
  std::atomic<int> waiter_state_{0};
  int waiter_done_fd_ = -1;
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
