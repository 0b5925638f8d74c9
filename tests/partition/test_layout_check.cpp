// check_layout (partition/layout_check.h): the one layout check of config,
// trainer, planner and ckpt reshard; every failing factor is named.
#include <gtest/gtest.h>

#include "partition/layout_check.h"

namespace tera {
namespace {

ModelConfig small_model() {
  ModelConfig m;
  m.layers = 5;
  m.hidden = 32;
  m.heads = 4;
  m.seq_len = 16;
  m.vocab = 100;
  return m;
}

bool has(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

TEST(LayoutCheck, WorldMismatchNamesEveryFactor) {
  const ModelConfig m = small_model();
  const Status s = check_layout(ParallelLayout{.tp = 2, .pp = 4, .dp = 3}, m, 0, 16);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(has(s, "parallel.tp (2) * parallel.pp (4) * parallel.dp (3) = 24 != world size 16")) << s.message();
  const Status d = check_layout(ParallelLayout{.tp = 2, .pp = 2, .dp = 0}, m, 0, 10);
  EXPECT_TRUE(has(d, "world size 10 is not divisible by parallel.tp (2) * parallel.pp (2) = 4")) << d.message();
  EXPECT_TRUE(check_layout(ParallelLayout{.tp = 2, .pp = 2, .dp = 0}, m, 0, 12).is_ok());
  EXPECT_FALSE(check_layout(ParallelLayout{.tp = 0, .pp = 1, .dp = 1}, m, 0, 1).is_ok());
}

TEST(LayoutCheck, ListsEveryFailingCheck) {
  ModelConfig m = small_model();
  m.ffn_hidden = 100;
  ParallelLayout l{.tp = 3, .pp = 1, .dp = 1};
  l.vpp = 2;  // without the interleaved schedule
  const Status s = check_layout(l, m, 0, 0);
  ASSERT_FALSE(s.is_ok());
  EXPECT_TRUE(has(s, "parallel.tp = 3 does not divide model.heads = 4, model.hidden = 32 or the MLP width "
                     "(model.ffn_hidden, or 4 * hidden) = 100; choose a tp that divides them")) << s.message();
  EXPECT_TRUE(has(s, "parallel.vpp = 2 needs parallel.schedule = \"interleaved\"")) << s.message();
}

TEST(LayoutCheck, BatchAgainstMicroBatchAndDp) {
  const ModelConfig m = small_model();
  ParallelLayout l{.tp = 1, .pp = 1, .dp = 0};
  l.micro_batch = 2;
  // World unknown: only the micro-batch divides.
  EXPECT_TRUE(has(check_layout(l, m, 5, 0), "train.global_batch = 5 is not a multiple of train.micro_batch = 2"));
  EXPECT_TRUE(check_layout(l, m, 6, 0).is_ok());
  // Three ranks derive dp = 3: 6 sequences are one micro-batch of 2 per rank; 8 are not whole micro-batches.
  EXPECT_TRUE(check_layout(l, m, 6, 3).is_ok());
  EXPECT_TRUE(has(check_layout(l, m, 8, 3), "train.micro_batch (2) x data-parallel degree (3) = 6"));
}

TEST(LayoutCheck, UnevenInterleavedLayersRunAsTheRuntimeSplitsThem) {
  // 5 layers over pp 2 x vpp 2: the runtime's balanced split is 2/1/1/1.
  const ModelConfig m = small_model();
  ParallelLayout l{.tp = 1, .pp = 2, .dp = 1};
  l.vpp = 2;
  l.schedule = ScheduleKind::interleaved;
  EXPECT_TRUE(check_layout(l, m, 4, 2).is_ok());
  EXPECT_EQ(virtual_stage_layers(l, m.layers), (std::vector<int64_t>{2, 1, 1, 1}));
  // The interleaved schedule needs micro-batches in multiples of pp.
  EXPECT_TRUE(has(check_layout(l, m, 3, 2), "micro_batches % stages == 0"));
}

TEST(LayoutCheck, StageLayersAreHonouredAndChecked) {
  const ModelConfig m = small_model();
  ParallelLayout l{.tp = 1, .pp = 2, .dp = 1};
  l.stage_layers = {1, 4};
  EXPECT_TRUE(check_layout(l, m, 2, 2).is_ok());
  EXPECT_EQ(layers_in_virtual_stage(l, m.layers, 0), 1);
  EXPECT_EQ(layers_in_virtual_stage(l, m.layers, 1), 4);
  l.stage_layers = {1, 3};
  EXPECT_TRUE(has(check_layout(l, m, 2, 2), "parallel.stage_layers sums to 4 but model.layers = 5"));
  l.stage_layers = {1, 2, 2};
  EXPECT_TRUE(has(check_layout(l, m, 2, 2), "parallel.stage_layers has 3 entries"));
}

TEST(LayoutCheck, SequenceAndContextParallelSplitTheSequence) {
  ModelConfig m = small_model();
  m.seq_len = 18;
  ParallelLayout l{.tp = 4, .pp = 1, .dp = 1};
  l.sequence_parallel = true;
  EXPECT_TRUE(has(check_layout(l, m, 0, 0), "parallel.sequence_parallel = true needs model.seq_len = 18 divisible by parallel.tp = 4"));
  ParallelLayout c{.tp = 1, .pp = 1, .dp = 1};
  c.cp = 2;
  EXPECT_TRUE(has(check_layout(c, m, 0, 0), "parallel.cp = 2 with model.seq_len = 18: context parallelism cuts each sequence into 2 x cp = 4 equal chunks, so the sequence length must be a multiple of 4"));
  m.seq_len = 16;
  EXPECT_TRUE(check_layout(c, m, 0, 2).is_ok());
}

}  // namespace
}  // namespace tera
