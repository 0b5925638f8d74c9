// make_rank_plan (partition/rank_plan.h): the header's worked example by
// hand, and for every rank of a matrix of layouts that the plan's parts agree
// with what is built from them: the parameter table folds to the plan's
// units, the schedule keeps the plan's slots in flight, the named memory plan
// adds up to the plan's bytes (plan_memory asserts it), and the ZeRO sizes
// are those of the table. A RankPlanner reused over layouts gives what a fresh
// one gives.
#include <gtest/gtest.h>

#include "partition/layout_check.h"
#include "partition/rank_plan.h"

namespace tera {
namespace {

ModelConfig model(Arch arch) {
  ModelConfig m{.layers = 12, .hidden = 32, .heads = 4, .seq_len = 16, .vocab = 100, .ffn_hidden = 0, .vocab_align = 8};
  if (arch == Arch::llama) {
    m.arch = Arch::llama;
    m.mlp = MlpKind::gated;
    m.kv_heads = 2;
    m.ffn_hidden = 48;
  }
  return m;
}

void expect_same(const ZeroSizes& a, const ZeroSizes& b, const std::string& where) {
  EXPECT_EQ(a.params, b.params) << where;
  EXPECT_EQ(a.grads, b.grads) << where;
  EXPECT_EQ(a.grad_shard, b.grad_shard) << where;
  EXPECT_EQ(a.staging, b.staging) << where;
  EXPECT_EQ(a.temps, b.temps) << where;
  EXPECT_EQ(a.gathered, b.gathered) << where;
  EXPECT_EQ(a.moments, b.moments) << where;
  EXPECT_EQ(a.shard, b.shard) << where;
}

TEST(RankPlan, WorkedExampleOfTheHeader) {
  // GPT-2 shape, 12 layers, tp 2, pp 2, dp 2, ZeRO 1, global batch 8, micro-batch 2: rank 5.
  const ModelSpec spec(model(Arch::gpt2));
  const ParallelLayout l{.tp = 2, .pp = 2, .dp = 2, .micro_batch = 2, .zero = 1};
  ASSERT_TRUE(check_layout(l, spec.config(), 8, 8).is_ok());
  const ParallelLayout::Coord c = l.coord(5);
  EXPECT_EQ(c.tp, 1);
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.dp, 0);
  const RankPlan p = make_rank_plan(spec, l, c, RankBatch{.global_batch = 8, .seq_len = 16}, RankPrecision{});
  EXPECT_EQ(p.micro_batches, 2);
  ASSERT_EQ(p.stage.chunks.size(), 1u);
  EXPECT_EQ(p.stage.chunks[0].first_layer, 6);
  EXPECT_EQ(p.stage.chunks[0].num_layers, 6);
  EXPECT_TRUE(p.stage.has_head());
  EXPECT_FALSE(p.stage.has_embedding());
  EXPECT_EQ(p.slots, 1);  // 1F1B's last stage
  EXPECT_EQ(p.zero_group, 2);
  EXPECT_EQ(p.unit_align(), 32);
  // wte (the tied copy), io (ln_f), then six identical blocks folded into one.
  ASSERT_EQ(p.units.size(), 3u);
  EXPECT_TRUE(p.units[0].dedicated);
  EXPECT_TRUE(p.units[1].dedicated);
  EXPECT_EQ(p.units[2].repeat, 6);
  EXPECT_EQ(p.unit_count, 8);
  const ParamTable table = p.param_table(spec);
  ASSERT_EQ(table.units().size(), 8u);
  EXPECT_EQ(table.units()[0].name, "wte");
  EXPECT_EQ(table.units()[2].name, "h.6");
  EXPECT_EQ(table.units()[0].size() % 32, 0);
}

TEST(RankPlan, PartsAgreeOnEveryRankOfEveryLayout) {
  int checked = 0;
  for (Arch arch : {Arch::gpt2, Arch::llama}) {
    const ModelSpec spec(model(arch));
    for (int tp : {1, 2, 4}) {
      for (int pp : {1, 2, 4}) {
        for (int dp : {1, 2}) {
          for (int zero = 0; zero <= 3; ++zero) {
            for (int vpp : {1, 3}) {
              for (int cp : {1, 2}) {
                ParallelLayout l{.tp = tp, .pp = pp, .dp = dp, .vpp = vpp, .micro_batch = 2, .zero = zero};
                l.cp = cp;
                l.schedule = vpp > 1 ? ScheduleKind::interleaved : pp > 2 ? ScheduleKind::gpipe : ScheduleKind::one_f_one_b;
                l.sequence_parallel = tp > 1 && zero % 2 == 1;
                l.recompute = zero == 2 ? Recompute::full : Recompute::none;
                const int64_t G = 2 * dp * 4;  // four micro-batches per data-parallel rank
                if (!check_layout(l, spec.config(), G, l.world()).is_ok()) continue;
                RankPlanner planner(spec, RankBatch{.global_batch = G, .seq_len = 16},
                                    RankPrecision{.gemm = zero == 1 ? DType::bf16 : DType::f32});
                for (int rank = 0; rank < l.world(); ++rank) {
                  const std::string where = layout_string(l) + " rank " + std::to_string(rank);
                  const RankPlan p = planner.plan(l, l.coord(rank));
                  const ParamTable table = p.param_table(spec);
                  const Status st = p.check_table(table);
                  EXPECT_TRUE(st.is_ok()) << where << ": " << st.message();
                  EXPECT_EQ(static_cast<int64_t>(table.units().size()), p.unit_count) << where;
                  auto sched = p.schedule();
                  ASSERT_TRUE(sched.ok()) << where;
                  EXPECT_EQ(sched->max_in_flight(p.coord.pp), p.slots) << where;
                  expect_same(zero_sizes(unit_shapes(table), p.zero_group, p.zero_rank, zero), p.zero, where);
                  EXPECT_EQ(p.memory_plan(spec).report().bytes, p.bytes.bytes) << where;
                  // The memo: a fresh planner gives the same bytes.
                  const RankPlan fresh = make_rank_plan(spec, l, l.coord(rank), planner.batch(), planner.precision());
                  EXPECT_EQ(fresh.bytes.bytes, p.bytes.bytes) << where;
                  ++checked;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

TEST(RankPlan, ZbH1HoldsOneFOneBsFirstStageCountOnEveryStage) {
  // A micro-batch's activations stay until its W: every stage keeps
  // min(pp, M) slots (1F1B: pp - stage), as many as 1F1B's first stage; each
  // slot also holds the blocks' kept output gradients (the dw_ tensors).
  const ModelSpec spec(model(Arch::gpt2));
  for (int pp : {2, 3}) {
    for (int64_t M : {1, 2, 4, 8}) {
      ParallelLayout zb{.tp = 1, .pp = pp, .dp = 1, .micro_batch = 1};
      zb.schedule = ScheduleKind::zb_h1;
      ParallelLayout base = zb;
      base.schedule = ScheduleKind::one_f_one_b;
      const RankBatch batch{.global_batch = M, .seq_len = 16};
      for (int s = 0; s < pp; ++s) {
        const std::string where = layout_string(zb) + " M " + std::to_string(M) + " stage " + std::to_string(s);
        const RankPlan z = make_rank_plan(spec, zb, zb.coord(s), batch, RankPrecision{});
        const RankPlan b = make_rank_plan(spec, base, base.coord(s), batch, RankPrecision{});
        EXPECT_EQ(z.slots, std::min<int64_t>(pp, M)) << where;
        EXPECT_EQ(z.schedule()->max_in_flight(s), z.slots) << where;
        EXPECT_EQ(b.slots, std::min<int64_t>(pp - s, M)) << where;
        // Each slot also keeps the blocks' output gradients until W.
        EXPECT_GT(z.bytes.bytes, b.bytes.bytes) << where;
      }
    }
  }
}

TEST(RankPlan, ATableOfAnotherShapeIsNamed) {
  const ModelSpec spec(model(Arch::gpt2));
  const ParallelLayout l{.tp = 1, .pp = 2, .dp = 1};
  const RankPlan p = make_rank_plan(spec, l, l.coord(0), RankBatch{.global_batch = 4, .seq_len = 16}, RankPrecision{});
  const ParamTable other(spec, 16, 1, 0, make_stage_plan({5, 7}, 2, 0));  // 5 layers, not 6
  const Status st = p.check_table(other);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("differs from the rank plan"), std::string::npos) << st.message();
}

TEST(RankPlan, FoldMergesOnlyConsecutiveEqualUnits) {
  const UnitShape a{.floats = 32, .data = {{0, 20}}}, b{.floats = 64, .data = {{0, 50}}};
  const std::vector<UnitShape> folded = fold_units({a, a, b, b, b, a});
  ASSERT_EQ(folded.size(), 3u);
  EXPECT_EQ(folded[0].repeat, 2);
  EXPECT_EQ(folded[1].repeat, 3);
  EXPECT_EQ(folded[2].repeat, 1);
}

TEST(RankPlan, ResidentPlanIsTheOneRankLayout) {
  const ModelSpec spec(model(Arch::llama));
  const ParamTable table(spec, 16, 2, 1);
  const RankPlan r = resident_rank_plan(spec, table, 3, ActivationOptions{.tp = 2, .sequence_parallel = true});
  ParallelLayout l{.tp = 2, .micro_batch = 3};
  l.sequence_parallel = true;
  const RankPlan p = make_rank_plan(spec, l, ParallelLayout::Coord{.tp = 1}, RankBatch{.global_batch = 3, .seq_len = 16},
                                    RankPrecision{});
  EXPECT_EQ(r.bytes.bytes, p.bytes.bytes);
  EXPECT_EQ(r.slots, 1);
  EXPECT_TRUE(r.check_table(table).is_ok());
}

}  // namespace
}  // namespace tera
