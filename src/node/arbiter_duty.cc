#include "tessera/node/arbiter_duty.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "tessera/enforce/lease.h"

namespace tessera::node {

ArbiterDuty::ArbiterDuty(NodeDir node, int gpu, LeaseArbiterOptions options)
    : node_(std::move(node)), gpu_(gpu), options_(std::move(options)) {}

ArbiterDuty::~ArbiterDuty() {
  StopWaiter();
  if (arbiter_ != nullptr) arbiter_->Stop(enforce::MonotonicNowNs());
  if (fd_ >= 0) ::close(fd_);
  if (waiter_done_fd_ >= 0) ::close(waiter_done_fd_);
}

namespace {

// What a waiter ended with (waiter_state_).
enum WaiterState : int { kWaiting = 0, kLocked = 1, kStopped = 2, kFailed = 3 };

// Interrupts a waiter's flock at destruction. SIGURG: its default action is to ignore it, so one
// sent to the process from elsewhere changes nothing; the handler does nothing, and without
// SA_RESTART the interrupted flock returns EINTR. Installed once per process, at the first waiter.
constexpr int kWaiterSignal = SIGURG;
void NoOp(int) {}
void InstallWaiterSignal() {
  static const bool installed = [] {
    struct sigaction sa {};
    sa.sa_handler = NoOp;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    return ::sigaction(kWaiterSignal, &sa, nullptr) == 0;
  }();
  (void)installed;
}

enum class Turn { kNone, kCharged, kFull };

// Whether this duty reconciles node directory `dir` now, and how: at most once per 100 ms per
// directory in this process (other directories, e.g. a test's several nodes, keep their own turn),
// the tenants with something charged (NodeSegment::ReconcileCharged), and every tenant's slots at
// most once a second (kFull, the first turn included). Example: turns at 0, 100, ..., 1000 ms are
// kFull, kCharged x 9, kFull.
Turn ReconcileTurn(const std::string& dir, uint64_t now_ns) {
  struct Last {
    uint64_t any_ns = 0;
    uint64_t full_ns = 0;
  };
  static std::mutex mu;
  static std::map<std::string, Last> last;
  std::lock_guard<std::mutex> lock(mu);
  Last& l = last[dir];
  if (l.any_ns != 0 && now_ns < l.any_ns + 100'000'000) return Turn::kNone;
  l.any_ns = now_ns;
  if (l.full_ns != 0 && now_ns < l.full_ns + 1'000'000'000) return Turn::kCharged;
  l.full_ns = now_ns;
  return Turn::kFull;
}

}  // namespace

void ArbiterDuty::Round(const Wait& wait) {
  if (arbiter_ == nullptr && !TakeOverOrWait(wait)) return;
  const uint64_t now = enforce::MonotonicNowNs();
  const bool changed = RegistryChanged();
  if (changed) {
    registry_.reset();
    // A join gives its index a fresh counters file: map that tenant's lease page from it.
    (void)leases_->RefreshTenants();
  }
  const bool sync_due = changed || now >= next_sync_ns_;
  const bool reconcile_due = now >= next_reconcile_ns_;
  if (sync_due || reconcile_due) {
    enforce::NodeSegment* segment = Segment(changed);
    if (reconcile_due) {
      // SIGKILLed processes' memory is released within 100 ms, not at the run's exit. Reconcile is
      // node-wide: the duties of one process for one node directory (an agent's, one per GPU)
      // take turns, one reconcile of that node per 100 ms. A duty that did not get the turn
      // (another one of this process reconciles) looks again in a second: only a stand-in then.
      // Slots of dead processes that held nothing (a tenant with no byte charged) are freed by
      // the full reconcile, once a second.
      const Turn turn = segment != nullptr ? ReconcileTurn(node_.paths().dir, now) : Turn::kNone;
      if (turn == Turn::kFull) segment->Reconcile();
      if (turn == Turn::kCharged) segment->ReconcileCharged();
      next_reconcile_ns_ = now + (turn != Turn::kNone ? 100'000'000 : 1'000'000'000);
    }
    if (sync_due) {
      Sync(segment);
      next_sync_ns_ = now + 1'000'000'000;
    }
  }
  enforce::LeaseBoard& board = leases_->board(gpu_);
  const enforce::DoorbellSnapshot seen = enforce::ReadDoorbells(board);
  const uint64_t next = arbiter_->Step(enforce::MonotonicNowNs());
  const uint64_t after = enforce::MonotonicNowNs();
  // Woken by a doorbell, else when the arbiter's step or this duty's reconcile or sync is due.
  const uint64_t until = std::min<uint64_t>(
      {next, next_reconcile_ns_, next_sync_ns_,
       after + static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(wait.holder).count())});
  if (until > after) enforce::WaitForDoorbells(board, seen, until - after);
}

// The registry is replaced (rename) at every change: a new stamp (StampOf) means a join or leave
// since the last sync, so a newly joined tenant is admitted at the next round (a joiner rings the
// doorbell to make that round come at once) rather than at the next 100 ms sync.
bool ArbiterDuty::RegistryChanged() {
  const std::optional<FileStamp> stamp = StampOf(node_.paths().registry);
  if (!stamp || stamp == registry_stamp_) return false;
  registry_stamp_ = stamp;
  return true;
}

bool ArbiterDuty::TakeOverOrWait(const Wait& wait) {
  // A failure with the lock in hand (the lease file cannot be mapped) or without a lock file: try
  // again after 50 ms (the caller's standby wait at most), as every standby did before waiters.
  const auto retry_later = [&] {
    std::this_thread::sleep_for(std::min(wait.standby, std::chrono::milliseconds(50)));
    return false;
  };
  if (!waiter_.joinable()) {
    const Lock lock = TryLock();
    if (lock == Lock::kTaken) return TakeOver() || retry_later();
    if (lock == Lock::kError || !StartWaiter()) return retry_later();
  }
  pollfd fds[2] = {{.fd = waiter_done_fd_, .events = POLLIN, .revents = 0},
                   {.fd = wait.wake_fd, .events = POLLIN, .revents = 0}};
  const auto timeout_ms = std::clamp<std::chrono::milliseconds::rep>(wait.standby.count(), 0, 1 << 30);
  (void)::poll(fds, wait.wake_fd >= 0 ? 2 : 1, static_cast<int>(timeout_ms));
  if (waiter_state_.load(std::memory_order_acquire) == kWaiting) return false;  // woken by wake_fd, a signal or the time
  waiter_.join();
  uint64_t drained = 0;
  (void)!::read(waiter_done_fd_, &drained, sizeof(drained));
  const int ended = waiter_state_.exchange(kWaiting, std::memory_order_acq_rel);
  if (ended == kLocked) return TakeOver() || retry_later();
  return retry_later();  // flock failed (not EINTR): the next round tries LOCK_NB again
}

ArbiterDuty::Lock ArbiterDuty::TryLock() {
  if (fd_ < 0) {
    fd_ = OpenNodeLockFile(node_.paths().ArbiterLock(gpu_));
    if (fd_ < 0) return Lock::kError;
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return Lock::kTaken;
  return errno == EWOULDBLOCK ? Lock::kBusy : Lock::kError;
}

bool ArbiterDuty::TakeOver() {
  // This GPU's board with every tenant's page from its counters file (enforce/lease_file.h).
  StatusOr<enforce::LeaseFile> f = enforce::LeaseFile::Open(node_.paths().leases, node_.paths().counters, gpu_);
  if (!f.ok()) {
    ::flock(fd_, LOCK_UN);
    return false;
  }
  leases_.emplace(std::move(*f));
  StatusOr<std::unique_ptr<LeaseArbiter>> a = LeaseArbiter::Create(&leases_->board(gpu_), options_);
  if (!a.ok()) {
    ::flock(fd_, LOCK_UN);
    return false;
  }
  arbiter_ = std::move(*a);
  return true;
}

// The waiter blocks in flock(LOCK_EX) on the duty's own fd: the lock it gets is the duty's (flock
// locks belong to the open file). It touches nothing else of the duty but its three words, so the
// duty's thread goes on (polls) meanwhile; it ends when it has the lock, when flock fails, or at
// its stop flag (checked again after each EINTR: a signal to the process, or kWaiterSignal).
bool ArbiterDuty::StartWaiter() {
  InstallWaiterSignal();
  if (waiter_done_fd_ < 0) waiter_done_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (waiter_done_fd_ < 0) return false;  // no eventfd (out of fds): this round polls as before
  waiter_stop_.store(false, std::memory_order_relaxed);
  waiter_state_.store(kWaiting, std::memory_order_relaxed);
  waiter_ = std::thread([this, fd = fd_, done = waiter_done_fd_] {
    int state = kStopped;
    while (!waiter_stop_.load(std::memory_order_acquire)) {
      if (::flock(fd, LOCK_EX) == 0) {
        state = kLocked;
        break;
      }
      if (errno != EINTR) {
        state = kFailed;
        break;
      }
    }
    waiter_state_.store(state, std::memory_order_release);
    const uint64_t one = 1;
    (void)!::write(done, &one, sizeof(one));
  });
  return true;
}

void ArbiterDuty::StopWaiter() {
  if (!waiter_.joinable()) return;
  waiter_stop_.store(true, std::memory_order_release);
  // Until the waiter has ended: a signal that came between its flag check and its flock call
  // interrupted nothing, the next one (a millisecond later) does.
  while (waiter_state_.load(std::memory_order_acquire) == kWaiting) {
    ::pthread_kill(waiter_.native_handle(), kWaiterSignal);
    pollfd done{.fd = waiter_done_fd_, .events = POLLIN, .revents = 0};
    (void)::poll(&done, 1, 1);
  }
  waiter_.join();
  // A waiter that got the lock as it was stopped leaves it held: the destructor's close drops it.
}

// Reconciliation: the board gets the registry's live tenants of this GPU. A registry that cannot
// be read leaves the board as it is (the supervisors report the file; tenants keep their leases).
enforce::NodeSegment* ArbiterDuty::Segment(bool registry_changed) {
  // A join or leave replaces at most a few counters files (a new tenant's): map those again, not
  // the whole segment. Retried every 100 ms while it cannot be opened (the first join creates it).
  if (registry_changed && segment_.has_value() && segment_->RefreshCounters().ok()) return &*segment_;
  if (registry_changed || !segment_.has_value()) {
    segment_.reset();
    StatusOr<enforce::NodeSegment> s = enforce::NodeSegment::Open(node_.paths().policy, node_.paths().counters);
    if (s.ok()) segment_.emplace(std::move(*s));
  }
  return segment_.has_value() ? &*segment_ : nullptr;
}

void ArbiterDuty::Sync(const enforce::NodeSegment* segment) {
  if (!registry_.has_value()) {
    StatusOr<std::vector<TenantEntry>> entries = node_.RegistryEntries();
    if (!entries.ok()) return;
    // A tenant on a MIG instance is not time-sliced: the hardware isolates it (node_dir.h).
    std::erase_if(*entries, [&](const TenantEntry& t) {
      return std::find(t.gpus.begin(), t.gpus.end(), gpu_) == t.gpus.end() || !t.mig_instance.empty();
    });
    registry_ = std::move(*entries);
  }
  std::map<uint32_t, LeaseTenantConfig> want;
  for (const TenantEntry& t : node_.LiveEntries(*registry_, segment)) {
    LeaseTenantConfig c;
    c.tenant_id = static_cast<uint32_t>(t.index);
    c.weight = static_cast<uint32_t>(std::max(1, t.share));
    c.priority = t.priority;
    c.kernel_estimate = std::chrono::microseconds(t.kernel_estimate_us);
    want[c.tenant_id] = c;
  }
  for (auto it = have_.begin(); it != have_.end();) {
    auto w = want.find(it->first);
    if (w == want.end() || w->second.weight != it->second.weight || w->second.priority != it->second.priority ||
        w->second.kernel_estimate != it->second.kernel_estimate) {
      (void)arbiter_->RemoveTenant(it->first);  // re-added below with the new settings
      it = have_.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [slot, c] : want) {
    if (have_.count(slot)) continue;
    if (arbiter_->AddTenant(slot, c).ok()) have_[slot] = c;
  }
}

}  // namespace tessera::node
