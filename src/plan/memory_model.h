// Bytes per GPU for a layout: the runtime's own memory plan
// (partition/memory_plan.h: every buffer tera allocates on a rank, by class) plus
// the allowances a real GPU stack adds on top, each on its own line (DESIGN.md
// invariant 2; tests/plan/test_memory_plan_equality.cpp holds the plan's
// bytes equal to what the runtime allocates, per rank and class):
//   allocator   the caching allocator's fragmentation: a fraction of the plan
//               (memory.fragmentation in the cluster preset);
//   reserved    framework and communication library: CUDA/HIP context,
//               NCCL/RCCL buffers, cuBLAS/hipBLAS workspaces (memory.reserved_bytes).
// The rank reported for a stage is its tensor-parallel rank 0 (every tp rank
// holds the same shapes) and data-parallel rank 0 (whose ZeRO chunks hold the
// most parameters: padding sits at the end of each unit). A layout fits when
// the fullest stage fits. Precision mixed prices tera's bf16 runtime: bf16
// weights and activations, fp32 gradients, fp32 master weights sharded with
// the optimizer state (memory_plan.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_spec.h"
#include "partition/memory_plan.h"
#include "partition/rank_plan.h"
#include "plan/hardware.h"
#include "plan/layout.h"

namespace tera {

struct MemoryBreakdown {
  int stage = 0;
  MemoryReport plan;      // the runtime's buffers on this GPU, by class
  double allocator = 0;   // allowance: allocator fragmentation
  double reserved = 0;    // allowance: framework + NCCL/RCCL + library workspaces
  // FSDP with reshard_after_forward off (ParallelLayout): the stage's blocks'
  // parameters held gathered (16-bit where the stack keeps them so) from the
  // forward to the backward and, under pipeline parallelism, their
  // gradients accumulated unsharded until the step's one reduce-scatter:
  // beyond the runtime's plan, which gathers a block at a time.
  double fsdp_unsharded = 0;
  double model() const { return static_cast<double>(plan.total()) + fsdp_unsharded; }
  double total() const { return model() + allocator + reserved; }
  // Parameters, gradients and optimizer state with their ZeRO buffers: what
  // data parallelism shards.
  double states() const;
};

// Parameter counts on one tensor-parallel rank: one block, the token
// embedding (vocab-parallel; the tied output embedding is a copy of it),
// position embedding and final norm (for the cost model's optimizer and
// communication volumes).
struct ParamSplit {
  double block = 0, wte = 0, wpe = 0, lnf = 0;
  // Untied output embedding (Llama): the last stage holds its own [V/tp, C]
  // head beside the input embedding, and no tied gradient crosses the pipeline.
  bool untied = false;
};
ParamSplit param_split(const ModelSpec& spec, int tp);
// Parameters one GPU of pipeline stage `stage` holds (after the tensor-parallel
// split, before ZeRO): its layers, plus the embeddings on the first stage and
// the final norm and tied output embedding on the last.
double stage_params(const ParamSplit& p, const ParallelLayout& l, int64_t layers, int stage);
int64_t stage_params(const ModelSpec& spec, const ParallelLayout& l, int stage);

// The dtypes and activation extras a stack keeps at a precision: the rank
// plan's precision (partition/rank_plan.h). tera's bf16 (the `tera` stack):
// bf16 GEMM inputs over fp32 activations; all-16-bit stacks
// (stack.activations_16bit): bf16 activations and weights.
RankPrecision rank_precision(const Workload& w, const Cluster& cl);

// PyTorch's op-level selective activation checkpointing (torchtitan's
// "selective", Stack::op_level_sac) saves, per block and token of a
// micro-batch, beyond the block's input that full recompute keeps: the
// attention kernel's output and the odd-numbered matmuls' outputs (its policy
// counts a block's matmuls from one and saves every other: Llama's wq, wv, w1
// and w2 of wq, wk, wv, wo, w1, w3, w2; GPT's fused qkv and fc), and under
// sequence parallelism the two reduce-scatters' outputs. Elements per token on
// one tensor-parallel rank: a column-parallel output is 1/tp of its width, a
// row-parallel one (wo, w2) the full hidden (partial sums before their reduction).
double op_sac_saved_per_token(const ModelSpec& spec, int tp, bool sequence_parallel);

// The memory of layouts of one workload on one cluster: the rank plans
// (partition/rank_plan.h, whose planner remembers what layouts share: the
// search prices tens of thousands) plus the allowances.
class MemoryTables {
 public:
  MemoryTables(const ModelSpec& spec, const Workload& w, const Cluster& cl)
      : cl_(cl), spec_(spec), untied_(w.untied_embeddings), pb_(precision_bytes(w.precision, cl.stack)),
        planner_(spec, RankBatch{.global_batch = w.global_batch, .seq_len = spec.config().seq_len},
                          rank_precision(w, cl)) {}
  // The rank plan's bytes of rank (stage, zero_rank) of l at tp rank 0;
  // zero_rank indexes the dp * cp ranks of its ZeRO group. Under op-level
  // SAC (Stack::op_level_sac, recompute selective): the full-recompute plan
  // plus op_sac_saved_per_token for every block and slot.
  MemoryReport rank_plan(const ParallelLayout& l, int stage, int zero_rank = 0);
  // The fullest stage, with the allowances.
  MemoryBreakdown per_gpu(const ParallelLayout& l);
  // The plan of `stage` of l with what the plan leaves out (fsdp_unsharded) and the allowances.
  MemoryBreakdown with_allowances(const ParallelLayout& l, const MemoryReport& plan, int stage) const;
  // What FSDP without reshard_after_forward holds beyond the plan on `stage`.
  double fsdp_unsharded(const ParallelLayout& l, int stage) const;

 private:
  Cluster cl_;
  ModelSpec spec_;
  bool untied_;
  PrecisionBytes pb_;
  RankPlanner planner_;
};

// One-off forms of MemoryTables.
MemoryBreakdown memory_per_gpu(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl);
MemoryBreakdown stage_memory(const ModelSpec& spec, const ParallelLayout& l, const Workload& w, const Cluster& cl,
                             int stage);

}  // namespace tera
