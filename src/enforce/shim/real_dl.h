// Finds glibc's own dlsym and dlvsym for libtessera-shim.so, which exports its own functions with
// those names (to substitute driver wrappers for lookups on libcuda's handle).
//
// Why not dlvsym(RTLD_NEXT, "dlsym", ...)? The shim overrides dlvsym too (dlvsym on libcuda's
// handle is a bypass route otherwise), so any lookup function it calls by name could be its own.
// Instead this reads the dynamic symbol table of the loaded libc.so.6 (glibc >= 2.34) or
// libdl.so.2 (older glibc), found in the dynamic linker's list of loaded objects (_r_debug), and
// looks the two symbols up by version, trying GLIBC_2.34, then GLIBC_2.2.5 (x86-64), then
// GLIBC_2.17 (aarch64) — the versions glibc has published dlsym under. It calls no libc function
// that a sanitizer runtime intercepts, so it also works while that runtime initialises (it calls
// dlsym from there).
//
// Thread-safety: GetRealDl() initialises once (an atomic flag) and may be called from any thread,
// including from inside the shim's dlsym before its constructor ran.
#pragma once

namespace tessera::enforce::shim {

struct RealDl {
  void* (*dlsym)(void* handle, const char* name) = nullptr;
  void* (*dlvsym)(void* handle, const char* name, const char* version) = nullptr;
  const char* dlsym_version = "";  // which version was found (for the self-test output)
};

// Never returns an empty dlsym: if glibc's cannot be found the process cannot work correctly, so
// the shim prints why and exits with status 127.
const RealDl& GetRealDl();

// Looks up `name`@`version` in the dynamic symbol table of the loaded object `soname`;
// nullptr if absent. Exposed for tests.
void* LookupVersionedSymbol(const char* soname, const char* name, const char* version);

}  // namespace tessera::enforce::shim
