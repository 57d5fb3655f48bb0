// DlopenNvml: NvmlApi over libnvidia-ml.so.1 loaded with dlopen. The ABI it relies on is
// declared in nvml_abi.h (checked against the sizes NVML publishes).
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "src/enforce/nvml_abi.h"
#include "tessera/enforce/nvml.h"

namespace tessera::enforce {

StatusCode NvmlReturnToStatusCode(int nvml_return) {
  switch (nvml_return) {
    case NVML_SUCCESS:
      return StatusCode::kOk;
    case NVML_ERROR_INVALID_ARGUMENT:
      return StatusCode::kInvalidArgument;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED:
    case NVML_ERROR_FREQ_NOT_SUPPORTED:
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:  // our struct version is not the driver's
    case NVML_ERROR_DEPRECATED:
      return StatusCode::kUnimplemented;
    case NVML_ERROR_NO_PERMISSION:
    case NVML_ERROR_OPERATING_SYSTEM:
      return StatusCode::kPermissionDenied;
    case NVML_ERROR_ALREADY_INITIALIZED:
      return StatusCode::kAlreadyExists;
    case NVML_ERROR_NOT_FOUND:
    case NVML_ERROR_GPU_NOT_FOUND:
    case NVML_ERROR_NO_DATA:
      return StatusCode::kNotFound;
    case NVML_ERROR_INSUFFICIENT_SIZE:  // a buffer of ours was too small
    case NVML_ERROR_IRQ_ISSUE:
      return StatusCode::kInternal;
    case NVML_ERROR_INSUFFICIENT_RESOURCES:
    case NVML_ERROR_MEMORY:
      return StatusCode::kResourceExhausted;
    case NVML_ERROR_UNINITIALIZED:
    case NVML_ERROR_RESET_REQUIRED:
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH:
    case NVML_ERROR_IN_USE:
    case NVML_ERROR_INVALID_STATE:
      return StatusCode::kFailedPrecondition;
    case NVML_ERROR_INSUFFICIENT_POWER:
    case NVML_ERROR_DRIVER_NOT_LOADED:
    case NVML_ERROR_LIBRARY_NOT_FOUND:
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_NOT_READY:
      return StatusCode::kUnavailable;
    case NVML_ERROR_TIMEOUT:
      return StatusCode::kDeadlineExceeded;
    case NVML_ERROR_CORRUPTED_INFOROM:
      return StatusCode::kDataLoss;
    default:
      return StatusCode::kUnknown;
  }
}

namespace {

constexpr uint64_t kBytesPerMiB = 1024 * 1024;
// Linux's PID_MAX_LIMIT on 64-bit (2^22); a larger "pid" means the buffer was misread.
constexpr uint32_t kMaxLinuxPid = 1u << 22;
// No GPU instance or compute instance id NVML hands out comes near this.
constexpr uint32_t kMaxPlausibleInstanceId = 1024;
// Retries when the process list grows between the size query and the read.
constexpr int kProcessListAttempts = 4;

MiB BytesToMiB(unsigned long long bytes) { return MiB(static_cast<int64_t>(bytes / kBytesPerMiB)); }

std::string GpuArg(uint32_t gpu) { return "gpu " + std::to_string(gpu); }

std::string GiArg(uint32_t gpu, uint32_t gi) {
  return GpuArg(gpu) + ", gpu instance " + std::to_string(gi);
}

Status NotInitialised() {
  return FailedPreconditionError("NVML is not initialised: call Init() first");
}

// Copies a NUL-terminated string out of a fixed buffer that may lack the terminator.
std::string FromBuffer(const char* buf, size_t size) {
  return std::string(buf, strnlen(buf, size));
}

// A process entry read at a given stride, or nothing if it looks like a misread.
std::optional<GpuProcess> DecodeProcess(const unsigned char* p) {
  nvmlProcessInfo_t raw;
  std::memcpy(&raw, p, sizeof(raw));
  if (raw.pid == 0 || raw.pid > kMaxLinuxPid) return std::nullopt;
  GpuProcess out;
  out.pid = raw.pid;
  if (raw.usedGpuMemory != TESSERA_NVML_VALUE_NOT_AVAILABLE_ULL) {
    if (raw.usedGpuMemory > (1ULL << 50)) return std::nullopt;  // over a PiB: misread
    out.used_memory = BytesToMiB(raw.usedGpuMemory);
  }
  for (auto [id, field] : {std::pair{raw.gpuInstanceId, &out.gpu_instance_id},
                           std::pair{raw.computeInstanceId, &out.compute_instance_id}}) {
    if (id == TESSERA_NVML_INSTANCE_ID_NONE) continue;
    if (id > kMaxPlausibleInstanceId) return std::nullopt;
    *field = id;
  }
  return out;
}

// Drivers disagree on the element size of nvmlDeviceGetComputeRunningProcesses_v3's array:
// current ones write nvmlProcessInfo_v2_t (24 bytes), some R535 builds wrote the 32-byte
// nvmlProcessInfo_v3_t through the same entry point. With one entry both read the same; with
// more, the wrong stride yields a zero pid or absurd values, so take the documented stride
// unless it decodes to nonsense and the other one does not.
std::vector<GpuProcess> DecodeProcesses(const unsigned char* bytes, unsigned int count) {
  for (size_t stride : {sizeof(nvmlProcessInfo_t), sizeof(nvmlProcessInfoWithCc_t)}) {
    std::vector<GpuProcess> out;
    for (unsigned int i = 0; i < count; ++i) {
      std::optional<GpuProcess> p = DecodeProcess(bytes + i * stride);
      if (!p) break;
      out.push_back(*p);
    }
    if (out.size() == count) return out;
  }
  std::vector<GpuProcess> out;  // neither looks sane: report what the header documents
  for (unsigned int i = 0; i < count; ++i) {
    nvmlProcessInfo_t raw;
    std::memcpy(&raw, bytes + i * sizeof(raw), sizeof(raw));
    GpuProcess p;
    p.pid = raw.pid;
    if (raw.usedGpuMemory != TESSERA_NVML_VALUE_NOT_AVAILABLE_ULL) {
      p.used_memory = BytesToMiB(raw.usedGpuMemory);
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace

struct DlopenNvml::Library {
  void* handle = nullptr;
  std::string path;

  // Present in every driver tessera supports (Init fails without them).
  decltype(&nvmlInit_v2) init = nullptr;
  decltype(&nvmlShutdown) shutdown = nullptr;
  decltype(&nvmlErrorString) error_string = nullptr;
  decltype(&nvmlDeviceGetCount_v2) get_count = nullptr;
  decltype(&nvmlDeviceGetHandleByIndex_v2) get_handle = nullptr;
  decltype(&nvmlDeviceGetName) get_name = nullptr;
  decltype(&nvmlDeviceGetUUID) get_uuid = nullptr;
  decltype(&nvmlDeviceGetMemoryInfo) get_memory = nullptr;
  // Resolved if present; calls that need a missing one fail with UNIMPLEMENTED.
  decltype(&nvmlDeviceGetUtilizationRates) get_utilization = nullptr;
  decltype(&nvmlDeviceGetMinorNumber) get_minor = nullptr;
  decltype(&nvmlDeviceGetMaxMigDeviceCount) get_max_mig = nullptr;
  decltype(&nvmlDeviceGetMigDeviceHandleByIndex) get_mig_handle = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceId) get_mig_gi_id = nullptr;
  decltype(&nvmlDeviceGetComputeInstanceId) get_mig_ci_id = nullptr;
  decltype(&nvmlDeviceGetComputeRunningProcesses_v3) get_processes = nullptr;
  decltype(&nvmlDeviceGetProcessUtilization) get_process_utilization = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceRemainingCapacity) get_gi_capacity = nullptr;
  decltype(&nvmlGpuInstanceGetComputeInstancePossiblePlacements) get_ci_placements = nullptr;
  decltype(&nvmlGpuInstanceCreateComputeInstanceWithPlacement) create_ci_at = nullptr;
  decltype(&nvmlDeviceGetMigMode) get_mig_mode = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceProfileInfo) get_gi_profile_v1 = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceProfileInfoV) get_gi_profile_v2 = nullptr;
  decltype(&nvmlDeviceGetGpuInstancePossiblePlacements_v2) get_gi_placements = nullptr;
  decltype(&nvmlDeviceCreateGpuInstanceWithPlacement) create_gi = nullptr;
  decltype(&nvmlGpuInstanceDestroy) destroy_gi = nullptr;
  decltype(&nvmlDeviceGetGpuInstances) get_gis = nullptr;
  decltype(&nvmlDeviceGetGpuInstanceById) get_gi_by_id = nullptr;
  decltype(&nvmlGpuInstanceGetInfo) get_gi_info = nullptr;
  decltype(&nvmlGpuInstanceGetComputeInstanceProfileInfo) get_ci_profile = nullptr;
  decltype(&nvmlGpuInstanceCreateComputeInstance) create_ci = nullptr;
  decltype(&nvmlGpuInstanceGetComputeInstances) get_cis = nullptr;
  decltype(&nvmlGpuInstanceGetComputeInstanceById) get_ci_by_id = nullptr;
  decltype(&nvmlComputeInstanceGetInfo_v2) get_ci_info = nullptr;
  decltype(&nvmlComputeInstanceDestroy) destroy_ci = nullptr;

  ~Library() {
    if (handle != nullptr) dlclose(handle);
  }

  template <typename Fn>
  void Resolve(Fn*& fn, const char* name) {
    fn = reinterpret_cast<Fn*>(dlsym(handle, name));
  }

  // "<call>(<args>): <NVML's string> (NVML error <n>)" with the mapped code.
  Status Error(nvmlReturn_t r, std::string_view call, std::string_view args) const {
    const char* text = error_string != nullptr ? error_string(r) : nullptr;
    std::string message(call);
    message += "(";
    message += args;
    message += "): ";
    message += text != nullptr ? text : "(no error string)";
    message += " (NVML error " + std::to_string(r) + ")";
    return Status(NvmlReturnToStatusCode(r), std::move(message));
  }

  // The compute-instance profile `index` of a GPU instance (shared engines); `args` names the
  // call's arguments in the error.
  StatusOr<nvmlComputeInstanceProfileInfo_t> CiProfile(nvmlGpuInstance_t gi, uint32_t index,
                                                       std::string_view args) const {
    nvmlComputeInstanceProfileInfo_t info;
    std::memset(&info, 0, sizeof(info));
    const nvmlReturn_t r =
        get_ci_profile(gi, index, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
    if (r != NVML_SUCCESS) return Error(r, "nvmlGpuInstanceGetComputeInstanceProfileInfo", args);
    return info;
  }

  Status Missing(std::string_view function) const {
    return UnimplementedError(path + " does not export " + std::string(function) +
                              " (driver too old?)");
  }

  StatusOr<nvmlDevice_t> Device(uint32_t gpu) const {
    nvmlDevice_t device = nullptr;
    nvmlReturn_t r = get_handle(gpu, &device);
    if (r != NVML_SUCCESS) return Error(r, "nvmlDeviceGetHandleByIndex_v2", GpuArg(gpu));
    return device;
  }

  StatusOr<nvmlGpuInstance_t> GpuInstanceById(uint32_t gpu, uint32_t gi_id) const {
    if (get_gi_by_id == nullptr) return Missing("nvmlDeviceGetGpuInstanceById");
    TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, Device(gpu));
    nvmlGpuInstance_t gi = nullptr;
    nvmlReturn_t r = get_gi_by_id(device, gi_id, &gi);
    if (r != NVML_SUCCESS) return Error(r, "nvmlDeviceGetGpuInstanceById", GiArg(gpu, gi_id));
    return gi;
  }

  // nvmlDeviceGetGpuInstanceProfileInfoV (which also gives the name) where the driver has
  // it and accepts our struct version, else the unversioned call. Returns the raw code so
  // that callers can skip profiles the GPU lacks.
  nvmlReturn_t ProfileInfo(nvmlDevice_t device, uint32_t index, GpuInstanceProfile* out,
                           const char** call) const {
    out->profile_index = index;
    if (get_gi_profile_v2 != nullptr) {
      nvmlGpuInstanceProfileInfo_v2_t info;
      std::memset(&info, 0, sizeof(info));
      info.version = kNvmlGpuInstanceProfileInfoV2;
      *call = "nvmlDeviceGetGpuInstanceProfileInfoV";
      nvmlReturn_t r = get_gi_profile_v2(device, index, &info);
      if (r == NVML_SUCCESS) {
        out->id = info.id;
        out->slice_count = info.sliceCount;
        out->instance_count = info.instanceCount;
        out->multiprocessor_count = info.multiprocessorCount;
        out->memory = MiB(static_cast<int64_t>(info.memorySizeMB));
        out->name = FromBuffer(info.name, sizeof(info.name));
        return r;
      }
      if (r != NVML_ERROR_ARGUMENT_VERSION_MISMATCH && r != NVML_ERROR_FUNCTION_NOT_FOUND) {
        return r;
      }
    }
    if (get_gi_profile_v1 == nullptr) {
      *call = "nvmlDeviceGetGpuInstanceProfileInfo";
      return NVML_ERROR_FUNCTION_NOT_FOUND;
    }
    nvmlGpuInstanceProfileInfo_t info;
    std::memset(&info, 0, sizeof(info));
    *call = "nvmlDeviceGetGpuInstanceProfileInfo";
    nvmlReturn_t r = get_gi_profile_v1(device, index, &info);
    if (r == NVML_SUCCESS) {
      out->id = info.id;
      out->slice_count = info.sliceCount;
      out->instance_count = info.instanceCount;
      out->multiprocessor_count = info.multiprocessorCount;
      out->memory = MiB(static_cast<int64_t>(info.memorySizeMB));
      out->name.clear();
    }
    return r;
  }

  StatusOr<ComputeInstance> CiInfo(nvmlComputeInstance_t ci, uint32_t gpu, uint32_t gi_id) const {
    nvmlComputeInstanceInfo_t info;
    std::memset(&info, 0, sizeof(info));
    nvmlReturn_t r = get_ci_info(ci, &info);
    if (r != NVML_SUCCESS) return Error(r, "nvmlComputeInstanceGetInfo_v2", GiArg(gpu, gi_id));
    return ComputeInstance{.id = info.id,
                           .profile_id = info.profileId,
                           .start = info.placement.start,
                           .size = info.placement.size};
  }

  StatusOr<GpuInstance> GiInfo(nvmlGpuInstance_t gi, uint32_t gpu) const {
    nvmlGpuInstanceInfo_t info;
    std::memset(&info, 0, sizeof(info));
    nvmlReturn_t r = get_gi_info(gi, &info);
    if (r != NVML_SUCCESS) return Error(r, "nvmlGpuInstanceGetInfo", GpuArg(gpu));
    return GpuInstance{.id = info.id,
                       .profile_id = info.profileId,
                       .placement = {.start = info.placement.start, .size = info.placement.size}};
  }
};

DlopenNvml::DlopenNvml(NvmlOptions options) : options_(std::move(options)) {}

DlopenNvml::~DlopenNvml() {
  if (lib_ != nullptr) lib_->shutdown();  // the Library's destructor closes the handle
}

Status DlopenNvml::Init() {
  if (lib_ != nullptr) return FailedPreconditionError("NVML is already initialised");
  auto lib = std::make_unique<Library>();
  lib->path = options_.library_path;
  dlerror();
  lib->handle = dlopen(lib->path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle == nullptr) {
    const char* why = dlerror();
    return UnavailableError(lib->path + " not found: " + (why != nullptr ? why : "dlopen failed"));
  }

  Library& l = *lib;
  l.Resolve(l.init, "nvmlInit_v2");
  l.Resolve(l.shutdown, "nvmlShutdown");
  l.Resolve(l.error_string, "nvmlErrorString");
  l.Resolve(l.get_count, "nvmlDeviceGetCount_v2");
  l.Resolve(l.get_handle, "nvmlDeviceGetHandleByIndex_v2");
  l.Resolve(l.get_name, "nvmlDeviceGetName");
  l.Resolve(l.get_uuid, "nvmlDeviceGetUUID");
  l.Resolve(l.get_memory, "nvmlDeviceGetMemoryInfo");
  const std::pair<bool, const char*> required[] = {
      {l.init != nullptr, "nvmlInit_v2"},
      {l.shutdown != nullptr, "nvmlShutdown"},
      {l.error_string != nullptr, "nvmlErrorString"},
      {l.get_count != nullptr, "nvmlDeviceGetCount_v2"},
      {l.get_handle != nullptr, "nvmlDeviceGetHandleByIndex_v2"},
      {l.get_name != nullptr, "nvmlDeviceGetName"},
      {l.get_uuid != nullptr, "nvmlDeviceGetUUID"},
      {l.get_memory != nullptr, "nvmlDeviceGetMemoryInfo"},
  };
  for (const auto& [present, name] : required) {
    if (!present) return UnavailableError(l.path + " lacks the NVML function " + name);
  }
  l.Resolve(l.get_utilization, "nvmlDeviceGetUtilizationRates");
  l.Resolve(l.get_minor, "nvmlDeviceGetMinorNumber");
  l.Resolve(l.get_max_mig, "nvmlDeviceGetMaxMigDeviceCount");
  l.Resolve(l.get_mig_handle, "nvmlDeviceGetMigDeviceHandleByIndex");
  l.Resolve(l.get_mig_gi_id, "nvmlDeviceGetGpuInstanceId");
  l.Resolve(l.get_mig_ci_id, "nvmlDeviceGetComputeInstanceId");
  l.Resolve(l.get_processes, "nvmlDeviceGetComputeRunningProcesses_v3");
  l.Resolve(l.get_process_utilization, "nvmlDeviceGetProcessUtilization");
  l.Resolve(l.get_gi_capacity, "nvmlDeviceGetGpuInstanceRemainingCapacity");
  l.Resolve(l.get_ci_placements, "nvmlGpuInstanceGetComputeInstancePossiblePlacements");
  l.Resolve(l.create_ci_at, "nvmlGpuInstanceCreateComputeInstanceWithPlacement");
  l.Resolve(l.get_mig_mode, "nvmlDeviceGetMigMode");
  l.Resolve(l.get_gi_profile_v1, "nvmlDeviceGetGpuInstanceProfileInfo");
  l.Resolve(l.get_gi_profile_v2, "nvmlDeviceGetGpuInstanceProfileInfoV");
  l.Resolve(l.get_gi_placements, "nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  l.Resolve(l.create_gi, "nvmlDeviceCreateGpuInstanceWithPlacement");
  l.Resolve(l.destroy_gi, "nvmlGpuInstanceDestroy");
  l.Resolve(l.get_gis, "nvmlDeviceGetGpuInstances");
  l.Resolve(l.get_gi_by_id, "nvmlDeviceGetGpuInstanceById");
  l.Resolve(l.get_gi_info, "nvmlGpuInstanceGetInfo");
  l.Resolve(l.get_ci_profile, "nvmlGpuInstanceGetComputeInstanceProfileInfo");
  l.Resolve(l.create_ci, "nvmlGpuInstanceCreateComputeInstance");
  l.Resolve(l.get_cis, "nvmlGpuInstanceGetComputeInstances");
  l.Resolve(l.get_ci_by_id, "nvmlGpuInstanceGetComputeInstanceById");
  l.Resolve(l.get_ci_info, "nvmlComputeInstanceGetInfo_v2");
  l.Resolve(l.destroy_ci, "nvmlComputeInstanceDestroy");

  nvmlReturn_t r = l.init();
  if (r != NVML_SUCCESS) return l.Error(r, "nvmlInit_v2", "");
  lib_ = std::move(lib);
  return Status::Ok();
}

Status DlopenNvml::Shutdown() {
  if (lib_ == nullptr) return NotInitialised();
  std::unique_ptr<Library> lib = std::move(lib_);
  nvmlReturn_t r = lib->shutdown();
  if (r != NVML_SUCCESS) return lib->Error(r, "nvmlShutdown", "");
  return Status::Ok();
}

StatusOr<uint32_t> DlopenNvml::DeviceCount() const {
  if (lib_ == nullptr) return NotInitialised();
  unsigned int count = 0;
  nvmlReturn_t r = lib_->get_count(&count);
  if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlDeviceGetCount_v2", "");
  return static_cast<uint32_t>(count);
}

StatusOr<std::string> DlopenNvml::DeviceName(uint32_t gpu) const {
  if (lib_ == nullptr) return NotInitialised();
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  nvmlReturn_t r = lib_->get_name(device, name, sizeof(name));
  if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlDeviceGetName", GpuArg(gpu));
  return FromBuffer(name, sizeof(name));
}

StatusOr<uint32_t> DlopenNvml::MinorNumber(uint32_t gpu) const {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_minor == nullptr) return UnimplementedError(lib_->path + " lacks nvmlDeviceGetMinorNumber");
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  unsigned int minor = 0;
  nvmlReturn_t r = lib_->get_minor(device, &minor);
  if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlDeviceGetMinorNumber", GpuArg(gpu));
  return static_cast<uint32_t>(minor);
}

StatusOr<std::string> DlopenNvml::DeviceUuid(uint32_t gpu) const {
  if (lib_ == nullptr) return NotInitialised();
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  nvmlReturn_t r = lib_->get_uuid(device, uuid, sizeof(uuid));
  if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlDeviceGetUUID", GpuArg(gpu));
  return FromBuffer(uuid, sizeof(uuid));
}

StatusOr<std::vector<MigDevice>> DlopenNvml::MigDevices(uint32_t gpu) const {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_max_mig == nullptr) return lib_->Missing("nvmlDeviceGetMaxMigDeviceCount");
  if (lib_->get_mig_handle == nullptr) return lib_->Missing("nvmlDeviceGetMigDeviceHandleByIndex");
  if (lib_->get_mig_gi_id == nullptr) return lib_->Missing("nvmlDeviceGetGpuInstanceId");
  if (lib_->get_mig_ci_id == nullptr) return lib_->Missing("nvmlDeviceGetComputeInstanceId");
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  unsigned int max = 0;
  nvmlReturn_t r = lib_->get_max_mig(device, &max);
  if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlDeviceGetMaxMigDeviceCount", GpuArg(gpu));
  std::vector<MigDevice> out;
  for (unsigned int i = 0; i < max; ++i) {
    nvmlDevice_t mig = nullptr;
    r = lib_->get_mig_handle(device, i, &mig);
    if (r == NVML_ERROR_NOT_FOUND) continue;  // no MIG device at this index
    if (r == NVML_ERROR_NOT_SUPPORTED) return out;  // MIG is off
    const std::string args = GpuArg(gpu) + ", MIG device " + std::to_string(i);
    if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlDeviceGetMigDeviceHandleByIndex", args);
    MigDevice d;
    unsigned int id = 0;
    if ((r = lib_->get_mig_gi_id(mig, &id)) != NVML_SUCCESS) return lib_->Error(r, "nvmlDeviceGetGpuInstanceId", args);
    d.gpu_instance_id = id;
    if ((r = lib_->get_mig_ci_id(mig, &id)) != NVML_SUCCESS)
      return lib_->Error(r, "nvmlDeviceGetComputeInstanceId", args);
    d.compute_instance_id = id;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if ((r = lib_->get_uuid(mig, uuid, sizeof(uuid))) != NVML_SUCCESS) return lib_->Error(r, "nvmlDeviceGetUUID", args);
    d.uuid = FromBuffer(uuid, sizeof(uuid));
    out.push_back(std::move(d));
  }
  return out;
}

StatusOr<DeviceMemory> DlopenNvml::Memory(uint32_t gpu) const {
  if (lib_ == nullptr) return NotInitialised();
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  nvmlMemory_t memory;
  std::memset(&memory, 0, sizeof(memory));
  nvmlReturn_t r = lib_->get_memory(device, &memory);
  if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlDeviceGetMemoryInfo", GpuArg(gpu));
  return DeviceMemory{.total = BytesToMiB(memory.total),
                      .free = BytesToMiB(memory.free),
                      .used = BytesToMiB(memory.used)};
}

StatusOr<MigMode> DlopenNvml::GetMigMode(uint32_t gpu) const {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_mig_mode == nullptr) return lib_->Missing("nvmlDeviceGetMigMode");
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  unsigned int current = 0;
  unsigned int pending = 0;
  nvmlReturn_t r = lib_->get_mig_mode(device, &current, &pending);
  if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlDeviceGetMigMode", GpuArg(gpu));
  return MigMode{.current_enabled = current == NVML_DEVICE_MIG_ENABLE,
                 .pending_enabled = pending == NVML_DEVICE_MIG_ENABLE};
}

StatusOr<GpuInstanceProfile> DlopenNvml::GpuInstanceProfileInfo(uint32_t gpu,
                                                                uint32_t profile_index) const {
  if (lib_ == nullptr) return NotInitialised();
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  GpuInstanceProfile profile;
  const char* call = "";
  nvmlReturn_t r = lib_->ProfileInfo(device, profile_index, &profile, &call);
  if (r == NVML_ERROR_FUNCTION_NOT_FOUND && lib_->get_gi_profile_v1 == nullptr) {
    return lib_->Missing("nvmlDeviceGetGpuInstanceProfileInfo");
  }
  if (r != NVML_SUCCESS) {
    return lib_->Error(r, call, GpuArg(gpu) + ", profile index " + std::to_string(profile_index));
  }
  return profile;
}

StatusOr<std::vector<GpuInstancePlacement>> DlopenNvml::GpuInstancePossiblePlacements(
    uint32_t gpu, uint32_t profile_id) const {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_gi_placements == nullptr) {
    return lib_->Missing("nvmlDeviceGetGpuInstancePossiblePlacements_v2");
  }
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  const std::string args = GpuArg(gpu) + ", profile id " + std::to_string(profile_id);
  unsigned int count = 0;
  nvmlReturn_t r = lib_->get_gi_placements(device, profile_id, nullptr, &count);
  if (r != NVML_SUCCESS) {
    return lib_->Error(r, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", args);
  }
  std::vector<nvmlGpuInstancePlacement_t> raw(count);
  if (count > 0) {
    r = lib_->get_gi_placements(device, profile_id, raw.data(), &count);
    if (r != NVML_SUCCESS) {
      return lib_->Error(r, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", args);
    }
    raw.resize(std::min<size_t>(count, raw.size()));
  }
  std::vector<GpuInstancePlacement> out;
  out.reserve(raw.size());
  for (const nvmlGpuInstancePlacement_t& p : raw) out.push_back({.start = p.start, .size = p.size});
  return out;
}

StatusOr<std::vector<GpuInstance>> DlopenNvml::GpuInstances(uint32_t gpu) const {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_gis == nullptr) return lib_->Missing("nvmlDeviceGetGpuInstances");
  if (lib_->get_gi_info == nullptr) return lib_->Missing("nvmlGpuInstanceGetInfo");
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  std::vector<GpuInstance> out;
  for (uint32_t index = 0; index < kGpuInstanceProfileIndexCount; ++index) {
    GpuInstanceProfile profile;
    const char* call = "";
    nvmlReturn_t r = lib_->ProfileInfo(device, index, &profile, &call);
    // The GPU lacks this profile, MIG is off, or the driver knows fewer profile indexes.
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (r != NVML_SUCCESS) {
      return lib_->Error(r, call, GpuArg(gpu) + ", profile index " + std::to_string(index));
    }
    // The buffer must hold every instance the profile allows (nvml.h).
    std::vector<nvmlGpuInstance_t> handles(std::max<uint32_t>(profile.instance_count, 1) + 1);
    unsigned int count = static_cast<unsigned int>(handles.size());
    r = lib_->get_gis(device, profile.id, handles.data(), &count);
    if (r == NVML_ERROR_NOT_SUPPORTED) continue;
    if (r != NVML_SUCCESS) {
      return lib_->Error(r, "nvmlDeviceGetGpuInstances",
                         GpuArg(gpu) + ", profile id " + std::to_string(profile.id));
    }
    for (unsigned int i = 0; i < count && i < handles.size(); ++i) {
      TESSERA_ASSIGN_OR_RETURN(GpuInstance gi, lib_->GiInfo(handles[i], gpu));
      auto same_id = [&](const GpuInstance& g) { return g.id == gi.id; };
      if (std::none_of(out.begin(), out.end(), same_id)) out.push_back(gi);
    }
  }
  std::sort(out.begin(), out.end(), [](const GpuInstance& a, const GpuInstance& b) {
    return a.placement.start != b.placement.start ? a.placement.start < b.placement.start
                                                  : a.id < b.id;
  });
  return out;
}

StatusOr<GpuInstance> DlopenNvml::CreateGpuInstance(uint32_t gpu, uint32_t profile_id,
                                                    const GpuInstancePlacement& placement) {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->create_gi == nullptr) return lib_->Missing("nvmlDeviceCreateGpuInstanceWithPlacement");
  if (lib_->get_gi_info == nullptr) return lib_->Missing("nvmlGpuInstanceGetInfo");
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  nvmlGpuInstancePlacement_t raw{.start = placement.start, .size = placement.size};
  nvmlGpuInstance_t gi = nullptr;
  nvmlReturn_t r = lib_->create_gi(device, profile_id, &raw, &gi);
  if (r != NVML_SUCCESS) {
    return lib_->Error(r, "nvmlDeviceCreateGpuInstanceWithPlacement",
                       GpuArg(gpu) + ", profile id " + std::to_string(profile_id) + ", placement " +
                           std::to_string(placement.start) + ":" + std::to_string(placement.size));
  }
  return lib_->GiInfo(gi, gpu);
}

Status DlopenNvml::DestroyGpuInstance(uint32_t gpu, uint32_t gpu_instance_id) {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->destroy_gi == nullptr) return lib_->Missing("nvmlGpuInstanceDestroy");
  TESSERA_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, lib_->GpuInstanceById(gpu, gpu_instance_id));
  nvmlReturn_t r = lib_->destroy_gi(gi);
  if (r != NVML_SUCCESS) {
    return lib_->Error(r, "nvmlGpuInstanceDestroy", GiArg(gpu, gpu_instance_id));
  }
  return Status::Ok();
}

StatusOr<uint32_t> DlopenNvml::GpuInstanceRemainingCapacity(uint32_t gpu,
                                                            uint32_t profile_id) const {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_gi_capacity == nullptr) {
    return lib_->Missing("nvmlDeviceGetGpuInstanceRemainingCapacity");
  }
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  unsigned int count = 0;
  nvmlReturn_t r = lib_->get_gi_capacity(device, profile_id, &count);
  if (r != NVML_SUCCESS) {
    return lib_->Error(r, "nvmlDeviceGetGpuInstanceRemainingCapacity",
                       GpuArg(gpu) + ", profile id " + std::to_string(profile_id));
  }
  return static_cast<uint32_t>(count);
}

StatusOr<std::vector<ComputeInstance>> DlopenNvml::ComputeInstances(
    uint32_t gpu, uint32_t gpu_instance_id) const {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_ci_profile == nullptr) {
    return lib_->Missing("nvmlGpuInstanceGetComputeInstanceProfileInfo");
  }
  if (lib_->get_cis == nullptr) return lib_->Missing("nvmlGpuInstanceGetComputeInstances");
  if (lib_->get_ci_info == nullptr) return lib_->Missing("nvmlComputeInstanceGetInfo_v2");
  TESSERA_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, lib_->GpuInstanceById(gpu, gpu_instance_id));
  std::vector<ComputeInstance> out;
  for (uint32_t index = 0; index < kComputeInstanceProfileIndexCount; ++index) {
    nvmlComputeInstanceProfileInfo_t info;
    std::memset(&info, 0, sizeof(info));
    nvmlReturn_t r =
        lib_->get_ci_profile(gi, index, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &info);
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_INVALID_ARGUMENT) continue;
    if (r != NVML_SUCCESS) {
      return lib_->Error(r, "nvmlGpuInstanceGetComputeInstanceProfileInfo",
                         GiArg(gpu, gpu_instance_id) + ", profile index " + std::to_string(index));
    }
    std::vector<nvmlComputeInstance_t> handles(std::max<uint32_t>(info.instanceCount, 1) + 1);
    unsigned int count = static_cast<unsigned int>(handles.size());
    r = lib_->get_cis(gi, info.id, handles.data(), &count);
    if (r != NVML_SUCCESS) {
      return lib_->Error(r, "nvmlGpuInstanceGetComputeInstances",
                         GiArg(gpu, gpu_instance_id) + ", profile id " + std::to_string(info.id));
    }
    for (unsigned int i = 0; i < count && i < handles.size(); ++i) {
      TESSERA_ASSIGN_OR_RETURN(ComputeInstance ci, lib_->CiInfo(handles[i], gpu, gpu_instance_id));
      if (std::none_of(out.begin(), out.end(),
                       [&](const ComputeInstance& c) { return c.id == ci.id; })) {
        out.push_back(ci);
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const ComputeInstance& a, const ComputeInstance& b) {
    return a.start != b.start ? a.start < b.start : a.id < b.id;
  });
  return out;
}

StatusOr<ComputeInstance> DlopenNvml::CreateComputeInstance(uint32_t gpu, uint32_t gpu_instance_id,
                                                            uint32_t ci_profile_index) {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_ci_profile == nullptr) {
    return lib_->Missing("nvmlGpuInstanceGetComputeInstanceProfileInfo");
  }
  if (lib_->create_ci == nullptr) return lib_->Missing("nvmlGpuInstanceCreateComputeInstance");
  if (lib_->get_ci_info == nullptr) return lib_->Missing("nvmlComputeInstanceGetInfo_v2");
  TESSERA_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, lib_->GpuInstanceById(gpu, gpu_instance_id));
  const std::string args =
      GiArg(gpu, gpu_instance_id) + ", profile index " + std::to_string(ci_profile_index);
  TESSERA_ASSIGN_OR_RETURN(const nvmlComputeInstanceProfileInfo_t info,
                           lib_->CiProfile(gi, ci_profile_index, args));
  nvmlComputeInstance_t ci = nullptr;
  const nvmlReturn_t r = lib_->create_ci(gi, info.id, &ci);
  if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlGpuInstanceCreateComputeInstance", args);
  return lib_->CiInfo(ci, gpu, gpu_instance_id);
}

StatusOr<ComputeInstance> DlopenNvml::CreateComputeInstanceAt(
    uint32_t gpu, uint32_t gpu_instance_id, uint32_t ci_profile_index,
    const ComputeInstancePlacement& placement) {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_ci_profile == nullptr) {
    return lib_->Missing("nvmlGpuInstanceGetComputeInstanceProfileInfo");
  }
  if (lib_->create_ci_at == nullptr) {
    return lib_->Missing("nvmlGpuInstanceCreateComputeInstanceWithPlacement");
  }
  if (lib_->get_ci_info == nullptr) return lib_->Missing("nvmlComputeInstanceGetInfo_v2");
  TESSERA_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, lib_->GpuInstanceById(gpu, gpu_instance_id));
  const std::string args = GiArg(gpu, gpu_instance_id) + ", profile index " +
                           std::to_string(ci_profile_index) + ", placement " +
                           std::to_string(placement.start) + ":" + std::to_string(placement.size);
  TESSERA_ASSIGN_OR_RETURN(const nvmlComputeInstanceProfileInfo_t info,
                           lib_->CiProfile(gi, ci_profile_index, args));
  nvmlComputeInstancePlacement_t raw{.start = placement.start, .size = placement.size};
  nvmlComputeInstance_t ci = nullptr;
  const nvmlReturn_t r = lib_->create_ci_at(gi, info.id, &raw, &ci);
  if (r != NVML_SUCCESS) {
    return lib_->Error(r, "nvmlGpuInstanceCreateComputeInstanceWithPlacement", args);
  }
  return lib_->CiInfo(ci, gpu, gpu_instance_id);
}

StatusOr<std::vector<ComputeInstancePlacement>> DlopenNvml::ComputeInstancePossiblePlacements(
    uint32_t gpu, uint32_t gpu_instance_id, uint32_t ci_profile_index) const {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_ci_profile == nullptr) {
    return lib_->Missing("nvmlGpuInstanceGetComputeInstanceProfileInfo");
  }
  if (lib_->get_ci_placements == nullptr) {
    return lib_->Missing("nvmlGpuInstanceGetComputeInstancePossiblePlacements");
  }
  TESSERA_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, lib_->GpuInstanceById(gpu, gpu_instance_id));
  const std::string args =
      GiArg(gpu, gpu_instance_id) + ", profile index " + std::to_string(ci_profile_index);
  TESSERA_ASSIGN_OR_RETURN(const nvmlComputeInstanceProfileInfo_t info,
                           lib_->CiProfile(gi, ci_profile_index, args));
  unsigned int count = 0;
  nvmlReturn_t r = lib_->get_ci_placements(gi, info.id, nullptr, &count);
  if (r != NVML_SUCCESS) {
    return lib_->Error(r, "nvmlGpuInstanceGetComputeInstancePossiblePlacements", args);
  }
  std::vector<nvmlComputeInstancePlacement_t> raw(count);
  if (count > 0) {
    r = lib_->get_ci_placements(gi, info.id, raw.data(), &count);
    if (r != NVML_SUCCESS) {
      return lib_->Error(r, "nvmlGpuInstanceGetComputeInstancePossiblePlacements", args);
    }
    raw.resize(std::min<size_t>(count, raw.size()));
  }
  std::vector<ComputeInstancePlacement> out;
  out.reserve(raw.size());
  for (const nvmlComputeInstancePlacement_t& p : raw) {
    out.push_back({.start = p.start, .size = p.size});
  }
  return out;
}

Status DlopenNvml::DestroyComputeInstance(uint32_t gpu, uint32_t gpu_instance_id,
                                          uint32_t compute_instance_id) {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_ci_by_id == nullptr) return lib_->Missing("nvmlGpuInstanceGetComputeInstanceById");
  if (lib_->destroy_ci == nullptr) return lib_->Missing("nvmlComputeInstanceDestroy");
  TESSERA_ASSIGN_OR_RETURN(nvmlGpuInstance_t gi, lib_->GpuInstanceById(gpu, gpu_instance_id));
  const std::string args =
      GiArg(gpu, gpu_instance_id) + ", compute instance " + std::to_string(compute_instance_id);
  nvmlComputeInstance_t ci = nullptr;
  nvmlReturn_t r = lib_->get_ci_by_id(gi, compute_instance_id, &ci);
  if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlGpuInstanceGetComputeInstanceById", args);
  r = lib_->destroy_ci(ci);
  if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlComputeInstanceDestroy", args);
  return Status::Ok();
}

StatusOr<std::vector<GpuProcess>> DlopenNvml::RunningProcesses(uint32_t gpu) const {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_processes == nullptr) {
    return lib_->Missing("nvmlDeviceGetComputeRunningProcesses_v3");
  }
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  unsigned int count = 0;
  nvmlReturn_t r = lib_->get_processes(device, &count, nullptr);
  if (r == NVML_SUCCESS) return std::vector<GpuProcess>{};
  for (int attempt = 0; attempt < kProcessListAttempts; ++attempt) {
    if (r != NVML_ERROR_INSUFFICIENT_SIZE) break;
    // Room for a few newcomers, at the larger of the two element sizes drivers have used.
    std::vector<nvmlProcessInfoWithCc_t> buffer(count + 8);
    unsigned int n = static_cast<unsigned int>(buffer.size());
    r = lib_->get_processes(device, &n, reinterpret_cast<nvmlProcessInfo_t*>(buffer.data()));
    if (r == NVML_SUCCESS) {
      return DecodeProcesses(reinterpret_cast<const unsigned char*>(buffer.data()),
                             std::min<unsigned int>(n, static_cast<unsigned int>(buffer.size())));
    }
    count = n;
  }
  return lib_->Error(r, "nvmlDeviceGetComputeRunningProcesses_v3", GpuArg(gpu));
}

StatusOr<Utilization> DlopenNvml::UtilizationRates(uint32_t gpu) const {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_utilization == nullptr) return lib_->Missing("nvmlDeviceGetUtilizationRates");
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  nvmlUtilization_t u{};
  nvmlReturn_t r = lib_->get_utilization(device, &u);
  if (r != NVML_SUCCESS) return lib_->Error(r, "nvmlDeviceGetUtilizationRates", GpuArg(gpu));
  return Utilization{.gpu_percent = u.gpu, .memory_percent = u.memory};
}

StatusOr<std::vector<ProcessUtilization>> DlopenNvml::ProcessUtilizations(
    uint32_t gpu, uint64_t last_seen_us) const {
  if (lib_ == nullptr) return NotInitialised();
  if (lib_->get_process_utilization == nullptr) {
    return lib_->Missing("nvmlDeviceGetProcessUtilization");
  }
  TESSERA_ASSIGN_OR_RETURN(nvmlDevice_t device, lib_->Device(gpu));
  // Size query first (a null buffer); drivers answer it with SUCCESS or INSUFFICIENT_SIZE and
  // the count, and with NOT_FOUND when no sample is newer than last_seen_us.
  unsigned int count = 0;
  nvmlReturn_t r = lib_->get_process_utilization(device, nullptr, &count, last_seen_us);
  for (int attempt = 0; attempt < kProcessListAttempts; ++attempt) {
    if (r == NVML_ERROR_NOT_FOUND) return std::vector<ProcessUtilization>{};
    if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE) break;
    if (count == 0) return std::vector<ProcessUtilization>{};
    std::vector<nvmlProcessUtilizationSample_t> buffer(count + 8);
    unsigned int n = static_cast<unsigned int>(buffer.size());
    r = lib_->get_process_utilization(device, buffer.data(), &n, last_seen_us);
    if (r == NVML_SUCCESS) {
      std::vector<ProcessUtilization> out;
      for (unsigned int i = 0; i < n && i < buffer.size(); ++i) {
        const nvmlProcessUtilizationSample_t& u = buffer[i];
        out.push_back({.pid = u.pid,
                       .timestamp_us = u.timeStamp,
                       .sm_percent = u.smUtil,
                       .memory_percent = u.memUtil,
                       .encoder_percent = u.encUtil,
                       .decoder_percent = u.decUtil});
      }
      return out;
    }
    count = n;
  }
  return lib_->Error(r, "nvmlDeviceGetProcessUtilization", GpuArg(gpu));
}

}  // namespace tessera::enforce
