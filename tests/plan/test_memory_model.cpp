// The memory model against hand-worked examples (stated in each test) and
// against the one-process memory plan. (Against what the runtime really
// allocates, per rank and class: tests/train/test_memory_check.cpp.)
#include <gtest/gtest.h>

#include "partition/param_table.h"
#include "plan/memory_model.h"

namespace tera {
namespace {

// A cluster with round numbers and no allowances, so bytes can be hand-counted.
Cluster plain_cluster() {
  Cluster c;
  c.name = "plain";
  c.gpu.memory_bytes = 1e12;
  c.gpu.peak_flops_16 = 100e12;
  c.gpu.peak_flops_32 = 10e12;
  c.gpu.hbm_bw = 1e12;
  c.node.gpus = 8;
  c.node.intra_bw = c.node.package_bw = 100e9;
  c.node.nic_bw = 10e9;
  c.node.nics = 8;
  c.memory.reserved_bytes = 0;
  c.memory.fragmentation = 0;
  c.stack.dropout = false;
  // bf16 as the 16-bit stacks run it (16-bit weights and activations): the
  // hand-worked counts below; tera's own bf16 is SingleProcessIsTheResidentPlan's.
  c.stack.activations_16bit = true;
  return c;
}

// Naive attention, as plain_cluster's stack (no fused attention) prices it.
ModelConfig small_gpt() {
  ModelConfig m{.layers = 8, .hidden = 64, .heads = 4, .seq_len = 32, .vocab = 1000, .ffn_hidden = 0, .vocab_align = 8};
  m.attention = AttentionKind::naive;
  return m;
}

TEST(MemoryModel, BlockParamsSplitLikeMegatron) {
  // A GPT-2 block has 12h^2 + 13h parameters; on one of t tensor-parallel
  // ranks: QKV and fc split with their biases, both output projections split
  // (biases replicated), LayerNorms replicated: 12h^2/t + 7h/t + 6h.
  const ModelSpec spec(small_gpt());
  const double h = 64;
  EXPECT_DOUBLE_EQ(param_split(spec, 1).block, 12 * h * h + 13 * h);
  EXPECT_DOUBLE_EQ(param_split(spec, 4).block, 12 * h * h / 4 + 7 * h / 4 + 6 * h);
  // wte is vocab-parallel over the vocabulary padded to a multiple of
  // vocab_align * tp (1000 -> 1024 at tp 4), the rows the runtime allocates.
  EXPECT_DOUBLE_EQ(param_split(spec, 4).wte, 1024.0 * 64 / 4);
  EXPECT_DOUBLE_EQ(param_split(spec, 1).wte, 1000.0 * 64);
  // Stages: first has wte + wpe, last ln_f + the tied wte copy; pp = 1 counts wte once.
  ParallelLayout l;
  l.pp = 1;
  EXPECT_EQ(stage_params(spec, l, 0), spec.num_params_alloc());
  l.pp = 2;
  const ParamSplit p = param_split(spec, 1);
  EXPECT_DOUBLE_EQ(stage_params(p, l, 8, 0), 4 * p.block + p.wte + p.wpe);
  EXPECT_DOUBLE_EQ(stage_params(p, l, 8, 1), 4 * p.block + p.lnf + p.wte);
}

TEST(MemoryModel, ZeroStagesHandWorked) {
  // tera's buffers (partition/memory_plan.h) for one stage on dp = 4 ranks, in
  // floats: P = all units, R = the wte and io units, M = a block unit, K =
  // the largest chunk (wte / 4). small_gpt's tensors are multiples of 16 and
  // its units of 64 floats, so there is no padding and the Adam moments of a
  // rank are exactly P (zero 0) or P/4. Mixed precision (bf16 compute):
  //   zero 0: params 2P (bf16), grads 4P, optimizer 4P master + 8P moments = 18P
  //   zero 1: params 2P, grads 4P + 4P/4, optimizer 12P/4                  = 10P
  //   zero 2: params 2P, grads 4P/4, optimizer 12P/4, staging 4(R + 2M),
  //           reduce-scatter outputs 4 * 4K (one per staging buffer)
  //   zero 3: params 2P/4, gathered 2(R + 2M) (bf16), else as zero 2
  const ModelSpec spec(small_gpt());
  const Cluster cl = plain_cluster();
  Workload w{small_gpt(), 16, Precision::bf16};
  ParallelLayout l;
  l.dp = 4;
  const double wte = 1000 * 64, io = 32 * 64 + 64 + 64, M = 12 * 64 * 64 + 13 * 64;
  const double R = wte + io, P = R + 8 * M, K = wte / 4;
  using MC = MemoryClass;
  auto at = [](const MemoryBreakdown& m, MC c) { return static_cast<double>(m.plan[c]); };
  const double states[4] = {18 * P, 10 * P, 2 * P + 4 * P / 4 + 12 * P / 4 + 4 * (R + 2 * M) + 16 * K,
                            2 * P / 4 + 4 * P / 4 + 12 * P / 4 + 4 * (R + 2 * M) + 16 * K + 2 * (R + 2 * M)};
  for (int z = 0; z < 4; ++z) {
    l.zero = z;
    const MemoryBreakdown m = memory_per_gpu(spec, l, w, cl);
    EXPECT_DOUBLE_EQ(m.states(), states[z]) << "zero " << z;
    EXPECT_DOUBLE_EQ(at(m, MC::optimizer), z == 0 ? 12 * P : 3 * P) << "zero " << z;
  }
  l.zero = 3;
  const MemoryBreakdown m3 = memory_per_gpu(spec, l, w, cl);
  EXPECT_DOUBLE_EQ(at(m3, MC::zero_gather), 2 * (R + 2 * M));
  EXPECT_DOUBLE_EQ(at(m3, MC::parameters), 2 * P / 4);
  // fp32: 4P weights (also the masters) + 4P grads + 8P Adam moments.
  w.precision = Precision::fp32;
  l.zero = 0;
  EXPECT_DOUBLE_EQ(memory_per_gpu(spec, l, w, cl).states(), 16 * P);
}

TEST(MemoryModel, SingleProcessIsTheResidentPlan) {
  // pp = tp = dp = 1: the planner's buffers are the one-process memory plan
  // (what Gpt allocates) plus the optimizer state, for every recompute
  // policy, both precisions (bf16 as tera runs it and as the 16-bit stacks
  // do) and both attention kinds (the stack's fused attention and the
  // model's flash); activations are the whole model's tables.
  for (bool sixteen : {false, true}) {
  for (bool flash : {false, true}) {
  ModelConfig mc = small_gpt();
  mc.attention = flash ? AttentionKind::flash : AttentionKind::naive;
  const ModelSpec spec(mc);
  Cluster cl = plain_cluster();
  cl.stack.flash_attention = flash;
  cl.stack.activations_16bit = sixteen;
  const ParamTable table(spec);
  for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
    for (Precision prec : {Precision::fp32, Precision::bf16}) {
      Workload w{mc, 12, prec};
      ParallelLayout l;
      l.micro_batch = 3;
      l.recompute = rc;
      const MemoryBreakdown m = memory_per_gpu(spec, l, w, cl);
      ActivationOptions o;
      o.recompute = rc;
      o.dtype = precision_bytes(prec, cl.stack).act;
      o.gemm = gemm_input_dtype(prec, cl.stack);
      o.flash_attention = flash;
      const MemoryPlan plan = resident_memory_plan(spec, table, 3, o);
      for (MemoryClass c : kAllMemoryClasses) EXPECT_EQ(m.plan[c], plan.bytes(c)) << recompute_name(rc) << " " << memory_class_name(c);
      const ActivationTableBytes t = activation_table_bytes(spec, 3, 32, o);
      EXPECT_EQ(m.plan[MemoryClass::activations], t.boundary[1 << 3] + 8 * t.saved_layer + t.working);
    }
  }
  }
  }
}

TEST(MemoryModel, PipelineSlotsFromSchedule) {
  // A stage holds one slot per micro-batch the schedule keeps in flight, each
  // fit for any of its chunks: the union of their boundary buffers and the
  // largest chunk's layers (Megatron's bound). 1F1B: the first of 4 stages
  // holds 4 micro-batches of its L/4 = 2 layers (Korthikanti et al. 2022,
  // Sec. 4.2.3) with the embedding end of the boundary; the last holds one.
  // Interleaved with 2 chunks and 16 micro-batches: stage 0 keeps
  // 2(p-1) + (v-1)p + 1 = 11 in flight, chunks of one layer, the boundary of
  // the embedding's chunk and of a middle chunk.
  const ModelSpec spec(small_gpt());
  const Cluster cl = plain_cluster();
  Workload w{small_gpt(), 16, Precision::bf16};
  ParallelLayout l;
  l.pp = 4;
  ActivationOptions o;
  o.dtype = DType::bf16;
  const ActivationTableBytes t = activation_table_bytes(spec, 1, 32, o);
  const int embedding_end = 1 << 2, middle = 1 << 0, head_end = 1 << 1;  // chunk kinds: bit 2*embedding + head
  const MemoryBreakdown first = stage_memory(spec, l, w, cl, 0);
  EXPECT_EQ(first.plan[MemoryClass::activations], 4 * (2 * t.saved_layer + t.boundary[embedding_end]));
  const MemoryBreakdown last = stage_memory(spec, l, w, cl, 3);
  EXPECT_EQ(last.plan[MemoryClass::activations], 2 * t.saved_layer + t.boundary[head_end]);
  EXPECT_GT(last.plan[MemoryClass::workspace], first.plan[MemoryClass::workspace]);  // the head's logits
  l.vpp = 2;
  l.schedule = ScheduleKind::interleaved;
  const MemoryBreakdown inter = stage_memory(spec, l, w, cl, 0);
  EXPECT_EQ(inter.plan[MemoryClass::activations], 11 * (t.saved_layer + t.boundary[embedding_end | middle]));
  auto sch = make_schedule(ScheduleKind::interleaved, 4, 16, 2);
  ASSERT_TRUE(sch.ok());
  EXPECT_EQ(sch->max_in_flight(0), 11);
  EXPECT_GT(inter.plan[MemoryClass::activations], first.plan[MemoryClass::activations]);
  // The union holds what each kind of chunk needs, each buffer once.
  EXPECT_GT(t.boundary[embedding_end | middle], t.boundary[embedding_end]);
  EXPECT_LT(t.boundary[embedding_end | middle], t.boundary[embedding_end] + t.boundary[middle]);
}

TEST(MemoryModel, OpLevelSelectiveCheckpointingSavesEveryOtherMatmul) {
  // PyTorch's op-level SAC (torchtitan's "selective"): per token of a block,
  // the attention output and the odd-numbered matmul outputs. Llama with
  // C = 64, 4 heads of 16, 2 kv heads (kv = 32), F = 160, tp 1: wq (64), wv
  // (32), w1 (160), w2 (64) + attention 64 = 384 elements. tp 2 with
  // sequence parallelism: 32 + 16 + 80 + 64 (w2 is row-parallel: the whole
  // hidden) + 32, plus two reduce-scatter outputs of 32 = 288. GPT, fused
  // qkv (3 x 64) and fc (256), tp 1: 192 + 256 + 64 = 512.
  ModelConfig llama{.layers = 4, .hidden = 64, .heads = 4, .seq_len = 32, .vocab = 1000, .ffn_hidden = 160,
                    .vocab_align = 8};
  llama.kv_heads = 2;
  llama.mlp = MlpKind::gated;
  EXPECT_DOUBLE_EQ(op_sac_saved_per_token(ModelSpec(llama), 1, false), 384);
  EXPECT_DOUBLE_EQ(op_sac_saved_per_token(ModelSpec(llama), 2, true), 288);
  EXPECT_DOUBLE_EQ(op_sac_saved_per_token(ModelSpec(small_gpt()), 1, false), 512);
  // The planner's memory under it: what full recompute holds plus those
  // tensors for every block of the stage and micro-batch in flight (1F1B,
  // first of 2 stages of 2 blocks each, 2 in flight), 16-bit.
  Cluster cl = plain_cluster();
  cl.stack.op_level_sac = true;
  const ModelSpec spec(llama);
  const Workload w{llama, 4, Precision::bf16};
  ParallelLayout l;
  l.pp = 2;
  l.micro_batch = 1;
  l.recompute = Recompute::full;
  const MemoryBreakdown full = stage_memory(spec, l, w, cl, 0);
  l.recompute = Recompute::selective;
  const MemoryBreakdown sac = stage_memory(spec, l, w, cl, 0);
  EXPECT_EQ(sac.plan[MemoryClass::activations] - full.plan[MemoryClass::activations], 2 * 2 * 32 * 384 * 2);
  EXPECT_EQ(sac.states(), full.states());
  // Interleaved, 2 chunks of one block per stage: a slot is one micro-batch
  // of one chunk, so each slot holds one block's saved tensors.
  l.vpp = 2;
  l.schedule = ScheduleKind::interleaved;
  auto sch = make_schedule(ScheduleKind::interleaved, 2, 4, 2);
  ASSERT_TRUE(sch.ok());
  const int64_t slots = sch->max_in_flight(0);
  l.recompute = Recompute::full;
  const MemoryBreakdown full_i = stage_memory(spec, l, w, cl, 0);
  l.recompute = Recompute::selective;
  const MemoryBreakdown sac_i = stage_memory(spec, l, w, cl, 0);
  EXPECT_EQ(sac_i.plan[MemoryClass::activations] - full_i.plan[MemoryClass::activations], slots * 1 * 32 * 384 * 2);
  // Megatron's selective (attention core only) is the rank plan's own: with
  // flash attention it keeps every block's activations, more than op-level SAC.
  cl.stack.op_level_sac = false;
  l.vpp = 1;
  l.schedule = ScheduleKind::one_f_one_b;
  EXPECT_GT(stage_memory(spec, l, w, cl, 0).plan[MemoryClass::activations], sac.plan[MemoryClass::activations]);
}

TEST(MemoryModel, AllowancesOnTop) {
  // The allocator allowance is a fraction of tera's buffers; reserved is added as is.
  const ModelSpec spec(small_gpt());
  Cluster cl = plain_cluster();
  Workload w{small_gpt(), 4, Precision::bf16};
  ParallelLayout l;
  const double bare = memory_per_gpu(spec, l, w, cl).total();
  cl.memory.fragmentation = 0.1;
  cl.memory.reserved_bytes = 1e9;
  const MemoryBreakdown m = memory_per_gpu(spec, l, w, cl);
  EXPECT_DOUBLE_EQ(m.model(), bare);
  EXPECT_DOUBLE_EQ(m.allocator, 0.1 * bare);
  EXPECT_DOUBLE_EQ(m.total(), 1.1 * bare + 1e9);
}

TEST(MemoryModel, SequenceParallelAndTensorParallelShrinkActivations) {
  // Korthikanti et al.: tp divides all but 10sbh of the 34sbh + 5as^2b, sequence
  // parallelism divides the rest too; selective drops the 5as^2b.
  const ModelSpec spec(small_gpt());
  const Cluster cl = plain_cluster();
  Workload w{small_gpt(), 8, Precision::bf16};
  ParallelLayout a, b, c;
  b.tp = 4;
  c.tp = 4;
  c.sequence_parallel = true;
  const auto act = [&](const ParallelLayout& l) { return memory_per_gpu(spec, l, w, cl).plan[MemoryClass::activations]; };
  EXPECT_LT(act(b), act(a));
  EXPECT_LT(act(c), act(b));
}

}  // namespace
}  // namespace tera
