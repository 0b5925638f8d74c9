// Collective formulas, the op tables against ModelSpec's FLOPs, and the
// pricing of ops, on a synthetic cluster with round numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "plan/collectives.h"
#include "plan/cost_model.h"

namespace tera {
namespace {

Cluster round_cluster() {
  Cluster c;
  c.stack.activations_16bit = true;  // bf16 as the 16-bit stacks run it (the cases below)
  c.gpu.peak_flops_16 = 100e12;
  c.gpu.peak_flops_32 = 10e12;
  c.gpu.memory_bytes = 80e9;
  c.gpu.hbm_bw = 1e12;
  c.node.gpus = 8;
  c.node.package_gpus = 2;
  c.node.package_bw = 200e9;
  c.node.intra_bw = 100e9;
  c.node.nics = 4;
  c.node.nic_bw = 20e9;  // 10 GB/s per GPU
  c.eff = Efficiency{};
  c.eff.intra_link = c.eff.inter_link = 1.0;
  c.eff.alpha_intra = c.eff.alpha_inter = 0;
  c.eff.kernel_overhead = 0;
  c.eff.overlap_loss = 0;
  return c;
}

TEST(Collectives, BusBandwidthFactors) {
  // nccl-tests PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n.
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 8), 2.0 * 7 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_gather, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::reduce_scatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_factor(Collective::all_reduce, 1), 0);
}

TEST(Collectives, HierarchicalTopologyHandWorked) {
  const Cluster c = round_cluster();
  // 1 GB all-reduce over 8 GPUs of one node at 100 GB/s: 2 * 7/8 * 1e9 / 100e9 = 17.5 ms.
  EXPECT_NEAR(collective_time(Collective::all_reduce, 1e9, Group{8, 1}, c), 0.0175, 1e-12);
  // Over the two GPUs of one package (200 GB/s): 2 * 1/2 * 1e9 / 200e9 = 5 ms.
  EXPECT_NEAR(collective_time(Collective::all_reduce, 1e9, Group{2, 1}, c), 0.005, 1e-12);
  // Two GPUs of different packages in one node (ranks 0 and 2): 100 GB/s -> 10 ms.
  EXPECT_NEAR(collective_time(Collective::all_reduce, 1e9, Group{2, 2}, c), 0.010, 1e-12);
  // A data-parallel group of 16 with stride 8 spans 16 nodes, one member per
  // node: that GPU's NIC share (4 x 20 / 8 = 10 GB/s) bounds it: 15/16 * 1e9 / 10e9 = 93.75 ms all-gather.
  EXPECT_EQ(group_nodes(Group{16, 8}, c), 16);
  EXPECT_NEAR(collective_time(Collective::all_gather, 1e9, Group{16, 8}, c), 0.09375, 1e-12);
  // A group of 16 with stride 1 has all 8 GPUs of each of its 2 nodes: 8 NIC
  // shares (80 GB/s, below the 100 GB/s NVLink): 15/16 * 1e9 / 80e9.
  EXPECT_NEAR(collective_time(Collective::all_gather, 1e9, Group{16, 1}, c), 15.0 / 16 * 1e9 / 80e9, 1e-12);
  // Latency: 4 members per node (stride 2), 4 nodes: ring inside (3 alpha_intra)
  // plus tree levels across (log2 4 = 2 alpha_inter), twice for all-reduce.
  Cluster a = c;
  a.eff.alpha_intra = 1e-6;
  a.eff.alpha_inter = 10e-6;
  EXPECT_EQ(group_per_node(Group{16, 2}, a), 4);
  // Bandwidth: its 4 members per node drive 4 rail-aligned NICs' shares (4 x 10 GB/s).
  const double bw_part = 2.0 * 15 / 16 * 1e6 / 40e9;
  EXPECT_NEAR(collective_time(Collective::all_reduce, 1e6, Group{16, 2}, a), 2 * (3e-6 + 2 * 10e-6) + bw_part, 1e-15);
  // All-gather across nodes is a ring: 15 steps of alpha_inter, plus 15/16 * 1 MB / 40 GB/s.
  EXPECT_NEAR(collective_time(Collective::all_gather, 1e6, Group{16, 2}, a), 15 * 10e-6 + 15.0 / 16 * 1e6 / 40e9, 1e-15);
  // Inside one node the all-gather keeps the ring latency of its members: 7 alpha_intra.
  EXPECT_NEAR(collective_time(Collective::all_gather, 0, Group{8, 1}, a), 7e-6, 1e-15);
  // Point to point: same node vs across nodes.
  EXPECT_NEAR(p2p_time(1e9, 2, c), 1e9 / 100e9, 1e-12);
  EXPECT_NEAR(p2p_time(1e9, 8, c), 1e9 / 10e9, 1e-12);
}

// A GEMM op C[m, n] += A[m, k] B[k, n] (the GEMM-rate cases below).
Op gemm_op(double m, double n, double k) {
  Op op{"g", OpClass::gemm};
  op.m = m;
  op.n = n;
  op.k = k;
  return op;
}

TEST(CostModel, GemmEfficiencyCurve) {
  Efficiency e;
  e.gemm_max = 0.8;
  e.gemm_half_dim = 100;
  Op op = gemm_op(100, 300, 900);
  // 0.8 * 100/200 * 300/400 * 900/1000 = 0.27
  EXPECT_NEAR(gemm_efficiency(op, GpuSpec{}, e), 0.27, 1e-12);  // no SM count: the curve on every dim
  Cluster c = round_cluster();
  c.eff = e;
  c.eff.kernel_overhead = 2e-6;
  op.flops = 2 * op.m * op.n * op.k;
  EXPECT_NEAR(op_time(op, c, 100e12), 2e-6 + op.flops / (100e12 * 0.27), 1e-15);
  // Roofline: a GEMM whose operands take longer to stream than its FLOPs.
  op.bytes = 1e9;
  c.eff.hbm = 0.5;
  EXPECT_NEAR(op_time(op, c, 100e12), 2e-6 + 1e9 / 0.5e12, 1e-12);
  Op mem{"m", OpClass::memory};
  mem.bytes = 1e9;
  EXPECT_NEAR(op_time(mem, c, 100e12), 2e-6 + 1e9 / 0.5e12, 1e-12);
}

TEST(CostModel, WaveQuantizationOnTheSmCount) {
  // 4 SMs, 128 x 256 tiles. C[256, 512]: 2 x 2 = 4 full tiles, one full wave.
  EXPECT_DOUBLE_EQ(wave_efficiency(256, 512, 1, 4, 128, 256), 1.0);
  // C[300, 512]: 3 x 2 = 6 tiles in 2 waves (8 tile slots, 6 used), and the
  // third row of tiles holds 44 of its 128 rows: 6/8 * 300/384 = 0.5859375.
  EXPECT_DOUBLE_EQ(wave_efficiency(300, 512, 1, 4, 128, 256), 0.5859375);
  // Batched: 3 GEMMs of C[128, 256] are 3 tiles, one wave of 4 slots: 0.75.
  EXPECT_DOUBLE_EQ(wave_efficiency(128, 256, 3, 4, 128, 256), 0.75);
  // 132 SMs (H100): C[8192, 4096] is 64 x 16 = 1024 tiles, 8 waves of 132
  // slots (1056): 1024 / 1056.
  EXPECT_DOUBLE_EQ(wave_efficiency(8192, 4096, 1, 132, 128, 256), 1024.0 / 1056.0);
  // No SM count: 1 (the smooth curve prices m and n instead).
  EXPECT_EQ(wave_efficiency(300, 512, 1, 0, 128, 256), 1.0);
  // In gemm_efficiency: gemm_max x clock x wave x f(k) only.
  GpuSpec gpu;
  gpu.sms = 4;
  Efficiency e;
  e.gemm_max = 0.8;
  e.gemm_half_dim = 100;
  e.tensor_clock = 0.9;
  const Op op = gemm_op(300, 512, 900);
  EXPECT_NEAR(gemm_efficiency(op, gpu, e), 0.8 * 0.9 * 0.5859375 * 0.9, 1e-12);
  e.gemm_tile_m = 100;  // tiles of 100 x 512: 3 tiles, one wave of 4: 0.75, no padding
  e.gemm_tile_n = 512;
  EXPECT_NEAR(gemm_efficiency(op, gpu, e), 0.8 * 0.9 * 0.75 * 0.9, 1e-12);
}

TEST(CostModel, PowerCappedTensorClockSlowsTensorWorkOnly) {
  // A board at 0.8 of its nominal clock under dense tensor work: the GEMM
  // (0.27 of peak at full clock, as above) and the fused attention run at
  // 0.8 of their rates; the memory-bound op and a GEMM limited by its
  // operand traffic are unchanged (HBM is not clocked with the SMs).
  Cluster c = round_cluster();
  c.eff.gemm_max = 0.8;
  c.eff.gemm_half_dim = 100;
  c.eff.kernel_overhead = 0;
  c.eff.hbm = 0.5;
  c.eff.flash = 0.4;
  c.eff.tensor_clock = 0.8;
  Op op{"g", OpClass::gemm};
  op.m = 100, op.n = 300, op.k = 900;
  op.flops = 2 * op.m * op.n * op.k;
  EXPECT_NEAR(op_time(op, c, 100e12), op.flops / (100e12 * 0.27 * 0.8), 1e-15);
  op.bytes = 1e9;  // 2 ms of traffic against 0.0625 ms of FLOPs at the slower clock
  EXPECT_NEAR(op_time(op, c, 100e12), 1e9 / 0.5e12, 1e-12);
  Op fa{"fa", OpClass::attention};
  fa.fused_attention = true;
  fa.flops = 1e12;
  EXPECT_NEAR(op_time(fa, c, 100e12), 1e12 / (100e12 * 0.4 * 0.8), 1e-12);
  Op mem{"m", OpClass::memory};
  mem.bytes = 1e9;
  EXPECT_NEAR(op_time(mem, c, 100e12), 1e9 / 0.5e12, 1e-12);
}

double pass_model_flops(const PassOps& p) {
  double f = 0;
  for (const Op& op : p.ops) f += op.flops;
  return f;
}

TEST(CostModel, OpTablesCarryModelSpecFlops) {
  // Without flash attention the block's GEMMs are exactly ModelSpec's per-layer
  // forward FLOPs (per token x tokens, split over tp), backward twice that;
  // the head's logits GEMM is 2 C V per token. Holds for GQA + gated MLP too.
  for (ModelConfig cfg : {ModelConfig{.layers = 2, .hidden = 64, .heads = 8, .seq_len = 16, .vocab = 96,
                                      .ffn_hidden = 0, .vocab_align = 32},
                          ModelConfig{.layers = 2, .hidden = 64, .heads = 8, .seq_len = 16, .vocab = 96,
                                      .ffn_hidden = 160, .vocab_align = 32, .kv_heads = 2, .mlp = MlpKind::gated}}) {
    const ModelSpec spec(cfg);
    for (int tp : {1, 2}) {
      OpsOptions o;
      o.B = 3;
      o.T = 16;
      o.tp = tp;
      const double tokens = 3 * 16;
      const double C = 64, V = static_cast<double>(spec.padded_vocab());
      const double per_layer = (spec.forward_flops_per_token() - 2 * C * static_cast<double>(cfg.vocab)) / cfg.layers;
      const PartOps b = block_ops(spec, o);
      EXPECT_NEAR(pass_model_flops(b.fwd) * tp, per_layer * tokens, 1e-6);
      EXPECT_NEAR(pass_model_flops(b.bwd), 2 * pass_model_flops(b.fwd), 1e-6);
      EXPECT_NEAR(pass_model_flops(head_ops(spec, o).fwd) * tp, 2 * C * V * tokens, 1e-6);
      // Full recompute re-runs the forward; selective only the attention core.
      o.recompute = Recompute::full;
      EXPECT_NEAR(pass_model_flops(block_ops(spec, o).recompute), pass_model_flops(b.fwd), 1e-6);
      o.recompute = Recompute::selective;
      EXPECT_NEAR(pass_model_flops(block_ops(spec, o).recompute) * tp, 4.0 * 16 * 64 * tokens, 1e-6);
    }
  }
}

TEST(CostModel, BackwardSplitForZbH1HandWorked) {
  // ZB-H1's W is each linear's dW GEMM (the forward's linear FLOPs again) and
  // the embedding's row gradients; B is the rest of the backward with its
  // collectives and, under recompute, the re-run forward. GPT block, C = 256,
  // N = 1 x 1024 tokens, tp 1, no flash: W = 2 N (3C C + C C + 4C C + C 4C)
  // = 24 N C^2 FLOPs, on GEMMs compute-bound here (gemm_half_dim 0, so every
  // dim factor is 1) at peak x gemm_max = 100 x 0.7 TFLOP/s.
  const ModelConfig cfg{.layers = 2, .hidden = 256, .heads = 4, .seq_len = 1024, .vocab = 512,
                        .ffn_hidden = 0, .vocab_align = 64};
  const ModelSpec spec(cfg);
  const double N = 1024, C = 256, e = 2;
  OpsOptions o;
  o.B = 1;
  o.T = 1024;
  const PartOps block = block_ops(spec, o);
  const SplitBackward split = split_backward(block.bwd);
  ASSERT_EQ(split.weight.ops.size(), 4u);
  for (const Op& op : split.weight.ops) EXPECT_NE(std::string(op.name).find("_wgrad"), std::string::npos) << op.name;
  EXPECT_EQ(split.input.ops.size() + split.weight.ops.size(), block.bwd.ops.size());
  EXPECT_DOUBLE_EQ(pass_flops(split.weight), 24 * N * C * C);
  EXPECT_TRUE(split.weight.comm.empty());

  Cluster c = round_cluster();
  c.eff.gemm_half_dim = 0;
  ParallelLayout l;
  l.recompute = Recompute::full;
  l.schedule = ScheduleKind::zb_h1;
  const Workload w{cfg, 1, Precision::bf16};
  const PartCosts parts = price_parts(spec, l, w, c);
  EXPECT_NEAR(parts.block_bw.gemm, 24 * N * C * C / (100e12 * 0.7), 1e-18);
  EXPECT_DOUBLE_EQ(parts.block_bw.attention + parts.block_bw.memory + parts.block_bw.tp_comm + parts.block_bw.recompute(), 0);
  // The dX GEMMs are as many FLOPs: B's GEMMs take as long, the re-run forward on top.
  EXPECT_NEAR(parts.block_bi.gemm - parts.block_bi.rc_gemm, parts.block_bw.gemm, 1e-18);
  EXPECT_NEAR(parts.block_bi.rc_gemm, parts.block_f.gemm, 1e-18);
  EXPECT_NEAR(parts.block_bi.total() + parts.block_bw.total(), parts.block_b.total(), 1e-15);
  // Embedding: W is the table's row gradients (read dY, read and write the rows:
  // 3 N C e bytes at HBM x 0.8), B nothing at tp 1. Head: W the logits' dW GEMM, 2 N C V.
  EXPECT_NEAR(parts.emb_bw.memory, 3 * N * C * e / (1e12 * 0.8), 1e-18);
  EXPECT_DOUBLE_EQ(parts.emb_bi.total(), 0);
  EXPECT_NEAR(parts.head_bw.gemm, 2 * N * C * 512 / (100e12 * 0.7), 1e-18);

  // Per virtual stage (2 stages of one layer): B + W is the fused backward
  // without tp overlap; only a split schedule gets them.
  l.pp = 2;
  const StepCosts sc = price_step(spec, l, w, c);
  ASSERT_EQ(sc.bwd_input.size(), 2u);
  ASSERT_EQ(sc.bwd_weight.size(), 2u);
  for (size_t v = 0; v < 2; ++v) EXPECT_NEAR(sc.bwd_input[v].total() + sc.bwd_weight[v].total(), sc.bwd[v].total(), 1e-15);
  EXPECT_NEAR(sc.bwd_weight[0].total(), parts.block_bw.total() + parts.emb_bw.total(), 1e-15);
  l.schedule = ScheduleKind::one_f_one_b;
  EXPECT_TRUE(price_step(spec, l, w, c).bwd_input.empty());

  // Tensor parallelism: every backward collective rides with B; with the
  // stack's overlap, B's collectives hide behind B's GEMMs alone.
  l.tp = 2;
  l.schedule = ScheduleKind::zb_h1;
  const PartCosts tp2 = price_parts(spec, l, w, c);
  EXPECT_GT(tp2.block_bi.tp_comm, 0);
  EXPECT_DOUBLE_EQ(tp2.block_bi.tp_comm, tp2.block_b.tp_comm);
  EXPECT_DOUBLE_EQ(tp2.block_bw.tp_comm, 0);
  // ZeRO-2 over 2 ranks: the gradients' reduce-scatter serves W, B has none.
  l.tp = 1;
  l.dp = 2;
  l.zero = 2;
  const StepCosts z2 = price_step(spec, l, Workload{cfg, 2, Precision::bf16}, c);
  for (size_t v = 0; v < 2; ++v) EXPECT_DOUBLE_EQ(z2.bwd_input[v].dp_comm, 0);
}

TEST(CostModel, PipelineSendsWithAndWithoutScatterGather) {
  // GPT, C = 256, micro-batch 1 x 1024 tokens in 16 bits: one activation is
  // 1024 x 256 x 2 = 512 KiB. tp 4, pp 2 on one 8-GPU node (stage
  // neighbours 4 ranks apart, over the node link: 100 GB/s, no latency).
  // Megatron's scatter/gather: each rank sends 1/4 of it, then the
  // receivers all-gather it over tp (3/4 of it each): a/4/100e9 +
  // (3/4) a/100e9 = a/100e9. Without it every rank sends the whole
  // activation: a/100e9 too on this node (the gather's NVLink time moves
  // into the send); across nodes the whole activation crosses the NICs.
  const ModelConfig cfg{.layers = 2, .hidden = 256, .heads = 4, .seq_len = 1024, .vocab = 512,
                        .ffn_hidden = 0, .vocab_align = 64};
  const ModelSpec spec(cfg);
  const double act = 1024 * 256 * 2;
  Cluster c = round_cluster();
  ParallelLayout l;
  l.tp = 4;
  l.pp = 2;
  const Workload w{cfg, 1, Precision::bf16};
  EXPECT_NEAR(price_step(spec, l, w, c).p2p, act / 4 / 100e9 + 0.75 * act / 100e9, 1e-15);
  c.stack.p2p_scatter_gather = false;
  EXPECT_NEAR(price_step(spec, l, w, c).p2p, act / 100e9, 1e-15);
  // Across nodes (1 GPU per node, tp 1: neighbours on different nodes, 4 x 20 GB/s of NICs each).
  c.node.gpus = 1;
  c.node.package_gpus = 1;
  l.tp = 1;
  const double whole = price_step(spec, l, w, c).p2p;
  EXPECT_NEAR(whole, act / 80e9, 1e-15);
  // Sequence parallelism: the activation already is 1/tp per rank, sent as is.
  c = round_cluster();
  c.stack.p2p_scatter_gather = false;
  l.tp = 4;
  l.sequence_parallel = true;
  EXPECT_NEAR(price_step(spec, l, w, c).p2p, act / 4 / 100e9, 1e-15);
}

TEST(CostModel, TensorParallelCollectivesPerLayer) {
  // Megatron: 2 all-reduces forward and 2 backward; with sequence parallelism
  // each becomes an all-gather + reduce-scatter pair of the same bus traffic.
  const ModelSpec spec(ModelConfig{.layers = 2, .hidden = 64, .heads = 8, .seq_len = 16, .vocab = 96,
                                   .ffn_hidden = 0, .vocab_align = 32});
  OpsOptions o;
  o.B = 2;
  o.T = 16;
  o.tp = 4;
  const PartOps plain = block_ops(spec, o);
  ASSERT_EQ(plain.fwd.comm.size(), 2u);
  EXPECT_EQ(plain.fwd.comm[0].kind, Collective::all_reduce);
  EXPECT_DOUBLE_EQ(plain.fwd.comm[0].bytes, 2.0 * 16 * 64 * 2);
  o.sequence_parallel = true;
  const PartOps sp = block_ops(spec, o);
  ASSERT_EQ(sp.bwd.comm.size(), 4u);
  const Cluster c = round_cluster();
  double t_plain = 0, t_sp = 0;
  for (const auto& x : plain.fwd.comm) t_plain += collective_time(x.kind, x.bytes, Group{4, 1}, c);
  for (const auto& x : sp.fwd.comm) t_sp += collective_time(x.kind, x.bytes, Group{4, 1}, c);
  EXPECT_NEAR(t_plain, t_sp, 1e-15);
}

}  // namespace
}  // namespace tera
