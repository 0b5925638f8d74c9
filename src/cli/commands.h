// The tera subcommands. Each cmd_*.cpp registers one subcommand (its options
// and help) on the top-level CLI11 app and returns the function that runs it;
// main.cpp lists the registrations and dispatches. A run function returns the
// process exit code: 0 success, 1 runtime failure, 2 bad input (config,
// flags, files). Exit codes are decided only here, in cli/.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace CLI {
class App;
}
namespace tera {
struct Backend;
class Status;
}

namespace tera::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

struct Command {
  CLI::App* app;             // the registered subcommand
  std::function<int()> run;  // runs it after parsing
};

Command add_version_command(CLI::App& parent);
Command add_train_command(CLI::App& parent);
Command add_generate_command(CLI::App& parent);
Command add_eval_command(CLI::App& parent);
Command add_plan_command(CLI::App& parent);
Command add_simulate_command(CLI::App& parent);
Command add_calibrate_command(CLI::App& parent);
Command add_tokenize_command(CLI::App& parent);
Command add_ckpt_command(CLI::App& parent);

// Prints "tera: error: <msg>" to stderr.
void print_error(const std::string& msg);
// The same on the launcher's rank 0 only (before MPI starts, when every rank
// of an mpirun/srun job finds the same bad input): one message per job.
void print_error_once(const std::string& msg);

// A new instance of the backend `name` names (kernels/backend_registry.h:
// the one start-up path of train, eval, generate and calibrate), or nullptr
// after printing an error that names `what` (the flag or config key) and
// the backends this binary has, or why this one cannot start here.
std::unique_ptr<tera::Backend> start_backend(const std::string& name, const std::string& what);

}  // namespace tera::cli
