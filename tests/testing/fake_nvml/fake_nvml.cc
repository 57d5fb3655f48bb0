// A fake libnvidia-ml.so.1: the NVML C functions tessera's NVML adapter uses, implemented in
// memory with the MIG rules of tessera's GPU model catalog (tessera::core, generated from
// data/gpu-models/mig-profiles.json), so that the adapter is tested end to end (dlopen, dlsym,
// the C ABI, error strings) on machines without a GPU, for every MIG model the catalog knows.
//
// Configuration, read at the first nvmlInit_v2 after load or after the last nvmlShutdown:
//   TESSERA_FAKE_NVML_CONFIG   GPUs, comma-separated: MODEL[*N][:key=value]...
//       MODEL        a model of the catalog (GpuModelCatalog::Builtin()): A30-24GB,
//                    A100-40GB, A100-80GB, H100-80GB, H100-NVL-94GB, H200-141GB, B200-180GB,
//                    GH200-96GB have MIG; T4, V100M32, A10, ... do not
//       *N           N identical GPUs (1..64), e.g. "H200-141GB*8:mig=1"
//       mig=0|1      current MIG mode (default 0); pending=0|1 (default: same as mig)
//       used=MiB     device memory in use (default: the processes' sum)
//       util=G/M     utilisation percent of GPU and memory (default 0/0)
//       procs=P/MiB[/GI/CI];...   compute processes (GI/CI ids only under MIG)
//       putil=P/SM/MEM;...        per-process utilisation samples (percent)
//       plive=0|1                 1: each call's putil samples carry the time of the call
//                                 (CLOCK_REALTIME microseconds), as a driver that keeps sampling
//                                 busy processes; 0 (default): the fixed timestamp 1000000
//       procstride=24|32          element size written by ..._v3 (32 mimics some R535 builds)
//       minor=M                   the device node's minor number, /dev/nvidia<M> (default: the index)
//       gis=PROFILE@START;...     MIG instances that exist from the first nvmlInit_v2 on (mig=1):
//                                 a GI of catalog profile PROFILE at memory slice START with the
//                                 compute instance that fills it, in this order (ids 1, 2, ...),
//                                 so that separate processes (node side, `tessera slurm config`)
//                                 see the same instances, e.g. "A100-40GB:mig=1:gis=3g.20gb@4;3g.20gb@0"
//     e.g. "H100-80GB:mig=1,A100-40GB:mig=0:procs=4242/1024;4343/2048"
//   TESSERA_FAKE_NVML_FAIL     NAME:CODE[,NAME:CODE]... makes function NAME return CODE
//       (an nvmlReturn_t value) on every call, e.g. "nvmlDeviceGetMemoryInfo:999".
//   TESSERA_FAKE_GPU_STATE     a folder where the fake CUDA driver records each process's device
//       memory (tests/testing/fake_cuda/fake_cuda.h): its live processes are listed by
//       nvmlDeviceGetComputeRunningProcesses_v3 after the configured ones, each once with its
//       allocated bytes (every copy of the driver it loaded added up) plus
//       TESSERA_FAKE_GPU_CONTEXT_MIB (default 0), its context.
//   TESSERA_FAKE_NVML_MUTATION_LOG   a file to which every call that could change MIG state
//       appends its name, so a test can prove a read-only tool never made one.
//
// The driver's answers and refusals, with the codes nvml.h documents for each call ("If the
// requested GPU instance could not be created" -> INSUFFICIENT_RESOURCES; invalid arguments,
// placement included -> INVALID_ARGUMENT; "MIG mode not enabled or profile not supported" ->
// NOT_SUPPORTED), corrected where a real driver (R580.159.04, NVML 13, H200) was seen to differ:
//   GetMigMode, profile info or placements on a GPU without MIG       NOT_SUPPORTED
//   profile info and placements with MIG disabled: answered, as R580 does (nvml.h says
//     NOT_SUPPORTED); instance queries and creation with MIG off       NOT_SUPPORTED
//   profile index 0x11 or more (R580 refuses 0x11 although nvml.h's COUNT is 0x12)
//                                                                      INVALID_ARGUMENT
//   create GI: unknown profile id, start not among the profile's placements, wrong size
//                                                          INVALID_ARGUMENT
//   create GI: memory slices overlap an existing GI, the profile's max count reached, the
//     GPU's max GPU instances reached, more compute slices than the GPU has
//                                                          INSUFFICIENT_RESOURCES
//   CI profile index past COUNT                            INVALID_ARGUMENT
//   CI profile the GI does not offer (e.g. 3c in a 4g)     NOT_SUPPORTED
//   create CI with placement: start not among the CI profile's starts, wrong size
//                                                          INVALID_ARGUMENT
//   create CI: compute slices overlap a CI, the CI profile's max count reached
//                                                          INSUFFICIENT_RESOURCES
//   destroy a GI with compute instances or processes, a CI with processes   IN_USE
//   utilisation (device or per process) on a MIG-enabled GPU          NOT_SUPPORTED
//   MIG devices: one per compute instance, ordered by GPU instance then compute instance start;
//     a MIG device handle is its compute instance; its UUID "MIG-fa4e0000-0000-4000-8000-<gpu,
//     GI id, CI id as 4 hex digits each>"; a MIG device handle past the last one  NOT_FOUND,
//     with MIG off                                                     NOT_SUPPORTED
//
// Thread-safety: every function takes one global mutex, as the real library is thread-safe.
#include <dirent.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "src/enforce/nvml_abi.h"
#include "tessera/core/gpu_model.h"

namespace {

using tessera::GpuModelCatalog;
using tessera::GpuModelId;
using tessera::GpuModelInfo;
using tessera::MigComputeProfile;
using tessera::MigGeometry;
using tessera::MigProfile;

constexpr unsigned long long kMiB = 1024ULL * 1024ULL;
// The GPU-instance profile indexes R580 accepts: 0x11 (3_SLICE_GFX) already gets
// INVALID_ARGUMENT there, although nvml.h (API 13) defines NVML_GPU_INSTANCE_PROFILE_COUNT 0x12.
constexpr unsigned int kDriverProfileIndexCount = 0x11;
constexpr unsigned long long kMaxDevicesPerItem = 64;

// What nvmlDeviceGetName returns for the models whose NVML name was seen; others get
// "NVIDIA <catalog name>".
std::string NvmlName(const std::string& model) {
  static const std::map<std::string, std::string, std::less<>> names = {
      {"A100-40GB", "NVIDIA A100-SXM4-40GB"}, {"A100-80GB", "NVIDIA A100-SXM4-80GB"},
      {"H100-80GB", "NVIDIA H100 80GB HBM3"}, {"H100-NVL-94GB", "NVIDIA H100 NVL"},
      {"H200-141GB", "NVIDIA H200"},          {"A30-24GB", "NVIDIA A30"},
      {"V100M32", "Tesla V100-SXM2-32GB"},    {"V100M16", "Tesla V100-SXM2-16GB"},
      {"T4", "Tesla T4"},                     {"A10", "NVIDIA A10"},
  };
  auto it = names.find(model);
  return it != names.end() ? it->second : "NVIDIA " + model;
}

const GpuModelInfo* FindModel(const std::string& name) {
  const GpuModelCatalog& catalog = GpuModelCatalog::Builtin();
  tessera::StatusOr<GpuModelId> id = catalog.Find(name);
  return id.ok() ? &catalog.info(*id) : nullptr;
}

struct FakeProcess {
  uint32_t pid = 0;
  unsigned long long used_mib = 0;
  uint32_t gi = TESSERA_NVML_INSTANCE_ID_NONE;
  uint32_t ci = TESSERA_NVML_INSTANCE_ID_NONE;
};

struct FakeProcessUtil {
  uint32_t pid = 0;
  unsigned int sm = 0;
  unsigned int mem = 0;
};

struct FakeDevice;
struct FakeGi;

struct FakeCi {
  FakeGi* gi = nullptr;
  uint32_t id = 0;
  const MigComputeProfile* profile = nullptr;  // its id is its NVML index
  uint32_t start = 0;
};

struct FakeGi {
  FakeDevice* device = nullptr;
  uint32_t id = 0;
  const MigProfile* profile = nullptr;
  uint32_t start = 0;
  std::vector<std::unique_ptr<FakeCi>> cis;
};

struct FakeDevice {
  const GpuModelInfo* model = nullptr;
  uint32_t index = 0;
  bool mig_current = false;
  bool mig_pending = false;
  bool used_set = false;
  unsigned long long used_mib = 0;
  unsigned int util_gpu = 0;
  unsigned int util_memory = 0;
  long minor = -1;  // the device node's minor number; -1: the index
  size_t proc_stride = sizeof(nvmlProcessInfo_t);
  std::vector<FakeProcess> procs;
  std::vector<FakeProcessUtil> proc_utils;
  bool proc_utils_live = false;  // plive=1: samples stamped with the time of the call
  std::vector<std::unique_ptr<FakeGi>> gis;
  std::string configured_gis;  // gis=, created by CreateConfiguredInstances

  bool mig_capable() const { return model->mig.has_value(); }
  const MigGeometry& geometry() const { return *model->mig; }
};

struct State {
  std::mutex mu;
  int init_count = 0;
  std::vector<std::unique_ptr<FakeDevice>> devices;
  std::map<std::string, nvmlReturn_t, std::less<>> failures;
  std::string mutation_log;
  // Destroyed instances stay allocated until shutdown so that a stale handle never aliases a
  // new instance; the handle checks below reject them.
  std::vector<std::unique_ptr<FakeGi>> retired_gis;
  std::vector<std::unique_ptr<FakeCi>> retired_cis;
};

State& S() {
  static State state;  // destroyed at exit (the library is linked -z nodelete)
  return state;
}

std::vector<std::string> Split(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t begin = 0;
  while (begin <= s.size()) {
    size_t end = s.find(sep, begin);
    if (end == std::string_view::npos) end = s.size();
    out.emplace_back(s.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

bool ParseUint(std::string_view s, unsigned long long* out) {
  if (s.empty() || s.size() > 18) return false;
  unsigned long long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned long long>(c - '0');
  }
  *out = v;
  return true;
}

bool ConfigError(const std::string& message) {
  std::fprintf(stderr, "fake NVML: TESSERA_FAKE_NVML_CONFIG: %s\n", message.c_str());
  return false;
}

// Parses the settings after MODEL[*N] into `d` (whose model is set).
bool ParseSettings(const std::vector<std::string>& parts, FakeDevice* d) {
  bool pending_set = false;
  for (size_t i = 1; i < parts.size(); ++i) {
    size_t eq = parts[i].find('=');
    if (eq == std::string::npos) return ConfigError("expected key=value, got '" + parts[i] + "'");
    std::string key = parts[i].substr(0, eq);
    std::string value = parts[i].substr(eq + 1);
    unsigned long long n = 0;
    if (key == "mig" && ParseUint(value, &n) && n <= 1) {
      d->mig_current = n == 1;
    } else if (key == "pending" && ParseUint(value, &n) && n <= 1) {
      d->mig_pending = n == 1;
      pending_set = true;
    } else if (key == "used" && ParseUint(value, &n)) {
      d->used_set = true;
      d->used_mib = n;
    } else if (key == "util") {
      std::vector<std::string> gm = Split(value, '/');
      unsigned long long g = 0;
      unsigned long long mem = 0;
      if (gm.size() != 2 || !ParseUint(gm[0], &g) || !ParseUint(gm[1], &mem)) {
        return ConfigError("util wants G/M, got '" + value + "'");
      }
      d->util_gpu = static_cast<unsigned int>(g);
      d->util_memory = static_cast<unsigned int>(mem);
    } else if (key == "procs") {
      for (const std::string& p : Split(value, ';')) {
        std::vector<std::string> f = Split(p, '/');
        unsigned long long v[4] = {0, 0, TESSERA_NVML_INSTANCE_ID_NONE,
                                   TESSERA_NVML_INSTANCE_ID_NONE};
        if ((f.size() != 2 && f.size() != 4)) return ConfigError("bad process '" + p + "'");
        for (size_t k = 0; k < f.size(); ++k) {
          if (!ParseUint(f[k], &v[k])) return ConfigError("bad process '" + p + "'");
        }
        d->procs.push_back({static_cast<uint32_t>(v[0]), v[1], static_cast<uint32_t>(v[2]),
                            static_cast<uint32_t>(v[3])});
      }
    } else if (key == "putil") {
      for (const std::string& p : Split(value, ';')) {
        std::vector<std::string> f = Split(p, '/');
        unsigned long long v[3] = {0, 0, 0};
        if (f.size() != 3) return ConfigError("putil wants PID/SM/MEM, got '" + p + "'");
        for (size_t k = 0; k < 3; ++k) {
          if (!ParseUint(f[k], &v[k])) return ConfigError("putil wants PID/SM/MEM, got '" + p + "'");
        }
        d->proc_utils.push_back({static_cast<uint32_t>(v[0]), static_cast<unsigned int>(v[1]),
                                 static_cast<unsigned int>(v[2])});
      }
    } else if (key == "plive" && (value == "0" || value == "1")) {
      d->proc_utils_live = value == "1";
    } else if (key == "minor" && ParseUint(value, &n) && n < 256) {
      d->minor = static_cast<long>(n);
    } else if (key == "gis" && !value.empty()) {
      d->configured_gis = value;
    } else if (key == "procstride" && ParseUint(value, &n) && (n == 24 || n == 32)) {
      d->proc_stride = n;
    } else {
      return ConfigError("bad setting '" + parts[i] + "'");
    }
  }
  if (!pending_set) d->mig_pending = d->mig_current;
  if ((d->mig_current || d->mig_pending) && !d->mig_capable()) {
    return ConfigError(d->model->name + " has no MIG");
  }
  return true;
}

// One comma-separated item: MODEL[*N][:settings], appended to `devices`.
bool ParseItem(std::string_view spec, std::vector<std::unique_ptr<FakeDevice>>* devices) {
  std::vector<std::string> parts = Split(spec, ':');
  std::string model = parts[0];
  unsigned long long count = 1;
  if (size_t star = model.find('*'); star != std::string::npos) {
    if (!ParseUint(std::string_view(model).substr(star + 1), &count) || count == 0 ||
        count > kMaxDevicesPerItem) {
      return ConfigError("bad GPU count in '" + model + "' (want MODEL*N, N = 1..64)");
    }
    model.resize(star);
  }
  const GpuModelInfo* info = FindModel(model);
  if (info == nullptr) {
    return ConfigError("unknown model '" + model + "' (known: " +
                       GpuModelCatalog::Builtin().KnownNames() + ")");
  }
  for (unsigned long long k = 0; k < count; ++k) {
    auto d = std::make_unique<FakeDevice>();
    d->model = info;
    d->index = static_cast<uint32_t>(devices->size());
    if (!ParseSettings(parts, d.get())) return false;
    devices->push_back(std::move(d));
  }
  return true;
}

bool LoadConfig(State& s) {
  s.devices.clear();
  s.failures.clear();
  s.mutation_log.clear();
  if (const char* fail = std::getenv("TESSERA_FAKE_NVML_FAIL"); fail != nullptr && *fail) {
    for (const std::string& item : Split(fail, ',')) {
      size_t colon = item.rfind(':');
      unsigned long long code = 0;
      if (colon == std::string::npos || !ParseUint(item.substr(colon + 1), &code)) {
        std::fprintf(stderr, "fake NVML: TESSERA_FAKE_NVML_FAIL: bad item '%s'\n", item.c_str());
        return false;
      }
      s.failures[item.substr(0, colon)] = static_cast<nvmlReturn_t>(code);
    }
  }
  if (const char* log = std::getenv("TESSERA_FAKE_NVML_MUTATION_LOG"); log != nullptr) {
    s.mutation_log = log;
  }
  const char* config = std::getenv("TESSERA_FAKE_NVML_CONFIG");
  if (config == nullptr || *config == '\0') return true;
  for (const std::string& spec : Split(config, ',')) {
    if (!ParseItem(spec, &s.devices)) {
      s.devices.clear();
      return false;
    }
  }
  return true;
}

// The injected failure for `fn`, or NVML_SUCCESS.
nvmlReturn_t Injected(const State& s, std::string_view fn) {
  auto it = s.failures.find(fn);
  return it == s.failures.end() ? NVML_SUCCESS : it->second;
}

void LogMutation(const State& s, const char* fn) {
  if (s.mutation_log.empty()) return;
  if (FILE* f = std::fopen(s.mutation_log.c_str(), "a")) {
    std::fprintf(f, "%s\n", fn);
    std::fclose(f);
  }
}

FakeDevice* FindDevice(State& s, nvmlDevice_t handle) {
  for (auto& d : s.devices) {
    if (reinterpret_cast<nvmlDevice_t>(d.get()) == handle) return d.get();
  }
  return nullptr;
}

FakeGi* FindGi(State& s, nvmlGpuInstance_t handle) {
  for (auto& d : s.devices) {
    for (auto& gi : d->gis) {
      if (reinterpret_cast<nvmlGpuInstance_t>(gi.get()) == handle) return gi.get();
    }
  }
  return nullptr;
}

FakeCi* FindCi(State& s, nvmlComputeInstance_t handle) {
  for (auto& d : s.devices) {
    for (auto& gi : d->gis) {
      for (auto& ci : gi->cis) {
        if (reinterpret_cast<nvmlComputeInstance_t>(ci.get()) == handle) return ci.get();
      }
    }
  }
  return nullptr;
}

// A MIG device handle (nvmlDeviceGetMigDeviceHandleByIndex) is its compute instance's address.
FakeCi* FindMigDevice(State& s, nvmlDevice_t handle) {
  return FindCi(s, reinterpret_cast<nvmlComputeInstance_t>(handle));
}

// The MIG devices of a GPU in NVML's order: by GPU instance start, then compute instance start.
std::vector<FakeCi*> MigDevicesOf(FakeDevice& d) {
  std::vector<FakeGi*> gis;
  for (auto& gi : d.gis) gis.push_back(gi.get());
  std::sort(gis.begin(), gis.end(), [](const FakeGi* a, const FakeGi* b) { return a->start < b->start; });
  std::vector<FakeCi*> out;
  for (FakeGi* gi : gis) {
    std::vector<FakeCi*> cis;
    for (auto& ci : gi->cis) cis.push_back(ci.get());
    std::sort(cis.begin(), cis.end(), [](const FakeCi* a, const FakeCi* b) { return a->start < b->start; });
    out.insert(out.end(), cis.begin(), cis.end());
  }
  return out;
}

const MigProfile* ProfileByIndex(const FakeDevice& d, unsigned int index) {
  if (!d.mig_capable()) return nullptr;
  for (const MigProfile& p : d.geometry().profiles) {
    if (p.nvml_profile_index == static_cast<int>(index)) return &p;
  }
  return nullptr;
}

const MigProfile* ProfileById(const FakeDevice& d, unsigned int id) {
  if (!d.mig_capable()) return nullptr;
  for (const MigProfile& p : d.geometry().profiles) {
    if (p.profile_id >= 0 && p.profile_id == static_cast<int>(id)) return &p;
  }
  return nullptr;
}

bool MigOn(const FakeDevice& d) { return d.mig_capable() && d.mig_current; }

uint32_t Sms(const FakeDevice& d, const MigProfile& p) {
  if (p.multiprocessors > 0) return static_cast<uint32_t>(p.multiprocessors);
  return static_cast<uint32_t>(d.model->sm_count * p.compute_slices /
                               std::max(1, d.geometry().compute_slices));
}

bool Contains(const std::vector<int>& v, unsigned int x) {
  return std::find(v.begin(), v.end(), static_cast<int>(x)) != v.end();
}

// Why a GI of `p` at `start` cannot be created now, or NVML_SUCCESS: the rules of the catalog
// (MIG User Guide): a legal start and size, then no overlap, the profile's and the GPU's
// instance counts, the compute slices.
nvmlReturn_t CheckGiPlacement(const FakeDevice& d, const MigProfile& p, unsigned int start,
                              unsigned int size) {
  if (static_cast<int>(size) != p.size || !Contains(p.starts, start)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  int same_profile = 0;
  int compute_used = 0;
  for (const auto& gi : d.gis) {
    compute_used += gi->profile->compute_slices;
    if (gi->profile == &p) ++same_profile;
    const unsigned int a0 = gi->start;
    const unsigned int a1 = gi->start + static_cast<unsigned int>(gi->profile->size);
    if (a0 < start + size && start < a1) return NVML_ERROR_INSUFFICIENT_RESOURCES;  // overlap
  }
  const MigGeometry& g = d.geometry();
  if (same_profile >= p.max_count) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  if (static_cast<int>(d.gis.size()) >= g.max_gpu_instances) {
    return NVML_ERROR_INSUFFICIENT_RESOURCES;
  }
  if (compute_used + p.compute_slices > g.compute_slices) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  return NVML_SUCCESS;
}

// The CI profile `index` a GI offers, or null.
const MigComputeProfile* CiProfile(const FakeGi& gi, unsigned int index) {
  for (const MigComputeProfile& c : gi.profile->compute_profiles) {
    if (c.nvml_profile_index == static_cast<int>(index)) return &c;
  }
  return nullptr;
}

// The same for compute instances inside `gi`: a legal start and size, then no overlap and the
// CI profile's max count.
nvmlReturn_t CheckCiPlacement(const FakeGi& gi, const MigComputeProfile& c, unsigned int start,
                              unsigned int size) {
  if (static_cast<int>(size) != c.compute_slices || !Contains(c.starts, start)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  int same_profile = 0;
  for (const auto& ci : gi.cis) {
    if (ci->profile == &c) ++same_profile;
    const unsigned int a0 = ci->start;
    const unsigned int a1 = ci->start + static_cast<unsigned int>(ci->profile->compute_slices);
    if (a0 < start + size && start < a1) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  }
  if (same_profile >= c.max_count) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  return NVML_SUCCESS;
}

uint32_t LowestFreeId(const std::vector<uint32_t>& used, uint32_t first) {
  uint32_t id = first;
  while (std::find(used.begin(), used.end(), id) != used.end()) ++id;
  return id;
}

void FillProfileInfo(const FakeDevice& d, const MigProfile& p, unsigned int* id,
                     unsigned int* slices, unsigned int* count, unsigned int* sms,
                     unsigned int* copy_engines, unsigned long long* memory) {
  *id = static_cast<unsigned int>(p.profile_id);
  *slices = static_cast<unsigned int>(p.compute_slices);
  *count = static_cast<unsigned int>(p.max_count);
  *sms = Sms(d, p);
  *copy_engines = static_cast<unsigned int>(p.compute_slices);
  *memory = static_cast<unsigned long long>(p.memory.value());
}

// Shared checks of both profile-info entry points.
nvmlReturn_t ProfileFor(State& s, nvmlDevice_t device, unsigned int index, bool info_null,
                        FakeDevice** dev, const MigProfile** out) {
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || info_null || index >= kDriverProfileIndexCount) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->mig_capable()) return NVML_ERROR_NOT_SUPPORTED;  // answered with MIG off too
  *dev = d;
  *out = ProfileByIndex(*d, index);
  return *out == nullptr ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

nvmlReturn_t CopyString(const std::string& value, char* out, unsigned int length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < value.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

// Copies `items` into a caller's (placements, count) pair the way NVML's list calls do: a null
// array asks for the count.
template <typename T>
nvmlReturn_t ReturnList(const std::vector<T>& items, T* array, unsigned int* count) {
  const auto n = static_cast<unsigned int>(items.size());
  if (array == nullptr) {
    *count = n;
    return NVML_SUCCESS;
  }
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned int i = 0; i < n; ++i) array[i] = items[i];
  *count = n;
  return NVML_SUCCESS;
}

bool CreateConfiguredInstances(State& s);  // gis= (defined after the NVML functions it uses)

}  // namespace

// Every entry point starts with FAKE_NVML_ENTER(name): lock, refuse before init, and apply
// an injected failure.
#define FAKE_NVML_ENTER(name)                                            \
  State& s = S();                                                        \
  std::lock_guard<std::mutex> lock(s.mu);                                \
  if (s.init_count == 0) return NVML_ERROR_UNINITIALIZED;                \
  if (nvmlReturn_t injected = Injected(s, name); injected != NVML_SUCCESS) \
  return injected

extern "C" {

nvmlReturn_t nvmlInit_v2(void) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_count == 0) {
    if (!LoadConfig(s) || !CreateConfiguredInstances(s)) {
      s.devices.clear();
      return NVML_ERROR_UNKNOWN;
    }
    if (nvmlReturn_t injected = Injected(s, "nvmlInit_v2"); injected != NVML_SUCCESS) {
      s.devices.clear();
      return injected;
    }
  }
  ++s.init_count;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlShutdown(void) {
  FAKE_NVML_ENTER("nvmlShutdown");
  if (--s.init_count == 0) {
    s.devices.clear();
    s.retired_gis.clear();
    s.retired_cis.clear();
  }
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_NOT_READY: return "Not Ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  FAKE_NVML_ENTER("nvmlDeviceGetCount_v2");
  if (deviceCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *deviceCount = static_cast<unsigned int>(s.devices.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  FAKE_NVML_ENTER("nvmlDeviceGetHandleByIndex_v2");
  if (device == nullptr || index >= s.devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = reinterpret_cast<nvmlDevice_t>(s.devices[index].get());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  FAKE_NVML_ENTER("nvmlDeviceGetName");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  return CopyString(NvmlName(d->model->name), name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  FAKE_NVML_ENTER("nvmlDeviceGetUUID");
  char text[64];
  if (FakeCi* ci = FindMigDevice(s, device); ci != nullptr) {
    // A MIG device: "MIG-" and a UUID of its own (GPU index, GPU instance and compute instance ids).
    std::snprintf(text, sizeof(text), "MIG-fa4e0000-0000-4000-8000-%04x%04x%04x", ci->gi->device->index, ci->gi->id,
                  ci->id);
    return CopyString(text, uuid, length);
  }
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  std::snprintf(text, sizeof(text), "GPU-fa4e0000-0000-4000-8000-%012x", d->index);
  return CopyString(text, uuid, length);
}

// nvml.h: the most MIG devices the GPU can hold (one per compute slice); NOT_SUPPORTED without MIG.
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  FAKE_NVML_ENTER("nvmlDeviceGetMaxMigDeviceCount");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!d->mig_capable()) return NVML_ERROR_NOT_SUPPORTED;
  *count = static_cast<unsigned int>(d->geometry().compute_slices);
  return NVML_SUCCESS;
}

// The MIG device at `index` (NVML's order, MigDevicesOf); NOT_FOUND past the last one,
// NOT_SUPPORTED when MIG is not enabled.
nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t* mig) {
  FAKE_NVML_ENTER("nvmlDeviceGetMigDeviceHandleByIndex");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || mig == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!d->mig_capable() || !d->mig_current) return NVML_ERROR_NOT_SUPPORTED;
  if (index >= static_cast<unsigned int>(d->geometry().compute_slices)) return NVML_ERROR_INVALID_ARGUMENT;
  const std::vector<FakeCi*> all = MigDevicesOf(*d);
  if (index >= all.size()) return NVML_ERROR_NOT_FOUND;
  *mig = reinterpret_cast<nvmlDevice_t>(all[index]);
  return NVML_SUCCESS;
}

// A MIG device's GPU instance id; NOT_SUPPORTED for a GPU's own handle (nvml.h).
nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  FAKE_NVML_ENTER("nvmlDeviceGetGpuInstanceId");
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (FakeCi* ci = FindMigDevice(s, device); ci != nullptr) {
    *id = ci->gi->id;
    return NVML_SUCCESS;
  }
  return FindDevice(s, device) != nullptr ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  FAKE_NVML_ENTER("nvmlDeviceGetComputeInstanceId");
  if (id == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (FakeCi* ci = FindMigDevice(s, device); ci != nullptr) {
    *id = ci->id;
    return NVML_SUCCESS;
  }
  return FindDevice(s, device) != nullptr ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minor) {
  FAKE_NVML_ENTER("nvmlDeviceGetMinorNumber");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || minor == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *minor = d->minor >= 0 ? static_cast<unsigned int>(d->minor) : d->index;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  FAKE_NVML_ENTER("nvmlDeviceGetMemoryInfo");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned long long used = d->used_mib;
  if (!d->used_set) {
    used = 0;
    for (const FakeProcess& p : d->procs) used += p.used_mib;
  }
  const auto total_mib = static_cast<unsigned long long>(d->model->memory.value());
  memory->total = total_mib * kMiB;
  memory->used = std::min(used, total_mib) * kMiB;
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  FAKE_NVML_ENTER("nvmlDeviceGetUtilizationRates");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || utilization == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (MigOn(*d)) return NVML_ERROR_NOT_SUPPORTED;
  utilization->gpu = d->util_gpu;
  utilization->memory = d->util_memory;
  return NVML_SUCCESS;
}

// The processes the fake CUDA driver recorded in TESSERA_FAKE_GPU_STATE for GPU `index` (see
// fake_cuda.h): live ones (not zombies), each with its bytes plus TESSERA_FAKE_GPU_CONTEXT_MIB
// (default 0), the context a real driver charges every process. A process that loaded more than
// one copy of the driver has one file per copy ("<pid>", "<pid>.<copy>"): like the real NVML, which
// sees the process and not the library, it is listed once with the sum.
std::vector<std::pair<uint32_t, unsigned long long>> StateProcesses(uint32_t index) {
  std::map<uint32_t, unsigned long long> bytes_of;
  const char* dir = std::getenv("TESSERA_FAKE_GPU_STATE");
  if (dir == nullptr || *dir == '\0') return {};
  const char* ctx = std::getenv("TESSERA_FAKE_GPU_CONTEXT_MIB");
  const unsigned long long context = (ctx != nullptr ? std::strtoull(ctx, nullptr, 10) : 0) * kMiB;
  DIR* d = ::opendir(dir);
  if (d == nullptr) return {};
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    const std::string pid_text = name.substr(0, name.find('.'));
    if (pid_text.empty() || !std::all_of(pid_text.begin(), pid_text.end(), digit)) continue;
    const auto pid = static_cast<uint32_t>(std::strtoul(pid_text.c_str(), nullptr, 10));
    std::FILE* stat = std::fopen(("/proc/" + pid_text + "/stat").c_str(), "r");
    if (stat == nullptr) continue;  // gone: the driver freed what it held
    char buf[512] = {};
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, stat);
    std::fclose(stat);
    const char* paren = std::strrchr(buf, ')');
    if (n == 0 || paren == nullptr || paren[1] == '\0' || paren[2] == 'Z' || paren[2] == 'X') continue;
    std::FILE* f = std::fopen((std::string(dir) + "/" + name).c_str(), "r");
    if (f == nullptr) continue;
    unsigned int gpu = 0;
    unsigned long long bytes = 0;
    while (std::fscanf(f, "%u %llu", &gpu, &bytes) == 2) {
      if (gpu != index) continue;
      bytes_of.try_emplace(pid, context).first->second += bytes;
    }
    std::fclose(f);
  }
  ::closedir(d);
  return {bytes_of.begin(), bytes_of.end()};
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos) {
  FAKE_NVML_ENTER("nvmlDeviceGetComputeRunningProcesses_v3");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const std::vector<std::pair<uint32_t, unsigned long long>> recorded = StateProcesses(d->index);
  const auto n = static_cast<unsigned int>(d->procs.size() + recorded.size());
  if (n == 0) {
    *infoCount = 0;
    return NVML_SUCCESS;
  }
  if (infos == nullptr || *infoCount < n) {
    *infoCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  auto* out = reinterpret_cast<unsigned char*>(infos);
  for (unsigned int i = 0; i < d->procs.size(); ++i) {
    const FakeProcess& p = d->procs[i];
    nvmlProcessInfoWithCc_t e{};
    e.pid = p.pid;
    e.usedGpuMemory = p.used_mib * kMiB;
    e.gpuInstanceId = MigOn(*d) ? p.gi : TESSERA_NVML_INSTANCE_ID_NONE;
    e.computeInstanceId = MigOn(*d) ? p.ci : TESSERA_NVML_INSTANCE_ID_NONE;
    e.usedGpuCcProtectedMemory = 0;
    std::memcpy(out + i * d->proc_stride, &e, d->proc_stride);
  }
  for (size_t k = 0; k < recorded.size(); ++k) {
    nvmlProcessInfoWithCc_t e{};
    e.pid = recorded[k].first;
    e.usedGpuMemory = recorded[k].second;
    e.gpuInstanceId = TESSERA_NVML_INSTANCE_ID_NONE;
    e.computeInstanceId = TESSERA_NVML_INSTANCE_ID_NONE;
    std::memcpy(out + (d->procs.size() + k) * d->proc_stride, &e, d->proc_stride);
  }
  *infoCount = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                             nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* processSamplesCount,
                                             unsigned long long lastSeenTimeStamp) {
  FAKE_NVML_ENTER("nvmlDeviceGetProcessUtilization");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || processSamplesCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (MigOn(*d)) return NVML_ERROR_NOT_SUPPORTED;
  // Every configured sample carries the fake's fixed timestamp 1000000 (microseconds), or with
  // plive=1 the time of this call: a sample newer than any the caller saw before.
  unsigned long long sample_time = 1000000;
  if (d->proc_utils_live) {
    timespec now{};
    ::clock_gettime(CLOCK_REALTIME, &now);
    sample_time = static_cast<unsigned long long>(now.tv_sec) * 1000000ULL +
                  static_cast<unsigned long long>(now.tv_nsec) / 1000ULL;
  }
  if (d->proc_utils.empty() || lastSeenTimeStamp >= sample_time) return NVML_ERROR_NOT_FOUND;
  const auto n = static_cast<unsigned int>(d->proc_utils.size());
  if (utilization == nullptr || *processSamplesCount < n) {
    *processSamplesCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned int i = 0; i < n; ++i) {
    utilization[i] = {};
    utilization[i].pid = d->proc_utils[i].pid;
    utilization[i].timeStamp = sample_time;
    utilization[i].smUtil = d->proc_utils[i].sm;
    utilization[i].memUtil = d->proc_utils[i].mem;
  }
  *processSamplesCount = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                  unsigned int* pendingMode) {
  FAKE_NVML_ENTER("nvmlDeviceGetMigMode");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || currentMode == nullptr || pendingMode == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->mig_capable()) return NVML_ERROR_NOT_SUPPORTED;
  *currentMode = d->mig_current ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  *pendingMode = d->mig_pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t* info) {
  FAKE_NVML_ENTER("nvmlDeviceGetGpuInstanceProfileInfo");
  FakeDevice* d = nullptr;
  const MigProfile* p = nullptr;
  if (nvmlReturn_t r = ProfileFor(s, device, profile, info == nullptr, &d, &p); r != NVML_SUCCESS) {
    return r;
  }
  std::memset(info, 0, sizeof(*info));
  FillProfileInfo(*d, *p, &info->id, &info->sliceCount, &info->instanceCount,
                  &info->multiprocessorCount, &info->copyEngineCount, &info->memorySizeMB);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t* info) {
  FAKE_NVML_ENTER("nvmlDeviceGetGpuInstanceProfileInfoV");
  FakeDevice* d = nullptr;
  const MigProfile* p = nullptr;
  if (nvmlReturn_t r = ProfileFor(s, device, profile, info == nullptr, &d, &p); r != NVML_SUCCESS) {
    return r;
  }
  if (info->version != kNvmlGpuInstanceProfileInfoV2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  std::memset(info, 0, sizeof(*info));
  info->version = kNvmlGpuInstanceProfileInfoV2;
  FillProfileInfo(*d, *p, &info->id, &info->sliceCount, &info->instanceCount,
                  &info->multiprocessorCount, &info->copyEngineCount, &info->memorySizeMB);
  std::snprintf(info->name, sizeof(info->name), "MIG %s", p->name.c_str());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t* placements,
                                                           unsigned int* count) {
  FAKE_NVML_ENTER("nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!d->mig_capable()) return NVML_ERROR_NOT_SUPPORTED;  // answered with MIG off too
  const MigProfile* p = ProfileById(*d, profileId);
  if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  std::vector<nvmlGpuInstancePlacement_t> items;
  for (int start : p->starts) {
    items.push_back({static_cast<unsigned int>(start), static_cast<unsigned int>(p->size)});
  }
  return ReturnList(items, placements, count);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                       unsigned int* count) {
  FAKE_NVML_ENTER("nvmlDeviceGetGpuInstanceRemainingCapacity");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!MigOn(*d)) return NVML_ERROR_NOT_SUPPORTED;
  const MigProfile* p = ProfileById(*d, profileId);
  if (p == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  // How many more fit: place them at the lowest free legal starts (equal-size intervals, so
  // the earliest-start greedy choice packs the most), then take them away again.
  size_t added = 0;
  for (int start : p->starts) {
    const auto st = static_cast<unsigned int>(start);
    if (CheckGiPlacement(*d, *p, st, static_cast<unsigned int>(p->size)) != NVML_SUCCESS) continue;
    auto gi = std::make_unique<FakeGi>();
    gi->device = d;
    gi->profile = p;
    gi->start = st;
    d->gis.push_back(std::move(gi));
    ++added;
  }
  *count = static_cast<unsigned int>(added);
  d->gis.resize(d->gis.size() - added);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                      const nvmlGpuInstancePlacement_t* placement,
                                                      nvmlGpuInstance_t* gpuInstance) {
  FAKE_NVML_ENTER("nvmlDeviceCreateGpuInstanceWithPlacement");
  LogMutation(s, "nvmlDeviceCreateGpuInstanceWithPlacement");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || placement == nullptr || gpuInstance == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!MigOn(*d)) return NVML_ERROR_NOT_SUPPORTED;
  const MigProfile* p = ProfileById(*d, profileId);
  if (p == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t r = CheckGiPlacement(*d, *p, placement->start, placement->size);
      r != NVML_SUCCESS) {
    return r;
  }
  std::vector<uint32_t> ids;
  for (const auto& gi : d->gis) ids.push_back(gi->id);
  auto gi = std::make_unique<FakeGi>();
  gi->device = d;
  gi->id = LowestFreeId(ids, 1);
  gi->profile = p;
  gi->start = placement->start;
  *gpuInstance = reinterpret_cast<nvmlGpuInstance_t>(gi.get());
  d->gis.push_back(std::move(gi));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance) {
  FAKE_NVML_ENTER("nvmlGpuInstanceDestroy");
  LogMutation(s, "nvmlGpuInstanceDestroy");
  FakeGi* gi = FindGi(s, gpuInstance);
  if (gi == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gi->cis.empty()) return NVML_ERROR_IN_USE;
  for (const FakeProcess& p : gi->device->procs) {
    if (p.gi == gi->id) return NVML_ERROR_IN_USE;
  }
  auto& gis = gi->device->gis;
  auto it = std::find_if(gis.begin(), gis.end(), [&](const auto& g) { return g.get() == gi; });
  s.retired_gis.push_back(std::move(*it));
  gis.erase(it);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                       nvmlGpuInstance_t* gpuInstances, unsigned int* count) {
  FAKE_NVML_ENTER("nvmlDeviceGetGpuInstances");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || gpuInstances == nullptr || count == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!MigOn(*d)) return NVML_ERROR_NOT_SUPPORTED;
  const MigProfile* p = ProfileById(*d, profileId);
  if (p == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int n = 0;
  for (const auto& gi : d->gis) {
    if (gi->profile == p) gpuInstances[n++] = reinterpret_cast<nvmlGpuInstance_t>(gi.get());
  }
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                          nvmlGpuInstance_t* gpuInstance) {
  FAKE_NVML_ENTER("nvmlDeviceGetGpuInstanceById");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || gpuInstance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!MigOn(*d)) return NVML_ERROR_NOT_SUPPORTED;
  for (const auto& gi : d->gis) {
    if (gi->id == id) {
      *gpuInstance = reinterpret_cast<nvmlGpuInstance_t>(gi.get());
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t* info) {
  FAKE_NVML_ENTER("nvmlGpuInstanceGetInfo");
  FakeGi* gi = FindGi(s, gpuInstance);
  if (gi == nullptr || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = reinterpret_cast<nvmlDevice_t>(gi->device);
  info->id = gi->id;
  info->profileId = static_cast<unsigned int>(gi->profile->profile_id);
  info->placement = {gi->start, static_cast<unsigned int>(gi->profile->size)};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                          unsigned int profile,
                                                          unsigned int engProfile,
                                                          nvmlComputeInstanceProfileInfo_t* info) {
  FAKE_NVML_ENTER("nvmlGpuInstanceGetComputeInstanceProfileInfo");
  FakeGi* gi = FindGi(s, gpuInstance);
  if (gi == nullptr || info == nullptr || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT_API13 ||
      engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const MigComputeProfile* c = CiProfile(*gi, profile);
  if (c == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  std::memset(info, 0, sizeof(*info));
  info->id = profile;
  info->sliceCount = static_cast<unsigned int>(c->compute_slices);
  info->instanceCount = static_cast<unsigned int>(c->max_count);
  info->multiprocessorCount =
      Sms(*gi->device, *gi->profile) * static_cast<unsigned int>(c->compute_slices) /
      static_cast<unsigned int>(gi->profile->compute_slices);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstancePossiblePlacements(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId,
    nvmlComputeInstancePlacement_t* placements, unsigned int* count) {
  FAKE_NVML_ENTER("nvmlGpuInstanceGetComputeInstancePossiblePlacements");
  FakeGi* gi = FindGi(s, gpuInstance);
  if (gi == nullptr || count == nullptr || profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT_API13) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const MigComputeProfile* c = CiProfile(*gi, profileId);
  if (c == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  std::vector<nvmlComputeInstancePlacement_t> items;
  for (int start : c->starts) {
    items.push_back({static_cast<unsigned int>(start), static_cast<unsigned int>(c->compute_slices)});
  }
  return ReturnList(items, placements, count);
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                unsigned int profileId,
                                                                unsigned int* count) {
  FAKE_NVML_ENTER("nvmlGpuInstanceGetComputeInstanceRemainingCapacity");
  FakeGi* gi = FindGi(s, gpuInstance);
  if (gi == nullptr || count == nullptr || profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT_API13) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const MigComputeProfile* c = CiProfile(*gi, profileId);
  if (c == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  size_t added = 0;
  for (int start : c->starts) {
    const auto st = static_cast<unsigned int>(start);
    if (CheckCiPlacement(*gi, *c, st, static_cast<unsigned int>(c->compute_slices)) != NVML_SUCCESS) {
      continue;
    }
    auto ci = std::make_unique<FakeCi>();
    ci->gi = gi;
    ci->profile = c;
    ci->start = st;
    gi->cis.push_back(std::move(ci));
    ++added;
  }
  *count = static_cast<unsigned int>(added);
  gi->cis.resize(gi->cis.size() - added);
  return NVML_SUCCESS;
}

// Creates a CI of `c` at `start` in `gi`.
nvmlComputeInstance_t AddCi(FakeGi* gi, const MigComputeProfile* c, unsigned int start) {
  std::vector<uint32_t> ids;
  for (const auto& ci : gi->cis) ids.push_back(ci->id);
  auto ci = std::make_unique<FakeCi>();
  ci->gi = gi;
  ci->id = LowestFreeId(ids, 0);
  ci->profile = c;
  ci->start = start;
  auto handle = reinterpret_cast<nvmlComputeInstance_t>(ci.get());
  gi->cis.push_back(std::move(ci));
  return handle;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t* computeInstance) {
  FAKE_NVML_ENTER("nvmlGpuInstanceCreateComputeInstance");
  LogMutation(s, "nvmlGpuInstanceCreateComputeInstance");
  FakeGi* gi = FindGi(s, gpuInstance);
  if (gi == nullptr || computeInstance == nullptr ||
      profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT_API13) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const MigComputeProfile* c = CiProfile(*gi, profileId);
  if (c == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  // The driver picks the placement: here the lowest free legal start.
  for (int start : c->starts) {
    const auto st = static_cast<unsigned int>(start);
    nvmlReturn_t r = CheckCiPlacement(*gi, *c, st, static_cast<unsigned int>(c->compute_slices));
    if (r != NVML_SUCCESS) continue;
    *computeInstance = AddCi(gi, c, st);
    return NVML_SUCCESS;
  }
  return NVML_ERROR_INSUFFICIENT_RESOURCES;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstanceWithPlacement(
    nvmlGpuInstance_t gpuInstance, unsigned int profileId,
    const nvmlComputeInstancePlacement_t* placement, nvmlComputeInstance_t* computeInstance) {
  FAKE_NVML_ENTER("nvmlGpuInstanceCreateComputeInstanceWithPlacement");
  LogMutation(s, "nvmlGpuInstanceCreateComputeInstanceWithPlacement");
  FakeGi* gi = FindGi(s, gpuInstance);
  if (gi == nullptr || computeInstance == nullptr || placement == nullptr ||
      profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT_API13) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  const MigComputeProfile* c = CiProfile(*gi, profileId);
  if (c == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  if (nvmlReturn_t r = CheckCiPlacement(*gi, *c, placement->start, placement->size);
      r != NVML_SUCCESS) {
    return r;
  }
  *computeInstance = AddCi(gi, c, placement->start);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                unsigned int profileId,
                                                nvmlComputeInstance_t* computeInstances,
                                                unsigned int* count) {
  FAKE_NVML_ENTER("nvmlGpuInstanceGetComputeInstances");
  FakeGi* gi = FindGi(s, gpuInstance);
  if (gi == nullptr || computeInstances == nullptr || count == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT_API13) return NVML_ERROR_INVALID_ARGUMENT;
  const MigComputeProfile* c = CiProfile(*gi, profileId);
  if (c == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  unsigned int n = 0;
  for (const auto& ci : gi->cis) {
    if (ci->profile == c) {
      computeInstances[n++] = reinterpret_cast<nvmlComputeInstance_t>(ci.get());
    }
  }
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                   nvmlComputeInstance_t* computeInstance) {
  FAKE_NVML_ENTER("nvmlGpuInstanceGetComputeInstanceById");
  FakeGi* gi = FindGi(s, gpuInstance);
  if (gi == nullptr || computeInstance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (const auto& ci : gi->cis) {
    if (ci->id == id) {
      *computeInstance = reinterpret_cast<nvmlComputeInstance_t>(ci.get());
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                           nvmlComputeInstanceInfo_t* info) {
  FAKE_NVML_ENTER("nvmlComputeInstanceGetInfo_v2");
  FakeCi* ci = FindCi(s, computeInstance);
  if (ci == nullptr || info == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = reinterpret_cast<nvmlDevice_t>(ci->gi->device);
  info->gpuInstance = reinterpret_cast<nvmlGpuInstance_t>(ci->gi);
  info->id = ci->id;
  info->profileId = static_cast<unsigned int>(ci->profile->nvml_profile_index);
  info->placement = {ci->start, static_cast<unsigned int>(ci->profile->compute_slices)};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance) {
  FAKE_NVML_ENTER("nvmlComputeInstanceDestroy");
  LogMutation(s, "nvmlComputeInstanceDestroy");
  FakeCi* ci = FindCi(s, computeInstance);
  if (ci == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  for (const FakeProcess& p : ci->gi->device->procs) {
    if (p.gi == ci->gi->id && p.ci == ci->id) return NVML_ERROR_IN_USE;
  }
  auto& cis = ci->gi->cis;
  auto it = std::find_if(cis.begin(), cis.end(), [&](const auto& c) { return c.get() == ci; });
  s.retired_cis.push_back(std::move(*it));
  cis.erase(it);
  return NVML_SUCCESS;
}

}  // extern "C"

namespace {

// The gis= setting of each device: its GPU instances, each with the compute instance that fills
// it. False (with a message) for an unknown profile or a placement the driver would refuse.
bool CreateConfiguredInstances(State& s) {
  for (auto& d : s.devices) {
    if (d->configured_gis.empty()) continue;
    if (!MigOn(*d)) return ConfigError("gis= needs mig=1 (GPU " + std::to_string(d->index) + ")");
    for (const std::string& item : Split(d->configured_gis, ';')) {
      const size_t at = item.find('@');
      unsigned long long start = 0;
      const MigProfile* p = nullptr;
      for (const MigProfile& candidate : d->geometry().profiles) {
        if (at != std::string::npos && candidate.name == item.substr(0, at)) p = &candidate;
      }
      if (p == nullptr || !ParseUint(item.substr(at + 1), &start) ||
          CheckGiPlacement(*d, *p, static_cast<unsigned int>(start), static_cast<unsigned int>(p->size)) != NVML_SUCCESS) {
        return ConfigError("gis: '" + item + "' is not a free PROFILE@START of " + d->model->name);
      }
      std::vector<uint32_t> ids;
      for (const auto& gi : d->gis) ids.push_back(gi->id);
      auto gi = std::make_unique<FakeGi>();
      gi->device = d.get();
      gi->id = LowestFreeId(ids, 1);
      gi->profile = p;
      gi->start = static_cast<uint32_t>(start);
      for (const MigComputeProfile& c : p->compute_profiles) {
        if (c.fills_gpu_instance && gi->cis.empty()) AddCi(gi.get(), &c, 0);
      }
      d->gis.push_back(std::move(gi));
    }
  }
  return true;
}

}  // namespace
