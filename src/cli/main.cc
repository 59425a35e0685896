// gpumux: plan and enforce GPU sharing. See README.md for the commands and exit codes.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <vector>

#include "base/error.h"
#include "cli/commands.h"

int main(int argc, char** argv) {
  using namespace gpumux;
  CLI::App app{
      "gpumux: share GPUs safely. Models what each job uses, plans which jobs share which GPU "
      "and how (MIG, MPS, time-slicing), and says why."};
  app.require_subcommand(1);
  std::vector<Command> commands = {AddExplainCommand(app), AddPlanCommand(app),
                                   AddFleetCommand(app),   AddFleetVariantCommand(app),
                                   AddRunCommand(app),     AddStatusCommand(app),
                                   AddTopCommand(app),     AddSlurmCommand(app),
                                   AddApplyCommand(app),   AddCalibrateCommand(app),
                                   AddInstallShimCommand(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : ExitCode(ErrorCode::kBadInput);
  }
  try {
    for (const Command& c : commands) {
      if (c.subcommand->parsed()) return c.run();
    }
  } catch (const Error& e) {
    fmt::print(stderr, "gpumux: {}{}\n", e.code() == ErrorCode::kInternal ? "internal error: " : "",
               e.what());
    return ExitCode(e.code());
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpumux: internal error: {}\n", e.what());
    return ExitCode(ErrorCode::kInternal);
  }
  return ExitCode(ErrorCode::kInternal);
}
