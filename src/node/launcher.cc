#include "tessera/node/launcher.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tessera/enforce/nvml.h"
#include "tessera/node/arbiter_duty.h"

namespace tessera::node {
namespace {

// The command's process group while RunTenantCommand supervises it (signal handlers read it).
volatile sig_atomic_t g_group = 0;
void Forward(int sig) {
  if (g_group > 0) ::kill(-static_cast<pid_t>(g_group), sig);
}

std::string DefaultShimPath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string dir = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string(".");
  dir = dir.substr(0, dir.rfind('/'));
  for (const std::string& c : {dir + "/libtessera-shim.so", dir + "/../lib/libtessera-shim.so"}) {
    if (::access(c.c_str(), R_OK) == 0) return c;
  }
  return dir + "/libtessera-shim.so";
}

bool Matches(const std::string& item, int gpu, const std::string& uuid) {
  if (item == std::to_string(gpu)) return true;
  // CUDA accepts a unique prefix of a UUID ("GPU-fa4e").
  return !uuid.empty() && item.size() > 4 && item.rfind("GPU-", 0) == 0 && uuid.rfind(item, 0) == 0;
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

class SignalForwarding {
 public:
  explicit SignalForwarding(pid_t group) {
    g_group = group;
    struct sigaction sa {};
    sa.sa_handler = Forward;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SignalForwarding() {
    for (int i = 0; i < 3; ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
    g_group = 0;
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[3];
};

// Hands the terminal's foreground to `group` (a command in its own group must still be able to
// read the terminal and get ^C) when this process has it. Returns whether it did.
bool GiveTerminal(pid_t group) {
  if (::isatty(STDIN_FILENO) == 0 || ::tcgetpgrp(STDIN_FILENO) != ::getpgrp()) return false;
  void (*old)(int) = ::signal(SIGTTOU, SIG_IGN);
  const bool ok = ::tcsetpgrp(STDIN_FILENO, group) == 0;
  ::signal(SIGTTOU, old);
  return ok;
}

void TakeTerminalBack() {
  void (*old)(int) = ::signal(SIGTTOU, SIG_IGN);
  (void)::tcsetpgrp(STDIN_FILENO, ::getpgrp());
  ::signal(SIGTTOU, old);
}

// Waits until the GPU's arbiter (this process or another supervisor) has the tenant's slot
// active on the board, stepping this process's duty meanwhile.
// For a tenant of several GPUs, once per GPU (each with that GPU's duty), before the command runs.
Status AwaitAdmission(ArbiterDuty& duty, int gpu, const NodeDir& node, const RunOptions& o, int index) {
  TESSERA_ASSIGN_OR_RETURN(enforce::LeaseFile leases, enforce::LeaseFile::OpenNodeLines(node.paths().leases));
  const auto deadline = std::chrono::steady_clock::now() + o.admit_timeout;
  for (;;) {
    duty.Round();
    if (leases.board(gpu).node[index].state.load() == static_cast<uint32_t>(enforce::LeaseSlotState::kActive)) {
      return Status::Ok();
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  return UnavailableError("GPU " + std::to_string(gpu) + "'s lease arbiter did not admit tenant '" +
                          o.tenant.name + "' within " + std::to_string(o.admit_timeout.count()) +
                          " ms (the process holding " + node.paths().ArbiterLock(gpu) +
                          " does not drive the board); not starting the command ungated");
}

// A standby supervisor's longest sleep: its counters-file check is once a second.
constexpr std::chrono::milliseconds kStandbyWait{1000};

// The arbiter duties of a multi-GPU tenant's GPUs after the first, each stepped by a thread of
// its own (Round waits on its board's doorbell, so one thread cannot drive two boards). Started
// after the command is forked (no thread that could hold a lock of the process runs while the
// child is between fork and exec; a standby duty's waiter sits in the flock syscall). A
// standby's round sleeps until its waiter has the lock or the stop's eventfd is written.
class ExtraDuties {
 public:
  explicit ExtraDuties(std::vector<std::unique_ptr<ArbiterDuty>>& duties) {
    if (duties.size() > 1) stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
    for (size_t i = 1; i < duties.size(); ++i) {
      ArbiterDuty* duty = duties[i].get();
      threads_.emplace_back([this, duty] {
        const ArbiterDuty::Wait wait{.holder = std::chrono::milliseconds(50),
                                     .standby = stop_fd_ >= 0 ? kStandbyWait : std::chrono::milliseconds(50),
                                     .wake_fd = stop_fd_};
        while (!stop_.load(std::memory_order_acquire)) duty->Round(wait);
      });
    }
  }
  ~ExtraDuties() {
    stop_.store(true, std::memory_order_release);
    const uint64_t one = 1;
    if (stop_fd_ >= 0) (void)!::write(stop_fd_, &one, sizeof(one));
    for (std::thread& t : threads_) t.join();
    if (stop_fd_ >= 0) ::close(stop_fd_);
  }
  ExtraDuties(const ExtraDuties&) = delete;
  ExtraDuties& operator=(const ExtraDuties&) = delete;

 private:
  std::atomic<bool> stop_{false};
  int stop_fd_ = -1;
  std::vector<std::thread> threads_;
};

// A pidfd of the command (readable once it has exited), for a standby's round to wake on; -1 where
// the kernel has none (Linux < 5.3): the supervisor's rounds then wait 50 ms at most, as before.
int CommandPidFd(pid_t child) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
#else
  (void)child;
  return -1;
#endif
}

// The gid a command run under `uid` gets: the uid's primary group from the password database,
// else the number of the uid itself (a uid with no account, e.g. one per tenant).
gid_t GroupOf(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != nullptr) return found->pw_gid;
  return static_cast<gid_t>(uid);
}

[[noreturn]] void ExecChild(const RunOptions& o, const LaunchOptions& launch, pid_t parent, bool foreground,
                            gid_t gid) {
  ::setpgid(0, 0);
  if (foreground) (void)GiveTerminal(::getpid());
  if (o.tenant.uid >= 0) {
    // Before PR_SET_PDEATHSIG: a change of the effective uid clears it.
    const auto uid = static_cast<uid_t>(o.tenant.uid);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 || ::setresuid(uid, uid, uid) != 0) {
      std::fprintf(stderr, "%s: cannot run as uid %ld: %s\n", o.log_prefix.c_str(), o.tenant.uid, std::strerror(errno));
      ::_exit(126);
    }
    // The dynamic loader skips an LD_PRELOAD it cannot read with a warning and runs the command
    // without it: fail closed instead.
    if (::access(launch.shim_path.c_str(), R_OK) != 0) {
      std::fprintf(stderr, "%s: uid %ld cannot read the shim '%s': %s; not running the command without it\n",
                   o.log_prefix.c_str(), o.tenant.uid, launch.shim_path.c_str(), std::strerror(errno));
      ::_exit(126);
    }
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(128 + SIGKILL);  // the supervisor died before prctl
  for (const auto& [name, value] : LaunchEnvironment(launch)) ::setenv(name.c_str(), value.c_str(), 1);
  std::vector<std::string> args = o.command;
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "%s: cannot run '%s': %s\n", o.log_prefix.c_str(), argv[0], std::strerror(errno));
  ::_exit(127);
}

}  // namespace

StatusOr<std::string> ResolveShim(const std::string& requested) {
  const std::string path = requested.empty() ? DefaultShimPath() : requested;
  const std::string fail = path + ": cannot load the shim (libtessera-shim.so, TESSERA_SHIM_PATH): ";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return InvalidArgumentError(fail + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgumentError(fail + "not a regular file");
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return InvalidArgumentError(fail + std::strerror(errno));
  char magic[4] = {};
  const ssize_t n = ::read(fd, magic, sizeof(magic));
  ::close(fd);
  if (n != 4 || std::memcmp(magic, "\x7f" "ELF", 4) != 0) {
    return InvalidArgumentError(fail + "not an ELF shared object");
  }
  return path;
}

StatusOr<GpuPin> PinGpu(int gpu, const std::string& nvml_library,
                        const std::optional<std::string>& caller_visible_devices) {
  NodeGpuFacts facts{.index = gpu};
  enforce::DlopenNvml nvml({.library_path = nvml_library});
  if (nvml.Init().ok()) {
    StatusOr<std::vector<NodeGpuFacts>> found = DiscoverGpuFacts(nvml, {gpu});
    (void)nvml.Shutdown();  // read-only use; a failed shutdown changes nothing for the pin
    if (!found.ok() && found.status().code() == StatusCode::kNotFound) {
      return InvalidArgumentError(std::string(found.status().message()));
    }
    if (found.ok()) facts = found->front();
  }
  return PinGpuFromFacts(facts, caller_visible_devices);
}

StatusOr<GpuPin> PinGpuFromFacts(const NodeGpuFacts& facts, const std::optional<std::string>& caller_visible_devices) {
  const int gpu = facts.index;
  GpuPin pin{.uuid = facts.uuid, .minor = facts.minor};
  if (caller_visible_devices.has_value()) {
    bool visible = false;
    const std::string& list = *caller_visible_devices;
    for (size_t start = 0; start <= list.size() && !visible;) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      visible = Matches(Trim(list.substr(start, comma - start)), gpu, pin.uuid);
      start = comma + 1;
    }
    if (!visible) {
      return InvalidArgumentError("GPU " + std::to_string(gpu) + " is not in CUDA_VISIBLE_DEVICES='" + list +
                                  "' (the caller's list may narrow, never widen, what the command sees)");
    }
  }
  pin.visible_devices = pin.uuid.empty() ? std::to_string(gpu) : pin.uuid;
  return pin;
}

StatusOr<std::string> MigInstanceUuid(const enforce::NvmlApi& nvml, int gpu, int start) {
  const std::string where = "MIG instance at slice " + std::to_string(start) + " of GPU " + std::to_string(gpu);
  const auto g = static_cast<uint32_t>(gpu);
  StatusOr<std::vector<enforce::GpuInstance>> gis = nvml.GpuInstances(g);
  if (!gis.ok()) return FailedPreconditionError(where + ": NVML: " + std::string(gis.status().message()));
  StatusOr<std::vector<enforce::MigDevice>> devices = nvml.MigDevices(g);
  if (!devices.ok()) return FailedPreconditionError(where + ": NVML: " + std::string(devices.status().message()));
  std::string starts;
  for (const enforce::GpuInstance& gi : *gis) {
    starts += (starts.empty() ? "" : ", ") + std::to_string(gi.placement.start);
    if (gi.placement.start != static_cast<uint32_t>(start)) continue;
    for (const enforce::MigDevice& d : *devices)
      if (d.gpu_instance_id == gi.id) return d.uuid;
    return NotFoundError(where + ": GPU instance " + std::to_string(gi.id) + " has no compute instance");
  }
  return NotFoundError(where + ": no GPU instance starts there (the GPU's instances start at: " +
                       (starts.empty() ? "none" : starts) + ")");
}

StatusOr<GpuPin> PinMigInstance(int gpu, int start, const std::string& nvml_library) {
  enforce::DlopenNvml nvml({.library_path = nvml_library});
  if (Status st = nvml.Init(); !st.ok()) {
    return FailedPreconditionError("MIG instance at slice " + std::to_string(start) + " of GPU " + std::to_string(gpu) +
                                   ": NVML: " + std::string(st.message()) +
                                   " (a MIG instance is selected by its UUID, which only NVML gives)");
  }
  StatusOr<std::string> uuid = MigInstanceUuid(nvml, gpu, start);
  StatusOr<uint32_t> minor = nvml.MinorNumber(static_cast<uint32_t>(gpu));
  (void)nvml.Shutdown();
  if (!uuid.ok()) return uuid.status();
  return GpuPin{.visible_devices = *uuid, .uuid = *uuid, .minor = minor.ok() ? static_cast<int>(*minor) : -1, .mig = true};
}

StatusOr<GpuPin> PinGpus(const std::vector<int>& gpus, const std::string& nvml_library,
                         const std::optional<std::string>& caller_visible_devices) {
  if (gpus.empty()) return InvalidArgumentError("no GPU given");
  std::vector<GpuPin> pins;
  for (int gpu : gpus) {
    TESSERA_ASSIGN_OR_RETURN(GpuPin one, PinGpu(gpu, nvml_library, caller_visible_devices));
    pins.push_back(std::move(one));
  }
  return JoinPins(pins);
}

GpuPin JoinPins(const std::vector<GpuPin>& pins) {
  if (pins.size() == 1) return pins.front();
  GpuPin all;
  bool every_uuid = true;
  for (const GpuPin& one : pins) {
    all.visible_devices += (all.visible_devices.empty() ? "" : ",") + one.visible_devices;
    all.uuid += (all.uuid.empty() ? "" : ",") + one.uuid;
    every_uuid = every_uuid && !one.uuid.empty();
  }
  if (!every_uuid) all.uuid.clear();
  return all;
}

std::vector<std::pair<std::string, std::string>> LaunchEnvironment(const LaunchOptions& o) {
  std::string preload = o.shim_path;
  if (!o.caller_ld_preload.empty()) preload += " " + o.caller_ld_preload;
  std::vector<std::pair<std::string, std::string>> env = {{"LD_PRELOAD", preload},
                                                           {"TESSERA_SHIM_POLICY", o.paths.policy},
                                                           {"TESSERA_SHIM_COUNTERS", o.paths.counters}};
  if (!o.pin.mig) env.emplace_back("TESSERA_SHIM_LEASES", o.paths.leases);
  env.emplace_back("TESSERA_SHIM_TENANT", std::to_string(o.tenant_index));
  env.emplace_back("TESSERA_SHIM_GPUS", GpuList(o.gpus));  // CUDA ordinal i is node GPU o.gpus[i]
  env.emplace_back("CUDA_VISIBLE_DEVICES", o.pin.visible_devices);
  return env;
}

StatusOr<RunResult> RunTenantCommand(const NodeDir& node, const RunOptions& o) {
  if (o.command.empty()) return InvalidArgumentError("no command given");
  if (o.tenant.name.empty()) return InvalidArgumentError("the tenant name is empty");
  // Checks first: nothing is registered, nothing runs, when the command could not be confined.
  TESSERA_ASSIGN_OR_RETURN(std::string shim, ResolveShim(o.shim_path));
  if (o.tenant.gpus.empty()) return InvalidArgumentError("no GPU given");
  const bool mig = o.mig_start >= 0 || !o.mig_uuid.empty();
  if (mig && o.tenant.gpus.size() != 1)
    return InvalidArgumentError("a MIG instance is on one GPU, not " + std::to_string(o.tenant.gpus.size()));
  if (!o.mig_uuid.empty() && !o.mig_uuid.starts_with("MIG-"))
    return InvalidArgumentError("MIG device '" + o.mig_uuid + "': not a MIG device UUID (MIG-...)");
  const GpuPin given_mig{.visible_devices = o.mig_uuid, .uuid = o.mig_uuid, .mig = true};
  TESSERA_ASSIGN_OR_RETURN(GpuPin pin, !o.mig_uuid.empty() ? StatusOr<GpuPin>(given_mig)
                                       : o.mig_start >= 0
                                           ? PinMigInstance(o.tenant.gpus.front(), o.mig_start, o.nvml_library)
                                           : PinGpus(o.tenant.gpus, o.nvml_library, o.caller_visible_devices));
  const long self = static_cast<long>(::getpid());
  TenantRequest tenant = o.tenant;
  if (mig) tenant.mig_instance = pin.uuid;  // not time-sliced, one tenant per instance (node_dir.h)
  TESSERA_ASSIGN_OR_RETURN(int index, node.Join(tenant, self));
  std::vector<std::unique_ptr<ArbiterDuty>> duties;
  for (int gpu : o.tenant.gpus) {
    // A MIG tenant is never admitted to the board; the duty still drives the GPU's other tenants.
    duties.push_back(std::make_unique<ArbiterDuty>(node, gpu));
    if (mig) continue;
    if (Status admitted = AwaitAdmission(*duties.back(), gpu, node, o, index); !admitted.ok()) {
      (void)node.Leave(self);  // the admission error is the one to report
      return admitted;
    }
  }
  ArbiterDuty& duty = *duties.front();
  const LaunchOptions launch{.paths = node.paths(), .shim_path = shim, .pin = pin, .gpus = o.tenant.gpus,
                             .tenant_index = index, .caller_ld_preload = o.caller_ld_preload};
  const bool foreground = ::isatty(STDIN_FILENO) != 0 && ::tcgetpgrp(STDIN_FILENO) == ::getpgrp();
  const pid_t parent = ::getpid();
  const gid_t gid = o.tenant.uid >= 0 ? GroupOf(static_cast<uid_t>(o.tenant.uid)) : 0;
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child == 0) ExecChild(o, launch, parent, foreground, gid);
  if (child < 0) {
    const int err = errno;
    (void)node.Leave(self);
    return InternalError(std::string("fork: ") + std::strerror(err));
  }
  ::setpgid(child, child);  // also in the child: whichever runs first
  if (foreground) (void)GiveTerminal(child);
  Status recorded = node.AddCommandGroup(self, child);
  int status = 0;
  RunResult result;
  {
    ExtraDuties extra(duties);
    SignalForwarding forwarding(child);
    if (!recorded.ok()) ::kill(-child, SIGKILL);  // not recorded = its slot could be reused
    auto next_check = std::chrono::steady_clock::now() + kStandbyWait;
    // The holder's round waits on its board's doorbell 50 ms at most (then the waitid below sees
    // an exit); a standby's sleeps in poll() until the command exits (its pidfd), the lock is
    // free or the counters check is due: about one wake-up a second (bench/node/agent_cpu.sh).
    const int exited_fd = CommandPidFd(child);
    for (;;) {
      // WNOWAIT: the exited leader stays a zombie, so its group id cannot be reused before the
      // group is killed below.
      siginfo_t info{};
      const int r = ::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT);
      if (r == 0 && info.si_pid == child) break;
      if (r < 0 && errno != EINTR) break;
      const auto to_check = std::chrono::ceil<std::chrono::milliseconds>(next_check - std::chrono::steady_clock::now());
      duty.Round({.holder = std::chrono::milliseconds(50),
                  .standby = exited_fd >= 0 ? std::clamp(to_check, std::chrono::milliseconds(0), kStandbyWait)
                                            : std::chrono::milliseconds(50),
                  .wake_fd = exited_fd});
      // The tenant's own counters file, as the agent checks its workloads' (no agent here): a
      // broken one no longer accounts the tenant's memory, so the command ends (fail closed).
      // The next check is scheduled after a violation too: a standby's round would otherwise poll
      // with no timeout until the killed command is gone (a GPU process can take seconds to die).
      if (std::chrono::steady_clock::now() < next_check) continue;
      next_check = std::chrono::steady_clock::now() + kStandbyWait;
      if (result.violation.empty()) {
        if (Status file = enforce::CheckCountersFile(node.paths().counters, index); !file.ok()) {
          result.violation = std::string(file.message()) + "; its memory is no longer accounted";
          ::kill(-child, SIGKILL);
        }
      }
    }
    if (exited_fd >= 0) ::close(exited_fd);
    ::kill(-child, SIGKILL);  // what the command left behind in its group goes with it
    while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (foreground) TakeTerminalBack();
  result.cleanup = node.Leave(self, child);
  TESSERA_RETURN_IF_ERROR(recorded);
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  } else {
    result.exit_code = 1;
  }
  return result;
}

}  // namespace tessera::node
