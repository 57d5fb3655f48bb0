// The agent's workloads (tessera/node/agent.h): slots, supervisor processes, their files, and
// re-adoption after a restart.
#include <algorithm>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/node/agent_impl.h"
#include "tessera/enforce/segment.h"
#include "tessera/node/agent.h"
#include "tessera/node/launcher.h"

extern char** environ;

namespace tessera::node {

using nlohmann::json;

namespace internal {

StatusOr<api::DesiredState> ParseDesiredState(std::string_view body) {
  StatusOr<api::DesiredState> desired = api::DecodeDesiredState(body, nullptr);
  if (!desired.ok()) return desired.status().WithPrefix("desired state");
  return desired;
}

std::string PartitionOf(const DesiredWorkload& d) {
  if (d.mode.rfind("mig:", 0) == 0) return d.mode.substr(4);
  if (d.mode == "exclusive") return "whole";
  return "share";
}

std::string SlotName(int64_t id) { return "w" + std::to_string(id); }
std::string WorkloadFile(const std::string& dir, int64_t id) { return dir + "/" + SlotName(id) + ".json"; }
std::string ExitFile(const std::string& dir, int64_t id) { return dir + "/" + SlotName(id) + ".exit"; }
std::string LogFile(const std::string& dir, int64_t id) { return dir + "/" + SlotName(id) + ".log"; }

Status WriteFileAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError("cannot write '" + tmp + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      return InternalError("cannot write '" + tmp + "': " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) return InternalError("cannot write '" + tmp + "': " + std::strerror(errno));
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return InternalError("cannot replace '" + path + "': " + std::strerror(errno));
  return Status::Ok();
}

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (errno == ENOENT) return NotFoundError("'" + path + "' does not exist");
    return InternalError("cannot read '" + path + "': " + std::strerror(errno));
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

uint64_t ProcessStartTicks(long pid) {
  if (pid <= 0) return 0;
  StatusOr<std::string> stat = ReadWholeFile("/proc/" + std::to_string(pid) + "/stat");
  if (!stat.ok()) return 0;
  const size_t paren = stat->rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return 0;
  std::istringstream rest(stat->substr(paren + 2));
  std::string field;
  // Field 3 (state) is the first after ')'; the start time is field 22.
  for (int i = 3; i <= 22 && rest >> field; ++i) {
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
}

}  // namespace internal

namespace {

json WorkloadJson(const HeldWorkload& w) {
  return json{{"id", w.id},
              {"tenant", w.tenant},
              {"slot", w.slot},
              {"partition", w.partition},
              {"gpus", w.gpus},
              {"mem_bytes", w.mem_bytes},
              {"share", w.share},
              {"priority", w.priority},
              {"gpu_milli", w.gpu_milli},
              {"mps_thread_pct", w.mps_thread_pct},
              {"mig_start", w.mig_start},
              {"mig_uuid", w.mig_uuid},
              {"command", w.command},
              {"pid", w.pid},
              {"pid_start_ticks", w.pid_start_ticks},
              {"stopping", w.stop_deadline_ms > 0},
              {"end_reason", w.end_reason},
              {"uid", w.uid},
              {"next_seq", w.next_seq},
              {"usage_from_s", w.usage_from_s},
              {"reported_launches", w.reported_launches},
              {"reported_charged_ns", w.reported_charged_ns}};
}

StatusOr<HeldWorkload> WorkloadFromJson(const std::string& path, const std::string& text) {
  json j = json::parse(text, nullptr, false);
  const std::string bad = "'" + path + "': ";
  if (j.is_discarded() || !j.is_object()) return DataLossError(bad + "not a JSON object");
  HeldWorkload w;
  try {
    w.id = j.at("id").get<int64_t>();
    w.tenant = j.at("tenant").get<std::string>();
    w.slot = j.at("slot").get<std::string>();
    w.partition = j.at("partition").get<std::string>();
    // Files of earlier agents: one GPU ("gpu") and scalar counters.
    w.gpus = j.contains("gpus") ? j.at("gpus").get<std::vector<int>>() : std::vector<int>{j.at("gpu").get<int>()};
    w.mem_bytes = j.at("mem_bytes").get<uint64_t>();
    w.share = j.at("share").get<int>();
    w.priority = j.at("priority").get<int>();
    w.gpu_milli = j.at("gpu_milli").get<int>();
    w.command = j.at("command").get<std::vector<std::string>>();
    w.pid = j.at("pid").get<long>();
    w.pid_start_ticks = j.at("pid_start_ticks").get<uint64_t>();
    w.next_seq = j.at("next_seq").get<int64_t>();
    w.usage_from_s = j.at("usage_from_s").get<int64_t>();
    for (auto [key, field] : {std::pair{"reported_launches", &w.reported_launches},
                              std::pair{"reported_charged_ns", &w.reported_charged_ns}}) {
      const json& v = j.at(key);
      *field = v.is_array() ? v.get<std::vector<uint64_t>>() : std::vector<uint64_t>{v.get<uint64_t>()};
    }
    w.end_reason = j.value("end_reason", std::string());  // absent in files of older agents
    w.mps_thread_pct = j.value("mps_thread_pct", 0);
    w.mig_start = j.value("mig_start", -1);  // absent in files of older agents
    w.mig_uuid = j.value("mig_uuid", "");
    w.uid = j.value("uid", -1L);  // absent: an agent without tenant uids (its own)
    if (j.value("stopping", false)) w.stop_deadline_ms = 1;  // past: finish stopping it now
  } catch (const json::exception& e) {
    return DataLossError(bad + "field missing or of the wrong type (" + e.what() + ")");
  }
  const bool gpus_ok = !w.gpus.empty() && std::is_sorted(w.gpus.begin(), w.gpus.end()) &&
                       std::adjacent_find(w.gpus.begin(), w.gpus.end()) == w.gpus.end() && w.gpus.front() >= 0 &&
                       w.gpus.back() < enforce::kMaxGpus;
  if (!gpus_ok || w.reported_launches.size() != w.gpus.size() || w.reported_charged_ns.size() != w.gpus.size() ||
      w.slot != internal::SlotName(w.id))
    return DataLossError(bad + "gpus, their counters or slot out of range");
  return w;
}

// The code in w<id>.exit, if the supervisor wrote one.
std::optional<int> ReadExitCode(const std::string& path) {
  StatusOr<std::string> text = internal::ReadWholeFile(path);
  if (!text.ok()) return std::nullopt;
  char* end = nullptr;
  const long code = std::strtol(text->c_str(), &end, 10);
  if (end == text->c_str()) return std::nullopt;
  return static_cast<int>(code);
}

}  // namespace

Status Agent::SaveWorkload(const HeldWorkload& w) const {
  return internal::WriteFileAtomically(internal::WorkloadFile(AgentDir(), w.id), WorkloadJson(w).dump() + "\n");
}

Status Agent::Hold(const internal::DesiredWorkload& d, int64_t now_ms) {
  std::vector<int> gpus = d.pods.front().gpus;  // the decoder refuses an empty list
  std::sort(gpus.begin(), gpus.end());
  int64_t smallest_mib = 0;  // a whole-GPU pod's limit: the memory of its smallest GPU
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i] < 0 || gpus[i] >= static_cast<int>(inventory_.gpus.size()))
      return FailedPreconditionError("placed on GPU " + std::to_string(gpus[i]) + ", which this node does not have");
    if (i > 0 && gpus[i] == gpus[i - 1])
      return FailedPreconditionError("placed on GPU " + std::to_string(gpus[i]) + " twice");
    const int64_t mib = inventory_.gpus[static_cast<size_t>(gpus[i])].memory_mib;
    smallest_mib = i == 0 ? mib : std::min(smallest_mib, mib);
  }
  const int gpu = gpus.front();
  const uint64_t mem_bytes = static_cast<uint64_t>(d.gpu_mem_mib > 0 ? d.gpu_mem_mib : smallest_mib) << 20;
  auto it = held_.find(d.id);
  if (it != held_.end()) {
    HeldWorkload& w = it->second;
    if (w.ended || w.stop_deadline_ms > 0) return Status::Ok();
    if (w.gpus != gpus) {  // moved to other GPUs of this node: stop here; the next round starts it again
      StopWorkload(w, now_ms);
      return Status::Ok();
    }
    if (w.mem_bytes == mem_bytes && w.share == d.gpu_milli && w.priority == d.priority) return Status::Ok();
    TESSERA_RETURN_IF_ERROR(node_.Join({.name = w.slot, .gpus = gpus, .mem_bytes = mem_bytes, .share = d.gpu_milli,
                                        .priority = d.priority, .uid = w.uid, .mig_instance = w.mig_uuid},
                                       static_cast<long>(::getpid()))
                                .status());
    Log("workload " + std::to_string(d.id) + ": limit " + std::to_string(mem_bytes >> 20) + " MiB, share " +
        std::to_string(d.gpu_milli) + ", priority " + std::to_string(d.priority) + " (was " +
        std::to_string(w.mem_bytes >> 20) + " MiB, " + std::to_string(w.share) + ", " + std::to_string(w.priority) + ")");
    w.mem_bytes = mem_bytes;
    w.share = d.gpu_milli;
    w.priority = d.priority;
    w.gpu_milli = d.gpu_milli;
    ++stats_.limit_changes;
    return SaveWorkload(w);
  }
  TESSERA_RETURN_IF_ERROR(MigInstanceReady(d));  // a MIG workload waits for its instance (agent_mig.cc)
  HeldWorkload w;
  w.id = d.id;
  w.tenant = d.tenant;
  w.slot = internal::SlotName(d.id);
  w.partition = internal::PartitionOf(d);
  w.gpus = gpus;
  w.reported_launches.assign(gpus.size(), 0);
  w.reported_charged_ns.assign(gpus.size(), 0);
  w.mem_bytes = mem_bytes;
  w.share = d.gpu_milli;
  w.priority = d.priority;
  w.gpu_milli = d.gpu_milli;
  if (IsMpsMode(d.mode)) w.mps_thread_pct = MpsThreadPercentage(d.mode, d.gpu_milli);
  if (!d.mig_profile.empty()) w.mig_start = d.pods.front().mig_start;
  w.command = d.command;
  w.usage_from_s = now_ms / 1000;
  if (auto back = released_usage_end_s_.find(d.id); back != released_usage_end_s_.end())
    w.usage_from_s = std::max(w.usage_from_s, back->second);
  w.next_seq = now_ms;
  // Before the slot is joined: its counters file is created for (chown'ed to) the tenant's uid.
  StatusOr<long> uid = TenantUid(d.tenant);
  if (uid.status().code() == StatusCode::kResourceExhausted) {
    // Not retried each round: every uid of the range is some tenant's for good (allotments are
    // stable), so the workload ends at once with a reason the control plane shows. It never ran:
    // no slot, no usage sample.
    const std::string why(uid.status().message());
    Log("workload " + std::to_string(d.id) + ": " + why + "; reported as failed (" + std::string(api::kNoTenantUid) + ")");
    events_.push_back({d.id, std::string(api::kNoTenantUid), why.substr(0, 1000)});
    w.ended = true;
    w.exit_code = 126;
    w.end_reason = std::string(api::kNoTenantUid);
    w.final_sampled = true;
    TESSERA_RETURN_IF_ERROR(SaveWorkload(w));
    finished_.push_back({w.id, w.exit_code, w.end_reason});
    held_[w.id] = std::move(w);
    return Status::Ok();
  }
  TESSERA_RETURN_IF_ERROR(uid.status());
  w.uid = *uid;
  // A MIG slot names its instance (not time-sliced, one tenant per instance: node_dir.h); its
  // supervisor joins with the same UUID (Spawn). Without the agent's NVML the supervisor's own
  // lookup fails closed (PinMigInstance).
  if (w.mig_start >= 0 && options_.mig_nvml != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(w.mig_uuid, MigInstanceUuid(*options_.mig_nvml, gpus.front(), w.mig_start));
  }
  TESSERA_RETURN_IF_ERROR(node_.Join({.name = w.slot, .gpus = gpus, .mem_bytes = mem_bytes, .share = d.gpu_milli,
                                      .priority = d.priority, .uid = w.uid, .mig_instance = w.mig_uuid},
                                     static_cast<long>(::getpid()))
                              .status());
  // The lease boards' counters of a reused index start where the last tenant left them.
  if (StatusOr<NodeStatus> s = node_.ReadStatus(); s.ok()) {
    for (const GpuStatus& g : s->gpus)
      for (const TenantStatus& t : g.tenants)
        for (size_t i = 0; i < w.gpus.size(); ++i)
          if (t.name == w.slot && g.gpu == w.gpus[i]) {
            w.reported_launches[i] = t.launches;
            w.reported_charged_ns[i] = t.charged_ns;
          }
  }
  // From here an error leaves the slot again before it is returned: the next round joins afresh.
  // Left joined, the entry would keep the agent's pid as a member (once more at every round), and
  // with it its index and limit, for as long as the agent lives.
  auto leave_on_error = [&](Status st) {
    if (!st.ok()) (void)node_.LeaveTenant(w.slot, static_cast<long>(::getpid()));
    return st;
  };
  for (int g : gpus) EnsureArbiter(g);
  (void)::unlink(internal::ExitFile(AgentDir(), w.id).c_str());
  // An MPS client needs its GPU's control daemon first. Without the control program the workload
  // cannot run as asked (it is not run without MPS either): it fails with a reason that says so.
  // Another error (the daemon would not start) leaves it unheld: the next round tries again.
  // One control daemon per GPU, and a client reaches one daemon: an MPS pod has one GPU.
  Status mps = w.mps_thread_pct == 0 ? Status::Ok()
               : gpus.size() > 1
                   ? FailedPreconditionError("an MPS workload runs on one GPU (one MPS control daemon per GPU; a client "
                                             "connects to one); this pod has " + std::to_string(gpus.size()))
                   : EnsureMps(gpu);
  if (!mps.ok() && mps.code() != StatusCode::kFailedPrecondition) return leave_on_error(mps);
  if (!mps.ok()) {
    Log("workload " + std::to_string(d.id) + ": " + std::string(mps.message()) + "; reported as failed (" +
        std::string(api::kMpsUnavailable) + ")");
    events_.push_back({d.id, std::string(api::kMpsUnavailable), std::string(mps.message()).substr(0, 1000)});
    w.ended = true;
    w.exit_code = 126;
    w.end_reason = std::string(api::kMpsUnavailable);
  } else if (!w.command.empty()) {
    if (Status spawned = Spawn(w); !spawned.ok()) return leave_on_error(spawned);
  }
  TESSERA_RETURN_IF_ERROR(SaveWorkload(w));
  Log("workload " + std::to_string(d.id) + " (" + d.tenant + "): slot " + w.slot + " on GPU " + GpuList(gpus) +
      ", limit " + std::to_string(mem_bytes >> 20) + " MiB, share " + std::to_string(d.gpu_milli) +
      (w.uid >= 0 ? ", uid " + std::to_string(w.uid) : std::string()) +
      (w.pid > 0 ? ", supervisor pid " + std::to_string(w.pid) : std::string(w.command.empty() ? ", no command" : "")));
  ++stats_.started;
  if (w.ended) finished_.push_back({w.id, w.exit_code, w.end_reason});
  held_[w.id] = std::move(w);
  return Status::Ok();
}

Status Agent::Spawn(HeldWorkload& w) {
  std::vector<std::string> args = {options_.supervisor,
                                   "run",
                                   "--tenant",
                                   w.slot,
                                   "--gpu",
                                   GpuList(w.gpus),
                                   "--mem",
                                   std::to_string(w.mem_bytes) + "B",
                                   "--share",
                                   std::to_string(w.share),
                                   "--priority",
                                   std::to_string(w.priority),
                                   "--nvml",
                                   options_.nvml_library,
                                   "--exit-file",
                                   internal::ExitFile(AgentDir(), w.id)};
  // A MIG workload sees its instance only, by its MIG device UUID (launcher.h, PinMigInstance): read
  // when the slot was joined (Hold) if the agent has NVML open, else by the supervisor from the
  // instance's first slice.
  if (w.mig_start >= 0) {
    args.insert(args.end(), {"--mig-instance", w.mig_uuid.empty() ? std::to_string(w.mig_start) : w.mig_uuid});
  }
  std::vector<std::pair<std::string, std::string>> added = options_.child_env;
  if (w.uid >= 0) {
    // The supervisor stays the agent's uid; the command runs under the tenant's, with a HOME it
    // may write (the agent's would not be).
    TESSERA_ASSIGN_OR_RETURN(std::string home, TenantHome(w.uid));
    args.insert(args.end(), {"--uid", std::to_string(w.uid)});
    added.emplace_back("HOME", std::move(home));
  }
  args.push_back("--");
  args.insert(args.end(), w.command.begin(), w.command.end());
  std::vector<std::string> env;
  // The MPS variables are the workload's own: a non-MPS workload never inherits the agent's.
  std::set<std::string> overridden = {"TESSERA_RUN_DIR", "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
                                      "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"};
  if (w.mps_thread_pct > 0) {
    for (auto& kv : MpsClientEnvironment(mps_.Paths(w.gpus.front()), w.mps_thread_pct, w.mem_bytes,
                                         options_.context_allowance_mib))
      added.push_back(std::move(kv));
  }
  for (const auto& [k, v] : added) overridden.insert(k);
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (!overridden.count(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  env.push_back("TESSERA_RUN_DIR=" + options_.run_dir);
  for (const auto& [k, v] : added) env.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  const std::string log = internal::LogFile(AgentDir(), w.id);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A session of its own: the agent's terminal signals and its death do not reach the workload.
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, options_.supervisor.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    return InternalError("cannot start '" + options_.supervisor + "': " + std::strerror(rc));
  w.pid = pid;
  w.pid_start_ticks = internal::ProcessStartTicks(pid);
  return Status::Ok();
}

void Agent::Reap(int64_t now_ms) {
  for (auto& [id, w] : held_) {
    if (w.ended || w.pid <= 0) continue;
    int status = 0;
    const pid_t r = ::waitpid(static_cast<pid_t>(w.pid), &status, WNOHANG);
    bool gone = false;
    std::optional<int> code;
    if (r == w.pid) {
      gone = true;
      code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    } else if (r < 0 && errno == ECHILD) {  // adopted after a restart: not our child
      gone = internal::ProcessStartTicks(w.pid) != w.pid_start_ticks;
    }
    if (!gone) {
      if (w.stop_deadline_ms > 0 && now_ms >= w.stop_deadline_ms) {
        // Past the grace: the supervisor and every process group of the slot.
        if (StatusOr<std::vector<TenantEntry>> live = node_.LiveTenants(); live.ok()) {
          for (const TenantEntry& e : *live)
            if (e.name == w.slot)
              for (long g : e.pgids) ::kill(-static_cast<pid_t>(g), SIGKILL);
        }
        ::kill(static_cast<pid_t>(w.pid), SIGKILL);
      }
      continue;
    }
    w.ended = true;
    // The supervisor's own record is the command's code; without it (killed before it wrote
    // one, or adopted), what waitpid said, else -1 (unknown: reported as failed).
    w.exit_code = ReadExitCode(internal::ExitFile(AgentDir(), id)).value_or(code.value_or(-1));
    if (w.stop_deadline_ms == 0) {
      finished_.push_back({id, w.exit_code, w.end_reason});
      Log("workload " + std::to_string(id) + " ended with exit code " + std::to_string(w.exit_code) +
          (w.end_reason.empty() ? "" : " (" + w.end_reason + ")"));
    }
  }
  // Ended workloads leave their slots once their last usage sample is taken (SampleUsage).
}

void Agent::StopWorkload(HeldWorkload& w, int64_t now_ms) {
  w.stop_deadline_ms = now_ms + options_.stop_grace_ms;
  if (w.pid > 0 && !w.ended) ::kill(static_cast<pid_t>(w.pid), SIGTERM);  // forwarded to the command's group
  if (w.pid <= 0) w.ended = true;  // only a slot: nothing to wait for
  Log("workload " + std::to_string(w.id) + ": no longer desired here; stopping it");
  (void)SaveWorkload(w);
}

Status Agent::Release(HeldWorkload& w) {
  // Forget what is an hour older than this end: a workload back after that cannot overlap it.
  std::erase_if(released_usage_end_s_, [&](const auto& e) { return e.second < w.usage_from_s - 3600; });
  released_usage_end_s_[w.id] = w.usage_from_s;
  return node_.LeaveTenant(w.slot, static_cast<long>(::getpid()));
}

Status Agent::Adopt() {
  DIR* dir = ::opendir(AgentDir().c_str());
  if (dir == nullptr) return InternalError("cannot read '" + AgentDir() + "': " + std::strerror(errno));
  std::vector<std::string> files;
  while (dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name.size() > 6 && name[0] == 'w' && name.compare(name.size() - 5, 5, ".json") == 0)
      files.push_back(AgentDir() + "/" + name);
  }
  ::closedir(dir);
  for (const std::string& path : files) {
    TESSERA_ASSIGN_OR_RETURN(const std::string text, internal::ReadWholeFile(path));
    TESSERA_ASSIGN_OR_RETURN(HeldWorkload w, WorkloadFromJson(path, text));
    const bool alive = w.pid > 0 && internal::ProcessStartTicks(w.pid) == w.pid_start_ticks;
    if (w.pid > 0 && !alive) {
      w.ended = true;
      w.exit_code = ReadExitCode(internal::ExitFile(AgentDir(), w.id)).value_or(-1);
      if (w.stop_deadline_ms == 0) finished_.push_back({w.id, w.exit_code, w.end_reason});
    } else if (w.pid <= 0 && w.stop_deadline_ms > 0) {
      w.ended = true;
    }
    if (!w.ended) {
      // The slot is joined again by name: same index, same limit; nothing in the segment resets.
      TESSERA_RETURN_IF_ERROR(node_.Join({.name = w.slot, .gpus = w.gpus, .mem_bytes = w.mem_bytes,
                                          .share = w.share, .priority = w.priority, .uid = w.uid,
                                          .mig_instance = w.mig_uuid},
                                         static_cast<long>(::getpid()))
                                  .status());
      for (int g : w.gpus) EnsureArbiter(g);
    }
    Log("re-adopted workload " + std::to_string(w.id) + " (" + w.tenant + ", slot " + w.slot +
        (w.uid >= 0 ? ", uid " + std::to_string(w.uid) : std::string()) +
        (alive ? ", running" : w.ended ? ", ended" : ", no command") + ")");
    held_[w.id] = std::move(w);
  }
  return Status::Ok();
}

}  // namespace tessera::node
