// model/block_plan.h: the block variant follows the config, the GEMM
// precision and the backend's ops, and agrees with the dtypes the memory
// plan keeps each activation in (ModelSpec::block_activations).
#include "model/block_plan.h"

#include <gtest/gtest.h>

#include <memory>

#include "kernels/backend_registry.h"

namespace tera {
namespace {

ModelConfig config(Arch arch, AttentionKind attention) {
  ModelConfig c{.layers = 2, .hidden = 16, .heads = 4, .seq_len = 8, .vocab = 50};
  c.arch = arch;
  c.mlp = arch == Arch::llama ? MlpKind::gated : MlpKind::standard;
  c.attention = attention;
  return c;
}

// The cpu backend with the fused GELU ops filled in (never called here).
Backend with_fused_gelu() {
  BackendOps ops = cpu_backend().ops();
  ops.linear_gelu_forward_bf16 = [](BackendContext*, uint16_t*, uint16_t*, const uint16_t*, const uint16_t*,
                                    const float*, int64_t, int64_t, int64_t, float*) {};
  ops.linear_backward_gelu_bf16 = [](BackendContext*, float*, float*, float*, const float*, const uint16_t*,
                                     const uint16_t*, const uint16_t*, int64_t, int64_t, int64_t, uint16_t*) {};
  return cpu_backend().with_ops("cpu+fused", ops, nullptr);
}

TEST(BlockPlan, KindsFollowConfigPrecisionAndBackend) {
  const Backend fused = with_fused_gelu();
  const Backend& plain = cpu_backend();
  const BlockPlan gpt = make_block_plan(config(Arch::gpt2, AttentionKind::flash), DType::f32, fused);
  EXPECT_EQ(gpt.norm, NormKind::layernorm);
  EXPECT_FALSE(gpt.rotary);
  EXPECT_TRUE(gpt.learned_positions);
  EXPECT_EQ(gpt.attention, AttentionPath::flash_f32);
  EXPECT_EQ(gpt.mlp, MlpPath::gelu);  // fp32: the fused ops are bf16 ones
  const BlockPlan gpt_bf16 = make_block_plan(config(Arch::gpt2, AttentionKind::flash), DType::bf16, fused);
  EXPECT_EQ(gpt_bf16.attention, AttentionPath::flash_bf16);
  EXPECT_EQ(gpt_bf16.mlp, MlpPath::gelu_fused);
  EXPECT_EQ(make_block_plan(config(Arch::gpt2, AttentionKind::flash), DType::bf16, plain).mlp, MlpPath::gelu);
  EXPECT_EQ(make_block_plan(config(Arch::gpt2, AttentionKind::naive), DType::bf16, plain).attention,
            AttentionPath::naive);
  const BlockPlan llama = make_block_plan(config(Arch::llama, AttentionKind::flash), DType::bf16, fused);
  EXPECT_EQ(llama.norm, NormKind::rmsnorm);
  EXPECT_TRUE(llama.rotary);
  EXPECT_FALSE(llama.learned_positions);
  EXPECT_EQ(llama.mlp, MlpPath::swiglu);
}

TEST(BlockPlan, DtypesAgreeWithTheMemoryPlan) {
  for (Arch arch : {Arch::gpt2, Arch::llama}) {
    for (AttentionKind attention : {AttentionKind::naive, AttentionKind::flash}) {
      for (DType gemm : {DType::f32, DType::bf16}) {
        const ModelConfig cfg = config(arch, attention);
        const BlockPlan p = make_block_plan(cfg, gemm, cpu_backend());
        const ActivationOptions o{.flash_attention = attention == AttentionKind::flash, .gemm = gemm};
        for (const BufferInfo& b : ModelSpec(cfg).block_activations(2, 8, o)) {
          EXPECT_EQ(planned_dtype(p, b.name), b.dtype) << b.name << " " << arch_name(arch) << " "
                                                         << attention_kind_name(attention) << " " << dtype_name(gemm);
        }
      }
    }
  }
}

TEST(BlockPlanDeathTest, ViewsInAnotherDtypeAssert) {
  const BlockPlan p = make_block_plan(config(Arch::gpt2, AttentionKind::flash), DType::f32, cpu_backend());
  float f = 0;
  uint16_t h = 0;
  BlockActs a;
  a.lse = TypedView(&f);
  a.fch_gelu = TypedView(&f);
  a.ln1 = TypedView(&h);  // bf16 where the plan keeps fp32
  EXPECT_DEATH(check_block_acts(p, a, "test"), "ln1 is bf16, the block plan keeps it in f32");
  a.ln1 = TypedView(&f);
  a.lse = TypedView();
  EXPECT_DEATH(check_block_acts(p, a, "test"), "the memory plan has no softmax_lse buffer");
}

}  // namespace
}  // namespace tera
