// A fake libcudart for the shim tests: cudaGetDriverEntryPoint and cudaGetDriverEntryPointByVersion
// (and their _ptsz twins) doing what the real runtime is documented to do and how it does it: the
// runtime does not link libcuda; on first use it dlopen()s "libcuda.so.1", takes the driver's
// resolver with dlsym(handle, "cuGetProcAddress_v2") ("cuGetProcAddress" on a pre-12.0 driver),
// and answers every query by calling that resolver with the caller's base name, the runtime's
// CUDA version (cudaGetDriverEntryPoint: CUDART_VERSION, here TESSERA_FAKE_CUDART_VERSION, default
// 13000) or the requested one (ByVersion), and the flags mapped to CU_GET_PROC_ADDRESS_*.
// With libtessera-shim.so preloaded, that dlsym is the shim's (it substitutes its resolver
// wrapper), so every pointer the runtime hands out passes the shim's substitution. This models the
// real runtime; it is not it (tests/gpu exercises the real one).
//
// Results (cuda_runtime_api.h): a found symbol -> cudaSuccess, the pointer, status Success; a
// missing symbol or one newer than the version -> cudaSuccess, NULL, status SymbolNotFound /
// VersionNotSufficent (the driver's CUdriverProcAddressQueryResult); flags other than the three
// modes -> cudaErrorInvalidValue; ByVersion with a version above the driver's ->
// cudaErrorInvalidValue; a driver that cannot be loaded -> cudaErrorInsufficientDriver; any other
// driver error -> cudaErrorInvalidValue for CUDA_ERROR_INVALID_VALUE, else cudaErrorNotSupported.
#include "tests/testing/fake_cudart/fake_cudart.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "tessera/enforce/cuda_abi.h"

using namespace tessera::cuabi;  // NOLINT: the driver's C names

namespace {

struct Driver {
  PFN_cuGetProcAddress_v12000 gpa2 = nullptr;
  PFN_cuGetProcAddress_v11030 gpa1 = nullptr;
  PFN_cuDriverGetVersion_v2020 version = nullptr;
  bool loaded = false;
};

const Driver& GetDriver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    void* h = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) return;
    d.gpa2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(::dlsym(h, "cuGetProcAddress_v2"));
    if (d.gpa2 == nullptr) d.gpa1 = reinterpret_cast<PFN_cuGetProcAddress_v11030>(::dlsym(h, "cuGetProcAddress"));
    d.version = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(::dlsym(h, "cuDriverGetVersion"));
    d.loaded = d.gpa2 != nullptr || d.gpa1 != nullptr;
  });
  return d;
}

int RuntimeVersion() {
  const char* v = std::getenv("TESSERA_FAKE_CUDART_VERSION");
  return v != nullptr && *v != '\0' ? std::atoi(v) : 13000;
}

int Query(const char* symbol, void** fn, int version, unsigned long long flags, bool ptsz, int* status) {
  if (symbol == nullptr || fn == nullptr) return kFakeCudaErrorInvalidValue;
  cuuint64_t cu_flags = 0;
  switch (flags) {
    case kFakeCudaEnableDefault:
      cu_flags = ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
      break;
    case kFakeCudaEnableLegacyStream: cu_flags = CU_GET_PROC_ADDRESS_LEGACY_STREAM; break;
    case kFakeCudaEnablePerThreadDefaultStream: cu_flags = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM; break;
    default: return kFakeCudaErrorInvalidValue;
  }
  const Driver& d = GetDriver();
  if (!d.loaded) return kFakeCudaErrorInsufficientDriver;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
  *fn = nullptr;
  const CUresult rc = d.gpa2 != nullptr ? d.gpa2(symbol, fn, version, cu_flags, &st)
                                        : d.gpa1(symbol, fn, version, cu_flags);
  if (rc == CUDA_ERROR_NOT_FOUND) {
    *fn = nullptr;
    if (status != nullptr) {
      *status = d.gpa2 != nullptr && st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                    ? kFakeCudaDriverEntryPointVersionNotSufficent
                    : kFakeCudaDriverEntryPointSymbolNotFound;
    }
    return kFakeCudaSuccess;
  }
  if (rc != CUDA_SUCCESS) {
    *fn = nullptr;
    return rc == CUDA_ERROR_INVALID_VALUE ? kFakeCudaErrorInvalidValue : kFakeCudaErrorNotSupported;
  }
  if (status != nullptr) *status = kFakeCudaDriverEntryPointSuccess;
  return kFakeCudaSuccess;
}

int QueryByVersion(const char* symbol, void** fn, unsigned int version, unsigned long long flags, bool ptsz,
                   int* status) {
  const Driver& d = GetDriver();
  if (!d.loaded) return kFakeCudaErrorInsufficientDriver;
  int driver = 0;
  if (d.version == nullptr || d.version(&driver) != CUDA_SUCCESS) return kFakeCudaErrorInsufficientDriver;
  if (version > static_cast<unsigned int>(driver)) return kFakeCudaErrorInvalidValue;
  return Query(symbol, fn, static_cast<int>(version), flags, ptsz, status);
}

}  // namespace

extern "C" {

int cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags, int* driverStatus) {
  return Query(symbol, funcPtr, RuntimeVersion(), flags, /*ptsz=*/false, driverStatus);
}
int cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags, int* driverStatus) {
  return Query(symbol, funcPtr, RuntimeVersion(), flags, /*ptsz=*/true, driverStatus);
}
int cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                     unsigned long long flags, int* driverStatus) {
  return QueryByVersion(symbol, funcPtr, cudaVersion, flags, /*ptsz=*/false, driverStatus);
}
int cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                          unsigned long long flags, int* driverStatus) {
  return QueryByVersion(symbol, funcPtr, cudaVersion, flags, /*ptsz=*/true, driverStatus);
}
int cudaRuntimeGetVersion(int* version) {
  if (version == nullptr) return kFakeCudaErrorInvalidValue;
  *version = RuntimeVersion();
  return kFakeCudaSuccess;
}

}  // extern "C"
