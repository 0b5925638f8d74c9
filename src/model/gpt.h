// GPT-2 with hand-written forward and backward over preallocated buffers
// (DESIGN.md invariant 4), on one rank of a tensor-parallel group (tp = 1 is
// the plain model). Every buffer comes from a ModelSpec table and is carved
// out of one arena per class, allocated before step 1. Parameters and
// gradients are reached unit by unit through a ParamMemory
// (model/param_memory.h), so data parallelism decides where they live.
// Every tensor is device memory of the backend (model/rank_memory.h): Gpt
// never reads or writes it from the host. Token ids come in from the host and
// are copied to the device; the loss sum stays on the device
// (StepScalars::loss of step_scalars()) until the caller copies it, once per step.
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

#include "kernels/backend.h"
#include "model/block_tensors.h"
#include "model/memory_plan.h"
#include "model/memory_report.h"
#include "model/model_spec.h"
#include "model/param_memory.h"
#include "model/param_table.h"
#include "model/rank_memory.h"
#include "model/stage_plan.h"
#include "model/tensor_parallel.h"

namespace tera {

class Gpt {
 public:
  struct Options {
    Recompute recompute = Recompute::none;
    DType gemm = DType::f32;       // the linear layers' inputs: f32, or bf16 (train.precision = "bf16")
    StagePlan plan;                // this pipeline stage's chunks (empty: the whole model)
    int slots = 1;                 // micro-batch slots: the schedule's most in flight at once
  };

  // One process, the whole model: owns a ParamTable, its memory plan (every
  // class but the optimizer's, which a model alone does not hold) and
  // resident LocalParamMemory. Buffers for micro-batches of up to
  // `max_batch` sequences of up to seq_len tokens.
  Gpt(const ModelSpec& spec, const Backend& backend, int64_t max_batch);
  // One pipeline stage of one tensor-parallel rank: parameters and gradients
  // live in `memory`, laid out by `table` (built for this rank's tensor
  // shard and this stage's plan); activations and workspace are the
  // activations and workspace classes of `rank_memory`, allocated from the
  // rank's memory plan for the same options. `tp` is this rank's group. All
  // outlive the model.
  Gpt(const ModelSpec& spec, const Backend& backend, int64_t max_batch, const ParamTable& table,
      ParamMemory& memory, TensorParallel& tp, const Options& options, RankMemory& rank_memory);
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;

  // The memory plan of the one-process model (what the first constructor allocates).
  static MemoryPlan single_process_plan(const ModelSpec& spec, const ParamTable& table, int64_t max_batch);

  const ModelSpec& spec() const { return spec_; }
  const ParamTable& table() const { return table_; }
  int64_t max_batch() const { return max_batch_; }
  const ActivationOptions& activation_options() const { return opts_; }
  const StagePlan& plan() const { return table_.plan(); }

  // --- Resident memory only (the one-process constructor) ---------------------
  // Device pointers to the whole arenas (host code may read them only where
  // the backend's memory is host memory: the cpu backend in tests).
  float* params();
  const float* params() const;
  float* grads();
  void init_parameters(uint64_t seed);
  void zero_grads();
  // Explicit copies between the host and the parameter / gradient arenas
  // (host arrays in the table's layout, total_floats() long).
  std::vector<float> parameters_to_host() const;
  std::vector<float> gradients_to_host() const;
  void load_parameters(const float* host);

  // --- Pipeline interface: chunk c of this stage, activation slot k. -------
  // A slot holds one micro-batch of any of the stage's chunks (the union of
  // their boundary buffers, the largest chunk's saved tables) from its
  // forward to its backward; the caller assigns them (parallel/pipeline.h).
  int chunks() const { return static_cast<int>(plan().chunks.size()); }
  int slots() const { return static_cast<int>(slots_.size()); }
  // Forward of one micro-batch through chunk c into slot k. A chunk with the
  // embedding reads tokens [B,T]; any other reads input(c, k). A chunk with
  // the head reads targets [B,T], adds the sum of the B*T per-token losses
  // to the loss step scalar when count_loss, and, when training, computes the
  // head's backward (gradients scaled by dloss). tokens and targets are host
  // arrays (copied to the device here; unread by chunks that do not need them).
  void forward(int c, int k, const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float dloss,
               bool train, bool count_loss = true);
  // Backward of chunk c, slot k, from the head's gradient or grad_in(c, k);
  // leaves d(input) in grad_out(c, k) (a chunk without the embedding).
  void backward(int c, int k, int64_t B, int64_t T);
  // The message buffers, each [Nt, C] (activation_floats), device memory:
  // what a pipeline receives into (input, grad_in) and sends from (output, grad_out).
  float* input(int c, int k);
  const float* output(int c, int k) const;
  float* grad_in(int c, int k);
  const float* grad_out(int c, int k) const;
  int64_t activation_floats(int64_t B, int64_t T) const { return rows(B * T) * spec_.config().hidden; }
  // Device f64 scalars of a step (memory_plan.h's StepScalars): the loss
  // sum forward() accumulates at StepScalars::loss; the engine uses the rest.
  double* step_scalars() const { return step_scalars_; }
  int64_t step_scalar_count() const { return step_scalar_count_; }

  // --- One stage holding the whole model (slot 0). ---------------------------
  // Forward, loss, backward; gradients accumulate (+=) scaled by dloss (the
  // caller passes 1 / tokens in the global batch, so the sum over
  // micro-batches and ranks is the gradient of the mean loss). tokens,
  // targets: host arrays [B,T], the whole micro-batch on every
  // tensor-parallel rank. Returns the sum of the B*T per-token losses (one
  // copy from the device).
  double forward_backward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float dloss);
  // Forward and loss only (evaluation). Returns the sum of per-token losses.
  double forward_loss(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T);
  // tp = 1 only. Logits [B,T,Vp] of every position (no loss), copied to the host.
  std::vector<float> logits(const int32_t* tokens, int64_t B, int64_t T);
  // tp = 1 only. For the last position of one sequence tokens[T] (host):
  // its logits (temperature 0) or its softmax probabilities at `temperature`
  // over the first V entries, copied to host_out[V] (generation).
  void next_token_scores(const int32_t* tokens, int64_t T, int64_t V, float temperature, float* host_out);

  MemoryReport memory() const;  // bytes held by each buffer class

 private:
  // A block's views (BlockWeights, BlockActs) and the tables binding them to
  // ModelSpec's names are in model/block_tensors.h.
  // One micro-batch's buffers (null where no chunk of the stage has a use);
  // blocks: the largest chunk's layers, of which chunk c uses the first.
  struct Slot {  // device memory
    int32_t *tokens = nullptr, *targets = nullptr;
    float *input = nullptr, *losses = nullptr, *dx_head = nullptr, *grad_in = nullptr, *grad_out = nullptr;
    std::vector<BlockActs> blocks;  // the chunk's layers, in order
  };
  // A linear layer's bf16 operands rounded from fp32 (ops.h LinearForwardBf16Fn):
  // x [N, at most C] and dy [N, O].
  struct GemmCast {
    uint16_t* x = nullptr;
    uint16_t* dy = nullptr;
  };
  // The softmax statistics of the vocab-parallel loss, [N] each, packed at
  // the micro-batch's N in ce_stats so that one all-reduce sums the sums and
  // the target logits.
  struct CeStats {
    float* rowmax;
    float* sums;
    float* target_logit;
  };
  // The workspace (ModelSpec::workspace, whose comments give each buffer's
  // uses), by name; null where the plan has none.
  struct Workspace {
    float *lnf, *lnf_mean, *lnf_rstd, *logits, *ce_stats, *dres, *dwide, *dgate, *dnarrow, *lnf_shard, *full;
    GemmCast cast, cast_head;  // bf16 GEMMs: the block linears' and the head's rounded operands
    CeStats ce(int64_t N) const { return {ce_stats, ce_stats + N, ce_stats + 2 * N}; }
  };
  // Where the embedding's and the head's tensors sit in their units (-1:
  // not on this stage, or not in the model).
  struct IoOffsets {
    int64_t wte = -1;      // in the wte unit
    int64_t wpe = -1;      // in the io unit (GPT-2)
    int64_t lnf_g = -1;    // in the io unit
    int64_t lnf_b = -1;    // in the io unit (LayerNorm)
    int64_t lm_head = -1;  // in the lm_head unit (untied)
  };
  struct Weights {  // of the wte, io and lm_head units (null where this stage or the model has none)
    float *wte, *wpe, *lnf_g, *lnf_b;
    float* head;  // the LM head's matrix: lm_head when untied, else wte
    const uint16_t* head_bf16 = nullptr;  // its bf16 copy (bf16 GEMMs)
  };
  // Binds every view into the rank's activation and workspace arenas, before
  // step 1, by the steps below in this order (each commented in gpt.cpp).
  void init_buffers(int slots);
  void derive_local_sizes();
  void bind_recompute_working_set(const DeviceArena& acts);
  void bind_slots(const DeviceArena& acts, int slots);
  void bind_workspace(const DeviceArena& work);
  void check_attention_buffers(const BlockActs& a) const;
  void bind_block_weight_offsets();
  void bind_wte_io_offsets();
  // The head's logits of rows [0, N) of the LN_f input x into ws_.logits.
  void head_logits(const float* x, int64_t N);

  // Embedding (if the chunk has it) and the chunk's blocks, into slot (c, k).
  void forward_body(int c, int k, const int32_t* tokens, int64_t B, int64_t T);
  BlockWeights block_weights(const float* base, int64_t layer) const;
  Weights wte_io(const float* wte_base, const float* io_base, const float* head_base) const;
  Weights acquire_wte_io(Pass pass);
  Weights wte_io_grads();  // the same views into the units' gradients
  void release_wte_io(Pass pass);
  // sp_gather of a stored token shard into ws.full (or the tensor itself without sp).
  const float* gathered(const float* x_tokens, int64_t N);
  // A linear layer's input: fp32 (rounded to bf16 into the cast workspace
  // under bf16 GEMMs) or already bf16 (a tensor kept in bf16).
  struct LinearInput {
    const float* f32 = nullptr;
    const uint16_t* bf16 = nullptr;
  };
  // A stored norm output (fp32, or bf16 under bf16 GEMMs) as the column-
  // parallel linear after it reads it: sp_gathered over all N tokens into
  // ws.full (fp32) or the front of ws.cast (bf16) under sp.
  LinearInput norm_output(const float* f32, const uint16_t* bf16, int64_t N);
  // The MLP's activation, the down projection's input: GELU's or SwiGLU's output.
  LinearInput mlp_activation(const BlockActs& a) const {
    return gated_ ? LinearInput{a.fch_swiglu, a.fch_swiglu_bf16} : LinearInput{a.fch_gelu, a.fch_gelu_bf16};
  }
  // Under bf16 GEMMs, a tensor kept in bf16 (non-null bf16) that a kernel
  // writes in fp32 (a linear layer's output) goes to a workspace first
  // (ws.dwide for qkv, fch and the gate; ws.dnarrow for the flash attention
  // output): where to write it, and then its rounding into bf16.
  float* staged(float* f32, const uint16_t* bf16, float* workspace) const { return bf16 == nullptr ? f32 : workspace; }
  void keep_bf16(uint16_t* bf16, const float* staged, int64_t n);
  // A tensor-parallel partial sum over all N tokens (row-parallel linear,
  // vocab-parallel embedding) is computed into partial_sum_buffer(out) and
  // then reduced into out: all-reduced in place, or under sp reduce-scattered
  // from ws.full into this rank's token shard.
  float* partial_sum_buffer(float* out);
  void reduce_partial_sum(float* out, int64_t N);
  void embed_forward(const Weights& w, Slot& s, int64_t B, int64_t T);
  void embed_backward(const Weights& g, const Slot& s, const float* dres, int64_t B, int64_t T);
  // The block's norm over `rows` rows of C: LayerNorm (GPT-2: mean, bias) or
  // RMSNorm (Llama), written to out_bf16 when non-null (a norm output kept in
  // bf16), else to out.
  void norm_forward(float* out, uint16_t* out_bf16, float* mean, float* rstd, const float* x, const float* g,
                    const float* b, int64_t rows);
  void norm_backward(float* dx, float* dg, float* db, const float* dout, const float* x, const float* g,
                     const float* mean, const float* rstd, int64_t rows);
  void block_forward(const BlockActs& a, const BlockWeights& w, const float* x, int64_t B, int64_t T);
  // dres holds d(out of the block) on entry and d(its input) on exit.
  void block_backward(const BlockActs& a, const BlockWeights& w, const BlockWeights& g, const float* x, float* dres,
                      int64_t B, int64_t T);
  // LN_f + logits + loss; with backward also the head's backward into dx_head.
  // count_loss: add the per-token losses to the loss step scalar.
  void head_forward(const Weights& w, const float* x, Slot& s, int64_t B, int64_t T, float dloss, bool backward,
                    bool count_loss);
  // A linear layer (ops.h) with fp32 or bf16 GEMM inputs: Wb is W's bf16
  // copy under bf16 GEMMs, else null. Under bf16 GEMMs an fp32 x (at most C
  // wide) is rounded into cast.x and dy into cast.dy.
  void linear_fwd(float* y, LinearInput x, const float* W, const uint16_t* Wb, const float* b, int64_t N, int64_t I,
                  int64_t O, const GemmCast& cast);
  void linear_bwd(float* dx, float* dW, float* db, const float* dy, LinearInput x, const float* W, const uint16_t* Wb,
                  int64_t N, int64_t I, int64_t O, bool accumulate_dx, const GemmCast& cast);
  // Whether the GELU MLP of this block runs as the backend's fused ops
  // (linear_gelu_forward_bf16, linear_backward_gelu_bf16): bf16 GEMMs and
  // activations on a backend that has them; else the linear and GELU ops.
  bool fused_gelu(const BlockActs& a, const BlockWeights& w) const;
  // x as the bf16 linear ops take it: x.bf16, or x.f32 rounded into cast.
  const uint16_t* bf16_input(LinearInput x, int64_t N, int64_t I, uint16_t* cast);
  const float* block_input(const Slot& s, size_t i) const { return i == 0 ? s.input : s.blocks[i - 1].out; }
  // The output of a chunk of `layers` layers run in slot s.
  const float* chunk_output(const Slot& s, int64_t layers) const {
    return layers == 0 ? s.input : s.blocks[static_cast<size_t>(layers - 1)].out;
  }
  int64_t chunk_layers(int c) const { return plan().chunks[static_cast<size_t>(c)].num_layers; }
  // Rows of residual-stream tensors on this rank: N, or N / p under sequence parallelism.
  int64_t rows(int64_t N) const { return opts_.sequence_parallel ? N / tp_.size() : N; }
  int64_t first_token(int64_t N) const { return opts_.sequence_parallel ? tp_.rank() * (N / tp_.size()) : 0; }
  Slot& slot(int, int k) { return slots_[static_cast<size_t>(k)]; }
  const Slot& slot(int, int k) const { return slots_[static_cast<size_t>(k)]; }

  ModelSpec spec_;
  const Backend& be_;
  int64_t max_batch_;
  std::unique_ptr<ParamTable> own_table_;
  std::unique_ptr<RankMemory> own_rank_memory_;
  std::unique_ptr<LocalParamMemory> own_memory_;
  std::unique_ptr<SingleRankTensorParallel> own_tp_;
  const ParamTable& table_;
  ParamMemory& mem_;
  TensorParallel& tp_;
  RankMemory& rank_memory_;
  ActivationOptions opts_;
  // Local widths (heads Hl, key/value heads KVl of hs each, qkv width Ql);
  // this rank's vocabulary columns [v0, v0 + Vl).
  int64_t Cl_, Hl_, KVl_, hs_, Ql_, Fl_, Vl_, v0_, valid_vocab_;
  bool llama_ = false, gated_ = false;  // the architecture: RMSNorm + rotary embeddings; the SwiGLU MLP
  double* step_scalars_ = nullptr;                // [step_scalar_count_] f64, device
  int64_t step_scalar_count_ = 0;
  std::vector<Slot> slots_;                        // [slot]
  BlockActs recompute_acts_{};                     // full recompute: the working set, its `out` a scratch
  std::vector<BlockWeightOffsets> block_offsets_;  // per global layer (this stage's only)
  IoOffsets io_offsets_;
  Workspace ws_{};
};

}  // namespace tera
