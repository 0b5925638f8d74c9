// A finite-difference gradient check through a tensor-parallel (tp = 2) model
// on the in-process world, with and without sequence parallelism: for a parameter
// tensor split across the two ranks (and for a replicated LayerNorm), the
// directional derivative of the mean loss along the gradient direction
// d = g / |g| equals |g|, where g is assembled from both ranks' shards.
// Same error analysis as tests/model/test_gpt_gradcheck.cpp (fp32, h = 1e-2):
// 2e-4 + 2e-2 |g|.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <vector>

#include "comm/in_process_comm.h"
#include "core/rng.h"
#include "model/gpt.h"
#include "parallel/tp_comm.h"

namespace tera {
namespace {

void check(bool sp) {
  const ModelConfig cfg{.layers = 2, .hidden = 16, .heads = 4, .seq_len = 8, .vocab = 37, .ffn_hidden = 0,
                        .vocab_align = 8};
  const int64_t B = 2, T = cfg.seq_len;
  InProcessWorld::run(2, [&](Communicator& c) {
    omp_set_num_threads(1);
    const ModelSpec spec(cfg);
    ParamTable table(spec, 16, 2, c.rank());
    const RankPlan plan = resident_rank_plan(spec, table, B, ActivationOptions{.tp = 2, .sequence_parallel = sp});
    RankMemory rank_memory(cpu_backend(), plan.memory_plan(spec));
    LocalParamMemory mem(table, cpu_backend(), rank_memory);
    CommTensorParallel tp(c, sp);
    SingleRankContextParallel cp;
    Gpt model(spec, cpu_backend(), table, mem, tp, cp, plan, rank_memory);
    init_parameters(table, mem.params(), 42);
    // Larger weights than GPT-2's init so every gradient is well above the noise floor.
    table.for_each([&](const ParamEntry& e) {
      const PhiloxKey key = philox_key(9, e.info->name);
      for (int64_t i = 0; i < e.count; ++i) {
        const int64_t g = table.global_index(e, i);
        if (g >= 0) mem.params()[e.offset + i] += 0.2f * philox_normal(key, static_cast<uint64_t>(g));
      }
    });
    std::vector<int32_t> tok(B * T), tgt(B * T);
    const PhiloxKey dk = philox_key(3, "tokens");
    for (int64_t i = 0; i < B * T; ++i) {
      tok[i] = static_cast<int32_t>(philox_below(dk, 2 * i, cfg.vocab));
      tgt[i] = static_cast<int32_t>(philox_below(dk, 2 * i + 1, cfg.vocab));
    }
    mem.zero_grads();
    model.forward_backward(tok.data(), tgt.data(), B, T, 1.0f / static_cast<float>(B * T));
    auto mean_loss = [&] { return model.forward_loss(tok.data(), tgt.data(), B, T) / static_cast<double>(B * T); };
    // Sequence parallelism leaves LayerNorm gradients partial per rank: sum them.
    if (sp) {
      for (const auto& u : table.units()) c.all_reduce_sum(mem.grad_base() + u.begin, u.sp_partial_end - u.begin);
    }
    for (const char* name : {"h.1.mlp.c_fc.weight", "h.0.attn.c_proj.weight", "h.0.attn.c_attn.weight",
                             "wte.weight", "h.1.ln_2.weight"}) {
      const ParamEntry& e = table.at(name);
      const bool split = e.tp_split();
      double local2 = 0;
      for (int64_t i = 0; i < e.count; ++i) local2 += static_cast<double>(mem.grad_base()[e.offset + i]) * mem.grad_base()[e.offset + i];
      const double norm = std::sqrt(split ? c.all_reduce_sum(local2) : local2);
      ASSERT_GT(norm, 1e-3) << name;
      std::vector<float> saved(mem.params() + e.offset, mem.params() + e.offset + e.count);
      auto shift = [&](double h) {
        for (int64_t i = 0; i < e.count; ++i) {
          mem.params()[e.offset + i] = static_cast<float>(saved[i] + h * mem.grad_base()[e.offset + i] / norm);
        }
      };
      const double h = 1e-2;
      shift(h);
      const double lp = mean_loss();
      shift(-h);
      const double lm = mean_loss();
      shift(0);
      EXPECT_NEAR((lp - lm) / (2 * h), norm, 2e-4 + 2e-2 * norm) << name << (sp ? " (sp)" : "");
    }
  });
}

TEST(TensorParallelGradCheck, Tp2) { check(false); }
TEST(TensorParallelGradCheck, Tp2SequenceParallel) { check(true); }

}  // namespace
}  // namespace tera
