// Issue 19's cost terms on hand-worked cases: fp8 linear layers, context
// parallelism (ring attention), per-tensor ZeRO-3 latency, and the stack
// profiles chosen from a run's framework text.
#include <gtest/gtest.h>

#include <cmath>

#include "plan/collectives.h"
#include "plan/cost_model.h"
#include "plan/memory_model.h"
#include "partition/layout_check.h"
#include "plan/search.h"
#include "plan/stack_profile.h"
#include "partition/parallel_layout_json.h"

#include <nlohmann/json.hpp>

namespace tera {
namespace {

Cluster round_cluster() {
  Cluster c;
  c.stack.activations_16bit = true;  // bf16 as the 16-bit stacks run it (the cases below)
  c.gpu.peak_flops_16 = 100e12;
  c.gpu.peak_flops_32 = 10e12;
  c.gpu.peak_flops_8 = 200e12;
  c.gpu.memory_bytes = 80e9;
  c.gpu.hbm_bw = 1e12;
  c.node.gpus = 8;
  c.node.intra_bw = 100e9;
  c.node.package_bw = 100e9;
  c.node.nics = 8;
  c.node.nic_bw = 10e9;
  c.eff = Efficiency{};
  c.eff.gemm_max = 1;
  c.eff.gemm_half_dim = 0;
  c.eff.hbm = 1;
  c.eff.intra_link = c.eff.inter_link = 1.0;
  c.eff.alpha_intra = c.eff.alpha_inter = 0;
  c.eff.kernel_overhead = 0;
  c.eff.overlap_loss = 0;
  return c;
}

const ModelSpec& tiny() {
  static const ModelSpec spec(ModelConfig{.layers = 2, .hidden = 64, .heads = 8, .seq_len = 64, .vocab = 96,
                                          .ffn_hidden = 0, .vocab_align = 32});
  return spec;
}

// ZeRO-3 over `dp` data-parallel ranks of one stage (the ZeRO cases below).
ParallelLayout zero3(int dp) {
  ParallelLayout l;
  l.dp = dp;
  l.zero = 3;
  return l;
}

const Op* find(const PassOps& p, const std::string& name) {
  for (const Op& op : p.ops) {
    if (name == op.name) return &op;
  }
  return nullptr;
}

TEST(Fp8, LinearGemmsAtTheFp8PeakWithCasts) {
  OpsOptions o;
  o.B = 2;
  o.T = 64;
  o.fp8_gemms = true;
  const PartOps p = block_ops(tiny(), o);
  // qkv: N = 128 tokens, [128, 64] x [64, 192]: operands are 1 byte.
  const Op* qkv = find(p.fwd, "qkv");
  ASSERT_NE(qkv, nullptr);
  EXPECT_DOUBLE_EQ(qkv->bytes, 1.0 * (128 * 64 + 64 * 192 + 128 * 192));
  // Each linear casts X and W before the forward: (128*64 + 64*192) * (2*2 + 1) bytes for qkv.
  const Op* cast = find(p.fwd, "fp8_cast");
  ASSERT_NE(cast, nullptr);
  EXPECT_DOUBLE_EQ(cast->bytes, (128.0 * 64 + 64 * 192) * 5);
  // The GEMM runs at the fp8 peak (200 TFLOP/s), attention at the 16-bit one.
  const Cluster c = round_cluster();
  PassOps only;
  only.ops.push_back(*qkv);
  const PassCost g8 = price_pass(only, c, 100e12, 1, 200e12);
  EXPECT_NEAR(g8.gemm, std::max(qkv->flops / 200e12, qkv->bytes / 1e12), 1e-18);
  Workload w{tiny().config(), 8, Precision::bf16};
  w.fp8_gemms = true;
  EXPECT_DOUBLE_EQ(gemm_peak_flops(c, w).value(), 200e12);
  Cluster a100 = c;
  a100.gpu.peak_flops_8 = 0;
  EXPECT_FALSE(gemm_peak_flops(a100, w).ok());
}

TEST(ContextParallel, AttentionOverAllKeysAndKvTraffic) {
  OpsOptions o;
  o.B = 1;
  o.T = 32;  // this rank's half of a 64-token sequence
  o.cp = 2;
  o.flash_attention = true;
  const PartOps p = block_ops(tiny(), o);
  // Causal flash attention: 0.5 * 4 * B * H * T_q * T_k * hs = 0.5 * 4 * 8 * 32 * 64 * 8.
  const Op* fa = find(p.fwd, "flash_attention");
  ASSERT_NE(fa, nullptr);
  EXPECT_DOUBLE_EQ(fa->flops, 0.5 * 4 * 8 * 32 * 64 * 8);
  // K and V of all 64 tokens gathered: 2 * 64 * kv(8) * hs(8) * 2 bytes; backward gathers again
  // and reduce-scatters the gradients.
  ASSERT_EQ(p.fwd.cp_comm.size(), 1u);
  EXPECT_DOUBLE_EQ(p.fwd.cp_comm[0].bytes, 2.0 * 64 * 8 * 8 * 2);
  ASSERT_EQ(p.bwd.cp_comm.size(), 2u);
  EXPECT_EQ(p.bwd.cp_comm[1].kind, Collective::reduce_scatter);
  // Exposed: what exceeds the attention (overlap_loss 0). The gather over 2 ranks of
  // one node moves 1/2 of 16,384 bytes at 100 GB/s = 81.92 ns.
  const Cluster c = round_cluster();
  const PassCost f = price_pass(p.fwd, c, 100e12, 1, 0, 2);
  const double kv = 0.5 * 16384 / 100e9;
  EXPECT_NEAR(f.tp_comm, std::max(0.0, kv - f.attention), 1e-18);
  // A pure context-parallel pass with a slow link exposes the rest.
  Cluster slow = c;
  slow.node.intra_bw = 1e6;
  const PassCost fs = price_pass(p.fwd, slow, 100e12, 1, 0, 2);
  EXPECT_NEAR(fs.tp_comm, 0.5 * 16384 / 1e6 - fs.attention, 1e-12);
}

TEST(ContextParallel, LayoutCountsAndChecks) {
  ParallelLayout l;
  l.dp = 4;
  l.cp = 2;
  EXPECT_EQ(l.world(), 8);
  EXPECT_EQ(l.dp_cp(), 8);
  Workload w{tiny().config(), 8, Precision::bf16};
  EXPECT_TRUE(check_layout(l, w, 8));
  l.cp = 3;  // 2 * 3 does not divide 64
  l.dp = 1;
  EXPECT_FALSE(check_layout(l, w, 3));
  auto parsed = parse_layout("tp=1,pp=1,cp=2", 8);
  ASSERT_TRUE(parsed.ok()) << parsed.error();
  EXPECT_EQ(parsed->dp, 4);
  EXPECT_EQ(parsed->cp, 2);
}

TEST(ZeroPerTensor, OneLatencyPerParameterTensor) {
  // ZeRO-3 over 16 ranks on 2 nodes (ring: 15 alpha_inter per collective). A stack gathering
  // tensor by tensor pays that latency once per tensor (12 in a GPT block), FSDP once per block.
  const ModelSpec& spec = tiny();
  ParallelLayout l = zero3(16);
  Workload w{spec.config(), 16, Precision::bf16};
  Cluster c = round_cluster();
  c.eff.alpha_inter = 1e-3;  // large enough to dominate the bytes
  const StepCosts flat = price_step(spec, l, w, c);
  c.stack.zero_per_tensor = true;
  const StepCosts per = price_step(spec, l, w, c);
  const PartCosts parts = price_parts(spec, l, w, c);
  EXPECT_EQ(parts.block_tensors, 12);
  // Forward of a block: one all-gather; 11 more latencies of 15 ms each, per layer (2 layers).
  const double extra = 2 * 11 * 15 * 1e-3;
  EXPECT_NEAR(per.fwd[0].dp_comm - flat.fwd[0].dp_comm, extra, 1e-9);
}

TEST(ZeroThree, FirstGatherAndLastReduceScatterExposed) {
  // Forward of one stage with 2 blocks, ZeRO-3 over 16 ranks, overlap_loss 0: each block's
  // gather hides behind its pass (max(0, ag - pass) exposed), the embedding's and head's too,
  // and the first block's gather, which nothing precedes, is exposed in full: + min(ag, pass).
  const ModelSpec& spec = tiny();
  ParallelLayout l = zero3(16);
  Workload w{spec.config(), 16, Precision::bf16};
  const Cluster c = round_cluster();
  const PartCosts parts = price_parts(spec, l, w, c);
  const ParamSplit split = param_split(spec, 1);
  const Group g{16, 1};
  const double ag = collective_time(Collective::all_gather, split.block * 2, g, c);
  const double ag_e = collective_time(Collective::all_gather, split.wte * 2, g, c);
  const double bf = parts.block_f.total();
  const double want = 2 * std::max(0.0, ag - bf) + std::max(0.0, ag_e - parts.emb_f.total()) +
                      std::max(0.0, ag_e - parts.head_f.total()) + std::min(ag, bf);
  EXPECT_NEAR(price_step(spec, l, w, c).fwd[0].dp_comm, want, 1e-12);
}

TEST(Fp8, RowwiseScalesRunTheRowwiseKernelAndCastTheBackwardAgain) {
  // torchao's ROWWISE recipe: the three GEMMs of each linear are the rowwise
  // kernel's, priced at Efficiency::fp8_rowwise of the fp8 rate; the backward
  // casts dY twice (rows for dX, columns for dW) and X and W once more:
  // (2mn + mk + kn)(2e + 1) bytes against tensorwise mn(2e + 1).
  OpsOptions o;
  o.B = 2;
  o.T = 64;
  o.fp8_gemms = true;
  const PartOps tensorwise = block_ops(tiny(), o);
  o.fp8_rowwise = true;
  const PartOps rowwise = block_ops(tiny(), o);
  const double m = 128, n = 192, k = 64;  // qkv
  const Op* cast_t = find(tensorwise.bwd, "fp8_cast_bwd");
  const Op* cast_r = find(rowwise.bwd, "fp8_cast_bwd");
  ASSERT_NE(cast_t, nullptr);
  ASSERT_NE(cast_r, nullptr);
  EXPECT_DOUBLE_EQ(cast_t->bytes, m * n * 5);
  EXPECT_DOUBLE_EQ(cast_r->bytes, (2 * m * n + m * k + k * n) * 5);
  int rowwise_gemms = 0;
  for (const PassOps* pass : {&rowwise.fwd, &rowwise.bwd}) {
    for (const Op& op : pass->ops) rowwise_gemms += op.fp8_rowwise ? 1 : 0;
  }
  EXPECT_EQ(rowwise_gemms, 3 * 4);  // qkv, attention projection, fc, fc2: forward, dX, dW
  for (const Op& op : tensorwise.fwd.ops) EXPECT_FALSE(op.fp8_rowwise) << op.name;
  // Compute-bound on the fp8 peak: the rowwise kernel at 60% takes 1/0.6 as long.
  Cluster c = round_cluster();
  c.gpu.hbm_bw = 1e18;
  const Op* qkv = find(rowwise.fwd, "qkv");
  ASSERT_NE(qkv, nullptr);
  PassOps only;
  only.ops.push_back(*qkv);
  c.eff.fp8_rowwise = 0.6;
  EXPECT_NEAR(price_pass(only, c, 100e12, 1, 200e12).gemm, qkv->flops / (200e12 * 0.6), 1e-18);
  // The profile's fitted parameter sets it.
  StackProfile prof = stack_profile("torchtitan").value();
  prof.params.fp8_rowwise_scale = 0.7;
  EXPECT_DOUBLE_EQ(apply_profile(round_cluster(), prof).eff.fp8_rowwise, 0.7);
}

TEST(SelectiveRecompute, OpLevelSacRerunsHalfTheMatmulsAndTheElementwiseOps) {
  // Megatron's selective recompute with fused attention re-runs nothing;
  // PyTorch's op-level SAC (torchtitan) saves the attention kernel's output
  // and every other matmul's: half of each forward GEMM's work re-runs on
  // average, with every memory-bound op, and no attention.
  OpsOptions o;
  o.B = 2;
  o.T = 64;
  o.flash_attention = true;
  o.recompute = Recompute::selective;
  EXPECT_TRUE(block_ops(tiny(), o).recompute.ops.empty());
  o.op_level_sac = true;
  const PartOps p = block_ops(tiny(), o);
  double fwd_gemm = 0, fwd_memory = 0, rc_gemm = 0, rc_memory = 0;
  for (const Op& op : p.fwd.ops) {
    if (op.cls == OpClass::gemm) fwd_gemm += op.flops;
    if (op.cls == OpClass::memory) fwd_memory += op.bytes;
  }
  for (const Op& op : p.recompute.ops) {
    EXPECT_NE(op.cls, OpClass::attention) << op.name;
    if (op.cls == OpClass::gemm) rc_gemm += op.flops;
    if (op.cls == OpClass::memory) rc_memory += op.bytes;
  }
  EXPECT_DOUBLE_EQ(rc_gemm, 0.5 * fwd_gemm);
  EXPECT_DOUBLE_EQ(rc_memory, fwd_memory);
  // The torchtitan profiles say so; Megatron's do not.
  EXPECT_TRUE(apply_profile(round_cluster(), stack_profile("torchtitan").value()).stack.op_level_sac);
  EXPECT_FALSE(apply_profile(round_cluster(), stack_profile("megatron-core").value()).stack.op_level_sac);
}

TEST(Fsdp, ReshardAfterForwardOffGathersOnceForForwardAndBackward) {
  // One stage, ZeRO-3 over 16 ranks, overlap_loss 0: with reshard on a
  // block's backward gathers its parameters again and reduce-scatters its
  // gradients; off, the forward's gather serves the backward, which only
  // reduce-scatters. The forward is the same.
  const ModelSpec& spec = tiny();
  ParallelLayout l = zero3(16);
  Workload w{spec.config(), 16, Precision::bf16};
  Cluster c = round_cluster();
  c.node.intra_bw = c.node.package_bw = 1e6;  // slow links: every collective exposed beyond its pass
  c.node.nic_bw = 1e6;
  const StepCosts on = price_step(spec, l, w, c);
  l.reshard_after_forward = false;
  const StepCosts off = price_step(spec, l, w, c);
  EXPECT_DOUBLE_EQ(off.fwd[0].dp_comm, on.fwd[0].dp_comm);
  const ParamSplit split = param_split(spec, 1);
  const Group g{16, 1};
  const double ag_block = collective_time(Collective::all_gather, split.block * 2, g, c);
  const double ag_emb = collective_time(Collective::all_gather, split.wte * 2, g, c);
  // Two blocks, the embedding and the (tied) head no longer gather in the backward.
  EXPECT_NEAR(on.bwd[0].dp_comm - off.bwd[0].dp_comm, 2 * ag_block + 2 * ag_emb, 1e-9 * on.bwd[0].dp_comm);
  EXPECT_DOUBLE_EQ(off.dp_reduce[0], on.dp_reduce[0]);  // still per micro-batch: nothing after the backward
}

TEST(Fsdp, ReshardAfterForwardOffUnderPipeliningIsOnceAStep) {
  // Under pipeline parallelism (PyTorch's pipelining schedules) FSDP without
  // reshard_after_forward gathers each stage's parameters once per step and
  // reduce-scatters its gradients once, after the last micro-batch: the
  // passes carry no ZeRO traffic, and the stage's update is ZeRO-1's.
  const ModelSpec& spec = tiny();
  ParallelLayout l;
  l.pp = 2;
  l.dp = 8;
  l.zero = 3;
  l.reshard_after_forward = false;
  Workload w{spec.config(), 32, Precision::bf16};
  w.untied_embeddings = true;  // no tied all-reduce between the ends (its bytes follow the ZeRO stage)
  const Cluster c = round_cluster();
  const StepCosts once = price_step(spec, l, w, c);
  for (size_t v = 0; v < once.fwd.size(); ++v) {
    EXPECT_EQ(once.fwd[v].dp_comm, 0) << v;
    EXPECT_EQ(once.bwd[v].dp_comm, 0) << v;
  }
  ParallelLayout z1 = l;
  z1.zero = 1;
  z1.reshard_after_forward = true;
  const StepCosts one = price_step(spec, z1, w, c);
  for (int s = 0; s < 2; ++s) {
    EXPECT_DOUBLE_EQ(once.dp_reduce[static_cast<size_t>(s)], one.dp_reduce[static_cast<size_t>(s)]) << s;
    EXPECT_DOUBLE_EQ(once.optimizer[static_cast<size_t>(s)], one.optimizer[static_cast<size_t>(s)]) << s;
  }
  // Memory: the stage's blocks beyond the two the plan gathers (none: one
  // block per stage) and its gradients accumulated unsharded, 7/8 of them
  // beyond the plan's chunk, in 16 bits (grad_bytes at ZeRO-3).
  ParamSplit split = param_split(spec, 1);
  split.untied = true;
  MemoryTables t(spec, w, c);
  const double P0 = stage_params(split, l, 2, 0);
  EXPECT_NEAR(t.fsdp_unsharded(l, 0), P0 * 7.0 / 8 * 2, 1e-6);
  ParallelLayout flat = l;
  flat.pp = 1;
  flat.dp = 16;
  EXPECT_EQ(t.fsdp_unsharded(flat, 0), 0);  // two blocks: the plan's own two gathers
  l.reshard_after_forward = true;
  EXPECT_EQ(t.fsdp_unsharded(l, 0), 0);
}

TEST(Fsdp, ReshardKeyParsesPrintsAndNeedsZeroThree) {
  auto l = parse_layout("tp=1,pp=2,dp=4,zero=3,reshard=0", 0);
  ASSERT_TRUE(l.ok()) << l.error();
  EXPECT_FALSE(l->reshard_after_forward);
  EXPECT_NE(layout_string(*l).find("reshard=0"), std::string::npos);
  EXPECT_EQ(parse_layout(layout_string(*l), 0).value(), *l);
  EXPECT_EQ(layout_string(parse_layout("tp=1,pp=2,dp=4,zero=3", 0).value()).find("reshard"), std::string::npos);
  ParallelLayout z1 = *l;
  z1.zero = 1;
  const Status s = check_layout(z1, tiny().config(), 32, 8);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("reshard=0"), std::string::npos) << s.message();
  EXPECT_FALSE(parse_layout("tp=1,dp=4,zero=3,reshard=2", 0).ok());
}

// Hybrid sharding (HSDP): ZeRO's states sharded over groups of `shard`
// data-parallel ranks and replicated across the groups.
TEST(HybridShard, KeyParsesPrintsAndIsChecked) {
  auto l = parse_layout("tp=1,pp=1,dp=16,zero=1,shard=4", 0);
  ASSERT_TRUE(l.ok()) << l.error();
  EXPECT_EQ(l->zero_group(), 4);
  EXPECT_EQ(l->zero_replicas(), 4);
  EXPECT_TRUE(l->hybrid_shard());
  EXPECT_NE(layout_string(*l).find("shard=4"), std::string::npos);
  EXPECT_EQ(parse_layout(layout_string(*l), 0).value(), *l);
  EXPECT_EQ(layout_from_json(layout_to_json(*l), "x.json").value(), *l);
  // Not hybrid: nothing written, the whole group shards.
  const ParallelLayout plain = parse_layout("tp=1,pp=1,dp=16,zero=1", 0).value();
  EXPECT_FALSE(plain.hybrid_shard());
  EXPECT_EQ(plain.zero_group(), 16);
  EXPECT_EQ(layout_string(plain).find("shard"), std::string::npos);
  EXPECT_FALSE(layout_to_json(plain).contains("shard"));
  // With context parallelism the group is dp x cp.
  EXPECT_EQ(parse_layout("tp=1,dp=4,cp=2,zero=3,shard=4", 0).value().zero_replicas(), 2);
  // Refusals name the key and the fix.
  auto refused = [](const std::string& text, const std::string& says) {
    const ParallelLayout x = parse_layout(text, 0).value();
    const Status s = check_layout(x, tiny().config(), 32, x.world());
    ASSERT_FALSE(s.is_ok()) << text;
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  };
  refused("tp=1,dp=16,zero=1,shard=3", "must divide");
  refused("tp=1,dp=16,zero=1,shard=1", "shards nothing");
  refused("tp=1,dp=16,zero=0,shard=4", "needs zero >= 1");
  EXPECT_TRUE(check_layout(*l, tiny().config(), 32, 16).is_ok());
}

TEST(HybridShard, GradientsReduceScatteredInTheGroupThenAllReducedAcrossReplicas) {
  // ZeRO-1 over 16 ranks in groups of 4 (8 GPUs a node): the step's
  // reduction is a reduce-scatter of the stage's gradients in the group
  // (4 ranks at stride 1, one node) and an all-reduce of the 1/4 shard
  // across the 4 replicas (stride 4: two nodes); the optimizer updates
  // 1/4 of the parameters and all-gathers them in the group.
  const ModelSpec& spec = tiny();
  const ParallelLayout l = parse_layout("tp=1,pp=1,dp=16,zero=1,shard=4", 0).value();
  Workload w{spec.config(), 16, Precision::bf16};
  w.untied_embeddings = true;
  const Cluster c = round_cluster();
  const PrecisionBytes pb = precision_bytes(w.precision, c.stack);
  ParamSplit split = param_split(spec, 1);
  split.untied = true;
  const double P = stage_params(split, l, 2, 0);
  const double g = static_cast<double>(pb.grad);
  const StepCosts sc = price_step(spec, l, w, c);
  const double rs = collective_time(Collective::reduce_scatter, P * g, Group{4, 1}, c);
  const double ar = collective_time(Collective::all_reduce, P / 4 * g, Group{4, 4}, c);
  EXPECT_GT(ar, 0);
  EXPECT_NEAR(sc.dp_reduce[0], rs + ar, 1e-12);
  const double gather = collective_time(Collective::all_gather, P * static_cast<double>(pb.param), Group{4, 1}, c);
  EXPECT_NEAR(sc.optimizer[0], P / 4 * 30 / c.gpu.hbm_bw + gather, 1e-12);  // small stage: one bucket, exposed
}

TEST(HybridShard, ZeroThreeAddsTheReplicaAllReducePerBackward) {
  // ZeRO-3 over 16 ranks in groups of 4 against plain ZeRO-3 over 4 ranks:
  // the same gathers and reduce-scatters (one group of 4), and in each
  // backward the all-reduce of each reduce-scattered shard across the 4
  // replicas (slow links, overlap_loss 0: every collective exposed).
  const ModelSpec& spec = tiny();
  ParallelLayout hybrid = zero3(16);
  hybrid.shard = 4;
  Workload w{spec.config(), 16, Precision::bf16};
  Cluster c = round_cluster();
  c.node.intra_bw = c.node.package_bw = 1e6;
  c.node.nic_bw = 1e6;
  const StepCosts h = price_step(spec, hybrid, w, c);
  const StepCosts flat = price_step(spec, zero3(4), w, c);
  EXPECT_DOUBLE_EQ(h.fwd[0].dp_comm, flat.fwd[0].dp_comm);
  const ParamSplit split = param_split(spec, 1);
  const double gb = static_cast<double>(grad_bytes(precision_bytes(w.precision, c.stack), 3));
  const Group replicas{4, 4};
  const double ar_block = collective_time(Collective::all_reduce, split.block / 4 * gb, replicas, c);
  const double ar_emb = collective_time(Collective::all_reduce, split.wte / 4 * gb, replicas, c);
  // Two blocks, the embedding and the (tied) head.
  EXPECT_NEAR(h.bwd[0].dp_comm - flat.bwd[0].dp_comm, 2 * ar_block + 2 * ar_emb, 1e-9 * h.bwd[0].dp_comm);
}

TEST(HybridShard, StatesAreThoseOfTheShardGroupAlone) {
  // What a rank holds of ZeRO's states depends on its group only: 16 ranks
  // in groups of 4 hold what 4 ranks sharding alone hold, for every stage.
  const ModelSpec& spec = tiny();
  Workload w{spec.config(), 16, Precision::bf16};
  const Cluster c = round_cluster();
  MemoryTables t(spec, w, c);
  for (int zero = 1; zero <= 3; ++zero) {
    ParallelLayout hybrid = zero3(16), group = zero3(4), whole = zero3(16);
    hybrid.zero = group.zero = whole.zero = zero;
    hybrid.shard = 4;
    EXPECT_DOUBLE_EQ(t.per_gpu(hybrid).states(), t.per_gpu(group).states()) << zero;
    EXPECT_GT(t.per_gpu(hybrid).states(), t.per_gpu(whole).states()) << zero;
  }
}

TEST(HybridShard, SearchedOnlyWhenAsked) {
  // --hybrid-shard: each ZeRO layout also with one node's worth of its
  // data-parallel ranks (8 GPUs / tp) per group; never otherwise.
  const ModelSpec& spec = tiny();
  Workload w{spec.config(), 32, Precision::bf16};
  const Cluster c = round_cluster();
  SearchSpace space;
  space.tp = 1;
  space.pp = 1;
  space.micro_batch = 1;
  const SearchResult plain = search_layouts(spec, w, c, 32, space, 1000);
  ASSERT_FALSE(plain.best.empty());
  for (const Evaluation& e : plain.best) EXPECT_FALSE(e.layout.hybrid_shard()) << layout_string(e.layout);
  space.sharding = SearchSpace::Sharding::also_node;
  const SearchResult hybrid = search_layouts(spec, w, c, 32, space, 1000);
  int found = 0;
  for (const Evaluation& e : hybrid.best) {
    if (!e.layout.hybrid_shard()) continue;
    ++found;
    EXPECT_EQ(e.layout.shard, 8) << layout_string(e.layout);
    EXPECT_GE(e.layout.zero, 1);
  }
  // One hybrid twin of every plain ZeRO layout (all fit this tiny model).
  int zero_layouts = 0;
  for (const Evaluation& e : plain.best) zero_layouts += e.layout.zero >= 1;
  EXPECT_GT(zero_layouts, 0);
  EXPECT_EQ(found, zero_layouts);
  EXPECT_EQ(hybrid.enumerated, plain.enumerated + found);
}

TEST(UntiedEmbeddings, TheHeadIsItsOwnParameters) {
  // wte [V=96 padded to 96, C=64]: tied, one stage holds it once; untied, twice.
  ParamSplit p;
  p.block = 100;
  p.wte = 96 * 64;
  p.wpe = 64 * 64;
  p.lnf = 128;
  ParallelLayout one;
  EXPECT_DOUBLE_EQ(stage_params(p, one, 2, 0), 200 + 96 * 64 + 64 * 64 + 128);
  p.untied = true;
  EXPECT_DOUBLE_EQ(stage_params(p, one, 2, 0), 200 + 2 * 96 * 64 + 64 * 64 + 128);
  // Two stages: the last holds the head either way; untied, no tied-gradient all-reduce crosses.
  ParallelLayout two;
  two.pp = 2;
  EXPECT_DOUBLE_EQ(stage_params(p, two, 2, 1), 100 + 96 * 64 + 128);
  const ModelSpec& spec = tiny();
  Workload w{spec.config(), 8, Precision::bf16};
  Cluster c = round_cluster();
  const StepCosts tied = price_step(spec, two, w, c);
  w.untied_embeddings = true;
  const StepCosts untied = price_step(spec, two, w, c);
  EXPECT_GT(tied.dp_reduce[0], 0);
  EXPECT_DOUBLE_EQ(untied.dp_reduce[0], 0);  // dp = 1: only the tied all-reduce was there
  EXPECT_TRUE(untied_by_family(ModelConfig{.layers = 1, .hidden = 8, .heads = 1, .seq_len = 4, .vocab = 8,
                                           .mlp = MlpKind::gated}));
}

TEST(StackProfile, ChosenFromTheFrameworkText) {
  EXPECT_EQ(profile_for_framework("torchtitan @9dec370, torch.compile ON; AsyncTP ON").name, "torchtitan-compile");
  const StackProfile tt = profile_for_framework("torchtitan @1ea476e-era; torch.compile not stated");
  EXPECT_EQ(tt.name, "torchtitan");
  EXPECT_TRUE(*tt.flash_attention);
  EXPECT_FALSE(*tt.dropout);
  EXPECT_FALSE(*tt.tp_comm_overlap);
  EXPECT_TRUE(*profile_for_framework("torchtitan; torch.compile ON; AsyncTP ON").tp_comm_overlap);
  EXPECT_EQ(profile_for_framework("llm.c train_gpt2cu").name, "llm.c");
  EXPECT_EQ(profile_for_framework("Megatron-Core r0.8.0").name, "megatron-core");
  EXPECT_EQ(profile_for_framework("DeepSpeed + Megatron-LM (3D parallelism)").name, "megatron-deepspeed");
  EXPECT_EQ(profile_for_framework("Megatron-LM (2020)").zero_stages, 0);
  EXPECT_EQ(profile_for_framework("Megatron-LM (+DeepSpeed ZeRO-3 for ZeRO rows)", "ZeRO-3 (DeepSpeed)").name,
            "deepspeed-zero3");
  EXPECT_EQ(profile_for_framework("JAX/MaxText").name, "preset");
  for (const std::string& n : profile_names()) EXPECT_EQ(stack_profile(n).value().name, n);
  EXPECT_FALSE(stack_profile("bogus").ok());
}

TEST(StackProfile, ScalesThePresetsParameters) {
  Cluster c = round_cluster();
  c.eff.gemm_max = 0.5;
  c.eff.flash = 0.4;
  c.eff.kernel_overhead = 2e-6;
  c.eff.intra_link = c.eff.inter_link = 0.5;
  StackProfile p;
  p.flash_attention = true;
  p.params = StackParams{1.5, 2, 0.25, 1.2};
  const Cluster a = apply_profile(c, p);
  EXPECT_DOUBLE_EQ(a.eff.gemm_max, 0.75);
  EXPECT_DOUBLE_EQ(a.eff.flash, 0.6);
  EXPECT_DOUBLE_EQ(a.eff.kernel_overhead, 4e-6);
  EXPECT_DOUBLE_EQ(a.eff.overlap_loss, 0.25);
  EXPECT_DOUBLE_EQ(a.eff.inter_link, 0.6);
  EXPECT_TRUE(a.stack.flash_attention);
  // gemm_max never exceeds the peak.
  p.params.gemm_scale = 3;
  EXPECT_DOUBLE_EQ(apply_profile(c, p).eff.gemm_max, 1.0);
}

// Issue 36: one precision vocabulary. bf16 is tera's bf16 (fp32 states and
// activations, bf16 GEMM inputs) unless the stack keeps every activation in
// 16 bits, as the published runs' stacks (and the GPU presets) do.
TEST(PrecisionVocabulary, Bf16IsTerasUnlessTheStackKeeps16BitActivations) {
  EXPECT_EQ(parse_precision("bf16").value(), Precision::bf16);
  EXPECT_EQ(parse_precision("mixed").value(), Precision::bf16);
  EXPECT_EQ(parse_precision("fp16").value(), Precision::bf16);
  EXPECT_EQ(parse_precision("fp32").value(), Precision::fp32);
  EXPECT_STREQ(precision_name(Precision::bf16), "bf16");
  EXPECT_NE(parse_precision("int8").error().find("bf16 or fp32"), std::string::npos);
  Stack tera_stack, sixteen;
  sixteen.activations_16bit = true;
  // tera's bf16: the fp32 states (its parameters are the masters), fp32
  // activations, bf16 GEMM inputs (the memory plan's cast buffers and copies).
  const PrecisionBytes t = precision_bytes(Precision::bf16, tera_stack);
  EXPECT_EQ(t.param, 4);
  EXPECT_EQ(t.master, 0);
  EXPECT_EQ(t.act, DType::f32);
  EXPECT_EQ(gemm_input_dtype(Precision::bf16, tera_stack), DType::bf16);
  // The 16-bit stacks: 2 B weights, fp32 grads, 4 B masters, 16-bit activations.
  const PrecisionBytes m = precision_bytes(Precision::bf16, sixteen);
  EXPECT_EQ(m.param, 2);
  EXPECT_EQ(m.grad, 4);
  EXPECT_EQ(m.master, 4);
  EXPECT_EQ(m.act, DType::bf16);
  EXPECT_EQ(gemm_input_dtype(Precision::bf16, sixteen), DType::f32);
  // fp32 is fp32 on any stack.
  for (const Stack& s : {tera_stack, sixteen}) {
    EXPECT_EQ(precision_bytes(Precision::fp32, s).act, DType::f32);
    EXPECT_EQ(gemm_input_dtype(Precision::fp32, s), DType::f32);
  }
  // Every framework's profile keeps 16-bit activations; "tera" is the runtime's
  // stack; "preset" leaves the cluster file's choice.
  for (const std::string& n : profile_names()) {
    const StackProfile p = stack_profile(n).value();
    if (n == "preset") {
      EXPECT_FALSE(p.activations_16bit.has_value());
    } else {
      EXPECT_EQ(*p.activations_16bit, n != "tera") << n;
    }
  }
  const Cluster on_tera = apply_profile(round_cluster(), stack_profile("tera").value());
  EXPECT_FALSE(on_tera.stack.activations_16bit);
  EXPECT_TRUE(on_tera.stack.flash_attention);
  EXPECT_FALSE(on_tera.stack.dropout);
}

// The key is written and read back; the old key is read when false and
// refused, with the fix, when true.
TEST(PrecisionVocabulary, ClusterFilesCarryTheStackKey) {
  Cluster c = round_cluster();
  c.name = "round";
  for (bool v : {false, true}) {
    c.stack.activations_16bit = v;
    auto back = parse_cluster_toml(cluster_to_toml(c, "# test\n"), "round.toml");
    ASSERT_TRUE(back.ok()) << back.error();
    EXPECT_EQ(back->stack.activations_16bit, v);
  }
  std::string text = cluster_to_toml(c, "");
  const size_t at = text.find("activations_16bit");
  ASSERT_NE(at, std::string::npos);
  std::string old = text;
  old.replace(at, text.find('\n', at) - at, "bf16_gemm_inputs = false");
  EXPECT_TRUE(parse_cluster_toml(old, "old.toml").ok());
  old = text;
  old.replace(at, text.find('\n', at) - at, "bf16_gemm_inputs = true");
  auto refused = parse_cluster_toml(old, "old.toml");
  ASSERT_FALSE(refused.ok());
  for (const char* word : {"old.toml", "stack.bf16_gemm_inputs", "--precision bf16", "delete the key"}) {
    EXPECT_NE(refused.error().find(word), std::string::npos) << refused.error();
  }
}

}  // namespace
}  // namespace tera
