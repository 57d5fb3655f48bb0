// tessera node arbiter --gpus 0,1 [--run-dir DIR] [--usage-ledger FILE --usage-period S]
// The node side for tenants that have no supervisor of their own (Slurm tasks started by
// spank_tessera.so): runs the lease arbiter duty (tessera/node/arbiter_duty.h) of each listed GPU
// on a thread until SIGINT or SIGTERM. Several arbiters of one GPU (this, `tessera run`, the
// agent) elect one holder by flock, so it is safe beside them. With --usage-ledger it also meters
// the node's tenants (tessera/node/usage_meter.h) into a ledger file `tessera bill` reads. Once a
// second it kills the processes of a tenant whose own counters file was broken
// (node::EndTenantsWithBrokenCounters: its memory is no longer accounted).
// Flags, signals and the file only.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <map>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tessera/core/gpu_model.h"
#include "tessera/enforce/nvml.h"
#include "tessera/node/gpu_table.h"
#include "tessera/enforce/segment.h"
#include "tessera/metering/ledger_file.h"
#include "tessera/node/usage_meter.h"
#include "tessera/node/arbiter_duty.h"
#include "tessera/node/node_dir.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

constexpr char kCommand[] = "node arbiter";

struct ArbiterFlags {
  std::vector<int> gpus;
  std::string run_dir;
  std::string usage_ledger;
  int64_t usage_period_s = 60;
  std::string node_name;
  std::string gpu_model;
  std::string nvml = "libnvidia-ml.so.1";
};

// The catalog model of each listed GPU: --gpu-model for all, else what NVML names.
StatusOr<std::map<int, std::string>> GpuModels(const ArbiterFlags& f) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  std::map<int, std::string> models;
  if (!f.gpu_model.empty()) {
    StatusOr<GpuModelId> id = catalog.Find(f.gpu_model);
    if (!id.ok()) return InvalidArgumentError("--gpu-model: " + std::string(id.status().message()));
    for (int gpu : f.gpus) models[gpu] = catalog.info(*id).name;
    return models;
  }
  enforce::DlopenNvml nvml({.library_path = f.nvml});
  if (Status st = nvml.Init(); !st.ok()) {
    return UnavailableError("--usage-ledger needs each GPU's model: NVML (--nvml " + f.nvml + "): " +
                            std::string(st.message()) + "; or give --gpu-model");
  }
  for (int gpu : f.gpus) {
    StatusOr<std::string> name = nvml.DeviceName(static_cast<uint32_t>(gpu));
    StatusOr<GpuModelId> id = name.ok() ? catalog.FindByNvmlName(*name) : StatusOr<GpuModelId>(name.status());
    if (!id.ok()) {
      (void)nvml.Shutdown();
      return UnavailableError("GPU " + std::to_string(gpu) + ": " + std::string(id.status().message()) +
                              " (give --gpu-model)");
    }
    models[gpu] = catalog.info(*id).name;
  }
  (void)nvml.Shutdown();
  return models;
}

// Appends the samples to the ledger as JSON lines, and syncs them to disk.
Status AppendSamples(const std::string& path, const std::string& node_name,
                     const std::vector<api::UsageSample>& samples) {
  if (samples.empty()) return Status::Ok();
  std::string text;
  for (const api::UsageSample& s : samples) {
    text += metering::RenderUsageLine(
        {.key = {.tenant = s.tenant, .node = node_name, .gpu = s.gpu, .model = s.model, .partition = s.partition,
                 .workload = s.workload},
         .values = {.seq = s.seq,
                    .start = s.start_s,
                    .end = s.end_s,
                    .gpu_milli_s_allocated = s.gpu_milli_s_allocated,
                    .gpu_milli_s_used = s.gpu_milli_s_used,
                    .memory_mib_s = s.memory_mib_s,
                    .peak_memory_mib = s.peak_memory_mib,
                    .kernel_launches = s.kernel_launches,
                    .bytes_transferred = s.bytes_transferred}});
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return UnavailableError("--usage-ledger " + path + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      return UnavailableError("--usage-ledger " + path + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  return Status::Ok();
}

// Looks at the node every 250 ms and appends the due samples; flushes the open ones when stopping.
void MeterLoop(const std::string& dir, const ArbiterFlags& f, std::map<int, std::string> models,
               const std::atomic<bool>& stopping) {
  node::UsageMeter meter({.gpu_models = std::move(models),
                          .period_s = f.usage_period_s,
                          .start_s = static_cast<int64_t>(::time(nullptr))});
  const node::NodeDir node_dir(dir);
  size_t unmetered_told = 0;
  auto report = [&](const Status& st) {
    if (!st.ok()) std::fprintf(stderr, "tessera node arbiter: usage: %s\n", std::string(st.message()).c_str());
  };
  while (!stopping.load(std::memory_order_relaxed)) {
    // Departures first: a tenant that left since the last look is closed with its last counters.
    StatusOr<std::vector<node::Departure>> gone = node_dir.TakeDepartures();
    if (gone.ok()) {
      report(AppendSamples(f.usage_ledger, f.node_name, meter.Depart(*gone)));
    } else {
      report(gone.status());
    }
    StatusOr<node::NodeStatus> status = node_dir.ReadStatus();
    const int64_t now = static_cast<int64_t>(::time(nullptr));
    if (status.ok()) {
      report(AppendSamples(f.usage_ledger, f.node_name, meter.Observe(*status, now)));
      for (; unmetered_told < meter.unmetered().size(); ++unmetered_told) {
        std::fprintf(stderr, "tessera node arbiter: usage: tenant %s is on a GPU this arbiter does not drive: not metered\n",
                     meter.unmetered()[unmetered_told].c_str());
      }
    } else {
      report(status.status());
    }
    for (int i = 0; i < 5 && !stopping.load(std::memory_order_relaxed); ++i) {  // a look every 250 ms
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // Stopping: the departures recorded since the last look first (a task that left just before the
  // stop is billed to its release, not lost), then every open interval.
  if (StatusOr<std::vector<node::Departure>> gone = node_dir.TakeDepartures(); gone.ok()) {
    report(AppendSamples(f.usage_ledger, f.node_name, meter.Depart(*gone)));
  }
  report(AppendSamples(f.usage_ledger, f.node_name, meter.Flush(static_cast<int64_t>(::time(nullptr)))));
}

int RunArbiter(const ArbiterFlags& f) {
  const std::string dir = f.run_dir.empty() ? node::DefaultNodeDir() : f.run_dir;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Fail(kCommand, "--run-dir " + dir + ": " + std::strerror(errno), kExitBadInput);
  }
  // The GPUs' facts for joining tasks (gpu_table.h): without them each task asks NVML itself.
  if (Status st = node::PublishGpuTable(dir, f.nvml, f.gpus); !st.ok()) {
    std::fprintf(stderr, "tessera node arbiter: no GPU table in %s (each task will ask NVML itself): %s\n",
                 dir.c_str(), std::string(st.message()).c_str());
  }
  StatusOr<std::map<int, std::string>> models = std::map<int, std::string>{};
  if (!f.usage_ledger.empty()) {
    models = GpuModels(f);
    if (!models.ok()) return Fail(kCommand, std::string(models.status().message()), kExitBadInput);
    const int fd = ::open(f.usage_ledger.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Fail(kCommand, "--usage-ledger " + f.usage_ledger + ": " + std::strerror(errno), kExitBadInput);
    ::close(fd);
    if (Status st = node::NodeDir(dir).KeepDepartures(); !st.ok()) return Fail(kCommand, std::string(st.message()), kExitFailure);
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);  // the threads inherit the mask; sigwait takes them
  std::atomic<bool> stopping{false};
  std::vector<std::thread> threads;
  for (int gpu : f.gpus) {
    threads.emplace_back([&stopping, dir, gpu] {
      node::ArbiterDuty duty(node::NodeDir(dir), gpu);
      while (!stopping.load(std::memory_order_relaxed)) duty.Round();
    });
  }
  if (!f.usage_ledger.empty()) {
    threads.emplace_back([&stopping, dir, &f, models = *models] { MeterLoop(dir, f, models, stopping); });
  }
  threads.emplace_back([&stopping, dir] {  // once a second: tenants whose counters file broke end
    for (int tick = 0; !stopping.load(std::memory_order_relaxed); tick = (tick + 1) % 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      if (tick != 0) continue;
      StatusOr<std::vector<node::EndedTenant>> ended = node::EndTenantsWithBrokenCounters(node::NodeDir(dir));
      for (const node::EndedTenant& e : ended.ok() ? *ended : std::vector<node::EndedTenant>{}) {
        std::fprintf(stderr, "tessera node arbiter: tenant %s killed (%zu process(es)): %s; its memory is no longer accounted\n",
                     e.name.c_str(), e.pids.size() + e.pgids.size(), e.reason.c_str());
      }
    }
  });
  std::string list;
  for (int gpu : f.gpus) list += (list.empty() ? "" : ",") + std::to_string(gpu);
  std::printf("tessera node arbiter: driving GPU(s) %s of %s\n", list.c_str(), dir.c_str());
  if (!f.usage_ledger.empty()) {
    std::printf("tessera node arbiter: metering usage into %s every %lld s as node %s\n", f.usage_ledger.c_str(),
                static_cast<long long>(f.usage_period_s), f.node_name.c_str());
  }
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  stopping = true;
  for (std::thread& t : threads) t.join();
  return kExitOk;
}

}  // namespace

void AddNodeArbiter(CLI::App* node, int* exit_code) {
  auto flags = std::make_shared<ArbiterFlags>();
  CLI::App* arbiter = node->add_subcommand(
      "arbiter", "Drive the GPUs' compute leases for tenants without a supervisor (Slurm tasks); runs until stopped");
  arbiter->add_option("--gpus", flags->gpus, "Node GPU indexes, e.g. 0,1")
      ->required()
      ->delimiter(',')
      ->check(CLI::Range(0, enforce::kMaxGpus - 1));
  arbiter->add_option("--run-dir", flags->run_dir,
                      "Node directory (default: $TESSERA_RUN_DIR, else $XDG_RUNTIME_DIR/tessera, else "
                      "/tmp/tessera-<uid>); created when missing; spank_tessera.so's node_dir=");
  arbiter->add_option("--usage-ledger", flags->usage_ledger,
                      "Meter the node's tenants into this ledger file (JSON lines, appended; what `tessera bill "
                      "--usage` reads): per tenant (the Slurm account) and workload (slurm-job-<id>), GPU time "
                      "allocated and used, memory held. Default: no metering");
  arbiter->add_option("--usage-period", flags->usage_period_s,
                      "Seconds between a tenant's usage samples (default 60); a tenant that leaves gets its last "
                      "sample within a second")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  arbiter->add_option("--node-name", flags->node_name, "The node's name in the usage samples (default: the host name)");
  arbiter->add_option("--gpu-model", flags->gpu_model,
                      "The GPUs' model for the usage samples, a catalog name such as A100-40GB (default: what NVML "
                      "names each GPU)");
  arbiter->add_option("--nvml", flags->nvml, "NVML library to ask for the GPUs' facts (written to <run-dir>/gpus.tsv for joining tasks) and models (default libnvidia-ml.so.1)");
  arbiter->callback([flags, exit_code] {
    if (flags->node_name.empty()) {
      char host[256] = {};
      flags->node_name = ::gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0' ? host : "localhost";
    }
    *exit_code = RunArbiter(*flags);
  });
}

}  // namespace tessera::cli
