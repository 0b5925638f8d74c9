// ModelSpec against hand-worked numbers.
#include <gtest/gtest.h>

#include <cstring>

#include "core/rng.h"
#include "kernels/backend.h"
#include "model/gpt.h"
#include "model/model_spec.h"
#include "partition/param_table.h"

namespace tera {
namespace {

ModelConfig gpt2_124m() {
  return ModelConfig{.layers = 12, .hidden = 768, .heads = 12, .seq_len = 1024, .vocab = 50257, .ffn_hidden = 0,
                     .vocab_align = 64};
}

TEST(ModelSpec, Gpt2SmallParameterCount) {
  // GPT-2 small has 124,439,808 parameters (tied head): wte 50257*768 = 38,597,376,
  // wpe 1024*768 = 786,432, 12 blocks of 7,087,872 = 85,054,464, ln_f 1,536.
  ModelSpec spec(gpt2_124m());
  EXPECT_EQ(spec.num_params(), 124439808);
  EXPECT_EQ(spec.padded_vocab(), 50304);  // next multiple of 64
  EXPECT_EQ(spec.num_params_alloc(), 124439808 + (50304 - 50257) * 768);
  EXPECT_EQ(spec.params().size(), 2u + 12u * 12u + 2u);
}

TEST(ModelSpec, FlopsPerTokenHandWorked) {
  // L=2, C=4, F=16, T=8, V=10: per layer 2*(3*16 + 16 + 2*4*16) + 4*8*4 = 2*192 + 128 = 512;
  // forward = 2*512 + 2*4*10 = 1104; train = 3*1024 + 3*80 = 3312; full recompute 4*1024 + 240 = 4336.
  ModelSpec spec(ModelConfig{.layers = 2, .hidden = 4, .heads = 1, .seq_len = 8, .vocab = 10, .ffn_hidden = 0,
                             .vocab_align = 1});
  EXPECT_DOUBLE_EQ(spec.forward_flops_per_token(), 1104.0);
  EXPECT_DOUBLE_EQ(spec.train_flops_per_token(false), 3312.0);
  EXPECT_DOUBLE_EQ(spec.train_flops_per_token(true), 4336.0);
}

TEST(ModelSpec, Gpt2SmallFlopsMatchMegatronFormula) {
  // Narayanan et al. (2021) eq. 3 per token, without recompute (3/4 of the
  // 96 B s l h^2 (1 + s/6h) layer term, the 6 B s h V head term as is):
  // 72 l h^2 (1 + s/6h) + 6 h V.
  ModelSpec spec(gpt2_124m());
  const double l = 12, h = 768, s = 1024, V = 50257;
  EXPECT_NEAR(spec.train_flops_per_token(false), 72 * l * h * h * (1 + s / (6 * h)) + 6 * h * V, 1.0);
}

TEST(ModelSpec, RuntimeAllocatesExactlyTheTables) {
  ModelConfig cfg{.layers = 3, .hidden = 32, .heads = 4, .seq_len = 16, .vocab = 100, .ffn_hidden = 0, .vocab_align = 64};
  cfg.attention = AttentionKind::naive;  // the hand count below keeps the probabilities
  ModelSpec spec(cfg);
  Gpt model(spec, cpu_backend(), 5);
  const MemoryReport m = model.memory();
  const MemoryPlan plan = Gpt::single_process_plan(spec, model.table(), 5);
  for (MemoryClass c : kAllMemoryClasses) EXPECT_EQ(m[c], plan.bytes(c)) << memory_class_name(c);
  EXPECT_EQ(m[MemoryClass::parameters], model.table().total_floats() * 4);
  EXPECT_EQ(m[MemoryClass::gradients], m[MemoryClass::parameters]);
  EXPECT_EQ(m[MemoryClass::optimizer], 0);  // a model alone holds no optimizer state
  // Boundary buffers at B=5, T=16, C=32 (bytes): tokens 320 + input 10240 +
  // targets 320 + losses 320 + dx_head 10240 = 21440, plus 3 block tables.
  EXPECT_EQ(m[MemoryClass::activations], 21440 + 3 * table_bytes(spec.block_activations(5, 16)));
  // Hand count of one block's activations at B=5, T=16, C=32, H=4, F=128 (floats):
  // ln1 2560 + mean 80 + rstd 80 + qkv 7680 + probs 5120 + atty 2560 + res1 2560 + ln2 2560
  // + mean 80 + rstd 80 + fch 10240 + fch_gelu 10240 + out 2560 = 46400 (all multiples of 16).
  EXPECT_EQ(table_bytes(spec.block_activations(5, 16)), 46400 * 4);
}

TEST(ModelSpec, RecomputeAllocatesTheSavedTablePlusOneWorkingSet) {
  ModelConfig cfg{.layers = 4, .hidden = 32, .heads = 4, .seq_len = 16, .vocab = 100, .ffn_hidden = 0, .vocab_align = 64};
  cfg.attention = AttentionKind::naive;  // block_activations(5, 16) below: the naive table
  ModelSpec spec(cfg);
  ParamTable table(spec);
  auto plan_for = [&](Recompute r) { return resident_rank_plan(spec, table, 5, ActivationOptions{.recompute = r}); };
  const RankPlan p_none = plan_for(Recompute::none), p_full = plan_for(Recompute::full);
  RankMemory rm_none(cpu_backend(), p_none.memory_plan(spec)), rm_full(cpu_backend(), p_full.memory_plan(spec));
  LocalParamMemory mem(table, cpu_backend(), rm_none);
  SingleRankTensorParallel tp(cpu_backend());
  SingleRankContextParallel cp;
  Gpt none(spec, cpu_backend(), table, mem, tp, cp, p_none, rm_none);
  Gpt full(spec, cpu_backend(), table, mem, tp, cp, p_full, rm_full);
  const int64_t a_none = none.memory()[MemoryClass::activations], a_full = full.memory()[MemoryClass::activations];
  // 4 layers: 4 block tables -> 4 outputs [5,16,32] + one working set.
  EXPECT_EQ(a_none - a_full,
            4 * table_bytes(spec.block_activations(5, 16)) - 4 * 5 * 16 * 32 * 4 - table_bytes(spec.block_activations(5, 16)));
}

TEST(ModelSpec, ActivationsMatchKorthikanti) {
  // Korthikanti et al. 2022, per layer at 16 bits: 34sbh + 5as^2b with dropout,
  // 10sbh + 24sbh/t + 5as^2b/t with tensor parallelism t, (34sbh + 5as^2b)/t
  // with sequence parallelism too; the LayerNorm statistics (fp32) come on top.
  const int64_t s = 128, b = 2, h = 64, a = 4, t = 4;
  ModelSpec spec(ModelConfig{.layers = 1, .hidden = h, .heads = a, .seq_len = s, .vocab = 64, .ffn_hidden = 0,
                             .vocab_align = 1});
  auto bytes = [&](ActivationOptions o) {
    int64_t n = 0;
    for (const auto& buf : spec.block_activations(b, s, o)) {
      if (buf.name.find("_mean") == std::string::npos && buf.name.find("_rstd") == std::string::npos) n += buf.bytes();
    }
    return n;
  };
  const int64_t sbh = s * b * h, as2b = a * s * s * b;
  ActivationOptions o{.dtype = DType::bf16, .dropout = true};
  EXPECT_EQ(bytes(o), 34 * sbh + 5 * as2b);
  o.tp = t;
  EXPECT_EQ(bytes(o), 10 * sbh + 24 * sbh / t + 5 * as2b / t);
  o.sequence_parallel = true;
  EXPECT_EQ(bytes(o), (34 * sbh + 5 * as2b) / t);
  // Without dropout (tera's CPU runtime): 32sbh + 2as^2b.
  EXPECT_EQ(bytes(ActivationOptions{.dtype = DType::bf16}), 32 * sbh + 2 * as2b);
  // Selective recompute drops the attention scores: 32sbh; full keeps the block input: 2sbh.
  EXPECT_EQ(table_bytes(spec.saved_block_activations(b, s, {.recompute = Recompute::full, .dtype = DType::bf16})),
            2 * sbh);
}

TEST(ModelSpec, DeferredWeightGradsKeepEachLinearLayersOutputGradient) {
  // zb-h1's split backward keeps, per block and micro-batch, fp32 output
  // gradients over all s*b tokens: qkv (3h, or (H + 2 KV) hs), the two
  // projections (h each), fc (F/t) and the gate (F/t, gated) on a tp rank,
  // plus the norms' gains (and biases with LayerNorm), h each: 4 bytes per float.
  for (Arch arch : {Arch::gpt2, Arch::llama}) {
    ModelConfig m = gpt2_124m();
    if (arch == Arch::llama) {
      m.arch = Arch::llama;
      m.mlp = MlpKind::gated;
      m.kv_heads = 4;
    }
    const ModelSpec spec(m);
    const int64_t b = 2, s = 64, h = 768, t = 2, F = m.ffn(), hs = 64;
    for (bool sp : {false, true}) {
      ActivationOptions o{.tp = t, .sequence_parallel = sp, .gemm = DType::bf16};
      const int64_t without = table_bytes(spec.saved_block_activations(b, s, o));
      o.defer_weight_grads = true;
      const int64_t qkv = arch == Arch::llama ? (12 / t + 2 * 4 / t) * hs : 3 * h / t;
      const int64_t mlp = (arch == Arch::llama ? 2 : 1) * F / t;
      const int64_t norms = (arch == Arch::llama ? 2 : 4) * h;
      EXPECT_EQ(table_bytes(spec.saved_block_activations(b, s, o)) - without,
                4 * (s * b * (qkv + 2 * h + mlp) + norms))
          << (arch == Arch::llama ? "llama" : "gpt2") << (sp ? " sp" : "");
    }
  }
}

TEST(ModelSpec, Bf16GemmsKeepTheNormOutputsAndTheMlpInBf16) {
  // train.precision = "bf16": the two norm outputs and the MLP's tensors
  // (fch, its activation, and the gate on a gated MLP) are bf16, everything
  // else keeps the activations' dtype, and with flash attention qkv and atty
  // are bf16 too; the table shrinks by half of those tensors' bytes: (2 s_t b
  // h + m s b f / t (+ s b (q + h) / t with flash)) * 2 bytes, s_t the
  // sequence under sp, m = 2 MLP tensors (3 gated), q the qkv width.
  for (MlpKind mlp : {MlpKind::standard, MlpKind::gated}) {
    ModelConfig cfg{.layers = 1, .hidden = 64, .heads = 4, .seq_len = 32, .vocab = 64, .ffn_hidden = 96, .vocab_align = 1};
    cfg.mlp = mlp;
    if (mlp == MlpKind::gated) cfg.arch = Arch::llama;
    const ModelSpec spec(cfg);
    for (auto [sp, flash] : {std::pair{false, true}, {true, true}, {false, false}}) {
      const ActivationOptions f32{.tp = 2, .sequence_parallel = sp, .flash_attention = flash};
      ActivationOptions bf16 = f32;
      bf16.gemm = DType::bf16;
      const std::string act = mlp == MlpKind::gated ? "fch_swiglu" : "fch_gelu";
      for (const BufferInfo& b : spec.block_activations(3, 32, bf16)) {
        const bool kept = b.name == "ln1" || b.name == "ln2" || b.name == act || b.name == "fch" ||
                          b.name == "fch_gate" || (flash && (b.name == "qkv" || b.name == "atty"));
        EXPECT_EQ(b.dtype, kept ? DType::bf16 : DType::f32) << b.name << (sp ? " sp" : "");
      }
      const int64_t st = sp ? 16 : 32;
      int64_t f32_bytes = 0, bf16_bytes = 0;
      for (const BufferInfo& b : spec.block_activations(3, 32, f32)) f32_bytes += b.bytes();
      for (const BufferInfo& b : spec.block_activations(3, 32, bf16)) bf16_bytes += b.bytes();
      const int64_t m = mlp == MlpKind::gated ? 3 : 2;
      const int64_t q = flash ? 32 * 3 * (spec.qkv_width_local(2) + 64 / 2) : 0;
      EXPECT_EQ(f32_bytes - bf16_bytes, (2 * st * 3 * 64 + m * 32 * 3 * 96 / 2 + q) * 2) << (sp ? "sp" : "");
    }
  }
}

TEST(ModelSpec, VocabParallelRowsArePaddedForTpEvenWhenTheVocabIsAligned) {
  // vocab 128 is a multiple of vocab_align 64 but not of 64 * tp = 256: each
  // of 4 ranks holds padded_vocab(4) / 4 = 64 rows (what Gpt's LM head reads),
  // ranks 2 and 3 only padding. (Decided by the parameter's token_embedding
  // role, not by whether tp = 1 needed padding.)
  const ModelSpec spec(ModelConfig{.layers = 1, .hidden = 16, .heads = 2, .seq_len = 8, .vocab = 128, .vocab_align = 64});
  const ParamInfo* wte = nullptr;
  for (const auto& p : spec.params()) {
    if (p.token_embedding) wte = &p;
  }
  ASSERT_NE(wte, nullptr);
  EXPECT_EQ(wte->name, "wte.weight");
  EXPECT_EQ(spec.local_shape(*wte, 4), (Shape{64, 16}));
  for (int r = 0; r < 4; ++r) {
    const ParamTable table(spec, ArenaLayout::kAlignFloats, 4, r, whole_model_plan(1));
    const ParamEntry& e = table.at("wte.weight");
    EXPECT_EQ(e.local_shape, (Shape{64, 16}));
    EXPECT_EQ(table.global_index(e, 0), r < 2 ? r * 64 * 16 : -1) << r;
  }
}

TEST(ModelSpec, ValidationNamesTheKey) {
  ModelConfig bad{.layers = 2, .hidden = 30, .heads = 4, .seq_len = 8, .vocab = 10, .ffn_hidden = 0, .vocab_align = 1};
  Status s = validate_model_config(bad);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("model.heads"), std::string::npos);
  EXPECT_NE(s.message().find("model.hidden"), std::string::npos);
  bad.heads = 3;
  bad.layers = 0;
  EXPECT_NE(validate_model_config(bad).message().find("model.layers"), std::string::npos);
}

TEST(ModelSpec, InitIsKeyedByNameAndIndex) {
  ModelConfig cfg{.layers = 1, .hidden = 8, .heads = 2, .seq_len = 4, .vocab = 20, .ffn_hidden = 0, .vocab_align = 8};
  Gpt a(ModelSpec(cfg), cpu_backend(), 1), b(ModelSpec(cfg), cpu_backend(), 1), c(ModelSpec(cfg), cpu_backend(), 1);
  a.init_parameters(5);
  b.init_parameters(5);
  c.init_parameters(6);
  const int64_t n = a.table().total_floats();
  EXPECT_EQ(0, std::memcmp(a.params(), b.params(), static_cast<size_t>(n) * 4));
  EXPECT_NE(0, std::memcmp(a.params(), c.params(), static_cast<size_t>(n) * 4));
  // Element i of a tensor is std * N(key(seed, name), i), whatever holds it.
  const ParamEntry& e = a.table().at("h.0.mlp.c_fc.weight");
  const float want = e.info->init_std * philox_normal(philox_key(5, "h.0.mlp.c_fc.weight"), 17);
  EXPECT_EQ(a.params()[e.offset + 17], want);
  EXPECT_EQ(a.params()[a.table().at("h.0.ln_1.weight").offset + 3], 1.0f);
  EXPECT_EQ(a.params()[a.table().at("h.0.ln_1.bias").offset + 3], 0.0f);
}

}  // namespace
}  // namespace tera
