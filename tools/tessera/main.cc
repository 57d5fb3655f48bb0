// tessera: one binary for every tessera command (simulate, mig, run, node, serve, ctl, audit, anomalies, bill, forecast,
// plan, version).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

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

// When a command that takes a sub-command (`ctl tenants`, `mig`, ...) is given an unknown word
// or none, the line that says so and lists what it takes ("ctl tenants: unknown verb 'lst' for
// 'ctl tenants'; verbs: create, delete, get, list, update"); "" otherwise. Walks argv as CLI11 does: words that
// start with '-' are options (skipping the value of one that takes a value), others sub-commands.
std::string UnknownVerb(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  std::string path;
  std::string word;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() > 1 && arg[0] == '-') {
      if (arg.find('=') != std::string::npos || (arg[1] != '-' && arg.size() > 2)) continue;  // --x=v, -ov
      for (const CLI::App* a = at; a != nullptr; a = a->get_parent())
        if (const CLI::Option* o = a->get_option_no_throw(arg)) {
          if (o->get_type_size_min() > 0) ++i;  // its value
          break;
        }
      continue;
    }
    CLI::App* next = nullptr;
    try {
      next = at->get_subcommand(arg);
    } catch (const CLI::OptionNotFound&) {
    }
    if (next == nullptr) {
      word = arg;
      break;
    }
    at = next;
    path += (path.empty() ? "" : " ") + arg;
  }
  std::vector<std::string> verbs;
  for (const CLI::App* sub : at->get_subcommands([](CLI::App* a) { return !a->get_name().empty(); }))
    verbs.push_back(sub->get_name());
  if (at == &app || verbs.empty()) return "";
  std::sort(verbs.begin(), verbs.end());
  std::string list;
  for (const std::string& v : verbs) list += (list.empty() ? "" : ", ") + v;
  if (word.empty()) return path + ": a verb is needed; verbs: " + list;
  return path + ": unknown verb '" + word + "' for '" + path + "'; verbs: " + list;
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
  tessera::cli::RegisterSlurm(app, &exit_code);
  tessera::cli::RegisterK8s(app, &exit_code);
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
    if (const std::string line = UnknownVerb(app, argc, argv); !line.empty()) {
      std::fprintf(stderr, "tessera %s\n", line.c_str());
      return tessera::cli::kExitBadInput;
    }
    const std::string command = CommandName(app);
    std::fprintf(stderr, "tessera%s%s: %s\n", command.empty() ? "" : " ", command.c_str(), e.what());
    return tessera::cli::kExitBadInput;
  }
  return exit_code;
}
