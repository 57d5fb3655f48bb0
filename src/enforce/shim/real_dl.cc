#include "src/enforce/shim/real_dl.h"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace tessera::enforce::shim {
namespace {

// Own string helpers: sanitizer runtimes intercept strlen/strcmp and call into this file before
// their interceptors are ready.
std::size_t Length(const char* s) {
  std::size_t n = 0;
  while (s[n] != '\0') ++n;
  return n;
}
bool Equal(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}

struct DynInfo {
  ElfW(Addr) base = 0;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const std::uint32_t* gnu_hash = nullptr;
  const ElfW(Word)* sysv_hash = nullptr;
  const ElfW(Half)* versym = nullptr;
  const ElfW(Verdef)* verdef = nullptr;
};

// glibc relocates the pointers in a loaded object's dynamic section on most targets; on others they
// stay file-relative. Either way the result is an absolute address.
ElfW(Addr) Absolute(ElfW(Addr) p, ElfW(Addr) base) { return p < base ? p + base : p; }

bool ReadDynamic(const struct link_map* lm, DynInfo* d) {
  d->base = lm->l_addr;
  for (const ElfW(Dyn)* dyn = lm->l_ld; dyn != nullptr && dyn->d_tag != DT_NULL; ++dyn) {
    ElfW(Addr) p = Absolute(dyn->d_un.d_ptr, d->base);
    switch (dyn->d_tag) {
      case DT_SYMTAB: d->symtab = reinterpret_cast<const ElfW(Sym)*>(p); break;
      case DT_STRTAB: d->strtab = reinterpret_cast<const char*>(p); break;
      case DT_GNU_HASH: d->gnu_hash = reinterpret_cast<const std::uint32_t*>(p); break;
      case DT_HASH: d->sysv_hash = reinterpret_cast<const ElfW(Word)*>(p); break;
      case DT_VERSYM: d->versym = reinterpret_cast<const ElfW(Half)*>(p); break;
      case DT_VERDEF: d->verdef = reinterpret_cast<const ElfW(Verdef)*>(p); break;
      default: break;
    }
  }
  return d->symtab != nullptr && d->strtab != nullptr &&
         (d->gnu_hash != nullptr || d->sysv_hash != nullptr);
}

const char* VersionName(const DynInfo& d, ElfW(Half) index) {
  if (d.verdef == nullptr) return nullptr;
  const ElfW(Verdef)* v = d.verdef;
  for (;;) {
    if ((v->vd_ndx & 0x7fff) == index) {
      const auto* aux = reinterpret_cast<const ElfW(Verdaux)*>(reinterpret_cast<const char*>(v) + v->vd_aux);
      return d.strtab + aux->vda_name;
    }
    if (v->vd_next == 0) return nullptr;
    v = reinterpret_cast<const ElfW(Verdef)*>(reinterpret_cast<const char*>(v) + v->vd_next);
  }
}

bool Matches(const DynInfo& d, std::uint32_t i, const char* name, const char* version) {
  const ElfW(Sym)& s = d.symtab[i];
  if (s.st_shndx == SHN_UNDEF || s.st_value == 0) return false;
  if (!Equal(d.strtab + s.st_name, name)) return false;
  if (d.versym == nullptr) return true;  // an unversioned library: any version matches
  const char* v = VersionName(d, static_cast<ElfW(Half)>(d.versym[i] & 0x7fff));
  return v != nullptr && Equal(v, version);
}

void* Lookup(const DynInfo& d, const char* name, const char* version) {
  if (d.gnu_hash != nullptr) {
    const std::uint32_t* h = d.gnu_hash;
    const std::uint32_t nbuckets = h[0], symoffset = h[1], bloom_words = h[2];
    const auto* bloom = reinterpret_cast<const ElfW(Addr)*>(h + 4);
    const auto* buckets = reinterpret_cast<const std::uint32_t*>(bloom + bloom_words);
    const std::uint32_t* chain = buckets + nbuckets;
    std::uint32_t hash = 5381;
    for (const char* c = name; *c != '\0'; ++c) hash = hash * 33 + static_cast<unsigned char>(*c);
    if (nbuckets == 0) return nullptr;
    for (std::uint32_t i = buckets[hash % nbuckets]; i != 0 && i >= symoffset; ++i) {
      std::uint32_t entry = chain[i - symoffset];
      if ((entry | 1) == (hash | 1) && Matches(d, i, name, version)) {
        return reinterpret_cast<void*>(d.base + d.symtab[i].st_value);
      }
      if ((entry & 1) != 0) break;
    }
    return nullptr;
  }
  const ElfW(Word) nchain = d.sysv_hash[1];
  for (ElfW(Word) i = 0; i < nchain; ++i) {
    if (Matches(d, i, name, version)) return reinterpret_cast<void*>(d.base + d.symtab[i].st_value);
  }
  return nullptr;
}

constexpr const char* kLibraries[] = {"libc.so.6", "libdl.so.2"};
constexpr const char* kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};

RealDl g_real_dl;
// 0: not started, 1: running, 2: done. Not pthread_once: thread sanitizer intercepts it.
std::atomic<int> g_state{0};

void Init() {
  for (const char* version : kVersions) {
    for (const char* lib : kLibraries) {
      if (g_real_dl.dlsym == nullptr) {
        g_real_dl.dlsym = reinterpret_cast<void* (*)(void*, const char*)>(
            LookupVersionedSymbol(lib, "dlsym", version));
        if (g_real_dl.dlsym != nullptr) g_real_dl.dlsym_version = version;
      }
      if (g_real_dl.dlvsym == nullptr) {
        g_real_dl.dlvsym = reinterpret_cast<void* (*)(void*, const char*, const char*)>(
            LookupVersionedSymbol(lib, "dlvsym", version));
      }
    }
  }
  if (g_real_dl.dlsym == nullptr || g_real_dl.dlvsym == nullptr) {
    static const char kMsg[] =
        "tessera-shim: cannot find glibc's dlsym/dlvsym (GLIBC_2.34/2.2.5/2.17); refusing to run\n";
    ssize_t ignored = ::write(2, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
    ::_exit(127);
  }
}

}  // namespace

// Walks the dynamic linker's list of loaded objects (_r_debug) rather than calling dlopen/dlinfo:
// sanitizer runtimes intercept those and call dlsym from their interceptor set-up, before the
// interceptors work.
void* LookupVersionedSymbol(const char* soname, const char* name, const char* version) {
  const std::size_t want = Length(soname);
  for (const struct link_map* lm = _r_debug.r_map; lm != nullptr; lm = lm->l_next) {
    const char* path = lm->l_name;
    if (path == nullptr) continue;
    std::size_t len = Length(path);
    if (len < want || !Equal(path + len - want, soname)) continue;
    if (len > want && path[len - want - 1] != '/') continue;
    DynInfo d;
    if (!ReadDynamic(lm, &d)) continue;
    if (void* p = Lookup(d, name, version)) return p;
  }
  return nullptr;
}

const RealDl& GetRealDl() {
  if (g_state.load(std::memory_order_acquire) == 2) return g_real_dl;
  int expected = 0;
  if (g_state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
    Init();
    g_state.store(2, std::memory_order_release);
  } else {
    while (g_state.load(std::memory_order_acquire) != 2) {
    }
  }
  return g_real_dl;
}

}  // namespace tessera::enforce::shim
