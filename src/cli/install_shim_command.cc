// `gpumux install-shim DIR`: puts the libraries gpumux loads into tenants (the shim, the simulated
// driver) into a node folder that tenants' containers mount (node/tenant_libraries.h). The
// Kubernetes DaemonSets run it as their init container, then gpumuxd --tenant-libraries DIR.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "node/device.h"
#include "node/tenant_libraries.h"

namespace gpumux {

Command AddInstallShimCommand(CLI::App& app) {
  auto dir = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "install-shim",
      "Put the shim (and the simulated GPU's libraries) into DIR, a node folder tenants' "
      "containers mount; each file replaced whole, so running tenants keep theirs");
  sub->add_option("DIR", *dir, "the folder (made if missing; root's or yours, others may not write)")
      ->required();
  return {sub, [dir] {
            std::string from = node::RuntimeLibraryDir();
            std::vector<std::string> replaced = node::InstallTenantLibraries(from, *dir);
            for (const std::string& path : replaced) fmt::print("installed {}\n", path);
            if (replaced.empty()) fmt::print("{} already holds the shim of {}\n", *dir, from);
            return kExitOk;
          }};
}

}  // namespace gpumux
