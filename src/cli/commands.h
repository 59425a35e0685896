// The `gpumux` subcommands. Each Add* registers a subcommand and its flags on `app` and returns it
// with the function that runs it once the command line is parsed. Run functions return the process
// exit code and throw gpumux::Error (main prints it and exits with its code's ExitCode).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdio>
#include <functional>

#include "base/error.h"
#include "share/node_plan.h"

namespace gpumux {

// Exit codes (README): kExitOk and the ExitCode of an error (base/error.h), and this one.
inline constexpr int kExitPartial =
    3;  // a plan was made, but some tenants fit nowhere (as "does not fit")

struct Command {
  CLI::App* subcommand = nullptr;
  std::function<int()> run;
};

Command AddExplainCommand(CLI::App& app);
Command AddPlanCommand(CLI::App& app);
Command AddFleetCommand(CLI::App& app);         // `fleet simulate`
Command AddFleetVariantCommand(CLI::App& app);  // `fleet variant`; after AddFleetCommand
Command AddRunCommand(CLI::App& app);
Command AddStatusCommand(CLI::App& app);
Command AddTopCommand(CLI::App& app);
Command AddSlurmCommand(CLI::App& app);  // `slurm gres-conf`
Command AddApplyCommand(CLI::App& app);
Command AddCalibrateCommand(CLI::App& app);
Command AddInstallShimCommand(CLI::App& app);

// Where gpumuxd listens unless --agent says otherwise.
inline constexpr const char* kDefaultAgentSocket = "/run/gpumux/gpumuxd.sock";

// Brings gpumuxd at `socket` to `plan` (or prints the calls, with `dry_run`) and says what it did
// on `out`. Shared by `gpumux apply` and `gpumux plan --apply`. Throws Error (cli/node_apply.h).
int ApplyToNode(const NodePlan& plan, const std::string& socket, bool dry_run,
                std::FILE* out = stdout);

}  // namespace gpumux
