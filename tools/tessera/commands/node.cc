// `tessera run` and `tessera node status`: run a command under libtessera-shim.so on a single node
// without a control plane, and show what the node segment says.
//   tessera run --tenant T --gpu 0 --mem 8GiB --share 30 [--priority P] [--scrub] -- CMD ARGS...
//   tessera node status [--json]
//
// The node directory (TESSERA_RUN_DIR, else $XDG_RUNTIME_DIR/tessera, else /tmp/tessera-<uid>)
// holds the memory segment (`policy`, `counters`), the lease file (`leases`, one board per GPU),
// the tenant registry (`tenants.json`) and lock files. The first `tessera run` creates them
// (16 GPUs' worth); later ones join. Every change of the registry happens under an exclusive
// flock on `node.lock`.
//
// A tenant (by name) gets the lowest free tenant index; a second `tessera run` with the same name
// joins it (same index, so all its processes share its memory counter and its lease; the latest
// --mem/--share/--priority win). An entry lives while one of its `tessera run` processes lives, or
// while any live process holds a segment slot of its index (a daemon that outlived its run: the
// index and limit stay reserved). Every join and leave reconciles dead processes first, and the
// GPU's arbiter does every 100 ms; a new tenant on a reused index starts with zeroed statistics.
// --scrub (zero device memory before every free, docs/enforcement.md) is sticky: once one run of a
// tenant asked for it, it stays on for all of the tenant's processes until the entry is gone, so a
// later run without --scrub never turns off a protection that a running process relies on.
//
// The lease arbiter of a GPU runs inside the `tessera run` processes of that GPU, guarded by an
// flock on `arbiter-gpu<N>.lock`: whoever holds it drives the GPU's board (weights = shares) and
// re-reads the registry every 100 ms; the others poll the lock every 50 ms while their command
// runs, so when the holder exits (or is killed: the kernel drops the flock) another takes over
// within 50 ms and resumes from the board. No daemon to start, nothing left running afterwards.
//
// Worked example: `tessera run --tenant a --gpu 0 --mem 64MiB --share 30 -- ./train` creates the
// node directory, registers a (index 0, limit 64 MiB on GPU 0, share 30), becomes GPU 0's arbiter
// and runs ./train with LD_PRELOAD=libtessera-shim.so and TESSERA_SHIM_TENANT=0; its exit code is
// tessera's. A second `tessera run --tenant b ... --share 70` gets index 1 and its launches wait
// for leases the first process grants 30/70.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tessera/daemon/lease_arbiter.h"
#include "tessera/enforce/lease.h"
#include "tessera/enforce/lease_file.h"
#include "tessera/enforce/segment.h"
#include "tools/tessera/commands/commands.h"

namespace tessera::cli {
namespace {

using nlohmann::json;

struct NodePaths {
  std::string dir, policy, counters, leases, registry, lock;
};

NodePaths Paths() {
  std::string dir;
  if (const char* d = std::getenv("TESSERA_RUN_DIR"); d != nullptr && *d != '\0') {
    dir = d;
  } else if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x != nullptr && *x != '\0') {
    dir = std::string(x) + "/tessera";
  } else {
    dir = "/tmp/tessera-" + std::to_string(::getuid());
  }
  return {dir, dir + "/policy", dir + "/counters", dir + "/leases", dir + "/tenants.json", dir + "/node.lock"};
}

// "8GiB", "512MiB", "1.5GB", "4096" (bytes). Errors name the text and the accepted units.
StatusOr<uint64_t> ParseBytes(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number = text.substr(0, i), unit = text.substr(i);
  static const std::map<std::string, double> kUnits = {
      {"", 1.0},          {"B", 1.0},           {"KiB", 1024.0},    {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"KB", 1e3}, {"MB", 1e6},
      {"GB", 1e9},        {"TB", 1e12}};
  char* end = nullptr;
  const double v = number.empty() ? -1 : std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || v <= 0) {
    return InvalidArgumentError("--mem '" + text + "': not a positive size like 8GiB or 512MiB");
  }
  auto it = kUnits.find(unit);
  if (it == kUnits.end()) {
    return InvalidArgumentError("--mem '" + text + "': unknown unit '" + unit +
                                "' (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)");
  }
  const double bytes = v * it->second;
  if (bytes >= static_cast<double>(enforce::kMaxCountedBytes)) {
    return InvalidArgumentError("--mem '" + text + "': above the segment's 1 TiB per tenant and GPU");
  }
  return static_cast<uint64_t>(bytes);
}

bool Alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

// An flock held for the lifetime of the object.
class FileLock {
 public:
  FileLock(const std::string& path, int op) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ >= 0 && ::flock(fd_, op) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

json LoadRegistry(const NodePaths& p) {
  std::ifstream in(p.registry);
  json j = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("tenants")) j = json{{"version", 1}, {"tenants", json::array()}};
  return j;
}

Status SaveRegistry(const NodePaths& p, const json& j) {
  const std::string tmp = p.registry + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << "\n";
    if (!out) return InternalError("cannot write '" + tmp + "'");
  }
  if (std::rename(tmp.c_str(), p.registry.c_str()) != 0) {
    return InternalError("cannot rename '" + tmp + "': " + std::strerror(errno));
  }
  return Status::Ok();
}

// Drops dead pids and tenants without live pids (their limit goes back to 0 = no access). A
// tenant whose runs are gone but one of whose processes still holds a slot (a daemon) keeps its
// entry, index and limit (fail closed: the index is not handed to anyone else); without the
// segment nothing can be told, and the entry stays too.
void Prune(json& reg, enforce::NodeSegment* seg) {
  json kept = json::array();
  for (json t : reg["tenants"]) {
    json pids = json::array();
    for (const json& pid : t["pids"]) {
      if (Alive(pid.get<long>())) pids.push_back(pid);
    }
    if (pids.empty() && (seg == nullptr || seg->TenantHasLiveSlots(t["index"].get<int>()))) {
      t["pids"] = pids;
      kept.push_back(t);
      continue;
    }
    if (pids.empty()) {
      if (seg != nullptr) {
        (void)seg->SetLimit(t["index"].get<int>(), t["gpu"].get<int>(), 0);
        (void)seg->SetTenantFlags(t["index"].get<int>(), 0);
      }
      continue;
    }
    t["pids"] = pids;
    kept.push_back(t);
  }
  reg["tenants"] = kept;
}

struct RunFlags {
  std::string tenant;
  int gpu = 0;
  std::string mem;
  int share = 0;
  int priority = 0;
  int kernel_estimate_us = 1000;
  bool scrub = false;
  std::vector<std::string> command;
};

// Creates or joins the node and registers (tenant, this pid). Returns the tenant index.
StatusOr<int> Join(const NodePaths& p, const RunFlags& f, uint64_t mem_bytes) {
  if (::mkdir(p.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return InternalError("node directory '" + p.dir + "': " + std::strerror(errno));
  }
  FileLock lock(p.lock, LOCK_EX);
  if (!lock.held()) return InternalError("cannot lock '" + p.lock + "'");
  std::optional<enforce::NodeSegment> seg;
  if (::access(p.policy.c_str(), F_OK) != 0 || ::access(p.leases.c_str(), F_OK) != 0) {
    enforce::SegmentOptions options;
    options.policy_path = p.policy;
    options.counters_path = p.counters;
    options.num_gpus = enforce::kMaxGpus;
    TESSERA_ASSIGN_OR_RETURN(enforce::NodeSegment created, enforce::NodeSegment::Create(options));
    seg.emplace(std::move(created));
    TESSERA_ASSIGN_OR_RETURN(enforce::LeaseFile leases, enforce::LeaseFile::Create(p.leases, enforce::kMaxGpus));
    (void)leases;
    TESSERA_RETURN_IF_ERROR(SaveRegistry(p, json{{"version", 1}, {"tenants", json::array()}}));
  } else {
    TESSERA_ASSIGN_OR_RETURN(enforce::NodeSegment opened, enforce::NodeSegment::Open(p.policy, p.counters));
    seg.emplace(std::move(opened));
  }
  json reg = LoadRegistry(p);
  seg->Reconcile();  // dead processes' charges go before any index is chosen or reused
  Prune(reg, &*seg);
  int index = -1;
  std::set<int> used;
  for (json& t : reg["tenants"]) {
    used.insert(t["index"].get<int>());
    if (t["name"] == f.tenant) {
      if (t["gpu"].get<int>() != f.gpu) {
        return FailedPreconditionError("tenant '" + f.tenant + "' already runs on GPU " +
                                       std::to_string(t["gpu"].get<int>()) + " (one GPU per tenant)");
      }
      index = t["index"].get<int>();
      t["mem_bytes"] = mem_bytes;
      t["share"] = f.share;
      t["priority"] = f.priority;
      t["kernel_estimate_us"] = f.kernel_estimate_us;
      t["scrub"] = t.value("scrub", false) || f.scrub;  // sticky (header comment)
      t["pids"].push_back(static_cast<long>(::getpid()));
    }
  }
  if (index < 0) {
    for (int i = 0; i < enforce::kMaxTenants && index < 0; ++i) {
      if (!used.count(i) && !seg->TenantHasLiveSlots(i)) index = i;
    }
    if (index < 0) return ResourceExhaustedError("all " + std::to_string(enforce::kMaxTenants) + " tenants in use");
    TESSERA_RETURN_IF_ERROR(seg->ResetTenantStats(index));  // a new tenant: its own peak and counters
    reg["tenants"].push_back(json{{"name", f.tenant},   {"index", index},       {"gpu", f.gpu},
                                  {"mem_bytes", mem_bytes}, {"share", f.share}, {"priority", f.priority},
                                  {"kernel_estimate_us", f.kernel_estimate_us}, {"scrub", f.scrub},
                                  {"pids", json::array({static_cast<long>(::getpid())})}});
  }
  bool scrub = f.scrub;
  for (const json& t : reg["tenants"]) {
    if (t["index"].get<int>() == index) scrub = t.value("scrub", false);
  }
  TESSERA_RETURN_IF_ERROR(seg->SetTenantFlags(index, scrub ? enforce::kTenantScrubOnFree : 0));
  TESSERA_RETURN_IF_ERROR(seg->SetLimit(index, f.gpu, mem_bytes));
  TESSERA_RETURN_IF_ERROR(SaveRegistry(p, reg));
  return index;
}

void Leave(const NodePaths& p) {
  FileLock lock(p.lock, LOCK_EX);
  if (!lock.held()) return;
  StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::Open(p.policy, p.counters);
  json reg = LoadRegistry(p);
  for (json& t : reg["tenants"]) {
    json pids = json::array();
    for (const json& pid : t["pids"]) {
      if (pid.get<long>() != static_cast<long>(::getpid())) pids.push_back(pid);
    }
    t["pids"] = pids;
  }
  if (seg.ok()) seg->Reconcile();
  Prune(reg, seg.ok() ? &*seg : nullptr);
  (void)SaveRegistry(p, reg);
}

std::string ShimPath() {
  if (const char* s = std::getenv("TESSERA_SHIM_PATH"); s != nullptr && *s != '\0') return s;
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string dir = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string(".");
  dir = dir.substr(0, dir.rfind('/'));
  for (const std::string& c : {dir + "/libtessera-shim.so", dir + "/../lib/libtessera-shim.so"}) {
    if (::access(c.c_str(), R_OK) == 0) return c;
  }
  return dir + "/libtessera-shim.so";
}

volatile sig_atomic_t g_child = 0;
void Forward(int sig) {
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), sig);
}

// The GPU's arbiter while this process holds arbiter-gpu<N>.lock (see the header comment).
class ArbiterDuty {
 public:
  ArbiterDuty(const NodePaths& p, int gpu) : paths_(p), gpu_(gpu) {}
  ~ArbiterDuty() {
    if (arbiter_ != nullptr) arbiter_->Stop(enforce::MonotonicNowNs());
    if (fd_ >= 0) ::close(fd_);
  }
  // One round: try to become the arbiter, or step. Returns after at most ~50 ms.
  void Round() {
    if (arbiter_ == nullptr && !TryTakeOver()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return;
    }
    const uint64_t now = enforce::MonotonicNowNs();
    if (now >= next_sync_ns_) {
      if (seg_.has_value()) seg_->Reconcile();  // SIGKILLed processes: released within 100 ms
      Sync();
      next_sync_ns_ = now + 100'000'000;
    }
    std::atomic<uint32_t>& doorbell = leases_->board(gpu_).arbiter.doorbell;
    const uint32_t seen = doorbell.load(std::memory_order_acquire);
    const uint64_t next = arbiter_->Step(enforce::MonotonicNowNs());
    const uint64_t after = enforce::MonotonicNowNs();
    const uint64_t until = std::min<uint64_t>(next, after + 50'000'000);
    if (until > after) enforce::FutexWait(doorbell, seen, until - after);
  }

 private:
  bool TryTakeOver() {
    const std::string path = paths_.dir + "/arbiter-gpu" + std::to_string(gpu_) + ".lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd_ < 0) return false;
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      ::close(fd_);
      fd_ = -1;
      return false;
    }
    StatusOr<enforce::LeaseFile> f = enforce::LeaseFile::Open(paths_.leases);
    if (!f.ok()) return false;
    leases_.emplace(std::move(*f));
    StatusOr<std::unique_ptr<daemon::LeaseArbiter>> a =
        daemon::LeaseArbiter::Create(&leases_->board(gpu_), daemon::LeaseArbiterOptions{});
    if (!a.ok()) return false;
    arbiter_ = std::move(*a);
    StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::Open(paths_.policy, paths_.counters);
    if (seg.ok()) seg_.emplace(std::move(*seg));
    return true;
  }
  void Sync() {
    json reg;
    {
      FileLock lock(paths_.lock, LOCK_SH);
      reg = LoadRegistry(paths_);
    }
    std::map<uint32_t, daemon::LeaseTenantConfig> want;
    for (const json& t : reg["tenants"]) {
      if (t["gpu"].get<int>() != gpu_) continue;
      bool live = seg_.has_value() && seg_->TenantHasLiveSlots(t["index"].get<int>());  // e.g. a daemon
      for (const json& pid : t["pids"]) live = live || Alive(pid.get<long>());
      if (!live) continue;
      daemon::LeaseTenantConfig c;
      c.tenant_id = t["index"].get<uint32_t>();
      c.weight = static_cast<uint32_t>(std::max(1, t["share"].get<int>()));
      c.priority = t["priority"].get<int32_t>();
      c.kernel_estimate = std::chrono::microseconds(t.value("kernel_estimate_us", 1000));
      want[c.tenant_id] = c;
    }
    for (auto it = have_.begin(); it != have_.end();) {
      auto w = want.find(it->first);
      if (w == want.end() || w->second.weight != it->second.weight || w->second.priority != it->second.priority ||
          w->second.kernel_estimate != it->second.kernel_estimate) {
        (void)arbiter_->RemoveTenant(it->first);
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

  NodePaths paths_;
  int gpu_;
  int fd_ = -1;
  std::optional<enforce::LeaseFile> leases_;
  std::optional<enforce::NodeSegment> seg_;  // for the periodic Reconcile and live-slot checks
  std::unique_ptr<daemon::LeaseArbiter> arbiter_;
  std::map<uint32_t, daemon::LeaseTenantConfig> have_;
  uint64_t next_sync_ns_ = 0;
};

int Run(const RunFlags& f) {
  if (f.command.empty()) {
    std::fprintf(stderr, "tessera run: no command given (usage: tessera run --tenant T --gpu 0 --mem 8GiB "
                         "--share 30 -- CMD ARGS...)\n");
    return kExitBadInput;
  }
  if (f.tenant.empty()) {
    std::fprintf(stderr, "tessera run: --tenant is empty\n");
    return kExitBadInput;
  }
  StatusOr<uint64_t> mem = ParseBytes(f.mem);
  if (!mem.ok()) {
    std::fprintf(stderr, "tessera run: %s\n", mem.status().message().c_str());
    return kExitBadInput;
  }
  const NodePaths paths = Paths();
  StatusOr<int> index = Join(paths, f, *mem);
  if (!index.ok()) {
    std::fprintf(stderr, "tessera run: %s\n", index.status().ToString().c_str());
    return kExitFailure;
  }
  ArbiterDuty duty(paths, f.gpu);
  // Before the command's first launch, the GPU's arbiter (this process or another `tessera run`)
  // must have the tenant on its board: a launch of a tenant without an active slot is not gated.
  // Up to 2 s (an arbiter re-reads the registry every 100 ms); after that the command runs anyway.
  StatusOr<enforce::LeaseFile> leases = enforce::LeaseFile::Open(paths.leases);
  for (int i = 0; i < 40; ++i) {
    duty.Round();
    if (!leases.ok() || leases->board(f.gpu).slots[*index].node.state.load() ==
                            static_cast<uint32_t>(enforce::LeaseSlotState::kActive)) {
      break;
    }
  }
  std::string preload = ShimPath();
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old != '\0') preload += std::string(" ") + old;
  const pid_t child = ::fork();
  if (child == 0) {
    ::setenv("LD_PRELOAD", preload.c_str(), 1);
    ::setenv("TESSERA_SHIM_POLICY", paths.policy.c_str(), 1);
    ::setenv("TESSERA_SHIM_COUNTERS", paths.counters.c_str(), 1);
    ::setenv("TESSERA_SHIM_LEASES", paths.leases.c_str(), 1);
    ::setenv("TESSERA_SHIM_TENANT", std::to_string(*index).c_str(), 1);
    ::setenv("TESSERA_SHIM_GPUS", std::to_string(f.gpu).c_str(), 1);
    std::vector<char*> argv;
    std::vector<std::string> args = f.command;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "tessera run: cannot run '%s': %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  if (child < 0) {
    std::fprintf(stderr, "tessera run: fork: %s\n", std::strerror(errno));
    Leave(paths);
    return kExitFailure;
  }
  g_child = child;
  ::signal(SIGINT, Forward);
  ::signal(SIGTERM, Forward);
  ::signal(SIGHUP, Forward);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (r < 0 && errno != EINTR) break;
    duty.Round();
  }
  Leave(paths);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitFailure;
}

int NodeStatus(bool as_json) {
  const NodePaths paths = Paths();
  if (::access(paths.policy.c_str(), F_OK) != 0) {
    if (as_json) {
      std::printf("%s\n", json{{"dir", paths.dir}, {"gpus", json::array()}}.dump(2).c_str());
      return kExitOk;
    }
    std::printf("no tessera node at %s (no `tessera run` has created it)\n", paths.dir.c_str());
    return kExitOk;
  }
  json reg;
  {
    FileLock lock(paths.lock, LOCK_SH);
    reg = LoadRegistry(paths);
  }
  StatusOr<enforce::NodeSegment> seg = enforce::NodeSegment::Open(paths.policy, paths.counters);
  StatusOr<enforce::LeaseFile> leases = enforce::LeaseFile::Open(paths.leases);
  if (!seg.ok() || !leases.ok()) {
    std::fprintf(stderr, "tessera node status: %s\n",
                 (!seg.ok() ? seg.status() : leases.status()).ToString().c_str());
    return kExitFailure;
  }
  std::map<int, json> gpus;
  for (const json& t : reg["tenants"]) {
    const int gpu = t["gpu"].get<int>(), index = t["index"].get<int>();
    json pids = json::array();
    for (const json& pid : t["pids"]) {
      if (Alive(pid.get<long>())) pids.push_back(pid);
    }
    if (pids.empty() && !seg->TenantHasLiveSlots(index)) continue;
    const enforce::LeaseTenantSlot& slot = leases->board(gpu).slots[index];
    json row = {{"name", t["name"]},
                {"index", index},
                {"limit_bytes", seg->policy().tenants[index].limit_bytes[gpu].load()},
                {"used_bytes", seg->ReservedBytes(index, gpu)},
                {"peak_bytes", seg->PeakBytes(index, gpu)},
                {"share", t["share"]},
                {"priority", t["priority"]},
                {"scrub", (seg->TenantFlags(index) & enforce::kTenantScrubOnFree) != 0},
                {"pids", pids},
                {"launches", slot.tenant.launches.load()},
                {"charged_ns", slot.node.charged_ns.load()}};
    gpus[gpu]["gpu"] = gpu;
    gpus[gpu]["arbiter_alive"] =
        enforce::ArbiterAlive(leases->board(gpu), enforce::MonotonicNowNs(), 1'000'000'000);
    gpus[gpu]["tenants"].push_back(row);
  }
  json out = {{"dir", paths.dir}, {"gpus", json::array()}};
  for (auto& [g, v] : gpus) out["gpus"].push_back(v);
  if (as_json) {
    std::printf("%s\n", out.dump(2).c_str());
    return kExitOk;
  }
  std::printf("node %s\n", paths.dir.c_str());
  for (const json& g : out["gpus"]) {
    std::printf("GPU %d (arbiter %s)\n", g["gpu"].get<int>(), g["arbiter_alive"].get<bool>() ? "running" : "not running");
    std::printf("  %-16s %5s %14s %14s %6s %8s %10s %5s\n", "tenant", "index", "limit MiB", "used MiB", "share",
                "priority", "launches", "scrub");
    for (const json& t : g["tenants"]) {
      std::printf("  %-16s %5d %14.1f %14.1f %6d %8d %10llu %5s\n", t["name"].get<std::string>().c_str(),
                  t["index"].get<int>(), t["limit_bytes"].get<double>() / 1048576.0,
                  t["used_bytes"].get<double>() / 1048576.0, t["share"].get<int>(), t["priority"].get<int>(),
                  static_cast<unsigned long long>(t["launches"].get<uint64_t>()),
                  t["scrub"].get<bool>() ? "on" : "off");
    }
  }
  return kExitOk;
}

}  // namespace

void RegisterNode(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* run = app.add_subcommand("run", "Run a command under the shim with a memory limit and a compute share");
  run->add_option("--tenant", flags->tenant, "Tenant name (processes with the same name share limit and lease)")
      ->required();
  run->add_option("--gpu", flags->gpu, "Node GPU index")->required()->check(CLI::Range(0, enforce::kMaxGpus - 1));
  run->add_option("--mem", flags->mem, "Device memory limit, e.g. 8GiB, 512MiB")->required();
  run->add_option("--share", flags->share, "Compute share (weight), 1..100")->required()->check(CLI::Range(1, 100));
  run->add_option("--priority", flags->priority, "Priority (used by the priority policy)");
  run->add_option("--kernel-estimate-us", flags->kernel_estimate_us,
                  "The lease arbiter's duration model: GPU time of one kernel (default 1000)")
      ->check(CLI::Range(1, 10'000'000));
  run->add_flag("--scrub", flags->scrub,
                "Zero the tenant's device memory before every free (sticky while the tenant runs)");
  run->add_option("command", flags->command, "The command and its arguments (after --)");
  run->footer(
      "The node directory is $TESSERA_RUN_DIR, else $XDG_RUNTIME_DIR/tessera, else /tmp/tessera-<uid>.\n"
      "The GPU's lease arbiter runs inside the `tessera run` processes of that GPU (one at a time, by\n"
      "flock). Exit code: the command's (128 + signal if it was killed); 2 for bad flags.");
  run->callback([flags, exit_code] { *exit_code = Run(*flags); });

  auto as_json = std::make_shared<bool>(false);
  CLI::App* node = app.add_subcommand("node", "Show the node's tenants, limits, usage and shares");
  node->require_subcommand(1);
  CLI::App* status = node->add_subcommand("status", "Tenants, limits, current usage and shares per GPU");
  status->add_flag("--json", *as_json, "Print JSON");
  status->callback([as_json, exit_code] { *exit_code = NodeStatus(*as_json); });
}

}  // namespace tessera::cli
