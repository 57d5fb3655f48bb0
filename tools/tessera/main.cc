// tessera: one binary for every tessera command (simulate today; mig, serve, run, ctl later).
#include <cstdio>
#include <string>

#include "tools/tessera/commands/commands.h"

int main(int argc, char** argv) {
  CLI::App app{
      "tessera shares GPUs among tenants: it cuts GPUs (MIG, MPS, time-slice, whole), places work so\n"
      "the cluster does not fragment, keeps each tenant's guarantee, enforces shares and meters use.\n"
      "Run `tessera <command> --help` for the options of a command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera 0.1.0");
  int exit_code = tessera::cli::kExitOk;
  std::string command_line = "tessera";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  tessera::cli::RegisterSimulate(app, &command_line, &exit_code);
  tessera::cli::RegisterMig(app, &exit_code);
  tessera::cli::RegisterNode(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "tessera: %s\n", e.what());
    return tessera::cli::kExitBadInput;
  }
  return exit_code;
}
