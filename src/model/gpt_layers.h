// GptLayers: the math of one tensor-parallel rank of the model (embedding,
// block, head; shape legend and block equations in model/gpt.h), over views
// it is handed: weights and gradients of one unit, one block's activations,
// the named workspace. It knows nothing of slots, units or pipeline stages
// (model/gpt.h drives it). Its variant was chosen once, in its BlockPlan
// (model/block_plan.h); every op is a Backend call (kernels/ops.h has each
// op's accumulation contract) and every collective one of the conjugate
// pairs of model/tensor_parallel.h.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/backend.h"
#include "kernels/device_arena.h"
#include "model/block_plan.h"
#include "model/block_tensors.h"
#include "model/model_spec.h"
#include "model/ring_attention.h"
#include "model/tensor_parallel.h"

namespace tera {

// This rank's share of the model's widths (p = tp degree).
struct LocalDims {
  int64_t C = 0;    // hidden (the residual stream is replicated over the group)
  int64_t Cl = 0;   // C / p: the attention output's width
  int64_t Hl = 0;   // query heads / p
  int64_t KVl = 0;  // key/value heads (one, replicated, when p > kv_heads)
  int64_t hs = 0;   // head size
  int64_t Ql = 0;   // the QKV projection's width, (Hl + 2 KVl) hs
  int64_t Fl = 0;   // the MLP's width / p
  int64_t Vl = 0;   // padded vocabulary / p: this rank's columns [v0, v0 + Vl)
  int64_t v0 = 0;
  int64_t valid_vocab = 0;  // of the Vl columns, the real ones (the rest is padding)
};
LocalDims local_dims(const ModelSpec& spec, int64_t tp, int64_t tp_rank);

// A linear layer's bf16 operands rounded from fp32 (ops.h LinearForwardBf16Fn):
// x [N, at most C] and dy [N, O].
struct GemmCast {
  uint16_t* x = nullptr;
  uint16_t* dy = nullptr;
};

// The softmax statistics of the vocab-parallel loss, [N] each, packed at the
// micro-batch's N in ce_stats: the sums follow the row max and the target
// logits follow the sums, so one all-reduce sums both.
struct CeStats {
  float* rowmax;
  float* sums;
  float* target_logit;
};

// The workspace (ModelSpec::workspace, whose comments give each buffer's
// uses), by name: scratch every micro-batch shares. Device memory; null where
// the plan has none (head_only buffers off the head's stage, the sequence-
// parallel ones without sp, the bf16 casts under fp32 GEMMs).
struct Workspace {
  float* lnf = nullptr;        // [N, C]   the final norm's output, gathered: the LM head's input
  float* lnf_mean = nullptr;   // [Nt]     (LayerNorm only)
  float* lnf_rstd = nullptr;   // [Nt]
  float* lnf_shard = nullptr;  // [Nt, C]  sp: the final norm's output on this rank's tokens
  float* logits = nullptr;     // [N, Vl]  then d(logits)
  float* ce_stats = nullptr;   // [3, N]   see CeStats
  float* dres = nullptr;       // [Nt, C]  the residual stream's gradient
  float* dwide = nullptr;      // [N, max(Fl, Ql)]  d(fch), d(qkv); bf16 GEMMs: qkv, fch staged in fp32
  float* dgate = nullptr;      // [N, Fl]  SwiGLU: d(gate); bf16 GEMMs: the gate staged in fp32
  float* dnarrow = nullptr;    // [N, C]   d(ln2), d(atty), d(ln1), d(lnf); flash bf16: atty staged in fp32
  float* full = nullptr;       // [N, C]   sp: gathered norm outputs, partial sums, full-token gradients
  GemmCast cast;               // bf16 GEMMs: the block's linear layers (dy up to the widest)
  GemmCast cast_head;          // bf16 GEMMs: the LM head (dy [N, Vl])
  float* ring_qkv_f32 = nullptr;  // [N, Ql]  cp with bf16 GEMMs: the kept qkv widened for the ring's backward
  float* ring_out_f32 = nullptr;  // [N, Cl]  the same for atty
  CeStats ce(int64_t N) const { return {ce_stats, ce_stats + N, ce_stats + 2 * N}; }
};
// The named views of a workspace arena laid out from ModelSpec::workspace.
Workspace bind_workspace(const DeviceArena& arena);

// The embedding's and the head's tensors (units wte, io and lm_head), or
// their gradients; null where this stage or the model has none.
struct IoWeights {
  float* wte = nullptr;    // [Vl, C]  vocab-parallel token embedding
  float* wpe = nullptr;    // [T, C]   GPT-2's learned positions
  float* lnf_g = nullptr;  // [C]      the final norm
  float* lnf_b = nullptr;  // [C]
  float* head = nullptr;   // [Vl, C]  the LM head's matrix: lm_head when untied, else wte
  const uint16_t* head_bf16 = nullptr;  // its bf16 copy (bf16 GEMMs)
};

class GptLayers {
 public:
  // `loss_sum`: the device f64 the head adds each micro-batch's losses to.
  // `ring`: the context-parallel attention, exactly when the plan's
  // attention is ring_* (null otherwise); it also gives the local tokens'
  // positions (GPT-2's learned ones, the rotary angle).
  GptLayers(const ModelConfig& cfg, const Backend& be, TensorParallel& tp, const BlockPlan& plan,
            const LocalDims& dims, const Workspace& ws, double* loss_sum, RingAttention* ring = nullptr);

  const BlockPlan& plan() const { return plan_; }
  const LocalDims& dims() const { return d_; }
  const Workspace& workspace() const { return ws_; }
  // Rows of residual-stream tensors on this rank: N, or N / p under sequence parallelism.
  int64_t rows(int64_t N) const { return sp_ ? N / tp_.size() : N; }

  // x [Nt, C] = the vocab-parallel lookup of tokens [B, T], summed over the
  // group (+ GPT-2's positions).
  void embed_forward(const IoWeights& w, float* x, const int32_t* tokens, int64_t B, int64_t T);
  void embed_backward(const IoWeights& g, const float* dres, const int32_t* tokens, int64_t B, int64_t T);
  // One block from its input x [Nt, C] into a (a.out: its output).
  void block_forward(const BlockActs& a, const BlockWeights& w, const float* x, int64_t B, int64_t T);
  // dres holds d(out of the block) on entry and d(its input) on exit. The
  // parameter gradients are added to g, or under the plan's split backward
  // (zb-h1's B) kept in a's dw_ tensors for block_weight_grads (g unread).
  void block_backward(const BlockActs& a, const BlockWeights& w, const BlockWeights& g, const float* x, float* dres,
                      int64_t B, int64_t T);
  // The split backward's W, after block_backward of the same micro-batch:
  // adds the block's parameter gradients (from a's saved inputs and dw_
  // tensors) to g.
  void block_weight_grads(const BlockActs& a, const BlockWeights& g, int64_t B, int64_t T);
  // LN_f, the logits and the per-token losses [N] of x [Nt, C]; their sum is
  // added to loss_sum when count_loss. dloss > 0 leaves d(logits) (the loss
  // scaled by dloss) in the workspace for head_backward.
  void head_loss(const IoWeights& w, const float* x, const int32_t* targets, float* losses, int64_t N, float dloss,
                 bool count_loss);
  // The head's backward after head_loss: gradients into g, d(x) into dx [Nt, C].
  void head_backward(const IoWeights& w, const IoWeights& g, const float* x, float* dx, int64_t N);
  // The logits of rows [0, N) of x (no loss) into workspace().logits.
  void head_logits(const IoWeights& w, const float* x, int64_t N);

 private:
  void attention_forward(const BlockActs& a, int64_t B, int64_t T);
  void attention_backward(const BlockActs& a, int64_t B, int64_t T);
  bool ring() const { return plan_.attention == AttentionPath::ring_f32 || plan_.attention == AttentionPath::ring_bf16; }
  // The positions of the local tokens for the rotary kernels: null (row n
  // at n mod T) unless the sequence is split over a ring.
  const int32_t* rope_positions() const { return ring() ? ring_->positions() : nullptr; }
  // GPT-2's learned positions added to (or their gradient taken from) this
  // rank's rows of the N = B*T local tokens.
  void positions_forward(float* x, const float* wpe, int64_t N, int64_t T);
  void positions_backward(float* dwpe, const float* dres, int64_t N, int64_t T);
  // Under a ring, this rank's rows of the local tokens as runs of
  // consecutive positions: rows [row, row + length) at [position, ...).
  struct PositionRun {
    int64_t row, position, length;
  };
  std::vector<PositionRun> ring_rows(int64_t N, int64_t T) const;
  void mlp_forward(const BlockActs& a, const BlockWeights& w, ConstTypedView ln2, int64_t N);
  // d(out) over all N tokens -> d(ln2) (partial over the group) in ws.dnarrow.
  void mlp_backward(const BlockActs& a, const BlockWeights& w, const BlockWeights& g, const float* dout, int64_t N);
  // The MLP's activation, the down projection's input: GELU's or SwiGLU's output.
  const TypedView& mlp_activation(const BlockActs& a) const {
    return plan_.mlp == MlpPath::swiglu ? a.fch_swiglu : a.fch_gelu;
  }

  // Where a norm's parameter gradients go in block_backward: dg, db, or
  // under the split backward the kept dw_ tensors, zeroed (the norm adds).
  struct NormGrads {
    float* g;
    float* b;
  };
  NormGrads norm_grads(float* dg, float* db, const TypedView& kept_g, const TypedView& kept_b);
  // dg (db) += the kept norm gradients (W).
  void add_kept(float* dg, float* db, const TypedView& kept_g, const TypedView& kept_b);
  // A linear layer's output gradient dy [n] copied into the block's dw_ tensor (B).
  void keep_dy(const TypedView& kept, const float* dy, int64_t n);

  // The block's norm (plan().norm) over `rows` rows of C, written in out's dtype.
  void norm_forward(TypedView out, float* mean, float* rstd, const float* x, const float* g, const float* b,
                    int64_t rows);
  void norm_backward(float* dx, float* dg, float* db, const float* dout, const float* x, const float* g,
                     const float* mean, const float* rstd, int64_t rows);
  // A linear layer (ops.h) with the plan's GEMM inputs: Wb is W's bf16 copy
  // under bf16 GEMMs, else null; an fp32 x is rounded into cast.x then, and
  // dy into cast.dy. dx == nullptr skips dx (W and Wb unread), dW == nullptr
  // the weight gradients (x unread: it may be empty).
  void linear_fwd(float* y, ConstTypedView x, const float* W, const uint16_t* Wb, const float* b, int64_t N,
                  int64_t I, int64_t O, const GemmCast& cast);
  void linear_bwd(float* dx, float* dW, float* db, const float* dy, ConstTypedView x, const float* W,
                  const uint16_t* Wb, int64_t N, int64_t I, int64_t O, bool accumulate_dx, const GemmCast& cast);
  // x as the bf16 linear ops take it: x itself when bf16, else rounded into cast.
  const uint16_t* bf16_input(ConstTypedView x, int64_t N, int64_t I, uint16_t* cast);
  // A linear layer's fp32 output for a tensor kept in `kept`'s dtype: kept
  // itself when fp32, else `staging`, which keep() then rounds into kept.
  float* fp32_output(const TypedView& kept, float* staging) const {
    return kept.dtype() == DType::f32 ? kept.f32() : staging;
  }
  void keep(const TypedView& kept, const float* staged, int64_t n);

  // sp_gather of a stored fp32 token shard into ws.full (or the tensor itself without sp).
  const float* gathered(const float* x_tokens, int64_t N);
  // A stored norm output as the column-parallel linear after it reads it:
  // sp_gathered over all N tokens into ws.full (fp32) or cast.x (bf16) under sp.
  ConstTypedView norm_output(const TypedView& out, int64_t N);
  // A tensor-parallel partial sum over all N tokens (row-parallel linear,
  // vocab-parallel embedding) is computed into partial_sum_buffer(out) and
  // then reduced into out: all-reduced in place, or under sp reduce-scattered
  // from ws.full into this rank's token shard.
  float* partial_sum_buffer(float* out) const { return sp_ ? ws_.full : out; }
  void reduce_partial_sum(float* out, int64_t N);
  // The gradient of a row-parallel output over all N tokens: d itself, or
  // all-gathered from the token shards (sp_scatter's backward).
  const float* full_tokens(const float* d, int64_t N);
  // The gradient w.r.t. a norm output that fed a column-parallel GEMM (in
  // ws.dnarrow, partial over the group), summed (tp_copy) or summed and
  // sharded (sp_gather).
  const float* reduce_input_grad(int64_t N);
  int64_t first_token(int64_t N) const { return sp_ ? tp_.rank() * (N / tp_.size()) : 0; }

  const Backend& be_;
  TensorParallel& tp_;
  BlockPlan plan_;
  LocalDims d_;
  Workspace ws_;
  double* loss_sum_;
  RingAttention* ring_;
  bool sp_;
  float eps_;  // RMSNorm's (LayerNorm's is the kernel's own 1e-5)
  RopeParams rope_;
};

}  // namespace tera
