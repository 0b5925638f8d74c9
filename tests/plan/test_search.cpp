// The search finds the known best layout on small synthetic cases, and its
// branch and bound returns exactly what pricing every layout would.
#include <gtest/gtest.h>

#include <algorithm>

#include "plan/search.h"

namespace tera {
namespace {

Cluster synthetic(double memory_gb, double intra_gb_s, double nic_gb_s) {
  Cluster c;
  c.stack.activations_16bit = true;  // bf16 as the 16-bit stacks run it (the cases below)
  c.name = "synthetic";
  c.gpu.peak_flops_16 = 100e12;
  c.gpu.peak_flops_32 = 10e12;
  c.gpu.memory_bytes = memory_gb * 1e9;
  c.gpu.hbm_bw = 1e12;
  c.node.gpus = 8;
  c.node.intra_bw = c.node.package_bw = intra_gb_s * 1e9;
  c.node.nics = 8;
  c.node.nic_bw = nic_gb_s * 1e9;
  c.memory.reserved_bytes = 0;
  c.memory.fragmentation = 0;
  return c;
}

ModelConfig model(int64_t layers, int64_t hidden, int64_t heads, int64_t seq) {
  return ModelConfig{.layers = layers, .hidden = hidden, .heads = heads, .seq_len = seq, .vocab = 1024,
                     .ffn_hidden = 0, .vocab_align = 64};
}

TEST(Search, SmallModelWithPlentyOfMemoryIsPureDataParallel) {
  // A small model that fits on one GPU many times over: splitting it (tp, pp)
  // only adds communication and bubbles, recompute only adds work, so the
  // best layout is pure data parallelism without recompute.
  const ModelConfig m = model(4, 256, 4, 128);
  const ModelSpec spec(m);
  const Workload w{m, 64, Precision::bf16};
  const SearchResult r = search_layouts(spec, w, synthetic(80, 100, 100), 8, SearchSpace{}, 3);
  ASSERT_FALSE(r.best.empty());
  const ParallelLayout& l = r.best.front().layout;
  EXPECT_EQ(l.tp, 1);
  EXPECT_EQ(l.pp, 1);
  EXPECT_EQ(l.dp, 8);
  EXPECT_EQ(l.recompute, Recompute::none);
  EXPECT_TRUE(std::is_sorted(r.best.begin(), r.best.end(),
                             [](const Evaluation& a, const Evaluation& b) { return a.step_time_s < b.step_time_s; }));
}

TEST(Search, TightMemoryForcesShardingOrRecompute) {
  // The same model on GPUs too small for the replicated optimizer state: the
  // best layout must shard or split it (and still fit).
  const ModelConfig m = model(8, 512, 8, 256);
  const ModelSpec spec(m);
  const Workload w{m, 64, Precision::bf16};
  const double replicated = 18.0 * static_cast<double>(spec.num_params_alloc());
  const Cluster cl = synthetic(replicated * 0.8 / 1e9, 100, 100);
  const SearchResult r = search_layouts(spec, w, cl, 8, SearchSpace{}, 1);
  ASSERT_FALSE(r.best.empty());
  const Evaluation& e = r.best.front();
  EXPECT_TRUE(e.fits);
  EXPECT_LE(e.memory.total(), cl.gpu.memory_bytes);
  EXPECT_TRUE(e.layout.zero > 0 || e.layout.tp > 1 || e.layout.pp > 1) << layout_string(e.layout);
}

TEST(Search, BranchAndBoundMatchesExhaustivePricing) {
  // Price every fitting layout of a small space by simulation and compare the
  // top 5 with the search's (which simulates only what its bound allows); on
  // a stack with zero-bubble schedules, zb-h1 beside 1F1B wherever pp > 1.
  for (bool zero_bubble : {false, true}) {
    SCOPED_TRACE(zero_bubble ? "zero-bubble stack" : "no zero-bubble schedule");
    const ModelConfig m = model(8, 256, 8, 128);
    const ModelSpec spec(m);
    const Workload w{m, 32, Precision::bf16};
    Cluster cl = synthetic(2, 50, 5);
    cl.stack.zero_bubble = zero_bubble;
    const SearchResult r = search_layouts(spec, w, cl, 8, SearchSpace{}, 5);
    std::vector<double> all;
    int64_t fitting = 0;
    for (int tp : {1, 2, 4, 8}) {
      for (int pp : {1, 2, 4, 8}) {
        if (8 % (tp * pp)) continue;
        const int dp = 8 / (tp * pp);
        for (int mb : {1, 2, 4, 8, 16, 32}) {
          if ((32 / dp) % mb) continue;
          for (int vpp : {1, 2, 4, 8}) {
            for (int zero = 0; zero <= (dp > 1 ? 3 : 0); ++zero) {
              for (int sp = 0; sp <= (tp > 1 ? 1 : 0); ++sp) {
                for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
                  std::vector<ScheduleKind> kinds = {vpp > 1 ? ScheduleKind::interleaved : ScheduleKind::one_f_one_b};
                  if (zero_bubble && pp > 1 && vpp == 1) kinds.push_back(ScheduleKind::zb_h1);
                  for (ScheduleKind kind : kinds) {
                    ParallelLayout l{tp, pp, dp, vpp, mb, zero, sp == 1, rc, kind};
                    if (!check_layout(l, w, 8).is_ok()) continue;
                    const Evaluation e = evaluate_layout(spec, l, w, cl);
                    if (!e.fits) continue;
                    ++fitting;
                    all.push_back(e.step_time_s);
                  }
                }
              }
            }
          }
        }
      }
    }
    std::sort(all.begin(), all.end());
    EXPECT_EQ(r.fitting, fitting);
    EXPECT_LT(r.simulated, r.fitting);  // the bound pruned something
    ASSERT_EQ(r.best.size(), 5u);
    for (size_t i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(r.best[i].step_time_s, all[i]) << i;
  }
}

TEST(Search, ZeroBubbleOnlyWhereTheStackHasIt) {
  // Layouts with a 4-stage pipeline: on a stack with zero-bubble schedules
  // the best runs zb-h1 (the same work with a smaller bubble); never on a
  // stack without them.
  const ModelConfig m = model(16, 1024, 16, 512);
  const ModelSpec spec(m);
  const Workload w{m, 64, Precision::bf16};
  SearchSpace space;
  space.pp = 4;
  space.vpp = 1;
  space.tp = 1;
  space.zero = 0;
  space.recompute = Recompute::none;
  Cluster cl = synthetic(80, 100, 100);
  auto kinds = [&](const SearchResult& r) {
    std::vector<ScheduleKind> k;
    for (const Evaluation& e : r.best) k.push_back(e.layout.schedule);
    return k;
  };
  const SearchResult without = search_layouts(spec, w, cl, 8, space, 20);
  ASSERT_FALSE(without.best.empty());
  for (ScheduleKind k : kinds(without)) EXPECT_EQ(k, ScheduleKind::one_f_one_b);
  cl.stack.zero_bubble = true;
  const SearchResult with = search_layouts(spec, w, cl, 8, space, 20);
  ASSERT_FALSE(with.best.empty());
  EXPECT_EQ(with.best.front().layout.schedule, ScheduleKind::zb_h1) << layout_string(with.best.front().layout);
  EXPECT_EQ(with.enumerated, 2 * without.enumerated);
  EXPECT_LT(with.best.front().step_time_s, without.best.front().step_time_s);
  EXPECT_LT(with.best.front().bubble, without.best.front().bubble);
  // tera's runtime runs it too, never with recomputation (its W reads the saved activations).
  space.tera_runtime = true;
  EXPECT_EQ(search_layouts(spec, w, cl, 8, space, 20).best.front().layout.schedule, ScheduleKind::zb_h1);
  space.recompute = Recompute::full;
  for (ScheduleKind k : kinds(search_layouts(spec, w, cl, 8, space, 20))) EXPECT_NE(k, ScheduleKind::zb_h1);
}

TEST(Search, NothingFitsReportsTheSmallest) {
  const ModelConfig m = model(8, 1024, 8, 256);
  const ModelSpec spec(m);
  const Workload w{m, 8, Precision::bf16};
  const SearchResult r = search_layouts(spec, w, synthetic(0.01, 100, 100), 8, SearchSpace{}, 3);
  EXPECT_TRUE(r.best.empty());
  ASSERT_TRUE(r.smallest.has_value());
  EXPECT_GT(r.smallest_memory.total(), 0.01e9);
  EXPECT_GT(r.enumerated, 0);
  // Fixed choices are honoured.
  SearchSpace only;
  only.tp = 2;
  only.zero = 1;
  const SearchResult f = search_layouts(spec, w, synthetic(80, 100, 100), 8, only, 10);
  ASSERT_FALSE(f.best.empty());
  for (const auto& e : f.best) {
    EXPECT_EQ(e.layout.tp, 2);
    EXPECT_EQ(e.layout.zero, 1);
  }
}

}  // namespace
}  // namespace tera
