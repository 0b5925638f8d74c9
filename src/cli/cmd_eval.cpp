// `tera eval`: mean per-token loss of a checkpoint over consecutive windows of
// a text file (encoded with the checkpoint's tokenizer) or a token-shard
// directory (the loop: train/evaluation.h); the last line is
// `val_loss=<float>` for scripts. --batches past
// the end of the data is refused (windows never wrap around); long
// evaluations print progress on stderr.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <memory>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "ckpt/model_source.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "data/dataset.h"
#include "data/tokenizer_file.h"
#include "data/training_data.h"
#include "model/gpt.h"
#include "train/evaluation.h"

namespace tera::cli {

namespace {

struct EvalArgs {
  std::string ckpt;  // a model source (ckpt/model_source.h)
  int64_t heads = 0;
  std::string data;
  int64_t batches = 0;  // 0: the whole file, in windows of seq_len
  bool quiet = false;
  std::string backend = "cpu";
};

// The model source and the data it is evaluated on, checked against each
// other (the data's vocabulary within the model's, a window's worth of tokens).
struct EvalInputs {
  ModelSourceReader src;
  std::unique_ptr<TokenDataset> data;
};

Expected<EvalInputs> open_inputs(const EvalArgs& args) {
  auto source = resolve_model_source(args.ckpt);
  if (!source) return source.status();
  ModelSourceOptions opt;
  opt.heads = args.heads;
  auto src = ModelSourceReader::open(*source, opt);
  if (!src) return src.status();
  auto tok = tokenizer_from_reference(src->tokenizer(), src->tokenizer_base(), src->tokenizer_where());
  if (!tok) return tok.status();
  auto data = open_eval_data(args.data, *tok, "--data");
  if (!data) return data.status();
  if ((*data)->vocab() > src->model().vocab) {
    return Status::error(fmt::format("--data {}: vocabulary {} is larger than the checkpoint's model.vocab {}",
                                     args.data, (*data)->vocab(), src->model().vocab));
  }
  TERA_RETURN_IF_ERROR(check_dataset_fits(**data, src->model().seq_len, "--data " + args.data));
  return EvalInputs{std::move(*src), std::move(*data)};
}

// The source's weights into the one-process model.
Status load_weights(const ModelSourceReader& src, Gpt& model) {
  std::vector<float> host(static_cast<size_t>(model.table().total_floats()));
  TERA_RETURN_IF_ERROR(src.read_into(model.table(), host.data()));
  model.load_parameters(host.data());
  return ok_status();
}

int run_eval(const EvalArgs& args) {
  if (args.ckpt.empty()) {
    print_error("eval: name the model to evaluate: tera eval SOURCE --data FILE (or --ckpt SOURCE)");
    return kExitBadInput;
  }
  const std::unique_ptr<Backend> be = start_backend(args.backend, "--backend");
  if (be == nullptr) return kExitBadInput;
  auto inputs = open_inputs(args);
  if (!inputs) {
    print_error(inputs.error());
    return kExitBadInput;
  }
  const ModelSourceReader* src = &inputs->src;
  const TokenDataset& data = *inputs->data;
  const int64_t T = src->model().seq_len;
  // The training run's micro-batch when the source records it (the same
  // batches, so the same sums, from a step-N and from its final/).
  const int64_t B = src->micro_batch() > 0 ? src->micro_batch() : 8;
  Gpt model(ModelSpec(src->model()), *be, B);
  if (Status s = load_weights(*src, model); !s) {
    print_error(s.message());
    return kExitBadInput;
  }
  // Windows never wrap around: --batches past the data is refused, naming
  // how many batches the data holds (the last one may be partial).
  const int64_t windows = eval_windows(data, T);
  const int64_t have = (windows + B - 1) / B;
  if (args.batches > have) {
    print_error(fmt::format("--batches {}: --data {} holds only {} batch{} of {} windows of {} tokens ({} windows); "
                            "pass --batches {} or fewer, or 0 for all of it",
                            args.batches, args.data, have, have == 1 ? "" : "es", B, T, windows, have));
    return kExitBadInput;
  }
  const int64_t count = args.batches > 0 ? std::min(args.batches * B, windows) : windows;
  // Progress on stderr every ~2 s for long evaluations (stdout stays the
  // result, for scripts); none with --quiet.
  double every_s = 2.0;
  if (const char* e = std::getenv("TERA_TEST_EVAL_PROGRESS_S"); e != nullptr && *e) every_s = std::atof(e);  // tests
  const auto every = std::chrono::duration<double>(every_s);
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  bool printed = false;
  const double sum = eval_loss_sum(model, data, T, B, count, [&](int64_t done, double loss_sum) {
    const auto now = std::chrono::steady_clock::now();
    if (args.quiet || now - last < every) return;
    last = now;
    const double secs = std::chrono::duration<double>(now - start).count();
    const double d = static_cast<double>(done);
    fmt::print(stderr, "eval: {}/{} windows ({:.0f}%), loss so far {:.4f}, {:.0f} s, eta {:.0f} s\n", done, count,
               100.0 * d / static_cast<double>(count), loss_sum / (d * static_cast<double>(T)), secs,
               secs / d * static_cast<double>(count - done));
    printed = true;
  });
  if (printed) {
    fmt::print(stderr, "eval: {} windows in {:.0f} s\n", count,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  fmt::print("evaluated {} windows of {} tokens from {}\n", count, T, args.data);
  fmt::print("val_loss={:.6f}\n", sum / static_cast<double>(count * T));
  return kExitOk;
}

}  // namespace

Command add_eval_command(CLI::App& parent) {
  auto a = std::make_shared<EvalArgs>();
  auto* sub = parent.add_subcommand("eval", "Mean loss of a checkpoint on a text file or token shards");
  auto* pos = sub->add_option("source", a->ckpt,
                              "The model: a training checkpoint (ckpt.dir/step-N), a ckpt.dir (its latest valid "
                              "checkpoint), a tera-model directory (out.dir/final) or a .safetensors file");
  sub->add_option("--ckpt", a->ckpt, "The model, as SOURCE (the older spelling)")->excludes(pos);
  sub->add_option("--heads", a->heads, "Attention heads of a .safetensors SOURCE without config.json beside it")
      ->check(int_in(1, 1 << 20));
  sub->add_option("--data", a->data, "Text file or token-shard directory (its val split if any) to evaluate on")->required();
  sub->add_option("--batches", a->batches, "Micro-batches to evaluate (0: the whole file)")
      ->capture_default_str()
      ->check(int_in(0, int64_t{1} << 40));
  sub->add_flag("-q,--quiet", a->quiet, "No progress lines on stderr");
  sub->add_option("--backend", a->backend, "Kernel backend (cpu, cpu-guarded; `tera version` lists this binary's)")
      ->capture_default_str();
  return {sub, [a] { return run_eval(*a); }};
}

}  // namespace tera::cli
