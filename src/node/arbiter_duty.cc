#include "tessera/node/arbiter_duty.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
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
  if (arbiter_ != nullptr) arbiter_->Stop(enforce::MonotonicNowNs());
  if (fd_ >= 0) ::close(fd_);
}

namespace {

// Whether this duty reconciles node directory `dir` now: true at most once per 100 ms per
// directory in this process (other directories, e.g. a test's several nodes, keep their own turn).
bool ReconcileTurn(const std::string& dir, uint64_t now_ns) {
  static std::mutex mu;
  static std::map<std::string, uint64_t> last_ns;
  std::lock_guard<std::mutex> lock(mu);
  uint64_t& last = last_ns[dir];
  if (last != 0 && now_ns < last + 100'000'000) return false;
  last = now_ns;
  return true;
}

}  // namespace

void ArbiterDuty::Round(std::chrono::milliseconds max_wait) {
  if (arbiter_ == nullptr && !TryTakeOver()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return;
  }
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
      const bool turn = segment != nullptr && ReconcileTurn(node_.paths().dir, now);
      if (turn) segment->Reconcile();
      next_reconcile_ns_ = now + (turn ? 100'000'000 : 1'000'000'000);
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
       after + static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(max_wait).count())});
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

bool ArbiterDuty::TryTakeOver() {
  if (fd_ < 0) {
    fd_ = OpenNodeLockFile(node_.paths().ArbiterLock(gpu_));
    if (fd_ < 0) return false;
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) return false;
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
    std::erase_if(*entries, [&](const TenantEntry& t) {
      return std::find(t.gpus.begin(), t.gpus.end(), gpu_) == t.gpus.end();
    });
    registry_ = std::move(*entries);
  }
  std::map<uint32_t, LeaseTenantConfig> want;
  for (const TenantEntry& t : node_.KeepLive(*registry_, segment)) {
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
