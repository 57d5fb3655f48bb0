// tessera: one binary for every tessera command (simulate, mig, run, node, serve, ctl, audit, anomalies, bill, forecast,
// plan, version).
#include <cstdio>
#include <string>

#include "tessera_commit.h"  // generated at build time: TESSERA_GIT_COMMIT
#include "tools/tessera/commands/commands.h"

namespace {

// "tessera 0.1.0 (commit 1a2b3c4)": the CMake project version and the commit it was built at
// ("-dirty" after the hash when tracked files had changes).
const std::string kVersion = std::string("tessera ") + TESSERA_VERSION + " (commit " + TESSERA_GIT_COMMIT + ")";

// "simulate" or "mig apply": the deepest sub-command that was parsed, for error lines.
std::string CommandName(const CLI::App& app) {
  std::string name;
  const CLI::App* at = &app;
  while (true) {
    const auto parsed = at->get_subcommands();
    if (parsed.empty()) break;
    at = parsed.front();
    name += (name.empty() ? "" : " ") + at->get_name();
  }
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tessera shares GPUs among tenants: it cuts GPUs (MIG, MPS, time-slice, whole), places work so\n"
      "the cluster does not fragment, keeps each tenant's guarantee, enforces shares and meters use.\n"
      "Run `tessera <command> --help` for the options of a command.",
      "tessera"};
  app.require_subcommand(1);
  app.set_version_flag("--version", kVersion, "Print the version and the git commit");
  int exit_code = tessera::cli::kExitOk;
  std::string command_line = "tessera";
  for (int i = 1; i < argc; ++i) command_line += std::string(" ") + argv[i];
  tessera::cli::RegisterSimulate(app, &command_line, &exit_code);
  tessera::cli::RegisterMig(app, &exit_code);
  tessera::cli::RegisterNode(app, &exit_code);
  tessera::cli::RegisterServe(app, &exit_code);
  tessera::cli::RegisterCtl(app, &exit_code);
  tessera::cli::RegisterAudit(app, &exit_code);
  tessera::cli::RegisterAnomalies(app, &exit_code);
  tessera::cli::RegisterBill(app, &exit_code);
  tessera::cli::RegisterAgent(app, &exit_code);
  tessera::cli::RegisterForecast(app, &exit_code);
  tessera::cli::RegisterPlan(app, &exit_code);
  tessera::cli::RegisterVersion(app, kVersion, &exit_code);
  // An unknown first word is a mistyped command, not a stray argument.
  if (argc > 1 && argv[1][0] != '-') {
    try {
      (void)app.get_subcommand(argv[1]);
    } catch (const CLI::OptionNotFound&) {
      std::fprintf(stderr, "tessera: unknown command '%s'\n\n%s", argv[1], app.help().c_str());
      return tessera::cli::kExitBadInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string command = CommandName(app);
    std::fprintf(stderr, "tessera%s%s: %s\n", command.empty() ? "" : " ", command.c_str(), e.what());
    return tessera::cli::kExitBadInput;
  }
  return exit_code;
}
