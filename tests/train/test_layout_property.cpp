// Every tensor-parallel layout check_layout accepts runs (issue 35 row 11):
// over odd shapes (GPT-2 and Llama, heads 1..12, grouped key/value heads
// split or replicated, head sizes 2 and 6, the MLP width 4C or an odd one,
// sequence parallelism on and off) and every tp 1..12, a layout the check
// accepts trains a step on the in-process world to the single-rank loss and
// gradient norm, and one it refuses names parallel.tp and the factor.
#include <gtest/gtest.h>

#include <omp.h>

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "comm/groups.h"
#include "comm/in_process_comm.h"
#include "partition/layout_check.h"
#include "train/engine.h"

namespace tera {
namespace {

struct Step {
  double loss = 0, grad_norm = 0;
};

RunConfig shape(Arch arch, int64_t heads, int64_t kv, int64_t head_size, int64_t ffn) {
  RunConfig c;
  c.model = ModelConfig{.layers = 1, .hidden = heads * head_size, .heads = heads, .seq_len = 12, .vocab = 37,
                        .ffn_hidden = ffn, .vocab_align = 4};
  c.model.kv_heads = kv;
  c.model.arch = arch;
  if (arch == Arch::llama) c.model.mlp = MlpKind::gated;
  c.parallel.micro_batch = 2;
  c.train.global_batch = 2;
  c.train.seed = 11;
  return c;
}

// One training step of `cfg` on tp ranks (dp = pp = 1): rank 0's loss and norm.
Step one_step(RunConfig cfg, int tp, bool sp) {
  cfg.parallel.tp = tp;
  cfg.parallel.dp = 1;
  cfg.parallel.sequence_parallel = sp;
  const ParallelLayout layout = cfg.parallel;
  const ModelSpec spec(cfg.model);
  Step out;
  std::mutex mu;
  InProcessWorld::run(tp, [&](Communicator& world) {
    omp_set_num_threads(1);
    ProcessGroups groups(world, layout, static_cast<int>(spec.kv_replicas(tp)));
    Engine engine(cfg, cpu_backend(), groups.groups());
    engine.init_parameters(cfg.train.seed);
    const StepResult r = engine.train_step(0, 1e-3f, [&](int64_t first, int64_t count, int32_t* tok, int32_t* tgt) {
      for (int64_t i = 0; i < count * cfg.model.seq_len; ++i) {
        tok[i] = static_cast<int32_t>((first * 13 + i * 5) % cfg.model.vocab);
        tgt[i] = static_cast<int32_t>((first * 13 + i * 5 + 3) % cfg.model.vocab);
      }
    });
    if (world.rank() == 0) {
      std::lock_guard<std::mutex> lock(mu);
      out = {r.loss, r.grad_norm};
    }
  });
  return out;
}

TEST(LayoutProperty, EveryAcceptedTensorSplitRunsAndEveryRefusalNamesItsFactor) {
  int accepted = 0, refused = 0, replicated = 0;
  for (Arch arch : {Arch::gpt2, Arch::llama}) {
    for (int64_t heads : {1, 2, 3, 4, 6, 8, 12}) {
      for (int64_t kv = 1; kv <= heads; ++kv) {
        if (heads % kv != 0 || (kv != heads && kv != 1 && kv * 2 != heads && kv * 3 != heads)) continue;
        for (int64_t hs : {2, 6}) {
          const int64_t C = heads * hs;
          for (int64_t ffn : {int64_t{0}, 3 * C + hs}) {  // 4C, or a width most tp do not divide
            const RunConfig cfg = shape(arch, heads, kv, hs, ffn);
            if (!validate_model_config(cfg.model).is_ok()) continue;
            const Step base = one_step(cfg, 1, false);
            for (int tp = 2; tp <= 12; ++tp) {
              for (bool sp : {false, true}) {
                ParallelLayout l = cfg.parallel;
                l.tp = tp;
                l.dp = 1;
                l.sequence_parallel = sp;
                const std::string what = fmt::format("{} heads {} kv {} hidden {} ffn {} tp {} sp {}", arch_name(arch),
                                                     heads, kv, C, cfg.model.ffn(), tp, sp);
                const Status s = check_layout(l, cfg.model, cfg.train.global_batch, tp);
                if (!s.is_ok()) {
                  ++refused;
                  EXPECT_NE(s.message().find("parallel.tp = " + std::to_string(tp)), std::string::npos)
                      << what << ": " << s.message();
                  continue;
                }
                ++accepted;
                replicated += ModelSpec(cfg.model).kv_replicas(tp) > 1;
                const Step got = one_step(cfg, tp, sp);
                EXPECT_NEAR(got.loss, base.loss, 1e-5 * std::abs(base.loss)) << what;
                EXPECT_NEAR(got.grad_norm, base.grad_norm, 1e-4 * base.grad_norm) << what;
              }
            }
          }
        }
      }
    }
  }
  std::printf("layouts accepted and run: %d (%d with key/value heads replicated), refused: %d\n", accepted, replicated,
              refused);
  EXPECT_GT(accepted, 100);
  EXPECT_GT(replicated, 10);
  EXPECT_GT(refused, 100);
}

}  // namespace
}  // namespace tera
