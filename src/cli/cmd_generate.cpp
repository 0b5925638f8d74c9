// `tera generate`: autoregressive sampling from a checkpoint (no KV cache: the
// window of the last seq_len tokens is re-run per token, fine at CPU scale).
// The prompt is encoded and the output decoded with the tokenizer the
// checkpoint records (byte tokens or BPE).
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <memory>

#include <string>
#include <vector>

#include "ckpt/model_source.h"
#include "cli/commands.h"
#include "cli/flag_checks.h"
#include "core/rng.h"
#include "data/tokenizer_file.h"
#include "model/gpt.h"

namespace tera::cli {

namespace {

// Next token from scores[V] (Gpt::next_token_scores): the argmax of the
// logits at temperature 0, else a sample from the probabilities.
int32_t pick(const std::vector<float>& scores, double temperature, PhiloxKey key, uint64_t i) {
  const int64_t V = static_cast<int64_t>(scores.size());
  if (temperature <= 0) {
    int64_t best = 0;
    for (int64_t j = 1; j < V; ++j) {
      if (scores[static_cast<size_t>(j)] > scores[static_cast<size_t>(best)]) best = j;
    }
    return static_cast<int32_t>(best);
  }
  const double u = static_cast<double>(philox_u64(key, i) >> 11) * (1.0 / 9007199254740992.0);
  double c = 0;
  for (int64_t j = 0; j < V; ++j) {
    c += scores[static_cast<size_t>(j)];
    if (u < c) return static_cast<int32_t>(j);
  }
  return static_cast<int32_t>(V - 1);
}

struct GenerateArgs {
  std::string ckpt;  // a model source (ckpt/model_source.h)
  int64_t heads = 0;
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 0.8;
  uint64_t seed = 0;
  bool ids = false;
  std::string backend = "cpu";
};

int run_generate(const GenerateArgs& args) {
  if (args.ckpt.empty()) {
    print_error("generate: name the model to sample: tera generate SOURCE (or --ckpt SOURCE)");
    return kExitBadInput;
  }
  auto source = resolve_model_source(args.ckpt);
  if (!source) {
    print_error(source.error());
    return kExitBadInput;
  }
  ModelSourceOptions opt;
  opt.heads = args.heads;
  auto src = ModelSourceReader::open(*source, opt);
  if (!src) {
    print_error(src.error());
    return kExitBadInput;
  }
  auto tok = tokenizer_from_reference(src->tokenizer(), src->tokenizer_base(), src->tokenizer_where());
  if (!tok) {
    print_error(tok.error());
    return kExitBadInput;
  }
  if (tok->vocab_size() > src->model().vocab) {
    print_error(fmt::format("{}: its tokenizer has {} tokens but model.vocab is {}", args.ckpt, tok->vocab_size(),
                            src->model().vocab));
    return kExitBadInput;
  }
  const std::unique_ptr<Backend> be = start_backend(args.backend, "--backend");
  if (be == nullptr) return kExitBadInput;
  Gpt model(ModelSpec(src->model()), *be, 1);
  {
    std::vector<float> host(static_cast<size_t>(model.table().total_floats()));
    if (Status s = src->read_into(model.table(), host.data()); !s) {
      print_error(s.message());
      return kExitBadInput;
    }
    model.load_parameters(host.data());
  }
  // Sampling is restricted to the tokenizer's ids (model.vocab may be larger).
  const int64_t V = tok->vocab_size(), T = src->model().seq_len;
  // The prompt starts a document as the training data did: after the
  // tokenizer's beginning-of-text token when it has one.
  std::vector<int32_t> ctx;
  if (tok->bos() >= 0) ctx.push_back(tok->bos());
  const std::vector<int32_t> prompt = tok->encode(args.prompt);
  ctx.insert(ctx.end(), prompt.begin(), prompt.end());
  if (ctx.empty()) ctx.push_back(tok->eot() >= 0 ? tok->eot() : tok->byte_token('\n'));
  std::fwrite(args.prompt.data(), 1, args.prompt.size(), stdout);
  const PhiloxKey key = philox_key(args.seed, "generate");
  std::vector<float> scores(static_cast<size_t>(V));  // the sampled row, copied to the host per token
  std::vector<int32_t> generated;
  for (int64_t i = 0; i < args.tokens; ++i) {
    const int64_t n = static_cast<int64_t>(ctx.size());
    const int64_t w = n < T ? n : T;
    model.next_token_scores(ctx.data() + (n - w), w, V, static_cast<float>(args.temperature), scores.data());
    const int32_t next = pick(scores, args.temperature, key, static_cast<uint64_t>(i));
    ctx.push_back(next);
    generated.push_back(next);
    const std::string& piece = tok->token(next);  // bytes; a special token prints as its text
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  }
  std::fputc('\n', stdout);
  if (args.ids) {
    std::string line;
    for (size_t i = 0; i < generated.size(); ++i) {
      if (i > 0) line += ' ';
      line += std::to_string(generated[i]);
    }
    fmt::print("{}\n", line);
  }
  return kExitOk;
}

}  // namespace

Command add_generate_command(CLI::App& parent) {
  auto a = std::make_shared<GenerateArgs>();
  auto* sub = parent.add_subcommand("generate", "Sample text from a trained checkpoint");
  auto* pos = sub->add_option("source", a->ckpt,
                              "The model: a training checkpoint (ckpt.dir/step-N), a ckpt.dir (its latest valid "
                              "checkpoint), a tera-model directory (out.dir/final) or a .safetensors file");
  sub->add_option("--ckpt", a->ckpt, "The model, as SOURCE (the older spelling)")->excludes(pos);
  sub->add_option("--heads", a->heads, "Attention heads of a .safetensors SOURCE without config.json beside it")
      ->check(int_in(1, 1 << 20));
  sub->add_option("--prompt", a->prompt, "Text to continue")->required();
  sub->add_option("-n,--tokens", a->tokens, "Tokens to generate")->capture_default_str()->check(int_in(1, 1 << 20));
  sub->add_option("-t,--temperature", a->temperature, "Sampling temperature; 0 is greedy")
      ->capture_default_str()
      ->check(real_in(0, 100));
  sub->add_option("--seed", a->seed, "Sampling seed")->capture_default_str();
  sub->add_flag("--ids", a->ids, "Also print the generated token ids, space-separated, as the last line");
  sub->add_option("--backend", a->backend, "Kernel backend (cpu, cpu-guarded; `tera version` lists this binary's)")
      ->capture_default_str();
  return {sub, [a] { return run_generate(*a); }};
}

}  // namespace tera::cli
