// tessera_cudart_probe: a program that uses the CUDA driver only through the runtime's
// cudaGetDriverEntryPoint* (the in-tree fake libcudart), as applications built on the runtime do.
// It does NOT link libcuda: the runtime loads it (dlopen) on first use, after libtessera-shim.so's
// constructor ran, which is the order a real runtime application has.
//
// Usage: tessera_cudart_probe COMMAND...   Each command prints one line. Commands:
//   rt:NAME:FLAGS            cudaGetDriverEntryPoint(NAME, .., FLAGS)
//   rt_ptsz:NAME:FLAGS       cudaGetDriverEntryPoint_ptsz (what per-thread-stream code calls)
//   rtv:NAME:VERSION:FLAGS   cudaGetDriverEntryPointByVersion
//       each prints "<cmd> NAME rc=R status=S -> shim:<symbol> | driver:<symbol> | null"
//   init                     cuInit + cuCtxCreate (_v4), both resolved through the runtime
//   alloc:B | allocasync:B   cuMemAlloc / cuMemAllocAsync resolved through the runtime (default
//                            flags), then called: "alloc rc=R via=<owner>"
//   launch:FLAGS             cuLaunchKernel resolved with FLAGS, then called: "launch rc=R
//                            reached=<the fake driver's entry point> via=<owner>"
//   wait                     print "wait ready" and block until stdin reaches EOF
//   forkwhileloading         a thread calls the shim's cuMemGetInfo_v2 before libcuda is loaded (so
//                            the shim loads it, under its driver lock; run with
//                            TESSERA_FAKE_CUDA_LOAD_DELAY_MS); once libcuda is mapped, the main
//                            thread forks and the child calls the same wrapper: "forkwhileloading
//                            child=exited:<status>" or "child=hung" (not done within 5 s; killed)
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tessera/enforce/cuda_abi.h"
#include "tests/testing/fake_cudart/fake_cudart.h"

using namespace tessera::cuabi;  // NOLINT

namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  for (;;) {
    std::size_t end = s.find(sep, pos);
    out.push_back(s.substr(pos, end == std::string::npos ? std::string::npos : end - pos));
    if (end == std::string::npos) return out;
    pos = end + 1;
  }
}

std::string Owner(void* p) {
  if (p == nullptr) return "null";
  Dl_info info{};
  if (dladdr(p, &info) == 0 || info.dli_sname == nullptr) return "other:?";
  const std::string file = info.dli_fname != nullptr ? info.dli_fname : "";
  const std::string who = file.find("tessera-shim") != std::string::npos ? "shim"
                          : file.find("libcuda.so") != std::string::npos ? "driver"
                                                                         : "other";
  if (info.dli_saddr != p) return who + ":?";
  return who + ":" + info.dli_sname;
}

void* Get(const char* name) {
  void* p = nullptr;
  int status = -1;
  if (cudaGetDriverEntryPoint(name, &p, kFakeCudaEnableDefault, &status) != 0) return nullptr;
  return p;
}

const char* LastDriverCall() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return "?";
  auto fn = reinterpret_cast<const char* (*)()>(dlsym(h, "tessera_fake_cuda_last_call"));
  dlclose(h);
  return fn != nullptr ? fn() : "?";
}

bool LibcudaMapped() {
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.find("libcuda.so.1") != std::string::npos) return true;
  }
  return false;
}

void ForkWhileLoading() {
  using GetInfo = CUresult (*)(size_t*, size_t*);
  auto fn = reinterpret_cast<GetInfo>(dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2"));  // the shim's wrapper
  if (fn == nullptr || LibcudaMapped()) {
    std::printf("forkwhileloading error=%s\n", fn == nullptr ? "no-wrapper" : "already-loaded");
    return;
  }
  std::thread loader([fn] {
    size_t f = 0, t = 0;
    fn(&f, &t);  // loads libcuda inside the shim's EnsureDriver()
  });
  while (!LibcudaMapped()) usleep(1000);
  usleep(20000);  // inside the (slow) constructor now, with the shim's driver lock held
  const pid_t child = fork();
  if (child == 0) {
    size_t f = 0, t = 0;
    fn(&f, &t);
    _exit(0);
  }
  std::string result = "hung";
  for (int i = 0; i < 500; ++i) {
    int st = 0;
    if (waitpid(child, &st, WNOHANG) == child) {
      result = "exited:" + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
      break;
    }
    usleep(10000);
  }
  if (result == "hung") {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  loader.join();
  std::printf("forkwhileloading child=%s\n", result.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  for (int i = 1; i < argc; ++i) {
    std::vector<std::string> a = Split(argv[i], ':');
    const std::string& cmd = a[0];
    auto num = [&](std::size_t k) { return k < a.size() ? std::strtoull(a[k].c_str(), nullptr, 0) : 0ULL; };
    if (cmd == "rt" || cmd == "rt_ptsz" || cmd == "rtv") {
      void* p = nullptr;
      int status = -1;
      int rc = 0;
      if (cmd == "rt") {
        rc = cudaGetDriverEntryPoint(a[1].c_str(), &p, num(2), &status);
      } else if (cmd == "rt_ptsz") {
        rc = cudaGetDriverEntryPoint_ptsz(a[1].c_str(), &p, num(2), &status);
      } else {
        rc = cudaGetDriverEntryPointByVersion(a[1].c_str(), &p, static_cast<unsigned>(num(2)), num(3), &status);
      }
      std::printf("%s %s rc=%d status=%d -> %s\n", cmd.c_str(), a[1].c_str(), rc, status, Owner(p).c_str());
    } else if (cmd == "init") {
      auto init = reinterpret_cast<PFN_cuInit_v2000>(Get("cuInit"));
      // The CUDA 13 runtime's "cuCtxCreate" is cuCtxCreate_v4 (CUctxCreateParams*, NULL here).
      auto create = reinterpret_cast<PFN_cuCtxCreate_v12050>(Get("cuCtxCreate"));
      CUcontext ctx = nullptr;
      const int r1 = init != nullptr ? init(0) : -1;
      const int r2 = create != nullptr ? create(&ctx, nullptr, 0, 0) : -1;
      std::printf("init rc=%d,%d\n", r1, r2);
    } else if (cmd == "alloc" || cmd == "allocasync") {
      void* p = Get(cmd == "alloc" ? "cuMemAlloc" : "cuMemAllocAsync");
      CUdeviceptr d = 0;
      int rc = -1;
      if (p != nullptr) {
        rc = cmd == "alloc" ? reinterpret_cast<PFN_cuMemAlloc_v3020>(p)(&d, num(1))
                            : reinterpret_cast<PFN_cuMemAllocAsync_v11020>(p)(&d, num(1), nullptr);
      }
      std::printf("%s rc=%d via=%s\n", cmd.c_str(), rc, Owner(p).c_str());
    } else if (cmd == "launch") {
      void* p = nullptr;
      int status = -1;
      cudaGetDriverEntryPoint("cuLaunchKernel", &p, num(1), &status);
      int rc = -1;
      if (p != nullptr) {
        rc = reinterpret_cast<PFN_cuLaunchKernel_v4000>(p)(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr);
      }
      std::printf("launch rc=%d reached=%s via=%s\n", rc, LastDriverCall(), Owner(p).c_str());
    } else if (cmd == "forkwhileloading") {
      ForkWhileLoading();
    } else if (cmd == "wait") {
      std::printf("wait ready\n");
      std::fflush(stdout);
      char buf[64];
      while (read(0, buf, sizeof(buf)) > 0) {
      }
    } else {
      std::printf("error unknown command '%s'\n", argv[i]);
      return 2;
    }
  }
  return 0;
}
