// `tessera version [--paths]`: the version and the commit; with --paths, where this executable
// finds what it needs at run time (the bundled data, libtessera-shim.so, the fake NVML), for
// operators checking an install (docs: README "Install").
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "tessera/node/launcher.h"
#include "tools/tessera/commands/commands.h"
#include "tools/tessera/commands/common.h"

namespace tessera::cli {
namespace {

void PrintLine(const char* what, const std::string& path, const std::string& how) {
  std::printf("%-10s %s (%s)\n", what, path.c_str(), how.c_str());
}

// 0 when the data and the shim are found, 1 otherwise (each missing one named on stderr).
int PrintPaths() {
  int code = kExitOk;
  const Located data = LocateDataDir();
  PrintLine("data:", data.path, data.how);
  if (!data.found) {
    std::fprintf(stderr, "tessera version: no bundled data in '%s' (set TESSERA_DATA_DIR)\n", data.path.c_str());
    code = kExitFailure;
  }
  const char* shim_env = std::getenv("TESSERA_SHIM_PATH");
  const bool shim_from_env = shim_env != nullptr && *shim_env;
  StatusOr<std::string> shim = node::ResolveShim(shim_from_env ? shim_env : "");
  if (shim.ok()) {
    PrintLine("shim:", std::filesystem::path(*shim).lexically_normal().string(),
              shim_from_env ? "$TESSERA_SHIM_PATH" : "next to the executable");
  } else {
    std::printf("%-10s not found\n", "shim:");
    std::fprintf(stderr, "tessera version: %s\n", shim.status().message().c_str());
    code = kExitFailure;
  }
  // Only `tessera agent --fake-gpus` needs it; a missing fake is not an error.
  StatusOr<std::string> fake = FindFakeNvml();
  if (fake.ok()) PrintLine("fake-nvml:", *fake, "for tessera agent --fake-gpus");
  else std::printf("%-10s not installed (only tessera agent --fake-gpus needs it)\n", "fake-nvml:");
  return code;
}

}  // namespace

void RegisterVersion(CLI::App& app, const std::string& version, int* exit_code) {
  auto paths = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand("version", "Print the version and the git commit");
  cmd->add_flag("--paths", *paths,
                "Also print where this executable finds the bundled data (TESSERA_DATA_DIR), "
                "libtessera-shim.so (TESSERA_SHIM_PATH) and the fake NVML; exit code 1 when the data "
                "or the shim is missing");
  cmd->callback([paths, version, exit_code] {
    std::printf("%s\n", version.c_str());
    if (*paths) *exit_code = PrintPaths();
  });
}

}  // namespace tessera::cli
