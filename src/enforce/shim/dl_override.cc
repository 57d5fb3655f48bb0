// The shim's exported dlsym and dlvsym. Built without sanitizer instrumentation (see CMakeLists.txt):
// sanitizer runtimes resolve their interceptors with dlsym(RTLD_NEXT, ...) while they initialise,
// before instrumented code may run. Names that cannot be driver entry points (not starting with
// "cu") go straight to glibc as a tail call, so that glibc sees the caller's return address (what
// RTLD_NEXT is relative to). The others are decided by DriverLookup() in shim.cc: substitution
// only for libcuda's handle, RTLD_DEFAULT and RTLD_NEXT, always with the caller's handle.
#include "src/enforce/shim/real_dl.h"

namespace tessera::enforce::shim {
void* DriverLookup(void* handle, const char* name, const char* version, bool* handled);
}  // namespace tessera::enforce::shim

extern "C" __attribute__((visibility("default"))) void* dlsym(void* handle, const char* name) noexcept {
  using namespace tessera::enforce::shim;
  if (name != nullptr && name[0] == 'c' && name[1] == 'u') {
    bool handled = false;
    void* p = DriverLookup(handle, name, nullptr, &handled);
    if (handled) return p;
  }
  return GetRealDl().dlsym(handle, name);
}

extern "C" __attribute__((visibility("default"))) void* dlvsym(void* handle, const char* name,
                                                               const char* version) noexcept {
  using namespace tessera::enforce::shim;
  if (name != nullptr && name[0] == 'c' && name[1] == 'u') {
    bool handled = false;
    void* p = DriverLookup(handle, name, version, &handled);
    if (handled) return p;
  }
  return GetRealDl().dlvsym(handle, name, version);
}
