// tera's entry point: registers every subcommand (cli/cmd_*.cpp) on one CLI11
// app, parses, and runs the one the user named.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <new>
#include <fmt/format.h>
#include <vector>

#include "cli/commands.h"
#include "cli/version.h"

int main(int argc, char** argv) {
  using namespace tera::cli;
  CLI::App app{"tera: train GPT models with tensor, pipeline and sharded data parallelism,\n"
               "and plan which layout fits and how fast it runs."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(tera_version_string()));

  const std::vector<Command> commands = {
      add_train_command(app),
      add_generate_command(app),
      add_eval_command(app),
      add_plan_command(app),
      add_simulate_command(app),
      add_calibrate_command(app),
      add_tokenize_command(app),
      add_ckpt_command(app),
      add_version_command(app),
  };

  if (argc > 1 && argv[1][0] != '-' &&
      std::none_of(commands.begin(), commands.end(), [&](const Command& c) { return c.app->get_name() == argv[1]; })) {
    std::string names;
    for (const auto& c : commands) names += (names.empty() ? "" : ", ") + c.app->get_name();
    print_error(fmt::format("unknown command '{}'; the commands are {} (see tera --help)", argv[1], names));
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitBadInput;
  }
  for (const auto& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run();
    } catch (const std::bad_alloc& e) {
      // An arena (AllocationError names the buffer class) or any other allocation.
      print_error(fmt::format("out of memory: {}; the run needs more memory than this machine gives it (see "
                              "`tera plan` for a layout that fits)",
                              std::string(e.what()) == "std::bad_alloc" ? "an allocation failed" : e.what()));
      return kExitFailure;
    }
  }
  return kExitBadInput;
}
