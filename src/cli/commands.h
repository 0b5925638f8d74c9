// The tera subcommands. Each returns the process exit code: 0 success,
// 1 runtime failure, 2 bad input (config, flags, files), the only place
// below main() where exit codes are decided.
#pragma once

#include <string>
#include <vector>

namespace tera::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string metrics;  // JSONL path, empty: none
  bool quiet = false;
};
int run_train(const TrainArgs& args);

struct GenerateArgs {
  std::string ckpt;
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 0.8;
  uint64_t seed = 0;
  bool ids = false;
};
int run_generate(const GenerateArgs& args);

struct EvalArgs {
  std::string ckpt;
  std::string data;
  int64_t batches = 0;  // 0: the whole file, in windows of seq_len
};
int run_eval(const EvalArgs& args);

// Prints "tera: error: <msg>" to stderr.
void print_error(const std::string& msg);

}  // namespace tera::cli
