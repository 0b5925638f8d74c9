// The memory model against hand-worked examples (stated in each test) and
// against ModelSpec's single-process tables.
#include <gtest/gtest.h>

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
  return c;
}

ModelConfig small_gpt() {
  return ModelConfig{.layers = 8, .hidden = 64, .heads = 4, .seq_len = 32, .vocab = 1000, .ffn_hidden = 0, .vocab_align = 8};
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
  // Mixed precision, Megatron's conventions, one stage holding P parameters
  // on dp = 4 ranks:
  //   zero 0: 2P weights + 4P fp32 grads + 12P (master + Adam m, v) = 18P
  //   zero 1: 2P + 4P + 12P/4                                       = 9P
  //   zero 2: 2P + 2P/4 (16-bit grads, sharded) + 12P/4             = 5.5P
  //   zero 3: 2P/4 + 2P/4 + 12P/4                                    = 4P (+ two gathered blocks)
  const ModelSpec spec(small_gpt());
  const Cluster cl = plain_cluster();
  Workload w{small_gpt(), 16, Precision::mixed};
  ParallelLayout l;
  l.dp = 4;
  const double P = static_cast<double>(spec.num_params_alloc());
  const double expect[4] = {18 * P, 9 * P, 5.5 * P, 4 * P};
  for (int z = 0; z < 4; ++z) {
    l.zero = z;
    const MemoryBreakdown m = memory_per_gpu(spec, l, w, cl);
    EXPECT_DOUBLE_EQ(m.params + m.grads + m.optimizer, expect[z]) << "zero " << z;
  }
  l.zero = 3;
  const MemoryBreakdown m3 = memory_per_gpu(spec, l, w, cl);
  EXPECT_DOUBLE_EQ(m3.zero3_gather, 2 * param_split(spec, 1).wte * 2);  // wte (64,000) > a block (49,984)
  // fp32: 4P weights + 4P grads + 8P Adam moments, no master copy.
  w.precision = Precision::fp32;
  l.zero = 0;
  const MemoryBreakdown f = memory_per_gpu(spec, l, w, cl);
  EXPECT_DOUBLE_EQ(f.params + f.grads + f.optimizer, 16 * P);
}

TEST(MemoryModel, SingleProcessMatchesModelSpecTables) {
  // pp = tp = dp = 1: the planner's activation and workspace bytes are the
  // runtime's tables (ModelSpec::activation_bytes / workspace_bytes), for
  // every recompute policy.
  const ModelSpec spec(small_gpt());
  const Cluster cl = plain_cluster();
  for (Recompute rc : {Recompute::none, Recompute::selective, Recompute::full}) {
    for (Precision prec : {Precision::fp32, Precision::mixed}) {
      Workload w{small_gpt(), 12, prec};
      ParallelLayout l;
      l.micro_batch = 3;
      l.recompute = rc;
      const MemoryBreakdown m = memory_per_gpu(spec, l, w, cl);
      ActivationOptions o;
      o.recompute = rc;
      o.dtype = precision_bytes(prec).act;
      int64_t want = spec.activation_bytes(3, 32, o);
      if (rc == Recompute::selective) want += table_bytes(spec.block_activations(3, 32, o)) -
                                              table_bytes(spec.saved_block_activations(3, 32, o));
      EXPECT_DOUBLE_EQ(m.activations, static_cast<double>(want)) << recompute_name(rc);
      EXPECT_DOUBLE_EQ(m.workspace, static_cast<double>(spec.workspace_bytes(3, 32, o)));
      EXPECT_DOUBLE_EQ(m.comm_buffers, 0);
    }
  }
}

TEST(MemoryModel, PipelineInFlightFromSchedule) {
  // 1F1B: the first of p stages holds p micro-batches of L/p layers, i.e. L
  // layers' activations (Korthikanti et al. 2022, Sec. 4.2.3); the last holds
  // one. The interleaved schedule holds more on stage 0:
  // 2(p-1) + (v-1)p + 1 chunks of L/(pv) layers.
  const ModelSpec spec(small_gpt());
  const Cluster cl = plain_cluster();
  Workload w{small_gpt(), 16, Precision::mixed};
  ParallelLayout l;
  l.pp = 4;
  ActivationOptions o;
  o.dtype = DType::bf16;
  const double layer = static_cast<double>(table_bytes(spec.saved_block_activations(1, 32, o)));
  // Stage 0 of 4 holds the embedding end of the chunk boundary (tokens,
  // input, grad_in per micro-batch), as the runtime allocates it.
  const double head_in = static_cast<double>(table_bytes(spec.chunk_activations(1, 32, o, true, false)));
  const MemoryBreakdown first = stage_memory(spec, l, w, cl, 0, promised_in_flight(l.schedule, 4, 16, 1, 0));
  EXPECT_DOUBLE_EQ(first.activations, 8 * layer + 4 * head_in);
  l.vpp = 2;
  l.schedule = ScheduleKind::interleaved;
  auto sch = make_schedule(l.schedule, 4, 16, 2);
  ASSERT_TRUE(sch.ok());
  const MemoryBreakdown inter = memory_per_gpu(spec, l, w, cl, *sch);
  EXPECT_EQ(inter.stage, 0);
  EXPECT_DOUBLE_EQ(inter.activations, (2 * 3 + 1 * 4 + 1) * 1 * layer + 11 * head_in);
  EXPECT_GT(inter.activations, first.activations);
  // The closed form the search uses agrees with the schedule it describes.
  EXPECT_DOUBLE_EQ(memory_per_gpu(spec, l, w, cl).total(), inter.total());
}

TEST(MemoryModel, AllowancesOnTop) {
  // Fragmentation is a fraction of everything the model holds; reserved is added as is.
  const ModelSpec spec(small_gpt());
  Cluster cl = plain_cluster();
  Workload w{small_gpt(), 4, Precision::mixed};
  ParallelLayout l;
  const double bare = memory_per_gpu(spec, l, w, cl).total();
  cl.memory.fragmentation = 0.1;
  cl.memory.reserved_bytes = 1e9;
  const MemoryBreakdown m = memory_per_gpu(spec, l, w, cl);
  EXPECT_DOUBLE_EQ(m.fragmentation, 0.1 * bare);
  EXPECT_DOUBLE_EQ(m.total(), 1.1 * bare + 1e9);
}

TEST(MemoryModel, SequenceParallelAndTensorParallelShrinkActivations) {
  // Korthikanti et al.: tp divides all but 10sbh of the 34sbh + 5as^2b, sequence
  // parallelism divides the rest too; selective drops the 5as^2b.
  const ModelSpec spec(small_gpt());
  const Cluster cl = plain_cluster();
  Workload w{small_gpt(), 8, Precision::mixed};
  ParallelLayout a, b, c;
  b.tp = 4;
  c.tp = 4;
  c.sequence_parallel = true;
  const double ma = memory_per_gpu(spec, a, w, cl).activations;
  const double mb = memory_per_gpu(spec, b, w, cl).activations;
  const double mc = memory_per_gpu(spec, c, w, cl).activations;
  EXPECT_LT(mb, ma);
  EXPECT_LT(mc, mb);
}

}  // namespace
}  // namespace tera
