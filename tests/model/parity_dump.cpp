// Writes what the PyTorch parity check (parity_gpt2.py) needs, as safetensors:
// tera's initial weights, the batches of the first steps exactly as the
// trainer samples them, the logits, loss and every parameter gradient of the
// first global batch, and the loss / grad norm / lr of each of the first
// train.steps steps of real training (AdamW, clipping, warmup + cosine).
// Usage: tera_parity_dump CONFIG.toml OUT.safetensors [section.key=value ...]
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <string>
#include <vector>

#include "ckpt/safetensors.h"
#include "config/config.h"
#include "train/trainer.h"

using namespace tera;

static uint64_t tc_seed(const RunConfig& c) { return c.train.seed; }

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CONFIG.toml OUT.safetensors [section.key=value ...]\n", argv[0]);
    return 2;
  }
  auto cfg = load_run_config(argv[1], std::vector<std::string>(argv + 3, argv + argc));
  if (!cfg) {
    std::fprintf(stderr, "%s\n", cfg.error().c_str());
    return 2;
  }
  auto tr = Trainer::create(*cfg, cpu_backend());
  if (!tr) {
    std::fprintf(stderr, "%s\n", tr.error().c_str());
    return 2;
  }
  Trainer& t = **tr;
  // A one-process model with the same seed holds the same initial weights as
  // the trainer's (initialisation is keyed by name and element index).
  Gpt model(ModelSpec(cfg->model), cpu_backend(), cfg->parallel.micro_batch);
  model.init_parameters(tc_seed(*cfg));
  const TrainConfig& tc = cfg->train;
  const int64_t T = cfg->model.seq_len, V = cfg->model.vocab, Vp = model.spec().padded_vocab();
  const int64_t mb = cfg->parallel.micro_batch, G = tc.global_batch, steps = tc.steps;

  std::vector<StTensorRef> out;
  std::vector<std::vector<float>> keep_f;
  std::vector<std::vector<int32_t>> keep_i;
  auto add_f = [&](const std::string& name, Shape shape, const float* p) {
    keep_f.emplace_back(p, p + numel(shape));
    out.push_back({name, "F32", shape, keep_f.back().data(), keep_f.back().size() * 4});
  };
  auto add_i = [&](const std::string& name, Shape shape, const int32_t* p) {
    keep_i.emplace_back(p, p + numel(shape));
    out.push_back({name, "I32", shape, keep_i.back().data(), keep_i.back().size() * 4});
  };
  keep_f.reserve(1024);
  keep_i.reserve(1024);

  const std::vector<float> trainer_params = t.gather_parameters();
  if (std::memcmp(trainer_params.data(), model.params(), trainer_params.size() * sizeof(float)) != 0) {
    std::fprintf(stderr, "the trainer's initial weights differ from a fresh model's with the same seed\n");
    return 1;
  }
  model.table().for_each([&](const ParamEntry& e) { add_f("param." + e.info->name, e.info->shape, model.params() + e.offset); });

  // Batches of every step, sampled as Trainer::step samples them.
  auto loader = TokenLoader::create(t.train_data(), T, tc.seed, "data.train");
  const TokenLoader& sampler = **loader;
  std::vector<int32_t> tok(static_cast<size_t>(G * T)), tgt(tok.size());
  for (int64_t s = 0; s < steps; ++s) {
    sampler.fill(s * G, G, tok.data(), tgt.data());
    add_i("tokens." + std::to_string(s), {G, T}, tok.data());
    add_i("targets." + std::to_string(s), {G, T}, tgt.data());
  }

  // Step 0's global batch: logits of the first micro-batch, mean loss and gradients.
  sampler.fill(0, G, tok.data(), tgt.data());
  const std::vector<float> logits_host = model.logits(tok.data(), mb, T);
  const float* logits = logits_host.data();
  std::vector<float> lg(static_cast<size_t>(mb * T * V));
  for (int64_t r = 0; r < mb * T; ++r)
    for (int64_t j = 0; j < V; ++j) lg[static_cast<size_t>(r * V + j)] = logits[r * Vp + j];
  add_f("logits", {mb, T, V}, lg.data());
  model.zero_grads();
  double loss = 0;
  for (int64_t k = 0; k < G / mb; ++k) {
    loss += model.forward_backward(tok.data() + k * mb * T, tgt.data() + k * mb * T, mb, T,
                                   static_cast<float>(1.0 / static_cast<double>(G * T)));
  }
  const float loss0 = static_cast<float>(loss / static_cast<double>(G * T));
  add_f("loss0", {1}, &loss0);
  model.table().for_each([&](const ParamEntry& e) { add_f("grad." + e.info->name, e.info->shape, model.grads() + e.offset); });

  std::vector<float> losses, norms, lrs;
  for (int64_t s = 0; s < steps; ++s) {
    const StepStats st = t.step();
    losses.push_back(static_cast<float>(st.loss));
    norms.push_back(static_cast<float>(st.grad_norm));
    lrs.push_back(st.lr);
  }
  add_f("losses", {steps}, losses.data());
  add_f("grad_norms", {steps}, norms.data());
  add_f("lrs", {steps}, lrs.data());

  std::map<std::string, std::string> meta = {
      {"layers", std::to_string(cfg->model.layers)},   {"hidden", std::to_string(cfg->model.hidden)},
      {"heads", std::to_string(cfg->model.heads)},     {"seq_len", std::to_string(T)},
      {"vocab", std::to_string(V)},                    {"micro_batch", std::to_string(mb)},
      {"global_batch", std::to_string(G)},             {"steps", std::to_string(steps)},
      {"lr", fmt::format("{}", tc.lr)},                   {"min_lr", fmt::format("{}", tc.min_lr)},
      {"warmup", fmt::format("{}", tc.warmup)},           {"clip", fmt::format("{}", tc.clip)},
      {"weight_decay", fmt::format("{}", tc.adamw.weight_decay)}, {"beta1", fmt::format("{}", tc.adamw.beta1)},
      {"beta2", fmt::format("{}", tc.adamw.beta2)},       {"eps", fmt::format("{}", tc.adamw.eps)}};
  auto st = write_safetensors(argv[2], out, meta);
  if (!st) {
    std::fprintf(stderr, "%s\n", st.error().c_str());
    return 1;
  }
  return 0;
}
