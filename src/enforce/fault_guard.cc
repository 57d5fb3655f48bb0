#include "tessera/enforce/fault_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace tessera::enforce {
namespace {

constexpr int kMaxRanges = 4096;

// One registered mapping. `base` is published last (release) and cleared first: the handler
// trusts a range whose base it reads non-zero.
struct Range {
  std::atomic<bool> used{false};  // claimed by Register (before base is published)
  std::atomic<std::uintptr_t> base{0};
  std::atomic<std::size_t> length{0};
  std::atomic<std::uint64_t> ino{0};
  std::atomic<std::uint64_t> faults{0};
};

Range g_ranges[kMaxRanges];
std::atomic<int> g_high{0};  // ranges [0, g_high) were ever used: the handler scans no further
std::atomic<std::uint64_t> g_total_faults{0};
std::uintptr_t g_page_size = 4096;
struct sigaction g_previous {};
std::mutex g_install_mutex;
std::atomic<bool> g_installed{false};

// Hands a SIGBUS that is not ours to the disposition from before the guard.
void Forward(int sig, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default (or ignored, which cannot stop a fault from repeating): restore the default and
  // return, so that the access faults again and the process dies of it as it would have.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  const auto addr = reinterpret_cast<std::uintptr_t>(info != nullptr ? info->si_addr : nullptr);
  const int high = g_high.load(std::memory_order_acquire);
  for (int i = 0; i < high && addr != 0; ++i) {
    const std::uintptr_t base = g_ranges[i].base.load(std::memory_order_acquire);
    if (base == 0 || addr < base || addr - base >= g_ranges[i].length.load(std::memory_order_relaxed)) continue;
    void* page = reinterpret_cast<void*>(addr & ~(g_page_size - 1));
    if (::mmap(page, g_page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
        MAP_FAILED) {
      g_ranges[i].faults.fetch_add(1, std::memory_order_relaxed);
      g_total_faults.fetch_add(1, std::memory_order_relaxed);
      errno = saved_errno;
      return;
    }
    break;  // could not replace the page: the fault is fatal after all
  }
  errno = saved_errno;
  Forward(sig, info, context);
}

bool Install() {
  if (g_installed.load(std::memory_order_acquire)) return true;
  std::lock_guard<std::mutex> lock(g_install_mutex);
  if (g_installed.load(std::memory_order_relaxed)) return true;
  const long page = ::sysconf(_SC_PAGESIZE);
  if (page > 0) g_page_size = static_cast<std::uintptr_t>(page);
  struct sigaction action {};
  action.sa_sigaction = OnSigbus;
  action.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  if (::sigaction(SIGBUS, &action, &g_previous) != 0) return false;
  g_installed.store(true, std::memory_order_release);
  return true;
}

}  // namespace

int FaultGuard::Register(const void* base, std::size_t length, std::uint64_t ino) {
  if (base == nullptr || length == 0 || !Install()) return -1;
  for (int i = 0; i < kMaxRanges; ++i) {
    bool expected = false;
    if (!g_ranges[i].used.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) continue;
    g_ranges[i].length.store(length, std::memory_order_relaxed);
    g_ranges[i].ino.store(ino, std::memory_order_relaxed);
    g_ranges[i].faults.store(0, std::memory_order_relaxed);
    int high = g_high.load(std::memory_order_relaxed);
    while (high < i + 1 && !g_high.compare_exchange_weak(high, i + 1, std::memory_order_acq_rel)) {
    }
    g_ranges[i].base.store(reinterpret_cast<std::uintptr_t>(base), std::memory_order_release);
    return i;
  }
  return -1;
}

void FaultGuard::Unregister(int id) {
  if (id < 0 || id >= kMaxRanges) return;
  g_ranges[id].base.store(0, std::memory_order_release);
  g_ranges[id].ino.store(0, std::memory_order_relaxed);
  g_ranges[id].used.store(false, std::memory_order_release);
}

std::uint64_t FaultGuard::Faults(int id) {
  if (id < 0 || id >= kMaxRanges) return 0;
  return g_ranges[id].faults.load(std::memory_order_relaxed);
}

std::uint64_t FaultGuard::TotalFaults() { return g_total_faults.load(std::memory_order_relaxed); }

bool FaultGuard::InodeFaulted(std::uint64_t ino) {
  if (ino == 0) return false;
  const int high = g_high.load(std::memory_order_acquire);
  for (int i = 0; i < high; ++i) {
    if (g_ranges[i].base.load(std::memory_order_acquire) != 0 && g_ranges[i].ino.load(std::memory_order_relaxed) == ino &&
        g_ranges[i].faults.load(std::memory_order_relaxed) > 0) {
      return true;
    }
  }
  return false;
}

}  // namespace tessera::enforce
