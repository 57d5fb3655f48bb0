// tessera k8s <program>: the Kubernetes integration (docs/kubernetes.md). Each program registers
// itself here from its own file (commands/k8s_*.cc); parsing and printing only, the logic is in
// tessera/integrations/k8s/.
#include <CLI/CLI.hpp>

#include "tessera/integrations/k8s/names.h"
#include "tools/tessera/commands/commands.h"

namespace tessera::cli {

void RegisterK8s(CLI::App& app, int* exit_code) {
  CLI::App* k8s = app.add_subcommand(
      "k8s", std::string("Kubernetes integration (DRA driver ") + std::string(tessera::k8s::kDriverName) +
                 ", scheduler extender, device plugin)");
  k8s->require_subcommand(1);
  // The programs (one line each): RegisterK8s<Program>(*k8s, exit_code);
  RegisterK8sObjects(*k8s, exit_code);
  RegisterK8sExtender(*k8s, exit_code);
  RegisterK8sDraDriver(*k8s, exit_code);
  RegisterK8sDevicePlugin(*k8s, exit_code);
}

}  // namespace tessera::cli
