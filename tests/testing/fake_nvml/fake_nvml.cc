// A fake libnvidia-ml.so.1: the NVML C functions tessera's NVML adapter uses, implemented in
// memory with the MIG placement rules of real GPUs, so that the adapter is tested end to end
// (dlopen, dlsym, the C ABI, error strings) on machines without a GPU.
//
// Configuration, read at the first nvmlInit_v2 after load or after the last nvmlShutdown:
//   TESSERA_FAKE_NVML_CONFIG   GPUs, comma-separated: MODEL[:key=value]...
//       MODEL        A100-40GB | H100-80GB (MIG-capable) | V100M32 (no MIG); the names
//                    of tessera's GPU model catalog
//       mig=0|1      current MIG mode (default 0); pending=0|1 (default: same as mig)
//       used=MiB     device memory in use (default: the processes' sum)
//       util=G/M     utilisation percent of GPU and memory (default 0/0)
//       procs=P/MiB[/GI/CI];...   compute processes (GI/CI ids only under MIG)
//       procstride=24|32          element size written by ..._v3 (32 mimics some R535 builds)
//     e.g. "H100-80GB:mig=1,A100-40GB:mig=0:procs=4242/1024;4343/2048"
//   TESSERA_FAKE_NVML_FAIL     NAME:CODE[,NAME:CODE]... makes function NAME return CODE
//       (an nvmlReturn_t value) on every call, e.g. "nvmlDeviceGetMemoryInfo:999".
//   TESSERA_FAKE_NVML_MUTATION_LOG   a file to which every call that could change MIG state
//       appends its name, so a test can prove a read-only tool never made one.
//
// The driver's answers and refusals, with the codes nvml.h documents for each call, corrected
// where a real driver (R580.159.04, NVML 13, H200) was seen to differ:
//   GetMigMode, profile info or placements on a GPU without MIG       NOT_SUPPORTED
//   profile info and placements with MIG disabled: answered, as R580 does (nvml.h says
//     NOT_SUPPORTED); instance queries and creation with MIG off       NOT_SUPPORTED
//   profile index 0x11 or more (R580 refuses 0x11 although nvml.h's COUNT is 0x12)
//                                                                      INVALID_ARGUMENT
//   create: unknown profile id, start the profile does not allow, wrong size
//                                                          INVALID_ARGUMENT
//   create: profile's instance count used up, overlapping memory slices, more than 7
//           compute slices in all                          INSUFFICIENT_RESOURCES
//   destroy a GI with compute instances or processes       IN_USE
//   utilisation on a MIG-enabled GPU                       NOT_SUPPORTED
//
// Thread-safety: every function takes one global mutex, as the real library is thread-safe.
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

namespace {

constexpr unsigned long long kMiB = 1024ULL * 1024ULL;
constexpr uint32_t kComputeSlices = 7;
// The GPU-instance profile indexes R580 accepts: 0x11 (3_SLICE_GFX) already gets
// INVALID_ARGUMENT there, although nvml.h (API 13) defines NVML_GPU_INSTANCE_PROFILE_COUNT 0x12.
constexpr unsigned int kDriverProfileIndexCount = 0x11;

// One GPU-instance profile of a model: the facts `nvidia-smi mig -lgip` / `-lgipp` print.
struct ProfileSpec {
  const char* name;         // "1g.10gb"
  uint32_t index;           // NVML_GPU_INSTANCE_PROFILE_*
  uint32_t id;              // profile id
  uint32_t compute_slices;  // sliceCount
  uint32_t memory_slices;   // placement size
  uint32_t max_count;       // instanceCount
  std::vector<uint32_t> starts;
  unsigned long long memory_mib;
  uint32_t sms;
};

struct ModelSpec {
  const char* key;        // what TESSERA_FAKE_NVML_CONFIG names
  const char* nvml_name;  // what nvmlDeviceGetName returns
  unsigned long long memory_mib;
  bool mig_capable;
  std::vector<ProfileSpec> profiles;
};

// TODO(partition): take this table from the core GPU model catalog once it carries the MIG
// profiles and placements (shared/gpu-models/mig-profiles.json); it is copied from there by
// hand for now, and tests/enforce/nvml_test.cc checks that both agree. Memory sizes are the
// `nvidia-smi mig -lgip` values the catalog holds, SM counts those of H100 SXM; names and
// totals as nvidia-smi prints them.
const std::vector<ModelSpec>& Models() {
  static const std::vector<ModelSpec> models = {
      {"A100-40GB",
       "NVIDIA A100-SXM4-40GB",
       40537,
       true,
       {
           {"1g.5gb", NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, 4864,
            14},
           {"1g.5gb+me", NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, 1, 1, 1, {0, 1, 2, 3, 4, 5, 6},
            4864, 14},
           {"1g.10gb", NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, 1, 2, 4, {0, 2, 4, 6}, 9856, 14},
           {"2g.10gb", NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, 2, 2, 3, {0, 2, 4}, 9856, 28},
           {"3g.20gb", NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 4, 2, {0, 4}, 19968, 42},
           {"4g.20gb", NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, 4, 4, 1, {0}, 19968, 56},
           {"7g.40gb", NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 8, 1, {0}, 40192, 98},
       }},
      {"H100-80GB",
       "NVIDIA H100 80GB HBM3",
       81559,
       true,
       {
           {"1g.10gb", NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19, 1, 1, 7, {0, 1, 2, 3, 4, 5, 6}, 9984,
            16},
           {"1g.10gb+me", NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, 1, 1, 1,
            {0, 1, 2, 3, 4, 5, 6}, 9984, 16},
           {"1g.20gb", NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15, 1, 2, 4, {0, 2, 4, 6}, 20096,
            26},
           {"2g.20gb", NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14, 2, 2, 3, {0, 2, 4}, 20096, 32},
           {"3g.40gb", NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, 3, 4, 2, {0, 4}, 40448, 60},
           {"4g.40gb", NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5, 4, 4, 1, {0}, 40448, 64},
           {"7g.80gb", NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0, 7, 8, 1, {0}, 81152, 132},
       }},
      {"V100M32", "Tesla V100-SXM2-32GB", 32510, false, {}},
  };
  return models;
}

// Compute-instance sizes by NVML_COMPUTE_INSTANCE_PROFILE_* index; 0 = not on these GPUs.
constexpr uint32_t kCiSlices[NVML_COMPUTE_INSTANCE_PROFILE_COUNT_API13] = {1, 2, 3, 4, 7,
                                                                          0, 0, 0, 0};

struct FakeProcess {
  uint32_t pid = 0;
  unsigned long long used_mib = 0;
  uint32_t gi = TESSERA_NVML_INSTANCE_ID_NONE;
  uint32_t ci = TESSERA_NVML_INSTANCE_ID_NONE;
};

struct FakeDevice;
struct FakeGi;

struct FakeCi {
  FakeGi* gi = nullptr;
  uint32_t id = 0;
  uint32_t profile_index = 0;  // the CI profile id equals its index on these GPUs
  uint32_t start = 0;
  uint32_t size = 0;
};

struct FakeGi {
  FakeDevice* device = nullptr;
  uint32_t id = 0;
  const ProfileSpec* profile = nullptr;
  uint32_t start = 0;
  std::vector<std::unique_ptr<FakeCi>> cis;
};

struct FakeDevice {
  const ModelSpec* model = nullptr;
  uint32_t index = 0;
  bool mig_current = false;
  bool mig_pending = false;
  bool used_set = false;
  unsigned long long used_mib = 0;
  unsigned int util_gpu = 0;
  unsigned int util_memory = 0;
  size_t proc_stride = sizeof(nvmlProcessInfo_t);
  std::vector<FakeProcess> procs;
  std::vector<std::unique_ptr<FakeGi>> gis;
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
  static State state;  // destroyed at dlclose, so leak checkers see nothing left behind
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
  if (s.empty()) return false;
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

bool ParseDevice(std::string_view spec, uint32_t index, FakeDevice* d) {
  std::vector<std::string> parts = Split(spec, ':');
  for (const ModelSpec& m : Models()) {
    if (parts[0] == m.key) d->model = &m;
  }
  if (d->model == nullptr) {
    return ConfigError("unknown model '" + parts[0] +
                       "' (known: A100-40GB, H100-80GB, V100M32)");
  }
  d->index = index;
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
    } else if (key == "procstride" && ParseUint(value, &n) && (n == 24 || n == 32)) {
      d->proc_stride = n;
    } else {
      return ConfigError("bad setting '" + parts[i] + "'");
    }
  }
  if (!pending_set) d->mig_pending = d->mig_current;
  if ((d->mig_current || d->mig_pending) && !d->model->mig_capable) {
    return ConfigError(std::string(d->model->key) + " has no MIG");
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
  uint32_t index = 0;
  for (const std::string& spec : Split(config, ',')) {
    auto d = std::make_unique<FakeDevice>();
    if (!ParseDevice(spec, index++, d.get())) {
      s.devices.clear();
      return false;
    }
    s.devices.push_back(std::move(d));
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

const ProfileSpec* ProfileByIndex(const FakeDevice& d, unsigned int index) {
  for (const ProfileSpec& p : d.model->profiles) {
    if (p.index == index) return &p;
  }
  return nullptr;
}

const ProfileSpec* ProfileById(const FakeDevice& d, unsigned int id) {
  for (const ProfileSpec& p : d.model->profiles) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

bool MigOn(const FakeDevice& d) { return d.model->mig_capable && d.mig_current; }

// Starts a compute instance of `size` slices may take inside a GI of `gi_slices` slices.
std::vector<uint32_t> CiStarts(uint32_t gi_slices, uint32_t size) {
  std::vector<uint32_t> starts;
  if (size == 3) {  // 3c sits at 0, and at 4 in a 7g (mirrors the 3g GI placements)
    starts.push_back(0);
    if (gi_slices >= 7) starts.push_back(4);
    return starts;
  }
  for (uint32_t s = 0; s + size <= gi_slices; s += size) starts.push_back(s);
  return starts;
}

// Whether CI profile `index` exists in `gi`, with its slice count.
bool CiProfile(const FakeGi& gi, unsigned int index, uint32_t* slices) {
  if (index >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT_API13) return false;
  uint32_t s = kCiSlices[index];
  uint32_t n = gi.profile->compute_slices;
  if (s == 0 || s > n) return false;
  if (n == 4 && s == 3) return false;  // a 4g offers 1c, 2c and 4c only
  *slices = s;
  return true;
}

uint32_t LowestFreeId(const std::vector<uint32_t>& used, uint32_t first) {
  uint32_t id = first;
  while (std::find(used.begin(), used.end(), id) != used.end()) ++id;
  return id;
}

void FillProfileInfo(const ProfileSpec& p, unsigned int* id, unsigned int* slices,
                     unsigned int* count, unsigned int* sms, unsigned int* copy_engines,
                     unsigned long long* memory) {
  *id = p.id;
  *slices = p.compute_slices;
  *count = p.max_count;
  *sms = p.sms;
  *copy_engines = p.compute_slices;
  *memory = p.memory_mib;
}

// Shared checks of both profile-info entry points.
nvmlReturn_t ProfileFor(State& s, nvmlDevice_t device, unsigned int index, bool info_null,
                        const ProfileSpec** out) {
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || info_null || index >= kDriverProfileIndexCount) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->model->mig_capable) return NVML_ERROR_NOT_SUPPORTED;  // answered with MIG off too
  *out = ProfileByIndex(*d, index);
  return *out == nullptr ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
}

nvmlReturn_t CopyString(const std::string& value, char* out, unsigned int length) {
  if (out == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (length < value.size() + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(out, value.c_str(), value.size() + 1);
  return NVML_SUCCESS;
}

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
    if (!LoadConfig(s)) return NVML_ERROR_UNKNOWN;
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
  return CopyString(d->model->nvml_name, name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  FAKE_NVML_ENTER("nvmlDeviceGetUUID");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  char text[64];
  std::snprintf(text, sizeof(text), "GPU-fa4e0000-0000-4000-8000-%012x", d->index);
  return CopyString(text, uuid, length);
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
  memory->total = d->model->memory_mib * kMiB;
  memory->used = std::min(used, d->model->memory_mib) * kMiB;
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

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                     nvmlProcessInfo_t* infos) {
  FAKE_NVML_ENTER("nvmlDeviceGetComputeRunningProcesses_v3");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || infoCount == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  const auto n = static_cast<unsigned int>(d->procs.size());
  if (n == 0) {
    *infoCount = 0;
    return NVML_SUCCESS;
  }
  if (infos == nullptr || *infoCount < n) {
    *infoCount = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  auto* out = reinterpret_cast<unsigned char*>(infos);
  for (unsigned int i = 0; i < n; ++i) {
    const FakeProcess& p = d->procs[i];
    nvmlProcessInfoWithCc_t e{};
    e.pid = p.pid;
    e.usedGpuMemory = p.used_mib * kMiB;
    e.gpuInstanceId = MigOn(*d) ? p.gi : TESSERA_NVML_INSTANCE_ID_NONE;
    e.computeInstanceId = MigOn(*d) ? p.ci : TESSERA_NVML_INSTANCE_ID_NONE;
    e.usedGpuCcProtectedMemory = 0;
    std::memcpy(out + i * d->proc_stride, &e, d->proc_stride);
  }
  *infoCount = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                  unsigned int* pendingMode) {
  FAKE_NVML_ENTER("nvmlDeviceGetMigMode");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || currentMode == nullptr || pendingMode == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  if (!d->model->mig_capable) return NVML_ERROR_NOT_SUPPORTED;
  *currentMode = d->mig_current ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  *pendingMode = d->mig_pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t* info) {
  FAKE_NVML_ENTER("nvmlDeviceGetGpuInstanceProfileInfo");
  const ProfileSpec* p = nullptr;
  if (nvmlReturn_t r = ProfileFor(s, device, profile, info == nullptr, &p); r != NVML_SUCCESS) {
    return r;
  }
  std::memset(info, 0, sizeof(*info));
  FillProfileInfo(*p, &info->id, &info->sliceCount, &info->instanceCount,
                  &info->multiprocessorCount, &info->copyEngineCount, &info->memorySizeMB);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t* info) {
  FAKE_NVML_ENTER("nvmlDeviceGetGpuInstanceProfileInfoV");
  const ProfileSpec* p = nullptr;
  if (nvmlReturn_t r = ProfileFor(s, device, profile, info == nullptr, &p); r != NVML_SUCCESS) {
    return r;
  }
  if (info->version != kNvmlGpuInstanceProfileInfoV2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  std::memset(info, 0, sizeof(*info));
  info->version = kNvmlGpuInstanceProfileInfoV2;
  FillProfileInfo(*p, &info->id, &info->sliceCount, &info->instanceCount,
                  &info->multiprocessorCount, &info->copyEngineCount, &info->memorySizeMB);
  std::snprintf(info->name, sizeof(info->name), "MIG %s", p->name);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                           unsigned int profileId,
                                                           nvmlGpuInstancePlacement_t* placements,
                                                           unsigned int* count) {
  FAKE_NVML_ENTER("nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  FakeDevice* d = FindDevice(s, device);
  if (d == nullptr || count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (!d->model->mig_capable) return NVML_ERROR_NOT_SUPPORTED;  // answered with MIG off too
  const ProfileSpec* p = ProfileById(*d, profileId);
  if (p == nullptr) return NVML_ERROR_NOT_SUPPORTED;
  const auto n = static_cast<unsigned int>(p->starts.size());
  if (placements == nullptr) {
    *count = n;
    return NVML_SUCCESS;
  }
  if (*count < n) {
    *count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (unsigned int i = 0; i < n; ++i) placements[i] = {p->starts[i], p->memory_slices};
  *count = n;
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
  const ProfileSpec* p = ProfileById(*d, profileId);
  if (p == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  if (placement->size != p->memory_slices ||
      std::find(p->starts.begin(), p->starts.end(), placement->start) == p->starts.end()) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  uint32_t same_profile = 0;
  uint32_t compute_used = 0;
  std::vector<uint32_t> ids;
  for (const auto& gi : d->gis) {
    ids.push_back(gi->id);
    compute_used += gi->profile->compute_slices;
    if (gi->profile == p) ++same_profile;
    const uint32_t a0 = gi->start;
    const uint32_t a1 = gi->start + gi->profile->memory_slices;
    const uint32_t b0 = placement->start;
    const uint32_t b1 = placement->start + placement->size;
    if (a0 < b1 && b0 < a1) return NVML_ERROR_INSUFFICIENT_RESOURCES;  // memory slices overlap
  }
  if (same_profile >= p->max_count) return NVML_ERROR_INSUFFICIENT_RESOURCES;
  if (compute_used + p->compute_slices > kComputeSlices) return NVML_ERROR_INSUFFICIENT_RESOURCES;
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
  const ProfileSpec* p = ProfileById(*d, profileId);
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
  info->profileId = gi->profile->id;
  info->placement = {gi->start, gi->profile->memory_slices};
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
  uint32_t slices = 0;
  if (!CiProfile(*gi, profile, &slices)) return NVML_ERROR_NOT_SUPPORTED;
  std::memset(info, 0, sizeof(*info));
  info->id = profile;
  info->sliceCount = slices;
  info->instanceCount =
      static_cast<unsigned int>(CiStarts(gi->profile->compute_slices, slices).size());
  info->multiprocessorCount = gi->profile->sms * slices / gi->profile->compute_slices;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                  unsigned int profileId,
                                                  nvmlComputeInstance_t* computeInstance) {
  FAKE_NVML_ENTER("nvmlGpuInstanceCreateComputeInstance");
  LogMutation(s, "nvmlGpuInstanceCreateComputeInstance");
  FakeGi* gi = FindGi(s, gpuInstance);
  if (gi == nullptr || computeInstance == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  uint32_t slices = 0;
  if (!CiProfile(*gi, profileId, &slices)) return NVML_ERROR_INVALID_ARGUMENT;
  std::vector<uint32_t> ids;
  for (const auto& ci : gi->cis) ids.push_back(ci->id);
  for (uint32_t start : CiStarts(gi->profile->compute_slices, slices)) {
    bool free = true;
    for (const auto& ci : gi->cis) {
      if (ci->start < start + slices && start < ci->start + ci->size) free = false;
    }
    if (!free) continue;
    auto ci = std::make_unique<FakeCi>();
    ci->gi = gi;
    ci->id = LowestFreeId(ids, 0);
    ci->profile_index = profileId;
    ci->start = start;
    ci->size = slices;
    *computeInstance = reinterpret_cast<nvmlComputeInstance_t>(ci.get());
    gi->cis.push_back(std::move(ci));
    return NVML_SUCCESS;
  }
  return NVML_ERROR_INSUFFICIENT_RESOURCES;
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
  uint32_t slices = 0;
  if (!CiProfile(*gi, profileId, &slices)) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned int n = 0;
  for (const auto& ci : gi->cis) {
    if (ci->profile_index == profileId) {
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
  info->profileId = ci->profile_index;
  info->placement = {ci->start, ci->size};
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
