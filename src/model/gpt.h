// GPT-2 with hand-written forward and backward over preallocated buffers
// (DESIGN.md invariant 4), on one rank of a tensor-parallel group (tp = 1 is
// the plain model). Every buffer comes from a ModelSpec table and is carved
// out of one arena per class, allocated before step 1. Parameters and
// gradients are reached unit by unit through a ParamMemory
// (model/param_memory.h), so data parallelism decides where they live.
//
// Shape legend: B = micro-batch, T = sequence, N = B*T tokens, C = hidden,
// p = tp degree, Cl = C/p, Hl = H/p heads, Fl = F/p, Vl = padded vocab / p,
// Nt = N/p tokens under sequence parallelism (else N). Per block (pre-LN):
//   ln1  = LN(x)                               [Nt, C]
//   qkv  = sp_gather(ln1) @ Wqkv_l^T + b_l     [N, 3Cl]   column-parallel (tp_copy)
//   atty = attention(qkv) over local heads     [N, Cl]
//   res1 = x + sp_scatter|tp_reduce(atty @ Wo_l^T) + b      row-parallel   [Nt, C]
//   ln2  = LN(res1)                            [Nt, C]
//   fch  = sp_gather(ln2) @ Wfc_l^T + b_l      [N, Fl]    column-parallel
//   out  = res1 + sp_scatter|tp_reduce(gelu(fch) @ Wfp_l^T) + b              [Nt, C]
// Embedding: vocab-parallel lookup, summed over the group (tp_reduce or
// sp_scatter), plus positions. Head: logits = sp_gather(LN_f(x)) @ wte_l^T
// [N, Vl]; the loss reduces the row max and sums over the group, so the full
// logits never exist on one rank. The head's backward runs eagerly inside the
// forward (the logits never outlive it); only dx_head is kept per micro-batch.
// With full recomputation each block keeps only its output (the next block's
// input) and its forward is rerun from its input just before its backward,
// into one shared block-sized working set (Recompute::full in ModelSpec).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "kernels/backend.h"
#include "model/block_tensors.h"
#include "model/memory_report.h"
#include "model/model_spec.h"
#include "model/param_memory.h"
#include "model/param_table.h"
#include "model/stage_plan.h"
#include "model/tensor_parallel.h"

namespace tera {

class Gpt {
 public:
  struct Options {
    Recompute recompute = Recompute::none;
    StagePlan plan;                // this pipeline stage's chunks (empty: the whole model)
    std::vector<int> slots;        // micro-batches in flight per chunk (empty: 1 each)
  };

  // One process, the whole model: owns a ParamTable and resident
  // LocalParamMemory. Buffers for micro-batches of up to `max_batch`
  // sequences of up to seq_len tokens.
  Gpt(const ModelSpec& spec, const Backend& backend, int64_t max_batch);
  // One pipeline stage of one tensor-parallel rank: parameters and gradients
  // live in `memory`, laid out by `table` (built for this rank's tensor
  // shard and this stage's plan); `tp` is this rank's group. All outlive the model.
  Gpt(const ModelSpec& spec, const Backend& backend, int64_t max_batch, const ParamTable& table,
      ParamMemory& memory, TensorParallel& tp, const Options& options);
  Gpt(const ModelSpec& spec, const Backend& backend, int64_t max_batch, const ParamTable& table,
      ParamMemory& memory, TensorParallel& tp)
      : Gpt(spec, backend, max_batch, table, memory, tp, Options()) {}
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  const ModelSpec& spec() const { return spec_; }
  const ParamTable& table() const { return table_; }
  int64_t max_batch() const { return max_batch_; }
  const ActivationOptions& activation_options() const { return opts_; }
  const StagePlan& plan() const { return table_.plan(); }

  // Resident memory only (the one-process constructor): the whole arenas.
  float* params();
  const float* params() const;
  float* grads();
  void init_parameters(uint64_t seed);
  void zero_grads();

  // --- Pipeline interface: chunk c of this stage, activation slot k. -------
  int chunks() const { return static_cast<int>(plan().chunks.size()); }
  int slots(int c) const { return static_cast<int>(slots_[static_cast<size_t>(c)].size()); }
  // Forward of one micro-batch through chunk c into slot k. A chunk with the
  // embedding reads tokens [B,T]; any other reads input(c, k). A chunk with
  // the head reads targets [B,T], computes the loss and, when training, the
  // head's backward (gradients scaled by dloss). Returns the sum of the B*T
  // per-token losses (0 without the head).
  double forward(int c, int k, const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float dloss,
                 bool train);
  // Backward of chunk c, slot k, from the head's gradient or grad_in(c, k);
  // leaves d(input) in grad_out(c, k) (a chunk without the embedding).
  void backward(int c, int k, int64_t B, int64_t T);
  // The message buffers, each [Nt, C] (activation_floats): what a pipeline
  // receives into (input, grad_in) and sends from (output, grad_out).
  float* input(int c, int k);
  const float* output(int c, int k) const;
  float* grad_in(int c, int k);
  const float* grad_out(int c, int k) const;
  int64_t activation_floats(int64_t B, int64_t T) const { return rows(B * T) * spec_.config().hidden; }

  // --- One stage holding the whole model (slot 0). ---------------------------
  // Forward, loss, backward; gradients accumulate (+=) scaled by dloss (the
  // caller passes 1 / tokens in the global batch, so the sum over
  // micro-batches and ranks is the gradient of the mean loss). tokens,
  // targets: [B,T], the whole micro-batch on every tensor-parallel rank.
  // Returns the sum of the B*T per-token losses.
  double forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float dloss);
  // Forward and loss only (evaluation). Returns the sum of per-token losses.
  double forward_loss(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T);
  // tp = 1 only. Logits [B,T,Vp] of every position (no loss); valid until the next call.
  const float* logits(const int32_t* tokens, int64_t B, int64_t T);
  // tp = 1 only. Logits [Vp] of the last position of one sequence tokens[T] (generation).
  const float* last_logits(const int32_t* tokens, int64_t T);

  MemoryReport memory() const;  // bytes held by each buffer class

 private:
  // A block's views (BlockWeights, BlockActs) and the tables binding them to
  // ModelSpec's names are in model/block_tensors.h.
  // One micro-batch's buffers in one chunk (null where the chunk has no use).
  struct Slot {
    int32_t *tokens = nullptr, *targets = nullptr;
    float *input = nullptr, *losses = nullptr, *dx_head = nullptr, *grad_in = nullptr, *grad_out = nullptr;
    std::vector<BlockActs> blocks;  // the chunk's layers, in order
  };
  struct Workspace {
    float *lnf, *lnf_mean, *lnf_rstd, *logits, *ce_stats, *dres, *dwide, *dnarrow, *lnf_shard, *full;
  };
  struct Weights {  // of the wte and io units (null where this stage has none)
    float *wte, *wpe, *lnf_g, *lnf_b;
  };
  struct ActivationLayout;  // arena offsets of every activation buffer (gpt.cpp)

  // Allocates the activation and workspace arenas and binds every view, before
  // step 1, by the steps below in this order (each commented in gpt.cpp).
  void init_buffers(const std::vector<int>& slots);
  void derive_local_sizes();
  ActivationLayout lay_out_activations(const std::vector<int>& slots) const;
  void bind_recompute_working_set(const ActivationLayout& layout);
  void bind_slots(const ActivationLayout& layout);
  void lay_out_workspace();
  void bind_block_weight_offsets();
  void bind_wte_io_offsets();

  // Embedding (if the chunk has it) and the chunk's blocks, into slot (c, k).
  void forward_body(int c, int k, const int32_t* tokens, int64_t B, int64_t T);
  BlockWeights block_weights(const float* base, int64_t layer) const;
  Weights wte_io(const float* wte_base, const float* io_base) const;
  Weights acquire_wte_io(Pass pass);
  void release_wte_io(Pass pass);
  // sp_gather of a stored token shard into ws.full (or the tensor itself without sp).
  const float* gathered(const float* x_tokens, int64_t N);
  // A tensor-parallel partial sum over all N tokens (row-parallel linear,
  // vocab-parallel embedding) is computed into partial_sum_buffer(out) and
  // then reduced into out: all-reduced in place, or under sp reduce-scattered
  // from ws.full into this rank's token shard.
  float* partial_sum_buffer(float* out);
  void reduce_partial_sum(float* out, int64_t N);
  void embed_forward(const Weights& w, Slot& s, int64_t B, int64_t T);
  void embed_backward(const Weights& w, const Weights& g, const Slot& s, const float* dres, int64_t B, int64_t T);
  void block_forward(const BlockActs& a, const BlockWeights& w, const float* x, int64_t B, int64_t T);
  // dres holds d(out of the block) on entry and d(its input) on exit.
  void block_backward(const BlockActs& a, const BlockWeights& w, const BlockWeights& g, const float* x, float* dres,
                      int64_t B, int64_t T);
  // LN_f + logits + loss; with backward also the head's backward into dx_head.
  double head_forward(const Weights& w, const float* x, Slot& s, int64_t B, int64_t T, float dloss, bool backward);
  const float* block_input(const Slot& s, size_t i) const { return i == 0 ? s.input : s.blocks[i - 1].out; }
  const float* chunk_output(const Slot& s) const { return s.blocks.empty() ? s.input : s.blocks.back().out; }
  // Rows of residual-stream tensors on this rank: N, or N / p under sequence parallelism.
  int64_t rows(int64_t N) const { return opts_.sequence_parallel ? N / tp_.size() : N; }
  int64_t first_token(int64_t N) const { return opts_.sequence_parallel ? tp_.rank() * (N / tp_.size()) : 0; }
  Slot& slot(int c, int k) { return slots_[static_cast<size_t>(c)][static_cast<size_t>(k)]; }
  const Slot& slot(int c, int k) const { return slots_[static_cast<size_t>(c)][static_cast<size_t>(k)]; }

  ModelSpec spec_;
  const Backend& be_;
  int64_t max_batch_;
  std::unique_ptr<ParamTable> own_table_;
  std::unique_ptr<LocalParamMemory> own_memory_;
  std::unique_ptr<SingleRankTensorParallel> own_tp_;
  const ParamTable& table_;
  ParamMemory& mem_;
  TensorParallel& tp_;
  ActivationOptions opts_;
  int64_t Cl_, Hl_, Fl_, Vl_, v0_, valid_vocab_;  // local widths; this rank's vocabulary columns [v0, v0 + Vl)
  Arena acts_, work_;
  std::vector<std::vector<Slot>> slots_;           // [chunk][slot]
  BlockActs recompute_acts_{};                     // full recompute: the working set, its `out` a scratch
  std::vector<BlockWeightOffsets> block_offsets_;  // per global layer (this stage's only)
  int64_t wte_io_offsets_[4] = {};                 // wte in its unit; wpe, ln_f.weight, ln_f.bias in io
  Workspace ws_{};
};

}  // namespace tera
