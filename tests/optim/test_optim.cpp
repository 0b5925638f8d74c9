// LR schedule endpoints and shape; clip coefficient; AdamW weight-decay mask.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/backend.h"
#include "model/gpt.h"
#include "optim/adamw.h"
#include "optim/grad_clip.h"
#include "optim/lr_schedule.h"

namespace tera {
namespace {

TEST(LrSchedule, WarmupThenCosineToFloor) {
  // 13 steps, 4 of warmup: the cosine spans steps 4..12, its midpoint is step 8.
  LrSchedule s{.lr = 1.0f, .min_lr = 0.1f, .warmup = 4, .total = 13};
  EXPECT_FLOAT_EQ(s.at(0), 0.25f);
  EXPECT_FLOAT_EQ(s.at(3), 1.0f);
  EXPECT_FLOAT_EQ(s.at(4), 1.0f);  // cosine starts at the peak
  EXPECT_FLOAT_EQ(s.at(8), 0.55f);
  EXPECT_FLOAT_EQ(s.at(12), 0.1f);  // last step at the floor
  EXPECT_FLOAT_EQ(s.at(100), 0.1f);
  for (int64_t i = 4; i < 12; ++i) EXPECT_GT(s.at(i), s.at(i + 1));
  LrSchedule no_warmup{.lr = 2.0f, .min_lr = 0.0f, .warmup = 0, .total = 3};
  EXPECT_FLOAT_EQ(no_warmup.at(0), 2.0f);
  EXPECT_FLOAT_EQ(no_warmup.at(1), 1.0f);
  EXPECT_FLOAT_EQ(no_warmup.at(2), 0.0f);
}

TEST(GradClip, CoefficientMatchesTorch) {
  EXPECT_FLOAT_EQ(clip_coefficient(0.5, 1.0f), 1.0f);
  EXPECT_FLOAT_EQ(clip_coefficient(4.0, 1.0f), static_cast<float>(1.0 / (4.0 + 1e-6)));
  EXPECT_FLOAT_EQ(clip_coefficient(4.0, 0.0f), 1.0f);  // disabled
  EXPECT_FLOAT_EQ(clip_coefficient(NAN, 1.0f), 1.0f);
}

TEST(AdamW, DecayOnlyOnMatricesAndEmbeddings) {
  // With zero gradients the Adam term vanishes (m = v = 0, update 0), so each
  // parameter moves only by its decay: p <- p (1 - lr wd) on decayed tensors.
  ModelConfig cfg{.layers = 1, .hidden = 8, .heads = 2, .seq_len = 4, .vocab = 16, .ffn_hidden = 0, .vocab_align = 16};
  Gpt model(ModelSpec(cfg), cpu_backend(), 1);
  model.init_parameters(3);
  model.zero_grads();
  std::vector<float> before(model.params(), model.params() + model.table().total_floats());
  // The optimizer class of a one-process plan (a model alone holds none).
  RankMemory optimizer_memory(cpu_backend(), resident_memory_plan(model.spec(), model.table(), 1));
  AdamW opt(AdamWConfig{.weight_decay = 0.5f}, AdamW::segments_of(model.table()), cpu_backend(), optimizer_memory);
  std::vector<AdamW::Span> spans;
  for (const auto& s : opt.segments()) spans.push_back({model.params() + s.begin, model.grads() + s.begin});
  opt.step(spans, 0.1f, 1.0f, 1);
  model.table().for_each([&](const ParamEntry& e) {
    const bool decays = e.info->shape.size() == 2;
    EXPECT_EQ(e.info->weight_decay, decays) << e.info->name;
    for (int64_t i = 0; i < e.count; ++i) {
      const float want = decays ? before[e.offset + i] * (1 - 0.05f) : before[e.offset + i];
      ASSERT_FLOAT_EQ(model.params()[e.offset + i], want) << e.info->name;
    }
  });
}

}  // namespace
}  // namespace tera
