// The hook table: it covers exactly the expected allocation/launch/resolver variants of the CUDA
// 12/13 driver API (tests/shim/expected_entry_points.h, written independently from cuda.h and
// cudaTypedefs.h), every other allocation-like entry point of cuda.h is deliberately excluded with
// a reason, the library exports every wrapper, and it depends on nothing but libc.
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "src/enforce/shim/hook_list.h"
#include "tests/shim/expected_entry_points.h"

namespace tessera::enforce {
namespace {

using shim::HookFlavour;
using shim::kHookCount;
using shim::kHooks;
using testing::kExpectedHooks;
using testing::kNotHooked;

std::string RunCommand(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  ::pclose(f);
  return out;
}

TEST(HookTable, CoversExactlyTheExpectedVariants) {
  std::map<std::string, const shim::HookInfo*> hooked;
  for (const shim::HookInfo& h : kHooks) {
    EXPECT_TRUE(hooked.emplace(h.symbol, &h).second) << "listed twice: " << h.symbol;
  }
  std::set<std::string> expected;
  for (const testing::ExpectedHook& e : kExpectedHooks) {
    expected.insert(e.symbol);
    auto it = hooked.find(e.symbol);
    if (it == hooked.end()) {
      ADD_FAILURE() << "not hooked: " << e.symbol;
      continue;
    }
    EXPECT_STREQ(it->second->base, e.base) << e.symbol;
    EXPECT_EQ(it->second->version, e.version) << e.symbol;
    EXPECT_EQ(it->second->flavour == HookFlavour::kPerThread, e.per_thread) << e.symbol;
  }
  for (const auto& [symbol, info] : hooked) {
    EXPECT_TRUE(expected.count(symbol)) << "hooked but not in the expected list: " << symbol;
  }
  EXPECT_EQ(kHookCount, static_cast<int>(std::size(kExpectedHooks)));
}

TEST(HookTable, EveryVariantOfAPerThreadBaseHasItsTwin) {
  // A base with a _ptsz flavour has it for every ABI version since CUDA 7 (when per-thread default
  // streams appeared): cuStreamBeginCapture and cuStreamBeginCapture_v2 both have one.
  std::set<std::string> per_thread_bases, symbols;
  for (const shim::HookInfo& h : kHooks) {
    symbols.insert(h.symbol);
    if (h.flavour == HookFlavour::kPerThread) per_thread_bases.insert(h.base);
  }
  EXPECT_EQ(per_thread_bases.size(), 10u);
  for (const shim::HookInfo& h : kHooks) {
    if (h.flavour != HookFlavour::kLegacy || !per_thread_bases.count(h.base) || h.version < 7000) continue;
    EXPECT_TRUE(symbols.count(std::string(h.symbol) + "_ptsz")) << "missing " << h.symbol << "_ptsz";
  }
}

#ifdef TESSERA_HAVE_CUDA_H
// Every allocation-, launch- or capture-like entry point that cuda.h declares is either hooked (by
// base name) or excluded with a reason; every versioned or _ptsz name cuda.h maps a hooked base to
// is hooked too.
TEST(HookTable, AgreesWithTheToolkitHeader) {
  std::ifstream in(TESSERA_CUDA_H_PATH);
  ASSERT_TRUE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::regex surface(
      "cu(MemAlloc\\w*|MemCreate|MemFree\\w*|MemRelease|MemRetainAllocationHandle|MemPool(Create|Destroy)|"
      "MemHost(Alloc|Register)|Array3?DCreate|ArrayCreate|ArrayDestroy|MipmappedArray(Create|Destroy)|"
      "Launch\\w*|GraphLaunch|GraphInstantiate\\w*|GraphExecDestroy|GraphAddMem(Alloc|Free)Node|"
      "StreamBeginCapture\\w*|MulticastCreate|"
      "IpcOpenMemHandle|MemImportFromShareableHandle|MemGetInfo|DeviceTotalMem|GetProcAddress|"
      "DeviceSetMemPool|MemSetMemPool)");
  std::set<std::string> hooked_bases, hooked_symbols, excluded;
  for (const shim::HookInfo& h : kHooks) {
    hooked_bases.insert(h.base);
    hooked_symbols.insert(h.symbol);
  }
  for (const testing::NotHooked& n : kNotHooked) excluded.insert(n.base);
  std::set<std::string> declared;
  const std::regex decl("CUresult CUDAAPI (cu\\w+)\\(");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), decl); it != std::sregex_iterator(); ++it) {
    declared.insert((*it)[1]);
  }
  int surface_count = 0;
  for (const std::string& name : declared) {
    if (!std::regex_match(name, surface)) continue;
    ++surface_count;
    bool ok = hooked_bases.count(name) || hooked_symbols.count(name) || excluded.count(name);
    EXPECT_TRUE(ok) << name << " is declared in cuda.h but neither hooked nor excluded with a reason";
  }
  EXPECT_GT(surface_count, 30);
  // "#define cuMemAlloc cuMemAlloc_v2" and "#define cuLaunchKernel __CUDA_API_PTSZ(cuLaunchKernel)".
  const std::regex rename("#define\\s+(cu\\w+)\\s+(cu\\w+)\\s");
  const std::regex ptsz("#define\\s+(cu\\w+)\\s+__CUDA_API_PTSZ\\((cu\\w+)\\)");
  int renames = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), rename); it != std::sregex_iterator(); ++it) {
    if (!hooked_bases.count((*it)[1])) continue;
    ++renames;
    EXPECT_TRUE(hooked_symbols.count((*it)[2])) << (*it)[1] << " -> " << (*it)[2] << " is not hooked";
  }
  for (auto it = std::sregex_iterator(text.begin(), text.end(), ptsz); it != std::sregex_iterator(); ++it) {
    if (!hooked_bases.count((*it)[1])) continue;
    ++renames;
    std::string variant = std::string((*it)[2]) + "_ptsz";
    EXPECT_TRUE(hooked_symbols.count(variant)) << (*it)[1] << " -> " << variant << " is not hooked";
  }
  EXPECT_GT(renames, 10);
}
#endif

TEST(ShimLibrary, ExportsEveryWrapperAndNothingElse) {
  std::string out = RunCommand(std::string("nm -D --defined-only '") + TESSERA_SHIM_LIBRARY + "' 2>/dev/null");
  if (out.empty()) GTEST_SKIP() << "nm is not available";
  std::set<std::string> exported;
  std::istringstream lines(out);
  std::string addr, type, name;
  while (lines >> addr >> type >> name) exported.insert(name);
  for (const shim::HookInfo& h : kHooks) EXPECT_TRUE(exported.count(h.symbol)) << h.symbol;
  exported.erase("dlsym");
  exported.erase("dlvsym");
  for (const shim::HookInfo& h : kHooks) exported.erase(h.symbol);
  for (const std::string& extra : exported) ADD_FAILURE() << "unexpected export: " << extra;
}

TEST(ShimLibrary, DependsOnlyOnLibc) {
#ifdef TESSERA_SANITIZER_RUNTIME
  GTEST_SKIP() << "sanitizer builds link the sanitizer runtime and libstdc++";
#endif
  std::string out = RunCommand(std::string("readelf -d '") + TESSERA_SHIM_LIBRARY + "' 2>/dev/null");
  if (out.empty()) GTEST_SKIP() << "readelf is not available";
  const std::regex needed("\\(NEEDED\\)\\s+Shared library: \\[([^\\]]+)\\]");
  std::set<std::string> allowed = {"libc.so.6", "libdl.so.2", "libpthread.so.0", "libm.so.6",
                                   "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"};
  int count = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), needed); it != std::sregex_iterator(); ++it) {
    ++count;
    EXPECT_TRUE(allowed.count((*it)[1])) << "libtessera-shim.so needs " << (*it)[1];
  }
  EXPECT_GT(count, 0);
}

}  // namespace
}  // namespace tessera::enforce
