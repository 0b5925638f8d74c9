// Collective formulas, the op tables against ModelSpec's FLOPs, and the
// pricing of ops, on a synthetic cluster with round numbers.
#include <gtest/gtest.h>

#include <cmath>

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

TEST(CostModel, GemmEfficiencyCurve) {
  Efficiency e;
  e.gemm_max = 0.8;
  e.gemm_half_dim = 100;
  Op op{"g", OpClass::gemm};
  op.m = 100;
  op.n = 300;
  op.k = 900;
  // 0.8 * 100/200 * 300/400 * 900/1000 = 0.27
  EXPECT_NEAR(gemm_efficiency(op, e), 0.27, 1e-12);
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
