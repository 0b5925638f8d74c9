// `tera train`: config -> Trainer -> step lines (+ JSONL metrics) -> final checkpoint.
#include <omp.h>

#include <CLI/CLI.hpp>
#include <memory>

#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "config/config.h"
#include "core/format.h"
#include "train/trainer.h"

namespace tera::cli {

void print_error(const std::string& msg) { fmt::print(stderr, "tera: error: {}\n", msg); }

namespace {

struct TrainArgs {
  std::string config;
  std::vector<std::string> overrides;
  std::string metrics;  // JSONL path, empty: none
  bool quiet = false;
};

int run_train(const TrainArgs& args) {
  auto cfg = load_run_config(args.config, args.overrides);
  if (!cfg) {
    print_error(cfg.error());
    return kExitBadInput;
  }
  std::ofstream metrics;
  if (!args.metrics.empty()) {
    metrics.open(args.metrics, std::ios::out | std::ios::trunc);
    if (!metrics) {
      print_error("--metrics " + args.metrics + ": cannot open for writing");
      return kExitBadInput;
    }
  }
  auto trainer = Trainer::create(*cfg, cpu_backend());
  if (!trainer) {
    print_error(trainer.error());
    return kExitBadInput;
  }
  Trainer& tr = **trainer;
  const ModelSpec& spec = tr.model().spec();
  const TrainConfig& tc = cfg->train;
  const MemoryReport mem = tr.memory();
  if (!args.quiet) {
    fmt::print("tera train: {}\n", args.config);
    fmt::print("model: {} layers, hidden {}, {} heads, seq {}, vocab {} (padded {}) = {} parameters\n",
               cfg->model.layers, cfg->model.hidden, cfg->model.heads, cfg->model.seq_len, cfg->model.vocab,
               spec.padded_vocab(), human_count(static_cast<double>(spec.num_params())));
    fmt::print("data: train {}, val {}\n", tr.train_data().describe(), tr.val_data().describe());
    fmt::print("batch: {} sequences x {} tokens per step ({} micro-batches of {}), {} steps\n", tc.global_batch,
               cfg->model.seq_len, tc.accumulation(), tc.micro_batch, tc.steps);
    fmt::print("memory: params {}, grads {}, optimizer {}, activations {}, workspace {} = {}\n",
               human_bytes(mem.params), human_bytes(mem.grads), human_bytes(mem.optimizer),
               human_bytes(mem.activations), human_bytes(mem.workspace), human_bytes(mem.total()));
    fmt::print("compute: cpu backend, {} threads, GEMM by {}; {:.1f} MFLOP per token\n", omp_get_max_threads(),
               cpu_backend().gemm_library, spec.train_flops_per_token() / 1e6);
    std::fflush(stdout);
  }
  double elapsed = 0, first_loss = 0, last_loss = 0;
  std::optional<double> last_val;
  const Status st = tr.run([&](const StepStats& s) {
    elapsed += s.seconds;
    if (s.step == 1) first_loss = s.loss;
    last_loss = s.loss;
    if (s.val_loss) last_val = s.val_loss;
    // ETA from the mean step time so far (the first step includes page faults).
    const double eta = elapsed / static_cast<double>(s.step) * static_cast<double>(s.total - s.step);
    if (!args.quiet) {
      fmt::print("step {:>{}}/{} | loss {:.4f} | lr {:.2e} | gnorm {:.3f} | {:.0f} ms | {:.0f} tok/s | {:.1f} GFLOP/s | "
                 "eta {}\n",
                 s.step, std::to_string(s.total).size(), s.total, s.loss, s.lr, s.grad_norm, s.seconds * 1e3,
                 s.tokens_per_s, s.gflops, human_duration(eta));
      if (s.val_loss) fmt::print("  val_loss {:.4f}\n", *s.val_loss);
      std::fflush(stdout);
    }
    if (metrics.is_open()) {
      nlohmann::json j = {{"step", s.step},           {"loss", s.loss},         {"lr", s.lr},
                          {"grad_norm", s.grad_norm}, {"ms", s.seconds * 1e3},  {"tokens_per_s", s.tokens_per_s},
                          {"gflops", s.gflops}};
      if (s.val_loss) j["val_loss"] = *s.val_loss;
      metrics << j.dump() << '\n';
      metrics.flush();
    }
  });
  if (!st) {
    print_error(st.message());
    return kExitFailure;
  }
  if (Status s = tr.save_final(); !s) {
    print_error(s.message());
    return kExitFailure;
  }
  const std::string out = (std::filesystem::path(cfg->out.dir) / "final").string();
  fmt::print("done: {} steps in {}, loss {:.4f} -> {:.4f}{}; checkpoint {}\n", tc.steps, human_duration(elapsed),
             first_loss, last_loss, last_val ? fmt::format(", val_loss {:.4f}", *last_val) : "", out);
  return kExitOk;
}

}  // namespace

Command add_train_command(CLI::App& parent) {
  auto args = std::make_shared<TrainArgs>();
  auto* sub = parent.add_subcommand("train", "Train a model from a TOML config");
  sub->add_option("-c,--config", args->config, "Run config (TOML); see configs/")->required();
  sub->add_option("--set", args->overrides, "Override a config value: --set section.key=value (repeatable)");
  sub->add_option("--metrics", args->metrics, "Write one JSON object per step to this JSONL file");
  sub->add_flag("-q,--quiet", args->quiet, "Print only the summary");
  return {sub, [args] { return run_train(*args); }};
}

}  // namespace tera::cli
