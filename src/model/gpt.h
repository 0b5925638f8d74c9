// A GPT (GPT-2 or Llama blocks) with hand-written forward and backward over
// preallocated buffers (DESIGN.md invariant 4), on one pipeline stage of one
// rank of a tensor-parallel group (tp = 1 is the plain model). Every buffer
// comes from the rank's memory plan (partition/memory_plan.h, from ModelSpec's
// tables) and is carved out of one arena per class, allocated before step 1.
// Parameters and gradients are reached unit by unit through a ParamMemory
// (model/param_memory.h), so data parallelism decides where they live.
// Every tensor is device memory of the backend (model/rank_memory.h): Gpt
// never reads or writes it from the host. Token ids come in from the host and
// are copied to the device; the loss sum stays on the device (the step
// scalars' StepScalars::loss) until the caller copies it, once per step.
//
// Where each part lives: this file and gpt.cpp, the stage driver (slots,
// units, the pipeline interface); gpt_bind.cpp, binding the views from the
// memory plan; gpt_local.cpp, the one-process model (resident parameters,
// evaluation, logits for generation and tests); the math itself in
// model/gpt_layers.h (embedding, head, the layers' pieces) and
// gpt_block.cpp (the block), whose variant is the BlockPlan
// (model/block_plan.h) chosen at construction.
//
// Shape legend: B = micro-batch, T = sequence, N = B*T tokens, C = hidden,
// p = tp degree, Cl = C/p, Hl = H/p heads, Fl = F/p, Vl = padded vocab / p,
// Nt = N/p tokens under sequence parallelism (else N). Per block (pre-norm:
// LayerNorm on GPT-2, RMSNorm on Llama):
//   ln1  = norm(x)                             [Nt, C]
//   qkv  = sp_gather(ln1) @ Wqkv_l^T + b_l     [N, Ql]    column-parallel (tp_copy); Llama: rotated
//   atty = attention(qkv) over local heads     [N, Cl]
//   res1 = x + sp_scatter|tp_reduce(atty @ Wo_l^T) + b      row-parallel   [Nt, C]
//   ln2  = norm(res1)                          [Nt, C]
//   fch  = sp_gather(ln2) @ Wfc_l^T + b_l      [N, Fl]    column-parallel (Llama: and the gate)
//   out  = res1 + sp_scatter|tp_reduce(act(fch) @ Wfp_l^T) + b              [Nt, C]
//          act: GELU (GPT-2) or silu(gate) * fch (Llama's SwiGLU)
// Embedding: vocab-parallel lookup, summed over the group (tp_reduce or
// sp_scatter), plus GPT-2's positions. Head: logits = sp_gather(norm_f(x))
// @ wte_l^T (or the untied lm_head) [N, Vl]; the loss reduces the row max and
// sums over the group, so the full logits never exist on one rank. The head's
// backward runs eagerly inside the forward (the logits never outlive it);
// only dx_head is kept per micro-batch. With full recomputation each block
// keeps only its output (the next block's input) and its forward is rerun
// from its input just before its backward, into one shared block-sized
// working set (Recompute::full in ModelSpec).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "model/block_plan.h"
#include "model/block_tensors.h"
#include "model/gpt_layers.h"
#include "model/model_spec.h"
#include "model/param_memory.h"
#include "model/context_parallel.h"
#include "model/ring_attention.h"
#include "model/rank_memory.h"
#include "partition/memory_plan.h"
#include "partition/memory_report.h"
#include "partition/param_table.h"
#include "partition/rank_plan.h"
#include "partition/stage_plan.h"
#include "model/tensor_parallel.h"

namespace tera {

class Gpt {
 public:
  // One process, the whole model: owns a ParamTable, its memory plan (every
  // class but the optimizer's, which a model alone does not hold) and
  // resident LocalParamMemory. Buffers for micro-batches of up to
  // `max_batch` sequences of up to seq_len tokens.
  Gpt(const ModelSpec& spec, const Backend& backend, int64_t max_batch);
  // One pipeline stage of one tensor-parallel rank, bound from its rank plan
  // (partition/rank_plan.h): micro-batches of the layout's micro_batch
  // sequences, the plan's activation options and slots. Parameters and
  // gradients live in `memory`, laid out by `table` (the plan's
  // param_table); activations and workspace are the activations and
  // workspace classes of `rank_memory`, allocated from the plan's
  // memory_plan. `tp` is this rank's tensor-parallel group and `cp` its
  // context-parallel one (plan.layout.cp ranks: each sequence's tokens are
  // split over them, partition/context_split.h, and the attention is a ring,
  // model/ring_attention.h). All outlive the model.
  Gpt(const ModelSpec& spec, const Backend& backend, const ParamTable& table, ParamMemory& memory, TensorParallel& tp,
      ContextParallel& cp, const RankPlan& plan, RankMemory& rank_memory);
  Gpt(const Gpt&) = delete;
  Gpt& operator=(const Gpt&) = delete;
  ~Gpt();

  // The memory plan of the one-process model (what the first constructor allocates).
  static MemoryPlan single_process_plan(const ModelSpec& spec, const ParamTable& table, int64_t max_batch);

  const ModelSpec& spec() const { return spec_; }
  const ParamTable& table() const { return table_; }
  int64_t max_batch() const { return max_batch_; }
  const ActivationOptions& activation_options() const { return opts_; }
  const StagePlan& plan() const { return table_.plan(); }
  const BlockPlan& block_plan() const { return layers_->plan(); }

  // --- Resident memory only (the one-process constructor; gpt_local.cpp) ----
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
  // The tokens of each sequence this rank holds: seq_len, or seq_len / cp
  // under context parallelism (the T of forward and backward).
  int64_t local_seq_len() const { return split_.local(); }
  // Forward of one micro-batch through chunk c into slot k. A chunk with the
  // embedding reads tokens [B,T]; any other reads input(c, k). A chunk with
  // the head reads targets [B,T], adds the sum of the B*T per-token losses
  // to the loss step scalar when count_loss, and, when training, computes the
  // head's backward (gradients scaled by dloss). tokens and targets are host
  // arrays (copied to the device here; unread by chunks that do not need them).
  void forward(int c, int k, const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T, float dloss,
               bool train, bool count_loss = true);
  // Backward of chunk c, slot k, from the head's gradient or grad_in(c, k);
  // leaves d(input) in grad_out(c, k) (a chunk without the embedding). With
  // the split backward (ActivationOptions::defer_weight_grads, zb-h1) this
  // is B: the blocks' weight gradients wait in the slot for weight_grad.
  void backward(int c, int k, int64_t B, int64_t T);
  // W of the split backward: the chunk's blocks' parameter gradients of the
  // micro-batch in slot k, after its backward (whose slot it still reads).
  // Each block's unit is taken and reported done here (ParamMemory's
  // grads / grads_done), not in backward; the embedding's and the head's
  // gradients are whole in backward.
  void weight_grad(int c, int k, int64_t B, int64_t T);
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

  // --- One stage holding the whole model (slot 0; gpt_local.cpp). ------------
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
  // One micro-batch's buffers (null where no chunk of the stage has a use);
  // blocks: the largest chunk's layers, of which chunk c uses the first.
  struct Slot {  // device memory
    int32_t *tokens = nullptr, *targets = nullptr;
    float *input = nullptr, *losses = nullptr, *dx_head = nullptr, *grad_in = nullptr, *grad_out = nullptr;
    std::vector<BlockActs> blocks;  // the chunk's layers, in order
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

  // --- Binding (gpt_bind.cpp): every view into the rank's activation and
  // workspace arenas and the parameter units, before step 1, in this order.
  void init_buffers(const RankPlan& plan);
  void bind_recompute_working_set(const DeviceArena& acts);
  void bind_slots(const DeviceArena& acts, int slots);
  void bind_workspace(const DeviceArena& work);
  void bind_block_weight_offsets();
  void bind_io_offsets();
  BlockWeights block_weights(const float* base, int64_t layer) const;
  IoWeights io_weights(const float* wte_base, const float* io_base, const float* head_base) const;

  // --- The stage driver (gpt.cpp).
  // Embedding (if the chunk has it) and the chunk's blocks, into slot (c, k).
  void forward_body(int c, int k, const int32_t* tokens, int64_t B, int64_t T);
  IoWeights acquire_io(Pass pass);
  IoWeights io_grads();  // the same views into the units' gradients
  void release_io(Pass pass);
  // The head's logits of rows [0, N) of x into the workspace's logits (gpt_local.cpp).
  void head_logits(const float* x, int64_t N);
  const float* block_input(const Slot& s, size_t i) const { return i == 0 ? s.input : s.blocks[i - 1].out.f32(); }
  // The output of a chunk of `layers` layers run in slot s.
  const float* chunk_output(const Slot& s, int64_t layers) const {
    return layers == 0 ? s.input : s.blocks[static_cast<size_t>(layers - 1)].out.f32();
  }
  int64_t chunk_layers(int c) const { return plan().chunks[static_cast<size_t>(c)].num_layers; }
  // Rows of residual-stream tensors on this rank: N, or N / p under sequence parallelism.
  int64_t rows(int64_t N) const { return opts_.sequence_parallel ? N / tp_.size() : N; }
  Slot& slot(int, int k) { return slots_[static_cast<size_t>(k)]; }
  const Slot& slot(int, int k) const { return slots_[static_cast<size_t>(k)]; }

  ModelSpec spec_;
  const Backend& be_;
  int64_t max_batch_;
  ContextSplit split_;                             // this rank's tokens of each sequence (the whole one at cp = 1)
  std::unique_ptr<ParamTable> own_table_;
  std::unique_ptr<RankMemory> own_rank_memory_;
  std::unique_ptr<LocalParamMemory> own_memory_;
  std::unique_ptr<SingleRankTensorParallel> own_tp_;
  const ParamTable& table_;
  ParamMemory& mem_;
  TensorParallel& tp_;
  RankMemory& rank_memory_;
  ActivationOptions opts_;
  BlockPlan block_plan_;                           // chosen once, before binding
  ContextParallel* cp_ = nullptr;                  // the context-parallel group (a pipeline stage's model)
  std::unique_ptr<RingAttention> ring_;            // its attention when cp > 1 (the block plan's ring_*)
  std::unique_ptr<GptLayers> layers_;              // the math, over the bound workspace
  double* step_scalars_ = nullptr;                 // [step_scalar_count_] f64, device
  int64_t step_scalar_count_ = 0;
  std::vector<Slot> slots_;                        // [slot]
  BlockActs recompute_acts_{};                     // full recompute: the working set, its `out` a scratch
  std::vector<BlockWeightOffsets> block_offsets_;  // per global layer (this stage's only)
  IoOffsets io_offsets_;
};

}  // namespace tera
