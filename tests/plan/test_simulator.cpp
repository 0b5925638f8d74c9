// The step simulator on hand-computable costs: the bubble must come out of
// the schedule (compute-only 1F1B and GPipe give (M + S - 1)(F + B), i.e. a
// bubble of (S-1)/(M+S-1); interleaving with v chunks shrinks it to
// (S-1)/v chunk-times), messages add to the fill, and the gradient reduction
// hides behind the last backward except its last bucket. ZB-H1 at
// T_F = T_B = T_W (Qi et al. 2024, Sec. 2.1): (S-1)(T_F + T_B - T_W), a third
// of 1F1B's (S-1)(T_F + T_B + T_W).
#include <gtest/gtest.h>

#include "plan/simulator.h"

namespace tera {
namespace {

StepCosts uniform_costs(int S, int chunks, double F, double B, double p2p) {
  StepCosts c;
  for (int v = 0; v < S * chunks; ++v) {
    PassCost f, b;
    f.gemm = F;
    b.gemm = B;
    c.fwd.push_back(f);
    c.bwd.push_back(b);
  }
  c.p2p = p2p;
  c.dp_reduce.assign(static_cast<size_t>(S), 0.0);
  c.dp_last_bucket.assign(static_cast<size_t>(S), 0.0);
  c.optimizer.assign(static_cast<size_t>(S), 0.0);
  return c;
}

// The same with the backward split as zb-h1 runs it: B = Bi, W = Bw, and
// the fused backward (what the other schedules run) their sum.
StepCosts split_costs(int S, double F, double Bi, double Bw, double p2p) {
  StepCosts c = uniform_costs(S, 1, F, Bi + Bw, p2p);
  for (int v = 0; v < S; ++v) {
    PassCost bi, bw;
    bi.gemm = Bi;
    bw.gemm = Bw;
    c.bwd_input.push_back(bi);
    c.bwd_weight.push_back(bw);
  }
  return c;
}

TEST(Simulator, OneFOneBAndGpipeBubble) {
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    for (int S : {1, 2, 4, 8}) {
      for (int M : {1, 3, 8, 16}) {
        const Schedule sch = make_schedule(kind, S, M, 1).value();
        const SimResult r = simulate_step(sch, uniform_costs(S, 1, 1.0, 2.0, 0), SimOptions{});
        EXPECT_DOUBLE_EQ(r.step_time, (M + S - 1) * 3.0) << schedule_kind_name(kind) << " S=" << S << " M=" << M;
        // Stage 0 waits exactly the bubble: (S-1) * (F + B).
        EXPECT_DOUBLE_EQ(r.stages[0].wait, (S - 1) * 3.0);
        EXPECT_DOUBLE_EQ(r.stages[0].wait / r.step_time, (S - 1.0) / (M + S - 1.0));
      }
    }
  }
}

TEST(Simulator, ZbH1BubbleIsAThirdOfOneFOneBs) {
  // Compute only, F = B = W = 1 (1F1B's fused backward 2). With M >= S every
  // stage of ZB-H1 ends at 3M + (S-1): its bubble, S - 1, is a third of
  // 1F1B's 3(S - 1), and stage 0 waits exactly that.
  for (int S : {2, 3, 4, 8}) {
    for (int M : {S, S + 1, 2 * S, 4 * S}) {
      const StepCosts c = split_costs(S, 1.0, 1.0, 1.0, 0);
      const SimResult zb = simulate_step(make_schedule(ScheduleKind::zb_h1, S, M, 1).value(), c, SimOptions{});
      const SimResult base = simulate_step(make_schedule(ScheduleKind::one_f_one_b, S, M, 1).value(), c, SimOptions{});
      EXPECT_DOUBLE_EQ(zb.step_time, 3.0 * M + (S - 1)) << "S=" << S << " M=" << M;
      EXPECT_DOUBLE_EQ(base.step_time, 3.0 * (M + S - 1));
      for (const StageTimeline& st : zb.stages) EXPECT_DOUBLE_EQ(st.end, zb.step_time);
      EXPECT_DOUBLE_EQ(zb.stages[0].wait, S - 1.0);
      EXPECT_DOUBLE_EQ(3 * (zb.step_time - 3.0 * M), base.step_time - 3.0 * M);  // a third of the bubble
    }
    // One micro-batch: F down, B back up, then stage 0's W: 2S + 1 (1F1B: 3S).
    const StepCosts c = split_costs(S, 1.0, 1.0, 1.0, 0);
    EXPECT_DOUBLE_EQ(simulate_step(make_schedule(ScheduleKind::zb_h1, S, 1, 1).value(), c, SimOptions{}).step_time,
                     2.0 * S + 1);
  }
  // Unequal passes, M >= S: the bubble is (S - 1)(F + B - W) (the paper's, for W <= F + B).
  const StepCosts u = split_costs(4, 1.0, 1.5, 0.5, 0);
  EXPECT_DOUBLE_EQ(simulate_step(make_schedule(ScheduleKind::zb_h1, 4, 8, 1).value(), u, SimOptions{}).step_time,
                   8 * 3.0 + 3 * (1.0 + 1.5 - 0.5));
}

TEST(Simulator, ZbH1WithMessagesHandTraced) {
  // S = 2, M = 2, F = B = W = 1, messages 0.25. Stage 1: F0 [1.25, 2.25],
  // B0 [2.25, 3.25] (gradient at stage 0 at 3.5), F1 [3.25, 4.25] (its
  // activation came at 2.25), B1 [4.25, 5.25] (gradient at 5.5), W0, W1
  // [5.25, 7.25]. Stage 0: F0, F1 [0, 2], waits to 3.5, B0 W0 [3.5, 5.5], B1
  // W1 [5.5, 7.5]. 1F1B with the fused 2: 9.5 (stage 0's B1 at [7.5, 9.5]).
  const StepCosts c = split_costs(2, 1.0, 1.0, 1.0, 0.25);
  const SimResult zb = simulate_step(make_schedule(ScheduleKind::zb_h1, 2, 2, 1).value(), c, SimOptions{});
  EXPECT_DOUBLE_EQ(zb.step_time, 7.5);
  EXPECT_EQ(zb.critical_stage, 0);
  EXPECT_DOUBLE_EQ(zb.stages[0].wait, 1.5);
  EXPECT_DOUBLE_EQ(zb.stages[1].end, 7.25);
  EXPECT_DOUBLE_EQ(zb.stages[1].busy.gemm, 6.0);
  EXPECT_DOUBLE_EQ(simulate_step(make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1).value(), c, SimOptions{}).step_time,
                   9.5);
}

TEST(Simulator, ZbH1ReductionHidesBehindTheLastW) {
  // One stage, 2 micro-batches, F = B = W = 1: F0 B0 W0 F1 B1 W1, the last W
  // at [5, 6]. The weight gradients are done only with it, so a reduction of
  // 3 (last bucket 0.5) runs from 5: max(5 + 3, 6 + 0.5) + 0.25 optimizer.
  // 1F1B's fused backward [4, 6] hides more: max(4 + 3, 6.5) + 0.25.
  StepCosts c = split_costs(1, 1.0, 1.0, 1.0, 0);
  c.dp_reduce = {3};
  c.dp_last_bucket = {0.5};
  c.optimizer = {0.25};
  EXPECT_DOUBLE_EQ(simulate_step(make_schedule(ScheduleKind::zb_h1, 1, 2, 1).value(), c, SimOptions{}).step_time, 8.25);
  EXPECT_DOUBLE_EQ(simulate_step(make_schedule(ScheduleKind::one_f_one_b, 1, 2, 1).value(), c, SimOptions{}).step_time,
                   7.25);
}

TEST(Simulator, InterleavedShrinksTheBubble) {
  // 4 stages, 8 micro-batches, 2 chunks of half the layers each (F = 0.5,
  // B = 1 per chunk): 16 chunk-units of 1.5 per stage plus a fill/drain of
  // (S-1) chunk-times = 24 + 4.5 = 28.5, against 1F1B's (8+3) * 3 = 33.
  const Schedule sch = make_schedule(ScheduleKind::interleaved, 4, 8, 2).value();
  const SimResult r = simulate_step(sch, uniform_costs(4, 2, 0.5, 1.0, 0), SimOptions{});
  EXPECT_DOUBLE_EQ(r.step_time, 28.5);
}

TEST(Simulator, MessagesLengthenTheCriticalPath) {
  // 1F1B, S = 3, M = 4, F = 1, B = 2, each message 0.25 (18 without messages).
  // Hand trace: stage 2 runs F0 [2.5, 3.5], B0 [3.5, 5.5], F1 [5.5, 6.5],
  // B1 [6.5, 8.5], then waits for stage 1's F2 (its B0 started at 5.75 when
  // stage 2's gradient arrived): F2 [9, 10], B2 [10, 12], F3 [12.5, 13.5],
  // B3 [13.5, 15.5]; stage 1 runs B3 [15.75, 17.75]; stage 0 B3 [18, 20].
  const Schedule sch = make_schedule(ScheduleKind::one_f_one_b, 3, 4, 1).value();
  const SimResult r = simulate_step(sch, uniform_costs(3, 1, 1.0, 2.0, 0.25), SimOptions{});
  EXPECT_DOUBLE_EQ(r.step_time, 20.0);
  EXPECT_EQ(r.critical_stage, 0);
  EXPECT_DOUBLE_EQ(r.stages[0].wait, 20.0 - 4 * 3.0);
}

TEST(Simulator, BlockingSendsWaitForTheTransfer) {
  // 1F1B, S = 2, M = 2, F = 1, B = 2, messages 0.5, senders blocked (Megatron's
  // synchronous p2p). Stage 0: F0 [0,1] send [1,1.5], F1 [1.5,2.5] send
  // [2.5,3]; stage 1: F0 [1.5,2.5], B0 [2.5,4.5] send [4.5,5], F1 [5,6],
  // B1 [6,8] send [8,8.5]; stage 0: B0 [5,7], B1 [8.5,10.5]. Non-blocking: 10.
  const Schedule sch = make_schedule(ScheduleKind::one_f_one_b, 2, 2, 1).value();
  const StepCosts c = uniform_costs(2, 1, 1.0, 2.0, 0.5);
  const SimResult blocking = simulate_step(sch, c, SimOptions{true, false, 0});
  EXPECT_DOUBLE_EQ(blocking.step_time, 10.5);
  EXPECT_DOUBLE_EQ(blocking.stages[0].p2p, 1.0);
  EXPECT_DOUBLE_EQ(simulate_step(sch, c, SimOptions{}).step_time, 10.0);
}

TEST(Simulator, GradientReductionHidesBehindTheLastBackward) {
  // One stage, 2 micro-batches (F = 1, B = 2), reduction 1.5 with a 0.5 last
  // bucket, optimizer 0.25. Overlapped: the reduction starts with the last
  // backward (t = 4) and ends at max(4 + 1.5, 6 + 0.5) = 6.5; then 0.25.
  // Not overlapped: 6 + 1.5 + 0.25.
  const Schedule sch = make_schedule(ScheduleKind::one_f_one_b, 1, 2, 1).value();
  StepCosts c = uniform_costs(1, 1, 1.0, 2.0, 0);
  c.dp_reduce = {1.5};
  c.dp_last_bucket = {0.5};
  c.optimizer = {0.25};
  EXPECT_DOUBLE_EQ(simulate_step(sch, c, SimOptions{true, true, 0}).step_time, 6.75);
  EXPECT_DOUBLE_EQ(simulate_step(sch, c, SimOptions{false, true, 0}).step_time, 7.75);
  // With overlap_loss 0.2 the 1.5 s that ran beside the backward cost 0.3 more.
  EXPECT_DOUBLE_EQ(simulate_step(sch, c, SimOptions{true, true, 0.2}).step_time, 6.75 + 0.2 * 1.5);
  // A reduction longer than the backward shows: max(4 + 5, 6 + 0.5) + 0.25.
  c.dp_reduce = {5};
  EXPECT_DOUBLE_EQ(simulate_step(sch, c, SimOptions{true, true, 0}).step_time, 9.25);
}

TEST(Simulator, LowerBoundNeverExceedsTheSimulation) {
  // The search skips layouts by this bound, so it must hold on every schedule,
  // including unbalanced stages (a heavy last stage) and messages.
  for (ScheduleKind kind : {ScheduleKind::one_f_one_b, ScheduleKind::interleaved, ScheduleKind::zb_h1}) {
    for (int S : {2, 4, 6}) {
      for (int M : {2, 6, 12, 24}) {
        const int C = kind == ScheduleKind::interleaved ? 2 : 1;
        auto sch = make_schedule(kind, S, M, C);
        if (!sch.ok()) continue;
        StepCosts c = kind == ScheduleKind::zb_h1 ? split_costs(S, 1.0, 1.2, 0.8, 0.1) : uniform_costs(S, C, 1.0, 2.0, 0.1);
        c.fwd.back().gemm += 0.7;
        c.bwd.back().gemm += 1.1;
        if (kind == ScheduleKind::zb_h1) {
          c.bwd_input.back().gemm += 0.6;
          c.bwd_weight.back().gemm += 0.5;
        }
        c.dp_reduce.assign(static_cast<size_t>(S), 3.0);
        c.dp_last_bucket.assign(static_cast<size_t>(S), 0.4);
        c.optimizer.assign(static_cast<size_t>(S), 0.2);
        for (bool blocking : {false, true}) {
          const double sim = simulate_step(*sch, c, SimOptions{true, !blocking, 0.1}).step_time;
          const double lb = step_time_lower_bound(c, S, C, M, blocking, splits_backward(kind));
          EXPECT_LE(lb, sim + 1e-12) << schedule_kind_name(kind) << " S=" << S << " M=" << M;
          if (M >= 6) {
            EXPECT_GT(lb, 0.8 * sim);  // and is close enough to prune with
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tera
