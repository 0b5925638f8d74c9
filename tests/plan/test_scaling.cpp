// `tera simulate` end to end below the CLI: on a synthetic cluster with round
// numbers and free communication, the simulated step equals a hand-computed
// value for GPipe, 1F1B and interleaved schedules; weak scaling with free
// communication is exactly 100%; the failure model matches its formulas; the
// trace and the SVG are well formed (their parsers run in test_simulate_cli.py).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "plan/scaling.h"
#include "plan/scaling_plot.h"
#include "plan/sim_trace.h"

namespace tera {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The model: h = 64, one head (head size 64), T = 64, vocab 64 (no padding),
// 4 layers. Per micro-batch of one sequence (N = 64 tokens):
//   block GEMMs  2 N (3h^2 + h^2 + 4h^2 + 4h^2) = 2*64*12*4096 = 6,291,456
//   attention    2 T^2 hs (scores) + 2 T^2 hs (context)       = 1,048,576
//   block forward                                              = 7,340,032 FLOPs
//   LM head logits 2 N h V = 2*64*64*64                        =   524,288 = 1/14 of a block
// Backward is twice the forward (data and weight gradients; four attention GEMMs).
ModelConfig tiny_model() {
  return ModelConfig{.layers = 4, .hidden = 64, .heads = 1, .seq_len = 64, .vocab = 64, .ffn_hidden = 0,
                     .vocab_align = 64};
}

// 7,340,032 FLOP/s: a block's forward takes exactly 1 s, its backward 2 s, the
// head 1/14 s and 2/14 s. Everything else is free: GEMMs at peak for every
// shape (gemm_half_dim 0), infinite HBM and link bandwidth, no latencies, no
// kernel overhead, so norms, softmax, the embedding, every collective, every
// message and the optimizer step take 0 s.
Cluster round_cluster() {
  Cluster c;
  c.stack.activations_16bit = true;  // bf16 as the 16-bit stacks run it (the cases below)
  c.name = "round";
  c.gpu.peak_flops_16 = c.gpu.peak_flops_32 = 7340032;
  c.gpu.memory_bytes = 1e12;
  c.gpu.hbm_bw = kInf;
  c.node.gpus = 8;
  c.node.package_gpus = 1;
  c.node.intra_bw = c.node.package_bw = c.node.nic_bw = kInf;
  c.eff = Efficiency{};
  c.eff.gemm_max = 1;
  c.eff.gemm_half_dim = 0;
  c.eff.alpha_intra = c.eff.alpha_inter = c.eff.kernel_overhead = 0;
  c.stack.flash_attention = false;
  c.stack.dropout = false;
  return c;
}

Evaluation simulate(const std::string& layout, int64_t global_batch) {
  const ModelConfig m = tiny_model();
  const Workload w{m, global_batch, Precision::bf16};
  ParallelLayout l = parse_layout(layout, 0).value();
  EXPECT_TRUE(check_layout(l, w, l.world()).is_ok()) << layout;
  return evaluate_layout(ModelSpec(m), l, w, round_cluster());
}

TEST(SimulateRound, GpipeAndOneFOneBMatchTheHandValue) {
  // pp = 2: stage 0 holds blocks 0-1 (f0 = 2 s, b0 = 4 s), stage 1 blocks 2-3
  // and the head (f1 = 2 + 1/14 = 29/14 s, b1 = 58/14 s). M = 4 micro-batches.
  // Stage 1 is the bottleneck: it gets micro-batch 0 at f0 and then never
  // idles (stage 0's f0 + b0 = 6 < 87/14), so the step is the way there, M
  // bottleneck units and stage 0's last backward:
  //   f0 + M (f1 + b1) + b0 = 2 + 4 * 87/14 + 4 = 432/14 = 30.857142... s
  // the same for GPipe and 1F1B (they differ in memory, not time, when
  // messages are free).
  for (const char* sched : {"gpipe", "1f1b"}) {
    const Evaluation e = simulate(std::string("tp=1,pp=2,dp=1,mb=1,schedule=") + sched, 4);
    EXPECT_DOUBLE_EQ(e.step_time_s, 432.0 / 14) << sched;
    EXPECT_EQ(e.sim.critical_stage, 0);
    // Stage 0 works 4 * 6 = 24 s and waits the rest.
    EXPECT_DOUBLE_EQ(e.sim.stages[0].wait, 432.0 / 14 - 24) << sched;
  }
}

TEST(SimulateRound, InterleavedMatchesTheHandTrace) {
  // pp = 2, vpp = 2: one block per virtual stage; v3 (stage 1, chunk 1) also
  // has the head: f = 15/14, b = 30/14; the others f = 1, b = 2. M = 2.
  // Hand trace (units of 1/14 s; schedule from make_schedule(interleaved, 2, 2, 2)):
  //   s0: F0.0 [0,14]   F1.0 [14,28]
  //   s1: F0.0 [14,28]  F1.0 [28,42]
  //   s0: F0.1 [28,42]  F1.1 [42,56]
  //   s1: F0.1 [42,57]  B0.1 [57,87]  F1.1 [87,102]  B1.1 [102,132]
  //   s0: B0.1 [87,115] B1.1 [132,160]
  //   s1: B0.0 [132,160] B1.0 [160,188]
  //   s0: B0.0 [160,188] B1.0 [188,216]
  // step = 216/14 = 15.428571... s
  const Evaluation e = simulate("tp=1,pp=2,dp=1,vpp=2,mb=1", 2);
  EXPECT_EQ(e.layout.schedule, ScheduleKind::interleaved);
  EXPECT_DOUBLE_EQ(e.step_time_s, 216.0 / 14);
}

TEST(SimulateRound, TensorParallelismSplitsTheWorkExactly) {
  // tp = 2 halves every GEMM (heads = 1 cannot split; use 2 heads of 32:
  // same FLOPs) and communication is free: 1F1B pp = 2 takes half of 432/14.
  ModelConfig m = tiny_model();
  m.heads = 2;
  const Workload w{m, 4, Precision::bf16};
  const ParallelLayout l = parse_layout("tp=2,pp=2,dp=1,mb=1", 0).value();
  ASSERT_TRUE(check_layout(l, w, 4).is_ok());
  const Evaluation e = evaluate_layout(ModelSpec(m), l, w, round_cluster());
  EXPECT_DOUBLE_EQ(e.step_time_s, 432.0 / 14 / 2);
}

TEST(SimulateRound, TraceSpansMatchTheTimeline) {
  const ModelConfig m = tiny_model();
  const Workload w{m, 4, Precision::bf16};
  const ParallelLayout l = parse_layout("tp=1,pp=2,dp=1,mb=1", 0).value();
  const ModelSpec spec(m);
  const Cluster cl = round_cluster();
  const Schedule sch = make_schedule(l.schedule, l.pp, 4, 1).value();
  std::vector<SimSpan> spans;
  const SimResult r = simulate_step(sch, price_step(spec, l, w, cl), SimOptions{}, &spans);
  size_t instructions = 0;
  for (const auto& list : sch.per_stage) instructions += list.size();
  EXPECT_EQ(spans.size(), instructions);
  double busy1 = 0, wait1 = 0;
  for (const SimSpan& s : spans) {
    EXPECT_LE(s.t0, s.t1);
    if (s.stage != 1) continue;
    if (s.kind == InstrKind::forward || s.kind == InstrKind::backward) busy1 += s.t1 - s.t0;
    if (s.kind == InstrKind::recv_act || s.kind == InstrKind::recv_grad) wait1 += s.t1 - s.t0;
  }
  EXPECT_NEAR(busy1, 4 * 87.0 / 14, 1e-12);
  EXPECT_NEAR(wait1, r.stages[1].wait, 1e-12);
  const std::string json = sim_trace_json(spans, l);
  EXPECT_NE(json.find("\"name\":\"F0.0\""), std::string::npos);
  EXPECT_NE(json.find("\"name\":\"rG3.0<1\""), std::string::npos);
  EXPECT_NE(json.find("\"cat\":\"bubble\""), std::string::npos);
}

TEST(Sweep, WeakScalingWithFreeCommunicationIsExactly100Percent) {
  // dp grows, the batch per replica stays, every collective is free: each
  // point runs the same pipeline in the same time. ZeRO-0 (ZeRO-1's optimizer
  // shard would shrink with dp; here the optimizer is free anyway).
  const ModelConfig m = tiny_model();
  const Workload w{m, 4, Precision::bf16};
  SweepOptions o;
  o.kind = SweepKind::weak;
  o.gpus = doubling_points(2, 1024, 2).value();
  o.global_batch = 4;
  o.layout = parse_layout("tp=1,pp=2,mb=1,zero=0", 2).value();
  const SweepResult r = run_sweep(ModelSpec(m), w, round_cluster(), o).value();
  ASSERT_EQ(r.points.size(), 10u);
  EXPECT_TRUE(r.skipped.empty());
  for (const SweepPoint& p : r.points) {
    EXPECT_EQ(p.global_batch, 4 * p.gpus / 2);
    EXPECT_EQ(p.eval.layout.dp, p.gpus / 2);
    EXPECT_DOUBLE_EQ(p.eval.step_time_s, 432.0 / 14) << p.gpus;
    EXPECT_DOUBLE_EQ(p.efficiency, 1.0) << p.gpus;
  }
}

TEST(Sweep, StrongScalingShrinksTheMicroBatchCountAndTheEfficiency) {
  // Global batch 16 fixed, pp = 2: dp 1, 2, 4, 8 gives M = 16, 8, 4, 2 and the
  // step 2 + M * 87/14 + 4; efficiency = (16 * 87/14 + 6) / (dp * (M * 87/14 + 6)).
  const ModelConfig m = tiny_model();
  const Workload w{m, 16, Precision::bf16};
  SweepOptions o;
  o.kind = SweepKind::strong;
  o.gpus = {2, 4, 8, 16, 64};
  o.global_batch = 16;
  o.layout = parse_layout("tp=1,pp=2,mb=1", 2).value();
  const SweepResult r = run_sweep(ModelSpec(m), w, round_cluster(), o).value();
  ASSERT_EQ(r.points.size(), 4u);
  ASSERT_EQ(r.skipped.size(), 1u);  // 64 GPUs: dp 32 does not divide the batch of 16
  EXPECT_NE(r.skipped[0].find("not a multiple"), std::string::npos) << r.skipped[0];
  const double t1 = 16 * 87.0 / 14 + 6;
  for (const SweepPoint& p : r.points) {
    const int dp = static_cast<int>(p.gpus / 2);
    const double M = 16.0 / dp;
    EXPECT_NEAR(p.eval.step_time_s, M * 87.0 / 14 + 6, 1e-12 * t1);
    EXPECT_NEAR(p.efficiency, t1 / (dp * (M * 87.0 / 14 + 6)), 1e-12);
  }
}

TEST(Sweep, ReplanFindsALayoutAtEveryPoint) {
  const ModelConfig m = tiny_model();
  const Workload w{m, 8, Precision::bf16};
  SweepOptions o;
  o.kind = SweepKind::weak;
  o.gpus = {1, 2, 4};
  o.global_batch = 8;
  const SweepResult r = run_sweep(ModelSpec(m), w, round_cluster(), o).value();
  ASSERT_EQ(r.points.size(), 3u);
  for (const SweepPoint& p : r.points) EXPECT_EQ(p.eval.layout.world(), p.gpus);
}

TEST(Sweep, TheFirstPointMustRun) {
  const ModelConfig m = tiny_model();
  const Workload w{m, 3, Precision::bf16};
  SweepOptions o;
  o.gpus = {4, 8};
  o.global_batch = 3;
  o.layout = parse_layout("tp=1,pp=2,mb=1", 4).value();
  auto r = run_sweep(ModelSpec(m), w, round_cluster(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("first point"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("data-parallel degree (2)"), std::string::npos) << r.error();
}

TEST(Sweep, Points) {
  EXPECT_EQ(doubling_points(8, 64, 8).value(), (std::vector<int64_t>{8, 16, 32, 64}));
  // The last point: 100,000 rounded down to whole replicas of 512 GPUs.
  EXPECT_EQ(doubling_points(3072, 100000, 512).value(),
            (std::vector<int64_t>{3072, 6144, 12288, 24576, 49152, 98304, 99840}));
  EXPECT_FALSE(doubling_points(8, 4, 1).ok());
  EXPECT_FALSE(doubling_points(0, 4, 1).ok());
  EXPECT_EQ(parse_points("64,8,16,8").value(), (std::vector<int64_t>{8, 16, 64}));
  EXPECT_FALSE(parse_points("8,,16").ok());
  EXPECT_FALSE(parse_points("8,x").ok());
  EXPECT_FALSE(parse_points("-8").ok());
}

TEST(FailureModel, YoungIntervalAndDalyGoodput) {
  // 80 GPUs on 8-GPU nodes = 10 nodes; node MTBF 1000 h -> M_sys = 100 h =
  // 360,000 s; delta = 50 s -> tau = sqrt(2 * 50 * 360,000) = 6,000 s.
  // Daly with R = 0: wall/work = M (e^((tau + delta)/M) - 1) / tau
  //   = 360000 * (e^(6050/360000) - 1) / 6000 = 1.0169...; the first-order
  // waste delta/tau + tau/(2M) = 1/120 + 1/120 gives 1/(1 + 1/60) to 1e-4.
  const FailureModel f{1000 * 3600.0, 50, 0};
  ASSERT_TRUE(check_failure_model(f).is_ok());
  const FailureEstimate e = estimate_failures(f, 80, 8);
  EXPECT_EQ(e.nodes, 10);
  EXPECT_DOUBLE_EQ(e.system_mtbf_s, 360000);
  EXPECT_DOUBLE_EQ(e.interval_s, 6000);
  EXPECT_NEAR(e.goodput, 6000 / (360000 * std::expm1(6050.0 / 360000)), 1e-15);
  EXPECT_NEAR(e.goodput, 1 / (1 + 1.0 / 60), 2e-4);
  // A restart costs its length on every failure: R = 600 s at M = 360,000 s
  // multiplies wall time by e^(600/360000).
  const FailureEstimate r = estimate_failures(FailureModel{1000 * 3600.0, 50, 600}, 80, 8);
  EXPECT_NEAR(e.goodput / r.goodput, std::exp(600.0 / 360000), 1e-12);
  // More nodes fail more often: goodput falls with scale.
  EXPECT_LT(estimate_failures(f, 80000, 8).goodput, e.goodput);
  EXPECT_FALSE(check_failure_model(FailureModel{0, 50, 0}).is_ok());
  EXPECT_FALSE(check_failure_model(FailureModel{3600, 0, 0}).is_ok());
  EXPECT_FALSE(check_failure_model(FailureModel{3600, 50, -1}).is_ok());
}

TEST(ScalingPlot, HasAxesLegendAndIdealLine) {
  PlotSeries s{"a & b <c>", {8, 16, 32}, {100, 98.5, 97}, {50, 49, 48}};
  const std::string svg = scaling_svg({s}, "Weak scaling");
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);  // ideal
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("a &amp; b &lt;c&gt;"), std::string::npos);  // escaped legend
  EXPECT_NE(svg.find("GPUs (log2 scale"), std::string::npos);
  EXPECT_NE(svg.find("scaling efficiency (%"), std::string::npos);
  EXPECT_NE(svg.find(">16<"), std::string::npos);  // a tick label
}

}  // namespace
}  // namespace tera
