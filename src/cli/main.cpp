// tera's entry point: the command line (CLI11), dispatching to cli/cmd_*.cpp.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <fmt/format.h>

#include "cli/commands.h"
#include "cli/version.h"

int main(int argc, char** argv) {
  using namespace tera::cli;
  CLI::App app{"tera: train GPT models with tensor, pipeline and sharded data parallelism,\n"
               "and plan which layout fits and how fast it runs."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(tera_version_string()));

  auto* version = app.add_subcommand("version", "Print the version and build information");

  TrainArgs ta;
  auto* train = app.add_subcommand("train", "Train a model from a TOML config");
  train->add_option("-c,--config", ta.config, "Run config (TOML); see configs/")->required();
  train->add_option("--set", ta.overrides, "Override a config value: --set section.key=value (repeatable)");
  train->add_option("--metrics", ta.metrics, "Write one JSON object per step to this JSONL file");
  train->add_flag("-q,--quiet", ta.quiet, "Print only the summary");

  GenerateArgs ga;
  auto* gen = app.add_subcommand("generate", "Sample text from a trained checkpoint");
  gen->add_option("--ckpt", ga.ckpt, "Checkpoint directory (train writes <out.dir>/final)")->required();
  gen->add_option("--prompt", ga.prompt, "Text to continue")->required();
  gen->add_option("-n,--tokens", ga.tokens, "Tokens to generate")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  gen->add_option("-t,--temperature", ga.temperature, "Sampling temperature; 0 is greedy")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  gen->add_option("--seed", ga.seed, "Sampling seed")->capture_default_str();
  gen->add_flag("--ids", ga.ids, "Also print the generated token ids, space-separated, as the last line");

  EvalArgs ea;
  auto* ev = app.add_subcommand("eval", "Mean loss of a checkpoint on a text file");
  ev->add_option("--ckpt", ea.ckpt, "Checkpoint directory")->required();
  ev->add_option("--data", ea.data, "Text file to evaluate on")->required();
  ev->add_option("--batches", ea.batches, "Micro-batches to evaluate (0: the whole file)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);

  const auto subs = app.get_subcommands([](const CLI::App*) { return true; });
  const bool known = argc > 1 && std::any_of(subs.begin(), subs.end(), [&](const CLI::App* s) { return s->get_name() == argv[1]; });
  if (argc > 1 && argv[1][0] != '-' && !known) {
    std::string names;
    for (const auto* sub : subs) {
      if (!names.empty()) names += ", ";
      names += sub->get_name();
    }
    print_error(fmt::format("unknown command '{}'; the commands are {} (see tera --help)", argv[1], names));
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : kExitBadInput;
  }
  if (*version) {
    fmt::print("{}\n", tera_build_info());
    return kExitOk;
  }
  if (*train) return run_train(ta);
  if (*gen) return run_generate(ga);
  if (*ev) return run_eval(ea);
  return kExitBadInput;
}
