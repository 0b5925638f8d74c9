// Writes tera's logits for a checkpoint's weights, for export_parity.py:
// loads every global tensor of a checkpoint (tera-checkpoint or tera-model
// directory) into a one-process GPT, runs a fixed pseudo-random batch
// [2, seq_len] and writes tokens (I32) and logits (F32 [2, seq_len, vocab]).
// Usage: tera_logits_dump CHECKPOINT_DIR OUT.safetensors [BACKEND]   (default cpu)
#include <cstdio>
#include <cstring>
#include <vector>

#include "ckpt/hf_gpt2.h"
#include "core/rng.h"
#include "kernels/backend_registry.h"
#include "model/gpt.h"

using namespace tera;

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s CHECKPOINT_DIR OUT.safetensors [BACKEND]\n", argv[0]);
    return 2;
  }
  ModelConfig cfg;
  auto weights = read_global_weights(argv[1], &cfg);
  if (!weights) {
    std::fprintf(stderr, "%s\n", weights.error().c_str());
    return 2;
  }
  const int64_t B = 2, T = cfg.seq_len, V = cfg.vocab;
  auto made = make_backend(argc > 3 ? argv[3] : "cpu");
  if (!made) {
    std::fprintf(stderr, "%s\n", made.error().c_str());
    return 2;
  }
  const std::unique_ptr<Backend> be = std::move(*made);
  Gpt model(ModelSpec(cfg), *be, B);
  std::vector<float> host(static_cast<size_t>(model.table().total_floats()), 0.0f);
  for (const GlobalTensor& t : *weights) {
    const ParamEntry& e = model.table().at(t.name);
    std::memcpy(host.data() + e.offset, t.data.data(), t.data.size() * sizeof(float));  // padding rows stay 0
  }
  model.load_parameters(host.data());
  std::vector<int32_t> tokens(static_cast<size_t>(B * T));
  const PhiloxKey key = philox_key(7, "logits_dump");
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(philox_below(key, i, static_cast<uint64_t>(V)));
  const std::vector<float> logits_host = model.logits(tokens.data(), B, T);
  const float* logits = logits_host.data();
  const int64_t Vp = model.spec().padded_vocab();
  std::vector<float> out(static_cast<size_t>(B * T * V));
  for (int64_t r = 0; r < B * T; ++r) std::memcpy(&out[static_cast<size_t>(r * V)], logits + r * Vp, V * sizeof(float));
  auto st = write_safetensors(argv[2], {{"tokens", "I32", {B, T}, tokens.data(), tokens.size() * 4},
                                        {"logits", "F32", {B, T, V}, out.data(), out.size() * 4}});
  if (!st) {
    std::fprintf(stderr, "%s\n", st.error().c_str());
    return 1;
  }
  return 0;
}
