// The in-tree fake libcudart (tests/testing/fake_cudart/fake_cudart.cc): only the runtime's
// driver-entry-point queries, declared here with the runtime's C ABI (cudaError_t and the enums are
// int-sized C enums; tests/shim/runtime_route_test.cc checks these shapes and values against the
// toolkit's cuda_runtime_api.h when it is installed). Built only for tests.
#pragma once

extern "C" {
// cudaError_t values the fake returns.
enum { kFakeCudaSuccess = 0, kFakeCudaErrorInvalidValue = 1, kFakeCudaErrorInsufficientDriver = 35,
       kFakeCudaErrorNotSupported = 801 };
// flags (cudaEnableDefault / cudaEnableLegacyStream / cudaEnablePerThreadDefaultStream).
enum { kFakeCudaEnableDefault = 0, kFakeCudaEnableLegacyStream = 1, kFakeCudaEnablePerThreadDefaultStream = 2 };
// enum cudaDriverEntryPointQueryResult.
enum { kFakeCudaDriverEntryPointSuccess = 0, kFakeCudaDriverEntryPointSymbolNotFound = 1,
       kFakeCudaDriverEntryPointVersionNotSufficent = 2 };

// CUDA 12+ signatures. The _ptsz exports are what code compiled with per-thread default streams
// calls (cuda_runtime_api.h renames the functions); their cudaEnableDefault means per-thread.
int cudaGetDriverEntryPoint(const char* symbol, void** funcPtr, unsigned long long flags, int* driverStatus);
int cudaGetDriverEntryPoint_ptsz(const char* symbol, void** funcPtr, unsigned long long flags, int* driverStatus);
int cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                     unsigned long long flags, int* driverStatus);
int cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** funcPtr, unsigned int cudaVersion,
                                          unsigned long long flags, int* driverStatus);
// The runtime version the fake reports as its CUDART_VERSION (TESSERA_FAKE_CUDART_VERSION, default 13000).
int cudaRuntimeGetVersion(int* version);
}
