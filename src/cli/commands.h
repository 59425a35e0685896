// The `gpumux` subcommands. Each Add* registers a subcommand and its flags on `app` and returns it
// with the function that runs it once the command line is parsed. Run functions return the process exit code and throw
// InputError for bad input (main prints it and exits with 2).
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace gpumux {

// Exit codes, documented in the README.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitPartial = 3;  // a plan was made, but some tenants fit nowhere

struct Command {
  CLI::App* subcommand = nullptr;
  std::function<int()> run;
};

Command AddExplainCommand(CLI::App& app);
Command AddPlanCommand(CLI::App& app);
Command AddFleetCommand(CLI::App& app);  // `fleet simulate`
Command AddRunCommand(CLI::App& app);
Command AddStatusCommand(CLI::App& app);
Command AddTopCommand(CLI::App& app);
Command AddSlurmCommand(CLI::App& app);  // `slurm gres-conf`

}  // namespace gpumux
