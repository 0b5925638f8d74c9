// Whole-model gradient check in fp32, independent of PyTorch: for every
// parameter tensor W with analytic gradient g (from forward_backward), the
// directional derivative of the mean loss along d = g / |g| must equal |g|:
//   (L(W + h d) - L(W - h d)) / 2h = |g| + O(h^2) + O(eps32 * |L| / h).
// With h = 1e-2, |L| ~ 5.6 and eps32 = 6e-8 the rounding term is ~3e-5 and
// the truncation term ~1e-4 * |L'''|, so we allow 2e-4 + 2e-2 * |g|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "core/rng.h"
#include "model/gpt.h"

namespace tera {
namespace {

// Both architectures (GPT-2; Llama with grouped-query attention, an untied
// head, RMSNorm, rotary embeddings and SwiGLU) and both attention kinds
// (naive, flash), on the cpu backend.
class GptGradCheck : public ::testing::TestWithParam<std::tuple<Arch, AttentionKind>> {};

ModelConfig gradcheck_model(Arch arch) {
  if (arch == Arch::gpt2) {
    return ModelConfig{.layers = 2, .hidden = 16, .heads = 2, .seq_len = 9, .vocab = 37, .ffn_hidden = 0, .vocab_align = 8};
  }
  ModelConfig m{.layers = 2, .hidden = 16, .heads = 4, .seq_len = 9, .vocab = 37, .ffn_hidden = 24, .vocab_align = 8,
                .kv_heads = 2, .mlp = MlpKind::gated, .arch = Arch::llama};
  m.rope_theta = 100;  // positions 0..8 turn the fastest pair by over a radian each
  return m;
}

TEST_P(GptGradCheck, DirectionalDerivativeOfEveryTensor) {
  ModelConfig cfg = gradcheck_model(std::get<0>(GetParam()));
  cfg.attention = std::get<1>(GetParam());
  const int64_t B = 3, T = cfg.seq_len;
  Gpt model(ModelSpec(cfg), cpu_backend(), B);
  model.init_parameters(42);
  // Larger weights than GPT-2 init so every tensor's gradient is well above the noise floor.
  model.table().for_each([&](const ParamEntry& e) {
    const PhiloxKey key = philox_key(9, e.info->name);
    for (int64_t i = 0; i < numel(e.info->shape); ++i) {
      model.params()[e.offset + i] += 0.2f * philox_normal(key, static_cast<uint64_t>(i));
    }
  });
  std::vector<int32_t> tok(B * T), tgt(B * T);
  const PhiloxKey dk = philox_key(3, "tokens");
  for (int64_t i = 0; i < B * T; ++i) {
    tok[i] = static_cast<int32_t>(philox_below(dk, 2 * i, cfg.vocab));
    tgt[i] = static_cast<int32_t>(philox_below(dk, 2 * i + 1, cfg.vocab));
  }
  const float dloss = 1.0f / static_cast<float>(B * T);
  auto mean_loss = [&] { return model.forward_loss(tok.data(), tgt.data(), B, T) / static_cast<double>(B * T); };
  model.zero_grads();
  model.forward_backward(tok.data(), tgt.data(), B, T, dloss);
  std::vector<float> grads(model.grads(), model.grads() + model.table().total_floats());

  const double h = 1e-2;
  int checked = 0;
  model.table().for_each([&](const ParamEntry& e) {
    const int64_t n = numel(e.info->shape);
    double norm2 = 0;
    for (int64_t i = 0; i < n; ++i) norm2 += static_cast<double>(grads[e.offset + i]) * grads[e.offset + i];
    const double norm = std::sqrt(norm2);
    ASSERT_GT(norm, 1e-3) << e.info->name << " has a vanishing gradient; the check would be meaningless";
    std::vector<float> saved(model.params() + e.offset, model.params() + e.offset + n);
    auto shift = [&](double s) {
      for (int64_t i = 0; i < n; ++i) {
        model.params()[e.offset + i] = static_cast<float>(saved[i] + s * grads[e.offset + i] / norm);
      }
    };
    shift(h);
    const double lp = mean_loss();
    shift(-h);
    const double lm = mean_loss();
    shift(0);
    const double fd = (lp - lm) / (2 * h);
    EXPECT_NEAR(fd, norm, 2e-4 + 2e-2 * norm) << e.info->name;
    ++checked;
  });
  EXPECT_EQ(checked, static_cast<int>(model.table().entries().size()));
}

INSTANTIATE_TEST_SUITE_P(ArchAndAttention, GptGradCheck,
                         ::testing::Combine(::testing::Values(Arch::gpt2, Arch::llama),
                                            ::testing::Values(AttentionKind::naive, AttentionKind::flash)),
                         [](const ::testing::TestParamInfo<std::tuple<Arch, AttentionKind>>& i) {
                           return std::string(arch_name(std::get<0>(i.param))) + "_" +
                                  attention_kind_name(std::get<1>(i.param));
                         });

TEST(GptFlashAttention, TheSameLossesAndGradientsAsNaive) {
  // One model, the same weights and batch: flash and naive attention give the
  // same loss and gradients up to fp32 rounding of reordered sums (1e-5
  // relative on the loss, 1e-4 of the largest gradient entry).
  ModelConfig cfg{.layers = 2, .hidden = 24, .heads = 3, .seq_len = 70, .vocab = 41, .ffn_hidden = 0, .vocab_align = 8};
  const int64_t B = 2, T = cfg.seq_len;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  const PhiloxKey dk = philox_key(4, "tokens");
  for (int64_t i = 0; i < B * T; ++i) {
    tok[i] = static_cast<int32_t>(philox_below(dk, 2 * i, cfg.vocab));
    tgt[i] = static_cast<int32_t>(philox_below(dk, 2 * i + 1, cfg.vocab));
  }
  double loss[2];
  std::vector<float> grads[2];
  for (AttentionKind k : {AttentionKind::naive, AttentionKind::flash}) {
    cfg.attention = k;
    Gpt model(ModelSpec(cfg), cpu_backend(), B);
    model.init_parameters(7);
    model.zero_grads();
    const int i = k == AttentionKind::flash;
    loss[i] = model.forward_backward(tok.data(), tgt.data(), B, T, 1.0f / static_cast<float>(B * T));
    grads[i] = model.gradients_to_host();
  }
  EXPECT_NEAR(loss[1], loss[0], 1e-5 * loss[0]);
  float most = 0;
  for (float g : grads[0]) most = std::max(most, std::abs(g));
  for (size_t j = 0; j < grads[0].size(); ++j) ASSERT_NEAR(grads[1][j], grads[0][j], 1e-4 * most) << j;
}

TEST(GptVocabPadding, PaddedVocabRowsGetNoGradientAndStayZero) {
  ModelConfig cfg{.layers = 1, .hidden = 8, .heads = 2, .seq_len = 5, .vocab = 11, .ffn_hidden = 0, .vocab_align = 16};
  Gpt model(ModelSpec(cfg), cpu_backend(), 2);
  model.init_parameters(1);
  std::vector<int32_t> tok = {1, 2, 3, 4, 5, 10, 9, 8, 7, 6}, tgt = {2, 3, 4, 5, 6, 9, 8, 7, 6, 0};
  model.zero_grads();
  model.forward_backward(tok.data(), tgt.data(), 2, 5, 0.1f);
  const ParamEntry& wte = model.table().at("wte.weight");
  ASSERT_EQ(wte.local_shape[0], 16);
  for (int64_t i = 11 * 8; i < 16 * 8; ++i) {
    ASSERT_EQ(model.params()[wte.offset + i], 0.0f);
    ASSERT_EQ(model.grads()[wte.offset + i], 0.0f);
  }
}

}  // namespace
}  // namespace tera
